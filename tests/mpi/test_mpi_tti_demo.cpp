// The workshop operator (tti_demo) on 1, 2 and 3 ranks against one process, bit for bit: float
// and double, space orders 4 and 8, both forms, one step per sweep (u+ on the block only) and two
// (the whole window stepped), materials that vary
// per point and constant ones, process grids chosen and given along each axis (blocks of unequal
// size), a source whose eight corners straddle the boundary between two ranks (and a rank holding
// none), an odd nt (the last sweep one step), an initial state, and the three result layouts,
// which tti_demo_block gives without running.
// A process grid that does not fit, ranks that disagree, and other backends fail on every rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <type_traits>
#include <vector>

#include "core/collective.hpp"
#include "mpi_test.hpp"
#include "sciproxy/core/cancel.hpp"
#include "sciproxy/tti_demo.hpp"

namespace sciproxy::test {
namespace {

using tti::TtiDemoForm;
using tti::TtiDemoOptions;
using Index = std::array<std::int64_t, 3>;

const Device kCpu{Backend::cpu, 0, false};

// A problem on `shape` points of 10 m: materials random per point (varying) or the demo's
// constants, a Ricker source at `source` (grid units), nt steps at 0.9 of the stability limit.
template <class T>
struct DemoProblem {
  tti::TtiDemoInput<T> in;
  std::vector<std::vector<T>> fields;  // the materials', the amplitudes', the initial state's
  TtiDemoOptions opt;

