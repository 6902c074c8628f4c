// The wave family's cases for the harness (core/harness.hpp): the synthetic scalar-wave problem
// of `sciproxy scalar`. A model of ndim dimensions (dimension 0 is depth) whose velocity
// increases with depth in 5 layers from 1500 to 4000 m/s; shot s has one Ricker source (peak
// `freq`, delayed by 1.5 / freq) at depth cell 2, the shots spread evenly along the last
// dimension; every shot records at `receivers` receivers spread evenly along the last dimension
// at depth cell 1 (in 3-D on the middle line of dimension 1; in 1-D the source sits at cell 2
// and the receivers spread along the model). Born modelling adds the scatter: `scatter` m/s in a
// box centred in the model, about a tenth of the model per dimension (at least one cell).
//
//   scalar                forward modelling (wave::scalar)
//   scalar_born           Born modelling of the scatter box (wave::scalar_born)
//   scalar_born_gradient  its adjoint (wave::scalar_born_gradient): the migration image and the
//                         source gradient of 0.5 ||Born data||^2 + 0.5 ||background data||^2
//
// Settings: ndim (1, 2, 3), shape0, shape1, shape2 (cells per dimension, depth first; defaults
// from the 2-D demo size, depth x lateral: 1-D lateral, 3-D depth/2 x depth/2 x lateral), nt,
// shots, receivers, accuracy (2, 4, 6, 8), dtype (float32, float64), dt (s), spacing (m),
// pml_width (cells), freq (Hz: the wavelet's peak and the PML frequency), scatter (m/s, Born).
// The defaults are `sciproxy demo`'s sizes: 60 x 120 cells, nt 100, 2 shots x 60 receivers,
// float32 for scalar and scalar_born; 40 x 80, nt 80, 40 receivers, float64 for the gradient.
#include "case.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"
#include "sciproxy/wave.hpp"

namespace sciproxy::wave {

namespace {

enum class Kind { forward, born, born_gradient };

// A case reads the names it knows and refuses the others (a misspelt size would otherwise run
// the default problem silently).
void check_names(const CaseSettings& s, const std::set<std::string>& known) {
  for (const auto& [name, value] : s.values)
    require(known.count(name) > 0, name, fmt::format("one of {}", fmt::join(known, ", ")),
            "an unknown setting");
}

// The problem's sizes and physics, read from the settings.
struct Spec {
  int ndim = 2;
  std::array<std::int64_t, kMaxDims> shape = {1, 1, 1};
  double spacing = 5, dt = 0.004, freq = 25, scatter = 100;
  std::int64_t nt = 100, nshots = 2, nreceivers = 60, pml_width = 20;
  int accuracy = 4;
  static constexpr double kVmin = 1500, kVmax = 4000;
  static constexpr int kLayers = 5;
  static constexpr std::int64_t kSourceDepth = 2, kReceiverDepth = 1;

  Spec(const CaseSettings& s, Kind kind) {
    check_names(s, {"ndim", "shape0", "shape1", "shape2", "nt", "shots", "receivers", "accuracy",
                    "dtype", "dt", "spacing", "pml_width", "freq", "scatter"});
    const bool gradient = kind == Kind::born_gradient;
    const std::int64_t depth = gradient ? 40 : 60, lateral = gradient ? 80 : 120;
    ndim = static_cast<int>(s.get_int("ndim", 2));
    require(ndim >= 1 && ndim <= 3, "ndim", "1, 2 or 3", std::to_string(ndim));
    const std::array<std::array<std::int64_t, 3>, 3> defaults = {
        {{lateral, 1, 1}, {depth, lateral, 1}, {depth / 2, depth / 2, lateral}}};
    for (int d = 0; d < ndim; ++d) {
      const std::string name = fmt::format("shape{}", d);
      shape[d] = s.get_int(name, defaults[ndim - 1][d]);
      require(shape[d] >= 1, name, "at least 1 cell", std::to_string(shape[d]));
    }
    for (int d = ndim; d < kMaxDims; ++d)
      require(!s.has(fmt::format("shape{}", d)), fmt::format("shape{}", d),
              fmt::format("no size beyond ndim {}", ndim), s.get(fmt::format("shape{}", d), ""));
    nt = s.get_int("nt", gradient ? 80 : 100);
    nshots = s.get_int("shots", 2);
    nreceivers = s.get_int("receivers", gradient ? 40 : 60);
    accuracy = static_cast<int>(s.get_int("accuracy", 4));
    pml_width = s.get_int("pml_width", 20);
    dt = s.get_real("dt", 0.004);
    spacing = s.get_real("spacing", 5);
    freq = s.get_real("freq", 25);
    scatter = s.get_real("scatter", 100);
    require(nt >= 1, "nt", "at least 1", std::to_string(nt));
    require(nshots >= 1, "shots", "at least 1", std::to_string(nshots));
    require(nreceivers >= 1, "receivers", "at least 1", std::to_string(nreceivers));
    require(pml_width >= 0, "pml_width", "0 or more", std::to_string(pml_width));
    require(dt > 0, "dt", "a positive time step", fmt::format("{}", dt));
    require(spacing > 0, "spacing", "a positive cell size", fmt::format("{}", spacing));
    require(freq > 0, "freq", "a positive frequency", fmt::format("{}", freq));
    // accuracy is left to the library, which names what it accepts.
  }

