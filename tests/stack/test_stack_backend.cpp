// The stack family's backend test, compiled once per backend (test_stack_cpu, test_stack_cuda;
// tests/common/backend_test.hpp): the backend against the reference on random problems (windows,
// accumulation, both methods, pyrocko's clamp, both dtypes, thread counts, with and without a
// plan), a large problem, determinism, the plan's counters and timer regions, verification under
// a Recording, argmax (host-only), and, for cuda, a missing device and a moved-from plan.
// Tolerances: stack/case.hpp (relative L2 1e-5 float32, 1e-12 float64).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/backend_test.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/recording.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/core/verify.hpp"
#include "sciproxy/stack.hpp"
#include "stack/case.hpp"
#include "stack/kernels.hpp"
#include "stack/problems.hpp"

using namespace sciproxy;
using namespace sciproxy::stack;
using test::kBackend;
using test::kReference;

namespace {

class StackBackend : public test::BackendTest {};

// Random windows, methods, clamping and accumulation over random problems, each run on the
// backend and on the reference. Accumulating calls start both from the same random values, the
// others from NaN, which the backend must overwrite. One plan serves every trial (its buffers
// grow as sizes change), and every fourth trial runs without one.
template <class T>
void compare_with_reference(std::uint64_t seed, const test::ProblemShape& shape, int trials,
                            int window_range, int nparallel = 0) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> window_d(-window_range, window_range);
  std::uniform_real_distribution<double> value_d(-1.0, 1.0);
  ParstackPlan plan;
  for (int trial = 0; trial < trials; ++trial) {
    const test::RandomProblem<T> p(rng, shape);
    const auto in = p.input();
    ParstackOptions opt;
    opt.method = trial % 3 == 2 ? Method::max : Method::stack;
    opt.clamp_max_at_zero = (trial / 3) % 2 == 0;
    opt.nparallel = nparallel;
    const Extent full = parstack_extent(in, opt);
    if (trial % 4 == 1 ||
        trial % 4 == 2) {  // a window of the full stack: offsetout +- k, lengthout - k
      opt.offsetout = full.offsetout + window_d(rng);
      opt.lengthout = std::max<std::int64_t>(1, full.lengthout - std::abs(window_d(rng)));
    }
    opt.accumulate = trial % 5 == 3;  // method 1 ignores it
    const Extent e = parstack_extent(in, opt);
    const auto n = static_cast<std::size_t>(parstack_result_size(p.nshifts, e, opt.method));

    const bool adds = opt.accumulate && opt.method == Method::stack;
    std::vector<T> want(n), got(n);
    for (std::size_t j = 0; j < n; ++j) {
      want[j] = adds ? static_cast<T>(value_d(rng)) : std::numeric_limits<T>::quiet_NaN();
      got[j] = want[j];
    }
    const Extent we = parstack<T>(kReference, in, want, opt);
    const Extent ge =
        parstack<T>(kBackend, in, got, opt, nullptr, trial % 4 == 0 ? nullptr : &plan);
    ASSERT_EQ(ge.offsetout, we.offsetout);
    ASSERT_EQ(ge.lengthout, we.lengthout);
    const auto c = compare<T, T>(got, want, parstack_tolerance<T>());
    ASSERT_TRUE(c.pass) << "seed " << seed << " trial " << trial << " method "
                        << static_cast<int>(opt.method) << " clamp " << opt.clamp_max_at_zero
                        << " accumulate " << opt.accumulate << ": " << c.summary();
  }
}

template <class T>
void compare_large(const test::RandomProblem<T>& p, Method method, const Device& baseline) {
  ParstackOptions opt;
  opt.method = method;
  const auto n = static_cast<std::size_t>(
      parstack_result_size(p.nshifts, parstack_extent(p.input(), opt), method));
  std::vector<T> want(n), got(n);
  parstack<T>(baseline, p.input(), want, opt);
  parstack<T>(kBackend, p.input(), got, opt);
  const auto c = compare<T, T>(got, want, parstack_tolerance<T>());
  EXPECT_TRUE(c.pass) << "method " << static_cast<int>(method) << " against " << baseline.name()
                      << ": " << c.summary();
}

bool has_region(const Timers& timers, const std::string& leaf) {
  for (const auto& s : timers.stats())
    if (s.leaf() == leaf && s.calls >= 1) return true;
  return false;
}

}  // namespace

TEST_F(StackBackend, PyrockoTestSizesMatchReference) {
  compare_with_reference<float>(1, {}, 100, 3);
  compare_with_reference<double>(2, {}, 100, 3);
  compare_with_reference<float>(13, {}, 100, 10);
  compare_with_reference<double>(14, {}, 100, 10);
}

