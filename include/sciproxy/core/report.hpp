// The report of one kernel call: which backend ran, the work model, the rates, the timer table,
// and the verification against the reference when one was done. Text for people, JSON for tools.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "sciproxy/core/device.hpp"
#include "sciproxy/core/metrics.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/core/verify.hpp"

namespace sciproxy {

struct KernelReport {
  std::string kernel;  // "parstack"
  Device device;
  nlohmann::json parameters = nlohmann::json::object();
  WorkModel work;
  double seconds = 0;  // time the rates are derived from
  Rates rates;
  std::optional<Roofline> roofline;
  Timers timers;
  std::optional<Comparison> verification;

  void print(std::ostream& out) const;
  nlohmann::json to_json() const;
};

}  // namespace sciproxy
