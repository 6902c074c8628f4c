// wave: scalar propagator front end. Argument checks, survey window, padded grid and model,
// PML profiles, CFL step ratio, resampling and scaling of the sources, dispatch to a backend,
// storage of what the gradient needs, and the adjoint of all of it (Deepwave's scalar propagator,
// deepwave/scalar.py and _common.py, v0.1; see docs/kernels/scalar-wave.md).
//
//   u^{t+1} = v^2 dt^2 L u^t + 2 u^t - u^{t-1} - v^2 dt^2 f^t,    receivers^t = u^t
//
// The user's samples (interval dt) become step_ratio inner steps of dt / step_ratio each:
// sources are upsampled (resample.hpp) and scaled by -v(source cell)^2 dt_inner^2, the inner
// receiver samples are downsampled. The padded grid per dimension is
// [halo | PML low | survey window | PML high | halo] with the window replicate-padded into PML and
// halo (scalar_kernels.hpp). scalar_gradient runs the forward pass storing 2 v dt^2 W every
// model_gradient_sampling_interval inner steps, then the exact adjoint, and maps every gradient
// back through the adjoints of scaling, resampling and padding.
#include "sciproxy/wave.hpp"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "seismic/checks.hpp"
#include "pml.hpp"
#include "resample.hpp"
#include "scalar_kernels.hpp"
#include "sciproxy/core/error.hpp"

namespace sciproxy::wave {


namespace {

using Shape = std::array<std::int64_t, kMaxDims>;
constexpr double kCourant = 0.6;                // Deepwave's CFL number
constexpr std::int64_t kStepRatioWarning = 20;  // Deepwave warns from here on
constexpr double kChunkBytes =
    64.0 * 1024 * 1024;             // stored steps per forward call (disk, compression)
constexpr std::int64_t kBlock = 8;  // compression block edge (cells)

std::string join(const std::int64_t* x, int n, const char* sep) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? sep : "") + std::to_string(x[i]);
  return s;
}

using seismic::check_grid;
using seismic::check_locations;
using seismic::is_ignored;
using seismic::shape_string;

void check_dt(double dt) {
  require(std::isfinite(dt) && dt > 0, "dt", "a positive, finite time step in seconds",
          fmt::format("{}", dt));
}

void check_max_vel(double max_vel) {
  require(std::isfinite(max_vel) && max_vel >= 0, "max_vel",
          "a finite velocity >= 0 in m/s (0: the largest |v| of the model)",
          fmt::format("{}", max_vel));
}

}  // namespace

