// The diffusion granule: cpu against reference in both field layouts and both precisions,
// physics on the sphere (a constant state stays, noise is damped, nothing grows), the branches
// (cold pools, truly horizontal diffusion, initial run, shear types), and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "diffusion/granule_setup.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/diffusion.hpp"

using namespace sciproxy::diffusion;
using sciproxy::diffusion::testing::expect_close;
using sciproxy::diffusion::testing::GranuleFields;
using sciproxy::diffusion::testing::GranuleSetup;
using sciproxy::diffusion::testing::make_fields;
using sciproxy::diffusion::testing::make_setup;
using sciproxy::diffusion::testing::rel_l2;
using sciproxy::diffusion::testing::TypedFields;

namespace {

template <class Real>
GranuleFields run_granule(const GranuleSetup& s, const GranuleFields& in, DiffusionOptions o,
                          int calls, double dtime, bool first_initial) {
  o.single_precision = sizeof(Real) == 4;
  Diffusion granule(s.grid, s.config, s.vertical, s.metrics, s.interpolation, s.edges, s.cells, o);
  const std::int64_t nc = s.grid.num_cells, ne = s.grid.num_edges;
  const int nlev = s.vertical.num_levels;
  TypedFields<Real> f;
  f.vn = to_layout<Real>(in.vn, ne, nlev, o.layout);
  f.w = to_layout<Real>(in.w, nc, nlev + 1, o.layout);
  f.theta_v = to_layout<Real>(in.theta_v, nc, nlev, o.layout);
  f.exner = to_layout<Real>(in.exner, nc, nlev, o.layout);
  f.hdef_ic = to_layout<Real>(in.hdef_ic, nc, nlev + 1, o.layout);
  f.div_ic = f.hdef_ic, f.dwdx = f.hdef_ic, f.dwdy = f.hdef_ic;
  for (int i = 0; i < calls; ++i) {
    auto d = f.diagnostic();
    auto p = f.prognostic();
    granule.run(d, p, dtime, first_initial && i == 0);
  }
  GranuleFields out;
  out.vn = from_layout(f.vn, ne, nlev, o.layout);
  out.w = from_layout(f.w, nc, nlev + 1, o.layout);
  out.theta_v = from_layout(f.theta_v, nc, nlev, o.layout);
  out.exner = from_layout(f.exner, nc, nlev, o.layout);
  out.hdef_ic = from_layout(f.hdef_ic, nc, nlev + 1, o.layout);
  out.div_ic = from_layout(f.div_ic, nc, nlev + 1, o.layout);
  out.dwdx = from_layout(f.dwdx, nc, nlev + 1, o.layout);
  out.dwdy = from_layout(f.dwdy, nc, nlev + 1, o.layout);
  return out;
}

double rel_change(const std::vector<double>& after, const std::vector<double>& before) {
  return rel_l2(after, before);
}

// dtime with Smagorinsky on: a few seconds per km of R2B3's ~250 km spacing.
constexpr double kDtime = 900.0;

}  // namespace

class DiffusionGranule : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setup_ = new GranuleSetup(make_setup(2, 3, 12));
    fields_ = new GranuleFields(make_fields(*setup_, 7));
  }
  static void TearDownTestSuite() {
    delete setup_;
    delete fields_;
  }
  static GranuleSetup* setup_;
  static GranuleFields* fields_;
};
GranuleSetup* DiffusionGranule::setup_ = nullptr;
GranuleFields* DiffusionGranule::fields_ = nullptr;

TEST_F(DiffusionGranule, EveryOutputChangesAndEveryBranchRuns) {
  DiffusionOptions o;
  o.device = "reference";
  const GranuleFields out = run_granule<double>(*setup_, *fields_, o, 1, kDtime, false);
  EXPECT_GT(rel_change(out.vn, fields_->vn), 1e-6);
  EXPECT_GT(rel_change(out.w, fields_->w), 1e-6);
  EXPECT_GT(rel_change(out.theta_v, fields_->theta_v), 1e-9);
  EXPECT_GT(rel_change(out.exner, fields_->exner), 1e-12);
  for (const auto* d : {&out.hdef_ic, &out.div_ic, &out.dwdx, &out.dwdy}) {
    double largest = 0;
    for (double x : *d) largest = std::max(largest, std::abs(x));
    EXPECT_GT(largest, 0.0);
  }
}

