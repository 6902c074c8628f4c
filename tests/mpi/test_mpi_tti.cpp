// The coupled P/M TTI propagator on 1, 2 and 3 ranks against one process, bit for bit: float and
// double, space orders 4 and 8, with the sponge and with the free surface, process grids chosen
// and given ({1,1,n}, {n,1,1}), subdomains of unequal sizes, sources and receivers on every cell
// of a line across the subdomains' boundaries, ranks that hold none, several shots, a run
// continued from its returned subdomains, and the adjoint. Bad process grids, and ranks that
// disagree on the model or dt, fail on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/collective.hpp"
#include "mpi_test.hpp"
#include "sciproxy/core/cancel.hpp"
#include "sciproxy/tti.hpp"
#include "tti/tti_problems.hpp"

namespace sciproxy::test {
namespace {

using tti::TtiOptions;
using tti::TtiState;
using tti::test_problems::TtiProblem;
using Index = std::array<std::int64_t, 3>;

const Device kCpu{Backend::cpu, 0, false};

// A random heterogeneous tilted problem of `shape` cells with the sponge {2, 3, 4, 1, 0, 3}
// (uneven: the blocks of the ranks differ in size), nshots shots of `points` sources and
// receivers each.
template <class T>
void make_problem(TtiProblem<T>& p, int order, bool free_surface, std::int64_t nt,
                  const std::array<double, 3>& shape, std::int64_t nshots = 1,
                  std::int64_t points = 4) {
  tti::test_problems::random_problem(p, order, free_surface, nt, 1234 + order,
                                     {shape, {0, 0, 0}, nshots, points, points});
  p.opt.nparallel = 1;  // the ranks share the machine's cores
}

// One process's result (every rank computes it alone) and the ranks'.
template <class T>
struct Runs {
  tti::TtiOutput<T> alone, ranks;
};

template <class T>
Runs<T> run_both(const TtiProblem<T>& p, const TtiOptions& opt,
                 const TtiState<T>* initial = nullptr) {
  Runs<T> r;
  TtiOptions alone = opt;
  alone.process_grid = {0, 0, 0};  // one process: the grid {1, 1, 1}
  r.alone = tti::tti_forward<T>(kCpu, p.in, alone, initial);
  TtiOptions distributed = opt;
  distributed.comm = world();
  r.ranks = tti::tti_forward<T>(kCpu, p.in, distributed, initial);
  return r;
}

// The bits of x (so that -0 and +0, or two NaNs, are told apart).
template <class T>
auto bits(T x) {
  return std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(x);
}

template <class T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& expected, const char* what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  std::size_t differ = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (bits(got[i]) != bits(expected[i]) && differ++ == 0) first = i;
  EXPECT_EQ(differ, 0u) << what << " on rank " << world().rank() << ": first at " << first << ": "
                        << got[first] << " vs " << expected[first];
}

// A rank's subdomain state against the window of the whole state: its own cells bit for bit,
// zeros elsewhere. Returns the number of own cells (to check the ranks cover the grid).
template <class T>
std::int64_t expect_window(const TtiState<T>& mine, const TtiState<T>& whole, std::int64_t halo,
                           std::int64_t nshots) {
  const Index& ln = mine.padded_shape;
  const Index& n = whole.padded_shape;
  const Index& o = mine.subdomain_origin;
  for (int a = 0; a < 3; ++a)
    EXPECT_EQ(mine.model_offset[a], whole.model_offset[a] - o[a]) << "axis " << a;
  const std::int64_t local = ln[0] * ln[1] * ln[2], points = n[0] * n[1] * n[2];
  std::int64_t own = 0, differ = 0;
  for (std::int64_t shot = 0; shot < nshots; ++shot)
    for (std::int64_t i0 = 0; i0 < ln[0]; ++i0)
      for (std::int64_t i1 = 0; i1 < ln[1]; ++i1)
        for (std::int64_t i2 = 0; i2 < ln[2]; ++i2) {
          const Index i{i0, i1, i2};
          bool is_own = true;
          for (int a = 0; a < 3; ++a) is_own = is_own && i[a] >= halo && i[a] < ln[a] - halo;
          const std::int64_t k = shot * local + (i0 * ln[1] + i1) * ln[2] + i2;
          const std::int64_t g =
              shot * points + ((o[0] + i0) * n[1] + o[1] + i1) * n[2] + o[2] + i2;
          if (is_own) {
            own += shot == 0;
            differ += bits(mine.p[k]) != bits(whole.p[g]) ||
                      bits(mine.p_prev[k]) != bits(whole.p_prev[g]) ||
                      bits(mine.m[k]) != bits(whole.m[g]) ||
                      bits(mine.m_prev[k]) != bits(whole.m_prev[g]);
          } else {
            differ +=
                mine.p[k] != 0 || mine.p_prev[k] != 0 || mine.m[k] != 0 || mine.m_prev[k] != 0;
          }
        }
  EXPECT_EQ(differ, 0) << "state cells differing on rank " << world().rank();
  return own;
}

// Everything a distributed forward run returns against one process's.
template <class T>
void expect_equal_runs(const Runs<T>& r, const TtiOptions& opt, std::int64_t nshots) {
  const std::int64_t halo = opt.space_order / 2;
  expect_same_bits(r.ranks.receiver_amplitudes, r.alone.receiver_amplitudes, "receiver_amplitudes");
  const std::int64_t own = expect_window(r.ranks.state, r.alone.state, halo, nshots);
  // The ranks' own cells tile the grid of model and sponge.
  std::int64_t cells = 1;
  for (int a = 0; a < 3; ++a) cells *= r.alone.state.padded_shape[a] - 2 * halo;
  std::vector<std::int64_t> counts{own};
  collective::allreduce_sum(world(), std::span<std::int64_t>(counts));
  EXPECT_EQ(counts[0], cells);
  if (world().size() > 1) {
    EXPECT_LT(own, cells) << "rank " << world().rank() << " holds all";
  }
  double energy = 0;
  for (T v : r.alone.receiver_amplitudes) energy += double(v) * double(v);
  EXPECT_GT(energy, 0) << "the receivers recorded nothing: the test would compare zeros";
}

// Sources and receivers on every model cell of a line along `axis` (through the middle of the
// other axes; make_problem with as many points as cells along it), so that some sit on each side
// of every boundary between subdomains, next to it and on it.
template <class T>
void line_of_points(TtiProblem<T>& p, int axis) {
  for (auto* loc : {&p.sources, &p.receivers}) {
    const auto count = static_cast<std::int64_t>(loc->size() / 3);
    for (std::int64_t k = 0; k < count; ++k)
      for (int a = 0; a < 3; ++a)
        (*loc)[3 * k + a] = a == axis ? k % p.grid.shape[a] : p.grid.shape[a] / 2;
  }
}

template <class T>
class MpiTti : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(MpiTti, Precisions);

TYPED_TEST(MpiTti, SpongeOrder8ChosenGridMatchesOneProcess) {
  using T = TypeParam;
  TtiProblem<T> p;
  make_problem(p, 8, false, 14, {15, 12, 13});
  expect_equal_runs(run_both(p, p.opt), p.opt, 1);
}

TYPED_TEST(MpiTti, FreeSurfaceOrder4ChosenGridMatchesOneProcess) {
  using T = TypeParam;
  TtiProblem<T> p;
  make_problem(p, 4, true, 16, {12, 9, 11}, 2);
  expect_equal_runs(run_both(p, p.opt), p.opt, 2);
}

// The slowest axis split: the top rank mirrors about the free surface and its neighbours take
// their halos from it; sources and receivers on a line across every boundary.
TYPED_TEST(MpiTti, FreeSurfaceSplitAlongDepthMatchesOneProcess) {
  using T = TypeParam;
  for (int order : {4, 8}) {
    TtiProblem<T> p;
    make_problem(p, order, true, 12, {17, 8, 9}, 1, 17);
    line_of_points(p, 0);
    TtiOptions opt = p.opt;
    opt.process_grid = {world().size(), 1, 1};
    const Runs<T> r = run_both(p, opt);
    expect_equal_runs(r, opt, 1);
    if (world().size() > 1) {
      EXPECT_LT(r.ranks.state.padded_shape[0], r.alone.state.padded_shape[0]);
    }
  }
}

// The contiguous axis split, every source and receiver in the first column: the other ranks
// hold none, and get the traces from rank 0.
TYPED_TEST(MpiTti, FastAxisSplitRanksWithoutPointsMatchOneProcess) {
  using T = TypeParam;
  TtiProblem<T> p;
  make_problem(p, 8, false, 12, {9, 10, 19}, 1, 9);
  line_of_points(p, 0);
  for (auto* loc : {&p.sources, &p.receivers})
    for (std::size_t k = 2; k < loc->size(); k += 3) (*loc)[k] = 0;
  TtiOptions opt = p.opt;
  opt.process_grid = {1, 1, world().size()};
  const Runs<T> r = run_both(p, opt);
  expect_equal_runs(r, opt, 1);
  if (world().size() > 1) {
    EXPECT_LT(r.ranks.state.padded_shape[2], r.alone.state.padded_shape[2]);
  }
}

// Two OpenMP threads per rank (the messages polled by thread 0 while the others compute), and
// ranks running different thread counts: the same bits as one process on one thread.
TEST(MpiTtiOne, ThreadsPerRankDoNotChangeTheBits) {
  TtiProblem<float> p;
  make_problem(p, 8, true, 10, {16, 9, 10}, 1, 16);
  line_of_points(p, 0);
  TtiOptions alone = p.opt;
  TtiOptions distributed = p.opt;
  distributed.comm = world();
  distributed.nparallel = world().rank() % 2 == 0 ? 2 : 1;
  const auto one = tti::tti_forward<float>(kCpu, p.in, alone);
  const auto ranks = tti::tti_forward<float>(kCpu, p.in, distributed);
  expect_equal_runs(Runs<float>{one, ranks}, p.opt, 1);
}

// A stop asked on the last rank only stops every rank at the same step (voted with the fields'
// exchange); nothing hangs.
TEST(MpiTtiOne, CancellationOnOneRankStopsEveryRank) {
  TtiProblem<float> p;
  make_problem(p, 8, true, 10, {16, 9, 10}, 1, 16);
  TtiOptions opt = p.opt;
  opt.comm = world();
  const std::atomic<bool> stop{world().rank() == world().size() - 1};
  const CancelScope scope(&stop);
  expect_error_on_every_rank<Cancelled>([&] { tti::tti_forward<float>(kCpu, p.in, opt); },
                                        "tti: cancelled at step 0 of 10");
}

// A model long along axis 1: the chosen grid splits axis 1 (the smallest faces).
TEST(MpiTtiOne, ChosenGridSplitsTheLongAxis) {
  TtiProblem<float> p;
  make_problem(p, 4, false, 6, {6, 40, 7}, 1, 40);
  line_of_points(p, 1);
  const Runs<float> r = run_both(p, p.opt);
  expect_equal_runs(r, p.opt, 1);
  for (int a : {0, 2}) EXPECT_EQ(r.ranks.state.padded_shape[a], r.alone.state.padded_shape[a]);
}

// A run continued from the subdomains a distributed run returned, and one started from a state
// on the whole grid, against one process continuing from its own state.
TEST(MpiTtiOne, ContinuedRunsMatchOneProcess) {
  TtiProblem<double> p;
  make_problem(p, 8, true, 10, {14, 10, 11}, 1, 14);
  line_of_points(p, 0);
  TtiOptions opt = p.opt;
  const Runs<double> first = run_both(p, opt);
  expect_equal_runs(first, opt, 1);
  TtiOptions distributed = opt;
  distributed.comm = world();
  const auto alone = tti::tti_forward<double>(kCpu, p.in, opt, &first.alone.state);
  const auto from_subdomain = tti::tti_forward<double>(kCpu, p.in, distributed, &first.ranks.state);
  const auto from_whole = tti::tti_forward<double>(kCpu, p.in, distributed, &first.alone.state);
  for (const auto* r : {&from_subdomain, &from_whole})
    expect_equal_runs(Runs<double>{alone, *r}, opt, 1);
}

TYPED_TEST(MpiTti, AdjointMatchesOneProcess) {
  using T = TypeParam;
  for (bool free_surface : {false, true}) {
    TtiProblem<T> p;
    make_problem(p, 8, free_surface, 12, {16, 9, 10}, 2, 16);
    line_of_points(p, 0);
    TtiOptions opt = p.opt;
    const auto alone = tti::tti_adjoint<T>(kCpu, p.in, std::span<const T>(p.data), opt);
    opt.comm = world();
    opt.process_grid = {0, 1, 1};  // axis 0 chosen: every rank along it
    const auto ranks = tti::tti_adjoint<T>(kCpu, p.in, std::span<const T>(p.data), opt);
    expect_same_bits(ranks.source_amplitudes, alone.source_amplitudes, "source_amplitudes");
    double energy = 0;
    for (T v : alone.source_amplitudes) energy += double(v) * double(v);
    EXPECT_GT(energy, 0);
  }
}

TEST(MpiTtiOne, BadProcessGridFailsOnEveryRank) {
  TtiProblem<float> p;
  make_problem(p, 8, false, 4, {10, 10, 10});
  TtiOptions opt = p.opt;
  opt.comm = world();
  opt.process_grid = {1, 1, world().size() + 1};
  expect_error_on_every_rank<InvalidArgument>([&] { tti::tti_forward<float>(kCpu, p.in, opt); },
                                              "process_grid");
  opt.process_grid = {0, world().size() + 1, 0};  // the entry kept, no grid of the ranks
  expect_error_on_every_rank<InvalidArgument>([&] { tti::tti_forward<float>(kCpu, p.in, opt); },
                                              "process_grid");
  opt.process_grid = {-1, 0, 0};
  expect_error_on_every_rank<InvalidArgument>([&] { tti::tti_forward<float>(kCpu, p.in, opt); },
                                              "process_grid");
  if (world().size() == 1) return;  // one rank is never too many
  // 4 cells of model and no sponge along axis 1: fewer than space_order/2 = 4 per rank.
  TtiProblem<float> thin;
  make_problem(thin, 8, false, 4, {10, 4, 10});
  thin.opt.sponge_width = {2, 2, 0, 0, 2, 2};
  thin.in.dt = 0.9 * tti::tti_max_dt(thin.in.model, thin.opt);
  TtiOptions split = thin.opt;
  split.comm = world();
  split.process_grid = {1, world().size(), 1};
  expect_error_on_every_rank<InvalidArgument>(
      [&] { tti::tti_forward<float>(kCpu, thin.in, split); }, "process_grid");
}

TEST(MpiTtiOne, RanksDisagreeingFailOnEveryRank) {
  if (world().size() == 1) GTEST_SKIP() << "one rank cannot disagree with itself";
  TtiProblem<float> p;
  make_problem(p, 4, false, 4, {8, 8, 8});
  TtiOptions opt = p.opt;
  opt.comm = world();
  tti::TtiInput<float> in = p.in;
  std::vector<float> vp = p.vp;
  if (world().rank() == world().size() - 1) vp[5] *= 1.01f;
  in.model.vp = vp;
  expect_error_on_every_rank<InvalidArgument>([&] { tti::tti_forward<float>(kCpu, in, opt); },
                                              "vp");
  in = p.in;
  if (world().rank() == 1) in.dt *= 0.99;
  expect_error_on_every_rank<InvalidArgument>([&] { tti::tti_forward<float>(kCpu, in, opt); },
                                              "dt");
  // Bad input on every rank alike: the same error everywhere, not a hang.
  in = p.in;
  in.dt = -1;
  expect_error_on_every_rank<InvalidArgument>([&] { tti::tti_forward<float>(kCpu, in, opt); },
                                              "dt");
}

TEST(MpiTtiOne, OtherBackendsRefuseSeveralRanks) {
  if (world().size() == 1) GTEST_SKIP() << "one rank runs on every backend";
  TtiProblem<float> p;
  make_problem(p, 4, false, 4, {8, 8, 8});
  TtiOptions opt = p.opt;
  opt.comm = world();
  for (const Device& device :
       {Device{Backend::reference, 0, false}, Device{Backend::cuda, 0, false}})
    expect_error_on_every_rank<InvalidArgument>([&] { tti::tti_forward<float>(device, p.in, opt); },
                                                "device");
}

}  // namespace
}  // namespace sciproxy::test
