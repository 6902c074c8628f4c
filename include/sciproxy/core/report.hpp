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
  bool passed() const { return !verification || verification->pass; }
  void add_check(Comparison c);

  void print(std::ostream& out) const;
  std::string json() const;
};

}  // namespace sciproxy
