// cuda backend of the coupled P/M TTI propagator against the cpu backend: random heterogeneous,
// tilted, variable-density models, every space order, with and without free surface, three
// shots, odd and even step counts; receivers, the final P and M, and the adjoint's source
// traces, float and double; the dot-product test of the cuda backend alone; a bad device index.
// Every test skips without a GPU. Tolerances (relative L2): 1e-12 in float64; float32 1e-5 for
// traces and 1e-4 for the final fields (the same arithmetic; FMA contraction differs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/tti.hpp"
#include "tti_problems.hpp"

using namespace sciproxy;
using namespace sciproxy::tti;

namespace {

template <class T>
using Problem = test_problems::TtiProblem<T>;
using test_problems::rel_l2;

const Device kCpu{Backend::cpu, 0, false};
const Device kCuda{Backend::cuda, 0, false};

class TtiCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
  }
};

// Larger along the contiguous axis (30-50 cells), so that a CUDA block row is partly filled;
// 3 shots of 2 sources and 4 receivers, the two sources of shot 0 in one cell.
constexpr test_problems::TtiProblemSize kSize{{12, 13, 30}, {6, 6, 20}, 3, 2, 4};

template <class T>
void random_problem(Problem<T>& p, int order, bool free_surface, std::int64_t nt,
                    std::uint64_t seed) {
  test_problems::random_problem(p, order, free_surface, nt, seed, kSize);
  std::copy_n(p.sources.begin(), 3, p.sources.begin() + 3);  // two sources of shot 0 in one cell
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
