// C ABI of the diffusion family (include/sciproxy/c/diffusion.h): grid and granule handles,
// init from ICON's Fortran arrays (converted once to the C++ API's row-major inputs) or from
// sciproxy's own coefficients, and run on the caller's Fortran arrays in place, as extern "C"
// wrappers that never throw (guarded.hpp).
//
// sciproxy_diffusion_init_computed takes every input from the library's computed_inputs (the
// interpolation coefficients, ICON4Py's vertical grid, metric fields over a Gaussian mountain).
#include "sciproxy/diffusion.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "capi/guarded.hpp"
#include "core/collective.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/sciproxy.h"

struct sciproxy_diffusion_grid {
  sciproxy::diffusion::Grid grid;
  bool has_geometry = false;  // generated: positions, lengths and areas known
};

struct sciproxy_diffusion {
  std::unique_ptr<sciproxy::diffusion::Diffusion> granule;
  bool single_precision = false;
  sciproxy::Communicator comm;  // init's: run's checks fail on every rank alike
  // The entities of run's fields: the whole grid's with global fields on several ranks (set
  // then), otherwise the granule's grid (this rank's with rank_local_fields).
  std::optional<std::array<std::int32_t, 3>> global_fields;
};

namespace {

namespace df = sciproxy::diffusion;
using sciproxy::require;
using sciproxy::throw_invalid_argument;
using sciproxy::capi::guarded;
using sciproxy::capi::require_pointer;

// The handles this library gave out and has not freed. A handle is looked up here before it is
// dereferenced, so a freed (or foreign) pointer is an error message instead of a crash.
class LiveHandles {
 public:
  void add(const void* p) {
    std::lock_guard lock(mutex_);
    live_.insert(p);
  }
  bool remove(const void* p) {
    std::lock_guard lock(mutex_);
    return live_.erase(p) > 0;
  }
  bool contains(const void* p) {
    std::lock_guard lock(mutex_);
    return live_.count(p) > 0;
  }

 private:
  std::mutex mutex_;
  std::unordered_set<const void*> live_;
};

LiveHandles& live_grids() {
  static LiveHandles h;
  return h;
}
LiveHandles& live_granules() {
  static LiveHandles h;
  return h;
}

const sciproxy_diffusion_grid& grid_of(const sciproxy_diffusion_grid* grid) {
  if (!grid)
    throw_invalid_argument("grid", "a grid (sciproxy_diffusion_grid_icosahedral or _grid_init)",
                           "NULL");
  if (!live_grids().contains(grid))
    throw_invalid_argument("grid", "a live grid handle",
                           "a handle that was freed or never returned by this library");
  return *grid;
}

sciproxy_diffusion& granule_of(const sciproxy_diffusion* handle) {
  if (!handle)
    throw_invalid_argument("handle", "a granule (call sciproxy_diffusion_init first)", "NULL");
  if (!live_granules().contains(handle))
    throw_invalid_argument("handle", "a live granule handle",
                           "a handle that was freed or never returned by sciproxy_diffusion_init");
  return *const_cast<sciproxy_diffusion*>(handle);
}

// ---- Fortran arrays to the C++ API's row-major tables and fields ----

// A Fortran connectivity table t(rows, cols) of 1-based indices as zero-based row-major
// [rows][cols]; missing entries (<= 0) become -1 where allowed. Every index is checked.
std::vector<std::int32_t> table_from_fortran(const std::int32_t* t, std::int32_t rows, int cols,
                                             std::int32_t bound, const char* name,
                                             bool allow_missing) {
  require_pointer(t, name);
  std::vector<std::int32_t> out(static_cast<std::size_t>(rows) * cols);
  for (int j = 0; j < cols; ++j)
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int32_t v = t[j * static_cast<std::int64_t>(rows) + i];
      const bool missing = v <= 0;
      if ((missing && !allow_missing) || v > bound)
        throw_invalid_argument(name,
                               fmt::format("1-based indices in [1, {}]{}", bound,
                                           allow_missing ? " (<= 0: no neighbour)" : ""),
                               fmt::format("{} at ({}, {})", v, i + 1, j + 1));
      out[i * cols + j] = missing ? -1 : v - 1;
    }
  return out;
}

