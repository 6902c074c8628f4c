// sciproxy._sciproxy, diffusion part: bindings of ICON's horizontal diffusion granule
// (include/sciproxy/diffusion.hpp). The Python layer (python/sciproxy/diffusion.py) gathers
// ICON4Py's named fields from dicts or objects and hands them over as a dict of C-contiguous
// float64 (int32 for indices) numpy arrays and plain numbers; the library checks every value
// and names the field. The run's fields are used in place; the GIL is released during a run.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/diffusion.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

namespace dif = sciproxy::diffusion;

using Doubles = nb::ndarray<const double, nb::c_contig, nb::device::cpu>;
using Ints = nb::ndarray<const std::int32_t, nb::c_contig, nb::device::cpu>;

// The named entries of a dict the Python layer built; a missing key is its bug, not the user's.
template <class T>
std::vector<T> vector_of(const nb::dict& d, const char* name) {
  if (!d.contains(name))
    throw sciproxy::RuntimeError(std::string("internal error: no field ") + name);
  if constexpr (std::is_same_v<T, double>) {
    const auto a = nb::cast<Doubles>(d[name]);
    return {a.data(), a.data() + a.size()};
  } else {
    const auto a = nb::cast<Ints>(d[name]);
    return {a.data(), a.data() + a.size()};
  }
}
template <class T>
T scalar_of(const nb::dict& d, const char* name) {
  if (!d.contains(name))
    throw sciproxy::RuntimeError(std::string("internal error: no setting ") + name);
  return nb::cast<T>(d[name]);
}

dif::Dimension dimension_of(const std::string& dim) {
  if (dim == "cell") return dif::Dimension::Cell;
  if (dim == "edge") return dif::Dimension::Edge;
  if (dim == "vertex") return dif::Dimension::Vertex;
  sciproxy::throw_invalid_argument(
      "dim", "cell, edge or vertex (or ICON4Py's CellDim, EdgeDim, VertexDim)", dim);
}

// A Grid table or field by ICON4Py's name, as a numpy array (a copy the caller owns).
nb::object grid_connectivity(const dif::Grid& g, const std::string& name) {
  struct Table {
    const char* name;
    const std::vector<std::int32_t>* values;
    int width;
  };
  const Table tables[] = {{"C2E", &g.c2e, 3},       {"C2V", &g.c2v, 3}, {"C2E2C", &g.c2e2c, 3},
                          {"C2E2CO", &g.c2e2co, 4}, {"E2C", &g.e2c, 2}, {"E2V", &g.e2v, 2},
                          {"E2C2V", &g.e2c2v, 4},   {"V2E", &g.v2e, 6}, {"V2C", &g.v2c, 6}};
  std::string names;
  for (const Table& t : tables) {
    if (name == t.name) {
      std::vector<std::int32_t> copy(*t.values);
      const std::int64_t rows = static_cast<std::int64_t>(copy.size()) / t.width;
      return sciproxy::python::to_numpy(std::move(copy), {rows, t.width});
    }
    names += (names.empty() ? "" : ", ") + std::string(t.name);
  }
  sciproxy::throw_invalid_argument("name", "one of " + names, name);
}

