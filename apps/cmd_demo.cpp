// `sciproxy demo`: every kernel built so far on every available backend, verified against the
// reference, with the reports and one summary table.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <span>

#include "cli_common.hpp"
#include "parstack_runner.hpp"
#include "scalar_runner.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/report.hpp"
#include "sciproxy/core/verify.hpp"
#include "sciproxy/tti.hpp"
#include "sciproxy/tti_demo.hpp"

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
  double seconds = 0, gmacs = 0, fraction = 0;
  std::string rel_l2, verdict;
  bool pass = true;
};

// The TTI workshop operator (`sciproxy tti`) at a demo size: Devito's constant dummy materials,
// a Ricker source near the centre, dt 0.9 of the stability limit; each device runs both forms,
// compared with one reference run of the same problem.
constexpr std::int64_t kTtiSize = 48, kTtiSteps = 20;
constexpr int kTtiOrder = 8;

struct TtiDemoRun {
  KernelReport report;
  BenchStats stats;
  std::string form;
};

std::vector<TtiDemoRun> run_tti_demo(const std::vector<Device>& devices, int threads_option,
                                     int reps, std::ostream& log) {
  using T = float;
  const std::vector<T> vp = {1500}, b = {1}, eps = {0.2f}, eta = {0.4f}, f = {0.85f},
                       theta = {0.5f}, phi = {0.3f}, damping = {0.001f};
  tti::TtiDemoInput<T> in;
  for (int d = 0; d < 3; ++d) {
    in.shape[d] = kTtiSize;
    in.spacing[d] = 10;
    // Off the grid points, so that all 8 trilinear weights differ (as `sciproxy tti`).
    in.source_position[d] = (static_cast<double>(kTtiSize / 2) + 0.37 + 0.11 * d) * 10;
  }
  in.nt = kTtiSteps;
  in.material = {vp, b, eps, eta, f, theta, phi, damping};
  in.dt = 0.9 * tti::tti_demo_dt_limit(in, kTtiOrder);
  const std::vector<T> amplitudes = tti::ricker_wavelet<T>(15, in.dt, kTtiSteps);
  in.source_amplitudes = amplitudes;

  tti::TtiDemoOptions options;
  options.space_order = kTtiOrder;
  options.nparallel = threads_option;
  log << fmt::format("Verification: the reference runs all {} steps ...\n", kTtiSteps);
  log.flush();
  const auto t0 = std::chrono::steady_clock::now();
  const auto expected = tti::tti_demo<T>(Device{Backend::reference, 0, false}, in, options);
  log << fmt::format("Verification: reference done in {:.2f} s\n",
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  Tolerance tol;
  tol.rel_l2 = 1e-4;  // float32, as `sciproxy tti --verify`

  std::vector<TtiDemoRun> runs;
  const int threads = effective_threads(threads_option);
  for (const Device& device : devices) {
    for (const tti::TtiDemoForm form : {tti::TtiDemoForm::fused, tti::TtiDemoForm::two_pass}) {
      options.form = form;
      TtiDemoRun run;
      run.form = tti::tti_demo_form_name(form);
      KernelReport& report = run.report;
      report.kernel = fmt::format("TTISelfAdjointForward ({})", run.form);
      report.device = device;
      report.roofline = roofline_for(device, threads, RooflinePolicy::measure_if_absent, log);
      tti::TtiDemoOutput<T> last;
      int call = 0;
      const int warmup = 1;
      auto once = [&]() -> double {
        if (call++ == warmup) report.timers.clear();  // the table shows timed calls only
        const auto start = std::chrono::steady_clock::now();
        last = tti::tti_demo<T>(device, in, options, &report.timers);
        // The sections' own time when the backend measured it (as `sciproxy tti`), else the call.
        double seconds = 0;
        for (const auto& sec : last.sections) seconds += sec.seconds;
        return seconds > 0
                   ? seconds
                   : std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      };
      run.stats = run_benchmark(once, warmup, reps);
      report.work = last.work;
      report.seconds = run.stats.median;
      report.rates = derive_rates(report.work, report.seconds, report.roofline);
      report.parameters = {{"shape", in.shape},
                           {"nt", in.nt},
                           {"spacing", 10},
                           {"dt", in.dt},
                           {"space_order", kTtiOrder},
                           {"dtype", "float32"},
                           {"form", run.form},
                           {"threads", device.backend == Backend::cuda ? 0 : threads}};
      report.verification = compare<T, T>(std::span<const T>(last.u), std::span<const T>(expected.u), tol);
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

// The coupled P/M TTI system (what RTM and FWI run) at a demo size, float32: a tilted anisotropic
// model with variable density, the Q sponge and a free surface, one shot, a line of receivers.
// Each device runs the forward and the adjoint; both are compared with the reference.
constexpr std::int64_t kTtiFullSize = 40, kTtiFullSponge = 10, kTtiFullReceivers = 32;

struct TtiFullRun {
  KernelReport forward, adjoint;
  BenchStats forward_stats, adjoint_stats;
};

std::vector<TtiFullRun> run_tti_full(const std::vector<Device>& devices, int threads_option,
                                     int reps, std::ostream& log) {
  using T = float;
  const std::int64_t n = kTtiFullSize, cells = n * n * n;
  std::vector<T> vp(cells), buoyancy(cells), epsilon(cells), delta(cells), theta(cells), phi(cells);
  for (std::int64_t z = 0; z < n; ++z)
    for (std::int64_t i = 0; i < n * n; ++i) {
      const std::int64_t c = z * n * n + i;
      const bool deep = z >= n / 2;  // two layers
      vp[c] = deep ? 2500 : 1800;
      buoyancy[c] = deep ? T(1) / 2300 : T(1) / 2000;
      epsilon[c] = deep ? 0.2f : 0.1f;
      delta[c] = deep ? 0.1f : 0.05f;
      theta[c] = deep ? 0.5f : 0.2f;
      phi[c] = deep ? 0.3f : 0.0f;
    }
  tti::TtiInput<T> in;
  in.model.grid = wave::Grid{3, {n, n, n}, {10, 10, 10}};
  in.model.vp = vp;
  in.model.buoyancy = buoyancy;
  in.model.epsilon = epsilon;
  in.model.delta = delta;
  in.model.theta = theta;
  in.model.phi = phi;
  tti::TtiOptions options;
  options.space_order = 8;
  options.sponge_width.fill(kTtiFullSponge);
  options.free_surface = true;
  options.nparallel = threads_option;
  in.dt = 0.9 * tti::tti_max_dt(in.model, options);
  in.nt = static_cast<std::int64_t>(0.25 / in.dt);  // 0.25 s
  const std::vector<std::int64_t> source = {2, n / 2, n / 2};
  std::vector<std::int64_t> receivers;
  for (std::int64_t r = 0; r < kTtiFullReceivers; ++r)
    receivers.insert(receivers.end(), {2, n / 2, (r * (n - 1)) / (kTtiFullReceivers - 1)});
  in.nsources = 1;
  in.nreceivers = kTtiFullReceivers;
  in.source_locations = source;
  in.receiver_locations = receivers;
  const std::vector<T> amplitudes = tti::ricker_wavelet<T>(15, in.dt, in.nt);
  in.source_amplitudes = amplitudes;

  const auto t0 = std::chrono::steady_clock::now();
  const Device reference{Backend::reference, 0, false};
  const auto expected = tti::tti_forward<T>(reference, in, options);
  const auto expected_adjoint =
      tti::tti_adjoint<T>(reference, in, std::span<const T>(expected.receiver_amplitudes), options);
  log << fmt::format("Verification: reference forward and adjoint done in {:.2f} s\n",
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  Tolerance tol;
  tol.rel_l2 = 1e-5;  // float32 traces, as tests/cross/test_tti_cpu.cpp

  std::vector<TtiFullRun> runs;
  const int threads = effective_threads(threads_option);
  for (const Device& device : devices) {
    TtiFullRun run;
    const auto parameters = nlohmann::json{{"shape", {n, n, n}},
                                           {"sponge", kTtiFullSponge},
                                           {"free_surface", true},
                                           {"nt", in.nt},
                                           {"dt", in.dt},
                                           {"space_order", options.space_order},
                                           {"dtype", "float32"},
                                           {"threads", device.backend == Backend::cuda ? 0 : threads}};
    // One timed kernel: its report, its statistics, and what the last call returned.
    auto measure = [&](KernelReport& report, BenchStats& stats, const char* name, auto call) {
      report.kernel = name;
      report.device = device;
      report.roofline = roofline_for(device, threads, RooflinePolicy::measure_if_absent, log);
      decltype(call(nullptr)) last;
      int count = 0;
      stats = run_benchmark(
          [&]() {
            if (count++ == 1) report.timers.clear();  // the table shows timed calls only
            const auto start = std::chrono::steady_clock::now();
            last = call(&report.timers);
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          },
          1, reps);
      report.work = last.work;
      report.seconds = stats.median;
      report.rates = derive_rates(report.work, report.seconds, report.roofline);
      report.parameters = parameters;
      return last;
    };
    const auto forward = measure(run.forward, run.forward_stats, "tti_forward", [&](Timers* t) {
      return tti::tti_forward<T>(device, in, options, nullptr, t);
    });
    run.forward.verification = compare<T, T>(std::span<const T>(forward.receiver_amplitudes),
                                             std::span<const T>(expected.receiver_amplitudes), tol);
    const auto adjoint = measure(run.adjoint, run.adjoint_stats, "tti_adjoint", [&](Timers* t) {
      return tti::tti_adjoint<T>(device, in, std::span<const T>(expected.receiver_amplitudes),
                                  options, t);
    });
    run.adjoint.verification =
        compare<T, T>(std::span<const T>(adjoint.source_amplitudes),
                      std::span<const T>(expected_adjoint.source_amplitudes), tol);
    runs.push_back(std::move(run));
  }
  return runs;
}

int run_demo(const DemoOptions& opt) {
  check_threads(opt.threads);
  check_repetitions(opt.reps);
  if (!opt.json_path.empty()) check_output_path(opt.json_path, "--json");
  ParstackSpec base;
  base.ntraces = opt.ntraces;
  base.nshifts = opt.nshifts;
  base.nsamples = opt.nsamples;
  if (!(opt.verify_macs > 0))
    throw UsageError(
        fmt::format("--verify-macs: expected a positive count, got {}", opt.verify_macs));
  check_spec(base, {}, opt.verify_macs);

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
  for (const Dtype dtype : {Dtype::float32, Dtype::float64}) {
    ParstackSpec s = base;
    s.dtype = dtype;
    check_spec(s, devices, opt.verify_macs);
  }

  const int threads = effective_threads(opt.threads);
  std::string names = "reference";
  for (const auto& d : devices) names += ", " + d.name();
  fmt::print(
      "sciproxy demo: parstack (methods 0 and 1, float32 and float64), {}; scalar wave "
      "propagation (2-D, float32), Born modelling and its migration image (2-D, float32 and "
      "float64); the TTI workshop operator ({}^3, {} steps, float32, fused and two-pass); on {} "
      "({} cpu threads)\n",
      base.label(), kTtiSize, kTtiSteps, names, threads);
  if (cuda_device_count() == 0 && opt.device == "auto")
    fmt::print("cuda: skipped: {}\n", cuda_unavailable_reason());
  std::fflush(stdout);

  RunOptions run;
  run.threads = opt.threads;
  run.reps = opt.reps;
  run.verify = true;
  run.report_reference = true;
  run.verify_max_macs = opt.verify_macs;

  std::vector<SummaryRow> rows;
  nlohmann::json runs = nlohmann::json::array();
  for (const stack::Method method : {stack::Method::stack, stack::Method::max}) {
    for (const Dtype dtype : {Dtype::float32, Dtype::float64}) {
      ParstackSpec spec = base;
      spec.method = method;
      spec.dtype = dtype;
      const std::string kernel = fmt::format("parstack m{}", static_cast<int>(method));
      fmt::print("\n=== {} ({}), {} ===\n", kernel,
                 method == stack::Method::stack ? "stack" : "maximum", dtype_name(dtype));
      std::fflush(stdout);
      const auto outcomes = run_parstack(spec, devices, run, std::cout);
      for (const auto& out : outcomes) {
        SummaryRow row;
        row.kernel = kernel;
        row.dtype = dtype_name(dtype);
        row.device = out.report.device.name();
        row.seconds = out.stats.median;
        row.gmacs = out.gmacs(out.stats.median);
        row.fraction = out.report.rates.roofline_fraction;
        if (out.is_reference_baseline) {
          fmt::print("Reference (the verification baseline): {} in {:.4f} s, {:.2f} GMAC/s\n",
                     out.verification_scope(), out.stats.median, row.gmacs);
          row.device += fmt::format(" ({})", out.verification_scope());
          row.rel_l2 = "-";
          row.verdict = "REF";
        } else {
          std::cout << "\n";
          out.report.print(std::cout);
          if (out.kernel_seconds)
            fmt::print("CUDA: {:.2f} GMAC/s including transfers, {:.2f} GMAC/s kernel only\n",
                       out.gmacs(out.stats.median), out.gmacs(*out.kernel_seconds));
          const auto& v = out.report.verification;
          row.rel_l2 = v ? fmt::format("{:.2e}", v->rel_l2) : "-";
          row.pass = out.passed();
          row.verdict =
              v ? fmt::format("{} ({})", v->pass ? "PASS" : "FAIL", out.verification_scope())
                : "not verified";
        }
        rows.push_back(row);
        nlohmann::json j = out.to_json();
        j["label"] = kernel;
        runs.push_back(std::move(j));
      }
      std::fflush(stdout);
    }
  }

  // The scalar wave propagator on a small 2-D layered model: forward (float32), Born modelling
  // of a velocity box (float32) and its adjoint, the migration image and source gradient
  // (float64); every device verified against the reference on the whole run.
  auto scalar_block = [&](ScalarSpec spec, const std::string& title) {
    check_scalar_spec(spec, devices);
    ScalarRunOptions srun;
    srun.threads = opt.threads;
    srun.reps = opt.reps;
    srun.verify = true;
    srun.verify_nt = spec.nt;
    srun.verify_shots = spec.nshots;
    fmt::print("\n=== {} ({}), {} ===\n{}{}\n", spec.kernel(), title, dtype_name(spec.dtype),
               spec.label(), spec.born ? "; scatter " + spec.scatter_label() : std::string());
    std::fflush(stdout);
    const auto outcomes = run_scalar(spec, devices, srun, std::cout);
    for (const auto& out : outcomes) {
      std::cout << "\n";
      out.report.print(std::cout);
      for (const auto& [name, c] : out.checks) fmt::print("  {}: {}\n", name, c.summary());
      SummaryRow row;
      row.kernel = spec.kernel();
      row.dtype = dtype_name(spec.dtype);
      row.device = out.report.device.name();
      row.seconds = out.stats.median;
      row.gmacs = out.gpts(out.stats.median);
      row.fraction = out.report.rates.roofline_fraction;
      const auto& v = out.report.verification;
      row.rel_l2 = v ? fmt::format("{:.2e}", v->rel_l2) : "-";
      row.pass = out.passed();
      row.verdict = v ? fmt::format("{} ({})", v->pass ? "PASS" : "FAIL", out.verification_scope())
                      : "not verified";
      rows.push_back(row);
      nlohmann::json j = out.to_json();
      j["label"] = spec.kernel();
      runs.push_back(std::move(j));
    }
    std::fflush(stdout);
  };
  {
    ScalarSpec spec;
    spec.ndim = 2;
    spec.shape = {60, 120};
    spec.nt = 100;
    spec.nshots = 2;
    spec.nreceivers = 60;
    spec.dtype = Dtype::float32;
    scalar_block(spec, "wave propagation, forward");
    spec.born = true;
    scalar_block(spec, "Born modelling of a velocity box");
    spec.shape = {40, 80};
    spec.nt = 80;
    spec.nreceivers = 40;
    spec.dtype = Dtype::float64;
    spec.gradient = true;
    scalar_block(spec, "Born adjoint: migration image and source gradient");
  }

  // The TTI workshop operator.
  {
    fmt::print("\n=== TTISelfAdjointForward (Devito's TTI workshop demo), float32 ===\n"
               "{}^3 points (10 m), {} steps, space order {}, constant dummy materials (as "
               "`sciproxy tti`), fused and two-pass forms\n",
               kTtiSize, kTtiSteps, kTtiOrder);
    std::fflush(stdout);
    const auto tti_runs = run_tti_demo(devices, opt.threads, opt.reps, std::cout);
    for (const auto& run : tti_runs) {
      std::cout << "\n";
      run.report.print(std::cout);
      SummaryRow row;
      row.kernel = "tti " + run.form;
      row.dtype = "float32";
      row.device = run.report.device.name();
      row.seconds = run.stats.median;
      row.gmacs = run.report.rates.gpoints_per_s;
      row.fraction = run.report.rates.roofline_fraction;
      const auto& v = run.report.verification;
      row.rel_l2 = fmt::format("{:.2e}", v->rel_l2);
      row.pass = v->pass;
      row.verdict = fmt::format("{} ({} steps, whole field)", v->pass ? "PASS" : "FAIL", kTtiSteps);
      rows.push_back(row);
      nlohmann::json j = run.report.to_json();
      j["bench"] = run.stats.to_json();
      j["label"] = row.kernel;
      runs.push_back(std::move(j));
    }
    std::fflush(stdout);
  }

  // The coupled P/M TTI system.
  {
    fmt::print("\n=== TTI: the coupled P/M self-adjoint system (Bube et al. 2016), float32 ===\n"
               "{}^3 cells (10 m) + {}-cell Q sponge, free surface, two tilted anisotropic layers "
               "with variable density, 1 source, {} receivers; forward and adjoint\n",
               kTtiFullSize, kTtiFullSponge, kTtiFullReceivers);
    std::fflush(stdout);
    for (auto& run : run_tti_full(devices, opt.threads, opt.reps, std::cout))
      for (auto [report, stats] : {std::pair{&run.forward, &run.forward_stats},
                                   std::pair{&run.adjoint, &run.adjoint_stats}}) {
        std::cout << "\n";
        report->print(std::cout);
        SummaryRow row;
        row.kernel = report->kernel;
        row.dtype = "float32";
        row.device = report->device.name();
        row.seconds = stats->median;
        row.gmacs = report->rates.gpoints_per_s;
        row.fraction = report->rates.roofline_fraction;
        const auto& v = report->verification;
        row.rel_l2 = fmt::format("{:.2e}", v->rel_l2);
        row.pass = v->pass;
        row.verdict = fmt::format("{} (whole run, traces)", v->pass ? "PASS" : "FAIL");
        rows.push_back(row);
        nlohmann::json j = report->to_json();
        j["bench"] = stats->to_json();
        j["label"] = row.kernel;
        runs.push_back(std::move(j));
      }
    std::fflush(stdout);
  }

  bool all_pass = true;
  fmt::print(
      "\nSummary ({}; time = median of {} repetitions, the reference once on the shift sets it "
      "verifies; G/s: GMAC/s for parstack, GPts/s for the wave kernels)\n",
      base.label(), opt.reps);
  const std::string header =
      fmt::format("{:<20} {:<8} {:<30} {:>10} {:>9} {:>9} {:>10}  {}", "kernel", "dtype", "device",
                  "time [s]", "G/s", "roofline", "rel L2", "verification");
  fmt::print("{}\n{}\n", header, std::string(header.size() + 12, '-'));
  nlohmann::json summary = nlohmann::json::array();
  for (const auto& r : rows) {
    all_pass = all_pass && r.pass;
    fmt::print("{:<20} {:<8} {:<30} {:>10.4f} {:>9.2f} {:>9} {:>10}  {}\n", r.kernel, r.dtype,
               r.device, r.seconds, r.gmacs,
               r.fraction > 0 ? fmt::format("{:.1f}%", 100 * r.fraction) : "-", r.rel_l2,
               r.verdict);
    summary.push_back({{"kernel", r.kernel},
                       {"dtype", r.dtype},
                       {"device", r.device},
                       {"seconds", r.seconds},
                       {"gmacs", r.gmacs},
                       {"roofline_fraction", r.fraction},
                       {"rel_l2", r.rel_l2},
                       {"verification", r.verdict},
                       {"pass", r.pass}});
  }
  fmt::print("{}\n", all_pass ? "All verifications passed." : "SOME VERIFICATIONS FAILED.");

  if (!opt.json_path.empty()) {
    nlohmann::json doc = {{"kind", "sciproxy-demo"},
                          {"environment", environment_record(threads)},
                          {"runs", runs},
                          {"summary", summary},
                          {"pass", all_pass}};
    doc["environment"]["threads"] = threads;
    write_file_atomically(opt.json_path, doc.dump(2) + "\n");
    fmt::print("Wrote {}\n", opt.json_path);
  }
  std::cout.flush();
  if (!all_pass)
    throw RuntimeError("demo: at least one backend disagrees with the reference (see the summary)");
  return 0;
}

}  // namespace

Command add_demo_command(CLI::App& root) {
  auto opt = std::make_shared<DemoOptions>();
  CLI::App* sub = root.add_subcommand(
      "demo",
      "Run every kernel built so far on every available backend, verify each against the "
      "reference and print the reports and a summary table");
  sub->add_option("--json", opt->json_path, "Write every report and the summary to FILE")
      ->type_name("FILE");
  sub->add_option("--device", opt->device, "auto (cpu and every GPU present), cpu or cuda:N")
      ->type_name("DEVICE")
      ->capture_default_str();
  sub->add_option("--reps", opt->reps, "Timed repetitions per run (after one warm-up)")
      ->type_name("R")
      ->capture_default_str();
  sub->add_option("--threads", opt->threads, "OpenMP threads of the cpu backend; 0: all")
      ->type_name("N");
  sub->add_option("--ntraces", opt->ntraces, "Traces")->type_name("N")->capture_default_str();
  sub->add_option("--nshifts", opt->nshifts, "Shift sets")->type_name("S")->capture_default_str();
  sub->add_option("--nsamples", opt->nsamples, "Samples per trace")
      ->type_name("T")
      ->capture_default_str();
  sub->add_option(
         "--verify-macs", opt->verify_macs,
         "Multiply-adds above which the reference checks an even spread of shift sets only")
      ->type_name("M")
      ->capture_default_str();
  sub->footer(
      "Exit status 1 when any backend disagrees with the reference. Problems above 2e9 "
      "multiply-adds are verified on an even spread of shift sets. The wave kernels run at fixed "
      "small sizes, each verified on the whole run: scalar (2-D 60 x 120 cells, nt 100, 2 shots, "
      "float32), scalar_born (the same, +100 m/s in a box at the centre), scalar_born_gradient "
      "(2-D 40 x 80, nt 80, float64: migration image and source gradient), and the TTI workshop "
      "operator (48^3 points, 20 steps, space order 8, float32, fused and two-pass forms).");
  return {sub, [opt] { return run_demo(*opt); }};
}

}  // namespace sciproxy::app
