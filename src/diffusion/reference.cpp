// The reference backend of diffusion: ICON4Py's granule as it runs, stencil after stencil, each
// over its whole domain with full temporaries (u_vert, v_vert, kh_smag_e, kh_smag_ec, z_nabla2_e,
// z_nabla2_c, copies of w and theta), in plain serial loops. The equations are in math.hpp.
#include <algorithm>
#include <cstring>
#include <vector>

#include "diffusion/kernels.hpp"
#include "diffusion/math.hpp"

namespace sciproxy::diffusion::kernels::reference {

namespace {

template <class Real, FieldLayout L>
void run_steps(const Context& ctx, const Problem<Real>& p, const RunFields<Real>& f) {
  const std::int32_t nlev = p.nlev;
  const FieldIndex<L> xv{p.num_vertices, nlev}, xe{p.num_edges, nlev}, xc{p.num_cells, nlev},
      xh{p.num_cells, nlev + 1};
  Real* vn = f.prognostic.vn;
  Real* w = f.prognostic.w;
  Real* theta_v = f.prognostic.theta_v;
  Real* exner = f.prognostic.exner;
  const RunFactors<Real> factors = run_factors(p, f);
  const Real* diff_multfac_vn = factors.diff_multfac_vn;
  const Real* smag_limit = factors.smag_limit;
  const Real smag_offset = factors.smag_offset;

  auto rbf = [&](const Real* x) {
    for (std::int64_t v = p.vertex_begin; v < p.vertex_end; ++v)
      for (std::int32_t k = 0; k < nlev; ++k)
        rbf_at_vertex<Real, L>(p, x, v, k, p.u_vert[xv(v, k)], p.v_vert[xv(v, k)]);
  };
  {
    auto t = Timers::region(ctx.timers, "rbf_vn");
    rbf(vn);
  }
  exchange_halo(p, kHaloVertexWind);
  {
    auto t = Timers::region(ctx.timers, "smagorinsky");
    for (std::int64_t e = p.edge_smag_begin; e < p.edge_smag_end; ++e)
      for (std::int32_t k = 0; k < nlev; ++k)
        smagorinsky_at_edge<Real, L>(
            p, p.u_vert, p.v_vert, vn[xe(e, k)], e, k, p.diff_multfac_smag[k], smag_limit[k],
            smag_offset, p.kh_smag_e[xe(e, k)], p.kh_smag_ec[xe(e, k)], p.z_nabla2_e[xe(e, k)]);
  }
  exchange_halo(p, kHaloNabla2Edges);
  if (p.turbulence_diagnostics) {
    auto t = Timers::region(ctx.timers, "turbulence");
    for (std::int64_t c = p.cell_turb_begin; c < p.cell_turb_end; ++c)
      for (std::int32_t k = 1; k < nlev; ++k) {
        Real kh_c, div, kh_c_above, div_above;
        turbulence_terms<Real, L>(p, p.kh_smag_ec, vn, c, k, p.diff_multfac_smag[k], kh_c, div);
        turbulence_terms<Real, L>(p, p.kh_smag_ec, vn, c, k - 1, p.diff_multfac_smag[k - 1],
                                  kh_c_above, div_above);
        const Real wgt = p.wgtfac_c[xh(c, k)];
        f.diagnostic.div_ic[xh(c, k)] = wgt * div + (Real(1) - wgt) * div_above;
        const Real hdef = wgt * kh_c + (Real(1) - wgt) * kh_c_above;
        f.diagnostic.hdef_ic[xh(c, k)] = hdef * hdef;
      }
  }
  {
    auto t = Timers::region(ctx.timers, "rbf_nabla2");
    rbf(p.z_nabla2_e);
  }
  exchange_halo(p, kHaloVertexNabla2);
  if (p.apply_to_horizontal_wind) {
    auto t = Timers::region(ctx.timers, "vn");
    for (std::int64_t e = p.edge_vn_begin; e < p.edge_vn_end; ++e)
      for (std::int32_t k = 0; k < nlev; ++k) {
        const Real z_nabla2 = p.z_nabla2_e[xe(e, k)];
        const Real z_nabla4 = nabla4_at_edge<Real, L>(p, p.u_vert, p.v_vert, z_nabla2, e, k);
        vn[xe(e, k)] = diffused_vn(p, e, vn[xe(e, k)], z_nabla2, z_nabla4, p.kh_smag_e[xe(e, k)],
                                   diff_multfac_vn[k]);
      }
  }
  exchange_halo(p, kHaloVn);
  {
    // The gradients of w are turbulence diagnostics (shear type 2): computed whether or not w
    // is diffused, from w before its update.
    auto t = Timers::region(ctx.timers, "w");
    const std::int64_t nw = static_cast<std::int64_t>(p.num_cells) * (nlev + 1);
    std::memcpy(p.w_old, w, sizeof(Real) * nw);
    if (p.shear_type == 2)
      for (std::int64_t c = p.cell_w_begin; c < p.cell_w_end; ++c)
        for (std::int32_t k = 1; k < nlev; ++k) {
          f.diagnostic.dwdx[xh(c, k)] =
              c2e2co_sum<Real, L>(p, p.geofac_grg_x, p.w_old, nlev + 1, c, k);
          f.diagnostic.dwdy[xh(c, k)] =
              c2e2co_sum<Real, L>(p, p.geofac_grg_y, p.w_old, nlev + 1, c, k);
        }
  }
  if (p.apply_to_vertical_wind) {
    auto t = Timers::region(ctx.timers, "w");
    for (std::int64_t c = 0; c < p.num_cells; ++c)
      for (std::int32_t k = 0; k < nlev; ++k)
        p.z_nabla2_c[xc(c, k)] = c2e2co_sum<Real, L>(p, p.geofac_n2s, p.w_old, nlev + 1, c, k);
    for (std::int64_t c = p.cell_w_begin; c < p.cell_w_end; ++c)
      for (std::int32_t k = 0; k < nlev; ++k) {
        if (c < p.cell_interior_begin || c >= p.cell_local_end) continue;
        const Real area = p.area[c];
        Real w_new =
            p.w_old[xh(c, k)] - p.diff_multfac_w * (area * area) *
                                    c2e2co_sum<Real, L>(p, p.geofac_n2s, p.z_nabla2_c, nlev, c, k);
        if (k > 0 && k < p.nrdmax)
          w_new = w_new + p.diff_multfac_n2w[k] * area * p.z_nabla2_c[xc(c, k)];
        w[xh(c, k)] = w_new;
      }
  }
  if (p.apply_to_temperature) {
    {
      auto t = Timers::region(ctx.timers, "cold_pools");
      const std::int32_t k0 = std::max(0, nlev - 2);
      Real* const enh = p.enh_diffu_3d;
      for (std::int64_t c = 0; c < p.num_cells; ++c)
        for (std::int32_t k = k0; k < nlev; ++k)
          enh[2 * c + (k - k0)] = cold_pool_enhancement<Real, L>(p, theta_v, c, k);
      for (std::int64_t e = p.edge_cold_begin; e < p.edge_cold_end; ++e)
        for (std::int32_t k = k0; k < nlev; ++k) {
          Real m = p.kh_smag_e[xe(e, k)];
          for (int j = 0; j < 2; ++j) {
            const std::int32_t c = p.e2c[2 * e + j];
            if (c >= 0) m = max_of(m, enh[2 * c + (k - k0)]);
          }
          p.kh_smag_e[xe(e, k)] = m;
        }
    }
    auto t = Timers::region(ctx.timers, "theta_exner");
    std::memcpy(p.theta_old, theta_v, sizeof(Real) * static_cast<std::int64_t>(p.num_cells) * nlev);
    for (std::int64_t c = p.cell_theta_begin; c < p.cell_theta_end; ++c)
      for (std::int32_t k = 0; k < nlev; ++k) {
        const Real z_temp = theta_tendency<Real, L>(p, p.kh_smag_e, p.theta_old, c, k);
        update_theta_exner(p.area[c], z_temp, p.rd_o_cvd, theta_v[xc(c, k)], exner[xc(c, k)]);
      }
  }
}

}  // namespace

#define SCIPROXY_DIFFUSION_REFERENCE_RUN(Real, L) \
  SCIPROXY_DIFFUSION_RUN(Real, L) {               \
    run_steps<Real, L>(ctx, p, f);                \
  }
SCIPROXY_DIFFUSION_REFERENCE_RUN(double, FieldLayout::LevelsContiguous)
SCIPROXY_DIFFUSION_REFERENCE_RUN(double, FieldLayout::EntitiesContiguous)
SCIPROXY_DIFFUSION_REFERENCE_RUN(float, FieldLayout::LevelsContiguous)
SCIPROXY_DIFFUSION_REFERENCE_RUN(float, FieldLayout::EntitiesContiguous)

}  // namespace sciproxy::diffusion::kernels::reference
