// Small problems for the tests of the TTI workshop demo operator (include/sciproxy/tti_demo.hpp):
// random or constant materials, a Ricker source at a non-grid point, optional random initial
// fields. The Problem owns its arrays; input() points into them.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sciproxy/tti_demo.hpp"

namespace sciproxy::test {

template <class T>
struct TtiDemoProblem {
  std::array<std::int64_t, 3> shape = {12, 13, 14};
  std::array<double, 3> spacing = {10, 10, 10};
  double dt = 0;  // 0: 0.9 x the stability limit (set by finish())
  std::int64_t nt = 10;
  std::vector<T> vp, b, epsilon, eta, f, theta, phi, damping;
  std::array<double, 3> source_position = {0, 0, 0};
  std::vector<T> amplitudes, u0, u_prev0;

  std::int64_t points() const { return shape[0] * shape[1] * shape[2]; }

  tti::TtiDemoInput<T> input() const {
    tti::TtiDemoInput<T> in;
    in.shape = shape;
    in.spacing = spacing;
    in.dt = dt;
    in.nt = nt;
    in.material = {vp, b, epsilon, eta, f, theta, phi, damping};
    in.source_position = source_position;
    in.source_amplitudes = amplitudes;
    in.initial_u = u0;
    in.initial_u_prev = u_prev0;
    return in;
  }
};

// The CLI demo's constant materials, a 15 Hz Ricker source near the centre (off the grid points).
template <class T>
TtiDemoProblem<T> constant_tti_problem(std::array<std::int64_t, 3> shape, std::int64_t nt,
                                       int order = 8) {
  TtiDemoProblem<T> p;
  p.shape = shape;
  p.nt = nt;
  p.vp = {T(1500)};
  p.b = {T(1)};
  p.epsilon = {T(0.2)};
  p.eta = {T(0.4)};
  p.f = {T(0.85)};
  p.theta = {T(0.5)};
  p.phi = {T(0.3)};
  p.damping = {T(0.001)};
  for (int d = 0; d < 3; ++d)
    p.source_position[d] = (static_cast<double>(shape[d] / 2) + 0.37 + 0.11 * d) * p.spacing[d];
  p.dt = 0.9 * tti::tti_demo_dt_limit(p.input(), order);
  p.amplitudes = tti::ricker_wavelet<T>(15.0, p.dt, nt);
  return p;
}

// Random materials per point (smooth enough to be plausible, rough enough to test every term),
// random initial fields when `random_state`.
template <class T>
TtiDemoProblem<T> random_tti_problem(std::array<std::int64_t, 3> shape, std::int64_t nt, int order,
                                     unsigned seed, bool random_state = true) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  TtiDemoProblem<T> p;
  p.shape = shape;
  p.nt = nt;
  p.spacing = {10, 12, 8};
  const std::int64_t n = p.points();
  auto fill = [&](std::vector<T>& v, double lo, double hi) {
    v.resize(static_cast<std::size_t>(n));
    for (auto& x : v) x = static_cast<T>(lo + (hi - lo) * unit(rng));
  };
  fill(p.vp, 1500, 3000);
  fill(p.b, 0.4, 1.0);
  fill(p.epsilon, 0.0, 0.3);
  fill(p.eta, 0.0, 0.6);
  fill(p.f, 0.7, 0.9);
  fill(p.theta, -1.5, 1.5);
  fill(p.phi, -3.0, 3.0);
  fill(p.damping, 0.0, 0.02);
  for (int d = 0; d < 3; ++d)
    p.source_position[d] =
        (0.3 + 0.4 * unit(rng)) * static_cast<double>(shape[d] - 1) * p.spacing[d];
  p.dt = 0.9 * tti::tti_demo_dt_limit(p.input(), order);
  p.amplitudes = tti::ricker_wavelet<T>(30.0, p.dt, nt, 0.01);
  if (random_state) {
    fill(p.u0, -1, 1);
    fill(p.u_prev0, -1, 1);
  }
  return p;
}

}  // namespace sciproxy::test