TEST_F(DiffusionGranule, CpuMatchesReferenceInBothLayouts) {
  for (FieldLayout layout : {FieldLayout::LevelsContiguous, FieldLayout::EntitiesContiguous}) {
    DiffusionOptions ref, cpu;
    ref.device = "reference", cpu.device = "cpu";
    ref.layout = cpu.layout = layout;
    const GranuleFields want = run_granule<double>(*setup_, *fields_, ref, 3, kDtime, true);
    const GranuleFields got = run_granule<double>(*setup_, *fields_, cpu, 3, kDtime, true);
    // Same expressions in another loop order: rounding differs only through the compiler's
    // contraction choices, far below 1e-13.
    expect_close(got, want, 1e-13);
  }
}

TEST_F(DiffusionGranule, LayoutsGiveTheSameAnswer) {
  DiffusionOptions a, b;
  a.device = b.device = "reference";
  b.layout = FieldLayout::EntitiesContiguous;
  const GranuleFields x = run_granule<double>(*setup_, *fields_, a, 2, kDtime, false);
  const GranuleFields y = run_granule<double>(*setup_, *fields_, b, 2, kDtime, false);
  expect_close(x, y, 0.0);
}

TEST_F(DiffusionGranule, CpuIsTheSameForAnyThreadCount) {
  DiffusionOptions one, two;
  one.device = two.device = "cpu";
  one.nparallel = 1, two.nparallel = 2;
  expect_close(run_granule<double>(*setup_, *fields_, one, 2, kDtime, false),
               run_granule<double>(*setup_, *fields_, two, 2, kDtime, false), 0.0);
}

TEST_F(DiffusionGranule, SinglePrecisionFollowsDouble) {
  DiffusionOptions o;
  o.device = "cpu";
  const GranuleFields d = run_granule<double>(*setup_, *fields_, o, 1, kDtime, false);
  const GranuleFields f = run_granule<float>(*setup_, *fields_, o, 1, kDtime, false);
  // float32: the tendencies are differences of neighbouring values (theta ~ 300-800 K apart by
  // ~1 K), so they keep about 5 of float's 7 digits; the updated fields agree to a few 1e-6
  // (measured 2.9e-6 for theta_v, 1.5e-6 for exner), the diagnostics to 1e-3.
  EXPECT_LE(rel_l2(f.vn, d.vn), 1e-5);
  EXPECT_LE(rel_l2(f.theta_v, d.theta_v), 1e-5);
  EXPECT_LE(rel_l2(f.exner, d.exner), 1e-5);
  EXPECT_LE(rel_l2(f.w, d.w), 1e-4);
  EXPECT_LE(rel_l2(f.div_ic, d.div_ic), 1e-3);
}

TEST_F(DiffusionGranule, ConstantStateStaysConstant) {
  // A state at rest with theta_v = theta_ref_mc everywhere... except theta_ref varies, so use a
  // horizontally uniform theta: the theta flux is exactly zero, vn = 0 stays 0.
  GranuleFields f = *fields_;
  const int nlev = setup_->vertical.num_levels;
  std::fill(f.vn.begin(), f.vn.end(), 0.0);
  std::fill(f.w.begin(), f.w.end(), 0.25);
  for (std::int64_t c = 0; c < setup_->grid.num_cells; ++c)
    for (int k = 0; k < nlev; ++k) {
      f.theta_v[c * nlev + k] = 300.0 + k;
      f.exner[c * nlev + k] = 0.9;
    }
  GranuleSetup s = *setup_;
  s.config.apply_zdiffusion_t = false;  // the zd stencil mixes levels: not constant across k
  DiffusionOptions o;
  o.device = "cpu";
  const GranuleFields out = run_granule<double>(s, f, o, 2, kDtime, false);
  EXPECT_EQ(*std::max_element(out.vn.begin(), out.vn.end()), 0.0);
  EXPECT_LE(rel_l2(out.w, f.w), 1e-12);
  EXPECT_LE(rel_l2(out.theta_v, f.theta_v), 1e-14);
  EXPECT_LE(rel_l2(out.exner, f.exner), 1e-14);
}

