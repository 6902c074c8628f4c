// `sciproxy diffusion`: ICON's horizontal diffusion granule as the model calls it: build or read
// a grid, init once, run N steps (the first with linit), and print ICON's timer
// table, the time per call, the init time, the bytes a run moves and the fraction of the
// bandwidth roofline. --verify runs the same steps on the reference backend and compares every
// field; --json writes the figures.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "core/json.hpp"
#include "diffusion/case.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/core/verify.hpp"
#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion {
std::pair<int, int> parse_grid_name(const std::string& name, const std::string& argument);
}

namespace sciproxy::app {

namespace {

namespace dif = sciproxy::diffusion;

struct DiffusionCliOptions {
  std::string grid = "R2B4";
  std::string grid_file;      // an ICON grid file instead of a generated grid
  std::string savepoint_dir;  // write call-diffusion-init/-exit savepoints here
  int levels = 65;
  int steps = 6;
  double dtime = 0;  // 0: 9 s per km of grid spacing
  std::string device = "auto";
  std::string dtype = "float64";
  std::string layout = "levels";
  int threads = 0;
  bool verify = false;
  std::uint64_t seed = 1;
  std::string json_path;
};

template <class Real>
struct Fields {
  std::vector<Real> vn, w, theta_v, exner, hdef_ic, div_ic, dwdx, dwdy;
  dif::DiffusionPrognosticFields<Real> prognostic() {
    return {vn.data(), w.data(), theta_v.data(), exner.data()};
  }
  dif::DiffusionDiagnosticFields<Real> diagnostic() {
    return {hdef_ic.data(), div_ic.data(), dwdx.data(), dwdy.data()};
  }
  std::vector<std::pair<std::string, const std::vector<Real>*>> named() const {
    return {{"vn", &vn},           {"w", &w},           {"theta_v", &theta_v}, {"exner", &exner},
            {"hdef_ic", &hdef_ic}, {"div_ic", &div_ic}, {"dwdx", &dwdx},       {"dwdy", &dwdy}};
  }
};

template <class Real>
Fields<Real> fields_of(const dif::DiffusionState& s, const dif::Grid& g, int nlev,
                       dif::FieldLayout layout) {
  auto convert = [&](const std::vector<double>& x, std::int64_t n, int nk) {
    return dif::to_layout<Real>(x, n, nk, layout);
  };
  Fields<Real> f;
  f.vn = convert(s.vn, g.num_edges, nlev);
  f.w = convert(s.w, g.num_cells, nlev + 1);
  f.theta_v = convert(s.theta_v, g.num_cells, nlev);
  f.exner = convert(s.exner, g.num_cells, nlev);
  f.hdef_ic = convert(s.hdef_ic, g.num_cells, nlev + 1);
  f.div_ic = f.dwdx = f.dwdy = f.hdef_ic;
  return f;
}

// Runs `steps` calls (the first with linit) and returns the seconds of each.
template <class Real>
std::vector<double> run_steps(dif::Diffusion& g, Fields<Real>& f, int steps, double dtime) {
  std::vector<double> seconds;
  for (int i = 0; i < steps; ++i) {
    auto p = f.prognostic();
    auto d = f.diagnostic();
    const auto start = std::chrono::steady_clock::now();
    g.run(d, p, dtime, i == 0);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return seconds;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

template <class Real>
int run_with(const DiffusionCliOptions& opt, const dif::DiffusionInputs& in, const Device& device) {
  const int nlev = opt.levels;
  const dif::FieldLayout layout = opt.layout == "levels" ? dif::FieldLayout::LevelsContiguous
                                                         : dif::FieldLayout::EntitiesContiguous;
  const double dtime = opt.dtime > 0 ? opt.dtime : dif::smagorinsky_dtime(in);
  dif::DiffusionOptions o;
  o.device = device.name();
  o.nparallel = opt.threads;
  o.layout = layout;
  o.single_precision = sizeof(Real) == 4;
  o.check_finite = false;  // a driver's fields come from the granule itself
  o.savepoint_dir = opt.savepoint_dir;
  // Under mpirun the granule runs on the ranks (METIS's partition, or latitude bands without
  // it), the fields whole on every rank; rank 0 prints.
  o.comm = ranks();
  if (o.comm.distributed() && !dif::metis_compiled())
    o.cell_owner = dif::latitude_bands(in.grid, o.comm.size());
  dif::Diffusion granule(in.grid, in.config, in.vertical, in.metrics, in.interpolation, in.edges,
                         in.cells, o);
  const dif::DiffusionState state = dif::synthetic_state(in, opt.seed);
  Fields<Real> f = fields_of<Real>(state, in.grid, nlev, layout);
  const std::vector<double> seconds = run_steps(granule, f, opt.steps, dtime);
  // The first call (linit) pays for first touches; the later calls are what a model sees.
  const std::vector<double> later(seconds.begin() + (seconds.size() > 1 ? 1 : 0), seconds.end());
  const double per_call = median(later);
  const double bytes = granule.bytes_per_run();
  const int threads = device.backend == Backend::reference ? 1 : effective_threads(opt.threads);
  const std::optional<Roofline> roof =
      roofline_for(device, threads, RooflinePolicy::cached_only, std::cout);

  fmt::print("\n");
  std::cout << granule.timers().table();
  fmt::print(
      "\nInit: {:.4f} s (ICON4Py's granule: minutes of compilation; ICON's Fortran: 2 ms on a "
      "GPU)\n",
      granule.init_seconds());
  fmt::print("Run: {} calls, median of the {} after the first {:.4f} s per call (first {:.4f} s)\n",
             seconds.size(), later.size(), per_call, seconds.front());
  const double gbs = per_call > 0 ? bytes / per_call * 1e-9 : 0.0;
  fmt::print("Bytes per run (compulsory: each field and coefficient once): {}; {:.2f} GB/s",
             format_bytes(bytes), gbs);
  if (roof && roof->bandwidth_gbs > 0)
    fmt::print(", {:.0f}% of the {:.1f} GB/s bandwidth roofline ({})\n",
               100.0 * gbs / roof->bandwidth_gbs, roof->bandwidth_gbs, roof->machine);
  else
    fmt::print(" (no roofline cached: run `sciproxy roofline`)\n");

  bool passed = true;
  nlohmann::json checks = nlohmann::json::array();
  if (opt.verify && device.backend != Backend::reference) {
    dif::DiffusionOptions ro = o;
    ro.device = "reference";
    ro.comm = Communicator();  // one process: the ranks' result against the single-rank run
    ro.cell_owner.clear();
    dif::Diffusion reference(in.grid, in.config, in.vertical, in.metrics, in.interpolation,
                             in.edges, in.cells, ro);
    Fields<Real> r = fields_of<Real>(state, in.grid, nlev, layout);
    run_steps(reference, r, opt.steps, dtime);
    const Tolerance tol =
        dif::diffusion_tolerance(sizeof(Real) == 4 ? Precision::fp32 : Precision::fp64);
    fmt::print("Verification against the reference ({} steps, tolerance rel L2 {:.0e}):\n",
               opt.steps, tol.rel_l2);
    const auto got = f.named(), want = r.named();
    for (std::size_t i = 0; i < got.size(); ++i) {
      const Comparison c = compare(std::span<const Real>(*got[i].second),
                                   std::span<const Real>(*want[i].second), tol);
      passed = passed && c.pass;
      fmt::print("  {}: {}\n", got[i].first, c.summary());
      checks.push_back({{"field", got[i].first},
                        {"pass", c.pass},
                        {"rel_l2", c.rel_l2},
                        {"max_abs", c.max_abs}});
    }
  }
  if (!opt.json_path.empty()) {
    nlohmann::json j = {
        {"kernel", "diffusion"},
        {"grid", opt.grid_file.empty() ? opt.grid : opt.grid_file},
        {"cells", in.grid.num_cells},
        {"edges", in.grid.num_edges},
        {"vertices", in.grid.num_vertices},
        {"levels", nlev},
        {"steps", opt.steps},
        {"dtime", dtime},
        {"dtype", sizeof(Real) == 4 ? "float32" : "float64"},
        {"layout", opt.layout},
        {"device", device.name()},
        {"threads", threads},
        {"init_seconds", granule.init_seconds()},
        {"seconds_per_call", seconds},
        {"median_seconds_per_call", per_call},
        {"bytes_per_run", bytes},
        {"gbytes_per_s", gbs},
        {"roofline_fraction", roof && roof->bandwidth_gbs > 0 ? gbs / roof->bandwidth_gbs : 0.0},
        {"timers", nlohmann::json::parse(granule.timers().json())},
        {"verification", checks}};
    write_file_atomically(opt.json_path, j.dump(2) + "\n");
    fmt::print("Wrote {}\n", opt.json_path);
  }
  return passed ? 0 : 1;
}

int run_diffusion_command(const DiffusionCliOptions& opt) {
  if (opt.levels < 2)
    throw UsageError(fmt::format("--levels: expected at least 2, got {}", opt.levels));
  if (opt.steps < 1)
    throw UsageError(fmt::format("--steps: expected at least 1, got {}", opt.steps));
  if (!(opt.dtime >= 0) || !std::isfinite(opt.dtime))
    throw UsageError(
        fmt::format("--dtime: expected a positive time step in seconds, got {}", opt.dtime));
  if (opt.layout != "levels" && opt.layout != "entities")
    throw UsageError(fmt::format("--layout: expected levels or entities, got \"{}\"", opt.layout));
  check_threads(opt.threads);
  const std::string dtype = parse_dtype(opt.dtype);
  if (!opt.json_path.empty()) check_output_path(opt.json_path, "--json");
  std::pair<int, int> nk;
  if (opt.grid_file.empty()) {
    try {
      nk = dif::parse_grid_name(opt.grid, "--grid");
    } catch (const InvalidArgument& e) {
      throw UsageError(e.what());
    }
  }
  if (!opt.savepoint_dir.empty() && ranks().distributed())
    throw UsageError("--savepoints: one process only (not under mpirun)");
  if (!opt.savepoint_dir.empty() && !std::filesystem::is_directory(opt.savepoint_dir))
    throw UsageError(
        fmt::format("--savepoints: expected an existing directory, got \"{}\"", opt.savepoint_dir));
  const Device device = select_device_option(opt.device);
  const auto start = std::chrono::steady_clock::now();
  dif::Grid grid;
  try {
    grid = opt.grid_file.empty() ? dif::icosahedral_grid(nk.first, nk.second)
                                 : dif::read_grid_file(opt.grid_file);
  } catch (const InvalidArgument& e) {
    throw UsageError(std::string(opt.grid_file.empty() ? "--grid: " : "--grid-file: ") + e.what());
  }
  const dif::DiffusionInputs in = dif::computed_inputs(std::move(grid), opt.levels);
  const double setup =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string grid_name = opt.grid_file.empty() ? opt.grid : opt.grid_file;
  fmt::print(
      "sciproxy diffusion: ICON's horizontal diffusion (hdiff_order 5, shear type {}), grid {} ({} "
      "cells, {} "
      "edges, {} vertices), {} levels, {} steps, {}, {} layout, device {}{}\n",
      in.config.shear_type, grid_name, in.grid.num_cells, in.grid.num_edges, in.grid.num_vertices,
      opt.levels, opt.steps, dtype, opt.layout, device.name(),
      device.automatic ? " (chosen by auto)" : "");
  fmt::print("Grid and coefficients computed by sciproxy in {:.3f} s\n", setup);
  if (ranks().distributed())
    fmt::print(
        "On {} MPI ranks, the grid partitioned by {}, halos exchanged as ICON4Py's granule\n",
        ranks().size(), dif::metis_compiled() ? "METIS" : "latitude bands");
  std::fflush(stdout);
  return dtype == "float32" ? run_with<float>(opt, in, device) : run_with<double>(opt, in, device);
}

}  // namespace

Command add_diffusion_command(CLI::App& root) {
  auto opt = std::make_shared<DiffusionCliOptions>();
  CLI::App* app = root.add_subcommand("diffusion",
                                      "ICON's horizontal diffusion granule (ICON4Py's): init once, "
                                      "run N steps, ICON's timer table");
  app->add_option("--grid", opt->grid, "Icosahedral grid RnBk, generated")->capture_default_str();
  app->add_option("--grid-file", opt->grid_file, "An ICON grid file (NetCDF) instead of --grid")
      ->check(CLI::ExistingFile);
  app->add_option("--savepoints", opt->savepoint_dir,
                  "Write call-diffusion-init/-exit savepoints of every call into DIR (sciproxy "
                  "verify compares them)");
  app->add_option("--levels", opt->levels, "Vertical levels")->capture_default_str();
  app->add_option("--steps", opt->steps, "Calls of run (the first with linit)")
      ->capture_default_str();
  app->add_option("--dtime", opt->dtime, "Time step in seconds (0: 9 s per km of grid spacing)");
  app->add_option("--device", opt->device, "reference, cpu, cuda, cuda:N or auto")
      ->capture_default_str();
  app->add_option("--dtype", opt->dtype, "float64 or float32")->capture_default_str();
  app->add_option("--layout", opt->layout,
                  "levels (ICON4Py's (entity, level)) or entities (Fortran's)")
      ->capture_default_str();
  app->add_option("--threads", opt->threads, "OpenMP threads of the cpu backend; 0: all");
  app->add_option("--seed", opt->seed, "Seed of the synthetic state")->capture_default_str();
  app->add_flag("--verify", opt->verify, "Run the same steps on the reference backend and compare");
  app->add_option("--json", opt->json_path, "Write the figures to FILE")->check(output_file());
  return {app, [opt] { return run_diffusion_command(*opt); }};
}

}  // namespace sciproxy::app
