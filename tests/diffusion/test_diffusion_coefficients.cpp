// The interpolation coefficients of the diffusion granule (include/sciproxy/diffusion.hpp,
// src/diffusion/coefficients.cpp), checked by what they must do to analytic fields on R2B3 and
// R2B4: divergence, curl, nabla2, gradient, bilinear averaging and RBF reconstruction, with the
// error measured on both grids so that it must fall with resolution. The measured errors are
// printed; the bounds sit a little above them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sciproxy/core/error.hpp"
#include "sciproxy/diffusion.hpp"

namespace dif = sciproxy::diffusion;

namespace {

using Vec = std::array<double, 3>;
Vec at(const std::vector<double>& xyz, std::int64_t i) {
  return {xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2]};
}
double dot(const Vec& a, const Vec& b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
Vec cross(const Vec& a, const Vec& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
Vec east(double lon) {
  return {-std::sin(lon), std::cos(lon), 0.0};
}
Vec north(double lat, double lon) {
  return {-std::sin(lat) * std::cos(lon), -std::sin(lat) * std::sin(lon), std::cos(lat)};
}

// A tilted rotation axis and a tilted linear function, so that no symmetry of the grid helps.
const Vec kAxis = [] {
  const Vec a = {0.3, -0.4, 0.866};
  const double s = std::sqrt(dot(a, a));
  return Vec{a[0] / s, a[1] / s, a[2] / s};
}();
const Vec kG = {0.7, -0.2, 0.5};
constexpr double kU = 20.0;  // m/s, the solid-body wind's equatorial speed

struct Case {
  dif::Grid grid;
  dif::InterpolationCoefficients coef;
};
const Case& grid_case(int k) {  // R2Bk
  static Case b3{dif::icosahedral_grid(2, 3), {}}, b4{dif::icosahedral_grid(2, 4), {}};
  Case& c = k == 3 ? b3 : b4;
  if (c.coef.geofac_div.empty()) c.coef = dif::interpolation_coefficients(c.grid);
  return c;
}

// Solid-body wind U (axis x p) at the edge midpoints, as normal components.
std::vector<double> solid_body_vn(const dif::Grid& g) {
  std::vector<double> vn(g.num_edges);
  for (std::int64_t e = 0; e < g.num_edges; ++e)
    vn[e] = kU * dot(at(g.primal_cart_normal, e), cross(kAxis, at(g.edge_center, e)));
  return vn;
}

std::vector<double> divergence(const Case& c, const std::vector<double>& vn) {
  std::vector<double> d(c.grid.num_cells, 0.0);
  for (std::int64_t i = 0; i < c.grid.num_cells; ++i)
    for (int j = 0; j < 3; ++j) d[i] += c.coef.geofac_div[3 * i + j] * vn[c.grid.c2e[3 * i + j]];
  return d;
}

struct Err {
  double max = 0, rms = 0, median = 0;
};
// max, rms (unweighted) and median of |a - b|, over max |b|.
Err rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  double e2 = 0, bmax = 0;
  std::vector<double> e(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    e[i] = std::abs(a[i] - b[i]);
    e2 += e[i] * e[i];
    bmax = std::max(bmax, std::abs(b[i]));
  }
  std::sort(e.begin(), e.end());
  return {e.back() / bmax, std::sqrt(e2 / a.size()) / bmax, e[e.size() / 2] / bmax};
}

void report(const char* what, const Err& b3, const Err& b4) {
  fmt::print(
      "{}: R2B3 max {:.3e} rms {:.3e} median {:.3e} | R2B4 max {:.3e} rms {:.3e} median "
      "{:.3e} | R2B3/R2B4 max {:.2f} rms {:.2f} median {:.2f}\n",
      what, b3.max, b3.rms, b3.median, b4.max, b4.rms, b4.median, b3.max / b4.max, b3.rms / b4.rms,
      b3.median / b4.median);
}

}  // namespace