nb::object grid_field(const dif::Grid& g, const std::string& name) {
  struct Field {
    const char* name;
    const std::vector<double>* values;
    int width;
  };
  const Field fields[] = {{"cell_area", &g.cell_area, 1},
                          {"dual_area", &g.dual_area, 1},
                          {"edge_length", &g.edge_length, 1},
                          {"dual_edge_length", &g.dual_edge_length, 1},
                          {"edge_cell_length", &g.edge_cell_length, 2},
                          {"edge_vert_length", &g.edge_vert_length, 2},
                          {"cell_lat", &g.cell_lat, 1},
                          {"cell_lon", &g.cell_lon, 1},
                          {"vertex_lat", &g.vertex_lat, 1},
                          {"vertex_lon", &g.vertex_lon, 1},
                          {"edge_center_lat", &g.edge_center_lat, 1},
                          {"edge_center_lon", &g.edge_center_lon, 1},
                          {"primal_normal_x", &g.primal_normal_x, 1},
                          {"primal_normal_y", &g.primal_normal_y, 1},
                          {"dual_normal_x", &g.dual_normal_x, 1},
                          {"dual_normal_y", &g.dual_normal_y, 1}};
  std::string names;
  for (const Field& f : fields) {
    if (name == f.name) {
      std::vector<double> copy(*f.values);
      const std::int64_t rows = static_cast<std::int64_t>(copy.size()) / f.width;
      if (f.width == 1) return sciproxy::python::to_numpy(std::move(copy), {rows});
      return sciproxy::python::to_numpy(std::move(copy), {rows, f.width});
    }
    names += (names.empty() ? "" : ", ") + std::string(f.name);
  }
  if (name == "tangent_orientation" || name == "edge_orientation" || name == "cell_refin_ctrl" ||
      name == "edge_refin_ctrl" || name == "vertex_refin_ctrl") {
    const auto& v = name == "tangent_orientation" ? g.tangent_orientation
                    : name == "edge_orientation"  ? g.edge_orientation
                    : name == "cell_refin_ctrl"   ? g.cell_refin_ctrl
                    : name == "edge_refin_ctrl"   ? g.edge_refin_ctrl
                                                  : g.vertex_refin_ctrl;
    std::vector<std::int32_t> copy(v);
    const std::int64_t n = static_cast<std::int64_t>(copy.size());
    if (name == "edge_orientation") return sciproxy::python::to_numpy(std::move(copy), {n / 3, 3});
    return sciproxy::python::to_numpy(std::move(copy), {n});
  }
  sciproxy::throw_invalid_argument(
      "name", "one of " + names + ", tangent_orientation, edge_orientation, *_refin_ctrl", name);
}

