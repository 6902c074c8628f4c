// tti: the public entry points of the coupled P/M TTI propagator (include/sciproxy/tti.hpp).
// Argument checks, the padded grid and model, the material coefficients, damping and scaling
// computed once, the stability limit, the work model, dispatch to a backend (kernels.hpp), and
// the adjoint. docs/kernels/tti.md.
//
// Under MPI (opt.comm of several ranks; docs/kernels/tti.md, "Under MPI"): the ranks' agreement
// on the inputs is checked first (check_ranks), each rank builds the coefficients and state of
// its window of the padded grid only (decomposition.hpp), runs the cpu kernel on it with the
// halo exchange, and the traces recorded by the cells' holders are gathered on every rank
// (fill_recorded). Every cell is computed by one rank with one process's arithmetic, so the
// results are one process's bits.
//
// Material (Bube et al. 2016; WaveFD.jl): eta^2 = 2 (eps - delta) / (f + 2 eps) in [0, 1],
//   e = b(1+2eps), g = b(1-f), a = -b(2eps + f eta^2), c = b f eta sqrt(1-eta^2), mm = b f eta^2,
//   scale = dt^2 vp^2 / b, d = dt 2 pi freq_q / Q.
// The tensor over b has eigenvalues 1 + 2 eps (twice), 1 - f (twice), 1 and 1 - f (the 2x2 block
// along n has trace 2 - f and determinant 1 - f), so with the largest eigenvalue of -D-D+ along
// an axis, (2 sum_k |c_k| / h)^2, the leapfrog with damping d is stable while
//   dt^2 K + 2 d <= 4,   K = 4 (sum_k |c_k|)^2 (sum_a 1/h_a^2) max_cells vp^2 max(1 + 2 eps, 1)
// (Schur-Cohn for z^2 - (2 - d - k) z + (1 - d); the local-velocity bound, exact for constant b).
//
// Adjoint. Forward: u^{t+1} = A u^t + B u^{t-1} + S_M s^t, r^t = R u^t, with A = (2 - D) + S L,
// B = D - 1, S = diag(scale), L symmetric. Its transpose runs a^t = A^T a^{t+1} + B a^{t+2} +
// R^T d^t with A^T = (2 - D) + L S, and returns g^t = S_M^T a^{t+1}. In w = S a this is
//   w^t = A w^{t+1} + B w^{t+2} + S R^T d^t,     g^t = (injection points)^T w^{t+1},
// the forward recursion itself, backward in time: the forward kernel with sources at the
// receivers (data reversed in time, injected into P only), receivers at the sources (recording
// P + M, the transpose of injecting into both), output reversed in time. Exact in exact
// arithmetic, so the dot-product test holds to rounding.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "core/collective.hpp"
#include "core/dispatch.hpp"
#include "core/recorded_call.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"
#include "sciproxy/tti.hpp"
#include "seismic/checks.hpp"
#include "tti/case.hpp"
#include "tti/decomposition.hpp"
#include "tti/kernels.hpp"
#include "tti/math.hpp"

