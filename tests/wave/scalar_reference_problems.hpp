// Problems and helpers shared by the scalar reference tests (test_scalar_reference.cpp,
// test_scalar_semantics.cpp): random models, states and vectors, dot products, relative L2
// errors, the Ricker wavelet.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/wave.hpp"
#include "wave/resample.hpp"
#include "wave_locations.hpp"

namespace sciproxy::wave::test_reference {

using namespace sciproxy;

const Device kReference{Backend::reference, 0, false};
using Array = std::array<std::int64_t, 2 * kMaxDims>;

template <class T>
struct Problem {
  Grid grid;
  std::int64_t nshots = 1, nmodels = 1, nsources = 0, nreceivers = 0, nt = 0;
  double dt = 0;
  std::vector<T> v, amplitudes;
  std::vector<std::int64_t> sources, receivers;

  ScalarInput<T> input() const {
    ScalarInput<T> in;
    in.grid = grid;
    in.v = v;
    in.nmodels = nmodels;
    in.dt = dt;
    in.nt = nt;
    in.nshots = nshots;
    in.nsources = nsources;
    in.nreceivers = nreceivers;
    in.source_amplitudes = amplitudes;
    in.source_locations = sources;
    in.receiver_locations = receivers;
    return in;
  }
};

using wave_test::cfl_dt;

// Random model in [1500, 2500] m/s, random amplitudes, distinct random source cells per shot and
// random receiver cells, all inside [lo, hi) per dimension (default: the whole model).
inline Problem<double> random_problem(int ndim, std::array<std::int64_t, 3> shape,
                                      std::int64_t nshots, std::int64_t nsources,
                                      std::int64_t nreceivers, std::int64_t nt, double dt_over_cfl,
                                      std::uint64_t seed, std::int64_t nmodels = 1,
                                      std::array<std::int64_t, 3> lo = {0, 0, 0},
                                      std::array<std::int64_t, 3> hi = {0, 0, 0}) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> vel(1500, 2500);
  std::normal_distribution<double> normal;
  Problem<double> p;
  p.grid.ndim = ndim;
  p.grid.shape = {1, 1, 1};
  p.grid.spacing = {5, 6, 4};
  for (int d = 0; d < ndim; ++d) p.grid.shape[d] = shape[d];
  p.nshots = nshots;
  p.nmodels = nmodels;
  p.nsources = nsources;
  p.nreceivers = nreceivers;
  p.nt = nt;
  p.dt = dt_over_cfl * cfl_dt(p.grid, 2500);
  p.v.resize(static_cast<std::size_t>(nmodels * p.grid.cells()));
  for (auto& x : p.v) x = vel(rng);
  p.amplitudes.resize(static_cast<std::size_t>(nshots * nsources * nt));
  for (auto& x : p.amplitudes) x = normal(rng);
  for (int d = 0; d < ndim; ++d)
    if (hi[d] == 0) hi[d] = shape[d];
  for (std::int64_t s = 0; s < nshots; ++s) {
    wave_test::append_random_cells(rng, ndim, lo, hi, nsources, true, p.sources);
    wave_test::append_random_cells(rng, ndim, lo, hi, nreceivers, false, p.receivers);
  }
  return p;
}

// A state of the right padded shape filled with N(0, 1) values (the propagator zeroes what it
// must: halo, psi and zeta outside their PML slabs).
template <class T>
ScalarState<T> random_state(const Problem<T>& p, const ScalarOptions& opt, std::uint64_t seed) {
  Problem<T> q = p;
  q.nt = 0;
  q.amplitudes.clear();
  ScalarState<T> s = scalar(kReference, q.input(), opt).state;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  auto fill = [&](std::vector<T>& f) {
    for (auto& x : f) x = static_cast<T>(normal(rng));
  };
  fill(s.wavefield);
  fill(s.previous_wavefield);
  for (int d = 0; d < p.grid.ndim; ++d) {
    fill(s.psi[d]);
    fill(s.zeta[d]);
  }
  return s;
}

template <class T>
double dot(const std::vector<T>& a, const std::vector<T>& b) {
  EXPECT_EQ(a.size(), b.size());
  double s = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    s += static_cast<double>(a[i]) * b[i];
  return s;
}

template <class T>
double dot(const ScalarState<T>& a, const ScalarState<T>& b, int ndim) {
  double s = dot(a.wavefield, b.wavefield) + dot(a.previous_wavefield, b.previous_wavefield);
  for (int d = 0; d < ndim; ++d) s += dot(a.psi[d], b.psi[d]) + dot(a.zeta[d], b.zeta[d]);
  return s;
}

template <class A, class B>
double relative_l2(const std::vector<A>& got, const std::vector<B>& want) {
  EXPECT_EQ(got.size(), want.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  if (!std::isfinite(num)) return std::numeric_limits<double>::infinity();
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline std::vector<double> random_vector(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> x(n);
  for (auto& e : x) e = normal(rng);
  return x;
}

// Ricker wavelet of peak frequency fp, delayed by tp.
inline double ricker(double t, double fp, double tp) {
  const double a = std::numbers::pi * std::numbers::pi * fp * fp * (t - tp) * (t - tp);
  return (1 - 2 * a) * std::exp(-a);
}

}  // namespace sciproxy::wave::test_reference
