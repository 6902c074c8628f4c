// The generated icosahedral grids RnBk: counts, the consistency of every table, and the geometry
// on the sphere (areas that tile it, Gauss's theorem, normals, lengths), as
// include/sciproxy/diffusion.hpp documents them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "diffusion/grid_checks.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/diffusion.hpp"

namespace dif = sciproxy::diffusion;

namespace {

const double kPi = std::acos(-1.0);

using Vec = std::array<double, 3>;
Vec at(const std::vector<double>& xyz, std::int64_t i) {
  return {xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2]};
}
double dot(const Vec& a, const Vec& b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

int degree(const dif::Grid& g, std::int64_t v) {
  return g.v2c[6 * v + 5] < 0 ? 5 : 6;
}

// The grids most tests run on: the smallest, one with a root division of 3, and R2B4.
struct Shape {
  int n, k;
};
const Shape kShapes[] = {{1, 0}, {2, 0}, {3, 1}, {2, 4}};

class GridTest : public ::testing::TestWithParam<Shape> {
 protected:
  const dif::Grid& grid() {
    static std::map<std::pair<int, int>, dif::Grid> cache;
    const auto key = std::make_pair(GetParam().n, GetParam().k);
    auto it = cache.find(key);
    if (it == cache.end())
      it = cache.emplace(key, dif::icosahedral_grid(key.first, key.second)).first;
    return it->second;
  }
};

std::string name(const ::testing::TestParamInfo<Shape>& info) {
  return fmt::format("R{}B{}", info.param.n, info.param.k);
}

}  // namespace

TEST(DiffusionGrid, CountsOfRnBk) {
  for (int n = 1; n <= 5; ++n)
    for (int k = 0; k <= 4 - (n > 2); ++k) {
      const dif::Grid g = dif::icosahedral_grid(n, k);
      const std::int64_t f = std::int64_t{n} * n << (2 * k);
      SCOPED_TRACE(fmt::format("R{}B{}", n, k));
      EXPECT_EQ(g.num_cells, 20 * f);
      EXPECT_EQ(g.num_edges, 30 * f);
      EXPECT_EQ(g.num_vertices, 10 * f + 2);
      EXPECT_EQ(g.num_vertices - g.num_edges + g.num_cells, 2);  // Euler
      EXPECT_EQ(g.c2e.size(), 3u * g.num_cells);
      EXPECT_EQ(g.e2c2v.size(), 4u * g.num_edges);
      EXPECT_EQ(g.v2e.size(), 6u * g.num_vertices);
    }
  const dif::Grid r2b4 = dif::icosahedral_grid(2, 4);
  EXPECT_EQ(r2b4.num_cells, 20480);
  EXPECT_EQ(r2b4.num_edges, 30720);
  EXPECT_EQ(r2b4.num_vertices, 10242);
}

TEST_P(GridTest, EveryEdgeInTwoCellsAndEveryCellHasThreeDistinctEdges) {
  const dif::Grid& g = grid();
  std::vector<int> uses(g.num_edges, 0);
  for (std::int64_t c = 0; c < g.num_cells; ++c) {
    std::set<int> edges, vertices;
    for (int i = 0; i < 3; ++i) {
      ASSERT_GE(g.c2e[3 * c + i], 0);
      ASSERT_LT(g.c2e[3 * c + i], g.num_edges);
      ++uses[g.c2e[3 * c + i]];
      edges.insert(g.c2e[3 * c + i]);
      vertices.insert(g.c2v[3 * c + i]);
    }
    EXPECT_EQ(edges.size(), 3u) << "cell " << c;
    EXPECT_EQ(vertices.size(), 3u) << "cell " << c;
  }
  for (std::int64_t e = 0; e < g.num_edges; ++e) ASSERT_EQ(uses[e], 2) << "edge " << e;
}

