// The communicator and the collective calls under mpiexec (1, 2 and 3 ranks): blocks, rows
// gathered, scattered and shared, errors every rank throws alike, disagreement detected, the
// multi-rank timer table, the traffic counted, bad handles refused, a harness case that runs on
// one rank only refused on several.
#include <gtest/gtest.h>
#include <mpi.h>

#include <numeric>

#include "core/collective.hpp"
#include "mpi_test.hpp"
#include "sciproxy/core/harness.hpp"
#include "sciproxy/core/timers.hpp"

namespace sciproxy::test {
namespace {

TEST(MpiCore, WorldIsTheLaunchersRanks) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(world().rank(), rank);
  EXPECT_EQ(world().size(), size);
  EXPECT_EQ(world().distributed(), size > 1);
  EXPECT_EQ(world().nodes(), 1);  // the tests run on one machine
  EXPECT_EQ(world().ranks_on_node(), size);
  EXPECT_TRUE(mpi_compiled());
  EXPECT_NE(mpi_library_version(), "");
}

TEST(MpiCore, BlocksCoverEveryRowOnce) {
  for (std::int64_t n : {0, 1, 2, 7, 1000, 1001})
    for (int size : {1, 2, 3, 5}) {
      std::int64_t next = 0;
      for (int r = 0; r < size; ++r) {
        const auto b = collective::block_of(n, r, size);
        EXPECT_EQ(b.first, next) << n << " rows, rank " << r << " of " << size;
        EXPECT_GE(b.count, n / size);
        EXPECT_LE(b.count, n / size + 1);
        next += b.count;
      }
      EXPECT_EQ(next, n);
    }
}

// Rows of 3 values, rank r owning r + 1 rows (uneven on purpose; the last rank's block is the
// longest), value = 100 * row + column.
TEST(MpiCore, RowsGatherScatterAndShare) {
  const auto& comm = world();
  const std::int64_t row = 3;
  std::vector<std::int64_t> counts;
  for (int r = 0; r < comm.size(); ++r) counts.push_back(r + 1);
  const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t(0));
  std::int64_t first = 0;
  for (int r = 0; r < comm.rank(); ++r) first += counts[r];
  const std::int64_t own = counts[comm.rank()];
  std::vector<double> expected(total * row);
  for (std::int64_t i = 0; i < total * row; ++i) expected[i] = 100.0 * (i / row) + double(i % row);
  std::vector<double> mine(expected.begin() + first * row, expected.begin() + (first + own) * row);

  const int root = comm.size() - 1;
  std::vector<double> gathered(comm.rank() == root ? total * row : 0);
  collective::gather_rows<double>(comm, mine, gathered, counts, row, root);
  if (comm.rank() == root) {
    EXPECT_EQ(gathered, expected);
  }

  std::vector<double> shared(total * row, -1.0);
  std::copy(mine.begin(), mine.end(), shared.begin() + first * row);
  collective::allgather_rows<double>(comm, shared, counts, row);
  EXPECT_EQ(shared, expected);

  std::vector<double> received(own * row, -1.0);
  collective::scatter_rows<double>(comm, comm.rank() == root ? expected : std::vector<double>(),
                                   received, counts, row, root);
  EXPECT_EQ(received, mine);

  std::vector<double> sum{double(comm.rank()), 1.0};
  collective::allreduce_sum<double>(comm, sum);
  EXPECT_EQ(sum[0], comm.size() * (comm.size() - 1) / 2.0);
  EXPECT_EQ(sum[1], comm.size());
}

TEST(MpiCore, AnErrorOnOneRankIsEveryRanksError) {
  const auto& comm = world();
  const int failing = comm.size() - 1;
  expect_error_on_every_rank<InvalidArgument>(
      [&] {
        collective::on_every_rank(comm, [&] {
          if (comm.rank() == failing) throw_invalid_argument("shifts", "finite values", "NaN");
        });
      },
      comm.distributed() ? fmt::format("rank {} of {}: shifts: expected finite values, got NaN",
                                       failing, comm.size())
                         : "shifts: expected finite values, got NaN");
  // The kind survives: an out-of-memory refusal stays one, and the next call works.
  expect_error_on_every_rank<OutOfMemory>(
      [&] {
        collective::on_every_rank(comm, [&] {
          if (comm.rank() == 0) throw OutOfMemory("the stack needs 90 GiB");
        });
      },
      "the stack needs 90 GiB");
  EXPECT_NO_THROW(collective::on_every_rank(comm, [] {}));
}

