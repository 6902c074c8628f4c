// The diffusion family's case for the harness (core/harness.hpp): ICON's horizontal diffusion
// on a generated global grid RnBk with sciproxy's computed inputs (computed_inputs), as a model
// calls it: the granule is initialised once per device, then every timed call is the next
// diffusion step of an evolving state. Verification resets the state and compares one step of
// each device with one step of the reference. Settings: grid ("R2B4"), levels (65), dtime
// (seconds; default 9 s per km of the grid's spacing, where the Smagorinsky branch is on),
// dtype, layout ("levels" or "entities": Fortran's), seed. Under mpirun the granule runs on the
// ranks (distribute) and verifies on rank 0 against one process's reference.
#include "case.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion {

// "R2B4" -> (2, 4); InvalidArgument naming `argument` otherwise.
std::pair<int, int> parse_grid_name(const std::string& name, const std::string& argument) {
  int n = 0, k = 0;
  char tail = 0;
  if (std::sscanf(name.c_str(), "R%dB%d%c", &n, &k, &tail) != 2 || n < 1 || k < 0 || k > 12)
    throw_invalid_argument(argument, "an icosahedral grid RnBk, e.g. R2B4", name);
  return {n, k};
}

namespace {

template <class Real>
struct State {
  std::vector<Real> vn, w, theta_v, exner, hdef_ic, div_ic, dwdx, dwdy;
};

class DiffusionCase : public Case {
 public:
  explicit DiffusionCase(const CaseSettings& s) {
    s.check_known({"grid", "levels", "dtime", "dtype", "layout", "seed"});
    grid_name_ = s.get("grid", "R2B4");
    const auto [n, k] = parse_grid_name(grid_name_, "grid");
    levels_ = static_cast<int>(s.get_int("levels", 65));
    require(levels_ >= 2 && levels_ <= 1000, "levels", "2 to 1000 levels", std::to_string(levels_));
    const std::string dtype = s.get("dtype", "float64");
    require(dtype == "float64" || dtype == "float32", "dtype", "float64 or float32", dtype);
    single_ = dtype == "float32";
    const std::string layout = s.get("layout", "levels");
    require(layout == "levels" || layout == "entities", "layout",
            "levels (row-major (entity, level), ICON4Py's) or entities (Fortran's (nproma, nlev))",
            layout);
    layout_ = layout == "levels" ? FieldLayout::LevelsContiguous : FieldLayout::EntitiesContiguous;
    seed_ = s.get_int("seed", 1);
    const double cells = 20.0 * n * n * std::pow(4.0, k);
    require_case_memory(cells * levels_ * 8.0 * 40.0, "grid, levels",
                        fmt::format("{} x {} levels", grid_name_, levels_));
    inputs_ = computed_inputs(icosahedral_grid(n, k), levels_);
    dtime_ = s.get_real("dtime", smagorinsky_dtime(inputs_));
    require(std::isfinite(dtime_) && dtime_ > 0, "dtime", "a positive time step in seconds",
            fmt::format("{}", dtime_));
    initial_state();
  }

  std::string kernel() const override { return "diffusion"; }
  std::string label() const override {
    return fmt::format("{} x {} levels{}", grid_name_, levels_, single_ ? ", float32" : "");
  }
  Parameters parameters() const override {
    Parameters p;
    p.set("grid", grid_name_);
    p.set("cells", static_cast<long long>(inputs_.grid.num_cells));
    p.set("edges", static_cast<long long>(inputs_.grid.num_edges));
    p.set("vertices", static_cast<long long>(inputs_.grid.num_vertices));
    p.set("levels", levels_);
    p.set("dtime", dtime_);
    p.set("dtype", single_ ? "float32" : "float64");
    p.set("layout", layout_ == FieldLayout::LevelsContiguous ? "levels" : "entities");
    return p;
  }
  WorkModel work() const override {
    WorkModel w;
    const double nc = inputs_.grid.num_cells, ne = inputs_.grid.num_edges;
    w.points = (nc + ne) * levels_;
    // The granule that ran (under MPI, making another would be a collective call of its own);
    // its numbers are the whole grid's on every rank.
    const Diffusion& g = granules_.empty() ? granule_for(Device{Backend::reference, 0, false})
                                           : *granules_.begin()->second;
    w.bytes = g.bytes_per_run();
    w.working_set_bytes = g.working_set_bytes();
    w.flops = g.flops_per_run();
    w.precision = single_ ? Precision::fp32 : Precision::fp64;
    return w;
  }

  double run(const Device& device, Timers* timers) override {
    Diffusion& g = granule_for(device);
    if (single_)
      step(g, state32_, timers);
    else
      step(g, state64_, timers);
    return 0;
  }
  void run_reference_window() override {
    initial_state();
    run(Device{Backend::reference, 0, false}, nullptr);
  }
  void run_device_window(const Device& device) override {
    initial_state();
    run(device, nullptr);
  }

  // Every rank runs the granule on its part of the grid (METIS where built, else latitude
  // bands); run() returns the whole grid's fields on every rank, so outputs() on rank 0 verify
  // against the reference of one process.
  void distribute(const Communicator& comm) override {
    comm_ = comm;
    if (!metis_compiled()) cell_owner_ = latitude_bands(inputs_.grid, comm.size());
  }

