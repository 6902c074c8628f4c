// ICON grid files (NetCDF, as DWD's grid generator and icon-grid-generator write them) read into
// a Grid the way ICON4Py's GridManager reads them (icon4py.model.common.grid.grid_manager and
// gridfile, v0.4.1, one process), and a Grid written back as such a file.
//
//   tables: the file's (k, n) arrays of 1-based indices, transposed to (n, k); 0 and -1 mark a
//     missing neighbour and become -1 (ICON4Py's ToZeroBasedIndexTransformation, its skip
//     values kept); the file's numbering and order are kept
//   derived (grid_manager._get_derived_connectivities): C2E2CO = (the cell, C2E2C);
//     E2C2V = (E2V, then the first two entries of C2V[E2C[0]] ++ C2V[E2C[1]] that are not on the
//     edge), a missing cell contributing three -1
//   vertex edge_orientation and refin_ctrl: as stored, no offset
//   geometry: from the file where present (lengths and areas scaled by radius / sphere_radius),
//     else computed from the positions as the generator does (src/diffusion/geometry.cpp)
//
// The writer writes the same variables, 1-based with -1 for a missing neighbour, into a
// temporary file in the target's directory renamed onto the target when complete.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netcdf.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "diffusion/geometry.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion {

namespace {

namespace fs = std::filesystem;
using detail::at;
using detail::from_lat_lon;
using detail::put;
using detail::Vec;

// ICON's refinement-control ranges of start_idx/end_idx (mo_impl_constants.f90): the entry of
// value v is at v - min; cells -8..5, edges -13..10, vertices -7..5.
struct GrfRange {
  const char* dim;
  int min, size;
};
constexpr GrfRange kCellRange{"cell_grf", -8, 14}, kEdgeRange{"edge_grf", -13, 24},
    kVertexRange{"vert_grf", -7, 13};

// An open NetCDF file for reading; every fault is an InvalidArgument naming the file.
class GridFileReader {
 public:
  explicit GridFileReader(const std::string& path) : path_(path) {
    std::error_code ec;
    if (!fs::exists(path, ec)) fail("no such file");
    if (fs::is_directory(path, ec)) fail("a directory, not a file");
    const int status = nc_open(path.c_str(), NC_NOWRITE, &id_);
    if (status != NC_NOERR) {
      id_ = -1;
      fail(fmt::format("not a NetCDF file that can be opened ({})", nc_strerror(status)));
    }
  }
  ~GridFileReader() {
    if (id_ >= 0) nc_close(id_);
  }
  GridFileReader(const GridFileReader&) = delete;
  GridFileReader& operator=(const GridFileReader&) = delete;

  [[noreturn]] void fail(const std::string& fault) const {
    throw InvalidArgument(
        fmt::format("path: expected an ICON grid file, got '{}': {}", path_, fault));
  }

  std::int32_t dimension(const char* name) const {
    int dim = 0;
    if (nc_inq_dimid(id_, name, &dim) != NC_NOERR)
      fail(fmt::format("the dimension '{}' is missing", name));
    std::size_t length = 0;
    check(nc_inq_dimlen(id_, dim, &length), name);
    if (length > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max() / 6))
      fail(fmt::format("the dimension '{}' ({}) is too large", name, length));
    return static_cast<std::int32_t>(length);
  }

  bool has(const char* name) const {
    int var = 0;
    return nc_inq_varid(id_, name, &var) == NC_NOERR;
  }

  // A variable's values, checked to have the shape (rows, n) (rows 0: the shape (n)); n_name
  // names the count in messages.
  std::vector<double> doubles(const char* name, int rows, std::int32_t n,
                              const char* n_name) const {
    const int var = shaped(name, rows, n, n_name);
    std::vector<double> data(static_cast<std::size_t>(rows ? rows : 1) * n);
    if (!data.empty()) check(nc_get_var_double(id_, var, data.data()), name);
    return data;
  }
  std::vector<int> ints(const char* name, int rows, std::int32_t n, const char* n_name) const {
    const int var = shaped(name, rows, n, n_name);
    std::vector<int> data(static_cast<std::size_t>(rows ? rows : 1) * n);
    if (!data.empty()) {
      const int status = nc_get_var_int(id_, var, data.data());
      if (status == NC_ERANGE)
        fail(
            fmt::format("the variable '{}' holds values that are not integers of int range "
                        "(NaN or too large)",
                        name));
      check(status, name);
    }
    return data;
  }

