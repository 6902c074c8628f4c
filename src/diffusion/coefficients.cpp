// Interpolation and geometry coefficients of ICON's horizontal diffusion, from a Grid (conventions:
// include/sciproxy/diffusion.hpp). Equations as ICON4Py computes them (C2SM/icon4py,
// model/common/src/icon4py/model/common/interpolation/interpolation_fields.py and
// rbf_interpolation.py, which follow ICON's mo_intp_coeffs.f90 and mo_intp_rbf_coeffs.f90):
//
//   geofac_div[c][i] = l_e o_ci / A_c                 e = C2E[c][i], l primal length, o
//                                                     edge_orientation, A cell area
//   geofac_rot[v][i] = l'_e o_vi / A'_v               e = V2E[v][i], l' dual length, o
//                                                     vertex_edge_orientation, A' dual area
//   geofac_n2s[c][0] = sum_i s_ci geofac_div[c][i] / l'_e,  s_ci = -1 if c == E2C[e][0], +1 if
//                      c == E2C[e][1] (the gradient (psi(E2C[1]) - psi(E2C[0])) / l' along n)
//   geofac_n2s[c][1+i] = s'_ci geofac_div[c][i] / l'_e,  s'_ci = -1 if C2E2C[c][i] == E2C[e][0],
//                      +1 if it is E2C[e][1]       (so every row sums to 0: nabla2 const = 0)
//   c_lin_e[e] = (d_e1 / l'_e, 1 - d_e1 / l'_e),  d_e1 = edge_cell_length[e][1]
//   geofac_grg[c][0] = sum_i n_ci geofac_div[c][i] c_lin_e[e][k(c)]   (k(c): c's place in E2C[e])
//   geofac_grg[c][1+i] = n_ci geofac_div[c][i] c_lin_e[e][k(C2E2C[c][i])]
//                      n_ci: the primal normal of e in the local (zonal, meridional) frame at the
//                      cell centre (ICON's primal_normal_cell), the Green-Gauss gradient
//                      (1/A) sum_e l_e o_e psi_e n_e with psi_e linear between the two cells
//   e_bln_c_s[c][i]:   ICON4Py's compute_e_bln_c_s with weighting_factor 0 (ICON4Py's configured
//   value;
//                      _weighting_factors):
//                      rotate (lat, lon) so the cell centre sits on the equator, then the weights
//                      w of the three edge midpoints solve sum w = 1, sum w x = x_c, sum w y = y_c
//                      (x, y the rotated lon and lat relative to the centre), by the same
//                      elimination as ICON4Py
//   inverse lengths:   1 / l_e, 1 / l'_e, 1 / (r * arc(E2C2V[e][2], E2C2V[e][3]))
//   rbf_vec_coeff_v:   for each vertex with edges e_j = V2E[v][j] (5 or 6), midpoints m_j and
//                      cartesian primal normals n_j, phi(d) = exp(-(d / scale)^2), d the arc on
//                      the unit sphere:
//                        M_jk = (n_j . n_k) phi(d(m_j, m_k)),  b^u_j = phi(d(v, m_j)) (e_lon . n_j)
//                        M a^u = b^u, then a^u /= sum_j (e_lon . n_j) a^u_j   (likewise e_lat)
//                      (ICON4Py's _compute_rbf_interpolation_coeffs: a dense solve, no added
//                      diagonal term; the normalisation makes a uniform wind along e_lon exact)
//   nudgecoeff_e[e] = max_nudging_coefficient exp(-(r_e - 10) / (2 nudge_efold_width)) where
//                      0 < r_e <= 2 nudge_zone_width + 7, else 0; r_e = edge_refin_ctrl[e], on
//                      the edges from start_index(Edge, NUDGING_LEVEL_2) to the end, 0 before
//                      (ICON4Py's compute_nudgecoeffs with grf_nudge_start_e = 8 + 2 = 10, the
//                      refinement value of NUDGING_LEVEL_2, called on that domain); 0 everywhere
//                      on a global grid (every r_e is 0)
//   inverse_vertex_vertex_lengths of an edge with a missing far vertex (a lateral boundary): 0
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "diffusion/geometry.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion {

