// `sciproxy parstack`: one synthetic parstack problem, timed, verified and reported.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "parstack_runner.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/error.hpp"

namespace sciproxy::app {

namespace {

struct ParstackCliOptions {
  std::int64_t ntraces = 0, nshifts = 0, nsamples = 0;
  int method = 0;
  std::string dtype = "float64";
  std::string device = "auto";
  int threads = 0;
  std::int64_t shift_min = 0, shift_max = 0;
  CLI::Option* shift_min_option = nullptr;
  CLI::Option* shift_max_option = nullptr;
  std::int64_t seed = 1;
  int reps = 5;
  bool verify = true;  // --verify: the default, accepted for explicitness
  bool no_verify = false;
  bool clamp = false;
  double verify_macs = 2e9;
  std::string json_path;
};

// Prints the CUDA split (time with and without transfers) when the backend recorded one.
void print_cuda_split(const RunOutcome& out) {
  if (!out.kernel_seconds) return;
  fmt::print(
      "CUDA: upload {:.4f} s, kernel {:.4f} s, download {:.4f} s (medians); "
      "{:.2f} GMAC/s including transfers, {:.2f} GMAC/s kernel only\n",
      out.upload_seconds.value_or(0), *out.kernel_seconds, out.download_seconds.value_or(0),
      out.gmacs(out.stats.median), out.gmacs(*out.kernel_seconds));
  if (out.plan_counters)
    fmt::print("CUDA plan: {} device allocations over {} calls, {} held on the device\n",
               out.plan_counters->device_allocations, out.stats.warmup + out.stats.seconds.size(),
               format_bytes(out.plan_counters->device_bytes_held));
}

int run_parstack_command(const ParstackCliOptions& opt) {
  ParstackSpec spec;
  spec.ntraces = opt.ntraces;
  spec.nshifts = opt.nshifts;
  spec.nsamples = opt.nsamples;
  if (opt.shift_min_option->count()) spec.shift_min = opt.shift_min;
  if (opt.shift_max_option->count()) spec.shift_max = opt.shift_max;
  if (opt.seed < 0)
    throw UsageError(fmt::format("--seed: expected 0 or a positive integer, got {}", opt.seed));
  spec.seed = static_cast<std::uint64_t>(opt.seed);
  spec.method = parse_method(opt.method);
  spec.clamp = opt.clamp;
  spec.dtype = parse_dtype(opt.dtype);
  check_threads(opt.threads);
  check_repetitions(opt.reps);
  if (!opt.json_path.empty()) check_output_path(opt.json_path, "--json");

  RunOptions run;
  run.threads = opt.threads;
  run.reps = opt.reps;
  run.verify = !opt.no_verify;
  if (!(opt.verify_macs > 0))
    throw UsageError(
        fmt::format("--verify-macs: expected a positive count, got {}", opt.verify_macs));
  run.verify_max_macs = opt.verify_macs;
  // Validate sizes before touching the hardware, so a bad size is reported as such.
  check_spec(spec, {}, run.verify_max_macs);
  const Device device = select_device_option(opt.device);
  check_spec(spec, {device}, run.verify_max_macs);

  const int threads = device.backend == Backend::reference ? 1 : effective_threads(opt.threads);
  fmt::print("sciproxy parstack: {}, method {}, {}, shifts in [{}, {}], device {}{}{}\n",
             spec.label(), static_cast<int>(spec.method), dtype_name(spec.dtype), spec.lo(),
             spec.hi(), device.name(), device.automatic ? " (chosen by auto)" : "",
             device.backend == Backend::cuda
                 ? ""
                 : fmt::format(", {} thread{}", threads, threads == 1 ? "" : "s"));
  if (device.automatic && device.backend != Backend::cuda)
    fmt::print("auto: running on cpu; no CUDA device: {}\n", cuda_unavailable_reason());
  if (!run.verify) fmt::print("Verification: skipped (--no-verify)\n");
  if (device.backend == Backend::reference && run.verify)
    fmt::print("Verification: skipped, the reference backend is the definition of correct\n");
  std::fflush(stdout);

  const auto outcomes = run_parstack(spec, {device}, run, std::cout);
  const RunOutcome& out = outcomes.back();
  std::cout << "\n";
  out.report.print(std::cout);
  fmt::print(
      "Repetitions: {} after {} warm-up: median {:.5f} s, min {:.5f} s, max {:.5f} s; "
      "{:.2f} GMAC/s (median)\n",
      out.stats.seconds.size(), out.stats.warmup, out.stats.median, out.stats.min, out.stats.max,
      out.gmacs(out.stats.median));
  if (out.report.verification)
    fmt::print("Verified on {} (tolerance rel L2 {:.0e})\n", out.verification_scope(),
               parstack_tolerance(spec.dtype).rel_l2);
  print_cuda_split(out);

  return finish_run(out, opt.json_path, threads);
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
      sub->add_option("--shift-min", opt->shift_min, "Smallest random shift (default -T/10)")
          ->type_name("A");
  opt->shift_max_option =
      sub->add_option("--shift-max", opt->shift_max, "Largest random shift (default T/10)")
          ->type_name("B");
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
  sub->add_option("--json", opt->json_path,
                  "Write the report, bench statistics and environment to FILE")
      ->type_name("FILE");
  return {sub, [opt] { return run_parstack_command(*opt); }};
}

}  // namespace sciproxy::app
