// Communicators and the collective calls the families make on them (core/communicator.hpp,
// core/collective.hpp). The only file of the library that includes mpi.h; built without MPI,
// every communicator is this process alone and a handle is refused.
#include "sciproxy/core/communicator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "core/collective.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"

#ifdef SCIPROXY_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: the removed C++ bindings need a library of their own
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace sciproxy {

struct Communicator::State {
  int rank = 0;
  int size = 1;
  int ranks_on_node = 1;
  int nodes = 1;
  std::int64_t handle = kNoCommunicator;
  Traffic traffic;
#ifdef SCIPROXY_HAVE_MPI
  // A duplicate of the caller's communicator, so the library's messages never match the
  // caller's; freed with the last copy unless MPI was finalised first.
  MPI_Comm comm = MPI_COMM_NULL;
  ~State() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm);
  }
#endif
};

struct CommunicatorAccess {
  static Communicator::State& state(const Communicator& c) { return *c.state_; }
};

namespace {

Communicator::State& state_of(const Communicator& c) {
  return CommunicatorAccess::state(c);
}

}  // namespace

Communicator::Communicator() : state_(std::make_shared<State>()) {}

int Communicator::rank() const {
  return state_->rank;
}
int Communicator::size() const {
  return state_->size;
}
std::int64_t Communicator::handle() const {
  return state_->handle;
}
int Communicator::ranks_on_node() const {
  return state_->ranks_on_node;
}
int Communicator::nodes() const {
  return state_->nodes;
}
Communicator::Traffic Communicator::traffic() const {
  return state_->traffic;
}

#ifdef SCIPROXY_HAVE_MPI

bool mpi_compiled() {
  return true;
}

std::string mpi_library_version() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string text(version, static_cast<std::size_t>(std::max(length, 0)));
  const auto line_end = text.find_first_of(std::string("\r\n\0", 3));
  if (line_end != std::string::npos) text.resize(line_end);
  while (!text.empty() && (text.back() == ',' || text.back() == ' ')) text.pop_back();
  return text;
}

namespace {

void require_mpi_running(std::string_view argument) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  require(initialized && !finalized, argument, "a communicator of a running MPI (MPI_Init called)",
          finalized ? "MPI already finalised" : "MPI not initialised");
}

// Times an MPI call into the communicator's traffic.
class Waiting {
 public:
  Waiting(const Communicator& comm, double sent, double received)
      : traffic_(state_of(comm).traffic), start_(std::chrono::steady_clock::now()) {
    traffic_.bytes_sent += sent;
    traffic_.bytes_received += received;
    ++traffic_.messages;
  }
  ~Waiting() {
    traffic_.wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  Communicator::Traffic& traffic_;
  std::chrono::steady_clock::time_point start_;
};

MPI_Comm mpi_comm(const Communicator& comm) {
  return state_of(comm).comm;
}

void check_mpi(int status, std::string_view what) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw RuntimeError(fmt::format("{}: {}", what, std::string(text, std::max(length, 0))));
}

template <class T>
MPI_Datatype datatype();
template <>
MPI_Datatype datatype<float>() {
  return MPI_FLOAT;
}
template <>
MPI_Datatype datatype<double>() {
  return MPI_DOUBLE;
}
template <>
MPI_Datatype datatype<std::int64_t>() {
  return MPI_INT64_T;
}
template <>
MPI_Datatype datatype<std::int32_t>() {
  return MPI_INT32_T;
}
template <>
MPI_Datatype datatype<std::uint32_t>() {
  return MPI_UINT32_T;
}
template <>
MPI_Datatype datatype<char>() {
  return MPI_CHAR;
}

// A datatype of `row` values of T, so counts of rows stay within MPI's int counts.
class RowType {
 public:
  template <class T>
  static RowType of(std::int64_t row) {
    require(row >= 1 && row <= INT_MAX, "row length", fmt::format("1 to {} values", INT_MAX),
            std::to_string(row));
    RowType r;
    MPI_Type_contiguous(static_cast<int>(row), datatype<T>(), &r.type_);
    MPI_Type_commit(&r.type_);
    return r;
  }
  RowType(RowType&& o) noexcept : type_(o.type_) { o.type_ = MPI_DATATYPE_NULL; }
  ~RowType() {
    if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
  }
  MPI_Datatype get() const { return type_; }