  std::int64_t cells() const { return shape[0] * shape[1] * shape[2]; }

  double layer_velocity(std::int64_t z) const {
    const int layer = static_cast<int>(std::min<std::int64_t>(z * kLayers / shape[0], kLayers - 1));
    return kVmin + (kVmax - kVmin) * layer / (kLayers - 1);
  }

  // The scatter box: first and one-past-last cell per dimension.
  std::array<std::int64_t, 3> box_begin() const {
    std::array<std::int64_t, 3> b = {0, 0, 0};
    for (int d = 0; d < ndim; ++d) b[d] = shape[d] / 2 - shape[d] / 20;
    return b;
  }
  std::array<std::int64_t, 3> box_end() const {
    std::array<std::int64_t, 3> e = {1, 1, 1};
    for (int d = 0; d < ndim; ++d) e[d] = shape[d] / 2 + std::max<std::int64_t>(shape[d] / 20, 1);
    return e;
  }

  std::string shape_label() const {
    std::vector<std::int64_t> v(shape.begin(), shape.begin() + ndim);
    return fmt::format("{}", fmt::join(v, " x "));
  }
};

// Cell index of item i of n spread evenly over [0, size).
std::int64_t spread(std::int64_t i, std::int64_t n, std::int64_t size) {
  return std::clamp<std::int64_t>((2 * i + 1) * size / (2 * n), 0, size - 1);
}

// The arrays of the problem; the inputs only point into them.
template <class T>
struct Problem {
  Grid grid;
  std::vector<T> v, amplitudes, scatter;
  std::vector<std::int64_t> sources, receivers;
  const Spec* spec;

  explicit Problem(const Spec& s, bool born) : spec(&s) {
    grid.ndim = s.ndim;
    for (int d = 0; d < s.ndim; ++d) {
      grid.shape[d] = s.shape[d];
      grid.spacing[d] = s.spacing;
    }
    const std::int64_t per_depth = s.cells() / s.shape[0];
    v.resize(static_cast<std::size_t>(s.cells()));
    for (std::int64_t z = 0; z < s.shape[0]; ++z)
      std::fill_n(v.begin() + z * per_depth, per_depth, static_cast<T>(s.layer_velocity(z)));
    if (born) {
      scatter.assign(v.size(), T(0));
      const auto b = s.box_begin(), e = s.box_end();
      // Unused dimensions have extent 1 and box [0, 1), so one triple loop serves 1-, 2- and 3-D.
      for (std::int64_t i = b[0]; i < e[0]; ++i)
        for (std::int64_t j = b[1]; j < e[1]; ++j)
          for (std::int64_t k = b[2]; k < e[2]; ++k)
            scatter[static_cast<std::size_t>((i * s.shape[1] + j) * s.shape[2] + k)] =
                static_cast<T>(s.scatter);
    }
    const std::vector<T> wavelet = seismic::ricker_wavelet<T>(s.freq, s.dt, s.nt, 1.5 / s.freq);
    for (std::int64_t shot = 0; shot < s.nshots; ++shot)
      amplitudes.insert(amplitudes.end(), wavelet.begin(), wavelet.end());
    const std::int64_t along = s.shape[s.ndim - 1];
    auto place = [&](std::vector<std::int64_t>& out, std::int64_t depth, std::int64_t lateral) {
      if (s.ndim == 1) {
        out.push_back(lateral);
        return;
      }
      out.push_back(depth);
      if (s.ndim == 3) out.push_back(s.shape[1] / 2);
      out.push_back(lateral);
    };
    for (std::int64_t shot = 0; shot < s.nshots; ++shot) {
      place(sources, Spec::kSourceDepth,
            s.ndim == 1 ? Spec::kSourceDepth : spread(shot, s.nshots, along));
      for (std::int64_t r = 0; r < s.nreceivers; ++r)
        place(receivers, Spec::kReceiverDepth, spread(r, s.nreceivers, along));
    }
  }