  // Finite values, or a message naming the first that is not.
  void require_finite(const char* name, const std::vector<double>& x) const {
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!std::isfinite(x[i]))
        fail(fmt::format("the variable '{}' holds {} at entry {}", name, x[i], i));
  }

  bool attribute(const char* name, double& value) const {
    std::size_t length = 0;
    if (nc_inq_attlen(id_, NC_GLOBAL, name, &length) != NC_NOERR || length != 1) return false;
    return nc_get_att_double(id_, NC_GLOBAL, name, &value) == NC_NOERR;
  }

 private:
  void check(int status, const char* what) const {
    if (status != NC_NOERR) fail(fmt::format("reading '{}': {}", what, nc_strerror(status)));
  }

  int shaped(const char* name, int rows, std::int32_t n, const char* n_name) const {
    int var = 0;
    if (nc_inq_varid(id_, name, &var) != NC_NOERR)
      fail(fmt::format("the variable '{}' is missing", name));
    int ndims = 0;
    check(nc_inq_varndims(id_, var, &ndims), name);
    std::vector<int> dims(std::max(ndims, 1));
    check(nc_inq_vardimid(id_, var, dims.data()), name);
    std::vector<std::size_t> shape(ndims);
    for (int i = 0; i < ndims; ++i) check(nc_inq_dimlen(id_, dims[i], &shape[i]), name);
    const std::vector<std::size_t> expected =
        rows ? std::vector<std::size_t>{static_cast<std::size_t>(rows), static_cast<std::size_t>(n)}
             : std::vector<std::size_t>{static_cast<std::size_t>(n)};
    if (shape != expected) {
      auto text = [](const std::vector<std::size_t>& s) {
        return fmt::format("({})", fmt::join(s, ", "));
      };
      fail(
          fmt::format("the variable '{}' has the shape {}, inconsistent with {} = {} "
                      "(expected {})",
                      name, text(shape), n_name, n, text(expected)));
    }
    return var;
  }

  std::string path_;
  int id_ = -1;
};

// A (k, n) table of 1-based indices into `targets` entities, as (n, k) zero-based with -1 for
// 0 and -1; refuses other indices outside 1..targets, and missing entries where `complete`.
std::vector<std::int32_t> read_table(const GridFileReader& r, const char* name, int k,
                                     std::int32_t n, const char* n_name, std::int32_t targets,
                                     bool complete) {
  const std::vector<int> file = r.ints(name, k, n, n_name);
  std::vector<std::int32_t> table(static_cast<std::size_t>(k) * n);
  for (int i = 0; i < k; ++i)
    for (std::int64_t e = 0; e < n; ++e) {
      const int v = file[i * static_cast<std::int64_t>(n) + e];
      if (v == 0 || v == -1) {
        if (complete)
          r.fail(
              fmt::format("the variable '{}' has no index at ({}, {}) (1-based), where every "
                          "entry must have one",
                          name, i + 1, e + 1));
        table[e * k + i] = -1;
      } else if (v < 1 || v > targets) {
        r.fail(
            fmt::format("the variable '{}' holds the index {} at ({}, {}) (1-based), outside "
                        "1..{} (0 or -1 marks a missing neighbour)",
                        name, v, i + 1, e + 1, targets));
      } else {
        table[e * k + i] = v - 1;
      }
    }
  return table;
}

// A (k, n) variable of doubles transposed to (n, k).
std::vector<double> transposed(const std::vector<double>& file, int k, std::int64_t n) {
  std::vector<double> out(file.size());
  for (int i = 0; i < k; ++i)
    for (std::int64_t e = 0; e < n; ++e) out[e * k + i] = file[i * n + e];
  return out;
}

}  // namespace