// The inputs as a dict of numpy arrays with ICON4Py's names (coefficients() in Python).
nb::dict inputs_dict(const dif::DiffusionInputs& in) {
  using sciproxy::python::to_numpy;
  const std::int64_t nc = in.grid.num_cells, ne = in.grid.num_edges, nv = in.grid.num_vertices;
  const std::int64_t nlev = in.vertical.num_levels;
  nb::dict metric, interp, edge, cell, vertical;
  metric["theta_ref_mc"] = to_numpy(std::vector<double>(in.metrics.theta_ref_mc), {nc, nlev});
  metric["wgtfac_c"] = to_numpy(std::vector<double>(in.metrics.wgtfac_c), {nc, nlev + 1});
  metric["zd_intcoef"] = to_numpy(std::vector<double>(in.metrics.zd_intcoef), {nc, 3, nlev});
  metric["zd_vertoffset"] =
      to_numpy(std::vector<std::int32_t>(in.metrics.zd_vertoffset), {nc, 3, nlev});
  metric["zd_diffcoef"] = to_numpy(std::vector<double>(in.metrics.zd_diffcoef), {nc, nlev});
  const auto& i = in.interpolation;
  interp["e_bln_c_s"] = to_numpy(std::vector<double>(i.e_bln_c_s), {nc, 3});
  interp["rbf_coeff_1"] = to_numpy(std::vector<double>(i.rbf_coeff_1), {nv, 6});
  interp["rbf_coeff_2"] = to_numpy(std::vector<double>(i.rbf_coeff_2), {nv, 6});
  interp["geofac_div"] = to_numpy(std::vector<double>(i.geofac_div), {nc, 3});
  interp["geofac_n2s"] = to_numpy(std::vector<double>(i.geofac_n2s), {nc, 4});
  interp["geofac_grg_x"] = to_numpy(std::vector<double>(i.geofac_grg_x), {nc, 4});
  interp["geofac_grg_y"] = to_numpy(std::vector<double>(i.geofac_grg_y), {nc, 4});
  interp["nudgecoeff_e"] = to_numpy(std::vector<double>(i.nudgecoeff_e), {ne});
  const auto& e = in.edges;
  edge["tangent_orientation"] = to_numpy(std::vector<double>(e.tangent_orientation), {ne});
  edge["inverse_primal_edge_lengths"] =
      to_numpy(std::vector<double>(e.inverse_primal_edge_lengths), {ne});
  edge["inverse_vertex_vertex_lengths"] =
      to_numpy(std::vector<double>(e.inverse_vertex_vertex_lengths), {ne});
  edge["inverse_dual_edge_lengths"] =
      to_numpy(std::vector<double>(e.inverse_dual_edge_lengths), {ne});
  edge["edge_areas"] = to_numpy(std::vector<double>(e.edge_areas), {ne});
  edge["primal_normal_vert_x"] = to_numpy(std::vector<double>(e.primal_normal_vert_x), {ne, 4});
  edge["primal_normal_vert_y"] = to_numpy(std::vector<double>(e.primal_normal_vert_y), {ne, 4});
  edge["dual_normal_vert_x"] = to_numpy(std::vector<double>(e.dual_normal_vert_x), {ne, 4});
  edge["dual_normal_vert_y"] = to_numpy(std::vector<double>(e.dual_normal_vert_y), {ne, 4});
  cell["area"] = to_numpy(std::vector<double>(in.cells.area), {nc});
  cell["mean_cell_area"] = in.cells.mean_cell_area;
  vertical["num_levels"] = in.vertical.num_levels;
  vertical["vct_a"] = to_numpy(std::vector<double>(in.vertical.vct_a), {nlev + 1});
  vertical["end_index_of_damping_layer"] = in.vertical.end_index_of_damping_layer;
  // The rest of ICON4Py's VerticalGrid: vct_b, nflatlev and its configuration's values.
  const dif::VerticalGrid& vg = in.vertical_grid;
  vertical["vct_b"] =
      to_numpy(std::vector<double>(vg.vct_b), {static_cast<std::int64_t>(vg.vct_b.size())});
  vertical["nflatlev"] = vg.nflatlev;
  vertical["lowest_layer_thickness"] = vg.config.lowest_layer_thickness;
  vertical["model_top_height"] = vg.config.model_top_height;
  vertical["stretch_factor"] = vg.config.stretch_factor;
  vertical["rayleigh_damping_height"] = vg.config.rayleigh_damping_height;
  vertical["flat_height"] = vg.config.flat_height;
  nb::dict out;
  out["metric_state"] = metric;
  out["interpolation_state"] = interp;
  out["edge_params"] = edge;
  out["cell_params"] = cell;
  out["vertical_grid"] = vertical;
  return out;
}

nb::dict state_dict(const dif::DiffusionInputs& in, const dif::DiffusionState& s) {
  using sciproxy::python::to_numpy;
  const std::int64_t nc = in.grid.num_cells, ne = in.grid.num_edges, nlev = in.vertical.num_levels;
  nb::dict d;
  d["vn"] = to_numpy(std::vector<double>(s.vn), {ne, nlev});
  d["w"] = to_numpy(std::vector<double>(s.w), {nc, nlev + 1});
  d["theta_v"] = to_numpy(std::vector<double>(s.theta_v), {nc, nlev});
  d["exner"] = to_numpy(std::vector<double>(s.exner), {nc, nlev});
  d["hdef_ic"] = to_numpy(std::vector<double>(s.hdef_ic), {nc, nlev + 1});
  d["div_ic"] = to_numpy(std::vector<double>(s.div_ic), {nc, nlev + 1});
  d["dwdx"] = to_numpy(std::vector<double>(s.dwdx), {nc, nlev + 1});
  d["dwdy"] = to_numpy(std::vector<double>(s.dwdy), {nc, nlev + 1});
  return d;
}

dif::DiffusionInputs computed(const dif::Grid& grid, int num_levels) {
  nb::gil_scoped_release release;
  return dif::computed_inputs(grid, num_levels);
}