 private:
  RowType() = default;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// MPI's int counts and displacements of rows, checked.
struct RowCounts {
  std::vector<int> counts, displacements;
  std::int64_t total = 0;
};

RowCounts row_counts(const Communicator& comm, std::span<const std::int64_t> counts) {
  require(static_cast<int>(counts.size()) == comm.size(), "counts",
          fmt::format("one count per rank ({})", comm.size()), std::to_string(counts.size()));
  RowCounts r;
  for (const std::int64_t c : counts) {
    require(c >= 0 && c <= INT_MAX && r.total <= INT_MAX, "counts",
            "row counts and offsets that fit MPI's int", std::to_string(c));
    r.counts.push_back(static_cast<int>(c));
    r.displacements.push_back(static_cast<int>(r.total));
    r.total += c;
  }
  return r;
}

// The counts of an exchange of rows, checked against this rank's rows and, on `root`, the
// whole (`whole_name` in the message).
struct CheckedRows {
  RowCounts counts;
  std::int64_t own = 0;
};

CheckedRows checked_rows(const Communicator& comm, std::span<const std::int64_t> counts,
                         std::size_t mine, std::size_t whole, std::int64_t row, int root,
                         std::string_view whole_name) {
  CheckedRows r{row_counts(comm, counts), counts[static_cast<std::size_t>(comm.rank())]};
  require(static_cast<std::int64_t>(mine) == r.own * row, "rows of this rank",
          fmt::format("{} x {} values", r.own, row), std::to_string(mine));
  if (comm.rank() == root)
    require(static_cast<std::int64_t>(whole) == r.counts.total * row, whole_name,
            fmt::format("{} x {} values", r.counts.total, row), std::to_string(whole));
  return r;
}

}  // namespace

Communicator Communicator::from_handle(std::int64_t handle, std::string_view argument) {
  if (handle == kNoCommunicator) return Communicator();
  require_mpi_running(argument);
  require(handle >= INT_MIN && handle <= INT_MAX, argument,
          "an MPI Fortran handle (MPI_Comm_c2f; an int)", std::to_string(handle));
  const MPI_Comm given = MPI_Comm_f2c(static_cast<MPI_Fint>(handle));
  require(given != nullptr && given != MPI_COMM_NULL, argument,
          "the handle of a communicator (MPI_Comm_c2f)",
          fmt::format("{} (MPI_COMM_NULL, or no communicator)", handle));
  int inter = 0;
  MPI_Comm_test_inter(given, &inter);
  require(!inter, argument, "an intracommunicator", "an intercommunicator");
  Communicator c;
  State& s = *c.state_;
  s.handle = handle;
  check_mpi(MPI_Comm_dup(given, &s.comm), "MPI_Comm_dup");
  MPI_Comm_rank(s.comm, &s.rank);
  MPI_Comm_size(s.comm, &s.size);
  MPI_Comm node;
  check_mpi(MPI_Comm_split_type(s.comm, MPI_COMM_TYPE_SHARED, s.rank, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  int node_rank = 0;
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_size(node, &s.ranks_on_node);
  MPI_Comm_free(&node);
  int leader = node_rank == 0 ? 1 : 0;
  MPI_Allreduce(&leader, &s.nodes, 1, MPI_INT, MPI_SUM, s.comm);
  return c;
}

Communicator Communicator::world() {
  require_mpi_running("MPI_COMM_WORLD");
  return from_handle(MPI_Comm_c2f(MPI_COMM_WORLD), "MPI_COMM_WORLD");
}

namespace {

bool started_by_a_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(name)) return true;
  return false;
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && started_by_a_launcher()) {
    int provided = 0;
    check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    initialised_here_ = true;
    initialized = 1;
  }
  if (!initialized) return;
  world_ = Communicator::world();
  // Ranks sharing a node whose CPU sets overlap (mpirun binds no rank, as when oversubscribed)
  // each take their share of the cores, unless the user set the threads.
  const int on_node = world_.ranks_on_node();
  if (on_node > 1 && !std::getenv("OMP_NUM_THREADS") &&
      usable_cores() * on_node > static_cast<int>(std::thread::hardware_concurrency()))
    share_cores_with(on_node);
}

