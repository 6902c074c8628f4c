// Kernel report: a Devito-style summary for people, the same numbers as JSON for tools.
#include "sciproxy/core/report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/json.hpp"
#include "sciproxy/core/resources.hpp"

namespace sciproxy {

void KernelReport::print(std::ostream& out) const {
  const DisplayRate rate = display_rate(work, rates.gpoints_per_s);
  out << fmt::format("Operator {} ran in {:.4f} s on {}{} [{}]\n", kernel, seconds, device.name(),
                     device.automatic ? " (chosen by auto)" : "", precision_name(work.precision));
  std::string perf =
      fmt::format("Global performance: [OI={:.2f}, {:.2f} GFlops/s, {:.3f} {}, {:.2f} GB/s",
                  rates.intensity, rates.gflops_per_s, rate.value, rate.unit, rates.gbytes_per_s);
  if (rates.attainable_gflops > 0)
    perf += fmt::format(", {:.0f}% of roofline ({} bound {:.1f} GFlops/s)",
                        100 * rates.roofline_fraction, rates.bound, rates.attainable_gflops);
  else
    perf += ", roofline unknown (run `sciproxy roofline`)";
  out << perf << "]\n";
  if (!parameters.empty()) {
    std::string line = "Parameters:";
    for (const auto& [key, value] : parameters.entries()) line += fmt::format(" {}={}", key, value);
    out << line << "\n";
  }
  if (checks.size() > 1) {
    for (const auto& c : checks)
      out << "Verification of " << c.output << " against reference: " << c.summary() << "\n";
  } else if (verification) {
    out << "Verification against reference: " << verification->summary() << "\n";
  }
  print_timers(out);
}

void KernelReport::print_timers(std::ostream& out) const {
  if (ranks) {
    out << fmt::format(
        "Ranks: {} on {} node{}; exchanged {} per call (all ranks); waiting in MPI per call: "
        "min {:.4f} s, avg {:.4f} s, max {:.4f} s (rank {})\n",
        ranks->ranks, ranks->nodes, ranks->nodes == 1 ? "" : "s",
        format_bytes(ranks->bytes_exchanged), ranks->wait_min, ranks->wait_avg, ranks->wait_max,
        ranks->rank_of_max_wait);
    if (!ranks->timers.stats().empty()) out << ranks->timers.table();
  } else if (!timers.stats().empty()) {
    out << timers.table();
  }
}

void KernelReport::add_check(Comparison c) {
  checks.push_back(std::move(c));
  const auto failing =
      std::find_if(checks.begin(), checks.end(), [](const Comparison& x) { return !x.pass; });
  verification = failing != checks.end() ? *failing : checks.front();
}

std::string KernelReport::json() const {
  return to_json(*this).dump();
}

nlohmann::json to_json(const KernelReport& r) {
  nlohmann::json j = {{"kernel", r.kernel},
                      {"device", r.device.name()},
                      {"device_chosen_by_auto", r.device.automatic},
                      {"parameters", to_json(r.parameters)},
                      {"performance", to_json(r.rates, r.work)},
                      {"timers", to_json(r.timers)}};
  j["roofline"] = r.roofline ? to_json(*r.roofline) : nlohmann::json(nullptr);
  j["verification"] = r.verification ? to_json(*r.verification) : nlohmann::json(nullptr);
  if (r.ranks)
    j["ranks"] = {{"ranks", r.ranks->ranks},
                  {"nodes", r.ranks->nodes},
                  {"bytes_exchanged_per_call", r.ranks->bytes_exchanged},
                  {"wait_per_call",
                   {{"min", r.ranks->wait_min},
                    {"avg", r.ranks->wait_avg},
                    {"max", r.ranks->wait_max},
                    {"max_rank", r.ranks->rank_of_max_wait}}},
                  {"timers", to_json(r.ranks->timers)}};
  if (r.checks.size() > 1) {
    j["checks"] = nlohmann::json::array();
    for (const auto& c : r.checks) j["checks"].push_back(to_json(c));
  }
  return j;
}

void Parameters::set_json(const std::string& name, std::string json_value) {
  for (auto& [key, value] : entries_)
    if (key == name) {
      value = std::move(json_value);
      return;
    }
  entries_.emplace_back(name, std::move(json_value));
}

void Parameters::set(const std::string& name, double value) {
  set_json(name, nlohmann::json(value).dump());
}
void Parameters::set(const std::string& name, long long value) {
  set_json(name, nlohmann::json(value).dump());
}
void Parameters::set(const std::string& name, bool value) {
  set_json(name, nlohmann::json(value).dump());
}
void Parameters::set(const std::string& name, const std::string& value) {
  set_json(name, nlohmann::json(value).dump());
}
void Parameters::set(const std::string& name, const std::vector<long long>& value) {
  set_json(name, nlohmann::json(value).dump());
}

std::string Parameters::json() const {
  return to_json(*this).dump();
}

nlohmann::json to_json(const Parameters& p) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, value] : p.entries()) j[key] = nlohmann::json::parse(value);
  return j;
}

Parameters parameters_from_json(const nlohmann::json& object) {
  Parameters p;
  for (const auto& [key, value] : object.items()) p.set_json(key, value.dump());
  return p;
}

}  // namespace sciproxy
