// The cpu backend of diffusion: ICON4Py's stencils (math.hpp) fused into six passes over the
// grid inside one OpenMP parallel region, so each field is read or written as few times as the
// dependencies allow:
//
//   1  vertices  u, v = RBF(vn)                         cells  cold-pool enhancement (2 levels)
//   2  edges     nabla2 of vn, Smagorinsky kh
//   3  vertices  u, v = RBF(z_nabla2_e)                 cells  div_ic, hdef_ic; nabla2 w, dwdx, dwdy
//   4  edges     vn += nabla2/nabla4 terms, then the cold-pool maximum of kh_smag_e
//                cells  w -= diff_multfac_w area^2 nabla2(nabla2 w) (+ upper damping layer)
//   5  cells     z_temp = div(kh grad theta) (+ truly horizontal correction)
//   6  cells     theta, exner from z_temp
//
// The two groups of a pass are independent (w and the cold pools read neither vn nor kh), so
// they share a pass without a barrier between them. Within a pass the points are independent;
// the result is the same for any thread count. Loops run over entities (OpenMP) and levels
// (SIMD) when levels are contiguous, over levels then blocks of entities when entities are.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "diffusion/kernels.hpp"
#include "diffusion/math.hpp"

namespace sciproxy::diffusion::kernels::cpu {

namespace {

// Calls body(i, k) for i in [begin, end), k in [kbegin, kend), shared among the threads of the
// enclosing parallel region (no barrier at the end: the caller places them).
template <FieldLayout L, class Body>
void for_points(std::int64_t begin, std::int64_t end, std::int32_t kbegin, std::int32_t kend,
                Body&& body) {
  if constexpr (L == FieldLayout::LevelsContiguous) {
#pragma omp for schedule(static) nowait
    for (std::int64_t i = begin; i < end; ++i) {
#pragma omp simd
      for (std::int32_t k = kbegin; k < kend; ++k) body(i, k);
    }
  } else {
    constexpr std::int64_t kBlock = 512;
    const std::int64_t nblocks = (end - begin + kBlock - 1) / kBlock;
#pragma omp for schedule(static) nowait
    for (std::int64_t b = 0; b < nblocks; ++b) {
      const std::int64_t i0 = begin + b * kBlock, i1 = std::min(end, i0 + kBlock);
      for (std::int32_t k = kbegin; k < kend; ++k) {
#pragma omp simd
        for (std::int64_t i = i0; i < i1; ++i) body(i, k);
      }
    }
  }
}

template <class Real, FieldLayout L>
void run_passes(const Context& ctx, const Problem<Real>& p, const RunFields<Real>& f) {
  const std::int32_t nlev = p.nlev;
  const FieldIndex<L> xv{p.num_vertices, nlev}, xe{p.num_edges, nlev}, xc{p.num_cells, nlev},
      xh{p.num_cells, nlev + 1};
  Real* const vn = f.prognostic.vn;
  Real* const w = f.prognostic.w;
  Real* const theta_v = f.prognostic.theta_v;
  Real* const exner = f.prognostic.exner;
  const Real* const diff_multfac_vn = f.initial_run ? p.diff_multfac_vn_initial : p.diff_multfac_vn;
  const Real* const smag_limit = f.initial_run ? p.smag_limit_initial : p.smag_limit;
  const Real smag_offset = f.initial_run ? Real(0) : p.smag_offset;
  Real* const dms = p.diff_multfac_smag;
  for (std::int32_t k = 0; k < nlev; ++k) dms[k] = p.enh_smag_fac[k] * f.dtime;
  const std::int32_t k_cold = std::max(0, nlev - 2);
  Real* const enh = p.enh_diffu_3d;  // (cells, 2): the cold-pool enhancement of the lowest levels
  const bool temperature = p.apply_to_temperature;
  const int threads = p.nparallel > 0 ? p.nparallel : omp_get_max_threads();

  auto pass = [&](const char* name, auto&& work) {
    auto t = Timers::region(ctx.timers, name);
#pragma omp parallel num_threads(threads)
    work();
  };

  pass("rbf_vn", [&] {
    for_points<L>(p.vertex_begin, p.vertex_end, 0, nlev, [&](std::int64_t v, std::int32_t k) {
      rbf_at_vertex<Real, L>(p, vn, v, k, p.u_vert[xv(v, k)], p.v_vert[xv(v, k)]);
    });
    if (temperature)
      for_points<FieldLayout::LevelsContiguous>(0, p.num_cells, k_cold, nlev,
                                                [&](std::int64_t c, std::int32_t k) {
        enh[2 * c + (k - k_cold)] = cold_pool_enhancement<Real, L>(p, theta_v, c, k);
      });
  });
  pass("smagorinsky", [&] {
    for_points<L>(p.edge_smag_begin, p.edge_smag_end, 0, nlev, [&](std::int64_t e, std::int32_t k) {
      smagorinsky_at_edge<Real, L>(p, p.u_vert, p.v_vert, vn[xe(e, k)], e, k, dms[k], smag_limit[k],
                                   smag_offset, p.kh_smag_e[xe(e, k)], p.kh_smag_ec[xe(e, k)],
                                   p.z_nabla2_e[xe(e, k)]);
    });
  });
  pass("rbf_nabla2_turbulence_nabla2_w", [&] {
    for_points<L>(p.vertex_begin, p.vertex_end, 0, nlev, [&](std::int64_t v, std::int32_t k) {
      rbf_at_vertex<Real, L>(p, p.z_nabla2_e, v, k, p.u_vert[xv(v, k)], p.v_vert[xv(v, k)]);
    });
    if (p.turbulence_diagnostics)
      for_points<L>(p.cell_turb_begin, p.cell_turb_end, 1, nlev, [&](std::int64_t c, std::int32_t k) {
        Real kh_c, div, kh_c_above, div_above;
        turbulence_terms<Real, L>(p, p.kh_smag_ec, vn, c, k, dms[k], kh_c, div);
        turbulence_terms<Real, L>(p, p.kh_smag_ec, vn, c, k - 1, dms[k - 1], kh_c_above, div_above);
        const Real wgt = p.wgtfac_c[xh(c, k)];
        f.diagnostic.div_ic[xh(c, k)] = wgt * div + (Real(1) - wgt) * div_above;
        const Real hdef = wgt * kh_c + (Real(1) - wgt) * kh_c_above;
        f.diagnostic.hdef_ic[xh(c, k)] = hdef * hdef;
      });
    if (p.apply_to_vertical_wind)
      for_points<L>(0, p.num_cells, 0, nlev, [&](std::int64_t c, std::int32_t k) {
        p.z_nabla2_c[xc(c, k)] = c2e2co_sum<Real, L>(p, p.geofac_n2s, w, nlev + 1, c, k);
      });
    if (p.shear_type == 2)
      for_points<L>(p.cell_w_begin, p.cell_w_end, 1, nlev, [&](std::int64_t c, std::int32_t k) {
        f.diagnostic.dwdx[xh(c, k)] = c2e2co_sum<Real, L>(p, p.geofac_grg_x, w, nlev + 1, c, k);
        f.diagnostic.dwdy[xh(c, k)] = c2e2co_sum<Real, L>(p, p.geofac_grg_y, w, nlev + 1, c, k);
      });
  });
  pass("vn_w", [&] {
    if (p.apply_to_horizontal_wind)
      for_points<L>(p.edge_vn_begin, p.edge_vn_end, 0, nlev, [&](std::int64_t e, std::int32_t k) {
        const Real z_nabla2 = p.z_nabla2_e[xe(e, k)];
        const Real z_nabla4 = nabla4_at_edge<Real, L>(p, p.u_vert, p.v_vert, z_nabla2, e, k);
        vn[xe(e, k)] = diffused_vn(p, e, vn[xe(e, k)], z_nabla2, z_nabla4, p.kh_smag_e[xe(e, k)],
                                   diff_multfac_vn[k]);
      });
    if (p.apply_to_vertical_wind) {
      const std::int64_t w_begin = std::max(p.cell_w_begin, p.cell_interior_begin);
      const std::int64_t w_end = std::min(p.cell_w_end, p.cell_local_end);
      for_points<L>(w_begin, w_end, 0, nlev, [&](std::int64_t c, std::int32_t k) {
        const Real area = p.area[c];
        Real w_new = w[xh(c, k)] - p.diff_multfac_w * (area * area) *
                                       c2e2co_sum<Real, L>(p, p.geofac_n2s, p.z_nabla2_c, nlev, c, k);
        if (k > 0 && k < p.nrdmax) w_new = w_new + p.diff_multfac_n2w[k] * area * p.z_nabla2_c[xc(c, k)];
        w[xh(c, k)] = w_new;
      });
    }
#pragma omp barrier
    // The cold-pool maximum after every vn update has read kh_smag_e.
    if (temperature)
      for_points<FieldLayout::LevelsContiguous>(p.edge_cold_begin, p.edge_cold_end, k_cold, nlev,
                                                [&](std::int64_t e, std::int32_t k) {
        Real m = p.kh_smag_e[xe(e, k)];
        for (int j = 0; j < 2; ++j) {
          const std::int32_t c = p.e2c[2 * e + j];
          if (c >= 0) m = max_of(m, enh[2 * c + (k - k_cold)]);
        }
        p.kh_smag_e[xe(e, k)] = m;
      });
  });
  if (!temperature) return;
  pass("theta_exner", [&] {
    for_points<L>(p.cell_theta_begin, p.cell_theta_end, 0, nlev, [&](std::int64_t c, std::int32_t k) {
      p.z_temp[xc(c, k)] = theta_tendency<Real, L>(p, p.kh_smag_e, theta_v, c, k);
    });
#pragma omp barrier
    for_points<L>(p.cell_theta_begin, p.cell_theta_end, 0, nlev, [&](std::int64_t c, std::int32_t k) {
      update_theta_exner(p.area[c], p.z_temp[xc(c, k)], p.rd_o_cvd, theta_v[xc(c, k)],
                         exner[xc(c, k)]);
    });
  });
}

}  // namespace

#define SCIPROXY_DIFFUSION_CPU_RUN(Real, L) \
  SCIPROXY_DIFFUSION_RUN(Real, L) {         \
    run_passes<Real, L>(ctx, p, f);         \
  }
SCIPROXY_DIFFUSION_CPU_RUN(double, FieldLayout::LevelsContiguous)
SCIPROXY_DIFFUSION_CPU_RUN(double, FieldLayout::EntitiesContiguous)
SCIPROXY_DIFFUSION_CPU_RUN(float, FieldLayout::LevelsContiguous)
SCIPROXY_DIFFUSION_CPU_RUN(float, FieldLayout::EntitiesContiguous)

}  // namespace sciproxy::diffusion::kernels::cpu