MpiSession::~MpiSession() {
  if (!initialised_here_) return;
  world_ = Communicator();  // frees the duplicate before MPI goes
  MPI_Finalize();
}

namespace collective {

void barrier(const Communicator& comm) {
  if (!comm.distributed()) return;
  Waiting w(comm, 0, 0);
  MPI_Barrier(mpi_comm(comm));
}

template <class T>
void allreduce_sum(const Communicator& comm, std::span<T> values) {
  if (!comm.distributed() || values.empty()) return;
  // A ring allreduce sends and receives about twice the payload, whatever the ranks.
  const double payload = 2.0 * double(values.size_bytes()) * (comm.size() - 1) / comm.size();
  Waiting w(comm, payload, payload);
  for (std::size_t done = 0; done < values.size();) {
    const int n = static_cast<int>(std::min<std::size_t>(values.size() - done, INT_MAX));
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, values.data() + done, n, datatype<T>(), MPI_SUM,
                            mpi_comm(comm)),
              "MPI_Allreduce");
    done += static_cast<std::size_t>(n);
  }
}

namespace {
template <class T>
T allreduce_one(const Communicator& comm, T value, MPI_Op op) {
  if (!comm.distributed()) return value;
  Waiting w(comm, sizeof(T), sizeof(T));
  MPI_Allreduce(MPI_IN_PLACE, &value, 1, datatype<T>(), op, mpi_comm(comm));
  return value;
}
}  // namespace

double allreduce_max(const Communicator& comm, double value) {
  return allreduce_one(comm, value, MPI_MAX);
}
std::int64_t allreduce_max(const Communicator& comm, std::int64_t value) {
  return allreduce_one(comm, value, MPI_MAX);
}
std::int64_t allreduce_min(const Communicator& comm, std::int64_t value) {
  return allreduce_one(comm, value, MPI_MIN);
}

std::vector<std::int64_t> allgather(const Communicator& comm, std::span<const std::int64_t> mine) {
  std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(comm.size()));
  if (!comm.distributed()) {
    std::copy(mine.begin(), mine.end(), all.begin());
    return all;
  }
  const double bytes = double(mine.size_bytes()) * (comm.size() - 1);
  Waiting w(comm, bytes, bytes);
  check_mpi(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_INT64_T, all.data(),
                          static_cast<int>(mine.size()), MPI_INT64_T, mpi_comm(comm)),
            "MPI_Allgather");
  return all;
}

template <class T>
void gather_rows(const Communicator& comm, std::span<const T> mine, std::span<T> all,
                 std::span<const std::int64_t> counts, std::int64_t row, int root) {
  const auto [rc, own] =
      checked_rows(comm, counts, mine.size(), all.size(), row, root, "gathered rows");
  if (!comm.distributed()) {
    std::copy(mine.begin(), mine.end(), all.begin());
    return;
  }
  const double own_bytes = double(mine.size_bytes());
  const double received =
      comm.rank() == root ? double((rc.total - own) * row) * double(sizeof(T)) : 0.0;
  Waiting w(comm, comm.rank() == root ? 0.0 : own_bytes, received);
  const RowType type = RowType::of<T>(row);
  // The root's own rows are copied, not sent to itself (they may already lie in place).
  if (comm.rank() == root && own > 0 && mine.data() != all.data() + rc.displacements[root] * row)
    std::copy(mine.begin(), mine.end(), all.begin() + rc.displacements[root] * row);
  check_mpi(MPI_Gatherv(comm.rank() == root ? MPI_IN_PLACE : mine.data(), static_cast<int>(own),
                        type.get(), all.data(), rc.counts.data(), rc.displacements.data(),
                        type.get(), root, mpi_comm(comm)),
            "MPI_Gatherv");
}

