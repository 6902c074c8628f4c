// `sciproxy bench`: sweeps of the library's cases through the harness (timing only), per device,
// as a table, JSON and (through bench/plot_sweep.py) a PNG. `bench` (or `bench all`) sweeps
// every case of the registry over its bench_sweep settings; `bench parstack` the trace length of
// the parstack case, `bench scalar` the model size of the scalar-wave cases.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "cli_common.hpp"
#include "scalar_options.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"
#include "sciproxy/core/roofline.hpp"

namespace sciproxy::app {

namespace {

std::string locate_plot_script() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  if (const std::string dir = executable_dir(); !dir.empty()) {
    candidates.push_back(fs::path(dir) / "plot_sweep.py");
    candidates.push_back(fs::path(dir) / ".." / "share" / "sciproxy" / "plot_sweep.py");
  }
  candidates.emplace_back(SCIPROXY_PLOT_SCRIPT_SOURCE);
  for (const auto& c : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(c, ec)) return fs::weakly_canonical(c, ec).string();
  }
  throw RuntimeError(
      fmt::format("--plot: cannot find plot_sweep.py (looked next to the executable, in "
                  "../share/sciproxy and at {})",
                  SCIPROXY_PLOT_SCRIPT_SOURCE));
}

std::vector<Device> bench_devices(const std::vector<std::string>& names) {
  std::vector<Device> devices;
  auto add = [&](const Device& d) {
    for (const auto& have : devices)
      if (have == d) return;
    devices.push_back(d);
  };
  for (const auto& name : names) {
    if (name == "auto") {
      for (const auto& d : available_compute_devices()) add(d);
      continue;
    }
    try {
      add(select_device_option(name));
    } catch (const NotCompiled& e) {
      fmt::print("Skipping {}: {}\n", name, e.what());
    } catch (const DeviceUnavailable& e) {
      fmt::print("Skipping {}: {}\n", name, e.what());
    }
  }
  if (devices.empty())
    throw RuntimeError("--device: none of the requested devices is available here");
  return devices;
}

// The checks every sweep makes before it measures anything: dtypes, device names (malformed
// ones are usage errors even when that device is skipped), output paths, and python3 with
// matplotlib when a plot is asked for, so a sweep never fails after minutes of measuring.
struct SweepChecks {
  std::vector<std::string> dtypes;
  std::string plot_script;  // empty without --plot
};

SweepChecks check_sweep_options(const std::vector<std::string>& dtype_names,
                                const std::vector<std::string>& device_names,
                                const std::string& json_path, const std::string& plot_path) {
  SweepChecks checks;
  for (const auto& d : dtype_names) checks.dtypes.push_back(parse_dtype(d));
  if (checks.dtypes.empty()) throw UsageError("--dtype: expected at least one of float32, float64");
  for (const auto& d : device_names) {
    try {
      if (d != "auto") (void)parse_device(d);
    } catch (const InvalidArgument&) {
      throw UsageError(fmt::format(
          "--device: expected a list of auto, reference, cpu, cuda, cuda:N; got \"{}\"", d));
    }
  }
  if (!json_path.empty()) check_output_path(json_path, "--json");
  if (!plot_path.empty()) {
    check_output_path(plot_path, "--plot");
    checks.plot_script = locate_plot_script();
    if (run_program({"python3", "--version"}, true) != 0)
      throw RuntimeError("--plot needs python3, which was not found on PATH");
    if (run_program({"python3", "-c", "import matplotlib"}, true) != 0)
      throw RuntimeError(
          "--plot needs matplotlib for python3 (pip install matplotlib, or apt install "
          "python3-matplotlib)");
  }
  return checks;
}

// Writes the sweep's JSON (to a temporary file when only a plot is asked for) and its plot.
void write_sweep_outputs(const nlohmann::json& doc, const std::string& json_option,
                         const std::string& plot_path, const std::string& script,
                         const std::string& name) {
  std::string json_path = json_option;
  const bool temporary = json_path.empty() && !plot_path.empty();
  if (temporary)
    json_path = (std::filesystem::temp_directory_path() /
                 fmt::format("sciproxy-{}-{}.json", name, getpid()))
                    .string();
  if (!json_path.empty()) {
    write_file_atomically(json_path, doc.dump(2) + "\n");
    if (!temporary) fmt::print("Wrote {}\n", json_path);
  }
  if (!plot_path.empty()) {
    std::fflush(stdout);
    const int rc = run_program({"python3", script, json_path, plot_path});
    if (temporary) std::filesystem::remove(json_path);
    if (rc != 0)
      throw RuntimeError(fmt::format("--plot: {} failed with exit status {}", script, rc));
    fmt::print("Wrote {}\n", plot_path);
  }
}

