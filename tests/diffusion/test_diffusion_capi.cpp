// The diffusion C ABI against the C++ API: a grid passed as ICON holds it (1-based Fortran
// connectivity tables) and every init input as a Fortran array, run on Fortran-order fields,
// gives the C++ granule's results on LevelsContiguous fields; init_computed is the C++ granule
// with sciproxy's coefficients and the simple vertical grid (granule_setup.hpp without zd
// points); and the tables are checked and converted as documented.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "diffusion/capi_arrays.hpp"
#include "diffusion/granule_setup.hpp"
#include "sciproxy/diffusion.hpp"
#include "sciproxy/sciproxy.h"

namespace {

namespace df = sciproxy::diffusion;
using df::testing::c_config;
using df::testing::fortran;
using df::testing::fortran3;
using df::testing::GranuleFields;
using df::testing::GranuleSetup;
using df::testing::grid_from;
using df::testing::icon_table;
using df::testing::icon_tables;
using df::testing::IconTables;
using df::testing::init_from;

// The C++ granule, LevelsContiguous: two runs (initial, then a step) of f, in place.
void run_cpp(const GranuleSetup& s, GranuleFields& f, double dtime) {
  df::DiffusionOptions o;
  o.device = "cpu";
  df::Diffusion granule(s.grid, s.config, s.vertical, s.metrics, s.interpolation, s.edges, s.cells,
                        o);
  df::DiffusionPrognosticFields<double> p{f.vn.data(), f.w.data(), f.theta_v.data(),
                                          f.exner.data()};
  df::DiffusionDiagnosticFields<double> d{f.hdef_ic.data(), f.div_ic.data(), f.dwdx.data(),
                                          f.dwdy.data()};
  granule.run(d, p, dtime, true);
  granule.run(d, p, dtime, false);
}

// The same two runs through the C ABI on Fortran-order copies of f; the results back in f's order.
void run_capi(sciproxy_diffusion* h, const GranuleSetup& s, GranuleFields& f, double dtime) {
  const std::int64_t nc = s.grid.num_cells, ne = s.grid.num_edges;
  const int nlev = s.vertical.num_levels;
  auto vn = fortran(f.vn, ne, nlev), w = fortran(f.w, nc, nlev + 1);
  auto theta_v = fortran(f.theta_v, nc, nlev), exner = fortran(f.exner, nc, nlev);
  auto hdef_ic = fortran(f.hdef_ic, nc, nlev + 1), div_ic = fortran(f.div_ic, nc, nlev + 1);
  auto dwdx = fortran(f.dwdx, nc, nlev + 1), dwdy = fortran(f.dwdy, nc, nlev + 1);
  const std::vector<double> rho(nc * nlev, 1.0);
  for (int linit : {1, 0})
    ASSERT_EQ(sciproxy_diffusion_run(h, w.data(), vn.data(), exner.data(), theta_v.data(),
                                     rho.data(), hdef_ic.data(), div_ic.data(), dwdx.data(),
                                     dwdy.data(), dtime, linit),
              SCIPROXY_OK)
        << sciproxy_last_error();
  // Fortran (n, m) back to row-major [n][m]: the Fortran array is row-major [m][n].
  f.vn = fortran(vn, nlev, ne);
  f.w = fortran(w, nlev + 1, nc);
  f.theta_v = fortran(theta_v, nlev, nc);
  f.exner = fortran(exner, nlev, nc);
  f.hdef_ic = fortran(hdef_ic, nlev + 1, nc);
  f.div_ic = fortran(div_ic, nlev + 1, nc);
  f.dwdx = fortran(dwdx, nlev + 1, nc);
  f.dwdy = fortran(dwdy, nlev + 1, nc);
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b, const char* name) {
  ASSERT_EQ(a.size(), b.size()) << name;
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / (std::abs(b[i]) + 1e-30));
  EXPECT_LE(worst, 1e-12) << name;
}

