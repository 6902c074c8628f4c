// `sciproxy demo`: every case of every family in the library's registry, each of its demo
// variants, on every available backend, through the library's harness (verified against the
// reference backend), with the reports and one summary table. Adding a family adds nothing here.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "core/json.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"

namespace sciproxy::app {

namespace {

struct DemoOptions {
  std::string json_path;
  std::string device = "auto";
  std::int64_t ntraces = 30, nshifts = 1000, nsamples = 6000;
  int reps = 3;
  int threads = 0;
  double verify_macs = 2e9;
};

struct SummaryRow {
  std::string kernel, dtype, device;
  double seconds = 0, grate = 0, fraction = 0;
  std::string rel_l2, verdict;
  bool pass = true;
};

std::string variant_name(const CaseEntry& entry, const CaseSettings& variant) {
  std::string name = entry.name;
  for (const auto& [key, value] : variant.values)
    if (key != "dtype") name += fmt::format(" {}{}", key == "method" ? "m" : "", value);
  return name;
}

int run_demo(const DemoOptions& opt) {
  check_threads(opt.threads);
  check_repetitions(opt.reps);
  if (!opt.json_path.empty()) check_output_path(opt.json_path, "--json");
  std::vector<Device> devices;
  if (opt.device == "auto") {
    devices = available_compute_devices();
  } else {
    const Device d = select_device_option(opt.device);
    if (d.backend == Backend::reference)
      throw UsageError(
          "--device: the demo always runs the reference; expected auto, cpu, cuda or cuda:N");
    devices = {d};
  }
  // The parstack options of the command line reach the parstack case; the other cases run at
  // their default sizes.
  CaseSettings parstack_sizes{{{"ntraces", std::to_string(opt.ntraces)},
                               {"nshifts", std::to_string(opt.nshifts)},
                               {"nsamples", std::to_string(opt.nsamples)},
                               {"verify_macs", fmt::format("{}", opt.verify_macs)}}};
  for (const auto& [key, value] : parstack_sizes.values)
    if (std::stod(value) <= 0)
      throw UsageError(fmt::format("--{}: expected a positive value, got {}", key, value));

  const int threads = effective_threads(opt.threads);
  std::string names = "reference";
  for (const auto& d : devices) names += ", " + d.name();
  std::string cases;
  for (const auto& entry : case_registry()) cases += (cases.empty() ? "" : ", ") + entry.name;
  fmt::print("sciproxy demo: {} on {} ({} cpu threads)\n", cases, names, threads);
  if (cuda_device_count() == 0 && opt.device == "auto")
    fmt::print("cuda: skipped: {}\n", cuda_unavailable_reason());
  std::fflush(stdout);

  HarnessOptions harness;
  harness.comm = ranks();
  harness.repetitions = opt.reps;
  harness.threads = opt.threads;
  harness.log = &std::cout;
  harness.progress = true;
  std::vector<SummaryRow> rows;
  nlohmann::json runs = nlohmann::json::array();
  const auto& registry = case_registry();
  std::size_t total = 0, done = 0;
  for (const auto& entry : registry) total += entry.demo_variants.size();
  for (const auto& entry : registry) {
    for (CaseSettings settings : entry.demo_variants) {
      // Named by the variant's own settings (the command line's sizes are the same for all).
      const std::string name = variant_name(entry, settings);
      if (entry.name == "parstack")
        for (const auto& [key, value] : parstack_sizes.values) settings.values[key] = value;
      harness.progress_prefix = fmt::format("[{}/{}] ", ++done, total);
      const auto label = entry.make(settings)->label();
      fmt::print("\n=== {}: {} ===\n", name, label);
      std::fflush(stdout);
      for (const auto& result : run_case(entry, settings, devices, harness)) {
        const KernelReport& report = result.report;
        report.print(std::cout);
        SummaryRow row;
        row.kernel = name;
        row.dtype = report.work.precision == Precision::fp32 ? "float32" : "float64";
        row.device = report.device.name();
        row.seconds = result.stats.median;
        row.grate = display_rate(report.work, report.rates.gpoints_per_s).value;
        row.fraction = report.rates.roofline_fraction;
        row.pass = report.passed();
        row.rel_l2 = report.verification ? fmt::format("{:.2e}", report.verification->rel_l2) : "-";
        row.verdict = report.verification ? (row.pass ? "PASS" : "FAIL") : "not verified";
        rows.push_back(row);
        nlohmann::json j = nlohmann::json::parse(case_result_json(result));
        j["case"] = entry.name;
        runs.push_back(std::move(j));
      }
      std::fflush(stdout);
    }
  }

  bool pass = true;
  fmt::print(
      "\nSummary (time = median of {} repetitions after one warm-up; rate: GMAC/s for "
      "parstack, GPts/s for the wave kernels, patches/s for ex2d)\n",
      opt.reps);
  fmt::print("{:<24} {:<8} {:<10} {:>10} {:>9} {:>9} {:>10}  {}\n", "kernel", "dtype", "device",
             "time [s]", "rate", "roofline", "rel L2", "verification");
  fmt::print("{}\n", std::string(100, '-'));
  nlohmann::json summary = nlohmann::json::array();
  for (const auto& r : rows) {
    pass = pass && r.pass;
    fmt::print("{:<24} {:<8} {:<10} {:>10.4f} {:>9.3f} {:>8.1f}% {:>10}  {}\n", r.kernel, r.dtype,
               r.device, r.seconds, r.grate, 100 * r.fraction, r.rel_l2, r.verdict);
    summary.push_back({{"kernel", r.kernel},
                       {"dtype", r.dtype},
                       {"device", r.device},
                       {"seconds", r.seconds},
                       {"g_per_s", r.grate},
                       {"roofline_fraction", r.fraction},
                       {"pass", r.pass}});
  }
  fmt::print("{}\n", pass ? "All verifications passed." : "Some verifications FAILED.");
  if (!opt.json_path.empty() && ranks().rank() == 0) {
    nlohmann::json doc = {{"kind", "sciproxy-demo"},
                          {"pass", pass},
                          {"summary", summary},
                          {"runs", runs},
                          {"environment", environment_record(threads)}};
    write_file_atomically(opt.json_path, doc.dump(2) + "\n");
    fmt::print("Wrote {}\n", opt.json_path);
  }
  std::cout.flush();
  return pass ? 0 : 1;
}

}  // namespace

Command add_demo_command(CLI::App& root) {
  auto opt = std::make_shared<DemoOptions>();
  CLI::App* sub = root.add_subcommand(
      "demo",
      "Run every kernel built so far on every available backend, verify each against the "
      "reference and print the reports and a summary table");
  sub->add_option("--json", opt->json_path, "Write every report and the summary to FILE")
      ->type_name("FILE")
      ->check(output_file());
  sub->add_option("--device", opt->device, "auto (cpu and every GPU present), cpu or cuda:N")
      ->type_name("DEVICE")
      ->capture_default_str();
  sub->add_option("--reps", opt->reps, "Timed repetitions per run (after one warm-up)")
      ->type_name("R")
      ->capture_default_str();
  sub->add_option("--threads", opt->threads, "OpenMP threads of the cpu backend; 0: all")
      ->type_name("N");
  sub->add_option("--ntraces", opt->ntraces, "parstack: traces")
      ->type_name("N")
      ->capture_default_str();
  sub->add_option("--nshifts", opt->nshifts, "parstack: shift sets")
      ->type_name("S")
      ->capture_default_str();
  sub->add_option("--nsamples", opt->nsamples, "parstack: samples per trace")
      ->type_name("T")
      ->capture_default_str();
  sub->add_option("--verify-macs", opt->verify_macs,
                  "parstack: multiply-adds above which the reference checks an even spread of "
                  "shift sets only")
      ->type_name("M")
      ->capture_default_str();
  sub->footer(
      "Runs every case the library registers (`sciproxy run --list`), each of its demo variants, "
      "through the library's harness. Exit status 1 when any backend disagrees with the "
      "reference.");
  return {sub, [opt] { return run_demo(*opt); }};
}

}  // namespace sciproxy::app