  ScalarInput<T> input() const {
    ScalarInput<T> in;
    in.grid = grid;
    in.v = v;
    in.dt = spec->dt;
    in.nt = spec->nt;
    in.nshots = spec->nshots;
    in.nsources = 1;
    in.nreceivers = spec->nreceivers;
    in.source_amplitudes = amplitudes;
    in.source_locations = sources;
    in.receiver_locations = receivers;
    return in;
  }

  // The scattered and the background fields are both recorded at the receivers.
  ScalarBornInput<T> born_input() const {
    ScalarBornInput<T> in;
    in.background = input();
    in.scatter = scatter;
    in.nbg_receivers = spec->nreceivers;
    in.bg_receiver_locations = receivers;
    return in;
  }
};

// The loss of the gradient case, 0.5 ||Born data||^2 + 0.5 ||background data||^2: its receiver
// gradients are the data themselves. They are inputs of the timed call, so every device must get
// the same ones: the reference backend's Born data, untimed. The harness builds the case once for
// the reference and once per device, so they are kept per settings for the life of the process
// (they are small: shots x receivers x nt), and the reference runs this setup once.
template <class T>
struct BornData {
  std::vector<T> receivers, bg_receivers;
  WorkModel work;
};

template <class T>
const BornData<T>& reference_born_data(const CaseSettings& s, const Problem<T>& problem,
                                       const ScalarOptions& options) {
  static std::mutex mutex;
  static std::map<std::map<std::string, std::string>, BornData<T>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(s.values);
  if (it == cache.end()) {
    auto out = scalar_born<T>(Device{Backend::reference, 0, false}, problem.born_input(), options);
    it = cache
             .emplace(s.values, BornData<T>{std::move(out.receiver_amplitudes),
                                            std::move(out.bg_receiver_amplitudes), out.work})
             .first;
  }
  return it->second;  // map nodes do not move
}

template <class T>
class ScalarCase final : public Case {
 public:
  ScalarCase(const CaseSettings& s, Kind kind)
      : kind_(kind), spec_(s, kind), problem_(spec_, kind != Kind::forward) {
    options_.accuracy = spec_.accuracy;
    options_.pml_width.fill(spec_.pml_width);
    options_.pml_freq = spec_.freq;
    if (kind_ == Kind::born_gradient) {
      const BornData<T>& data = reference_born_data<T>(s, problem_, options_);
      grad_receivers_ = data.receivers;
      grad_bg_receivers_ = data.bg_receivers;
      born_work_ = data.work;
    }
  }

  std::string kernel() const override {
    switch (kind_) {
      case Kind::forward:
        return "scalar";
      case Kind::born:
        return "scalar_born";
      case Kind::born_gradient:
        return "scalar_born_gradient";
    }
    return "?";
  }
  std::string label() const override {
    std::string text = fmt::format(
        "{}-D {} cells ({} m), {} shot{} x {} receivers, nt {}, dt {} s, "
        "accuracy {}, {}",
        spec_.ndim, spec_.shape_label(), spec_.spacing, spec_.nshots, spec_.nshots == 1 ? "" : "s",
        spec_.nreceivers, spec_.nt, spec_.dt, spec_.accuracy, dtype_name());
    if (kind_ != Kind::forward) {
      const auto b = spec_.box_begin(), e = spec_.box_end();
      std::vector<std::string> parts;
      for (int d = 0; d < spec_.ndim; ++d) parts.push_back(fmt::format("[{}, {})", b[d], e[d]));
      text += fmt::format("; scatter {:+} m/s in cells {}", spec_.scatter, fmt::join(parts, " x "));
    }
    return text;
  }
  Parameters parameters() const override {
    Parameters p;
    p.set("ndim", spec_.ndim);
    p.set("shape", std::vector<long long>(spec_.shape.begin(), spec_.shape.begin() + spec_.ndim));
    p.set("spacing", spec_.spacing);
    p.set("dt", spec_.dt);
    p.set("nt", static_cast<long long>(spec_.nt));
    p.set("shots", static_cast<long long>(spec_.nshots));
    p.set("receivers", static_cast<long long>(spec_.nreceivers));
    p.set("accuracy", spec_.accuracy);
    p.set("pml_width", static_cast<long long>(spec_.pml_width));
    p.set("pml_freq", spec_.freq);
    p.set("dtype", dtype_name());
    if (kind_ != Kind::forward) {
      const auto b = spec_.box_begin(), e = spec_.box_end();
      p.set("scatter", spec_.scatter);
      p.set("box_begin", std::vector<long long>(b.begin(), b.begin() + spec_.ndim));
      p.set("box_end", std::vector<long long>(e.begin(), e.begin() + spec_.ndim));
    }
    if (step_ratio_ > 0) p.set("step_ratio", static_cast<long long>(step_ratio_));
    return p;
  }
  WorkModel work() const override { return work_; }

