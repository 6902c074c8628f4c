// wave: Born (linearised) modelling, Deepwave's scalar_born (include/sciproxy/wave.hpp; see
// docs/kernels/scalar-wave.md). The scattered field u_sc is the exact derivative of the forward
// wavefield in the direction `scatter` of v:
//   u_sc^{t+1} = v^2 dt^2 L u_sc^t + 2 u_sc^t - u_sc^{t-1} + 2 v scatter dt^2 L u^t
//                - 2 v scatter dt^2 f^t (at the source cells),
// so the Born data is J scatter (J: the Jacobian of scalar()'s receiver data with respect to v)
// and its adjoint, the migration image, is scalar_gradient's grad_v (api.cpp). Both entry points
// are recorded calls, as those of api.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "case.hpp"
#include "core/recorded_call.hpp"
#include "on_ranks.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/wave.hpp"
#include "setup.hpp"

namespace sciproxy::wave {

using namespace detail;
using seismic::check_grid;
using seismic::check_locations;
using seismic::shape_string;

// ---------------------------------------------------------------------------------------------
// Born modelling: the forward setup with the background receivers appended to the scattered
// ones (so that they count for the survey window and get the same checks), then split again;
// the scatter replicate-padded like v (the padding is linear, so J includes it).

namespace {

template <class T>
struct BornSetup {
  Setup<T> s;
  std::int64_t nbg = 0;
  std::vector<std::int64_t> bg_cells;  // [nshots, nbg] flat padded indices
  std::vector<T> scatter;              // padded, [nmodels, points]; zero when none was given
};

template <class T>
void make_born_setup(BornSetup<T>& b, const ScalarBornInput<T>& in, const ScalarOptions& opt,
                     std::int64_t store_interval, const ScalarState<T>* initial,
                     StateRole role = StateRole::initial) {
  const ScalarInput<T>& bg = in.background;
  const int ndim = std::clamp(bg.grid.ndim, 1, kMaxDims);
  require(in.nbg_receivers >= 0, "nbg_receivers", "a number of receivers per shot >= 0",
          std::to_string(in.nbg_receivers));
  require(bg.nshots >= 1, "nshots", "at least 1 shot", std::to_string(bg.nshots));
  require(bg.nreceivers >= 0, "nreceivers", "a number of receivers per shot >= 0",
          std::to_string(bg.nreceivers));
  const std::int64_t nsc = bg.nreceivers, nbg = in.nbg_receivers;
  // The background receivers get their own name in errors; make_setup checks the rest.
  check_grid(bg.grid);
  check_locations(in.bg_receiver_locations, bg.nshots, nbg, bg.grid, "bg_receiver_locations",
                  "bg_receiver", true);
  require(static_cast<std::int64_t>(bg.receiver_locations.size()) == bg.nshots * nsc * ndim,
          "receiver_locations",
          fmt::format("[nshots, nreceivers, ndim] = [{}, {}, {}], {} values", bg.nshots, nsc, ndim,
                      bg.nshots * nsc * ndim),
          fmt::format("{} values", bg.receiver_locations.size()));
  std::vector<std::int64_t> locations(static_cast<std::size_t>(bg.nshots * (nsc + nbg) * ndim));
  for (std::int64_t shot = 0; shot < bg.nshots; ++shot) {
    std::copy_n(bg.receiver_locations.data() + shot * nsc * ndim, nsc * ndim,
                locations.data() + shot * (nsc + nbg) * ndim);
    std::copy_n(in.bg_receiver_locations.data() + shot * nbg * ndim, nbg * ndim,
                locations.data() + (shot * (nsc + nbg) + nsc) * ndim);
  }
  ScalarInput<T> all = bg;
  all.nreceivers = nsc + nbg;
  all.receiver_locations = locations;
  Setup<T>& s = b.s;
  make_setup(s, all, opt, store_interval, initial, role, 2);

  // Split the receivers again.
  b.nbg = nbg;
  std::vector<std::int64_t> sc_cells(static_cast<std::size_t>(s.nshots * nsc));
  b.bg_cells.resize(static_cast<std::size_t>(s.nshots * nbg));
  for (std::int64_t shot = 0; shot < s.nshots; ++shot) {
    const std::int64_t* cells = s.receiver_cells.data() + shot * (nsc + nbg);
    std::copy_n(cells, nsc, sc_cells.data() + shot * nsc);
    std::copy_n(cells + nsc, nbg, b.bg_cells.data() + shot * nbg);
  }
  s.receiver_cells = std::move(sc_cells);
  s.nreceivers = nsc;
  s.problem.nreceivers = nsc;
  s.problem.receiver_cells = s.receiver_cells.data();
  s.problem.nbg_receivers = nbg;
  s.problem.bg_receiver_cells = b.bg_cells.data();

  // The scatter, padded as v.
  const std::int64_t cells = s.model_cells;
  if (!in.scatter.empty()) {
    require(static_cast<std::int64_t>(in.scatter.size()) == s.nmodels * cells, "scatter",
            fmt::format("the shape of v: nmodels x cells = {} x {} = {} values (model shape {})",
                        s.nmodels, cells, s.nmodels * cells, shape_string(bg.grid)),
            fmt::format("{} values", in.scatter.size()));
    for (std::size_t i = 0; i < in.scatter.size(); ++i)
      if (!std::isfinite(in.scatter[i]))
        throw_invalid_argument("scatter", "finite values",
                               fmt::format("{} in model {} at flat cell index {}", in.scatter[i],
                                           i / cells, i % cells));
  }
  b.scatter.assign(static_cast<std::size_t>(s.nmodels * s.points), T(0));
  if (!in.scatter.empty())
    for (std::int64_t m = 0; m < s.nmodels; ++m)
      s.for_each_padded([&](std::int64_t i, const Shape& p) {
        b.scatter[m * s.points + i] = in.scatter[m * cells + s.model_cell(p)];
      });
  s.problem.scatter = b.scatter.data();
}

template <class T>
void check_trace_gradient(std::span<const T> g, std::int64_t nshots, std::int64_t count,
                          std::int64_t nt, const char* name, const char* what) {
  const std::int64_t n = nshots * count * nt;
  require(g.empty() || static_cast<std::int64_t>(g.size()) == n, name,
          fmt::format("[nshots, {}, nt] = [{}, {}, {}], {} values, or none", what, nshots, count,
                      nt, n),
          fmt::format("{} values", g.size()));
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!std::isfinite(g[i]))
      throw_invalid_argument(name, "finite values", fmt::format("{} at flat index {}", g[i], i));
}

// v and scatter at the source cell of trace tr (shot-major [nshots, nsources]).
template <class T>
std::pair<double, double> source_models(const BornSetup<T>& b, std::int64_t tr) {
  const Setup<T>& s = b.s;
  const std::int64_t i =
      s.model_of(tr / std::max<std::int64_t>(s.nsources, 1)) * s.points + s.source_cells[tr];
  return {static_cast<double>(s.v[i]), static_cast<double>(b.scatter[i])};
}

// Two coupled fields: twice the forward's work, plus the coupling term per cell and step; the
// bytes of both fields and the scatter (api.cpp's work_model).
template <class T>
WorkModel born_work(const Setup<T>& s, Backend backend) {
  WorkModel w = work_model(s, 0, backend, 2);
  w.flops = 2 * w.flops + 4.0 * w.points;
  return w;
}

}  // namespace

