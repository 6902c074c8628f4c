// Born modelling, cpu backend against the reference: scattered and background receivers, final
// states, the migration image and the source gradient, in float64 and float32, over dimensions,
// accuracies, PML layouts, resampling, odd nt, per-shot models and thread counts.
// Tolerances (relative L2): float64 1e-11 (both evaluate the same formulas, in different order
// and precision of intermediate sums); float32 2e-4 (the reference sums in double; a few hundred
// steps of float32 rounding).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scalar_born_problems.hpp"
#include "sciproxy/wave.hpp"

using namespace sciproxy;
using namespace sciproxy::wave;
using namespace born_test;

namespace {

const Device kReference{Backend::reference, 0, false};
const Device kCpu{Backend::cpu, 0, false};

struct Case {
  const char* name;
  int ndim, accuracy;
  std::array<std::int64_t, 3> shape;
  std::int64_t nshots, nmodels, nt;
  double dt_over_cfl;
  std::array<std::int64_t, 6> pml;
  int threads;
};

template <class T>
void compare(const Case& c, double tol) {
  const auto p64 = random_born(c.ndim, c.shape, c.nshots, 2, 5, 3, c.nt, c.dt_over_cfl, 7, c.nmodels);
  const auto p = p64.template as<T>();
  ScalarOptions opt;
  opt.accuracy = c.accuracy;
  opt.pml_width = c.pml;
  opt.pml_freq = 25;
  opt.nparallel = c.threads;
  const auto ref = scalar_born(kReference, p.born(), opt);
  const auto cpu = scalar_born(kCpu, p.born(), opt);
  EXPECT_LT(rel_l2(cpu.receiver_amplitudes, ref.receiver_amplitudes), tol) << c.name;
  EXPECT_LT(rel_l2(cpu.bg_receiver_amplitudes, ref.bg_receiver_amplitudes), tol) << c.name;
  EXPECT_LT(rel_l2(cpu.scattered_state.wavefield, ref.scattered_state.wavefield), tol) << c.name;
  EXPECT_LT(rel_l2(cpu.scattered_state.previous_wavefield, ref.scattered_state.previous_wavefield),
            tol)
      << c.name;
  EXPECT_LT(rel_l2(cpu.state.wavefield, ref.state.wavefield), tol) << c.name;
  for (int d = 0; d < c.ndim; ++d) {
    if (c.pml[2 * d] + c.pml[2 * d + 1] > 0) {
      EXPECT_LT(rel_l2(cpu.scattered_state.zeta[d], ref.scattered_state.zeta[d]), tol)
          << c.name << " zeta " << d;
    }
  }

  const auto d = random_vector<T>(ref.receiver_amplitudes.size(), 8);
  const auto d_bg = random_vector<T>(ref.bg_receiver_amplitudes.size(), 9);
  const auto gref = scalar_born_gradient<T>(kReference, p.born(), opt, d, d_bg, true);
  const auto gcpu = scalar_born_gradient<T>(kCpu, p.born(), opt, d, d_bg, true);
  EXPECT_LT(rel_l2(gcpu.scatter, gref.scatter), tol) << c.name;
  EXPECT_LT(rel_l2(gcpu.source_amplitudes, gref.source_amplitudes), tol) << c.name;
}

class BornCpu : public ::testing::TestWithParam<Case> {};

TEST_P(BornCpu, Float64MatchesReference) { compare<double>(GetParam(), 1e-11); }
TEST_P(BornCpu, Float32MatchesReference) { compare<float>(GetParam(), 2e-4); }

const std::array<std::int64_t, 6> kPml = {5, 5, 5, 5, 5, 5};
INSTANTIATE_TEST_SUITE_P(
    Cases, BornCpu,
    ::testing::Values(Case{"1d_a4", 1, 4, {300, 1, 1}, 2, 1, 60, 0.9, kPml, 0},
                      Case{"1d_a8_resampled", 1, 8, {200, 1, 1}, 1, 1, 20, 2.5, kPml, 2},
                      Case{"2d_a2", 2, 2, {20, 40, 1}, 2, 1, 50, 0.9, kPml, 0},
                      Case{"2d_a8_odd_nt", 2, 8, {24, 37, 1}, 1, 1, 41, 0.9, kPml, 1},
                      Case{"2d_a4_per_side", 2, 4, {22, 35, 1}, 2, 2, 40, 0.9, {0, 7, 3, 0, 0, 0}, 2},
                      Case{"2d_a6_no_pml", 2, 6, {20, 30, 1}, 1, 1, 30, 0.9, {0, 0, 0, 0, 0, 0}, 0},
                      Case{"3d_a4", 3, 4, {12, 14, 40}, 2, 1, 20, 0.9, {4, 4, 4, 4, 4, 4}, 0},
                      Case{"3d_a8_resampled", 3, 8, {10, 12, 35}, 1, 1, 8, 2.2, {3, 4, 5, 3, 4, 5}, 2}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
