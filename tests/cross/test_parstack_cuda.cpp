// cuda backend against the reference (small random problems) and the cpu backend (a large one),
// through the public API; plan reuse; a missing device. Every test skips without a GPU.
// Tolerance: ||cuda - ref|| / ||ref|| <= 1e-5 (float32: the GPU sums in float, the reference in
// double), 1e-12 (float64).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "parstack_problems.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/core/verify.hpp"
#include "sciproxy/stack.hpp"

using namespace sciproxy;
using namespace sciproxy::stack;

namespace {

class ParstackCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
  }
};

template <class T>
double tolerance() {
  return sizeof(T) == 4 ? 1e-5 : 1e-12;
}

const Device kReference{Backend::reference, 0, false};
const Device kCpu{Backend::cpu, 0, false};
const Device kCuda{Backend::cuda, 0, false};

// Random windows, methods, clamping and accumulation over random problems; one plan serves every
// trial (its buffers grow as sizes change), and every fourth trial runs without a plan.
template <class T>
void compare_with_reference(std::uint64_t seed, const test::ProblemShape& shape, int trials) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> window_d(-10, 10);
  std::uniform_real_distribution<double> value_d(-1.0, 1.0);
  ParstackPlan plan;
  for (int trial = 0; trial < trials; ++trial) {
    const test::RandomProblem<T> p(rng, shape);
    const auto in = p.input();
    ParstackOptions opt;
    opt.method = trial % 3 == 2 ? Method::max : Method::stack;
    opt.clamp_max_at_zero = (trial / 3) % 2 == 0;
    const Extent full = parstack_extent(in, opt);
    if (trial % 4 == 1 || trial % 4 == 2) {  // a window of the full stack: offsetout +- k, lengthout - k
      opt.offsetout = full.offsetout + window_d(rng);
      opt.lengthout = std::max<std::int64_t>(1, full.lengthout - std::abs(window_d(rng)));
    }
    opt.accumulate = opt.method == Method::stack && trial % 5 == 3;
    const Extent e = parstack_extent(in, opt);
    const auto n = static_cast<std::size_t>(parstack_result_size(p.nshifts, e, opt.method));

    // Accumulating calls start from the same random values; the others from NaN, which the
    // backends must overwrite.
    std::vector<T> want(n), got(n);
    for (std::size_t j = 0; j < n; ++j) {
      want[j] = opt.accumulate ? static_cast<T>(value_d(rng)) : std::numeric_limits<T>::quiet_NaN();
      got[j] = want[j];
    }
    const Extent we = parstack<T>(kReference, in, want, opt);
    const Extent ge = parstack<T>(kCuda, in, got, opt, nullptr, trial % 4 == 0 ? nullptr : &plan);
    ASSERT_EQ(ge.offsetout, we.offsetout);
    ASSERT_EQ(ge.lengthout, we.lengthout);
    const auto c = compare<T, T>(got, want, {tolerance<T>()});
    ASSERT_TRUE(c.pass) << "seed " << seed << " trial " << trial << " method "
                        << static_cast<int>(opt.method) << " clamp " << opt.clamp_max_at_zero
                        << " accumulate " << opt.accumulate << ": " << c.summary();
  }
}

template <class T>
test::RandomProblem<T> fixed_size_problem(std::uint64_t seed, int ntraces, int length,
                                          std::int64_t nshifts, int shift_range) {
  std::mt19937_64 rng(seed);
  test::RandomProblem<T> p(rng, {1, 1, 1, 0, 1});  // replaced below, to get exact sizes
  std::uniform_int_distribution<int> length_d(length * 5 / 6, length), shift_d(-shift_range, shift_range),
      zero_d(0, 9);
  std::uniform_real_distribution<double> value_d(-1.0, 1.0);
  p.data.assign(ntraces, {});
  for (auto& t : p.data) {
    t.resize(length_d(rng));
    for (auto& v : t) v = static_cast<T>(value_d(rng));
  }
  p.traces.assign(p.data.begin(), p.data.end());
  p.offsets.clear();
  p.shifts.clear();
  p.weights.clear();
  for (int i = 0; i < ntraces; ++i) p.offsets.push_back(shift_d(rng) / 5);
  for (std::int64_t j = 0; j < nshifts * ntraces; ++j) {
    p.shifts.push_back(shift_d(rng));
    p.weights.push_back(zero_d(rng) == 0 ? T(0) : static_cast<T>(value_d(rng)));
  }
  p.nshifts = nshifts;
  return p;
}