TEST(MpiCore, RanksThatDisagreeAreToldWhere) {
  const auto& comm = world();
  if (!comm.distributed()) GTEST_SKIP() << "needs 2 ranks or more";
  const int odd = comm.size() - 1;
  std::vector<collective::Field> fields{{"ntraces", 30},
                                        {"nshifts", comm.rank() == odd ? 999 : 1000}};
  expect_error_on_every_rank<InvalidArgument>(
      [&] { collective::require_same(comm, fields, "parstack"); },
      fmt::format("parstack: the ranks disagree on nshifts: rank 0 passed 1000, rank {} passed 999",
                  odd));
  std::vector<double> weights(10, 1.0);
  if (comm.rank() == odd) weights[7] = 2.0;
  const std::vector<collective::Field> hashed{
      {"weights", collective::hash_of(std::span<const double>(weights)), true}};
  expect_error_on_every_rank<InvalidArgument>(
      [&] { collective::require_same(comm, hashed, "parstack"); },
      fmt::format("the ranks disagree on the values of weights: rank 0 and rank {}", odd));
  // A rank on another code path passes another list of fields.
  std::vector<collective::Field> other = fields;
  other[1].value = 1000;
  if (comm.rank() == odd) other.push_back({"accumulate", 1});
  expect_error_on_every_rank<InvalidArgument>(
      [&] { collective::require_same(comm, other, "parstack"); }, "different kinds of arguments");
  fields[1].value = 1000;
  EXPECT_NO_THROW(collective::require_same(comm, fields, "parstack"));
}

TEST(MpiCore, TimerTableHasEveryRanksMinAvgMax) {
  const auto& comm = world();
  Timers timers;
  // Rank r spends r + 1 units in "work"; only the last rank opens "extra".
  timers.record("work", 0.01 * (comm.rank() + 1));
  if (comm.rank() == comm.size() - 1) timers.record("extra", 0.5);
  const auto table = RankTimers::gather(timers, comm, 0);
  if (comm.rank() != 0) {
    EXPECT_TRUE(table.stats().empty());
    return;
  }
  const auto* work = table.find("work");
  ASSERT_NE(work, nullptr);
  EXPECT_EQ(work->ranks, comm.size());
  EXPECT_EQ(work->calls, comm.size());
  EXPECT_DOUBLE_EQ(work->total_min, 0.01);
  EXPECT_EQ(work->rank_of_min, 0);
  EXPECT_DOUBLE_EQ(work->total_max, 0.01 * comm.size());
  EXPECT_EQ(work->rank_of_max, comm.size() - 1);
  EXPECT_NEAR(work->total_avg, 0.01 * (comm.size() + 1) / 2.0, 1e-15);
  const auto* extra = table.find("extra");
  ASSERT_NE(extra, nullptr);
  EXPECT_EQ(extra->ranks, 1);
  if (comm.distributed()) {  // some ranks never opened it
    EXPECT_EQ(extra->rank_of_min, -1);
  }
  EXPECT_NE(table.table().find("total max (rank)"), std::string::npos);
}

TEST(MpiCore, TrafficCountsWhatARankSent) {
  const auto& comm = world();
  const auto before = comm.traffic();
  std::vector<std::int64_t> counts(comm.size(), 2);
  std::vector<float> all(2 * 4 * comm.size(), 1.0f);
  collective::allgather_rows<float>(comm, all, counts, 4);
  const auto after = comm.traffic();
  if (!comm.distributed()) {
    EXPECT_EQ(after.bytes_sent, before.bytes_sent);  // nothing leaves a lone process
    return;
  }
  // Its 2 rows of 4 floats to each other rank.
  EXPECT_DOUBLE_EQ(after.bytes_sent - before.bytes_sent, 2 * 4 * 4.0 * (comm.size() - 1));
  EXPECT_DOUBLE_EQ(after.bytes_received - before.bytes_received, 2 * 4 * 4.0 * (comm.size() - 1));
  EXPECT_EQ(after.messages, before.messages + 1);
  EXPECT_GE(after.wait_seconds, before.wait_seconds);
}