template <class T>
ScalarBornOutput<T> scalar_born(const Device& device, const ScalarBornInput<T>& in,
                                const ScalarOptions& opt, const ScalarState<T>* initial,
                                const ScalarState<T>* initial_scattered, Timers* timers) {
  if (opt.comm.distributed())
    return detail::scalar_born_on_ranks(device, in, opt, initial, initial_scattered, timers);
  RecordedCall call("scalar_born", device, timers);
  ScalarBornOutput<T> out;
  int ndim = 0;
  {
    auto top = Timers::region(call.timers(), "scalar_born");  // closed before the reference rerun
    const Context context{device, call.timers()};
    BornSetup<T> b;
    Setup<T>& s = b.s;
    {
      auto r = Timers::region(context.timers, "setup");
      const bool background = has_fields(initial, in.background.grid.ndim);
      make_born_setup(b, in, opt, 0, background ? initial : initial_scattered,
                      background ? StateRole::initial : StateRole::initial_scattered);
      require(
          !in.scatter.empty() || s.model_cells == 0, "scatter",
          fmt::format("the scattering model, of v's shape ({} values)", s.nmodels * s.model_cells),
          "none");
      out.state = make_state(s, initial, StateRole::initial);
      out.scattered_state = make_state(s, initial_scattered, StateRole::initial_scattered);
    }
    ndim = s.ndim;
    std::vector<T> sources, scattered;
    {
      auto r = Timers::region(context.timers, "resample");
      std::vector<T> inner;
      sources = scaled_sources<T>(s, in.background.source_amplitudes, &inner);
      // -2 v scatter dt^2 f: the derivative of the background's scaling -v^2 dt^2 f.
      const std::int64_t ntr = s.nshots * s.nsources;
      const double dt2 = s.inner_dt * s.inner_dt;
      scattered.resize(sources.size());
      for (std::int64_t tr = 0; tr < ntr; ++tr) {
        auto [vs, ss] = source_models(b, tr);
        if (s.source_cells[tr] == kIgnoredCell) ss = 0;  // it injects nothing
        for (std::int64_t t = 0; t < s.nt_inner; ++t)
          scattered[t * ntr + tr] = static_cast<T>(-2 * vs * ss * dt2 * inner[tr * s.nt_inner + t]);
      }
    }
    std::vector<T> rec_tm(static_cast<std::size_t>(s.nt_inner * s.nshots * s.nreceivers)),
        bg_tm(static_cast<std::size_t>(s.nt_inner * s.nshots * b.nbg));
    if (opt.autotune) {
      auto r = Timers::region(context.timers, "autotune");
      ScalarState<T> copy, copy_scattered;  // assigned again before each trial
      autotune_forward<T>(device, s, "scalar_born_forward",
                          [&](const kernels::ScalarProblem<T>& p) {
                            copy = out.state;
                            copy_scattered = out.scattered_state;
                            const Context quiet{device, nullptr};  // not the call's timings
                            SCIPROXY_RUN_KERNEL(quiet, scalar_born_forward, p, fields_of(s, copy),
                                                fields_of(s, copy_scattered), sources.data(),
                                                scattered.data(), rec_tm.data(), bg_tm.data());
                          });
    }
    out.work = born_work(s, device.backend);  // of the tuning that runs
    call.set_work(out.work);
    set_parameters(call, s, opt);
    if (s.nt_inner > 0) {
      auto r = Timers::region(context.timers, "forward");
      SCIPROXY_RUN_KERNEL(context, scalar_born_forward, s.problem, fields_of(s, out.state),
                          fields_of(s, out.scattered_state), sources.data(), scattered.data(),
                          rec_tm.data(), bg_tm.data());
    }
    {
      auto r = Timers::region(context.timers, "resample");
      out.receiver_amplitudes = traces_out(s, s.nreceivers, rec_tm);
      out.bg_receiver_amplitudes = traces_out(s, b.nbg, bg_tm);
    }
    out.step_ratio = s.step_ratio;
    out.inner_dt = s.inner_dt;
  }
  if (call.verifying()) {
    const ScalarBornOutput<T> expected = call.on_reference([&] {
      return scalar_born<T>(RecordedCall::reference_device(), in, opt, initial, initial_scattered);
    });
    const Precision precision = precision_of<T>();
    const Tolerance traces = scalar_tolerance(precision, true);
    call.compare<T>("receiver_amplitudes", out.receiver_amplitudes, expected.receiver_amplitudes,
                    traces);
    call.compare<T>("bg_receiver_amplitudes", out.bg_receiver_amplitudes,
                    expected.bg_receiver_amplitudes, traces);
    compare_state(call, out.state, expected.state, ndim, "",
                  scalar_state_tolerance(precision, false), {"", ""});
    compare_state(call, out.scattered_state, expected.scattered_state, ndim, "_sc",
                  scalar_state_tolerance(precision, true), {"", ""});
  }
  return out;
}

