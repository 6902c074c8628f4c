// The tti family's cases for the harness (core/harness.hpp).
//
//   tti_demo     Devito's 2022 workshop operator (TTISelfAdjointForward, sciproxy/tti_demo.hpp)
//                on an nx x ny x nz grid of 10 m with Devito's constant dummy materials (vp 1500,
//                b 1, epsilon 0.2, eta 0.4, f 0.85, theta 0.5, phi 0.3, damping 0.001), a
//                Ricker source of 15 Hz near the centre, off the grid points so that all 8
//                trilinear weights differ, dt 0.9 of the stability limit. Outputs u and u_prev
//                after nt steps. Settings: nx, ny, nz (48 each), nt (20), space_order (8), form
//                (fused or two_pass), dtype (float32), spacing (10 m), dt (0: 0.9 of the limit),
//                freq (15 Hz), verify_nt (nt: the reference runs the first verify_nt steps, and
//                so does a device after its timed calls when they are fewer). The demo runs both
//                forms. Its report is Devito's operator's, TTISelfAdjointForward.
//   tti_forward  the coupled P/M self-adjoint system (sciproxy/tti.hpp), what RTM and FWI run:
//                n^3 cells of 10 m in two tilted anisotropic layers with variable density (the
//                lower half faster, denser, more anisotropic and more tilted), a Q sponge of
//                `sponge` cells, a free surface, one 15 Hz Ricker source at depth cell 2 in the
//                middle, a line of `receivers` receivers at depth cell 2 along axis 2; dt 0.9 of
//                the stability limit, nt to 0.25 s. Outputs the receiver amplitudes and the
//                final P.
//   tti_adjoint  its adjoint on the same problem, given the traces that the reference backend's
//                forward run records; outputs the source amplitudes it returns.
//                Settings of both: n (40), sponge (10), receivers (32), space_order (8), nt
//                (0.25 s), free_surface (1 or 0), dtype (float32).
//   All three run on the ranks of mpirun (Case::distribute): the grid split among them; tti_demo's
//   u and u_prev gathered on rank 0; the traces whole on every rank, tti_forward's P gathered on
//   rank 0 for verification after the timed calls.
#include "case.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/collective.hpp"
#include "core/json.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"
#include "sciproxy/tti.hpp"
#include "sciproxy/tti_demo.hpp"

namespace sciproxy::tti {

namespace {

const Device kReference{Backend::reference, 0, false};

const char* dtype_name(Precision p) {
  return p == Precision::fp32 ? "float32" : "float64";
}

template <class T>
class TtiDemoCase final : public Case {
 public:
  explicit TtiDemoCase(const CaseSettings& s) {
    s.check_known({"nx", "ny", "nz", "nt", "space_order", "form", "dtype", "spacing", "dt", "freq",
                   "verify_nt", "autotune"});
    spacing_ = s.get_real("spacing", 10);
    require(spacing_ > 0, "spacing", "a positive grid spacing in metres",
            fmt::format("{}", spacing_));
    for (int d = 0; d < 3; ++d) {
      const std::string name = std::string("n") + "xyz"[d];
      in_.shape[d] = s.get_int(name, 48);
      require(in_.shape[d] >= 1, name, "at least 1 grid point", std::to_string(in_.shape[d]));
      in_.spacing[d] = spacing_;
      // Near the centre, off the grid points, so that all 8 trilinear weights differ.
      in_.source_position[d] =
          std::min((static_cast<double>(in_.shape[d] / 2) + 0.37 + 0.11 * d) * spacing_,
                   static_cast<double>(in_.shape[d] - 1) * spacing_);
    }
    in_.nt = s.get_int("nt", 20);
    require(in_.nt >= 1, "nt", "at least 1", std::to_string(in_.nt));
    verify_nt_ = s.get_int("verify_nt", in_.nt);
    require(verify_nt_ >= 1, "verify_nt", "at least 1", std::to_string(verify_nt_));
    verify_nt_ = std::min(verify_nt_, in_.nt);
    options_.space_order = static_cast<int>(s.get_int("space_order", 8));
    require(options_.space_order == 4 || options_.space_order == 8 || options_.space_order == 12 ||
                options_.space_order == 16,
            "space_order", "4, 8, 12 or 16", std::to_string(options_.space_order));
    options_.form = parse_tti_demo_form(s.get("form", "fused"));
    const auto autotune = s.get_int("autotune", 0);
    require(autotune == 0 || autotune == 1, "autotune", "0 or 1", std::to_string(autotune));
    options_.autotune = autotune == 1;
    freq_ = s.get_real("freq", 15);
    require(freq_ > 0, "freq", "a positive frequency in Hz", fmt::format("{}", freq_));
    const double dt = s.get_real("dt", 0);
    require(dt >= 0, "dt", "a positive time step in seconds (or 0 for 0.9 of the stability limit)",
            fmt::format("{}", dt));
    in_.material = {vp_, b_, eps_, eta_, f_, theta_, phi_, damping_};
    dt_limit_ = tti_demo_dt_limit(in_, options_.space_order);
    in_.dt = dt > 0 ? dt : 0.9 * dt_limit_;
    amplitudes_ = ricker_wavelet<T>(freq_, in_.dt, in_.nt);
    in_.source_amplitudes = amplitudes_;
  }