// A comma-separated list of positive counts, or one of the presets.
std::vector<std::int64_t> parse_sizes(
    const std::string& sizes,
    const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& presets,
    const char* what) {
  for (const auto& [name, values] : presets)
    if (sizes == name) return values;
  std::vector<std::int64_t> out;
  std::stringstream in(sizes);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || n < 1)
      throw UsageError(
          fmt::format("--sizes: expected small, default, large or a comma-separated "
                      "list of positive {}, got \"{}\"",
                      what, sizes));
    out.push_back(n);
  }
  if (out.empty())
    throw UsageError(fmt::format("--sizes: expected small, default, large or a list of {}", what));
  return out;
}

// The options every sweep takes.
struct SweepOptions {
  std::vector<std::string> devices{"cpu", "cuda"};
  int reps = 3;
  int threads = 0;
  std::string json_path;
  std::string plot_path;

  void add_to(CLI::App* sub, const char* plot_what) {
    sub->add_option("--device", devices,
                    "Comma-separated devices: cpu, cuda, cuda:N, reference, "
                    "auto (all present); absent ones are skipped")
        ->delimiter(',')
        ->type_name("LIST")
        ->capture_default_str();
    sub->add_option("--reps", reps, "Timed repetitions per point (after one warm-up)")
        ->type_name("R")
        ->capture_default_str();
    sub->add_option("--threads", threads, "OpenMP threads of the cpu backend; 0: all")
        ->type_name("N");
    sub->add_option("--json", json_path, "Write the results and environment record to FILE")
        ->type_name("FILE")
        ->check(output_file());
    sub->add_option("--plot", plot_path,
                    fmt::format("Plot {} to FILE.png (python3 + matplotlib)", plot_what))
        ->type_name("FILE.png")
        ->check(output_file());
  }
};

// One point of a sweep: a case of the registry and its settings.
struct SweepPoint {
  const CaseEntry* entry;
  CaseSettings settings;
};

// The fastest and the slowest row of each case, by throughput.
class Extremes {
 public:
  void add(const std::string& group, const std::string& row, double rate, const std::string& unit) {
    auto& e = groups_[group];
    if (e.count == 0 || rate > e.best) e.best = rate, e.best_row = row;
    if (e.count == 0 || rate < e.slowest) e.slowest = rate, e.slowest_row = row;
    e.unit = unit;
    ++e.count;
    if (std::find(order_.begin(), order_.end(), group) == order_.end()) order_.push_back(group);
  }
  void print() const {
    if (order_.empty()) return;
    fmt::print("\nSummary (median of the repetitions; the slowest row first):\n");
    for (const auto& group : order_) {
      const auto& e = groups_.at(group);
      fmt::print("  {:<22} slowest {:>9.3f} {} ({}); best {:>9.3f} {} ({})\n", group, e.slowest,
                 e.unit, e.slowest_row, e.best, e.unit, e.best_row);
    }
  }

 private:
  struct Entry {
    double best = 0, slowest = 0;
    std::string best_row, slowest_row, unit;
    long count = 0;
  };
  std::map<std::string, Entry> groups_;
  std::vector<std::string> order_;
};

// The check every point makes before anything is measured (the case's own, memory included), so
// a sweep never fails after minutes of measuring.
void check_points(const std::vector<SweepPoint>& points) {
  for (const auto& p : points) (void)p.entry->make(p.settings);
}

