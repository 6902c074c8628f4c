// `sciproxy scalar`: scalar wave propagation (Deepwave's scalar) on a synthetic layered model,
// timed, optionally verified against the reference backend, and reported; with --born, Born
// modelling (Deepwave's scalar_born) of a velocity perturbation box in that model.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <memory>

#include "cli_common.hpp"
#include "scalar_runner.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/error.hpp"

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
  std::int64_t verify_nt = 100;
  std::int64_t verify_shots = 2;
  std::string json_path;
  GradientStorageCli storage;  // --gradient-sampling, --storage, --storage-compression, --storage-dir
};

int run_scalar_command(const ScalarCliOptions& opt) {
  ScalarSpec spec;
  spec.ndim = opt.ndim;
  spec.shape = opt.shape;
  if (spec.shape.empty()) {  // default: the SEAM-like size, or a cube in 1-D / 3-D
    if (opt.ndim == 2) spec.shape = {251, 500};
    else if (opt.ndim == 1) spec.shape = {500};
    else spec.shape = {100, 100, 100};
  }
  spec.spacing = opt.spacing;
  spec.dt = opt.dt;
  spec.nt = opt.nt;
  spec.nshots = opt.shots;
  spec.nreceivers = opt.receivers;
  spec.accuracy = opt.accuracy;
  spec.pml_width = opt.pml_width;
  spec.freq = opt.freq;
  spec.source_depth = opt.source_depth;
  spec.dtype = parse_dtype(opt.dtype);
  spec.gradient = opt.gradient;
  spec.born = opt.born;
  spec.scatter = opt.scatter;
  opt.storage.apply(spec, opt.gradient);
  check_threads(opt.threads);
  check_repetitions(opt.reps);
  if (opt.verify_nt < 1)
    throw UsageError(fmt::format("--verify-nt: expected at least 1, got {}", opt.verify_nt));
  if (opt.verify_shots < 1)
    throw UsageError(fmt::format("--verify-shots: expected at least 1, got {}", opt.verify_shots));
  if (!opt.json_path.empty()) check_output_path(opt.json_path, "--json");
  check_scalar_spec(spec, {});
  const Device device = select_device_option(opt.device);
  check_scalar_spec(spec, {device});

  ScalarRunOptions run;
  run.threads = opt.threads;
  run.reps = opt.reps;
  run.verify = opt.verify;
  run.verify_nt = opt.verify_nt;
  run.verify_shots = opt.verify_shots;

  const int threads = device.backend == Backend::reference ? 1 : effective_threads(opt.threads);
  const char* mode = spec.born ? (spec.gradient ? " --born (Born forward + adjoint: migration image "
                                                 "and source gradient)"
                                               : " --born (Born modelling)")
                               : (spec.gradient ? " (forward + gradient)" : "");
  fmt::print("sciproxy scalar{}: {}, {}, layered model {}..{} m/s, {} Hz Ricker, PML {} cells, "
             "device {}{}{}\n",
             mode, spec.label(), dtype_name(spec.dtype),
             spec.vmin, spec.vmax, spec.freq, spec.pml_width, device.name(),
             device.automatic ? " (chosen by auto)" : "",
             device.backend == Backend::cuda
                 ? ""
                 : fmt::format(", {} thread{}", threads, threads == 1 ? "" : "s"));
  if (spec.born)
    fmt::print("Scatter (velocity perturbation): {}; scattered and background data recorded at "
               "the receivers\n",
               spec.scatter_label());
  if (spec.gradient)
    fmt::print("Gradient sampling: {}\n", gradient_storage_label(spec));
  if (device.automatic && device.backend != Backend::cuda)
    fmt::print("auto: running on cpu; no CUDA device: {}\n", cuda_unavailable_reason());
  if (opt.verify && device.backend == Backend::reference)
    fmt::print("Verification: skipped, the reference backend is the definition of correct\n");
  std::fflush(stdout);

  const auto outcomes = run_scalar(spec, {device}, run, std::cout);
  const ScalarOutcome& out = outcomes.back();
  std::cout << "\n";
  out.report.print(std::cout);
  const char* passes =
      spec.born ? (spec.gradient ? " x 3 (image: background forward and adjoint; source gradient: "
                                   "adjoint of the coupled background and scattered fields)"
                                 : " (per step both fields are updated: flops and bytes count "
                                   "both)")
                : (spec.gradient ? " x 2 (forward and adjoint)" : "");
  fmt::print("Time stepping: step ratio {} (inner dt {:.3e} s), {} inner steps; points = "
             "cells of model + PML x inner steps x shots{} = {}\n",
             out.step_ratio, out.inner_dt, out.step_ratio * spec.nt, passes,
             format_count(out.points()));
  fmt::print("Repetitions: {} after {} warm-up: median {:.5f} s, min {:.5f} s, max {:.5f} s; "
             "{:.3f} GPts/s (median)\n",
             out.stats.seconds.size(), out.stats.warmup, out.stats.median, out.stats.min,
             out.stats.max, out.gpts(out.stats.median));
  if (spec.gradient && out.storage_bytes > 0)
    fmt::print("Gradient storage: {} stored ({} of {} inner steps{})\n",
               format_bytes(out.storage_bytes),
               (out.step_ratio * spec.nt + spec.store_interval() - 1) / spec.store_interval(),
               out.step_ratio * spec.nt,
               spec.storage == wave::StorageMode::disk ? ", on disk" : "");
  if (out.report.verification) {
    const bool compressed = spec.gradient && spec.storage_compression &&
                            spec.storage != wave::StorageMode::none &&
                            scalar_compressed_tolerance(spec.dtype, spec.born).rel_l2 !=
                                scalar_tolerance(spec.dtype, spec.born).rel_l2;
    fmt::print("Verification against the reference on {}: {} (tolerance rel L2 {:.0e}{})\n",
               out.verification_scope(), out.passed() ? "PASS" : "FAIL",
               scalar_tolerance(spec.dtype, spec.born).rel_l2,
               !spec.gradient
                   ? fmt::format(", final {}wavefield {:.0e}", spec.born ? "scattered " : "",
                                 scalar_state_tolerance(spec.dtype, spec.born).rel_l2)
               : compressed
                   ? fmt::format(", {} from compressed storage {:.0e}",
                                 spec.born ? "image" : "velocity gradient",
                                 scalar_compressed_tolerance(spec.dtype, spec.born).rel_l2)
                   : std::string());
    for (const auto& [name, c] : out.checks) fmt::print("  {}: {}\n", name, c.summary());
  }

  return finish_run(out, opt.json_path, threads);
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
  CLI::Option* scatter =
      sub->add_option("--scatter", opt->scatter,
                      "With --born: the velocity perturbation in the box, m/s")
          ->type_name("DV")
          ->capture_default_str();
  sub->add_flag("--verify", opt->verify,
                "Rerun a window (--verify-nt samples of --verify-shots shots) on the device and "
                "on the reference backend and compare (rel L2 1e-5 float32, 1e-12 float64; "
                "--born 1e-4, 1e-11; the velocity gradient or image with "
                "--storage-compression in float32: 1e-2)");
  sub->add_option("--verify-nt", opt->verify_nt, "Samples of the verification window")
      ->type_name("NT")
      ->capture_default_str();
  sub->add_option("--verify-shots", opt->verify_shots, "Shots of the verification window")
      ->type_name("S")
      ->capture_default_str();
  sub->add_option("--json", opt->json_path,
                  "Write the report, bench statistics and environment to FILE")
      ->type_name("FILE");
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
      "(the migration image) and the source amplitudes; points x 3.");
  return {sub, [opt, scatter] {
            if (scatter->count() > 0 && !opt->born)
              throw UsageError("--scatter: only used with --born (Born modelling)");
            return run_scalar_command(*opt);
          }};
}

}  // namespace sciproxy::app
