// wave: the public entry points of the scalar propagator (include/sciproxy/wave.hpp), after
// Deepwave's scalar propagator (deepwave/scalar.py, v0.1; see docs/kernels/scalar-wave.md):
//
//   u^{t+1} = v^2 dt^2 L u^t + 2 u^t - u^{t-1} - v^2 dt^2 f^t,    receivers^t = u^t
//
// Each call checks its arguments and builds the padded problem (window.cpp), resamples and scales
// the sources (traces.cpp), runs the backend kernels of kernels.hpp on the device it is given
// (SCIPROXY_RUN_KERNEL), and maps the results back. scalar_gradient runs the forward pass storing
// 2 v dt^2 W every model_gradient_sampling_interval inner steps (gradient_storage.hpp), then the
// exact adjoint, and maps every gradient back through the adjoints of scaling, resampling and
// padding. Born modelling is in born.cpp.
//
// Every entry point opens a RecordedCall (core/recorded_call.hpp): inside a Recording it reports
// the backend, the work model and the timers, and with RecordingOptions::verify it reruns itself
// on the reference backend and compares each output, by the Python API's name, with the
// tolerances of case.hpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "case.hpp"
#include "core/recorded_call.hpp"
#include "cpu_plan.hpp"
#include "gradient_storage.hpp"
#include "on_ranks.hpp"
#include "sciproxy/core/autotune.hpp"
#include "sciproxy/core/cancel.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"
#include "sciproxy/wave.hpp"
#include "setup.hpp"

namespace sciproxy::wave {

namespace {
constexpr double kCourant = 0.6;  // Deepwave's CFL number
}  // namespace

TimeStepping cfl_time_stepping(const Grid& grid, double dt, double max_vel) {
  seismic::check_grid(grid);
  detail::check_dt(dt);
  detail::check_max_vel(max_vel);
  if (max_vel == 0) return {dt, 1};
  // dt / max_dt with max_dt = 0.6 / sqrt(sum 1/dx^2) / max_vel, scaled by the smallest spacing
  // so that no dimensioned quantity is squared (Deepwave's cfl_condition_n).
  double smallest = grid.spacing[0];
  for (int d = 1; d < grid.ndim; ++d) smallest = std::min(smallest, grid.spacing[d]);
  double norm2 = 0;
  for (int d = 0; d < grid.ndim; ++d)
    norm2 += (smallest / grid.spacing[d]) * (smallest / grid.spacing[d]);
  const double ratio = dt * max_vel * std::sqrt(norm2) / smallest / kCourant;
  require(
      ratio <= 1e9, "dt",
      "a time step at most 1e9 times the CFL limit 0.6 / (max_vel sqrt(sum 1/dx^2))",
      fmt::format("{} s, {:.3g} times the limit (check the units of dt, grid_spacing and max_vel)",
                  dt, ratio));
  const auto step_ratio = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(ratio)));
  return {dt / static_cast<double>(step_ratio), step_ratio};
}

