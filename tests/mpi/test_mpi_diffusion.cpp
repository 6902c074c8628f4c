// The diffusion granule on 1, 2 and 3 ranks against one process, bit for bit (the ranks do the
// same per-point arithmetic on the same values; no global reduction is involved): METIS's
// partition and a caller's uneven latitude bands, both field layouts, both precisions, the cpu
// and reference backends, several calls (the initial run, then regular steps) with every branch
// on (shear type 2, cold pools, truly horizontal temperature diffusion); the fields global or
// each rank's own; ICON's form (each rank's local grid and inputs, global indices and owners);
// the C interface. Bad decompositions, wrong owners, ranks that disagree, and a rank without
// cells fail on every rank without hanging.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "diffusion/capi_arrays.hpp"
#include "diffusion/decomposition.hpp"
#include "diffusion/granule_setup.hpp"
#include "mpi_test.hpp"
#include "sciproxy/diffusion.hpp"
#include "sciproxy/sciproxy.h"

namespace sciproxy::test {
namespace {

using diffusion::Diffusion;
using diffusion::DiffusionOptions;
using diffusion::FieldLayout;
using diffusion::testing::GranuleFields;
using diffusion::testing::GranuleSetup;

// R2B2 with 10 levels, shear type 2 (every diagnostic written), and truly horizontal
// temperature diffusion on every tenth cell's lower levels (the generated mountain is too
// smooth at R2B2 to switch it on by itself).
GranuleSetup setup() {
  GranuleSetup s = diffusion::testing::make_setup(2, 2, 10);
  s.config.shear_type = 2;
  const int nlev = s.vertical.num_levels;
  for (std::int32_t c = 0; c < s.grid.num_cells; c += 10)
    for (int k = nlev / 2; k < nlev - 1; ++k) {
      s.metrics.zd_diffcoef[c * nlev + k] = 0.002;
      for (int j = 0; j < 3; ++j) {
        s.metrics.zd_vertoffset[(c * 3 + j) * nlev + k] = 0;
        s.metrics.zd_intcoef[(c * 3 + j) * nlev + k] = 0.3;
      }
    }
  return s;
}

// Uneven latitude bands, north to south: rank r owns a share r + 1 (1 : 2 : 3 of the cells).
std::vector<std::int32_t> uneven_bands(const diffusion::Grid& g, int ranks) {
  std::vector<std::int32_t> order(g.num_cells);
  for (std::int32_t c = 0; c < g.num_cells; ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int32_t a, std::int32_t b) { return g.cell_lat[a] > g.cell_lat[b]; });
  const std::int64_t total = std::int64_t{ranks} * (ranks + 1) / 2;
  std::vector<std::int32_t> owner(g.num_cells);
  std::int64_t i = 0;
  for (int r = 0, upto = 0; r < ranks; ++r) {
    upto += r + 1;
    for (; i < g.num_cells && (i * total < std::int64_t{upto} * g.num_cells || r + 1 == ranks); ++i)
      owner[order[i]] = r;
  }
  return owner;
}

// Rows `which` of a row-major (n, nk) field.
std::vector<double> rows_of(const std::vector<double>& x, const std::vector<std::int32_t>& which,
                            int nk) {
  std::vector<double> out;
  for (std::int32_t g : which) out.insert(out.end(), x.begin() + g * nk, x.begin() + (g + 1) * nk);
  return out;
}

// Three calls (initial run, then two steps) in a precision and layout on the entities
// `cells` and `edges` of the fields (the whole grid, or a rank's local entities); the fields
// afterwards.
template <class Real>
std::vector<std::vector<Real>> three_calls(Diffusion& granule, const GranuleFields& in,
                                           FieldLayout layout,
                                           const std::vector<std::int32_t>& cells,
                                           const std::vector<std::int32_t>& edges, int nlev) {
  const std::int64_t nc = cells.size(), ne = edges.size();
  diffusion::testing::TypedFields<Real> f;
  using diffusion::to_layout;
  f.vn = to_layout<Real>(rows_of(in.vn, edges, nlev), ne, nlev, layout);
  f.w = to_layout<Real>(rows_of(in.w, cells, nlev + 1), nc, nlev + 1, layout);
  f.theta_v = to_layout<Real>(rows_of(in.theta_v, cells, nlev), nc, nlev, layout);
  f.exner = to_layout<Real>(rows_of(in.exner, cells, nlev), nc, nlev, layout);
  f.hdef_ic = to_layout<Real>(rows_of(in.hdef_ic, cells, nlev + 1), nc, nlev + 1, layout);
  f.div_ic = f.hdef_ic, f.dwdx = f.hdef_ic, f.dwdy = f.hdef_ic;
  for (int call = 0; call < 3; ++call) {
    auto d = f.diagnostic();
    auto p = f.prognostic();
    granule.run(d, p, 60.0, call == 0);
  }
  std::vector<std::vector<Real>> out;
  for (auto* x : f.all()) out.push_back(*x);
  return out;
}

std::vector<std::int32_t> all_of(std::int32_t n) {
  std::vector<std::int32_t> v(n);
  for (std::int32_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

template <class Real>
std::vector<std::vector<Real>> run_calls(const GranuleSetup& s, const GranuleFields& in,
                                         DiffusionOptions o) {
  o.single_precision = sizeof(Real) == 4;
  Diffusion granule(s.grid, s.config, s.vertical, s.metrics, s.interpolation, s.edges, s.cells, o);
  return three_calls<Real>(granule, in, o.layout, all_of(s.grid.num_cells),
                           all_of(s.grid.num_edges), s.vertical.num_levels);
}

template <class Real>
void expect_bitwise(const std::vector<std::vector<Real>>& got,
                    const std::vector<std::vector<Real>>& want) {
  const char* names[] = {"vn", "w", "theta_v", "exner", "hdef_ic", "div_ic", "dwdx", "dwdy"};
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << names[i];
    std::size_t differ = 0, first = got[i].size();
    for (std::size_t j = 0; j < got[i].size(); ++j)
      if (std::memcmp(&got[i][j], &want[i][j], sizeof(Real)) != 0) {
        ++differ;
        first = std::min(first, j);
      }
    EXPECT_EQ(differ, 0u) << names[i] << ": " << differ << " values differ, the first at " << first
                          << " (rank " << world().rank() << " of " << world().size() << ")";
  }
}

// One process's result (the same on every rank), then the ranks' with a decomposition.
template <class Real>
void check_against_one_process(const GranuleSetup& s, const std::vector<std::int32_t>& owner,
                               const std::string& device, FieldLayout layout) {
  SCOPED_TRACE(::testing::Message() << device << ", layout " << int(layout) << ", "
                                    << (sizeof(Real) == 4 ? "float32" : "float64")
                                    << (owner.empty() ? ", METIS" : ", bands"));
  const GranuleFields in = diffusion::testing::make_fields(s, 7);
  DiffusionOptions one;
  one.device = device;
  one.layout = layout;
  one.nparallel = 1;  // the ranks share the machine's cores
  const auto expected = run_calls<Real>(s, in, one);
  DiffusionOptions ranks = one;
  ranks.comm = world();
  ranks.cell_owner = owner;
  const auto got = run_calls<Real>(s, in, ranks);
  expect_bitwise(got, expected);
  // The fields changed: the comparison is not of untouched inputs (vn, or theta_v where the
  // configuration leaves vn alone).
  const int nlev = s.vertical.num_levels;
  const bool vn_changed =
      got[0] != diffusion::to_layout<Real>(in.vn, s.grid.num_edges, nlev, layout);
  const bool theta_changed =
      got[2] != diffusion::to_layout<Real>(in.theta_v, s.grid.num_cells, nlev, layout);
  EXPECT_TRUE(vn_changed || theta_changed);
}

TEST(MpiDiffusion, CallerDecompositionEqualsOneProcessBitForBit) {
  const GranuleSetup s = setup();
  const auto owner = uneven_bands(s.grid, world().size());
  check_against_one_process<double>(s, owner, "cpu", FieldLayout::LevelsContiguous);
  check_against_one_process<double>(s, owner, "cpu", FieldLayout::EntitiesContiguous);
  check_against_one_process<float>(s, owner, "cpu", FieldLayout::LevelsContiguous);
  check_against_one_process<double>(s, owner, "reference", FieldLayout::LevelsContiguous);
}

TEST(MpiDiffusion, MetisDecompositionEqualsOneProcessBitForBit) {
  const GranuleSetup s = setup();
  if (!diffusion::metis_compiled()) {
    // Without METIS only a caller's decomposition runs on several ranks.
    if (world().distributed())
      expect_error_on_every_rank<NotCompiled>(
          [&] { check_against_one_process<double>(s, {}, "cpu", FieldLayout::LevelsContiguous); },
          "METIS");
    return;
  }
  check_against_one_process<double>(s, {}, "cpu", FieldLayout::LevelsContiguous);
  check_against_one_process<float>(s, {}, "cpu", FieldLayout::EntitiesContiguous);
}

// The configuration's branches each change which stencils run between the exchanges.
TEST(MpiDiffusion, EveryBranchEqualsOneProcess) {
  const GranuleSetup base = setup();
  const auto owner = uneven_bands(base.grid, world().size());
  for (int variant = 0; variant < 5; ++variant) {
    SCOPED_TRACE(::testing::Message() << "variant " << variant);
    GranuleSetup s = base;
    if (variant == 0) s.config.apply_to_temperature = false;
    if (variant == 1) s.config.apply_to_vertical_wind = false;
    if (variant == 2) s.config.apply_to_horizontal_wind = false;
    if (variant == 3) s.config.shear_type = 0, s.config.a_hshr = 0;  // no turbulence diagnostics
    if (variant == 4) s.config.apply_zdiffusion_t = false, s.config.shear_type = 1;
    check_against_one_process<double>(s, owner, "cpu", FieldLayout::LevelsContiguous);
  }
}

// Every rank but the last its own cell: the last rank owns nearly everything, the others a
// single cell each and a halo larger than what they own.
TEST(MpiDiffusion, TinyRanksEqualOneProcess) {
  const GranuleSetup s = setup();
  std::vector<std::int32_t> owner(s.grid.num_cells, world().size() - 1);
  for (int r = 0; r + 1 < world().size(); ++r) owner[100 * r] = r;
  check_against_one_process<double>(s, owner, "cpu", FieldLayout::LevelsContiguous);
}

// A rank's fields over its local entities against the one-process run's: vn, w, theta_v,
// exner on every local entry (halos included), the diagnostics on owned cells, bit for bit.
template <class Real>
void expect_local_equal(const GranuleSetup& s, const std::vector<std::vector<Real>>& got,
                        const std::vector<std::vector<Real>>& expected,
                        const std::vector<std::int32_t>& cells,
                        const std::vector<std::int32_t>& edges,
                        const std::vector<std::int8_t>& cell_level, FieldLayout layout) {
  const int nlev = s.vertical.num_levels;
  const char* names[] = {"vn", "w", "theta_v", "exner", "hdef_ic", "div_ic", "dwdx", "dwdy"};
  const std::int64_t gc = s.grid.num_cells, ge = s.grid.num_edges;
  auto at = [&](std::int64_t n, int nk, std::int64_t i, int k) {
    return layout == FieldLayout::LevelsContiguous ? i * nk + k : std::int64_t{k} * n + i;
  };
  for (int field = 0; field < 8; ++field) {
    const bool on_edges = field == 0, diagnostic = field >= 4;
    const int nk = field == 0 || field == 2 || field == 3 ? nlev : nlev + 1;
    const auto& which = on_edges ? edges : cells;
    const std::int64_t n = which.size(), gn = on_edges ? ge : gc;
    std::size_t differ = 0, checked = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      if (diagnostic && cell_level[i] != 0) continue;
      for (int k = 0; k < nk; ++k, ++checked)
        differ += got[field][at(n, nk, i, k)] != expected[field][at(gn, nk, which[i], k)];
    }
    EXPECT_EQ(differ, 0u) << names[field] << " (rank " << world().rank() << ")";
    EXPECT_GT(checked, 0u);
  }
}

// ICON's form: each rank passes its own fields over its local entities. Afterwards every
// local entry of vn, w, theta_v and exner (halos included: the last exchange filled them), and
// the diagnostics on owned cells, equal the one-process run's bit for bit.
template <class Real>
void check_rank_local_fields(const GranuleSetup& s, const std::vector<std::int32_t>& owner,
                             FieldLayout layout) {
  SCOPED_TRACE(::testing::Message() << "rank-local fields, layout " << int(layout) << ", "
                                    << (sizeof(Real) == 4 ? "float32" : "float64"));
  const GranuleFields in = diffusion::testing::make_fields(s, 11);
  DiffusionOptions o;
  o.device = "cpu";
  o.layout = layout;
  o.nparallel = 1;
  const auto expected = run_calls<Real>(s, in, o);
  o.comm = world();
  o.cell_owner = owner;
  o.rank_local_fields = true;
  o.single_precision = sizeof(Real) == 4;
  Diffusion granule(s.grid, s.config, s.vertical, s.metrics, s.interpolation, s.edges, s.cells, o);
  const auto cells = granule.global_index(diffusion::Dimension::Cell);
  const auto edges = granule.global_index(diffusion::Dimension::Edge);
  const auto cell_level = granule.halo_level(diffusion::Dimension::Cell);
  const int nlev = s.vertical.num_levels;
  ASSERT_EQ(cells.size(), cell_level.size());
  const auto got = three_calls<Real>(granule, in, layout, cells, edges, nlev);
  expect_local_equal<Real>(s, got, expected, cells, edges, cell_level, layout);
}

TEST(MpiDiffusion, RankLocalFieldsEqualOneProcessBitForBit) {
  const GranuleSetup s = setup();
  const auto owner = uneven_bands(s.grid, world().size());
  check_rank_local_fields<double>(s, owner, FieldLayout::LevelsContiguous);
  check_rank_local_fields<float>(s, owner, FieldLayout::EntitiesContiguous);
}

// The C interface (Fortran's arrays) on the ranks: options.comm and the caller's cell_owner,
// the whole grid's fields, then each rank's own (sciproxy_diffusion_local_entities); equal bit
// for bit to the C++ granule on one process with the same computed inputs.
TEST(MpiDiffusion, CInterfaceOnTheRanks) {
  const int nlev = 10;
  const GranuleSetup s = diffusion::testing::make_setup(2, 2, nlev);
  const GranuleFields in = diffusion::testing::make_fields(s, 5);
  DiffusionOptions one;
  one.device = "cpu";
  one.nparallel = 1;
  one.layout = FieldLayout::EntitiesContiguous;
  const auto expected = run_calls<double>(s, in, one);

  sciproxy_diffusion_grid* grid = nullptr;
  ASSERT_EQ(sciproxy_diffusion_grid_icosahedral(2, 2, &grid), SCIPROXY_OK);
  const auto owner = uneven_bands(s.grid, world().size());
  for (const int rank_local : {0, 1}) {
    SCOPED_TRACE(rank_local ? "rank-local fields" : "whole-grid fields");
    sciproxy_diffusion_options o;
    sciproxy_diffusion_options_default(&o);
    EXPECT_EQ(o.comm, SCIPROXY_NO_COMM);
    o.device = "cpu";
    o.nparallel = 1;
    o.comm = world().handle();
    o.cell_owner = owner.data();
    o.rank_local_fields = rank_local;
    sciproxy_diffusion* granule = nullptr;
    ASSERT_EQ(sciproxy_diffusion_init_computed(grid, &o, nullptr, nlev, &granule), SCIPROXY_OK)
        << sciproxy_last_error();
    std::int32_t num_cells = 0, num_edges = 0;
    ASSERT_EQ(sciproxy_diffusion_local_entities(granule, 0, nullptr, nullptr, 0, &num_cells),
              SCIPROXY_OK);
    ASSERT_EQ(sciproxy_diffusion_local_entities(granule, 1, nullptr, nullptr, 0, &num_edges),
              SCIPROXY_OK);
    std::vector<std::int32_t> cells(num_cells), edges(num_edges), level(num_cells);
    ASSERT_EQ(sciproxy_diffusion_local_entities(granule, 0, cells.data(), level.data(), num_cells,
                                                nullptr),
              SCIPROXY_OK);
    ASSERT_EQ(
        sciproxy_diffusion_local_entities(granule, 1, edges.data(), nullptr, num_edges, nullptr),
        SCIPROXY_OK);
    EXPECT_EQ(sciproxy_diffusion_local_entities(granule, 0, cells.data(), nullptr, num_cells - 1,
                                                nullptr),
              SCIPROXY_ERROR_INVALID_ARGUMENT);
    for (auto& c : cells) --c;  // 1-based, as the grid's tables
    for (auto& e : edges) --e;
    if (world().distributed()) {  // the rank's part
      EXPECT_LT(num_cells, s.grid.num_cells);
    }
    if (!rank_local) cells = all_of(s.grid.num_cells), edges = all_of(s.grid.num_edges);
    // get_info counts run's fields: the grid's with the global fields, the rank's own otherwise.
    sciproxy_diffusion_info info;
    ASSERT_EQ(sciproxy_diffusion_get_info(granule, &info), SCIPROXY_OK);
    EXPECT_EQ(info.num_cells, static_cast<std::int32_t>(cells.size()));
    EXPECT_EQ(info.num_edges, static_cast<std::int32_t>(edges.size()));
    // C's run, Fortran's arrays: the same three calls as three_calls.
    diffusion::testing::TypedFields<double> f;
    using diffusion::to_layout;
    const FieldLayout L = FieldLayout::EntitiesContiguous;
    const std::int64_t nc = cells.size(), ne = edges.size();
    f.vn = to_layout<double>(rows_of(in.vn, edges, nlev), ne, nlev, L);
    f.w = to_layout<double>(rows_of(in.w, cells, nlev + 1), nc, nlev + 1, L);
    f.theta_v = to_layout<double>(rows_of(in.theta_v, cells, nlev), nc, nlev, L);
    f.exner = to_layout<double>(rows_of(in.exner, cells, nlev), nc, nlev, L);
    f.hdef_ic = to_layout<double>(rows_of(in.hdef_ic, cells, nlev + 1), nc, nlev + 1, L);
    f.div_ic = f.hdef_ic, f.dwdx = f.hdef_ic, f.dwdy = f.hdef_ic;
    for (int call = 0; call < 3; ++call)
      ASSERT_EQ(sciproxy_diffusion_run(granule, f.w.data(), f.vn.data(), f.exner.data(),
                                       f.theta_v.data(), nullptr, f.hdef_ic.data(), f.div_ic.data(),
                                       f.dwdx.data(), f.dwdy.data(), 60.0, call == 0),
                SCIPROXY_OK)
          << sciproxy_last_error();
    // Prognostic fields on every entry the rank holds.
    const std::int64_t gc = s.grid.num_cells, ge = s.grid.num_edges;
    std::size_t differ = 0;
    for (std::int64_t i = 0; i < ne; ++i)
      for (int k = 0; k < nlev; ++k) differ += f.vn[k * ne + i] != expected[0][k * ge + edges[i]];
    for (std::int64_t i = 0; i < nc; ++i) {
      for (int k = 0; k <= nlev; ++k) differ += f.w[k * nc + i] != expected[1][k * gc + cells[i]];
      for (int k = 0; k < nlev; ++k) {
        differ += f.theta_v[k * nc + i] != expected[2][k * gc + cells[i]];
        differ += f.exner[k * nc + i] != expected[3][k * gc + cells[i]];
      }
    }
    EXPECT_EQ(differ, 0u) << "rank " << world().rank();
    // A NULL field on one rank: every rank's error, none waits in the exchanges.
    const bool last = world().rank() + 1 == world().size();
    EXPECT_EQ(sciproxy_diffusion_run(granule, f.w.data(), last ? nullptr : f.vn.data(),
                                     f.exner.data(), f.theta_v.data(), nullptr, f.hdef_ic.data(),
                                     f.div_ic.data(), f.dwdx.data(), f.dwdy.data(), 60.0, 0),
              SCIPROXY_ERROR_INVALID_ARGUMENT);
    sciproxy_diffusion_free(granule);
  }
  sciproxy_diffusion_grid_free(grid);
}

// The rank's rows of a per-entity input (width values each).
template <class T>
std::vector<T> rows_for(const std::vector<T>& x, const std::vector<std::int32_t>& which,
                        std::int64_t width) {
  std::vector<T> out;
  for (std::int32_t g : which)
    out.insert(out.end(), x.begin() + g * width, x.begin() + (g + 1) * width);
  return out;
}

// ICON's own form: each rank brings its local grid, its inputs' rows and, per local entity, the
// global index and the owner (here from the library's decomposition, as ICON's would come from
// its own); the exchange pattern is found by asking the owners.
struct RankInputs {
  diffusion::RankDomain domain;
  diffusion::DiffusionMetricState metrics;
  diffusion::DiffusionInterpolationState interpolation;
  diffusion::DiffusionEdgeParams edges;
  diffusion::DiffusionCellParams cells;
  DiffusionOptions::LocalDecomposition decomposition;
};
RankInputs rank_inputs(const GranuleSetup& s, const std::vector<std::int32_t>& owner) {
  RankInputs r;
  r.domain = diffusion::rank_domain(s.grid, owner, world().size(), world().rank());
  const auto &C = r.domain.cells.global, &E = r.domain.edges.global, &V = r.domain.vertices.global;
  const int nlev = s.vertical.num_levels;
  r.metrics.theta_ref_mc = rows_for(s.metrics.theta_ref_mc, C, nlev);
  r.metrics.wgtfac_c = rows_for(s.metrics.wgtfac_c, C, nlev + 1);
  r.metrics.zd_intcoef = rows_for(s.metrics.zd_intcoef, C, 3 * nlev);
  r.metrics.zd_diffcoef = rows_for(s.metrics.zd_diffcoef, C, nlev);
  r.metrics.zd_vertoffset = rows_for(s.metrics.zd_vertoffset, C, 3 * nlev);
  const auto& in = s.interpolation;
  r.interpolation.e_bln_c_s = rows_for(in.e_bln_c_s, C, 3);
  r.interpolation.geofac_div = rows_for(in.geofac_div, C, 3);
  r.interpolation.rbf_coeff_1 = rows_for(in.rbf_coeff_1, V, 6);
  r.interpolation.rbf_coeff_2 = rows_for(in.rbf_coeff_2, V, 6);
  r.interpolation.geofac_n2s = rows_for(in.geofac_n2s, C, 4);
  r.interpolation.geofac_grg_x = rows_for(in.geofac_grg_x, C, 4);
  r.interpolation.geofac_grg_y = rows_for(in.geofac_grg_y, C, 4);
  r.interpolation.nudgecoeff_e = rows_for(in.nudgecoeff_e, E, 1);
  const auto& ep = s.edges;
  r.edges.tangent_orientation = rows_for(ep.tangent_orientation, E, 1);
  r.edges.inverse_primal_edge_lengths = rows_for(ep.inverse_primal_edge_lengths, E, 1);
  r.edges.inverse_vertex_vertex_lengths = rows_for(ep.inverse_vertex_vertex_lengths, E, 1);
  r.edges.inverse_dual_edge_lengths = rows_for(ep.inverse_dual_edge_lengths, E, 1);
  r.edges.edge_areas = rows_for(ep.edge_areas, E, 1);
  r.edges.primal_normal_vert_x = rows_for(ep.primal_normal_vert_x, E, 4);
  r.edges.primal_normal_vert_y = rows_for(ep.primal_normal_vert_y, E, 4);
  r.edges.dual_normal_vert_x = rows_for(ep.dual_normal_vert_x, E, 4);
  r.edges.dual_normal_vert_y = rows_for(ep.dual_normal_vert_y, E, 4);
  r.cells.area = rows_for(s.cells.area, C, 1);
  r.cells.mean_cell_area = s.cells.mean_cell_area;
  r.decomposition = {C, E, V, r.domain.cells.owner, r.domain.edges.owner, r.domain.vertices.owner};
  return r;
}

Diffusion rank_granule(const GranuleSetup& s, const RankInputs& r, DiffusionOptions o) {
  o.comm = world();
  o.rank_local_fields = true;
  o.local_decomposition = r.decomposition;
  return Diffusion(r.domain.grid, s.config, s.vertical, r.metrics, r.interpolation, r.edges,
                   r.cells, o);
}

TEST(MpiDiffusion, RankLocalGridAsIconGivesItEqualsOneProcessBitForBit) {
  const GranuleSetup s = setup();
  const GranuleFields in = diffusion::testing::make_fields(s, 13);
  for (const FieldLayout layout :
       {FieldLayout::LevelsContiguous, FieldLayout::EntitiesContiguous}) {
    SCOPED_TRACE(::testing::Message() << "layout " << int(layout));
    DiffusionOptions o;
    o.device = "cpu";
    o.layout = layout;
    o.nparallel = 1;
    const auto expected = run_calls<double>(s, in, o);
    const RankInputs r = rank_inputs(s, uneven_bands(s.grid, world().size()));
    Diffusion granule = rank_granule(s, r, o);
    EXPECT_EQ(granule.global_index(diffusion::Dimension::Edge), r.domain.edges.global);
    const auto got = three_calls<double>(granule, in, layout, r.domain.cells.global,
                                         r.domain.edges.global, s.vertical.num_levels);
    expect_local_equal<double>(s, got, expected, r.domain.cells.global, r.domain.edges.global,
                               r.domain.cells.halo_level, layout);
  }
}

// ICON's own form through the C ABI (sciproxy_diffusion_options.local_decomposition): each rank's
// local patch as ICON holds it, 1-based tables and Fortran arrays, with its entities' global
// indices (1-based), owners and halo levels; the results equal the C++ API's own form bit for
// bit (which equals one process's, above).
TEST(MpiDiffusion, RankLocalGridThroughTheCAbiEqualsTheCppApi) {
  const GranuleSetup s = setup();
  const GranuleFields in = diffusion::testing::make_fields(s, 13);
  const int nlev = s.vertical.num_levels;
  DiffusionOptions o;
  o.device = "cpu";
  o.layout = FieldLayout::EntitiesContiguous;
  o.nparallel = 1;
  const RankInputs r = rank_inputs(s, uneven_bands(s.grid, world().size()));
  const auto &cells = r.domain.cells, &edges = r.domain.edges, &vertices = r.domain.vertices;
  Diffusion granule = rank_granule(s, r, o);
  const auto want = three_calls<double>(granule, in, o.layout, cells.global, edges.global, nlev);

  GranuleSetup patch = s;
  patch.grid = r.domain.grid;
  patch.metrics = r.metrics;
  patch.interpolation = r.interpolation;
  patch.edges = r.edges;
  patch.cells = r.cells;
  auto one_based = [](std::vector<std::int32_t> v) {
    for (auto& x : v) ++x;
    return v;
  };
  auto levels = [](const std::vector<std::int8_t>& v) {
    return std::vector<std::int32_t>(v.begin(), v.end());
  };
  const auto cg = one_based(cells.global), eg = one_based(edges.global),
             vg = one_based(vertices.global);
  const auto cl = levels(cells.halo_level), el = levels(edges.halo_level),
             vl = levels(vertices.halo_level);
  const sciproxy_diffusion_local_decomposition decomposition{
      cg.data(),          eg.data(),          vg.data(),
      cells.owner.data(), edges.owner.data(), vertices.owner.data(),
      cl.data(),          el.data(),          vl.data()};
  sciproxy_diffusion_options options;
  sciproxy_diffusion_options_default(&options);
  options.device = "cpu";
  options.nparallel = 1;
  options.layout = SCIPROXY_DIFFUSION_FORTRAN_ORDER;
  options.comm = world().handle();
  options.rank_local_fields = 1;
  options.local_decomposition = &decomposition;
  sciproxy_diffusion_grid* grid = nullptr;
  ASSERT_EQ(
      diffusion::testing::grid_from(patch.grid, diffusion::testing::icon_tables(patch.grid), &grid),
      SCIPROXY_OK)
      << sciproxy_last_error();  // local: no rank waits for another
  sciproxy_diffusion* handle = nullptr;
  // Collective: a failure is every rank's, so every rank stops here alike.
  ASSERT_EQ(diffusion::testing::init_from(patch, grid, &options, &handle), SCIPROXY_OK)
      << sciproxy_last_error();

  const std::int64_t nc = cells.size(), ne = edges.size();
  using diffusion::to_layout;
  diffusion::testing::TypedFields<double> f;
  f.vn = to_layout<double>(rows_of(in.vn, edges.global, nlev), ne, nlev, o.layout);
  f.w = to_layout<double>(rows_of(in.w, cells.global, nlev + 1), nc, nlev + 1, o.layout);
  f.theta_v = to_layout<double>(rows_of(in.theta_v, cells.global, nlev), nc, nlev, o.layout);
  f.exner = to_layout<double>(rows_of(in.exner, cells.global, nlev), nc, nlev, o.layout);
  f.hdef_ic =
      to_layout<double>(rows_of(in.hdef_ic, cells.global, nlev + 1), nc, nlev + 1, o.layout);
  f.div_ic = f.hdef_ic, f.dwdx = f.hdef_ic, f.dwdy = f.hdef_ic;
  for (int call = 0; call < 3; ++call)
    ASSERT_EQ(sciproxy_diffusion_run(handle, f.w.data(), f.vn.data(), f.exner.data(),
                                     f.theta_v.data(), nullptr, f.hdef_ic.data(), f.div_ic.data(),
                                     f.dwdx.data(), f.dwdy.data(), 60.0, call == 0),
              SCIPROXY_OK)
        << sciproxy_last_error();
  std::vector<std::vector<double>> got;
  for (auto* x : f.all()) got.push_back(*x);
  expect_bitwise<double>(got, want);

  // A halo level out of order on the last rank fails every rank, naming it.
  sciproxy_diffusion_free(handle);
  std::vector<std::int32_t> bad = el;
  if (world().rank() + 1 == world().size()) bad.front() = 1;  // a halo edge before owned ones
  sciproxy_diffusion_local_decomposition wrong = decomposition;
  wrong.edge_halo_level = bad.data();
  options.local_decomposition = &wrong;
  handle = nullptr;
  EXPECT_EQ(diffusion::testing::init_from(patch, grid, &options, &handle),
            SCIPROXY_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sciproxy_last_error()).find("options.local_decomposition.edge_halo_level"),
            std::string::npos)
      << sciproxy_last_error();
  sciproxy_diffusion_grid_free(grid);
}