TEST(DiffusionCoefficients, ShapesAndFiniteValues) {
  for (int k : {3, 4}) {
    const auto& [g, c] = grid_case(k);
    const std::size_t nc = g.num_cells, ne = g.num_edges, nv = g.num_vertices;
    EXPECT_EQ(c.geofac_div.size(), 3 * nc);
    EXPECT_EQ(c.geofac_rot.size(), 6 * nv);
    EXPECT_EQ(c.geofac_n2s.size(), 4 * nc);
    EXPECT_EQ(c.geofac_grg.size(), 8 * nc);
    EXPECT_EQ(c.c_lin_e.size(), 2 * ne);
    EXPECT_EQ(c.e_bln_c_s.size(), 3 * nc);
    EXPECT_EQ(c.inverse_primal_edge_lengths.size(), ne);
    EXPECT_EQ(c.inverse_dual_edge_lengths.size(), ne);
    EXPECT_EQ(c.inverse_vertex_vertex_lengths.size(), ne);
    EXPECT_EQ(c.rbf_vec_coeff_v1.size(), 6 * nv);
    EXPECT_EQ(c.rbf_vec_coeff_v2.size(), 6 * nv);
    EXPECT_EQ(c.nudgecoeff_e.size(), ne);
    for (const auto* f :
         {&c.geofac_div, &c.geofac_rot, &c.geofac_n2s, &c.geofac_grg, &c.c_lin_e, &c.e_bln_c_s,
          &c.inverse_primal_edge_lengths, &c.inverse_dual_edge_lengths,
          &c.inverse_vertex_vertex_lengths, &c.rbf_vec_coeff_v1, &c.rbf_vec_coeff_v2})
      for (double x : *f) ASSERT_TRUE(std::isfinite(x));
    for (double x : c.nudgecoeff_e) ASSERT_EQ(x, 0.0);
    // Pentagons: the missing 6th entry is 0; everything else non-zero.
    int pentagons = 0;
    for (std::size_t v = 0; v < nv; ++v) {
      const bool pent = g.v2e[6 * v + 5] < 0;
      pentagons += pent;
      for (int i = 0; i < 6; ++i) {
        const bool missing = pent && i == 5;
        EXPECT_EQ(c.geofac_rot[6 * v + i] == 0.0, missing);
        EXPECT_EQ(c.rbf_vec_coeff_v1[6 * v + i] == 0.0 && c.rbf_vec_coeff_v2[6 * v + i] == 0.0,
                  missing);
      }
    }
    EXPECT_EQ(pentagons, 12);
    // Positive lengths, and the inverse lengths really are inverses.
    for (std::size_t e = 0; e < ne; ++e) {
      ASSERT_NEAR(c.inverse_primal_edge_lengths[e] * g.edge_length[e], 1.0, 1e-14);
      ASSERT_NEAR(c.inverse_dual_edge_lengths[e] * g.dual_edge_length[e], 1.0, 1e-14);
      // The diamond's far vertices are about sqrt(3) edge lengths apart.
      const double r = 1.0 / (c.inverse_vertex_vertex_lengths[e] * g.edge_length[e]);
      ASSERT_GT(r, 1.3);
      ASSERT_LT(r, 2.0);
      ASSERT_GT(c.c_lin_e[2 * e], 0.0);
      ASSERT_GT(c.c_lin_e[2 * e + 1], 0.0);
    }
  }
}

TEST(DiffusionCoefficients, VertexEdgeOrientationFollowsTangents) {
  // ICON's definition: +1 where the tangent points from the vertex along the edge.
  const auto& g = grid_case(3).grid;
  for (std::int64_t v = 0; v < g.num_vertices; ++v)
    for (int i = 0; i < 6; ++i) {
      const std::int32_t e = g.v2e[6 * v + i];
      if (e < 0) {
        ASSERT_EQ(g.vertex_edge_orientation[6 * v + i], 0);
        continue;
      }
      const int away = g.e2v[2 * e] == v ? 1 : -1;
      ASSERT_EQ(g.vertex_edge_orientation[6 * v + i], away * g.tangent_orientation[e]);
    }
}