  std::vector<CaseOutput> outputs() const override {
    if (single_) return outputs_of(state32_);
    return outputs_of(state64_);
  }
  Tolerance tolerance(const std::string&) const override {
    return diffusion_tolerance(single_ ? Precision::fp32 : Precision::fp64);
  }

  Parameters details(const KernelReport&) const override {
    Parameters d;
    double init = 0;
    for (const auto& [name, g] : granules_) init = std::max(init, g->init_seconds());
    d.set("init_seconds", init);
    return d;
  }

 private:
  Diffusion& granule_for(const Device& device) const {
    const std::string key = device.name();
    auto it = granules_.find(key);
    if (it == granules_.end()) {
      DiffusionOptions o;
      o.device = key;
      o.layout = layout_;
      o.single_precision = single_;
      o.check_finite = false;  // the harness times the kernel, not the input checks
      o.comm = comm_;
      o.cell_owner = cell_owner_;
      it = granules_
               .emplace(key, std::make_unique<Diffusion>(
                                 inputs_.grid, inputs_.config, inputs_.vertical, inputs_.metrics,
                                 inputs_.interpolation, inputs_.edges, inputs_.cells, o))
               .first;
    }
    return *it->second;
  }

  template <class Real>
  void step(Diffusion& g, State<Real>& s, Timers* timers) {
    DiffusionPrognosticFields<Real> p{s.vn.data(), s.w.data(), s.theta_v.data(), s.exner.data()};
    DiffusionDiagnosticFields<Real> d{s.hdef_ic.data(), s.div_ic.data(), s.dwdx.data(),
                                      s.dwdy.data()};
    const auto start = std::chrono::steady_clock::now();
    g.run(d, p, dtime_, false);
    if (timers)
      timers->record(
          "diffusion",
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }

  template <class Real>
  static std::vector<CaseOutput> outputs_of(const State<Real>& s) {
    return {{"vn", std::span<const Real>(s.vn)},
            {"w", std::span<const Real>(s.w)},
            {"theta_v", std::span<const Real>(s.theta_v)},
            {"exner", std::span<const Real>(s.exner)},
            {"div_ic", std::span<const Real>(s.div_ic)},
            {"hdef_ic", std::span<const Real>(s.hdef_ic)},
            {"dwdx", std::span<const Real>(s.dwdx)},
            {"dwdy", std::span<const Real>(s.dwdy)}};
  }

  // sciproxy's synthetic state (synthetic_state) in the case's layout and precision.
  void initial_state() {
    const DiffusionState s = synthetic_state(inputs_, static_cast<std::uint64_t>(seed_));
    const std::int64_t nc = inputs_.grid.num_cells, ne = inputs_.grid.num_edges;
    const int nlev = levels_;
    if (single_)
      fill(state32_, s, nc, ne, nlev);
    else
      fill(state64_, s, nc, ne, nlev);
  }
  template <class Real>
  void fill(State<Real>& out, const DiffusionState& s, std::int64_t nc, std::int64_t ne,
            int nlev) const {
    auto convert = [&](const std::vector<double>& x, std::int64_t n, int nk) {
      return to_layout<Real>(x, n, nk, layout_);
    };
    out.vn = convert(s.vn, ne, nlev);
    out.w = convert(s.w, nc, nlev + 1);
    out.theta_v = convert(s.theta_v, nc, nlev);
    out.exner = convert(s.exner, nc, nlev);
    out.hdef_ic = convert(s.hdef_ic, nc, nlev + 1);
    out.div_ic = out.dwdx = out.dwdy = out.hdef_ic;
  }

  std::string grid_name_;
  int levels_ = 65;
  bool single_ = false;
  FieldLayout layout_ = FieldLayout::LevelsContiguous;
  long long seed_ = 1;
  double dtime_ = 0;
  DiffusionInputs inputs_;
  mutable std::map<std::string, std::unique_ptr<Diffusion>> granules_;
  Communicator comm_;
  std::vector<std::int32_t> cell_owner_;
  State<double> state64_;
  State<float> state32_;
};

std::unique_ptr<Case> make_diffusion(const CaseSettings& s) {
  return std::make_unique<DiffusionCase>(s);
}

// The sizes ICON runs: R2B4 (about 160 km) to R2B5, 65 levels (NWP) and 90 (climate), both
// layouts (ICON4Py's and Fortran's), both precisions.
std::vector<CaseSettings> diffusion_sweep() {
  std::vector<CaseSettings> sweep;
  for (const char* grid : {"R2B4", "R2B5"})
    for (const char* levels : {"65", "90"})
      sweep.push_back(CaseSettings{{{"grid", grid}, {"levels", levels}}});
  sweep.push_back(CaseSettings{{{"layout", "entities"}}});
  sweep.push_back(CaseSettings{{{"dtype", "float32"}}});
  return sweep;
}

}  // namespace

void register_cases(std::vector<CaseEntry>& registry) {
  registry.push_back(
      {"diffusion",
       "diffusion",
       "ICON's horizontal diffusion granule on an icosahedral grid (ICON4Py's Diffusion.run)",
       make_diffusion,
       {CaseSettings{{{"grid", "R2B4"}, {"levels", "65"}}}},
       diffusion_sweep()});
  registry.back().tolerance = [](const CaseSettings& s, const std::string&) {
    return diffusion_tolerance(s.get("dtype", "float64") == "float32" ? Precision::fp32
                                                                      : Precision::fp64);
  };
}

}  // namespace sciproxy::diffusion