TEST_F(StackBackend, ManyShortTracesMatchReference) {
  const test::ProblemShape shape{30, 1, 200, 50, 40};
  compare_with_reference<float>(11, shape, 300, 10);
  compare_with_reference<double>(12, shape, 300, 10);
}

TEST_F(StackBackend, TracesLongerThanOneTileMatchReference) {
  const test::ProblemShape many{30, 100, 5000, 3000, 12};
  compare_with_reference<float>(3, many, 100, 3, 0);
  compare_with_reference<double>(4, many, 100, 3, 2);
  const test::ProblemShape few{12, 100, 5000, 3000, 6};
  compare_with_reference<float>(15, few, 20, 10);
  compare_with_reference<double>(16, few, 20, 10);
}

TEST_F(StackBackend, WideMoveoutsMatchReference) {
  // Shifts spread far beyond the trace lengths (real station networks: hundreds to thousands of
  // samples), so traces start and stop inside the rows and in the middle of vectors: the cpu
  // backend's segments, its rows longer than one chunk, its partial last vectors, 70 traces.
  const test::ProblemShape wide{12, 300, 3000, 5000, 8};
  compare_with_reference<float>(31, wide, 30, 10);
  compare_with_reference<double>(32, wide, 30, 10, 2);
  const test::ProblemShape many{70, 1, 700, 900, 5};
  compare_with_reference<float>(33, many, 20, 10, 1);
  compare_with_reference<double>(34, many, 20, 10);
}

TEST_F(StackBackend, NeighbouringShiftSetsMatchReference) {
  // Shift sets whose shifts differ by a few samples from one to the next, as the moveouts of
  // neighbouring candidate sources do: the cpu backend stacks runs of up to 8 such sets together.
  // 40 traces (its passes of 16), traces that start and stop inside the rows, weights 0 in some
  // sets of a run.
  const test::ProblemShape moveouts{40, 300, 2000, 1500, 9, 6};
  compare_with_reference<float>(35, moveouts, 24, 10);
  compare_with_reference<double>(36, moveouts, 24, 10, 1);
  const test::ProblemShape few{6, 50, 400, 40, 7, 3};
  compare_with_reference<float>(37, few, 30, 5, 2);
  const test::ProblemShape long_runs{40, 300, 2000, 1500, 40, 4};
  compare_with_reference<float>(39, long_runs, 10, 10);
  compare_with_reference<double>(40, long_runs, 10, 10, 1);
}

TEST_F(StackBackend, ShiftSetsInRunsGiveTheBitsOfSingleOnes) {
  // Every shift set sums its traces in trace order whether it is stacked in a run of its
  // neighbours or alone, so a call on all sets gives, row by row, the bits of calls on one set
  // each: the stacks (method 0) and their maxima (method 1). Up to 40 sets, runs of up to 8; in the
  // last two trials 33 to 40 traces, which the cpu backend sums in passes of 16 in the runs and
  // in groups of traces (stack_groups) for a set alone.
  std::mt19937_64 rng(38);
  for (int trial = 0; trial < 4; ++trial) {
    const test::RandomProblem<float> p(rng, {40, 500, 3000, 800, 40, 4, trial < 2 ? 1 : 33});
    for (const Method method : {Method::stack, Method::max}) {
      ParstackOptions opt;
      opt.method = method;
      const Extent e = parstack_extent(p.input(), opt);
      const std::int64_t row_size = method == Method::stack ? e.lengthout : 1;
      std::vector<float> all(static_cast<std::size_t>(p.nshifts * row_size));
      parstack<float>(kBackend, p.input(), all, opt);
      opt.offsetout = e.offsetout;
      opt.lengthout = e.lengthout;
      const auto ntraces = static_cast<std::size_t>(p.traces.size());
      for (std::int64_t s = 0; s < p.nshifts; ++s) {
        const auto row = static_cast<std::size_t>(s) * ntraces;
        const ParstackInput<float> one{p.traces, std::span(p.offsets),
                                       std::span(p.shifts).subspan(row, ntraces),
                                       std::span(p.weights).subspan(row, ntraces), 1};
        std::vector<float> alone(static_cast<std::size_t>(row_size));
        parstack<float>(kBackend, one, alone, opt);
        const auto begin = all.begin() + static_cast<std::ptrdiff_t>(s * row_size);
        EXPECT_TRUE(std::equal(alone.begin(), alone.end(), begin))
            << "trial " << trial << ", method " << static_cast<int>(method) << ", shift set " << s;
      }
    }
  }
}