namespace detail {

// ---------------------------------------------------------------------------------------------
// Work model: points = cells of the padded grid outside the halo (model window + PML) x inner
// steps x shots. Flops per cell and step are those of the expressions in scalar_math.hpp:
// interior, per dimension D2 (2 + 3 h with h = accuracy/2) and the sum into W (1), then
// v*v*dt2*W + 2u - u_prev (6); per dimension in which a cell lies outside the interior box, the
// C-PML terms add D1 u (3h + 1), D1(a psi) (5h + 1), tmp (5), W (3 more), psi and zeta (6).
//
// Bytes: what the backend's schedule must move between the cores and memory, each array counted
// once where a sweep over the grid reads or writes it, so that bytes / time never exceeds the
// bandwidth (a lower bound: stencil halos, vector padding and cache misses beyond these add to
// it). Per shot, with C the non-halo cells and P the cells of C within the PML of a dimension,
// summed over the dimensions (the cells where psi and zeta live):
// - a sweep of one step: u^t, u^{t-1} and v (v^2 dt^2) read, u^{t+1} written: 4 C; psi (q) read
//   and written, zeta read and written: 4 P;
// - a sweep of several steps (temporal blocking, cpu backend): both buffers of u read and written
//   back, v read: 5 C; both buffers of q and zeta, each read and written: 6 P;
// - Born: both fields, and the scatter read with v;
// - every stored step: its slice written (C);
// - cpu backend, once per call: the copies of the fields in the backend's row layout
//   (cpu_forward.hpp), u and u^{t-1} copied in and out (8 C), v to v and v^2 dt^2 (3 C per
//   model; Born: v and the scatter, 4 C), psi and zeta in and out (8 P).
// The cpu schedule is cpu_plan.hpp's: shots that fill the threads evenly run one per thread, the
// 2-D ones in sweeps; the others share the threads (one step per sweep in 2-D); every 3-D shot
// runs in sweeps.

namespace {

template <class T>
double non_halo_cells(const Setup<T>& s) {
  double cells = 1;
  for (int d = 0; d < s.ndim; ++d) cells *= static_cast<double>(s.n[d] - 2 * s.halo);
  return cells;
}

// Sum over the dimensions of the non-halo cells within the PML of that dimension.
template <class T>
double pml_cells(const Setup<T>& s) {
  const double cells = non_halo_cells(s);
  double sum = 0;
  for (int d = 0; d < s.ndim; ++d) {
    const double nd = static_cast<double>(s.n[d] - 2 * s.halo);
    const double width = static_cast<double>(s.pml_width[2 * d] + s.pml_width[2 * d + 1]);
    sum += cells / nd * std::min(nd, width);
  }
  return sum;
}

template <class T>
double stored_steps(const Setup<T>& s, std::int64_t store_interval) {
  return store_interval > 0
             ? std::ceil(static_cast<double>(s.nt_inner) / static_cast<double>(store_interval))
             : 0.0;
}

}  // namespace

template <class T>
WorkModel work_model(const Setup<T>& s, std::int64_t store_interval, Backend backend,
                     int wavefields) {
  const std::int64_t h = s.halo;
  const double cells = non_halo_cells(s);
  double pml_dim_cells = 0;  // sum over dimensions of the cells outside the interior box
  for (int d = 0; d < s.ndim; ++d) {
    const double inside =
        static_cast<double>(s.problem.pml_interior[2 * d + 1] - s.problem.pml_interior[2 * d]);
    pml_dim_cells += cells / static_cast<double>(s.n[d] - 2 * h) *
                     (static_cast<double>(s.n[d] - 2 * h) - inside);
  }
  const double steps = static_cast<double>(s.nt_inner) * static_cast<double>(s.nshots);
  const double interior = s.ndim * (3.0 + 3.0 * h) + 6.0 + (store_interval > 0 ? 3.0 : 0.0);
  const double pml_extra = 8.0 * h + 16.0;
  WorkModel w;
  w.points = cells * steps;
  w.point_unit = "Pts";
  w.flops = (cells * interior + pml_dim_cells * pml_extra) * steps;
  w.precision = sizeof(T) == 4 ? Precision::fp32 : Precision::fp64;

  // Bytes, per shot and sweep of `depth` steps (see the top).
  const double elem = sizeof(T), pml = pml_cells(s), fields = wavefields;
  auto sweep = [&](std::int64_t depth) {
    const double u = depth > 1 ? 4 : 3, aux = depth > 1 ? 6 : 4;
    return elem * fields * ((u + 1) * cells + aux * pml);  // + v, and Born's scatter
  };
  auto run = [&](double shots, std::int64_t depth) {
    const std::int64_t sweeps = (s.nt_inner + depth - 1) / depth;
    return shots * static_cast<double>(sweeps) * sweep(depth);
  };
  double bytes = 0;
  if (backend == Backend::cpu) {
    const ThreadCount count(s.problem.nparallel);
    const std::int64_t threads = max_threads();
    const std::int64_t alone = s.nshots / threads * threads;
    const std::int64_t plane = s.ndim == 3 ? s.n[1] * s.n[2] : 0;
    const std::int64_t value_bytes = static_cast<std::int64_t>(sizeof(T)) * wavefields;
    const ScalarCpuTuning& tuning = s.problem.cpu;
    const std::int64_t alone_depth =
        s.ndim == 1 ? 1 : kernels::cpu::sweep_steps(s.ndim, h, plane, value_bytes, threads, tuning);
    const std::int64_t shared_depth =
        s.ndim == 3 ? kernels::cpu::sweep_steps(s.ndim, h, plane, value_bytes, 1, tuning) : 1;
    bytes = run(static_cast<double>(alone), alone_depth) +
            run(static_cast<double>(s.nshots - alone), shared_depth);
    bytes += elem * (static_cast<double>(s.nshots) * fields * (8 * cells + 8 * pml) +
                     static_cast<double>(s.nmodels) * (wavefields == 2 ? 4 : 3) * cells);
  } else {
    bytes = run(static_cast<double>(s.nshots), 1);
  }
  w.bytes = bytes + elem * stored_steps(s, store_interval) * static_cast<double>(s.nshots) * cells;
  // What every step reads again: each shot's u^t, u^{t-1}, the PML's fields, and the models.
  // When they fit the last-level cache, sweeps after the first read them from there
  // (metrics.hpp); the stored steps stream through once and are not part of it (their bytes
  // are then counted at the cache's speed too, which can only lower the fraction).
  w.working_set_bytes = elem * (static_cast<double>(s.nshots) * fields * (3 * cells + 4 * pml) +
                                static_cast<double>(s.nmodels) * cells);
  return w;
}

// The adjoint pass of scalar_gradient (one step per sweep): lambda, the adjoint of u^t read and
// written, g = v^2 dt^2 lambda read and written, v^2 dt^2 read: 6 C per step; psi and zeta's
// adjoints read and written: 4 P; every stored step read and the gradient read and written: 3 C.
template <class T>
WorkModel gradient_work(const Setup<T>& s, std::int64_t store_interval, Backend backend) {
  WorkModel w = work_model(s, store_interval, backend);
  const double elem = sizeof(T), shots = static_cast<double>(s.nshots);
  const double cells = non_halo_cells(s);
  w.bytes += elem * shots *
             (static_cast<double>(s.nt_inner) * (6 * cells + 4 * pml_cells(s)) +
              3 * cells * stored_steps(s, store_interval));
  w.points *= 2;
  w.flops *= 2;
  return w;
}

// Candidates: 3-D, steps per sweep 1, 2, 4 or 8 with 1 or 2 tiles per thread; 2-D, 1 or 4 steps
// per sweep with 2 to 16 rows per block (1-D has nothing to tune). Each is timed over 16 steps
// (two sweeps of the deepest), which include the cpu layout copies (the same for every candidate),
// the fastest of 3 runs: shorter trials ranked the candidates differently from run to run on a
// shared machine.
template <class T>
void autotune_forward(const Device& device, Setup<T>& s, const char* kernel,
                      const std::function<void(const kernels::ScalarProblem<T>&)>& trial) {
  if (device.backend != Backend::cpu || s.ndim == 1 || s.nt_inner == 0) return;
  TuningKey key;
  key.kernel = kernel;
  key.device = "cpu";
  key.precision = sizeof(T) == 4 ? Precision::fp32 : Precision::fp64;
  key.threads = resolve_threads(s.problem.nparallel, "nparallel");
  key.shape = fmt::format("padded={} accuracy={} shots={} models={}", join(s.n.data(), s.ndim, "x"),
                          s.accuracy, s.nshots, s.nmodels);
  // The static sizes (s.problem.cpu) first: autotune keeps them unless another is clearly faster.
  const ScalarCpuTuning& given = s.problem.cpu;
  std::vector<TuningParameters> candidates;
  if (s.ndim == 3) {
    candidates.push_back(
        {{"sweep_steps", given.sweep_steps}, {"tiles_per_thread", given.tiles_per_thread}});
    for (std::int64_t steps : {1, 2, 4, 8})
      for (std::int64_t tiles : {1, 2})
        candidates.push_back({{"sweep_steps", steps}, {"tiles_per_thread", tiles}});
  } else {
    candidates.push_back(
        {{"sweep_steps", given.sweep_steps}, {"rows_per_block", given.rows_per_block}});
    for (std::int64_t steps : {1, 4})
      for (std::int64_t rows : {2, 4, 8, 16})
        candidates.push_back({{"sweep_steps", steps}, {"rows_per_block", rows}});
  }
  candidates.erase(std::remove(candidates.begin() + 1, candidates.end(), candidates.front()),
                   candidates.end());
  const auto tuning = autotune(
      key, candidates,
      [&](const TuningParameters& c) {
        kernels::ScalarProblem<T> p = s.problem;
        p.nt = std::min<std::int64_t>(s.nt_inner, 16);
        for (const auto& [name, value] : c)
          (name == "sweep_steps"        ? p.cpu.sweep_steps
           : name == "tiles_per_thread" ? p.cpu.tiles_per_thread
                                        : p.cpu.rows_per_block) = value;
        trial(p);
      },
      3);
  // A cache entry with values the kernel would not take is ignored, not trusted.
  for (const auto& [name, value] : tuning.best) {
    if (value < 1 || value > 64) continue;
    if (name == "sweep_steps") s.problem.cpu.sweep_steps = value;
    if (name == "tiles_per_thread") s.problem.cpu.tiles_per_thread = value;
    if (name == "rows_per_block") s.problem.cpu.rows_per_block = value;
  }
}

// scalar() and scalar_gradient()'s tuning: trials of scalar_forward on a copy of `state` (one
// allocation, assigned again before each trial so that every candidate starts from the same
// fields), storing nothing, so that both calls share the cache entry.
template <class T>
void autotune_scalar_forward(const Device& device, Setup<T>& s, const ScalarState<T>& state,
                             const std::vector<T>& sources, std::vector<T>& receivers) {
  ScalarState<T> copy;
  autotune_forward<T>(device, s, "scalar_forward", [&](const kernels::ScalarProblem<T>& p) {
    copy = state;
    const Context quiet{device, nullptr};  // the trials are not the call's timings
    SCIPROXY_RUN_KERNEL(quiet, scalar_forward, p, fields_of(s, copy), sources.data(),
                        receivers.data(), static_cast<T*>(nullptr));
  });
}

template void autotune_forward<float>(
    const Device&, Setup<float>&, const char*,
    const std::function<void(const kernels::ScalarProblem<float>&)>&);
template void autotune_forward<double>(
    const Device&, Setup<double>&, const char*,
    const std::function<void(const kernels::ScalarProblem<double>&)>&);
template WorkModel work_model<float>(const Setup<float>&, std::int64_t, Backend, int);
template WorkModel work_model<double>(const Setup<double>&, std::int64_t, Backend, int);
template WorkModel gradient_work<float>(const Setup<float>&, std::int64_t, Backend);
template WorkModel gradient_work<double>(const Setup<double>&, std::int64_t, Backend);

// ---------------------------------------------------------------------------------------------
// Recording (core/recorded_call.hpp)

template <class T>
void set_parameters(RecordedCall& call, const Setup<T>& s, const ScalarOptions& opt) {
  if (!call.recording()) return;
  auto& parameters = call.parameters();
  parameters.set("shape",
                 std::vector<long long>(s.model_shape.begin(), s.model_shape.begin() + s.ndim));
  parameters.set("accuracy", s.accuracy);
  parameters.set("nshots", s.nshots);
  parameters.set("nsources", s.nsources);
  parameters.set("nreceivers", s.nreceivers);
  parameters.set("nt", s.nt);
  parameters.set("step_ratio", s.step_ratio);
  parameters.set("model_gradient_sampling_interval", opt.model_gradient_sampling_interval);
  parameters.set("storage_compression", opt.storage_compression);
}

// Deepwave's names, as the Python API returns the state: wavefield<suffix>_0,
// wavefield<suffix>_m1, psi<d><suffix>_m1, zeta<d><suffix>_m1 (d: z, y, x of the last ndim
// dimensions), each wrapped as wrap[0] + name + wrap[1].
template <class T>
void compare_state(RecordedCall& call, const ScalarState<T>& got, const ScalarState<T>& expected,
                   int ndim, const std::string& suffix, const Tolerance& tolerance,
                   const std::array<std::string, 2>& wrap) {
  auto name = [&](const std::string& base) { return wrap[0] + base + wrap[1]; };
  call.compare<T>(name("wavefield" + suffix + "_0"), got.wavefield, expected.wavefield, tolerance);
  call.compare<T>(name("wavefield" + suffix + "_m1"), got.previous_wavefield,
                  expected.previous_wavefield, tolerance);
  static constexpr const char* kDims[] = {"z", "y", "x"};
  for (int d = 0; d < ndim && d < kMaxDims; ++d) {
    const std::string dim = kDims[kMaxDims - ndim + d];
    call.compare<T>(name("psi" + dim + suffix + "_m1"), got.psi[d], expected.psi[d], tolerance);
    call.compare<T>(name("zeta" + dim + suffix + "_m1"), got.zeta[d], expected.zeta[d], tolerance);
  }
}

#define SCIPROXY_INSTANTIATE_RECORDING(T)                                                          \
  template void set_parameters<T>(RecordedCall&, const Setup<T>&, const ScalarOptions&);           \
  template void compare_state<T>(RecordedCall&, const ScalarState<T>&, const ScalarState<T>&, int, \
                                 const std::string&, const Tolerance&,                             \
                                 const std::array<std::string, 2>&);
SCIPROXY_INSTANTIATE_RECORDING(float)
SCIPROXY_INSTANTIATE_RECORDING(double)
#undef SCIPROXY_INSTANTIATE_RECORDING

}  // namespace detail

