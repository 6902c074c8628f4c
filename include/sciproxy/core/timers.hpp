// Named, nested timer regions in the style of ICON's timer report (name, # calls, t_min, t_avg,
// t_max, total). Host regions are timed with a steady clock; GPU regions are measured with CUDA
// events by the backend and handed in with record(). When CUDA is built, every region is also an
// NVTX range, so Nsight Systems shows the same names.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace sciproxy {

class Communicator;

class Timers {
 public:
  struct Stat {
    std::string path;  // "parstack/compute": parent names joined by '/'
    int depth = 0;
    long calls = 0;
    double min = 0, max = 0, total = 0;  // seconds
    double avg() const { return calls ? total / calls : 0.0; }
    std::string leaf() const;
  };

  class Scope {
   public:
    Scope(Timers* timers, std::string_view name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    double elapsed() const;  // seconds since the scope opened

   private:
    Timers* timers_;
    std::chrono::steady_clock::time_point start_;
  };

  // Opens a host-timed region nested in the innermost open one. A null Timers* is allowed
  // everywhere a region is opened, so kernels time themselves only when someone listens.
  [[nodiscard]] static Scope region(Timers* timers, std::string_view name) {
    return Scope(timers, name);
  }

  // Adds one measured call of `name` (nested in the innermost open region), e.g. from CUDA events.
  void record(std::string_view name, double seconds);

  const std::vector<Stat>& stats() const { return stats_; }
  const Stat* find(std::string_view path) const;
  void clear() {
    stats_.clear();
    open_.clear();
  }

  std::string table() const;  // aligned text table, one row per region, children indented
  std::string json() const;   // [{"path", "calls", "min", "avg", "max", "total"}, ...]

 private:
  void open(std::string_view name);
  void close(double seconds);
  Stat& stat_for(const std::string& path, int depth);

  std::vector<Stat> stats_;        // in order of first appearance
  std::vector<std::string> open_;  // paths of the open regions, innermost last
};

// The timers of every rank of a communicator, region by region, in the form of ICON's parallel
// timer report: per call the min, average and max over ranks, and the total's min, average and
// max with the rank of each extreme (the max's rank is where the others wait).
class RankTimers {
 public:
  struct Stat {
    std::string path;
    int depth = 0;
    int ranks = 0;   // ranks that opened the region (a rank with no shots may not)
    long calls = 0;  // summed over ranks
    double t_min = 0, t_avg = 0, t_max = 0;              // one call, over all ranks' calls
    double total_min = 0, total_avg = 0, total_max = 0;  // total per rank, over ranks
    int rank_of_min = 0, rank_of_max = 0;
    std::string leaf() const;
  };

  // Collective over `comm`: every rank's timers on `root` (elsewhere: no regions).
  static RankTimers gather(const Timers& timers, const Communicator& comm, int root = 0);

  int ranks() const { return ranks_; }
  const std::vector<Stat>& stats() const { return stats_; }
  const Stat* find(std::string_view path) const;
  std::string table() const;
  std::string json() const;

 private:
  int ranks_ = 1;
  std::vector<Stat> stats_;  // rank 0's order of first appearance, then other ranks' new regions
};

}  // namespace sciproxy