template <class T>
void allgather_rows(const Communicator& comm, std::span<T> all,
                    std::span<const std::int64_t> counts, std::int64_t row) {
  const RowCounts rc = row_counts(comm, counts);
  require(static_cast<std::int64_t>(all.size()) == rc.total * row, "gathered rows",
          fmt::format("{} x {} values", rc.total, row), std::to_string(all.size()));
  if (!comm.distributed()) return;
  const std::int64_t own = counts[static_cast<std::size_t>(comm.rank())];
  const double sent = double(own * row) * double(sizeof(T)) * (comm.size() - 1);
  const double received = double((rc.total - own) * row) * double(sizeof(T));
  Waiting w(comm, sent, received);
  const RowType type = RowType::of<T>(row);
  check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all.data(), rc.counts.data(),
                           rc.displacements.data(), type.get(), mpi_comm(comm)),
            "MPI_Allgatherv");
}

template <class T>
void scatter_rows(const Communicator& comm, std::span<const T> all, std::span<T> mine,
                  std::span<const std::int64_t> counts, std::int64_t row, int root) {
  const auto [rc, own] =
      checked_rows(comm, counts, mine.size(), all.size(), row, root, "rows to scatter");
  if (!comm.distributed()) {
    std::copy(all.begin(), all.end(), mine.begin());
    return;
  }
  const double own_bytes = double(mine.size_bytes());
  const double sent =
      comm.rank() == root ? double((rc.total - own) * row) * double(sizeof(T)) : 0.0;
  Waiting w(comm, sent, comm.rank() == root ? 0.0 : own_bytes);
  const RowType type = RowType::of<T>(row);
  if (comm.rank() == root && own > 0)
    std::copy(all.begin() + rc.displacements[root] * row,
              all.begin() + (rc.displacements[root] + own) * row, mine.begin());
  check_mpi(MPI_Scatterv(all.data(), rc.counts.data(), rc.displacements.data(), type.get(),
                         comm.rank() == root ? MPI_IN_PLACE : mine.data(), static_cast<int>(own),
                         type.get(), root, mpi_comm(comm)),
            "MPI_Scatterv");
}

void broadcast(const Communicator& comm, std::string& text, int root) {
  if (!comm.distributed()) return;
  std::int64_t length = static_cast<std::int64_t>(text.size());
  Waiting w(comm, comm.rank() == root ? double(text.size()) * (comm.size() - 1) : 0.0,
            comm.rank() == root ? 0.0 : double(text.size()));
  MPI_Bcast(&length, 1, MPI_INT64_T, root, mpi_comm(comm));
  text.resize(static_cast<std::size_t>(length));
  if (length > 0) MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, root, mpi_comm(comm));
}

std::vector<std::string> gather(const Communicator& comm, const std::string& text, int root) {
  if (!comm.distributed()) return {text};
  const std::int64_t length = static_cast<std::int64_t>(text.size());
  const std::vector<std::int64_t> lengths = allgather(comm, std::span(&length, 1));
  std::string all;
  if (comm.rank() == root) {
    std::int64_t total = 0;
    for (auto l : lengths) total += l;
    all.resize(static_cast<std::size_t>(total));
  }
  gather_rows<char>(comm, std::span<const char>(text.data(), text.size()),
                    std::span<char>(all.data(), all.size()), lengths, 1, root);
  std::vector<std::string> out;
  if (comm.rank() != root) return out;
  std::size_t at = 0;
  for (auto l : lengths) {
    out.push_back(all.substr(at, static_cast<std::size_t>(l)));
    at += static_cast<std::size_t>(l);
  }
  return out;
}

struct Pending::Requests {
  std::vector<MPI_Request> requests;
  Communicator comm;
  int vote = 0, votes = 0;  // this rank's stop vote and the allreduce's maximum
  bool voting = false;
};

