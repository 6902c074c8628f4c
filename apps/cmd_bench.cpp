// `sciproxy bench parstack`: throughput of parstack over a sweep of trace lengths, per device
// and dtype, as a table, JSON and (through bench/plot_sweep.py) a PNG.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli_common.hpp"
#include "parstack_runner.hpp"
#include "scalar_runner.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/roofline.hpp"

namespace sciproxy::app {

namespace {

struct BenchOptions {
  std::vector<std::string> devices{"cpu", "cuda"};
  std::vector<std::string> dtypes{"float32", "float64"};
  std::string sizes = "default";
  std::int64_t ntraces = 30;
  std::int64_t nshifts = 1000;
  int method = 0;
  int reps = 5;
  int threads = 0;
  std::int64_t seed = 1;
  std::string json_path;
  std::string plot_path;
};

// The sweep: window length in samples. At 100 Hz, 1000 samples is 10 s of data (a local event),
// 30000 is qseek's 5-minute window and 100000 is a teleseismic window of about 17 minutes.
std::vector<std::int64_t> sweep_sizes(const std::string& sizes) {
  if (sizes == "small") return {1000, 3000, 10000};
  if (sizes == "default") return {1000, 2000, 5000, 10000, 20000, 50000, 100000};
  if (sizes == "large") return {1000, 3000, 10000, 30000, 100000, 300000};
  std::vector<std::int64_t> out;
  std::stringstream in(sizes);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || n < 1)
      throw UsageError(
          fmt::format("--sizes: expected small, default, large or a comma-separated list "
                      "of positive sample counts, got \"{}\"",
                      sizes));
    out.push_back(n);
  }
  if (out.empty())
    throw UsageError("--sizes: expected small, default, large or a list of sample counts");
  return out;
}

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
  std::vector<Dtype> dtypes;
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