namespace sciproxy::tti {

namespace {

using Index = std::array<std::int64_t, 3>;
using kernels::SpaceOrders;

double coefficient_sum(int order) {
  return with_value<SpaceOrders>(order, "space_order", [](auto a) {
    double s = 0;
    for (int k = 1; k <= a.value / 2; ++k) s += std::abs(tti::staggered_coefficient<a.value>(k));
    return s;
  });
}

using seismic::check_locations;
using seismic::shape_string;

void check_options(const TtiOptions& opt) {
  with_value<SpaceOrders>(opt.space_order, "space_order", [](auto) {});
  for (int i = 0; i < 6; ++i)
    // At most 2^60 cells, so that the padded extents fit in int64 (make_setup checks the rest).
    require(opt.sponge_width[i] >= 0 && opt.sponge_width[i] <= (std::int64_t(1) << 60),
            fmt::format("sponge_width[{}]", i), "a width >= 0 cells (at most 2^60)",
            std::to_string(opt.sponge_width[i]));
  require(std::isfinite(opt.q_min) && opt.q_min > 0, "q_min", "a positive, finite Q",
          fmt::format("{}", opt.q_min));
  require(std::isfinite(opt.q_interior) && opt.q_interior > 0, "q_interior", "a positive, finite Q",
          fmt::format("{}", opt.q_interior));
  require(std::isfinite(opt.freq_q) && opt.freq_q >= 0, "freq_q",
          "a finite frequency >= 0 in Hz (0: no attenuation)", fmt::format("{}", opt.freq_q));
  require(std::isfinite(opt.default_f) && opt.default_f > 0 && opt.default_f <= 1, "default_f",
          "f = 1 - vs^2/vp^2 in (0, 1]", fmt::format("{}", opt.default_f));
  resolve_threads(opt.nparallel, "nparallel");
}

// One cell's parameters, with the defaults of empty arrays.
struct Cell {
  double vp, b, eps, delta, theta, phi, f;
};

template <class T>
Cell cell_of(const TtiModel<T>& m, const TtiOptions& opt, std::int64_t i) {
  auto at = [&](std::span<const T> a, double fallback) {
    return a.empty() ? fallback : static_cast<double>(a[i]);
  };
  return {at(m.vp, 0),    at(m.buoyancy, 1), at(m.epsilon, 0),      at(m.delta, 0),
          at(m.theta, 0), at(m.phi, 0),      at(m.f, opt.default_f)};
}

template <class T>
void check_model(const TtiModel<T>& m, const TtiOptions& opt) {
  const Grid& g = m.grid;
  // The grid is vp's shape and grid_spacing (Python's names; C's model.vp and model.spacing):
  // messages name those arguments, not the C++ struct that carries them.
  require(g.ndim == 3, "vp", "a 3-D model (the TTI propagator is three-dimensional)",
          fmt::format("{} dimensions", g.ndim));
  const std::int64_t radius = opt.space_order / 2;
  for (int d = 0; d < 3; ++d) {
    require(g.shape[d] >= radius, "vp",
            fmt::format("at least space_order/2 = {} cells along axis {} for the stencil of "
                        "order {}",
                        radius, d, opt.space_order),
            std::to_string(g.shape[d]));
    require(std::isfinite(g.spacing[d]) && g.spacing[d] > 0, fmt::format("grid_spacing[{}]", d),
            "a positive, finite cell size in metres", fmt::format("{}", g.spacing[d]));
  }
  const std::int64_t cells = g.cells();
  auto check_size = [&](std::span<const T> a, const char* name, bool required) {
    if (a.empty() && !required) return;
    require(static_cast<std::int64_t>(a.size()) == cells, name,
            fmt::format("{} values (model shape {}){}", cells, shape_string(g),
                        required ? "" : ", or none for the default"),
            fmt::format("{} values", a.size()));
  };
  check_size(m.vp, "vp", true);
  check_size(m.buoyancy, "buoyancy", false);
  check_size(m.epsilon, "epsilon", false);
  check_size(m.delta, "delta", false);
  check_size(m.theta, "theta", false);
  check_size(m.phi, "phi", false);
  check_size(m.f, "f", false);
  for (std::int64_t i = 0; i < cells; ++i) {
    const Cell c = cell_of(m, opt, i);
    const std::int64_t i0 = i / (g.shape[1] * g.shape[2]), i1 = (i / g.shape[2]) % g.shape[1],
                       i2 = i % g.shape[2];
    auto where = [&](double value) {
      return fmt::format("{} at cell [{}, {}, {}]", value, i0, i1, i2);
    };
    if (!(std::isfinite(c.vp) && c.vp > 0))
      throw_invalid_argument("vp", "positive, finite velocities in m/s", where(c.vp));
    if (!(std::isfinite(c.b) && c.b > 0))
      throw_invalid_argument("buoyancy", "positive, finite values (1 / density)", where(c.b));
    if (!(std::isfinite(c.eps) && 1 + 2 * c.eps > 0))
      throw_invalid_argument("epsilon", "finite values > -1/2", where(c.eps));
    if (!std::isfinite(c.delta)) throw_invalid_argument("delta", "finite values", where(c.delta));
    if (!std::isfinite(c.theta)) throw_invalid_argument("theta", "finite angles", where(c.theta));
    if (!std::isfinite(c.phi)) throw_invalid_argument("phi", "finite angles", where(c.phi));
    if (!(std::isfinite(c.f) && c.f > 0 && c.f <= 1))
      throw_invalid_argument("f", "f = 1 - vs^2/vp^2 in (0, 1]", where(c.f));
    const double eta2 = 2 * (c.eps - c.delta) / (c.f + 2 * c.eps);
    if (!(c.f + 2 * c.eps > 0 && eta2 >= 0 && eta2 <= 1))
      throw_invalid_argument(
          "epsilon, delta",
          "eta^2 = 2 (eps - delta) / (f + 2 eps) in [0, 1] (delta <= eps and delta >= -f/2)",
          fmt::format("eta^2 = {} from eps = {}, delta = {}, f = {} at cell [{}, {}, {}]", eta2,
                      c.eps, c.delta, c.f, i0, i1, i2));
  }
}

}  // namespace

template <class T>
double tti_max_dt(const TtiModel<T>& model, const TtiOptions& opt) {
  check_options(opt);
  check_model(model, opt);
  double speed2 = 0;  // max vp^2 lambda_max
  for (std::int64_t i = 0; i < model.grid.cells(); ++i) {
    const Cell c = cell_of(model, opt, i);
    speed2 = std::max(speed2, c.vp * c.vp * std::max(1 + 2 * c.eps, 1.0));
  }
  double inv_h2 = 0;
  for (int d = 0; d < 3; ++d) inv_h2 += 1 / (model.grid.spacing[d] * model.grid.spacing[d]);
  const double s = coefficient_sum(opt.space_order);
  const double k = 4 * s * s * inv_h2 * speed2;
  bool sponge = false;
  for (int i = 0; i < 6; ++i)
    sponge = sponge || (opt.sponge_width[i] > 0 && !(opt.free_surface && i == 0));
  const double beta = 2 * std::numbers::pi * opt.freq_q /
                      std::min(opt.q_interior, sponge ? opt.q_min : opt.q_interior);
  // The positive root of k dt^2 + 2 beta dt = 4, written without the cancellation of
  // (-beta + sqrt(beta^2 + 4k)) / k, which gave 0 for a small k (a coarse grid).
  return 4 / (beta + std::sqrt(beta * beta + 4 * k));
}

namespace {

// The padded problem. On one process the local arrays are the whole padded grid; under MPI
// they are this rank's window of it (decomposition.hpp): the coefficients, state and injection
// cells below are local, n and points the whole grid's.
template <class T>
struct Setup {
  int order = 8;
  std::int64_t halo = 4, nshots = 1, nsources = 0, nreceivers = 0, nt = 0;
  Index model_shape{}, offset{}, n{};
  std::int64_t points = 1, cells = 1;
  decomposition::Subdomain subdomain;  // origin 0 and shape n on one process
  std::int64_t local_points = 1;
  bool distributed = false;
  std::vector<T> e, g, a, c, mm, n0, n1, n2, scale, damping;
  std::vector<std::int64_t> source_cells, receiver_cells;
  std::vector<T> source_scale, receiver_scale;
  kernels::TtiProblem<T> problem;