TEST_P(GridTest, TablesAreConsistent) {
  const dif::Grid& g = grid();
  for (std::int64_t c = 0; c < g.num_cells; ++c)
    for (int i = 0; i < 3; ++i) {
      const std::int32_t e = g.c2e[3 * c + i];
      // C2E / E2C inverse.
      ASSERT_TRUE(g.e2c[2 * e] == c || g.e2c[2 * e + 1] == c);
      // Edge i joins the cell's vertices i+1 and i+2.
      const std::set<int> ends = {g.c2v[3 * c + (i + 1) % 3], g.c2v[3 * c + (i + 2) % 3]};
      ASSERT_EQ(ends, (std::set<int>{g.e2v[2 * e], g.e2v[2 * e + 1]}));
      // C2E2C is the other cell of the edge, and symmetric; C2E2CO is the cell then C2E2C.
      const std::int32_t nb = g.c2e2c[3 * c + i];
      ASSERT_EQ(nb, g.e2c[2 * e] == c ? g.e2c[2 * e + 1] : g.e2c[2 * e]);
      ASSERT_NE(nb, c);
      const auto* back = &g.c2e2c[3 * std::int64_t{nb}];
      ASSERT_NE(std::find(back, back + 3, c), back + 3);
      ASSERT_EQ(g.c2e2co[4 * c], c);
      ASSERT_EQ(g.c2e2co[4 * c + 1 + i], nb);
      // C2V / V2C.
      const std::int32_t v = g.c2v[3 * c + i];
      const auto* around = &g.v2c[6 * std::int64_t{v}];
      ASSERT_NE(std::find(around, around + 6, c), around + 6);
    }
  for (std::int64_t e = 0; e < g.num_edges; ++e) {
    ASSERT_LT(g.e2v[2 * e], g.e2v[2 * e + 1]);
    ASSERT_LT(g.e2c[2 * e], g.e2c[2 * e + 1]);
    for (int j = 0; j < 2; ++j) {
      // E2V / V2E inverse; E2C / C2E inverse.
      const auto* around = &g.v2e[6 * std::int64_t{g.e2v[2 * e + j]}];
      ASSERT_NE(std::find(around, around + 6, e), around + 6);
      const auto* sides = &g.c2e[3 * std::int64_t{g.e2c[2 * e + j]}];
      ASSERT_NE(std::find(sides, sides + 3, e), sides + 3);
      // E2C2V: the edge's vertices, then each cell's third vertex.
      ASSERT_EQ(g.e2c2v[4 * e + j], g.e2v[2 * e + j]);
      const std::int32_t c = g.e2c[2 * e + j], far = g.e2c2v[4 * e + 2 + j];
      const auto* corners = &g.c2v[3 * std::int64_t{c}];
      ASSERT_NE(std::find(corners, corners + 3, far), corners + 3);
      ASSERT_NE(far, g.e2v[2 * e]);
      ASSERT_NE(far, g.e2v[2 * e + 1]);
    }
    EXPECT_EQ(dif::e2ecv(e, 3), 4 * e + 3);
  }
  EXPECT_EQ(dif::c2ce(7, 2), 23);
  // Around a vertex: each V2E edge touches the vertex and lies between V2C[i-1] and V2C[i];
  // each V2C cell has the vertex as a corner.
  for (std::int64_t v = 0; v < g.num_vertices; ++v) {
    const int d = degree(g, v);
    for (int i = 0; i < d; ++i) {
      const std::int32_t e = g.v2e[6 * v + i];
      ASSERT_TRUE(g.e2v[2 * e] == v || g.e2v[2 * e + 1] == v);
      const std::set<int> cells = {g.v2c[6 * v + (i + d - 1) % d], g.v2c[6 * v + i]};
      ASSERT_EQ(cells, (std::set<int>{g.e2c[2 * e], g.e2c[2 * e + 1]})) << "vertex " << v;
      const auto* corners = &g.c2v[3 * std::int64_t{g.v2c[6 * v + i]}];
      ASSERT_NE(std::find(corners, corners + 3, v), corners + 3);
    }
    for (int i = d; i < 6; ++i) {
      ASSERT_EQ(g.v2c[6 * v + i], -1);
      ASSERT_EQ(g.v2e[6 * v + i], -1);
    }
  }
}

