// The vertical grid and the metric fields of the diffusion granule (include/sciproxy/diffusion.hpp,
// src/diffusion/metrics.cpp), checked against ICON4Py's formulas: vct_a and its indices by hand on
// a 4-level case and for the defaults (values worked out from ICON4Py's equations), ICON4Py's own
// damping-layer test cases, the reference atmosphere at a few heights, wgtfac_c exact on uniform
// layers and as a linear interpolation everywhere, and the truly horizontal diffusion fields on a
// Gaussian mountain on R2B4 x 65 levels (what they must satisfy); then every field side by side
// with ICON4Py 0.4.1's own functions on a small case (R1B1 x 12 levels, committed data).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "sciproxy/core/error.hpp"
#include "sciproxy/diffusion.hpp"

namespace dif = sciproxy::diffusion;

namespace {

dif::VerticalGridConfig levels(std::int32_t n) {
  dif::VerticalGridConfig c;
  c.num_levels = n;
  return c;
}

struct Case {
  dif::Grid grid;
  dif::InterpolationCoefficients coef;
};
const Case& r2b4() {
  static const Case c = [] {
    Case k{dif::icosahedral_grid(2, 4), {}};
    k.coef = dif::interpolation_coefficients(k.grid);
    return k;
  }();
  return c;
}

// The mountain case, computed once: R2B4, 65 default levels, the default Gaussian mountain.
struct MountainCase {
  dif::VerticalGrid vertical;
  std::vector<double> topography;
  dif::MetricState metrics;
};
const MountainCase& mountain() {
  static const MountainCase m = [] {
    MountainCase k;
    k.vertical = dif::vertical_grid(levels(65));
    k.topography = dif::synthetic_orography(r2b4().grid);
    k.metrics = dif::metric_state(r2b4().grid, r2b4().coef, k.vertical, k.topography);
    return k;
  }();
  return m;
}

}  // namespace

TEST(DiffusionVerticalGrid, SmallCaseByHand) {
  // N = 4, H = 1000, lowest layer 100, s = 1: d = ln(0.1) / ln(2/pi acos(3/4)) = 2.96611590331...,
  // vct_a[k] = 1000 (2/pi acos(k/4))^d.
  dif::VerticalGridConfig c = levels(4);
  c.model_top_height = 1000.0;
  c.lowest_layer_thickness = 100.0;
  c.rayleigh_damping_height = 500.0;
  c.flat_height = 300.0;
  c.htop_moist_proc = 700.0;
  const dif::VerticalGrid g = dif::vertical_grid(c);
  const std::vector<double> expected = {1000.0, 594.4045958142823, 300.39514968904336, 100.0, 0.0};
  ASSERT_EQ(g.vct_a.size(), expected.size());
  for (std::size_t k = 0; k < expected.size(); ++k) {
    EXPECT_NEAR(g.vct_a[k], expected[k], 1e-12 * 1000.0) << "k = " << k;
    EXPECT_DOUBLE_EQ(g.vct_b[k], std::exp(-g.vct_a[k] / 5000.0));
  }
  // Interfaces at or above 500 m: 0 and 1, so the damping layer ends at interface 1; at or above
  // 300 m: 0, 1, 2; mid-heights 797.2, 447.4, ...: the first below 700 m is level 1.
  EXPECT_EQ(g.end_index_of_damping_layer, 1);
  EXPECT_EQ(g.nflatlev, 2);
  EXPECT_EQ(g.kstart_moist, 1);
}

