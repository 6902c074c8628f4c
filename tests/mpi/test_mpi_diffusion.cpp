// The diffusion granule on 1, 2 and 3 ranks against one process, bit for bit (the ranks do the
// same per-point arithmetic on the same values; no global reduction is involved): METIS's
// partition and a caller's uneven latitude bands, both field layouts, both precisions, the cpu
// and reference backends, several calls (the initial run, then regular steps) with every branch
// on (shear type 2, cold pools, truly horizontal temperature diffusion). Bad decompositions,
// ranks that disagree, and a rank without cells fail on every rank without hanging.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "diffusion/granule_setup.hpp"
#include "mpi_test.hpp"
#include "sciproxy/diffusion.hpp"

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

// Three calls (initial run, then two steps) in a precision and layout; the fields afterwards.
template <class Real>
std::vector<std::vector<Real>> run_calls(const GranuleSetup& s, const GranuleFields& in,
                                         DiffusionOptions o) {
  o.single_precision = sizeof(Real) == 4;
  Diffusion granule(s.grid, s.config, s.vertical, s.metrics, s.interpolation, s.edges, s.cells, o);
  const std::int64_t nc = s.grid.num_cells, ne = s.grid.num_edges;
  const int nlev = s.vertical.num_levels;
  diffusion::testing::TypedFields<Real> f;
  using diffusion::to_layout;
  f.vn = to_layout<Real>(in.vn, ne, nlev, o.layout);
  f.w = to_layout<Real>(in.w, nc, nlev + 1, o.layout);
  f.theta_v = to_layout<Real>(in.theta_v, nc, nlev, o.layout);
  f.exner = to_layout<Real>(in.exner, nc, nlev, o.layout);
  f.hdef_ic = to_layout<Real>(in.hdef_ic, nc, nlev + 1, o.layout);
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
  // The fields changed: the comparison is not of untouched inputs.
  const auto untouched =
      diffusion::to_layout<Real>(in.vn, s.grid.num_edges, s.vertical.num_levels, layout);
  EXPECT_NE(got[0], untouched);
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

// Every rank but the last its own cell: the last rank owns nearly everything, the others a
// single cell each and a halo larger than what they own.
TEST(MpiDiffusion, TinyRanksEqualOneProcess) {
  const GranuleSetup s = setup();
  std::vector<std::int32_t> owner(s.grid.num_cells, world().size() - 1);
  for (int r = 0; r + 1 < world().size(); ++r) owner[100 * r] = r;
  check_against_one_process<double>(s, owner, "cpu", FieldLayout::LevelsContiguous);
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
