// cpu backend of the coupled P/M TTI propagator against the reference: random heterogeneous,
// tilted, variable-density models, every space order, with and without free surface, uneven
// sponges, two shots, odd and even step counts; receivers, the final P and M, and the adjoint's
// source traces; float and double; and the dot-product test of the cpu backend alone.
// Tolerances (relative L2): 1e-12 in float64 (the same arithmetic in another order; the
// reference sums in double); float32 1e-5 for traces and 1e-4 for the final fields (rounding
// grows over the steps, as for the scalar propagator).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "sciproxy/tti.hpp"
#include "tti_problems.hpp"

using namespace sciproxy;
using namespace sciproxy::tti;

namespace {

template <class T>
using Problem = test_problems::TtiProblem<T>;
using test_problems::rel_l2;

const Device kReference{Backend::reference, 0, false};
const Device kCpu{Backend::cpu, 0, false};

// Small grids: 9-13 x 10-14 x 11-19 cells, 2 shots of 2 sources and 3 receivers.
constexpr test_problems::TtiProblemSize kSize{{9, 10, 11}, {4, 4, 8}, 2, 2, 3};

template <class T>
void random_problem(Problem<T>& p, int order, bool free_surface, std::int64_t nt,
                    std::uint64_t seed) {
  test_problems::random_problem(p, order, free_surface, nt, seed, kSize);
}

struct Case {
  int order;
  bool free_surface;
  std::int64_t nt;
};

template <class T>
void compare(const Case& c) {
  Problem<T> p;
  random_problem(p, c.order, c.free_surface, c.nt, 100 + c.order + c.nt);
  const double trace_tol = sizeof(T) == 4 ? 1e-5 : 1e-12;
  const double field_tol = sizeof(T) == 4 ? 1e-4 : 1e-12;
  const auto ref = tti_forward<T>(kReference, p.in, p.opt);
  const auto cpu = tti_forward<T>(kCpu, p.in, p.opt);
  EXPECT_LT(rel_l2(cpu.receiver_amplitudes, ref.receiver_amplitudes), trace_tol);
  EXPECT_LT(rel_l2(cpu.state.p, ref.state.p), field_tol);
  EXPECT_LT(rel_l2(cpu.state.p_prev, ref.state.p_prev), field_tol);
  EXPECT_LT(rel_l2(cpu.state.m, ref.state.m), field_tol);
  EXPECT_LT(rel_l2(cpu.state.m_prev, ref.state.m_prev), field_tol);
  const auto ref_adj = tti_adjoint<T>(kReference, p.in, std::span<const T>(p.data), p.opt);
  const auto cpu_adj = tti_adjoint<T>(kCpu, p.in, std::span<const T>(p.data), p.opt);
  EXPECT_LT(rel_l2(cpu_adj.source_amplitudes, ref_adj.source_amplitudes), trace_tol);
  // Continuing from a state: the cpu backend from the reference's final state.
  const auto ref2 = tti_forward<T>(kReference, p.in, p.opt, &ref.state);
  const auto cpu2 = tti_forward<T>(kCpu, p.in, p.opt, &ref.state);
  EXPECT_LT(rel_l2(cpu2.receiver_amplitudes, ref2.receiver_amplitudes), field_tol);
}

class TtiCpu : public ::testing::TestWithParam<Case> {};

TEST_P(TtiCpu, MatchesReferenceDouble) { compare<double>(GetParam()); }
TEST_P(TtiCpu, MatchesReferenceFloat) { compare<float>(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Cases, TtiCpu,
                         ::testing::Values(Case{8, true, 30}, Case{8, false, 31}, Case{4, true, 25},
                                           Case{12, false, 24}, Case{16, true, 21}),
                         [](const auto& info) {
                           return "order" + std::to_string(info.param.order) +
                                  (info.param.free_surface ? "_free_surface" : "_sponge") + "_nt" +
                                  std::to_string(info.param.nt);
                         });

// The cpu backend's own adjoint identity (float64): 1e-10 relative.
TEST(TtiCpu, DotProduct) {
  Problem<double> p;
  random_problem(p, 8, true, 40, 9);
  const auto forward = tti_forward<double>(kCpu, p.in, p.opt);
  const auto adjoint = tti_adjoint<double>(kCpu, p.in, std::span<const double>(p.data), p.opt);
  double lhs = 0, rhs = 0;
  for (std::size_t i = 0; i < p.data.size(); ++i) lhs += forward.receiver_amplitudes[i] * p.data[i];
  for (std::size_t i = 0; i < p.amplitudes.size(); ++i)
    rhs += p.amplitudes[i] * adjoint.source_amplitudes[i];
  EXPECT_GT(std::abs(lhs), 0);
  EXPECT_LE(std::abs(lhs - rhs), 1e-10 * std::abs(lhs)) << lhs << " vs " << rhs;
}

// Threads: the result does not depend on the thread count (static blocks, no reductions).
TEST(TtiCpu, ThreadCountDoesNotChangeTheResult) {
  Problem<double> p;
  random_problem(p, 8, false, 20, 4);
  p.opt.nparallel = 1;
  const auto one = tti_forward<double>(kCpu, p.in, p.opt);
  p.opt.nparallel = 0;
  const auto all = tti_forward<double>(kCpu, p.in, p.opt);
  EXPECT_EQ(one.receiver_amplitudes, all.receiver_amplitudes);
  EXPECT_EQ(one.state.p, all.state.p);
}

}  // namespace