TEST(MpiDiffusion, RankLocalGridWithWrongOwnersFailsOnEveryRank) {
  const GranuleSetup s = setup();
  const auto& comm = world();
  RankInputs r = rank_inputs(s, uneven_bands(s.grid, comm.size()));
  DiffusionOptions o;
  o.device = "cpu";
  o.nparallel = 1;
  RankInputs short_owner = r;
  short_owner.decomposition.edge_owner.pop_back();
  expect_error_on_every_rank<InvalidArgument>([&] { rank_granule(s, short_owner, o); },
                                              "local_decomposition.edge_owner");
  if (!comm.distributed()) return;
  // The last rank names the wrong owner for its first halo cell.
  if (comm.rank() + 1 == comm.size()) {
    auto& owner = r.decomposition.cell_owner;
    const std::int32_t first_halo = r.domain.cells.num_owned();
    owner[first_halo] = (owner[first_halo] + 1) % comm.size();
  }
  expect_error_on_every_rank<InvalidArgument>([&] { rank_granule(s, r, o); },
                                              "local_decomposition.cell_owner");
  // Ranks that disagree on the form fail alike.
  DiffusionOptions global = o;
  global.comm = comm;
  expect_error_on_every_rank<InvalidArgument>(
      [&] {
        if (comm.rank() == 0)
          Diffusion(s.grid, s.config, s.vertical, s.metrics, s.interpolation, s.edges, s.cells,
                    global);
        else
          rank_granule(s, rank_inputs(s, uneven_bands(s.grid, comm.size())), o);
      },
      "options.local_decomposition");
}