TEST_F(StackBackend, LargeProblemMatches) {
  // pyrocko's CUDA benchmark shape, with 2000 shift sets: 30 traces x 2000 x ~6000 samples. The
  // cuda backend is compared with the cpu one (the reference would take long), cpu with the
  // reference.
  const Device baseline = test::kTestingCuda ? Device{Backend::cpu, 0, false} : kReference;
  const auto pf = test::fixed_size_problem<float>(21, 30, 6000, 2000, 500);
  compare_large(pf, Method::stack, baseline);
  compare_large(pf, Method::max, baseline);
  const auto pd = test::fixed_size_problem<double>(22, 30, 6000, 2000, 500);
  compare_large(pd, Method::stack, baseline);
  compare_large(pd, Method::max, baseline);
}

TEST_F(StackBackend, LargeStackIsTheSameAsAccumulatedIntoZeros) {
  // A method-0 stack larger than the last-level cache (46 MB here) is written by the cpu backend
  // with streaming stores shifted to 64-byte boundaries; accumulating into zeros takes plain
  // stores and the same sums. Rows of an odd length start at every alignment. Bit for bit.
  // 40 traces with shifts at random: the cpu backend's sums in groups of traces (stack_groups).
  for (const int ntraces : {8, 40}) {
    const auto p = test::fixed_size_problem<float>(41, ntraces, 10001, 1000, 777);
    ParstackOptions opt;
    const auto n = parstack_result_size(p.nshifts, parstack_extent(p.input(), opt), opt.method);
    std::vector<float> plain(n, 7.0f), accumulated(n, 0.0f);
    parstack<float>(kBackend, p.input(), plain, opt);
    opt.accumulate = true;
    parstack<float>(kBackend, p.input(), accumulated, opt);
    EXPECT_EQ(plain, accumulated) << ntraces << " traces";
  }
}

TEST_F(StackBackend, ResultDoesNotDependOnThreadCount) {
  // The order of every sum is fixed, so one thread and several give the same bits (cuda ignores
  // nparallel: two runs give the same bits).
  // 20 traces (one pass), 60 with shifts at random (the cpu backend's groups of traces) and 60
  // with moveouts (its runs of shift sets, passes of 16 traces).
  std::mt19937_64 rng(5);
  for (const test::ProblemShape shape : {test::ProblemShape{20, 1000, 3000, 500, 40},
                                         test::ProblemShape{60, 1000, 3000, 2000, 70, 0, 60},
                                         test::ProblemShape{60, 1000, 3000, 500, 70, 5, 60}}) {
    const test::RandomProblem<float> p(rng, shape);
    for (Method method : {Method::stack, Method::max}) {
      ParstackOptions opt;
      opt.method = method;
      const auto n = parstack_result_size(p.nshifts, parstack_extent(p.input(), opt), method);
      std::vector<float> one(n), many(n);
      opt.nparallel = 1;
      parstack<float>(kBackend, p.input(), one, opt);
      opt.nparallel = 2;
      parstack<float>(kBackend, p.input(), many, opt);
      EXPECT_EQ(one, many) << shape.max_traces << " traces, moveout step " << shape.moveout_step;
    }
  }
}

TEST_F(StackBackend, PlanCountersAndTimerRegions) {
  ParstackPlan plan;
  ParstackOptions opt;
  auto run = [&](std::uint64_t seed, ParstackPlan* with, Timers* timers) {
    const auto p = test::fixed_size_problem<float>(seed, 20, 3000, 300, 200);
    const auto n = static_cast<std::size_t>(
        parstack_result_size(p.nshifts, parstack_extent(p.input(), opt), opt.method));
    std::vector<float> out(n);
    parstack<float>(kBackend, p.input(), out, opt, timers, with);
  };

  Timers timers;
  run(31, &plan, &timers);
  EXPECT_TRUE(has_region(timers, "parstack"));
  const ParstackPlan::Counters first = plan.counters();
  if constexpr (!test::kTestingCuda) {
    // Host backends time their loops and keep nothing in the plan.
    EXPECT_TRUE(has_region(timers, "compute"));
    EXPECT_EQ(first.device_allocations, 0);
    EXPECT_EQ(first.device_bytes_held, 0);
    EXPECT_EQ(first.bytes_host_to_device, 0);
    EXPECT_EQ(first.bytes_device_to_host, 0);
    return;
  }
  EXPECT_GT(first.device_allocations, 0);
  EXPECT_GT(first.device_bytes_held, 0);
  EXPECT_GT(first.bytes_host_to_device, 0);
  EXPECT_GT(first.bytes_device_to_host, 0);
  EXPECT_TRUE(has_region(timers, "upload"));
  EXPECT_TRUE(has_region(timers, "kernel"));
  EXPECT_TRUE(has_region(timers, "download"));

  // Same sizes (fixed_size_problem draws lengths from the seed, so reuse the seed's shape).
  for (int repeat = 0; repeat < 3; ++repeat) run(31, &plan, nullptr);
  const ParstackPlan::Counters later = plan.counters();
  EXPECT_EQ(later.device_allocations, first.device_allocations);
  EXPECT_EQ(later.device_bytes_held, first.device_bytes_held);
  EXPECT_DOUBLE_EQ(later.bytes_host_to_device, 4 * first.bytes_host_to_device);
  EXPECT_DOUBLE_EQ(later.bytes_device_to_host, 4 * first.bytes_device_to_host);

  // The buffers move with the plan; the plan moved from counts nothing and is refused.
  ParstackPlan moved = std::move(plan);
  run(31, &moved, nullptr);
  EXPECT_EQ(moved.counters().device_allocations, first.device_allocations);
  EXPECT_EQ(plan.counters().device_allocations, 0);  // NOLINT(bugprone-use-after-move)
  EXPECT_THROW(run(31, &plan, nullptr), InvalidArgument);
}