using namespace detail;

// ---------------------------------------------------------------------------------------------

template <class T>
std::array<std::int64_t, kMaxDims> scalar_state_shape(const ScalarInput<T>& in,
                                                      const ScalarOptions& opt,
                                                      const ScalarState<T>* initial) {
  Setup<T> s;
  make_setup(s, in, opt, 0, initial);
  return s.n;
}

template <class T>
ScalarOutput<T> scalar(const Device& device, const ScalarInput<T>& in, const ScalarOptions& opt,
                       const ScalarState<T>* initial, Timers* timers) {
  if (opt.comm.distributed()) return detail::scalar_on_ranks(device, in, opt, initial, timers);
  RecordedCall call("scalar", device, timers);
  ScalarOutput<T> out;
  int ndim = 0;
  {
    auto top = Timers::region(call.timers(), "scalar");  // closed before the reference rerun
    const Context context{device, call.timers()};
    Setup<T> s;
    {
      auto r = Timers::region(context.timers, "setup");
      make_setup(s, in, opt, 0, initial);
      out.state = make_state(s, initial, StateRole::initial);
    }
    ndim = s.ndim;
    std::vector<T> sources;
    {
      auto r = Timers::region(context.timers, "resample");
      sources = scaled_sources<T>(s, in.source_amplitudes, nullptr);
    }
    std::vector<T> receivers_tm(static_cast<std::size_t>(s.nt_inner * s.nshots * s.nreceivers));
    if (opt.autotune) {
      auto r = Timers::region(context.timers, "autotune");
      autotune_scalar_forward(device, s, out.state, sources, receivers_tm);
    }
    out.work = work_model(s, 0, device.backend);  // of the tuning that runs
    call.set_work(out.work);
    set_parameters(call, s, opt);
    if (s.nt_inner > 0) {
      auto r = Timers::region(context.timers, "forward");
      SCIPROXY_RUN_KERNEL(context, scalar_forward, s.problem, fields_of(s, out.state),
                          sources.data(), receivers_tm.data(), static_cast<T*>(nullptr));
    }
    {
      auto r = Timers::region(context.timers, "resample");
      out.receiver_amplitudes = receivers_out(s, receivers_tm);
    }
    out.step_ratio = s.step_ratio;
    out.inner_dt = s.inner_dt;
  }
  if (call.verifying()) {
    const ScalarOutput<T> expected = call.on_reference(
        [&] { return scalar<T>(RecordedCall::reference_device(), in, opt, initial); });
    const Precision precision = precision_of<T>();
    call.compare<T>("receiver_amplitudes", out.receiver_amplitudes, expected.receiver_amplitudes,
                    scalar_tolerance(precision, false));
    compare_state(call, out.state, expected.state, ndim, "",
                  scalar_state_tolerance(precision, false), {"", ""});
  }
  return out;
}