  DemoProblem(const Index& shape, bool varying, const std::array<double, 3>& source,
              std::int64_t nt, int order, bool initial = false) {
    in.shape = shape;
    in.spacing = {10, 10, 10};
    in.nt = nt;
    const std::int64_t points = shape[0] * shape[1] * shape[2];
    std::mt19937 rng(4321 + order);
    auto field = [&](double constant, double spread) {
      if (!varying) return std::vector<T>{T(constant)};
      std::uniform_real_distribution<double> d(constant - spread, constant + spread);
      std::vector<T> v(static_cast<std::size_t>(points));
      for (auto& x : v) x = T(d(rng));
      return v;
    };
    fields = {field(1500, 300), field(1, 0.3),   field(0.2, 0.1), field(0.4, 0.2),
              field(0.85, 0.1), field(0.5, 0.4), field(0.3, 1.0), field(0.002, 0.002)};
    auto& m = in.material;
    std::span<const T>* spans[] = {&m.vp, &m.b,     &m.epsilon, &m.eta,
                                   &m.f,  &m.theta, &m.phi,     &m.damping};
    for (int i = 0; i < 8; ++i) *spans[i] = fields[static_cast<std::size_t>(i)];
    for (int d = 0; d < 3; ++d) in.source_position[d] = source[d] * in.spacing[d];
    opt.space_order = order;
    opt.nparallel = 1;  // the ranks share the machine's cores
    in.dt = 1;
    in.dt = 0.9 * tti::tti_demo_dt_limit(in, order);
    const auto wavelet = tti::ricker_wavelet<T>(15.0, in.dt, nt);
    fields.emplace_back(wavelet.begin(), wavelet.end());
    in.source_amplitudes = fields.back();
    if (initial) {
      std::normal_distribution<double> d(0, 1);
      for (int k = 0; k < 2; ++k) {
        std::vector<T> v(static_cast<std::size_t>(points));
        for (auto& x : v) x = T(d(rng));
        fields.push_back(std::move(v));
      }
      in.initial_u = fields[fields.size() - 2];
      in.initial_u_prev = fields.back();
    }
  }
};

template <class T>
auto bits(T x) {
  return std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(x);
}

template <class T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& expected, const char* what) {
  ASSERT_EQ(got.size(), expected.size()) << what << " on rank " << world().rank();
  std::size_t differ = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (bits(got[i]) != bits(expected[i]) && differ++ == 0) first = i;
  EXPECT_EQ(differ, 0u) << what << " on rank " << world().rank() << ": first of " << differ
                        << " at " << first << ": " << got[first] << " vs " << expected[first];
}

// Runs the problem on one process and on the world's ranks; expects the bits of one process on
// every rank (results all_ranks), on rank 0 alone (root) and in each rank's block (own).
template <class T>
void expect_one_process(const DemoProblem<T>& p, const TtiDemoOptions& opt,
                        bool every_layout = false) {
  TtiDemoOptions alone = opt;
  alone.process_grid = {0, 0, 0};
  const auto one = tti::tti_demo<T>(kCpu, p.in, alone);
  double largest = 0;  // a wave that moved: not a comparison of zeros
  for (const T x : one.u) largest = std::max(largest, std::abs(double(x)));
  ASSERT_GT(largest, 0.0);
  TtiDemoOptions ranks = opt;
  ranks.comm = world();
  const auto all = tti::tti_demo<T>(kCpu, p.in, ranks);
  expect_same_bits(all.u, one.u, "u");
  expect_same_bits(all.u_prev, one.u_prev, "u_prev");
  EXPECT_EQ(all.block_shape, p.in.shape);
  for (int a = 0; a < 3; ++a) {
    if (opt.process_grid[a] > 0) {
      EXPECT_EQ(all.process_grid[a], opt.process_grid[a]);
    }
  }
  if (!every_layout) return;

  ranks.results = ResultLayout::root;
  const auto root = tti::tti_demo<T>(kCpu, p.in, ranks);
  if (world().rank() == 0) {
    expect_same_bits(root.u, one.u, "u (root)");
  } else {
    EXPECT_TRUE(root.u.empty());
    EXPECT_EQ(root.block_shape, (Index{0, 0, 0}));
  }

  ranks.results = ResultLayout::own;
  const auto own = tti::tti_demo<T>(kCpu, p.in, ranks);
  const Index o = own.block_origin, s = own.block_shape, n = p.in.shape;
  std::vector<T> expected(static_cast<std::size_t>(s[0] * s[1] * s[2]));
  for (std::int64_t i = 0; i < s[0]; ++i)
    for (std::int64_t j = 0; j < s[1]; ++j)
      for (std::int64_t k = 0; k < s[2]; ++k)
        expected[static_cast<std::size_t>((i * s[1] + j) * s[2] + k)] =
            one.u[static_cast<std::size_t>(((o[0] + i) * n[1] + o[1] + j) * n[2] + o[2] + k)];
  expect_same_bits(own.u, expected, "u (own block)");
  // The blocks cover the grid once.
  std::int64_t covered = s[0] * s[1] * s[2];
  collective::allreduce_sum(world(), std::span<std::int64_t>(&covered, 1));
  EXPECT_EQ(covered, n[0] * n[1] * n[2]);
}

// The first boundary between blocks along an axis of n points split among `ranks`, less 0.4:
// a source there has corners on both sides.
double straddling(std::int64_t n, int ranks) {
  if (ranks == 1) return static_cast<double>(n / 2) + 0.6;
  return static_cast<double>(collective::block_of(n, 1, ranks).first) - 0.4;
}

template <class T>
class MpiTtiDemo : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(MpiTtiDemo, Precisions);

TYPED_TEST(MpiTtiDemo, VaryingFusedTwoStepsSplitAlongXMatchesOneProcess) {
  using T = TypeParam;
  const int n = world().size();
  const Index shape{44, 30, 27};
  DemoProblem<T> p(shape, true, {straddling(44, n), 14.3, 12.7}, 9, 8);
  TtiDemoOptions opt = p.opt;
  opt.process_grid = {n, 1, 1};
  // The static choice: one step per sweep, u+ on the block only.
  expect_one_process(p, opt, true);
  // Two steps per sweep, the whole window stepped (blocks of 14 or more: the ring of 14 fits).
  opt.cpu.sweep_steps = 2;
  expect_one_process(p, opt);
}

TYPED_TEST(MpiTtiDemo, BothFormsSplitAlongYWithInitialStateMatchOneProcess) {
  using T = TypeParam;
  const int n = world().size();
  const Index shape{26, 40, 29};
  DemoProblem<T> p(shape, true, {12.5, straddling(40, n), 13.2}, 7, 8, true);
  TtiDemoOptions opt = p.opt;
  opt.form = TtiDemoForm::two_pass;
  opt.process_grid = {1, n, 1};
  expect_one_process(p, opt);
  opt.form = TtiDemoForm::fused;  // the interior's tiles, then the y shells
  expect_one_process(p, opt);
}

TYPED_TEST(MpiTtiDemo, ConstantOrder4SplitAlongZMatchesOneProcess) {
  using T = TypeParam;
  const int n = world().size();
  const Index shape{24, 22, 37};  // z rows of unequal, unaligned lengths
  DemoProblem<T> p(shape, false, {11.3, 10.6, straddling(37, n)}, 12, 4);
  TtiDemoOptions opt = p.opt;
  opt.process_grid = {1, 1, n};
  expect_one_process(p, opt, true);
}

TEST(MpiTtiDemoOne, ChosenGridAndOneStepSweepsMatchOneProcess) {
  // The process grid chosen for the static choice of steps per sweep, and for one step fixed.
  const Index shape{40, 28, 20};
  DemoProblem<float> p(shape, true, {20.2, 3.5, 0.0}, 8, 8);  // a corner on the grid's edge
  expect_one_process(p, p.opt);
  TtiDemoOptions one_step = p.opt;
  one_step.cpu.sweep_steps = 1;
  expect_one_process(p, one_step);
}

TEST(MpiTtiDemoOne, SourceFarFromMostRanksMatchesOneProcess) {
  const int n = world().size();
  const Index shape{45, 16, 18};
  DemoProblem<double> p(shape, true, {44.0, 15.0, 17.0}, 5, 4);  // the last corner only
  TtiDemoOptions opt = p.opt;
  opt.process_grid = {n, 1, 1};
  expect_one_process(p, opt);
}

// tti_demo_block gives, without running, the part of the grid tti_demo then returns on each
// rank: with the process grid given and chosen, constant and varying materials, every layout.
TEST(MpiTtiDemoOne, BlockIsWhatTheCallReturns) {
  const int n = world().size();
  struct Case {
    Index shape;
    bool varying;
    int order;
    std::array<int, 3> grid;
  };
  const Case cases[] = {{{44, 30, 27}, true, 8, {n, 1, 1}},
                        {{40, 28, 20}, true, 8, {0, 0, 0}},
                        {{24, 22, 37}, false, 4, {0, 0, 0}},
                        {{24, 22, 37}, false, 4, {1, 1, n}}};
  for (const Case& c : cases) {
    DemoProblem<float> p(c.shape, c.varying, {10.5, 10.5, 10.5}, 3, c.order);
    TtiDemoOptions opt = p.opt;
    opt.comm = world();
    opt.process_grid = c.grid;
    for (const ResultLayout layout :
         {ResultLayout::all_ranks, ResultLayout::root, ResultLayout::own}) {
      opt.results = layout;
      const tti::TtiDemoBlock block = tti::tti_demo_block(c.shape, opt);
      const auto out = tti::tti_demo<float>(kCpu, p.in, opt);
      const auto what = ::testing::Message()
                        << "shape " << c.shape[0] << "x" << c.shape[1] << "x" << c.shape[2]
                        << ", layout " << static_cast<int>(layout) << ", rank " << world().rank();
      EXPECT_EQ(block.origin, out.block_origin) << what;
      EXPECT_EQ(block.shape, out.block_shape) << what;
      EXPECT_EQ(block.process_grid, out.process_grid) << what;
      EXPECT_EQ(static_cast<std::int64_t>(out.u.size()),
                block.shape[0] * block.shape[1] * block.shape[2])
          << what;
    }
  }
  // A process grid the call refuses is refused alike, on each rank by itself.
  TtiDemoOptions bad;
  bad.comm = world();
  bad.process_grid = {n + 1, 1, 1};
  EXPECT_THROW(tti::tti_demo_block({26, 30, 30}, bad), InvalidArgument);
  EXPECT_THROW(tti::tti_demo_block({26, 30, 3}, TtiDemoOptions{}), InvalidArgument);
}

TEST(MpiTtiDemoOne, BadProcessGridFailsOnEveryRank) {
  const int n = world().size();
  const Index shape{26, 30, 30};
  DemoProblem<float> p(shape, true, {10, 10, 10}, 4, 8);
  TtiDemoOptions opt = p.opt;
  opt.comm = world();
  opt.process_grid = {n + 1, 1, 1};
  expect_error_on_every_rank<InvalidArgument>([&] { tti::tti_demo<float>(kCpu, p.in, opt); },
                                              "process_grid");
  if (n == 1) return;
  opt.process_grid = {n, 1, 1};
  opt.cpu.sweep_steps = 2;  // a ring of 14 points: 26 / n blocks are too thin
  expect_error_on_every_rank<InvalidArgument>([&] { tti::tti_demo<float>(kCpu, p.in, opt); },
                                              "ghost ring of 2 steps per sweep");
}

TEST(MpiTtiDemoOne, RanksDisagreeingFailOnEveryRank) {
  if (world().size() == 1) GTEST_SKIP() << "one rank cannot disagree with itself";
  const Index shape{30, 24, 20};
  DemoProblem<float> p(shape, true, {10, 10, 10}, 4, 8);
  TtiDemoOptions opt = p.opt;
  opt.comm = world();
  tti::TtiDemoInput<float> in = p.in;
  if (world().rank() == 1) in.dt *= 0.5;
  expect_error_on_every_rank<InvalidArgument>([&] { tti::tti_demo<float>(kCpu, in, opt); },
                                              "the ranks disagree on dt");
  std::vector<float> vp = p.fields[0];
  if (world().rank() == world().size() - 1) vp[17] += 1;
  in = p.in;
  in.material.vp = vp;
  expect_error_on_every_rank<InvalidArgument>([&] { tti::tti_demo<float>(kCpu, in, opt); },
                                              "the ranks disagree on the values of vp");
}

// The autotuner on the ranks: each rank times candidates on its own window, all take rank 0's
// steps per sweep (the ghost ring is sized for two), and the bits are one process's. Blocks of
// 64 or more points along x keep two steps per sweep's ring within 30% of a block.
TEST(MpiTtiDemoOne, AutotunedRunMatchesOneProcess) {
  const int n = world().size();
  const Index shape{64 * n, 20, 18};
  DemoProblem<float> p(shape, true, {straddling(64 * n, n), 10.2, 9.1}, 7, 8);
  TtiDemoOptions opt = p.opt;
  opt.process_grid = {n, 1, 1};
  // A cache of this test's own (per rank: the ranks' windows are tuned apart), not the user's.
  const auto cache = std::filesystem::temp_directory_path() /
                     fmt::format("sciproxy_mpi_autotune_{}_{}", getpid(), world().rank());
  const char* old = std::getenv("SCIPROXY_CACHE_DIR");
  const std::string saved = old ? old : "";
  setenv("SCIPROXY_CACHE_DIR", cache.c_str(), 1);
  opt.autotune = true;
  expect_one_process(p, opt);
  if (old)
    setenv("SCIPROXY_CACHE_DIR", saved.c_str(), 1);
  else
    unsetenv("SCIPROXY_CACHE_DIR");
  std::filesystem::remove_all(cache);
}

// A stop asked on the last rank only stops every rank at the same step (voted with the ring's
// exchange), both modes; nothing hangs.
TEST(MpiTtiDemoOne, CancellationOnOneRankStopsEveryRank) {
  const int n = world().size();
  const Index shape{44, 30, 27};
  DemoProblem<float> p(shape, true, {20, 10, 10}, 6, 8);
  TtiDemoOptions opt = p.opt;
  opt.comm = world();
  opt.process_grid = {n, 1, 1};
  const std::atomic<bool> stop{world().rank() == n - 1};
  const CancelScope scope(&stop);
  for (int steps : {1, 2}) {
    opt.cpu.sweep_steps = steps;
    // One process stops before its first step; ranks vote after their first sweep.
    const std::string at =
        n == 1 ? "cancelled at step 0 of 6" : fmt::format("cancelled at step {} of 6", steps);
    expect_error_on_every_rank<Cancelled>([&] { tti::tti_demo<float>(kCpu, p.in, opt); }, at);
  }
}

TEST(MpiTtiDemoOne, OtherBackendsRefuseSeveralRanks) {
  if (world().size() == 1) GTEST_SKIP() << "one rank runs on every backend";
  const Index shape{20, 20, 20};
  DemoProblem<float> p(shape, false, {10, 10, 10}, 2, 8);
  TtiDemoOptions opt = p.opt;
  opt.comm = world();
  expect_error_on_every_rank<InvalidArgument>(
      [&] {
        tti::tti_demo<float>(Device{Backend::reference, 0, false}, p.in, opt);
      },
      "the cpu backend: tti_demo on several ranks");
}

}  // namespace
}  // namespace sciproxy::test
