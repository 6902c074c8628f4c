// Synthetic parstack problems and the timed, verified run of one configuration on some devices,
// shared by `sciproxy parstack`, `sciproxy bench parstack` and `sciproxy demo`.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli_common.hpp"
#include "core/json.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/report.hpp"
#include "sciproxy/stack.hpp"

namespace sciproxy::app {

enum class Dtype { float32, float64 };
Dtype parse_dtype(std::string_view text, std::string_view option = "--dtype");  // UsageError
const char* dtype_name(Dtype dtype);
std::size_t dtype_size(Dtype dtype);

stack::Method parse_method(int method, std::string_view option = "--method");  // UsageError

// A synthetic problem the way a detector sees one: N traces of nsamples samples starting at 0,
// each shift set a row of random integer delays in [shift_min, shift_max] and positive weights.
struct ParstackSpec {
  std::int64_t ntraces = 30;
  std::int64_t nshifts = 1000;
  std::int64_t nsamples = 6000;
  std::optional<std::int64_t> shift_min, shift_max;  // default: [-nsamples/10, nsamples/10]
  std::uint64_t seed = 1;
  stack::Method method = stack::Method::stack;
  bool clamp = false;  // method 1: pyrocko's max(0, ...) quirk
  Dtype dtype = Dtype::float64;

  std::int64_t lo() const { return shift_min.value_or(-(nsamples / 10)); }
  std::int64_t hi() const { return shift_max.value_or(nsamples / 10); }
  double macs_upper_bound() const { return double(ntraces) * double(nshifts) * double(nsamples); }
  std::string label() const;  // "30 traces x 1000 shift sets x 6000 samples"
};

// Refuses sizes that are zero, negative, overflow the int32 sample indices, or would need
// absurd memory (more than 64 GiB, or more than this machine or a chosen GPU has). UsageError.
void check_spec(const ParstackSpec& spec, const std::vector<Device>& devices,
                double verify_max_macs);

struct RunOptions {
  int threads = 0;  // 0: all
  int warmup = 1;
  int reps = 5;
  bool verify = true;
  // Above this many multiply-adds the reference (a serial loop) would take long: verify a subset
  // of the shift sets instead, spread evenly over all of them.
  double verify_max_macs = 2e9;
  RooflinePolicy roofline = RooflinePolicy::measure_if_absent;
  bool report_reference = false;  // add the timed reference run (on the subset) to the outcomes
};

// One device's run of one configuration.
struct RunOutcome {
  KernelReport report;
  BenchStats stats;
  std::int64_t verified_shift_sets = 0;  // 0: not verified
  std::int64_t total_shift_sets = 0;
  bool is_reference_baseline = false;  // the reference run verification compares against
  // CUDA only: medians over the repetitions of the regions the backend records with CUDA events.
  std::optional<double> upload_seconds, kernel_seconds, download_seconds;
  std::optional<stack::ParstackPlan::Counters> plan_counters;

  double macs() const { return report.work.points; }
  double gmacs(double seconds) const { return seconds > 0 ? macs() / seconds * 1e-9 : 0.0; }
  bool passed() const { return !report.verification || report.verification->pass; }
  std::string verification_scope() const;  // "1000/1000 shift sets", "not verified", ...
  nlohmann::json to_json() const;          // KernelReport JSON + bench stats + transfer split
};

Tolerance parstack_tolerance(Dtype dtype);

// Builds the problem once, runs it on every device (timed with run_benchmark, a persistent
// ParstackPlan and Timers), verifies each against the reference backend and returns one outcome
// per device (plus the reference baseline first when asked). Progress notes go to `log`.
std::vector<RunOutcome> run_parstack(const ParstackSpec& spec, const std::vector<Device>& devices,
                                     const RunOptions& options, std::ostream& log);

}  // namespace sciproxy::app