Diffusion make_granule(const GranuleSetup& s, const DiffusionOptions& o) {
  return Diffusion(s.grid, s.config, s.vertical, s.metrics, s.interpolation, s.edges, s.cells, o);
}

TEST(MpiDiffusion, BadDecompositionFailsOnEveryRank) {
  const GranuleSetup s = setup();
  DiffusionOptions o;
  o.comm = world();
  o.cell_owner.assign(s.grid.num_cells - 1, 0);
  expect_error_on_every_rank<InvalidArgument>([&] { make_granule(s, o); }, "cell_owner");
  o.cell_owner.assign(s.grid.num_cells, 0);
  o.cell_owner[5] = world().size();  // a rank out of range
  expect_error_on_every_rank<InvalidArgument>([&] { make_granule(s, o); }, "cell_owner");
  o.cell_owner[5] = -1;
  expect_error_on_every_rank<InvalidArgument>([&] { make_granule(s, o); }, "cell_owner");
  if (world().distributed()) {
    o.cell_owner.assign(s.grid.num_cells, 0);  // ranks without cells
    expect_error_on_every_rank<InvalidArgument>([&] { make_granule(s, o); }, "no cell on rank");
  }
}

TEST(MpiDiffusion, RanksThatDisagreeFailOnEveryRank) {
  const auto& comm = world();
  if (!comm.distributed()) GTEST_SKIP() << "needs 2 ranks or more";
  const GranuleSetup s = setup();
  const GranuleSetup other = diffusion::testing::make_setup(2, 1, 10);
  DiffusionOptions o;
  o.comm = comm;
  // The last rank passes another grid.
  expect_error_on_every_rank<InvalidArgument>(
      [&] { make_granule(comm.rank() + 1 == comm.size() ? other : s, o); }, "grid.num_cells");
  // The last rank passes another decomposition.
  o.cell_owner = uneven_bands(s.grid, comm.size());
  if (comm.rank() + 1 == comm.size()) std::swap(o.cell_owner.front(), o.cell_owner.back());
  expect_error_on_every_rank<InvalidArgument>([&] { make_granule(s, o); }, "options.cell_owner");
  // The last rank's inputs are bad (NaN): the same error on every rank.
  GranuleSetup bad = s;
  if (comm.rank() + 1 == comm.size()) bad.cells.area[3] = std::nan("");
  o.cell_owner.clear();
  o.cell_owner = uneven_bands(s.grid, comm.size());
  expect_error_on_every_rank<InvalidArgument>([&] { make_granule(bad, o); }, "cell_params.area");
}

TEST(MpiDiffusion, BadFieldsFailOnEveryRank) {
  const GranuleSetup s = setup();
  DiffusionOptions o;
  o.comm = world();
  o.cell_owner = uneven_bands(s.grid, world().size());
  Diffusion granule = make_granule(s, o);
  GranuleFields in = diffusion::testing::make_fields(s, 3);
  in.theta_v[17] = std::nan("");
  diffusion::DiffusionPrognosticFields<double> p{in.vn.data(), in.w.data(), in.theta_v.data(),
                                                 in.exner.data()};
  diffusion::DiffusionDiagnosticFields<double> d{in.hdef_ic.data(), in.div_ic.data(),
                                                 in.dwdx.data(), in.dwdy.data()};
  expect_error_on_every_rank<InvalidArgument>([&] { granule.run(d, p, 60.0); },
                                              "prognostic.theta_v");
}

}  // namespace
}  // namespace sciproxy::test