TEST(DiffusionCoefficients, DivergenceOfSolidBodyRotationVanishesAndOfGradientConverges) {
  std::array<Err, 2> rot{}, grad{};
  for (int k : {3, 4}) {
    const Case& c = grid_case(k);
    const auto& g = c.grid;
    const double R = g.radius;
    // Solid body: non-divergent; measured against the vorticity scale U / R.
    const auto d = divergence(c, solid_body_vn(g));
    double dmax = 0;
    for (double x : d) dmax = std::max(dmax, std::abs(x));
    rot[k - 3].max = dmax * R / kU;
    // v = grad (g . p) (p on the unit sphere, times R): vn = n . g / R, div = -2 (g . p) / R^2.
    std::vector<double> vn(g.num_edges), exact(g.num_cells);
    for (std::int64_t e = 0; e < g.num_edges; ++e) vn[e] = dot(at(g.primal_cart_normal, e), kG) / R;
    for (std::int64_t i = 0; i < g.num_cells; ++i)
      exact[i] = -2.0 * dot(kG, at(g.cell_center, i)) / (R * R);
    grad[k - 3] = rel_error(divergence(c, vn), exact);
  }
  fmt::print("div solid body: max |div| R / U: R2B3 {:.3e} R2B4 {:.3e}\n", rot[0].max, rot[1].max);
  report("div of grad(g.p)", grad[0], grad[1]);
  // Measured: solid body 2.7e-3 -> 1.3e-3; div grad(g.p) max 5.3e-3 -> 2.7e-3, rms 2.0e-3 ->
  // 1.0e-3: first order (ratio 2), not 4: ICON's triangle divergence at circumcentres is first
  // order on these (not spring-optimised) grids.
  EXPECT_LT(rot[0].max, 4e-3);
  EXPECT_LT(rot[1].max, rot[0].max / 1.8);
  EXPECT_LT(grad[1].rms, grad[0].rms / 1.8);
  EXPECT_LT(grad[1].max, grad[0].max / 1.8);
  EXPECT_LT(grad[1].max, 4e-3);
}

TEST(DiffusionCoefficients, LaplacianOfConstantIsZeroAndOfSphericalHarmonicConverges) {
  std::array<Err, 2> err{};
  for (int k : {3, 4}) {
    const Case& c = grid_case(k);
    const auto& g = c.grid;
    const double R = g.radius;
    std::vector<double> psi(g.num_cells), exact(g.num_cells), lap(g.num_cells, 0.0);
    for (std::int64_t i = 0; i < g.num_cells; ++i) {
      // Constant: every row of geofac_n2s sums to 0.
      double sum = 0, scale = 0;
      for (int j = 0; j < 4; ++j) sum += c.coef.geofac_n2s[4 * i + j];
      for (int j = 0; j < 4; ++j) scale += std::abs(c.coef.geofac_n2s[4 * i + j]);
      ASSERT_LE(std::abs(sum), 1e-12 * scale);
      // Y_2^1 (real): x z on the unit sphere, eigenvalue -l(l+1) / R^2 = -6 / R^2.
      const Vec p = at(g.cell_center, i);
      psi[i] = p[0] * p[2];
      exact[i] = -6.0 * psi[i] / (R * R);
    }
    for (std::int64_t i = 0; i < g.num_cells; ++i)
      for (int j = 0; j < 4; ++j) lap[i] += c.coef.geofac_n2s[4 * i + j] * psi[g.c2e2co[4 * i + j]];
    err[k - 3] = rel_error(lap, exact);
  }
  report("nabla2 Y_2^1", err[0], err[1]);
  // Measured (R2B3 .. R2B6): median 5.8e-3, 2.5e-3, 1.1e-3, 5.0e-4 (first order); rms 1.8e-2,
  // 1.2e-2, 8.7e-3, 6.1e-3 (order 1/2); max 0.115 on every grid, at a fixed place on the sphere:
  // the triangle nabla2 is not consistent in the max norm along lines where this grid's cell
  // shape jumps (ICON's grids are spring-optimised to soften them; ours are not).
  EXPECT_LT(err[1].median, err[0].median / 1.8);
  EXPECT_LT(err[1].rms, err[0].rms / 1.3);
  EXPECT_LT(err[1].max, 0.13);
}