Grid read_grid_file(const std::string& path, double radius) {
  require(std::isfinite(radius) && radius >= 0, "radius",
          "0 (the file's sphere_radius) or a positive, finite sphere radius",
          fmt::format("{}", radius));
  require(!path.empty(), "path", "an ICON grid file", "an empty string");
  const GridFileReader r(path);
  Grid g;
  const std::int32_t nc = r.dimension("cell"), ne = r.dimension("edge"), nv = r.dimension("vertex");
  if (nc < 1 || ne < 1 || nv < 1)
    r.fail(fmt::format("an empty grid ({} cells, {} edges, {} vertices)", nc, ne, nv));
  g.num_cells = nc, g.num_edges = ne, g.num_vertices = nv;
  double value = 0;
  if (r.attribute("grid_root", value) && value >= 0 && value < 1e6) g.n = static_cast<int>(value);
  if (r.attribute("grid_level", value) && value >= 0 && value < 1e6) g.k = static_cast<int>(value);
  double file_radius = kEarthRadius;
  if (r.attribute("sphere_radius", value) && std::isfinite(value) && value > 0) file_radius = value;
  g.radius = radius > 0 ? radius : file_radius;
  const double scale = g.radius / file_radius;

  // Tables.
  g.c2e = read_table(r, "edge_of_cell", 3, nc, "cell", ne, true);
  g.c2v = read_table(r, "vertex_of_cell", 3, nc, "cell", nv, true);
  g.c2e2c = read_table(r, "neighbor_cell_index", 3, nc, "cell", nc, false);
  g.e2c = read_table(r, "adjacent_cell_of_edge", 2, ne, "edge", nc, false);
  g.e2v = read_table(r, "edge_vertices", 2, ne, "edge", nv, true);
  g.v2e = read_table(r, "edges_of_vertex", 6, nv, "vertex", ne, false);
  g.v2c = read_table(r, "cells_of_vertex", 6, nv, "vertex", nc, false);
  detail::derive_tables(g);

  // Positions: latitude and longitude always (as ICON4Py); the unit vectors from the file's
  // cartesian coordinates where present, else from latitude and longitude.
  auto coordinate = [&](const char* name, std::int32_t n, const char* n_name) {
    std::vector<double> x = r.doubles(name, 0, n, n_name);
    r.require_finite(name, x);
    return x;
  };
  g.cell_lat = coordinate("clat", nc, "cell");
  g.cell_lon = coordinate("clon", nc, "cell");
  g.vertex_lat = coordinate("vlat", nv, "vertex");
  g.vertex_lon = coordinate("vlon", nv, "vertex");
  g.edge_center_lat = coordinate("elat", ne, "edge");
  g.edge_center_lon = coordinate("elon", ne, "edge");
  auto centres = [&](const char* const names[3], const std::vector<double>& lat,
                     const std::vector<double>& lon, std::int32_t n, const char* n_name) {
    std::vector<double> xyz(3 * std::int64_t{n});
    if (r.has(names[0]) && r.has(names[1]) && r.has(names[2])) {
      for (int d = 0; d < 3; ++d) {
        const std::vector<double> x = coordinate(names[d], n, n_name);
        for (std::int64_t i = 0; i < n; ++i) xyz[3 * i + d] = x[i];
      }
      for (std::int64_t i = 0; i < n; ++i) {
        const double length = detail::norm(at(xyz, i));
        if (std::abs(length - 1.0) > 1e-6)
          r.fail(
              fmt::format("the variable '{}' and its y, z are not a unit vector at entry {} "
                          "(length {})",
                          names[0], i, length));
      }
    } else {
      for (std::int64_t i = 0; i < n; ++i) put(xyz, i, from_lat_lon(lat[i], lon[i]));
    }
    return xyz;
  };
  static const char* const kCellXyz[3] = {"cell_circumcenter_cartesian_x",
                                          "cell_circumcenter_cartesian_y",
                                          "cell_circumcenter_cartesian_z"};
  static const char* const kEdgeXyz[3] = {"edge_middle_cartesian_x", "edge_middle_cartesian_y",
                                          "edge_middle_cartesian_z"};
  static const char* const kVertexXyz[3] = {"cartesian_x_vertices", "cartesian_y_vertices",
                                            "cartesian_z_vertices"};
  g.cell_center = centres(kCellXyz, g.cell_lat, g.cell_lon, nc, "cell");
  g.edge_center = centres(kEdgeXyz, g.edge_center_lat, g.edge_center_lon, ne, "edge");
  g.vertex_center = centres(kVertexXyz, g.vertex_lat, g.vertex_lon, nv, "vertex");

  // Geometry: what the file has, scaled to the radius; the rest computed.
  detail::GeometryFields missing;
  auto measure = [&](const char* name, int rows, std::int32_t n, const char* n_name, double power,
                     std::vector<double>& out, bool& compute) {
    if (!r.has(name)) return;
    std::vector<double> x = r.doubles(name, rows, n, n_name);
    r.require_finite(name, x);
    if (scale != 1.0) {
      const double f = std::pow(scale, power);
      for (double& v : x) v *= f;
    }
    out = rows ? transposed(x, rows, n) : std::move(x);
    compute = false;
  };
  measure("cell_area", 0, nc, "cell", 2, g.cell_area, missing.cell_area);
  measure("dual_area", 0, nv, "vertex", 2, g.dual_area, missing.dual_area);
  measure("edge_length", 0, ne, "edge", 1, g.edge_length, missing.edge_length);
  measure("dual_edge_length", 0, ne, "edge", 1, g.dual_edge_length, missing.dual_edge_length);
  measure("edge_cell_distance", 2, ne, "edge", 1, g.edge_cell_length, missing.edge_cell_length);
  measure("edge_vert_distance", 2, ne, "edge", 1, g.edge_vert_length, missing.edge_vert_length);
  static const char* const kNormals[6] = {
      "edge_primal_normal_cartesian_x", "edge_primal_normal_cartesian_y",
      "edge_primal_normal_cartesian_z", "edge_dual_normal_cartesian_x",
      "edge_dual_normal_cartesian_y",   "edge_dual_normal_cartesian_z"};
  bool all_normals = true;
  for (const char* name : kNormals) all_normals = all_normals && r.has(name);
  if (all_normals) {
    g.primal_cart_normal.resize(3 * std::int64_t{ne});
    g.dual_cart_normal.resize(3 * std::int64_t{ne});
    for (int d = 0; d < 6; ++d) {
      const std::vector<double> x = coordinate(kNormals[d], ne, "edge");
      auto& out = d < 3 ? g.primal_cart_normal : g.dual_cart_normal;
      for (std::int64_t e = 0; e < ne; ++e) out[3 * e + d % 3] = x[e];
    }
    missing.cart_normals = false;
  }
  static const char* const kComponents[4] = {
      "zonal_normal_primal_edge", "meridional_normal_primal_edge", "zonal_normal_dual_edge",
      "meridional_normal_dual_edge"};
  bool all_components = true;
  for (const char* name : kComponents) all_components = all_components && r.has(name);
  if (all_components) {
    g.primal_normal_x = coordinate(kComponents[0], ne, "edge");
    g.primal_normal_y = coordinate(kComponents[1], ne, "edge");
    g.dual_normal_x = coordinate(kComponents[2], ne, "edge");
    g.dual_normal_y = coordinate(kComponents[3], ne, "edge");
    missing.normal_components = false;
  }
  if (r.has("orientation_of_normal")) {
    g.edge_orientation.resize(3 * std::int64_t{nc});
    const std::vector<int> o = r.ints("orientation_of_normal", 3, nc, "cell");
    for (int i = 0; i < 3; ++i)
      for (std::int64_t c = 0; c < nc; ++c)
        g.edge_orientation[3 * c + i] = o[i * std::int64_t{nc} + c];
    missing.edge_orientation = false;
  }
  if (r.has("edge_orientation")) {
    g.vertex_edge_orientation.resize(6 * std::int64_t{nv});
    const std::vector<int> o = r.ints("edge_orientation", 6, nv, "vertex");
    for (int i = 0; i < 6; ++i)
      for (std::int64_t v = 0; v < nv; ++v)
        g.vertex_edge_orientation[6 * v + i] = o[i * std::int64_t{nv} + v];
    missing.vertex_edge_orientation = false;
  }
  // DWD's files may hold NaN in edge_system_orientation on boundary edges (ICON4Py's note): those
  // entries are computed, the others read. tangent_orientation is always computed first.
  std::vector<double> tangent;
  if (r.has("edge_system_orientation"))
    tangent = r.doubles("edge_system_orientation", 0, ne, "edge");
  detail::compute_geometry(g, missing);
  for (std::size_t e = 0; e < tangent.size(); ++e)
    if (std::isfinite(tangent[e])) g.tangent_orientation[e] = static_cast<std::int32_t>(tangent[e]);

  // Refinement control (all 0 where the file has none: a global grid).
  auto control = [&](const char* name, std::int32_t n, const char* n_name) {
    if (!r.has(name)) return std::vector<std::int32_t>(n, 0);
    const std::vector<int> x = r.ints(name, 0, n, n_name);
    return std::vector<std::int32_t>(x.begin(), x.end());
  };
  g.cell_refin_ctrl = control("refin_c_ctrl", nc, "cell");
  g.edge_refin_ctrl = control("refin_e_ctrl", ne, "edge");
  g.vertex_refin_ctrl = control("refin_v_ctrl", nv, "vertex");
  set_domain_bounds(g);
  return g;
}

