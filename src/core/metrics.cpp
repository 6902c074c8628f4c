// Rates derived from a work model and a time: the one place where GPts/s, GFlops/s, GB/s,
// operational intensity and the roofline fraction are computed.
#include "sciproxy/core/metrics.hpp"

#include <algorithm>

#include "core/json.hpp"

namespace sciproxy {

const char* precision_name(Precision p) {
  return p == Precision::fp32 ? "fp32" : "fp64";
}

double Roofline::memory_bandwidth_gbs(const WorkModel& work) const {
  const bool cached = work.working_set_bytes > 0 && last_level_cache_bytes > 0 &&
                      work.working_set_bytes <= last_level_cache_bytes;
  return cached ? std::max(bandwidth_gbs, cache_bandwidth_gbs) : bandwidth_gbs;
}

double Roofline::attainable_gflops(const WorkModel& work) const {
  double bound =
      std::min(peak_gflops(work.precision), work.intensity() * memory_bandwidth_gbs(work));
  if (work.cache_bytes > 0 && cache_bandwidth_gbs > 0)
    bound = std::min(bound, work.flops / work.cache_bytes * cache_bandwidth_gbs);
  return bound;
}

nlohmann::json to_json(const Roofline& r) {
  return {{"machine", r.machine},
          {"threads", r.threads},
          {"bandwidth_gbs", r.bandwidth_gbs},
          {"cache_bandwidth_gbs", r.cache_bandwidth_gbs},
          {"peak_gflops_fp32", r.peak_gflops_fp32},
          {"peak_gflops_fp64", r.peak_gflops_fp64},
          {"load_average", r.load_average}};
}

Roofline roofline_from_json(const nlohmann::json& j) {
  Roofline r;
  r.machine = j.at("machine").get<std::string>();
  r.threads = j.at("threads").get<int>();
  r.bandwidth_gbs = j.at("bandwidth_gbs").get<double>();
  r.cache_bandwidth_gbs = j.at("cache_bandwidth_gbs").get<double>();
  r.load_average = j.value("load_average", 0.0);
  r.peak_gflops_fp32 = j.at("peak_gflops_fp32").get<double>();
  r.peak_gflops_fp64 = j.at("peak_gflops_fp64").get<double>();
  return r;
}

Rates derive_rates(const WorkModel& work, double seconds, const std::optional<Roofline>& roof) {
  Rates r;
  r.seconds = seconds;
  r.intensity = work.intensity();
  if (seconds > 0) {
    r.gpoints_per_s = work.points / seconds * 1e-9;
    r.gflops_per_s = work.flops / seconds * 1e-9;
    r.gbytes_per_s = work.bytes / seconds * 1e-9;
  }
  if (roof && roof->bandwidth_gbs > 0 && roof->peak_gflops(work.precision) > 0) {
    r.attainable_gflops = roof->attainable_gflops(work);
    const double memory = roof->memory_bandwidth_gbs(work);
    if (r.attainable_gflops >= roof->peak_gflops(work.precision))
      r.bound = "compute";
    else if (memory == roof->bandwidth_gbs && r.attainable_gflops >= r.intensity * memory)
      r.bound = "memory";  // DRAM
    else
      r.bound = "cache";  // the working set in the last-level cache, or the declared cache stream
    if (r.attainable_gflops > 0) r.roofline_fraction = r.gflops_per_s / r.attainable_gflops;
  }
  return r;
}

nlohmann::json to_json(const Rates& r, const WorkModel& work) {
  return {{"seconds", r.seconds},
          {"points", work.points},
          {"point_unit", work.point_unit},
          {"flops", work.flops},
          {"bytes", work.bytes},
          {"cache_bytes", work.cache_bytes},
          {"working_set_bytes", work.working_set_bytes},
          {"precision", precision_name(work.precision)},
          {"gpoints_per_s", r.gpoints_per_s},
          {"gflops_per_s", r.gflops_per_s},
          {"gbytes_per_s", r.gbytes_per_s},
          {"intensity", r.intensity},
          {"attainable_gflops", r.attainable_gflops},
          {"roofline_fraction", r.roofline_fraction},
          {"bound", r.bound}};
}

DisplayRate display_rate(const WorkModel& work, double gpoints_per_s) {
  if (work.point_unit == "Pts") return {gpoints_per_s, "GPts/s"};
  if (work.point_unit == "MAC") return {gpoints_per_s, "GMAC/s"};
  return {gpoints_per_s * 1e9, work.point_unit + "/s"};
}

}  // namespace sciproxy