TEST_P(GridTest, TwelvePentagons) {
  const dif::Grid& g = grid();
  int pentagons = 0;
  for (std::int64_t v = 0; v < g.num_vertices; ++v) pentagons += degree(g, v) == 5;
  EXPECT_EQ(pentagons, 12);
  // The poles are pentagons.
  EXPECT_EQ(degree(g, 0), 5);
  EXPECT_DOUBLE_EQ(g.vertex_lat[0], kPi / 2);
}

TEST_P(GridTest, AreasTileTheSphere) {
  const dif::Grid& g = grid();
  const double sphere = 4 * kPi * g.radius * g.radius;
  const double cells = std::accumulate(g.cell_area.begin(), g.cell_area.end(), 0.0);
  const double duals = std::accumulate(g.dual_area.begin(), g.dual_area.end(), 0.0);
  EXPECT_NEAR(cells / sphere - 1, 0.0, 1e-12);
  EXPECT_NEAR(duals / sphere - 1, 0.0, 1e-12);
  for (double a : g.cell_area) ASSERT_GT(a, 0);
  for (double a : g.dual_area) ASSERT_GT(a, 0);
  std::printf("R%dB%d: cell areas sum to 4 pi r^2 (1 %+.2e), dual areas (1 %+.2e)\n", GetParam().n,
              GetParam().k, cells / sphere - 1, duals / sphere - 1);
}

TEST_P(GridTest, OrientationsAreConsistent) {
  const dif::Grid& g = grid();
  std::vector<int> sum(g.num_edges, 0);
  for (std::int64_t c = 0; c < g.num_cells; ++c)
    for (int i = 0; i < 3; ++i) {
      const int o = g.edge_orientation[3 * c + i];
      const std::int32_t e = g.c2e[3 * c + i];
      ASSERT_TRUE(o == 1 || o == -1);
      sum[e] += o;
      if (o == 1) {
        ASSERT_EQ(g.e2c[2 * e], c) << "the normal leaves E2C[0]";
      }
    }
  for (std::int64_t e = 0; e < g.num_edges; ++e) ASSERT_EQ(sum[e], 0) << "edge " << e;
  // tangent_orientation: both signs occur (E2V and E2C are ordered by index, not geometry), and
  // each agrees with the tangent's direction.
  int positive = 0;
  for (std::int64_t e = 0; e < g.num_edges; ++e) {
    const Vec d = {at(g.vertex_center, g.e2v[2 * e + 1])[0] - at(g.vertex_center, g.e2v[2 * e])[0],
                   at(g.vertex_center, g.e2v[2 * e + 1])[1] - at(g.vertex_center, g.e2v[2 * e])[1],
                   at(g.vertex_center, g.e2v[2 * e + 1])[2] - at(g.vertex_center, g.e2v[2 * e])[2]};
    ASSERT_GT(g.tangent_orientation[e] * dot(at(g.dual_cart_normal, e), d), 0);
    positive += g.tangent_orientation[e] == 1;
  }
  if (g.num_edges > 30) {
    EXPECT_GT(positive, 0);
    EXPECT_LT(positive, g.num_edges);
  }
}

// Gauss on the discrete sphere: sum_c sum_e orientation * edge_length * u_e = 0 for any u, since
// every edge is counted once with each sign.
TEST_P(GridTest, DiscreteDivergenceTheorem) {
  const dif::Grid& g = grid();
  EXPECT_LE(grid_checks::divergence_theorem_residual(g), 1e-12);
}

