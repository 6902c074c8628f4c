// Synthetic scalar-wave problems and their timed, verified runs (shared by scalar, bench, demo).
#include "scalar_runner.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numbers>
#include <ostream>
#include <span>

#include "sciproxy/core/error.hpp"
#include "sciproxy/core/verify.hpp"

namespace sciproxy::app {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMaxProblemBytes = 64 * kGiB;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::int64_t padded_cells(const ScalarSpec& spec) {
  std::int64_t n = 1;
  for (int d = 0; d < spec.ndim; ++d) n *= spec.shape[d] + 2 * spec.pml_width + spec.accuracy;
  return n;
}

}  // namespace

std::int64_t ScalarSpec::cells() const {
  std::int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

std::string ScalarSpec::label() const {
  return fmt::format("{}-D {} cells ({} m), {} shot{} x {} receivers, nt {} (dt {} s), accuracy {}",
                     ndim, fmt::join(shape, " x "), spacing, nshots, nshots == 1 ? "" : "s",
                     nreceivers, nt, dt, accuracy);
}

std::string ScalarSpec::kernel() const {
  if (born) return gradient ? "scalar_born_gradient" : "scalar_born";
  return gradient ? "scalar_gradient" : "scalar";
}

std::array<std::int64_t, 3> ScalarSpec::box_begin() const {
  std::array<std::int64_t, 3> b = {0, 0, 0};
  for (int d = 0; d < ndim && d < static_cast<int>(shape.size()); ++d)
    b[d] = shape[d] / 2 - shape[d] / 20;
  return b;
}

std::array<std::int64_t, 3> ScalarSpec::box_end() const {
  std::array<std::int64_t, 3> e = {1, 1, 1};
  for (int d = 0; d < ndim && d < static_cast<int>(shape.size()); ++d)
    e[d] = shape[d] / 2 + std::max<std::int64_t>(shape[d] / 20, 1);
  return e;
}

std::string ScalarSpec::scatter_label() const {
  const auto b = box_begin(), e = box_end();
  std::vector<std::string> parts;
  for (int d = 0; d < ndim; ++d) parts.push_back(fmt::format("[{}, {})", b[d], e[d]));
  return fmt::format("{:+} m/s in cells {}", scatter, fmt::join(parts, " x "));
}

Tolerance scalar_tolerance(Dtype dtype, bool born) {
  Tolerance t;
  t.rel_l2 = dtype == Dtype::float32 ? (born ? 1e-4 : 1e-5) : (born ? 1e-11 : 1e-12);
  return t;
}

Tolerance scalar_state_tolerance(Dtype dtype, bool born) {
  Tolerance t;
  t.rel_l2 = dtype == Dtype::float32 ? (born ? 1e-2 : 1e-4) : (born ? 1e-9 : 1e-11);
  return t;
}

void check_scalar_spec(const ScalarSpec& spec, const std::vector<Device>& devices) {
  if (spec.ndim < 1 || spec.ndim > 3)
    throw UsageError(fmt::format("--ndim: expected 1, 2 or 3, got {}", spec.ndim));
  if (static_cast<int>(spec.shape.size()) != spec.ndim)
    throw UsageError(fmt::format("--shape: expected {} cell counts (one per dimension of --ndim "
                                 "{}), got {}",
                                 spec.ndim, spec.ndim, spec.shape.size()));
  for (std::size_t d = 0; d < spec.shape.size(); ++d)
    if (spec.shape[d] < 1 || spec.shape[d] > 1000000)
      throw UsageError(fmt::format("--shape: expected cell counts in [1, 1000000], got {} for "
                                   "dimension {}",
                                   spec.shape[d], d));
  if (!(spec.spacing > 0) || !std::isfinite(spec.spacing))
    throw UsageError(fmt::format("--spacing: expected a positive grid spacing in metres, got {}",
                                 spec.spacing));
  if (!(spec.dt > 0) || !std::isfinite(spec.dt))
    throw UsageError(fmt::format("--dt: expected a positive time step in seconds, got {}", spec.dt));
  if (spec.nt < 1) throw UsageError(fmt::format("--nt: expected at least 1, got {}", spec.nt));
  if (spec.nshots < 1)
    throw UsageError(fmt::format("--shots: expected at least 1, got {}", spec.nshots));
  if (spec.nreceivers < 0)
    throw UsageError(fmt::format("--receivers: expected 0 or more, got {}", spec.nreceivers));
  if (spec.accuracy != 2 && spec.accuracy != 4 && spec.accuracy != 6 && spec.accuracy != 8)
    throw UsageError(fmt::format("--accuracy: expected 2, 4, 6 or 8, got {}", spec.accuracy));
  if (spec.pml_width < 0 || spec.pml_width > 10000)
    throw UsageError(fmt::format("--pml-width: expected a width in [0, 10000] cells, got {}",
                                 spec.pml_width));
  if (!(spec.freq > 0) || !std::isfinite(spec.freq))
    throw UsageError(fmt::format("--freq: expected a positive frequency in Hz, got {}", spec.freq));
  if (spec.born && (!std::isfinite(spec.scatter) || std::abs(spec.scatter) >= spec.vmin))
    throw UsageError(fmt::format("--scatter: expected a finite velocity perturbation in m/s of "
                                 "magnitude below {} (the slowest layer), got {}",
                                 spec.vmin, spec.scatter));
  const std::int64_t along = spec.shape.back();
  if (spec.nreceivers > along)
    throw UsageError(fmt::format("--receivers: expected at most {} (one per cell along the "
                                 "surface), got {}",
                                 along, spec.nreceivers));

  // Memory before anything is allocated: the state (u, u_prev, psi, zeta per dimension) twice
  // (the backend's and the returned copy), the inputs, the receivers, and for a gradient the
  // stored history (one field per sample) and the adjoint state.
  const double elem = static_cast<double>(dtype_size(spec.dtype));
  // Born: a scattered state beside the background one, background receivers beside the
  // scattered ones, and the scatter beside v.
  const double fields = spec.born ? 2 : 1;
  const double state = fields * static_cast<double>(2 + 2 * spec.ndim) *
                       static_cast<double>(padded_cells(spec)) * static_cast<double>(spec.nshots) *
                       elem;
  const double traces = elem * static_cast<double>(spec.nshots) *
                        static_cast<double>(fields * spec.nreceivers + 1) *
                        static_cast<double>(spec.nt);
  double host = 2 * state + traces * 2 + elem * static_cast<double>(spec.cells()) * 2 * fields;
  if (spec.gradient)
    host += 2 * state + elem * static_cast<double>(spec.nt) * static_cast<double>(padded_cells(spec)) *
                            static_cast<double>(spec.nshots);
  const double physical = physical_memory_bytes();
  const double limit = physical > 0 ? std::min(kMaxProblemBytes, 0.8 * physical) : kMaxProblemBytes;
  if (host > limit)
    throw UsageError(fmt::format(
        "{} ({}, {}) needs about {} of host memory; the limit is {} ({})", spec.label(),
        dtype_name(spec.dtype), spec.kernel(), format_bytes(host),
        format_bytes(limit), limit < kMaxProblemBytes ? "80% of this machine's memory" : "64 GiB"));
  for (const Device& d : devices) {
    if (d.backend != Backend::cuda) continue;
    const auto gpus = cuda_devices();
    if (d.index >= static_cast<int>(gpus.size()) || gpus[d.index].memory_gib <= 0) continue;
    const double gpu_bytes = 0.9 * gpus[d.index].memory_gib * kGiB;
    if (host / 2 > gpu_bytes)
      throw UsageError(fmt::format("{} ({}) needs about {} on {} ({}), which has {:.1f} GiB",
                                   spec.label(), dtype_name(spec.dtype), format_bytes(host / 2),
                                   d.name(), gpus[d.index].name, gpus[d.index].memory_gib));
  }
}

std::string ScalarOutcome::verification_scope() const {
  if (verified_nt == 0) return "not verified";
  return fmt::format("shot{} 0{}, samples 0-{} ({} inner steps)", verified_shots == 1 ? "" : "s",
                     verified_shots == 1 ? "" : fmt::format("-{}", verified_shots - 1),
                     verified_nt - 1, verified_nt * step_ratio);
}

nlohmann::json ScalarOutcome::to_json() const {
  nlohmann::json j = report.to_json();
  j["bench"] = stats.to_json();
  j["step_ratio"] = step_ratio;
  j["inner_dt"] = inner_dt;
  j["storage_bytes"] = storage_bytes;
  j["gpts"] = gpts(stats.median);
  nlohmann::json checks_json = nlohmann::json::object();
  for (const auto& [name, c] : this->checks) checks_json[name] = c.to_json();
  j["verification_scope"] = {{"samples", verified_nt},
                             {"shots", verified_shots},
                             {"inner_steps", verified_nt * step_ratio},
                             {"tolerance_rel_l2",
                              scalar_tolerance(report.work.precision == Precision::fp32
                                                   ? Dtype::float32
                                                   : Dtype::float64,
                                               report.kernel.starts_with("scalar_born"))
                                  .rel_l2},
                             {"checks", checks_json}};
  return j;
}

namespace {

// The problem's arrays; ScalarInput only points into them.
template <class T>
struct Problem {
  wave::Grid grid;
  std::vector<T> v, amplitudes, scatter;
  std::vector<std::int64_t> sources, receivers;
  std::int64_t nshots = 0, nt = 0, nreceivers = 0;
  double dt = 0;

  wave::ScalarInput<T> input() const {
    wave::ScalarInput<T> in;
    in.grid = grid;
    in.v = v;
    in.nmodels = 1;
    in.dt = dt;
    in.nt = nt;
    in.nshots = nshots;
    in.nsources = 1;
    in.nreceivers = nreceivers;
    in.source_amplitudes = amplitudes;
    in.source_locations = sources;
    in.receiver_locations = receivers;
    return in;
  }

  // Born: the scattered field and the background field are both recorded at the receivers.
  wave::ScalarBornInput<T> born_input() const {
    wave::ScalarBornInput<T> in;
    in.background = input();
    in.scatter = scatter;
    in.nbg_receivers = nreceivers;
    in.bg_receiver_locations = receivers;
    return in;
  }
};

// Cell index of item i of n spread evenly over [0, size).
std::int64_t spread(std::int64_t i, std::int64_t n, std::int64_t size) {
  return std::clamp<std::int64_t>((2 * i + 1) * size / (2 * n), 0, size - 1);
}

template <class T>
Problem<T> make_problem(const ScalarSpec& spec, std::int64_t nshots, std::int64_t nt) {
  Problem<T> p;
  p.grid.ndim = spec.ndim;
  for (int d = 0; d < spec.ndim; ++d) {
    p.grid.shape[d] = spec.shape[d];
    p.grid.spacing[d] = spec.spacing;
  }
  p.nshots = nshots;
  p.nt = nt;
  p.dt = spec.dt;
  p.nreceivers = spec.nreceivers;
  const std::int64_t depth = spec.shape[0];
  const std::int64_t per_depth = spec.cells() / depth;
  p.v.resize(static_cast<std::size_t>(spec.cells()));
  for (std::int64_t z = 0; z < depth; ++z) {
    const int layer = static_cast<int>(std::min<std::int64_t>(z * spec.layers / depth, spec.layers - 1));
    const double v = spec.layers > 1 ? spec.vmin + (spec.vmax - spec.vmin) * layer / (spec.layers - 1)
                                     : spec.vmin;
    std::fill_n(p.v.begin() + z * per_depth, per_depth, static_cast<T>(v));
  }
  if (spec.born) {
    // The scatter box, row-major like v.
    p.scatter.assign(p.v.size(), T(0));
    const auto b = spec.box_begin(), e = spec.box_end();
    std::array<std::int64_t, 3> n = {1, 1, 1};
    for (int d = 0; d < spec.ndim; ++d) n[3 - spec.ndim + d] = spec.shape[d];
    std::array<std::int64_t, 3> lo = {0, 0, 0}, hi = {1, 1, 1};
    for (int d = 0; d < spec.ndim; ++d) {
      lo[3 - spec.ndim + d] = b[d];
      hi[3 - spec.ndim + d] = e[d];
    }
    for (std::int64_t i = lo[0]; i < hi[0]; ++i)
      for (std::int64_t j = lo[1]; j < hi[1]; ++j)
        for (std::int64_t k = lo[2]; k < hi[2]; ++k)
          p.scatter[static_cast<std::size_t>((i * n[1] + j) * n[2] + k)] = static_cast<T>(spec.scatter);
  }
  // Ricker wavelet of peak frequency f, delayed by 1.5 / f.
  p.amplitudes.resize(static_cast<std::size_t>(nshots * nt));
  const double t0 = 1.5 / spec.freq;
  for (std::int64_t t = 0; t < nt; ++t) {
    const double a = std::numbers::pi * spec.freq * (static_cast<double>(t) * spec.dt - t0);
    const T w = static_cast<T>((1 - 2 * a * a) * std::exp(-a * a));
    for (std::int64_t s = 0; s < nshots; ++s) p.amplitudes[s * nt + t] = w;
  }
  const int nd = spec.ndim;
  const std::int64_t along = spec.shape.back();
  auto place = [&](std::vector<std::int64_t>& out, std::int64_t depth_cell, std::int64_t lateral) {
    if (nd == 1) {
      out.push_back(lateral);
      return;
    }
    out.push_back(depth_cell);
    if (nd == 3) out.push_back(spec.shape[1] / 2);
    out.push_back(lateral);
  };
  for (std::int64_t s = 0; s < nshots; ++s) {
    // 1-D: the source at source_depth, the receivers spread along the model.
    place(p.sources, spec.source_depth, nd == 1 ? spec.source_depth : spread(s, spec.nshots, along));
    for (std::int64_t r = 0; r < spec.nreceivers; ++r)
      place(p.receivers, spec.receiver_depth, spread(r, spec.nreceivers, along));
  }
  return p;
}

nlohmann::json parameters_of(const ScalarSpec& spec, int threads, const ScalarRunOptions& options,
                             std::int64_t step_ratio) {
  nlohmann::json j = {{"ndim", spec.ndim},
                      {"shape", spec.shape},
                      {"spacing", spec.spacing},
                      {"dt", spec.dt},
                      {"nt", spec.nt},
                      {"shots", spec.nshots},
                      {"receivers", spec.nreceivers},
                      {"accuracy", spec.accuracy},
                      {"pml_width", spec.pml_width},
                      {"pml_freq", spec.freq},
                      {"dtype", dtype_name(spec.dtype)},
                      {"gradient", spec.gradient},
                      {"born", spec.born},
                      {"step_ratio", step_ratio},
                      {"threads", threads},
                      {"warmup", options.warmup},
                      {"repetitions", options.reps}};
  if (spec.born) {
    const auto b = spec.box_begin(), e = spec.box_end();
    j["scatter"] = {{"value", spec.scatter},
                    {"box_begin", std::vector<std::int64_t>(b.begin(), b.begin() + spec.ndim)},
                    {"box_end", std::vector<std::int64_t>(e.begin(), e.begin() + spec.ndim)}};
  }
  return j;
}

wave::ScalarOptions options_of(const ScalarSpec& spec, int threads) {
  wave::ScalarOptions o;
  o.accuracy = spec.accuracy;
  o.pml_width.fill(spec.pml_width);
  o.pml_freq = spec.freq;
  o.max_vel = 0;
  o.nparallel = threads;
  return o;
}

// One output of a call, compared by name; `state`: a final wavefield (scalar_state_tolerance).
template <class T>
struct Output {
  const char* name;
  std::vector<T> values;
  bool state = false;
};

// What one call produced, for verification, and the numbers its report needs.
template <class T>
struct Result {
  std::vector<Output<T>> outputs;
  std::int64_t step_ratio = 1;
  double inner_dt = 0;
  WorkModel work;
  double storage_bytes = 0;
};

// The gradients a gradient run is given (see receiver_gradients), and for Born the work of the
// coupled background + scattered pass (the source gradient's adjoint does as much).
template <class T>
struct Gradients {
  std::vector<T> receivers, bg_receivers;
  WorkModel born_work;
};

template <class T>
Result<T> run_once(const Device& device, const Problem<T>& problem, const ScalarSpec& spec,
                   const wave::ScalarOptions& opt, const Gradients<T>& grads, Timers* timers) {
  Result<T> r;
  if (spec.born && spec.gradient) {
    auto g = wave::scalar_born_gradient<T>(device, problem.born_input(), opt,
                                           std::span<const T>(grads.receivers),
                                           std::span<const T>(grads.bg_receivers), true, nullptr,
                                           timers);
    r.outputs.push_back({"grad_scatter", std::move(g.scatter)});
    r.outputs.push_back({"grad_source_amplitudes", std::move(g.source_amplitudes)});
    r.step_ratio = g.forward.step_ratio;
    r.inner_dt = g.forward.inner_dt;
    r.storage_bytes = g.forward.storage_bytes;
    // The image: the background forward pass (with its stores) and its adjoint, about the same
    // work each; the source gradient: the adjoint of the coupled fields, as much as Born.
    r.work = g.forward.work;
    r.work.points = 2 * r.work.points + grads.born_work.points;
    r.work.flops = 2 * r.work.flops + grads.born_work.flops;
    r.work.bytes = 2 * r.work.bytes + grads.born_work.bytes;
  } else if (spec.born) {
    auto out = wave::scalar_born<T>(device, problem.born_input(), opt, nullptr, nullptr, timers);
    r.outputs.push_back({"receiver_amplitudes", std::move(out.receiver_amplitudes)});
    r.outputs.push_back({"bg_receiver_amplitudes", std::move(out.bg_receiver_amplitudes)});
    r.outputs.push_back({"scattered_wavefield", std::move(out.scattered_state.wavefield), true});
    r.step_ratio = out.step_ratio;
    r.inner_dt = out.inner_dt;
    r.work = out.work;
  } else if (spec.gradient) {
    auto g = wave::scalar_gradient<T>(device, problem.input(), opt,
                                      std::span<const T>(grads.receivers), nullptr, nullptr, timers);
    r.outputs.push_back({"grad_v", std::move(g.v)});
    r.outputs.push_back({"grad_source_amplitudes", std::move(g.source_amplitudes)});
    r.step_ratio = g.forward.step_ratio;
    r.inner_dt = g.forward.inner_dt;
    r.storage_bytes = g.forward.storage_bytes;
    // The library's work model is that of the forward pass (with its stores); the adjoint
    // steps over the same points with about the same arithmetic and traffic (plus reading
    // back what was stored): count both.
    r.work = g.forward.work;
    r.work.points *= 2;
    r.work.flops *= 2;
    r.work.bytes *= 2;
  } else {
    auto out = wave::scalar<T>(device, problem.input(), opt, nullptr, timers);
    r.outputs.push_back({"receiver_amplitudes", std::move(out.receiver_amplitudes)});
    // The final wavefield gathers the rounding of every step everywhere (also where it is
    // small): it is held to scalar_state_tolerance.
    r.outputs.push_back({"wavefield", std::move(out.state.wavefield), true});
    r.step_ratio = out.step_ratio;
    r.inner_dt = out.inner_dt;
    r.work = out.work;
  }
  return r;
}

// The loss whose gradient a gradient run computes: 0.5 ||receivers - d||^2 with d = 0 (for Born
// 0.5 ||Born data||^2 + 0.5 ||background data||^2), so the receiver gradients are the data
// themselves; the forward pass that gives them is not timed.
template <class T>
Gradients<T> receiver_gradients(const Device& device, const Problem<T>& problem,
                                const ScalarSpec& spec, const wave::ScalarOptions& opt) {
  Gradients<T> g;
  if (!spec.gradient) return g;
  if (spec.born) {
    auto out = wave::scalar_born<T>(device, problem.born_input(), opt);
    g.receivers = std::move(out.receiver_amplitudes);
    g.bg_receivers = std::move(out.bg_receiver_amplitudes);
    g.born_work = out.work;
  } else {
    g.receivers = wave::scalar<T>(device, problem.input(), opt).receiver_amplitudes;
  }
  return g;
}

template <class T>
std::vector<ScalarOutcome> run_typed(const ScalarSpec& spec, const std::vector<Device>& devices,
                                     const ScalarRunOptions& options, std::ostream& log) {
  const Problem<T> problem = make_problem<T>(spec, spec.nshots, spec.nt);
  const int threads = effective_threads(options.threads);
  const wave::ScalarOptions opt = options_of(spec, options.threads);
  ThreadCount thread_count(options.threads);

  // Verification window, computed once on the reference for every device to match.
  const std::int64_t vnt = std::min(spec.nt, options.verify_nt > 0 ? options.verify_nt : 100);
  const std::int64_t vshots =
      std::min(spec.nshots, options.verify_shots > 0 ? options.verify_shots : 2);
  std::optional<Problem<T>> window;
  Gradients<T> window_grads;
  Result<T> expected;
  const bool any_to_verify =
      options.verify && std::any_of(devices.begin(), devices.end(), [](const Device& d) {
        return d.backend != Backend::reference;
      });
  if (any_to_verify) {
    window = make_problem<T>(spec, vshots, vnt);
    const Device ref{Backend::reference, 0, false};
    window_grads = receiver_gradients<T>(ref, *window, spec, opt);
    log << fmt::format("Verification: the reference runs shots 0-{} for samples 0-{} ...\n",
                       vshots - 1, vnt - 1);
    log.flush();
    const auto t0 = std::chrono::steady_clock::now();
    expected = run_once<T>(ref, *window, spec, opt, window_grads, nullptr);
    log << fmt::format("Verification: reference done in {:.2f} s\n", seconds_since(t0));
  }

  std::vector<ScalarOutcome> outcomes;
  for (const Device& device : devices) {
    ScalarOutcome out;
    KernelReport& report = out.report;
    report.kernel = spec.kernel();
    report.device = device;
    report.roofline = roofline_for(device, threads, options.roofline, log);
    const Gradients<T> grads = receiver_gradients<T>(device, problem, spec, opt);

    int call = 0;
    Result<T> last;
    auto once = [&]() -> double {
      if (call++ == options.warmup) report.timers.clear();  // the table shows timed calls only
      const auto t0 = std::chrono::steady_clock::now();
      last = run_once<T>(device, problem, spec, opt, grads, &report.timers);
      return seconds_since(t0);
    };
    out.stats = run_benchmark(once, options.warmup, options.reps);
    out.step_ratio = last.step_ratio;
    out.inner_dt = last.inner_dt;
    out.storage_bytes = last.storage_bytes;
    report.work = last.work;
    report.parameters = parameters_of(spec, device.backend == Backend::reference ? 1 : threads,
                                      options, out.step_ratio);
    report.seconds = out.stats.median;
    report.rates = derive_rates(report.work, report.seconds, report.roofline);

    if (any_to_verify && device.backend != Backend::reference) {
      const Result<T> got = run_once<T>(device, *window, spec, opt, window_grads, nullptr);
      for (std::size_t i = 0; i < got.outputs.size(); ++i) {
        const Output<T>& g = got.outputs[i];
        const Output<T>& e = expected.outputs[i];
        const Tolerance tol = g.state ? scalar_state_tolerance(spec.dtype, spec.born)
                                      : scalar_tolerance(spec.dtype, spec.born);
        out.checks.emplace_back(g.name, compare<T, T>(std::span<const T>(g.values),
                                                      std::span<const T>(e.values), tol));
      }
      // The report shows the first failing check, else the first (the primary output).
      const auto failing = std::find_if(out.checks.begin(), out.checks.end(),
                                        [](const auto& c) { return !c.second.pass; });
      report.verification = (failing != out.checks.end() ? failing : out.checks.begin())->second;
      out.verified_nt = vnt;
      out.verified_shots = vshots;
    }
    outcomes.push_back(std::move(out));
  }
  return outcomes;
}

}  // namespace

std::vector<ScalarOutcome> run_scalar(const ScalarSpec& spec, const std::vector<Device>& devices,
                                      const ScalarRunOptions& options, std::ostream& log) {
  return spec.dtype == Dtype::float32 ? run_typed<float>(spec, devices, options, log)
                                      : run_typed<double>(spec, devices, options, log);
}

}  // namespace sciproxy::app