// Runs every point on every device through the harness, timing only (`sciproxy parstack`,
// `scalar --verify`, `tti --verify` and `demo` verify), with the ceilings cached by `sciproxy
// roofline` when there are any; row() gets each result.
void run_sweep(const std::vector<SweepPoint>& points, const std::vector<Device>& devices,
               const SweepOptions& opt,
               const std::function<void(const SweepPoint&, const CaseResult&)>& row) {
  HarnessOptions harness;
  harness.comm = ranks();
  harness.repetitions = opt.reps;
  harness.threads = opt.threads;
  harness.verify = false;
  harness.measure_roofline = false;
  harness.progress = true;
  for (std::size_t i = 0; i < points.size(); ++i) {
    harness.progress_prefix = fmt::format("[{}/{}] ", i + 1, points.size());
    for (const auto& result : run_case(*points[i].entry, points[i].settings, devices, harness)) {
      row(points[i], result);
      std::fflush(stdout);
    }
  }
}

nlohmann::json sweep_document(const std::string& kernel, const nlohmann::json& sweep,
                              const std::vector<Device>& devices, int threads,
                              const nlohmann::json& results) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& d : devices)
    if (d.backend == Backend::cuda) {
      const auto all = cuda_devices();
      gpus.push_back(d.index < static_cast<int>(all.size()) ? all[d.index].name : d.name());
    }
  return {{"kind", "sciproxy-bench"},
          {"kernel", kernel},
          {"sweep", sweep},
          {"cpu_model", cpu_model()},
          {"threads", threads},
          {"gpus", gpus},
          {"environment", environment_record(threads)},
          {"results", results}};
}

std::string device_list(const std::vector<Device>& devices) {
  std::string names;
  for (const auto& d : devices) names += (names.empty() ? "" : ", ") + d.name();
  return names;
}

nlohmann::json fraction_json(double fraction) {
  return fraction > 0 ? nlohmann::json(fraction) : nlohmann::json(nullptr);
}

std::string fraction_text(double fraction) {
  return fraction > 0 ? fmt::format("{:.1f}%", 100 * fraction) : "-";
}

// --- bench (all) --------------------------------------------------------------------------------

struct BenchAllOptions {
  SweepOptions sweep;
  std::vector<std::string> cases;  // empty: every case
};

std::string settings_text(const CaseSettings& s) {
  std::string text;
  for (const auto& [key, value] : s.values)
    if (key != "dtype") text += fmt::format("{}{}={}", text.empty() ? "" : " ", key, value);
  return text.empty() ? "defaults" : text;
}

int run_bench_all(const BenchAllOptions& opt) {
  check_threads(opt.sweep.threads);
  check_repetitions(opt.sweep.reps);
  const auto [dtypes, script] =
      check_sweep_options({"float32"}, opt.sweep.devices, opt.sweep.json_path, opt.sweep.plot_path);
  std::vector<SweepPoint> points;
  std::vector<std::string> names;
  for (const auto& name : opt.cases) (void)find_case(name);  // a misspelt case is refused
  for (const auto& entry : case_registry()) {
    if (!opt.cases.empty() &&
        std::find(opt.cases.begin(), opt.cases.end(), entry.name) == opt.cases.end())
      continue;
    names.push_back(entry.name);
    for (const auto& s : entry.bench_sweep.empty() ? entry.demo_variants : entry.bench_sweep)
      points.push_back({&entry, s});
  }
  check_points(points);
  const std::vector<Device> devices = bench_devices(opt.sweep.devices);
  const int threads = effective_threads(opt.sweep.threads);
  fmt::print(
      "sciproxy bench: {} points of {} cases ({}); devices {}; {} cpu threads; {} "
      "repetitions after 1 warm-up\n",
      points.size(), names.size(), fmt::join(names, ", "), device_list(devices), threads,
      opt.sweep.reps);
  const std::string header = fmt::format(
      "{:<22} {:<10} {:<8} {:>11} {:>11} {:>11} {:>10} {:<7} {:>9}  {}", "case", "device", "dtype",
      "median [s]", "min [s]", "max [s]", "G/s", "unit", "roofline", "settings");
  fmt::print("{}\n{}\n", header, std::string(header.size(), '-'));
  std::fflush(stdout);

  nlohmann::json results = nlohmann::json::array();
  Extremes extremes;
  run_sweep(points, devices, opt.sweep, [&](const SweepPoint& p, const CaseResult& r) {
    const KernelReport& report = r.report;
    const std::string dtype = report.work.precision == Precision::fp32 ? "float32" : "float64";
    const DisplayRate display = display_rate(report.work, report.rates.gpoints_per_s);
    const std::string unit = display.unit;
    const double rate = display.value;
    const double fraction = report.rates.roofline_fraction;
    fmt::print("{:<22} {:<10} {:<8} {:>11.4e} {:>11.4e} {:>11.4e} {:>10.3f} {:<7} {:>9}  {}\n",
               p.entry->name, report.device.name(), dtype, r.stats.median, r.stats.min, r.stats.max,
               rate, unit, fraction_text(fraction), settings_text(p.settings));
    extremes.add(p.entry->name,
                 fmt::format("{} {} {}", report.device.name(), dtype, settings_text(p.settings)),
                 rate, unit);
    results.push_back({{"case", p.entry->name},
                       {"settings", p.settings.values},
                       {"label", p.entry->make(p.settings)->label()},
                       {"parameters", nlohmann::json::parse(report.parameters.json())},
                       {"device", report.device.name()},
                       {"dtype", dtype},
                       {"points", report.work.points},
                       {"unit", unit},
                       {"median_s", r.stats.median},
                       {"min_s", r.stats.min},
                       {"max_s", r.stats.max},
                       {"seconds", r.stats.seconds},
                       // plot_sweep.py reads "gmacs": the case's rate in its unit.
                       {"gmacs", rate},
                       {"g_per_s", rate},
                       {"roofline_fraction", fraction_json(fraction)}});
  });
  extremes.print();
  const nlohmann::json sweep = {
      {"variable", "points"},
      {"unit", "G/s (GMAC/s for parstack, GPts/s for the wave kernels, patches/s for ex2d)"},
      {"cases", names},
      {"repetitions", opt.sweep.reps},
      {"warmup", 1}};
  write_sweep_outputs(sweep_document("all", sweep, devices, threads, results), opt.sweep.json_path,
                      opt.sweep.plot_path, script, "bench");
  return 0;
}