TEST(DiffusionCoefficients, Nabla2IsTheDivergenceOfTheEdgeGradient) {
  // geofac_n2s must equal div(grad): sum_i geofac_div[c][i] (psi(E2C[e][1]) - psi(E2C[e][0])) /
  // l'_e for any psi (this pins down the E2C masks of ICON4Py's compute_geofac_n2s).
  const Case& c = grid_case(3);
  const auto& g = c.grid;
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> psi(g.num_cells), vn(g.num_edges);
  for (auto& x : psi) x = u(rng);
  for (std::int64_t e = 0; e < g.num_edges; ++e)
    vn[e] = (psi[g.e2c[2 * e + 1]] - psi[g.e2c[2 * e]]) / g.dual_edge_length[e];
  const auto div = divergence(c, vn);
  for (std::int64_t i = 0; i < g.num_cells; ++i) {
    double lap = 0, scale = 0;
    for (int j = 0; j < 4; ++j) {
      lap += c.coef.geofac_n2s[4 * i + j] * psi[g.c2e2co[4 * i + j]];
      scale += std::abs(c.coef.geofac_n2s[4 * i + j] * psi[g.c2e2co[4 * i + j]]);
    }
    ASSERT_LE(std::abs(lap - div[i]), 1e-13 * scale);
  }
}

TEST(DiffusionCoefficients, GradientOfLinearFunction) {
  std::array<Err, 2> err{};
  for (int k : {3, 4}) {
    const Case& c = grid_case(k);
    const auto& g = c.grid;
    const double R = g.radius;
    // psi = g . p, whose surface gradient at p is (g . e_lon, g . e_lat) / R.
    std::vector<double> psi(g.num_cells), num, exact;
    for (std::int64_t i = 0; i < g.num_cells; ++i) psi[i] = dot(kG, at(g.cell_center, i));
    for (std::int64_t i = 0; i < g.num_cells; ++i) {
      double gx = 0, gy = 0;
      for (int j = 0; j < 4; ++j) {
        gx += c.coef.geofac_grg[8 * i + 2 * j] * psi[g.c2e2co[4 * i + j]];
        gy += c.coef.geofac_grg[8 * i + 2 * j + 1] * psi[g.c2e2co[4 * i + j]];
      }
      num.push_back(gx), num.push_back(gy);
      exact.push_back(dot(kG, east(g.cell_lon[i])) / R);
      exact.push_back(dot(kG, north(g.cell_lat[i], g.cell_lon[i])) / R);
    }
    err[k - 3] = rel_error(num, exact);
  }
  report("grad (g.p)", err[0], err[1]);
  // Measured: max 1.8e-2 -> 9.1e-3, rms 5.0e-3 -> 2.5e-3: first order.
  EXPECT_LT(err[1].max, err[0].max / 1.8);
  EXPECT_LT(err[1].max, 1.2e-2);
}

TEST(DiffusionCoefficients, CurlOfGradientIsZeroAndOfSolidBodyIsTwiceTheRotation) {
  std::array<Err, 2> err{};
  for (int k : {3, 4}) {
    const Case& c = grid_case(k);
    const auto& g = c.grid;
    // A discrete gradient of random cell values: its curl telescopes to 0 around every vertex.
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<double> psi(g.num_cells), vn(g.num_edges);
    for (auto& x : psi) x = u(rng);
    for (std::int64_t e = 0; e < g.num_edges; ++e)
      vn[e] = (psi[g.e2c[2 * e + 1]] - psi[g.e2c[2 * e]]) / g.dual_edge_length[e];
    for (std::int64_t v = 0; v < g.num_vertices; ++v) {
      double rot = 0, scale = 0;
      for (int i = 0; i < 6; ++i) {
        const std::int32_t e = g.v2e[6 * v + i];
        if (e < 0) continue;
        rot += c.coef.geofac_rot[6 * v + i] * vn[e];
        scale += std::abs(c.coef.geofac_rot[6 * v + i] * vn[e]);
      }
      ASSERT_LE(std::abs(rot), 1e-12 * scale);
    }
    // Solid body U (axis x p): relative vorticity 2 U (axis . p) / R (sign checks orientation).
    const auto sb = solid_body_vn(g);
    std::vector<double> num(g.num_vertices, 0.0), exact(g.num_vertices);
    for (std::int64_t v = 0; v < g.num_vertices; ++v) {
      for (int i = 0; i < 6; ++i)
        if (g.v2e[6 * v + i] >= 0) num[v] += c.coef.geofac_rot[6 * v + i] * sb[g.v2e[6 * v + i]];
      exact[v] = 2.0 * kU * dot(kAxis, at(g.vertex_center, v)) / g.radius;
    }
    err[k - 3] = rel_error(num, exact);
  }
  report("rot solid body", err[0], err[1]);
  // Measured: max 2.6e-3 -> 1.3e-3, rms 7.5e-4 -> 2.7e-4.
  EXPECT_LT(err[1].max, err[0].max / 1.8);
  EXPECT_LT(err[1].max, 2e-3);
}