TEST(DiffusionVerticalGrid, Defaults) {
  const dif::VerticalGrid g = dif::vertical_grid(levels(65));
  ASSERT_EQ(g.vct_a.size(), 66u);
  EXPECT_EQ(g.vct_a[0], 23500.0);
  EXPECT_EQ(g.vct_a[65], 0.0);
  EXPECT_NEAR(g.vct_a[64], 50.0, 1e-9);  // the lowest layer thickness
  for (int k = 0; k < 65; ++k) EXPECT_GT(g.vct_a[k], g.vct_a[k + 1]) << "k = " << k;
  // Layers thicken upwards (the stretched coordinate).
  for (int k = 1; k < 65; ++k)
    EXPECT_LT(g.vct_a[k] - g.vct_a[k + 1], g.vct_a[k - 1] - g.vct_a[k]) << "k = " << k;
  EXPECT_NEAR(g.vct_a[1], 22859.320232241957, 1e-8);
  EXPECT_NEAR(g.vct_a[63], 132.81187382715595, 1e-10);
  // ICON4Py for the defaults: damp_height 45 km is above the 23.5 km top, so 0; the lowest
  // interface at or above 16 km is 12; the first mid-height below 22.5 km is level 2.
  EXPECT_EQ(g.end_index_of_damping_layer, 0);
  EXPECT_EQ(g.nflatlev, 12);
  EXPECT_EQ(g.kstart_moist, 2);
  EXPECT_EQ(g.num_levels(), 65);

  dif::VerticalGridConfig c = levels(65);
  c.rayleigh_damping_height = 12500.0;
  EXPECT_EQ(dif::vertical_grid(c).end_index_of_damping_layer, 20);
}

TEST(DiffusionVerticalGrid, UniformLayers) {
  dif::VerticalGridConfig c = levels(64);
  c.lowest_layer_thickness = 0.0;  // <= 0.01: uniform layers
  c.model_top_height = 6400.0;
  const dif::VerticalGrid g = dif::vertical_grid(c);
  for (int k = 0; k <= 64; ++k) EXPECT_EQ(g.vct_a[k], 100.0 * (64 - k));
}

TEST(DiffusionVerticalGrid, MaximalLayerThicknessKeepsTheTop) {
  // 2 * 50 < 1000 < 15000 / 2: layers thicker than 1 km below 15 km are cut and the ones above
  // stretched so that the top stays at 23.5 km.
  dif::VerticalGridConfig c = levels(30);
  c.maximal_layer_thickness = 1000.0;
  const dif::VerticalGrid g = dif::vertical_grid(c);
  EXPECT_NEAR(g.vct_a[0], 23500.0, 1e-6);
  EXPECT_EQ(g.vct_a[30], 0.0);
  for (int k = 0; k < 30; ++k) {
    EXPECT_GT(g.vct_a[k], g.vct_a[k + 1]) << "k = " << k;
    if (g.vct_a[k + 1] < 15000.0) {
      EXPECT_LE(g.vct_a[k] - g.vct_a[k + 1], 1000.0 + 1e-9);
    }
  }
}

TEST(DiffusionVerticalGrid, Icon4pyDampingLayerCases) {
  // ICON4Py's test_damping_layer_calculation: vct_a = arange(0, max_h, delta) reversed; the
  // damping layer ends at len - ceil(damping_height / delta) - 1.
  struct Row {
    double max_h, damping_height, delta, flat_height;
  };
  for (const Row r : {Row{60000, 34000, 612, 50000}, Row{12000, 10000, 100, 11000},
                      Row{109050, 45000, 123, 80000}}) {
    std::vector<double> vct_a;
    for (double z = 0; z < r.max_h; z += r.delta) vct_a.push_back(z);
    std::reverse(vct_a.begin(), vct_a.end());
    dif::VerticalGridConfig c = levels(static_cast<std::int32_t>(vct_a.size()) - 1);
    c.rayleigh_damping_height = r.damping_height;
    c.flat_height = r.flat_height;
    c.htop_moist_proc = 1e9;
    const auto len = static_cast<std::int32_t>(vct_a.size());
    const dif::VerticalGrid g = dif::vertical_grid(c, vct_a, {});
    EXPECT_EQ(g.end_index_of_damping_layer,
              len - static_cast<std::int32_t>(std::ceil(r.damping_height / r.delta)) - 1)
        << "max_h " << r.max_h;
    EXPECT_GE(g.vct_a[g.nflatlev], r.flat_height);
    EXPECT_LT(g.vct_a[g.nflatlev + 1], r.flat_height);
  }
}

