// Per-point arithmetic of ICON's horizontal diffusion (mo_nh_diffusion, hdiff_order 5), as
// ICON4Py's diffusion granule writes it (model/atmosphere/diffusion/stencils, v0.4.1), shared by
// the reference, cpu and cuda backends. k is the full level, e an edge, c a cell, v a vertex;
// sums over a table skip its missing (-1) neighbours.
//
//   RBF at vertices:   u_v = sum_i rbf_coeff_1[v,i] x[V2E[v,i]],  v_v likewise with rbf_coeff_2
//   diamond (E2C2V = the edge's vertices 0, 1, the far vertices 2, 3 of its cells), at vertex i
//     P_i = u_v pn_x[e,i] + v_v pn_y[e,i]  (primal normal),  D_i with the dual normal
//   nabla2 of vn:  z_nabla2_e = 4 [(P0 + P1 - 2 vn) lp^2 + (P2 + P3 - 2 vn) lvv^2]
//     lp = 1/primal edge length, lvv = 1/vertex-vertex length (the 4 because both lengths are
//     twice those of the stencil, Zaengl et al. 2015, QJRMS, doi:10.1002/qj.2378)
//   Smagorinsky:  part1 = (P3 - P2) lvv - (D1 - D0) t_o lp,  part2 = (P1 - P0) t_o lp + (D3 - D2)
//   lvv
//     kh_smag_ec = diff_multfac_smag(k) sqrt(part1^2 + part2^2),  diff_multfac_smag = enh_smag_fac
//     dt kh_smag_e  = min(max(0, kh_smag_ec - smag_offset), smag_limit(k))
//   turbulence (k >= 1):  kh_c = sum_j kh_smag_ec[C2E] e_bln_c_s / diff_multfac_smag,
//     div = sum_j vn[C2E] geofac_div;  div_ic = wgtfac_c div + (1 - wgtfac_c) div(k - 1),
//     hdef_ic = (wgtfac_c kh_c + (1 - wgtfac_c) kh_c(k - 1))^2
//   nabla4 of vn (with u_v, v_v now the RBF of z_nabla2_e):
//     z_nabla4 = 4 [(P2 + P3 - 2 z_nabla2_e) lvv^2 + (P0 + P1 - 2 z_nabla2_e) lp^2]
//   vn += area_e (kh_smag_e z_nabla2_e - diff_multfac_vn(k) z_nabla4 area_e)            (global)
//   vn += area_e (max(nudgezone_diff nudgecoeff_e, kh_smag_e) z_nabla2_e
//                 - area_e diff_multfac_vn(k) z_nabla4)         (limited area, from nudging row 2)
//   vn += area_e fac_bdydiff_v z_nabla2_e                 (limited area, lateral boundary rows)
//   w:  z_nabla2_c = sum_{C2E2CO} w geofac_n2s;  w -= diff_multfac_w area^2 sum_{C2E2CO} z_nabla2_c
//     geofac_n2s;  0 < k < nrdmax: w += diff_multfac_n2w(k) area z_nabla2_c
//     shear_type 2, k >= 1: dwdx = sum_{C2E2CO} geofac_grg_x w, dwdy likewise
//   cold pools (two lowest levels): tdiff = theta - mean_{C2E2C} theta, trefdiff likewise of
//     theta_ref_mc; enh = (thresh - tdiff + trefdiff) 5e-4 where (tdiff - trefdiff < thresh and
//     trefdiff < 0) or tdiff - trefdiff < 1.5 thresh, else DBL_EPS;  kh_smag_e = max(kh_smag_e,
//     max_{E2C} enh)
//   theta:  z_nabla2_e = kh_smag_e inv_dual (theta[E2C1] - theta[E2C0]),
//     z_temp = sum_{C2E} z_nabla2_e geofac_div;  where zd_diffcoef != 0: z_temp += zd_diffcoef
//     (theta geofac_n2s[0] + sum_j geofac_n2s[j+1] (vcoef_j theta_j(k + off_j)
//     + (1 - vcoef_j) theta_j(k + off_j + 1)))  (truly horizontal over steep terrain)
//   theta_new = theta + area z_temp,  exner *= 1 + rd_o_cvd (theta_new / theta - 1)
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.hpp"
#include "diffusion/kernels.hpp"