dif::DiffusionConfig config_of(const nb::dict& c) {
  dif::DiffusionConfig k;
  k.diffusion_type = scalar_of<int>(c, "diffusion_type");
  k.apply_to_vertical_wind = scalar_of<bool>(c, "apply_to_vertical_wind");
  k.apply_to_horizontal_wind = scalar_of<bool>(c, "apply_to_horizontal_wind");
  k.apply_to_temperature = scalar_of<bool>(c, "apply_to_temperature");
  k.apply_smag_diff_to_vertical_wind = scalar_of<bool>(c, "apply_smag_diff_to_vertical_wind");
  k.compute_3d_smag_coeff = scalar_of<bool>(c, "compute_3d_smag_coeff");
  k.type_vn_diffu = scalar_of<int>(c, "type_vn_diffu");
  k.type_t_diffu = scalar_of<int>(c, "type_t_diffu");
  k.hdiff_efdt_ratio = scalar_of<double>(c, "hdiff_efdt_ratio");
  k.hdiff_w_efdt_ratio = scalar_of<double>(c, "hdiff_w_efdt_ratio");
  k.smagorinski_scaling_factor = scalar_of<double>(c, "smagorinski_scaling_factor");
  k.smagorinski_scaling_factor2 = scalar_of<double>(c, "smagorinski_scaling_factor2");
  k.smagorinski_scaling_factor3 = scalar_of<double>(c, "smagorinski_scaling_factor3");
  k.smagorinski_scaling_factor4 = scalar_of<double>(c, "smagorinski_scaling_factor4");
  k.smagorinski_scaling_height = scalar_of<double>(c, "smagorinski_scaling_height");
  k.smagorinski_scaling_height2 = scalar_of<double>(c, "smagorinski_scaling_height2");
  k.smagorinski_scaling_height3 = scalar_of<double>(c, "smagorinski_scaling_height3");
  k.smagorinski_scaling_height4 = scalar_of<double>(c, "smagorinski_scaling_height4");
  k.apply_zdiffusion_t = scalar_of<bool>(c, "apply_zdiffusion_t");
  k.ndyn_substeps = scalar_of<int>(c, "ndyn_substeps");
  k.temperature_boundary_diffusion_denominator =
      scalar_of<double>(c, "temperature_boundary_diffusion_denominator");
  k.velocity_boundary_diffusion_denominator =
      scalar_of<double>(c, "velocity_boundary_diffusion_denominator");
  k.max_nudging_coefficient = scalar_of<double>(c, "max_nudging_coefficient");
  k.shear_type = scalar_of<int>(c, "shear_type");
  k.iforcing = scalar_of<int>(c, "iforcing");
  k.a_hshr = scalar_of<double>(c, "a_hshr");
  k.loutshs = scalar_of<bool>(c, "loutshs");
  return k;
}

nb::dict default_config() {
  const dif::DiffusionConfig k;
  nb::dict c;
  c["diffusion_type"] = k.diffusion_type;
  c["apply_to_vertical_wind"] = k.apply_to_vertical_wind;
  c["apply_to_horizontal_wind"] = k.apply_to_horizontal_wind;
  c["apply_to_temperature"] = k.apply_to_temperature;
  c["apply_smag_diff_to_vertical_wind"] = k.apply_smag_diff_to_vertical_wind;
  c["compute_3d_smag_coeff"] = k.compute_3d_smag_coeff;
  c["type_vn_diffu"] = k.type_vn_diffu;
  c["type_t_diffu"] = k.type_t_diffu;
  c["hdiff_efdt_ratio"] = k.hdiff_efdt_ratio;
  c["hdiff_w_efdt_ratio"] = k.hdiff_w_efdt_ratio;
  c["smagorinski_scaling_factor"] = k.smagorinski_scaling_factor;
  c["smagorinski_scaling_factor2"] = k.smagorinski_scaling_factor2;
  c["smagorinski_scaling_factor3"] = k.smagorinski_scaling_factor3;
  c["smagorinski_scaling_factor4"] = k.smagorinski_scaling_factor4;
  c["smagorinski_scaling_height"] = k.smagorinski_scaling_height;
  c["smagorinski_scaling_height2"] = k.smagorinski_scaling_height2;
  c["smagorinski_scaling_height3"] = k.smagorinski_scaling_height3;
  c["smagorinski_scaling_height4"] = k.smagorinski_scaling_height4;
  c["apply_zdiffusion_t"] = k.apply_zdiffusion_t;
  c["ndyn_substeps"] = k.ndyn_substeps;
  c["temperature_boundary_diffusion_denominator"] = k.temperature_boundary_diffusion_denominator;
  c["velocity_boundary_diffusion_denominator"] = k.velocity_boundary_diffusion_denominator;
  c["max_nudging_coefficient"] = k.max_nudging_coefficient;
  c["shear_type"] = k.shear_type;
  c["iforcing"] = k.iforcing;
  c["a_hshr"] = k.a_hshr;
  c["loutshs"] = k.loutshs;
  return c;
}

