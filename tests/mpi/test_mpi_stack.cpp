// parstack on 1, 2 and 3 ranks against one process, bit for bit: the shift sets given to every
// rank or each rank its own, the result on every rank, on rank 0 or kept per rank, both methods,
// accumulating, shift sets that do not divide among the ranks or are fewer than the ranks; and
// ranks that disagree, or bad input on one rank, fail on every rank.
#include <gtest/gtest.h>

#include <random>

#include "core/collective.hpp"
#include "mpi_test.hpp"
#include "sciproxy/core/harness.hpp"
#include "sciproxy/stack.hpp"

namespace sciproxy::test {
namespace {

using stack::Method;
using stack::ParstackInput;
using stack::ParstackOptions;
using stack::ResultLayout;
using stack::ShiftSets;

const Device kCpu{Backend::cpu, 0, false};

// Moveouts over +-spread samples, traces of different lengths and offsets, positive weights.
template <class T>
struct Problem {
  std::vector<std::vector<T>> data;
  std::vector<std::span<const T>> traces;
  std::vector<std::int32_t> offsets, shifts;
  std::vector<T> weights;
  std::int64_t nshifts;

  Problem(std::int64_t ntraces, std::int64_t nshifts_, int spread, unsigned seed)
      : nshifts(nshifts_) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    for (std::int64_t i = 0; i < ntraces; ++i) {
      data.emplace_back(200 + 37 * i);
      for (auto& x : data.back()) x = static_cast<T>(u(rng));
      offsets.push_back(static_cast<std::int32_t>(5 * i));
    }
    for (const auto& d : data) traces.emplace_back(d);
    for (std::int64_t j = 0; j < nshifts * ntraces; ++j) {
      shifts.push_back(static_cast<std::int32_t>(std::lround(spread * u(rng))));
      weights.push_back(static_cast<T>(0.5 + 0.5 * std::abs(u(rng))));
    }
  }
  ParstackInput<T> input() const {
    return {std::span<const std::span<const T>>(traces), offsets, shifts, weights, nshifts};
  }
  // Shift sets [first, first + count) only: what a rank passes with ShiftSets::own.
  ParstackInput<T> rows(std::int64_t first, std::int64_t count) const {
    const auto n = static_cast<std::int64_t>(traces.size());
    return {std::span<const std::span<const T>>(traces), offsets,
            std::span<const std::int32_t>(shifts).subspan(first * n, count * n),
            std::span<const T>(weights).subspan(first * n, count * n), count};
  }
};

template <class T>
std::vector<T> one_process(const Problem<T>& p, const ParstackOptions& opt,
                           const std::vector<T>& start = {}) {
  const auto e = stack::parstack_extent(p.input(), opt);
  std::vector<T> out =
      start.empty() ? std::vector<T>(stack::parstack_result_size(p.nshifts, e, opt.method)) : start;
  stack::parstack<T>(kCpu, p.input(), std::span<T>(out), opt);
  return out;
}

template <class T>
void check_every_layout(std::int64_t nshifts, Method method, bool accumulate) {
  const auto& comm = world();
  const Problem<T> p(7, nshifts, 300, 11);
  ParstackOptions single;
  single.method = method;
  single.accumulate = accumulate;
  const auto extent = stack::parstack_extent(p.input(), single);
  const std::int64_t row = method == Method::stack ? extent.lengthout : 1;
  std::vector<T> start;
  if (accumulate)
    for (std::int64_t i = 0; i < nshifts * row; ++i) start.push_back(static_cast<T>(i % 13) / 7);
  const std::vector<T> expected = one_process(p, single, start);

  for (const ShiftSets sets : {ShiftSets::all, ShiftSets::own})
    for (const ResultLayout layout :
         {ResultLayout::all_ranks, ResultLayout::root, ResultLayout::own}) {
      SCOPED_TRACE(::testing::Message() << "shift_sets " << int(sets) << ", layout " << int(layout)
                                        << ", nshifts " << nshifts << ", ranks " << comm.size());
      ParstackOptions opt = single;
      opt.comm = comm;
      opt.shift_sets = sets;
      opt.result_layout = layout;
      const auto block = collective::block_of(nshifts, comm);
      const auto input = sets == ShiftSets::all ? p.input() : p.rows(block.first, block.count);
      const auto b = stack::parstack_shift_block(input.nshifts, opt);
      EXPECT_EQ(b.first, block.first);
      EXPECT_EQ(b.count, block.count);
      EXPECT_EQ(b.total, nshifts);
      const auto e = stack::parstack_extent(input, opt);
      EXPECT_EQ(e.offsetout, extent.offsetout);
      EXPECT_EQ(e.lengthout, extent.lengthout);
      const bool whole =
          layout == ResultLayout::all_ranks || (layout == ResultLayout::root && comm.rank() == 0);
      std::vector<T> result;
      if (whole)
        result = accumulate ? start : std::vector<T>(nshifts * row, T(-7));
      else if (layout == ResultLayout::own)
        result = accumulate ? std::vector<T>(start.begin() + block.first * row,
                                             start.begin() + (block.first + block.count) * row)
                            : std::vector<T>(block.count * row, T(-7));
      stack::parstack<T>(kCpu, input, std::span<T>(result), opt);
      if (whole)
        EXPECT_EQ(result, expected);
      else if (layout == ResultLayout::own)
        EXPECT_EQ(result, std::vector<T>(expected.begin() + block.first * row,
                                         expected.begin() + (block.first + block.count) * row));
      else
        EXPECT_TRUE(result.empty());
    }
}

TEST(MpiStack, EveryLayoutIsTheOneProcessResultBitForBit) {
  for (const std::int64_t nshifts : {1, 2, 10, 301}) {  // fewer than the ranks, uneven, even
    check_every_layout<float>(nshifts, Method::stack, false);
    check_every_layout<double>(nshifts, Method::max, false);
  }
}

TEST(MpiStack, AccumulatingAddsToEachRanksRows) {
  check_every_layout<double>(11, Method::stack, true);
  check_every_layout<float>(4, Method::stack, true);
}

TEST(MpiStack, RanksThatDisagreeFailOnEveryRank) {
  const auto& comm = world();
  if (!comm.distributed()) GTEST_SKIP() << "needs 2 ranks or more";
  const int odd = comm.size() - 1;
  Problem<double> p(5, 20, 50, 3);
  ParstackOptions opt;
  opt.comm = comm;
  std::vector<double> out(20 * 1000);
  // One rank's weights differ.
  if (comm.rank() == odd) p.weights[17] = 0.25;
  expect_error_on_every_rank<InvalidArgument>(
      [&] { stack::parstack<double>(kCpu, p.input(), std::span<double>(out), opt); },
      fmt::format("the ranks disagree on the values of weights: rank 0 and rank {}", odd));
  p.weights[17] = Problem<double>(5, 20, 50, 3).weights[17];
  // One rank asks for the maximum.
  ParstackOptions other = opt;
  if (comm.rank() == odd) other.method = Method::max;
  expect_error_on_every_rank<InvalidArgument>(
      [&] { stack::parstack<double>(kCpu, p.input(), std::span<double>(out), other); },
      fmt::format("the ranks disagree on method: rank 0 passed 0, rank {} passed 1", odd));
  // One rank passes float32.
  if (comm.rank() == odd) {
    Problem<float> f(5, 20, 50, 3);
    std::vector<float> outf(20 * 1000);
    ParstackOptions fo = opt;
    expect_error_on_every_rank<InvalidArgument>(
        [&] { stack::parstack<float>(kCpu, f.input(), std::span<float>(outf), fo); },
        "the ranks disagree on dtype (bytes per sample): rank 0 passed 8");
  } else {
    expect_error_on_every_rank<InvalidArgument>(
        [&] { stack::parstack<double>(kCpu, p.input(), std::span<double>(out), opt); },
        "the ranks disagree on dtype (bytes per sample): rank 0 passed 8");
  }
}

TEST(MpiStack, BadInputOnOneRankFailsOnEveryRankNamingIt) {
  const auto& comm = world();
  const int bad = comm.size() - 1;
  Problem<double> p(5, 20, 50, 3);
  if (comm.rank() == bad) p.data[2][9] = std::nan("");
  ParstackOptions opt;
  opt.comm = comm;
  std::vector<double> out(1);
  const std::string where =
      comm.distributed() ? fmt::format("rank {} of {}: traces[2]", bad, comm.size()) : "traces[2]";
  expect_error_on_every_rank<InvalidArgument>(
      [&] { stack::parstack<double>(kCpu, p.input(), std::span<double>(out), opt); }, where);
  // A result of the wrong size on rank 0 only.
  Problem<double> q(5, 20, 50, 3);
  const auto e = stack::parstack_extent(q.input(), ParstackOptions{});
  std::vector<double> result(20 * e.lengthout + (comm.rank() == 0 ? 1 : 0));
  expect_error_on_every_rank<InvalidArgument>(
      [&] { stack::parstack<double>(kCpu, q.input(), std::span<double>(result), opt); },
      comm.distributed()
          ? fmt::format("rank 0 of {}: result: expected {} elements", comm.size(), 20 * e.lengthout)
          : fmt::format("= {} elements, got {}", 20 * e.lengthout, 20 * e.lengthout + 1));
}

// The harness's parstack case on the ranks verifies against one process's reference on rank 0
// and reports the ranks' traffic and timers.
TEST(MpiStack, HarnessRunsTheCaseOnTheRanks) {
  const auto& comm = world();
  HarnessOptions options;
  options.comm = comm;
  options.repetitions = 2;
  options.measure_roofline = false;
  const CaseSettings settings{
      {{"ntraces", "6"}, {"nshifts", "37"}, {"nsamples", "500"}, {"dtype", "float32"}}};
  const auto results = run_case(find_case("parstack"), settings, {kCpu}, options);
  const auto& report = results.front().report;
  if (comm.rank() == 0) {
    ASSERT_TRUE(report.verification.has_value());
    EXPECT_TRUE(report.passed()) << report.verification->summary();
  }
  if (!comm.distributed()) {
    EXPECT_FALSE(report.ranks.has_value());
    return;
  }
  ASSERT_TRUE(report.ranks.has_value());
  EXPECT_EQ(report.ranks->ranks, comm.size());
  EXPECT_GT(report.ranks->bytes_exchanged, 0);
  if (comm.rank() == 0) {
    EXPECT_NE(report.ranks->timers.find("parstack/exchange"), nullptr);
    EXPECT_NE(report.ranks->timers.find("parstack/stack"), nullptr);
  }
}

}  // namespace
}  // namespace sciproxy::test