int run_bench(const BenchOptions& opt) {
  if (opt.ntraces < 1)
    throw UsageError(fmt::format("--ntraces: expected at least 1, got {}", opt.ntraces));
  if (opt.nshifts < 1)
    throw UsageError(fmt::format("--nshifts: expected at least 1, got {}", opt.nshifts));
  const stack::Method method = parse_method(opt.method);
  if (opt.seed < 0)
    throw UsageError(fmt::format("--seed: expected 0 or a positive integer, got {}", opt.seed));
  check_threads(opt.threads);
  check_repetitions(opt.reps);
  const auto sizes = sweep_sizes(opt.sizes);
  const auto [dtypes, script] =
      check_sweep_options(opt.dtypes, opt.devices, opt.json_path, opt.plot_path);

  const std::vector<Device> devices = bench_devices(opt.devices);
  RunOptions run;
  run.threads = opt.threads;
  run.reps = opt.reps;
  run.verify = false;  // timing only: `sciproxy parstack` and `demo` verify
  run.roofline = RooflinePolicy::cached_only;
  std::vector<ParstackSpec> specs;
  for (const Dtype dtype : dtypes)
    for (const std::int64_t n : sizes) {
      ParstackSpec s;
      s.ntraces = opt.ntraces;
      s.nshifts = opt.nshifts;
      s.nsamples = n;
      s.method = method;
      s.dtype = dtype;
      s.seed = static_cast<std::uint64_t>(opt.seed);
      check_spec(s, devices, 0);
      specs.push_back(s);
    }

  const int threads = effective_threads(opt.threads);
  std::string device_names;
  for (const auto& d : devices) device_names += (device_names.empty() ? "" : ", ") + d.name();
  fmt::print("sciproxy bench parstack: {} traces x {} shift sets, method {}, nsamples in {{",
             opt.ntraces, opt.nshifts, opt.method);
  for (std::size_t i = 0; i < sizes.size(); ++i) fmt::print("{}{}", i ? ", " : "", sizes[i]);
  fmt::print(
      "}}, shifts in [-T/10, T/10]; devices {}; {} cpu threads; {} repetitions after 1 warm-up\n",
      device_names, threads, opt.reps);
  const bool any_cuda = std::any_of(devices.begin(), devices.end(),
                                    [](const Device& d) { return d.backend == Backend::cuda; });
  const std::string header =
      fmt::format("{:<10} {:<8} {:>9} {:>10} {:>11} {:>11} {:>11} {:>9} {:>9}{}", "device", "dtype",
                  "nsamples", "MACs", "median [s]", "min [s]", "max [s]", "GMAC/s", "roofline",
                  any_cuda ? fmt::format(" {:>13}", "kernel GMAC/s") : "");
  fmt::print("{}\n{}\n", header, std::string(header.size(), '-'));
  std::fflush(stdout);

  nlohmann::json results = nlohmann::json::array();
  for (const auto& spec : specs) {
    const auto outcomes = run_parstack(spec, devices, run, std::cout);
    for (const auto& out : outcomes) {
      const double fraction = out.report.rates.roofline_fraction;
      fmt::print(
          "{:<10} {:<8} {:>9} {:>10} {:>11.4e} {:>11.4e} {:>11.4e} {:>9.2f} {:>9}{}\n",
          out.report.device.name(), dtype_name(spec.dtype), spec.nsamples, format_count(out.macs()),
          out.stats.median, out.stats.min, out.stats.max, out.gmacs(out.stats.median),
          fraction > 0 ? fmt::format("{:.1f}%", 100 * fraction) : "-",
          any_cuda
              ? fmt::format(" {:>13}", out.kernel_seconds
                                           ? fmt::format("{:.2f}", out.gmacs(*out.kernel_seconds))
                                           : "-")
              : "");
      std::fflush(stdout);
      nlohmann::json r = {
          {"device", out.report.device.name()},
          {"dtype", dtype_name(spec.dtype)},
          {"method", opt.method},
          {"ntraces", spec.ntraces},
          {"nshifts", spec.nshifts},
          {"nsamples", spec.nsamples},
          {"macs", out.macs()},
          {"median_s", out.stats.median},
          {"min_s", out.stats.min},
          {"max_s", out.stats.max},
          {"seconds", out.stats.seconds},
          {"gmacs", out.gmacs(out.stats.median)},
          {"gmacs_best", out.gmacs(out.stats.min)},
          {"roofline_fraction", fraction > 0 ? nlohmann::json(fraction) : nlohmann::json(nullptr)}};
      if (out.kernel_seconds) {
        r["cuda"] = {{"upload_s", out.upload_seconds.value_or(0)},
                     {"kernel_s", *out.kernel_seconds},
                     {"download_s", out.download_seconds.value_or(0)},
                     {"gmacs_including_transfers", out.gmacs(out.stats.median)},
                     {"gmacs_kernel_only", out.gmacs(*out.kernel_seconds)}};
      }
      results.push_back(std::move(r));
    }
  }

  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& d : devices)
    if (d.backend == Backend::cuda) {
      const auto all = cuda_devices();
      gpus.push_back(d.index < static_cast<int>(all.size()) ? all[d.index].name : d.name());
    }
  nlohmann::json doc = {{"kind", "sciproxy-bench"},
                        {"kernel", "parstack"},
                        {"sweep",
                         {{"variable", "nsamples"},
                          {"values", sizes},
                          {"ntraces", opt.ntraces},
                          {"nshifts", opt.nshifts},
                          {"method", opt.method},
                          {"shifts", "random integers in [-nsamples/10, nsamples/10]"},
                          {"repetitions", opt.reps},
                          {"warmup", 1}}},
                        {"cpu_model", cpu_model()},
                        {"threads", threads},
                        {"gpus", gpus},
                        {"environment", environment_record(threads)},
                        {"results", results}};

  write_sweep_outputs(doc, opt.json_path, opt.plot_path, script, "bench");
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& root) {
  CLI::App* bench =
      root.add_subcommand("bench", "Benchmark sweeps of a kernel (bench parstack, bench scalar)");
  bench->require_subcommand(1);
  auto opt = std::make_shared<BenchOptions>();
  CLI::App* sub = bench->add_subcommand(
      "parstack", "Throughput of parstack over trace lengths, per device and dtype");
  sub->add_option("--device", opt->devices,
                  "Comma-separated devices: cpu, cuda, cuda:N, reference, "
                  "auto (all present); absent ones are skipped")
      ->delimiter(',')
      ->type_name("LIST")
      ->capture_default_str();
  sub->add_option("--dtype", opt->dtypes, "Comma-separated dtypes: float32, float64")
      ->delimiter(',')
      ->type_name("LIST")
      ->capture_default_str();
  sub->add_option("--sizes", opt->sizes,
                  "small, default, large, or a comma-separated list of nsamples")
      ->type_name("SIZES")
      ->capture_default_str();
  sub->add_option("--ntraces", opt->ntraces, "Traces (stations), fixed over the sweep")
      ->type_name("N")
      ->capture_default_str();
  sub->add_option("--nshifts", opt->nshifts, "Shift sets (candidate sources), fixed over the sweep")
      ->type_name("S")
      ->capture_default_str();
  sub->add_option("--method", opt->method, "0: the stack, 1: its maximum")
      ->type_name("0|1")
      ->capture_default_str();
  sub->add_option("--reps", opt->reps, "Timed repetitions per point (after one warm-up)")
      ->type_name("R")
      ->capture_default_str();
  sub->add_option("--threads", opt->threads, "OpenMP threads of the cpu backend; 0: all")
      ->type_name("N");
  sub->add_option("--seed", opt->seed, "Seed of the synthetic problems")
      ->type_name("K")
      ->capture_default_str();
  sub->add_option("--json", opt->json_path, "Write the results and environment record to FILE")
      ->type_name("FILE");
  sub->add_option("--plot", opt->plot_path,
                  "Plot GMAC/s against nsamples to FILE.png (python3 + matplotlib)")
      ->type_name("FILE.png");
  sub->footer(
      "The sweep: the trace length (window) varies, the geometry stays: by default 30 traces x "
      "1000 "
      "shift sets, pyrocko's CUDA benchmark geometry, with random shifts in [-T/10, T/10].\n"
      "  small    nsamples 1000, 3000, 10000 (a quick check)\n"
      "  default  nsamples 1000 ... 100000 (10 s to about 17 min at 100 Hz; qseek uses 5 min = "
      "30000)\n"
      "  large    nsamples 1000 ... 300000 (for GPUs and big machines)\n"
      "Each point: one warm-up, R timed calls, median/min/max seconds and GMAC/s (multiply-adds "
      "per "
      "second). For cuda, GMAC/s is given including the host<->device transfers and for the kernel "
      "alone. Timing only: use `sciproxy parstack` or `sciproxy demo` to verify.");
  return {sub, [opt] { return run_bench(*opt); }};
}