// The granule from the Python layer's normalised dicts.
dif::Diffusion* make_granule(const dif::Grid& grid, const nb::dict& config,
                             const nb::dict& vertical, const nb::dict& metric,
                             const nb::dict& interp, const nb::dict& edge, const nb::dict& cell,
                             const std::string& device, int nparallel, const std::string& layout,
                             bool single_precision, bool check_finite, const nb::dict& mpi) {
  dif::DiffusionVerticalGrid v;
  v.num_levels = scalar_of<int>(vertical, "num_levels");
  v.vct_a = vector_of<double>(vertical, "vct_a");
  v.end_index_of_damping_layer = scalar_of<int>(vertical, "end_index_of_damping_layer");
  dif::DiffusionMetricState m;
  m.theta_ref_mc = vector_of<double>(metric, "theta_ref_mc");
  m.wgtfac_c = vector_of<double>(metric, "wgtfac_c");
  m.zd_intcoef = vector_of<double>(metric, "zd_intcoef");
  m.zd_diffcoef = vector_of<double>(metric, "zd_diffcoef");
  m.zd_vertoffset = vector_of<std::int32_t>(metric, "zd_vertoffset");
  dif::DiffusionInterpolationState i;
  i.e_bln_c_s = vector_of<double>(interp, "e_bln_c_s");
  i.rbf_coeff_1 = vector_of<double>(interp, "rbf_coeff_1");
  i.rbf_coeff_2 = vector_of<double>(interp, "rbf_coeff_2");
  i.geofac_div = vector_of<double>(interp, "geofac_div");
  i.geofac_n2s = vector_of<double>(interp, "geofac_n2s");
  i.geofac_grg_x = vector_of<double>(interp, "geofac_grg_x");
  i.geofac_grg_y = vector_of<double>(interp, "geofac_grg_y");
  i.nudgecoeff_e = vector_of<double>(interp, "nudgecoeff_e");
  dif::DiffusionEdgeParams e;
  e.tangent_orientation = vector_of<double>(edge, "tangent_orientation");
  e.inverse_primal_edge_lengths = vector_of<double>(edge, "inverse_primal_edge_lengths");
  e.inverse_vertex_vertex_lengths = vector_of<double>(edge, "inverse_vertex_vertex_lengths");
  e.inverse_dual_edge_lengths = vector_of<double>(edge, "inverse_dual_edge_lengths");
  e.edge_areas = vector_of<double>(edge, "edge_areas");
  e.primal_normal_vert_x = vector_of<double>(edge, "primal_normal_vert_x");
  e.primal_normal_vert_y = vector_of<double>(edge, "primal_normal_vert_y");
  e.dual_normal_vert_x = vector_of<double>(edge, "dual_normal_vert_x");
  e.dual_normal_vert_y = vector_of<double>(edge, "dual_normal_vert_y");
  dif::DiffusionCellParams c;
  c.area = vector_of<double>(cell, "area");
  c.mean_cell_area = scalar_of<double>(cell, "mean_cell_area");
  dif::DiffusionOptions o;
  o.device = device;
  o.nparallel = nparallel;
  o.layout = layout == "entities" ? dif::FieldLayout::EntitiesContiguous
                                  : dif::FieldLayout::LevelsContiguous;
  o.single_precision = single_precision;
  o.check_finite = check_finite;
  if (mpi.contains("comm")) {  // MPI: the Python layer checked the types, shape and ranks
    o.comm = sciproxy::Communicator::from_handle(nb::cast<std::int64_t>(mpi["comm"]), "comm");
    if (mpi.contains("cell_owner")) o.cell_owner = vector_of<std::int32_t>(mpi, "cell_owner");
    o.rank_local_fields = scalar_of<bool>(mpi, "rank_local_fields");
  }
  const dif::DiffusionConfig k = config_of(config);
  nb::gil_scoped_release release;
  return new dif::Diffusion(grid, k, v, m, i, e, c, o);
}