namespace {

using Vec = std::array<double, 3>;

double dot(const Vec& a, const Vec& b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
Vec cross(const Vec& a, const Vec& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
Vec at(const std::vector<double>& xyz, std::int64_t i) {
  return {xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2]};
}
// Arc between two points on the unit sphere (radians), accurate at small angles.
double arc(const Vec& a, const Vec& b) {
  const Vec c = cross(a, b);
  return std::atan2(std::sqrt(dot(c, c)), dot(a, b));
}
Vec east(double lat, double lon) {
  (void)lat;
  return {-std::sin(lon), std::cos(lon), 0.0};
}
Vec north(double lat, double lon) {
  return {-std::sin(lat) * std::cos(lon), -std::sin(lat) * std::sin(lon), std::cos(lat)};
}

// Solves the dense n x n system a x = b (n <= 6) by Gaussian elimination with partial pivoting;
// a and b are overwritten. Throws on an exactly singular matrix.
void solve(int n, std::array<double, 36>& a, std::array<double, 6>& b) {
  for (int k = 0; k < n; ++k) {
    int p = k;
    for (int i = k + 1; i < n; ++i)
      if (std::abs(a[6 * i + k]) > std::abs(a[6 * p + k])) p = i;
    if (a[6 * p + k] == 0.0)
      throw RuntimeError("interpolation_coefficients: a singular RBF matrix at a vertex");
    if (p != k) {
      for (int j = 0; j < n; ++j) std::swap(a[6 * k + j], a[6 * p + j]);
      std::swap(b[k], b[p]);
    }
    for (int i = k + 1; i < n; ++i) {
      const double f = a[6 * i + k] / a[6 * k + k];
      for (int j = k; j < n; ++j) a[6 * i + j] -= f * a[6 * k + j];
      b[i] -= f * b[k];
    }
  }
  for (int i = n - 1; i >= 0; --i) {
    double s = b[i];
    for (int j = i + 1; j < n; ++j) s -= a[6 * i + j] * b[j];
    b[i] = s / a[6 * i + i];
  }
}

}  // namespace

InterpolationCoefficients interpolation_coefficients(const Grid& g, const RbfOptions& rbf,
                                                     const NudgingOptions& nudging) {
  if (!(rbf.scale_factor > 0.0) || !std::isfinite(rbf.scale_factor))
    throw InvalidArgument(fmt::format(
        "interpolation_coefficients: rbf.scale_factor must be positive and finite, got {}",
        rbf.scale_factor));
  require(std::isfinite(nudging.max_nudging_coefficient) && nudging.max_nudging_coefficient >= 0,
          "nudging.max_nudging_coefficient", "a finite coefficient >= 0",
          fmt::format("{}", nudging.max_nudging_coefficient));
  require(std::isfinite(nudging.nudge_efold_width) && nudging.nudge_efold_width > 0,
          "nudging.nudge_efold_width", "a positive, finite width in rows",
          fmt::format("{}", nudging.nudge_efold_width));
  require(nudging.nudge_zone_width >= 1 && nudging.nudge_zone_width <= 1000,
          "nudging.nudge_zone_width", "a width of 1 to 1000 rows",
          fmt::format("{}", nudging.nudge_zone_width));
  if (g.num_cells <= 0 || g.vertex_edge_orientation.size() != 6 * std::size_t(g.num_vertices))
    throw InvalidArgument("interpolation_coefficients: grid is not a generated Grid");
  const std::int64_t nc = g.num_cells, ne = g.num_edges, nv = g.num_vertices;
  InterpolationCoefficients k;

  k.inverse_primal_edge_lengths.resize(ne);
  k.inverse_dual_edge_lengths.resize(ne);
  k.inverse_vertex_vertex_lengths.resize(ne);
  k.c_lin_e.resize(2 * ne);
  for (std::int64_t e = 0; e < ne; ++e) {
    k.inverse_primal_edge_lengths[e] = 1.0 / g.edge_length[e];
    k.inverse_dual_edge_lengths[e] = 1.0 / g.dual_edge_length[e];
    const std::int32_t far0 = g.e2c2v[4 * e + 2], far1 = g.e2c2v[4 * e + 3];
    k.inverse_vertex_vertex_lengths[e] =
        far0 < 0 || far1 < 0
            ? 0.0
            : 1.0 / (g.radius * arc(at(g.vertex_center, far0), at(g.vertex_center, far1)));
    const double c0 = g.edge_cell_length[2 * e + 1] / g.dual_edge_length[e];
    k.c_lin_e[2 * e] = c0;
    k.c_lin_e[2 * e + 1] = 1.0 - c0;
  }

  k.geofac_div.resize(3 * nc);
  for (std::int64_t c = 0; c < nc; ++c)
    for (int i = 0; i < 3; ++i) {
      const std::int32_t e = g.c2e[3 * c + i];
      k.geofac_div[3 * c + i] = g.edge_length[e] * g.edge_orientation[3 * c + i] / g.cell_area[c];
    }

  k.geofac_rot.assign(6 * nv, 0.0);
  for (std::int64_t v = 0; v < nv; ++v)
    for (int i = 0; i < 6; ++i) {
      const std::int32_t e = g.v2e[6 * v + i];
      if (e < 0) continue;
      k.geofac_rot[6 * v + i] =
          g.dual_edge_length[e] * g.vertex_edge_orientation[6 * v + i] / g.dual_area[v];
    }

  k.geofac_n2s.assign(4 * nc, 0.0);
  k.geofac_grg.assign(8 * nc, 0.0);
  for (std::int64_t c = 0; c < nc; ++c) {
    const Vec e_lon = east(g.cell_lat[c], g.cell_lon[c]);
    const Vec e_lat = north(g.cell_lat[c], g.cell_lon[c]);
    for (int i = 0; i < 3; ++i) {
      const std::int32_t e = g.c2e[3 * c + i];
      const std::int32_t nb = g.c2e2c[3 * c + i];
      const double f = k.geofac_div[3 * c + i] / g.dual_edge_length[e];
      // Own cell: -f where c is E2C[e][0], +f where it is E2C[e][1] (ICON4Py's two masks).
      const int own = g.e2c[2 * e] == c ? 0 : 1;
      k.geofac_n2s[4 * c] += own == 0 ? -f : f;
      k.geofac_n2s[4 * c + 1 + i] += g.e2c[2 * e] == nb ? -f : f;
      // ICON's primal_normal_cell: the cartesian normal in the cell's (zonal, meridional) frame,
      // normalised (ICON4Py's compute_zonal_and_meridional_components_on_cells).
      const Vec n = at(g.primal_cart_normal, e);
      double nu = dot(n, e_lon), nw = dot(n, e_lat);
      const double len = std::hypot(nu, nw);
      nu /= len, nw /= len;
      const double div = k.geofac_div[3 * c + i];
      const double w_own = k.c_lin_e[2 * e + own], w_nb = k.c_lin_e[2 * e + 1 - own];
      k.geofac_grg[8 * c + 0] += nu * div * w_own;
      k.geofac_grg[8 * c + 1] += nw * div * w_own;
      k.geofac_grg[8 * c + 2 * (1 + i)] += nu * div * w_nb;
      k.geofac_grg[8 * c + 2 * (1 + i) + 1] += nw * div * w_nb;
    }
  }

  k.e_bln_c_s.resize(3 * nc);
  for (std::int64_t c = 0; c < nc; ++c) {
    std::array<double, 3> ylat{}, xlon{};
    for (int i = 0; i < 3; ++i) {
      ylat[i] = g.edge_center_lat[g.c2e[3 * c + i]];
      xlon[i] = g.edge_center_lon[g.c2e[3 * c + i]];
    }
    const auto w = detail::weighting_factors(ylat, xlon, g.cell_lat[c], g.cell_lon[c], 0.0);
    for (int i = 0; i < 3; ++i) k.e_bln_c_s[3 * c + i] = w[i];
  }

  k.rbf_vec_coeff_v1.assign(6 * nv, 0.0);
  k.rbf_vec_coeff_v2.assign(6 * nv, 0.0);
  const double inv_scale = 1.0 / rbf.scale_factor;
  auto phi = [inv_scale](double d) { return std::exp(-(d * inv_scale) * (d * inv_scale)); };
  for (std::int64_t v = 0; v < nv; ++v) {
    int n = 0;
    std::array<Vec, 6> m{}, nrm{};
    for (int j = 0; j < 6; ++j) {
      const std::int32_t e = g.v2e[6 * v + j];
      if (e < 0) break;  // missing entries come last
      m[j] = at(g.edge_center, e), nrm[j] = at(g.primal_cart_normal, e), ++n;
    }
    const Vec p = at(g.vertex_center, v);
    const Vec dirs[2] = {east(g.vertex_lat[v], g.vertex_lon[v]),
                         north(g.vertex_lat[v], g.vertex_lon[v])};
    std::vector<double>* out[2] = {&k.rbf_vec_coeff_v1, &k.rbf_vec_coeff_v2};
    for (int comp = 0; comp < 2; ++comp) {
      std::array<double, 36> a{};
      std::array<double, 6> b{}, nx{};
      for (int j = 0; j < n; ++j) {
        for (int l = 0; l < n; ++l) a[6 * j + l] = dot(nrm[j], nrm[l]) * phi(arc(m[j], m[l]));
        nx[j] = dot(dirs[comp], nrm[j]);
        b[j] = phi(arc(p, m[j])) * nx[j];
      }
      solve(n, a, b);
      double s = 0;
      for (int j = 0; j < n; ++j) s += nx[j] * b[j];
      for (int j = 0; j < n; ++j) (*out[comp])[6 * v + j] = b[j] / s;
    }
  }

  // ICON4Py's grf_nudge_start_e: the refinement value of the edges' last nudging row (8 + 2).
  constexpr int kNudgeStartEdge = 10;
  k.nudgecoeff_e.assign(ne, 0.0);
  const std::int64_t nudge_limit = 2 * std::int64_t{nudging.nudge_zone_width} + kNudgeStartEdge - 3;
  if (static_cast<std::int64_t>(g.edge_refin_ctrl.size()) == ne)
    for (std::int64_t e = g.start_index(Dimension::Edge, Zone::NudgingLevel2); e < ne; ++e) {
      const std::int32_t r = g.edge_refin_ctrl[e];
      if (r > 0 && r <= nudge_limit)
        k.nudgecoeff_e[e] =
            nudging.max_nudging_coefficient *
            std::exp(-static_cast<double>(r - kNudgeStartEdge) / (2.0 * nudging.nudge_efold_width));
    }
  return k;
}

}  // namespace sciproxy::diffusion
