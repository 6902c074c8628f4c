// `sciproxy tti`: the one-field TTI operator of Devito's 2022 workshop demo
// (`python run.py -d 412 423 476 -nt 200`, operator `TTISelfAdjointForward`) with constant dummy
// materials, timed, optionally verified against the reference backend, and reported the way
// Devito reports (global and per-section GFlops/s, GPts/s, OI), with the fraction of this
// machine's bandwidth roofline. Equations: include/sciproxy/tti_demo.hpp.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <iostream>
#include <memory>
#include <span>

#include "cli_common.hpp"
#include "parstack_runner.hpp"  // Dtype, parse_dtype, dtype_name
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/report.hpp"
#include "sciproxy/tti_demo.hpp"
#include "tti/case.hpp"

namespace sciproxy::app {

namespace {

// The dummy materials: constant, chosen so that the output stays finite (stated in --help).
struct DemoMaterials {
  double vp = 1500, b = 1, epsilon = 0.2, eta = 0.4, f = 0.85, theta = 0.5, phi = 0.3,
         damping = 0.001;
  std::string text() const {
    return fmt::format("vp {} m/s, b {}, epsilon {}, eta {}, f {}, theta {} rad, phi {} rad, "
                       "damping {}",
                       vp, b, epsilon, eta, f, theta, phi, damping);
  }
  nlohmann::json to_json() const {
    return {{"vp", vp},   {"b", b},         {"epsilon", epsilon}, {"eta", eta},      {"f", f},
            {"theta", theta}, {"phi", phi}, {"damping", damping}};
  }
};

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
  std::int64_t verify_nt = 10;
  std::string json_path;
};

struct Section {
  std::string name;
  WorkModel work;
  double seconds = 0;
  Rates rates;
};

struct TtiOutcome {
  KernelReport report;
  BenchStats stats;
  std::vector<Section> sections;
  double setup_seconds = 0;
  double dt = 0, dt_limit = 0;
  std::int64_t verified_nt = 0;
  double tolerance = 0;
  double stencil_flops = 0;