void expect_same_fields(const GranuleFields& a, const GranuleFields& b) {
  expect_close(a.vn, b.vn, "vn");
  expect_close(a.w, b.w, "w");
  expect_close(a.theta_v, b.theta_v, "theta_v");
  expect_close(a.exner, b.exner, "exner");
  expect_close(a.hdef_ic, b.hdef_ic, "hdef_ic");
  expect_close(a.div_ic, b.div_ic, "div_ic");
  expect_close(a.dwdx, b.dwdx, "dwdx");
  expect_close(a.dwdy, b.dwdy, "dwdy");
}

constexpr double kDtime = 9.0 * 450.0;

TEST(DiffusionCapi, IconArraysGiveTheCppGranulesResults) {
  const GranuleSetup s = df::testing::make_setup(2, 1, 8);  // with zd points and shear_type 2
  const IconTables t = icon_tables(s.grid);
  sciproxy_diffusion_grid* grid = nullptr;
  ASSERT_EQ(grid_from(s.grid, t, &grid), SCIPROXY_OK) << sciproxy_last_error();
  sciproxy_diffusion_options o;
  sciproxy_diffusion_options_default(&o);
  o.device = "cpu";
  sciproxy_diffusion* h = nullptr;
  ASSERT_EQ(init_from(s, grid, &o, &h), SCIPROXY_OK) << sciproxy_last_error();
  sciproxy_diffusion_grid_free(grid);  // init keeps its own copy

  GranuleFields expected = df::testing::make_fields(s, 7);
  GranuleFields got = expected;
  run_cpp(s, expected, kDtime);
  run_capi(h, s, got, kDtime);
  expect_same_fields(got, expected);
  // Every output was written (shear_type 2) and the zd branch ran.
  double dwdx = 0;
  for (double x : got.dwdx) dwdx += std::abs(x);
  EXPECT_GT(dwdx, 0);
  sciproxy_diffusion_free(h);
}

TEST(DiffusionCapi, InitComputedIsTheCppGranuleWithSciproxysCoefficients) {
  const GranuleSetup s = df::testing::make_setup(2, 1, 6);  // computed_inputs, as init_computed
  sciproxy_diffusion_grid* grid = nullptr;
  ASSERT_EQ(sciproxy_diffusion_grid_icosahedral(2, 1, &grid), SCIPROXY_OK);
  sciproxy_diffusion_options o;
  sciproxy_diffusion_options_default(&o);
  o.device = "cpu";
  const sciproxy_diffusion_config config = c_config(s.config);
  sciproxy_diffusion* h = nullptr;
  ASSERT_EQ(sciproxy_diffusion_init_computed(grid, &o, &config, 6, &h), SCIPROXY_OK)
      << sciproxy_last_error();
  GranuleFields expected = df::testing::make_fields(s, 11);
  GranuleFields got = expected;
  run_cpp(s, expected, kDtime);
  run_capi(h, s, got, kDtime);
  expect_same_fields(got, expected);
  sciproxy_diffusion_free(h);
  sciproxy_diffusion_grid_free(grid);
}

TEST(DiffusionCapi, AGlobalGridWithAnEdgeMissingACellIsRefusedAtInit) {
  // Tables whose indices are all in range, but an edge lacks its second cell on a global grid
  // (no boundary zone to exclude it): the temperature stencil would read outside theta_v.
  GranuleSetup s = df::testing::make_setup(1, 0, 4, /*with_zd=*/false);
  IconTables t = icon_tables(s.grid);
  t.e2c[s.grid.num_edges + 5] = 0;  // e2c(6, 2)
  sciproxy_diffusion_grid* grid = nullptr;
  ASSERT_EQ(grid_from(s.grid, t, &grid), SCIPROXY_OK) << sciproxy_last_error();
  sciproxy_diffusion* h = nullptr;
  EXPECT_EQ(init_from(s, grid, nullptr, &h), SCIPROXY_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sciproxy_last_error()).find("grid.e2c: expected two cells"),
            std::string::npos)
      << sciproxy_last_error();
  EXPECT_EQ(h, nullptr);
  sciproxy_diffusion_grid_free(grid);
}