template <class T>
void compare_with_cpu(const test::RandomProblem<T>& p, Method method) {
  ParstackOptions opt;
  opt.method = method;
  const auto n = static_cast<std::size_t>(
      parstack_result_size(p.nshifts, parstack_extent(p.input(), opt), method));
  std::vector<T> want(n), got(n);
  parstack<T>(kCpu, p.input(), want, opt);
  parstack<T>(kCuda, p.input(), got, opt);
  const auto c = compare<T, T>(got, want, {tolerance<T>()});
  EXPECT_TRUE(c.pass) << "method " << static_cast<int>(method) << ": " << c.summary();
}

bool has_region(const Timers& timers, const std::string& leaf) {
  for (const auto& s : timers.stats())
    if (s.leaf() == leaf && s.calls >= 1) return true;
  return false;
}

}  // namespace

TEST_F(ParstackCuda, SmallProblemsMatchReference) {
  const test::ProblemShape shape{30, 1, 200, 50, 40};
  compare_with_reference<float>(11, shape, 300);
  compare_with_reference<double>(12, shape, 300);
}

TEST_F(ParstackCuda, PyrockoTestSizesMatchReference) {
  compare_with_reference<float>(13, {}, 100);
  compare_with_reference<double>(14, {}, 100);
}

TEST_F(ParstackCuda, TracesLongerThanOneTileMatchReference) {
  const test::ProblemShape shape{12, 100, 5000, 3000, 6};
  compare_with_reference<float>(15, shape, 20);
  compare_with_reference<double>(16, shape, 20);
}

TEST_F(ParstackCuda, LargeProblemMatchesCpu) {
  // pyrocko's CUDA benchmark shape, with 2000 shift sets: 30 traces x 2000 x ~6000 samples.
  const auto pf = fixed_size_problem<float>(21, 30, 6000, 2000, 500);
  compare_with_cpu(pf, Method::stack);
  compare_with_cpu(pf, Method::max);
  const auto pd = fixed_size_problem<double>(22, 30, 6000, 2000, 500);
  compare_with_cpu(pd, Method::stack);
  compare_with_cpu(pd, Method::max);
}

TEST_F(ParstackCuda, PlanAllocatesOnceForSameSizedCalls) {
  ParstackPlan plan;
  ParstackOptions opt;
  auto run = [&](std::uint64_t seed, ParstackPlan& with, Timers* timers) {
    const auto p = fixed_size_problem<float>(seed, 20, 3000, 300, 200);
    const auto n = static_cast<std::size_t>(
        parstack_result_size(p.nshifts, parstack_extent(p.input(), opt), opt.method));
    std::vector<float> out(n);
    parstack<float>(kCuda, p.input(), out, opt, timers, &with);
  };

  Timers timers;
  run(31, plan, &timers);
  const ParstackPlan::Counters first = plan.counters();
  EXPECT_GT(first.device_allocations, 0);
  EXPECT_GT(first.device_bytes_held, 0);
  EXPECT_GT(first.bytes_host_to_device, 0);
  EXPECT_GT(first.bytes_device_to_host, 0);
  EXPECT_TRUE(has_region(timers, "upload"));
  EXPECT_TRUE(has_region(timers, "kernel"));
  EXPECT_TRUE(has_region(timers, "download"));

  // Same sizes (fixed_size_problem draws lengths from the seed, so reuse the seed's shape).
  for (int repeat = 0; repeat < 3; ++repeat) run(31, plan, nullptr);
  const ParstackPlan::Counters later = plan.counters();
  EXPECT_EQ(later.device_allocations, first.device_allocations);
  EXPECT_EQ(later.device_bytes_held, first.device_bytes_held);
  EXPECT_DOUBLE_EQ(later.bytes_host_to_device, 4 * first.bytes_host_to_device);
  EXPECT_DOUBLE_EQ(later.bytes_device_to_host, 4 * first.bytes_device_to_host);

  // The buffers move with the plan.
  ParstackPlan moved = std::move(plan);
  run(31, moved, nullptr);
  EXPECT_EQ(moved.counters().device_allocations, first.device_allocations);
}

TEST_F(ParstackCuda, MissingDeviceThrows) {
  EXPECT_EQ(static_cast<int>(cuda_devices().size()), cuda_device_count());
  EXPECT_THROW(select_device("cuda:99"), DeviceUnavailable);

  std::mt19937_64 rng(41);
  const test::RandomProblem<float> p(rng, {});
  ParstackOptions opt;
  const auto n = static_cast<std::size_t>(
      parstack_result_size(p.nshifts, parstack_extent(p.input(), opt), opt.method));
  std::vector<float> out(n);
  EXPECT_THROW(parstack<float>(parse_device("cuda:99"), p.input(), out, opt), DeviceUnavailable);
}
