// ICON grid files (include/sciproxy/diffusion.hpp, src/diffusion/grid_file.cpp): the files
// icon-grid-generator wrote (tests/data/diffusion/grids, made by make_grid_files.py) read with
// their counts, consistent tables and geometry that agrees with ours computed from the read
// positions; a written grid read back exactly; the limited-area file's zones as ICON4Py computes
// them against the file's own start_idx/end_idx; every kind of bad file refused by name.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netcdf.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "diffusion/geometry.hpp"
#include "diffusion/grid_checks.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/diffusion.hpp"

namespace dif = sciproxy::diffusion;
using grid_checks::ScratchDir;

namespace {

const double kPi = std::acos(-1.0);
const std::string kGrids = std::string(SCIPROXY_TEST_DATA_DIR) + "/diffusion/grids/";
const std::string kGlobalFile = kGrids + "r2b2_global.nc";
const std::string kLamFile = kGrids + "r2b2_lam.nc";

const dif::Grid& global_file_grid() {
  static const dif::Grid g = dif::read_grid_file(kGlobalFile);
  return g;
}
const dif::Grid& lam_file_grid() {
  static const dif::Grid g = dif::read_grid_file(kLamFile);
  return g;
}

// max |a - b| / max |b| over the entries.
double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0, s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(a[i] - b[i]));
    s = std::max(s, std::abs(b[i]));
  }
  return d / s;
}