namespace detail {

// Runs one chunk of steps (`done` of `total` steps before it), so that a cancelled chunk's
// message counts the steps of the whole pass, not of the chunk.
template <class F>
void in_chunk(const char* pass, std::int64_t done, std::int64_t total, F&& run) {
  try {
    run();
  } catch (const Cancelled& e) {
    const std::string what = e.what();
    const auto at = what.find("cancelled at step ");
    if (at == std::string::npos) throw;
    const std::int64_t step = std::strtoll(what.c_str() + at + 18, nullptr, 10);
    throw_cancelled(pass, done + step, total);
  }
}

template <class T>
ScalarGradient<T> gradient(const Context& context, const ScalarInput<T>& in,
                           const ScalarOptions& opt, std::span<const T> grad_receiver_amplitudes,
                           const ScalarState<T>* initial, const ScalarState<T>* grad_final,
                           RecordedCall* call) {
  Timers* const timers = context.timers;
  auto top = Timers::region(timers, "scalar");
  // The exact gradient needs 2 v dt^2 W at every inner step: the interval counts inner steps
  // (Deepwave stores every step_ratio * interval inner steps and multiplies by that stride).
  const std::int64_t store_interval =
      opt.storage == StorageMode::none ? 0 : opt.model_gradient_sampling_interval;
  Setup<T> s;
  ScalarGradient<T> grad;
  ScalarState<T> adjoint;
  {
    auto r = Timers::region(timers, "setup");
    make_setup(s, in, opt, store_interval, initial);
    const std::int64_t nrec = s.nshots * s.nreceivers * s.nt;
    require(grad_receiver_amplitudes.empty() ||
                static_cast<std::int64_t>(grad_receiver_amplitudes.size()) == nrec,
            "grad_receiver_amplitudes",
            fmt::format("[nshots, nreceivers, nt] = [{}, {}, {}], {} values, or none", s.nshots,
                        s.nreceivers, s.nt, nrec),
            fmt::format("{} values", grad_receiver_amplitudes.size()));
    for (std::size_t i = 0; i < grad_receiver_amplitudes.size(); ++i)
      if (!std::isfinite(grad_receiver_amplitudes[i]))
        throw_invalid_argument("grad_receiver_amplitudes", "finite values",
                               fmt::format("{} at flat index {}", grad_receiver_amplitudes[i], i));
    grad.forward.state = make_state(s, initial, StateRole::initial);
    adjoint = make_state(s, grad_final, StateRole::grad_final);
  }
  GradientStore<T> store(s, opt, store_interval);
  const std::int64_t chunk = store.chunk_steps();
  const std::int64_t src_stride = s.nshots * s.nsources, rec_stride = s.nshots * s.nreceivers;

  // Forward, chunk by chunk (one chunk unless the stored steps go to disk or get compressed).
  std::vector<T> inner_amplitudes, sources;
  {
    auto r = Timers::region(timers, "resample");
    sources = scaled_sources<T>(s, in.source_amplitudes, &inner_amplitudes);
  }
  std::vector<T> receivers_tm(static_cast<std::size_t>(s.nt_inner * rec_stride));
  if (opt.autotune) {
    auto r = Timers::region(timers, "autotune");
    autotune_scalar_forward(context.device, s, grad.forward.state, sources, receivers_tm);
  }
  grad.forward.work = work_model(s, store_interval, context.device.backend);
  grad.work = gradient_work(s, store_interval, context.device.backend);
  if (call) {
    call->set_work(grad.work);
    set_parameters(*call, s, opt);
  }
  {
    auto r = Timers::region(timers, "forward");
    kernels::ScalarFields<T> f = fields_of(s, grad.forward.state);
    for (std::int64_t t0 = 0; t0 < s.nt_inner; t0 += chunk) {
      kernels::ScalarProblem<T> p = s.problem;
      p.nt = std::min(chunk, s.nt_inner - t0);
      const std::int64_t first = store_interval > 0 ? t0 / store_interval : 0;
      const std::int64_t count =
          store_interval > 0 ? (p.nt + store_interval - 1) / store_interval : 0;
      in_chunk("scalar_gradient (forward)", t0, s.nt_inner, [&] {
        SCIPROXY_RUN_KERNEL(context, scalar_forward, p, f, sources.data() + t0 * src_stride,
                            receivers_tm.data() + t0 * rec_stride, store.forward_buffer(first));
      });
      store.save(first, count);
    }
  }
  std::vector<T> grad_receivers_tm;
  {
    auto r = Timers::region(timers, "resample");
    grad.forward.receiver_amplitudes = receivers_out(s, receivers_tm);
    grad_receivers_tm = receivers_in_adjoint(s, grad_receiver_amplitudes);
  }

  // Backward, chunks in reverse.
  std::vector<T> grad_sources_tm(static_cast<std::size_t>(s.nt_inner * src_stride), T(0));
  std::vector<T> grad_v_padded(static_cast<std::size_t>((s.nmodels > 1 ? s.nshots : 1) * s.points),
                               T(0));
  {
    auto r = Timers::region(timers, "backward");
    kernels::ScalarFields<T> f = fields_of(s, adjoint);
    const std::int64_t nchunks = s.nt_inner > 0 ? (s.nt_inner + chunk - 1) / chunk : 0;
    for (std::int64_t c = nchunks - 1; c >= 0; --c) {
      const std::int64_t t0 = c * chunk;
      kernels::ScalarProblem<T> p = s.problem;
      p.nt = std::min(chunk, s.nt_inner - t0);
      const std::int64_t first = store_interval > 0 ? t0 / store_interval : 0;
      const std::int64_t count =
          store_interval > 0 ? (p.nt + store_interval - 1) / store_interval : 0;
      in_chunk("scalar_gradient (backward)", s.nt_inner - t0 - p.nt, s.nt_inner, [&] {
        SCIPROXY_RUN_KERNEL(context, scalar_backward, p, f,
                            grad_receivers_tm.data() + t0 * rec_stride,
                            grad_sources_tm.data() + t0 * src_stride, store.load(first, count),
                            grad_v_padded.data());
      });
    }
  }
  project_state(s, adjoint);
  grad.initial_state = std::move(adjoint);

  {
    auto r = Timers::region(timers, "resample");
    // Through the source scaling -v_s^2 dt^2 f: d/df and d/dv_s.
    const std::int64_t ntr = src_stride;
    const double dt2 = s.inner_dt * s.inner_dt;
    std::vector<T> grad_inner(static_cast<std::size_t>(ntr * s.nt_inner));
    for (std::int64_t tr = 0; tr < ntr; ++tr) {
      if (s.source_cells[tr] == kIgnoredCell) continue;  // gradient zero: it injects nothing
      const std::int64_t m = s.model_of(tr / std::max<std::int64_t>(s.nsources, 1));
      const double vs = s.v[m * s.points + s.source_cells[tr]];
      double dv = 0;
      for (std::int64_t t = 0; t < s.nt_inner; ++t) {
        const double gs = grad_sources_tm[t * ntr + tr];
        grad_inner[tr * s.nt_inner + t] = static_cast<T>(-vs * vs * dt2 * gs);
        dv += static_cast<double>(inner_amplitudes[tr * s.nt_inner + t]) * gs;
      }
      if (store_interval > 0) {
        T& gv =
            grad_v_padded[(s.nmodels > 1 ? tr / s.nsources : 0) * s.points + s.source_cells[tr]];
        gv = static_cast<T>(gv - 2 * vs * dt2 * dv);
      }
    }
    grad.source_amplitudes.assign(static_cast<std::size_t>(ntr * s.nt), T(0));
    detail::upsample_adjoint(grad_inner.data(), ntr, s.nt, s.resampling,
                             grad.source_amplitudes.data());
  }

  // Adjoint of the replicate padding: every padded cell adds onto the model cell it copies.
  std::vector<double> gv(static_cast<std::size_t>(s.nmodels * s.model_cells), 0.0);
  if (store_interval > 0)
    for (std::int64_t m = 0; m < (s.nmodels > 1 ? s.nshots : 1); ++m)
      s.for_each_padded([&](std::int64_t i, const Shape& p) {
        gv[m * s.model_cells + s.model_cell(p)] += grad_v_padded[m * s.points + i];
      });
  grad.v.assign(gv.begin(), gv.end());

  grad.forward.step_ratio = s.step_ratio;
  grad.forward.inner_dt = s.inner_dt;
  grad.forward.storage_bytes = store.bytes();
  return grad;
}

template ScalarGradient<float> gradient<float>(const Context&, const ScalarInput<float>&,
                                               const ScalarOptions&, std::span<const float>,
                                               const ScalarState<float>*, const ScalarState<float>*,
                                               RecordedCall*);
template ScalarGradient<double> gradient<double>(const Context&, const ScalarInput<double>&,
                                                 const ScalarOptions&, std::span<const double>,
                                                 const ScalarState<double>*,
                                                 const ScalarState<double>*, RecordedCall*);

}  // namespace detail