namespace {

// A NetCDF-4 file written under a temporary name in the target's directory and renamed onto the
// target by commit(); destroyed before commit, it removes the temporary and leaves the target.
class AtomicGridFileWriter {
 public:
  explicit AtomicGridFileWriter(const std::string& path) : path_(path) {
    if (path.empty()) throw_invalid_argument("path", "a file name", "an empty string");
    const fs::path target(path);
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::error_code ec;
    if (fs::is_directory(target, ec))
      throw_invalid_argument("path", "a file name",
                             fmt::format("'{}', which is a directory", path));
    if (!fs::is_directory(dir, ec))
      throw IoError(fmt::format("path: cannot write '{}': the directory '{}' does not exist", path,
                                dir.string()));
    static std::atomic<unsigned> counter{0};
    tmp_ = dir / fmt::format(".{}.tmp{}.{}", target.filename().string(), getpid(), counter++);
    fs::remove(tmp_, ec);
    const int status = nc_create(tmp_.c_str(), NC_NETCDF4 | NC_CLOBBER, &id_);
    if (status != NC_NOERR) {
      id_ = -1;
      fs::remove(tmp_, ec);
      throw IoError(
          fmt::format("path: cannot write '{}': {}", path,
                      access(dir.c_str(), W_OK) != 0
                          ? fmt::format("the directory '{}' is not writable", dir.string())
                          : std::string(nc_strerror(status))));
    }
  }
  ~AtomicGridFileWriter() {
    if (id_ >= 0) nc_close(id_);
    if (committed_) return;
    std::error_code ec;
    fs::remove(tmp_, ec);
  }
  AtomicGridFileWriter(const AtomicGridFileWriter&) = delete;
  AtomicGridFileWriter& operator=(const AtomicGridFileWriter&) = delete;

