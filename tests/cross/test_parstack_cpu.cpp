// cpu backend against the reference on many random problems: lengths, offsets, shifts, windows,
// accumulation, both methods, both dtypes, one and several threads.
// Tolerance: ||cpu - ref|| / ||ref|| <= 1e-5 (float32: the cpu backend accumulates in float, the
// reference in double; sums of <= 30 terms of size 1 lose far less), 1e-12 (float64).
#include <gtest/gtest.h>

#include <random>

#include "parstack_problems.hpp"
#include "stack/parstack_kernels.hpp"
#include "sciproxy/core/verify.hpp"

using namespace sciproxy;
using namespace sciproxy::stack;

namespace {

template <class T>
double tolerance() {
  return sizeof(T) == 4 ? 1e-5 : 1e-12;
}

template <class T>
void compare_backends(std::uint64_t seed, const test::ProblemShape& shape, int nparallel) {
  std::mt19937_64 rng(seed);
  const Device reference{Backend::reference, 0, false}, cpu{Backend::cpu, 0, false};
  for (int trial = 0; trial < 100; ++trial) {
    const test::RandomProblem<T> p(rng, shape);
    const auto in = p.input();
    ParstackOptions opt;
    opt.method = trial % 3 == 2 ? Method::max : Method::stack;
    opt.clamp_max_at_zero = trial % 2 == 0;
    opt.nparallel = nparallel;
    const Extent full = parstack_extent(in, opt);
    if (trial % 4 == 1) {  // a window of the full stack: offsetout +- k, lengthout - k
      std::uniform_int_distribution<int> k(-3, 3);
      opt.offsetout = full.offsetout + k(rng);
      opt.lengthout = std::max<std::int64_t>(1, full.lengthout - std::abs(k(rng)));
    }
    opt.accumulate = trial % 5 == 3;
    const Extent e = parstack_extent(in, opt);
    const auto n = parstack_result_size(p.nshifts, e, opt.method);
    std::vector<T> want(n, T(0.5)), got(n, T(0.5));  // a non-zero start shows accumulation
    parstack<T>(reference, in, want, opt);
    parstack<T>(cpu, in, got, opt);
    const auto c = compare<T, T>(got, want, {tolerance<T>()});
    ASSERT_TRUE(c.pass) << "seed " << seed << " trial " << trial << ": " << c.summary();
  }
}

}  // namespace

TEST(ParstackCpu, SmallProblemsLikePyrockosTests) {
  compare_backends<float>(1, {}, 0);
  compare_backends<double>(2, {}, 0);
}

TEST(ParstackCpu, LongerTracesCrossingTiles) {
  const test::ProblemShape shape{30, 100, 5000, 3000, 12};
  compare_backends<float>(3, shape, 0);
  compare_backends<double>(4, shape, 2);
}

TEST(ParstackCpu, OneThreadEqualsManyThreadsBitForBit) {
  std::mt19937_64 rng(5);
  const test::RandomProblem<float> p(rng, {20, 1000, 3000, 500, 40});
  const Device cpu{Backend::cpu, 0, false};
  for (Method method : {Method::stack, Method::max}) {
    ParstackOptions opt;
    opt.method = method;
    const auto n = parstack_result_size(p.nshifts, parstack_extent(p.input(), opt), method);
    std::vector<float> one(n), many(n);
    opt.nparallel = 1;
    parstack<float>(cpu, p.input(), one, opt);
    opt.nparallel = 2;
    parstack<float>(cpu, p.input(), many, opt);
    EXPECT_EQ(one, many);
  }
}

TEST(ParstackCpu, ArgmaxMatchesReference) {
  std::mt19937_64 rng(6);
  std::uniform_int_distribution<int> v(-3, 3);  // small integers: many ties and all-negative columns
  for (int trial = 0; trial < 50; ++trial) {
    const std::int64_t rows = 1 + trial % 7, cols = 1 + (trial * 37) % 600;
    std::vector<double> a(rows * cols);
    for (auto& x : a) x = v(rng);
    for (bool compat : {false, true}) {
      std::vector<std::uint32_t> want(cols), got(cols);
      kernels::reference::argmax(a.data(), rows, cols, want.data(), compat);
      argmax<double>(a, rows, cols, got, 0, compat);
      ASSERT_EQ(got, want) << "trial " << trial << " compat " << compat;
    }
  }
}