namespace {

template <class T>
void born_gradient(const Context& context, const ScalarBornInput<T>& in, const ScalarOptions& opt,
                   std::span<const T> grad_receiver_amplitudes,
                   std::span<const T> grad_bg_receiver_amplitudes, bool source_gradient,
                   const ScalarState<T>* initial, RecordedCall& call, ScalarBornGradient<T>& grad) {
  Timers* const timers = context.timers;
  BornSetup<T> b;
  Setup<T>& s = b.s;
  {
    auto r = Timers::region(timers, "setup");
    make_born_setup(b, in, opt, 0, initial);
    check_trace_gradient(grad_receiver_amplitudes, s.nshots, s.nreceivers, s.nt,
                         "grad_receiver_amplitudes", "nreceivers");
    check_trace_gradient(grad_bg_receiver_amplitudes, s.nshots, b.nbg, s.nt,
                         "grad_bg_receiver_amplitudes", "nbg_receivers");
  }
  // The Born data is J scatter (J: the Jacobian of scalar()'s receiver data with respect to v),
  // so the image J^T d is scalar_gradient's velocity gradient for the data gradient d.
  {
    ScalarGradient<T> g = detail::gradient<T>(context, in.background, opt, grad_receiver_amplitudes,
                                              initial, nullptr, nullptr);
    grad.scatter = std::move(g.v);
    grad.forward = std::move(g.forward);
    grad.work = g.work;
  }
  const bool sources = source_gradient && s.nsources > 0 && s.nt_inner > 0;
  // The image: the background forward pass (with its stores) and its adjoint; the source
  // gradient: the adjoint of the coupled fields, counted as a Born pass.
  const WorkModel coupled = sources ? born_work(s, context.device.backend) : WorkModel{};
  grad.work.points += coupled.points;
  grad.work.flops += coupled.flops;
  grad.work.bytes += coupled.bytes;
  call.set_work(grad.work);
  set_parameters(call, s, opt);
  if (!sources) return;

  // The source gradient: the adjoint of the coupled fields (it needs nothing of the forward pass).
  ScalarState<T> adjoint =
      make_state(s, static_cast<const ScalarState<T>*>(nullptr), StateRole::grad_final);
  ScalarState<T> adjoint_sc = adjoint;
  const std::int64_t ntr = s.nshots * s.nsources;
  std::vector<T> gs(static_cast<std::size_t>(s.nt_inner * ntr), T(0)), gss(gs.size(), T(0));
  {
    std::vector<T> grad_rec, grad_bg;
    {
      auto r = Timers::region(timers, "resample");
      grad_rec =
          traces_in_adjoint(s, s.nreceivers, s.receiver_cells.data(), grad_receiver_amplitudes);
      grad_bg = traces_in_adjoint(s, b.nbg, b.bg_cells.data(), grad_bg_receiver_amplitudes);
    }
    auto r = Timers::region(timers, "born_backward");
    SCIPROXY_RUN_KERNEL(context, scalar_born_backward, s.problem, fields_of(s, adjoint),
                        fields_of(s, adjoint_sc), grad_rec.data(), grad_bg.data(), gs.data(),
                        gss.data());
  }
  {
    auto r = Timers::region(timers, "resample");
    // Through the scalings -v^2 dt^2 f (background) and -2 v scatter dt^2 f (scattered).
    const double dt2 = s.inner_dt * s.inner_dt;
    std::vector<T> grad_inner(static_cast<std::size_t>(ntr * s.nt_inner), T(0));
    for (std::int64_t tr = 0; tr < ntr; ++tr) {
      if (s.source_cells[tr] == kIgnoredCell) continue;  // it injects nothing
      const auto [vs, ss] = source_models(b, tr);
      for (std::int64_t t = 0; t < s.nt_inner; ++t)
        grad_inner[tr * s.nt_inner + t] =
            static_cast<T>(-vs * vs * dt2 * static_cast<double>(gs[t * ntr + tr]) -
                           2 * vs * ss * dt2 * static_cast<double>(gss[t * ntr + tr]));
    }
    grad.source_amplitudes.assign(static_cast<std::size_t>(ntr * s.nt), T(0));
    detail::upsample_adjoint(grad_inner.data(), ntr, s.nt, s.resampling,
                             grad.source_amplitudes.data());
  }
}

}  // namespace

