// Random coupled P/M TTI problems shared by the cross tests (tests/tti/test_tti_backend.cpp):
// heterogeneous, tilted, variable-density models with a sponge on every side but one, several
// shots, a source and a receiver on the surface; and the relative L2 norm the tests compare by.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <vector>

#include "sciproxy/tti.hpp"

namespace sciproxy::tti::test_problems {

template <class T>
struct TtiProblem {
  Grid grid{3, {1, 1, 1}, {10, 10, 10}};
  std::vector<T> vp, b, eps, delta, theta, phi, f, amplitudes, data;
  std::vector<std::int64_t> sources, receivers;
  TtiInput<T> in;  // points into the vectors above: a TtiProblem is never copied or moved
  TtiOptions opt;
};

// Shape: min_shape + spread * uniform(0, 1) per axis.
struct TtiProblemSize {
  std::array<double, 3> min_shape, spread;
  std::int64_t nshots, nsources, nreceivers;
};

template <class T>
void random_problem(TtiProblem<T>& p, int order, bool free_surface, std::int64_t nt,
                    std::uint64_t seed, const TtiProblemSize& size) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  for (int a = 0; a < 3; ++a)
    p.grid.shape[a] = std::int64_t(size.min_shape[a] + size.spread[a] * u(rng));
  p.grid.spacing = {8, 10, 9};
  const std::int64_t n = p.grid.cells();
  for (std::int64_t i = 0; i < n; ++i) {
    p.vp.push_back(T(1500 + 1000 * u(rng)));
    p.b.push_back(T(0.4 + 0.6 * u(rng)));
    const double e = 0.25 * u(rng);
    p.eps.push_back(T(e));
    p.delta.push_back(T(e - 0.2 * u(rng)));
    p.theta.push_back(T(std::numbers::pi * u(rng)));
    p.phi.push_back(T(2 * std::numbers::pi * u(rng)));
    p.f.push_back(T(0.6 + 0.35 * u(rng)));
  }
  const std::int64_t nshots = size.nshots, nsources = size.nsources, nreceivers = size.nreceivers;
  auto add_location = [&](std::vector<std::int64_t>& to) {
    for (int d = 0; d < 3; ++d) to.push_back(std::int64_t(u(rng) * p.grid.shape[d]));
  };
  for (std::int64_t k = 0; k < nshots * nsources; ++k) add_location(p.sources);
  for (std::int64_t k = 0; k < nshots * nreceivers; ++k) add_location(p.receivers);
  p.sources[0] = 0;  // on the surface
  p.receivers[3] = 0;
  std::normal_distribution<double> normal;
  for (std::int64_t i = 0; i < nshots * nsources * nt; ++i) p.amplitudes.push_back(T(normal(rng)));
  for (std::int64_t i = 0; i < nshots * nreceivers * nt; ++i) p.data.push_back(T(normal(rng)));
  p.opt.space_order = order;
  p.opt.sponge_width = {2, 3, 4, 1, 0, 3};
  p.opt.free_surface = free_surface;
  p.opt.freq_q = 15;
  p.opt.q_min = 0.3;
  TtiInput<T>& in = p.in;
  in.model = {p.grid, p.vp, p.b, p.eps, p.delta, p.theta, p.phi, p.f};
  in.nt = nt;
  in.nshots = nshots;
  in.nsources = nsources;
  in.nreceivers = nreceivers;
  in.source_amplitudes = p.amplitudes;
  in.source_locations = p.sources;
  in.receiver_locations = p.receivers;
  in.dt = 0.9 * tti_max_dt(in.model, p.opt);
}

template <class T>
double rel_l2(const std::vector<T>& a, const std::vector<T>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(double(a[i]))) return INFINITY;
    num += (double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / den);
}

}  // namespace sciproxy::tti::test_problems
