// Inputs of the diffusion granule for the tests: a generated global grid, sciproxy's own
// coefficients, a simple vertical grid and metric fields, and smooth-plus-random fields.
#pragma once

#include <cmath>
#include <random>
#include <vector>

#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion::testing {

struct GranuleSetup {
  Grid grid;
  DiffusionConfig config;
  DiffusionVerticalGrid vertical;
  DiffusionMetricState metrics;
  DiffusionInterpolationState interpolation;
  DiffusionEdgeParams edges;
  DiffusionCellParams cells;
};

// nlev levels from 30 km down to 0 (stretched), damping layer over the top quarter, theta_ref
// of an isothermal-ish atmosphere, wgtfac_c from the layer thicknesses, and zd points on every
// tenth cell of the lower half (offsets 0 or 1, weights in (0, 1)) so that the truly horizontal
// branch runs.
inline GranuleSetup make_setup(int n, int k, int nlev, bool with_zd = true) {
  GranuleSetup s;
  s.grid = icosahedral_grid(n, k);
  const InterpolationCoefficients c = interpolation_coefficients(s.grid);
  s.interpolation = interpolation_state(s.grid, c);
  s.edges = edge_params(s.grid, c);
  s.cells = cell_params(s.grid);
  s.config.shear_type = 2;
  s.vertical.num_levels = nlev;
  s.vertical.vct_a.resize(nlev + 1);
  for (int i = 0; i <= nlev; ++i) {
    const double x = 1.0 - double(i) / nlev;
    s.vertical.vct_a[i] = 30000.0 * x * (0.3 + 0.7 * x);
  }
  s.vertical.end_index_of_damping_layer = nlev / 4;
  const std::int64_t nc = s.grid.num_cells;
  s.metrics.theta_ref_mc.resize(nc * nlev);
  s.metrics.wgtfac_c.resize(nc * (nlev + 1));
  s.metrics.zd_diffcoef.assign(nc * nlev, 0.0);
  s.metrics.zd_intcoef.assign(nc * 3 * nlev, 0.0);
  s.metrics.zd_vertoffset.assign(nc * 3 * nlev, 0);
  for (std::int64_t cell = 0; cell < nc; ++cell) {
    for (int i = 0; i < nlev; ++i) {
      const double z = 0.5 * (s.vertical.vct_a[i] + s.vertical.vct_a[i + 1]);
      s.metrics.theta_ref_mc[cell * nlev + i] = 290.0 * std::exp(z / 25000.0) +
                                                2.0 * std::sin(0.001 * cell);
    }
    for (int i = 0; i <= nlev; ++i) {
      double w = 0.5;
      if (i > 0 && i < nlev) {
        const double dz_above = s.vertical.vct_a[i - 1] - s.vertical.vct_a[i];
        const double dz_below = s.vertical.vct_a[i] - s.vertical.vct_a[i + 1];
        w = dz_above / (dz_above + dz_below);
      }
      s.metrics.wgtfac_c[cell * (nlev + 1) + i] = w;
    }
    if (with_zd && cell % 10 == 3)
      for (int i = nlev / 2; i < nlev - 2; ++i) {
        s.metrics.zd_diffcoef[cell * nlev + i] = 0.002 + 0.0001 * (cell % 7);
        for (int j = 0; j < 3; ++j) {
          s.metrics.zd_vertoffset[(cell * 3 + j) * nlev + i] = (cell + j) % 2;
          s.metrics.zd_intcoef[(cell * 3 + j) * nlev + i] = 0.2 + 0.2 * j;
        }
      }
  }
  return s;
}

// Fields in LevelsContiguous order: vn (edges, nlev), w (cells, nlev + 1), theta_v and exner
// (cells, nlev), diagnostics (cells, nlev + 1).
struct GranuleFields {
  std::vector<double> vn, w, theta_v, exner, hdef_ic, div_ic, dwdx, dwdy;
};

inline GranuleFields make_fields(const GranuleSetup& s, unsigned seed, double noise = 1.0) {
  const Grid& g = s.grid;
  const int nlev = s.vertical.num_levels;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  GranuleFields f;
  f.vn.resize(g.num_edges * nlev);
  for (std::int64_t e = 0; e < g.num_edges; ++e)
    for (int k = 0; k < nlev; ++k)
      f.vn[e * nlev + k] = 10.0 * std::cos(g.edge_center_lat[e]) * g.primal_normal_x[e] +
                           noise * normal(rng);
  f.w.resize(g.num_cells * (nlev + 1));
  for (auto& x : f.w) x = 0.1 * noise * normal(rng);
  f.theta_v.resize(g.num_cells * nlev);
  f.exner.resize(g.num_cells * nlev);
  for (std::int64_t c = 0; c < g.num_cells; ++c)
    for (int k = 0; k < nlev; ++k) {
      // Every 13th cell is 8 K colder than the reference near the ground: cold pools.
      const double cold = (c % 13 == 0 && k >= nlev - 2) ? -8.0 : 0.0;
      f.theta_v[c * nlev + k] = s.metrics.theta_ref_mc[c * nlev + k] + cold + noise * normal(rng);
      f.exner[c * nlev + k] = 0.7 + 0.2 * double(k) / nlev + 0.001 * noise * normal(rng);
    }
  f.hdef_ic.assign(g.num_cells * (nlev + 1), 0.0);
  f.div_ic = f.hdef_ic;
  f.dwdx = f.hdef_ic;
  f.dwdy = f.hdef_ic;
  return f;
}

}  // namespace sciproxy::diffusion::testing