Pending::Pending() = default;
Pending::~Pending() {
  try {
    wait();
  } catch (...) {  // a destructor does not throw; the messages are complete or failed anyway
  }
}
Pending::Pending(Pending&&) noexcept = default;
Pending& Pending::operator=(Pending&& other) noexcept {
  if (this != &other) {
    try {
      wait();
    } catch (...) {
    }
    requests_ = std::move(other.requests_);
    stop_ = other.stop_;
  }
  return *this;
}

bool Pending::stopped() const {
  return stop_ != 0;
}

void Pending::wait() {
  if (!requests_ || requests_->requests.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  const int status = MPI_Waitall(static_cast<int>(requests_->requests.size()),
                                 requests_->requests.data(), MPI_STATUSES_IGNORE);
  requests_->requests.clear();
  if (requests_->voting) stop_ = requests_->votes;
  state_of(requests_->comm).traffic.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  check_mpi(status, "MPI_Waitall");
}

bool Pending::test() {
  if (!requests_ || requests_->requests.empty()) return true;
  const auto start = std::chrono::steady_clock::now();
  int done = 0;
  const int status = MPI_Testall(static_cast<int>(requests_->requests.size()),
                                 requests_->requests.data(), &done, MPI_STATUSES_IGNORE);
  state_of(requests_->comm).traffic.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  check_mpi(status, "MPI_Testall");
  if (done) {
    requests_->requests.clear();
    if (requests_->voting) stop_ = requests_->votes;
  }
  return done != 0;
}

template <class T>
Pending start_exchange(const Communicator& comm, std::span<const Message<T>> messages, int tag,
                       int stop) {
  Pending pending;
  pending.stop_ = stop > 0 ? 1 : 0;
  if (!comm.distributed()) {
    for (const auto& m : messages)
      require(m.send.empty() && m.receive.empty(), "message rank",
              "another rank (this process is alone)", std::to_string(m.rank));
    return pending;
  }
  auto requests = std::make_unique<Pending::Requests>();
  requests->comm = comm;
  auto count_of = [](std::size_t n) {
    require(n <= INT_MAX, "message", fmt::format("at most {} values", INT_MAX), std::to_string(n));
    return static_cast<int>(n);
  };
  for (const auto& m : messages)
    require(m.rank >= 0 && m.rank < comm.size() && m.rank != comm.rank(), "message rank",
            fmt::format("another rank of 0 to {}", comm.size() - 1), std::to_string(m.rank));
  Waiting w(comm, 0, 0);  // posting is not free either
  Communicator::Traffic& traffic = state_of(comm).traffic;
  for (const auto& m : messages)
    if (!m.receive.empty()) {
      requests->requests.emplace_back();
      check_mpi(MPI_Irecv(m.receive.data(), count_of(m.receive.size()), datatype<T>(), m.rank, tag,
                          mpi_comm(comm), &requests->requests.back()),
                "MPI_Irecv");
      traffic.bytes_received += double(m.receive.size_bytes());
    }
  for (const auto& m : messages)
    if (!m.send.empty()) {
      requests->requests.emplace_back();
      check_mpi(MPI_Isend(m.send.data(), count_of(m.send.size()), datatype<T>(), m.rank, tag,
                          mpi_comm(comm), &requests->requests.back()),
                "MPI_Isend");
      traffic.bytes_sent += double(m.send.size_bytes());
      ++traffic.messages;
    }
  if (stop >= 0) {
    requests->voting = true;
    requests->vote = stop > 0 ? 1 : 0;
    requests->requests.emplace_back();
    check_mpi(MPI_Iallreduce(&requests->vote, &requests->votes, 1, MPI_INT, MPI_MAX, mpi_comm(comm),
                             &requests->requests.back()),
              "MPI_Iallreduce");
  }
  pending.requests_ = std::move(requests);
  return pending;
}

}  // namespace collective

#else  // built without MPI: every communicator is this process alone

bool mpi_compiled() {
  return false;
}
std::string mpi_library_version() {
  return {};
}

Communicator Communicator::from_handle(std::int64_t handle, std::string_view argument) {
  if (handle == kNoCommunicator) return Communicator();
  throw NotCompiled(fmt::format(
      "{}: an MPI communicator needs sciproxy built with MPI (the build option SCIPROXY_MPI, on "
      "when libopenmpi-dev is installed); this build has none",
      argument));
}