// The message of the InvalidArgument a call throws ("(nothing thrown)" if none).
std::string invalid_argument(const std::function<void()>& call) {
  try {
    call();
  } catch (const sciproxy::InvalidArgument& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

// An integer variable of a file, as stored.
std::vector<int> file_ints(const std::string& path, const char* name) {
  int id = 0, var = 0, ndims = 0;
  EXPECT_EQ(nc_open(path.c_str(), NC_NOWRITE, &id), NC_NOERR);
  EXPECT_EQ(nc_inq_varid(id, name, &var), NC_NOERR) << name;
  nc_inq_varndims(id, var, &ndims);
  std::vector<int> dims(ndims);
  nc_inq_vardimid(id, var, dims.data());
  std::size_t n = 1;
  for (int d : dims) {
    std::size_t len = 0;
    nc_inq_dimlen(id, d, &len);
    n *= len;
  }
  std::vector<int> data(n);
  EXPECT_EQ(nc_get_var_int(id, var, data.data()), NC_NOERR);
  nc_close(id);
  return data;
}

// Opens a file for changes, runs `change(ncid)` in define mode, closes it.
void change_file(const std::string& path, const std::function<void(int)>& change) {
  int id = 0;
  ASSERT_EQ(nc_open(path.c_str(), NC_WRITE, &id), NC_NOERR);
  ASSERT_EQ(nc_redef(id), NC_NOERR);
  change(id);
  ASSERT_EQ(nc_close(id), NC_NOERR);
}
// Copies a file without the variables `skip`, then runs `add(ncid)` on the copy in define mode
// (renaming a variable in place is unreliable in netCDF-4 files).
void copy_without(const std::string& from, const std::string& to,
                  const std::vector<std::string>& skip, const std::function<void(int)>& add = {}) {
  int in = 0, out = 0, ndims = 0, nvars = 0;
  ASSERT_EQ(nc_open(from.c_str(), NC_NOWRITE, &in), NC_NOERR);
  ASSERT_EQ(nc_create(to.c_str(), NC_NETCDF4 | NC_CLOBBER, &out), NC_NOERR);
  nc_inq_ndims(in, &ndims);
  for (int d = 0; d < ndims; ++d) {
    char name[NC_MAX_NAME + 1];
    std::size_t length = 0;
    int copy = 0;
    nc_inq_dim(in, d, name, &length);
    ASSERT_EQ(nc_def_dim(out, name, length, &copy), NC_NOERR);
  }
  nc_inq_nvars(in, &nvars);
  for (int v = 0; v < nvars; ++v) {
    char name[NC_MAX_NAME + 1];
    nc_inq_varname(in, v, name);
    if (std::find(skip.begin(), skip.end(), name) == skip.end()) {
      ASSERT_EQ(nc_copy_var(in, v, out), NC_NOERR) << name;
    }
  }
  int natts = 0;
  nc_inq_natts(in, &natts);
  for (int a = 0; a < natts; ++a) {
    char name[NC_MAX_NAME + 1];
    nc_inq_attname(in, NC_GLOBAL, a, name);
    ASSERT_EQ(nc_copy_att(in, NC_GLOBAL, name, out, NC_GLOBAL), NC_NOERR) << name;
  }
  if (add) {
    nc_redef(out);
    add(out);
  }
  nc_close(in);
  ASSERT_EQ(nc_close(out), NC_NOERR);
}

int varid(int id, const char* name) {
  int var = -1;
  EXPECT_EQ(nc_inq_varid(id, name, &var), NC_NOERR) << name;
  return var;
}

}  // namespace

TEST(DiffusionGridFile, GlobalFileCountsAndAttributes) {
  const dif::Grid& g = global_file_grid();
  EXPECT_EQ(g.num_cells, 1280);
  EXPECT_EQ(g.num_edges, 1920);
  EXPECT_EQ(g.num_vertices, 642);
  EXPECT_EQ(g.n, 2);
  EXPECT_EQ(g.k, 2);
  EXPECT_EQ(g.radius, 6371229.0);
  EXPECT_FALSE(g.limited_area);
  for (dif::Dimension d : {dif::Dimension::Cell, dif::Dimension::Edge, dif::Dimension::Vertex}) {
    EXPECT_EQ(g.end_index(d, dif::Zone::LateralBoundary), 0);
    EXPECT_EQ(g.start_index(d, dif::Zone::Interior), 0);
    EXPECT_EQ(g.end_index(d, dif::Zone::Interior), g.size(d));
  }
}

TEST(DiffusionGridFile, GlobalFileTablesAreConsistentAndZeroBased) {
  const dif::Grid& g = global_file_grid();
  EXPECT_EQ(grid_checks::check_tables(g), 0);
  // Pentagons: the file's 0 in the 6th entry became -1; every other entry is present.
  int pentagons = 0;
  for (std::int64_t v = 0; v < g.num_vertices; ++v) {
    pentagons += g.v2c[6 * v + 5] < 0;
    for (int i = 0; i < 5; ++i) ASSERT_GE(g.v2e[6 * v + i], 0);
    EXPECT_EQ(g.v2c[6 * v + 5] < 0, g.v2e[6 * v + 5] < 0);
  }
  EXPECT_EQ(pentagons, 12);
  // The same entries as the file, transposed and less one.
  const std::vector<int> c2e = file_ints(kGlobalFile, "edge_of_cell");
  for (std::int64_t c = 0; c < g.num_cells; ++c)
    for (int i = 0; i < 3; ++i) ASSERT_EQ(g.c2e[3 * c + i], c2e[i * g.num_cells + c] - 1);
  const std::vector<int> v2c = file_ints(kGlobalFile, "cells_of_vertex");
  for (std::int64_t v = 0; v < g.num_vertices; ++v)
    for (int i = 0; i < 6; ++i) {
      const int f = v2c[i * g.num_vertices + v];
      ASSERT_EQ(g.v2c[6 * v + i], f > 0 ? f - 1 : -1);
    }
}

// The file's geometry against ours from the file's positions (src/diffusion/geometry.cpp). The
// generator's cell centres are circumcentres and its edge midpoints great-circle midpoints, as
// ours, so every measure agrees to rounding, except the dual area: the generator writes the kite
// sum 1/4 sum_e l_e l'_e over the vertex's edges (checked below), ours is the spherical polygon
// of the cell centres; they differ by up to 6.5e-4 on R2B2. The measured differences are printed.
TEST(DiffusionGridFile, GlobalFileGeometryAgreesWithOursFromItsPositions) {
  const dif::Grid& g = global_file_grid();
  dif::Grid ours = g;
  dif::detail::compute_geometry(ours);
  struct Measure {
    const char* name;
    const std::vector<double>&a, &b;
    double tolerance;
  };
  const Measure measures[] = {
      {"cell_area", g.cell_area, ours.cell_area, 1e-10},
      {"dual_area", g.dual_area, ours.dual_area, 1e-3},
      {"edge_length", g.edge_length, ours.edge_length, 1e-10},
      {"dual_edge_length", g.dual_edge_length, ours.dual_edge_length, 1e-10},
      {"edge_cell_distance", g.edge_cell_length, ours.edge_cell_length, 1e-10},
      {"edge_vert_distance", g.edge_vert_length, ours.edge_vert_length, 1e-10},
      {"primal_cart_normal", g.primal_cart_normal, ours.primal_cart_normal, 1e-10},
      {"dual_cart_normal", g.dual_cart_normal, ours.dual_cart_normal, 1e-10},
      {"primal_normal_x", g.primal_normal_x, ours.primal_normal_x, 1e-10},
      {"primal_normal_y", g.primal_normal_y, ours.primal_normal_y, 1e-10},
      {"dual_normal_x", g.dual_normal_x, ours.dual_normal_x, 1e-10},
      {"dual_normal_y", g.dual_normal_y, ours.dual_normal_y, 1e-10},
  };
  for (const Measure& m : measures) {
    const double d = rel_diff(m.a, m.b);
    std::printf("R2B2 file: %-20s differs from ours by %.2e (relative to its largest)\n", m.name,
                d);
    EXPECT_LE(d, m.tolerance) << m.name;
  }
  double kite = 0;
  for (std::int64_t v = 0; v < g.num_vertices; ++v) {
    double sum = 0;
    for (int i = 0; i < 6; ++i) {
      const std::int32_t e = g.v2e[6 * v + i];
      if (e >= 0) sum += 0.25 * g.edge_length[e] * g.dual_edge_length[e];
    }
    kite = std::max(kite, std::abs(sum / g.dual_area[v] - 1));
  }
  std::printf("R2B2 file: dual_area is the kite sum 1/4 sum l l' to %.2e\n", kite);
  EXPECT_LE(kite, 1e-13);
  EXPECT_EQ(g.edge_orientation, ours.edge_orientation);
  EXPECT_EQ(g.tangent_orientation, ours.tangent_orientation);
  EXPECT_EQ(g.vertex_edge_orientation, ours.vertex_edge_orientation);
}

TEST(DiffusionGridFile, GlobalFileAreasTileTheSphereAndFluxesCancel) {
  const dif::Grid& g = global_file_grid();
  const double sphere = 4 * kPi * g.radius * g.radius;
  const double cells = std::accumulate(g.cell_area.begin(), g.cell_area.end(), 0.0);
  const double duals = std::accumulate(g.dual_area.begin(), g.dual_area.end(), 0.0);
  // The file's dual areas are kite sums (see above), ours from its positions tile the sphere.
  dif::Grid ours = g;
  dif::detail::compute_geometry(ours, {.cell_area = false,
                                       .edge_length = false,
                                       .dual_edge_length = false,
                                       .edge_cell_length = false,
                                       .edge_vert_length = false,
                                       .cart_normals = false,
                                       .normal_components = false,
                                       .tangent_orientation = false,
                                       .edge_orientation = false,
                                       .vertex_edge_orientation = false});
  const double our_duals = std::accumulate(ours.dual_area.begin(), ours.dual_area.end(), 0.0);
  std::printf(
      "R2B2 file: cell areas sum to 4 pi r^2 (1 %+.2e), its dual areas (1 %+.2e), our dual areas "
      "from its positions (1 %+.2e)\n",
      cells / sphere - 1, duals / sphere - 1, our_duals / sphere - 1);
  EXPECT_NEAR(cells / sphere - 1, 0.0, 1e-12);
  EXPECT_NEAR(duals / sphere - 1, 0.0, 1e-3);
  EXPECT_NEAR(our_duals / sphere - 1, 0.0, 1e-12);
  // Gauss on the discrete sphere: every edge counted once with each sign.
  EXPECT_LE(grid_checks::divergence_theorem_residual(g), 1e-13);
}

TEST(DiffusionGridFile, RadiusScalesTheFilesLengthsAndAreas) {
  const dif::Grid& g = global_file_grid();
  const dif::Grid unit = dif::read_grid_file(kGlobalFile, 1.0);
  EXPECT_EQ(unit.radius, 1.0);
  EXPECT_NEAR(std::accumulate(unit.cell_area.begin(), unit.cell_area.end(), 0.0), 4 * kPi, 1e-12);
  EXPECT_NEAR(unit.edge_length[7] * g.radius / g.edge_length[7], 1.0, 1e-15);
  EXPECT_EQ(unit.cell_center, g.cell_center);
  EXPECT_EQ(unit.c2e, g.c2e);
}

TEST(DiffusionGridFile, WrittenGridsReadBackExactly) {
  ScratchDir dir;
  for (auto [n, k] : {std::pair{1, 0}, std::pair{2, 2}, std::pair{3, 1}}) {
    SCOPED_TRACE(fmt::format("R{}B{}", n, k));
    const dif::Grid g = dif::icosahedral_grid(n, k);
    const std::string path = dir.file(fmt::format("r{}b{}.nc", n, k));
    dif::write_grid_file(g, path);
    grid_checks::expect_same_grid(dif::read_grid_file(path), g);
  }
  const dif::Grid unit = dif::icosahedral_grid(2, 1, 1.0);
  dif::write_grid_file(unit, dir.file("unit.nc"));
  grid_checks::expect_same_grid(dif::read_grid_file(dir.file("unit.nc")), unit);
  // Files read, written and read again, the limited-area file included.
  for (const dif::Grid* g : {&global_file_grid(), &lam_file_grid()}) {
    dif::write_grid_file(*g, dir.file("again.nc"));
    grid_checks::expect_same_grid(dif::read_grid_file(dir.file("again.nc")), *g);
  }
  // Overwriting leaves no temporary file behind.
  dif::write_grid_file(unit, dir.file("unit.nc"));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(entry.path().filename().string().rfind(".", 0), std::string::npos) << entry.path();
  }
  EXPECT_EQ(files, 5);
}

