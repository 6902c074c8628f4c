// Synthetic parstack problems and their timed, verified runs (shared by parstack, bench, demo).
#include "parstack_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <span>

#include "sciproxy/core/error.hpp"
#include "sciproxy/core/verify.hpp"
#include "stack/case.hpp"

namespace sciproxy::app {

Dtype parse_dtype(std::string_view text, std::string_view option) {
  if (text == "float32" || text == "f32") return Dtype::float32;
  if (text == "float64" || text == "f64") return Dtype::float64;
  throw UsageError(fmt::format("{}: expected float32 or float64, got \"{}\"", option, text));
}

const char* dtype_name(Dtype dtype) {
  return dtype == Dtype::float32 ? "float32" : "float64";
}

std::size_t dtype_size(Dtype dtype) {
  return dtype == Dtype::float32 ? 4 : 8;
}

stack::Method parse_method(int method, std::string_view option) {
  if (method == 0) return stack::Method::stack;
  if (method == 1) return stack::Method::max;
  throw UsageError(
      fmt::format("{}: expected 0 (stack) or 1 (maximum of the stack), got {}", option, method));
}

std::string ParstackSpec::label() const {
  return fmt::format("{} traces x {} shift sets x {} samples", ntraces, nshifts, nsamples);
}

Tolerance parstack_tolerance(Dtype dtype) {
  return stack::parstack_tolerance(dtype == Dtype::float32 ? Precision::fp32 : Precision::fp64);
}

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMaxProblemBytes = 64 * kGiB;

// Shift sets the reference recomputes: all of them, or an even spread when that would take long.
std::int64_t verify_count(double macs, std::int64_t nshifts, double max_macs) {
  if (macs <= max_macs) return nshifts;
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(nshifts * (max_macs / macs)), 1,
                                  nshifts);
}

std::vector<std::int64_t> spread(std::int64_t count, std::int64_t total) {
  std::vector<std::int64_t> rows(count);
  for (std::int64_t j = 0; j < count; ++j) rows[j] = j * total / count;
  return rows;
}

}  // namespace

void check_spec(const ParstackSpec& spec, const std::vector<Device>& devices,
                double verify_max_macs) {
  if (spec.ntraces < 1)
    throw UsageError(fmt::format("--ntraces: expected at least 1, got {}", spec.ntraces));
  if (spec.nshifts < 1)
    throw UsageError(fmt::format("--nshifts: expected at least 1, got {}", spec.nshifts));
  if (spec.nsamples < 1)
    throw UsageError(fmt::format("--nsamples: expected at least 1, got {}", spec.nsamples));
  // Sample indices are int32 (pyrocko's offsets and shifts are); keep every shifted trace inside.
  constexpr std::int64_t kIndexLimit = std::numeric_limits<std::int32_t>::max() / 2;
  if (spec.nsamples > kIndexLimit)
    throw UsageError(
        fmt::format("--nsamples: expected at most {}, got {}", kIndexLimit, spec.nsamples));
  if (spec.lo() > spec.hi())
    throw UsageError(
        fmt::format("--shift-min {} is larger than --shift-max {}", spec.lo(), spec.hi()));
  if (spec.lo() < -kIndexLimit || spec.hi() > kIndexLimit)
    throw UsageError(
        fmt::format("--shift-min/--shift-max: expected shifts within +-{}, got [{}, {}]",
                    kIndexLimit, spec.lo(), spec.hi()));

  // Memory before anything is allocated: traces, shifts and weights, the result, and the
  // reference's subset with its gathered copy.
  const double elem = static_cast<double>(dtype_size(spec.dtype));
  const double lengthout =
      static_cast<double>(spec.nsamples) + static_cast<double>(spec.hi() - spec.lo());
  const double per_set = spec.method == stack::Method::stack ? lengthout : 1.0;
  const double terms = static_cast<double>(spec.ntraces) * static_cast<double>(spec.nshifts);
  const double inputs =
      elem * static_cast<double>(spec.ntraces) * static_cast<double>(spec.nsamples) +
      (4 + elem) * terms;
  const double result = elem * static_cast<double>(spec.nshifts) * per_set;
  const double nverify =
      static_cast<double>(verify_count(spec.macs_upper_bound(), spec.nshifts, verify_max_macs));
  const double host =
      inputs + result + 2 * elem * nverify * per_set + (4 + elem) * spec.ntraces * nverify;
  const double physical = physical_memory_bytes();
  const double limit = physical > 0 ? std::min(kMaxProblemBytes, 0.8 * physical) : kMaxProblemBytes;
  if (host > limit)
    throw UsageError(fmt::format(
        "{} ({}) needs about {} of host memory (the result alone is {}); the limit is {} ({})",
        spec.label(), dtype_name(spec.dtype), format_bytes(host), format_bytes(result),
        format_bytes(limit), limit < kMaxProblemBytes ? "80% of this machine's memory" : "64 GiB"));
  for (const Device& d : devices) {
    if (d.backend != Backend::cuda) continue;
    const auto gpus = cuda_devices();
    if (d.index >= static_cast<int>(gpus.size()) || gpus[d.index].memory_gib <= 0) continue;
    const double gpu_bytes = 0.9 * gpus[d.index].memory_gib * kGiB;
    if (inputs + result > gpu_bytes)
      throw UsageError(fmt::format("{} ({}) needs about {} on {} ({}), which has {:.1f} GiB",
                                   spec.label(), dtype_name(spec.dtype),
                                   format_bytes(inputs + result), d.name(), gpus[d.index].name,
                                   gpus[d.index].memory_gib));
  }
}