TEST(DiffusionVerticalGrid, RefusesBadConfigurations) {
  auto refuses = [](const dif::VerticalGridConfig& c, const char* name) {
    try {
      (void)dif::vertical_grid(c);
      ADD_FAILURE() << "accepted a bad " << name;
    } catch (const sciproxy::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  refuses(levels(0), "num_levels");
  refuses(levels(1), "num_levels");  // the stretched coordinate needs 2
  dif::VerticalGridConfig c = levels(10);
  c.lowest_layer_thickness = 30000.0;
  refuses(c, "lowest_layer_thickness");
  c = levels(10);
  c.rayleigh_damping_height = -1.0;
  refuses(c, "rayleigh_damping_height");
  c = levels(10);
  c.model_top_height = std::numeric_limits<double>::quiet_NaN();
  refuses(c, "model_top_height");
  c = levels(10);
  c.htop_moist_proc = 0.0;
  refuses(c, "htop_moist_proc");
  c = levels(10);
  c.maximal_layer_thickness = 7000.0;  // in the cut's range, but no layer is that thick
  c.top_height_limit_for_maximal_layer_thickness = 15000.0;
  refuses(c, "maximal_layer_thickness");
  EXPECT_THROW((void)dif::vertical_grid(levels(4), std::vector<double>(4, 1.0), {}),
               sciproxy::InvalidArgument);
  // One level is fine with uniform layers.
  c = levels(1);
  c.lowest_layer_thickness = 0.0;
  c.htop_moist_proc = 23000.0;
  EXPECT_EQ(dif::vertical_grid(c).vct_a, (std::vector<double>{23500.0, 0.0}));
}

TEST(DiffusionMetrics, ReferenceAtmosphere) {
  // theta_ref = T (p0ref / p)^(Rd / cpd), p = p0sl ((e^(z/h) D + dT) / T0)^(-g h / (Rd D)),
  // T = D + dT e^(-z/h), D = T0 - dT: the same equations rearranged.
  const double p0ref = 100000, p0sl = 101325, t0 = 288.15, dt = 75, h = 10000, g = 9.80665,
               rd = 287.04, cpd = 1004.64, d = t0 - dt;
  auto theta = [&](double z) {
    const double p = p0sl * std::pow((std::exp(z / h) * d + dt) / t0, -g * h / (rd * d));
    return (d + dt * std::exp(-z / h)) * std::pow(p0ref / p, rd / cpd);
  };
  const MountainCase& m = mountain();
  const auto& ms = m.metrics;
  const std::int32_t nl = ms.num_levels;
  int checked = 0;
  for (std::int32_t c : {0, 1234, 20479})
    for (std::int32_t k : {0, 30, 64}) {
      const double z = ms.z_mc[static_cast<std::size_t>(c) * nl + k];
      EXPECT_NEAR(ms.theta_ref_mc[static_cast<std::size_t>(c) * nl + k], theta(z), 1e-11 * theta(z))
          << "cell " << c << " level " << k;
      ++checked;
    }
  EXPECT_EQ(checked, 9);
  // Near the ground theta_ref is about T0 (p0ref / p0sl)^(Rd / cpd), 287 K; it grows upwards.
  const std::size_t flat_cell = 20479;
  EXPECT_NEAR(ms.theta_ref_mc[flat_cell * nl + 64], 288.15 * std::pow(1000.0 / 1013.25, rd / cpd),
              0.5);
  for (std::int32_t k = 1; k < nl; ++k)
    EXPECT_GT(ms.theta_ref_mc[flat_cell * nl + k - 1], ms.theta_ref_mc[flat_cell * nl + k]);
}

TEST(DiffusionMetrics, FlatUniformLayersExact) {
  const Case& r = r2b4();
  dif::VerticalGridConfig c = levels(64);
  c.lowest_layer_thickness = 0.0;
  c.model_top_height = 6400.0;  // 100 m layers, exact in binary
  const dif::VerticalGrid g = dif::vertical_grid(c);
  const std::vector<double> flat(r.grid.num_cells, 0.0);
  const dif::MetricState m = dif::metric_state(r.grid, r.coef, g, flat);
  const std::size_t nh = 65;
  for (std::size_t cell = 0; cell < static_cast<std::size_t>(r.grid.num_cells); cell += 997)
    for (std::size_t k = 0; k < nh; ++k) {
      EXPECT_EQ(m.z_ifc[cell * nh + k], g.vct_a[k]);
      EXPECT_EQ(m.wgtfac_c[cell * nh + k], 0.5) << "cell " << cell << " k " << k;
    }
  // Flat ground: no truly horizontal diffusion anywhere.
  EXPECT_EQ(std::count(m.mask_hdiff.begin(), m.mask_hdiff.end(), 1), 0);
  EXPECT_TRUE(
      std::all_of(m.zd_diffcoef.begin(), m.zd_diffcoef.end(), [](double v) { return v == 0; }));
  EXPECT_TRUE(
      std::all_of(m.zd_intcoef.begin(), m.zd_intcoef.end(), [](double v) { return v == 0; }));
  EXPECT_TRUE(std::all_of(m.zd_vertoffset.begin(), m.zd_vertoffset.end(),
                          [](std::int32_t v) { return v == 0; }));
  EXPECT_TRUE(
      std::all_of(m.maxslp_avg.begin(), m.maxslp_avg.end(), [](double v) { return v == 0; }));
}

TEST(DiffusionMetrics, FlatDefaultLevelsNoZdPoints) {
  const Case& r = r2b4();
  const dif::VerticalGrid g = dif::vertical_grid(levels(65));
  const dif::MetricState m =
      dif::metric_state(r.grid, r.coef, g, std::vector<double>(r.grid.num_cells, 0.0));
  EXPECT_EQ(std::count(m.mask_hdiff.begin(), m.mask_hdiff.end(), 1), 0);
  const std::size_t nh = 66;
  for (std::size_t k = 0; k < nh; ++k) EXPECT_EQ(m.z_ifc[5 * nh + k], g.vct_a[k]);
}

TEST(DiffusionMetrics, MountainHeights) {
  const MountainCase& m = mountain();
  const auto& ms = m.metrics;
  const std::size_t nc = static_cast<std::size_t>(ms.num_cells), nl = 65, nh = 66;
  ASSERT_EQ(ms.z_ifc.size(), nc * nh);
  ASSERT_EQ(ms.z_mc.size(), nc * nl);
  ASSERT_EQ(ms.wgtfac_c.size(), nc * nh);
  ASSERT_EQ(ms.theta_ref_mc.size(), nc * nl);
  const double highest = *std::max_element(m.topography.begin(), m.topography.end());
  EXPECT_GT(highest, 3500.0);  // a cell near the summit
  EXPECT_LT(*std::max_element(ms.smoothed_topography.begin(), ms.smoothed_topography.end()),
            highest);
  double worst_interpolation = 0;
  for (std::size_t c = 0; c < nc; ++c) {
    const double* z = &ms.z_ifc[c * nh];
    EXPECT_EQ(z[nl], m.topography[c]);
    for (std::int32_t k = 0; k <= m.vertical.nflatlev; ++k) ASSERT_EQ(z[k], m.vertical.vct_a[k]);
    for (std::size_t k = 0; k < nl; ++k) {
      ASSERT_GT(z[k], z[k + 1]) << "cell " << c << " k " << k;
      ASSERT_EQ(ms.z_mc[c * nl + k], 0.5 * (z[k] + z[k + 1]));
    }
    for (std::size_t k = 0; k < nh; ++k) {
      const double w = ms.wgtfac_c[c * nh + k];
      ASSERT_GT(w, 0.0);
      ASSERT_LT(w, 1.0);
    }
    // wgtfac_c interpolates linearly between full levels: exact for z itself.
    for (std::size_t k = 1; k < nl; ++k) {
      const double w = ms.wgtfac_c[c * nh + k];
      const double zi = w * ms.z_mc[c * nl + k] + (1 - w) * ms.z_mc[c * nl + k - 1];
      worst_interpolation =
          std::max(worst_interpolation, std::abs(zi - z[k]) / (1.0 + std::abs(z[k])));
    }
  }
  EXPECT_LT(worst_interpolation, 1e-12);
}

TEST(DiffusionMetrics, CellAverageWeightsConserveMass) {
  const Case& r = r2b4();
  const auto& ms = mountain().metrics;
  const std::size_t nc = static_cast<std::size_t>(r.grid.num_cells);
  ASSERT_EQ(ms.c_bln_avg.size(), nc * 4);
  double worst_mass = 0, worst_row = 0;
  for (std::size_t c = 0; c < nc; ++c) {
    // sum over the cells n that see c of (c's weight in n) A_n = A_c.
    double mass = 0;
    for (int i = 0; i < 4; ++i) {
      const auto n = static_cast<std::size_t>(r.grid.c2e2co[4 * c + i]);
      for (int j = 0; j < 4; ++j)
        if (static_cast<std::size_t>(r.grid.c2e2co[4 * n + j]) == c)
          mass += ms.c_bln_avg[4 * n + j] * r.grid.cell_area[n];
    }
    worst_mass = std::max(worst_mass, std::abs(mass / r.grid.cell_area[c] - 1));
    double row = 0;
    for (int i = 0; i < 4; ++i) row += ms.c_bln_avg[4 * c + i];
    worst_row = std::max(worst_row, std::abs(row - 1));
    EXPECT_NEAR(ms.c_bln_avg[4 * c], 0.5, 0.004);
  }
  fmt::print("c_bln_avg: worst mass-conservation error {:.2e}, worst row-sum error {:.2e}\n",
             worst_mass, worst_row);
  // The last sweep moves each central weight by its own residual, which makes the mass exact (a
  // cell's central weight enters only its own sum); the rows then sum to 1 only nearly.
  EXPECT_LT(worst_mass, 1e-13);
  EXPECT_LT(worst_row, 1e-3);
}

TEST(DiffusionMetrics, MountainTrulyHorizontalDiffusion) {
  const Case& r = r2b4();
  const MountainCase& m = mountain();
  const auto& ms = m.metrics;
  const std::size_t nc = static_cast<std::size_t>(ms.num_cells);
  const std::int32_t nl = ms.num_levels;
  ASSERT_EQ(ms.zd_intcoef.size(), nc * 3 * nl);
  ASSERT_EQ(ms.zd_vertoffset.size(), nc * 3 * nl);
  ASSERT_EQ(ms.zd_diffcoef.size(), nc * nl);
  ASSERT_EQ(ms.mask_hdiff.size(), nc * nl);
  std::size_t points = 0, cells = 0;
  double worst_height = 0;
  for (std::size_t c = 0; c < nc; ++c) {
    bool any = false;
    for (std::int32_t k = 0; k < nl; ++k) {
      const std::size_t ck = c * nl + k;
      const bool on = ms.mask_hdiff[ck] == 1;
      if (!on) {
        ASSERT_EQ(ms.zd_diffcoef[ck], 0.0);
        for (int i = 0; i < 3; ++i) {
          ASSERT_EQ(ms.zd_intcoef[(c * 3 + i) * nl + k], 0.0);
          ASSERT_EQ(ms.zd_vertoffset[(c * 3 + i) * nl + k], 0);
        }
        continue;
      }
      any = true;
      ++points;
      ASSERT_GT(ms.zd_diffcoef[ck], 0.0);
      ASSERT_LE(ms.zd_diffcoef[ck], 0.002);
      // Only where the cell's level lies above every neighbour's lowest level.
      ASSERT_GE(ms.z_mc[ck], ms.max_nbhgt[c]);
      for (int i = 0; i < 3; ++i) {
        const std::size_t at = (c * 3 + i) * nl + k;
        const std::int32_t upper = k + ms.zd_vertoffset[at];
        ASSERT_GE(upper, 0);
        ASSERT_LT(upper + 1, nl);
        const double a = ms.zd_intcoef[at];
        ASSERT_GE(a, 0.0);
        ASSERT_LE(a, 1.0);
        // The weights find the neighbour's value at the cell's own height.
        const auto n = static_cast<std::size_t>(r.grid.c2e2c[3 * c + i]);
        const double zn = a * ms.z_mc[n * nl + upper] + (1 - a) * ms.z_mc[n * nl + upper + 1];
        worst_height = std::max(worst_height, std::abs(zn - ms.z_mc[ck]));
      }
    }
    cells += any ? 1 : 0;
  }
  fmt::print(
      "mountain: {} cells, {} (cell, level) points with truly horizontal diffusion; "
      "worst height mismatch {:.2e} m\n",
      cells, points, worst_height);
  EXPECT_GT(cells, 0u);
  EXPECT_GT(points, cells);
  EXPECT_LT(worst_height, 1e-8);
  // The points lie on the mountain, not at its antipode.
  for (std::size_t c = 0; c < nc; ++c)
    if (ms.mask_hdiff[c * nl + nl - 1]) {
      EXPECT_GT(m.topography[c], 50.0) << "cell " << c;
    }
}

TEST(DiffusionMetrics, RefusesBadInput) {
  const Case& r = r2b4();
  const dif::VerticalGrid g = dif::vertical_grid(levels(10));
  const std::size_t nc = static_cast<std::size_t>(r.grid.num_cells);
  auto refuses = [&](const std::vector<double>& topo, const dif::VerticalGrid& vg,
                     const char* name) {
    try {
      (void)dif::metric_state(r.grid, r.coef, vg, topo);
      ADD_FAILURE() << "accepted a bad " << name;
    } catch (const sciproxy::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  refuses(std::vector<double>(nc - 1, 0.0), g, "topography");
  std::vector<double> nan_topography(nc, 0.0);
  nan_topography[17] = std::numeric_limits<double>::quiet_NaN();
  refuses(nan_topography, g, "topography");
  dif::VerticalGrid one = g;
  one.config.num_levels = 1;
  one.vct_a = {23500.0, 0.0};
  refuses(std::vector<double>(nc, 0.0), one, "num_levels");
  dif::VerticalGrid short_table = g;
  short_table.vct_a.pop_back();
  refuses(std::vector<double>(nc, 0.0), short_table, "vct_a");
  // A 20 km mountain pushes the flat levels (ICON4Py refuses it too).
  dif::GaussianMountain everest;
  everest.mount_height = 20000.0;
  EXPECT_THROW(
      (void)dif::metric_state(r.grid, r.coef, g, dif::synthetic_orography(r.grid, everest)),
      sciproxy::InvalidArgument);
  dif::GaussianMountain bad;
  bad.mount_width = 0.0;
  EXPECT_THROW((void)dif::synthetic_orography(r.grid, bad), sciproxy::InvalidArgument);
}

// ICON4Py side by side: tests/data/diffusion/metrics_reference.json holds the inputs of a small
// case (the grid tables and geometry, the coefficients, the topography, the configuration), as
// this test writes them when SCIPROXY_WRITE_METRICS_INPUTS names a file, and what ICON4Py 0.4.1's
// own functions compute from them (tests/data/diffusion/make_metrics_reference.py). The test
// checks that sciproxy's inputs are still the stored ones, then compares every field. The same
// comparison on R2B2 and on R2B4 x 65 levels with the default mountain (851 points; files of
// 16 and 230 MB, not committed) passes with the same tolerances.
namespace {

constexpr int kReferenceN = 1, kReferenceK = 1;  // R1B1: 80 cells
constexpr std::int32_t kReferenceLevels = 12;
dif::GaussianMountain reference_mountain() {
  dif::GaussianMountain m;
  m.mount_height = 3000.0;
  m.mount_width = 1500.0e3;
  return m;
}

struct ReferenceCase {
  dif::Grid grid;
  dif::InterpolationCoefficients coef;
  dif::VerticalGrid vertical;
  std::vector<double> topography;
};
ReferenceCase reference_case() {
  ReferenceCase r;
  r.grid = dif::icosahedral_grid(kReferenceN, kReferenceK);
  r.coef = dif::interpolation_coefficients(r.grid);
  r.vertical = dif::vertical_grid(levels(kReferenceLevels));
  r.topography = dif::synthetic_orography(r.grid, reference_mountain());
  return r;
}

nlohmann::json inputs_json(const ReferenceCase& r) {
  const dif::VerticalGridConfig& c = r.vertical.config;
  nlohmann::json j;
  j["grid"] = fmt::format("R{}B{}", kReferenceN, kReferenceK);
  j["num_cells"] = r.grid.num_cells;
  j["num_edges"] = r.grid.num_edges;
  j["vertical_config"] = {
      {"num_levels", c.num_levels},
      {"maximal_layer_thickness", c.maximal_layer_thickness},
      {"top_height_limit_for_maximal_layer_thickness",
       c.top_height_limit_for_maximal_layer_thickness},
      {"lowest_layer_thickness", c.lowest_layer_thickness},
      {"model_top_height", c.model_top_height},
      {"flat_height", c.flat_height},
      {"stretch_factor", c.stretch_factor},
      {"rayleigh_damping_height", c.rayleigh_damping_height},
      {"htop_moist_proc", c.htop_moist_proc},
      {"SLEVE_decay_scale_1", c.SLEVE_decay_scale_1},
      {"SLEVE_decay_scale_2", c.SLEVE_decay_scale_2},
      {"SLEVE_decay_exponent", c.SLEVE_decay_exponent},
  };
  const dif::MetricOptions o;
  j["options"] = {
      {"thslp_zdiffu", o.thslp_zdiffu},
      {"thhgtd_zdiffu", o.thhgtd_zdiffu},
      {"divergence_averaging_central_cell_weight", o.divergence_averaging_central_cell_weight}};
  j["c2e"] = r.grid.c2e;
  j["c2e2c"] = r.grid.c2e2c;
  j["c2e2co"] = r.grid.c2e2co;
  j["e2c"] = r.grid.e2c;
  j["cell_lat"] = r.grid.cell_lat;
  j["cell_lon"] = r.grid.cell_lon;
  j["cell_area"] = r.grid.cell_area;
  j["dual_edge_length"] = r.grid.dual_edge_length;
  j["inverse_dual_edge_lengths"] = r.coef.inverse_dual_edge_lengths;
  j["geofac_n2s"] = r.coef.geofac_n2s;
  j["topography"] = r.topography;
  return j;
}

// |a - b| <= rtol |b| + atol elementwise, reporting the worst offender.
void expect_close(const std::vector<double>& got, const nlohmann::json& want, const char* name,
                  double rtol = 1e-12, double atol = 0.0) {
  const auto ref = want.get<std::vector<double>>();
  ASSERT_EQ(got.size(), ref.size()) << name;
  std::size_t worst = 0;
  double worst_excess = -std::numeric_limits<double>::infinity(), worst_relative = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double difference = std::abs(got[i] - ref[i]);
    const double excess = difference - (rtol * std::abs(ref[i]) + atol);
    if (excess > worst_excess) worst_excess = excess, worst = i;
    if (ref[i] != 0) worst_relative = std::max(worst_relative, difference / std::abs(ref[i]));
  }
  fmt::print("  {:<28} worst relative difference to ICON4Py {:.1e}\n", name, worst_relative);
  EXPECT_LE(worst_excess, 0.0) << name << "[" << worst
                               << "]: " << fmt::format("{:.17g}", got[worst]) << " vs ICON4Py "
                               << fmt::format("{:.17g}", ref[worst]);
}

}  // namespace

TEST(DiffusionMetricsReference, Icon4py) {
  const ReferenceCase r = reference_case();
  if (const char* out = std::getenv("SCIPROXY_WRITE_METRICS_INPUTS")) {
    std::ofstream(out) << inputs_json(r).dump() << "\n";
    GTEST_SKIP() << "wrote the inputs to " << out;
  }
  const char* other = std::getenv("SCIPROXY_METRICS_REFERENCE");
  const auto path = other ? std::filesystem::path(other)
                          : std::filesystem::path(SCIPROXY_TEST_DATA_DIR) / "diffusion" /
                                "metrics_reference.json";
  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << "cannot read " << path;
  const nlohmann::json ref = nlohmann::json::parse(f);

  // The stored inputs are still what sciproxy computes (the grid, its coefficients, the
  // mountain); the tables exactly.
  const nlohmann::json now = inputs_json(r);
  const nlohmann::json& in = ref.at("inputs");
  for (const char* table : {"c2e", "c2e2c", "c2e2co", "e2c"})
    EXPECT_EQ(now.at(table), in.at(table)) << table;
  // Positions (radians) get an absolute floor: a longitude of 1e-16 on the zero meridian is
  // rounding, and differs between optimised and debug builds (measured 3e-18).
  for (const char* field : {"cell_lat", "cell_lon"})
    expect_close(now.at(field).get<std::vector<double>>(), in.at(field), field, 1e-13, 1e-15);
  for (const char* field :
       {"cell_area", "dual_edge_length", "inverse_dual_edge_lengths", "geofac_n2s", "topography"})
    expect_close(now.at(field).get<std::vector<double>>(), in.at(field), field, 1e-13, 1e-300);
  EXPECT_EQ(now.at("vertical_config"), in.at("vertical_config"));
  EXPECT_EQ(now.at("options"), in.at("options"));

  // The vertical grids.
  for (const nlohmann::json& v : ref.at("vertical_grids")) {
    dif::VerticalGridConfig c = levels(v.at("num_levels").get<std::int32_t>());
    c.maximal_layer_thickness = v.at("maximal_layer_thickness").get<double>();
    c.top_height_limit_for_maximal_layer_thickness =
        v.at("top_height_limit_for_maximal_layer_thickness").get<double>();
    c.lowest_layer_thickness = v.at("lowest_layer_thickness").get<double>();
    c.model_top_height = v.at("model_top_height").get<double>();
    c.flat_height = v.at("flat_height").get<double>();
    c.stretch_factor = v.at("stretch_factor").get<double>();
    c.rayleigh_damping_height = v.at("rayleigh_damping_height").get<double>();
    c.htop_moist_proc = v.at("htop_moist_proc").get<double>();
    const dif::VerticalGrid g = dif::vertical_grid(c);
    const std::string name = v.at("name").get<std::string>();
    SCOPED_TRACE(name);
    expect_close(g.vct_a, v.at("vct_a"), "vct_a", 1e-12, 1e-9);
    expect_close(g.vct_b, v.at("vct_b"), "vct_b", 1e-12, 1e-300);
    EXPECT_EQ(g.end_index_of_damping_layer, v.at("end_index_of_damping_layer").get<std::int32_t>());
    EXPECT_EQ(g.nflatlev, v.at("nflatlev").get<std::int32_t>());
    EXPECT_EQ(g.kstart_moist, v.at("kstart_moist").get<std::int32_t>());
  }

  // The metric fields.
  const dif::MetricState m = dif::metric_state(r.grid, r.coef, r.vertical, r.topography);
  const nlohmann::json& o = ref.at("outputs");
  expect_close(m.smoothed_topography, o.at("smoothed_topography"), "smoothed_topography", 1e-12,
               1e-9);
  expect_close(m.z_ifc, o.at("z_ifc"), "z_ifc", 1e-12, 1e-9);
  expect_close(m.z_mc, o.at("z_mc"), "z_mc", 1e-12, 1e-9);
  expect_close(m.theta_ref_mc, o.at("theta_ref_mc"), "theta_ref_mc");
  expect_close(m.exner_ref_mc, o.at("exner_ref_mc"), "exner_ref_mc");
  expect_close(m.rho_ref_mc, o.at("rho_ref_mc"), "rho_ref_mc");
  expect_close(m.wgtfac_c, o.at("wgtfac_c"), "wgtfac_c");
  expect_close(m.c_bln_avg, o.at("c_bln_avg"), "c_bln_avg");
  // Slopes and height differences are differences of heights: on nearly flat levels they are
  // rounding noise (slopes of 1e-17, heights of 1e-10 m), hence the absolute tolerances.
  expect_close(m.maxslp_avg, o.at("maxslp_avg"), "maxslp_avg", 1e-12, 1e-15);
  expect_close(m.maxhgtd_avg, o.at("maxhgtd_avg"), "maxhgtd_avg", 1e-12, 1e-9);
  expect_close(m.max_nbhgt, o.at("max_nbhgt"), "max_nbhgt");
  expect_close(m.zd_diffcoef, o.at("zd_diffcoef"), "zd_diffcoef", 1e-12, 1e-16);
  // zd_intcoef, in [0, 1], is (z - z_lower) / (z_upper - z_lower): a height difference over a
  // layer thickness, so a last-bit difference in z_mc shows as an absolute error of about
  // 1e-16 z / dz (1e-15 on R2B2 x 65 levels, where values near 0 differ by 1e-11 relatively).
  expect_close(m.zd_intcoef, o.at("zd_intcoef"), "zd_intcoef", 1e-12, 1e-13);
  EXPECT_EQ(m.zd_vertoffset, o.at("zd_vertoffset").get<std::vector<std::int32_t>>());
  EXPECT_EQ(m.mask_hdiff, o.at("mask_hdiff").get<std::vector<std::uint8_t>>());
  const auto points = std::count(m.mask_hdiff.begin(), m.mask_hdiff.end(), 1);
  fmt::print("ICON4Py reference ({}): {} points with truly horizontal diffusion\n",
             in.at("grid").get<std::string>(), points);
  EXPECT_GT(points, 0);
}
