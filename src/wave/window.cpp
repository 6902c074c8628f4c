// wave: argument checks, survey window, padded grid and model, PML profiles, CFL step ratio and
// the states of the scalar propagator (Deepwave's scalar.py and _common.py, v0.1; see
// docs/kernels/scalar-wave.md). The padded grid per dimension is
//   [halo | PML low | survey window | PML high | halo],
// the window being the cells spanned by the sources and receivers widened by survey_pad (or
// fixed by an initial state and origin), replicate-padded into PML and halo.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <string>
#include <vector>

#include "pml.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"
#include "setup.hpp"

namespace sciproxy::wave::detail {

using seismic::check_grid;
using seismic::check_locations;
using seismic::shape_string;

std::string join(const std::int64_t* x, int n, const char* sep) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? sep : "") + std::to_string(x[i]);
  return s;
}

void check_dt(double dt) {
  require(std::isfinite(dt) && dt > 0, "dt", "a positive, finite time step in seconds",
          fmt::format("{}", dt));
}

void check_max_vel(double max_vel) {
  require(std::isfinite(max_vel) && max_vel >= 0, "max_vel",
          "a finite velocity >= 0 in m/s (0: the largest |v| of the model)",
          fmt::format("{}", max_vel));
}

namespace {

constexpr std::int64_t kStepRatioWarning = 20;  // Deepwave warns from here on

// Sizes derived from the caller's widths and counts: refused, naming the argument, when int64
// cannot hold them, before anything is allocated or indexed with a wrapped value.
std::int64_t size_product(std::int64_t a, std::int64_t b, const char* argument, const char* what) {
  std::int64_t out = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &out))
    throw_invalid_argument(argument, fmt::format("{} that fits in int64", what),
                           fmt::format("{} x {}", a, b));
  return out;
}