TEST(DiffusionGridFile, WrittenFileHasTheIconVariablesOneBased) {
  ScratchDir dir;
  const dif::Grid g = dif::icosahedral_grid(1, 1);
  dif::write_grid_file(g, dir.file("g.nc"));
  const std::vector<int> e2c = file_ints(dir.file("g.nc"), "adjacent_cell_of_edge");
  ASSERT_EQ(e2c.size(), 2u * g.num_edges);
  for (std::int64_t e = 0; e < g.num_edges; ++e)
    for (int j = 0; j < 2; ++j) ASSERT_EQ(e2c[j * g.num_edges + e], g.e2c[2 * e + j] + 1);
  int id = 0;
  ASSERT_EQ(nc_open(dir.file("g.nc").c_str(), NC_NOWRITE, &id), NC_NOERR);
  for (const char* name : {"clon",
                           "clat",
                           "vlon",
                           "vlat",
                           "elon",
                           "elat",
                           "edge_of_cell",
                           "vertex_of_cell",
                           "neighbor_cell_index",
                           "edge_vertices",
                           "cells_of_vertex",
                           "edges_of_vertex",
                           "vertices_of_vertex",
                           "cell_area",
                           "dual_area",
                           "edge_length",
                           "dual_edge_length",
                           "edge_cell_distance",
                           "edge_vert_distance",
                           "zonal_normal_primal_edge",
                           "edge_primal_normal_cartesian_x",
                           "edge_dual_normal_cartesian_z",
                           "orientation_of_normal",
                           "edge_orientation",
                           "edge_system_orientation",
                           "refin_c_ctrl",
                           "refin_e_ctrl",
                           "refin_v_ctrl",
                           "start_idx_c",
                           "end_idx_e"}) {
    int var = 0;
    EXPECT_EQ(nc_inq_varid(id, name, &var), NC_NOERR) << name;
  }
  int root = 0, level = 0;
  double radius = 0;
  char uuid[64] = {};
  EXPECT_EQ(nc_get_att_int(id, NC_GLOBAL, "grid_root", &root), NC_NOERR);
  EXPECT_EQ(nc_get_att_int(id, NC_GLOBAL, "grid_level", &level), NC_NOERR);
  EXPECT_EQ(nc_get_att_double(id, NC_GLOBAL, "sphere_radius", &radius), NC_NOERR);
  EXPECT_EQ(nc_get_att_text(id, NC_GLOBAL, "uuidOfHGrid", uuid), NC_NOERR);
  nc_close(id);
  EXPECT_EQ(root, 1);
  EXPECT_EQ(level, 1);
  EXPECT_EQ(radius, dif::kEarthRadius);
  EXPECT_EQ(std::string(uuid).size(), 36u);
}