namespace sciproxy::diffusion::kernels {

template <class Real>
SCIPROXY_HD Real max_of(Real a, Real b) {
  return a > b ? a : b;
}
template <class Real>
SCIPROXY_HD Real min_of(Real a, Real b) {
  return a < b ? a : b;
}

// RBF reconstruction of the vector (u, v) at vertex v, level k, from the edge field x.
template <class Real, FieldLayout L>
SCIPROXY_HD void rbf_at_vertex(const Problem<Real>& p, const Real* x, std::int64_t v,
                               std::int32_t k, Real& u_out, Real& v_out) {
  const FieldIndex<L> xe{p.num_edges, p.nlev};
  Real u = 0, w = 0;
  SCIPROXY_UNROLL
  for (int i = 0; i < 6; ++i) {
    const std::int32_t e = p.v2e[6 * v + i];
    if (e < 0) continue;
    const Real xi = x[xe(e, k)];
    u += p.rbf_coeff_1[6 * v + i] * xi;
    w += p.rbf_coeff_2[6 * v + i] * xi;
  }
  u_out = u;
  v_out = w;
}

// The primal-normal (P) and dual-normal (D) components of the vertex vectors at the diamond.
template <class Real, FieldLayout L>
SCIPROXY_HD void diamond_components(const Problem<Real>& p, const Real* u_vert, const Real* v_vert,
                                    std::int64_t e, std::int32_t k, Real P[4], Real D[4]) {
  const FieldIndex<L> xv{p.num_vertices, p.nlev};
  SCIPROXY_UNROLL
  for (int i = 0; i < 4; ++i) {
    const std::int32_t v = p.e2c2v[4 * e + i];
    const Real u = u_vert[xv(v, k)], w = v_vert[xv(v, k)];
    P[i] = u * p.primal_normal_vert_x[4 * e + i] + w * p.primal_normal_vert_y[4 * e + i];
    D[i] = u * p.dual_normal_vert_x[4 * e + i] + w * p.dual_normal_vert_y[4 * e + i];
  }
}

// nabla2 of vn and the Smagorinsky coefficients at (e, k).
template <class Real, FieldLayout L>
SCIPROXY_HD void smagorinsky_at_edge(const Problem<Real>& p, const Real* u_vert, const Real* v_vert,
                                     Real vn, std::int64_t e, std::int32_t k,
                                     Real diff_multfac_smag, Real smag_limit, Real smag_offset,
                                     Real& kh_smag_e, Real& kh_smag_ec, Real& z_nabla2_e) {
  Real P[4], D[4];
  diamond_components<Real, L>(p, u_vert, v_vert, e, k, P, D);
  const Real lp = p.inv_primal_edge_length[e], lvv = p.inv_vert_vert_length[e];
  z_nabla2_e = Real(4) * ((P[0] + P[1] - Real(2) * vn) * (lp * lp) +
                          (P[2] + P[3] - Real(2) * vn) * (lvv * lvv));
  const Real l_p = p.tangent_orientation[e] * lp;
  const Real part1 = (P[3] - P[2]) * lvv - (D[1] - D[0]) * l_p;
  const Real part2 = (P[1] - P[0]) * l_p + (D[3] - D[2]) * lvv;
  kh_smag_ec = diff_multfac_smag * std::sqrt(part1 * part1 + part2 * part2);
  kh_smag_e = min_of(max_of(Real(0), kh_smag_ec - smag_offset), smag_limit);
}

// kh_c and div at (c, k) for the turbulence diagnostics.
template <class Real, FieldLayout L>
SCIPROXY_HD void turbulence_terms(const Problem<Real>& p, const Real* kh_smag_ec, const Real* vn,
                                  std::int64_t c, std::int32_t k, Real diff_multfac_smag,
                                  Real& kh_c, Real& div) {
  const FieldIndex<L> xe{p.num_edges, p.nlev};
  Real kh = 0, d = 0;
  SCIPROXY_UNROLL
  for (int j = 0; j < 3; ++j) {
    const std::int32_t e = p.c2e[3 * c + j];
    kh += kh_smag_ec[xe(e, k)] * p.e_bln_c_s[3 * c + j];
    d += vn[xe(e, k)] * p.geofac_div[3 * c + j];
  }
  kh_c = kh / diff_multfac_smag;
  div = d;
}

// nabla4 of vn at (e, k) from z_nabla2_e and its RBF reconstruction (u_vert, v_vert).
template <class Real, FieldLayout L>
SCIPROXY_HD Real nabla4_at_edge(const Problem<Real>& p, const Real* u_vert, const Real* v_vert,
                                Real z_nabla2, std::int64_t e, std::int32_t k) {
  const FieldIndex<L> xv{p.num_vertices, p.nlev};
  Real P[4];
  SCIPROXY_UNROLL
  for (int i = 0; i < 4; ++i) {
    const std::int32_t v = p.e2c2v[4 * e + i];
    P[i] = u_vert[xv(v, k)] * p.primal_normal_vert_x[4 * e + i] +
           v_vert[xv(v, k)] * p.primal_normal_vert_y[4 * e + i];
  }
  const Real nabv_tang = P[0] + P[1], nabv_norm = P[2] + P[3];
  const Real lp = p.inv_primal_edge_length[e], lvv = p.inv_vert_vert_length[e];
  return Real(4) * ((nabv_norm - Real(2) * z_nabla2) * (lvv * lvv) +
                    (nabv_tang - Real(2) * z_nabla2) * (lp * lp));
}

// The diffused vn at (e, k): the global, the nudging-zone or the lateral-boundary update.
template <class Real>
SCIPROXY_HD Real diffused_vn(const Problem<Real>& p, std::int64_t e, Real vn, Real z_nabla2,
                             Real z_nabla4, Real kh_smag_e, Real diff_multfac_vn) {
  const Real area = p.edge_area[e];
  if (e < p.edge_nudge2_begin) return p.limited_area ? vn + area * p.fac_bdydiff_v * z_nabla2 : vn;
  if (p.limited_area)
    return vn + area * (max_of(p.nudgezone_diff * p.nudgecoeff_e[e], kh_smag_e) * z_nabla2 -
                        area * diff_multfac_vn * z_nabla4);
  return vn + area * (kh_smag_e * z_nabla2 - diff_multfac_vn * z_nabla4 * area);
}

// sum over C2E2CO of coef x field at (c, k); field has nk levels.
template <class Real, FieldLayout L>
SCIPROXY_HD Real c2e2co_sum(const Problem<Real>& p, const Real* coef, const Real* field,
                            std::int32_t nk, std::int64_t c, std::int32_t k) {
  const FieldIndex<L> xc{p.num_cells, nk};
  Real s = 0;
  SCIPROXY_UNROLL
  for (int j = 0; j < 4; ++j) {
    const std::int32_t n = p.c2e2co[4 * c + j];
    if (n < 0) continue;
    s += field[xc(n, k)] * coef[4 * c + j];
  }
  return s;
}

// The cold-pool enhancement enh_diffu_3d at (c, k).
template <class Real, FieldLayout L>
SCIPROXY_HD Real cold_pool_enhancement(const Problem<Real>& p, const Real* theta_v, std::int64_t c,
                                       std::int32_t k) {
  const FieldIndex<L> xc{p.num_cells, p.nlev};
  Real sum_theta = 0, sum_ref = 0;
  SCIPROXY_UNROLL
  for (int j = 0; j < 3; ++j) {
    const std::int32_t n = p.c2e2c[3 * c + j];
    if (n < 0) continue;
    sum_theta += theta_v[xc(n, k)];
    sum_ref += p.theta_ref_mc[xc(n, k)];
  }
  const Real tdiff = theta_v[xc(c, k)] - sum_theta / Real(3);
  const Real trefdiff = p.theta_ref_mc[xc(c, k)] - sum_ref / Real(3);
  const Real thresh = p.thresh_tdiff;
  const bool cold = ((tdiff - trefdiff) < thresh && trefdiff < Real(0)) ||
                    (tdiff - trefdiff < Real(1.5) * thresh);
  return cold ? (thresh - tdiff + trefdiff) * Real(5.0e-4) : p.smallest_vpfloat;
}

// z_temp at (c, k): the divergence of kh grad(theta), then the truly horizontal correction.
template <class Real, FieldLayout L>
SCIPROXY_HD Real theta_tendency(const Problem<Real>& p, const Real* kh_smag_e, const Real* theta_v,
                                std::int64_t c, std::int32_t k) {
  const FieldIndex<L> xc{p.num_cells, p.nlev};
  const FieldIndex<L> xe{p.num_edges, p.nlev};
  Real z_temp = 0;
  SCIPROXY_UNROLL
  for (int j = 0; j < 3; ++j) {
    const std::int32_t e = p.c2e[3 * c + j];
    const Real z_nabla2_e = kh_smag_e[xe(e, k)] * p.inv_dual_edge_length[e] *
                            (theta_v[xc(p.e2c[2 * e + 1], k)] - theta_v[xc(p.e2c[2 * e], k)]);
    z_temp += z_nabla2_e * p.geofac_div[3 * c + j];
  }
  if (p.apply_zdiffusion_t) {
    const Real diffcoef = p.zd_diffcoef[xc(c, k)];
    if (diffcoef != Real(0)) {
      Real sum = theta_v[xc(c, k)] * p.geofac_n2s[4 * c];
      SCIPROXY_UNROLL
      for (int j = 0; j < 3; ++j) {
        const std::int32_t n = p.c2e2c[3 * c + j];
        const std::int32_t kk = k + p.zd_vertoffset[j][xc(c, k)];
        const Real vcoef = p.zd_intcoef[j][xc(c, k)];
        sum += p.geofac_n2s[4 * c + j + 1] *
               (vcoef * theta_v[xc(n, kk)] + (Real(1) - vcoef) * theta_v[xc(n, kk + 1)]);
      }
      z_temp = z_temp + diffcoef * sum;
    }
  }
  return z_temp;
}

// theta and exner after the update with z_temp at (c, k).
template <class Real>
SCIPROXY_HD void update_theta_exner(Real area, Real z_temp, Real rd_o_cvd, Real& theta_v,
                                    Real& exner) {
  const Real z_theta = theta_v;
  theta_v = theta_v + area * z_temp;
  exner = exner * (Real(1) + rd_o_cvd * (theta_v / z_theta - Real(1)));
}

}  // namespace sciproxy::diffusion::kernels