TEST(DiffusionCapi, TablesAreCheckedAndConverted) {
  const df::Grid g = df::icosahedral_grid(1, 0);
  IconTables t = icon_tables(g);
  sciproxy_diffusion_grid* grid = nullptr;
  // Each table's index out of range, named with its Fortran position.
  const struct {
    std::vector<std::int32_t>* table;
    std::int64_t rows;
    const char* name;
  } tables[] = {{&t.c2e, g.num_cells, "c2e"},     {&t.c2e2c, g.num_cells, "c2e2c"},
                {&t.e2c, g.num_edges, "e2c"},     {&t.e2v, g.num_edges, "e2v"},
                {&t.e2c2v, g.num_edges, "e2c2v"}, {&t.v2e, g.num_vertices, "v2e"},
                {&t.v2c, g.num_vertices, "v2c"},  {&t.c2v, g.num_cells, "c2v"}};
  for (const auto& x : tables) {
    const std::int32_t saved = (*x.table)[x.rows + 2];  // position (3, 2)
    (*x.table)[x.rows + 2] = 1000;
    EXPECT_EQ(grid_from(g, t, &grid), SCIPROXY_ERROR_INVALID_ARGUMENT) << x.name;
    const std::string message = sciproxy_last_error();
    EXPECT_EQ(message.rfind(std::string(x.name) + ":", 0), 0u) << message;
    EXPECT_NE(message.find("1000 at (3, 2)"), std::string::npos) << message;
    EXPECT_EQ(grid, nullptr);
    (*x.table)[x.rows + 2] = saved;
  }
  // A missing index where every entry must exist.
  t.c2e[4] = 0;
  EXPECT_EQ(grid_from(g, t, &grid), SCIPROXY_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sciproxy_last_error()).find("c2e: expected 1-based indices in [1, 30]"),
            std::string::npos)
      << sciproxy_last_error();
  t = icon_tables(g);
  ASSERT_EQ(grid_from(g, t, &grid), SCIPROXY_OK) << sciproxy_last_error();
  std::int32_t nc = 0, ne = 0, nv = 0;
  ASSERT_EQ(sciproxy_diffusion_grid_sizes(grid, &nc, &ne, &nv), SCIPROXY_OK);
  EXPECT_EQ(nc, 20);
  EXPECT_EQ(ne, 30);
  EXPECT_EQ(nv, 12);
  sciproxy_diffusion_grid_free(grid);

  // refin_ctrl out of ICON's order (a boundary row after the interior) is refused.
  std::vector<std::int32_t> refin_c(g.num_cells, 0);
  refin_c.back() = 1;
  std::vector<std::int32_t> refin_e(g.num_edges, 0), refin_v(g.num_vertices, 0);
  auto init_with_refin = [&] {
    return sciproxy_diffusion_grid_init(g.num_cells, g.num_edges, g.num_vertices, t.c2e.data(),
                                        t.c2e2c.data(), t.e2c.data(), t.e2v.data(), t.e2c2v.data(),
                                        t.v2e.data(), t.v2c.data(), t.c2v.data(), refin_c.data(),
                                        refin_e.data(), refin_v.data(), &grid);
  };
  EXPECT_EQ(init_with_refin(), SCIPROXY_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sciproxy_last_error()).find("refin_c_ctrl"), std::string::npos)
      << sciproxy_last_error();
  EXPECT_NE(std::string(sciproxy_last_error()).find("1 at (20) after 0 at (19)"), std::string::npos)
      << sciproxy_last_error();
  // Rows in ICON's order: a limited-area grid, its zones from refin_ctrl.
  refin_c.assign(g.num_cells, 0);
  refin_c[0] = 1, refin_c[1] = 1, refin_c[2] = 2;
  ASSERT_EQ(init_with_refin(), SCIPROXY_OK) << sciproxy_last_error();
  sciproxy_diffusion_grid_free(grid);
  refin_e[3] = 2, refin_e[4] = 1;  // descending
  EXPECT_EQ(init_with_refin(), SCIPROXY_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sciproxy_last_error()).find("refin_e_ctrl"), std::string::npos);
}

}  // namespace
