// What the families do on a communicator (core/communicator.hpp), in plain types: the library
// includes mpi.h in one file (communicator.cpp), and everything here works on this process
// alone without MPI. Each call counts its payload and the time spent in MPI in the
// communicator's Traffic.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sciproxy/core/communicator.hpp"

namespace sciproxy::collective {

// Rows [first, first + count) of n that rank `rank` of `size` owns: contiguous blocks, the
// first n % size ranks one row more. The split every family uses for its independent items
// (shift sets, shots, bundles), so a rank's items are the same whatever the call.
struct Block {
  std::int64_t first = 0;
  std::int64_t count = 0;
};
Block block_of(std::int64_t n, int rank, int size);
inline Block block_of(std::int64_t n, const Communicator& comm) {
  return block_of(n, comm.rank(), comm.size());
}

void barrier(const Communicator& comm);

// In place over every rank: the elementwise sum (or max, min).
template <class T>
void allreduce_sum(const Communicator& comm, std::span<T> values);
double allreduce_max(const Communicator& comm, double value);
std::int64_t allreduce_max(const Communicator& comm, std::int64_t value);
std::int64_t allreduce_min(const Communicator& comm, std::int64_t value);

// Every rank's `mine` (the same length on every rank), rank after rank.
std::vector<std::int64_t> allgather(const Communicator& comm, std::span<const std::int64_t> mine);

// Rank r's rows are all[displacement(r) * row, ...), counts[r] rows of `row` values each
// (counts from block_of, or any counts that sum to the rows of `all`).
//   gather_rows: rank r sends `mine` (counts[r] rows); `root` receives into `all` (elsewhere
//     `all` is not touched and may be empty).
//   allgather_rows: every rank's `all` holds every rank's rows; rank r's own rows are read from
//     its `all` in place.
//   scatter_rows: `root`'s `all` goes out, rank r receives its rows into `mine`.
template <class T>
void gather_rows(const Communicator& comm, std::span<const T> mine, std::span<T> all,
                 std::span<const std::int64_t> counts, std::int64_t row, int root);
template <class T>
void allgather_rows(const Communicator& comm, std::span<T> all,
                    std::span<const std::int64_t> counts, std::int64_t row);
template <class T>
void scatter_rows(const Communicator& comm, std::span<const T> all, std::span<T> mine,
                  std::span<const std::int64_t> counts, std::int64_t row, int root);

// Point to point: messages to and from neighbours (halo exchanges), started together so the
// caller computes while they travel, completed by wait(). A message with an empty send or
// receive span sends or receives nothing; spans must stay valid until wait() returns. The
// destructor waits for messages still pending.
template <class T>
struct Message {
  int rank = 0;             // the other rank
  std::span<const T> send;  // to it
  std::span<T> receive;     // from it
};
class Pending;
// `tag` tells apart exchanges that may be in flight together (several fields of one step).
// `stop` (0 or 1; -1: none) is this rank's vote to stop the run (its cancellation poll), carried
// by a non-blocking allreduce that completes with the messages: after wait(), stopped() is true
// on every rank when any rank voted 1, so that all stop at the same step instead of leaving the
// others waiting for messages that never come. Voting makes the exchange a collective: every
// rank of the communicator starts it.
template <class T>
Pending start_exchange(const Communicator& comm, std::span<const Message<T>> messages, int tag = 0,
                       int stop = -1);

class Pending {
 public:
  Pending();
  ~Pending();
  Pending(Pending&&) noexcept;
  Pending& operator=(Pending&&) noexcept;
  void wait();  // the time spent here counts as the communicator's waiting
  // Lets the messages move without waiting for them (MPI_Testall); true when all are complete
  // (wait() then returns at once). MPI libraries without a progress thread move a large message
  // only inside MPI calls, so a caller computing while its messages travel calls this now and
  // then, from the thread that made the exchange. Its time counts as waiting too.
  bool test();
  // After wait() (or a test() that returned true): whether any rank voted to stop
  // (start_exchange's `stop`).
  bool stopped() const;
  struct Requests;

 private:
  template <class T>
  friend Pending start_exchange(const Communicator&, std::span<const Message<T>>, int, int);
  std::unique_ptr<Requests> requests_;
  int stop_ = 0;  // this rank's vote, then every rank's (their maximum)
};

// root's text on every rank.
void broadcast(const Communicator& comm, std::string& text, int root);
// Every rank's text on `root` (elsewhere: empty).
std::vector<std::string> gather(const Communicator& comm, const std::string& text, int root);

// Errors. A call on a communicator runs its local part through on_every_rank: when it throws on
// any rank, every rank throws the same error (the lowest failing rank's kind and message,
// prefixed with "rank r of n: "), after the same collective calls, so none waits forever in a
// later one.
void agree(const Communicator& comm, std::exception_ptr local);
template <class F>
void on_every_rank(const Communicator& comm, F&& f) {
  std::exception_ptr local;
  try {
    f();
  } catch (...) {
    local = std::current_exception();
  }
  if (comm.distributed())
    agree(comm, local);
  else if (local)
    std::rethrow_exception(local);
}

// What every rank must pass alike: a name and an integer (a size, an option, or the hash of an
// array's bytes). Throws InvalidArgument on every rank, naming the first field the ranks
// disagree on and two ranks' values, when they do.
struct Field {
  std::string name;
  std::int64_t value = 0;
  bool hashed = false;  // value is hash_of(the array named name)
};
void require_same(const Communicator& comm, std::span<const Field> fields, std::string_view call);

// A 64-bit FNV-1a hash of bytes, for require_same on arrays.
std::uint64_t hash_bytes(const void* data, std::size_t bytes, std::uint64_t seed = 0);
template <class T>
std::int64_t hash_of(std::span<const T> values, std::uint64_t seed = 0) {
  return static_cast<std::int64_t>(hash_bytes(values.data(), values.size_bytes(), seed));
}

}  // namespace sciproxy::collective