// --- bench scalar ------------------------------------------------------------------------------

namespace {

struct BenchScalarOptions {
  std::vector<std::string> devices{"cpu", "cuda"};
  std::vector<std::string> dtypes{"float32", "float64"};
  std::string sizes = "default";
  int ndim = 2;
  std::int64_t nt = 50;
  std::int64_t shots = 4;
  std::int64_t receivers = 100;
  int accuracy = 4;
  bool gradient = false;
  int reps = 3;
  int threads = 0;
  std::string json_path;
  std::string plot_path;
  GradientStorageCli storage;  // --gradient-sampling, --storage, --storage-compression, --storage-dir
};

// The sweep: cells per dimension n (the model is n^ndim cells).
std::vector<std::int64_t> scalar_sweep_sizes(const std::string& sizes, int ndim) {
  if (sizes == "small") return ndim == 3 ? std::vector<std::int64_t>{16, 24, 32}
                                         : std::vector<std::int64_t>{32, 64, 128};
  if (sizes == "default")
    return ndim == 3 ? std::vector<std::int64_t>{32, 48, 64, 96, 128}
                     : std::vector<std::int64_t>{64, 128, 256, 512, 1024};
  if (sizes == "large")
    return ndim == 3 ? std::vector<std::int64_t>{64, 128, 200, 256, 320}
                     : std::vector<std::int64_t>{128, 256, 512, 1024, 2048, 4096};
  std::vector<std::int64_t> out;
  std::stringstream in(sizes);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || n < 1)
      throw UsageError(
          fmt::format("--sizes: expected small, default, large or a comma-separated list "
                      "of positive cell counts per dimension, got \"{}\"",
                      sizes));
    out.push_back(n);
  }
  if (out.empty())
    throw UsageError("--sizes: expected small, default, large or a list of cell counts");
  return out;
}

