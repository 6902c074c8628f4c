// The cpu backend of diffusion: ICON4Py's stencils (math.hpp) fused into six passes over the
// grid inside one OpenMP parallel region, so each field is read or written as few times as the
// dependencies allow:
//
//   1  vertices  u, v = RBF(vn)                         cells  cold-pool enhancement (2 levels)
//   2  edges     nabla2 of vn, Smagorinsky kh
//   3  vertices  u, v = RBF(z_nabla2_e)                 cells  div_ic, hdef_ic; nabla2 w, dwdx,
//   dwdy 4  edges     vn += nabla2/nabla4 terms, then the cold-pool maximum of kh_smag_e
//                cells  w -= diff_multfac_w area^2 nabla2(nabla2 w) (+ upper damping layer)
//   5  cells     z_temp = div(kh grad theta) (+ truly horizontal correction)
//   6  cells     theta, exner from z_temp
//
// The two groups of a pass are independent (w and the cold pools read neither vn nor kh), so
// they share a pass without a barrier between them. Within a pass the points are independent;
// the result is the same for any thread count. Under MPI the granule exchanges halos between
// passes 1 and 2 (u, v), 2 and 3 (z_nabla2_e), 3 and 4 (u, v), and starts vn's after pass 4. Loops
// run over entities (OpenMP) and levels (SIMD) when levels are contiguous, over levels then blocks
// of entities when entities are.
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
  const RunFactors<Real> factors = run_factors(p, f);
  const Real* const diff_multfac_vn = factors.diff_multfac_vn;
  const Real* const smag_limit = factors.smag_limit;
  const Real smag_offset = factors.smag_offset;
  const Real* const dms = factors.diff_multfac_smag;
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
      for_points<FieldLayout::LevelsContiguous>(
          0, p.num_cells, k_cold, nlev, [&](std::int64_t c, std::int32_t k) {
            enh[2 * c + (k - k_cold)] = cold_pool_enhancement<Real, L>(p, theta_v, c, k);
          });
  });
  exchange_halo(p, kHaloVertexWind);
  pass("smagorinsky", [&] {
    for_points<L>(p.edge_smag_begin, p.edge_smag_end, 0, nlev, [&](std::int64_t e, std::int32_t k) {
      smagorinsky_at_edge<Real, L>(p, p.u_vert, p.v_vert, vn[xe(e, k)], e, k, dms[k], smag_limit[k],
                                   smag_offset, p.kh_smag_e[xe(e, k)], p.kh_smag_ec[xe(e, k)],
                                   p.z_nabla2_e[xe(e, k)]);
    });
  });
  exchange_halo(p, kHaloNabla2Edges);
  pass("rbf_nabla2_turbulence_nabla2_w", [&] {
    for_points<L>(p.vertex_begin, p.vertex_end, 0, nlev, [&](std::int64_t v, std::int32_t k) {
      rbf_at_vertex<Real, L>(p, p.z_nabla2_e, v, k, p.u_vert[xv(v, k)], p.v_vert[xv(v, k)]);
    });
    if (p.turbulence_diagnostics)
      for_points<L>(p.cell_turb_begin, p.cell_turb_end, 1, nlev,
                    [&](std::int64_t c, std::int32_t k) {
                      Real kh_c, div, kh_c_above, div_above;
                      turbulence_terms<Real, L>(p, p.kh_smag_ec, vn, c, k, dms[k], kh_c, div);
                      turbulence_terms<Real, L>(p, p.kh_smag_ec, vn, c, k - 1, dms[k - 1],
                                                kh_c_above, div_above);
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
  exchange_halo(p, kHaloVertexNabla2);
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
        Real w_new =
            w[xh(c, k)] - p.diff_multfac_w * (area * area) *
                              c2e2co_sum<Real, L>(p, p.geofac_n2s, p.z_nabla2_c, nlev, c, k);
        if (k > 0 && k < p.nrdmax)
          w_new = w_new + p.diff_multfac_n2w[k] * area * p.z_nabla2_c[xc(c, k)];
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
                                                    if (c >= 0)
                                                      m = max_of(m, enh[2 * c + (k - k_cold)]);
                                                  }
                                                  p.kh_smag_e[xe(e, k)] = m;
                                                });
  });
  exchange_halo(p, kHaloVn);
  if (!temperature) return;
  pass("theta_exner", [&] {
    for_points<L>(p.cell_theta_begin, p.cell_theta_end, 0, nlev,
                  [&](std::int64_t c, std::int32_t k) {
                    p.z_temp[xc(c, k)] = theta_tendency<Real, L>(p, p.kh_smag_e, theta_v, c, k);
                  });
#pragma omp barrier
    for_points<L>(p.cell_theta_begin, p.cell_theta_end, 0, nlev,
                  [&](std::int64_t c, std::int32_t k) {
                    update_theta_exner(p.area[c], p.z_temp[xc(c, k)], p.rd_o_cvd, theta_v[xc(c, k)],
                                       exner[xc(c, k)]);
                  });
  });
}