  int id() const { return id_; }
  void check(int status, const std::string& doing) const {
    if (status != NC_NOERR)
      throw IoError(
          fmt::format("path: could not write '{}' ({}): {}", path_, doing, nc_strerror(status)));
  }
  void commit() {
    const int status = nc_close(id_);
    id_ = -1;
    check(status, "closing it");
    std::error_code ec;
    fs::rename(tmp_, path_, ec);
    if (ec)
      throw IoError(fmt::format("path: could not write '{}' (renaming the temporary file: {})",
                                path_, ec.message()));
    committed_ = true;
  }

 private:
  std::string path_;
  fs::path tmp_;
  int id_ = -1;
  bool committed_ = false;
};

// ICON's start_idx/end_idx for one dimension (1-based, as icon-grid-generator writes them): for
// each ordered value v >= 1 the first and last entity with refin_ctrl v; for v = 0 the first
// entity of the unordered rest (0, or beyond the ordered values) to the end; (n + 1, n) where
// there is none.
void start_end(const std::vector<std::int32_t>& control, const GrfRange& range,
               std::vector<int>& start, std::vector<int>& end) {
  const int n = static_cast<int>(control.size()), max = range.min + range.size - 1;
  start.assign(range.size, n + 1);
  end.assign(range.size, n);
  for (int e = 0; e < n; ++e) {
    const int v = control[e];
    const bool ordered = v >= 1 && v <= max;
    const int slot = ordered ? v - range.min : -range.min;
    if (start[slot] == n + 1) start[slot] = e + 1;
    end[slot] = ordered ? e + 1 : n;
  }
}

// A deterministic identifier for uuidOfHGrid (FNV-1a over the tables and the positions).
std::string grid_uuid(const Grid& g) {
  std::uint64_t h[2] = {1469598103934665603ull, 1099511628211ull * 31};
  auto mix = [&](const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) {
      h[0] = (h[0] ^ p[i]) * 1099511628211ull;
      h[1] = (h[1] ^ p[i]) * 1099511628211ull + (h[0] >> 29);
    }
  };
  mix(g.c2v.data(), g.c2v.size() * sizeof(std::int32_t));
  mix(g.vertex_center.data(), g.vertex_center.size() * sizeof(double));
  mix(g.cell_refin_ctrl.data(), g.cell_refin_ctrl.size() * sizeof(std::int32_t));
  const std::string hex = fmt::format("{:016x}{:016x}", h[0], h[1]);
  return fmt::format("{}-{}-{}-{}-{}", hex.substr(0, 8), hex.substr(8, 4), hex.substr(12, 4),
                     hex.substr(16, 4), hex.substr(20, 12));
}

}  // namespace

