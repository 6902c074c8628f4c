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

Tolerance scalar_tolerance(Dtype dtype) {
  Tolerance t;
  t.rel_l2 = dtype == Dtype::float32 ? 1e-5 : 1e-12;
  return t;
}

Tolerance scalar_state_tolerance(Dtype dtype) {
  Tolerance t;
  t.rel_l2 = dtype == Dtype::float32 ? 1e-4 : 1e-11;
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
  const std::int64_t along = spec.shape.back();
  if (spec.nreceivers > along)
    throw UsageError(fmt::format("--receivers: expected at most {} (one per cell along the "
                                 "surface), got {}",
                                 along, spec.nreceivers));

  // Memory before anything is allocated: the state (u, u_prev, psi, zeta per dimension) twice
  // (the backend's and the returned copy), the inputs, the receivers, and for a gradient the
  // stored history (one field per sample) and the adjoint state.
  const double elem = static_cast<double>(dtype_size(spec.dtype));
  const double state = static_cast<double>(2 + 2 * spec.ndim) * static_cast<double>(padded_cells(spec)) *
                       static_cast<double>(spec.nshots) * elem;
  const double traces = elem * static_cast<double>(spec.nshots) *
                        static_cast<double>(spec.nreceivers + 1) * static_cast<double>(spec.nt);
  double host = 2 * state + traces * 2 + elem * static_cast<double>(spec.cells()) * 2;
  if (spec.gradient)
    host += 2 * state + elem * static_cast<double>(spec.nt) * static_cast<double>(padded_cells(spec)) *
                            static_cast<double>(spec.nshots);
  const double physical = physical_memory_bytes();
  const double limit = physical > 0 ? std::min(kMaxProblemBytes, 0.8 * physical) : kMaxProblemBytes;
  if (host > limit)
    throw UsageError(fmt::format(
        "{} ({}{}) needs about {} of host memory; the limit is {} ({})", spec.label(),
        dtype_name(spec.dtype), spec.gradient ? ", gradient" : "", format_bytes(host),
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
                                                   : Dtype::float64)
                                  .rel_l2},
                             {"checks", checks_json}};
  return j;
}

namespace {

// The problem's arrays; ScalarInput only points into them.
template <class T>
struct Problem {
  wave::Grid grid;
  std::vector<T> v, amplitudes;
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
  return {{"ndim", spec.ndim},
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
          {"step_ratio", step_ratio},
          {"threads", threads},
          {"warmup", options.warmup},
          {"repetitions", options.reps}};
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

// What one call produced, for verification.
template <class T>
struct Result {
  std::vector<T> first, second;  // forward: receivers, final wavefield; gradient: grad v, grad sources
  wave::ScalarOutput<T> forward;  // step_ratio, work, storage (state and receivers moved out)
};

template <class T>
Result<T> run_once(const Device& device, const Problem<T>& problem, const ScalarSpec& spec,
                   const wave::ScalarOptions& opt, const std::vector<T>& grad_receivers,
                   Timers* timers) {
  const auto in = problem.input();
  Result<T> r;
  if (spec.gradient) {
    auto g = wave::scalar_gradient<T>(device, in, opt, std::span<const T>(grad_receivers), nullptr,
                                      nullptr, timers);
    r.first = std::move(g.v);
    r.second = std::move(g.source_amplitudes);
    r.forward = std::move(g.forward);
  } else {
    r.forward = wave::scalar<T>(device, in, opt, nullptr, timers);
    r.first = std::move(r.forward.receiver_amplitudes);
    r.second = std::move(r.forward.state.wavefield);
  }
  return r;
}

// The loss whose gradient a gradient run computes: 0.5 ||receivers - d||^2 with d = 0, so the
// receiver gradient is the data itself; the forward pass that gives it is not timed.
template <class T>
std::vector<T> receiver_gradient(const Device& device, const Problem<T>& problem,
                                 const wave::ScalarOptions& opt) {
  return wave::scalar<T>(device, problem.input(), opt).receiver_amplitudes;
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
  std::vector<T> window_grad;
  Result<T> expected;
  const bool any_to_verify =
      options.verify && std::any_of(devices.begin(), devices.end(), [](const Device& d) {
        return d.backend != Backend::reference;
      });
  if (any_to_verify) {
    window = make_problem<T>(spec, vshots, vnt);
    const Device ref{Backend::reference, 0, false};
    if (spec.gradient) window_grad = receiver_gradient<T>(ref, *window, opt);
    log << fmt::format("Verification: the reference runs shots 0-{} for samples 0-{} ...\n",
                       vshots - 1, vnt - 1);
    log.flush();
    const auto t0 = std::chrono::steady_clock::now();
    expected = run_once<T>(ref, *window, spec, opt, window_grad, nullptr);
    log << fmt::format("Verification: reference done in {:.2f} s\n", seconds_since(t0));
  }

  std::vector<ScalarOutcome> outcomes;
  for (const Device& device : devices) {
    ScalarOutcome out;
    KernelReport& report = out.report;
    report.kernel = spec.gradient ? "scalar_gradient" : "scalar";
    report.device = device;
    report.roofline = roofline_for(device, threads, options.roofline, log);
    std::vector<T> grad_receivers;
    if (spec.gradient) grad_receivers = receiver_gradient<T>(device, problem, opt);

    int call = 0;
    Result<T> last;
    auto once = [&]() -> double {
      if (call++ == options.warmup) report.timers.clear();  // the table shows timed calls only
      const auto t0 = std::chrono::steady_clock::now();
      last = run_once<T>(device, problem, spec, opt, grad_receivers, &report.timers);
      return seconds_since(t0);
    };
    out.stats = run_benchmark(once, options.warmup, options.reps);
    out.step_ratio = last.forward.step_ratio;
    out.inner_dt = last.forward.inner_dt;
    out.storage_bytes = last.forward.storage_bytes;
    report.work = last.forward.work;
    if (spec.gradient) {
      // The library's work model is that of the forward pass (with its stores); the adjoint
      // steps over the same points with about the same arithmetic and traffic (plus reading
      // back what was stored): count both.
      report.work.points *= 2;
      report.work.flops *= 2;
      report.work.bytes *= 2;
    }
    report.parameters = parameters_of(spec, device.backend == Backend::reference ? 1 : threads,
                                      options, out.step_ratio);
    report.seconds = out.stats.median;
    report.rates = derive_rates(report.work, report.seconds, report.roofline);

    if (any_to_verify && device.backend != Backend::reference) {
      const Result<T> got = run_once<T>(device, *window, spec, opt, window_grad, nullptr);
      const Tolerance tol = scalar_tolerance(spec.dtype);
      const char* first = spec.gradient ? "grad_v" : "receiver_amplitudes";
      const char* second = spec.gradient ? "grad_source_amplitudes" : "wavefield";
      out.checks.emplace_back(first, compare<T, T>(std::span<const T>(got.first),
                                                   std::span<const T>(expected.first), tol));
      // The final wavefield of a forward run gathers the rounding of every step everywhere
      // (also where it is small): it is held to scalar_state_tolerance.
      out.checks.emplace_back(
          second, compare<T, T>(std::span<const T>(got.second), std::span<const T>(expected.second),
                                spec.gradient ? tol : scalar_state_tolerance(spec.dtype)));
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