// A ring: each rank sends its rank's values to the next and receives the previous rank's,
// computing while they travel.
TEST(MpiCore, NeighboursExchangeWhileTheCallerComputes) {
  const auto& comm = world();
  if (!comm.distributed()) {
    EXPECT_NO_THROW(collective::start_exchange<double>(comm, {}).wait());
    return;
  }
  const int next = (comm.rank() + 1) % comm.size();
  const int previous = (comm.rank() + comm.size() - 1) % comm.size();
  std::vector<double> send(1000, comm.rank()), from_previous(1000, -1), from_next(1000, -1);
  std::vector<collective::Message<double>> messages{{next, send, {}},
                                                    {previous, {}, from_previous}};
  if (comm.size() > 2) {  // both ways: two messages to one neighbour need two tags or one list
    messages.push_back({previous, send, {}});
    messages.push_back({next, {}, from_next});
  }
  const auto before = comm.traffic();
  auto pending = collective::start_exchange<double>(comm, messages, 3);
  double busy = 0;
  for (int i = 0; i < 1000; ++i) busy += i;  // the interior's work
  pending.wait();
  EXPECT_EQ(busy, 499500.0);
  EXPECT_EQ(from_previous, std::vector<double>(1000, previous));
  if (comm.size() > 2) {
    EXPECT_EQ(from_next, std::vector<double>(1000, next));
  }
  const auto after = comm.traffic();
  EXPECT_DOUBLE_EQ(after.bytes_sent - before.bytes_sent, 8000.0 * (comm.size() > 2 ? 2 : 1));
  // A message to oneself is refused, on this rank.
  std::vector<collective::Message<double>> self{{comm.rank(), send, {}}};
  EXPECT_THROW(collective::start_exchange<double>(comm, self), InvalidArgument);
}

// Large messages (beyond any eager limit) completed by test() alone, as a caller computing
// while they travel would: the data are there before wait(), which then returns at once.
TEST(MpiCore, ExchangesCompleteByTestAlone) {
  const auto& comm = world();
  if (!comm.distributed()) {
    EXPECT_TRUE(collective::start_exchange<double>(comm, {}).test());
    return;
  }
  const int next = (comm.rank() + 1) % comm.size();
  const int previous = (comm.rank() + comm.size() - 1) % comm.size();
  const std::size_t n = 1 << 18;  // 2 MiB
  std::vector<double> send(n, comm.rank()), from_previous(n, -1);
  std::vector<collective::Message<double>> messages{{next, send, {}},
                                                    {previous, {}, from_previous}};
  auto pending = collective::start_exchange<double>(comm, messages, 4);
  bool done = false;
  for (long polls = 0; polls < 100000000 && !done; ++polls) done = pending.test();
  ASSERT_TRUE(done);
  EXPECT_EQ(from_previous, std::vector<double>(n, previous));
  EXPECT_TRUE(pending.test());
  pending.wait();
}

TEST(MpiCore, HandlesThatAreNoCommunicatorAreRefused) {
  EXPECT_EQ(Communicator::from_handle(kNoCommunicator).size(), 1);
  expect_error_on_every_rank<InvalidArgument>(
      [] { Communicator::from_handle(MPI_Comm_c2f(MPI_COMM_NULL), "comm"); },
      "comm: expected the handle of a communicator");
  expect_error_on_every_rank<InvalidArgument>(
      [] { Communicator::from_handle(1 << 30, "options.comm"); },
      "options.comm: expected the handle of a communicator");
  // An intercommunicator between the even and the odd ranks.
  const auto& comm = world();
  if (comm.size() < 2) return;
  MPI_Comm half, inter;
  MPI_Comm_split(MPI_COMM_WORLD, comm.rank() % 2, comm.rank(), &half);
  MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, comm.rank() % 2 == 0 ? 1 : 0, 7, &inter);
  expect_error_on_every_rank<InvalidArgument>(
      [&] { Communicator::from_handle(MPI_Comm_c2f(inter), "comm"); },
      "comm: expected an intracommunicator, got an intercommunicator");
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
}

