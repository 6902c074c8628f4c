// `sciproxy tti`: the one-field TTI operator of Devito's 2022 workshop demo
// (`python run.py -d 412 423 476 -nt 200`, operator `TTISelfAdjointForward`) with constant dummy
// materials: the library's case tti_demo (src/tti/case.cpp) with the options as its settings,
// run through the harness (timed, optionally verified against the reference backend on the first
// --verify-nt steps) and reported the way Devito reports (global and per-section GFlops/s,
// GPts/s, OI), with the fraction of this machine's bandwidth roofline. Equations:
// include/sciproxy/tti_demo.hpp.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <iostream>
#include <memory>
#include <span>

#include "cli_common.hpp"
#include "core/json.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"

namespace sciproxy::app {

namespace {

struct TtiCliOptions {
  std::vector<std::int64_t> shape = {412, 423, 476};
  std::int64_t nt = 200;
  double spacing = 10;
  double dt = 0;  // 0: 0.9 of the stability limit
  double freq = 15;
  int space_order = 8;
  std::string device = "auto";
  std::string dtype = "float32";
  std::string form = "fused";
  int threads = 0;
  int reps = 1;
  int warmup = 0;
  bool verify = false;
  bool autotune = false;
  std::int64_t verify_nt = 10;
  std::string json_path;
};

const OptionNames kNames{{{"nx", "-d/--shape"},
                          {"ny", "-d/--shape"},
                          {"nz", "-d/--shape"},
                          {"nt", "--nt"},
                          {"spacing", "--spacing"},
                          {"dt", "--dt"},
                          {"freq", "--freq"},
                          {"space_order", "--space-order"},
                          {"dtype", "--dtype"},
                          {"form", "--form"},
                          {"verify_nt", "--verify-nt"},
                          {"autotune", "--autotune"}},
                         {"autotune"}};

std::string performance_text(const nlohmann::json& perf) {
  std::string text =
      fmt::format("OI={:.2f}, {:.2f} GFlops/s, {:.3f} GPts/s", perf.value("intensity", 0.0),
                  perf.value("gflops_per_s", 0.0), perf.value("gpoints_per_s", 0.0));
  if (perf.value("attainable_gflops", 0.0) > 0)
    text += fmt::format(", {:.2f} GB/s, {:.0f}% of roofline ({} bound)",
                        perf.value("gbytes_per_s", 0.0), 100 * perf.value("roofline_fraction", 0.0),
                        perf.value("bound", std::string("?")));
  return text;
}

int run_tti_command(const TtiCliOptions& opt) {
  if (opt.shape.size() != 3)
    throw UsageError(
        fmt::format("-d/--shape: expected 3 grid sizes NX NY NZ, got {}", opt.shape.size()));
  if (opt.form != "two-pass" && opt.form != "fused")
    throw UsageError(fmt::format("--form: expected two-pass or fused, got \"{}\"", opt.form));
  if (opt.warmup < 0)
    throw UsageError(fmt::format("--warmup: expected 0 or more, got {}", opt.warmup));
  check_threads(opt.threads);
  check_repetitions(opt.reps);
  CaseSettings settings{{{"nx", std::to_string(opt.shape[0])},
                         {"ny", std::to_string(opt.shape[1])},
                         {"nz", std::to_string(opt.shape[2])},
                         {"nt", std::to_string(opt.nt)},
                         {"spacing", fmt::format("{}", opt.spacing)},
                         {"dt", fmt::format("{}", opt.dt)},
                         {"freq", fmt::format("{}", opt.freq)},
                         {"space_order", std::to_string(opt.space_order)},
                         {"dtype", parse_dtype(opt.dtype)},
                         {"form", opt.form},
                         {"verify_nt", std::to_string(opt.verify_nt)},
                         {"autotune", opt.autotune ? "1" : "0"}}};
  if (!opt.json_path.empty()) check_output_path(opt.json_path, "--json");
  const CaseEntry& entry = find_case("tti_demo");
  const nlohmann::json p = nlohmann::json::parse(entry.make(settings)->parameters().json());
  const Device device = select_device_option(opt.device);
  const int threads = device.backend == Backend::reference ? 1 : effective_threads(opt.threads);

  fmt::print(
      "sciproxy tti: Devito's TTISelfAdjointForward workshop demo, {} x {} x {} points ({} m), "
      "nt {}, space order {}, {}, {} form, device {}{}{}\n",
      opt.shape[0], opt.shape[1], opt.shape[2], opt.spacing, opt.nt, opt.space_order,
      p["dtype"].get<std::string>(), device.backend == Backend::reference ? "two-pass" : opt.form,
      device.name(), device.automatic ? " (chosen by auto)" : "",
      device.backend == Backend::cuda
          ? ""
          : fmt::format(", {} thread{}", threads, threads == 1 ? "" : "s"));
  const auto& m = p["materials"];
  fmt::print(
      "Materials (constant dummy values): vp {} m/s, b {}, epsilon {:.3g}, eta {:.3g}, f {:.3g}, "
      "theta {:.3g} rad, phi {:.3g} rad, damping {:.3g}; source: {} Hz Ricker, trilinear\n",
      m["vp"].get<double>(), m["b"].get<double>(), m["epsilon"].get<double>(),
      m["eta"].get<double>(), m["f"].get<double>(), m["theta"].get<double>(),
      m["phi"].get<double>(), m["damping"].get<double>(), opt.freq);
  if (device.automatic && device.backend != Backend::cuda)
    fmt::print("auto: running on cpu; no CUDA device: {}\n", cuda_unavailable_reason());
  if (opt.verify && device.backend == Backend::reference)
    fmt::print("Verification: skipped, the reference backend is the definition of correct\n");
  if (opt.verify && device.backend != Backend::reference)
    fmt::print("Verification: the reference runs the first {} steps ...\n",
               std::min(opt.nt, opt.verify_nt));
  std::fflush(stdout);

  HarnessOptions harness;
  harness.comm = ranks();
  harness.repetitions = opt.reps;
  harness.warmup = opt.warmup;
  harness.threads = opt.threads;
  harness.verify = opt.verify && device.backend != Backend::reference;
  harness.log = &std::cout;
  harness.progress = true;
  const auto results = run_case(entry, settings, {device}, harness);
  const CaseResult& result = results.front();
  if (ranks().rank() != 0) return 0;  // rank 0 prints the report (the others have no details)
  const nlohmann::json details = details_of(result);
  const KernelReport& r = result.report;
  const nlohmann::json perf = to_json(r.rates, r.work);
  const double setup = details["setup_seconds"].get<double>();
  fmt::print("\nOperator `TTISelfAdjointForward` ran in {:.4f} s on {} [{}]\n", r.seconds,
             r.device.name(), precision_name(r.work.precision));
  fmt::print("Global performance: [{}]\n", performance_text(perf));
  fmt::print(
      "Global performance <w/ setup>: [{:.4f} s, {:.3f} GPts/s] (setup: coefficients, padding)\n",
      r.seconds + setup, r.work.points / (r.seconds + setup) * 1e-9);
  fmt::print("Local performance:\n");
  for (const auto& s : details["sections"]) {
    if (s["name"] == "halo exchange")  // no work of its own: its bytes are in the ranks' line
      fmt::print("  * halo exchange ran in {:.4f} s\n", s["seconds"].get<double>());
    else
      fmt::print("  * {} ran in {:.4f} s [{}]\n", s["name"].get<std::string>(),
                 s["seconds"].get<double>(), performance_text(s["performance"]));
  }
  const double flux = details["flux_flops_per_point"].get<double>();
  const double div = details["divergence_flops_per_point"].get<double>();
  fmt::print(
      "Work model: points = {} grid points x {} steps = {}; {:.0f} flops/point (flux {:.0f}, "
      "divergence + update {:.0f}, as implemented); {:.1f} compulsory bytes/point; dt {:.4g} s "
      "(stability limit {:.4g} s)\n",
      opt.shape[0] * opt.shape[1] * opt.shape[2], opt.nt, format_count(r.work.points), flux + div,
      flux, div, details["bytes_per_point"].get<double>(), details["dt"].get<double>(),
      details["dt_limit"].get<double>());
  if (r.roofline) {
    fmt::print("Roofline: {:.1f} GB/s, {:.0f} GFlops/s {} peak ({})\n", r.roofline->bandwidth_gbs,
               r.roofline->peak_gflops(r.work.precision), precision_name(r.work.precision),
               r.roofline->machine);
    warn_if_busy(*r.roofline, std::cout);
  }
  fmt::print("Repetitions: {} after {} warm-up: median {:.4f} s, min {:.4f} s, max {:.4f} s\n",
             result.stats.seconds.size(), result.stats.warmup, result.stats.median,
             result.stats.min, result.stats.max);
  if (r.verification) {
    fmt::print(
        "Verification against the reference ({} steps, same problem): {} (tolerance rel L2 "
        "{:.0e}): {}\n",
        details["verification_scope"]["steps"].get<long long>(), r.passed() ? "PASS" : "FAIL",
        details["verification_scope"]["tolerance_rel_l2"].get<double>(), r.verification->summary());
    for (const auto& c : r.checks) fmt::print("  {}: {}\n", c.output, c.summary());
  }
  r.print_timers(std::cout);
  return finish_case_run(result, opt.json_path, threads);
}

}  // namespace

Command add_tti_command(CLI::App& root) {
  auto opt = std::make_shared<TtiCliOptions>();
  CLI::App* sub = root.add_subcommand(
      "tti",
      "Run the one-field TTI operator of Devito's workshop demo (TTISelfAdjointForward): time it, "
      "optionally verify it against the reference backend, report GFlops/s, GPts/s and roofline "
      "fraction per section");
  sub->add_option("-d,--shape", opt->shape, "Grid points NX NY NZ (z vertical, contiguous)")
      ->type_name("NX NY NZ")
      ->expected(3)
      ->capture_default_str();
  sub->add_option("--nt", opt->nt, "Time steps")->type_name("NT")->capture_default_str();
  sub->add_option("--spacing", opt->spacing, "Grid spacing in metres (all axes)")
      ->type_name("H")
      ->capture_default_str();
  sub->add_option("--dt", opt->dt, "Time step in seconds; 0: 0.9 of the stability limit")
      ->type_name("DT")
      ->capture_default_str();
  sub->add_option("--freq", opt->freq, "Peak frequency of the Ricker source (Hz)")
      ->type_name("HZ")
      ->capture_default_str();
  sub->add_option("--space-order", opt->space_order,
                  "Order of the staggered derivatives: 4, 8, 12 or 16")
      ->type_name("A")
      ->capture_default_str();
  sub->add_option("--device", opt->device, "auto, reference, cpu, cuda or cuda:N")
      ->type_name("DEVICE")
      ->capture_default_str();
  sub->add_option("--dtype", opt->dtype, "float32 or float64")
      ->type_name("DTYPE")
      ->capture_default_str();
  sub->add_option("--form", opt->form,
                  "two-pass (the demo's: a flux pass, then a divergence pass) or fused (one pass, "
                  "fluxes kept in cache / on chip); cpu and cuda (the reference runs two passes)")
      ->type_name("FORM")
      ->capture_default_str();
  sub->add_option("--threads", opt->threads, "OpenMP threads of the cpu backend; 0: all")
      ->type_name("N");
  sub->add_option("--reps", opt->reps, "Timed repetitions")->type_name("R")->capture_default_str();
  sub->add_option("--warmup", opt->warmup, "Untimed runs before them")
      ->type_name("W")
      ->capture_default_str();
  sub->add_flag(
      "--verify", opt->verify,
      "Also run the first --verify-nt steps on the device and on the reference backend and "
      "compare the wavefields (rel L2 1e-4 float32, 1e-11 float64)");
  sub->add_flag("--autotune", opt->autotune,
                "cpu, fused form: choose the tile budget and the steps per sweep by timing "
                "candidates on a few steps of this problem (once; cached per machine, shape, "
                "materials, dtype and threads)");
  sub->add_option("--verify-nt", opt->verify_nt, "Steps of the verification run")
      ->type_name("NT")
      ->capture_default_str();
  sub->add_option("--json", opt->json_path,
                  "Write the report, bench statistics and environment to FILE")
      ->type_name("FILE")
      ->check(output_file());
  sub->footer(
      "The operator (Devito's 2022 workshop demo, one field u): F = b(1+2eps)[e1(e1.D+u) + "
      "e2(e2.D+u)] + n[b(1-f eta^2)(n.D+u) + b f eta sqrt(1-eta^2)], u+ = (2-d)u + (d-1)u- + "
      "dt^2 vp^2/b D-.F, plus a Ricker source injected trilinearly near the centre. Constant dummy "
      "materials that keep the output finite: vp 1500 m/s, b 1, epsilon 0.2, eta 0.4, f 0.85, "
      "theta 0.5 rad, phi 0.3 rad, damping 0.001. Points = grid points x steps; flops are those of "
      "the implemented expressions (9M+16 flux, 9M+9 divergence, M = order/2); bytes are those "
      "the backend's loops move per point and step (float32, cpu: 84 two-pass, 44 fused, 28 "
      "fused two steps per sweep, 12 fused with these constant materials).");
  sub->footer(sub->get_footer() +
              "\nThe library's case `tti_demo` (`sciproxy run tti_demo --set name=value` takes the "
              "same settings).");
  return {sub, [opt] { return with_option_names(kNames, [&] { return run_tti_command(*opt); }); }};
}

}  // namespace sciproxy::app