  std::string kernel() const override { return "TTISelfAdjointForward"; }  // Devito's name
  std::string label() const override {
    return fmt::format("{} x {} x {} points ({} m), {} steps, space order {}, {} form, {}",
                       in_.shape[0], in_.shape[1], in_.shape[2], spacing_, in_.nt,
                       options_.space_order, tti_demo_form_name(options_.form),
                       dtype_name(precision_of<T>()));
  }
  Parameters parameters() const override {
    Parameters p;
    p.set("shape", std::vector<long long>(in_.shape.begin(), in_.shape.end()));
    p.set("nt", static_cast<long long>(in_.nt));
    p.set("spacing", spacing_);
    p.set("dt", in_.dt);
    p.set("space_order", options_.space_order);
    p.set("dtype", dtype_name(precision_of<T>()));
    p.set("form", tti_demo_form_name(options_.form));
    p.set("source_frequency", freq_);
    const nlohmann::json materials = {
        {"vp", vp_[0]}, {"b", b_[0]},         {"epsilon", eps_[0]}, {"eta", eta_[0]},
        {"f", f_[0]},   {"theta", theta_[0]}, {"phi", phi_[0]},     {"damping", damping_[0]}};
    p.set_json("materials", materials.dump());
    return p;
  }
  WorkModel work() const override { return out_.work; }
  double run(const Device& device, Timers* timers) override {
    const double setup_before = setup_total(timers);
    out_ = tti_demo<T>(device, in_, options_, timers);
    // The sections' own time when the backend measured it (CUDA events), else the harness's
    // wall clock around the call.
    double seconds = 0;
    std::vector<double> per_section;
    for (const auto& section : out_.sections) {
      seconds += section.seconds;
      per_section.push_back(section.seconds);
    }
    section_seconds_.push_back(std::move(per_section));
    setup_seconds_.push_back(setup_total(timers) - setup_before);
    return seconds;
  }
  // The first verify_nt steps (all of them by default) on the reference, and on a device after
  // its timed calls when they are fewer than nt.
  void run_reference_window() override {
    window_ = tti_demo<T>(Device{Backend::reference, 0, false}, window_input(), options_);
  }
  void run_device_window(const Device& device) override {
    if (verify_nt_ < in_.nt) window_ = tti_demo<T>(device, window_input(), options_);
  }
  std::vector<CaseOutput> outputs() const override {
    const TtiDemoOutput<T>& o = window_ ? *window_ : out_;
    return {{"u", std::span<const T>(o.u)}, {"u_prev", std::span<const T>(o.u_prev)}};
  }
  Tolerance tolerance(const std::string&) const override {
    return tti_demo_tolerance(precision_of<T>());
  }
  // The grid split among the ranks (tti_demo.hpp, TtiDemoOptions::comm); u and u_prev gathered
  // on rank 0 alone, which verifies.
  void distribute(const Communicator& comm) override {
    options_.comm = comm;
    options_.results = ResultLayout::root;
  }
  void start_timing() override {
    section_seconds_.clear();
    setup_seconds_.clear();
  }

