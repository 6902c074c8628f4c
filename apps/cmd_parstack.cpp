// `sciproxy parstack`: the library's parstack case (src/stack/case.cpp) with the options as its
// settings, run through the harness: timed, verified against the reference backend, reported.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"

namespace sciproxy::app {

namespace {

struct ParstackCliOptions {
  std::int64_t ntraces = 0, nshifts = 0, nsamples = 0;
  int method = 0;
  std::string dtype = "float64";
  std::string device = "auto";
  int threads = 0;
  std::int64_t shift_min = 0, shift_max = 0;
  std::string shifts = "uniform";
  CLI::Option* shift_min_option = nullptr;
  CLI::Option* shift_max_option = nullptr;
  std::int64_t seed = 1;
  int reps = 5;
  bool verify = true;  // --verify: the default, accepted for explicitness
  bool no_verify = false;
  bool clamp = false;
  bool autotune = false;
  std::int64_t chunk_samples = 0;
  double verify_macs = 2e9;
  std::string json_path;
};

const OptionNames kNames{{{"ntraces", "--ntraces"},
                          {"nshifts", "--nshifts"},
                          {"nsamples", "--nsamples"},
                          {"method", "--method"},
                          {"dtype", "--dtype"},
                          {"shift_min", "--shift-min"},
                          {"shift_max", "--shift-max"},
                          {"shifts", "--shifts"},
                          {"seed", "--seed"},
                          {"clamp", "--clamp"},
                          {"autotune", "--autotune"},
                          {"chunk_samples", "--chunk-samples"},
                          {"verify_macs", "--verify-macs"}},
                         {"clamp", "autotune"}};

// The CUDA split (time with and without transfers) when the backend recorded one.
void print_cuda_split(const CaseResult& result, const nlohmann::json& details) {
  if (!details.contains("cuda")) return;
  const auto& c = details["cuda"];
  fmt::print(
      "CUDA: upload {:.4f} s, kernel {:.4f} s, download {:.4f} s (medians); "
      "{:.2f} GMAC/s including transfers, {:.2f} GMAC/s kernel only\n",
      c["upload_seconds_median"].get<double>(), c["kernel_seconds_median"].get<double>(),
      c["download_seconds_median"].get<double>(), c["gmacs_including_transfers"].get<double>(),
      c["gmacs_kernel_only"].get<double>());
  if (details.contains("plan"))
    fmt::print("CUDA plan: {} device allocations over {} calls, {} held on the device\n",
               details["plan"]["device_allocations"].get<long>(),
               result.stats.warmup + result.stats.seconds.size(),
               format_bytes(details["plan"]["device_bytes_held"].get<double>()));
}

int run_parstack_command(const ParstackCliOptions& opt) {
  CaseSettings settings{{{"ntraces", std::to_string(opt.ntraces)},
                         {"nshifts", std::to_string(opt.nshifts)},
                         {"nsamples", std::to_string(opt.nsamples)},
                         {"method", std::to_string(opt.method)},
                         {"dtype", parse_dtype(opt.dtype)},
                         {"shifts", opt.shifts},
                         {"seed", std::to_string(opt.seed)},
                         {"clamp", opt.clamp ? "1" : "0"},
                         {"autotune", opt.autotune ? "1" : "0"},
                         {"chunk_samples", std::to_string(opt.chunk_samples)},
                         {"verify_macs", fmt::format("{}", opt.verify_macs)}}};
  if (opt.shift_min_option->count()) settings.values["shift_min"] = std::to_string(opt.shift_min);
  if (opt.shift_max_option->count()) settings.values["shift_max"] = std::to_string(opt.shift_max);
  check_threads(opt.threads);
  check_repetitions(opt.reps);
  if (!opt.json_path.empty()) check_output_path(opt.json_path, "--json");
  // The case checks the sizes (memory included) before the hardware is touched, so a bad size
  // is reported as such.
  const CaseEntry& entry = find_case("parstack");
  const nlohmann::json p = nlohmann::json::parse(entry.make(settings)->parameters().json());
  const Device device = select_device_option(opt.device);

  const bool verify = !opt.no_verify && device.backend != Backend::reference;
  const int threads = device.backend == Backend::reference ? 1 : effective_threads(opt.threads);
  fmt::print(
      "sciproxy parstack: {} traces x {} shift sets x {} samples, method {}, {}, {} shifts in "
      "[{}, {}], device {}{}{}\n",
      opt.ntraces, opt.nshifts, opt.nsamples, opt.method, p["dtype"].get<std::string>(),
      p["shifts"].get<std::string>(), p["shift_min"].get<long long>(),
      p["shift_max"].get<long long>(), device.name(), device.automatic ? " (chosen by auto)" : "",
      device.backend == Backend::cuda
          ? ""
          : fmt::format(", {} thread{}", threads, threads == 1 ? "" : "s"));
  if (device.automatic && device.backend != Backend::cuda)
    fmt::print("auto: running on cpu; no CUDA device: {}\n", cuda_unavailable_reason());
  if (opt.no_verify) fmt::print("Verification: skipped (--no-verify)\n");
  if (device.backend == Backend::reference && !opt.no_verify)
    fmt::print("Verification: skipped, the reference backend is the definition of correct\n");
  const auto verified = p["verified_shift_sets"].get<long long>();
  if (verify && verified < opt.nshifts)
    fmt::print(
        "Verification: the reference (a serial loop) would take long for {} multiply-adds; "
        "verifying {} of {} shift sets, spread over all of them\n",
        format_count(double(opt.ntraces) * double(opt.nshifts) * double(opt.nsamples)), verified,
        opt.nshifts);
  std::fflush(stdout);

  HarnessOptions harness;
  harness.comm = ranks();
  harness.repetitions = opt.reps;
  harness.threads = opt.threads;
  harness.verify = verify;
  harness.log = &std::cout;
  harness.progress = true;
  const auto results = run_case(entry, settings, {device}, harness);
  const CaseResult& result = results.front();
  const nlohmann::json details = details_of(result);
  std::cout << "\n";
  result.report.print(std::cout);
  const double macs = result.report.work.points;
  fmt::print(
      "Repetitions: {} after {} warm-up: median {:.5f} s, min {:.5f} s, max {:.5f} s; "
      "{:.2f} GMAC/s (median)\n",
      result.stats.seconds.size(), result.stats.warmup, result.stats.median, result.stats.min,
      result.stats.max, result.stats.median > 0 ? macs / result.stats.median * 1e-9 : 0.0);
  if (result.report.verification)
    fmt::print("Verified on {}/{} shift sets (tolerance rel L2 {:.0e}): {}\n", verified,
               opt.nshifts, details["verification_scope"]["tolerance_rel_l2"].get<double>(),
               result.report.passed() ? "PASS" : "FAIL");
  print_cuda_split(result, details);
  return finish_case_run(result, opt.json_path, threads);
}

}  // namespace

Command add_parstack_command(CLI::App& root) {
  auto opt = std::make_shared<ParstackCliOptions>();
  CLI::App* sub = root.add_subcommand(
      "parstack",
      "Run delay-and-sum stacking (pyrocko's parstack) on a synthetic problem: time it, "
      "verify it against the reference backend, report rates and roofline fraction");
  sub->add_option("--ntraces", opt->ntraces, "Number of traces (stations)")
      ->required()
      ->type_name("N");
  sub->add_option("--nshifts", opt->nshifts, "Number of shift sets (candidate sources)")
      ->required()
      ->type_name("S");
  sub->add_option("--nsamples", opt->nsamples, "Samples per trace")->required()->type_name("T");
  sub->add_option("--method", opt->method, "0: the stack, 1: its maximum over time per shift set")
      ->type_name("0|1")
      ->capture_default_str();
  sub->add_option("--dtype", opt->dtype, "float32 or float64")
      ->type_name("DTYPE")
      ->capture_default_str();
  sub->add_option("--device", opt->device, "auto, reference, cpu, cuda or cuda:N")
      ->type_name("DEVICE")
      ->capture_default_str();
  sub->add_option("--threads", opt->threads, "OpenMP threads of the cpu backend; 0: all")
      ->type_name("N");
  opt->shift_min_option =
      sub->add_option("--shift-min", opt->shift_min, "Smallest shift (default -T/10)")
          ->type_name("A");
  opt->shift_max_option =
      sub->add_option("--shift-max", opt->shift_max, "Largest shift (default T/10)")
          ->type_name("B");
  sub->add_option("--shifts", opt->shifts,
                  "uniform: delays at random; moveout: the moveouts of a station network "
                  "(stations at random, one candidate source per shift set on a grid)")
      ->type_name("MODEL")
      ->capture_default_str();
  sub->add_option("--seed", opt->seed, "Seed of the synthetic problem")
      ->type_name("K")
      ->capture_default_str();
  sub->add_option("--reps", opt->reps, "Timed repetitions (after one warm-up)")
      ->type_name("R")
      ->capture_default_str();
  CLI::Option* verify = sub->add_flag("--verify", opt->verify,
                                      "Verify against the reference backend (the default; above "
                                      "--verify-macs on an even spread of shift sets)");
  sub->add_flag("--no-verify", opt->no_verify, "Skip the verification")->excludes(verify);
  sub->add_option(
         "--verify-macs", opt->verify_macs,
         "Multiply-adds above which the reference checks an even spread of shift sets only")
      ->type_name("M")
      ->capture_default_str();
  sub->add_flag("--clamp", opt->clamp, "Method 1: pyrocko's max(0, max_t) quirk");
  sub->add_flag("--autotune", opt->autotune,
                "cpu: choose the chunk of output samples per job by timing candidates on this "
                "problem (once; cached per machine, shape, dtype and threads)");
  sub->add_option("--chunk-samples", opt->chunk_samples,
                  "cpu: output samples per job, a multiple of 64 bytes of samples; 0: the default");
  sub->add_option("--json", opt->json_path,
                  "Write the report, bench statistics and environment to FILE")
      ->type_name("FILE")
      ->check(output_file());
  sub->footer(
      "The library's case `parstack` (`sciproxy run parstack --set name=value` takes the "
      "same settings).");
  return {sub,
          [opt] { return with_option_names(kNames, [&] { return run_parstack_command(*opt); }); }};
}

}  // namespace sciproxy::app
