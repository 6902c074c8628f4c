// Born modelling, cuda backend against the cpu backend, on the problems of the cpu-vs-reference
// Born test: scattered and background receivers, both final states (u, u^{t-1}, psi, zeta), the
// migration image and the source gradient (the coupled adjoint), in float64 and float32, over
// dimensions, accuracies, PML layouts, resampling, odd nt and per-shot models; a run continued
// from a non-zero state; the timer regions; a bad device index. Every test skips without a GPU.
// Tolerances (relative L2), as cpu against the reference: float64 1e-11 (the same formulas, sums
// in a different order, FMA contraction); float32 2e-4 (a few hundred steps of float32 rounding).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "scalar_born_problems.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/wave.hpp"

using namespace sciproxy;
using namespace sciproxy::wave;
using namespace born_test;

namespace {

const Device kCpu{Backend::cpu, 0, false};
const Device kCuda{Backend::cuda, 0, false};

class BornCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
  }
};

struct Case {
  const char* name;
  int ndim, accuracy;
  std::array<std::int64_t, 3> shape;
  std::int64_t nshots, nmodels, nt;
  double dt_over_cfl;
  std::array<std::int64_t, 6> pml;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class BornCudaCases : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
  }
};

ScalarOptions options(const Case& c) {
  ScalarOptions opt;
  opt.accuracy = c.accuracy;
  opt.pml_width = c.pml;
  opt.pml_freq = 25;
  return opt;
}

// Relative L2 of every field of a state (those of unused dimensions are empty).
template <class T>
void expect_states_close(const ScalarState<T>& got, const ScalarState<T>& want, int ndim,
                         double tol, const std::string& what) {
  ASSERT_EQ(got.wavefield.size(), want.wavefield.size()) << what;
  EXPECT_LT(rel_l2(got.wavefield, want.wavefield), tol) << what << " wavefield";
  EXPECT_LT(rel_l2(got.previous_wavefield, want.previous_wavefield), tol)
      << what << " previous_wavefield";
  for (int d = 0; d < ndim; ++d) {
    ASSERT_EQ(got.psi[d].size(), want.psi[d].size()) << what << " psi " << d;
    ASSERT_EQ(got.zeta[d].size(), want.zeta[d].size()) << what << " zeta " << d;
    EXPECT_LT(rel_l2(got.psi[d], want.psi[d]), tol) << what << " psi " << d;
    EXPECT_LT(rel_l2(got.zeta[d], want.zeta[d]), tol) << what << " zeta " << d;
  }
}

template <class T>
void expect_born_close(const ScalarBornOutput<T>& got, const ScalarBornOutput<T>& want, int ndim,
                       double tol, const std::string& what) {
  ASSERT_EQ(got.receiver_amplitudes.size(), want.receiver_amplitudes.size()) << what;
  ASSERT_EQ(got.bg_receiver_amplitudes.size(), want.bg_receiver_amplitudes.size()) << what;
  EXPECT_LT(rel_l2(got.receiver_amplitudes, want.receiver_amplitudes), tol) << what << " receivers";
  EXPECT_LT(rel_l2(got.bg_receiver_amplitudes, want.bg_receiver_amplitudes), tol)
      << what << " bg receivers";
  expect_states_close(got.state, want.state, ndim, tol, what + " state");
  expect_states_close(got.scattered_state, want.scattered_state, ndim, tol,
                      what + " scattered_state");
}

template <class T>
void compare(const Case& c, double tol) {
  const auto p64 =
      random_born(c.ndim, c.shape, c.nshots, 2, 5, 3, c.nt, c.dt_over_cfl, 7, c.nmodels);
  const auto p = p64.template as<T>();
  const ScalarOptions opt = options(c);
  const auto cpu = scalar_born(kCpu, p.born(), opt);
  const auto gpu = scalar_born(kCuda, p.born(), opt);
  expect_born_close(gpu, cpu, c.ndim, tol, c.name);

  const auto d = random_vector<T>(cpu.receiver_amplitudes.size(), 8);
  const auto d_bg = random_vector<T>(cpu.bg_receiver_amplitudes.size(), 9);
  const auto gcpu = scalar_born_gradient<T>(kCpu, p.born(), opt, d, d_bg, true);
  const auto ggpu = scalar_born_gradient<T>(kCuda, p.born(), opt, d, d_bg, true);
  ASSERT_EQ(ggpu.scatter.size(), gcpu.scatter.size()) << c.name;
  ASSERT_EQ(ggpu.source_amplitudes.size(), gcpu.source_amplitudes.size()) << c.name;
  EXPECT_LT(rel_l2(ggpu.scatter, gcpu.scatter), tol) << c.name << " image";
  EXPECT_LT(rel_l2(ggpu.source_amplitudes, gcpu.source_amplitudes), tol)
      << c.name << " source gradient";

  // Only the background receivers' data gradient (lambda_sc stays zero): the background field's
  // exchange on its own.
  const std::vector<T> zero(d.size(), T(0));
  const auto bcpu = scalar_born_gradient<T>(kCpu, p.born(), opt, zero, d_bg, true);
  const auto bgpu = scalar_born_gradient<T>(kCuda, p.born(), opt, zero, d_bg, true);
  EXPECT_LT(rel_l2(bgpu.source_amplitudes, bcpu.source_amplitudes), tol)
      << c.name << " bg-only source gradient";
}