TEST_F(StackBackend, RecordingVerifiesAgainstReference) {
  std::mt19937_64 rng(51);
  const test::RandomProblem<double> p(rng, {20, 50, 400, 100, 8});
  Recording recording({.verify = true});
  Timers timers;
  for (Method method : {Method::stack, Method::max}) {
    ParstackOptions opt;
    opt.method = method;
    opt.accumulate = method == Method::stack;  // the rerun must start from the same values
    const auto n = parstack_result_size(p.nshifts, parstack_extent(p.input(), opt), method);
    std::vector<double> out(n, 0.25);
    parstack<double>(kBackend, p.input(), out, opt, method == Method::max ? &timers : nullptr);
  }
  ASSERT_EQ(recording.reports().size(), 2u);
  for (const auto& report : recording.reports()) {
    EXPECT_EQ(report.kernel, "parstack");
    EXPECT_EQ(report.device, kBackend);
    EXPECT_GT(report.work.points, 0);
    ASSERT_TRUE(report.verification.has_value());
    EXPECT_TRUE(report.verification->pass) << report.verification->summary();
  }
  EXPECT_TRUE(has_region(recording.reports()[0].timers, "parstack"));  // lent by the recording
  EXPECT_TRUE(has_region(timers, "parstack"));                         // the caller's
  EXPECT_TRUE(recording.passed());
}

TEST_F(StackBackend, ArgmaxMatchesReference) {
  if constexpr (test::kTestingCuda) GTEST_SKIP() << "argmax is host-only (src/stack/kernels.hpp)";
  std::mt19937_64 rng(6);
  std::uniform_int_distribution<int> v(-3,
                                       3);  // small integers: many ties and all-negative columns
  const Context host{kReference, nullptr};
  for (int trial = 0; trial < 50; ++trial) {
    const std::int64_t rows = 1 + trial % 7, cols = 1 + (trial * 37) % 600;
    std::vector<double> a(rows * cols);
    for (auto& x : a) x = v(rng);
    // Some NaN and infinities: numpy's first NaN, or pyrocko's skipping of it.
    std::uniform_int_distribution<std::size_t> where(0, a.size() - 1);
    for (int k = 0; k < trial % 5; ++k) {
      a[where(rng)] = std::numeric_limits<double>::quiet_NaN();
      a[where(rng)] = k % 2 ? std::numeric_limits<double>::infinity()
                            : -std::numeric_limits<double>::infinity();
    }
    for (bool compat : {false, true}) {
      std::vector<std::uint32_t> want(cols), got(cols);
      kernels::reference::argmax(host, a.data(), rows, cols, want.data(), compat);
      argmax<double>(a, rows, cols, got, 0, compat);
      ASSERT_EQ(got, want) << "trial " << trial << " compat " << compat;
    }
  }
  // Under a Recording with verification, argmax compares its indices with the reference's.
  Recording recording({.verify = true});
  std::vector<std::uint32_t> out(5);
  const std::vector<double> a{1, 2, 3, 4, 5, 5, 4, 3, 2, 1};
  argmax<double>(a, 2, 5, out);
  EXPECT_EQ(out, (std::vector<std::uint32_t>{1, 1, 0, 0, 0}));  // a tie: the first row
  ASSERT_EQ(recording.reports().size(), 1u);
  EXPECT_TRUE(recording.passed());
}

TEST_F(StackBackend, MissingDeviceThrows) {
  if constexpr (!test::kTestingCuda) GTEST_SKIP() << "only the cuda backend has devices to miss";
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