TEST(DiffusionGridFile, LimitedAreaFileIsReadWithMissingNeighbours) {
  const dif::Grid& g = lam_file_grid();
  EXPECT_EQ(g.num_cells, 319);
  EXPECT_EQ(g.num_edges, 502);
  EXPECT_EQ(g.num_vertices, 184);
  EXPECT_TRUE(g.limited_area);
  const std::int64_t missing = grid_checks::check_tables(g);
  std::int64_t boundary_edges = 0;
  for (std::int64_t e = 0; e < g.num_edges; ++e) {
    ASSERT_GE(g.e2c[2 * e], 0) << "the boundary edge's cell comes first";
    if (g.e2c[2 * e + 1] < 0) {
      ++boundary_edges;
      EXPECT_EQ(g.edge_refin_ctrl[e], 1);
      EXPECT_EQ(g.e2c2v[4 * e + 3], -1);
      EXPECT_GE(g.e2c2v[4 * e + 2], 0);
    }
  }
  EXPECT_EQ(boundary_edges, missing);
  EXPECT_EQ(boundary_edges, 47);
  // Positive geometry everywhere; the normals leave E2C[0] as the orientations say.
  for (double a : g.dual_area) ASSERT_GT(a, 0);
  for (double l : g.dual_edge_length) ASSERT_GT(l, 0);
  for (std::int64_t e = 0; e < g.num_edges; ++e) {
    const auto n = dif::detail::at(g.primal_cart_normal, e);
    ASSERT_NEAR(dif::detail::dot(n, n), 1.0, 1e-14);
    // The orientations the file gives agree with the computed normals.
    for (int j = 0; j < 2; ++j) {
      const std::int32_t c = g.e2c[2 * e + j];
      if (c < 0) continue;
      for (int i = 0; i < 3; ++i)
        if (g.c2e[3 * std::int64_t{c} + i] == e) {
          ASSERT_EQ(g.edge_orientation[3 * std::int64_t{c} + i], j == 0 ? 1 : -1) << "edge " << e;
        }
    }
  }
}