// refin_ctrl in ICON's order: the ordered rows 1 .. rows (boundary, then nudging) ascending at
// the start, then the rest (0, the interior). ICON4Py's zones span each value's first to last
// entity, so any other order would give overlapping zones.
std::vector<std::int32_t> refin_ctrl(const std::int32_t* r, std::int32_t n, int rows,
                                     const char* name) {
  if (!r) return {};
  std::vector<std::int32_t> out(r, r + n);
  auto ordered = [rows](std::int32_t v) { return v >= 1 && v <= rows; };
  std::int32_t previous = 1;
  bool in_prefix = true;
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t v = out[i];
    if (ordered(v) && (!in_prefix || v < previous))
      throw_invalid_argument(
          name,
          fmt::format("ICON's order: the rows 1 .. {} ascending first, then the interior", rows),
          fmt::format("{} at ({}) after {} at ({})", v, i + 1, out[i - 1], i));
    if (ordered(v))
      previous = v;
    else
      in_prefix = false;
  }
  return out;
}

// A Fortran array a(n, m) as row-major [n][m] (the same values: a flat copy when m is 1).
template <class T>
std::vector<T> from_fortran(const T* a, std::int64_t n, std::int64_t m, const char* name) {
  require_pointer(a, name);
  std::vector<T> out(static_cast<std::size_t>(n * m));
  for (std::int64_t j = 0; j < m; ++j)
    for (std::int64_t i = 0; i < n; ++i) out[i * m + j] = a[j * n + i];
  return out;
}

// A Fortran array a(n, 3, nlev) as row-major [n][3][nlev].
template <class T>
std::vector<T> from_fortran3(const T* a, std::int64_t n, int mid, std::int64_t nlev,
                             const char* name) {
  require_pointer(a, name);
  std::vector<T> out(static_cast<std::size_t>(n * mid * nlev));
  for (std::int64_t k = 0; k < nlev; ++k)
    for (int j = 0; j < mid; ++j)
      for (std::int64_t i = 0; i < n; ++i) out[(i * mid + j) * nlev + k] = a[(k * mid + j) * n + i];
  return out;
}

// ---- Options and configuration ----

// Under a communicator every check after the handle's runs through on_every_rank: bad options
// on one rank fail every rank, none waits in init's collective calls.
df::DiffusionOptions options_of(const sciproxy_diffusion_options* c_options, const df::Grid& grid) {
  const auto o = sciproxy::capi::read_options(c_options, sciproxy_diffusion_options_default,
                                              "sciproxy_diffusion_options");
  df::DiffusionOptions d;
  d.comm = sciproxy::Communicator::from_handle(o.comm, "options.comm");
  sciproxy::collective::on_every_rank(d.comm, [&] {
    require_pointer(o.device, "options.device");
    require(o.layout == SCIPROXY_DIFFUSION_FORTRAN_ORDER || o.layout == SCIPROXY_DIFFUSION_C_ORDER,
            "options.layout",
            "SCIPROXY_DIFFUSION_FORTRAN_ORDER (0) or SCIPROXY_DIFFUSION_C_ORDER (1)",
            std::to_string(o.layout));
    require(o.nparallel >= 0, "options.nparallel", "0 (all threads) or a positive thread count",
            std::to_string(o.nparallel));
    d.device = o.device;
    d.nparallel = o.nparallel;
    d.layout = o.layout == SCIPROXY_DIFFUSION_FORTRAN_ORDER ? df::FieldLayout::EntitiesContiguous
                                                            : df::FieldLayout::LevelsContiguous;
    d.single_precision = o.single_precision != 0;
    d.check_finite = o.check_finite != 0;
    if (o.cell_owner) d.cell_owner.assign(o.cell_owner, o.cell_owner + grid.num_cells);
    d.rank_local_fields = o.rank_local_fields != 0;
    if (const auto* c = o.local_decomposition) {
      // Global indices 1-based (ICON's) to the library's 0-based.
      auto values = [](const int32_t* p, std::int32_t n, const char* name, int shift) {
        require_pointer(p, name);
        std::vector<std::int32_t> v(p, p + n);
        for (auto& x : v) x -= shift;
        return v;
      };
      df::DiffusionOptions::LocalDecomposition l;
      l.cell_global_index = values(c->cell_global_index, grid.num_cells,
                                   "options.local_decomposition.cell_global_index", 1);
      l.edge_global_index = values(c->edge_global_index, grid.num_edges,
                                   "options.local_decomposition.edge_global_index", 1);
      l.vertex_global_index = values(c->vertex_global_index, grid.num_vertices,
                                     "options.local_decomposition.vertex_global_index", 1);
      l.cell_owner =
          values(c->cell_owner, grid.num_cells, "options.local_decomposition.cell_owner", 0);
      l.edge_owner =
          values(c->edge_owner, grid.num_edges, "options.local_decomposition.edge_owner", 0);
      l.vertex_owner =
          values(c->vertex_owner, grid.num_vertices, "options.local_decomposition.vertex_owner", 0);
      d.local_decomposition = std::move(l);
    }
  });
  return d;
}