TEST(DiffusionCoefficients, BilinearEdgeToCellWeights) {
  std::array<Err, 2> err{};
  for (int k : {3, 4}) {
    const Case& c = grid_case(k);
    const auto& g = c.grid;
    std::vector<double> num(g.num_cells), exact(g.num_cells);
    for (std::int64_t i = 0; i < g.num_cells; ++i) {
      double sum = 0;
      for (int j = 0; j < 3; ++j) {
        const double w = c.coef.e_bln_c_s[3 * i + j];
        sum += w;
        // Near 1/3 each (0.47 to 0.53 at the extremes of these grids).
        ASSERT_GT(w, 0.1);
        ASSERT_LT(w, 0.6);
        num[i] += w * dot(kG, at(g.edge_center, g.c2e[3 * i + j]));
      }
      ASSERT_NEAR(sum, 1.0, 1e-12);
      exact[i] = dot(kG, at(g.cell_center, i));
    }
    err[k - 3] = rel_error(num, exact);
  }
  report("e_bln_c_s on g.p", err[0], err[1]);
  // Measured, relative to max |g.p|: max 2.7e-4 -> 6.8e-5: second order.
  EXPECT_LT(err[1].max, err[0].max / 3.5);
  EXPECT_LT(err[1].max, 1e-4);
}

TEST(DiffusionCoefficients, RbfReconstructsSolidBodyWindAtVertices) {
  std::array<Err, 2> err{};
  for (int k : {3, 4}) {
    const Case& c = grid_case(k);
    const auto& g = c.grid;
    const auto vn = solid_body_vn(g);
    std::vector<double> num, exact;
    for (std::int64_t v = 0; v < g.num_vertices; ++v) {
      double u = 0, w = 0;
      for (int i = 0; i < 6; ++i) {
        const std::int32_t e = g.v2e[6 * v + i];
        if (e < 0) continue;
        u += c.coef.rbf_vec_coeff_v1[6 * v + i] * vn[e];
        w += c.coef.rbf_vec_coeff_v2[6 * v + i] * vn[e];
      }
      const Vec wind = cross(kAxis, at(g.vertex_center, v));
      num.push_back(u), num.push_back(w);
      exact.push_back(kU * dot(wind, east(g.vertex_lon[v])));
      exact.push_back(kU * dot(wind, north(g.vertex_lat[v], g.vertex_lon[v])));
    }
    err[k - 3] = rel_error(num, exact);
  }
  report("rbf solid body at vertices", err[0], err[1]);
  // Measured, relative to U: max 8.0e-4 -> 2.0e-4, rms 4.2e-4 -> 1.0e-4: second order (ratio 4).
  EXPECT_LT(err[1].max, err[0].max / 3.5);
  EXPECT_LT(err[1].max, 3e-4);
}

TEST(DiffusionCoefficients, BadArgumentsAreRefused) {
  const auto& g = grid_case(3).grid;
  EXPECT_THROW(dif::interpolation_coefficients(g, {0.0}), sciproxy::InvalidArgument);
  EXPECT_THROW(dif::interpolation_coefficients(g, {-1.0}), sciproxy::InvalidArgument);
  EXPECT_THROW(dif::interpolation_coefficients(dif::Grid{}), sciproxy::InvalidArgument);
}