// One run on the caller's arrays, in place: the Python layer checked shapes, dtype, layout.
template <class Real>
void run_granule(dif::Diffusion& g, nb::ndarray<Real, nb::device::cpu> vn,
                 nb::ndarray<Real, nb::device::cpu> w, nb::ndarray<Real, nb::device::cpu> theta_v,
                 nb::ndarray<Real, nb::device::cpu> exner,
                 nb::ndarray<Real, nb::device::cpu> hdef_ic,
                 nb::ndarray<Real, nb::device::cpu> div_ic, nb::ndarray<Real, nb::device::cpu> dwdx,
                 nb::ndarray<Real, nb::device::cpu> dwdy, double dtime, bool initial_run) {
  dif::DiffusionPrognosticFields<Real> p{vn.data(), w.data(), theta_v.data(), exner.data()};
  dif::DiffusionDiagnosticFields<Real> d{hdef_ic.data(), div_ic.data(), dwdx.data(), dwdy.data()};
  nb::gil_scoped_release release;
  g.run(d, p, dtime, initial_run);
}

}  // namespace

void register_diffusion(nb::module_& m) {
  nb::class_<dif::Grid>(m, "DiffusionGrid",
                        "An icosahedral grid (use sciproxy.diffusion, not this class)")
      .def_ro("n", &dif::Grid::n)
      .def_ro("k", &dif::Grid::k)
      .def_ro("radius", &dif::Grid::radius)
      .def_ro("num_cells", &dif::Grid::num_cells)
      .def_ro("num_edges", &dif::Grid::num_edges)
      .def_ro("num_vertices", &dif::Grid::num_vertices)
      .def_ro("limited_area", &dif::Grid::limited_area)
      .def("connectivity", &grid_connectivity, "name"_a)
      .def("field", &grid_field, "name"_a)
      .def(
          "start_index",
          [](const dif::Grid& g, const std::string& dim, const std::string& zone) {
            return g.start_index(dimension_of(dim), dif::zone_from_name(zone));
          },
          "dim"_a, "zone"_a)
      .def(
          "end_index",
          [](const dif::Grid& g, const std::string& dim, const std::string& zone) {
            return g.end_index(dimension_of(dim), dif::zone_from_name(zone));
          },
          "dim"_a, "zone"_a);
  nb::class_<dif::DiffusionInputs>(m, "DiffusionInputs");
  m.def(
      "diffusion_icosahedral_grid",
      [](int n, int k, double radius) {
        nb::gil_scoped_release release;
        return dif::icosahedral_grid(n, k, radius);
      },
      "n"_a, "k"_a, "radius"_a);
  m.def(
      "diffusion_read_grid",
      [](const std::string& path, double radius) {
        nb::gil_scoped_release release;
        return dif::read_grid_file(path, radius);
      },
      "path"_a, "radius"_a);
  m.def(
      "diffusion_write_grid",
      [](const dif::Grid& grid, const std::string& path) {
        nb::gil_scoped_release release;
        dif::write_grid_file(grid, path);
      },
      "grid"_a, "path"_a);
  m.def(
      "diffusion_limited_area_grid",
      [](const dif::Grid& global, double lat, double lon, double radius, int depth) {
        nb::gil_scoped_release release;
        dif::LimitedAreaOptions o;
        o.boundary_depth = depth;
        return dif::limited_area_grid(global, lat, lon, radius, o);
      },
      "global_grid"_a, "center_lat"_a, "center_lon"_a, "radius_rad"_a, "boundary_depth"_a);
  m.def("diffusion_computed_inputs", &computed, "grid"_a, "num_levels"_a);
  m.def("diffusion_inputs_dict", &inputs_dict, "inputs"_a);
  m.def(
      "diffusion_synthetic_state",
      [](const dif::DiffusionInputs& in, std::uint64_t seed) {
        return state_dict(in, dif::synthetic_state(in, seed));
      },
      "inputs"_a, "seed"_a);
  m.def("diffusion_smagorinsky_dtime", &dif::smagorinsky_dtime, "inputs"_a);
  m.def("diffusion_default_config", &default_config);
  nb::class_<dif::Diffusion>(m, "DiffusionGranule",
                             "The granule (use sciproxy.diffusion.Diffusion)")
      .def(
          "__init__",
          [](dif::Diffusion* self, const dif::Grid& grid, const nb::dict& config,
             const nb::dict& vertical, const nb::dict& metric, const nb::dict& interp,
             const nb::dict& edge, const nb::dict& cell, const std::string& device, int nparallel,
             const std::string& layout, bool single, bool check_finite, const nb::dict& mpi) {
            dif::Diffusion* made =
                make_granule(grid, config, vertical, metric, interp, edge, cell, device, nparallel,
                             layout, single, check_finite, mpi);
            new (self) dif::Diffusion(std::move(*made));
            delete made;
          },
          "grid"_a, "config"_a, "vertical_grid"_a, "metric_state"_a, "interpolation_state"_a,
          "edge_params"_a, "cell_params"_a, "device"_a, "nparallel"_a, "layout"_a,
          "single_precision"_a, "check_finite"_a, "mpi"_a)
      .def("run", &run_granule<double>, "vn"_a.noconvert(), "w"_a.noconvert(),
           "theta_v"_a.noconvert(), "exner"_a.noconvert(), "hdef_ic"_a.noconvert(),
           "div_ic"_a.noconvert(), "dwdx"_a.noconvert(), "dwdy"_a.noconvert(), "dtime"_a,
           "initial_run"_a)
      .def("run", &run_granule<float>, "vn"_a.noconvert(), "w"_a.noconvert(),
           "theta_v"_a.noconvert(), "exner"_a.noconvert(), "hdef_ic"_a.noconvert(),
           "div_ic"_a.noconvert(), "dwdx"_a.noconvert(), "dwdy"_a.noconvert(), "dtime"_a,
           "initial_run"_a)
      .def("timer_table", [](dif::Diffusion& g) { return g.timers().table(); })
      .def("timers_json", [](dif::Diffusion& g) { return g.timers().json(); })
      .def(
          "global_index",
          [](const dif::Diffusion& g, const std::string& dim) {
            std::vector<std::int32_t> v = g.global_index(dimension_of(dim));
            const auto n = static_cast<std::int64_t>(v.size());
            return sciproxy::python::to_numpy(std::move(v), {n});
          },
          "dim"_a)
      .def(
          "halo_level",
          [](const dif::Diffusion& g, const std::string& dim) {
            std::vector<std::int8_t> v = g.halo_level(dimension_of(dim));
            const auto n = static_cast<std::int64_t>(v.size());
            return sciproxy::python::to_numpy(std::move(v), {n});
          },
          "dim"_a)
      .def_prop_ro("device", &dif::Diffusion::device)
      .def_prop_ro("num_levels", &dif::Diffusion::num_levels)
      .def_prop_ro("bytes_per_run", &dif::Diffusion::bytes_per_run)
      .def_prop_ro("init_seconds", &dif::Diffusion::init_seconds);
}