// The grid a granule runs on: the caller's, or with options.local_decomposition the caller's
// local patch with its zones set from the halo levels (set_halo_zones).
df::Grid granule_grid(const df::Grid& grid, const sciproxy_diffusion_options* c_options,
                      const sciproxy::Communicator& comm) {
  df::Grid g = grid;
  if (!c_options || !c_options->local_decomposition) return g;
  const auto& c = *c_options->local_decomposition;
  sciproxy::collective::on_every_rank(comm, [&] {
    const struct {
      const int32_t* levels;
      df::Dimension dim;
      const char* name;
    } dims[] = {
        {c.cell_halo_level, df::Dimension::Cell, "options.local_decomposition.cell_halo_level"},
        {c.edge_halo_level, df::Dimension::Edge, "options.local_decomposition.edge_halo_level"},
        {c.vertex_halo_level, df::Dimension::Vertex,
         "options.local_decomposition.vertex_halo_level"}};
    for (const auto& d : dims) {
      require_pointer(d.levels, d.name);
      const std::int32_t n = g.size(d.dim);
      std::vector<std::int8_t> levels(static_cast<std::size_t>(n));
      for (std::int32_t i = 0; i < n; ++i) {
        if (d.levels[i] < 0 || d.levels[i] > 3)
          throw_invalid_argument(d.name, "halo levels in [0, 3]",
                                 fmt::format("{} at local entry {}", d.levels[i], i));
        levels[i] = static_cast<std::int8_t>(d.levels[i]);
      }
      df::set_halo_zones(g, d.dim, levels, d.name);
    }
  });
  return g;
}

df::DiffusionConfig config_of(const sciproxy_diffusion_config* c_config) {
  // read_options names options.struct_size; the config's own size is named here.
  if (c_config && c_config->struct_size != sizeof(sciproxy_diffusion_config))
    throw_invalid_argument(
        "config.struct_size",
        fmt::format("{} (sizeof(sciproxy_diffusion_config) of this library: fill "
                    "the config with sciproxy_diffusion_config_default first)",
                    sizeof(sciproxy_diffusion_config)),
        std::to_string(c_config->struct_size));
  const auto c = sciproxy::capi::read_options(c_config, sciproxy_diffusion_config_default,
                                              "sciproxy_diffusion_config");
  df::DiffusionConfig d;
  d.diffusion_type = c.diffusion_type;
  d.apply_to_vertical_wind = c.apply_to_vertical_wind != 0;
  d.apply_to_horizontal_wind = c.apply_to_horizontal_wind != 0;
  d.apply_to_temperature = c.apply_to_temperature != 0;
  d.apply_smag_diff_to_vertical_wind = c.apply_smag_diff_to_vertical_wind != 0;
  d.compute_3d_smag_coeff = c.compute_3d_smag_coeff != 0;
  d.type_vn_diffu = c.type_vn_diffu;
  d.type_t_diffu = c.type_t_diffu;
  d.hdiff_efdt_ratio = c.hdiff_efdt_ratio;
  d.hdiff_w_efdt_ratio = c.hdiff_w_efdt_ratio;
  d.smagorinski_scaling_factor = c.smagorinski_scaling_factor;
  d.smagorinski_scaling_factor2 = c.smagorinski_scaling_factor2;
  d.smagorinski_scaling_factor3 = c.smagorinski_scaling_factor3;
  d.smagorinski_scaling_factor4 = c.smagorinski_scaling_factor4;
  d.smagorinski_scaling_height = c.smagorinski_scaling_height;
  d.smagorinski_scaling_height2 = c.smagorinski_scaling_height2;
  d.smagorinski_scaling_height3 = c.smagorinski_scaling_height3;
  d.smagorinski_scaling_height4 = c.smagorinski_scaling_height4;
  d.apply_zdiffusion_t = c.apply_zdiffusion_t != 0;
  d.ndyn_substeps = c.ndyn_substeps;
  d.temperature_boundary_diffusion_denominator = c.temperature_boundary_diffusion_denominator;
  d.velocity_boundary_diffusion_denominator = c.velocity_boundary_diffusion_denominator;
  d.max_nudging_coefficient = c.max_nudging_coefficient;
  d.shear_type = c.shear_type;
  d.iforcing = c.iforcing;
  d.a_hshr = c.a_hshr;
  d.loutshs = c.loutshs != 0;
  return d;
}