void write_grid_file(const Grid& g, const std::string& path) {
  detail::require_complete(g, "grid");
  AtomicGridFileWriter w(path);
  const int id = w.id();
  const std::size_t nc = g.num_cells, ne = g.num_edges, nv = g.num_vertices;

  struct DimSpec {
    const char* name;
    std::size_t length;
  };
  const DimSpec dim_specs[] = {{"cell", nc},     {"vertex", nv},   {"edge", ne},
                               {"nc", 2},        {"nv", 3},        {"ne", 6},
                               {"no", 4},        {"max_chdom", 1}, {"cell_grf", 14},
                               {"edge_grf", 24}, {"vert_grf", 13}};
  int dim[11];
  for (int i = 0; i < 11; ++i)
    w.check(nc_def_dim(id, dim_specs[i].name, dim_specs[i].length, &dim[i]), dim_specs[i].name);
  enum { kCell, kVertex, kEdge, kNc, kNv, kNe, kNo, kMaxChdom, kCellGrf, kEdgeGrf, kVertGrf };

  // Every variable is defined first, then written: the data to write, by variable.
  std::vector<std::pair<int, std::vector<double>>> real_data;
  std::vector<std::pair<int, std::vector<int>>> int_data;
  auto define = [&](const char* name, nc_type type, std::initializer_list<int> dims,
                    const char* long_name, const char* units) {
    int var = 0;
    const std::vector<int> d(dims);
    w.check(nc_def_var(id, name, type, static_cast<int>(d.size()), d.data(), &var), name);
    w.check(nc_put_att_text(id, var, "long_name", std::strlen(long_name), long_name), name);
    if (units) w.check(nc_put_att_text(id, var, "units", std::strlen(units), units), name);
    return var;
  };
  // (n, k) row-major in memory, (k, n) in the file.
  auto file_order = [](const auto& x, int k) {
    using T = typename std::decay_t<decltype(x)>::value_type;
    const std::size_t n = x.size() / k;
    std::vector<T> out(x.size());
    for (std::size_t e = 0; e < n; ++e)
      for (int i = 0; i < k; ++i) out[i * n + e] = x[e * k + i];
    return out;
  };
  auto reals = [&](const char* name, std::initializer_list<int> dims, const char* long_name,
                   const char* units, std::vector<double> data) {
    real_data.emplace_back(define(name, NC_DOUBLE, dims, long_name, units), std::move(data));
  };
  auto integers = [&](const char* name, std::initializer_list<int> dims, const char* long_name,
                      std::vector<int> data) {
    int_data.emplace_back(define(name, NC_INT, dims, long_name, nullptr), std::move(data));
  };
  // 1-based, -1 for a missing neighbour.
  auto table = [&](const char* name, int k_dim, int n_dim, int k, const char* long_name,
                   const std::vector<std::int32_t>& t) {
    std::vector<int> one_based(t.size());
    for (std::size_t i = 0; i < t.size(); ++i) one_based[i] = t[i] >= 0 ? t[i] + 1 : -1;
    integers(name, {k_dim, n_dim}, long_name, file_order(one_based, k));
  };
  auto component = [](const std::vector<double>& xyz, int d) {
    std::vector<double> out(xyz.size() / 3);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = xyz[3 * i + d];
    return out;
  };

  reals("clon", {dim[kCell]}, "center longitude", "radian", g.cell_lon);
  reals("clat", {dim[kCell]}, "center latitude", "radian", g.cell_lat);
  reals("vlon", {dim[kVertex]}, "vertex longitude", "radian", g.vertex_lon);
  reals("vlat", {dim[kVertex]}, "vertex latitude", "radian", g.vertex_lat);
  reals("elon", {dim[kEdge]}, "edge midpoint longitude", "radian", g.edge_center_lon);
  reals("elat", {dim[kEdge]}, "edge midpoint latitude", "radian", g.edge_center_lat);
  static const char* const kAxes = "xyz";
  for (int d = 0; d < 3; ++d) {
    const std::string c = fmt::format("cell_circumcenter_cartesian_{}", kAxes[d]);
    const std::string e = fmt::format("edge_middle_cartesian_{}", kAxes[d]);
    const std::string v = fmt::format("cartesian_{}_vertices", kAxes[d]);
    reals(c.c_str(), {dim[kCell]}, "cell centre, cartesian (unit sphere)", "1",
          component(g.cell_center, d));
    reals(e.c_str(), {dim[kEdge]}, "edge midpoint, cartesian (unit sphere)", "1",
          component(g.edge_center, d));
    reals(v.c_str(), {dim[kVertex]}, "vertex, cartesian (unit sphere)", "1",
          component(g.vertex_center, d));
  }
  table("edge_of_cell", dim[kNv], dim[kCell], 3, "edges of each cell", g.c2e);
  table("vertex_of_cell", dim[kNv], dim[kCell], 3, "vertices of each cell", g.c2v);
  table("neighbor_cell_index", dim[kNv], dim[kCell], 3, "cell neighbor index", g.c2e2c);
  table("adjacent_cell_of_edge", dim[kNc], dim[kEdge], 2, "cells adjacent to each edge", g.e2c);
  table("edge_vertices", dim[kNc], dim[kEdge], 2, "vertices at the end of each edge", g.e2v);
  table("cells_of_vertex", dim[kNe], dim[kVertex], 6, "cells around each vertex", g.v2c);
  table("edges_of_vertex", dim[kNe], dim[kVertex], 6, "edges around each vertex", g.v2e);
  // The far end of each of the vertex's edges.
  std::vector<std::int32_t> v2e2v(g.v2e.size(), -1);
  for (std::size_t v = 0; v < nv; ++v)
    for (int i = 0; i < 6; ++i) {
      const std::int32_t e = g.v2e[6 * v + i];
      if (e >= 0)
        v2e2v[6 * v + i] = g.e2v[2 * std::size_t(e)] == static_cast<std::int32_t>(v)
                               ? g.e2v[2 * std::size_t(e) + 1]
                               : g.e2v[2 * std::size_t(e)];
    }
  table("vertices_of_vertex", dim[kNe], dim[kVertex], 6, "vertices around each vertex", v2e2v);

  reals("cell_area", {dim[kCell]}, "area of grid cell", "m2", g.cell_area);
  reals("dual_area", {dim[kVertex]}, "areas of dual hexagonal/pentagonal cells", "m2", g.dual_area);
  reals("edge_length", {dim[kEdge]}, "lengths of edges of triangular cells", "m", g.edge_length);
  reals("dual_edge_length", {dim[kEdge]}, "lengths of dual edges (distances between cell centres)",
        "m", g.dual_edge_length);
  reals("edge_cell_distance", {dim[kNc], dim[kEdge]},
        "distances between edge midpoint and the centres of the adjacent cells", "m",
        file_order(g.edge_cell_length, 2));
  reals("edge_vert_distance", {dim[kNc], dim[kEdge]},
        "distances between edge midpoint and the vertices of the edge", "m",
        file_order(g.edge_vert_length, 2));
  for (int d = 0; d < 3; ++d) {
    const std::string p = fmt::format("edge_primal_normal_cartesian_{}", kAxes[d]);
    const std::string t = fmt::format("edge_dual_normal_cartesian_{}", kAxes[d]);
    reals(p.c_str(), {dim[kEdge]}, "unit normal to the edge, cartesian", "1",
          component(g.primal_cart_normal, d));
    reals(t.c_str(), {dim[kEdge]}, "unit normal to the dual edge (edge tangent), cartesian", "1",
          component(g.dual_cart_normal, d));
  }
  reals("zonal_normal_primal_edge", {dim[kEdge]}, "zonal component of the edge normal", "1",
        g.primal_normal_x);
  reals("meridional_normal_primal_edge", {dim[kEdge]}, "meridional component of the edge normal",
        "1", g.primal_normal_y);
  reals("zonal_normal_dual_edge", {dim[kEdge]}, "zonal component of the dual edge normal", "1",
        g.dual_normal_x);
  reals("meridional_normal_dual_edge", {dim[kEdge]}, "meridional component of the dual edge normal",
        "1", g.dual_normal_y);
  integers("orientation_of_normal", {dim[kNv], dim[kCell]}, "orientations of normals to edges",
           file_order(std::vector<int>(g.edge_orientation.begin(), g.edge_orientation.end()), 3));
  integers("edge_system_orientation", {dim[kEdge]}, "edge system orientation",
           std::vector<int>(g.tangent_orientation.begin(), g.tangent_orientation.end()));
  integers(
      "edge_orientation", {dim[kNe], dim[kVertex]}, "edge orientation",
      file_order(
          std::vector<int>(g.vertex_edge_orientation.begin(), g.vertex_edge_orientation.end()), 6));
  integers("refin_c_ctrl", {dim[kCell]}, "refinement control flag for cells",
           std::vector<int>(g.cell_refin_ctrl.begin(), g.cell_refin_ctrl.end()));
  integers("refin_e_ctrl", {dim[kEdge]}, "refinement control flag for edges",
           std::vector<int>(g.edge_refin_ctrl.begin(), g.edge_refin_ctrl.end()));
  integers("refin_v_ctrl", {dim[kVertex]}, "refinement control flag for vertices",
           std::vector<int>(g.vertex_refin_ctrl.begin(), g.vertex_refin_ctrl.end()));
  struct Indices {
    const char *start_name, *end_name;
    const std::vector<std::int32_t>& control;
    GrfRange range;
    int grf_dim;
  };
  const Indices indices[] = {
      {"start_idx_c", "end_idx_c", g.cell_refin_ctrl, kCellRange, dim[kCellGrf]},
      {"start_idx_e", "end_idx_e", g.edge_refin_ctrl, kEdgeRange, dim[kEdgeGrf]},
      {"start_idx_v", "end_idx_v", g.vertex_refin_ctrl, kVertexRange, dim[kVertGrf]}};
  for (const Indices& x : indices) {
    std::vector<int> start, end;
    start_end(x.control, x.range, start, end);
    integers(x.start_name, {dim[kMaxChdom], x.grf_dim},
             "list of start indices for each refinement control level", std::move(start));
    integers(x.end_name, {dim[kMaxChdom], x.grf_dim},
             "list of end indices for each refinement control level", std::move(end));
  }

  // Global attributes (ICON4Py's GridManager reads uuidOfHGrid, grid_root, grid_level and
  // sphere_radius).
  auto text = [&](const char* name, const std::string& value) {
    w.check(nc_put_att_text(id, NC_GLOBAL, name, value.size(), value.c_str()), name);
  };
  auto integer = [&](const char* name, int value) {
    w.check(nc_put_att_int(id, NC_GLOBAL, name, NC_INT, 1, &value), name);
  };
  const std::string name = g.n > 0 ? fmt::format("R{:02d}B{:02d}", g.n, g.k) : "unnamed";
  text("title",
       fmt::format("ICON-style grid {}{}", g.limited_area ? "limited-area cut-out of " : "", name));
  text("institution", "sciproxy");
  text("source", "sciproxy diffusion::write_grid_file");
  text("uuidOfHGrid", grid_uuid(g));
  text("uuidOfParHGrid", "00000000-0000-0000-0000-000000000000");
  text("ICON_grid_file_uri", fs::path(path).filename().string());
  integer("number_of_grid_used", 0);
  if (g.n > 0) {
    integer("grid_root", g.n);
    integer("grid_level", g.k);
  }
  w.check(nc_put_att_double(id, NC_GLOBAL, "sphere_radius", NC_DOUBLE, 1, &g.radius),
          "sphere_radius");
  integer("grid_geometry", 1);   // ICON's sphere
  integer("grid_cell_type", 3);  // triangles
  integer("global_grid", g.limited_area ? 0 : 1);
  w.check(nc_enddef(id), "defining the variables");
  for (const auto& [var, data] : real_data)
    w.check(nc_put_var_double(id, var, data.data()), "data");
  for (const auto& [var, data] : int_data) w.check(nc_put_var_int(id, var, data.data()), "data");
  w.commit();
}

}  // namespace sciproxy::diffusion
