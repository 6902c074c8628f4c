// Random source and receiver cells for the wave tests: count cells drawn uniformly in the box
// [lo, hi) of the first ndim dimensions, appended to `out` as [count, ndim]; with `distinct`,
// no cell twice (the sources of one shot must be in distinct cells).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sciproxy/seismic.hpp"

namespace wave_test {

template <class Rng>
void append_random_cells(Rng& rng, int ndim, const std::array<std::int64_t, 3>& lo,
                         const std::array<std::int64_t, 3>& hi, std::int64_t count, bool distinct,
                         std::vector<std::int64_t>& out) {
  std::vector<std::vector<std::int64_t>> taken;
  for (std::int64_t k = 0; k < count; ++k) {
    std::vector<std::int64_t> x(static_cast<std::size_t>(ndim));
    do {
      for (int d = 0; d < ndim; ++d)
        x[d] = std::uniform_int_distribution<std::int64_t>(lo[d], hi[d] - 1)(rng);
    } while (distinct && std::find(taken.begin(), taken.end(), x) != taken.end());
    if (distinct) taken.push_back(x);
    out.insert(out.end(), x.begin(), x.end());
  }
}

// 0.6 of the second-order CFL limit for max_vel on grid g: the tests' time step (the propagator
// resamples a larger one itself). Shared by the reference and Born problem generators.
inline double cfl_dt(const sciproxy::seismic::Grid& g, double max_vel) {
  double s = 0;
  for (int d = 0; d < g.ndim; ++d) s += 1 / (g.spacing[d] * g.spacing[d]);
  return 0.6 / std::sqrt(s) / max_vel;
}

}  // namespace wave_test