  // Devito's report: per section its median time over the timed calls and its rates, the setup
  // (coefficients, padding) apart, the work per point, dt and its limit, the verified steps.
  Parameters details(const KernelReport& report) const override {
    Parameters d;
    d.set("operator", "TTISelfAdjointForward");
    d.set("gpts", report.rates.gpoints_per_s);
    d.set("dt", in_.dt);
    d.set("dt_limit", dt_limit_);
    d.set("setup_seconds", setup_seconds_.empty() ? 0.0 : median_of(setup_seconds_));
    const double points = report.work.points;
    d.set("flops_per_point", points > 0 ? report.work.flops / points : 0.0);
    const TtiDemoFlops flops = tti_demo_flops(options_.space_order);
    d.set("stencil_flops_per_point", flops.total());
    d.set("flux_flops_per_point", flops.flux);
    d.set("divergence_flops_per_point", flops.divergence);
    d.set("bytes_per_point", points > 0 ? report.work.bytes / points : 0.0);
    nlohmann::json sections = nlohmann::json::array();
    for (std::size_t i = 0; i < out_.sections.size(); ++i) {
      std::vector<double> v;
      for (const auto& call : section_seconds_)
        if (i < call.size()) v.push_back(call[i]);
      const double seconds = v.empty() ? 0.0 : median_of(v);
      const WorkModel& work = out_.sections[i].work;
      sections.push_back(
          {{"name", out_.sections[i].name},
           {"seconds", seconds},
           {"performance", to_json(derive_rates(work, seconds, report.roofline), work)}});
    }
    d.set_json("sections", sections.dump());
    if (report.verification) {
      const nlohmann::json scope = {
          {"steps", verify_nt_},
          {"tolerance_rel_l2", tti_demo_tolerance(precision_of<T>()).rel_l2}};
      d.set_json("verification_scope", scope.dump());
    }
    return d;
  }

 private:
  static double setup_total(const Timers* timers) {
    if (!timers) return 0;
    double total = 0;
    for (const auto& stat : timers->stats())
      if (stat.path.ends_with("TTISelfAdjointForward/setup")) total += stat.total;
    return total;
  }
  TtiDemoInput<T> window_input() const {
    TtiDemoInput<T> in = in_;
    in.nt = verify_nt_;
    in.source_amplitudes =
        std::span<const T>(amplitudes_).first(static_cast<std::size_t>(verify_nt_));
    return in;
  }

  // Devito's dummy constants, one value each (constant materials).
  const std::vector<T> vp_ = {1500}, b_ = {1}, eps_ = {T(0.2)}, eta_ = {T(0.4)}, f_ = {T(0.85)},
                       theta_ = {T(0.5)}, phi_ = {T(0.3)}, damping_ = {T(0.001)};
  TtiDemoInput<T> in_;
  TtiDemoOptions options_;
  double spacing_ = 10, freq_ = 15, dt_limit_ = 0;
  std::int64_t verify_nt_ = 0;
  std::vector<T> amplitudes_;
  TtiDemoOutput<T> out_;
  std::optional<TtiDemoOutput<T>> window_;
  std::vector<std::vector<double>> section_seconds_;  // [timed call][section]
  std::vector<double> setup_seconds_;
};

// The coupled system's problem, shared by the forward and the adjoint case.
template <class T>
struct TtiProblem {
  std::int64_t n = 40, sponge = 10, nreceivers = 32;
  std::vector<T> vp, buoyancy, epsilon, delta, theta, phi, amplitudes;
  std::vector<std::int64_t> source, receivers;
  TtiInput<T> in;
  TtiOptions options;