// num_levels, and the memory init's conversions need (about 16 level fields of the cells and
// 4 of the edges, as the granule's own estimate) before anything is allocated.
void require_levels(std::int32_t num_levels, const df::Grid& g) {
  require(num_levels >= 2, "num_levels", "at least 2 levels", std::to_string(num_levels));
  const double nlev = num_levels;
  sciproxy::require_memory(8.0 * (16.0 * g.num_cells * (nlev + 1) + 4.0 * g.num_edges * nlev),
                           "grid, num_levels",
                           fmt::format("{} cells x {} levels", g.num_cells, num_levels));
}

// The granule built from the C++ API's inputs, handed out as a live handle.
void give_handle(sciproxy_diffusion** handle, const df::Grid& grid,
                 const sciproxy_diffusion_config* config, const df::DiffusionVerticalGrid& vertical,
                 const df::DiffusionMetricState& metrics,
                 const df::DiffusionInterpolationState& interpolation,
                 const df::DiffusionEdgeParams& edges, const df::DiffusionCellParams& cells,
                 const df::DiffusionOptions& o) {
  auto h = std::make_unique<sciproxy_diffusion>();
  h->granule = std::make_unique<df::Diffusion>(grid, config_of(config), vertical, metrics,
                                               interpolation, edges, cells, o);
  h->single_precision = o.single_precision;
  h->comm = o.comm;
  if (o.comm.distributed() && !o.rank_local_fields)
    h->global_fields = {grid.num_cells, grid.num_edges, grid.num_vertices};
  live_granules().add(h.get());
  *handle = h.release();
}

template <class Real>
void run_granule(sciproxy_diffusion* handle, Real* w, Real* vn, Real* exner, Real* theta_v,
                 Real* hdef_ic, Real* div_ic, Real* dwdx, Real* dwdy, double dtime,
                 std::int32_t linit) {
  sciproxy_diffusion& h = granule_of(handle);
  sciproxy::collective::on_every_rank(h.comm, [&] {
    const bool single = sizeof(Real) == 4;
    if (single != h.single_precision)
      throw sciproxy::TypeError(fmt::format(
          "fields: expected {} (the granule was initialised with options.single_precision = {}: "
          "call sciproxy_diffusion_run{}), got {}",
          h.single_precision ? "float32" : "float64", h.single_precision ? 1 : 0,
          h.single_precision ? "_f32" : "", single ? "float32" : "float64"));
    require_pointer(w, "w");
    require_pointer(vn, "vn");
    require_pointer(exner, "exner");
    require_pointer(theta_v, "theta_v");
    require_pointer(hdef_ic, "hdef_ic");
    require_pointer(div_ic, "div_ic");
    require_pointer(dwdx, "dwdx");
    require_pointer(dwdy, "dwdy");
    require(std::isfinite(dtime) && dtime > 0, "dtime", "a positive, finite time step in seconds",
            fmt::format("{}", dtime));
  });
  df::DiffusionPrognosticFields<Real> prognostic{vn, w, theta_v, exner};
  df::DiffusionDiagnosticFields<Real> diagnostic{hdef_ic, div_ic, dwdx, dwdy};
  h.granule->run(diagnostic, prognostic, dtime, linit != 0);
}

}  // namespace

