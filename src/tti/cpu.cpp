// Coupled P/M TTI propagator, cpu backend: OpenMP + SIMD, cache-blocked, WaveFD.jl's two-pass
// form (prop3DAcoTTIDenQ_DEO2_FDTD: flux pass, then divergence and update; its blocks are 8 x 8
// cells across the two slow axes and up to 512 along the contiguous one). Per step and shot:
//   flux pass (box J):  FP, FM = coupled_fluxes(D+ P, D+ M, material)       six flux arrays
//   update pass (box U): P' = (2 - d) P + (d - 1) P_prev + scale D- . FP,    M' likewise
// with the free-surface mirrors of kernels.hpp between the passes; the material coefficients
// are the arrays api.cpp precomputed once (no trigonometry or square roots per step). The space
// order is a template parameter, so every stencil is unrolled. Each pass computes its interior
// first and then the shell next to the sides where data arrive: under MPI the halo exchanges
// (kernels.hpp, TtiSubdomain) travel meanwhile; on one process only the free surface's mirror
// rows split a pass.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "sciproxy/core/cancel.hpp"
#include "tti/kernels.hpp"
#include "tti/math.hpp"

namespace sciproxy::tti::kernels::cpu {

namespace {

constexpr std::int64_t kBlockSlow = 8;    // cells per block along axes 0 and 1
constexpr std::int64_t kBlockFast = 512;  // cells per block along axis 2

using Index = std::array<std::int64_t, 3>;

// Calls row(i0, i1, i2_begin, i2_end) for the rows of the box [lo, hi), cache block by block,
// shared among the threads of the enclosing parallel region (an `omp for` with its barrier);
// thread 0 calls after_block() after each of its blocks.
template <class F, class G>
void for_blocks(const Index& lo, const Index& hi, F&& row, G&& after_block) {
  const std::int64_t nb0 = (hi[0] - lo[0] + kBlockSlow - 1) / kBlockSlow;
  const std::int64_t nb1 = (hi[1] - lo[1] + kBlockSlow - 1) / kBlockSlow;
  const std::int64_t nb2 = (hi[2] - lo[2] + kBlockFast - 1) / kBlockFast;
#pragma omp for collapse(3) schedule(static)
  for (std::int64_t b0 = 0; b0 < nb0; ++b0)
    for (std::int64_t b1 = 0; b1 < nb1; ++b1)
      for (std::int64_t b2 = 0; b2 < nb2; ++b2) {
        const std::int64_t e0 = std::min(hi[0], lo[0] + (b0 + 1) * kBlockSlow);
        const std::int64_t e1 = std::min(hi[1], lo[1] + (b1 + 1) * kBlockSlow);
        const std::int64_t s2 = lo[2] + b2 * kBlockFast, e2 = std::min(hi[2], s2 + kBlockFast);
        for (std::int64_t i0 = lo[0] + b0 * kBlockSlow; i0 < e0; ++i0)
          for (std::int64_t i1 = lo[1] + b1 * kBlockSlow; i1 < e1; ++i1) row(i0, i1, s2, e2);
        if (omp_get_thread_num() == 0) after_block();
      }
}

template <class F>
void for_blocks(const Index& lo, const Index& hi, F&& row) {
  for_blocks(lo, hi, row, [] {});
}

// for_blocks over the cells of the box [lo, hi) outside the box [inner_lo, inner_hi) (the
// shell around an interior computed earlier): six slabs, one pair per axis.
template <class F>
void for_shell(const Index& lo, const Index& hi, Index inner_lo, Index inner_hi, F&& row) {
  bool inner_empty = false;
  for (int a = 0; a < 3; ++a) {
    inner_lo[a] = std::clamp(inner_lo[a], lo[a], hi[a]);
    inner_hi[a] = std::clamp(inner_hi[a], inner_lo[a], hi[a]);
    inner_empty = inner_empty || inner_lo[a] == inner_hi[a];
  }
  if (inner_empty) {
    for_blocks(lo, hi, row);
    return;
  }
  // Slab pair of axis a: the cells below / above the interior along a, within the interior
  // along the axes before a and anywhere along the axes after it.
  for (int a = 0; a < 3; ++a) {
    Index slab_lo = lo, slab_hi = hi;
    for (int b = 0; b < a; ++b) {
      slab_lo[b] = inner_lo[b];
      slab_hi[b] = inner_hi[b];
    }
    slab_hi[a] = inner_lo[a];
    for_blocks(slab_lo, slab_hi, row);
    slab_lo[a] = inner_hi[a];
    slab_hi[a] = hi[a];
    for_blocks(slab_lo, slab_hi, row);
  }
}

template <int A, class T>
void forward_order(const TtiProblem<T>& p, TtiFields<T> fields, const T* sources, T* receivers) {
  const std::int64_t halo = A / 2, points = p.points();
  const std::int64_t s0 = p.n[1] * p.n[2], s1 = p.n[2];
  const std::int64_t surface = halo;
  Index j_lo, j_hi, u_lo, u_hi;
  std::array<std::array<bool, 2>, 3> neighbour{};
  bool surface_here = p.free_surface;
  if (p.subdomain) {
    j_lo = p.subdomain->flux_lo;
    j_hi = p.subdomain->flux_hi;
    u_lo = p.subdomain->update_lo;
    u_hi = p.subdomain->update_hi;
    neighbour = p.subdomain->neighbour;
    surface_here = p.free_surface && p.subdomain->surface;
  } else {
    for (int a = 0; a < 3; ++a) {
      j_lo[a] = halo - 1;
      u_lo[a] = halo;
      j_hi[a] = u_hi[a] = p.n[a] - halo;
    }
    if (p.free_surface) {
      j_lo[0] = surface;
      u_lo[0] = surface + 1;
    }
  }
  TtiHaloExchange<T>* const exchange = p.subdomain ? p.subdomain->exchange : nullptr;
  auto progress = [exchange] {
    if (exchange) exchange->progress();
  };
  // The interiors computed while the halos travel. A flux reads P and M at offsets
  // -(halo-1) .. +halo along each axis: the flux interior keeps that far from a side where
  // data arrive (a neighbour, or the free surface's mirror rows, written once P has arrived).
  // A divergence reads fluxes at offsets -halo .. halo-1 (the mirror of the fluxes is written
  // before the divergence pass starts, so the surface is no such side).
  Index j_in_lo = j_lo, j_in_hi = j_hi, u_in_lo = u_lo, u_in_hi = u_hi;
  for (int a = 0; a < 3; ++a) {
    if (neighbour[a][0] || (a == 0 && surface_here)) j_in_lo[a] += halo - 1;
    if (neighbour[a][1]) j_in_hi[a] -= halo;
    if (neighbour[a][0]) u_in_lo[a] += halo;
    if (neighbour[a][1]) u_in_hi[a] -= halo - 1;
  }
  const T r0 = p.rh[0], r1 = p.rh[1], r2 = p.rh[2];
  const TtiCoefficients<T> co = p.coef;

  // Zero outside J once; the passes never write there (the mirror rows and the halos filled by
  // the exchange excepted, both rewritten every step before they are read).
  std::array<std::vector<T>, 6> flux_storage;
  for (auto& f : flux_storage) f.resize(static_cast<std::size_t>(points));
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < points; ++i)
    for (auto& f : flux_storage) f[i] = T(0);
  T* const fp0 = flux_storage[0].data();
  T* const fp1 = flux_storage[1].data();
  T* const fp2 = flux_storage[2].data();
  T* const fm0 = flux_storage[3].data();
  T* const fm1 = flux_storage[4].data();
  T* const fm2 = flux_storage[5].data();