  explicit TtiProblem(const CaseSettings& s) {
    s.check_known({"n", "sponge", "receivers", "space_order", "nt", "free_surface", "dtype"});
    n = s.get_int("n", 40);
    sponge = s.get_int("sponge", 10);
    nreceivers = s.get_int("receivers", 32);
    const auto free_surface = s.get_int("free_surface", 1);
    require(n >= 3, "n", "at least 3 cells (the source and receivers sit at depth cell 2)",
            std::to_string(n));
    require(sponge >= 0, "sponge", "0 or more cells", std::to_string(sponge));
    require(nreceivers >= 1, "receivers", "at least 1", std::to_string(nreceivers));
    require(free_surface == 0 || free_surface == 1, "free_surface", "0 or 1",
            std::to_string(free_surface));
    const std::int64_t cells = n * n * n;
    for (auto* a : {&vp, &buoyancy, &epsilon, &delta, &theta, &phi}) a->resize(cells);
    for (std::int64_t z = 0; z < n; ++z)
      for (std::int64_t i = 0; i < n * n; ++i) {
        const std::int64_t c = z * n * n + i;
        const bool deep = z >= n / 2;  // two layers
        vp[c] = deep ? 2500 : 1800;
        buoyancy[c] = deep ? T(1) / 2300 : T(1) / 2000;
        epsilon[c] = deep ? T(0.2) : T(0.1);
        delta[c] = deep ? T(0.1) : T(0.05);
        theta[c] = deep ? T(0.5) : T(0.2);
        phi[c] = deep ? T(0.3) : T(0);
      }
    in.model.grid = Grid{3, {n, n, n}, {10, 10, 10}};
    in.model.vp = vp;
    in.model.buoyancy = buoyancy;
    in.model.epsilon = epsilon;
    in.model.delta = delta;
    in.model.theta = theta;
    in.model.phi = phi;
    options.space_order = static_cast<int>(s.get_int("space_order", 8));
    options.sponge_width.fill(sponge);
    options.free_surface = free_surface == 1;
    in.dt = 0.9 * tti_max_dt(in.model, options);
    in.nt = s.get_int("nt", static_cast<std::int64_t>(0.25 / in.dt));  // 0.25 s
    require(in.nt >= 1, "nt", "at least 1", std::to_string(in.nt));
    source = {2, n / 2, n / 2};
    for (std::int64_t r = 0; r < nreceivers; ++r)
      receivers.insert(receivers.end(),
                       {2, n / 2, (r * (n - 1)) / std::max<std::int64_t>(nreceivers - 1, 1)});
    in.nsources = 1;
    in.nreceivers = nreceivers;
    in.source_locations = source;
    in.receiver_locations = receivers;
    amplitudes = ricker_wavelet<T>(15, in.dt, in.nt);
    in.source_amplitudes = amplitudes;
  }

  std::string label(const char* what) const {
    return fmt::format(
        "{}^3 cells (10 m) + {}-cell sponge{}, two tilted anisotropic layers, 1 "
        "source, {} receivers, {} steps, space order {}, {}, {}",
        n, sponge, options.free_surface ? ", free surface" : "", nreceivers, in.nt,
        options.space_order, what, dtype_name(precision_of<T>()));
  }
  Parameters parameters() const {
    Parameters p;
    p.set("shape", std::vector<long long>{n, n, n});
    p.set("sponge", static_cast<long long>(sponge));
    p.set("free_surface", options.free_surface);
    p.set("receivers", static_cast<long long>(nreceivers));
    p.set("nt", static_cast<long long>(in.nt));
    p.set("dt", in.dt);
    p.set("space_order", options.space_order);
    p.set("dtype", dtype_name(precision_of<T>()));
    return p;
  }
};

template <class T>
class TtiForwardCase final : public Case {
 public:
  explicit TtiForwardCase(const CaseSettings& s) : problem_(s) {}

