// Born modelling (scalar_born, scalar_born_gradient) on the backend under test
// (tests/common/backend_test.hpp: cpu, or cuda with the label gpu) against the reference:
// scattered and background receivers, both final states (u, u^{t-1}, psi, zeta), the migration
// image and the source gradient (the coupled adjoint; also driven by the background receivers
// alone), in float64 and float32, over dimensions, accuracies, PML layouts, resampling, odd nt,
// per-shot models and thread counts; a run continued from non-zero states. On cuda also: the
// agreement with the cpu backend, the CUDA-event timer regions and a bad device index.
// Tolerances: src/wave/case.hpp's scalar_tolerance(born) for the traces, the image and the
// source gradient; for the final states the same bound, tighter than scalar_state_tolerance
// (these runs are short; the earlier tests held the states to 1e-11 in float64 and 2e-4 in
// float32).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/backend_test.hpp"
#include "scalar_born_problems.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/wave.hpp"
#include "wave/case.hpp"

using namespace sciproxy;
using namespace sciproxy::wave;
using namespace born_test;
using test::kBackend;
using test::kReference;
using test::kTestingCuda;

namespace {

const Device kCpu{Backend::cpu, 0, false};

struct Case {
  const char* name;
  int ndim, accuracy;
  std::array<std::int64_t, 3> shape;
  std::int64_t nshots, nmodels, nt;
  double dt_over_cfl;
  std::array<std::int64_t, 6> pml;
  int threads = 0;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

ScalarOptions options(const Case& c) {
  ScalarOptions opt;
  opt.accuracy = c.accuracy;
  opt.pml_width = c.pml;
  opt.pml_freq = 25;
  opt.nparallel = c.threads;
  return opt;
}

template <class T>
double tolerance() {
  return scalar_tolerance(precision_of<T>(), true).rel_l2;
}

// Relative L2 of every field of a state (those of unused dimensions are empty).
template <class T>
void expect_states_close(const ScalarState<T>& got, const ScalarState<T>& want, int ndim,
                         const std::string& what) {
  const double tol = tolerance<T>();
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
                       const std::string& what) {
  const double tol = tolerance<T>();
  ASSERT_EQ(got.receiver_amplitudes.size(), want.receiver_amplitudes.size()) << what;
  ASSERT_EQ(got.bg_receiver_amplitudes.size(), want.bg_receiver_amplitudes.size()) << what;
  EXPECT_LT(rel_l2(got.receiver_amplitudes, want.receiver_amplitudes), tol) << what << " receivers";
  EXPECT_LT(rel_l2(got.bg_receiver_amplitudes, want.bg_receiver_amplitudes), tol)
      << what << " bg receivers";
  expect_states_close(got.state, want.state, ndim, what + " state");
  expect_states_close(got.scattered_state, want.scattered_state, ndim, what + " scattered_state");
}

template <class T>
void expect_gradients_close(const ScalarBornGradient<T>& got, const ScalarBornGradient<T>& want,
                            const std::string& what) {
  const double tol = tolerance<T>();
  ASSERT_EQ(got.scatter.size(), want.scatter.size()) << what;
  ASSERT_EQ(got.source_amplitudes.size(), want.source_amplitudes.size()) << what;
  EXPECT_LT(rel_l2(got.scatter, want.scatter), tol) << what << " image";
  EXPECT_LT(rel_l2(got.source_amplitudes, want.source_amplitudes), tol)
      << what << " source gradient";
}

// The backend under test against `expected` (the reference's results, or the cpu backend's).
template <class T>
void compare_with(const Device& expected, const Case& c) {
  const std::string what = c.name + std::string(expected == kCpu ? " (cpu)" : "");
  const auto p64 =
      random_born(c.ndim, c.shape, c.nshots, 2, 5, 3, c.nt, c.dt_over_cfl, 7, c.nmodels);
  const auto p = p64.template as<T>();
  const ScalarOptions opt = options(c);
  const auto want = scalar_born(expected, p.born(), opt);
  const auto got = scalar_born(kBackend, p.born(), opt);
  expect_born_close(got, want, c.ndim, what);

  const auto d = random_vector<T>(want.receiver_amplitudes.size(), 8);
  const auto d_bg = random_vector<T>(want.bg_receiver_amplitudes.size(), 9);
  expect_gradients_close(scalar_born_gradient<T>(kBackend, p.born(), opt, d, d_bg, true),
                         scalar_born_gradient<T>(expected, p.born(), opt, d, d_bg, true), what);

  // Only the background receivers' data gradient (lambda_sc stays zero): the background field's
  // exchange on its own.
  const std::vector<T> zero(d.size(), T(0));
  const auto bwant = scalar_born_gradient<T>(expected, p.born(), opt, zero, d_bg, true);
  const auto bgot = scalar_born_gradient<T>(kBackend, p.born(), opt, zero, d_bg, true);
  EXPECT_LT(rel_l2(bgot.source_amplitudes, bwant.source_amplitudes), tolerance<T>())
      << what << " bg-only source gradient";
}

template <class T>
void compare(const Case& c) {
  compare_with<T>(kReference, c);
  if constexpr (kTestingCuda) compare_with<T>(kCpu, c);
}

class WaveBorn : public test::BackendTest {};
class WaveBornCases : public test::BackendTest, public ::testing::WithParamInterface<Case> {};

}  // namespace

TEST_P(WaveBornCases, Float64MatchesReference) {
  compare<double>(GetParam());
}
TEST_P(WaveBornCases, Float32MatchesReference) {
  compare<float>(GetParam());
}

const std::array<std::int64_t, 6> kPml = {5, 5, 5, 5, 5, 5};
INSTANTIATE_TEST_SUITE_P(
    Cases, WaveBornCases,
    ::testing::Values(
        Case{"1d_a4", 1, 4, {300, 1, 1}, 2, 1, 60, 0.9, kPml, 0},
        Case{"1d_a8_resampled", 1, 8, {200, 1, 1}, 1, 1, 20, 2.5, kPml, 2},
        Case{"2d_a2", 2, 2, {20, 40, 1}, 2, 1, 50, 0.9, kPml, 0},
        Case{"2d_a8_odd_nt", 2, 8, {24, 37, 1}, 1, 1, 41, 0.9, kPml, 1},
        Case{"2d_a4_per_side", 2, 4, {22, 35, 1}, 2, 2, 40, 0.9, {0, 7, 3, 0, 0, 0}, 2},
        Case{"2d_a6_no_pml", 2, 6, {20, 30, 1}, 1, 1, 30, 0.9, {0, 0, 0, 0, 0, 0}, 0},
        Case{"3d_a4", 3, 4, {12, 14, 40}, 2, 1, 20, 0.9, {4, 4, 4, 4, 4, 4}, 0},
        Case{"3d_a8_resampled", 3, 8, {10, 12, 35}, 1, 1, 8, 2.2, {3, 4, 5, 3, 4, 5}, 2}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// A second call continuing from the states of a first (non-zero u, u^{t-1}, psi and zeta of both
// fields, in the PML too): every buffer of both fields goes in and comes back.
TEST_F(WaveBorn, ContinuesFromNonZeroStates) {
  const Case c{"2d_a4_continued", 2, 4, {22, 31, 1}, 3, 3, 30, 0.9, {4, 6, 5, 3, 0, 0}};
  const auto p =
      random_born(c.ndim, c.shape, c.nshots, 2, 5, 3, c.nt, c.dt_over_cfl, 11, c.nmodels);
  const ScalarOptions opt = options(c);
  const auto first = scalar_born(kReference, p.born(), opt);
  const auto want = scalar_born(kReference, p.born(), opt, &first.state, &first.scattered_state);
  const auto got = scalar_born(kBackend, p.born(), opt, &first.state, &first.scattered_state);
  expect_born_close(got, want, c.ndim, c.name);
  if constexpr (kTestingCuda) {
    const auto cpu = scalar_born(kCpu, p.born(), opt, &first.state, &first.scattered_state);
    expect_born_close(got, cpu, c.ndim, std::string(c.name) + " (cpu)");
  }
}

TEST_F(WaveBorn, RecordsTimerRegions) {
  const Case c{"2d_a4_timed", 2, 4, {16, 20, 1}, 2, 1, 12, 0.9, kPml};
  const auto p = random_born(c.ndim, c.shape, c.nshots, 2, 5, 3, c.nt, c.dt_over_cfl, 5, c.nmodels);
  const ScalarOptions opt = options(c);
  Timers timers;
  const auto out = scalar_born<double>(kBackend, p.born(), opt, nullptr, nullptr, &timers);
  const auto d = random_vector<double>(out.receiver_amplitudes.size(), 3);
  (void)scalar_born_gradient<double>(kBackend, p.born(), opt, d, {}, true, nullptr, &timers);
  EXPECT_NE(timers.find("scalar_born/forward"), nullptr) << timers.table();
  EXPECT_NE(timers.find("scalar_born_gradient/born_backward"), nullptr) << timers.table();
  if constexpr (kTestingCuda) {  // the kernels' own regions, CUDA events
    for (const char* region : {"upload", "steps", "download"}) {
      EXPECT_NE(timers.find(std::string("scalar_born/forward/") + region), nullptr)
          << "forward " << region;
      EXPECT_NE(timers.find(std::string("scalar_born_gradient/born_backward/") + region), nullptr)
          << "backward " << region;
    }
  }
}

TEST_F(WaveBorn, BadDeviceIndexThrows) {
  if constexpr (!kTestingCuda) GTEST_SKIP() << "a device index means something on cuda only";
  const Case c{"1d", 1, 4, {50, 1, 1}, 1, 1, 5, 0.9, kPml};
  const auto p = random_born(c.ndim, c.shape, c.nshots, 1, 2, 2, c.nt, c.dt_over_cfl, 3, c.nmodels);
  const ScalarOptions opt = options(c);
  const Device bad{Backend::cuda, cuda_device_count() + 7, false};
  EXPECT_THROW(scalar_born(bad, p.born(), opt), DeviceUnavailable);
  const std::vector<double> d(static_cast<std::size_t>(c.nshots * 2 * c.nt), 1.0);
  EXPECT_THROW(scalar_born_gradient<double>(bad, p.born(), opt, d, {}, true), DeviceUnavailable);
}