std::string RunOutcome::verification_scope() const {
  if (is_reference_baseline)
    return fmt::format("{}/{} shift sets", verified_shift_sets, total_shift_sets);
  if (!report.verification) return "not verified";
  return fmt::format("{}/{} shift sets", verified_shift_sets, total_shift_sets);
}

nlohmann::json RunOutcome::to_json() const {
  nlohmann::json j = sciproxy::to_json(report);
  j["bench"] = sciproxy::to_json(stats);
  j["verification_scope"] = {
      {"shift_sets_verified", verified_shift_sets},
      {"shift_sets_total", total_shift_sets},
      {"tolerance_rel_l2",
       parstack_tolerance(report.work.precision == Precision::fp32 ? Dtype::float32
                                                                   : Dtype::float64)
           .rel_l2},
      {"is_reference_baseline", is_reference_baseline}};
  if (kernel_seconds) {
    j["cuda"] = {{"upload_seconds_median", upload_seconds.value_or(0)},
                 {"kernel_seconds_median", *kernel_seconds},
                 {"download_seconds_median", download_seconds.value_or(0)},
                 {"gmacs_including_transfers", gmacs(stats.median)},
                 {"gmacs_kernel_only", gmacs(*kernel_seconds)}};
  }
  if (plan_counters)
    j["plan"] = {{"device_allocations", plan_counters->device_allocations},
                 {"bytes_host_to_device", plan_counters->bytes_host_to_device},
                 {"bytes_device_to_host", plan_counters->bytes_device_to_host},
                 {"device_bytes_held", plan_counters->device_bytes_held}};
  return j;
}

namespace {

// The problem's arrays; ParstackInput only points into them.
template <class T>
struct Problem {
  std::vector<std::vector<T>> data;
  std::vector<std::span<const T>> traces;
  std::vector<std::int32_t> offsets, shifts;
  std::vector<T> weights;
  std::int64_t nshifts = 0;