template <class T>
std::int64_t check_input(const ScalarInput<T>& in, const ScalarOptions& opt) {
  const Grid& g = in.grid;
  check_grid(g);
  require(opt.accuracy == 2 || opt.accuracy == 4 || opt.accuracy == 6 || opt.accuracy == 8,
          "accuracy", "2, 4, 6 or 8", std::to_string(opt.accuracy));
  for (int d = 0; d < g.ndim; ++d)
    require(g.shape[d] >= opt.accuracy / 2, "v",
            fmt::format("at least accuracy/2 = {} cells along dimension {} for the stencil of "
                        "accuracy {}",
                        opt.accuracy / 2, d, opt.accuracy),
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
  const std::int64_t ntraces =
      size_product(in.nshots, in.nsources, "nsources", "nshots x nsources");
  size_product(size_product(in.nshots, in.nreceivers, "nreceivers", "nshots x nreceivers"),
               std::max<std::int64_t>(nt, 1), "nt", "nshots x nreceivers x nt receiver samples");
  const auto namp = static_cast<std::int64_t>(in.source_amplitudes.size());
  if (nt == 0 && ntraces > 0 && namp > 0) {
    require(namp % ntraces == 0, "source_amplitudes",
            fmt::format("[nshots, nsources, nt] = [{}, {}, nt] values, a multiple of {}", in.nshots,
                        in.nsources, ntraces),
            fmt::format("{} values", namp));
    nt = namp / ntraces;
  }
  size_product(ntraces, nt, "nt", "nshots x nsources x nt source samples");
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
    // At most 2^60 cells: the padded extent (two widths, the window and the halo) fits in int64.
    require(opt.pml_width[i] >= 0 && opt.pml_width[i] <= (std::int64_t(1) << 60),
            fmt::format("pml_width[{}]", i), "a PML width >= 0 cells (at most 2^60)",
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
  resolve_threads(opt.nparallel, "nparallel");
  return nt;
}

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
    require(
        extent >= 1 && first + extent <= s.model_shape[d], padded_shape_name(role),
        fmt::format("in dimension {}, a window of at least one cell inside the model once "
                    "the PML ({} + {}) and halo (2 x {}) are taken off, from origin {} to at "
                    "most the model's {} cells",
                    d, s.pml_width[2 * d], s.pml_width[2 * d + 1], s.halo, first, s.model_shape[d]),
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

}  // namespace

template <class T>
bool has_fields(const ScalarState<T>* st, int ndim) {
  if (!st) return false;
  bool any = !st->wavefield.empty() || !st->previous_wavefield.empty();
  for (int d = 0; d < ndim; ++d) any = any || !st->psi[d].empty() || !st->zeta[d].empty();
  return any;
}

// Fills s in place: s.problem points into s's own arrays.
template <class T>
double host_bytes(const Setup<T>& s, const ScalarOptions& opt, std::int64_t store_interval,
                  int wavefields) {
  const double elem = sizeof(T), points = static_cast<double>(s.points);
  const double shots = static_cast<double>(s.nshots), fields = wavefields;
  const double state = fields * (2 + 2 * s.ndim) * points * shots * elem;
  const double traces = elem * shots *
                        (double(s.nt_inner) * (double(s.nsources) + fields * double(s.nreceivers)) +
                         double(s.nt) * (double(s.nsources) + fields * double(s.nreceivers)));
  double bytes = elem * double(s.nmodels) * points + 2 * state + traces;
  if (opt.autotune) bytes += state;  // the autotuner's trials run on a copy of the state
  if (store_interval > 0) {
    bytes += 2 * state + elem * points * double(s.nmodels > 1 ? s.nshots : 1) +
             8.0 * double(s.nmodels) * double(s.model_cells);
    double blocks = 1;
    for (int d = 0; d < s.ndim; ++d) blocks *= double((s.n[d] + 7) / 8);
    const double record = opt.storage_compression ? points + blocks * elem : points * elem;
    const double stored = double((s.nt_inner + store_interval - 1) / store_interval);
    if (opt.storage == StorageMode::device || opt.storage == StorageMode::host)
      bytes += stored * shots * record;
  }
  return bytes;
}

template <class T>
void make_setup(Setup<T>& s, const ScalarInput<T>& in, const ScalarOptions& opt,
                std::int64_t store_interval, const ScalarState<T>* initial, StateRole role,
                int wavefields) {
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
    // A pad beyond the model reaches its edge (and hi + pad_hi + 1 cannot overflow).
    s.end[d] = pad_hi < 0 || !located || pad_hi >= g.shape[d]
                   ? g.shape[d]
                   : std::clamp(hi + pad_hi + 1, std::int64_t(0), g.shape[d]);
  }
  window_from_state(s, in, opt, initial, role);
  for (int d = 0; d < s.ndim; ++d) {
    s.offset[d] = s.halo + s.pml_width[2 * d];
    s.n[d] = (s.end[d] - s.begin[d]) + 2 * s.halo + s.pml_width[2 * d] + s.pml_width[2 * d + 1];
  }
  s.points = size_product(size_product(s.n[0], s.n[1], "pml_width", "a padded grid"), s.n[2],
                          "pml_width", "a padded grid");
  size_product(
      size_product(std::max(s.nmodels, s.nshots), s.points, "pml_width", "nshots x padded cells"),
      static_cast<std::int64_t>(sizeof(T)), "pml_width", "a wavefield in bytes");
  require_memory(
      host_bytes(s, opt, store_interval, wavefields),
      store_interval > 0 ? "v, pml_width, nt, nshots, storage_mode" : "v, pml_width, nt, nshots",
      fmt::format("{} {}-D model of {} cells (padded to {}), {} shot{}, nt {} ({} "
                  "inner steps), {}",
                  store_interval > 0 ? "a gradient on a" : "a propagation on a", s.ndim,
                  join(s.model_shape.data(), s.ndim, " x "), join(s.n.data(), s.ndim, " x "),
                  s.nshots, s.nshots == 1 ? "" : "s", s.nt, s.nt_inner,
                  sizeof(T) == 4 ? "float32" : "float64"),
      store_interval > 0 && opt.storage != StorageMode::disk
          ? "; storage_mode 'disk', storage_compression or a larger "
            "model_gradient_sampling_interval store less"
          : "");

  // Padded model(s), a row (along the last dimension) at a time: replicated ends, the window's
  // cells between (a cell at a time, the model was a tenth of a large 3-D call's time).
  s.v.resize(static_cast<std::size_t>(s.nmodels * s.points));
  {
    const std::int64_t rows = s.n[0] * s.n[1], nl = s.n[2];
    const std::int64_t first = s.offset[2], last = s.offset[2] + (s.end[2] - s.begin[2]);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < s.nmodels * rows; ++r) {
      const std::int64_t m = r / rows, i0 = r % rows / s.n[1], i1 = r % s.n[1];
      T* out = s.v.data() + m * s.points + (r % rows) * nl;
      const T* in_row =
          in.v.data() + m * s.model_cells + s.model_cell(Shape{i0, i1, first}) - first;
      std::fill(out, out + first, in_row[first]);
      std::copy(in_row + first, in_row + last, out + first);
      std::fill(out + last, out + nl, in_row[last - 1]);
    }
  }

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
  p.nparallel = opt.nparallel;
  p.cpu = opt.cpu;
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
  auto fill = [&](std::vector<T>& dst, const std::vector<T>* src) {
    if (src && !src->empty())
      dst = *src;
    else
      dst.assign(size, T(0));
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
  // The fields are filled by the threads in parallel: a large 3-D state is most of a second's
  // page faults and zeros (0.4 of 2.2 s at 256^3 + PML, one field after another).
  std::vector<std::vector<T>*> dst = {&st.wavefield, &st.previous_wavefield};
  std::vector<const std::vector<T>*> from = {src ? &src->wavefield : nullptr,
                                             src ? &src->previous_wavefield : nullptr};
  std::vector<std::string> names = {u_name, u_prev_name};
  for (int d = 0; d < s.ndim; ++d) {
    dst.insert(dst.end(), {&st.psi[d], &st.zeta[d]});
    from.insert(from.end(), {src ? &src->psi[d] : nullptr, src ? &src->zeta[d] : nullptr});
    names.insert(names.end(),
                 {state_field(role, "psi", d, s.ndim), state_field(role, "zeta", d, s.ndim)});
  }
  for (std::size_t k = 0; k < dst.size(); ++k)  // the size checks first: no throw in the region
    if (from[k] && !from[k]->empty())
      require(from[k]->size() == size, names[k],
              fmt::format("[nshots, *padded_shape] = [{}, {}], {} values, or none", s.nshots,
                          join(s.n.data(), s.ndim, ", "), size),
              fmt::format("{} values", from[k]->size()));
  const auto fields = static_cast<std::int64_t>(dst.size());
  std::exception_ptr error;  // bad_alloc must not leave the parallel region
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t k = 0; k < fields; ++k) {
    try {
      fill(*dst[k], from[k]);
    } catch (...) {
#pragma omp critical(sciproxy_wave_make_state)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
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

#define SCIPROXY_INSTANTIATE(T)                                                             \
  template void make_setup<T>(Setup<T>&, const ScalarInput<T>&, const ScalarOptions&,       \
                              std::int64_t, const ScalarState<T>*, StateRole, int);         \
  template double host_bytes<T>(const Setup<T>&, const ScalarOptions&, std::int64_t, int);  \
  template bool has_fields<T>(const ScalarState<T>*, int);                                  \
  template void project_state<T>(const Setup<T>&, ScalarState<T>&);                         \
  template ScalarState<T> make_state<T>(const Setup<T>&, const ScalarState<T>*, StateRole); \
  template kernels::ScalarFields<T> fields_of<T>(const Setup<T>&, ScalarState<T>&);
SCIPROXY_INSTANTIATE(float)
SCIPROXY_INSTANTIATE(double)
#undef SCIPROXY_INSTANTIATE

}  // namespace sciproxy::wave::detail