TEST_P(GridTest, NormalsAndTangents) {
  const dif::Grid& g = grid();
  for (std::int64_t e = 0; e < g.num_edges; ++e) {
    const Vec n = at(g.primal_cart_normal, e), t = at(g.dual_cart_normal, e),
              r = at(g.edge_center, e);
    ASSERT_NEAR(dot(n, n), 1.0, 1e-14);
    ASSERT_NEAR(dot(t, t), 1.0, 1e-14);
    ASSERT_NEAR(dot(r, r), 1.0, 1e-14);
    ASSERT_NEAR(dot(n, t), 0.0, 1e-14);
    ASSERT_NEAR(dot(n, r), 0.0, 1e-14);
    ASSERT_NEAR(dot(t, r), 0.0, 1e-14);
    // n = r x t (ICON4Py's edge_primal_normal).
    const Vec rxt = {r[1] * t[2] - r[2] * t[1], r[2] * t[0] - r[0] * t[2],
                     r[0] * t[1] - r[1] * t[0]};
    ASSERT_NEAR(dot(rxt, n), 1.0, 1e-14);
    // The local components are the same unit vectors.
    ASSERT_NEAR(std::hypot(g.primal_normal_x[e], g.primal_normal_y[e]), 1.0, 1e-14);
    ASSERT_NEAR(std::hypot(g.dual_normal_x[e], g.dual_normal_y[e]), 1.0, 1e-14);
    ASSERT_NEAR(
        g.primal_normal_x[e] * g.dual_normal_x[e] + g.primal_normal_y[e] * g.dual_normal_y[e], 0.0,
        1e-14);
    // The normal is orthogonal to the primal edge and along the dual edge (cell 0 -> cell 1).
    const Vec v0 = at(g.vertex_center, g.e2v[2 * e]), v1 = at(g.vertex_center, g.e2v[2 * e + 1]);
    const Vec c0 = at(g.cell_center, g.e2c[2 * e]), c1 = at(g.cell_center, g.e2c[2 * e + 1]);
    const Vec dv = {v1[0] - v0[0], v1[1] - v0[1], v1[2] - v0[2]};
    const Vec dc = {c1[0] - c0[0], c1[1] - c0[1], c1[2] - c0[2]};
    ASSERT_NEAR(dot(n, dv) / std::sqrt(dot(dv, dv)), 0.0, 1e-12);
    // Along the dual edge: in the plane of the great circle through both cell centres, pointing
    // from E2C[0] to E2C[1].
    const Vec plane = {c0[1] * c1[2] - c0[2] * c1[1], c0[2] * c1[0] - c0[0] * c1[2],
                       c0[0] * c1[1] - c0[1] * c1[0]};
    ASSERT_NEAR(dot(n, plane) / std::sqrt(dot(plane, plane)), 0.0, 1e-12);
    ASSERT_GT(dot(n, dc), 0);
  }
}

TEST_P(GridTest, LengthsAndDistances) {
  const dif::Grid& g = grid();
  for (std::int64_t e = 0; e < g.num_edges; ++e) {
    const double l = g.edge_length[e], d = g.dual_edge_length[e];
    ASSERT_GT(l, 0);
    ASSERT_GT(d, 0);
    // The circumcentres lie on the edge's perpendicular bisector: the dual edge passes through
    // the edge midpoint, split into the two edge-cell distances; the midpoint halves the edge.
    ASSERT_NEAR((g.edge_cell_length[2 * e] + g.edge_cell_length[2 * e + 1]) / d, 1.0, 1e-12);
    ASSERT_NEAR(g.edge_vert_length[2 * e] / l, 0.5, 1e-12);
    ASSERT_NEAR(g.edge_vert_length[2 * e + 1] / l, 0.5, 1e-12);
    // Every cell centre is equidistant from its three vertices.
  }
  for (std::int64_t c = 0; c < g.num_cells; ++c) {
    const Vec centre = at(g.cell_center, c);
    const double d0 = dot(centre, at(g.vertex_center, g.c2v[3 * c]));
    for (int i = 1; i < 3; ++i)
      ASSERT_NEAR(dot(centre, at(g.vertex_center, g.c2v[3 * c + i])), d0, 1e-14);
    ASSERT_NEAR(std::sin(g.cell_lat[c]), centre[2], 1e-14);
  }
}

TEST_P(GridTest, AreaRatioWithinIconsRange) {
  const dif::Grid& g = grid();
  const auto [lo, hi] = std::minmax_element(g.cell_area.begin(), g.cell_area.end());
  const auto [dlo, dhi] = std::minmax_element(g.dual_area.begin(), g.dual_area.end());
  std::printf("R%dB%d: cell area max/min %.4f, dual area max/min %.4f, mean edge %.1f km\n",
              GetParam().n, GetParam().k, *hi / *lo, *dhi / *dlo,
              std::accumulate(g.edge_length.begin(), g.edge_length.end(), 0.0) / g.num_edges / 1e3);
  EXPECT_LT(*hi / *lo, 1.5);
  EXPECT_LT(*dhi / *dlo, 1.5);
}