Communicator Communicator::world() {
  return Communicator();
}

MpiSession::MpiSession(int*, char***) {}
MpiSession::~MpiSession() = default;

namespace collective {

void barrier(const Communicator&) {}
template <class T>
void allreduce_sum(const Communicator&, std::span<T>) {}
double allreduce_max(const Communicator&, double value) {
  return value;
}
std::int64_t allreduce_max(const Communicator&, std::int64_t value) {
  return value;
}
std::int64_t allreduce_min(const Communicator&, std::int64_t value) {
  return value;
}
std::vector<std::int64_t> allgather(const Communicator&, std::span<const std::int64_t> mine) {
  return {mine.begin(), mine.end()};
}
template <class T>
void gather_rows(const Communicator&, std::span<const T> mine, std::span<T> all,
                 std::span<const std::int64_t>, std::int64_t, int) {
  require(all.size() == mine.size(), "gathered rows", std::to_string(mine.size()),
          std::to_string(all.size()));
  std::copy(mine.begin(), mine.end(), all.begin());
}
template <class T>
void allgather_rows(const Communicator&, std::span<T>, std::span<const std::int64_t>,
                    std::int64_t) {}
template <class T>
void scatter_rows(const Communicator&, std::span<const T> all, std::span<T> mine,
                  std::span<const std::int64_t>, std::int64_t, int) {
  require(all.size() == mine.size(), "rows of this rank", std::to_string(all.size()),
          std::to_string(mine.size()));
  std::copy(all.begin(), all.end(), mine.begin());
}
void broadcast(const Communicator&, std::string&, int) {}
std::vector<std::string> gather(const Communicator&, const std::string& text, int) {
  return {text};
}

struct Pending::Requests {};
Pending::Pending() = default;
Pending::~Pending() = default;
Pending::Pending(Pending&&) noexcept = default;
Pending& Pending::operator=(Pending&&) noexcept = default;
void Pending::wait() {}
bool Pending::test() {
  return true;
}
bool Pending::stopped() const {
  return stop_ != 0;
}

template <class T>
Pending start_exchange(const Communicator&, std::span<const Message<T>> messages, int, int stop) {
  for (const auto& m : messages)
    require(m.send.empty() && m.receive.empty(), "message rank",
            "another rank (this process is alone)", std::to_string(m.rank));
  Pending pending;
  pending.stop_ = stop > 0 ? 1 : 0;
  return pending;
}

}  // namespace collective

#endif

