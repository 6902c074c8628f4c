// The granule's geometry inputs computed from a grid, as ICON4Py's geometry factory computes
// them (model/common/grid/geometry.py, geometry_stencils.py):
//
//   edge_areas = primal edge length x dual edge length
//   t = tangent_orientation normalize(v[E2V1] - v[E2V0]),  n = normalize(m x t), m the edge centre
//     (ICON4Py's edge tangent and primal normal, from the positions' latitudes and longitudes)
//   primal_normal_vert_{x,y}[e, i]: n in the local frame of diamond vertex i = E2C2V[e, i] at
//     (lat, lon), renormalised:  (x, y) = (n . e_lon, n . e_lat) / |(n . e_lon, n . e_lat)|,
//     e_lon = (-sin lon, cos lon, 0),  e_lat = (-sin lat cos lon, -sin lat sin lon, cos lat)
//   dual_normal_vert_{x,y}: the same for t (the dual normal)
//   mean_cell_area = sum of the cell areas / number of cells
// and computed_inputs: the whole input set, the vertical grid and metrics from metrics.cpp.
#include <cmath>
#include <random>
#include <string>
#include <utility>

#include "sciproxy/core/error.hpp"
#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion {

DiffusionInterpolationState interpolation_state(const Grid& grid,
                                                const InterpolationCoefficients& c) {
  (void)grid;
  DiffusionInterpolationState s;
  s.e_bln_c_s = c.e_bln_c_s;
  s.rbf_coeff_1 = c.rbf_vec_coeff_v1;
  s.rbf_coeff_2 = c.rbf_vec_coeff_v2;
  s.geofac_div = c.geofac_div;
  s.geofac_n2s = c.geofac_n2s;
  const std::size_t nc = c.geofac_n2s.size() / 4;
  s.geofac_grg_x.resize(4 * nc);
  s.geofac_grg_y.resize(4 * nc);
  for (std::size_t i = 0; i < 4 * nc; ++i) {
    s.geofac_grg_x[i] = c.geofac_grg[2 * i];
    s.geofac_grg_y[i] = c.geofac_grg[2 * i + 1];
  }
  s.nudgecoeff_e = c.nudgecoeff_e;
  return s;
}

DiffusionEdgeParams edge_params(const Grid& grid, const InterpolationCoefficients& c) {
  DiffusionEdgeParams p;
  const std::int64_t ne = grid.num_edges;
  p.tangent_orientation.assign(grid.tangent_orientation.begin(), grid.tangent_orientation.end());
  p.inverse_primal_edge_lengths = c.inverse_primal_edge_lengths;
  p.inverse_vertex_vertex_lengths = c.inverse_vertex_vertex_lengths;
  p.inverse_dual_edge_lengths = c.inverse_dual_edge_lengths;
  p.edge_areas.resize(ne);
  for (std::int64_t e = 0; e < ne; ++e)
    p.edge_areas[e] = grid.edge_length[e] * grid.dual_edge_length[e];
  p.primal_normal_vert_x.assign(4 * ne, 0.0);
  p.primal_normal_vert_y.assign(4 * ne, 0.0);
  p.dual_normal_vert_x.assign(4 * ne, 0.0);
  p.dual_normal_vert_y.assign(4 * ne, 0.0);
  auto cartesian = [](double lat, double lon, double out[3]) {
    out[0] = std::cos(lat) * std::cos(lon), out[1] = std::cos(lat) * std::sin(lon),
    out[2] = std::sin(lat);
  };
  auto normalize = [](double v[3]) {
    const double n = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    v[0] /= n, v[1] /= n, v[2] /= n;
  };
  for (std::int64_t e = 0; e < ne; ++e) {
    // ICON4Py's edge tangent and normal: the chord between the edge's vertices (signed by
    // tangent_orientation), and the edge centre (the file's, on a read grid) cross it.
    double v0[3], v1[3], m[3];
    cartesian(grid.vertex_lat[grid.e2v[2 * e]], grid.vertex_lon[grid.e2v[2 * e]], v0);
    cartesian(grid.vertex_lat[grid.e2v[2 * e + 1]], grid.vertex_lon[grid.e2v[2 * e + 1]], v1);
    cartesian(grid.edge_center_lat[e], grid.edge_center_lon[e], m);
    const double o = grid.tangent_orientation[e];
    double t[3] = {o * (v1[0] - v0[0]), o * (v1[1] - v0[1]), o * (v1[2] - v0[2])};
    normalize(t);
    double n[3] = {m[1] * t[2] - m[2] * t[1], m[2] * t[0] - m[0] * t[2], m[0] * t[1] - m[1] * t[0]};
    normalize(n);
    for (int i = 0; i < 4; ++i) {
      const std::int32_t v = grid.e2c2v[4 * e + i];
      if (v < 0) continue;
      const double lat = grid.vertex_lat[v], lon = grid.vertex_lon[v];
      const double e_lon[3] = {-std::sin(lon), std::cos(lon), 0.0};
      const double e_lat[3] = {-std::sin(lat) * std::cos(lon), -std::sin(lat) * std::sin(lon),
                               std::cos(lat)};
      // Projected on the vertex's tangent plane and renormalised to a unit vector, as ICON4Py's
      // zonal_and_meridional_components_on_edges does.
      const double nu = n[0] * e_lon[0] + n[1] * e_lon[1] + n[2] * e_lon[2];
      const double nv = n[0] * e_lat[0] + n[1] * e_lat[1] + n[2] * e_lat[2];
      const double tu = t[0] * e_lon[0] + t[1] * e_lon[1] + t[2] * e_lon[2];
      const double tv = t[0] * e_lat[0] + t[1] * e_lat[1] + t[2] * e_lat[2];
      const double n_norm = std::sqrt(nu * nu + nv * nv), t_norm = std::sqrt(tu * tu + tv * tv);
      p.primal_normal_vert_x[4 * e + i] = nu / n_norm;
      p.primal_normal_vert_y[4 * e + i] = nv / n_norm;
      p.dual_normal_vert_x[4 * e + i] = tu / t_norm;
      p.dual_normal_vert_y[4 * e + i] = tv / t_norm;
    }
  }
  return p;
}

