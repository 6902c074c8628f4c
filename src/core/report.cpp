// Kernel report: a Devito-style summary for people, the same numbers as JSON for tools.
#include "sciproxy/core/report.hpp"

#include <fmt/format.h>

namespace sciproxy {

void KernelReport::print(std::ostream& out) const {
  const std::string unit = work.point_unit == "MAC" ? "GMAC/s" : "GPts/s";
  out << fmt::format("Operator {} ran in {:.4f} s on {}{} [{}]\n", kernel, seconds, device.name(),
                     device.automatic ? " (chosen by auto)" : "", precision_name(work.precision));
  std::string perf = fmt::format("Global performance: [OI={:.2f}, {:.2f} GFlops/s, {:.3f} {}, {:.2f} GB/s",
                                 rates.intensity, rates.gflops_per_s, rates.gpoints_per_s, unit,
                                 rates.gbytes_per_s);
  if (rates.attainable_gflops > 0)
    perf += fmt::format(", {:.0f}% of roofline ({} bound {:.1f} GFlops/s)",
                        100 * rates.roofline_fraction, rates.bound, rates.attainable_gflops);
  else
    perf += ", roofline unknown (run `sciproxy roofline`)";
  out << perf << "]\n";
  if (!parameters.empty()) {
    std::string line = "Parameters:";
    for (const auto& [key, value] : parameters.items()) line += fmt::format(" {}={}", key, value.dump());
    out << line << "\n";
  }
  if (verification) out << "Verification against reference: " << verification->summary() << "\n";
  if (!timers.stats().empty()) out << timers.table();
}

nlohmann::json KernelReport::to_json() const {
  nlohmann::json j = {{"kernel", kernel},
                      {"device", device.name()},
                      {"device_chosen_by_auto", device.automatic},
                      {"parameters", parameters},
                      {"performance", rates.to_json(work)},
                      {"timers", timers.to_json()}};
  j["roofline"] = roofline ? roofline->to_json() : nlohmann::json(nullptr);
  j["verification"] = verification ? verification->to_json() : nlohmann::json(nullptr);
  return j;
}

}  // namespace sciproxy
