// The coupled P/M TTI propagator on the backend under test (tests/common/backend_test.hpp: cpu,
// or cuda with the label gpu) against the reference: random heterogeneous, tilted,
// variable-density models, every space order, with and without free surface, uneven sponges,
// several shots (on cuda three, two sources of shot 0 in one cell), odd and even step counts;
// receivers, the final P and M, the adjoint's source traces and a run continued from a state, in
// float and double; the dot-product test of the backend alone; thread counts; on cuda also the
// agreement with the cpu backend (the same arithmetic), the CUDA-event timers and a bad device;
// forward and adjoint as recorded calls verified against the reference.
// Tolerances: src/tti/case.hpp (tti_tolerance, tti_state_tolerance).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/backend_test.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/recording.hpp"
#include "sciproxy/tti.hpp"
#include "tti/case.hpp"
#include "tti_problems.hpp"

using namespace sciproxy;
using namespace sciproxy::tti;
using test::kBackend;
using test::kReference;
using test::kTestingCuda;

namespace {

template <class T>
using Problem = test_problems::TtiProblem<T>;
using test_problems::rel_l2;

const Device kCpu{Backend::cpu, 0, false};

// cpu: small grids, 9-13 x 10-14 x 11-19 cells, 2 shots of 2 sources and 3 receivers. cuda:
// longer along the contiguous axis (30-50 cells), so that a CUDA block row is partly filled; 3
// shots of 2 sources and 4 receivers.
constexpr test_problems::TtiProblemSize kSize =
    kTestingCuda ? test_problems::TtiProblemSize{{12, 13, 30}, {6, 6, 20}, 3, 2, 4}
                 : test_problems::TtiProblemSize{{9, 10, 11}, {4, 4, 8}, 2, 2, 3};
constexpr std::uint64_t kSeed = kTestingCuda ? 300 : 100;

template <class T>
void random_problem(Problem<T>& p, int order, bool free_surface, std::int64_t nt,
                    std::uint64_t seed) {
  test_problems::random_problem(p, order, free_surface, nt, seed, kSize);
  // The two sources of shot 0 in one cell: cuda injects them in order, without atomics.
  if constexpr (kTestingCuda) std::copy_n(p.sources.begin(), 3, p.sources.begin() + 3);
}

struct Case {
  int order;
  bool free_surface;
  std::int64_t nt;
};

template <class T>
void expect_state_close(const TtiState<T>& got, const TtiState<T>& want, double tol,
                        const std::string& what) {
  EXPECT_LT(rel_l2(got.p, want.p), tol) << what << " p";
  EXPECT_LT(rel_l2(got.p_prev, want.p_prev), tol) << what << " p_prev";
  EXPECT_LT(rel_l2(got.m, want.m), tol) << what << " m";
  EXPECT_LT(rel_l2(got.m_prev, want.m_prev), tol) << what << " m_prev";
}

template <class T>
void compare(const Case& c) {
  Problem<T> p;
  random_problem(p, c.order, c.free_surface, c.nt, kSeed + c.order + c.nt);
  const double trace_tol = tti_tolerance(precision_of<T>()).rel_l2;
  const double state_tol = tti_state_tolerance(precision_of<T>()).rel_l2;
  const std::span<const T> data(p.data);

  const auto ref = tti_forward<T>(kReference, p.in, p.opt);
  Timers timers;
  const auto got = tti_forward<T>(kBackend, p.in, p.opt, nullptr, &timers);
  EXPECT_LT(rel_l2(got.receiver_amplitudes, ref.receiver_amplitudes), trace_tol);
  expect_state_close(got.state, ref.state, state_tol, "final state");
  if constexpr (kTestingCuda) {
    EXPECT_NE(timers.find("tti/forward/steps"), nullptr) << timers.table();
  }

  const auto ref_adj = tti_adjoint<T>(kReference, p.in, data, p.opt);
  const auto got_adj = tti_adjoint<T>(kBackend, p.in, data, p.opt);
  EXPECT_LT(rel_l2(got_adj.source_amplitudes, ref_adj.source_amplitudes), trace_tol);

  // Continuing from a state: the backend from the reference's final state.
  const auto ref2 = tti_forward<T>(kReference, p.in, p.opt, &ref.state);
  const auto got2 = tti_forward<T>(kBackend, p.in, p.opt, &ref.state);
  EXPECT_LT(rel_l2(got2.receiver_amplitudes, ref2.receiver_amplitudes), state_tol);

  if constexpr (kTestingCuda) {  // and against the cpu backend: the same per-point arithmetic
    const auto cpu = tti_forward<T>(kCpu, p.in, p.opt);
    EXPECT_LT(rel_l2(got.receiver_amplitudes, cpu.receiver_amplitudes), trace_tol);
    expect_state_close(got.state, cpu.state, state_tol, "against cpu");
    const auto cpu_adj = tti_adjoint<T>(kCpu, p.in, data, p.opt);
    EXPECT_LT(rel_l2(got_adj.source_amplitudes, cpu_adj.source_amplitudes), trace_tol);
  }
}

class TtiBackend : public test::BackendTest, public ::testing::WithParamInterface<Case> {};

TEST_P(TtiBackend, MatchesReferenceDouble) {
  compare<double>(GetParam());
}
TEST_P(TtiBackend, MatchesReferenceFloat) {
  compare<float>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cases, TtiBackend,
                         ::testing::Values(Case{8, true, 30}, Case{8, false, 31}, Case{8, true, 31},
                                           Case{8, false, 30}, Case{4, true, 25}, Case{4, true, 21},
                                           Case{4, false, 20}, Case{12, false, 24},
                                           Case{12, false, 21}, Case{12, true, 20},
                                           Case{16, true, 21}, Case{16, false, 20}),
                         [](const auto& info) {
                           return "order" + std::to_string(info.param.order) +
                                  (info.param.free_surface ? "_free_surface" : "_sponge") + "_nt" +
                                  std::to_string(info.param.nt);
                         });

class TtiBackendAlone : public test::BackendTest {};

// The backend's own adjoint identity (float64).
TEST_F(TtiBackendAlone, DotProduct) {
  Problem<double> p;
  random_problem(p, 8, true, 40, 9);
  const auto forward = tti_forward<double>(kBackend, p.in, p.opt);
  const auto adjoint = tti_adjoint<double>(kBackend, p.in, std::span<const double>(p.data), p.opt);
  double lhs = 0, rhs = 0;
  for (std::size_t i = 0; i < p.data.size(); ++i) lhs += forward.receiver_amplitudes[i] * p.data[i];
  for (std::size_t i = 0; i < p.amplitudes.size(); ++i)
    rhs += p.amplitudes[i] * adjoint.source_amplitudes[i];
  EXPECT_GT(std::abs(lhs), 0);
  EXPECT_LE(std::abs(lhs - rhs), tti_adjoint_identity_tolerance() * std::abs(lhs))
      << lhs << " vs " << rhs;
}

// Threads: the result does not depend on the thread count (static blocks, no reductions).
TEST_F(TtiBackendAlone, ThreadCountDoesNotChangeTheResult) {
  Problem<double> p;
  random_problem(p, 8, false, 20, 4);
  p.opt.nparallel = 1;
  const auto one = tti_forward<double>(kBackend, p.in, p.opt);
  p.opt.nparallel = 0;
  const auto all = tti_forward<double>(kBackend, p.in, p.opt);
  EXPECT_EQ(one.receiver_amplitudes, all.receiver_amplitudes);
  EXPECT_EQ(one.state.p, all.state.p);
}

// Under a Recording with verification, each call reports its work and timers and compares its
// outputs with the reference's rerun (case.hpp's tolerances).
TEST_F(TtiBackendAlone, RecordingVerifiesAgainstReference) {
  Problem<double> p;
  random_problem(p, 8, true, 12, 21);
  Recording recording({.verify = true});
  (void)tti_forward<double>(kBackend, p.in, p.opt);
  (void)tti_adjoint<double>(kBackend, p.in, std::span<const double>(p.data), p.opt);
  ASSERT_EQ(recording.reports().size(), 2u);
  EXPECT_EQ(recording.reports()[0].kernel, "tti_forward");
  EXPECT_EQ(recording.reports()[1].kernel, "tti_adjoint");
  for (const auto& report : recording.reports()) {
    EXPECT_EQ(report.device, kBackend);
    EXPECT_GT(report.work.points, 0);
    ASSERT_TRUE(report.verification.has_value()) << report.kernel;
    EXPECT_TRUE(report.verification->pass) << report.verification->summary();
  }
  EXPECT_EQ(recording.reports()[0].checks.size(), 5u);  // receivers, p, p_prev, m, m_prev
  EXPECT_NE(recording.reports()[0].timers.find("tti/setup"), nullptr)
      << recording.reports()[0].timers.table();
  EXPECT_TRUE(recording.passed());
}

TEST_F(TtiBackendAlone, BadDeviceIndex) {
  if constexpr (!kTestingCuda) GTEST_SKIP() << "a device index means something on cuda only";
  Problem<double> p;
  random_problem(p, 8, false, 5, 1);
  EXPECT_THROW(tti_forward<double>(Device{Backend::cuda, 999, false}, p.in, p.opt),
               DeviceUnavailable);
}

}  // namespace

// The work model's working set is the 20 padded arrays of one shot (tti/api.cpp): the state's
// padded fields give its size.
TEST_F(TtiBackendAlone, WorkModelDeclaresTheArraysOfOneShot) {
  Problem<double> p;
  random_problem(p, 8, false, 6, 5);
  const auto out = tti_forward<double>(kBackend, p.in, p.opt);
  const double padded = double(out.state.p.size()) / double(p.in.nshots);
  EXPECT_DOUBLE_EQ(out.work.working_set_bytes, 20.0 * sizeof(double) * padded);
  EXPECT_GT(out.work.bytes, out.work.working_set_bytes);
}