int run_bench_scalar(const BenchScalarOptions& opt) {
  if (opt.ndim < 1 || opt.ndim > 3)
    throw UsageError(fmt::format("--ndim: expected 1, 2 or 3, got {}", opt.ndim));
  check_threads(opt.threads);
  check_repetitions(opt.reps);
  const auto sizes = scalar_sweep_sizes(opt.sizes, opt.ndim);
  const auto [dtypes, script] =
      check_sweep_options(opt.dtypes, opt.devices, opt.json_path, opt.plot_path);
  ScalarSpec storage;  // the gradient-storage options, checked once
  opt.storage.apply(storage, opt.gradient);
  auto spec_for = [&](Dtype dtype, std::int64_t n) {
    ScalarSpec s = storage;
    s.ndim = opt.ndim;
    s.shape.assign(static_cast<std::size_t>(opt.ndim), n);
    s.nt = opt.nt;
    s.nshots = opt.shots;
    s.nreceivers = std::min(opt.receivers, n);
    s.accuracy = opt.accuracy;
    s.dtype = dtype;
    s.gradient = opt.gradient;
    s.source_depth = std::min<std::int64_t>(2, n - 1);
    s.receiver_depth = std::min<std::int64_t>(1, n - 1);
    return s;
  };
  for (const Dtype dtype : dtypes)
    for (const std::int64_t n : sizes) check_scalar_spec(spec_for(dtype, n), {});
  const std::vector<Device> devices = bench_devices(opt.devices);
  std::vector<ScalarSpec> specs;
  for (const Dtype dtype : dtypes)
    for (const std::int64_t n : sizes) {
      specs.push_back(spec_for(dtype, n));
      check_scalar_spec(specs.back(), devices);
    }
  ScalarRunOptions run;
  run.threads = opt.threads;
  run.reps = opt.reps;
  run.verify = false;  // timing only: `sciproxy scalar --verify` and `demo` verify
  run.roofline = RooflinePolicy::cached_only;

  const int threads = effective_threads(opt.threads);
  std::string device_names;
  for (const auto& d : devices) device_names += (device_names.empty() ? "" : ", ") + d.name();
  fmt::print(
      "sciproxy bench scalar{}: {}-D models n^{} cells for n in {{{}}}, 5 m, dt 0.004 s, nt {}, "
      "{} shots, accuracy {}; devices {}; {} cpu threads; {} repetitions after 1 warm-up\n",
      opt.gradient ? " (forward + gradient)" : "", opt.ndim, opt.ndim, fmt::join(sizes, ", "),
      opt.nt, opt.shots, opt.accuracy, device_names, threads, opt.reps);
  if (opt.gradient) fmt::print("Gradient sampling: {}\n", gradient_storage_label(specs.front()));
  const std::string header =
      fmt::format("{:<10} {:<8} {:>6} {:>11} {:>11} {:>11} {:>11} {:>9} {:>9}", "device", "dtype",
                  "n", "points", "median [s]", "min [s]", "max [s]", "GPts/s", "roofline");
  fmt::print("{}\n{}\n", header, std::string(header.size(), '-'));
  std::fflush(stdout);

  nlohmann::json results = nlohmann::json::array();
  for (const auto& spec : specs) {
    const auto outcomes = run_scalar(spec, devices, run, std::cout);
    for (const auto& out : outcomes) {
      const double fraction = out.report.rates.roofline_fraction;
      fmt::print("{:<10} {:<8} {:>6} {:>11} {:>11.4e} {:>11.4e} {:>11.4e} {:>9.3f} {:>9}\n",
                 out.report.device.name(), dtype_name(spec.dtype), spec.shape[0],
                 format_count(out.points()), out.stats.median, out.stats.min, out.stats.max,
                 out.gpts(out.stats.median),
                 fraction > 0 ? fmt::format("{:.1f}%", 100 * fraction) : "-");
      std::fflush(stdout);
      results.push_back(
          {{"device", out.report.device.name()},
           {"dtype", dtype_name(spec.dtype)},
           {"n", spec.shape[0]},
           {"cells", spec.cells()},
           {"shape", spec.shape},
           {"nt", spec.nt},
           {"step_ratio", out.step_ratio},
           {"points", out.points()},
           {"median_s", out.stats.median},
           {"min_s", out.stats.min},
           {"max_s", out.stats.max},
           {"seconds", out.stats.seconds},
           {"gpts", out.gpts(out.stats.median)},
           {"gpts_best", out.gpts(out.stats.min)},
           // plot_sweep.py reads "gmacs": here it holds GPts/s (the sweep's "unit" says so).
           {"gmacs", out.gpts(out.stats.median)},
           {"roofline_fraction", fraction > 0 ? nlohmann::json(fraction) : nlohmann::json(nullptr)}});
    }
  }

  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& d : devices)
    if (d.backend == Backend::cuda) {
      const auto all = cuda_devices();
      gpus.push_back(d.index < static_cast<int>(all.size()) ? all[d.index].name : d.name());
    }
  nlohmann::json doc = {{"kind", "sciproxy-bench"},
                        {"kernel", opt.gradient ? "scalar_gradient" : "scalar"},
                        {"sweep",
                         {{"variable", "cells"},
                          {"unit", "GPts/s"},
                          {"values", sizes},
                          {"ndim", opt.ndim},
                          {"nt", opt.nt},
                          {"shots", opt.shots},
                          {"receivers", opt.receivers},
                          {"accuracy", opt.accuracy},
                          {"gradient", opt.gradient},
                          {"gradient_storage", opt.gradient
                                                   ? gradient_storage_json(specs.front())
                                                   : nlohmann::json(nullptr)},
                          {"model", "5 layers, 1500..4000 m/s, spacing 5 m, dt 0.004 s, 25 Hz"},
                          {"repetitions", opt.reps},
                          {"warmup", 1}}},
                        {"cpu_model", cpu_model()},
                        {"threads", threads},
                        {"gpus", gpus},
                        {"environment", environment_record(threads)},
                        {"results", results}};

  write_sweep_outputs(doc, opt.json_path, opt.plot_path, script, "bench-scalar");
  return 0;
}

}  // namespace