TEST(MpiCore, ASubCommunicatorIsItsOwnWorld) {
  const auto& comm = world();
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, comm.rank() % 2, comm.rank(), &half);
  const Communicator sub = Communicator::from_handle(MPI_Comm_c2f(half));
  int size = 0;
  MPI_Comm_size(half, &size);
  EXPECT_EQ(sub.size(), size);
  EXPECT_EQ(sub.rank(), comm.rank() / 2);
  std::vector<double> one{1.0};
  collective::allreduce_sum<double>(sub, one);
  EXPECT_EQ(one[0], size);
  MPI_Comm_free(&half);  // the library holds a duplicate: still usable
  collective::allreduce_sum<double>(sub, one);
  EXPECT_EQ(one[0], double(size) * size);
}

// A stop voted with an exchange reaches every rank when any rank voted it; without a vote, or
// with every rank voting 0, none stops.
TEST(MpiCore, AStopVotedWithAnExchangeReachesEveryRank) {
  const auto& comm = world();
  const int next = (comm.rank() + 1) % comm.size(),
            previous = (comm.rank() + comm.size() - 1) % comm.size();
  std::vector<double> out(4, comm.rank()), in(4, -1);
  std::vector<collective::Message<double>> messages;
  if (comm.distributed()) messages = {{next, out, {}}, {previous, {}, in}};
  for (int vote : {-1, 0, 1}) {
    const int mine = vote == 1 ? (comm.rank() == comm.size() - 1 ? 1 : 0) : vote;
    auto pending = collective::start_exchange<double>(comm, messages, 5, mine);
    pending.wait();
    EXPECT_EQ(pending.stopped(), vote == 1) << "vote " << vote << " on rank " << comm.rank();
    if (comm.distributed()) {
      EXPECT_EQ(in[0], previous);
    }
  }
}

// A case without Case::distribute (every registered case has one): on several ranks the harness
// refuses it on every rank, naming the ranks, before any timed call.
class OneRankCase final : public Case {
 public:
  std::string kernel() const override { return "one_rank"; }
  std::string label() const override { return "a case for one rank"; }
  Parameters parameters() const override { return {}; }
  WorkModel work() const override { return {}; }
  double run(const Device&, Timers*) override {
    ++runs;
    return 0;
  }
  std::vector<CaseOutput> outputs() const override { return {}; }
  Tolerance tolerance(const std::string&) const override { return {}; }
  static inline int runs = 0;
};

TEST(MpiCore, ACaseForOneRankIsRefusedOnSeveral) {
  const auto& comm = world();
  CaseEntry entry{"one_rank",
                  "test",
                  "a case for one rank",
                  [](const CaseSettings&) { return std::make_unique<OneRankCase>(); },
                  {}};
  HarnessOptions options;
  options.comm = comm;
  options.verify = false;
  options.repetitions = 1;
  options.warmup = 0;
  const std::vector<Device> cpu{Device{Backend::cpu, 0, false}};
  OneRankCase::runs = 0;
  if (!comm.distributed()) {
    EXPECT_EQ(run_case(entry, {}, cpu, options).size(), 1u);
    EXPECT_EQ(OneRankCase::runs, 1);
    return;
  }
  expect_error_on_every_rank<InvalidArgument>(
      [&] { run_case(entry, {}, cpu, options); },
      fmt::format("ranks: case one_rank runs on one rank only in this version, and this run has "
                  "{} ranks",
                  comm.size()));
  EXPECT_EQ(OneRankCase::runs, 0);
}

}  // namespace
}  // namespace sciproxy::test