template <class T>
ScalarGradient<T> scalar_gradient(const Device& device, const ScalarInput<T>& in,
                                  const ScalarOptions& opt,
                                  std::span<const T> grad_receiver_amplitudes,
                                  const ScalarState<T>* initial, const ScalarState<T>* grad_final,
                                  Timers* timers) {
  if (opt.comm.distributed())
    return detail::scalar_gradient_on_ranks(device, in, opt, grad_receiver_amplitudes, initial,
                                            grad_final, timers);
  RecordedCall call("scalar_gradient", device, timers);
  ScalarGradient<T> grad =
      detail::gradient<T>(Context{device, call.timers()}, in, opt, grad_receiver_amplitudes,
                          initial, grad_final, &call);
  if (call.verifying()) {
    const ScalarGradient<T> expected = call.on_reference([&] {
      return scalar_gradient<T>(RecordedCall::reference_device(), in, opt, grad_receiver_amplitudes,
                                initial, grad_final);
    });
    const Precision precision = precision_of<T>();
    // grad_v comes from the stored steps, which compression rounds (case.hpp).
    const Tolerance stored = opt.storage_compression ? scalar_compressed_tolerance(precision, false)
                                                     : scalar_tolerance(precision, false);
    call.compare<T>("grad_v", grad.v, expected.v, stored);
    call.compare<T>("grad_source_amplitudes", grad.source_amplitudes, expected.source_amplitudes,
                    scalar_tolerance(precision, false));
    call.compare<T>("receiver_amplitudes", grad.forward.receiver_amplitudes,
                    expected.forward.receiver_amplitudes, scalar_tolerance(precision, false));
    compare_state(call, grad.initial_state, expected.initial_state, in.grid.ndim, "",
                  scalar_state_tolerance(precision, false), {"grad_initial_state['", "']"});
  }
  return grad;
}

#define SCIPROXY_INSTANTIATE(T)                                                                  \
  template std::array<std::int64_t, kMaxDims> scalar_state_shape<T>(                             \
      const ScalarInput<T>&, const ScalarOptions&, const ScalarState<T>*);                       \
  template ScalarOutput<T> scalar<T>(const Device&, const ScalarInput<T>&, const ScalarOptions&, \
                                     const ScalarState<T>*, Timers*);                            \
  template ScalarGradient<T> scalar_gradient<T>(                                                 \
      const Device&, const ScalarInput<T>&, const ScalarOptions&, std::span<const T>,            \
      const ScalarState<T>*, const ScalarState<T>*, Timers*);
SCIPROXY_INSTANTIATE(float)
SCIPROXY_INSTANTIATE(double)
#undef SCIPROXY_INSTANTIATE

}  // namespace sciproxy::wave