// --- bench parstack -----------------------------------------------------------------------------

struct BenchParstackOptions {
  SweepOptions sweep;
  std::vector<std::string> dtypes{"float32", "float64"};
  std::string sizes = "default";
  std::int64_t ntraces = 30;
  std::int64_t nshifts = 1000;
  int method = 0;
  std::int64_t seed = 1;
};

const OptionNames kParstackNames{{{"ntraces", "--ntraces"},
                                  {"nshifts", "--nshifts"},
                                  {"method", "--method"},
                                  {"seed", "--seed"},
                                  {"nsamples", "--sizes"}},
                                 {}};

// The sweep: window length in samples. At 100 Hz, 1000 samples is 10 s of data (a local event),
// 30000 is qseek's 5-minute window and 100000 is a teleseismic window of about 17 minutes.
int run_bench_parstack(const BenchParstackOptions& opt) {
  check_threads(opt.sweep.threads);
  check_repetitions(opt.sweep.reps);
  const auto sizes = parse_sizes(opt.sizes,
                                 {{"small", {1000, 3000, 10000}},
                                  {"default", {1000, 2000, 5000, 10000, 20000, 50000, 100000}},
                                  {"large", {1000, 3000, 10000, 30000, 100000, 300000}}},
                                 "sample counts");
  const auto [dtypes, script] =
      check_sweep_options(opt.dtypes, opt.sweep.devices, opt.sweep.json_path, opt.sweep.plot_path);
  const CaseEntry& entry = find_case("parstack");
  std::vector<SweepPoint> points;
  for (const auto& dtype : dtypes)
    for (const std::int64_t n : sizes)
      points.push_back({&entry, CaseSettings{{{"ntraces", std::to_string(opt.ntraces)},
                                              {"nshifts", std::to_string(opt.nshifts)},
                                              {"nsamples", std::to_string(n)},
                                              {"method", std::to_string(opt.method)},
                                              {"dtype", dtype},
                                              {"seed", std::to_string(opt.seed)}}}});
  check_points(points);
  const std::vector<Device> devices = bench_devices(opt.sweep.devices);
  const int threads = effective_threads(opt.sweep.threads);
  fmt::print(
      "sciproxy bench parstack: {} traces x {} shift sets, method {}, nsamples in {{{}}}, "
      "shifts in [-T/10, T/10]; devices {}; {} cpu threads; {} repetitions after 1 "
      "warm-up\n",
      opt.ntraces, opt.nshifts, opt.method, fmt::join(sizes, ", "), device_list(devices), threads,
      opt.sweep.reps);
  const bool any_cuda = std::any_of(devices.begin(), devices.end(),
                                    [](const Device& d) { return d.backend == Backend::cuda; });
  const std::string header =
      fmt::format("{:<10} {:<8} {:>9} {:>10} {:>11} {:>11} {:>11} {:>9} {:>9}{}", "device", "dtype",
                  "nsamples", "MACs", "median [s]", "min [s]", "max [s]", "GMAC/s", "roofline",
                  any_cuda ? fmt::format(" {:>13}", "kernel GMAC/s") : "");
  fmt::print("{}\n{}\n", header, std::string(header.size(), '-'));
  std::fflush(stdout);

  nlohmann::json results = nlohmann::json::array();
  Extremes extremes;
  run_sweep(points, devices, opt.sweep, [&](const SweepPoint& p, const CaseResult& r) {
    const double macs = r.report.work.points;
    auto gmacs = [&](double s) { return s > 0 ? macs / s * 1e-9 : 0.0; };
    const std::string dtype = p.settings.get("dtype", "");
    const auto nsamples = p.settings.get_int("nsamples", 0);
    const nlohmann::json details = details_of(r);
    const double fraction = r.report.rates.roofline_fraction;
    const bool split = details.contains("cuda");
    fmt::print(
        "{:<10} {:<8} {:>9} {:>10} {:>11.4e} {:>11.4e} {:>11.4e} {:>9.2f} {:>9}{}\n",
        r.report.device.name(), dtype, nsamples, format_count(macs), r.stats.median, r.stats.min,
        r.stats.max, gmacs(r.stats.median), fraction_text(fraction),
        any_cuda
            ? fmt::format(
                  " {:>13}",
                  split ? fmt::format("{:.2f}", details["cuda"]["gmacs_kernel_only"].get<double>())
                        : "-")
            : "");
    extremes.add("parstack",
                 fmt::format("{} {} nsamples {}", r.report.device.name(), dtype, nsamples),
                 gmacs(r.stats.median), "GMAC/s");
    nlohmann::json row = {{"device", r.report.device.name()},
                          {"dtype", dtype},
                          {"method", opt.method},
                          {"ntraces", opt.ntraces},
                          {"nshifts", opt.nshifts},
                          {"nsamples", nsamples},
                          {"macs", macs},
                          {"median_s", r.stats.median},
                          {"min_s", r.stats.min},
                          {"max_s", r.stats.max},
                          {"seconds", r.stats.seconds},
                          {"gmacs", gmacs(r.stats.median)},
                          {"gmacs_best", gmacs(r.stats.min)},
                          {"roofline_fraction", fraction_json(fraction)}};
    if (split) {
      const auto& c = details["cuda"];
      row["cuda"] = {{"upload_s", c["upload_seconds_median"]},
                     {"kernel_s", c["kernel_seconds_median"]},
                     {"download_s", c["download_seconds_median"]},
                     {"gmacs_including_transfers", c["gmacs_including_transfers"]},
                     {"gmacs_kernel_only", c["gmacs_kernel_only"]}};
    }
    results.push_back(std::move(row));
  });
  extremes.print();
  const nlohmann::json sweep = {
      {"variable", "nsamples"},        {"values", sizes},
      {"ntraces", opt.ntraces},        {"nshifts", opt.nshifts},
      {"method", opt.method},          {"shifts", "random integers in [-nsamples/10, nsamples/10]"},
      {"repetitions", opt.sweep.reps}, {"warmup", 1}};
  write_sweep_outputs(sweep_document("parstack", sweep, devices, threads, results),
                      opt.sweep.json_path, opt.sweep.plot_path, script, "bench");
  return 0;
}

