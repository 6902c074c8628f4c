// `sciproxy scalar`: the library's scalar-wave cases (src/wave/case.cpp: scalar, scalar_gradient,
// scalar_born, scalar_born_gradient) with the options as their settings, run through the
// harness: timed, optionally verified against the reference backend on a window, reported.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "scalar_options.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"

namespace sciproxy::app {

namespace {

struct ScalarCliOptions {
  int ndim = 2;
  std::vector<std::int64_t> shape;
  double spacing = 5;
  double dt = 0.004;
  std::int64_t nt = 500;
  std::int64_t shots = 10;
  std::int64_t receivers = 250;
  int accuracy = 4;
  std::int64_t pml_width = 20;
  double freq = 25;
  std::int64_t source_depth = 2;
  std::string device = "auto";
  std::string dtype = "float32";
  int threads = 0;
  int reps = 3;
  bool gradient = false;
  bool born = false;
  double scatter = 100;
  bool verify = false;
  bool autotune = false;
  std::int64_t verify_nt = 100;
  std::int64_t verify_shots = 2;
  std::string json_path;
  GradientStorageCli
      storage;  // --gradient-sampling, --storage, --storage-compression, --storage-dir
};

int run_scalar_command(const ScalarCliOptions& opt) {
  std::vector<std::int64_t> shape = opt.shape;
  if (shape.empty()) {  // default: the SEAM-like size, or a cube in 1-D / 3-D
    if (opt.ndim == 2)
      shape = {251, 500};
    else if (opt.ndim == 1)
      shape = {500};
    else
      shape = {100, 100, 100};
  }
  if (opt.ndim < 1 || opt.ndim > 3)
    throw UsageError(fmt::format("--ndim: expected 1, 2 or 3, got {}", opt.ndim));
  if (static_cast<int>(shape.size()) != opt.ndim)
    throw UsageError(
        fmt::format("--shape: expected {} cell counts (one per dimension of --ndim "
                    "{}), got {}",
                    opt.ndim, opt.ndim, shape.size()));
  CaseSettings settings{{{"ndim", std::to_string(opt.ndim)},
                         {"spacing", fmt::format("{}", opt.spacing)},
                         {"dt", fmt::format("{}", opt.dt)},
                         {"nt", std::to_string(opt.nt)},
                         {"shots", std::to_string(opt.shots)},
                         {"receivers", std::to_string(opt.receivers)},
                         {"accuracy", std::to_string(opt.accuracy)},
                         {"pml_width", std::to_string(opt.pml_width)},
                         {"freq", fmt::format("{}", opt.freq)},
                         {"source_depth", std::to_string(opt.source_depth)},
                         {"dtype", parse_dtype(opt.dtype)},
                         {"verify_nt", std::to_string(opt.verify_nt)},
                         {"verify_shots", std::to_string(opt.verify_shots)},
                         {"autotune", opt.autotune ? "1" : "0"}}};
  for (std::size_t d = 0; d < shape.size(); ++d)
    settings.values[fmt::format("shape{}", d)] = std::to_string(shape[d]);
  if (opt.born) settings.values["scatter"] = fmt::format("{}", opt.scatter);
  opt.storage.apply(settings, opt.gradient);
  check_threads(opt.threads);
  check_repetitions(opt.reps);
  if (!opt.json_path.empty()) check_output_path(opt.json_path, "--json");
  const std::string name = opt.born ? (opt.gradient ? "scalar_born_gradient" : "scalar_born")
                                    : (opt.gradient ? "scalar_gradient" : "scalar");
  const CaseEntry& entry = find_case(name);
  // The case checks the problem (memory included) before the hardware is touched.
  const auto problem = entry.make(settings);
  const nlohmann::json p = nlohmann::json::parse(problem->parameters().json());
  const Device device = select_device_option(opt.device);

  const int threads = device.backend == Backend::reference ? 1 : effective_threads(opt.threads);
  const char* mode = opt.born ? (opt.gradient ? " --born (Born forward + adjoint: migration image "
                                                "and source gradient)"
                                              : " --born (Born modelling)")
                              : (opt.gradient ? " (forward + gradient)" : "");
  fmt::print(
      "sciproxy scalar{}: {}, layered model 1500..4000 m/s, {} Hz Ricker, PML {} cells, "
      "device {}{}{}\n",
      mode, problem->label(), opt.freq, opt.pml_width, device.name(),
      device.automatic ? " (chosen by auto)" : "",
      device.backend == Backend::cuda
          ? ""
          : fmt::format(", {} thread{}", threads, threads == 1 ? "" : "s"));
  if (opt.born) {
    const auto& sc = p["scatter"];
    std::vector<std::string> parts;
    for (int d = 0; d < opt.ndim; ++d)
      parts.push_back(fmt::format("[{}, {})", sc["box_begin"][d].get<long long>(),
                                  sc["box_end"][d].get<long long>()));
    fmt::print(
        "Scatter (velocity perturbation): {:+} m/s in cells {}; scattered and background "
        "data recorded at the receivers\n",
        sc["value"].get<double>(), fmt::join(parts, " x "));
  }
  if (opt.gradient) fmt::print("Gradient sampling: {}\n", gradient_storage_label(p, opt.born));
  if (device.automatic && device.backend != Backend::cuda)
    fmt::print("auto: running on cpu; no CUDA device: {}\n", cuda_unavailable_reason());
  if (opt.verify && device.backend == Backend::reference)
    fmt::print("Verification: skipped, the reference backend is the definition of correct\n");
  if (opt.verify && device.backend != Backend::reference) {
    const auto shots = std::min(opt.shots, opt.verify_shots);
    fmt::print("Verification: the reference runs shot{} 0{} for samples 0-{} ...\n",
               shots == 1 ? "" : "s", shots == 1 ? "" : fmt::format("-{}", shots - 1),
               std::min(opt.nt, opt.verify_nt) - 1);
  }
  std::fflush(stdout);

  HarnessOptions harness;
  harness.comm = ranks();
  harness.repetitions = opt.reps;
  harness.threads = opt.threads;
  harness.verify = opt.verify && device.backend != Backend::reference;
  harness.log = &std::cout;
  harness.progress = true;
  const auto results = run_case(entry, settings, {device}, harness);
  const CaseResult& result = results.front();
  const nlohmann::json details = details_of(result);
  const KernelReport& report = result.report;
  std::cout << "\n";
  report.print(std::cout);
  const auto ratio = details["step_ratio"].get<long long>();
  const char* passes =
      opt.born ? (opt.gradient ? " x 3 (image: background forward and adjoint; source gradient: "
                                 "adjoint of the coupled background and scattered fields)"
                               : " (per step both fields are updated: flops and bytes count "
                                 "both)")
               : (opt.gradient ? " x 2 (forward and adjoint)" : "");
  fmt::print(
      "Time stepping: step ratio {} (inner dt {:.3e} s), {} inner steps; points = "
      "cells of model + PML x inner steps x shots{} = {}\n",
      ratio, details["inner_dt"].get<double>(), ratio * opt.nt, passes,
      format_count(report.work.points));
  fmt::print(
      "Repetitions: {} after {} warm-up: median {:.5f} s, min {:.5f} s, max {:.5f} s; "
      "{:.3f} GPts/s (median)\n",
      result.stats.seconds.size(), result.stats.warmup, result.stats.median, result.stats.min,
      result.stats.max, report.rates.gpoints_per_s);
  const double stored = details["storage_bytes"].get<double>();
  if (opt.gradient && stored > 0) {
    const auto interval = p["gradient_storage"]["sampling_interval"].get<long long>();
    fmt::print("Gradient storage: {} stored ({} of {} inner steps{})\n", format_bytes(stored),
               (ratio * opt.nt + interval - 1) / interval, ratio * opt.nt,
               p["gradient_storage"]["storage"] == "disk" ? ", on disk" : "");
  }
  if (report.verification) {
    const auto& scope = details["verification_scope"];
    const auto shots = scope["shots"].get<long long>();
    const auto samples = scope["samples"].get<long long>();
    const double tol = scope["tolerance_rel_l2"].get<double>();
    std::string also;
    if (!opt.gradient) {
      const auto state = problem->tolerance(opt.born ? "scattered_wavefield" : "wavefield");
      also = fmt::format(", final {}wavefield {:.0e}", opt.born ? "scattered " : "", state.rel_l2);
    } else if (scope.contains("tolerance_rel_l2_stored") &&
               scope["tolerance_rel_l2_stored"].get<double>() != tol) {
      also = fmt::format(", {} from compressed storage {:.0e}",
                         opt.born ? "image" : "velocity gradient",
                         scope["tolerance_rel_l2_stored"].get<double>());
    }
    fmt::print(
        "Verification against the reference on shot{} 0{}, samples 0-{} ({} inner steps): "
        "{} (tolerance rel L2 {:.0e}{})\n",
        shots == 1 ? "" : "s", shots == 1 ? "" : fmt::format("-{}", shots - 1), samples - 1,
        scope["inner_steps"].get<long long>(), report.passed() ? "PASS" : "FAIL", tol, also);
    for (const auto& c : report.checks) fmt::print("  {}: {}\n", c.output, c.summary());
  }
  return finish_case_run(result, opt.json_path, threads);
}

}  // namespace

Command add_scalar_command(CLI::App& root) {
  auto opt = std::make_shared<ScalarCliOptions>();
  CLI::App* sub = root.add_subcommand(
      "scalar",
      "Run scalar wave propagation (Deepwave's scalar) on a synthetic layered model: time it, "
      "optionally verify it against the reference backend, report GPts/s and roofline fraction");
  sub->add_option("--ndim", opt->ndim, "Dimensions of the model: 1, 2 or 3")
      ->type_name("D")
      ->capture_default_str();
  sub->add_option("--shape", opt->shape,
                  "Cells per dimension, depth first (default 251 500 in 2-D, 100^3 in 3-D)")
      ->type_name("N...")
      ->expected(1, 3);
  sub->add_option("--spacing", opt->spacing, "Grid spacing in metres")
      ->type_name("DX")
      ->capture_default_str();
  sub->add_option("--dt", opt->dt, "Time step of the sources and receivers in seconds")
      ->type_name("DT")
      ->capture_default_str();
  sub->add_option("--nt", opt->nt, "Time samples")->type_name("NT")->capture_default_str();
  sub->add_option("--shots", opt->shots, "Shots (one source each, spread along the surface)")
      ->type_name("S")
      ->capture_default_str();
  sub->add_option("--receivers", opt->receivers, "Receivers per shot, along the surface")
      ->type_name("R")
      ->capture_default_str();
  sub->add_option("--accuracy", opt->accuracy, "Spatial order of the stencils: 2, 4, 6 or 8")
      ->type_name("A")
      ->capture_default_str();
  sub->add_option("--pml-width", opt->pml_width, "PML width in cells on every side")
      ->type_name("W")
      ->capture_default_str();
  sub->add_option("--freq", opt->freq, "Peak frequency of the Ricker source and PML frequency (Hz)")
      ->type_name("HZ")
      ->capture_default_str();
  sub->add_option("--source-depth", opt->source_depth, "Depth of the sources in cells")
      ->type_name("Z")
      ->capture_default_str();
  sub->add_option("--dtype", opt->dtype, "float32 or float64")
      ->type_name("DTYPE")
      ->capture_default_str();
  sub->add_option("--device", opt->device, "auto, reference, cpu, cuda or cuda:N")
      ->type_name("DEVICE")
      ->capture_default_str();
  sub->add_option("--threads", opt->threads, "OpenMP threads of the cpu backend; 0: all")
      ->type_name("N");
  sub->add_option("--reps", opt->reps, "Timed repetitions (after one warm-up)")
      ->type_name("R")
      ->capture_default_str();
  sub->add_flag("--gradient", opt->gradient,
                "Forward + adjoint: the gradient of 0.5 ||receivers||^2 with respect to the "
                "velocity and the source amplitudes");
  sub->add_flag("--born", opt->born,
                "Born modelling (Deepwave's scalar_born): the scattered data of the velocity "
                "perturbation box (--scatter) and the background data, at the receivers; with "
                "--gradient, the migration image (scalar_born_gradient) and the source gradient");
  opt->storage.add_to(sub);
  CLI::Option* scatter = sub->add_option("--scatter", opt->scatter,
                                         "With --born: the velocity perturbation in the box, m/s")
                             ->type_name("DV")
                             ->capture_default_str();
  sub->add_flag("--verify", opt->verify,
                "Rerun a window (--verify-nt samples of --verify-shots shots) on the device and "
                "on the reference backend and compare (rel L2 1e-5 float32, 1e-12 float64; "
                "--born 1e-4, 1e-11; the velocity gradient or image with "
                "--storage-compression in float32: 1e-2)");
  sub->add_flag("--autotune", opt->autotune,
                "cpu: choose the forward's steps per sweep and its tiles (3-D) or rows per block "
                "(2-D) by timing candidates on a few steps of this problem (once; cached per "
                "machine, shape, accuracy, dtype and threads)");
  sub->add_option("--verify-nt", opt->verify_nt, "Samples of the verification window")
      ->type_name("NT")
      ->capture_default_str();
  sub->add_option("--verify-shots", opt->verify_shots, "Shots of the verification window")
      ->type_name("S")
      ->capture_default_str();
  sub->add_option("--json", opt->json_path,
                  "Write the report, bench statistics and environment to FILE")
      ->type_name("FILE")
      ->check(output_file());
  sub->footer(
      "The model: velocity increasing with depth (dimension 0) in 5 layers from 1500 to 4000 m/s; "
      "shot s has a 25 Hz Ricker source at depth 2 cells, spread along the last dimension; the "
      "receivers lie at depth 1 cell, spread along the last dimension (in 3-D on the middle "
      "line). A dt above the CFL limit is resampled (step ratio). Points = cells of the model and "
      "the PML x inner steps x shots (x 2 with --gradient: forward and adjoint).\n"
      "--gradient stores 2 v dt^2 L u of the forward pass for the adjoint. By default once per "
      "sample of --dt, every step_ratio inner steps, as Deepwave does (the line \"Gradient "
      "sampling\" says which interval ran): the default 251 x 500, 10 shots, nt 500 run (step "
      "ratio 8) stores about 3 GiB in float32. --gradient-sampling 1 stores every inner step: "
      "the exact gradient of the discrete forward, 8 times that. --verify compares against the "
      "reference run with the same storage options.\n"
      "--born: the scatter is --scatter m/s (default 100) in a box centred in the model, "
      "cells [n/2 - n/20, n/2 + max(n/20, 1)) along each dimension of n cells (in the middle "
      "layer for the default 5 layers); the scattered field (the derivative of the wavefield in "
      "that direction) and the background field are both recorded at the receivers, and "
      "--verify compares both data and the final scattered wavefield. --born --gradient: the "
      "gradient of 0.5 ||Born data||^2 + 0.5 ||background data||^2 with respect to the scatter "
      "(the migration image) and the source amplitudes; points x 3.\n"
      "The library's cases scalar, scalar_gradient, scalar_born and scalar_born_gradient "
      "(`sciproxy run CASE --set name=value` takes the same settings).");
  return {sub, [opt, scatter] {
            if (scatter->count() > 0 && !opt->born)
              throw UsageError("--scatter: only used with --born (Born modelling)");
            return with_option_names(scalar_option_names(),
                                     [&] { return run_scalar_command(*opt); });
          }};
}

}  // namespace sciproxy::app
