// Limited-area cut-outs (include/sciproxy/diffusion.hpp, src/diffusion/limited_area.cpp): the
// cut of the R2B2 file against icon-grid-generator's own cut-out of the same grid
// (tests/data/diffusion/grids), and cut-outs of generated grids: consistent tables with missing
// neighbours, refin_ctrl rows that follow the distance from the boundary, contiguous zones, the
// geometry of the source, ICON4Py's nudging coefficients; bad arguments refused by name.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "diffusion/grid_checks.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/diffusion.hpp"

namespace dif = sciproxy::diffusion;

namespace {

const double kPi = std::acos(-1.0);
const double kDeg = kPi / 180;
const std::string kGrids = std::string(SCIPROXY_TEST_DATA_DIR) + "/diffusion/grids/";

std::string invalid_argument(const std::function<void()>& call) {
  try {
    call();
  } catch (const sciproxy::InvalidArgument& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

// A cut-out of R2B4 over the Alps, 25 degrees wide, and its source.
const dif::Grid& r2b4() {
  static const dif::Grid g = dif::icosahedral_grid(2, 4);
  return g;
}
const dif::Grid& alps() {
  static const dif::Grid g = dif::limited_area_grid(r2b4(), 46 * kDeg, 10 * kDeg, 25 * kDeg);
  return g;
}

// Position key of a point, to find an entity of the cut-out in its source.
std::tuple<double, double> key(double lat, double lon) {
  return {lat, lon};
}

}  // namespace

// make_grid_files.py cut r2b2_lam.nc from the grid of r2b2_global.nc (the cells whose centre lies
// within 60 degrees of (46 N, 10 E), not re-optimised): our cut of the read global file gives the
// same grid, entity for entity, with the same rows.
TEST(DiffusionLimitedArea, CutOfTheGlobalFileMatchesTheGeneratorsCutOut) {
  const dif::Grid global = dif::read_grid_file(kGrids + "r2b2_global.nc");
  const dif::Grid file = dif::read_grid_file(kGrids + "r2b2_lam.nc");
  const dif::Grid ours = dif::limited_area_grid(global, 46 * kDeg, 10 * kDeg, 60 * kDeg);
  ASSERT_EQ(ours.num_cells, file.num_cells);
  ASSERT_EQ(ours.num_edges, file.num_edges);
  ASSERT_EQ(ours.num_vertices, file.num_vertices);
  // Rows, order and positions, entity for entity.
  EXPECT_EQ(ours.cell_refin_ctrl, file.cell_refin_ctrl);
  EXPECT_EQ(ours.edge_refin_ctrl, file.edge_refin_ctrl);
  EXPECT_EQ(ours.vertex_refin_ctrl, file.vertex_refin_ctrl);
  EXPECT_EQ(ours.cell_lat, file.cell_lat);
  EXPECT_EQ(ours.cell_lon, file.cell_lon);
  EXPECT_EQ(ours.vertex_lat, file.vertex_lat);
  EXPECT_EQ(ours.edge_center_lat, file.edge_center_lat);
  EXPECT_EQ(ours.zone_start, file.zone_start);
  EXPECT_EQ(ours.zone_end, file.zone_end);
  // The tables, as sets per entity (the generator numbers a cell's edges its own way).
  auto sorted_rows = [](const std::vector<std::int32_t>& t, int k) {
    std::vector<std::int32_t> s = t;
    for (std::size_t r = 0; r < t.size() / k; ++r)
      std::sort(s.begin() + r * k, s.begin() + (r + 1) * k);
    return s;
  };
  EXPECT_EQ(sorted_rows(ours.c2v, 3), sorted_rows(file.c2v, 3));
  EXPECT_EQ(sorted_rows(ours.c2e, 3), sorted_rows(file.c2e, 3));
  EXPECT_EQ(sorted_rows(ours.c2e2c, 3), sorted_rows(file.c2e2c, 3));
  EXPECT_EQ(sorted_rows(ours.e2v, 2), sorted_rows(file.e2v, 2));
  EXPECT_EQ(ours.e2c, file.e2c);
  EXPECT_EQ(sorted_rows(ours.v2c, 6), sorted_rows(file.v2c, 6));
  EXPECT_EQ(sorted_rows(ours.v2e, 6), sorted_rows(file.v2e, 6));
  // The geometry of the source, the same as the file's away from the boundary (the file clips
  // the dual cells and dual edges at the boundary; a cut-out keeps the source's).
  EXPECT_EQ(ours.cell_area, file.cell_area);
  EXPECT_EQ(ours.edge_length, file.edge_length);
  for (std::int64_t e = 0; e < ours.num_edges; ++e)
    if (ours.e2c[2 * e + 1] >= 0) {
      ASSERT_EQ(ours.dual_edge_length[e], file.dual_edge_length[e]) << "edge " << e;
      ASSERT_EQ(ours.tangent_orientation[e], file.tangent_orientation[e]) << "edge " << e;
    }
}

TEST(DiffusionLimitedArea, TablesAreConsistentWithMissingNeighboursAtTheBoundary) {
  const dif::Grid& g = alps();
  std::printf("R2B4 cut-out, 25 degrees around (46 N, 10 E): %d cells, %d edges, %d vertices\n",
              g.num_cells, g.num_edges, g.num_vertices);
  EXPECT_TRUE(g.limited_area);
  const std::int64_t missing = grid_checks::check_tables(g);
  std::int64_t boundary = 0;
  for (std::int64_t e = 0; e < g.num_edges; ++e) {
    ASSERT_GE(g.e2c[2 * e], 0) << "a boundary edge's cell comes first";
    boundary += g.e2c[2 * e + 1] < 0;
  }
  EXPECT_GT(boundary, 0);
  EXPECT_EQ(boundary, missing);
  // V2E of a boundary vertex starts with a boundary edge; V2C and V2E have no gaps.
  for (std::int64_t v = 0; v < g.num_vertices; ++v) {
    int cells = 0, edges = 0;
    for (int i = 0; i < 6; ++i) {
      if (g.v2c[6 * v + i] >= 0) {
        ASSERT_EQ(cells++, i) << "vertex " << v;
      }
      if (g.v2e[6 * v + i] >= 0) {
        ASSERT_EQ(edges++, i) << "vertex " << v;
      }
    }
    if (g.vertex_refin_ctrl[v] == 1) {
      EXPECT_EQ(edges, cells + 1) << "vertex " << v;
      EXPECT_LT(g.e2c[2 * std::int64_t{g.v2e[6 * v]} + 1], 0) << "vertex " << v;
    } else {
      EXPECT_EQ(edges, cells) << "vertex " << v;
    }
  }
}

// Rows follow the distance from the boundary, as grid_refinement.py defines them.
TEST(DiffusionLimitedArea, RowsFollowTheDistanceFromTheBoundary) {
  const dif::Grid& g = alps();
  const std::int64_t nc = g.num_cells, ne = g.num_edges, nv = g.num_vertices;
  // Vertices: row 1 exactly on the boundary edges; along a cell's sides rows differ by at most
  // one; every vertex of row r > 1 shares a cell with a vertex of row r - 1.
  std::vector<char> on_boundary(nv, 0), has_lower(nv, 0);
  for (std::int64_t e = 0; e < ne; ++e)
    if (g.e2c[2 * e + 1] < 0) on_boundary[g.e2v[2 * e]] = on_boundary[g.e2v[2 * e + 1]] = 1;
  for (std::int64_t v = 0; v < nv; ++v) EXPECT_EQ(g.vertex_refin_ctrl[v] == 1, on_boundary[v] == 1);
  int deepest = 0;
  for (std::int64_t c = 0; c < nc; ++c) {
    int lowest = 1 << 30;
    for (int i = 0; i < 3; ++i) {
      const std::int32_t ri = g.vertex_refin_ctrl[g.c2v[3 * c + i]];
      ASSERT_GT(ri, 0) << "every vertex within 14 rows";
      lowest = std::min(lowest, ri);
      for (int j = 0; j < 3; ++j) {
        const std::int32_t rj = g.vertex_refin_ctrl[g.c2v[3 * c + j]];
        ASSERT_LE(std::abs(ri - rj), 1) << "cell " << c;
        if (rj == ri - 1) has_lower[g.c2v[3 * c + i]] = 1;
      }
    }
    // A cell is in the lowest row of its vertices.
    ASSERT_EQ(g.cell_refin_ctrl[c], lowest) << "cell " << c;
    deepest = std::max(deepest, lowest);
  }
  for (std::int64_t v = 0; v < nv; ++v)
    if (g.vertex_refin_ctrl[v] > 1) {
      ASSERT_TRUE(has_lower[v]) << "vertex " << v;
    }
  EXPECT_GE(deepest, 6) << "the region is deeper than the ordered rows";
  // Edges: the sum of their cells' rows (1 on the boundary): twice as many edge rows.
  for (std::int64_t e = 0; e < ne; ++e) {
    const std::int32_t c0 = g.e2c[2 * e], c1 = g.e2c[2 * e + 1];
    const int expected = g.cell_refin_ctrl[c0] + (c1 >= 0 ? g.cell_refin_ctrl[c1] : 0);
    ASSERT_EQ(g.edge_refin_ctrl[e], expected) << "edge " << e;
  }
}

// ICON's order: rows 1.. (5 of cells and vertices, 10 of edges) first, each a contiguous range in
// the source's order, then the rest; the zones are those ranges.
TEST(DiffusionLimitedArea, ZonesAreContiguousRangesInIconsOrder) {
  const dif::Grid& g = alps();
  struct Dim {
    dif::Dimension dim;
    const std::vector<std::int32_t>& row;
    int boundary_rows, nudging_rows;
  };
  for (const Dim& d : {Dim{dif::Dimension::Cell, g.cell_refin_ctrl, 4, 1},
                       Dim{dif::Dimension::Edge, g.edge_refin_ctrl, 8, 2},
                       Dim{dif::Dimension::Vertex, g.vertex_refin_ctrl, 4, 1}}) {
    const int ordered = d.boundary_rows + d.nudging_rows;
    // Non-decreasing through the ordered rows, then none of them again.
    int previous = 1;
    std::int64_t i = 0;
    for (; i < g.size(d.dim) && d.row[i] >= 1 && d.row[i] <= ordered; ++i) {
      ASSERT_GE(d.row[i], previous) << "entity " << i;
      previous = d.row[i];
    }
    for (std::int64_t j = i; j < g.size(d.dim); ++j)
      ASSERT_TRUE(d.row[j] == 0 || d.row[j] > ordered);
    // The zones tile [0, n): each ordered row's zone starts where the previous ends.
    std::int32_t end = 0;
    for (int v = 1; v <= ordered; ++v) {
      const auto zone = static_cast<dif::Zone>(
          v <= d.boundary_rows ? static_cast<int>(dif::Zone::LateralBoundary) + v - 1
                               : static_cast<int>(dif::Zone::Nudging) + v - d.boundary_rows - 1);
      EXPECT_EQ(g.start_index(d.dim, zone), end) << dif::zone_name(zone);
      EXPECT_GT(g.end_index(d.dim, zone), g.start_index(d.dim, zone)) << dif::zone_name(zone);
      for (std::int32_t e = g.start_index(d.dim, zone); e < g.end_index(d.dim, zone); ++e)
        ASSERT_EQ(d.row[e], v);
      end = g.end_index(d.dim, zone);
    }
    EXPECT_EQ(g.start_index(d.dim, dif::Zone::Interior), end);
    EXPECT_EQ(g.end_index(d.dim, dif::Zone::Interior), g.size(d.dim));
    EXPECT_EQ(i, end);
  }
}

TEST(DiffusionLimitedArea, GeometryIsTheSources) {
  const dif::Grid& g = alps();
  const dif::Grid& src = r2b4();
  std::map<std::tuple<double, double>, std::int64_t> cell_of, edge_of;
  for (std::int64_t c = 0; c < src.num_cells; ++c)
    cell_of[key(src.cell_lat[c], src.cell_lon[c])] = c;
  for (std::int64_t e = 0; e < src.num_edges; ++e)
    edge_of[key(src.edge_center_lat[e], src.edge_center_lon[e])] = e;
  for (std::int64_t c = 0; c < g.num_cells; ++c) {
    const std::int64_t s = cell_of.at(key(g.cell_lat[c], g.cell_lon[c]));
    ASSERT_EQ(g.cell_area[c], src.cell_area[s]);
    // The distance from the region's centre within its radius.
    const double d = std::acos(std::sin(g.cell_lat[c]) * std::sin(46 * kDeg) +
                               std::cos(g.cell_lat[c]) * std::cos(46 * kDeg) *
                                   std::cos(g.cell_lon[c] - 10 * kDeg));
    ASSERT_LE(d, 25 * kDeg + 1e-12);
  }
  for (std::int64_t e = 0; e < g.num_edges; ++e) {
    const std::int64_t s = edge_of.at(key(g.edge_center_lat[e], g.edge_center_lon[e]));
    ASSERT_EQ(g.edge_length[e], src.edge_length[s]);
    ASSERT_EQ(g.dual_edge_length[e], src.dual_edge_length[s]);
    // Turned edges turn their normal with their cells: the normal still leaves E2C[0].
    const bool turned = g.primal_cart_normal[3 * e] == -src.primal_cart_normal[3 * s] &&
                        src.primal_cart_normal[3 * s] != 0;
    ASSERT_EQ(std::abs(g.primal_normal_x[e]), std::abs(src.primal_normal_x[s]));
    const std::int32_t c0 = g.e2c[2 * e];
    for (int i = 0; i < 3; ++i)
      if (g.c2e[3 * std::int64_t{c0} + i] == e) {
        ASSERT_EQ(g.edge_orientation[3 * std::int64_t{c0} + i], 1);
      }
    ASSERT_EQ(g.tangent_orientation[e],
              turned ? -src.tangent_orientation[s] : src.tangent_orientation[s]);
  }
  // A written cut-out reads back exactly.
  grid_checks::ScratchDir dir;
  dif::write_grid_file(g, dir.file("alps.nc"));
  grid_checks::expect_same_grid(dif::read_grid_file(dir.file("alps.nc")), g);
}

// ICON4Py's compute_nudgecoeffs with its defaults on the edges' rows; 0 before NUDGING_LEVEL_2
// and in the interior; on a global grid, 0.
TEST(DiffusionLimitedArea, NudgingCoefficientsAsIcon4Py) {
  const dif::Grid& g = alps();
  const dif::InterpolationCoefficients c = dif::interpolation_coefficients(g);
  const std::int32_t start = g.start_index(dif::Dimension::Edge, dif::Zone::NudgingLevel2);
  ASSERT_GT(start, 0);
  int nudged = 0;
  for (std::int64_t e = 0; e < g.num_edges; ++e) {
    const int r = g.edge_refin_ctrl[e];
    double expected = 0;
    if (e >= start && r > 0 && r <= 27) expected = 0.375 * std::exp(-(r - 10) / 4.0);
    ASSERT_DOUBLE_EQ(c.nudgecoeff_e[e], expected) << "edge " << e << " row " << r;
    nudged += expected > 0;
    if (r == 0) {
      ASSERT_EQ(c.nudgecoeff_e[e], 0.0);
    }
  }
  EXPECT_EQ(c.nudgecoeff_e[start], 0.375);  // row 10: exp(0)
  EXPECT_GT(nudged, 0);
  std::printf(
      "R2B4 cut-out: %d edges nudged, from row 10 (%.3f) to row %d (%.4f)\n", nudged, 0.375,
      *std::max_element(g.edge_refin_ctrl.begin(), g.edge_refin_ctrl.end()),
      *std::min_element(c.nudgecoeff_e.begin() + start, c.nudgecoeff_e.end(),
                        [](double a, double b) { return (a > 0 ? a : 1) < (b > 0 ? b : 1); }));
  // Other options: a narrower zone stops earlier; a larger coefficient scales.
  dif::NudgingOptions narrow;
  narrow.nudge_zone_width = 5;  // rows up to 2 * 5 + 7 = 17
  narrow.max_nudging_coefficient = 0.5;
  const dif::InterpolationCoefficients n = dif::interpolation_coefficients(g, {}, narrow);
  for (std::int64_t e = start; e < g.num_edges; ++e) {
    const int r = g.edge_refin_ctrl[e];
    ASSERT_DOUBLE_EQ(n.nudgecoeff_e[e], r > 0 && r <= 17 ? 0.5 * std::exp(-(r - 10) / 4.0) : 0.0);
  }
  // The other coefficients exist on the cut-out and are finite.
  for (double x : c.geofac_div) ASSERT_TRUE(std::isfinite(x));
  for (double x : c.geofac_n2s) ASSERT_TRUE(std::isfinite(x));
  for (double x : c.rbf_vec_coeff_v1) ASSERT_TRUE(std::isfinite(x));
  // Global grids stay 0; bad options are refused by name.
  const dif::InterpolationCoefficients global =
      dif::interpolation_coefficients(dif::icosahedral_grid(2, 1));
  for (double x : global.nudgecoeff_e) ASSERT_EQ(x, 0.0);
  dif::NudgingOptions bad;
  bad.nudge_efold_width = 0;
  EXPECT_EQ(invalid_argument([&] {
              dif::interpolation_coefficients(g, {}, bad);
            }).rfind("nudging.nudge_efold_width: ", 0),
            0u);
}

TEST(DiffusionLimitedArea, BadArgumentsAreRefusedByName) {
  const dif::Grid g = dif::icosahedral_grid(2, 1);
  auto starts = [](const std::string& m, const char* name) {
    EXPECT_EQ(m.rfind(name, 0), 0u) << m;
  };
  starts(invalid_argument([&] { dif::limited_area_grid(g, NAN, 0, 0.5); }), "center_lat: ");
  starts(invalid_argument([&] { dif::limited_area_grid(g, 2.0, 0, 0.5); }), "center_lat: ");
  starts(invalid_argument([&] { dif::limited_area_grid(g, 0, INFINITY, 0.5); }), "center_lon: ");
  starts(invalid_argument([&] { dif::limited_area_grid(g, 0, 0, 0.0); }), "radius_rad: ");
  starts(invalid_argument([&] { dif::limited_area_grid(g, 0, 0, -1.0); }), "radius_rad: ");
  // A radius smaller than the distance to any cell centre from a vertex; the whole sphere.
  starts(invalid_argument([&] { dif::limited_area_grid(g, kPi / 2, 0, 1e-6); }), "radius_rad: ");
  const std::string all = invalid_argument([&] { dif::limited_area_grid(g, 0, 0, 4.0); });
  starts(all, "radius_rad: ");
  EXPECT_NE(all.find("lateral boundary"), std::string::npos) << all;
  dif::Grid broken = g;
  broken.e2v[7] = g.num_vertices;
  const std::string m = invalid_argument([&] { dif::limited_area_grid(broken, 0, 0, 0.5); });
  starts(m, "global: ");
  EXPECT_NE(m.find("e2v"), std::string::npos) << m;
  broken = g;
  broken.v2c.pop_back();
  starts(invalid_argument([&] { dif::limited_area_grid(broken, 0, 0, 0.5); }), "global: ");
  dif::LimitedAreaOptions shallow;
  shallow.boundary_depth = 3;
  starts(invalid_argument([&] { dif::limited_area_grid(g, 0, 0, 0.5, shallow); }),
         "options.boundary_depth: ");
}