// What works the same with and without MPI.
namespace collective {

#define SCIPROXY_INSTANTIATE_ROWS(T)                                                   \
  template void gather_rows<T>(const Communicator&, std::span<const T>, std::span<T>,  \
                               std::span<const std::int64_t>, std::int64_t, int);      \
  template void allgather_rows<T>(const Communicator&, std::span<T>,                   \
                                  std::span<const std::int64_t>, std::int64_t);        \
  template void scatter_rows<T>(const Communicator&, std::span<const T>, std::span<T>, \
                                std::span<const std::int64_t>, std::int64_t, int);     \
  template Pending start_exchange<T>(const Communicator&, std::span<const Message<T>>, int, int);
SCIPROXY_INSTANTIATE_ROWS(float)
SCIPROXY_INSTANTIATE_ROWS(double)
SCIPROXY_INSTANTIATE_ROWS(std::int32_t)
SCIPROXY_INSTANTIATE_ROWS(std::uint32_t)
SCIPROXY_INSTANTIATE_ROWS(std::int64_t)
SCIPROXY_INSTANTIATE_ROWS(char)
#undef SCIPROXY_INSTANTIATE_ROWS
template void allreduce_sum<float>(const Communicator&, std::span<float>);
template void allreduce_sum<double>(const Communicator&, std::span<double>);
template void allreduce_sum<std::int64_t>(const Communicator&, std::span<std::int64_t>);

Block block_of(std::int64_t n, int rank, int size) {
  const std::int64_t base = n / size, extra = n % size;
  return {rank * base + std::min<std::int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

namespace {

[[noreturn]] void throw_error(ErrorCode code, const std::string& message) {
  switch (code) {
    case ErrorCode::invalid_argument:
      throw InvalidArgument(message);
    case ErrorCode::type_error:
      throw TypeError(message);
    case ErrorCode::not_compiled:
      throw NotCompiled(message);
    case ErrorCode::device_unavailable:
      throw DeviceUnavailable(message);
    case ErrorCode::io_error:
      throw IoError(message);
    case ErrorCode::cancelled:
      throw Cancelled(message);
    case ErrorCode::out_of_memory:
      throw OutOfMemory(message);
    default:
      throw RuntimeError(message);
  }
}

// The kind and message of an exception, as "code:message".
std::string describe(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& error) {
    return fmt::format("{}:{}", static_cast<int>(error.code()), error.what());
  } catch (const std::bad_alloc&) {
    return fmt::format("{}:out of memory", static_cast<int>(ErrorCode::out_of_memory));
  } catch (const std::exception& error) {
    return fmt::format("{}:{}", static_cast<int>(ErrorCode::runtime_error), error.what());
  } catch (...) {
    return fmt::format("{}:an unknown exception", static_cast<int>(ErrorCode::runtime_error));
  }
}

}  // namespace

void agree(const Communicator& comm, std::exception_ptr local) {
  const std::int64_t failing =
      allreduce_min(comm, local ? std::int64_t(comm.rank()) : std::int64_t(comm.size()));
  if (failing == comm.size()) return;
  std::string text = comm.rank() == failing ? describe(local) : std::string();
  broadcast(comm, text, static_cast<int>(failing));
  const auto colon = text.find(':');
  const auto code = static_cast<ErrorCode>(std::atoi(text.substr(0, colon).c_str()));
  throw_error(code, fmt::format("rank {} of {}: {}", failing, comm.size(), text.substr(colon + 1)));
}

void require_same(const Communicator& comm, std::span<const Field> fields, std::string_view call) {
  if (!comm.distributed()) return;
  // First the list itself (ranks on different code paths pass different lists), then the values.
  std::uint64_t names = 0;
  for (const Field& f : fields) names = hash_bytes(f.name.data(), f.name.size(), names);
  const std::int64_t shape[2] = {static_cast<std::int64_t>(fields.size()),
                                 static_cast<std::int64_t>(names)};
  const auto shapes = allgather(comm, shape);
  for (int r = 1; r < comm.size(); ++r)
    if (shapes[2 * r] != shapes[0] || shapes[2 * r + 1] != shapes[1])
      throw InvalidArgument(fmt::format(
          "{}: the ranks disagree on the arguments: rank 0 and rank {} passed different kinds of "
          "arguments (a different dtype, method or layout); every rank must make the same call",
          call, r));
  std::vector<std::int64_t> values;
  for (const Field& f : fields) values.push_back(f.value);
  const auto all = allgather(comm, values);
  for (std::size_t i = 0; i < fields.size(); ++i)
    for (int r = 1; r < comm.size(); ++r) {
      const std::int64_t mine = all[r * fields.size() + i], first = all[i];
      if (mine == first) continue;
      throw InvalidArgument(
          fields[i].hashed
              ? fmt::format("{}: the ranks disagree on the values of {}: rank 0 and rank {} "
                            "passed different values; every rank must pass the same",
                            call, fields[i].name, r)
              : fmt::format("{}: the ranks disagree on {}: rank 0 passed {}, rank {} passed "
                            "{}; every rank must pass the same",
                            call, fields[i].name, first, r, mine));
    }
}

std::uint64_t hash_bytes(const void* data, std::size_t bytes, std::uint64_t seed) {
  // FNV-1a over 8-byte words (with the tail bytewise): fast enough to run over every input.
  std::uint64_t h = 14695981039346656037ull ^ seed;
  const auto* p = static_cast<const unsigned char*>(data);
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, p + i, 8);
    h = (h ^ word) * 1099511628211ull;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace collective

}  // namespace sciproxy
