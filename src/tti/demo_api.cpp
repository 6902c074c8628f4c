// tti: the public entry points of the workshop demo operator (include/sciproxy/tti_demo.hpp):
// argument checks, the stability limit, padding, the per-point coefficients computed once (trig
// and eta terms, so that no backend evaluates sin, cos or sqrt per step), the work model, and
// dispatch to a backend (kernels.hpp). Equations: docs/kernels/tti.md, "The workshop operator";
// coefficients: kernels.hpp.
//
// Under MPI (options.comm of several ranks; docs/kernels/tti.md, "The workshop operator under
// MPI"): the ranks' agreement on the inputs is checked first (check_ranks), the grid is split
// (demo_decomposition.hpp), each rank builds the fields and coefficients of its window only and
// runs the cpu kernel on it, refreshing the ghost ring after each sweep; the decisions that pick
// a kernel path (constant materials, nz derived, steps per sweep) are taken for the whole grid,
// so that every rank runs one process's arithmetic. The blocks are then gathered as
// options.results asks.
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "core/collective.hpp"
#include "core/dispatch.hpp"
#include "core/recorded_call.hpp"
#include "sciproxy/core/autotune.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"
#include "sciproxy/tti_demo.hpp"
#include "tti/case.hpp"
#include "tti/demo_decomposition.hpp"
#include "tti/kernels.hpp"
#include "tti/math.hpp"