// --- bench scalar -------------------------------------------------------------------------------

struct BenchScalarOptions {
  SweepOptions sweep;
  std::vector<std::string> dtypes{"float32", "float64"};
  std::string sizes = "default";
  int ndim = 2;
  std::int64_t nt = 50;
  std::int64_t shots = 4;
  std::int64_t receivers = 100;
  int accuracy = 4;
  bool gradient = false;
  GradientStorageCli storage;
};

// The sweep: cells per dimension n (the model is n^ndim cells).
int run_bench_scalar(const BenchScalarOptions& opt) {
  if (opt.ndim < 1 || opt.ndim > 3)
    throw UsageError(fmt::format("--ndim: expected 1, 2 or 3, got {}", opt.ndim));
  check_threads(opt.sweep.threads);
  check_repetitions(opt.sweep.reps);
  const bool cube = opt.ndim == 3;
  const auto sizes =
      parse_sizes(opt.sizes,
                  {{"small", cube ? std::vector<std::int64_t>{16, 24, 32}
                                  : std::vector<std::int64_t>{32, 64, 128}},
                   {"default", cube ? std::vector<std::int64_t>{32, 48, 64, 96, 128}
                                    : std::vector<std::int64_t>{64, 128, 256, 512, 1024}},
                   {"large", cube ? std::vector<std::int64_t>{64, 128, 200, 256, 320}
                                  : std::vector<std::int64_t>{128, 256, 512, 1024, 2048, 4096}}},
                  "cell counts per dimension");
  const auto [dtypes, script] =
      check_sweep_options(opt.dtypes, opt.sweep.devices, opt.sweep.json_path, opt.sweep.plot_path);
  CaseSettings storage;  // the gradient-storage options, checked once
  opt.storage.apply(storage, opt.gradient);
  const CaseEntry& entry = find_case(opt.gradient ? "scalar_gradient" : "scalar");
  std::vector<SweepPoint> points;
  for (const auto& dtype : dtypes)
    for (const std::int64_t n : sizes) {
      CaseSettings s = storage;
      s.values["ndim"] = std::to_string(opt.ndim);
      for (int d = 0; d < opt.ndim; ++d) s.values[fmt::format("shape{}", d)] = std::to_string(n);
      s.values["nt"] = std::to_string(opt.nt);
      s.values["shots"] = std::to_string(opt.shots);
      s.values["receivers"] = std::to_string(std::min(opt.receivers, n));
      s.values["accuracy"] = std::to_string(opt.accuracy);
      s.values["dtype"] = dtype;
      s.values["source_depth"] = std::to_string(std::min<std::int64_t>(2, n - 1));
      points.push_back({&entry, s});
    }
  check_points(points);
  const std::vector<Device> devices = bench_devices(opt.sweep.devices);
  const int threads = effective_threads(opt.sweep.threads);
  fmt::print(
      "sciproxy bench scalar{}: {}-D models n^{} cells for n in {{{}}}, 5 m, dt 0.004 s, nt {}, "
      "{} shots, accuracy {}; devices {}; {} cpu threads; {} repetitions after 1 warm-up\n",
      opt.gradient ? " (forward + gradient)" : "", opt.ndim, opt.ndim, fmt::join(sizes, ", "),
      opt.nt, opt.shots, opt.accuracy, device_list(devices), threads, opt.sweep.reps);
  nlohmann::json storage_json = nullptr;
  if (opt.gradient) {
    const auto p = nlohmann::json::parse(entry.make(points.front().settings)->parameters().json());
    fmt::print("Gradient sampling: {}\n", gradient_storage_label(p, false));
    storage_json = p["gradient_storage"];
  }
  const std::string header =
      fmt::format("{:<10} {:<8} {:>6} {:>11} {:>11} {:>11} {:>11} {:>9} {:>9}", "device", "dtype",
                  "n", "points", "median [s]", "min [s]", "max [s]", "GPts/s", "roofline");
  fmt::print("{}\n{}\n", header, std::string(header.size(), '-'));
  std::fflush(stdout);

  nlohmann::json results = nlohmann::json::array();
  Extremes extremes;
  run_sweep(points, devices, opt.sweep, [&](const SweepPoint& p, const CaseResult& r) {
    const double pts = r.report.work.points;
    auto gpts = [&](double s) { return s > 0 ? pts / s * 1e-9 : 0.0; };
    const std::string dtype = p.settings.get("dtype", "");
    const auto n = p.settings.get_int("shape0", 0);
    const double fraction = r.report.rates.roofline_fraction;
    fmt::print("{:<10} {:<8} {:>6} {:>11} {:>11.4e} {:>11.4e} {:>11.4e} {:>9.3f} {:>9}\n",
               r.report.device.name(), dtype, n, format_count(pts), r.stats.median, r.stats.min,
               r.stats.max, gpts(r.stats.median), fraction_text(fraction));
    extremes.add(entry.name, fmt::format("{} {} n {}", r.report.device.name(), dtype, n),
                 gpts(r.stats.median), "GPts/s");
    std::int64_t cells = 1;
    for (int d = 0; d < opt.ndim; ++d) cells *= n;
    results.push_back(
        {{"device", r.report.device.name()},
         {"dtype", dtype},
         {"n", n},
         {"cells", cells},
         {"shape", std::vector<std::int64_t>(static_cast<std::size_t>(opt.ndim), n)},
         {"nt", opt.nt},
         {"step_ratio", details_of(r)["step_ratio"]},
         {"points", pts},
         {"median_s", r.stats.median},
         {"min_s", r.stats.min},
         {"max_s", r.stats.max},
         {"seconds", r.stats.seconds},
         {"gpts", gpts(r.stats.median)},
         {"gpts_best", gpts(r.stats.min)},
         // plot_sweep.py reads "gmacs": here it holds GPts/s (the sweep's "unit" says so).
         {"gmacs", gpts(r.stats.median)},
         {"roofline_fraction", fraction_json(fraction)}});
  });
  extremes.print();
  const nlohmann::json sweep = {
      {"variable", "cells"},
      {"unit", "GPts/s"},
      {"values", sizes},
      {"ndim", opt.ndim},
      {"nt", opt.nt},
      {"shots", opt.shots},
      {"receivers", opt.receivers},
      {"accuracy", opt.accuracy},
      {"gradient", opt.gradient},
      {"gradient_storage", storage_json},
      {"model", "5 layers, 1500..4000 m/s, spacing 5 m, dt 0.004 s, 25 Hz"},
      {"repetitions", opt.sweep.reps},
      {"warmup", 1}};
  write_sweep_outputs(sweep_document(entry.name, sweep, devices, threads, results),
                      opt.sweep.json_path, opt.sweep.plot_path, script, "bench-scalar");
  return 0;
}

