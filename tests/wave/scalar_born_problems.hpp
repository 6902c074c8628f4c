// Random Born problems shared by the Born tests (reference and cross-backend).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sciproxy/wave.hpp"
#include "wave_locations.hpp"

namespace born_test {

using namespace sciproxy::wave;

template <class T>
struct BornProblem {
  Grid grid;
  std::int64_t nshots = 1, nmodels = 1, nsources = 0, nreceivers = 0, nbg = 0, nt = 0;
  double dt = 0;
  std::vector<T> v, scatter, amplitudes;
  std::vector<std::int64_t> sources, receivers, bg_receivers;

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
  ScalarBornInput<T> born() const {
    ScalarBornInput<T> in;
    in.background = input();
    in.scatter = scatter;
    in.nbg_receivers = nbg;
    in.bg_receiver_locations = bg_receivers;
    return in;
  }
  template <class U>
  BornProblem<U> as() const {
    BornProblem<U> q;
    q.grid = grid;
    q.nshots = nshots;
    q.nmodels = nmodels;
    q.nsources = nsources;
    q.nreceivers = nreceivers;
    q.nbg = nbg;
    q.nt = nt;
    q.dt = dt;
    q.v.assign(v.begin(), v.end());
    q.scatter.assign(scatter.begin(), scatter.end());
    q.amplitudes.assign(amplitudes.begin(), amplitudes.end());
    q.sources = sources;
    q.receivers = receivers;
    q.bg_receivers = bg_receivers;
    return q;
  }
};

using wave_test::cfl_dt;

// Model in [1500, 2500] m/s, scatter N(0, 100 m/s), N(0, 1) amplitudes, distinct source cells per
// shot; receivers and background receivers anywhere in the model.
inline BornProblem<double> random_born(int ndim, std::array<std::int64_t, 3> shape,
                                       std::int64_t nshots, std::int64_t nsources,
                                       std::int64_t nreceivers, std::int64_t nbg, std::int64_t nt,
                                       double dt_over_cfl, std::uint64_t seed,
                                       std::int64_t nmodels = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> vel(1500, 2500);
  std::normal_distribution<double> normal;
  BornProblem<double> p;
  p.grid.ndim = ndim;
  p.grid.shape = {1, 1, 1};
  p.grid.spacing = {5, 6, 4};
  for (int d = 0; d < ndim; ++d) p.grid.shape[d] = shape[d];
  p.nshots = nshots;
  p.nmodels = nmodels;
  p.nsources = nsources;
  p.nreceivers = nreceivers;
  p.nbg = nbg;
  p.nt = nt;
  p.dt = dt_over_cfl * cfl_dt(p.grid, 2500);
  p.v.resize(static_cast<std::size_t>(nmodels * p.grid.cells()));
  for (auto& x : p.v) x = vel(rng);
  p.scatter.resize(p.v.size());
  for (auto& x : p.scatter) x = 100 * normal(rng);
  p.amplitudes.resize(static_cast<std::size_t>(nshots * nsources * nt));
  for (auto& x : p.amplitudes) x = normal(rng);
  const std::array<std::int64_t, 3> lo = {0, 0, 0}, hi = {shape[0], shape[1], shape[2]};
  for (std::int64_t s = 0; s < nshots; ++s) {
    wave_test::append_random_cells(rng, ndim, lo, hi, nsources, true, p.sources);
    wave_test::append_random_cells(rng, ndim, lo, hi, nreceivers, false, p.receivers);
    wave_test::append_random_cells(rng, ndim, lo, hi, nbg, false, p.bg_receivers);
  }
  return p;
}

template <class T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<T> x(n);
  for (auto& e : x) e = static_cast<T>(normal(rng));
  return x;
}

template <class A, class B>
double dot(const A& a, const B& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return s;
}

template <class A, class B>
double rel_l2(const A& a, const B& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace born_test