// The level-contiguous layout's passes, written over rows: for each entity, the rows (nlev
// values) of its neighbours and their weights are looked up once, then one SIMD loop over the
// levels does the point arithmetic of math.hpp in the same order, free of branches (a missing
// neighbour reads p.zero_row with weight 0). The same passes and barriers as run_passes.
template <class Real>
void run_rows(const Context& ctx, const Problem<Real>& p, const RunFields<Real>& f) {
  constexpr FieldLayout L = FieldLayout::LevelsContiguous;
  const std::int32_t nlev = p.nlev, nh = nlev + 1;
  const FieldIndex<L> xe{p.num_edges, nlev};
  Real* const vn = f.prognostic.vn;
  Real* const w = f.prognostic.w;
  Real* const theta_v = f.prognostic.theta_v;
  Real* const exner = f.prognostic.exner;
  const RunFactors<Real> factors = run_factors(p, f);
  const Real* const diff_multfac_vn = factors.diff_multfac_vn;
  const Real* const smag_limit = factors.smag_limit;
  const Real smag_offset = factors.smag_offset;
  const Real* const dms = factors.diff_multfac_smag;
  const std::int32_t k_cold = std::max(0, nlev - 2);
  Real* const enh = p.enh_diffu_3d;
  const bool temperature = p.apply_to_temperature;
  const int threads = p.nparallel > 0 ? p.nparallel : omp_get_max_threads();
  const Real* const zero = p.zero_row;

  auto pass = [&](const char* name, auto&& work) {
    auto t = Timers::region(ctx.timers, name);
#pragma omp parallel num_threads(threads)
    work();
  };
  // u, v at the vertices from the edge field x (RBF over V2E).
  auto rbf_rows = [&](const Real* x) {
#pragma omp for schedule(static) nowait
    for (std::int64_t v = p.vertex_begin; v < p.vertex_end; ++v) {
      const Real* r[6];
      Real c1[6], c2[6];
      for (int i = 0; i < 6; ++i) {
        const std::int32_t e = p.v2e[6 * v + i];
        r[i] = e >= 0 ? x + std::int64_t{e} * nlev : zero;
        c1[i] = e >= 0 ? p.rbf_coeff_1[6 * v + i] : Real(0);
        c2[i] = e >= 0 ? p.rbf_coeff_2[6 * v + i] : Real(0);
      }
      Real* const u = p.u_vert + v * nlev;
      Real* const vv = p.v_vert + v * nlev;
#pragma omp simd
      for (std::int32_t k = 0; k < nlev; ++k) {
        Real a = 0, b = 0;
        for (int i = 0; i < 6; ++i) {
          a += c1[i] * r[i][k];
          b += c2[i] * r[i][k];
        }
        u[k] = a;
        vv[k] = b;
      }
    }
  };
  // sum over C2E2CO of coef x field (nk levels per row) at cell c into out (levels [k0, k1)).
  auto c2e2co_rows = [&](std::int64_t c, const Real* field, std::int32_t nk, const Real* coef,
                         Real* out, std::int32_t k0, std::int32_t k1) {
    const Real* r[4];
    Real g[4];
    for (int j = 0; j < 4; ++j) {
      const std::int32_t n = p.c2e2co[4 * c + j];
      r[j] = n >= 0 ? field + std::int64_t{n} * nk : zero;
      g[j] = n >= 0 ? coef[4 * c + j] : Real(0);
    }
#pragma omp simd
    for (std::int32_t k = k0; k < k1; ++k) {
      Real sum = 0;
      for (int j = 0; j < 4; ++j) sum += r[j][k] * g[j];
      out[k] = sum;
    }
  };

  pass("rbf_vn", [&] {
    rbf_rows(vn);
    if (temperature)
      for_points<L>(0, p.num_cells, k_cold, nlev, [&](std::int64_t c, std::int32_t k) {
        enh[2 * c + (k - k_cold)] = cold_pool_enhancement<Real, L>(p, theta_v, c, k);
      });
  });
  exchange_halo(p, kHaloVertexWind);
  pass("smagorinsky", [&] {
#pragma omp for schedule(static) nowait
    for (std::int64_t e = p.edge_smag_begin; e < p.edge_smag_end; ++e) {
      const Real *U[4], *V[4];
      Real pnx[4], pny[4], dnx[4], dny[4];
      for (int i = 0; i < 4; ++i) {
        const std::int64_t v = p.e2c2v[4 * e + i];  // present in this range (checked at init)
        U[i] = p.u_vert + v * nlev, V[i] = p.v_vert + v * nlev;
        pnx[i] = p.primal_normal_vert_x[4 * e + i], pny[i] = p.primal_normal_vert_y[4 * e + i];
        dnx[i] = p.dual_normal_vert_x[4 * e + i], dny[i] = p.dual_normal_vert_y[4 * e + i];
      }
      const Real lp = p.inv_primal_edge_length[e], lvv = p.inv_vert_vert_length[e];
      const Real l_p = p.tangent_orientation[e] * lp;
      const Real* const vne = vn + e * nlev;
      Real* const kh_e = p.kh_smag_e + e * nlev;
      Real* const kh_ec = p.kh_smag_ec + e * nlev;
      Real* const z2 = p.z_nabla2_e + e * nlev;
#pragma omp simd
      for (std::int32_t k = 0; k < nlev; ++k) {
        Real P[4], D[4];
        for (int i = 0; i < 4; ++i) {
          P[i] = U[i][k] * pnx[i] + V[i][k] * pny[i];
          D[i] = U[i][k] * dnx[i] + V[i][k] * dny[i];
        }
        const Real x = vne[k];
        z2[k] = Real(4) * ((P[0] + P[1] - Real(2) * x) * (lp * lp) +
                           (P[2] + P[3] - Real(2) * x) * (lvv * lvv));
        const Real part1 = (P[3] - P[2]) * lvv - (D[1] - D[0]) * l_p;
        const Real part2 = (P[1] - P[0]) * l_p + (D[3] - D[2]) * lvv;
        const Real ec = dms[k] * std::sqrt(part1 * part1 + part2 * part2);
        kh_ec[k] = ec;
        kh_e[k] = min_of(max_of(Real(0), ec - smag_offset), smag_limit[k]);
      }
    }
  });
  exchange_halo(p, kHaloNabla2Edges);
  pass("rbf_nabla2_turbulence_nabla2_w", [&] {
    rbf_rows(p.z_nabla2_e);
    if (p.turbulence_diagnostics) {
#pragma omp for schedule(static) nowait
      for (std::int64_t c = p.cell_turb_begin; c < p.cell_turb_end; ++c) {
        const Real *KH[3], *VN[3];
        Real b[3], g[3];
        for (int j = 0; j < 3; ++j) {
          const std::int64_t e = p.c2e[3 * c + j];
          KH[j] = p.kh_smag_ec + e * nlev, VN[j] = vn + e * nlev;
          b[j] = p.e_bln_c_s[3 * c + j], g[j] = p.geofac_div[3 * c + j];
        }
        const Real* const wgt = p.wgtfac_c + c * nh;
        Real* const div_ic = f.diagnostic.div_ic + c * nh;
        Real* const hdef_ic = f.diagnostic.hdef_ic + c * nh;
#pragma omp simd
        for (std::int32_t k = 1; k < nlev; ++k) {
          Real kh = 0, d = 0, kh_above = 0, d_above = 0;
          for (int j = 0; j < 3; ++j) {
            kh += KH[j][k] * b[j];
            d += VN[j][k] * g[j];
            kh_above += KH[j][k - 1] * b[j];
            d_above += VN[j][k - 1] * g[j];
          }
          const Real kh_c = kh / dms[k], kh_c_above = kh_above / dms[k - 1];
          div_ic[k] = wgt[k] * d + (Real(1) - wgt[k]) * d_above;
          const Real hdef = wgt[k] * kh_c + (Real(1) - wgt[k]) * kh_c_above;
          hdef_ic[k] = hdef * hdef;
        }
      }
    }
    if (p.apply_to_vertical_wind) {
#pragma omp for schedule(static) nowait
      for (std::int64_t c = 0; c < p.num_cells; ++c)
        c2e2co_rows(c, w, nh, p.geofac_n2s, p.z_nabla2_c + c * nlev, 0, nlev);
    }
    if (p.shear_type == 2) {
#pragma omp for schedule(static) nowait
      for (std::int64_t c = p.cell_w_begin; c < p.cell_w_end; ++c) {
        c2e2co_rows(c, w, nh, p.geofac_grg_x, f.diagnostic.dwdx + c * nh, 1, nlev);
        c2e2co_rows(c, w, nh, p.geofac_grg_y, f.diagnostic.dwdy + c * nh, 1, nlev);
      }
    }
  });
  exchange_halo(p, kHaloVertexNabla2);
  pass("vn_w", [&] {
    if (p.apply_to_horizontal_wind) {
#pragma omp for schedule(static) nowait
      for (std::int64_t e = p.edge_vn_begin; e < p.edge_vn_end; ++e) {
        Real* const vne = vn + e * nlev;
        const Real* const z2 = p.z_nabla2_e + e * nlev;
        const Real area = p.edge_area[e];
        if (e < p.edge_nudge2_begin) {  // the lateral boundary's rows: nabla2 only
          if (!p.limited_area) continue;
          const Real fac = p.fac_bdydiff_v;
#pragma omp simd
          for (std::int32_t k = 0; k < nlev; ++k) vne[k] = vne[k] + area * fac * z2[k];
          continue;
        }
        const Real *U[4], *V[4];
        Real pnx[4], pny[4];
        for (int i = 0; i < 4; ++i) {
          const std::int64_t v = p.e2c2v[4 * e + i];
          U[i] = p.u_vert + v * nlev, V[i] = p.v_vert + v * nlev;
          pnx[i] = p.primal_normal_vert_x[4 * e + i], pny[i] = p.primal_normal_vert_y[4 * e + i];
        }
        const Real lp = p.inv_primal_edge_length[e], lvv = p.inv_vert_vert_length[e];
        const Real* const kh = p.kh_smag_e + e * nlev;
        // The limited-area and the global update as two loops, so that each vectorises.
        auto nabla4 = [&](std::int32_t k) {
          Real P[4];
          for (int i = 0; i < 4; ++i) P[i] = U[i][k] * pnx[i] + V[i][k] * pny[i];
          const Real z = z2[k];
          return Real(4) * ((P[2] + P[3] - Real(2) * z) * (lvv * lvv) +
                            (P[0] + P[1] - Real(2) * z) * (lp * lp));
        };
        if (p.limited_area) {  // the nudging zone: at least nudgezone_diff x nudgecoeff_e
          const Real nudge = p.nudgezone_diff * p.nudgecoeff_e[e];
#pragma omp simd
          for (std::int32_t k = 0; k < nlev; ++k)
            vne[k] = vne[k] +
                     area * (max_of(nudge, kh[k]) * z2[k] - area * diff_multfac_vn[k] * nabla4(k));
        } else {
#pragma omp simd
          for (std::int32_t k = 0; k < nlev; ++k)
            vne[k] = vne[k] + area * (kh[k] * z2[k] - diff_multfac_vn[k] * nabla4(k) * area);
        }
      }
    }
    if (p.apply_to_vertical_wind) {
      const std::int64_t w_begin = std::max(p.cell_w_begin, p.cell_interior_begin);
      const std::int64_t w_end = std::min(p.cell_w_end, p.cell_local_end);
      const std::int32_t k_damp = std::min(p.nrdmax, nlev);
#pragma omp for schedule(static) nowait
      for (std::int64_t c = w_begin; c < w_end; ++c) {
        const Real* r[4];
        Real g[4];
        for (int j = 0; j < 4; ++j) {
          const std::int32_t n = p.c2e2co[4 * c + j];
          r[j] = n >= 0 ? p.z_nabla2_c + std::int64_t{n} * nlev : zero;
          g[j] = n >= 0 ? p.geofac_n2s[4 * c + j] : Real(0);
        }
        const Real area = p.area[c];
        const Real fac = p.diff_multfac_w * (area * area);
        Real* const wc = w + c * nh;
#pragma omp simd
        for (std::int32_t k = 0; k < nlev; ++k) {
          Real sum = 0;
          for (int j = 0; j < 4; ++j) sum += r[j][k] * g[j];
          wc[k] = wc[k] - fac * sum;
        }
        const Real* const zc = p.z_nabla2_c + c * nlev;
        for (std::int32_t k = 1; k < k_damp; ++k)
          wc[k] = wc[k] + p.diff_multfac_n2w[k] * area * zc[k];
      }
    }
#pragma omp barrier
    // The cold-pool maximum after every vn update has read kh_smag_e.
    if (temperature)
      for_points<L>(p.edge_cold_begin, p.edge_cold_end, k_cold, nlev,
                    [&](std::int64_t e, std::int32_t k) {
                      Real m = p.kh_smag_e[xe(e, k)];
                      for (int j = 0; j < 2; ++j) {
                        const std::int32_t c = p.e2c[2 * e + j];
                        if (c >= 0) m = max_of(m, enh[2 * c + (k - k_cold)]);
                      }
                      p.kh_smag_e[xe(e, k)] = m;
                    });
  });
  exchange_halo(p, kHaloVn);
  if (!temperature) return;
  pass("theta_exner", [&] {
#pragma omp for schedule(static)
    for (std::int64_t c = p.cell_theta_begin; c < p.cell_theta_end; ++c) {
      const Real *KH[3], *T0[3], *T1[3];
      Real inv[3], g[3];
      for (int j = 0; j < 3; ++j) {
        const std::int64_t e = p.c2e[3 * c + j];
        KH[j] = p.kh_smag_e + e * nlev;
        T0[j] = theta_v + std::int64_t{p.e2c[2 * e]} * nlev;  // both cells exist here (init)
        T1[j] = theta_v + std::int64_t{p.e2c[2 * e + 1]} * nlev;
        inv[j] = p.inv_dual_edge_length[e], g[j] = p.geofac_div[3 * c + j];
      }
      Real* const zt = p.z_temp + c * nlev;
#pragma omp simd
      for (std::int32_t k = 0; k < nlev; ++k) {
        Real z = 0;
        for (int j = 0; j < 3; ++j) z += KH[j][k] * inv[j] * (T1[j][k] - T0[j][k]) * g[j];
        zt[k] = z;
      }
      if (p.apply_zdiffusion_t && p.cell_has_zd[c])
        for (std::int32_t k = 0; k < nlev; ++k)
          if (p.zd_diffcoef[c * nlev + k] != Real(0))
            zt[k] = theta_tendency<Real, L>(p, p.kh_smag_e, theta_v, c, k);
    }
    // (the implicit barrier: every tendency read the old theta)
#pragma omp for schedule(static) nowait
    for (std::int64_t c = p.cell_theta_begin; c < p.cell_theta_end; ++c) {
      const Real area = p.area[c];
      const Real* const zt = p.z_temp + c * nlev;
      Real* const th = theta_v + c * nlev;
      Real* const ex = exner + c * nlev;
#pragma omp simd
      for (std::int32_t k = 0; k < nlev; ++k)
        update_theta_exner(area, zt[k], p.rd_o_cvd, th[k], ex[k]);
    }
  });
}

}  // namespace

#define SCIPROXY_DIFFUSION_CPU_RUN(Real, L)           \
  SCIPROXY_DIFFUSION_RUN(Real, L) {                   \
    if constexpr (L == FieldLayout::LevelsContiguous) \
      run_rows<Real>(ctx, p, f);                      \
    else                                              \
      run_passes<Real, L>(ctx, p, f);                 \
  }
SCIPROXY_DIFFUSION_CPU_RUN(double, FieldLayout::LevelsContiguous)
SCIPROXY_DIFFUSION_CPU_RUN(double, FieldLayout::EntitiesContiguous)
SCIPROXY_DIFFUSION_CPU_RUN(float, FieldLayout::LevelsContiguous)
SCIPROXY_DIFFUSION_CPU_RUN(float, FieldLayout::EntitiesContiguous)

}  // namespace sciproxy::diffusion::kernels::cpu
