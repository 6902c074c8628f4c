// The diffusion family's case for the harness (core/harness.hpp): ICON's horizontal diffusion
// on a generated global grid RnBk with sciproxy's computed inputs (computed_inputs), as a model
// calls it: the granule is initialised once per device, then every timed call is the next
// diffusion step of an evolving state. Verification resets the state and compares one step of
// each device with one step of the reference. Settings: grid ("R2B4"), levels (65), dtime
// (seconds; default 9 s per km of the grid's spacing, where the Smagorinsky branch is on),
// dtype, layout ("levels" or "entities": Fortran's), seed, fields ("global" or "local"). Under
// mpirun the granule runs on the ranks (distribute) and verifies on rank 0 against one
// process's reference. With fields=global every rank passes and receives the whole grid's
// fields; with fields=local, as ICON passes them, each rank its own entities and halos
// (DiffusionOptions::rank_local_fields), the owned entries gathered on rank 0 to verify.
#include "case.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/collective.hpp"
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
    s.check_known({"grid", "levels", "dtime", "dtype", "layout", "seed", "fields"});
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
    const std::string fields = s.get("fields", "global");
    require(fields == "global" || fields == "local", "fields",
            "global (the whole grid's fields on every rank) or local (each rank's own, as ICON "
            "passes them)",
            fields);
    local_fields_ = fields == "local";
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
    p.set("fields", local_fields_ ? "local" : "global");
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
    if (rank_local()) {
      // Each rank's own entries of the state, made once per device and after every reset (the
      // first call of a device, a warm-up one, pays for it).
      if (local_of_ != device.name()) {
        if (single_)
          localize(g, state32_, local32_);
        else
          localize(g, state64_, local64_);
        local_of_ = device.name();
      }
      if (single_)
        step(g, local32_, timers);
      else
        step(g, local64_, timers);
      return 0;
    }
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
    if (!rank_local()) return;
    // The owned entries of every rank into the whole grid's state on rank 0, which verifies.
    if (single_)
      gather_owned(granule_for(device), local32_, state32_);
    else
      gather_owned(granule_for(device), local64_, state64_);
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
      o.rank_local_fields = rank_local();
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

  bool rank_local() const { return local_fields_ && comm_.distributed(); }

  // Element (entity e, level k) of a field of n entities and nk levels in the case's layout.
  std::int64_t at(std::int64_t e, int k, std::int64_t n, int nk) const {
    return layout_ == FieldLayout::LevelsContiguous ? e * nk + k : k * n + e;
  }
  // Each field of `local` over this rank's entities (global_index order), from `whole`.
  template <class Real>
  void localize(const Diffusion& g, const State<Real>& whole, State<Real>& local) const {
    const auto cells = g.global_index(Dimension::Cell), edges = g.global_index(Dimension::Edge);
    const std::int64_t nc = inputs_.grid.num_cells, ne = inputs_.grid.num_edges;
    auto cut = [&](const std::vector<Real>& field, const std::vector<std::int32_t>& index,
                   std::int64_t n, int nk) {
      const auto m = static_cast<std::int64_t>(index.size());
      std::vector<Real> out(static_cast<std::size_t>(m * nk));
      for (std::int64_t e = 0; e < m; ++e)
        for (int k = 0; k < nk; ++k) out[at(e, k, m, nk)] = field[at(index[e], k, n, nk)];
      return out;
    };
    local.vn = cut(whole.vn, edges, ne, levels_);
    local.w = cut(whole.w, cells, nc, levels_ + 1);
    local.theta_v = cut(whole.theta_v, cells, nc, levels_);
    local.exner = cut(whole.exner, cells, nc, levels_);
    local.hdef_ic = cut(whole.hdef_ic, cells, nc, levels_ + 1);
    local.div_ic = cut(whole.div_ic, cells, nc, levels_ + 1);
    local.dwdx = cut(whole.dwdx, cells, nc, levels_ + 1);
    local.dwdy = cut(whole.dwdy, cells, nc, levels_ + 1);
  }
  // The owned entries of every rank's `local` into `whole` on rank 0 (collective).
  template <class Real>
  void gather_owned(const Diffusion& g, const State<Real>& local, State<Real>& whole) const {
    auto owned_of = [&](Dimension d) {
      auto index = g.global_index(d);
      const auto level = g.halo_level(d);
      index.resize(static_cast<std::size_t>(std::count(level.begin(), level.end(), 0)));
      return index;  // owned first
    };
    const auto cells = owned_of(Dimension::Cell), edges = owned_of(Dimension::Edge);
    const auto all_cells = g.global_index(Dimension::Cell).size();
    const auto all_edges = g.global_index(Dimension::Edge).size();
    const std::int64_t nc = inputs_.grid.num_cells, ne = inputs_.grid.num_edges;
    auto gather = [&](const std::vector<Real>& field, std::vector<Real>& out,
                      const std::vector<std::int32_t>& owned, std::size_t local_count,
                      std::int64_t n, int nk) {
      const std::int64_t mine = static_cast<std::int64_t>(owned.size());
      const auto counts = collective::allgather(comm_, std::span<const std::int64_t>(&mine, 1));
      std::int64_t total = 0;
      for (auto c : counts) total += c;
      const bool root = comm_.rank() == 0;
      std::vector<Real> rows(static_cast<std::size_t>(mine * nk));
      const auto m = static_cast<std::int64_t>(local_count);
      for (std::int64_t e = 0; e < mine; ++e)
        for (int k = 0; k < nk; ++k) rows[e * nk + k] = field[at(e, k, m, nk)];
      std::vector<Real> all_rows(static_cast<std::size_t>(root ? total * nk : 0));
      std::vector<std::int32_t> all_index(static_cast<std::size_t>(root ? total : 0));
      collective::gather_rows<Real>(comm_, rows, all_rows, counts, nk, 0);
      collective::gather_rows<std::int32_t>(comm_, owned, all_index, counts, 1, 0);
      if (!root) return;
      for (std::int64_t e = 0; e < total; ++e)
        for (int k = 0; k < nk; ++k) out[at(all_index[e], k, n, nk)] = all_rows[e * nk + k];
    };
    gather(local.vn, whole.vn, edges, all_edges, ne, levels_);
    for (auto [from, to, nk] : {std::tuple{&local.w, &whole.w, levels_ + 1},
                                std::tuple{&local.theta_v, &whole.theta_v, levels_},
                                std::tuple{&local.exner, &whole.exner, levels_},
                                std::tuple{&local.hdef_ic, &whole.hdef_ic, levels_ + 1},
                                std::tuple{&local.div_ic, &whole.div_ic, levels_ + 1},
                                std::tuple{&local.dwdx, &whole.dwdx, levels_ + 1},
                                std::tuple{&local.dwdy, &whole.dwdy, levels_ + 1}})
      gather(*from, *to, cells, all_cells, nc, nk);
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
    local_of_.clear();  // the rank-local state is made again from this one
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
  bool local_fields_ = false;
  State<double> state64_;  // the whole grid's
  State<float> state32_;
  State<double> local64_;  // rank_local(): this rank's entities, of the device local_of_
  State<float> local32_;
  std::string local_of_;
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