TimeStepping cfl_time_stepping(const Grid& grid, double dt, double max_vel) {
  check_grid(grid);
  check_dt(dt);
  check_max_vel(max_vel);
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

namespace {

// ---------------------------------------------------------------------------------------------
// Argument checks

// Where ignored sources and receivers point on the padded grid: the first halo cell, which every
// wavefield keeps at zero, so they record zeros; their source amplitudes and receiver gradients
// are zeroed here, so nothing is ever injected there.
constexpr std::int64_t kIgnoredCell = 0;

template <class T>
std::int64_t check_input(const ScalarInput<T>& in, const ScalarOptions& opt) {
  const Grid& g = in.grid;
  check_grid(g);
  require(opt.accuracy == 2 || opt.accuracy == 4 || opt.accuracy == 6 || opt.accuracy == 8,
          "accuracy", "2, 4, 6 or 8", std::to_string(opt.accuracy));
  for (int d = 0; d < g.ndim; ++d)
    require(g.shape[d] >= opt.accuracy / 2, fmt::format("model shape[{}]", d),
            fmt::format("at least accuracy/2 = {} cells for the stencil of accuracy {}",
                        opt.accuracy / 2, opt.accuracy),
            std::to_string(g.shape[d]));
  require(in.nshots >= 1, "nshots", "at least 1 shot", std::to_string(in.nshots));
  require(in.nmodels == 1 || in.nmodels == in.nshots, "nmodels",
          fmt::format("1 (one model for all shots) or nshots = {}", in.nshots),
          std::to_string(in.nmodels));
  const std::int64_t cells = g.cells();
  require(static_cast<std::int64_t>(in.v.size()) == in.nmodels * cells, "v",
          fmt::format("nmodels x cells = {} x {} = {} values (model shape {})", in.nmodels, cells,
                      in.nmodels * cells, shape_string(g)),
          fmt::format("{} values", in.v.size()));
  for (std::size_t i = 0; i < in.v.size(); ++i)
    if (!std::isfinite(in.v[i]))
      throw_invalid_argument(
          "v", "finite velocities",
          fmt::format("{} in model {} at flat cell index {}", in.v[i], i / cells, i % cells));
  check_dt(in.dt);
  require(in.nt >= 0, "nt", "a number of time samples >= 0 (0: from source_amplitudes)",
          std::to_string(in.nt));
  require(in.nsources >= 0, "nsources", "a number of sources per shot >= 0",
          std::to_string(in.nsources));
  require(in.nreceivers >= 0, "nreceivers", "a number of receivers per shot >= 0",
          std::to_string(in.nreceivers));

  // nt: given, or inferred from the source amplitudes.
  std::int64_t nt = in.nt;
  const std::int64_t ntraces = in.nshots * in.nsources;
  const auto namp = static_cast<std::int64_t>(in.source_amplitudes.size());
  if (nt == 0 && ntraces > 0 && namp > 0) {
    require(namp % ntraces == 0, "source_amplitudes",
            fmt::format("[nshots, nsources, nt] = [{}, {}, nt] values, a multiple of {}", in.nshots,
                        in.nsources, ntraces),
            fmt::format("{} values", namp));
    nt = namp / ntraces;
  }
  require(namp == ntraces * nt, "source_amplitudes",
          fmt::format("[nshots, nsources, nt] = [{}, {}, {}], {} values", in.nshots, in.nsources,
                      nt, ntraces * nt),
          fmt::format("{} values", namp));
  for (std::int64_t i = 0; i < namp; ++i)
    if (!std::isfinite(in.source_amplitudes[i]))
      throw_invalid_argument(
          "source_amplitudes", "finite values",
          fmt::format("{} at [shot {}, source {}, sample {}]", in.source_amplitudes[i],
                      i / (in.nsources * nt), (i / nt) % in.nsources, i % nt));

  // Locations: cell indices inside the model; the sources of one shot in distinct cells.
  check_locations(in.source_locations, in.nshots, in.nsources, g, "source_locations", "source",
                  true);
  check_locations(in.receiver_locations, in.nshots, in.nreceivers, g, "receiver_locations",
                  "receiver", true);
  for (std::int64_t s = 0; s < in.nshots; ++s) {
    std::vector<std::pair<std::vector<std::int64_t>, std::int64_t>> cells_of;
    for (std::int64_t k = 0; k < in.nsources; ++k) {
      const std::int64_t* x = in.source_locations.data() + (s * in.nsources + k) * g.ndim;
      if (!is_ignored(x, g.ndim)) cells_of.push_back({std::vector<std::int64_t>(x, x + g.ndim), k});
    }
    std::sort(cells_of.begin(), cells_of.end());
    for (std::size_t k = 1; k < cells_of.size(); ++k)
      if (cells_of[k].first == cells_of[k - 1].first)
        throw_invalid_argument(
            "source_locations", "distinct cells for the sources of one shot",
            fmt::format("sources {} and {} of shot {} both at [{}]", cells_of[k - 1].second,
                        cells_of[k].second, s, join(cells_of[k].first.data(), g.ndim, ", ")));
  }

  for (int i = 0; i < 2 * g.ndim; ++i) {
    require(opt.pml_width[i] >= 0, fmt::format("pml_width[{}]", i), "a PML width >= 0 cells",
            std::to_string(opt.pml_width[i]));
    require(opt.survey_pad[i] >= -1, fmt::format("survey_pad[{}]", i),
            "a number of cells >= 0, or -1 for the edge of the model",
            std::to_string(opt.survey_pad[i]));
  }
  if (opt.origin) {
    for (int d = 0; d < g.ndim; ++d)
      require((*opt.origin)[d] >= 0 && (*opt.origin)[d] < g.shape[d], fmt::format("origin[{}]", d),
              fmt::format("a model cell index in [0, {})", g.shape[d]),
              std::to_string((*opt.origin)[d]));
    for (int i = 0; i < 2 * g.ndim; ++i)
      require(opt.survey_pad[i] == -1, "origin",
              "no origin when survey_pad is given (the window comes from one or the other)",
              fmt::format("an origin together with survey_pad[{}] = {}", i, opt.survey_pad[i]));
  }
  require(std::isfinite(opt.pml_freq) && opt.pml_freq >= 0, "pml_freq",
          "a finite frequency >= 0 in Hz", fmt::format("{}", opt.pml_freq));
  check_max_vel(opt.max_vel);
  require(opt.model_gradient_sampling_interval >= 1, "model_gradient_sampling_interval",
          "at least 1", std::to_string(opt.model_gradient_sampling_interval));
  require(opt.freq_taper_frac >= 0 && opt.freq_taper_frac <= 1, "freq_taper_frac",
          "a fraction in [0, 1]", fmt::format("{}", opt.freq_taper_frac));
  require(opt.time_pad_frac >= 0 && opt.time_pad_frac <= 1, "time_pad_frac", "a fraction in [0, 1]",
          fmt::format("{}", opt.time_pad_frac));
  require(opt.storage == StorageMode::device || opt.storage == StorageMode::host ||
              opt.storage == StorageMode::disk || opt.storage == StorageMode::none,
          "storage_mode", "device, host ('cpu'), disk or none",
          std::to_string(static_cast<int>(opt.storage)));
  require(opt.nparallel >= 0, "nparallel", "a positive thread count (or 0 for all)",
          std::to_string(opt.nparallel));
  return nt;
}

// ---------------------------------------------------------------------------------------------
// The padded problem

template <class T>
struct Setup {
  int ndim = 1, accuracy = 4;
  std::int64_t halo = 2;
  std::int64_t nshots = 1, nmodels = 1, nsources = 0, nreceivers = 0;
  std::int64_t nt = 0, nt_inner = 0, step_ratio = 1;
  double inner_dt = 0, max_vel = 0;
  Shape model_shape = {1, 1, 1};
  Shape begin = {0, 0, 0}, end = {1, 1, 1};  // survey window in model cells, [begin, end)
  Shape offset = {0, 0, 0};                  // padded index of the window's first cell
  Shape n = {1, 1, 1};                       // padded shape
  std::array<std::int64_t, 2 * kMaxDims> pml_width = {0, 0, 0, 0, 0, 0};
  std::int64_t points = 1;
  std::int64_t model_cells = 1;
  std::vector<T> v;  // padded: [nmodels, points]
  std::array<std::vector<T>, kMaxDims> a, b, dbdx;
  std::vector<std::int64_t> source_cells, receiver_cells;  // flat padded indices
  detail::Resampling resampling;
  kernels::ScalarProblem<T> problem;

  std::int64_t model_of(std::int64_t shot) const { return nmodels == 1 ? 0 : shot; }
  // Model cell whose value padded cell p carries (replicate padding of the window).
  std::int64_t model_cell(const Shape& p) const {
    std::int64_t c = 0;
    for (int d = 0; d < kMaxDims; ++d)
      c = c * model_shape[d] + std::clamp(p[d] - offset[d] + begin[d], begin[d], end[d] - 1);
    return c;
  }
  template <class F>
  void for_each_padded(F&& f) const {
    for (std::int64_t i0 = 0; i0 < n[0]; ++i0)
      for (std::int64_t i1 = 0; i1 < n[1]; ++i1)
        for (std::int64_t i2 = 0; i2 < n[2]; ++i2)
          f((i0 * n[1] + i1) * n[2] + i2, Shape{i0, i1, i2});
  }
  std::int64_t padded_cell(const std::int64_t* loc) const {
    if (is_ignored(loc, ndim)) return kIgnoredCell;
    std::int64_t c = 0;
    for (int d = 0; d < kMaxDims; ++d)
      c = c * n[d] + (d < ndim ? loc[d] - begin[d] + offset[d] : 0);
    return c;
  }
};

template <class T>
bool has_fields(const ScalarState<T>* st, int ndim) {
  if (!st) return false;
  bool any = !st->wavefield.empty() || !st->previous_wavefield.empty();
  for (int d = 0; d < ndim; ++d) any = any || !st->psi[d].empty() || !st->zeta[d].empty();
  return any;
}

// Which state an error is about. Errors name its fields as the API does (Deepwave's names):
// wavefield_0, wavefield_m1, psi<d>_m1 and zeta<d>_m1 with d the z, y, x of the last ndim
// dimensions; _sc before the time suffix for Born's scattered field; grad_final_state['...'] for
// the gradient with respect to the final state.
enum class StateRole { initial, initial_scattered, grad_final };

std::string state_field(StateRole role, const std::string& field, const char* time) {
  const std::string name = field + (role == StateRole::initial_scattered ? "_sc_" : "_") + time;
  return role == StateRole::grad_final ? fmt::format("grad_final_state['{}']", name) : name;
}

std::string state_field(StateRole role, const char* field, int d, int ndim) {
  return state_field(role, field + std::string(1, "zyx"[kMaxDims - ndim + d]), "m1");
}

// The padded shape is that of every field of a state; errors name the first.
std::string padded_shape_name(StateRole role) {
  return state_field(role, "wavefield", "0") +
         (role == StateRole::grad_final ? " (and every field of grad_final_state"
          : role == StateRole::initial  ? " (and every initial wavefield"
                                        : " (and every initial scattered wavefield") +
         ", shape [n_shots, *padded_shape])";
}

// Deepwave's rule for continuing a run: without survey_pad, an initial state fixes the window.
// It starts at opt.origin (default the first model cell) and spans the state's padded shape less
// the PML and the halo; every source and receiver must lie inside it.
template <class T>
void window_from_state(Setup<T>& s, const ScalarInput<T>& in, const ScalarOptions& opt,
                       const ScalarState<T>* initial, StateRole role) {
  const bool from_state = has_fields(initial, s.ndim) &&
                          std::all_of(opt.survey_pad.begin(), opt.survey_pad.begin() + 2 * s.ndim,
                                      [](std::int64_t p) { return p == -1; });
  if (!from_state) {
    require(!opt.origin, "origin",
            "an origin only together with an initial state (it places that state's window)",
            "an origin without an initial wavefield");
    return;
  }
  for (int d = 0; d < s.ndim; ++d) {
    const std::int64_t first = opt.origin ? (*opt.origin)[d] : 0;
    const std::int64_t extent =
        initial->padded_shape[d] - 2 * s.halo - s.pml_width[2 * d] - s.pml_width[2 * d + 1];
    require(extent >= 1 && first + extent <= s.model_shape[d], padded_shape_name(role),
            fmt::format("in dimension {}, a window of at least one cell inside the model once "
                        "the PML ({} + {}) and halo (2 x {}) are taken off, from origin {} to at "
                        "most the model's {} cells",
                        d, s.pml_width[2 * d], s.pml_width[2 * d + 1], s.halo, first,
                        s.model_shape[d]),
            fmt::format("{} cells (a window of {})", initial->padded_shape[d], extent));
    s.begin[d] = first;
    s.end[d] = first + extent;
  }
  auto check_inside = [&](std::span<const std::int64_t> loc, const char* name) {
    for (std::size_t i = 0; i < loc.size(); i += static_cast<std::size_t>(s.ndim)) {
      if (is_ignored(loc.data() + i, s.ndim)) continue;
      for (int d = 0; d < s.ndim; ++d)
        if (loc[i + d] < s.begin[d] || loc[i + d] >= s.end[d])
          throw_invalid_argument(
              name,
              fmt::format("locations inside the initial state's window, cells [{}, {}) of "
                          "dimension {} (set by origin and the state's shape)",
                          s.begin[d], s.end[d], d),
              fmt::format("{} in dimension {} (entry {})", loc[i + d], d,
                          i / static_cast<std::size_t>(s.ndim)));
    }
  };
  check_inside(in.source_locations, "source_locations");
  check_inside(in.receiver_locations, "receiver_locations");
}

// Fills s in place: s.problem points into s's own arrays.
template <class T>
void make_setup(Setup<T>& s, const ScalarInput<T>& in, const ScalarOptions& opt,
                std::int64_t store_interval, const ScalarState<T>* initial,
                StateRole role = StateRole::initial) {
  s.nt = check_input(in, opt);
  const Grid& g = in.grid;
  s.ndim = g.ndim;
  s.accuracy = opt.accuracy;
  s.halo = opt.accuracy / 2;
  s.nshots = in.nshots;
  s.nmodels = in.nmodels;
  s.nsources = in.nsources;
  s.nreceivers = in.nreceivers;
  for (int d = 0; d < s.ndim; ++d) s.model_shape[d] = g.shape[d];
  s.model_cells = g.cells();
  for (int i = 0; i < 2 * s.ndim; ++i) s.pml_width[i] = opt.pml_width[i];

  // max_vel: the largest |v| unless given, in which case it must bound the model.
  double vmax = 0;
  for (T x : in.v) vmax = std::max(vmax, std::abs(static_cast<double>(x)));
  s.max_vel = opt.max_vel > 0 ? opt.max_vel : vmax;
  if (opt.max_vel > 0)
    require(
        opt.max_vel >= vmax * (1 - 1e-12), "max_vel",
        fmt::format("at least the largest |v| of the model ({} m/s), or 0 for that value", vmax),
        fmt::format("{}", opt.max_vel));
  const TimeStepping ts = cfl_time_stepping(g, in.dt, s.max_vel);
  s.inner_dt = ts.inner_dt;
  s.step_ratio = ts.step_ratio;
  require(s.nt <= std::numeric_limits<std::int64_t>::max() / s.step_ratio, "nt",
          "nt x step_ratio inner steps that fit in int64",
          fmt::format("{} x {}", s.nt, s.step_ratio));
  s.nt_inner = s.nt * s.step_ratio;
  if (s.step_ratio >= kStepRatioWarning)
    std::fprintf(
        stderr,
        "sciproxy: warning: scalar: dt = %g s is %lld times the stable inner time step; the "
        "propagator takes %lld inner steps per sample (reduce dt, or check max_vel and "
        "grid_spacing)\n",
        in.dt, static_cast<long long>(s.step_ratio), static_cast<long long>(s.step_ratio));
  s.resampling = {s.step_ratio, opt.freq_taper_frac, opt.time_pad_frac, opt.time_taper};

  // Survey window: the cells spanned by all sources and receivers, widened by survey_pad.
  const bool any_location = in.nshots * (in.nsources + in.nreceivers) > 0;
  for (int d = 0; d < s.ndim; ++d) {
    std::int64_t lo = g.shape[d], hi = -1;
    auto span = [&](std::span<const std::int64_t> loc) {
      for (std::size_t i = 0; i < loc.size(); i += static_cast<std::size_t>(s.ndim)) {
        if (is_ignored(loc.data() + i, s.ndim)) continue;
        lo = std::min(lo, loc[i + d]);
        hi = std::max(hi, loc[i + d]);
      }
    };
    span(in.source_locations);
    span(in.receiver_locations);
    const std::int64_t pad_lo = opt.survey_pad[2 * d], pad_hi = opt.survey_pad[2 * d + 1];
    const bool located = any_location && hi >= 0;  // some location not ignored
    s.begin[d] = pad_lo < 0 || !located ? 0 : std::clamp(lo - pad_lo, std::int64_t(0), g.shape[d]);
    s.end[d] = pad_hi < 0 || !located ? g.shape[d]
                                      : std::clamp(hi + pad_hi + 1, std::int64_t(0), g.shape[d]);
  }
  window_from_state(s, in, opt, initial, role);
  for (int d = 0; d < s.ndim; ++d) {
    s.offset[d] = s.halo + s.pml_width[2 * d];
    s.n[d] = (s.end[d] - s.begin[d]) + 2 * s.halo + s.pml_width[2 * d] + s.pml_width[2 * d + 1];
  }
  s.points = s.n[0] * s.n[1] * s.n[2];

  // Padded model(s).
  s.v.resize(static_cast<std::size_t>(s.nmodels * s.points));
  for (std::int64_t m = 0; m < s.nmodels; ++m)
    s.for_each_padded([&](std::int64_t i, const Shape& p) {
      s.v[m * s.points + i] = in.v[m * s.model_cells + s.model_cell(p)];
    });

  const detail::PmlProfiles pml = detail::make_pml_profiles(
      s.ndim, s.accuracy, s.n, s.pml_width, g.spacing, s.inner_dt, s.max_vel, opt.pml_freq);
  for (int d = 0; d < s.ndim; ++d) {
    s.a[d].assign(pml.a[d].begin(), pml.a[d].end());
    s.b[d].assign(pml.b[d].begin(), pml.b[d].end());
    s.dbdx[d].assign(pml.dbdx[d].begin(), pml.dbdx[d].end());
  }

  s.source_cells.resize(static_cast<std::size_t>(s.nshots * s.nsources));
  for (std::size_t i = 0; i < s.source_cells.size(); ++i)
    s.source_cells[i] = s.padded_cell(in.source_locations.data() + i * s.ndim);
  s.receiver_cells.resize(static_cast<std::size_t>(s.nshots * s.nreceivers));
  for (std::size_t i = 0; i < s.receiver_cells.size(); ++i)
    s.receiver_cells[i] = s.padded_cell(in.receiver_locations.data() + i * s.ndim);

  kernels::ScalarProblem<T>& p = s.problem;
  p.ndim = s.ndim;
  p.accuracy = s.accuracy;
  p.nshots = s.nshots;
  p.n = s.n;
  for (int d = 0; d < s.ndim; ++d) {
    p.rdx[d] = static_cast<T>(1 / g.spacing[d]);
    p.rdx2[d] = static_cast<T>(1 / (g.spacing[d] * g.spacing[d]));
    p.a[d] = s.a[d].data();
    p.b[d] = s.b[d].data();
    p.dbdx[d] = s.dbdx[d].data();
  }
  p.dt2 = static_cast<T>(s.inner_dt * s.inner_dt);
  p.v = s.v.data();
  p.v_batched = s.nmodels > 1;
  p.pml_interior = detail::pml_interior(s.ndim, s.accuracy, s.n, s.pml_width);
  p.nsources = s.nsources;
  p.nreceivers = s.nreceivers;
  p.source_cells = s.source_cells.data();
  p.receiver_cells = s.receiver_cells.data();
  p.nt = s.nt_inner;
  p.store_interval = store_interval;
}

// The state the kernels assume: zero in the halo, psi_x and zeta_x zero outside the PML slabs of
// dimension x (Deepwave's zero_interior). This projection is applied to every state that enters
// (and, being its own adjoint, to every state gradient that leaves).
template <class T>
void project_state(const Setup<T>& s, ScalarState<T>& st) {
  auto in_halo = [&](const Shape& p) {
    for (int d = 0; d < s.ndim; ++d)
      if (p[d] < s.halo || p[d] >= s.n[d] - s.halo) return true;
    return false;
  };
  for (std::int64_t shot = 0; shot < s.nshots; ++shot) {
    const std::int64_t base = shot * s.points;
    s.for_each_padded([&](std::int64_t i, const Shape& p) {
      if (in_halo(p)) {
        st.wavefield[base + i] = st.previous_wavefield[base + i] = 0;
        for (int d = 0; d < s.ndim; ++d) st.psi[d][base + i] = st.zeta[d][base + i] = 0;
        return;
      }
      for (int d = 0; d < s.ndim; ++d)
        if (p[d] >= s.halo + s.pml_width[2 * d] && p[d] < s.n[d] - s.halo - s.pml_width[2 * d + 1])
          st.psi[d][base + i] = st.zeta[d][base + i] = 0;
    });
  }
}

// A full state on the padded grid from an optional one (any field may be empty: zero).
template <class T>
ScalarState<T> make_state(const Setup<T>& s, const ScalarState<T>* given, StateRole role) {
  ScalarState<T> st;
  st.padded_shape = s.n;
  const auto size = static_cast<std::size_t>(s.nshots * s.points);
  auto fill = [&](std::vector<T>& dst, const std::vector<T>* src, const std::string& field) {
    if (src && !src->empty()) {
      require(src->size() == size, field,
              fmt::format("[nshots, *padded_shape] = [{}, {}], {} values, or none", s.nshots,
                          join(s.n.data(), s.ndim, ", "), size),
              fmt::format("{} values", src->size()));
      dst = *src;
    } else {
      dst.assign(size, T(0));
    }
  };
  const bool any = has_fields(given, s.ndim);
  if (any) {
    Shape expected = s.n, got = given->padded_shape;
    for (int d = s.ndim; d < kMaxDims; ++d) got[d] = expected[d] = 1;
    require(got == expected, padded_shape_name(role),
            fmt::format("[{}] (survey window + PML + halo of accuracy/2 cells per side)",
                        join(s.n.data(), s.ndim, ", ")),
            fmt::format("[{}]", join(given->padded_shape.data(), s.ndim, ", ")));
  }
  const ScalarState<T>* src = any ? given : nullptr;
  const std::string u_name = state_field(role, "wavefield", "0");
  const std::string u_prev_name = state_field(role, "wavefield", "m1");
  fill(st.wavefield, src ? &src->wavefield : nullptr, u_name);
  fill(st.previous_wavefield, src ? &src->previous_wavefield : nullptr, u_prev_name);
  for (int d = 0; d < s.ndim; ++d) {
    fill(st.psi[d], src ? &src->psi[d] : nullptr, state_field(role, "psi", d, s.ndim));
    fill(st.zeta[d], src ? &src->zeta[d] : nullptr, state_field(role, "zeta", d, s.ndim));
  }
  auto check_finite = [&](const std::vector<T>& f, const std::string& field) {
    for (std::size_t i = 0; i < f.size(); ++i)
      if (!std::isfinite(f[i]))
        throw_invalid_argument(field, "finite values", fmt::format("{} at flat index {}", f[i], i));
  };
  if (src) {
    check_finite(st.wavefield, u_name);
    check_finite(st.previous_wavefield, u_prev_name);
    for (int d = 0; d < s.ndim; ++d) {
      check_finite(st.psi[d], state_field(role, "psi", d, s.ndim));
      check_finite(st.zeta[d], state_field(role, "zeta", d, s.ndim));
    }
  }
  if (src) project_state(s, st);  // a state of zeros is projected already
  return st;
}

template <class T>
kernels::ScalarFields<T> fields_of(const Setup<T>& s, ScalarState<T>& st) {
  kernels::ScalarFields<T> f;
  f.u = st.wavefield.data();
  f.u_prev = st.previous_wavefield.data();
  for (int d = 0; d < s.ndim; ++d) {
    f.psi[d] = st.psi[d].data();
    f.zeta[d] = st.zeta[d].data();
  }
  return f;
}

// ---------------------------------------------------------------------------------------------
// Sources and receivers: [shot, trace, user sample] <-> time-major inner samples

// Scaled inner sources [nt_inner, nshots, nsources] = -v_s^2 dt^2 upsample(amplitudes).
template <class T>
std::vector<T> scaled_sources(const Setup<T>& s, std::span<const T> amplitudes,
                              std::vector<T>* inner_out) {
  const std::int64_t ntr = s.nshots * s.nsources;
  std::vector<T> inner(static_cast<std::size_t>(ntr * s.nt_inner));
  detail::upsample(amplitudes.data(), ntr, s.nt, s.resampling, inner.data());
  std::vector<T> out(inner.size());
  const double dt2 = s.inner_dt * s.inner_dt;
  for (std::int64_t tr = 0; tr < ntr; ++tr) {
    const double vs =
        s.v[s.model_of(tr / std::max<std::int64_t>(s.nsources, 1)) * s.points + s.source_cells[tr]];
    const double scale = s.source_cells[tr] == kIgnoredCell ? 0.0 : -vs * vs * dt2;
    for (std::int64_t t = 0; t < s.nt_inner; ++t)
      out[t * ntr + tr] = static_cast<T>(scale * inner[tr * s.nt_inner + t]);
  }
  if (inner_out) *inner_out = std::move(inner);
  return out;
}

// out[c * rows + r] = in[r * cols + c], in tiles that fit in L1, the tiles shared among the
// threads (element by element, the writes or the reads stride a whole row).
template <class T>
void transpose(const T* in, std::int64_t rows, std::int64_t cols, T* out) {
  constexpr std::int64_t kTile = 32;
  const std::int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (rows * cols >= (std::int64_t(1) << 20))
  for (std::int64_t tile = 0; tile < row_tiles * col_tiles; ++tile) {
    const std::int64_t r0 = tile / col_tiles * kTile, c0 = tile % col_tiles * kTile;
    const std::int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
    for (std::int64_t c = c0; c < c1; ++c)
      for (std::int64_t r = r0; r < r1; ++r) out[c * rows + r] = in[r * cols + c];
  }
}

// [nt_inner, nshots, nreceivers] -> [nshots, nreceivers, nt]
template <class T>
std::vector<T> receivers_out(const Setup<T>& s, const std::vector<T>& tm) {
  const std::int64_t ntr = s.nshots * s.nreceivers;
  std::vector<T> traces(static_cast<std::size_t>(ntr * s.nt_inner)),
      out(static_cast<std::size_t>(ntr * s.nt));
  transpose(tm.data(), s.nt_inner, ntr, traces.data());
  detail::downsample(traces.data(), ntr, s.nt, s.resampling, out.data());
  return out;
}

// Adjoint of receivers_out: [nshots, nreceivers, nt] -> [nt_inner, nshots, nreceivers]
template <class T>
std::vector<T> receivers_in_adjoint(const Setup<T>& s, std::span<const T> grad) {
  const std::int64_t ntr = s.nshots * s.nreceivers;
  std::vector<T> traces(static_cast<std::size_t>(ntr * s.nt_inner)), tm(traces.size(), T(0));
  if (grad.empty()) return tm;
  detail::downsample_adjoint(grad.data(), ntr, s.nt, s.resampling, traces.data());
  transpose(traces.data(), ntr, s.nt_inner, tm.data());
  for (std::int64_t tr = 0; tr < ntr; ++tr)
    if (s.receiver_cells[tr] == kIgnoredCell)
      for (std::int64_t t = 0; t < s.nt_inner; ++t) tm[t * ntr + tr] = T(0);
  return tm;
}

// ---------------------------------------------------------------------------------------------
// Dispatch

template <class T>
void run_forward(const Device& device, const kernels::ScalarProblem<T>& p,
                 kernels::ScalarFields<T> f, const T* sources, T* receivers, T* stored,
                 int nparallel, Timers* timers) {
  switch (device.backend) {
    case Backend::reference:
      kernels::reference::scalar_forward(p, f, sources, receivers, stored);
      break;
    case Backend::cpu: {
      ThreadCount threads(nparallel);
      kernels::cpu::scalar_forward(p, f, sources, receivers, stored);
      break;
    }
    case Backend::cuda:
      kernels::cuda::scalar_forward(p, f, sources, receivers, stored, device.index, timers);
      break;
  }
}

template <class T>
void run_backward(const Device& device, const kernels::ScalarProblem<T>& p,
                  kernels::ScalarFields<T> f, const T* grad_receivers, T* grad_sources,
                  const T* stored, T* grad_v, int nparallel, Timers* timers) {
  switch (device.backend) {
    case Backend::reference:
      kernels::reference::scalar_backward(p, f, grad_receivers, grad_sources, stored, grad_v);
      break;
    case Backend::cpu: {
      ThreadCount threads(nparallel);
      kernels::cpu::scalar_backward(p, f, grad_receivers, grad_sources, stored, grad_v);
      break;
    }
    case Backend::cuda:
      kernels::cuda::scalar_backward(p, f, grad_receivers, grad_sources, stored, grad_v,
                                     device.index, timers);
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// Work model: points = cells of the padded grid outside the halo (model window + PML) x inner
// steps x shots. Flops per cell and step are those of the expressions in scalar_math.hpp:
// interior, per dimension D2 (2 + 3 h with h = accuracy/2) and the sum into W (1), then
// v*v*dt2*W + 2u - u_prev (6); per dimension in which a cell lies outside the interior box, the
// C-PML terms add D1 u (3h + 1), D1(a psi) (5h + 1), tmp (5), W (3 more), psi and zeta (6).
// Compulsory bytes per point: u^t, u^{t-1} and v read, u^{t+1} written (the PML arrays are
// small and stay in cache); the gradient's forward pass also writes what it stores.

template <class T>
WorkModel work_model(const Setup<T>& s, std::int64_t store_interval) {
  const std::int64_t h = s.halo;
  double cells = 1;
  for (int d = 0; d < s.ndim; ++d) cells *= static_cast<double>(s.n[d] - 2 * h);
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
  const double stored_steps =
      store_interval > 0
          ? std::ceil(static_cast<double>(s.nt_inner) / static_cast<double>(store_interval))
          : 0.0;
  w.bytes = sizeof(T) * (4.0 * w.points + stored_steps * static_cast<double>(s.nshots) * cells);
  w.precision = sizeof(T) == 4 ? Precision::fp32 : Precision::fp64;
  return w;
}

// ---------------------------------------------------------------------------------------------
// What the backward pass reads of the forward one

class TempFile {
 public:
  TempFile(const std::filesystem::path& dir, std::int64_t shot) {
    static std::atomic<std::uint64_t> counter{0};
    std::random_device rd;
    path_ = dir / fmt::format("sciproxy-scalar-{}-{}-{:08x}-shot{}.bin",
                              static_cast<long long>(::getpid()), counter++, rd(), shot);
    file_ = std::fopen(path_.c_str(), "w+bx");
    if (!file_)
      throw IoError(fmt::format("storage_path: cannot create the gradient storage file '{}'",
                                path_.string()));
  }
  ~TempFile() {
    if (file_) std::fclose(file_);
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(std::int64_t offset, const void* data, std::size_t bytes) {
    if (::fseeko(file_, static_cast<off_t>(offset), SEEK_SET) != 0 ||
        std::fwrite(data, 1, bytes, file_) != bytes)
      throw IoError(fmt::format("storage_path: cannot write {} bytes to '{}' (disk full?)",
                                bytes, path_.string()));
  }
  void read(std::int64_t offset, void* data, std::size_t bytes) {
    if (::fseeko(file_, static_cast<off_t>(offset), SEEK_SET) != 0 ||
        std::fread(data, 1, bytes, file_) != bytes)
      throw IoError(fmt::format("storage_path: cannot read {} bytes back from '{}'", bytes,
                                path_.string()));
  }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

// Stores 2 v dt^2 W of the stored steps: in memory as the kernels wrote it (one chunk: the whole
// run), or chunk by chunk (kChunkBytes of stored steps per kernel call) compressed in memory or
// written to one file per shot. Compression: per stored step and shot, blocks of 8 cells along
// each dimension of the padded grid, one scale (max |x|) per block, x ~ round(127 x / scale).
template <class T>
class GradientStore {
 public:
  GradientStore(const Setup<T>& s, const ScalarOptions& opt, std::int64_t store_interval)
      : nshots_(s.nshots),
        points_(s.points),
        ndim_(s.ndim),
        n_(s.n),
        interval_(store_interval),
        compress_(opt.storage_compression),
        disk_(opt.storage == StorageMode::disk) {
    nstored_ = interval_ > 0 ? (s.nt_inner + interval_ - 1) / interval_ : 0;
    const std::int64_t record = nshots_ * points_;
    nblocks_ = 1;
    for (int d = 0; d < ndim_; ++d) nblocks_ *= (n_[d] + kBlock - 1) / kBlock;
    shot_record_bytes_ = compress_ ? nblocks_ * sizeof(T) + points_ : points_ * sizeof(T);
    if (nstored_ == 0) {
      chunk_stored_ = 1;
      chunk_steps_ = std::max<std::int64_t>(s.nt_inner, 1);
      return;
    }
    if (!disk_) {
      // Refuse up front what would end in std::bad_alloc or in swapping, and say what helps.
      const double needed = static_cast<double>(nstored_) * nshots_ * shot_record_bytes_;
      const double memory = physical_memory_bytes();
      if (memory > 0 && needed > 0.8 * memory)
        throw_invalid_argument(
            "storage_mode", "what the gradient stores to fit in memory (0.8 of this host's "
            + fmt::format("{:.1f} GiB); use storage_mode 'disk', storage_compression, or a larger "
                          "model_gradient_sampling_interval", memory / (1 << 30)),
            fmt::format("{:.1f} GiB for {} stored steps x {} shots x {} cells", needed / (1 << 30),
                        nstored_, nshots_, points_));
    }
    if (!compress_ && !disk_) {
      chunk_stored_ = nstored_;
      allocate(nstored_ * record);
    } else {
      // At most kChunkBytes of stored steps per kernel call, and at least 4 calls, so that the
      // chunked path runs (and is tested) on small problems too.
      chunk_stored_ = std::clamp<std::int64_t>(
          std::min(
              static_cast<std::int64_t>(kChunkBytes / (static_cast<double>(record) * sizeof(T))),
              (nstored_ + 3) / 4),
          1, nstored_);
      allocate(chunk_stored_ * record);
      if (!disk_)
        compressed_.resize(static_cast<std::size_t>(nstored_ * nshots_ * shot_record_bytes_));
    }
    chunk_steps_ = chunk_stored_ * interval_;
    if (disk_) {
      std::error_code ec;
      require(std::filesystem::is_directory(opt.storage_directory, ec), "storage_path",
              "an existing directory for storage_mode 'disk'",
              fmt::format("'{}'", opt.storage_directory));
      for (std::int64_t shot = 0; shot < nshots_; ++shot)
        files_.push_back(std::make_unique<TempFile>(opt.storage_directory, shot));
    }
  }

  std::int64_t chunk_steps() const { return chunk_steps_; }  // inner steps per kernel call

  // Where the kernel writes the stored steps first .. first + count - 1.
  T* forward_buffer(std::int64_t first) {
    if (interval_ == 0) return nullptr;
    return whole() ? buffer_.get() + first * nshots_ * points_ : buffer_.get();
  }
  void save(std::int64_t first, std::int64_t count) {
    if (interval_ == 0 || whole()) return;
    std::vector<unsigned char> record(static_cast<std::size_t>(shot_record_bytes_));
    for (std::int64_t j = 0; j < count; ++j)
      for (std::int64_t shot = 0; shot < nshots_; ++shot) {
        const T* field = buffer_.get() + (j * nshots_ + shot) * points_;
        const std::int64_t index = first + j;
        if (disk_) {
          const void* bytes = field;
          if (compress_) {
            compress(field, record.data());
            bytes = record.data();
          }
          files_[shot]->write(index * shot_record_bytes_, bytes,
                              static_cast<std::size_t>(shot_record_bytes_));
        } else {
          compress(field, compressed_.data() + (index * nshots_ + shot) * shot_record_bytes_);
        }
        bytes_ += static_cast<double>(shot_record_bytes_);
      }
  }
  // The stored steps first .. first + count - 1, [count, nshots, points].
  const T* load(std::int64_t first, std::int64_t count) {
    if (interval_ == 0) return nullptr;
    if (whole()) return buffer_.get() + first * nshots_ * points_;
    std::vector<unsigned char> record(static_cast<std::size_t>(shot_record_bytes_));
    for (std::int64_t j = 0; j < count; ++j)
      for (std::int64_t shot = 0; shot < nshots_; ++shot) {
        T* field = buffer_.get() + (j * nshots_ + shot) * points_;
        const std::int64_t index = first + j;
        if (disk_) {
          if (compress_) {
            files_[shot]->read(index * shot_record_bytes_, record.data(), record.size());
            decompress(record.data(), field);
          } else {
            files_[shot]->read(index * shot_record_bytes_, field,
                               static_cast<std::size_t>(points_ * sizeof(T)));
          }
        } else {
          decompress(compressed_.data() + (index * nshots_ + shot) * shot_record_bytes_, field);
        }
      }
    return buffer_.get();
  }
  double bytes() const {
    return whole() ? static_cast<double>(buffer_size_ * sizeof(T)) : bytes_;
  }

 private:
  bool whole() const { return !compress_ && !disk_; }
  // Left uninitialised: every backend writes whole stored steps, and zeroing gigabytes here cost
  // a quarter of a 2-D gradient run on the cpu backend (a serial memset, then the page faults).
  // Large buffers come in 2 MiB pages where the kernel allows it (transparent huge pages on
  // request): 512 times fewer page faults when the forward first touches them.
  void allocate(std::int64_t n) {
    constexpr std::size_t kHugePage = std::size_t(2) << 20;
    const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * sizeof(T);
    const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (p == nullptr) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
    if (rounded >= 4 * kHugePage) madvise(p, rounded, MADV_HUGEPAGE);  // advice: failure is harmless
#endif
    buffer_.reset(static_cast<T*>(p));
    buffer_size_ = n;
  }
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };

  // Calls f(block index, flat cell index) for every cell of the padded grid.
  template <class F>
  void for_each_block_cell(F&& f) const {
    Shape nb = {1, 1, 1};
    for (int d = 0; d < ndim_; ++d) nb[d] = (n_[d] + kBlock - 1) / kBlock;
    for (std::int64_t i0 = 0; i0 < n_[0]; ++i0)
      for (std::int64_t i1 = 0; i1 < n_[1]; ++i1)
        for (std::int64_t i2 = 0; i2 < n_[2]; ++i2) {
          const std::int64_t blk = ((i0 / kBlock) * nb[1] + i1 / kBlock) * nb[2] + i2 / kBlock;
          f(blk, (i0 * n_[1] + i1) * n_[2] + i2);
        }
  }
  void compress(const T* field, unsigned char* out) const {
    std::vector<T> scale(static_cast<std::size_t>(nblocks_), T(0));
    for_each_block_cell([&](std::int64_t blk, std::int64_t i) {
      scale[blk] = std::max(scale[blk], std::abs(field[i]));
    });
    auto* q = reinterpret_cast<std::int8_t*>(out + nblocks_ * sizeof(T));
    for_each_block_cell([&](std::int64_t blk, std::int64_t i) {
      q[i] =
          scale[blk] > 0 ? static_cast<std::int8_t>(std::lround(127.0 * field[i] / scale[blk])) : 0;
    });
    std::copy(reinterpret_cast<const unsigned char*>(scale.data()),
              reinterpret_cast<const unsigned char*>(scale.data() + nblocks_), out);
  }
  void decompress(const unsigned char* in, T* field) const {
    std::vector<T> scale(static_cast<std::size_t>(nblocks_));
    std::copy(in, in + nblocks_ * sizeof(T), reinterpret_cast<unsigned char*>(scale.data()));
    const auto* q = reinterpret_cast<const std::int8_t*>(in + nblocks_ * sizeof(T));
    for_each_block_cell([&](std::int64_t blk, std::int64_t i) {
      field[i] = static_cast<T>(static_cast<double>(scale[blk]) * q[i] / 127.0);
    });
  }

  std::int64_t nshots_, points_;
  int ndim_;
  Shape n_;
  std::int64_t interval_;
  bool compress_, disk_;
  std::int64_t nstored_ = 0, nblocks_ = 1, shot_record_bytes_ = 0;
  std::int64_t chunk_stored_ = 1, chunk_steps_ = 1;
  std::unique_ptr<T[], Free> buffer_;
  std::int64_t buffer_size_ = 0;
  std::vector<unsigned char> compressed_;
  std::vector<std::unique_ptr<TempFile>> files_;
  double bytes_ = 0;
};

}  // namespace

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
  auto top = Timers::region(timers, "scalar");
  Setup<T> s;
  ScalarOutput<T> out;
  {
    auto r = Timers::region(timers, "setup");
    make_setup(s, in, opt, 0, initial);
    out.state = make_state(s, initial, StateRole::initial);
  }
  std::vector<T> sources;
  {
    auto r = Timers::region(timers, "resample");
    sources = scaled_sources<T>(s, in.source_amplitudes, nullptr);
  }
  std::vector<T> receivers_tm(static_cast<std::size_t>(s.nt_inner * s.nshots * s.nreceivers));
  if (s.nt_inner > 0) {
    auto r = Timers::region(timers, "forward");
    run_forward(device, s.problem, fields_of(s, out.state), sources.data(), receivers_tm.data(),
                static_cast<T*>(nullptr), opt.nparallel, timers);
  }
  {
    auto r = Timers::region(timers, "resample");
    out.receiver_amplitudes = receivers_out(s, receivers_tm);
  }
  out.step_ratio = s.step_ratio;
  out.inner_dt = s.inner_dt;
  out.work = work_model(s, 0);
  return out;
}

template <class T>
ScalarGradient<T> scalar_gradient(const Device& device, const ScalarInput<T>& in,
                                  const ScalarOptions& opt,
                                  std::span<const T> grad_receiver_amplitudes,
                                  const ScalarState<T>* initial, const ScalarState<T>* grad_final,
                                  Timers* timers) {
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
  {
    auto r = Timers::region(timers, "forward");
    kernels::ScalarFields<T> f = fields_of(s, grad.forward.state);
    for (std::int64_t t0 = 0; t0 < s.nt_inner; t0 += chunk) {
      kernels::ScalarProblem<T> p = s.problem;
      p.nt = std::min(chunk, s.nt_inner - t0);
      const std::int64_t first = store_interval > 0 ? t0 / store_interval : 0;
      const std::int64_t count =
          store_interval > 0 ? (p.nt + store_interval - 1) / store_interval : 0;
      run_forward(device, p, f, sources.data() + t0 * src_stride,
                  receivers_tm.data() + t0 * rec_stride, store.forward_buffer(first), opt.nparallel,
                  timers);
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
      run_backward(device, p, f, grad_receivers_tm.data() + t0 * rec_stride,
                   grad_sources_tm.data() + t0 * src_stride, store.load(first, count),
                   grad_v_padded.data(), opt.nparallel, timers);
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
  grad.forward.work = work_model(s, store_interval);
  grad.forward.storage_bytes = store.bytes();
  return grad;
}

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
  make_setup(s, all, opt, store_interval, initial, role);

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
        throw_invalid_argument(
            "scatter", "finite values",
            fmt::format("{} in model {} at flat cell index {}", in.scatter[i], i / cells, i % cells));
  }
  b.scatter.assign(static_cast<std::size_t>(s.nmodels * s.points), T(0));
  if (!in.scatter.empty())
    for (std::int64_t m = 0; m < s.nmodels; ++m)
      s.for_each_padded([&](std::int64_t i, const Shape& p) {
        b.scatter[m * s.points + i] = in.scatter[m * cells + s.model_cell(p)];
      });
  s.problem.scatter = b.scatter.data();
}

// [nt_inner, nshots, count] <-> [nshots, count, nt]: receivers_out / receivers_in_adjoint for
// any number of traces per shot.
template <class T>
std::vector<T> traces_out(const Setup<T>& s, std::int64_t count, const std::vector<T>& tm) {
  const std::int64_t ntr = s.nshots * count;
  std::vector<T> traces(static_cast<std::size_t>(ntr * s.nt_inner)),
      out(static_cast<std::size_t>(ntr * s.nt));
  for (std::int64_t t = 0; t < s.nt_inner; ++t)
    for (std::int64_t tr = 0; tr < ntr; ++tr) traces[tr * s.nt_inner + t] = tm[t * ntr + tr];
  detail::downsample(traces.data(), ntr, s.nt, s.resampling, out.data());
  return out;
}

template <class T>
std::vector<T> traces_in_adjoint(const Setup<T>& s, std::int64_t count, const std::int64_t* cells,
                                 std::span<const T> grad) {
  const std::int64_t ntr = s.nshots * count;
  std::vector<T> traces(static_cast<std::size_t>(ntr * s.nt_inner)), tm(traces.size(), T(0));
  if (grad.empty()) return tm;
  detail::downsample_adjoint(grad.data(), ntr, s.nt, s.resampling, traces.data());
  for (std::int64_t t = 0; t < s.nt_inner; ++t)
    for (std::int64_t tr = 0; tr < ntr; ++tr)
      if (cells[tr] != kIgnoredCell) tm[t * ntr + tr] = traces[tr * s.nt_inner + t];
  return tm;
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

template <class T>
void run_born_forward(const Device& device, const kernels::ScalarProblem<T>& p,
                      kernels::ScalarFields<T> bg, kernels::ScalarFields<T> sc, const T* sources,
                      const T* scattered_sources, T* receivers, T* bg_receivers, int nparallel,
                      Timers* timers) {
  switch (device.backend) {
    case Backend::reference:
      kernels::reference::scalar_born_forward(p, bg, sc, sources, scattered_sources, receivers,
                                              bg_receivers);
      break;
    case Backend::cpu: {
      ThreadCount threads(nparallel);
      kernels::cpu::scalar_born_forward(p, bg, sc, sources, scattered_sources, receivers,
                                        bg_receivers);
      break;
    }
    case Backend::cuda:
      kernels::cuda::scalar_born_forward(p, bg, sc, sources, scattered_sources, receivers,
                                         bg_receivers, device.index, timers);
      break;
  }
}

template <class T>
void run_born_backward(const Device& device, const kernels::ScalarProblem<T>& p,
                       kernels::ScalarFields<T> bg, kernels::ScalarFields<T> sc,
                       const T* grad_receivers, const T* grad_bg_receivers, T* grad_sources,
                       T* grad_scattered_sources, int nparallel, Timers* timers) {
  switch (device.backend) {
    case Backend::reference:
      kernels::reference::scalar_born_backward(p, bg, sc, grad_receivers, grad_bg_receivers,
                                               grad_sources, grad_scattered_sources);
      break;
    case Backend::cpu: {
      ThreadCount threads(nparallel);
      kernels::cpu::scalar_born_backward(p, bg, sc, grad_receivers, grad_bg_receivers,
                                         grad_sources, grad_scattered_sources);
      break;
    }
    case Backend::cuda:
      kernels::cuda::scalar_born_backward(p, bg, sc, grad_receivers, grad_bg_receivers,
                                          grad_sources, grad_scattered_sources, device.index,
                                          timers);
      break;
  }
}

// v and scatter at the source cell of trace tr (shot-major [nshots, nsources]).
template <class T>
std::pair<double, double> source_models(const BornSetup<T>& b, std::int64_t tr) {
  const Setup<T>& s = b.s;
  const std::int64_t i =
      s.model_of(tr / std::max<std::int64_t>(s.nsources, 1)) * s.points + s.source_cells[tr];
  return {static_cast<double>(s.v[i]), static_cast<double>(b.scatter[i])};
}

}  // namespace

template <class T>
ScalarBornOutput<T> scalar_born(const Device& device, const ScalarBornInput<T>& in,
                                const ScalarOptions& opt, const ScalarState<T>* initial,
                                const ScalarState<T>* initial_scattered, Timers* timers) {
  auto top = Timers::region(timers, "scalar_born");
  BornSetup<T> b;
  Setup<T>& s = b.s;
  ScalarBornOutput<T> out;
  {
    auto r = Timers::region(timers, "setup");
    const bool background = has_fields(initial, in.background.grid.ndim);
    make_born_setup(b, in, opt, 0, background ? initial : initial_scattered,
                    background ? StateRole::initial : StateRole::initial_scattered);
    require(!in.scatter.empty() || s.model_cells == 0, "scatter",
            fmt::format("the scattering model, of v's shape ({} values)",
                        s.nmodels * s.model_cells),
            "none");
    out.state = make_state(s, initial, StateRole::initial);
    out.scattered_state = make_state(s, initial_scattered, StateRole::initial_scattered);
  }
  std::vector<T> sources, scattered;
  {
    auto r = Timers::region(timers, "resample");
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
  if (s.nt_inner > 0) {
    auto r = Timers::region(timers, "forward");
    run_born_forward(device, s.problem, fields_of(s, out.state), fields_of(s, out.scattered_state),
                     sources.data(), scattered.data(), rec_tm.data(), bg_tm.data(), opt.nparallel,
                     timers);
  }
  {
    auto r = Timers::region(timers, "resample");
    out.receiver_amplitudes = traces_out(s, s.nreceivers, rec_tm);
    out.bg_receiver_amplitudes = traces_out(s, b.nbg, bg_tm);
  }
  out.step_ratio = s.step_ratio;
  out.inner_dt = s.inner_dt;
  // Two coupled fields: twice the forward's work, plus the coupling term per cell and step.
  out.work = work_model(s, 0);
  out.work.flops = 2 * out.work.flops + 4.0 * out.work.points;
  out.work.bytes = 2 * out.work.bytes + sizeof(T) * out.work.points;  // + scatter read
  return out;
}

template <class T>
ScalarBornGradient<T> scalar_born_gradient(const Device& device, const ScalarBornInput<T>& in,
                                           const ScalarOptions& opt,
                                           std::span<const T> grad_receiver_amplitudes,
                                           std::span<const T> grad_bg_receiver_amplitudes,
                                           bool source_gradient, const ScalarState<T>* initial,
                                           Timers* timers) {
  auto top = Timers::region(timers, "scalar_born_gradient");
  ScalarBornGradient<T> grad;
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
    ScalarGradient<T> g = scalar_gradient<T>(device, in.background, opt, grad_receiver_amplitudes,
                                          initial, nullptr, timers);
    grad.scatter = std::move(g.v);
    grad.forward = std::move(g.forward);
  }
  if (!source_gradient || s.nsources == 0 || s.nt_inner == 0) return grad;

  // The source gradient: the adjoint of the coupled fields (it needs nothing of the forward pass).
  ScalarState<T> adjoint = make_state(s, static_cast<const ScalarState<T>*>(nullptr), StateRole::grad_final);
  ScalarState<T> adjoint_sc = adjoint;
  const std::int64_t ntr = s.nshots * s.nsources;
  std::vector<T> gs(static_cast<std::size_t>(s.nt_inner * ntr), T(0)), gss(gs.size(), T(0));
  {
    std::vector<T> grad_rec, grad_bg;
    {
      auto r = Timers::region(timers, "resample");
      grad_rec = traces_in_adjoint(s, s.nreceivers, s.receiver_cells.data(),
                                   grad_receiver_amplitudes);
      grad_bg = traces_in_adjoint(s, b.nbg, b.bg_cells.data(), grad_bg_receiver_amplitudes);
    }
    auto r = Timers::region(timers, "born_backward");
    run_born_backward(device, s.problem, fields_of(s, adjoint), fields_of(s, adjoint_sc),
                      grad_rec.data(), grad_bg.data(), gs.data(), gss.data(), opt.nparallel,
                      timers);
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

#define SCIPROXY_INSTANTIATE_BORN(T)                                                              \
  template ScalarBornOutput<T> scalar_born<T>(const Device&, const ScalarBornInput<T>&,           \
                                              const ScalarOptions&, const ScalarState<T>*,        \
                                              const ScalarState<T>*, Timers*);                    \
  template ScalarBornGradient<T> scalar_born_gradient<T>(                                         \
      const Device&, const ScalarBornInput<T>&, const ScalarOptions&, std::span<const T>,         \
      std::span<const T>, bool, const ScalarState<T>*, Timers*);
SCIPROXY_INSTANTIATE_BORN(float)
SCIPROXY_INSTANTIATE_BORN(double)
#undef SCIPROXY_INSTANTIATE_BORN

}  // namespace sciproxy::wave