  stack::ParstackInput<T> input() const {
    return {std::span<const std::span<const T>>(traces), offsets, shifts, weights, nshifts};
  }
};

// Uniform doubles from the raw 64-bit stream, so the problem for a seed is the same with any
// standard library (std::uniform_*_distribution is implementation-defined).
struct Random {
  std::mt19937_64 engine;
  double uniform() { return static_cast<double>(engine() >> 11) * 0x1.0p-53; }  // [0, 1)
  std::int64_t integer(std::int64_t lo, std::int64_t hi) {                      // [lo, hi]
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    return lo + static_cast<std::int64_t>(engine() % span);
  }
};

template <class T>
Problem<T> make_problem(const ParstackSpec& spec) {
  Random rng{std::mt19937_64(spec.seed)};
  Problem<T> p;
  p.nshifts = spec.nshifts;
  p.data.resize(spec.ntraces);
  // Zero-mean noise in [-1, 1): seismograms are signed, so the stack is not trivially monotone.
  for (auto& trace : p.data) {
    trace.resize(spec.nsamples);
    for (auto& x : trace) x = static_cast<T>(2 * rng.uniform() - 1);
  }
  for (const auto& trace : p.data) p.traces.emplace_back(trace);
  p.offsets.assign(spec.ntraces, 0);
  const std::int64_t terms = spec.ntraces * spec.nshifts;
  p.shifts.resize(terms);
  p.weights.resize(terms);
  for (auto& s : p.shifts) s = static_cast<std::int32_t>(rng.integer(spec.lo(), spec.hi()));
  for (auto& w : p.weights) w = static_cast<T>(0.1 + 0.9 * rng.uniform());  // positive, never 0
  return p;
}

// The same traces with only the chosen rows of shifts and weights.
template <class T>
Problem<T> subset_of(const Problem<T>& full, const std::vector<std::int64_t>& rows) {
  Problem<T> sub;
  sub.traces = full.traces;  // views of full.data
  sub.offsets = full.offsets;
  sub.nshifts = static_cast<std::int64_t>(rows.size());
  const std::size_t n = full.traces.size();
  for (const std::int64_t r : rows) {
    sub.shifts.insert(sub.shifts.end(), full.shifts.begin() + r * n,
                      full.shifts.begin() + (r + 1) * n);
    sub.weights.insert(sub.weights.end(), full.weights.begin() + r * n,
                       full.weights.begin() + (r + 1) * n);
  }
  return sub;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double region_total(const Timers& timers, std::string_view leaf) {
  const Timers::Stat* s = timers.find(fmt::format("parstack/{}", leaf));
  return s ? s->total : 0.0;
}

nlohmann::json parameters_of(const ParstackSpec& spec, const stack::Extent& extent, int threads,
                             const RunOptions& options) {
  return {{"ntraces", spec.ntraces},         {"nshifts", spec.nshifts},
          {"nsamples", spec.nsamples},       {"method", static_cast<int>(spec.method)},
          {"dtype", dtype_name(spec.dtype)}, {"shift_min", spec.lo()},
          {"shift_max", spec.hi()},          {"seed", spec.seed},
          {"clamp_max_at_zero", spec.clamp}, {"offsetout", extent.offsetout},
          {"lengthout", extent.lengthout},   {"threads", threads},
          {"warmup", options.warmup},        {"repetitions", options.reps}};
}

template <class T>
std::vector<RunOutcome> run_typed(const ParstackSpec& spec, const std::vector<Device>& devices,
                                  const RunOptions& options, std::ostream& log) {
  const Problem<T> problem = make_problem<T>(spec);
  const auto input = problem.input();
  stack::ParstackOptions popt;
  popt.method = spec.method;
  popt.clamp_max_at_zero = spec.clamp;
  popt.nparallel = options.threads;
  const stack::Extent extent = stack::parstack_extent(input, popt);
  const WorkModel work = stack::parstack_work(input, extent, spec.method);
  const std::int64_t per_set = spec.method == stack::Method::stack ? extent.lengthout : 1;
  const int threads = effective_threads(options.threads);
  ThreadCount thread_count(options.threads);

  std::vector<RunOutcome> outcomes;

  // The reference on an even spread of shift sets, computed once for every device to match.
  std::vector<std::int64_t> rows;
  std::vector<T> expected;
  const bool any_to_verify =
      options.verify && std::any_of(devices.begin(), devices.end(), [](const Device& d) {
        return d.backend != Backend::reference;
      });
  if (any_to_verify || options.report_reference) {
    rows = spread(verify_count(work.points, spec.nshifts, options.verify_max_macs), spec.nshifts);
    if (static_cast<std::int64_t>(rows.size()) < spec.nshifts)
      log << fmt::format(
          "Verification: the reference (a serial loop) would take long for {} "
          "multiply-adds; verifying {} of {} shift sets, spread over all of them\n",
          format_count(work.points), rows.size(), spec.nshifts);
    const Problem<T> sub = subset_of(problem, rows);
    const auto sub_input = sub.input();
    stack::ParstackOptions ropt = popt;
    ropt.lengthout = extent.lengthout;  // the full problem's window, so rows line up
    ropt.offsetout = extent.offsetout;
    expected.resize(static_cast<std::size_t>(sub.nshifts * per_set));
    RunOutcome ref;
    ref.report.kernel = "parstack";
    ref.report.device = Device{Backend::reference, 0, false};
    const auto t0 = std::chrono::steady_clock::now();
    stack::parstack(ref.report.device, sub_input, std::span<T>(expected), ropt, &ref.report.timers);
    const double seconds = seconds_since(t0);
    if (options.report_reference) {
      ref.is_reference_baseline = true;
      ref.verified_shift_sets = sub.nshifts;
      ref.total_shift_sets = spec.nshifts;
      ref.stats.seconds = {seconds};
      ref.stats.median = ref.stats.min = ref.stats.max = ref.stats.mean = seconds;
      ref.report.parameters = parameters_from_json(parameters_of(spec, extent, 1, options));
      ref.report.parameters.set("nshifts", static_cast<long long>(sub.nshifts));
      ref.report.parameters.set("warmup", 0);
      ref.report.parameters.set("repetitions", 1);
      ref.report.work = stack::parstack_work(sub_input, extent, spec.method);
      ref.report.seconds = seconds;
      ref.report.roofline = roofline_for(ref.report.device, 1, options.roofline, log);
      ref.report.rates = derive_rates(ref.report.work, seconds, ref.report.roofline);
      outcomes.push_back(std::move(ref));
    }
  }

  std::vector<T> result(
      static_cast<std::size_t>(stack::parstack_result_size(spec.nshifts, extent, spec.method)));
  for (const Device& device : devices) {
    RunOutcome out;
    out.total_shift_sets = spec.nshifts;
    KernelReport& report = out.report;
    report.kernel = "parstack";
    report.device = device;
    report.parameters = parameters_from_json(
        parameters_of(spec, extent, device.backend == Backend::reference ? 1 : threads, options));
    report.work = work;
    report.roofline = roofline_for(device, threads, options.roofline, log);

    // One plan for every repetition: device buffers are allocated once, as a detector would.
    stack::ParstackPlan plan;
    std::vector<double> upload, kernel, download;
    int call = 0;
    auto once = [&]() -> double {
      if (call++ == options.warmup) report.timers.clear();  // the table shows timed calls only
      const double u0 = region_total(report.timers, "upload");
      const double k0 = region_total(report.timers, "kernel");
      const double d0 = region_total(report.timers, "download");
      const auto t0 = std::chrono::steady_clock::now();
      stack::parstack(device, input, std::span<T>(result), popt, &report.timers, &plan);
      const double seconds = seconds_since(t0);
      if (call > options.warmup) {
        upload.push_back(region_total(report.timers, "upload") - u0);
        kernel.push_back(region_total(report.timers, "kernel") - k0);
        download.push_back(region_total(report.timers, "download") - d0);
      }
      return seconds;
    };
    out.stats = run_benchmark(once, options.warmup, options.reps);
    report.seconds = out.stats.median;
    report.rates = derive_rates(work, report.seconds, report.roofline);
    if (device.backend == Backend::cuda && report.timers.find("parstack/kernel")) {
      out.upload_seconds = median_of(upload);
      out.kernel_seconds = median_of(kernel);
      out.download_seconds = median_of(download);
      out.plan_counters = plan.counters();
    }

    if (options.verify && device.backend != Backend::reference) {
      std::vector<T> got;
      got.reserve(expected.size());
      for (const std::int64_t r : rows)
        got.insert(got.end(), result.begin() + r * per_set, result.begin() + (r + 1) * per_set);
      report.verification = compare<T, T>(std::span<const T>(got), std::span<const T>(expected),
                                          parstack_tolerance(spec.dtype));
      out.verified_shift_sets = static_cast<std::int64_t>(rows.size());
    }
    outcomes.push_back(std::move(out));
  }
  return outcomes;
}

}  // namespace

std::vector<RunOutcome> run_parstack(const ParstackSpec& spec, const std::vector<Device>& devices,
                                     const RunOptions& options, std::ostream& log) {
  return spec.dtype == Dtype::float32 ? run_typed<float>(spec, devices, options, log)
                                      : run_typed<double>(spec, devices, options, log);
}

}  // namespace sciproxy::app