  const Index& origin() const { return subdomain.origin; }
  const Index& local() const { return subdomain.shape; }
  // The local flat index of a model cell, or -1 when another rank holds it.
  std::int64_t local_cell(const std::int64_t* loc) const {
    std::int64_t k = 0;
    for (int a = 0; a < 3; ++a) {
      const std::int64_t padded = loc[a] + offset[a];
      if (padded < subdomain.own_lo[a] || padded >= subdomain.own_hi[a]) return -1;
      k = k * local()[a] + padded - origin()[a];
    }
    return k;
  }
};

// Checks the input (traces: the amplitudes the run injects, named `traces_name`, with
// `per_shot` traces per shot) and builds the padded problem.
template <class T>
void make_setup(Setup<T>& s, const TtiInput<T>& in, const TtiOptions& opt,
                std::span<const T> traces, const char* traces_name, std::int64_t per_shot) {
  check_options(opt);
  check_model(in.model, opt);
  require(std::isfinite(in.dt) && in.dt > 0, "dt", "a positive, finite time step in seconds",
          fmt::format("{}", in.dt));
  require(in.nshots >= 1, "nshots", "at least 1 shot", std::to_string(in.nshots));
  require(in.nsources >= 0, "nsources", "a number of sources per shot >= 0",
          std::to_string(in.nsources));
  require(in.nreceivers >= 0, "nreceivers", "a number of receivers per shot >= 0",
          std::to_string(in.nreceivers));
  require(in.nt >= 0, "nt", "a number of time samples >= 0 (0: from the amplitudes)",
          std::to_string(in.nt));
  std::int64_t nt = in.nt;
  // Products of the caller's counts: refused, naming the count, when int64 cannot hold them.
  auto product = [](std::int64_t a, std::int64_t b, const char* argument, const char* what) {
    std::int64_t out = 0;
    if (__builtin_mul_overflow(a, b, &out))
      throw_invalid_argument(argument, fmt::format("{} that fits in int64", what),
                             fmt::format("{} x {}", a, b));
    return out;
  };
  const std::int64_t ntraces = product(in.nshots, per_shot, traces_name, "nshots x traces");
  product(product(in.nshots, std::max(in.nsources, in.nreceivers), "nshots", "nshots x traces"), nt,
          "nt", "nshots x traces x nt samples");
  const auto ntotal = static_cast<std::int64_t>(traces.size());
  if (nt == 0 && ntraces > 0 && ntotal > 0 && ntotal % ntraces == 0) nt = ntotal / ntraces;
  require(ntotal == ntraces * nt, traces_name,
          fmt::format("[nshots, {}, nt] = [{}, {}, {}], {} values",
                      std::string(traces_name) == "source_amplitudes" ? "nsources" : "nreceivers",
                      in.nshots, per_shot, nt, ntraces * nt),
          fmt::format("{} values", ntotal));
  for (std::int64_t i = 0; i < ntotal; ++i)
    if (!std::isfinite(traces[i]))
      throw_invalid_argument(traces_name, "finite values",
                             fmt::format("{} at flat index {}", traces[i], i));
  // TTI has no ignored locations: every source and receiver is a cell of the model.
  check_locations(in.source_locations, in.nshots, in.nsources, in.model.grid, "source_locations",
                  "source", false);
  check_locations(in.receiver_locations, in.nshots, in.nreceivers, in.model.grid,
                  "receiver_locations", "receiver", false);
  const double max_dt = tti_max_dt(in.model, opt);
  require(
      in.dt <= max_dt, "dt",
      fmt::format("at most the stability limit {:.6g} s (space order {}, max vp sqrt(1+2eps), "
                  "spacing{})",
                  max_dt, opt.space_order, opt.freq_q > 0 ? " and the damping of the sponge" : ""),
      fmt::format("{} s", in.dt));

  const Grid& grid = in.model.grid;
  s.order = opt.space_order;
  s.halo = opt.space_order / 2;
  s.nshots = in.nshots;
  s.nsources = in.nsources;
  s.nreceivers = in.nreceivers;
  s.nt = nt;
  s.cells = grid.cells();
  std::array<std::int64_t, 6> width = opt.sponge_width;
  if (opt.free_surface) width[0] = 0;
  for (int d = 0; d < 3; ++d) {
    s.model_shape[d] = grid.shape[d];
    s.offset[d] = s.halo + width[2 * d];
    s.n[d] = grid.shape[d] + 2 * s.halo + width[2 * d] + width[2 * d + 1];
  }
  std::int64_t points = 0, bytes = 0;  // four fields of every shot
  if (__builtin_mul_overflow(s.n[0], s.n[1], &points) ||
      __builtin_mul_overflow(points, s.n[2], &points) ||
      __builtin_mul_overflow(points, s.nshots, &bytes) ||
      __builtin_mul_overflow(bytes, std::int64_t(4 * sizeof(T)), &bytes))
    throw_invalid_argument("sponge_width", "a padded grid whose fields fit in int64 bytes",
                           fmt::format("{} x {} x {} cells", s.n[0], s.n[1], s.n[2]));
  s.points = points;
  // This rank's window (the whole grid on one process; the process grid is checked there too).
  s.distributed = opt.comm.distributed();
  s.subdomain =
      decomposition::decompose(s.n, s.halo, opt.comm.rank(), opt.comm.size(), opt.process_grid);
  s.local_points = s.local()[0] * s.local()[1] * s.local()[2];
  // Host memory before anything is allocated: ten padded coefficient arrays, the state (p,
  // p_prev, m, m_prev per shot) and its returned copy, six flux arrays (the two-pass kernels,
  // counted at full size), the traces in both layouts.
  const double padded = static_cast<double>(s.local_points), elem = sizeof(T);
  require_memory(elem * (padded * (16.0 + 8.0 * double(s.nshots)) +
                         2.0 * double(nt) * double(s.nshots) * double(s.nsources + s.nreceivers)),
                 "vp, nt, nshots",
                 fmt::format("a TTI run on a model of {} cells (padded to {} x {} x {}), {} "
                             "shot{}, nt {}, {}",
                             shape_string(grid), s.n[0], s.n[1], s.n[2], s.nshots,
                             s.nshots == 1 ? "" : "s", nt, sizeof(T) == 4 ? "float32" : "float64"));

  // Q: log-linear from q_min at the outer edge of a sponge to q_interior at the model (WaveFD's
  // profile), the smallest over the sides whose sponge the cell is in.
  const double omega = 2 * std::numbers::pi * opt.freq_q;
  auto q_of = [&](const Index& p) {
    double q = opt.q_interior;
    for (int d = 0; d < 3; ++d) {
      const std::int64_t into_lo = p[d] - s.halo, into_hi = s.n[d] - s.halo - 1 - p[d];
      for (int side = 0; side < 2; ++side) {
        const std::int64_t w = width[2 * d + side], k = side == 0 ? into_lo : into_hi;
        if (w > 0 && k < w)
          q = std::min(
              q, std::exp(std::log(opt.q_min) +
                          (double(k) / w) * (std::log(opt.q_interior) - std::log(opt.q_min))));
      }
    }
    return q;
  };

  for (auto* v : {&s.e, &s.g, &s.a, &s.c, &s.mm, &s.n0, &s.n1, &s.n2, &s.scale, &s.damping})
    v->assign(static_cast<std::size_t>(s.local_points), T(0));
  const double dt2 = in.dt * in.dt;
  const Index& ln = s.local();
  for (std::int64_t i0 = 0; i0 < ln[0]; ++i0)
    for (std::int64_t i1 = 0; i1 < ln[1]; ++i1)
      for (std::int64_t i2 = 0; i2 < ln[2]; ++i2) {
        const Index p = {s.origin()[0] + i0, s.origin()[1] + i1, s.origin()[2] + i2};
        const std::int64_t k = (i0 * ln[1] + i1) * ln[2] + i2;
        std::int64_t model = 0;  // replicate padding
        for (int d = 0; d < 3; ++d)
          model = model * grid.shape[d] +
                  std::clamp<std::int64_t>(p[d] - s.offset[d], 0, grid.shape[d] - 1);
        const Cell c = cell_of(in.model, opt, model);
        const double eta2 = std::max(0.0, 2 * (c.eps - c.delta) / (c.f + 2 * c.eps));
        const double eta = std::sqrt(eta2);
        s.e[k] = static_cast<T>(c.b * (1 + 2 * c.eps));
        s.g[k] = static_cast<T>(c.b * (1 - c.f));
        s.a[k] = static_cast<T>(-c.b * (2 * c.eps + c.f * eta2));
        s.c[k] = static_cast<T>(c.b * c.f * eta * std::sqrt(std::max(0.0, 1 - eta2)));
        s.mm[k] = static_cast<T>(c.b * c.f * eta2);
        s.n0[k] = static_cast<T>(std::cos(c.theta));
        s.n1[k] = static_cast<T>(std::sin(c.theta) * std::sin(c.phi));
        s.n2[k] = static_cast<T>(std::sin(c.theta) * std::cos(c.phi));
        s.scale[k] = static_cast<T>(dt2 * c.vp * c.vp / c.b);
        s.damping[k] = static_cast<T>(in.dt * omega / q_of(p));
      }

  // Injection weights: scale at the cell (the expression of s.scale, so the same bits on every
  // rank, the cell's holder or not); none on the free surface (P = 0 there). Cells: local, -1 on
  // the ranks that do not hold them.
  auto cells_of = [&](std::span<const std::int64_t> loc, std::int64_t count,
                      std::vector<std::int64_t>& cells, std::vector<T>& weights) {
    cells.resize(static_cast<std::size_t>(in.nshots * count));
    weights.resize(cells.size());
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::int64_t* at = loc.data() + 3 * i;
      cells[i] = s.local_cell(at);
      const Cell c =
          cell_of(in.model, opt, (at[0] * grid.shape[1] + at[1]) * grid.shape[2] + at[2]);
      const bool on_surface = opt.free_surface && at[0] == 0;
      weights[i] = on_surface ? T(0) : static_cast<T>(dt2 * c.vp * c.vp / c.b);
    }
  };
  cells_of(in.source_locations, in.nsources, s.source_cells, s.source_scale);
  cells_of(in.receiver_locations, in.nreceivers, s.receiver_cells, s.receiver_scale);