// ICON4Py's zones from refin_ctrl (set_domain_bounds) against the start_idx/end_idx arrays the
// generator wrote, ICON's way: the entry of refinement value v is at v - min (cells -8..5, edges
// -13..10, vertices -7..5), 1-based, end inclusive; v = 0 is the unordered interior.
TEST(DiffusionGridFile, LimitedAreaZonesMatchTheFilesStartAndEndIndices) {
  const dif::Grid& g = lam_file_grid();
  struct Dim {
    dif::Dimension dim;
    const char *start, *end;
    int min, boundary_rows, nudging_rows;
  };
  for (const Dim& d : {Dim{dif::Dimension::Cell, "start_idx_c", "end_idx_c", -8, 4, 1},
                       Dim{dif::Dimension::Edge, "start_idx_e", "end_idx_e", -13, 8, 2},
                       Dim{dif::Dimension::Vertex, "start_idx_v", "end_idx_v", -7, 4, 1}}) {
    const std::vector<int> start = file_ints(kLamFile, d.start), end = file_ints(kLamFile, d.end);
    for (int v = 1; v <= d.boundary_rows + d.nudging_rows; ++v) {
      const auto zone = static_cast<dif::Zone>(
          v <= d.boundary_rows ? static_cast<int>(dif::Zone::LateralBoundary) + v - 1
                               : static_cast<int>(dif::Zone::Nudging) + v - d.boundary_rows - 1);
      SCOPED_TRACE(fmt::format("{} {}", d.start, dif::zone_name(zone)));
      EXPECT_EQ(g.start_index(d.dim, zone), start[v - d.min] - 1);
      EXPECT_EQ(g.end_index(d.dim, zone), end[v - d.min]);
      EXPECT_LT(g.start_index(d.dim, zone), g.end_index(d.dim, zone)) << "not empty";
    }
    EXPECT_EQ(g.start_index(d.dim, dif::Zone::Interior), start[-d.min] - 1);
    EXPECT_EQ(g.end_index(d.dim, dif::Zone::Interior), end[-d.min]);
    EXPECT_EQ(g.end_index(d.dim, dif::Zone::Interior), g.size(d.dim));
  }
}