  // Rows 0 .. H-1 of axis 0 set to sign * f[twice_centre - row].
  auto mirror = [&](T* f, std::int64_t twice_centre, T sign) {
#pragma omp for collapse(2) schedule(static)
    for (std::int64_t r = 0; r < surface; ++r)
      for (std::int64_t i1 = 0; i1 < p.n[1]; ++i1) {
        T* __restrict__ dst = f + r * s0 + i1 * s1;
        const T* __restrict__ src = f + (twice_centre - r) * s0 + i1 * s1;
#pragma omp simd
        for (std::int64_t i2 = 0; i2 < p.n[2]; ++i2) dst[i2] = sign * src[i2];
      }
  };

  for (std::int64_t shot = 0; shot < p.nshots; ++shot) {
    T* P = fields.p + shot * points;
    T* P_prev = fields.p_prev + shot * points;
    T* M = fields.m + shot * points;
    T* M_prev = fields.m_prev + shot * points;
    // One row of each pass; the interior and the shell run the same code, so every cell's
    // arithmetic is the same whichever pass or rank computes it.
    auto flux_row = [&](std::int64_t i0, std::int64_t i1, std::int64_t b, std::int64_t e) {
      const std::int64_t row = i0 * s0 + i1 * s1;
#pragma omp simd
      for (std::int64_t i2 = b; i2 < e; ++i2) {
        const std::int64_t k = row + i2;
        const T gp[3] = {tti::staggered_forward<A>(P + k, s0, r0),
                         tti::staggered_forward<A>(P + k, s1, r1),
                         tti::staggered_forward<A>(P + k, 1, r2)};
        const T gm[3] = {tti::staggered_forward<A>(M + k, s0, r0),
                         tti::staggered_forward<A>(M + k, s1, r1),
                         tti::staggered_forward<A>(M + k, 1, r2)};
        const T n[3] = {co.n[0][k], co.n[1][k], co.n[2][k]};
        T fp[3], fm[3];
        tti::coupled_fluxes(gp, gm, co.e[k], co.g[k], co.a[k], co.c[k], co.mm[k], n, fp, fm);
        fp0[k] = fp[0];
        fp1[k] = fp[1];
        fp2[k] = fp[2];
        fm0[k] = fm[0];
        fm1[k] = fm[1];
        fm2[k] = fm[2];
      }
    };
    auto update_row = [&](std::int64_t i0, std::int64_t i1, std::int64_t b, std::int64_t e) {
      const std::int64_t row = i0 * s0 + i1 * s1;
#pragma omp simd
      for (std::int64_t i2 = b; i2 < e; ++i2) {
        const std::int64_t k = row + i2;
        const T div_p = tti::staggered_backward<A>(fp0 + k, s0, r0) +
                        tti::staggered_backward<A>(fp1 + k, s1, r1) +
                        tti::staggered_backward<A>(fp2 + k, 1, r2);
        const T div_m = tti::staggered_backward<A>(fm0 + k, s0, r0) +
                        tti::staggered_backward<A>(fm1 + k, s1, r1) +
                        tti::staggered_backward<A>(fm2 + k, 1, r2);
        const T d = co.damping[k], s = co.scale[k];
        P_prev[k] = (2 - d) * P[k] + (d - 1) * P_prev[k] + s * div_p;
        M_prev[k] = (2 - d) * M[k] + (d - 1) * M_prev[k] + s * div_m;
      }
    };
    for (std::int64_t t = 0; t < p.nt; ++t) {
      // Under MPI the ranks vote on stopping with the fields' exchange, and stop together.
      if (!exchange) throw_if_cancelled("tti", shot * p.nt + t, p.nshots * p.nt);
      for (std::int64_t r = 0; r < p.nreceivers; ++r) {
        const std::int64_t k = p.receiver_cells[shot * p.nreceivers + r];
        receivers[(t * p.nshots + shot) * p.nreceivers + r] =
            k < 0 ? T(0) : (p.record_m ? P[k] + M[k] : P[k]);
      }
      // Flux pass: the interior while P and M's faces travel, then the mirror and the shell.
      if (exchange) exchange->start_fields(P, M, poll_cancellation());
#pragma omp parallel
      for_blocks(j_in_lo, j_in_hi, flux_row, progress);
      if (exchange && exchange->finish_fields())
        throw_cancelled("tti", shot * p.nt + t, p.nshots * p.nt);
#pragma omp parallel
      {
        if (surface_here) {
          mirror(P, 2 * surface, T(-1));
          mirror(M, 2 * surface, T(-1));
        }
        for_shell(j_lo, j_hi, j_in_lo, j_in_hi, flux_row);
        if (surface_here) {
          mirror(fp0, 2 * surface - 1, T(1));
          mirror(fm0, 2 * surface - 1, T(1));
        }
      }
      // Divergence and update: the interior while the fluxes' faces travel, then the shell.
      if (exchange) exchange->start_fluxes({fp0, fp1, fp2}, {fm0, fm1, fm2});
#pragma omp parallel
      for_blocks(u_in_lo, u_in_hi, update_row, progress);
      if (exchange) exchange->finish_fluxes();
#pragma omp parallel
      for_shell(u_lo, u_hi, u_in_lo, u_in_hi, update_row);
      std::swap(P, P_prev);
      std::swap(M, M_prev);
      // Serial: two sources of a shot may share a cell.
      for (std::int64_t q = 0; q < p.nsources; ++q) {
        const std::int64_t at = shot * p.nsources + q;
        const std::int64_t k = p.source_cells[at];
        if (k < 0) continue;  // another rank's cell
        const T amount = p.source_scale[at] * sources[t * p.nshots * p.nsources + at];
        P[k] += amount;
        if (p.inject_m) M[k] += amount;
      }
    }
    if (surface_here) {
      for (T* f : {P, M, P_prev, M_prev, fp0, fm0}) std::fill(f, f + surface * s0, T(0));
    }
    if (p.nt % 2 == 1) {  // the newest fields are in the *_prev arrays
      std::swap_ranges(P, P + points, P_prev);
      std::swap_ranges(M, M + points, M_prev);
    }
  }
}

}  // namespace

template <class T>
SCIPROXY_TTI_FORWARD(T) {
  (void)ctx;  // the api times the whole call; the thread count is set there (nparallel)
  with_value<SpaceOrders>(p.order, "space_order",
                          [&](auto a) { forward_order<a.value>(p, fields, sources, receivers); });
}

template SCIPROXY_TTI_FORWARD(float);
template SCIPROXY_TTI_FORWARD(double);

}  // namespace sciproxy::tti::kernels::cpu