  bool passed() const { return !report.verification || report.verification->pass; }
  nlohmann::json to_json() const {
    nlohmann::json j = sciproxy::to_json(report);
    j["bench"] = sciproxy::to_json(stats);
    j["gpts"] = report.rates.gpoints_per_s;
    j["operator"] = "TTISelfAdjointForward";
    j["dt"] = dt;
    j["dt_limit"] = dt_limit;
    j["setup_seconds"] = setup_seconds;
    // All sections (the injection adds a little) and the stencil alone (flux + divergence).
    j["flops_per_point"] = report.work.points > 0 ? report.work.flops / report.work.points : 0;
    j["stencil_flops_per_point"] = stencil_flops;
    j["bytes_per_point"] = report.work.points > 0 ? report.work.bytes / report.work.points : 0;
    nlohmann::json s = nlohmann::json::array();
    for (const auto& sec : sections)
      s.push_back({{"name", sec.name}, {"seconds", sec.seconds}, {"performance", sciproxy::to_json(sec.rates, sec.work)}});
    j["sections"] = s;
    if (report.verification)
      j["verification_scope"] = {{"steps", verified_nt}, {"tolerance_rel_l2", tolerance}};
    return j;
  }
};

std::string performance_text(const Rates& r, double points, const WorkModel& work) {
  std::string text = fmt::format("OI={:.2f}, {:.2f} GFlops/s, {:.3f} GPts/s", r.intensity,
                                 r.gflops_per_s, r.gpoints_per_s);
  (void)points;
  (void)work;
  if (r.attainable_gflops > 0)
    text += fmt::format(", {:.2f} GB/s, {:.0f}% of roofline ({} bound)", r.gbytes_per_s,
                        100 * r.roofline_fraction, r.bound);
  return text;
}

template <class T>
struct DemoProblem {
  std::vector<T> vp, b, eps, eta, f, theta, phi, damping, amplitudes;
  tti::TtiDemoInput<T> in;
};

template <class T>
DemoProblem<T> make_problem(const TtiCliOptions& opt, const DemoMaterials& m, std::int64_t nt) {
  DemoProblem<T> p;
  p.vp = {T(m.vp)};
  p.b = {T(m.b)};
  p.eps = {T(m.epsilon)};
  p.eta = {T(m.eta)};
  p.f = {T(m.f)};
  p.theta = {T(m.theta)};
  p.phi = {T(m.phi)};
  p.damping = {T(m.damping)};
  auto& in = p.in;
  for (int d = 0; d < 3; ++d) {
    in.shape[d] = opt.shape[d];
    in.spacing[d] = opt.spacing;
    // Near the centre, off the grid points, so that all 8 trilinear weights differ.
    in.source_position[d] =
        std::min((static_cast<double>(opt.shape[d] / 2) + 0.37 + 0.11 * d) * opt.spacing,
                 static_cast<double>(opt.shape[d] - 1) * opt.spacing);
  }
  in.nt = nt;
  in.material = {p.vp, p.b, p.eps, p.eta, p.f, p.theta, p.phi, p.damping};
  return p;
}

template <class T>
TtiOutcome run_typed(const TtiCliOptions& opt, const Device& device, const DemoMaterials& mat,
                     int threads) {
  tti::TtiDemoOptions options;
  options.space_order = opt.space_order;
  options.form = tti::parse_tti_demo_form(opt.form);
  options.nparallel = opt.threads;

  DemoProblem<T> p = make_problem<T>(opt, mat, opt.nt);
  const double limit = tti::tti_demo_dt_limit(p.in, opt.space_order);
  p.in.dt = opt.dt > 0 ? opt.dt : 0.9 * limit;
  p.amplitudes = tti::ricker_wavelet<T>(opt.freq, p.in.dt, opt.nt);
  p.in.source_amplitudes = p.amplitudes;

  TtiOutcome out;
  out.dt = p.in.dt;
  out.stencil_flops = tti::tti_demo_flops(opt.space_order).total();
  out.dt_limit = limit;
  KernelReport& report = out.report;
  report.kernel = "TTISelfAdjointForward";
  report.device = device;
  report.roofline = roofline_for(device, opt.threads, RooflinePolicy::measure_if_absent, std::cout);

  int call = 0;
  tti::TtiDemoOutput<T> last;
  std::vector<std::vector<double>> section_seconds;  // [rep][section]
  std::vector<double> setup_seconds;
  auto once = [&]() -> double {
    const bool timed = call++ >= opt.warmup;
    if (call == opt.warmup + 1) report.timers.clear();  // the table shows timed calls only
    Timers* timers = &report.timers;
    const double setup_before = [&] {
      const auto* s = timers->find("TTISelfAdjointForward/setup");
      return s ? s->total : 0.0;
    }();
    last = tti::tti_demo<T>(device, p.in, options, timers);
    double seconds = 0;
    std::vector<double> secs;
    for (const auto& s : last.sections) {
      seconds += s.seconds;
      secs.push_back(s.seconds);
    }
    if (timed) {
      section_seconds.push_back(secs);
      const auto* s = timers->find("TTISelfAdjointForward/setup");
      setup_seconds.push_back((s ? s->total : 0.0) - setup_before);
    }
    return seconds;
  };
  out.stats = run_benchmark(once, opt.warmup, opt.reps);
  out.setup_seconds = median_of(setup_seconds);
  report.work = last.work;
  report.seconds = out.stats.median;
  report.rates = derive_rates(report.work, report.seconds, report.roofline);
  for (std::size_t i = 0; i < last.sections.size(); ++i) {
    Section s;
    s.name = last.sections[i].name;
    s.work = last.sections[i].work;
    std::vector<double> v;
    for (const auto& rep : section_seconds) v.push_back(rep[i]);
    s.seconds = median_of(v);
    s.rates = derive_rates(s.work, s.seconds, report.roofline);
    out.sections.push_back(s);
  }
  report.parameters = parameters_from_json(nlohmann::json{{"shape", opt.shape},
                       {"nt", opt.nt},
                       {"spacing", opt.spacing},
                       {"dt", out.dt},
                       {"space_order", opt.space_order},
                       {"dtype", sizeof(T) == 4 ? "float32" : "float64"},
                       {"form", device.backend == Backend::reference
                                    ? "two-pass"
                                    : tti::tti_demo_form_name(options.form)},
                       {"threads", threads},
                       {"source_frequency", opt.freq},
                       {"materials", mat.to_json()},
                       {"warmup", opt.warmup},
                       {"repetitions", opt.reps}});

  if (opt.verify && device.backend != Backend::reference) {
    const std::int64_t vnt = std::min(opt.nt, opt.verify_nt);
    DemoProblem<T> v = make_problem<T>(opt, mat, vnt);
    v.in.dt = p.in.dt;
    v.in.source_amplitudes = std::span<const T>(p.amplitudes).first(static_cast<std::size_t>(vnt));
    fmt::print("Verification: the reference runs the first {} steps ...\n", vnt);
    std::fflush(stdout);
    const auto ref = tti::tti_demo<T>(Device{Backend::reference, 0, false}, v.in, options);
    const auto got = tti::tti_demo<T>(device, v.in, options);
    const Tolerance tol = tti::tti_demo_tolerance(tti::precision_of<T>());
    report.verification = compare<T, T>(std::span<const T>(got.u), std::span<const T>(ref.u), tol);
    out.verified_nt = vnt;
    out.tolerance = tol.rel_l2;
  }
  return out;
}

int run_tti_command(const TtiCliOptions& opt) {
  if (opt.shape.size() != 3)
    throw UsageError(fmt::format("-d/--shape: expected 3 grid sizes NX NY NZ, got {}", opt.shape.size()));
  if (opt.nt < 1) throw UsageError(fmt::format("--nt: expected at least 1, got {}", opt.nt));
  if (opt.space_order != 4 && opt.space_order != 8 && opt.space_order != 12 && opt.space_order != 16)
    throw UsageError(fmt::format("--space-order: expected 4, 8, 12 or 16, got {}", opt.space_order));
  if (!(opt.spacing > 0) || !std::isfinite(opt.spacing))
    throw UsageError(fmt::format("--spacing: expected a positive grid spacing in metres, got {}", opt.spacing));
  if (opt.dt < 0 || !std::isfinite(opt.dt))
    throw UsageError(fmt::format("--dt: expected a positive time step in seconds (or 0 for 0.9 of "
                                 "the stability limit), got {}",
                                 opt.dt));
  if (!(opt.freq > 0) || !std::isfinite(opt.freq))
    throw UsageError(fmt::format("--freq: expected a positive frequency in Hz, got {}", opt.freq));
  if (opt.form != "two-pass" && opt.form != "fused")
    throw UsageError(fmt::format("--form: expected two-pass or fused, got \"{}\"", opt.form));
  if (opt.verify_nt < 1)
    throw UsageError(fmt::format("--verify-nt: expected at least 1, got {}", opt.verify_nt));
  if (opt.warmup < 0) throw UsageError(fmt::format("--warmup: expected 0 or more, got {}", opt.warmup));
  check_threads(opt.threads);
  check_repetitions(opt.reps);
  const Dtype dtype = parse_dtype(opt.dtype);
  if (!opt.json_path.empty()) check_output_path(opt.json_path, "--json");
  const Device device = select_device_option(opt.device);
  const int threads = device.backend == Backend::reference ? 1 : effective_threads(opt.threads);
  const DemoMaterials mat;

  fmt::print("sciproxy tti: Devito's TTISelfAdjointForward workshop demo, {} x {} x {} points ({} m), "
             "nt {}, space order {}, {}, {} form, device {}{}{}\n",
             opt.shape[0], opt.shape[1], opt.shape[2], opt.spacing, opt.nt, opt.space_order,
             dtype_name(dtype), device.backend == Backend::reference ? "two-pass" : opt.form,
             device.name(), device.automatic ? " (chosen by auto)" : "",
             device.backend == Backend::cuda
                 ? ""
                 : fmt::format(", {} thread{}", threads, threads == 1 ? "" : "s"));
  fmt::print("Materials (constant dummy values): {}; source: {} Hz Ricker, trilinear\n", mat.text(),
             opt.freq);
  if (device.automatic && device.backend != Backend::cuda)
    fmt::print("auto: running on cpu; no CUDA device: {}\n", cuda_unavailable_reason());
  if (opt.verify && device.backend == Backend::reference)
    fmt::print("Verification: skipped, the reference backend is the definition of correct\n");
  std::fflush(stdout);

  const TtiOutcome out = dtype == Dtype::float32 ? run_typed<float>(opt, device, mat, threads)
                                                 : run_typed<double>(opt, device, mat, threads);
  const auto& r = out.report;
  fmt::print("\nOperator `TTISelfAdjointForward` ran in {:.4f} s on {} [{}]\n", r.seconds, r.device.name(),
             precision_name(r.work.precision));
  fmt::print("Global performance: [{}]\n", performance_text(r.rates, r.work.points, r.work));
  fmt::print("Global performance <w/ setup>: [{:.4f} s, {:.3f} GPts/s] (setup: coefficients, padding)\n",
             r.seconds + out.setup_seconds,
             r.work.points / (r.seconds + out.setup_seconds) * 1e-9);
  fmt::print("Local performance:\n");
  for (const auto& s : out.sections)
    fmt::print("  * {} ran in {:.4f} s [{}]\n", s.name, s.seconds, performance_text(s.rates, s.work.points, s.work));
  const double flux = tti::tti_demo_flops(opt.space_order).flux;
  const double div = tti::tti_demo_flops(opt.space_order).divergence;
  fmt::print("Work model: points = {} grid points x {} steps = {}; {:.0f} flops/point (flux {:.0f}, "
             "divergence + update {:.0f}, as implemented); {:.1f} compulsory bytes/point; dt {:.4g} s "
             "(stability limit {:.4g} s)\n",
             opt.shape[0] * opt.shape[1] * opt.shape[2], opt.nt, format_count(r.work.points), flux + div,
             flux, div, r.work.bytes / r.work.points, out.dt, out.dt_limit);
  if (r.roofline) {
    fmt::print("Roofline: {} GB/s, {:.0f} GFlops/s {} peak ({})\n", fmt::format("{:.1f}", r.roofline->bandwidth_gbs),
               r.roofline->peak_gflops(r.work.precision), precision_name(r.work.precision),
               r.roofline->machine);
    warn_if_busy(*r.roofline, std::cout);
  }
  fmt::print("Repetitions: {} after {} warm-up: median {:.4f} s, min {:.4f} s, max {:.4f} s\n",
             out.stats.seconds.size(), out.stats.warmup, out.stats.median, out.stats.min, out.stats.max);
  if (r.verification)
    fmt::print("Verification against the reference ({} steps, same problem): {} (tolerance rel L2 {:.0e}): {}\n",
               out.verified_nt, r.verification->pass ? "PASS" : "FAIL", out.tolerance,
               r.verification->summary());
  std::cout << r.timers.table();
  return finish_run(out, opt.json_path, threads);
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
  sub->add_option("--space-order", opt->space_order, "Order of the staggered derivatives: 4, 8, 12 or 16")
      ->type_name("A")
      ->capture_default_str();
  sub->add_option("--device", opt->device, "auto, reference, cpu, cuda or cuda:N")
      ->type_name("DEVICE")
      ->capture_default_str();
  sub->add_option("--dtype", opt->dtype, "float32 or float64")->type_name("DTYPE")->capture_default_str();
  sub->add_option("--form", opt->form,
                  "two-pass (the demo's: a flux pass, then a divergence pass) or fused (one pass, "
                  "fluxes kept in cache / on chip); cpu and cuda (the reference runs two passes)")
      ->type_name("FORM")
      ->capture_default_str();
  sub->add_option("--threads", opt->threads, "OpenMP threads of the cpu backend; 0: all")->type_name("N");
  sub->add_option("--reps", opt->reps, "Timed repetitions")->type_name("R")->capture_default_str();
  sub->add_option("--warmup", opt->warmup, "Untimed runs before them")->type_name("W")->capture_default_str();
  sub->add_flag("--verify", opt->verify,
                "Also run the first --verify-nt steps on the device and on the reference backend and "
                "compare the wavefields (rel L2 1e-4 float32, 1e-11 float64)");
  sub->add_option("--verify-nt", opt->verify_nt, "Steps of the verification run")
      ->type_name("NT")
      ->capture_default_str();
  sub->add_option("--json", opt->json_path, "Write the report, bench statistics and environment to FILE")
      ->type_name("FILE");
  sub->footer(
      "The operator (Devito's 2022 workshop demo, one field u): F = b(1+2eps)[e1(e1.D+u) + "
      "e2(e2.D+u)] + n[b(1-f eta^2)(n.D+u) + b f eta sqrt(1-eta^2)], u+ = (2-d)u + (d-1)u- + "
      "dt^2 vp^2/b D-.F, plus a Ricker source injected trilinearly near the centre. Constant dummy "
      "materials that keep the output finite: vp 1500 m/s, b 1, epsilon 0.2, eta 0.4, f 0.85, "
      "theta 0.5 rad, phi 0.3 rad, damping 0.001. Points = grid points x steps; flops are those of "
      "the implemented expressions (9M+16 flux, 9M+9 divergence, M = order/2); bytes are "
      "compulsory (72 per point two-pass, 44 fused, float32).");
  return {sub, [opt] { return run_tti_command(*opt); }};
}

}  // namespace sciproxy::app