// ICON4Py's GridManager on the same files (icon4py_reference.json, written by
// make_icon4py_reference.py with icon4py-common 0.4.1): every table and every zone the same.
TEST(DiffusionGridFile, ReadsAsIcon4PysGridManager) {
  std::ifstream in(kGrids + "icon4py_reference.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json reference = nlohmann::json::parse(in);
  for (const auto& [file, g] : {std::pair{"r2b2_lam.nc", &lam_file_grid()},
                                std::pair{"r2b2_global.nc", &global_file_grid()}}) {
    SCOPED_TRACE(file);
    const nlohmann::json& r = reference.at(file);
    EXPECT_EQ(r.at("limited_area").get<bool>(), g->limited_area);
    const std::map<std::string, const std::vector<std::int32_t>*> tables = {
        {"C2E", &g->c2e},       {"C2V", &g->c2v}, {"C2E2C", &g->c2e2c},
        {"C2E2CO", &g->c2e2co}, {"E2C", &g->e2c}, {"E2V", &g->e2v},
        {"E2C2V", &g->e2c2v},   {"V2E", &g->v2e}, {"V2C", &g->v2c}};
    int compared = 0;
    for (const auto& [name, values] : r.at("tables").items()) {
      EXPECT_EQ(values.get<std::vector<std::int32_t>>(), *tables.at(name)) << name;
      ++compared;
    }
    EXPECT_GE(compared, 2);
    const std::map<std::string, dif::Dimension> dims = {{"cell", dif::Dimension::Cell},
                                                        {"edge", dif::Dimension::Edge},
                                                        {"vertex", dif::Dimension::Vertex}};
    int zones = 0;
    for (const auto& [dim, by_zone] : r.at("zones").items())
      for (const auto& [zone, range] : by_zone.items()) {
        const dif::Zone z = dif::zone_from_name(zone);
        EXPECT_EQ(g->start_index(dims.at(dim), z), range[0].get<int>()) << dim << " " << zone;
        EXPECT_EQ(g->end_index(dims.at(dim), z), range[1].get<int>()) << dim << " " << zone;
        ++zones;
      }
    EXPECT_EQ(zones, 35);  // cells and vertices 10 zones each, edges 15
  }
}

// What a file lacks is computed as the generator computes it: on the global file the same as
// compute_geometry from the read positions; on the limited-area file the normals of the
// boundary edges too, and the clipped dual cells; NaN in edge_system_orientation (as in DWD's
// files at the boundary) taken from the geometry.
TEST(DiffusionGridFile, WhatTheFileLacksIsComputed) {
  ScratchDir dir;
  const std::vector<std::string> geometry = {"cell_area",
                                             "dual_area",
                                             "edge_length",
                                             "dual_edge_length",
                                             "edge_cell_distance",
                                             "edge_vert_distance",
                                             "edge_primal_normal_cartesian_x",
                                             "edge_dual_normal_cartesian_y",
                                             "zonal_normal_primal_edge",
                                             "orientation_of_normal",
                                             "edge_system_orientation",
                                             "edge_orientation",
                                             "cell_circumcenter_cartesian_x",
                                             "edge_middle_cartesian_y",
                                             "cartesian_z_vertices"};
  copy_without(kGlobalFile, dir.file("global.nc"), geometry);
  const dif::Grid lean = dif::read_grid_file(dir.file("global.nc"));
  dif::Grid expected = global_file_grid();
  for (std::int64_t i = 0; i < expected.num_cells; ++i)
    dif::detail::put(expected.cell_center, i,
                     dif::detail::from_lat_lon(expected.cell_lat[i], expected.cell_lon[i]));
  for (std::int64_t i = 0; i < expected.num_edges; ++i)
    dif::detail::put(
        expected.edge_center, i,
        dif::detail::from_lat_lon(expected.edge_center_lat[i], expected.edge_center_lon[i]));
  for (std::int64_t i = 0; i < expected.num_vertices; ++i)
    dif::detail::put(expected.vertex_center, i,
                     dif::detail::from_lat_lon(expected.vertex_lat[i], expected.vertex_lon[i]));
  dif::detail::compute_geometry(expected);
  grid_checks::expect_same_grid(lean, expected);

  copy_without(
      kLamFile, dir.file("lam.nc"),
      {"dual_area", "dual_edge_length", "edge_cell_distance", "edge_primal_normal_cartesian_x",
       "meridional_normal_dual_edge", "edge_system_orientation"},
      [&](int id) {
        // edge_system_orientation as doubles with NaN on the boundary edges.
        int dim = 0, var = 0;
        nc_inq_dimid(id, "edge", &dim);
        nc_def_var(id, "edge_system_orientation", NC_DOUBLE, 1, &dim, &var);
        nc_enddef(id);
        const dif::Grid& f = lam_file_grid();
        std::vector<double> o(f.tangent_orientation.begin(), f.tangent_orientation.end());
        for (std::int64_t e = 0; e < f.num_edges; ++e)
          if (f.e2c[2 * e + 1] < 0) o[e] = NAN;
        nc_put_var_double(id, var, o.data());
      });
  const dif::Grid lam = dif::read_grid_file(dir.file("lam.nc"));
  const dif::Grid& file = lam_file_grid();
  EXPECT_EQ(lam.tangent_orientation, file.tangent_orientation);
  double normals = 0, components = 0, dual = 0, dual_edges = 0;
  for (std::int64_t e = 0; e < lam.num_edges; ++e) {
    for (int d = 0; d < 3; ++d) {
      normals = std::max(normals, std::abs(lam.primal_cart_normal[3 * e + d] -
                                           file.primal_cart_normal[3 * e + d]));
    }
    components = std::max(components, std::abs(lam.dual_normal_y[e] - file.dual_normal_y[e]));
    dual_edges =
        std::max(dual_edges, std::abs(lam.dual_edge_length[e] / file.dual_edge_length[e] - 1));
  }
  for (std::int64_t v = 0; v < lam.num_vertices; ++v)
    dual = std::max(dual, std::abs(lam.dual_area[v] / file.dual_area[v] - 1));
  std::printf(
      "R2B2 limited-area file: computed normals differ by %.1e, dual normal components by %.1e, "
      "clipped dual edges by %.1e (relative), dual areas from the file's kite sums by %.1e\n",
      normals, components, dual_edges, dual);
  EXPECT_LE(normals, 1e-13);
  EXPECT_LE(components, 1e-13);
  EXPECT_LE(dual_edges, 1e-12);
  EXPECT_LE(dual, 1e-3);
  for (double a : lam.dual_area) ASSERT_GT(a, 0);
}

TEST(DiffusionGridFile, BadFilesAreRefusedByName) {
  ScratchDir dir;
  const dif::Grid g = dif::icosahedral_grid(1, 0);  // 20 cells, 30 edges, 12 vertices
  const std::string good = dir.file("good.nc");
  dif::write_grid_file(g, good);
  int made = 0;
  // A copy of the good file, changed.
  auto corrupt = [&](const std::function<void(int)>& change) {
    const std::string path = dir.file(fmt::format("bad{}.nc", made++));
    std::filesystem::copy_file(good, path);
    change_file(path, change);
    return path;
  };
  auto expect_refused = [](const std::string& path, const std::string& fault) {
    const std::string m = invalid_argument([&] { dif::read_grid_file(path); });
    EXPECT_EQ(m.rfind("path: ", 0), 0u) << m;
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find(fault), std::string::npos) << "expected '" << fault << "' in: " << m;
  };

  expect_refused(dir.file("absent.nc"), "no such file");
  expect_refused(dir.path().string(), "directory");
  {
    std::ofstream(dir.file("text.nc")) << "clon clat, but not NetCDF\n";
    expect_refused(dir.file("text.nc"), "not a NetCDF file");
  }
  {
    // A file cut short, as by an interrupted copy.
    std::filesystem::copy_file(good, dir.file("short.nc"));
    std::filesystem::resize_file(dir.file("short.nc"), std::filesystem::file_size(good) / 2);
    expect_refused(dir.file("short.nc"), "not a NetCDF file");
  }
  {
    int id = 0;
    ASSERT_EQ(nc_create(dir.file("empty.nc").c_str(), NC_NETCDF4, &id), NC_NOERR);
    nc_close(id);
    expect_refused(dir.file("empty.nc"), "the dimension 'cell' is missing");
  }
  // Variables missing, or of a shape that disagrees with the counts.
  auto without = [&](const char* skip, const std::function<void(int)>& add = {}) {
    const std::string path = dir.file(fmt::format("bad{}.nc", made++));
    copy_without(good, path, {skip}, add);
    return path;
  };
  expect_refused(without("edge_of_cell"), "the variable 'edge_of_cell' is missing");
  expect_refused(without("vlon"), "the variable 'vlon' is missing");
  expect_refused(without("cells_of_vertex"), "the variable 'cells_of_vertex' is missing");
  // edge_of_cell over (nv, edge): its shape disagrees with the cell count.
  expect_refused(without("edge_of_cell",
                         [](int id) {
                           int dims[2], var = 0;
                           nc_inq_dimid(id, "nv", &dims[0]);
                           nc_inq_dimid(id, "edge", &dims[1]);
                           nc_def_var(id, "edge_of_cell", NC_INT, 2, dims, &var);
                         }),
                 "'edge_of_cell' has the shape (3, 30), inconsistent with cell = 20");
  expect_refused(without("cell_area",
                         [](int id) {
                           int dim = 0, var = 0;
                           nc_inq_dimid(id, "vertex", &dim);
                           nc_def_var(id, "cell_area", NC_DOUBLE, 1, &dim, &var);
                         }),
                 "'cell_area' has the shape (12), inconsistent with cell = 20");
  // A copy that leaves nothing out reads as the original.
  grid_checks::expect_same_grid(dif::read_grid_file(without("")), g);
  // Indices beyond the counts, negative, or missing where every entry needs one.
  auto put_int = [](const char* name, std::size_t row, std::size_t col, int value) {
    return [=](int id) {
      nc_enddef(id);
      const std::size_t index[2] = {row, col};
      ASSERT_EQ(nc_put_var1_int(id, varid(id, name), index, &value), NC_NOERR);
    };
  };
  expect_refused(corrupt(put_int("edge_of_cell", 1, 5, 31)),
                 "'edge_of_cell' holds the index 31 at (2, 6) (1-based), outside 1..30");
  expect_refused(corrupt(put_int("cells_of_vertex", 0, 3, 21)), "outside 1..20");
  expect_refused(corrupt(put_int("adjacent_cell_of_edge", 1, 0, -3)), "the index -3");
  expect_refused(corrupt(put_int("vertex_of_cell", 2, 0, 0)),
                 "'vertex_of_cell' has no index at (3, 1)");
  // NaN positions and geometry.
  auto put_double = [](const char* name, std::size_t i, double value) {
    return [=](int id) {
      nc_enddef(id);
      const std::size_t index[1] = {i};
      ASSERT_EQ(nc_put_var1_double(id, varid(id, name), index, &value), NC_NOERR);
    };
  };
  expect_refused(corrupt(put_double("cell_area", 4, NAN)), "'cell_area' holds nan at entry 4");
  expect_refused(corrupt(put_double("clat", 2, NAN)), "'clat' holds nan at entry 2");
  expect_refused(corrupt(put_double("edge_length", 0, INFINITY)), "'edge_length' holds inf");
  // The radius argument.
  EXPECT_EQ(invalid_argument([&] { dif::read_grid_file(good, -1.0); }).rfind("radius: ", 0), 0u);
  EXPECT_EQ(invalid_argument([&] { dif::read_grid_file(good, NAN); }).rfind("radius: ", 0), 0u);
  EXPECT_EQ(invalid_argument([&] { dif::read_grid_file(""); }).rfind("path: ", 0), 0u);
  // The good file still reads.
  grid_checks::expect_same_grid(dif::read_grid_file(good), g);
}

