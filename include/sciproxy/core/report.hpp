// The report of one kernel call: which backend ran, the work model, the rates, the timer table,
// and the verification against the reference when one was done. Text for people, JSON for tools.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "sciproxy/core/device.hpp"
#include "sciproxy/core/metrics.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/core/verify.hpp"

namespace sciproxy {

// The parameters of one call (sizes, options) as an ordered JSON object, built without exposing
// a JSON library to the users of this header.
class Parameters {
 public:
  void set(const std::string& name, double value);
  void set(const std::string& name, long long value);
  void set(const std::string& name, long value) { set(name, static_cast<long long>(value)); }
  void set(const std::string& name, int value) { set(name, static_cast<long long>(value)); }
  void set(const std::string& name, bool value);
  void set(const std::string& name, const std::string& value);
  void set(const std::string& name, const char* value) { set(name, std::string(value)); }
  void set(const std::string& name, const std::vector<long long>& value);
  void set_json(const std::string& name, std::string json_value);  // a value given as JSON text
  bool empty() const { return entries_.empty(); }
  // (name, value as JSON text) in the order they were first set.
  const std::vector<std::pair<std::string, std::string>>& entries() const { return entries_; }
  std::string json() const;  // {"name": value, ...}

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
};

// A call run on the ranks of a communicator: what they exchanged and waited for, and their timers
// side by side. Rates of the report are then for the whole communicator: the work of every rank
// over the time of the slowest.
struct RankSummary {
  int ranks = 1;
  int nodes = 1;
  double bytes_exchanged = 0;  // per call: the payload every rank sent, summed over ranks
  double wait_min = 0, wait_avg = 0, wait_max = 0;  // per call: seconds inside MPI, over ranks
  int rank_of_max_wait = 0;
  RankTimers timers;
};

struct KernelReport {
  std::string kernel;  // "parstack"
  Device device;
  Parameters parameters;
  WorkModel work;
  double seconds = 0;  // time the rates are derived from
  Rates rates;
  std::optional<Roofline> roofline;
  Timers timers;
  // Verification against the reference: one comparison per output compared (checks), and the
  // first failing one, else the first (verification), which decides pass or fail.
  std::optional<Comparison> verification;
  std::vector<Comparison> checks;
  std::optional<RankSummary> ranks;  // when the call ran on several ranks
  bool passed() const { return !verification || verification->pass; }
  void add_check(Comparison c);

  void print(std::ostream& out) const;
  // The timers: on several ranks the ranks' line (exchanged bytes, waiting) and ICON's multi-rank
  // table, else this process's table. print() ends with it; commands with reports of their own
  // (sciproxy tti) print it themselves.
  void print_timers(std::ostream& out) const;
  std::string json() const;
};

}  // namespace sciproxy