  std::string kernel() const override { return "tti_forward"; }
  std::string label() const override { return problem_.label("forward"); }
  Parameters parameters() const override { return problem_.parameters(); }
  WorkModel work() const override { return out_.work; }
  double run(const Device& device, Timers* timers) override {
    out_ = tti_forward<T>(device, problem_.in, problem_.options, nullptr, timers);
    return 0;
  }
  std::vector<CaseOutput> outputs() const override {
    return {
        {"receiver_amplitudes", std::span<const T>(out_.receiver_amplitudes)},
        {"p", std::span<const T>(problem_.options.comm.distributed() ? whole_p_ : out_.state.p)}};
  }
  Tolerance tolerance(const std::string& output) const override {
    return output == "p" ? tti_state_tolerance(precision_of<T>())
                         : tti_tolerance(precision_of<T>());
  }

  // The padded grid split among the ranks (tti.hpp, TtiOptions::comm): every rank returns the
  // whole receiver_amplitudes; P is gathered on rank 0 after the timed calls, for verification.
  void distribute(const Communicator& comm) override { problem_.options.comm = comm; }
  void run_device_window(const Device&) override {
    if (problem_.options.comm.distributed()) whole_p_ = gather_p();
  }

 private:
  // The ranks' own cells of P (each rank's subdomain minus its halo) assembled on rank 0 into
  // one process's padded grid; the halo and the free surface stay zero, as one process leaves
  // them. Empty on the other ranks.
  std::vector<T> gather_p() const {
    const Communicator& comm = problem_.options.comm;
    const TtiState<T>& st = out_.state;
    const std::int64_t halo = problem_.options.space_order / 2;
    std::array<std::int64_t, 6> box{};  // own cells: first padded index and extent per axis
    for (int a = 0; a < 3; ++a) {
      box[a] = st.subdomain_origin[a] + halo;
      box[3 + a] = st.padded_shape[a] - 2 * halo;
    }
    std::vector<T> mine;
    mine.reserve(static_cast<std::size_t>(box[3] * box[4] * box[5]));
    for (std::int64_t i0 = halo; i0 < st.padded_shape[0] - halo; ++i0)
      for (std::int64_t i1 = halo; i1 < st.padded_shape[1] - halo; ++i1) {
        const auto row = st.p.begin() + (i0 * st.padded_shape[1] + i1) * st.padded_shape[2];
        mine.insert(mine.end(), row + halo, row + st.padded_shape[2] - halo);
      }
    const std::vector<std::int64_t> boxes = collective::allgather(comm, box);
    std::vector<std::int64_t> counts;
    std::array<std::int64_t, 3> n{};
    for (int r = 0; r < comm.size(); ++r) {
      const std::int64_t* b = boxes.data() + 6 * r;
      counts.push_back(b[3] * b[4] * b[5]);
      for (int a = 0; a < 3; ++a) n[a] = std::max(n[a], b[a] + b[3 + a] + halo);
    }
    const bool root = comm.rank() == 0;
    std::vector<T> own_cells(root ? static_cast<std::size_t>(std::accumulate(
                                        counts.begin(), counts.end(), std::int64_t(0)))
                                  : 0);
    collective::gather_rows<T>(comm, mine, own_cells, counts, 1, 0);
    if (!root) return {};
    std::vector<T> whole(static_cast<std::size_t>(n[0] * n[1] * n[2]), T(0));
    std::size_t next = 0;
    for (int r = 0; r < comm.size(); ++r) {
      const std::int64_t* b = boxes.data() + 6 * r;
      for (std::int64_t i0 = b[0]; i0 < b[0] + b[3]; ++i0)
        for (std::int64_t i1 = b[1]; i1 < b[1] + b[4]; ++i1, next += b[5])
          std::copy_n(own_cells.begin() + next, b[5],
                      whole.begin() + (i0 * n[1] + i1) * n[2] + b[2]);
    }
    return whole;
  }

  TtiProblem<T> problem_;
  TtiOutput<T> out_;
  std::vector<T> whole_p_;  // under MPI, on rank 0: P of every rank
};

// The data the adjoint takes are an input of the timed call, so every device must get the same:
// the reference backend's forward traces, untimed. A reference run of the default problem takes
// seconds and the harness builds the case once for the reference and once per device, so the
// traces are kept per settings for the life of the process (they are small: receivers x nt).
template <class T>
std::vector<T> reference_traces(const CaseSettings& s, const TtiProblem<T>& problem) {
  static std::mutex mutex;
  static std::map<std::map<std::string, std::string>, std::vector<T>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(s.values);
  if (it == cache.end())
    it = cache
             .emplace(s.values,
                      tti_forward<T>(kReference, problem.in, problem.options).receiver_amplitudes)
             .first;
  return it->second;
}

template <class T>
class TtiAdjointCase final : public Case {
 public:
  explicit TtiAdjointCase(const CaseSettings& s)
      : problem_(s), data_(reference_traces<T>(s, problem_)) {}