  kernels::TtiProblem<T>& pr = s.problem;
  pr.order = s.order;
  pr.nshots = s.nshots;
  pr.n = s.local();
  for (int d = 0; d < 3; ++d) pr.rh[d] = static_cast<T>(1 / grid.spacing[d]);
  pr.free_surface = opt.free_surface;
  pr.coef = {s.e.data(),     s.g.data(),      s.a.data(),
             s.c.data(),     s.mm.data(),     {s.n0.data(), s.n1.data(), s.n2.data()},
             s.scale.data(), s.damping.data()};
  pr.nt = s.nt;
}

// Zero in the halo (and on and above a free surface): the state the kernels assume. Under MPI
// also the cells of other ranks in this rank's window (own_only), so that a returned state holds
// this rank's cells and zeros.
template <class T>
void project_state(const Setup<T>& s, bool free_surface, TtiState<T>& st, bool own_only) {
  const Index& ln = s.local();
  const auto& sub = s.subdomain;
  for (std::int64_t shot = 0; shot < s.nshots; ++shot)
    for (std::int64_t i0 = 0; i0 < ln[0]; ++i0)
      for (std::int64_t i1 = 0; i1 < ln[1]; ++i1)
        for (std::int64_t i2 = 0; i2 < ln[2]; ++i2) {
          const Index p = {s.origin()[0] + i0, s.origin()[1] + i1, s.origin()[2] + i2};
          bool zero = free_surface && p[0] <= s.halo;
          for (int d = 0; d < 3; ++d) {
            zero = zero || p[d] < s.halo || p[d] >= s.n[d] - s.halo;
            zero = zero || (own_only && (p[d] < sub.own_lo[d] || p[d] >= sub.own_hi[d]));
          }
          if (!zero) continue;
          const std::int64_t k = shot * s.local_points + (i0 * ln[1] + i1) * ln[2] + i2;
          st.p[k] = st.p_prev[k] = st.m[k] = st.m_prev[k] = 0;
        }
}

// The state to start from: `given` on the whole padded grid (every rank reads its window), or,
// under MPI, this rank's subdomain as a distributed call returned it (padded_shape and
// subdomain_origin this rank's); none: at rest.
template <class T>
TtiState<T> make_state(const Setup<T>& s, bool free_surface, const TtiState<T>* given) {
  TtiState<T> st;
  const Index& ln = s.local();
  st.padded_shape = ln;
  st.subdomain_origin = s.origin();
  for (int a = 0; a < 3; ++a) st.model_offset[a] = s.offset[a] - s.origin()[a];
  const auto size = static_cast<std::size_t>(s.nshots * s.local_points);
  const bool any = given && (!given->p.empty() || !given->p_prev.empty() || !given->m.empty() ||
                             !given->m_prev.empty());
  const bool whole = any && given->padded_shape == s.n;
  const bool subdomain =
      any && s.distributed && given->padded_shape == ln && given->subdomain_origin == s.origin();
  if (any)
    require(whole || subdomain, "initial.padded_shape",
            fmt::format("[{}, {}, {}] (model + sponge + halo of space_order/2 per side){}", s.n[0],
                        s.n[1], s.n[2],
                        s.distributed ? fmt::format(", or this rank's subdomain [{}, {}, {}] at "
                                                    "subdomain_origin [{}, {}, {}]",
                                                    ln[0], ln[1], ln[2], s.origin()[0],
                                                    s.origin()[1], s.origin()[2])
                                      : ""),
            fmt::format("[{}, {}, {}]", given->padded_shape[0], given->padded_shape[1],
                        given->padded_shape[2]));
  const std::size_t given_size =
      static_cast<std::size_t>(s.nshots * (whole ? s.points : s.local_points));
  auto fill = [&](std::vector<T>& dst, const std::vector<T>* src, const char* name) {
    dst.assign(size, T(0));
    if (!src || src->empty()) return;
    require(src->size() == given_size, name,
            fmt::format("[nshots, *padded_shape], {} values, or none", given_size),
            fmt::format("{} values", src->size()));
    for (std::size_t i = 0; i < given_size; ++i)
      if (!std::isfinite((*src)[i]))
        throw_invalid_argument(name, "finite values",
                               fmt::format("{} at flat index {}", (*src)[i], i));
    if (!whole) {
      dst = *src;
      return;
    }
    // This rank's window of the whole grid (all of it on one process).
    for (std::int64_t shot = 0; shot < s.nshots; ++shot)
      for (std::int64_t i0 = 0; i0 < ln[0]; ++i0)
        for (std::int64_t i1 = 0; i1 < ln[1]; ++i1) {
          const std::int64_t from = shot * s.points +
                                    ((s.origin()[0] + i0) * s.n[1] + s.origin()[1] + i1) * s.n[2] +
                                    s.origin()[2];
          const std::int64_t to = shot * s.local_points + (i0 * ln[1] + i1) * ln[2];
          std::copy(src->begin() + from, src->begin() + from + ln[2], dst.begin() + to);
        }
  };
  fill(st.p, any ? &given->p : nullptr, "initial.p");
  fill(st.p_prev, any ? &given->p_prev : nullptr, "initial.p_prev");
  fill(st.m, any ? &given->m : nullptr, "initial.m");
  fill(st.m_prev, any ? &given->m_prev : nullptr, "initial.m_prev");
  project_state(s, free_surface, st, false);
  return st;
}

// The forward kernel on the device's backend; nparallel sets the cpu backend's OpenMP threads.
// Under MPI (s.distributed) on this rank's subdomain, exchanging its halos every step; then the
// recorded traces of the cells other ranks hold are filled in (fill_recorded).
template <class T>
void run(const Device& device, const Setup<T>& s, kernels::TtiProblem<T> p, kernels::TtiFields<T> f,
         const T* sources, T* receivers, const TtiOptions& opt, Timers* timers) {
  const Context ctx{device, timers};
  ThreadCount threads(device.backend == Backend::cpu ? opt.nparallel : 0);
  if (!s.distributed) {
    SCIPROXY_RUN_KERNEL(ctx, forward, p, f, sources, receivers);
    return;
  }
  const decomposition::Subdomain& sub = s.subdomain;
  decomposition::HaloExchange<T> exchange(opt.comm, sub);
  kernels::TtiSubdomain<T> local;
  // The whole grid's boxes J and U (kernels.hpp) cut to this rank's cells, in local indices.
  for (int a = 0; a < 3; ++a) {
    const std::int64_t j_lo = (a == 0 && opt.free_surface) ? s.halo : s.halo - 1;
    const std::int64_t u_lo = (a == 0 && opt.free_surface) ? s.halo + 1 : s.halo;
    const std::int64_t hi = s.n[a] - s.halo;
    // Below its own cells a rank computes the fluxes of row halo - 1 when no rank holds them.
    const std::int64_t first_flux = sub.neighbour[a][0] >= 0 ? sub.own_lo[a] : sub.own_lo[a] - 1;
    local.flux_lo[a] = std::max(j_lo, first_flux) - sub.origin[a];
    local.flux_hi[a] = std::min(hi, sub.own_hi[a]) - sub.origin[a];
    local.update_lo[a] = std::max(u_lo, sub.own_lo[a]) - sub.origin[a];
    local.update_hi[a] = std::min(hi, sub.own_hi[a]) - sub.origin[a];
    for (int side = 0; side < 2; ++side) local.neighbour[a][side] = sub.neighbour[a][side] >= 0;
  }
  local.surface = sub.own_lo[0] == s.halo;
  local.exchange = &exchange;
  p.subdomain = &local;
  require(device.backend == Backend::cpu, "device", "the cpu backend (tti on several ranks)",
          device.name());  // check_ranks said so before
  SCIPROXY_RUN_KERNEL(ctx, forward, p, f, sources, receivers);
}

// The traces recorded at `locations` ([ntraces, 3] model cells, [nt, ntraces] in `recorded`),
// each written by the rank that holds its cell and 0 elsewhere, made whole on every rank: the
// holders' values gathered (not summed, so every bit is the holder's).
template <class T>
void fill_recorded(const Setup<T>& s, const Communicator& comm,
                   std::span<const std::int64_t> locations, std::vector<T>& recorded) {
  if (!s.distributed) return;
  const auto ntraces = static_cast<std::int64_t>(locations.size() / 3);
  std::vector<int> holder(static_cast<std::size_t>(ntraces));
  std::vector<std::int64_t> counts(static_cast<std::size_t>(comm.size()), 0);
  for (std::int64_t tr = 0; tr < ntraces; ++tr) {
    Index cell{};
    for (int a = 0; a < 3; ++a) cell[a] = locations[3 * tr + a] + s.offset[a];
    holder[tr] = decomposition::rank_of_cell(s.subdomain, cell);
    ++counts[holder[tr]];
  }
  // Rows of nt samples, rank after rank, each rank's traces in order.
  std::vector<std::int64_t> row_of(static_cast<std::size_t>(ntraces));
  std::vector<std::int64_t> next(counts.size(), 0);
  for (std::size_t r = 1; r < counts.size(); ++r) next[r] = next[r - 1] + counts[r - 1];
  for (std::int64_t tr = 0; tr < ntraces; ++tr) row_of[tr] = next[holder[tr]]++;
  std::vector<T> rows(static_cast<std::size_t>(ntraces * s.nt));
  for (std::int64_t tr = 0; tr < ntraces; ++tr)
    if (holder[tr] == comm.rank())
      for (std::int64_t t = 0; t < s.nt; ++t)
        rows[row_of[tr] * s.nt + t] = recorded[t * ntraces + tr];
  collective::allgather_rows<T>(comm, rows, counts, s.nt);
  for (std::int64_t tr = 0; tr < ntraces; ++tr)
    for (std::int64_t t = 0; t < s.nt; ++t)
      recorded[t * ntraces + tr] = rows[row_of[tr] * s.nt + t];
}

// What every rank of a distributed call must pass alike (collective::require_same): the
// options, the model, the time axis, the traces injected (`traces`) and the locations (an
// initial state on the whole grid: initial_agreed, once the grid is known). The threads per rank
// (nparallel) may differ.
template <class T>
std::vector<collective::Field> agreed_fields(const TtiInput<T>& in, const TtiOptions& opt,
                                             std::span<const T> traces, const char* traces_name) {
  auto bits = [](double v) { return std::bit_cast<std::int64_t>(v); };
  using collective::hash_of;
  const Grid& g = in.model.grid;
  std::vector<collective::Field> f{
      {"dtype (bytes per value)", sizeof(T)},
      {"space_order", opt.space_order},
      {"sponge_width", hash_of(std::span<const std::int64_t>(opt.sponge_width)), true},
      {"q_min", bits(opt.q_min)},
      {"q_interior", bits(opt.q_interior)},
      {"freq_q", bits(opt.freq_q)},
      {"default_f", bits(opt.default_f)},
      {"free_surface", opt.free_surface},
      {"process_grid", hash_of(std::span<const int>(opt.process_grid)), true},
      {"vp (model dimensions)", g.ndim},
      {"vp (model shape)", hash_of(std::span<const std::int64_t>(g.shape.data(), g.ndim)), true},
      {"grid_spacing", hash_of(std::span<const double>(g.spacing.data(), g.ndim)), true},
      {"dt", bits(in.dt)},
      {"nt", in.nt},
      {"nshots", in.nshots},
      {"nsources", in.nsources},
      {"nreceivers", in.nreceivers}};
  const TtiModel<T>& m = in.model;
  for (auto [name, array] :
       {std::pair{"vp", m.vp}, std::pair{"buoyancy", m.buoyancy}, std::pair{"epsilon", m.epsilon},
        std::pair{"delta", m.delta}, std::pair{"theta", m.theta}, std::pair{"phi", m.phi},
        std::pair{"f", m.f}}) {
    f.push_back({fmt::format("{} (values)", name), static_cast<std::int64_t>(array.size())});
    f.push_back({name, hash_of(array), true});
  }
  f.push_back({fmt::format("{} (values)", traces_name), static_cast<std::int64_t>(traces.size())});
  f.push_back({traces_name, hash_of(traces), true});
  f.push_back({"source_locations", hash_of(in.source_locations), true});
  f.push_back({"receiver_locations", hash_of(in.receiver_locations), true});
  return f;
}

// Before a call on several ranks: the backend, and the ranks' agreement.
template <class T>
void check_ranks(const Device& device, const TtiInput<T>& in, const TtiOptions& opt,
                 std::span<const T> traces, const char* traces_name, const char* call) {
  if (!opt.comm.distributed()) return;
  collective::on_every_rank(opt.comm, [&] {
    require(device.backend == Backend::cpu, "device",
            fmt::format("the cpu backend: {} on several ranks (comm) runs there only", call),
            device.name());
  });
  collective::require_same(opt.comm, agreed_fields(in, opt, traces, traces_name), call);
}

// An initial state given on the whole padded grid must be every rank's alike (a subdomain, as a
// distributed call returns it, is each rank's own).
template <class T>
void initial_agreed(const Setup<T>& s, const TtiOptions& opt, const TtiState<T>* initial) {
  if (!s.distributed) return;
  const bool whole = initial && !initial->empty() && initial->padded_shape == s.n;
  std::vector<collective::Field> f{{"initial (on the whole padded grid)", whole}};
  if (whole) {
    std::uint64_t h = 0;
    for (const auto* v : {&initial->p, &initial->p_prev, &initial->m, &initial->m_prev})
      h = collective::hash_bytes(v->data(), v->size() * sizeof(T), h);
    f.push_back({"initial", static_cast<std::int64_t>(h), true});
  }
  collective::require_same(opt.comm, f, "tti_forward");
}

// Work model: points = padded cells outside the halo (model + sponge) x steps x shots. Flops per
// point and step: 12 staggered derivatives of 3 order/2 flops each, 28 for the two n-products,
// the two coupling terms and the six fluxes, 4 for the two divergences' sums, 12 for the two
// updates. Bytes: the two-pass traffic, 30 values per point and step (flux pass: P, M, the 8
// coefficients in, 6 fluxes out; divergence pass: 6 fluxes, P, M, P_prev, M_prev, scale, d in,
// P_prev and M_prev out). The working set: those 20 arrays of one shot (the shots run one after
// another); when they fit the last-level cache the steps read them from there (metrics.hpp).
template <class T>
WorkModel work_model(const Setup<T>& s) {
  WorkModel w;
  double interior = 1;
  for (int d = 0; d < 3; ++d) interior *= double(s.n[d] - 2 * s.halo);
  w.points = interior * double(s.nt) * double(s.nshots);
  w.flops = w.points * (36.0 * (s.order / 2) + 44);
  w.bytes = w.points * 30.0 * sizeof(T);
  w.working_set_bytes = 20.0 * sizeof(T) * static_cast<double>(s.local_points);  // a rank's
  w.precision = sizeof(T) == 4 ? Precision::fp32 : Precision::fp64;
  return w;
}

// What a recorded call reports besides its work (core/recorded_call.hpp).
template <class T>
void set_parameters(RecordedCall& call, const Setup<T>& s, const TtiOptions& opt) {
  if (!call.recording()) return;
  auto& parameters = call.parameters();
  parameters.set("shape", std::vector<long long>(s.model_shape.begin(), s.model_shape.end()));
  parameters.set("space_order", opt.space_order);
  parameters.set("nshots", s.nshots);
  parameters.set("nsources", s.nsources);
  parameters.set("nreceivers", s.nreceivers);
  parameters.set("nt", s.nt);
  parameters.set("free_surface", opt.free_surface);
}

// The options of one process: a call's rerun on the reference backend when verifying.
TtiOptions one_process(TtiOptions opt) {
  opt.comm = Communicator();
  opt.process_grid = {0, 0, 0};
  return opt;
}

}  // namespace