template <class T>
ScalarBornGradient<T> scalar_born_gradient(const Device& device, const ScalarBornInput<T>& in,
                                           const ScalarOptions& opt,
                                           std::span<const T> grad_receiver_amplitudes,
                                           std::span<const T> grad_bg_receiver_amplitudes,
                                           bool source_gradient, const ScalarState<T>* initial,
                                           Timers* timers) {
  if (opt.comm.distributed())
    return detail::scalar_born_gradient_on_ranks(device, in, opt, grad_receiver_amplitudes,
                                                 grad_bg_receiver_amplitudes, source_gradient,
                                                 initial, timers);
  RecordedCall call("scalar_born_gradient", device, timers);
  ScalarBornGradient<T> grad;
  {
    auto top = Timers::region(call.timers(), "scalar_born_gradient");  // closed before the rerun
    const Context context{device, call.timers()};
    born_gradient(context, in, opt, grad_receiver_amplitudes, grad_bg_receiver_amplitudes,
                  source_gradient, initial, call, grad);
  }
  if (call.verifying()) {
    const ScalarBornGradient<T> expected = call.on_reference([&] {
      return scalar_born_gradient<T>(RecordedCall::reference_device(), in, opt,
                                     grad_receiver_amplitudes, grad_bg_receiver_amplitudes,
                                     source_gradient, initial);
    });
    const Precision precision = precision_of<T>();
    // The image comes from the stored steps, which compression rounds (case.hpp).
    call.compare<T>("grad_scatter", grad.scatter, expected.scatter,
                    opt.storage_compression ? scalar_compressed_tolerance(precision, true)
                                            : scalar_tolerance(precision, true));
    call.compare<T>("grad_source_amplitudes", grad.source_amplitudes, expected.source_amplitudes,
                    scalar_tolerance(precision, true));
  }
  return grad;
}

#define SCIPROXY_INSTANTIATE_BORN(T)                                                       \
  template ScalarBornOutput<T> scalar_born<T>(const Device&, const ScalarBornInput<T>&,    \
                                              const ScalarOptions&, const ScalarState<T>*, \
                                              const ScalarState<T>*, Timers*);             \
  template ScalarBornGradient<T> scalar_born_gradient<T>(                                  \
      const Device&, const ScalarBornInput<T>&, const ScalarOptions&, std::span<const T>,  \
      std::span<const T>, bool, const ScalarState<T>*, Timers*);
SCIPROXY_INSTANTIATE_BORN(float)
SCIPROXY_INSTANTIATE_BORN(double)
#undef SCIPROXY_INSTANTIATE_BORN

}  // namespace sciproxy::wave