TEST(DiffusionGridFile, WriteRefusesBadGridsAndLeavesTheTargetAlone) {
  ScratchDir dir;
  const std::string path = dir.file("target.nc");
  std::ofstream(path) << "old contents\n";
  dif::Grid g = dif::icosahedral_grid(1, 0);
  g.dual_area.pop_back();
  const std::string m = invalid_argument([&] { dif::write_grid_file(g, path); });
  EXPECT_EQ(m.rfind("grid: ", 0), 0u) << m;
  EXPECT_NE(m.find("dual_area"), std::string::npos) << m;
  g = dif::icosahedral_grid(1, 0);
  g.c2e2c[5] = -2;  // neither a cell nor -1
  const std::string index = invalid_argument([&] { dif::write_grid_file(g, path); });
  EXPECT_EQ(index.rfind("grid: expected c2e2c indices in -1..19, got -2 at entry 5", 0), 0u)
      << index;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "old contents");
  EXPECT_THROW(dif::write_grid_file(dif::icosahedral_grid(1, 0), dir.file("no/such/dir/g.nc")),
               sciproxy::IoError);
  EXPECT_EQ(invalid_argument([&] {
              dif::write_grid_file(dif::icosahedral_grid(1, 0), dir.file(""));
            }).rfind("path: ", 0),
            0u);
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path()))
    ++files;
  EXPECT_EQ(files, 1) << "no temporary file left behind";
}