INSTANTIATE_TEST_SUITE_P(RnBk, GridTest, ::testing::ValuesIn(kShapes), name);

TEST(DiffusionGrid, R2B4RadiusAndTime) {
  const auto t0 = std::chrono::steady_clock::now();
  const dif::Grid g = dif::icosahedral_grid(2, 4);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("R2B4: generated in %.3f s\n", seconds);
  EXPECT_EQ(g.radius, dif::kEarthRadius);
  // R2B4's nominal resolution, the square root of the mean cell area: about 158 km (ICON's
  // "160 km" grid); its mean edge is about 240 km.
  const double mean_area =
      std::accumulate(g.cell_area.begin(), g.cell_area.end(), 0.0) / g.num_cells;
  EXPECT_NEAR(std::sqrt(mean_area), 157.8e3, 0.5e3);
  const auto t1 = std::chrono::steady_clock::now();
  const dif::Grid r2b6 = dif::icosahedral_grid(2, 6);
  std::printf("R2B6: %d cells generated in %.3f s\n", r2b6.num_cells,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
  EXPECT_EQ(r2b6.num_cells, 327680);
  const dif::Grid unit = dif::icosahedral_grid(2, 1, 1.0);
  EXPECT_NEAR(std::accumulate(unit.cell_area.begin(), unit.cell_area.end(), 0.0), 4 * kPi, 1e-12);
}

TEST(DiffusionGrid, BadArgumentsAreRefusedByName) {
  auto message = [](auto call) -> std::string {
    try {
      call();
    } catch (const sciproxy::InvalidArgument& e) {
      return e.what();
    }
    return "(nothing thrown)";
  };
  EXPECT_EQ(message([] { dif::icosahedral_grid(0, 0); }).rfind("n: ", 0), 0u);
  EXPECT_EQ(message([] { dif::icosahedral_grid(-3, 2); }).rfind("n: ", 0), 0u);
  EXPECT_EQ(message([] { dif::icosahedral_grid(2, -1); }).rfind("k: ", 0), 0u);
  EXPECT_EQ(message([] { dif::icosahedral_grid(2, 1, 0.0); }).rfind("radius: ", 0), 0u);
  EXPECT_EQ(message([] { dif::icosahedral_grid(2, 1, NAN); }).rfind("radius: ", 0), 0u);
  // R2B12's sparse offsets reach 4 * num_edges = 120 * 4 * 4^12 (about 8e9); the others more.
  for (auto [n, k] :
       {std::pair{2, 12}, std::pair{1000, 5}, std::pair{2, 40}, std::pair{100000, 0}}) {
    const std::string m = message([n = n, k = k] { dif::icosahedral_grid(n, k); });
    EXPECT_EQ(m.rfind("n, k: ", 0), 0u) << m;
    EXPECT_NE(m.find("int32"), std::string::npos) << m;
  }
}

TEST(DiffusionDomains, GlobalGridHasEmptyBoundaryZonesAndEverythingInterior) {
  using namespace sciproxy::diffusion;
  const Grid g = icosahedral_grid(2, 1);
  EXPECT_FALSE(g.limited_area);
  for (Dimension d : {Dimension::Cell, Dimension::Edge, Dimension::Vertex}) {
    EXPECT_EQ(g.start_index(d, Zone::LateralBoundary), 0);
    EXPECT_EQ(g.end_index(d, Zone::LateralBoundary), 0);
    EXPECT_EQ(g.start_index(d, Zone::Nudging), 0);
    EXPECT_EQ(g.start_index(d, Zone::Interior), 0);
    EXPECT_EQ(g.end_index(d, Zone::Interior), g.size(d));
    EXPECT_EQ(g.end_index(d, Zone::Local), g.size(d));
    EXPECT_EQ(g.start_index(d, Zone::Halo), g.size(d));
    EXPECT_EQ(g.end_index(d, Zone::HaloLevel2), g.size(d));
  }
  EXPECT_EQ(g.start_index(Dimension::Edge, Zone::LateralBoundaryLevel5), 0);
  EXPECT_THROW(g.start_index(Dimension::Cell, Zone::LateralBoundaryLevel5),
               sciproxy::InvalidArgument);
  EXPECT_THROW(g.start_index(Dimension::Vertex, Zone::NudgingLevel2), sciproxy::InvalidArgument);
  EXPECT_EQ(zone_from_name("lb_level_5"), Zone::LateralBoundaryLevel5);
  EXPECT_THROW(zone_from_name("lateral"), sciproxy::InvalidArgument);
}

TEST(DiffusionDomains, ZonesFollowRefinementControl) {
  using namespace sciproxy::diffusion;
  Grid g = icosahedral_grid(1, 0);  // 20 cells, 30 edges, 12 vertices
  g.cell_refin_ctrl.assign(20, 0);
  for (int c = 0; c < 3; ++c) g.cell_refin_ctrl[c] = 1;
  for (int c = 3; c < 5; ++c) g.cell_refin_ctrl[c] = 2;
  g.cell_refin_ctrl[5] = 5;  // the nudging row of cells (4 + 1)
  g.edge_refin_ctrl.assign(30, 0);
  g.edge_refin_ctrl[0] = 1;
  g.edge_refin_ctrl[1] = 10;  // the 2nd nudging row of edges (8 + 2)
  set_domain_bounds(g);
  EXPECT_TRUE(g.limited_area);
  EXPECT_EQ(g.start_index(Dimension::Cell, Zone::LateralBoundary), 0);
  EXPECT_EQ(g.end_index(Dimension::Cell, Zone::LateralBoundary), 3);
  EXPECT_EQ(g.start_index(Dimension::Cell, Zone::LateralBoundaryLevel2), 3);
  EXPECT_EQ(g.end_index(Dimension::Cell, Zone::LateralBoundaryLevel2), 5);
  EXPECT_EQ(g.start_index(Dimension::Cell, Zone::LateralBoundaryLevel3), 0);  // no row 3: empty
  EXPECT_EQ(g.start_index(Dimension::Cell, Zone::Nudging), 5);
  EXPECT_EQ(g.start_index(Dimension::Cell, Zone::Interior), 6);
  EXPECT_EQ(g.start_index(Dimension::Edge, Zone::NudgingLevel2), 1);
  EXPECT_EQ(g.start_index(Dimension::Edge, Zone::Interior), 2);
  g.edge_refin_ctrl.resize(7);
  EXPECT_THROW(set_domain_bounds(g), sciproxy::InvalidArgument);
}

// A nested parent grid's values (ICON4Py's convert_to_non_nested_refinement_values): -4 (cells,
// vertices) or -8 (edges) are the unordered interior, other negative values count rows as -v.
TEST(DiffusionDomains, NestedRefinementValuesCountAsTheirRows) {
  using namespace sciproxy::diffusion;
  Grid g = icosahedral_grid(1, 0);
  g.cell_refin_ctrl.assign(20, 0);
  g.cell_refin_ctrl[0] = -1;
  g.cell_refin_ctrl[1] = 1;
  g.cell_refin_ctrl[2] = -4;
  g.cell_refin_ctrl[3] = -5;
  g.edge_refin_ctrl.assign(30, 0);
  g.edge_refin_ctrl[0] = -8;
  g.edge_refin_ctrl[1] = -9;
  set_domain_bounds(g);
  EXPECT_EQ(g.start_index(Dimension::Cell, Zone::LateralBoundary), 0);
  EXPECT_EQ(g.end_index(Dimension::Cell, Zone::LateralBoundary), 2);
  EXPECT_EQ(g.start_index(Dimension::Cell, Zone::Nudging), 3);
  EXPECT_EQ(g.start_index(Dimension::Cell, Zone::Interior), 4);
  EXPECT_EQ(g.start_index(Dimension::Edge, Zone::Nudging), 1);
  EXPECT_EQ(g.end_index(Dimension::Edge, Zone::LateralBoundary), 0);
}