  double run(const Device& device, Timers* timers) override {
    outputs_.clear();
    if (kind_ == Kind::forward) {
      auto out = scalar<T>(device, problem_.input(), options_, nullptr, timers);
      work_ = out.work;
      step_ratio_ = out.step_ratio;
      outputs_.push_back({"receiver_amplitudes", std::move(out.receiver_amplitudes)});
      // The final wavefield checks every cell, not only the receivers' lines.
      outputs_.push_back({"wavefield", std::move(out.state.wavefield)});
    } else if (kind_ == Kind::born) {
      auto out = scalar_born<T>(device, problem_.born_input(), options_, nullptr, nullptr, timers);
      work_ = out.work;
      step_ratio_ = out.step_ratio;
      outputs_.push_back({"receiver_amplitudes", std::move(out.receiver_amplitudes)});
      outputs_.push_back({"bg_receiver_amplitudes", std::move(out.bg_receiver_amplitudes)});
      outputs_.push_back({"scattered_wavefield", std::move(out.scattered_state.wavefield)});
    } else {
      auto g = scalar_born_gradient<T>(
          device, problem_.born_input(), options_, std::span<const T>(grad_receivers_),
          std::span<const T>(grad_bg_receivers_), true, nullptr, timers);
      step_ratio_ = g.forward.step_ratio;
      // The call returns the work of its background forward pass (with its stores). The image
      // adds that pass's adjoint, about the same work again; the source gradient adds the
      // adjoint of the coupled background + scattered fields, as much as a Born forward.
      work_ = g.forward.work;
      work_.points = 2 * work_.points + born_work_.points;
      work_.flops = 2 * work_.flops + born_work_.flops;
      work_.bytes = 2 * work_.bytes + born_work_.bytes;
      outputs_.push_back({"grad_scatter", std::move(g.scatter)});
      outputs_.push_back({"grad_source_amplitudes", std::move(g.source_amplitudes)});
    }
    return 0;
  }

  std::vector<CaseOutput> outputs() const override {
    std::vector<CaseOutput> out;
    for (const auto& [name, values] : outputs_) out.push_back({name, std::span<const T>(values)});
    return out;
  }

  Tolerance tolerance(const std::string& output) const override {
    // The family's tolerances (case.hpp): a final wavefield gathers the rounding of every step
    // everywhere, so it is held to the state tolerance.
    const bool born = kind_ != Kind::forward;
    if (output == "wavefield" || output == "scattered_wavefield")
      return scalar_state_tolerance(precision(), born);
    return scalar_tolerance(precision(), born);
  }

 private:
  static constexpr Precision precision() {
    return sizeof(T) == 4 ? Precision::fp32 : Precision::fp64;
  }
  static const char* dtype_name() { return sizeof(T) == 4 ? "float32" : "float64"; }

  struct Output {
    std::string name;
    std::vector<T> values;
  };

  Kind kind_;
  Spec spec_;
  Problem<T> problem_;
  ScalarOptions options_;
  std::vector<T> grad_receivers_, grad_bg_receivers_;
  WorkModel born_work_, work_;
  std::int64_t step_ratio_ = 0;  // known after the first run
  std::vector<Output> outputs_;
};

template <Kind kind>
std::unique_ptr<Case> make(const CaseSettings& s) {
  // The gradient demo runs in float64: its adjoint sums are compared at 1e-11.
  const std::string dtype = s.get("dtype", kind == Kind::born_gradient ? "float64" : "float32");
  if (dtype == "float32") return std::make_unique<ScalarCase<float>>(s, kind);
  require(dtype == "float64", "dtype", "float32 or float64", fmt::format("\"{}\"", dtype));
  return std::make_unique<ScalarCase<double>>(s, kind);
}

}  // namespace

void register_cases(std::vector<CaseEntry>& registry) {
  registry.push_back({"scalar",
                      "wave",
                      "scalar wave forward modelling of a layered model (Deepwave's scalar)",
                      make<Kind::forward>,
                      {CaseSettings{}}});
  registry.push_back(
      {"scalar_born",
       "wave",
       "Born modelling of a velocity box in a layered model (Deepwave's scalar_born)",
       make<Kind::born>,
       {CaseSettings{}}});
  registry.push_back({"scalar_born_gradient",
                      "wave",
                      "adjoint of Born modelling: migration image and source gradient",
                      make<Kind::born_gradient>,
                      {CaseSettings{}}});
}

}  // namespace sciproxy::wave
