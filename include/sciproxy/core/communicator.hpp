// The processes one call runs on: an MPI communicator, or this process alone.
//
// A call given a communicator of several ranks splits its work across them (shift sets, shots,
// bundles, subdomains: each family's header says how) and returns what a single-rank run
// returns, gathered or kept per rank as its options ask. The communicator comes from the caller,
// who initialised MPI: from C++ and C as the handle MPI_Comm_c2f(comm), from Fortran as the
// integer handle (comm%MPI_VAL with mpi_f08), from Python as an mpi4py communicator. No MPI
// header is included here, so users of this header need none.
//
// Every call on a communicator is collective: all its ranks make it, with the same arguments
// where the family's header says so. Bad input on one rank, or ranks that disagree on shapes or
// options, make the call throw the same error on every rank (naming the rank), never hang.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace sciproxy {

struct CommunicatorAccess;  // the library's way to the MPI handle

// What a call on several ranks is given on each: every item (shift set, shot, bundle) or the
// rank's own block of them (the whole being the ranks' blocks in rank order).
enum class RankItems : int { all = 0, own = 1 };
// Where a call on several ranks puts its per-item results: the whole on every rank, the whole on
// rank 0 (the others receive none), or each rank its own items' results.
enum class ResultLayout : int { all_ranks = 0, root = 1, own = 2 };

// The C ABI's "no communicator": the call runs on this process alone.
inline constexpr std::int64_t kNoCommunicator = -1;

class Communicator {
 public:
  Communicator();  // this process alone: rank 0 of 1, no MPI call is ever made

  // The communicator whose Fortran handle is `handle` (MPI_Comm_c2f in C). kNoCommunicator
  // gives this process alone. Throws NotCompiled when sciproxy was built without MPI, and
  // InvalidArgument (naming `argument`) when MPI is not initialised or already finalised, when
  // the handle is MPI_COMM_NULL or not a communicator, or when it is an intercommunicator.
  static Communicator from_handle(std::int64_t handle, std::string_view argument = "comm");
  // MPI_COMM_WORLD (MPI must be initialised).
  static Communicator world();

  int rank() const;
  int size() const;
  bool distributed() const { return size() > 1; }
  std::int64_t handle() const;  // the Fortran handle; kNoCommunicator for this process alone
  // Ranks sharing this rank's node (MPI_COMM_TYPE_SHARED), and the number of nodes.
  int ranks_on_node() const;
  int nodes() const;

  // What this rank exchanged with the others through the library since the communicator was
  // made (copies share the count): payload bytes sent and received, messages, and the seconds
  // spent inside MPI calls, which include waiting for slower ranks.
  struct Traffic {
    double bytes_sent = 0;
    double bytes_received = 0;
    long messages = 0;
    double wait_seconds = 0;
  };
  Traffic traffic() const;

  struct State;  // the library's; opaque here

 private:
  friend struct CommunicatorAccess;
  std::shared_ptr<State> state_;
};

// Whether this library was built with MPI (the build option SCIPROXY_MPI).
bool mpi_compiled();
// The MPI library's version line ("Open MPI v4.1.4, ..."), or "" without MPI.
std::string mpi_library_version();

// For programs that run under mpirun: initialises MPI when this process was started by an MPI
// launcher (its environment says so) and MPI is not initialised yet, and finalises what it
// initialised when destroyed. world() is then the launcher's ranks; without a launcher, this
// process alone. The sciproxy command-line tool opens one around every command.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  const Communicator& world() const { return world_; }

 private:
  bool initialised_here_ = false;
  Communicator world_;
};

}  // namespace sciproxy