extern "C" {

sciproxy_status sciproxy_diffusion_grid_icosahedral(int32_t n, int32_t k,
                                                    sciproxy_diffusion_grid** grid) {
  if (grid) *grid = nullptr;
  return guarded([&] {
    require_pointer(grid, "grid");
    auto g = std::make_unique<sciproxy_diffusion_grid>();
    g->grid = df::icosahedral_grid(n, k);
    g->has_geometry = true;
    live_grids().add(g.get());
    *grid = g.release();
  });
}

sciproxy_status sciproxy_diffusion_grid_init(
    int32_t num_cells, int32_t num_edges, int32_t num_vertices, const int32_t* c2e,
    const int32_t* c2e2c, const int32_t* e2c, const int32_t* e2v, const int32_t* e2c2v,
    const int32_t* v2e, const int32_t* v2c, const int32_t* c2v, const int32_t* refin_c_ctrl,
    const int32_t* refin_e_ctrl, const int32_t* refin_v_ctrl, sciproxy_diffusion_grid** grid) {
  if (grid) *grid = nullptr;
  return guarded([&] {
    require_pointer(grid, "grid");
    require(num_cells >= 1, "num_cells", "at least 1 cell", std::to_string(num_cells));
    require(num_edges >= 1, "num_edges", "at least 1 edge", std::to_string(num_edges));
    require(num_vertices >= 1, "num_vertices", "at least 1 vertex", std::to_string(num_vertices));
    // The sparse offsets (4 num_edges) and the fields' sizes are int32 in the kernels.
    require(
        num_edges <= INT32_MAX / 6 && num_vertices <= INT32_MAX / 6 && num_cells <= INT32_MAX / 6,
        "num_cells, num_edges, num_vertices", "counts below 2^31 / 6",
        fmt::format("{}, {}, {}", num_cells, num_edges, num_vertices));
    auto g = std::make_unique<sciproxy_diffusion_grid>();
    df::Grid& t = g->grid;
    t.num_cells = num_cells;
    t.num_edges = num_edges;
    t.num_vertices = num_vertices;
    t.c2e = table_from_fortran(c2e, num_cells, 3, num_edges, "c2e", false);
    t.c2e2c = table_from_fortran(c2e2c, num_cells, 3, num_cells, "c2e2c", true);
    t.c2v = table_from_fortran(c2v, num_cells, 3, num_vertices, "c2v", false);
    t.e2c = table_from_fortran(e2c, num_edges, 2, num_cells, "e2c", true);
    t.e2v = table_from_fortran(e2v, num_edges, 2, num_vertices, "e2v", false);
    t.e2c2v = table_from_fortran(e2c2v, num_edges, 4, num_vertices, "e2c2v", true);
    t.v2e = table_from_fortran(v2e, num_vertices, 6, num_edges, "v2e", true);
    t.v2c = table_from_fortran(v2c, num_vertices, 6, num_cells, "v2c", true);
    t.c2e2co.resize(static_cast<std::size_t>(num_cells) * 4);
    for (std::int64_t c = 0; c < num_cells; ++c) {
      t.c2e2co[4 * c] = static_cast<std::int32_t>(c);
      for (int j = 0; j < 3; ++j) t.c2e2co[4 * c + 1 + j] = t.c2e2c[3 * c + j];
    }
    // Cells and vertices: boundary rows 1-4 and one nudging row; edges: rows 1-8 and two.
    t.cell_refin_ctrl = refin_ctrl(refin_c_ctrl, num_cells, 5, "refin_c_ctrl");
    t.edge_refin_ctrl = refin_ctrl(refin_e_ctrl, num_edges, 10, "refin_e_ctrl");
    t.vertex_refin_ctrl = refin_ctrl(refin_v_ctrl, num_vertices, 5, "refin_v_ctrl");
    df::set_domain_bounds(t);
    live_grids().add(g.get());
    *grid = g.release();
  });
}

sciproxy_status sciproxy_diffusion_grid_sizes(const sciproxy_diffusion_grid* grid,
                                              int32_t* num_cells, int32_t* num_edges,
                                              int32_t* num_vertices) {
  return guarded([&] {
    const df::Grid& g = grid_of(grid).grid;
    if (num_cells) *num_cells = g.num_cells;
    if (num_edges) *num_edges = g.num_edges;
    if (num_vertices) *num_vertices = g.num_vertices;
  });
}

sciproxy_status sciproxy_diffusion_grid_geometry(const sciproxy_diffusion_grid* grid,
                                                 double* cell_lat, double* cell_lon,
                                                 double* edge_lat, double* edge_lon,
                                                 double* primal_normal_x, double* primal_normal_y) {
  return guarded([&] {
    const sciproxy_diffusion_grid& h = grid_of(grid);
    require(h.has_geometry, "grid", "a generated grid (sciproxy_diffusion_grid_icosahedral)",
            "a grid from tables, which has no geometry");
    const df::Grid& g = h.grid;
    auto put = [](const std::vector<double>& from, double* to) {
      if (to) std::copy(from.begin(), from.end(), to);
    };
    put(g.cell_lat, cell_lat);
    put(g.cell_lon, cell_lon);
    put(g.edge_center_lat, edge_lat);
    put(g.edge_center_lon, edge_lon);
    put(g.primal_normal_x, primal_normal_x);
    put(g.primal_normal_y, primal_normal_y);
  });
}

void sciproxy_diffusion_grid_free(sciproxy_diffusion_grid* grid) {
  // Only what this library gave out and still holds is deleted: a second free is harmless.
  if (grid && live_grids().remove(grid)) delete grid;
}

void sciproxy_diffusion_options_default(sciproxy_diffusion_options* options) {
  if (!options) return;
  *options = {};
  options->struct_size = sizeof(sciproxy_diffusion_options);
  options->device = "auto";
  options->nparallel = 0;
  options->layout = SCIPROXY_DIFFUSION_FORTRAN_ORDER;
  options->single_precision = 0;
  options->check_finite = 1;
  options->comm = SCIPROXY_NO_COMM;
  options->cell_owner = nullptr;
  options->rank_local_fields = 0;
  options->local_decomposition = nullptr;
}

void sciproxy_diffusion_config_default(sciproxy_diffusion_config* config) {
  if (!config) return;
  const df::DiffusionConfig d;
  *config = {};
  config->struct_size = sizeof(sciproxy_diffusion_config);
  config->diffusion_type = d.diffusion_type;
  config->apply_to_vertical_wind = d.apply_to_vertical_wind;
  config->apply_to_horizontal_wind = d.apply_to_horizontal_wind;
  config->apply_to_temperature = d.apply_to_temperature;
  config->apply_smag_diff_to_vertical_wind = d.apply_smag_diff_to_vertical_wind;
  config->compute_3d_smag_coeff = d.compute_3d_smag_coeff;
  config->type_vn_diffu = d.type_vn_diffu;
  config->type_t_diffu = d.type_t_diffu;
  config->hdiff_efdt_ratio = d.hdiff_efdt_ratio;
  config->hdiff_w_efdt_ratio = d.hdiff_w_efdt_ratio;
  config->smagorinski_scaling_factor = d.smagorinski_scaling_factor;
  config->smagorinski_scaling_factor2 = d.smagorinski_scaling_factor2;
  config->smagorinski_scaling_factor3 = d.smagorinski_scaling_factor3;
  config->smagorinski_scaling_factor4 = d.smagorinski_scaling_factor4;
  config->smagorinski_scaling_height = d.smagorinski_scaling_height;
  config->smagorinski_scaling_height2 = d.smagorinski_scaling_height2;
  config->smagorinski_scaling_height3 = d.smagorinski_scaling_height3;
  config->smagorinski_scaling_height4 = d.smagorinski_scaling_height4;
  config->apply_zdiffusion_t = d.apply_zdiffusion_t;
  config->ndyn_substeps = d.ndyn_substeps;
  config->temperature_boundary_diffusion_denominator = d.temperature_boundary_diffusion_denominator;
  config->velocity_boundary_diffusion_denominator = d.velocity_boundary_diffusion_denominator;
  config->max_nudging_coefficient = d.max_nudging_coefficient;
  config->shear_type = d.shear_type;
  config->iforcing = d.iforcing;
  config->a_hshr = d.a_hshr;
  config->loutshs = d.loutshs;
}

sciproxy_status sciproxy_diffusion_init(
    const sciproxy_diffusion_grid* grid, const sciproxy_diffusion_options* options,
    const sciproxy_diffusion_config* config, int32_t num_levels, const double* vct_a,
    int32_t end_index_of_damping_layer, const double* theta_ref_mc, const double* wgtfac_c,
    const double* zd_intcoef, const int32_t* zd_vertoffset, const double* zd_diffcoef,
    const double* e_bln_c_s, const double* geofac_div, const double* geofac_grg_x,
    const double* geofac_grg_y, const double* geofac_n2s, const double* nudgecoeff_e,
    const double* rbf_coeff_1, const double* rbf_coeff_2, const double* tangent_orientation,
    const double* inverse_primal_edge_lengths, const double* inverse_dual_edge_lengths,
    const double* inverse_vertex_vertex_lengths, const double* edge_areas,
    const double* primal_normal_vert_x, const double* primal_normal_vert_y,
    const double* dual_normal_vert_x, const double* dual_normal_vert_y, const double* cell_area,
    double mean_cell_area, sciproxy_diffusion** handle) {
  if (handle) *handle = nullptr;
  return guarded([&] {
    require_pointer(handle, "handle");
    const df::Grid& g = grid_of(grid).grid;
    const df::DiffusionOptions o = options_of(options, g);
    df::DiffusionVerticalGrid vertical;
    df::DiffusionMetricState metrics;
    df::DiffusionInterpolationState in;
    df::DiffusionEdgeParams ep;
    df::DiffusionCellParams cp;
    sciproxy::collective::on_every_rank(o.comm, [&] {
      (void)config_of(config);  // the config's struct_size before the arrays
      require_levels(num_levels, g);
      const std::int64_t nc = g.num_cells, ne = g.num_edges, nv = g.num_vertices, nlev = num_levels;
      require(std::isfinite(mean_cell_area) && mean_cell_area > 0, "mean_cell_area",
              "a positive, finite area", fmt::format("{}", mean_cell_area));

      vertical.num_levels = num_levels;
      vertical.vct_a = from_fortran(vct_a, nlev + 1, 1, "vct_a");
      vertical.end_index_of_damping_layer = end_index_of_damping_layer;
      metrics.theta_ref_mc = from_fortran(theta_ref_mc, nc, nlev, "theta_ref_mc");
      metrics.wgtfac_c = from_fortran(wgtfac_c, nc, nlev + 1, "wgtfac_c");
      metrics.zd_intcoef = from_fortran3(zd_intcoef, nc, 3, nlev, "zd_intcoef");
      metrics.zd_vertoffset = from_fortran3(zd_vertoffset, nc, 3, nlev, "zd_vertoffset");
      metrics.zd_diffcoef = from_fortran(zd_diffcoef, nc, nlev, "zd_diffcoef");
      in.e_bln_c_s = from_fortran(e_bln_c_s, nc, 3, "e_bln_c_s");
      in.geofac_div = from_fortran(geofac_div, nc, 3, "geofac_div");
      in.geofac_grg_x = from_fortran(geofac_grg_x, nc, 4, "geofac_grg_x");
      in.geofac_grg_y = from_fortran(geofac_grg_y, nc, 4, "geofac_grg_y");
      in.geofac_n2s = from_fortran(geofac_n2s, nc, 4, "geofac_n2s");
      in.nudgecoeff_e = from_fortran(nudgecoeff_e, ne, 1, "nudgecoeff_e");
      in.rbf_coeff_1 = from_fortran(rbf_coeff_1, nv, 6, "rbf_coeff_1");
      in.rbf_coeff_2 = from_fortran(rbf_coeff_2, nv, 6, "rbf_coeff_2");
      ep.tangent_orientation = from_fortran(tangent_orientation, ne, 1, "tangent_orientation");
      ep.inverse_primal_edge_lengths =
          from_fortran(inverse_primal_edge_lengths, ne, 1, "inverse_primal_edge_lengths");
      ep.inverse_dual_edge_lengths =
          from_fortran(inverse_dual_edge_lengths, ne, 1, "inverse_dual_edge_lengths");
      ep.inverse_vertex_vertex_lengths =
          from_fortran(inverse_vertex_vertex_lengths, ne, 1, "inverse_vertex_vertex_lengths");
      ep.edge_areas = from_fortran(edge_areas, ne, 1, "edge_areas");
      ep.primal_normal_vert_x = from_fortran(primal_normal_vert_x, ne, 4, "primal_normal_vert_x");
      ep.primal_normal_vert_y = from_fortran(primal_normal_vert_y, ne, 4, "primal_normal_vert_y");
      ep.dual_normal_vert_x = from_fortran(dual_normal_vert_x, ne, 4, "dual_normal_vert_x");
      ep.dual_normal_vert_y = from_fortran(dual_normal_vert_y, ne, 4, "dual_normal_vert_y");
      cp.area = from_fortran(cell_area, nc, 1, "cell_area");
      cp.mean_cell_area = mean_cell_area;
    });
    give_handle(handle, granule_grid(g, options, o.comm), config, vertical, metrics, in, ep, cp, o);
  });
}

sciproxy_status sciproxy_diffusion_init_computed(const sciproxy_diffusion_grid* grid,
                                                 const sciproxy_diffusion_options* options,
                                                 const sciproxy_diffusion_config* config,
                                                 int32_t num_levels, sciproxy_diffusion** handle) {
  if (handle) *handle = nullptr;
  return guarded([&] {
    require_pointer(handle, "handle");
    const sciproxy_diffusion_grid& h = grid_of(grid);
    const df::Grid& g = h.grid;
    const df::DiffusionOptions o = options_of(options, g);
    df::DiffusionInputs in;
    sciproxy::collective::on_every_rank(o.comm, [&] {
      require(h.has_geometry, "grid",
              "a generated grid (sciproxy_diffusion_grid_icosahedral): coefficients are computed "
              "from its geometry",
              "a grid from tables (pass ICON's coefficients to sciproxy_diffusion_init)");
      require(!options || !options->local_decomposition, "options.local_decomposition",
              "NULL with a generated global grid (ICON's local patches come with their inputs "
              "through sciproxy_diffusion_init)",
              "a local decomposition");
      (void)config_of(config);
      require_levels(num_levels, g);
      in = df::computed_inputs(g, num_levels);
    });
    give_handle(handle, g, config, in.vertical, in.metrics, in.interpolation, in.edges, in.cells,
                o);
  });
}

sciproxy_status sciproxy_diffusion_run(sciproxy_diffusion* handle, double* w, double* vn,
                                       double* exner, double* theta_v, const double* rho,
                                       double* hdef_ic, double* div_ic, double* dwdx, double* dwdy,
                                       double dtime, int32_t linit) {
  (void)rho;  // ICON4Py's run takes rho and does not use it
  return guarded([&] {
    run_granule(handle, w, vn, exner, theta_v, hdef_ic, div_ic, dwdx, dwdy, dtime, linit);
  });
}

sciproxy_status sciproxy_diffusion_run_f32(sciproxy_diffusion* handle, float* w, float* vn,
                                           float* exner, float* theta_v, const float* rho,
                                           float* hdef_ic, float* div_ic, float* dwdx, float* dwdy,
                                           double dtime, int32_t linit) {
  (void)rho;
  return guarded([&] {
    run_granule(handle, w, vn, exner, theta_v, hdef_ic, div_ic, dwdx, dwdy, dtime, linit);
  });
}

sciproxy_status sciproxy_diffusion_get_info(const sciproxy_diffusion* handle,
                                            sciproxy_diffusion_info* info) {
  return guarded([&] {
    sciproxy_diffusion& h = granule_of(handle);
    require_pointer(info, "info");
    *info = {};
    const df::Grid& g = h.granule->grid();
    info->num_cells = h.global_fields ? (*h.global_fields)[0] : g.num_cells;
    info->num_edges = h.global_fields ? (*h.global_fields)[1] : g.num_edges;
    info->num_vertices = h.global_fields ? (*h.global_fields)[2] : g.num_vertices;
    info->num_levels = h.granule->num_levels();
    info->single_precision = h.single_precision ? 1 : 0;
    info->init_seconds = h.granule->init_seconds();
    info->bytes_per_run = h.granule->bytes_per_run();
    const std::string device = h.granule->device();
    const std::size_t n = std::min(device.size(), sizeof(info->device) - 1);
    std::memcpy(info->device, device.data(), n);
    info->device[n] = '\0';
  });
}

sciproxy_status sciproxy_diffusion_agree_status(const sciproxy_diffusion* handle,
                                                sciproxy_status local) {
  const std::string message = sciproxy_last_error();  // the local failure's, if any
  std::int64_t comm = sciproxy::kNoCommunicator;
  const sciproxy_status found = guarded([&] { comm = granule_of(handle).comm.handle(); });
  if (found != SCIPROXY_OK) return found;  // no ranks to ask
  return sciproxy::capi::agree_status(comm, local, message);
}

sciproxy_status sciproxy_diffusion_local_entities(const sciproxy_diffusion* handle,
                                                  int32_t dimension, int32_t* global_index,
                                                  int32_t* halo_level, int32_t size,
                                                  int32_t* count) {
  return guarded([&] {
    sciproxy_diffusion& h = granule_of(handle);
    require(dimension >= 0 && dimension <= 2, "dimension", "0 (cells), 1 (edges) or 2 (vertices)",
            std::to_string(dimension));
    const auto dim = static_cast<df::Dimension>(dimension);
    const std::vector<std::int32_t> index = h.granule->global_index(dim);
    const std::vector<std::int8_t> level = h.granule->halo_level(dim);
    const auto n = static_cast<std::int32_t>(index.size());
    if (count) *count = n;
    if (!global_index && !halo_level) return;
    require(size >= n, "size", fmt::format("at least the {} local entities", n),
            std::to_string(size));
    for (std::int32_t i = 0; i < n; ++i) {
      if (global_index) global_index[i] = index[i] + 1;
      if (halo_level) halo_level[i] = level[i];
    }
  });
}

sciproxy_status sciproxy_diffusion_timer_table(const sciproxy_diffusion* handle, char* buffer,
                                               size_t size, size_t* length) {
  return guarded([&] {
    sciproxy_diffusion& h = granule_of(handle);
    if (size > 0) require_pointer(buffer, "buffer");
    const std::string table = h.granule->timers().table();
    if (size > 0) {
      const std::size_t n = std::min(table.size(), size - 1);
      std::memcpy(buffer, table.data(), n);
      buffer[n] = '\0';
    }
    if (length) *length = table.size();
  });
}

void sciproxy_diffusion_free(sciproxy_diffusion* handle) {
  if (handle && live_granules().remove(handle)) delete handle;
}

sciproxy_status sciproxy_diffusion_check_array(const char* argument, int32_t contiguous,
                                               int32_t rank, const int64_t* shape,
                                               const int64_t* expected) {
  return guarded([&] {
    require_pointer(argument, "argument");
    require(rank >= 1 && rank <= 3, "rank", "1, 2 or 3", std::to_string(rank));
    require_pointer(shape, "shape");
    require_pointer(expected, "expected");
    auto text = [rank](const int64_t* s) {
      std::string t = "(";
      for (int i = 0; i < rank; ++i) t += (i ? ", " : "") + std::to_string(s[i]);
      return t + ")";
    };
    require(std::equal(shape, shape + rank, expected), argument,
            fmt::format("shape {}", text(expected)), text(shape));
    require(contiguous != 0, argument,
            "a contiguous array (the library reads and writes it in place, without a copy)",
            "a non-contiguous array section");
  });
}

}  // extern "C"