namespace sciproxy::tti {

namespace {

using kernels::DemoGrid;
using kernels::SpaceOrders;
using std::int64_t;
using Index = std::array<int64_t, 3>;

const char* const kTopRegion = "TTISelfAdjointForward";

double sum_abs_coefficients(int order) {
  return with_value<SpaceOrders>(order, "space_order", [](auto a) {
    double s = 0;
    for (int k = 1; k <= a.value / 2; ++k) s += std::abs(tti::staggered_coefficient<a.value>(k));
    return s;
  });
}

void check_space_order(int order) {
  with_value<SpaceOrders>(order, "space_order", [](auto) {});
}

template <class T>
void check_field(std::string_view name, std::span<const T> values, int64_t points) {
  if (values.size() != 1 && static_cast<int64_t>(values.size()) != points)
    throw_invalid_argument(name,
                           fmt::format("one value (constant) or one per grid point ({})", points),
                           fmt::format("{} values", values.size()));
}

// Checks that every value of a material lies in [lo, hi] (open at lo when lo_open), and is finite.
template <class T>
void check_range(std::string_view name, std::span<const T> values, double lo, double hi,
                 bool lo_open, std::string_view expected) {
  const int64_t n = static_cast<int64_t>(values.size());
  int64_t bad = -1;
#pragma omp parallel for reduction(max : bad)
  for (int64_t p = 0; p < n; ++p) {
    const double v = static_cast<double>(values[p]);
    const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi;
    if (!ok) bad = std::max(bad, p);
  }
  if (bad >= 0)
    throw_invalid_argument(name, expected,
                           fmt::format("{} at index {}", static_cast<double>(values[bad]), bad));
}

template <class T>
double max_of(std::span<const T> values, auto&& f) {
  const int64_t n = static_cast<int64_t>(values.size());
  double m = -std::numeric_limits<double>::infinity();
#pragma omp parallel for reduction(max : m)
  for (int64_t p = 0; p < n; ++p) m = std::max(m, f(p));
  return m;
}

DemoGrid make_grid(const std::array<int64_t, 3>& shape, const std::array<double, 3>& spacing,
                   int order) {
  DemoGrid g;
  g.order = order;
  g.halo = order / 2;
  g.n = shape;
  g.nz_vector =
      (shape[2] + DemoGrid::kVectorLength - 1) / DemoGrid::kVectorLength * DemoGrid::kVectorLength;
  for (int d = 0; d < 3; ++d) g.np[d] = (d == 2 ? g.nz_vector : shape[d]) + 2 * g.halo;
  g.spacing = spacing;
  return g;
}

// The space order and the grid points per axis.
void check_shape(const std::array<int64_t, 3>& shape, int order) {
  check_space_order(order);
  static const char* const dims[] = {"x", "y", "z"};
  for (int d = 0; d < 3; ++d)
    if (shape[d] < order || shape[d] > 100000)
      throw_invalid_argument(
          fmt::format("shape[{}] ({})", d, dims[d]),
          fmt::format("at least {} grid points (the span of the space-order-{} stencil) and at "
                      "most 100000",
                      order, order),
          std::to_string(shape[d]));
}

// `window`: the points this rank steps (the whole grid on one process), for the memory check.
template <class T>
void check_input(const TtiDemoInput<T>& in, const TtiDemoOptions& opt, Backend backend,
                 const std::array<int64_t, 3>& window) {
  check_shape(in.shape, opt.space_order);
  static const char* const dims[] = {"x", "y", "z"};
  for (int d = 0; d < 3; ++d) {
    if (!(in.spacing[d] > 0) || !std::isfinite(in.spacing[d]))
      throw_invalid_argument(fmt::format("spacing[{}] ({})", d, dims[d]),
                             "a positive grid spacing in metres", fmt::format("{}", in.spacing[d]));
  }
  if (!(in.dt > 0) || !std::isfinite(in.dt))
    throw_invalid_argument("dt", "a positive time step in seconds", fmt::format("{}", in.dt));
  if (in.nt < 1) throw_invalid_argument("nt", "at least 1 time step", std::to_string(in.nt));
  resolve_threads(opt.nparallel, "nparallel");
  const TtiDemoCpuTuning& tune = opt.cpu;
  if (tune.tile_rows < 0 || tune.tile_rows > 100000)
    throw_invalid_argument("cpu.tile_rows", "0 (automatic) or 1 to 100000 y rows",
                           std::to_string(tune.tile_rows));
  if (tune.tile_kib < 1 || tune.tile_kib > (1 << 20))
    throw_invalid_argument("cpu.tile_kib", "1 to 1048576 KiB", std::to_string(tune.tile_kib));
  if (tune.block_rows < 1 || tune.block_rows > 100000)
    throw_invalid_argument("cpu.block_rows", "1 to 100000 y rows", std::to_string(tune.block_rows));
  if (tune.sweep_steps < 0 || tune.sweep_steps > 2)
    throw_invalid_argument("cpu.sweep_steps", "0 (automatic), 1 or 2",
                           std::to_string(tune.sweep_steps));

  const int64_t points = in.shape[0] * in.shape[1] * in.shape[2];
  const auto& m = in.material;
  check_field("vp", m.vp, points);
  check_field("b", m.b, points);
  check_field("epsilon", m.epsilon, points);
  check_field("eta", m.eta, points);
  check_field("f", m.f, points);
  check_field("theta", m.theta, points);
  check_field("phi", m.phi, points);
  check_field("damping", m.damping, points);
  const double inf = std::numeric_limits<double>::infinity();
  check_range("vp", m.vp, 0, inf, true, "finite velocities > 0 m/s");
  check_range("b", m.b, 0, inf, true, "finite buoyancies (1 / density) > 0");
  check_range("epsilon", m.epsilon, -0.5, inf, true,
              "finite values > -0.5 (so that 1 + 2 eps > 0)");
  check_range("eta", m.eta, 0, 1, false,
              "values in [0, 1] (eta-hat; sqrt(1 - eta^2) must be real)");
  check_range("f", m.f, 0, 1, false, "values in [0, 1] (f = 1 - vs^2 / vp^2)");
  check_range("theta", m.theta, -inf, inf, false, "finite angles in radians");
  check_range("phi", m.phi, -inf, inf, false, "finite angles in radians");
  check_range("damping", m.damping, 0, 1, false, "values in [0, 1]");

  for (int d = 0; d < 3; ++d) {
    const double p = in.source_position[d];
    const double extent = static_cast<double>(in.shape[d] - 1) * in.spacing[d];
    if (!std::isfinite(p) || p < 0 || p > extent)
      throw_invalid_argument(fmt::format("source_position[{}] ({})", d, dims[d]),
                             fmt::format("a position in [0, {}] m (inside the grid)", extent),
                             fmt::format("{} m", p));
  }
  if (static_cast<int64_t>(in.source_amplitudes.size()) != in.nt)
    throw_invalid_argument("source_amplitudes", fmt::format("nt = {} values", in.nt),
                           fmt::format("{} values", in.source_amplitudes.size()));
  check_range("source_amplitudes", in.source_amplitudes, -inf, inf, false, "finite values");
  for (auto [name, field] :
       {std::pair{"initial_u", in.initial_u}, std::pair{"initial_u_prev", in.initial_u_prev}}) {
    if (field.empty()) continue;
    if (static_cast<int64_t>(field.size()) != points)
      throw_invalid_argument(name, fmt::format("empty or one value per grid point ({})", points),
                             fmt::format("{} values", field.size()));
    check_range(name, field, -inf, inf, false, "finite values");
  }

  const double limit = tti_demo_dt_limit(in, opt.space_order);
  if (in.dt > limit)
    throw_invalid_argument(
        "dt",
        fmt::format("at most {:.6g} s, the stability limit of these materials at space "
                    "order {} and this spacing",
                    limit, opt.space_order),
        fmt::format("{:.6g} s", in.dt));

  // Memory, before anything is allocated: two padded fields, eight coefficient arrays, three
  // fluxes (two-pass), the returned fields; the cpu backend adds its own aligned copies of the
  // fields and coefficients (ten more arrays; nine where it derives nz, counted as ten here) and
  // two fields for two steps per sweep.
  const DemoGrid g = make_grid(window, in.spacing, opt.space_order);
  const double arrays = backend == Backend::cpu ? 25.0 : 13.0;
  const double bytes = sizeof(T) * (arrays * static_cast<double>(g.padded_points()) + 2.0 * points);
  require_memory(bytes, "shape",
                 fmt::format("the TTI demo on {} x {} x {} points ({})", in.shape[0], in.shape[1],
                             in.shape[2], sizeof(T) == 4 ? "float32" : "float64"));
}

template <class T>
kernels::DemoField<T> field_of(std::span<const T> s) {
  return {s.data(), s.size() == 1};
}

// Trilinear weights and corner cells of the source (a corner on the last grid plane moves its
// cell down by one with weight fraction 1, so every corner lies on the grid).
template <class T>
kernels::DemoSource<T> make_source(const DemoGrid& g, const TtiDemoInput<T>& in) {
  kernels::DemoSource<T> src;
  std::array<int64_t, 3> base{};
  std::array<double, 3> frac{};
  for (int d = 0; d < 3; ++d) {
    const double x = in.source_position[d] / g.spacing[d];
    int64_t i = static_cast<int64_t>(std::floor(x));
    i = std::clamp<int64_t>(i, 0, g.n[d] - 2);
    base[d] = i;
    frac[d] = std::clamp(x - static_cast<double>(i), 0.0, 1.0);
  }
  for (int c = 0; c < 8; ++c) {
    double w = 1;
    for (int d = 0; d < 3; ++d) {
      const int up = (c >> (2 - d)) & 1;
      src.points[c][d] = base[d] + up;
      w *= up ? frac[d] : 1 - frac[d];
    }
    src.weights[c] = w;
    src.cells[c] = g.index(src.points[c][0], src.points[c][1], src.points[c][2]);
  }
  src.amplitudes = in.source_amplitudes.data();
  return src;
}

// Owned coefficient arrays (padded, zero in the halo) and the views the backends take.
template <class T>
struct CoefficientArrays {
  std::vector<T> nx, ny, nz, a, bma, s, m, d;
  kernels::DemoCoefficients<T> view() const {
    return {nx.data(), ny.data(), nz.data(), a.data(), bma.data(), s.data(), m.data(), d.data()};
  }
};

template <class T>
CoefficientArrays<T> make_coefficients(const DemoGrid& g, const TtiDemoInput<T>& in) {
  const auto& mat = in.material;
  const int64_t padded = g.padded_points();
  CoefficientArrays<T> c;
  for (auto* v : {&c.nx, &c.ny, &c.nz, &c.a, &c.bma, &c.s, &c.m, &c.d})
    v->assign(static_cast<std::size_t>(padded), T(0));
  const double dt2 = in.dt * in.dt;
  const kernels::DemoRawMaterial<T> raw{
      field_of(mat.vp), field_of(mat.b),     field_of(mat.epsilon), field_of(mat.eta),
      field_of(mat.f),  field_of(mat.theta), field_of(mat.phi),     field_of(mat.damping)};
  // Evaluated in double, rounded once to T.
  auto set = [&](int64_t p, int64_t q) {
    const double th = raw.theta.at(p), ph = raw.phi.at(p);
    const double b = raw.b.at(p), eps = raw.epsilon.at(p), eta = raw.eta.at(p), f = raw.f.at(p);
    const double vp = raw.vp.at(p);
    const double a = b * (1 + 2 * eps);
    c.nx[q] = static_cast<T>(std::sin(th) * std::sin(ph));
    c.ny[q] = static_cast<T>(std::sin(th) * std::cos(ph));
    c.nz[q] = static_cast<T>(std::cos(th));
    c.a[q] = static_cast<T>(a);
    c.bma[q] = static_cast<T>(b * (1 - f * eta * eta) - a);
    c.s[q] = static_cast<T>(b * f * eta * std::sqrt(1 - eta * eta));
    c.m[q] = static_cast<T>(dt2 * vp * vp / b);
    c.d[q] = static_cast<T>(raw.damping.at(p));
  };
#pragma omp parallel for collapse(2)
  for (int64_t i = 0; i < g.n[0]; ++i)
    for (int64_t j = 0; j < g.n[1]; ++j)
      for (int64_t k = 0; k < g.n[2]; ++k) set((i * g.n[1] + j) * g.n[2] + k, g.index(i, j, k));
  return c;
}

// Whether each coefficient holds one value over the grid (the demo's dummy materials): the cpu
// backend then reads one number of each instead of eight arrays. One material given per point
// may still give constant coefficients, so the grid is scanned unless all are single values.
template <class T>
bool constant_coefficients(const DemoGrid& g, const TtiDemoInput<T>& in,
                           const CoefficientArrays<T>& c) {
  const auto& m = in.material;
  bool single = true;
  for (const auto* v : {&m.vp, &m.b, &m.epsilon, &m.eta, &m.f, &m.theta, &m.phi, &m.damping})
    single = single && v->size() == 1;
  if (single) return true;
  const int64_t first = g.index(0, 0, 0);
  for (const auto* v : {&c.nx, &c.ny, &c.nz, &c.a, &c.bma, &c.s, &c.m, &c.d}) {
    const T* a = v->data();
    bool same = true;
#pragma omp parallel for collapse(2) reduction(&& : same)
    for (int64_t i = 0; i < g.n[0]; ++i)
      for (int64_t j = 0; j < g.n[1]; ++j)
        for (int64_t k = 0; k < g.n[2]; ++k) same = same && a[g.index(i, j, k)] == a[first];
    if (!same) return false;
  }
  return true;
}

// Whether |nz| >= 1/8 over the grid: the cpu fused kernel then derives nz = sqrt(1 - nx^2 - ny^2)
// (sign folded into n and s) and reads seven coefficient arrays instead of eight; rounding the
// stored nx, ny moves that nz by about eps / |nz|, at most 8 eps here.
template <class T>
bool nz_derivable(const DemoGrid& g, const CoefficientArrays<T>& c) {
  const T* nz = c.nz.data();
  bool ok = true;
#pragma omp parallel for collapse(2) reduction(&& : ok)
  for (int64_t i = 0; i < g.n[0]; ++i)
    for (int64_t j = 0; j < g.n[1]; ++j)
      for (int64_t k = 0; k < g.n[2]; ++k) ok = ok && std::abs(nz[g.index(i, j, k)]) >= T(0.125);
  return ok;
}

template <class T>
std::vector<T> padded_copy(const DemoGrid& g, std::span<const T> interior) {
  std::vector<T> out(static_cast<std::size_t>(g.padded_points()), T(0));
  if (interior.empty()) return out;
#pragma omp parallel for collapse(2)
  for (int64_t i = 0; i < g.n[0]; ++i)
    for (int64_t j = 0; j < g.n[1]; ++j)
      std::copy_n(interior.data() + (i * g.n[1] + j) * g.n[2], g.n[2],
                  out.data() + g.index(i, j, 0));
  return out;
}

template <class T>
std::vector<T> interior_copy(const DemoGrid& g, const std::vector<T>& padded) {
  std::vector<T> out(static_cast<std::size_t>(g.interior_points()));
#pragma omp parallel for collapse(2)
  for (int64_t i = 0; i < g.n[0]; ++i)
    for (int64_t j = 0; j < g.n[1]; ++j)
      std::copy_n(padded.data() + g.index(i, j, 0), g.n[2], out.data() + (i * g.n[1] + j) * g.n[2]);
  return out;
}

// Total seconds of the regions whose path ends in "TTISelfAdjointForward/<name>" (wherever the
// caller nested the call).
double region_total(const Timers* timers, const std::string& name) {
  if (!timers) return 0;
  const std::string suffix = std::string(kTopRegion) + "/" + name;
  double total = 0;
  for (const auto& s : timers->stats())
    if (s.path.size() >= suffix.size() &&
        s.path.compare(s.path.size() - suffix.size(), suffix.size(), suffix) == 0)
      total += s.total;
  return total;
}

// Arrays moved per grid point and step (multiply by the element size), as the backends' loops
// move them; each array counted once per step, also where neighbouring tiles both read its
// rows along their borders (those reads meet in the shared cache).
//   two-pass flux: reads u, nx, ny, nz, a, bma, s; writes Fx, Fy, Fz, which the cpu's stores
//     first read into cache (write-allocate: 3 more; a GPU writes whole sectors without).
//   two-pass divergence: reads Fx, Fy, Fz, u, u-, m, d; writes u+ over u- (no allocate).
//   fused: reads u, u-, the eight coefficients; writes u+ over u- (the fluxes stay on chip);
//     constant materials (cpu): u, u- and u+ only, the coefficients are eight numbers; nz
//     derived (cpu, derived_nz): seven coefficients.
//   fused, two steps per sweep (cpu): per pair of steps reads u, u-, the coefficients once and
//     writes u^{t+1}, u^{t+2} into two other arrays (with write-allocate: 4), 7 per step (6.5
//     with nz derived); 3 with constant materials. An odd last step is a one-step sweep.
struct DemoTraffic {
  double flux = 0, divergence = 0, fused = 0;
};
DemoTraffic demo_traffic(Backend backend, TtiDemoForm form, bool constant, bool derived_nz,
                         int sweep_steps, int64_t nt) {
  if (form == TtiDemoForm::fused) {
    const double fewer = derived_nz ? 1.0 : 0.0;
    const double one = constant ? 3.0 : 11.0 - fewer, pair = constant ? 6.0 : 14.0 - fewer;
    if (sweep_steps != 2) return {0, 0, one};
    const double pairs = static_cast<double>(nt / 2), singles = static_cast<double>(nt % 2);
    return {0, 0, (pairs * pair + singles * one) / static_cast<double>(nt)};
  }
  return {backend == Backend::cpu ? 13.0 : 10.0, 8, 0};
}

WorkModel section_work(double points, double flops_per_point, double bytes_per_point,
                       Precision precision) {
  WorkModel w;
  w.points = points;
  w.flops = flops_per_point * points;
  w.bytes = bytes_per_point * points;
  w.precision = precision;
  return w;
}

// ---------------------------------------------------------------------------------------------
// Under MPI.

using demo_decomposition::Window;

// The whole grid as one process's window.
Window whole_grid(const std::array<int64_t, 3>& n) {
  return demo_decomposition::window_of(n, 0, 0, {1, 1, 1});
}

// Steps per sweep the ghost ring must allow for (its width is that times 2M - 1): the cpu fused
// kernel's sweep_steps where fixed, 2 where the autotuner may choose two, 1 otherwise (the
// static choice, kStaticSweepSteps).
int sweep_steps_allowed(const TtiDemoOptions& opt) {
  if (opt.form != TtiDemoForm::fused) return 1;
  if (opt.autotune) return 2;
  if (opt.cpu.sweep_steps > 0) return opt.cpu.sweep_steps;
  return kStaticSweepSteps;
}

// The largest window over the largest block of any rank, for a process grid and ring.
double window_growth(const std::array<int64_t, 3>& n, const std::array<int, 3>& grid,
                     int64_t ghost) {
  double block = 1, window = 1;
  for (int a = 0; a < 3; ++a) {
    const double b = static_cast<double>((n[a] + grid[a] - 1) / grid[a]);
    block *= b;
    window *= b + (grid[a] == 1 ? 0 : grid[a] == 2 ? 1 : 2) * static_cast<double>(ghost);
  }
  return window / block;
}

// This rank's window of a grid of `shape` points, and the steps per sweep it allows
// (demo_decomposition.hpp's two modes). Where the autotuner may choose two steps per sweep, its
// ring is allowed only where it adds at most 30% to the largest block (two steps read the
// coefficients once for two: 28 bytes per point and step against 44 in float32), else one step,
// whose ring costs the flux of M layers; a process grid that leaves a block fewer than the
// two-step ring's points falls back to one step too.
std::pair<Window, int> rank_window(const Index& shape, const TtiDemoOptions& opt) {
  const Communicator& comm = opt.comm;
  if (!comm.distributed()) {
    for (int a = 0; a < 3; ++a)
      require(opt.process_grid[a] == 0 || opt.process_grid[a] == 1, "process_grid",
              "ranks per axis whose product is the 1 rank of comm ({0, 0, 0} or {1, 1, 1})",
              fmt::format("{{{}, {}, {}}}", opt.process_grid[0], opt.process_grid[1],
                          opt.process_grid[2]));
    return {whole_grid(shape), sweep_steps_allowed(opt)};
  }
  const int reach = opt.space_order - 1;  // 2M - 1 points per step
  int steps = sweep_steps_allowed(opt);
  // z left whole where a grid of the given entries allows it: its rows stay long, and with
  // one step per sweep only then is the ring's exchange overlapped.
  auto choose = [&](int k) {
    const std::string minimum = fmt::format(
        "the ghost ring of {} step{} per sweep, {} x (space_order - 1)", k, k == 1 ? "" : "s", k);
    if (opt.process_grid[2] == 0) {
      try {
        return decomposition::choose_process_grid(shape, comm.size(),
                                                  {opt.process_grid[0], opt.process_grid[1], 1},
                                                  std::int64_t(k) * reach, minimum, "grid points");
      } catch (const InvalidArgument&) {
      }
    }
    return decomposition::choose_process_grid(shape, comm.size(), opt.process_grid,
                                              std::int64_t(k) * reach, minimum, "grid points");
  };
  std::array<int, 3> grid{};
  const bool automatic = opt.form == TtiDemoForm::fused && opt.cpu.sweep_steps == 0;
  if (steps == 2 && automatic) {
    try {
      grid = choose(2);
      if (window_growth(shape, grid, 2 * reach) > 1.3) steps = 1;
    } catch (const InvalidArgument&) {
      steps = 1;
    }
  }
  if (steps == 1 || !automatic) grid = choose(steps);
  return {demo_decomposition::window_of(shape, std::int64_t(steps) * reach, comm.rank(), grid),
          steps};
}

// The part of the grid a call's u and u_prev hold on this rank (TtiDemoOutput::block_origin,
// block_shape, process_grid): the whole grid on one process or with results all_ranks, on rank 0
// only with root (none elsewhere), the rank's block with own.
TtiDemoBlock held_block(const Window& w, const Index& shape, const TtiDemoOptions& opt) {
  TtiDemoBlock b;
  b.process_grid = w.process_grid;
  if (!opt.comm.distributed() || opt.results == ResultLayout::all_ranks ||
      (opt.results == ResultLayout::root && opt.comm.rank() == 0)) {
    b.shape = shape;
  } else if (opt.results == ResultLayout::own) {
    b.origin = w.own_lo;
    b.shape = w.own_shape();
  }
  return b;
}

// A material or initial field cut to the window (one value stays one value; empty stays empty).
template <class T>
std::vector<T> window_copy(std::span<const T> field, const std::array<int64_t, 3>& n,
                           const Window& w) {
  if (field.size() <= 1) return std::vector<T>(field.begin(), field.end());
  const auto shape = w.shape();
  std::vector<T> out(static_cast<std::size_t>(shape[0] * shape[1] * shape[2]));
#pragma omp parallel for collapse(2)
  for (int64_t i = 0; i < shape[0]; ++i)
    for (int64_t j = 0; j < shape[1]; ++j)
      std::copy_n(field.data() + ((w.lo[0] + i) * n[1] + w.lo[1] + j) * n[2] + w.lo[2], shape[2],
                  out.data() + (i * shape[1] + j) * shape[2]);
  return out;
}

// The input of this rank's window: its materials and initial state, owned by `storage`. The
// source is placed separately (window_source); its position here is not read.
template <class T>
struct WindowInput {
  TtiDemoInput<T> in;
  std::vector<std::vector<T>> storage;
};
template <class T>
WindowInput<T> window_input(const TtiDemoInput<T>& whole, const Window& w) {
  WindowInput<T> r;
  r.in = whole;
  r.in.shape = w.shape();
  auto cut = [&](std::span<const T>& field) {
    r.storage.push_back(window_copy(field, whole.shape, w));
    field = r.storage.back();
  };
  r.storage.reserve(10);
  auto& m = r.in.material;
  for (auto* v : {&m.vp, &m.b, &m.epsilon, &m.eta, &m.f, &m.theta, &m.phi, &m.damping}) cut(*v);
  cut(r.in.initial_u);
  cut(r.in.initial_u_prev);
  return r;
}

// The source's corners in the window (the first `corners` of the result): each rank whose window
// holds a corner injects it, with the whole grid's weight.
template <class T>
kernels::DemoSource<T> window_source(const kernels::DemoSource<T>& whole, const DemoGrid& local,
                                     const Window& w) {
  kernels::DemoSource<T> src = whole;
  src.corners = 0;
  for (int c = 0; c < whole.corners; ++c) {
    if (!w.in_window(whole.points[c])) continue;
    const int k = src.corners++;
    for (int a = 0; a < 3; ++a) src.points[k][a] = whole.points[c][a] - w.lo[a];
    src.weights[k] = whole.weights[c];
    src.cells[k] = local.index(src.points[k][0], src.points[k][1], src.points[k][2]);
  }
  return src;
}

// The block [origin, origin + shape) of a padded window field, in order.
template <class T>
std::vector<T> block_copy(const DemoGrid& g, const std::vector<T>& padded,
                          const std::array<int64_t, 3>& origin,
                          const std::array<int64_t, 3>& shape) {
  std::vector<T> out(static_cast<std::size_t>(shape[0] * shape[1] * shape[2]));
#pragma omp parallel for collapse(2)
  for (int64_t i = 0; i < shape[0]; ++i)
    for (int64_t j = 0; j < shape[1]; ++j)
      std::copy_n(padded.data() + g.index(origin[0] + i, origin[1] + j, origin[2]), shape[2],
                  out.data() + (i * shape[1] + j) * shape[2]);
  return out;
}

// What every rank of a distributed call must pass alike (collective::require_same): the
// options but nparallel, the sizes, the time axis, the source and the hashes of every array.
template <class T>
void check_ranks(const Device& device, const TtiDemoInput<T>& in, const TtiDemoOptions& opt) {
  if (!opt.comm.distributed()) return;
  collective::on_every_rank(opt.comm, [&] {
    require(device.backend == Backend::cpu, "device",
            "the cpu backend: tti_demo on several ranks (comm) runs there only", device.name());
  });
  auto bits = [](double v) { return std::bit_cast<std::int64_t>(v); };
  using collective::hash_of;
  std::vector<collective::Field> f{
      {"dtype (bytes per value)", sizeof(T)},
      {"space_order", opt.space_order},
      {"form", static_cast<std::int64_t>(opt.form)},
      {"cpu.sweep_steps", opt.cpu.sweep_steps},
      {"autotune", opt.autotune},
      {"process_grid", hash_of(std::span<const int>(opt.process_grid)), true},
      {"results", static_cast<std::int64_t>(opt.results)},
      {"shape", hash_of(std::span<const int64_t>(in.shape)), true},
      {"spacing", hash_of(std::span<const double>(in.spacing)), true},
      {"dt", bits(in.dt)},
      {"nt", in.nt},
      {"source_position", hash_of(std::span<const double>(in.source_position)), true}};
  const auto& m = in.material;
  for (auto [name, array] :
       {std::pair{"vp", m.vp}, std::pair{"b", m.b}, std::pair{"epsilon", m.epsilon},
        std::pair{"eta", m.eta}, std::pair{"f", m.f}, std::pair{"theta", m.theta},
        std::pair{"phi", m.phi}, std::pair{"damping", m.damping},
        std::pair{"source_amplitudes", in.source_amplitudes}, std::pair{"initial_u", in.initial_u},
        std::pair{"initial_u_prev", in.initial_u_prev}}) {
    f.push_back({fmt::format("{} (values)", name), static_cast<std::int64_t>(array.size())});
    f.push_back({name, hash_of(array), true});
  }
  collective::require_same(opt.comm, f, "tti_demo");
}

// Whether every rank's window has constant coefficients, all of the same values: the whole
// grid's `constant` (the windows cover it).
template <class T>
bool constant_everywhere(const Communicator& comm, bool local, const CoefficientArrays<T>& c,
                         const DemoGrid& g) {
  if (!comm.distributed()) return local;
  std::uint64_t h = 0;
  const int64_t first = g.index(0, 0, 0);
  for (const auto* v : {&c.nx, &c.ny, &c.nz, &c.a, &c.bma, &c.s, &c.m, &c.d})
    h = collective::hash_bytes(v->data() + first, sizeof(T), h);
  const auto hash = static_cast<std::int64_t>(h);
  const bool all = collective::allreduce_min(comm, std::int64_t(local)) == 1;
  return all && collective::allreduce_max(comm, hash) == collective::allreduce_min(comm, hash);
}

// The options of one process: a call's rerun on the reference backend when verifying.
TtiDemoOptions one_process(TtiDemoOptions opt) {
  opt.comm = Communicator();
  opt.process_grid = {0, 0, 0};
  opt.results = ResultLayout::all_ranks;
  return opt;
}

}  // namespace

const char* tti_demo_form_name(TtiDemoForm form) {
  return form == TtiDemoForm::two_pass ? "two-pass" : "fused";
}

TtiDemoForm parse_tti_demo_form(const std::string& name) {
  if (name == "two-pass" || name == "two_pass") return TtiDemoForm::two_pass;
  if (name == "fused") return TtiDemoForm::fused;
  throw_invalid_argument("form", "two-pass or fused", "\"" + name + "\"");
}

TtiDemoFlops tti_demo_flops(int space_order) {
  check_space_order(space_order);
  return {tti::demo_flux_flops(space_order), tti::demo_divergence_flops(space_order)};
}

template <class T>
double tti_demo_dt_limit(const TtiDemoInput<T>& in, int space_order) {
  check_space_order(space_order);
  const auto& m = in.material;
  // max(vp^2 / b) and max(b max(1 + 2 eps, 1 - f eta^2)) over the grid (constants broadcast).
  const int64_t points = in.shape[0] * in.shape[1] * in.shape[2];
  auto at = [](std::span<const T> s, int64_t p) {
    return static_cast<double>(s[s.size() == 1 ? 0 : p]);
  };
  const bool vp_b_const = m.vp.size() == 1 && m.b.size() == 1;
  const int64_t n1 = vp_b_const ? 1 : points;
  const bool c_const =
      m.b.size() == 1 && m.epsilon.size() == 1 && m.eta.size() == 1 && m.f.size() == 1;
  const int64_t n2 = c_const ? 1 : points;
  double max_m = -1, max_c = -1, max_d = 0;
#pragma omp parallel for reduction(max : max_m)
  for (int64_t p = 0; p < n1; ++p) max_m = std::max(max_m, at(m.vp, p) * at(m.vp, p) / at(m.b, p));
#pragma omp parallel for reduction(max : max_c)
  for (int64_t p = 0; p < n2; ++p) {
    const double eta = at(m.eta, p);
    max_c = std::max(max_c,
                     at(m.b, p) * std::max(1 + 2 * at(m.epsilon, p), 1 - at(m.f, p) * eta * eta));
  }
  for (const T d : m.damping) max_d = std::max(max_d, static_cast<double>(d));
  const double c = sum_abs_coefficients(space_order);
  double inv_h2 = 0;
  for (int d = 0; d < 3; ++d) inv_h2 += 1 / (in.spacing[d] * in.spacing[d]);
  const double radius_per_dt2 = max_m * max_c * 4 * c * c * inv_h2;
  return std::sqrt((4 - 2 * max_d) / radius_per_dt2);
}

TtiDemoBlock tti_demo_block(const std::array<std::int64_t, 3>& shape,
                            const TtiDemoOptions& options) {
  check_shape(shape, options.space_order);
  return held_block(rank_window(shape, options).first, shape, options);
}

template <class T>
TtiDemoBlock tti_demo_block(const TtiDemoInput<T>& in, const TtiDemoOptions& options) {
  return tti_demo_block(in.shape, options);
}

// The fused cpu kernel's working-set budget and steps per sweep, timed over a few steps of this
// problem on copies of its fields (autotune.hpp); the choice goes into problem.tuning.
template <class T>
void autotune_cpu(const Device& device, kernels::DemoProblem<T>& problem, const std::vector<T>& u,
                  const std::vector<T>& u_prev, const TtiDemoOptions& options) {
  TuningKey key;
  key.kernel = "tti_demo";
  key.device = "cpu";
  key.precision = sizeof(T) == 4 ? Precision::fp32 : Precision::fp64;
  key.threads = resolve_threads(options.nparallel, "nparallel");
  key.shape = fmt::format("{}x{}x{} space_order={} materials={} tile_rows={}", problem.grid.n[0],
                          problem.grid.n[1], problem.grid.n[2], options.space_order,
                          problem.constant ? "constant" : "varying", options.cpu.tile_rows);
  // The static choice first (autotune keeps it unless another is clearly faster).
  const TuningParameters static_choice{{"sweep_steps", problem.tuning.sweep_steps},
                                       {"tile_kib", problem.tuning.tile_kib}};
  std::vector<TuningParameters> candidates{static_choice};
  for (std::int64_t steps : {1, 2})
    for (std::int64_t kib : {1024, 2048, 4096, 8192})
      if (TuningParameters c{{"sweep_steps", steps}, {"tile_kib", kib}}; c != static_choice)
        candidates.push_back(c);
  std::vector<T> trial_u, trial_prev;
  const auto tuning = autotune(key, candidates, [&](const TuningParameters& c) {
    trial_u = u;  // each trial starts from the call's fields and leaves them untouched
    trial_prev = u_prev;
    kernels::DemoProblem<T> trial = problem;
    trial.nt = std::min<std::int64_t>(problem.nt, 4);  // two sweeps of two steps
    trial.tuning.sweep_steps = static_cast<int>(c.at("sweep_steps"));
    trial.tuning.tile_kib = c.at("tile_kib");
    const Context quiet{device, nullptr};  // the trials are not the call's timings
    SCIPROXY_RUN_KERNEL(quiet, demo_forward, trial,
                        kernels::DemoFields<T>{trial_u.data(), trial_prev.data()});
  });
  const auto steps = tuning.best.find("sweep_steps");
  const auto kib = tuning.best.find("tile_kib");
  // A cache entry with values the kernel would refuse is ignored, not trusted.
  if (steps != tuning.best.end() && (steps->second == 1 || steps->second == 2))
    problem.tuning.sweep_steps = static_cast<int>(steps->second);
  if (kib != tuning.best.end() && kib->second >= 1) problem.tuning.tile_kib = kib->second;
}

template <class T>
TtiDemoOutput<T> tti_demo(const Device& device, const TtiDemoInput<T>& whole,
                          const TtiDemoOptions& options, Timers* timers) {
  RecordedCall call("tti_demo", device, timers);
  const Communicator& comm = options.comm;
  TtiDemoOutput<T> out;
  {
    auto top = Timers::region(call.timers(), kTopRegion);  // closed before the reference rerun
    Window window;
    int steps_allowed = 1;
    check_ranks(device, whole, options);
    collective::on_every_rank(comm, [&] {
      std::tie(window, steps_allowed) = rank_window(whole.shape, options);
      check_input(whole, options, device.backend, window.shape());
    });
    out.process_grid = window.process_grid;
    const DemoGrid g = make_grid(window.shape(), whole.spacing, options.space_order);
    const TtiDemoForm form =
        device.backend == Backend::reference ? TtiDemoForm::two_pass : options.form;

    out.dt_limit = tti_demo_dt_limit(whole, options.space_order);
    ThreadCount threads(device.backend == Backend::reference ? 0 : options.nparallel);

    // This rank's window of the input (the input itself on one process).
    WindowInput<T> cut;
    if (comm.distributed()) cut = window_input(whole, window);
    const TtiDemoInput<T>& in = comm.distributed() ? cut.in : whole;

    std::vector<T> u, u_prev;
    kernels::DemoSource<T> src;
    CoefficientArrays<T> coefficients;
    bool constant = false;    // the cpu fused kernel's constant-material path
    bool derived_nz = false;  // the cpu fused kernel derives nz from nx, ny
    int sweep_steps = 1;      // the cpu fused kernel's steps per sweep
    {
      auto r = Timers::region(call.timers(), "setup");
      u = padded_copy<T>(g, in.initial_u);
      u_prev = padded_copy<T>(g, in.initial_u_prev);
      src = make_source(make_grid(whole.shape, whole.spacing, options.space_order), whole);
      if (comm.distributed()) src = window_source(src, g, window);
      if (device.backend != Backend::reference) {
        coefficients = make_coefficients(g, in);
        const bool fused_cpu = device.backend == Backend::cpu && form == TtiDemoForm::fused;
        constant =
            fused_cpu &&
            constant_everywhere(comm, constant_coefficients(g, in, coefficients), coefficients, g);
        derived_nz = fused_cpu && !constant && nz_derivable(g, coefficients);
        if (comm.distributed())
          derived_nz = collective::allreduce_min(comm, std::int64_t(derived_nz)) == 1;
        if (fused_cpu)
          sweep_steps = std::min(
              options.cpu.sweep_steps ? options.cpu.sweep_steps : kStaticSweepSteps, steps_allowed);
        for (int c = 0; c < src.corners; ++c)
          src.scaled[c] =
              static_cast<T>(src.weights[c] * static_cast<double>(coefficients.m[src.cells[c]]));
      }
    }
    const kernels::DemoFields<T> fields{u.data(), u_prev.data()};
    static const char* const kSections[] = {"flux pass", "divergence pass",
                                            "fused flux + divergence", "source injection",
                                            "halo exchange"};
    std::array<double, 5> before{};
    for (int i = 0; i < 5; ++i) before[i] = region_total(call.timers(), kSections[i]);
    kernels::DemoProblem<T> problem;
    problem.grid = g;
    problem.dt = in.dt;
    problem.source = src;
    problem.nt = in.nt;
    problem.form = form;
    if (device.backend == Backend::reference) {
      const auto& mat = in.material;
      problem.raw = {field_of(mat.vp),  field_of(mat.b),      field_of(mat.epsilon),
                     field_of(mat.eta), field_of(mat.f),      field_of(mat.theta),
                     field_of(mat.phi), field_of(mat.damping)};
    } else {
      problem.coef = coefficients.view();
      problem.constant = constant;
      problem.derived_nz = derived_nz;
      problem.tuning = options.cpu;
      problem.tuning.sweep_steps = sweep_steps;
    }
    if (options.autotune && device.backend == Backend::cpu && form == TtiDemoForm::fused) {
      auto r = Timers::region(call.timers(), "autotune");
      autotune_cpu(device, problem, u, u_prev, options);
      // The ghost ring is sized for rank 0's choice of steps per sweep, which all ranks take.
      if (comm.distributed())
        problem.tuning.sweep_steps = static_cast<int>(std::min<std::int64_t>(
            collective::allreduce_max(
                comm, std::int64_t(comm.rank() == 0 ? problem.tuning.sweep_steps : 0)),
            steps_allowed));
    }
    // One step per sweep: u+ on the block only, u's ring refreshed; two: the whole window, both
    // fields' rings refreshed (demo_decomposition.hpp).
    const bool one_step = problem.tuning.sweep_steps != 2 || form == TtiDemoForm::two_pass;
    demo_decomposition::GhostExchange<T> exchange(comm, window, !one_step);
    if (comm.distributed()) {
      problem.exchange = &exchange;
      if (one_step) {
        const kernels::DemoBox b{window.own_lo[0] - window.lo[0], window.own_hi[0] - window.lo[0],
                                 window.own_lo[1] - window.lo[1], window.own_hi[1] - window.lo[1]};
        problem.update_box = b;
        // What reads no ring: the block less `ghost` along each side with a neighbour, when z
        // is not split (whole z rows read z's ring).
        auto has = [&](int a, int side) {
          return window.neighbour[a][side] >= 0 ? window.ghost : 0;
        };
        if (window.process_grid[2] == 1)
          problem.interior_box = {b.x0 + has(0, 0), b.x1 - has(0, 1), b.y0 + has(1, 0),
                                  b.y1 - has(1, 1)};
      }
    }
    const Context ctx{device, call.timers()};
    SCIPROXY_RUN_KERNEL(ctx, demo_forward, problem, fields);
    {
      auto r = Timers::region(call.timers(), "output");
      const TtiDemoBlock held = held_block(window, whole.shape, options);
      out.block_origin = held.origin;
      out.block_shape = held.shape;
      if (!comm.distributed()) {
        out.u = interior_copy(g, u);
        out.u_prev = interior_copy(g, u_prev);
      } else {
        // This rank's block, then gathered as options.results asks.
        Index origin{};
        for (int a = 0; a < 3; ++a) origin[a] = window.own_lo[a] - window.lo[a];
        const Index own = window.own_shape();
        std::vector<T> mine = block_copy(g, u, origin, own),
                       mine_prev = block_copy(g, u_prev, origin, own);
        if (options.results == ResultLayout::own) {
          out.u = std::move(mine);
          out.u_prev = std::move(mine_prev);
        } else {
          const int root = options.results == ResultLayout::root ? 0 : -1;
          demo_decomposition::gather_blocks<T>(comm, window, whole.shape, mine, out.u, root);
          demo_decomposition::gather_blocks<T>(comm, window, whole.shape, mine_prev, out.u_prev,
                                               root);
        }
      }
    }

    // Work model: points = grid points x steps (the whole grid's, on every rank); bytes: each
    // array a pass's loops read or write, once per step (demo_traffic).
    const double points = static_cast<double>(whole.shape[0] * whole.shape[1] * whole.shape[2]) *
                          static_cast<double>(in.nt);
    const double es = sizeof(T);
    const Precision precision = sizeof(T) == 4 ? Precision::fp32 : Precision::fp64;
    const TtiDemoFlops flops = tti_demo_flops(options.space_order);
    // The steps per sweep that ran: the autotuner may have changed the static choice.
    const DemoTraffic traffic =
        demo_traffic(device.backend, form, constant, derived_nz, problem.tuning.sweep_steps, in.nt);
    if (form == TtiDemoForm::two_pass) {
      out.sections.push_back(
          {"flux pass", section_work(points, flops.flux, traffic.flux * es, precision), 0});
      out.sections.push_back(
          {"divergence pass",
           section_work(points, flops.divergence, traffic.divergence * es, precision), 0});
    } else {
      out.sections.push_back({"fused flux + divergence",
                              section_work(points, flops.total(), traffic.fused * es, precision),
                              0});
    }
    // 8 corners per step: u += scaled * s (2 flops), u read and written, one amplitude.
    const double injections = 8.0 * static_cast<double>(in.nt);
    out.sections.push_back(
        {"source injection", section_work(injections, 2, 2 * es + es / 8, precision), 0});
    // Under MPI: the ghost rings' refresh (no work of the operator; its bytes are the
    // communicator's, in the report's ranks summary).
    if (comm.distributed())
      out.sections.push_back({"halo exchange", section_work(0, 0, 0, precision), 0});
    out.work.points = points;
    out.work.precision = precision;
    // What every step reads again: u, u-, the coefficients (one value each when constant), and
    // the two-pass fluxes, of a rank's window; in the last-level cache when it is small enough
    // (metrics.hpp).
    const double arrays =
        2.0 + (constant ? 0.0 : 8.0) + (form == TtiDemoForm::two_pass ? 3.0 : 0.0);
    out.work.working_set_bytes = arrays * es * static_cast<double>(g.padded_points());
    for (auto& s : out.sections) s.work.working_set_bytes = out.work.working_set_bytes;
    for (auto& s : out.sections) {
      out.work.flops += s.work.flops;
      out.work.bytes += s.work.bytes;
      for (int i = 0; i < 5; ++i)
        if (s.name == kSections[i]) s.seconds = region_total(call.timers(), s.name) - before[i];
    }
    call.set_work(out.work);
    if (call.recording()) {
      auto& parameters = call.parameters();
      parameters.set("shape", std::vector<long long>(whole.shape.begin(), whole.shape.end()));
      parameters.set("nt", in.nt);
      parameters.set("space_order", options.space_order);
      parameters.set("form", tti_demo_form_name(form));
    }
  }
  // Each rank compares what it holds (the whole grid, or its block) with one process's reference.
  if (call.verifying() && !out.u.empty()) {
    const TtiDemoOutput<T> expected = call.on_reference(
        [&] { return tti_demo<T>(RecordedCall::reference_device(), whole, one_process(options)); });
    const Tolerance tolerance = tti_demo_tolerance(precision_of<T>());
    if (out.block_shape == whole.shape) {
      call.compare<T>("u", out.u, expected.u, tolerance);
      call.compare<T>("u_prev", out.u_prev, expected.u_prev, tolerance);
    } else {
      const DemoGrid w = make_grid(whole.shape, whole.spacing, options.space_order);
      const std::vector<T> u_ref = block_copy(w, padded_copy<T>(w, expected.u), out.block_origin,
                                              out.block_shape),
                           prev_ref = block_copy(w, padded_copy<T>(w, expected.u_prev),
                                                 out.block_origin, out.block_shape);
      call.compare<T>("u", out.u, u_ref, tolerance);
      call.compare<T>("u_prev", out.u_prev, prev_ref, tolerance);
    }
  }
  return out;
}

#define SCIPROXY_INSTANTIATE(T)                                                           \
  template double tti_demo_dt_limit<T>(const TtiDemoInput<T>&, int);                      \
  template TtiDemoBlock tti_demo_block<T>(const TtiDemoInput<T>&, const TtiDemoOptions&); \
  template TtiDemoOutput<T> tti_demo<T>(const Device&, const TtiDemoInput<T>&,            \
                                        const TtiDemoOptions&, Timers*);
SCIPROXY_INSTANTIATE(float)
SCIPROXY_INSTANTIATE(double)
#undef SCIPROXY_INSTANTIATE

}  // namespace sciproxy::tti