template <class T>
TtiOutput<T> tti_forward(const Device& device, const TtiInput<T>& in, const TtiOptions& opt,
                         const TtiState<T>* initial, Timers* timers) {
  RecordedCall call("tti_forward", device, timers);
  TtiOutput<T> out;
  bool whole_initial = true;  // initial (if any) is on the whole grid, as the reference takes it
  {
    auto top = Timers::region(call.timers(), "tti");  // closed before the reference rerun
    Setup<T> s;
    {
      auto r = Timers::region(call.timers(), "setup");
      check_ranks(device, in, opt, in.source_amplitudes, "source_amplitudes", "tti_forward");
      collective::on_every_rank(opt.comm, [&] {
        make_setup(s, in, opt, in.source_amplitudes, "source_amplitudes", in.nsources);
      });
      initial_agreed(s, opt, initial);
      collective::on_every_rank(opt.comm,
                                [&] { out.state = make_state(s, opt.free_surface, initial); });
      whole_initial = !initial || initial->empty() || initial->padded_shape == s.n;
    }
    const std::int64_t ns = s.nshots * s.nsources, nr = s.nshots * s.nreceivers;
    std::vector<T> sources_tm(static_cast<std::size_t>(s.nt * ns)),
        receivers_tm(static_cast<std::size_t>(s.nt * nr));
    for (std::int64_t tr = 0; tr < ns; ++tr)
      for (std::int64_t t = 0; t < s.nt; ++t)
        sources_tm[t * ns + tr] = in.source_amplitudes[tr * s.nt + t];
    kernels::TtiProblem<T> p = s.problem;
    p.nsources = s.nsources;
    p.source_cells = s.source_cells.data();
    p.source_scale = s.source_scale.data();
    p.nreceivers = s.nreceivers;
    p.receiver_cells = s.receiver_cells.data();
    p.inject_m = true;
    p.record_m = false;
    out.work = work_model(s);
    call.set_work(out.work);
    set_parameters(call, s, opt);
    if (s.nt > 0) {
      auto r = Timers::region(call.timers(), "forward");
      run(device, s, p,
          {out.state.p.data(), out.state.p_prev.data(), out.state.m.data(),
           out.state.m_prev.data()},
          sources_tm.data(), receivers_tm.data(), opt, call.timers());
      fill_recorded(s, opt.comm, in.receiver_locations, receivers_tm);
    }
    // The halos of a subdomain hold its neighbours' cells of some earlier step: cleared, so a
    // rank's state is its own cells and zeros.
    if (s.distributed) project_state(s, opt.free_surface, out.state, true);
    out.receiver_amplitudes.resize(static_cast<std::size_t>(nr * s.nt));
    for (std::int64_t tr = 0; tr < nr; ++tr)
      for (std::int64_t t = 0; t < s.nt; ++t)
        out.receiver_amplitudes[tr * s.nt + t] = receivers_tm[t * nr + tr];
  }
  // Under MPI each rank reruns the whole problem on the reference and compares the traces (its
  // state is a subdomain; the MPI tests compare those against one process bit for bit).
  if (call.verifying() && whole_initial) {
    const TtiOutput<T> expected = call.on_reference([&] {
      return tti_forward<T>(RecordedCall::reference_device(), in, one_process(opt), initial);
    });
    const Tolerance traces = tti_tolerance(precision_of<T>());
    const Tolerance state = tti_state_tolerance(precision_of<T>());
    call.compare<T>("receiver_amplitudes", out.receiver_amplitudes, expected.receiver_amplitudes,
                    traces);
    if (!opt.comm.distributed()) {
      call.compare<T>("p", out.state.p, expected.state.p, state);
      call.compare<T>("p_prev", out.state.p_prev, expected.state.p_prev, state);
      call.compare<T>("m", out.state.m, expected.state.m, state);
      call.compare<T>("m_prev", out.state.m_prev, expected.state.m_prev, state);
    }
  }
  return out;
}

