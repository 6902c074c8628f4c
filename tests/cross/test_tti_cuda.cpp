// cuda backend of the coupled P/M TTI propagator against the cpu backend: random heterogeneous,
// tilted, variable-density models, every space order, with and without free surface, three
// shots, odd and even step counts; receivers, the final P and M, and the adjoint's source
// traces, float and double; the dot-product test of the cuda backend alone; a bad device index.
// Every test skips without a GPU. Tolerances (relative L2): 1e-12 in float64; float32 1e-5 for
// traces and 1e-4 for the final fields (the same arithmetic; FMA contraction differs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/tti.hpp"

using namespace sciproxy;
using namespace sciproxy::wave;

namespace {

const Device kCpu{Backend::cpu, 0, false};
const Device kCuda{Backend::cuda, 0, false};

class TtiCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
  }
};

template <class T>
struct Problem {
  Grid grid{3, {1, 1, 1}, {10, 10, 10}};
  std::vector<T> vp, b, eps, delta, theta, phi, f, amplitudes, data;
  std::vector<std::int64_t> sources, receivers;
  TtiInput<T> in;
  TtiOptions opt;
};

template <class T>
void random_problem(Problem<T>& p, int order, bool free_surface, std::int64_t nt,
                    std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  p.grid.shape = {std::int64_t(12 + 6 * u(rng)), std::int64_t(13 + 6 * u(rng)),
                  std::int64_t(30 + 20 * u(rng))};
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
  const std::int64_t nshots = 3, nsources = 2, nreceivers = 4;
  auto add_location = [&](std::vector<std::int64_t>& to) {
    for (int d = 0; d < 3; ++d) to.push_back(std::int64_t(u(rng) * p.grid.shape[d]));
  };
  for (std::int64_t k = 0; k < nshots * nsources; ++k) add_location(p.sources);
  for (std::int64_t k = 0; k < nshots * nreceivers; ++k) add_location(p.receivers);
  p.sources[0] = 0;
  p.receivers[3] = 0;
  p.sources[3] = p.sources[0];  // two sources of shot 0 in one cell
  p.sources[4] = p.sources[1];
  p.sources[5] = p.sources[2];
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

template <class T>
void compare(int order, bool free_surface, std::int64_t nt) {
  Problem<T> p;
  random_problem(p, order, free_surface, nt, 300 + order + nt);
  const double trace_tol = sizeof(T) == 4 ? 1e-5 : 1e-12;
  const double field_tol = sizeof(T) == 4 ? 1e-4 : 1e-12;
  const auto cpu = tti_forward<T>(kCpu, p.in, p.opt);
  Timers timers;
  const auto gpu = tti_forward<T>(kCuda, p.in, p.opt, nullptr, &timers);
  EXPECT_LT(rel_l2(gpu.receiver_amplitudes, cpu.receiver_amplitudes), trace_tol);
  EXPECT_LT(rel_l2(gpu.state.p, cpu.state.p), field_tol);
  EXPECT_LT(rel_l2(gpu.state.p_prev, cpu.state.p_prev), field_tol);
  EXPECT_LT(rel_l2(gpu.state.m, cpu.state.m), field_tol);
  EXPECT_LT(rel_l2(gpu.state.m_prev, cpu.state.m_prev), field_tol);
  EXPECT_NE(timers.find("tti/forward/steps"), nullptr) << timers.table();
  const auto cpu_adj = tti_adjoint<T>(kCpu, p.in, std::span<const T>(p.data), p.opt);
  const auto gpu_adj = tti_adjoint<T>(kCuda, p.in, std::span<const T>(p.data), p.opt);
  EXPECT_LT(rel_l2(gpu_adj.source_amplitudes, cpu_adj.source_amplitudes), trace_tol);
}

TEST_F(TtiCuda, MatchesCpuOrder8FreeSurface) {
  compare<double>(8, true, 30);
  compare<float>(8, true, 31);
}
TEST_F(TtiCuda, MatchesCpuOrder8Sponge) {
  compare<double>(8, false, 31);
  compare<float>(8, false, 30);
}
TEST_F(TtiCuda, MatchesCpuOtherOrders) {
  for (int order : {4, 12, 16}) {
    compare<double>(order, order != 12, 21);
    compare<float>(order, order == 12, 20);
  }
}

TEST_F(TtiCuda, DotProduct) {
  Problem<double> p;
  random_problem(p, 8, true, 40, 9);
  const auto forward = tti_forward<double>(kCuda, p.in, p.opt);
  const auto adjoint = tti_adjoint<double>(kCuda, p.in, std::span<const double>(p.data), p.opt);
  double lhs = 0, rhs = 0;
  for (std::size_t i = 0; i < p.data.size(); ++i) lhs += forward.receiver_amplitudes[i] * p.data[i];
  for (std::size_t i = 0; i < p.amplitudes.size(); ++i)
    rhs += p.amplitudes[i] * adjoint.source_amplitudes[i];
  EXPECT_GT(std::abs(lhs), 0);
  EXPECT_LE(std::abs(lhs - rhs), 1e-10 * std::abs(lhs)) << lhs << " vs " << rhs;
}

TEST_F(TtiCuda, BadDeviceIndex) {
  Problem<double> p;
  random_problem(p, 8, false, 5, 1);
  EXPECT_THROW(tti_forward<double>(Device{Backend::cuda, 999, false}, p.in, p.opt),
               DeviceUnavailable);
}

}  // namespace