TEST_P(BornCudaCases, Float64MatchesCpu) {
  compare<double>(GetParam(), 1e-11);
}
TEST_P(BornCudaCases, Float32MatchesCpu) {
  compare<float>(GetParam(), 2e-4);
}

const std::array<std::int64_t, 6> kPml = {5, 5, 5, 5, 5, 5};
INSTANTIATE_TEST_SUITE_P(
    Cases, BornCudaCases,
    ::testing::Values(Case{"1d_a4", 1, 4, {300, 1, 1}, 2, 1, 60, 0.9, kPml},
                      Case{"1d_a8_resampled", 1, 8, {200, 1, 1}, 1, 1, 20, 2.5, kPml},
                      Case{"2d_a2", 2, 2, {20, 40, 1}, 2, 1, 50, 0.9, kPml},
                      Case{"2d_a8_odd_nt", 2, 8, {24, 37, 1}, 1, 1, 41, 0.9, kPml},
                      Case{"2d_a4_per_side", 2, 4, {22, 35, 1}, 2, 2, 40, 0.9, {0, 7, 3, 0, 0, 0}},
                      Case{"2d_a6_no_pml", 2, 6, {20, 30, 1}, 1, 1, 30, 0.9, {0, 0, 0, 0, 0, 0}},
                      Case{"3d_a4", 3, 4, {12, 14, 40}, 2, 1, 20, 0.9, {4, 4, 4, 4, 4, 4}},
                      Case{
                          "3d_a8_resampled", 3, 8, {10, 12, 35}, 1, 1, 8, 2.2, {3, 4, 5, 3, 4, 5}}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// A second call continuing from the states of a first (non-zero u, u^{t-1}, psi and zeta of both
// fields, in the PML too): every buffer of both fields goes up and comes back.
TEST_F(BornCuda, ContinuesFromNonZeroStates) {
  const Case c{"2d_a4_continued", 2, 4, {22, 31, 1}, 3, 3, 30, 0.9, {4, 6, 5, 3, 0, 0}};
  const auto p =
      random_born(c.ndim, c.shape, c.nshots, 2, 5, 3, c.nt, c.dt_over_cfl, 11, c.nmodels);
  const ScalarOptions opt = options(c);
  const auto first = scalar_born(kCpu, p.born(), opt);
  const auto cpu = scalar_born(kCpu, p.born(), opt, &first.state, &first.scattered_state);
  const auto gpu = scalar_born(kCuda, p.born(), opt, &first.state, &first.scattered_state);
  expect_born_close(gpu, cpu, c.ndim, 1e-11, c.name);
}

TEST_F(BornCuda, RecordsTimerRegions) {
  const Case c{"2d_a4_timed", 2, 4, {16, 20, 1}, 2, 1, 12, 0.9, kPml};
  const auto p = random_born(c.ndim, c.shape, c.nshots, 2, 5, 3, c.nt, c.dt_over_cfl, 5, c.nmodels);
  const ScalarOptions opt = options(c);
  Timers timers;
  const auto out = scalar_born<double>(kCuda, p.born(), opt, nullptr, nullptr, &timers);
  const auto d = random_vector<double>(out.receiver_amplitudes.size(), 3);
  (void)scalar_born_gradient<double>(kCuda, p.born(), opt, d, {}, true, nullptr, &timers);
  for (const char* region : {"upload", "steps", "download"}) {
    EXPECT_NE(timers.find(std::string("scalar_born/forward/") + region), nullptr)
        << "forward " << region;
    EXPECT_NE(timers.find(std::string("scalar_born_gradient/born_backward/") + region), nullptr)
        << "backward " << region;
  }
}

TEST_F(BornCuda, BadDeviceIndexThrows) {
  const Case c{"1d", 1, 4, {50, 1, 1}, 1, 1, 5, 0.9, kPml};
  const auto p = random_born(c.ndim, c.shape, c.nshots, 1, 2, 2, c.nt, c.dt_over_cfl, 3, c.nmodels);
  const ScalarOptions opt = options(c);
  const Device bad{Backend::cuda, cuda_device_count() + 7, false};
  EXPECT_THROW(scalar_born(bad, p.born(), opt), DeviceUnavailable);
  const std::vector<double> d(static_cast<std::size_t>(c.nshots * 2 * c.nt), 1.0);
  EXPECT_THROW(scalar_born_gradient<double>(bad, p.born(), opt, d, {}, true), DeviceUnavailable);
}

}  // namespace