CLI::App* add_dtypes(CLI::App* sub, std::vector<std::string>& dtypes) {
  sub->add_option("--dtype", dtypes, "Comma-separated dtypes: float32, float64")
      ->delimiter(',')
      ->type_name("LIST")
      ->capture_default_str();
  return sub;
}

}  // namespace

Command add_bench_command(CLI::App& root) {
  CLI::App* bench = root.add_subcommand(
      "bench",
      "Benchmark sweeps: every case of the library (bench, bench all), or one kernel over its "
      "sizes (bench parstack, bench scalar)");
  auto all = std::make_shared<BenchAllOptions>();
  all->sweep.reps = 3;
  all->sweep.add_to(bench, "G/s against the work of each point");
  bench
      ->add_option("--case", all->cases,
                   "Comma-separated cases to sweep (default: every case; `sciproxy run --list`)")
      ->delimiter(',')
      ->type_name("LIST");
  bench->footer(
      "Without a kernel (or with `all`): every case of the library's registry over the settings "
      "it lists as its bench sweep (the inputs users run, across their range), through the "
      "harness, timing only; the summary names the slowest and the best point of each case.");
  CLI::App* all_sub = bench->add_subcommand("all", "Every case of the library (the default)");
  auto all_sub_opt = std::make_shared<BenchAllOptions>();
  all_sub_opt->sweep.reps = 3;
  all_sub_opt->sweep.add_to(all_sub, "G/s against the work of each point");
  all_sub->add_option("--case", all_sub_opt->cases, "Comma-separated cases to sweep")
      ->delimiter(',')
      ->type_name("LIST");

  auto par = std::make_shared<BenchParstackOptions>();
  par->sweep.reps = 5;
  CLI::App* sub = bench->add_subcommand(
      "parstack", "Throughput of parstack over trace lengths, per device and dtype");
  par->sweep.add_to(sub, "GMAC/s against nsamples");
  add_dtypes(sub, par->dtypes);
  sub->add_option("--sizes", par->sizes,
                  "small, default, large, or a comma-separated list of nsamples")
      ->type_name("SIZES")
      ->capture_default_str();
  sub->add_option("--ntraces", par->ntraces, "Traces (stations), fixed over the sweep")
      ->type_name("N")
      ->capture_default_str();
  sub->add_option("--nshifts", par->nshifts, "Shift sets (candidate sources), fixed over the sweep")
      ->type_name("S")
      ->capture_default_str();
  sub->add_option("--method", par->method, "0: the stack, 1: its maximum")
      ->type_name("0|1")
      ->capture_default_str();
  sub->add_option("--seed", par->seed, "Seed of the synthetic problems")
      ->type_name("K")
      ->capture_default_str();
  sub->footer(
      "The sweep: the trace length (window) varies, the geometry stays: by default 30 traces x "
      "1000 shift sets, pyrocko's CUDA benchmark geometry, with random shifts in [-T/10, T/10].\n"
      "  small    nsamples 1000, 3000, 10000 (a quick check)\n"
      "  default  nsamples 1000 ... 100000 (10 s to about 17 min at 100 Hz; qseek uses 5 min = "
      "30000)\n"
      "  large    nsamples 1000 ... 300000 (for GPUs and big machines)\n"
      "Each point: one warm-up, R timed calls, median/min/max seconds and GMAC/s (multiply-adds "
      "per second). For cuda, GMAC/s is given including the host<->device transfers and for the "
      "kernel alone. Timing only: use `sciproxy parstack` or `sciproxy demo` to verify.");

  auto sc = std::make_shared<BenchScalarOptions>();
  CLI::App* ssub = bench->add_subcommand(
      "scalar", "Throughput of scalar wave propagation over model sizes, per device and dtype");
  sc->sweep.add_to(ssub, "GPts/s against cells");
  add_dtypes(ssub, sc->dtypes);
  ssub->add_option("--sizes", sc->sizes,
                   "small, default, large, or a comma-separated list of cells per dimension")
      ->type_name("SIZES")
      ->capture_default_str();
  ssub->add_option("--ndim", sc->ndim, "Dimensions of the models: 1, 2 or 3")
      ->type_name("D")
      ->capture_default_str();
  ssub->add_option("--nt", sc->nt, "Time samples (dt 0.004 s)")
      ->type_name("NT")
      ->capture_default_str();
  ssub->add_option("--shots", sc->shots, "Shots")->type_name("S")->capture_default_str();
  ssub->add_option("--receivers", sc->receivers, "Receivers per shot (at most n)")
      ->type_name("R")
      ->capture_default_str();
  ssub->add_option("--accuracy", sc->accuracy, "2, 4, 6 or 8")
      ->type_name("A")
      ->capture_default_str();
  ssub->add_flag("--gradient", sc->gradient, "Time forward + adjoint instead of forward");
  sc->storage.add_to(ssub);
  ssub->footer(
      "The sweep: models of n^ndim cells (layered, 1500..4000 m/s, 5 m), the same shots and "
      "receivers.\n"
      "  small    2-D n = 32, 64, 128;  3-D n = 16, 24, 32\n"
      "  default  2-D n = 64 ... 1024;  3-D n = 32 ... 128\n"
      "  large    2-D n = 128 ... 4096; 3-D n = 64 ... 320\n"
      "Each point: one warm-up, R timed calls, median/min/max seconds and GPts/s (points = the "
      "library's work model for the call). --gradient stores once per sample of dt (every "
      "step_ratio inner steps, as Deepwave) unless --gradient-sampling says otherwise. Timing "
      "only: use `sciproxy scalar --verify` or `sciproxy demo` to verify.");

  return {bench, [=] {
            if (sub->parsed())
              return with_option_names(kParstackNames, [&] { return run_bench_parstack(*par); });
            if (ssub->parsed())
              return with_option_names(scalar_option_names(),
                                       [&] { return run_bench_scalar(*sc); });
            return run_bench_all(all_sub->parsed() ? *all_sub_opt : *all);
          }};
}

}  // namespace sciproxy::app