DiffusionCellParams cell_params(const Grid& grid) {
  DiffusionCellParams p;
  p.area = grid.cell_area;
  double sum = 0;
  for (double a : grid.cell_area) sum += a;
  p.mean_cell_area = grid.num_cells > 0 ? sum / grid.num_cells : 0.0;
  return p;
}

}  // namespace sciproxy::diffusion

namespace sciproxy::diffusion {

DiffusionInputs computed_inputs(Grid grid, int num_levels, const ComputedInputsOptions& options) {
  require(num_levels >= 2, "num_levels", "at least 2 levels", std::to_string(num_levels));
  DiffusionInputs s;
  s.grid = std::move(grid);
  const InterpolationCoefficients c = interpolation_coefficients(s.grid);
  s.interpolation = interpolation_state(s.grid, c);
  s.edges = edge_params(s.grid, c);
  s.cells = cell_params(s.grid);
  s.config.shear_type = 2;  // every diagnostic written
  VerticalGridConfig vc = options.vertical;
  vc.num_levels = num_levels;
  const VerticalGrid vg = vertical_grid(vc);
  s.vertical.num_levels = num_levels;
  s.vertical.vct_a = vg.vct_a;
  s.vertical.end_index_of_damping_layer = vg.end_index_of_damping_layer;
  s.vertical_grid = vg;
  const MetricState m =
      metric_state(s.grid, c, vg, synthetic_orography(s.grid, options.mountain), options.metrics);
  s.metrics.theta_ref_mc = m.theta_ref_mc;
  s.metrics.wgtfac_c = m.wgtfac_c;
  s.metrics.zd_intcoef = m.zd_intcoef;
  s.metrics.zd_vertoffset = m.zd_vertoffset;
  s.metrics.zd_diffcoef = m.zd_diffcoef;
  return s;
}

}  // namespace sciproxy::diffusion

namespace sciproxy::diffusion {

DiffusionState synthetic_state(const DiffusionInputs& inputs, std::uint64_t seed) {
  const Grid& g = inputs.grid;
  const int nlev = inputs.vertical.num_levels;
  const std::int64_t nc = g.num_cells, ne = g.num_edges;
  // Uniform in [-0.5, 0.5) from the raw 64-bit stream: the same on every standard library.
  std::mt19937_64 rng(seed);
  auto noise = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53 - 0.5; };
  DiffusionState s;
  s.vn.resize(ne * nlev);
  for (std::int64_t e = 0; e < ne; ++e)
    for (int k = 0; k < nlev; ++k)
      s.vn[e * nlev + k] =
          20.0 * std::cos(g.edge_center_lat[e]) * g.primal_normal_x[e] + 2.0 * noise();
  s.w.resize(nc * (nlev + 1));
  for (auto& x : s.w) x = 0.2 * noise();
  s.theta_v.resize(nc * nlev);
  s.exner.resize(nc * nlev);
  for (std::int64_t c = 0; c < nc; ++c)
    for (int k = 0; k < nlev; ++k) {
      const double cold = (c % 13 == 0 && k >= nlev - 2) ? -8.0 : 0.0;
      s.theta_v[c * nlev + k] = inputs.metrics.theta_ref_mc[c * nlev + k] + cold + noise();
      s.exner[c * nlev + k] = 0.7 + 0.25 * double(k) / nlev + 0.001 * noise();
    }
  s.hdef_ic.assign(nc * (nlev + 1), 0.0);
  s.div_ic = s.dwdx = s.dwdy = s.hdef_ic;
  return s;
}

double smagorinsky_dtime(const DiffusionInputs& inputs) {
  return 9.0 * std::sqrt(inputs.cells.mean_cell_area) / 1000.0;
}

}  // namespace sciproxy::diffusion