template <class T>
TtiAdjointOutput<T> tti_adjoint(const Device& device, const TtiInput<T>& in,
                                std::span<const T> receiver_data, const TtiOptions& opt,
                                Timers* timers) {
  RecordedCall call("tti_adjoint", device, timers);
  TtiAdjointOutput<T> out;
  {
    auto top = Timers::region(call.timers(), "tti_adjoint");  // closed before the reference rerun
    Setup<T> s;
    TtiState<T> state;
    {
      auto r = Timers::region(call.timers(), "setup");
      // Python's name for the data; the C ABI checks its receiver_data pointer and size itself.
      check_ranks(device, in, opt, receiver_data, "receiver_amplitudes", "tti_adjoint");
      collective::on_every_rank(opt.comm, [&] {
        make_setup(s, in, opt, receiver_data, "receiver_amplitudes", in.nreceivers);
        state = make_state(s, opt.free_surface, static_cast<const TtiState<T>*>(nullptr));
      });
    }
    const std::int64_t ns = s.nshots * s.nsources, nr = s.nshots * s.nreceivers, nt = s.nt;
    // Reversed time: kernel step tau carries the data of sample nt-1-tau.
    std::vector<T> data_tm(static_cast<std::size_t>(nt * nr)),
        sources_tm(static_cast<std::size_t>(nt * ns));
    for (std::int64_t tr = 0; tr < nr; ++tr)
      for (std::int64_t t = 0; t < nt; ++t)
        data_tm[(nt - 1 - t) * nr + tr] = receiver_data[tr * nt + t];
    kernels::TtiProblem<T> p = s.problem;
    p.nsources = s.nreceivers;
    p.source_cells = s.receiver_cells.data();
    p.source_scale = s.receiver_scale.data();
    p.nreceivers = s.nsources;
    p.receiver_cells = s.source_cells.data();
    p.inject_m = false;
    p.record_m = true;
    out.work = work_model(s);
    call.set_work(out.work);
    set_parameters(call, s, opt);
    if (nt > 0) {
      auto r = Timers::region(call.timers(), "adjoint");
      run(device, s, p, {state.p.data(), state.p_prev.data(), state.m.data(), state.m_prev.data()},
          data_tm.data(), sources_tm.data(), opt, call.timers());
      fill_recorded(s, opt.comm, in.source_locations, sources_tm);
    }
    out.source_amplitudes.resize(static_cast<std::size_t>(ns * nt));
    // g^t = recorded w^{t+1}: kernel sample tau = nt-1-t; the weight of a source on the surface
    // is zero, and so is P + M there.
    for (std::int64_t tr = 0; tr < ns; ++tr)
      for (std::int64_t t = 0; t < nt; ++t)
        out.source_amplitudes[tr * nt + t] =
            s.source_scale[tr] == T(0) ? T(0) : sources_tm[(nt - 1 - t) * ns + tr];
  }
  if (call.verifying()) {
    const TtiAdjointOutput<T> expected = call.on_reference([&] {
      return tti_adjoint<T>(RecordedCall::reference_device(), in, receiver_data, one_process(opt));
    });
    call.compare<T>("source_amplitudes", out.source_amplitudes, expected.source_amplitudes,
                    tti_tolerance(precision_of<T>()));
  }
  return out;
}

#define SCIPROXY_INSTANTIATE(T)                                                              \
  template double tti_max_dt<T>(const TtiModel<T>&, const TtiOptions&);                      \
  template TtiOutput<T> tti_forward<T>(const Device&, const TtiInput<T>&, const TtiOptions&, \
                                       const TtiState<T>*, Timers*);                         \
  template TtiAdjointOutput<T> tti_adjoint<T>(const Device&, const TtiInput<T>&,             \
                                              std::span<const T>, const TtiOptions&, Timers*);
SCIPROXY_INSTANTIATE(float)
SCIPROXY_INSTANTIATE(double)
#undef SCIPROXY_INSTANTIATE

}  // namespace sciproxy::tti