Command add_bench_scalar_command(CLI::App& root) {
  CLI::App* bench = root.get_subcommand("bench");
  auto opt = std::make_shared<BenchScalarOptions>();
  CLI::App* sub = bench->add_subcommand(
      "scalar", "Throughput of scalar wave propagation over model sizes, per device and dtype");
  sub->add_option("--device", opt->devices,
                  "Comma-separated devices: cpu, cuda, cuda:N, reference, "
                  "auto (all present); absent ones are skipped")
      ->delimiter(',')
      ->type_name("LIST")
      ->capture_default_str();
  sub->add_option("--dtype", opt->dtypes, "Comma-separated dtypes: float32, float64")
      ->delimiter(',')
      ->type_name("LIST")
      ->capture_default_str();
  sub->add_option("--sizes", opt->sizes,
                  "small, default, large, or a comma-separated list of cells per dimension")
      ->type_name("SIZES")
      ->capture_default_str();
  sub->add_option("--ndim", opt->ndim, "Dimensions of the models: 1, 2 or 3")
      ->type_name("D")
      ->capture_default_str();
  sub->add_option("--nt", opt->nt, "Time samples (dt 0.004 s)")->type_name("NT")->capture_default_str();
  sub->add_option("--shots", opt->shots, "Shots")->type_name("S")->capture_default_str();
  sub->add_option("--receivers", opt->receivers, "Receivers per shot (at most n)")
      ->type_name("R")
      ->capture_default_str();
  sub->add_option("--accuracy", opt->accuracy, "2, 4, 6 or 8")->type_name("A")->capture_default_str();
  sub->add_flag("--gradient", opt->gradient, "Time forward + adjoint instead of forward");
  opt->storage.add_to(sub);
  sub->add_option("--reps", opt->reps, "Timed repetitions per point (after one warm-up)")
      ->type_name("R")
      ->capture_default_str();
  sub->add_option("--threads", opt->threads, "OpenMP threads of the cpu backend; 0: all")
      ->type_name("N");
  sub->add_option("--json", opt->json_path, "Write the results and environment record to FILE")
      ->type_name("FILE");
  sub->add_option("--plot", opt->plot_path,
                  "Plot GPts/s against cells to FILE.png (python3 + matplotlib)")
      ->type_name("FILE.png");
  sub->footer(
      "The sweep: models of n^ndim cells (layered, 1500..4000 m/s, 5 m), the same shots and "
      "receivers.\n"
      "  small    2-D n = 32, 64, 128;  3-D n = 16, 24, 32\n"
      "  default  2-D n = 64 ... 1024;  3-D n = 32 ... 128\n"
      "  large    2-D n = 128 ... 4096; 3-D n = 64 ... 320\n"
      "Each point: one warm-up, R timed calls, median/min/max seconds and GPts/s (points = the "
      "library's work model for the call). --gradient stores once per sample of dt (every "
      "step_ratio inner steps, as Deepwave) unless --gradient-sampling says otherwise. Timing "
      "only: use `sciproxy scalar --verify` or `sciproxy demo` to verify.");
  return {sub, [opt] { return run_bench_scalar(*opt); }};
}

}  // namespace sciproxy::app