  std::string kernel() const override { return "tti_adjoint"; }
  std::string label() const override { return problem_.label("adjoint"); }
  Parameters parameters() const override { return problem_.parameters(); }
  WorkModel work() const override { return out_.work; }
  double run(const Device& device, Timers* timers) override {
    out_ = tti_adjoint<T>(device, problem_.in, std::span<const T>(data_), problem_.options, timers);
    return 0;
  }
  std::vector<CaseOutput> outputs() const override {
    return {{"source_amplitudes", std::span<const T>(out_.source_amplitudes)}};
  }
  Tolerance tolerance(const std::string&) const override {
    return tti_tolerance(precision_of<T>());
  }
  // The padded grid split among the ranks; source_amplitudes are whole on every rank.
  void distribute(const Communicator& comm) override { problem_.options.comm = comm; }

 private:
  TtiProblem<T> problem_;
  std::vector<T> data_;
  TtiAdjointOutput<T> out_;
};

template <template <class> class C>
std::unique_ptr<Case> make(const CaseSettings& s) {
  const std::string dtype = s.get("dtype", "float32");
  if (dtype == "float32") return std::make_unique<C<float>>(s);
  require(dtype == "float64", "dtype", "float32 or float64", fmt::format("\"{}\"", dtype));
  return std::make_unique<C<double>>(s);
}

// Cubes from cache-sized to a few times the last-level cache, both forms at the middle size.
std::vector<CaseSettings> demo_sweep() {
  std::vector<CaseSettings> sweep;
  for (const char* n : {"32", "48", "72"})
    sweep.push_back(
        CaseSettings{{{"nx", n}, {"ny", n}, {"nz", n}, {"nt", "20"}, {"form", "fused"}}});
  sweep.push_back(
      CaseSettings{{{"nx", "48"}, {"ny", "48"}, {"nz", "48"}, {"nt", "20"}, {"form", "two_pass"}}});
  return sweep;
}

}  // namespace

void register_cases(std::vector<CaseEntry>& registry) {
  registry.push_back({"tti_demo",
                      "tti",
                      "Devito's TTI workshop operator (TTISelfAdjointForward), constant materials",
                      make<TtiDemoCase>,
                      {CaseSettings{{{"form", "fused"}}}, CaseSettings{{{"form", "two_pass"}}}},
                      demo_sweep()});
  registry.push_back({"tti_forward",
                      "tti",
                      "coupled P/M TTI system, forward: tilted layers, sponge, free surface",
                      make<TtiForwardCase>,
                      {CaseSettings{}}});
  registry.push_back({"tti_adjoint",
                      "tti",
                      "coupled P/M TTI system, adjoint with respect to the source amplitudes",
                      make<TtiAdjointCase>,
                      {CaseSettings{}}});
  // The tolerances of the cases' tolerance(), by output (case.hpp).
  auto precision = [](const CaseSettings& s) {
    return s.get("dtype", "float32") == "float64" ? Precision::fp64 : Precision::fp32;
  };
  registry[registry.size() - 3].tolerance = [=](const CaseSettings& s, const std::string&) {
    return tti_demo_tolerance(precision(s));
  };
  registry[registry.size() - 2].tolerance = [=](const CaseSettings& s, const std::string& out) {
    return out == "p" ? tti_state_tolerance(precision(s)) : tti_tolerance(precision(s));
  };
  registry[registry.size() - 1].tolerance = [=](const CaseSettings& s, const std::string&) {
    return tti_tolerance(precision(s));
  };
}

}  // namespace sciproxy::tti
