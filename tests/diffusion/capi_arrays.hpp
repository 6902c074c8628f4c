// The diffusion C ABI's arrays as ICON holds them, for tests: row-major arrays as Fortran
// arrays, zero-based tables as ICON's 1-based ones, and a setup's grid and init inputs through
// sciproxy_diffusion_grid_init and sciproxy_diffusion_init.
#pragma once

#include <cstdint>
#include <vector>

#include "diffusion/granule_setup.hpp"
#include "sciproxy/diffusion.hpp"
#include "sciproxy/sciproxy.h"

namespace sciproxy::diffusion::testing {

namespace df = sciproxy::diffusion;

// Row-major [n][m] as a Fortran array (n, m).
template <class T>
std::vector<T> fortran(const std::vector<T>& a, std::int64_t n, std::int64_t m) {
  std::vector<T> out(a.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j) out[j * n + i] = a[i * m + j];
  return out;
}

// Row-major [n][3][nlev] as a Fortran array (n, 3, nlev).
template <class T>
std::vector<T> fortran3(const std::vector<T>& a, std::int64_t n, std::int64_t nlev) {
  std::vector<T> out(a.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (int j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < nlev; ++k) out[(k * 3 + j) * n + i] = a[(i * 3 + j) * nlev + k];
  return out;
}

// A zero-based row-major table as ICON's Fortran table: 1-based, 0 for a missing neighbour.
inline std::vector<std::int32_t> icon_table(const std::vector<std::int32_t>& t, std::int64_t rows,
                                            int cols) {
  std::vector<std::int32_t> out = fortran(t, rows, cols);
  for (auto& v : out) v = v < 0 ? 0 : v + 1;
  return out;
}

struct IconTables {
  std::vector<std::int32_t> c2e, c2e2c, e2c, e2v, e2c2v, v2e, v2c, c2v;
};

inline IconTables icon_tables(const df::Grid& g) {
  return {icon_table(g.c2e, g.num_cells, 3),    icon_table(g.c2e2c, g.num_cells, 3),
          icon_table(g.e2c, g.num_edges, 2),    icon_table(g.e2v, g.num_edges, 2),
          icon_table(g.e2c2v, g.num_edges, 4),  icon_table(g.v2e, g.num_vertices, 6),
          icon_table(g.v2c, g.num_vertices, 6), icon_table(g.c2v, g.num_cells, 3)};
}

inline sciproxy_status grid_from(const df::Grid& g, const IconTables& t,
                                 sciproxy_diffusion_grid** out) {
  return sciproxy_diffusion_grid_init(g.num_cells, g.num_edges, g.num_vertices, t.c2e.data(),
                                      t.c2e2c.data(), t.e2c.data(), t.e2v.data(), t.e2c2v.data(),
                                      t.v2e.data(), t.v2c.data(), t.c2v.data(), nullptr, nullptr,
                                      nullptr, out);
}

inline sciproxy_diffusion_config c_config(const df::DiffusionConfig& d) {
  sciproxy_diffusion_config c;
  sciproxy_diffusion_config_default(&c);
  c.shear_type = d.shear_type;
  return c;
}

// The setup's every init input as Fortran arrays, through sciproxy_diffusion_init.
inline sciproxy_status init_from(const GranuleSetup& s, sciproxy_diffusion_grid* grid,
                                 const sciproxy_diffusion_options* options,
                                 sciproxy_diffusion** handle) {
  const std::int64_t nc = s.grid.num_cells, ne = s.grid.num_edges, nv = s.grid.num_vertices;
  const int nlev = s.vertical.num_levels;
  const auto& m = s.metrics;
  const auto& in = s.interpolation;
  const auto& ep = s.edges;
  const auto theta_ref_mc = fortran(m.theta_ref_mc, nc, nlev);
  const auto wgtfac_c = fortran(m.wgtfac_c, nc, nlev + 1);
  const auto zd_intcoef = fortran3(m.zd_intcoef, nc, nlev);
  const auto zd_vertoffset = fortran3(m.zd_vertoffset, nc, nlev);
  const auto zd_diffcoef = fortran(m.zd_diffcoef, nc, nlev);
  const auto e_bln_c_s = fortran(in.e_bln_c_s, nc, 3);
  const auto geofac_div = fortran(in.geofac_div, nc, 3);
  const auto geofac_grg_x = fortran(in.geofac_grg_x, nc, 4);
  const auto geofac_grg_y = fortran(in.geofac_grg_y, nc, 4);
  const auto geofac_n2s = fortran(in.geofac_n2s, nc, 4);
  const auto rbf_coeff_1 = fortran(in.rbf_coeff_1, nv, 6);
  const auto rbf_coeff_2 = fortran(in.rbf_coeff_2, nv, 6);
  const auto pnx = fortran(ep.primal_normal_vert_x, ne, 4);
  const auto pny = fortran(ep.primal_normal_vert_y, ne, 4);
  const auto dnx = fortran(ep.dual_normal_vert_x, ne, 4);
  const auto dny = fortran(ep.dual_normal_vert_y, ne, 4);
  const sciproxy_diffusion_config config = c_config(s.config);
  return sciproxy_diffusion_init(
      grid, options, &config, nlev, s.vertical.vct_a.data(), s.vertical.end_index_of_damping_layer,
      theta_ref_mc.data(), wgtfac_c.data(), zd_intcoef.data(), zd_vertoffset.data(),
      zd_diffcoef.data(), e_bln_c_s.data(), geofac_div.data(), geofac_grg_x.data(),
      geofac_grg_y.data(), geofac_n2s.data(), in.nudgecoeff_e.data(), rbf_coeff_1.data(),
      rbf_coeff_2.data(), ep.tangent_orientation.data(), ep.inverse_primal_edge_lengths.data(),
      ep.inverse_dual_edge_lengths.data(), ep.inverse_vertex_vertex_lengths.data(),
      ep.edge_areas.data(), pnx.data(), pny.data(), dnx.data(), dny.data(), s.cells.area.data(),
      s.cells.mean_cell_area, handle);
}

}  // namespace sciproxy::diffusion::testing
