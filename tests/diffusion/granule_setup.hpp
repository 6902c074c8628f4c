// Inputs of the diffusion granule for the tests: a generated global grid, sciproxy's own
// coefficients, a simple vertical grid and metric fields, and smooth-plus-random fields.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion::testing {

using GranuleSetup = DiffusionInputs;

// R n B k with nlev levels and sciproxy's computed inputs (zd points on every tenth cell of the
// lower half, or none).
inline GranuleSetup make_setup(int n, int k, int nlev, bool with_zd = true) {
  GranuleSetup s = computed_inputs(icosahedral_grid(n, k), nlev);
  if (!with_zd) std::fill(s.metrics.zd_diffcoef.begin(), s.metrics.zd_diffcoef.end(), 0.0);
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
      f.vn[e * nlev + k] =
          10.0 * std::cos(g.edge_center_lat[e]) * g.primal_normal_x[e] + noise * normal(rng);
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

// The eight fields of a run in one precision and layout, as the granule takes them.
template <class Real>
struct TypedFields {
  std::vector<Real> vn, w, theta_v, exner, hdef_ic, div_ic, dwdx, dwdy;
  DiffusionPrognosticFields<Real> prognostic() {
    return {vn.data(), w.data(), theta_v.data(), exner.data()};
  }
  DiffusionDiagnosticFields<Real> diagnostic() {
    return {hdef_ic.data(), div_ic.data(), dwdx.data(), dwdy.data()};
  }
  std::vector<std::vector<Real>*> all() {
    return {&vn, &w, &theta_v, &exner, &hdef_ic, &div_ic, &dwdx, &dwdy};
  }
};

// ||a - b|| / ||b|| (||a - b|| where b is 0).
inline double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Every field of got within tol (relative L2) of want.
inline void expect_close(const GranuleFields& got, const GranuleFields& want, double tol,
                         const std::string& what = "") {
  const std::pair<const char*, const std::vector<double> GranuleFields::*> fields[] = {
      {"vn", &GranuleFields::vn},           {"w", &GranuleFields::w},
      {"theta_v", &GranuleFields::theta_v}, {"exner", &GranuleFields::exner},
      {"hdef_ic", &GranuleFields::hdef_ic}, {"div_ic", &GranuleFields::div_ic},
      {"dwdx", &GranuleFields::dwdx},       {"dwdy", &GranuleFields::dwdy}};
  for (const auto& [name, field] : fields)
    EXPECT_LE(rel_l2(got.*field, want.*field), tol) << what << (what.empty() ? "" : ": ") << name;
}

}  // namespace sciproxy::diffusion::testing