TEST_F(DiffusionGranule, NoiseIsDampedAndNothingGrows) {
  // Pure noise around zero: each call must shrink vn and w (the diffusion only removes energy).
  GranuleFields f = make_fields(*setup_, 11, 1.0);
  for (std::int64_t e = 0; e < setup_->grid.num_edges; ++e)
    for (int k = 0; k < setup_->vertical.num_levels; ++k)
      f.vn[e * setup_->vertical.num_levels + k] -=
          10.0 * std::cos(setup_->grid.edge_center_lat[e]) * setup_->grid.primal_normal_x[e];
  auto energy = [](const std::vector<double>& x) {
    double s = 0;
    for (double v : x) s += v * v;
    return s;
  };
  DiffusionOptions o;
  o.device = "cpu";
  double e_vn = energy(f.vn), e_w = energy(f.w);
  GranuleFields cur = f;
  for (int i = 0; i < 3; ++i) {
    cur = run_granule<double>(*setup_, cur, o, 1, kDtime, false);
    EXPECT_LT(energy(cur.vn), e_vn) << "call " << i;
    EXPECT_LT(energy(cur.w), e_w) << "call " << i;
    e_vn = energy(cur.vn), e_w = energy(cur.w);
  }
}

TEST_F(DiffusionGranule, BadInputIsRefusedNamingTheArgument) {
  GranuleSetup s = *setup_;
  auto expect_refused = [&](const GranuleSetup& bad, const char* name) {
    try {
      Diffusion g(bad.grid, bad.config, bad.vertical, bad.metrics, bad.interpolation, bad.edges,
                  bad.cells);
      ADD_FAILURE() << "accepted bad " << name;
    } catch (const sciproxy::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  {
    GranuleSetup b = s;
    b.config.diffusion_type = 4;
    expect_refused(b, "config.diffusion_type");
  }
  {
    GranuleSetup b = s;
    b.config.shear_type = 3;
    expect_refused(b, "config.shear_type");
  }
  {
    GranuleSetup b = s;
    b.config.ndyn_substeps = 0;
    expect_refused(b, "config.ndyn_substeps");
  }
  {
    GranuleSetup b = s;
    b.vertical.vct_a.pop_back();
    expect_refused(b, "vertical_grid.vct_a");
  }
  {
    GranuleSetup b = s;
    std::reverse(b.vertical.vct_a.begin(), b.vertical.vct_a.end());
    expect_refused(b, "vertical_grid.vct_a");
  }
  {
    GranuleSetup b = s;
    b.vertical.end_index_of_damping_layer = 99;
    expect_refused(b, "end_index_of_damping_layer");
  }
  {
    GranuleSetup b = s;
    b.metrics.theta_ref_mc.resize(5);
    expect_refused(b, "metric_state.theta_ref_mc");
  }
  {
    GranuleSetup b = s;
    b.metrics.wgtfac_c[3] = NAN;
    expect_refused(b, "metric_state.wgtfac_c");
  }
  {
    GranuleSetup b = s;
    b.interpolation.geofac_div.pop_back();
    expect_refused(b, "interpolation_state.geofac_div");
  }
  {
    GranuleSetup b = s;
    b.edges.edge_areas.push_back(1);
    expect_refused(b, "edge_params.edge_areas");
  }
  {
    GranuleSetup b = s;
    b.cells.area.clear();
    expect_refused(b, "cell_params.area");
  }
  {
    GranuleSetup b = s;
    b.grid.e2c[7] = b.grid.num_cells;
    expect_refused(b, "grid.e2c");
  }
  {
    GranuleSetup b = s;
    const int nlev = b.vertical.num_levels;
    b.metrics.zd_diffcoef[3 * nlev + nlev - 1] = 0.1;
    b.metrics.zd_vertoffset[(3 * 3) * nlev + nlev - 1] = 0;  // k + 0 + 1 = nlev: outside
    expect_refused(b, "metric_state.zd_vertoffset");
  }
  {
    DiffusionOptions o;
    o.device = "quantum";
    EXPECT_THROW(
        Diffusion(s.grid, s.config, s.vertical, s.metrics, s.interpolation, s.edges, s.cells, o),
        sciproxy::InvalidArgument);
  }
}

TEST_F(DiffusionGranule, BadRunArgumentsAreRefused) {
  Diffusion g(setup_->grid, setup_->config, setup_->vertical, setup_->metrics,
              setup_->interpolation, setup_->edges, setup_->cells);
  GranuleFields f = *fields_;
  DiffusionPrognosticFields<double> p{f.vn.data(), f.w.data(), f.theta_v.data(), f.exner.data()};
  DiffusionDiagnosticFields<double> d{f.hdef_ic.data(), f.div_ic.data(), f.dwdx.data(),
                                      f.dwdy.data()};
  EXPECT_THROW(g.run(d, p, 0.0), sciproxy::InvalidArgument);
  EXPECT_THROW(g.run(d, p, -1.0), sciproxy::InvalidArgument);
  EXPECT_THROW(g.run(d, p, NAN), sciproxy::InvalidArgument);
  f.theta_v[17] = NAN;
  try {
    g.run(d, p, 10.0);
    ADD_FAILURE() << "NaN theta_v accepted";
  } catch (const sciproxy::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("prognostic.theta_v"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("17"), std::string::npos) << e.what();
  }
  f.theta_v[17] = 300;
  DiffusionPrognosticFields<double> missing = p;
  missing.exner = nullptr;
  EXPECT_THROW(g.run(d, missing, 10.0), sciproxy::InvalidArgument);
  std::vector<float> vf(f.vn.size());
  DiffusionPrognosticFields<float> pf{vf.data(), vf.data(), vf.data(), vf.data()};
  DiffusionDiagnosticFields<float> df{vf.data(), vf.data(), vf.data(), vf.data()};
  EXPECT_THROW(g.run(df, pf, 10.0), sciproxy::InvalidArgument);  // initialised for float64
}

TEST(DiffusionInputs, DefaultInputsRunEveryBranchAtR2B4) {
  // The mountain makes steep points (truly horizontal diffusion) and the damping layer from
  // 12.5 km covers the top levels (upper damping of w): both branches of run have work.
  const DiffusionInputs in = computed_inputs(icosahedral_grid(2, 4), 65);
  long steep = 0;
  for (double x : in.metrics.zd_diffcoef) steep += x != 0.0;
  EXPECT_GT(steep, 100);
  EXPECT_GT(in.vertical.end_index_of_damping_layer, 5);
  EXPECT_EQ(in.config.shear_type, 2);
}

TEST(DiffusionLimitedArea, CpuMatchesReferenceWithNudgingAndBoundaryZones) {
  // A cut-out of R2B4 over the Alps: lateral boundary rows, the nudging zone (nudgecoeff_e > 0)
  // and the boundary variants of the vn update all run.
  const Grid lam = limited_area_grid(icosahedral_grid(2, 4), 0.8, 0.17, 0.25);
  ASSERT_TRUE(lam.limited_area);
  GranuleSetup s = computed_inputs(lam, 16);
  double nudging = 0;
  for (double x : s.interpolation.nudgecoeff_e) nudging = std::max(nudging, x);
  EXPECT_GT(nudging, 0.0);
  const GranuleFields in = make_fields(s, 3);
  for (FieldLayout layout : {FieldLayout::LevelsContiguous, FieldLayout::EntitiesContiguous}) {
    DiffusionOptions ref, cpu;
    ref.device = "reference", cpu.device = "cpu";
    ref.layout = cpu.layout = layout;
    const GranuleFields want = run_granule<double>(s, in, ref, 2, 300.0, true);
    const GranuleFields got = run_granule<double>(s, in, cpu, 2, 300.0, true);
    expect_close(got, want, 1e-13);
    // The lateral boundary's first rows are left as they came (ICON4Py's domains start at row 5
    // of edges and at the nudging row of cells).
    const int nlev = s.vertical.num_levels;
    const std::int32_t e_end = lam.end_index(Dimension::Edge, Zone::LateralBoundaryLevel4);
    for (std::int64_t i = 0; i < std::int64_t(e_end) * nlev; ++i) ASSERT_EQ(got.vn[i], in.vn[i]);
    const std::int32_t c_end = lam.end_index(Dimension::Cell, Zone::LateralBoundaryLevel4);
    for (std::int64_t i = 0; i < std::int64_t(c_end) * nlev; ++i)
      ASSERT_EQ(got.theta_v[i], in.theta_v[i]);
    EXPECT_GT(rel_l2(got.vn, in.vn), 1e-8);
  }
}
