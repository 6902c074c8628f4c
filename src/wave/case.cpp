// The wave family's cases for the harness (core/harness.hpp): the synthetic scalar-wave problem
// of `sciproxy scalar`. A model of ndim dimensions (dimension 0 is depth) whose velocity
// increases with depth in 5 layers from 1500 to 4000 m/s; shot s has one Ricker source (peak
// `freq`, delayed by 1.5 / freq) at depth cell `source_depth`, the shots spread evenly along the
// last dimension; every shot records at `receivers` receivers spread evenly along the last
// dimension at depth cell 1 (in 3-D on the middle line of dimension 1; in 1-D the source sits at
// cell source_depth and the receivers spread along the model). Born modelling adds the scatter:
// `scatter` m/s in a box centred in the model, about a tenth of the model per dimension (at least
// one cell).
//
//   scalar                forward modelling (wave::scalar)
//   scalar_gradient       forward + adjoint (wave::scalar_gradient): the gradient of
//                         0.5 ||receivers||^2 with respect to v and the source amplitudes
//   scalar_born           Born modelling of the scatter box (wave::scalar_born)
//   scalar_born_gradient  its adjoint (wave::scalar_born_gradient): the migration image and the
//                         source gradient of 0.5 ||Born data||^2 + 0.5 ||background data||^2
//
// Settings: ndim (1, 2, 3), shape0, shape1, shape2 (cells per dimension, depth first; defaults
// from the 2-D demo size, depth x lateral: 1-D lateral, 3-D depth/2 x depth/2 x lateral), nt,
// shots, receivers, accuracy (2, 4, 6, 8), dtype (float32, float64), dt (s), spacing (m),
// pml_width (cells), freq (Hz: the wavelet's peak and the PML frequency), source_depth (cells),
// scatter (m/s, Born). The gradients: gradient_sampling (store every this many inner steps; 0:
// the step ratio, once per sample of dt as Deepwave; default 1, the library's, exact), storage
// (device, host, disk, none), storage_compression (0, 1), storage_dir (for disk). autotune (0, 1):
// the cpu backend's sweep and block sizes chosen by timing (ScalarOptions::autotune).
// Verification: verify_nt, verify_shots (default 100, 2): the reference runs the first
// min(nt, verify_nt) samples of the first min(shots, verify_shots) shots, and so does each device
// after its timed calls; when that window is the whole problem a forward or Born device keeps the
// outputs of its last timed call.
// The defaults are `sciproxy demo`'s sizes: 60 x 120 cells, nt 100, 2 shots x 60 receivers,
// float32 for scalar and scalar_born; 40 x 80, nt 80, 40 receivers, float64 for the gradients.
#include "case.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"
#include "sciproxy/core/resources.hpp"
#include "sciproxy/wave.hpp"
#include "storage_directory.hpp"

namespace sciproxy::wave {

namespace {

enum class Kind { forward, gradient, born, born_gradient };

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

bool is_gradient(Kind k) {
  return k == Kind::gradient || k == Kind::born_gradient;
}
bool is_born(Kind k) {
  return k == Kind::born || k == Kind::born_gradient;
}

// The family's tolerances (case.hpp) per output: a final wavefield gathers the rounding of
// every step everywhere, so it is held to the state tolerance; what is computed from compressed
// stored steps to the compressed one.
Tolerance output_tolerance(Kind kind, Precision p, bool compressed, const std::string& output) {
  const bool born = is_born(kind);
  if (output == "wavefield" || output == "scattered_wavefield")
    return scalar_state_tolerance(p, born);
  if ((output == "grad_v" || output == "grad_scatter") && compressed)
    return scalar_compressed_tolerance(p, born);
  return scalar_tolerance(p, born);
}

StorageMode parse_storage(const std::string& name) {
  if (name == "device") return StorageMode::device;
  if (name == "host") return StorageMode::host;
  if (name == "disk") return StorageMode::disk;
  require(name == "none", "storage", "device, host, disk or none", fmt::format("\"{}\"", name));
  return StorageMode::none;
}

const char* storage_name(StorageMode mode) {
  switch (mode) {
    case StorageMode::device:
      return "device";
    case StorageMode::host:
      return "host";
    case StorageMode::disk:
      return "disk";
    case StorageMode::none:
      return "none";
  }
  return "?";
}

// The problem's sizes and physics, read from the settings and checked (memory included) before
// anything is allocated.
struct Spec {
  Kind kind;
  int ndim = 2;
  std::array<std::int64_t, kMaxDims> shape = {1, 1, 1};
  double spacing = 5, dt = 0.004, freq = 25, scatter = 100;
  std::int64_t nt = 100, nshots = 2, nreceivers = 60, pml_width = 20, source_depth = 2;
  int accuracy = 4;
  std::int64_t sampling = 1;  // as given: 0 is the step ratio
  StorageMode storage = StorageMode::device;
  bool compression = false;
  bool autotune = false;
  std::string storage_dir;  // empty: the system's temporary directory
  std::int64_t verify_nt = 100, verify_shots = 2;
  std::int64_t step_ratio = 1;
  double inner_dt = 0, host_bytes = 0, stored_bytes = 0;
  static constexpr double kVmin = 1500, kVmax = 4000;
  static constexpr int kLayers = 5;
  static constexpr std::int64_t kReceiverDepth = 1;

  Spec(const CaseSettings& s, Kind k, std::size_t elem) : kind(k) {
    s.check_known({"ndim",         "shape0",
                   "shape1",       "shape2",
                   "nt",           "shots",
                   "receivers",    "accuracy",
                   "dtype",        "dt",
                   "spacing",      "pml_width",
                   "freq",         "source_depth",
                   "scatter",      "gradient_sampling",
                   "storage",      "storage_compression",
                   "storage_dir",  "verify_nt",
                   "verify_shots", "autotune"});
    const bool gradient = is_gradient(kind);
    const std::int64_t depth = gradient ? 40 : 60, lateral = gradient ? 80 : 120;
    ndim = static_cast<int>(s.get_int("ndim", 2));
    require(ndim >= 1 && ndim <= 3, "ndim", "1, 2 or 3", std::to_string(ndim));
    const std::array<std::array<std::int64_t, 3>, 3> defaults = {
        {{lateral, 1, 1}, {depth, lateral, 1}, {depth / 2, depth / 2, lateral}}};
    for (int d = 0; d < ndim; ++d) {
      const std::string name = fmt::format("shape{}", d);
      shape[d] = s.get_int(name, defaults[ndim - 1][d]);
      require(shape[d] >= 1 && shape[d] <= 1000000, name, "a cell count in [1, 1000000]",
              std::to_string(shape[d]));
    }
    for (int d = ndim; d < kMaxDims; ++d)
      require(!s.has(fmt::format("shape{}", d)), fmt::format("shape{}", d),
              fmt::format("no size beyond ndim {}", ndim), s.get(fmt::format("shape{}", d), ""));
    nt = s.get_int("nt", gradient ? 80 : 100);
    nshots = s.get_int("shots", 2);
    nreceivers = s.get_int("receivers", gradient ? 40 : 60);
    accuracy = static_cast<int>(s.get_int("accuracy", 4));
    pml_width = s.get_int("pml_width", 20);
    source_depth = s.get_int("source_depth", 2);
    dt = s.get_real("dt", 0.004);
    spacing = s.get_real("spacing", 5);
    freq = s.get_real("freq", 25);
    scatter = s.get_real("scatter", 100);
    verify_nt = s.get_int("verify_nt", 100);
    verify_shots = s.get_int("verify_shots", 2);
    const auto a = s.get_int("autotune", 0);
    require(a == 0 || a == 1, "autotune", "0 or 1", std::to_string(a));
    autotune = a == 1;
    require(nt >= 1, "nt", "at least 1", std::to_string(nt));
    require(nshots >= 1, "shots", "at least 1", std::to_string(nshots));
    require(nreceivers >= 0, "receivers", "0 or more", std::to_string(nreceivers));
    require(nreceivers <= shape[ndim - 1], "receivers",
            fmt::format("at most {} (one per cell along the surface)", shape[ndim - 1]),
            std::to_string(nreceivers));
    require(accuracy == 2 || accuracy == 4 || accuracy == 6 || accuracy == 8, "accuracy",
            "2, 4, 6 or 8", std::to_string(accuracy));
    require(pml_width >= 0 && pml_width <= 10000, "pml_width", "a width in [0, 10000] cells",
            std::to_string(pml_width));
    require(dt > 0, "dt", "a positive time step in seconds", fmt::format("{}", dt));
    require(spacing > 0, "spacing", "a positive grid spacing in metres",
            fmt::format("{}", spacing));
    require(freq > 0, "freq", "a positive frequency in Hz", fmt::format("{}", freq));
    require(verify_nt >= 1, "verify_nt", "at least 1", std::to_string(verify_nt));
    require(verify_shots >= 1, "verify_shots", "at least 1", std::to_string(verify_shots));
    if (is_born(kind))
      require(std::abs(scatter) < kVmin, "scatter",
              fmt::format("a finite velocity perturbation in m/s of magnitude below {} (the "
                          "slowest layer)",
                          kVmin),
              fmt::format("{}", scatter));
    // What a gradient stores; the options mean nothing to the other cases.
    sampling = s.get_int("gradient_sampling", 1);
    require(sampling >= 0, "gradient_sampling",
            "an interval of at least 1 inner step (0: the step ratio)", std::to_string(sampling));
    storage = parse_storage(s.get("storage", "device"));
    const auto c = s.get_int("storage_compression", 0);
    require(c == 0 || c == 1, "storage_compression", "0 or 1", std::to_string(c));
    compression = c == 1;
    storage_dir = s.get("storage_dir", "");
    if (storage == StorageMode::disk)
      storage_dir = detail::storage_directory(storage_dir, "storage_dir").string();
    for (const char* name : {"gradient_sampling", "storage", "storage_compression", "storage_dir"})
      require(gradient || !s.has(name), name, "a setting of the gradient cases only",
              s.get(name, ""));
    // The step ratio as the library will find it (max |v| of the array, in the dtype).
    Grid grid;
    grid.ndim = ndim;
    for (int d = 0; d < ndim; ++d) {
      grid.shape[d] = shape[d];
      grid.spacing[d] = spacing;
    }
    double vmax = 0;
    for (std::int64_t z = 0; z < shape[0]; ++z)
      vmax = std::max(vmax, elem == 4 ? double(float(layer_velocity(z))) : layer_velocity(z));
    const TimeStepping steps = cfl_time_stepping(grid, dt, vmax);
    step_ratio = steps.step_ratio;
    inner_dt = steps.inner_dt;
    check_memory(static_cast<double>(elem));
  }

  std::int64_t cells() const { return shape[0] * shape[1] * shape[2]; }
  std::int64_t store_interval() const { return sampling > 0 ? sampling : step_ratio; }
  std::int64_t window_nt() const { return std::min(nt, verify_nt); }
  std::int64_t window_shots() const { return std::min(nshots, verify_shots); }
  bool window_is_whole() const { return window_nt() == nt && window_shots() == nshots; }

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

  // Host memory before anything is allocated: the state (u, u_prev, psi, zeta per dimension)
  // twice (the backend's and the returned copy), the inputs and receivers, for a gradient the
  // adjoint state and what is stored in memory (the library's GradientStore: one record of the
  // padded grid per stored inner step and shot, or one byte per cell and one scale per block of
  // 8 cells along each dimension compressed; on disk only a chunk at a time, not counted).
  void check_memory(double elem) {
    double padded = 1, blocks = 1;
    for (int d = 0; d < ndim; ++d) {
      const auto n = shape[d] + 2 * pml_width + accuracy;
      padded *= static_cast<double>(n);
      blocks *= static_cast<double>((n + 7) / 8);
    }
    const double fields = is_born(kind) ? 2 : 1;
    const double state = fields * (2 + 2 * ndim) * padded * double(nshots) * elem;
    const double traces = elem * double(nshots) * (fields * double(nreceivers) + 1) * double(nt);
    host_bytes = 2 * state + 2 * traces + elem * double(cells()) * 2 * fields;
    if (is_gradient(kind)) {
      host_bytes += 2 * state;
      if (storage == StorageMode::device || storage == StorageMode::host) {
        const std::int64_t inner = nt * step_ratio;
        const double nstored = double((inner + store_interval() - 1) / store_interval());
        stored_bytes =
            nstored * double(nshots) * (compression ? padded + blocks * elem : padded * elem);
      }
    }
    host_bytes += stored_bytes;
    require_case_memory(
        host_bytes, "shape, nt, shots",
        fmt::format("{}-D {} cells, {} shots, nt {} ({})", ndim, shape_label(), nshots, nt,
                    elem == 4 ? "float32" : "float64"),
        stored_bytes > 0
            ? fmt::format("; {} of it is what the gradient stores (every {} inner step{} of {}): "
                          "use storage=disk, storage_compression=1 or a larger gradient_sampling",
                          format_bytes(stored_bytes), store_interval(),
                          store_interval() == 1 ? "" : "s", nt * step_ratio)
            : std::string());
  }

  // The stored steps stay in host memory; the cuda backend keeps them on the GPU only when they
  // fit, and streams them through a ring of snapshots otherwise.
  void check_gpu_memory(const Device& device, double elem) const {
    const auto gpus = cuda_devices();
    if (device.index >= static_cast<int>(gpus.size()) || gpus[device.index].memory_gib <= 0) return;
    const double on_gpu = (host_bytes - stored_bytes) / 2;
    if (on_gpu > 0.9 * gpus[device.index].memory_gib * kGiB)
      throw InvalidArgument(fmt::format(
          "shape, nt, shots: {}-D {} cells, {} shots ({}) needs about {} of memory on {} ({}), "
          "which has {:.1f} GiB",
          ndim, shape_label(), nshots, elem == 4 ? "float32" : "float64", format_bytes(on_gpu),
          device.name(), gpus[device.index].name, gpus[device.index].memory_gib));
  }
};

// Cell index of item i of n spread evenly over [0, size).
std::int64_t spread(std::int64_t i, std::int64_t n, std::int64_t size) {
  return std::clamp<std::int64_t>((2 * i + 1) * size / (2 * n), 0, size - 1);
}

// The arrays of the problem, or of its verification window (the first nshots shots, nt
// samples); the inputs only point into them.
template <class T>
struct Problem {
  Grid grid;
  std::vector<T> v, amplitudes, scatter;
  std::vector<std::int64_t> sources, receivers;
  const Spec* spec;
  std::int64_t nshots, nt;

  Problem(const Spec& s, std::int64_t shots, std::int64_t samples)
      : spec(&s), nshots(shots), nt(samples) {
    grid.ndim = s.ndim;
    for (int d = 0; d < s.ndim; ++d) {
      grid.shape[d] = s.shape[d];
      grid.spacing[d] = s.spacing;
    }
    const std::int64_t per_depth = s.cells() / s.shape[0];
    v.resize(static_cast<std::size_t>(s.cells()));
    for (std::int64_t z = 0; z < s.shape[0]; ++z)
      std::fill_n(v.begin() + z * per_depth, per_depth, static_cast<T>(s.layer_velocity(z)));
    if (is_born(s.kind)) {
      scatter.assign(v.size(), T(0));
      const auto b = s.box_begin(), e = s.box_end();
      // Unused dimensions have extent 1 and box [0, 1), so one triple loop serves 1-, 2- and 3-D.
      for (std::int64_t i = b[0]; i < e[0]; ++i)
        for (std::int64_t j = b[1]; j < e[1]; ++j)
          for (std::int64_t k = b[2]; k < e[2]; ++k)
            scatter[static_cast<std::size_t>((i * s.shape[1] + j) * s.shape[2] + k)] =
                static_cast<T>(s.scatter);
    }
    const std::vector<T> wavelet = seismic::ricker_wavelet<T>(s.freq, s.dt, nt, 1.5 / s.freq);
    for (std::int64_t shot = 0; shot < nshots; ++shot)
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
    // Shot positions are those of the whole problem, so a window's shots are its first shots.
    for (std::int64_t shot = 0; shot < nshots; ++shot) {
      place(sources, s.source_depth, s.ndim == 1 ? s.source_depth : spread(shot, s.nshots, along));
      for (std::int64_t r = 0; r < s.nreceivers; ++r)
        place(receivers, Spec::kReceiverDepth, spread(r, s.nreceivers, along));
    }
  }

  ScalarInput<T> input() const {
    ScalarInput<T> in;
    in.grid = grid;
    in.v = v;
    in.dt = spec->dt;
    in.nt = nt;
    in.nshots = nshots;
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

// The loss of a gradient case, 0.5 ||receivers||^2 (Born: 0.5 ||Born data||^2 + 0.5
// ||background data||^2): its receiver gradients are the data themselves, inputs of the call,
// computed untimed. The timed calls take the device's own data; the verification window takes
// the reference backend's, so that both sides get the same. The harness builds the case once for
// the reference and once per device, so the window's data are kept per settings for the life of
// the process (they are small: shots x receivers x nt).
template <class T>
struct Data {
  std::vector<T> receivers, bg_receivers;
};

template <class T>
Data<T> forward_data(const Device& device, const Spec& s, const Problem<T>& p,
                     const ScalarOptions& options) {
  Data<T> d;
  if (is_born(s.kind)) {
    auto out = scalar_born<T>(device, p.born_input(), options);
    d.receivers = std::move(out.receiver_amplitudes);
    d.bg_receivers = std::move(out.bg_receiver_amplitudes);
  } else {
    d.receivers = scalar<T>(device, p.input(), options).receiver_amplitudes;
  }
  return d;
}

// The options on this process alone: the reference window's data, cached per process, are
// computed by each rank for itself (a collective call there would wait for ranks that found
// them in their cache).
ScalarOptions one_process(ScalarOptions options) {
  options.comm = Communicator();
  return options;
}

template <class T>
const Data<T>& reference_window_data(const CaseSettings& settings, const Spec& s,
                                     const Problem<T>& window, const ScalarOptions& options) {
  static std::mutex mutex;
  static std::map<std::pair<int, std::map<std::string, std::string>>, Data<T>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(static_cast<int>(s.kind), settings.values);
  auto it = cache.find(key);
  if (it == cache.end())
    it =
        cache
            .emplace(key, forward_data<T>(Device{Backend::reference, 0, false}, s, window, options))
            .first;
  return it->second;  // map nodes do not move
}

using Clock = std::chrono::steady_clock;

template <class T>
class ScalarCase final : public Case {
 public:
  ScalarCase(const CaseSettings& s, Kind kind)
      : settings_(s), spec_(s, kind, sizeof(T)), problem_(spec_, spec_.nshots, spec_.nt) {
    options_.accuracy = spec_.accuracy;
    options_.pml_width.fill(spec_.pml_width);
    options_.pml_freq = spec_.freq;
    options_.autotune = spec_.autotune;
    if (is_gradient(kind)) {
      options_.model_gradient_sampling_interval = spec_.store_interval();
      options_.storage = spec_.storage;
      options_.storage_compression = spec_.compression;
      options_.storage_directory = spec_.storage_dir;
    }
  }

  std::string kernel() const override {
    switch (spec_.kind) {
      case Kind::forward:
        return "scalar";
      case Kind::gradient:
        return "scalar_gradient";
      case Kind::born:
        return "scalar_born";
      case Kind::born_gradient:
        return "scalar_born_gradient";
    }
    return "?";
  }
  std::string label() const override {
    std::string text = fmt::format(
        "{}-D {} cells ({} m), {} shot{} x {} receivers, nt {} (dt {} s), accuracy {}, {}",
        spec_.ndim, spec_.shape_label(), spec_.spacing, spec_.nshots, spec_.nshots == 1 ? "" : "s",
        spec_.nreceivers, spec_.nt, spec_.dt, spec_.accuracy, dtype_name());
    if (is_born(spec_.kind)) text += "; scatter " + scatter_label();
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
    p.set("source_depth", static_cast<long long>(spec_.source_depth));
    p.set("dtype", dtype_name());
    p.set("gradient", is_gradient(spec_.kind));
    p.set("born", is_born(spec_.kind));
    p.set("step_ratio", static_cast<long long>(spec_.step_ratio));
    p.set("autotune", spec_.autotune);
    if (is_gradient(spec_.kind)) {
      // The interval in inner steps (as the library's model_gradient_sampling_interval counts
      // them) and whether it is the step ratio by default.
      const bool none = spec_.storage == StorageMode::none;
      const nlohmann::json g = {
          {"sampling_interval",
           none ? nlohmann::json(nullptr) : nlohmann::json(spec_.store_interval())},
          {"sampling_default", spec_.sampling == 0},
          {"storage", storage_name(spec_.storage)},
          {"compression", spec_.compression}};
      p.set_json("gradient_storage", g.dump());
      if (spec_.storage == StorageMode::disk) p.set("storage_dir", spec_.storage_dir);
    }
    if (is_born(spec_.kind)) {
      const auto b = spec_.box_begin(), e = spec_.box_end();
      const nlohmann::json sc = {
          {"value", spec_.scatter},
          {"box_begin", std::vector<std::int64_t>(b.begin(), b.begin() + spec_.ndim)},
          {"box_end", std::vector<std::int64_t>(e.begin(), e.begin() + spec_.ndim)}};
      p.set_json("scatter", sc.dump());
    }
    return p;
  }
  WorkModel work() const override { return work_; }

  // The timed call; a gradient's data come first, untimed, so the call times itself.
  double run(const Device& device, Timers* timers) override {
    if (device.backend == Backend::cuda) spec_.check_gpu_memory(device, sizeof(T));
    if (is_gradient(spec_.kind) && !data_)
      data_ = std::make_unique<Data<T>>(forward_data<T>(device, spec_, problem_, options_));
    const auto t0 = Clock::now();
    call(device, problem_, data_.get(), timers);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

  void run_reference_window() override { run_window(Device{Backend::reference, 0, false}); }
  void run_device_window(const Device& device) override {
    if (spec_.window_is_whole() && !is_gradient(spec_.kind)) return;  // the last timed call's
    const WorkModel timed = work_;
    const auto storage_bytes = storage_bytes_;
    run_window(device);
    work_ = timed;  // the report is the timed calls'
    storage_bytes_ = storage_bytes;
  }

  std::vector<CaseOutput> outputs() const override {
    std::vector<CaseOutput> out;
    for (const auto& [name, values] : outputs_)
      if (!values.empty()) out.push_back({name, std::span<const T>(values)});
    return out;
  }

  Tolerance tolerance(const std::string& output) const override {
    return output_tolerance(spec_.kind, precision(), compressed(), output);
  }

  // The shots split across the ranks; every rank receives the whole outputs (the gradients'
  // receiver data are every rank's input), and rank 0 verifies them.
  void distribute(const Communicator& comm) override { options_.comm = comm; }

  Parameters details(const KernelReport& report) const override {
    Parameters d;
    d.set("step_ratio", static_cast<long long>(spec_.step_ratio));
    d.set("inner_dt", spec_.inner_dt);
    d.set("storage_bytes", storage_bytes_);
    d.set("gpts", report.rates.gpoints_per_s);
    const bool verified = report.verification.has_value();
    nlohmann::json checks = nlohmann::json::object();
    for (const auto& c : report.checks) checks[c.output] = to_json(c);
    nlohmann::json scope = {
        {"samples", verified ? spec_.window_nt() : 0},
        {"shots", verified ? spec_.window_shots() : 0},
        {"inner_steps", verified ? spec_.window_nt() * spec_.step_ratio : 0},
        {"tolerance_rel_l2", scalar_tolerance(precision(), is_born(spec_.kind)).rel_l2},
        {"checks", checks}};
    if (compressed())
      scope["tolerance_rel_l2_stored"] =
          scalar_compressed_tolerance(precision(), is_born(spec_.kind)).rel_l2;
    d.set_json("verification_scope", scope.dump());
    return d;
  }

 private:
  static constexpr Precision precision() {
    return sizeof(T) == 4 ? Precision::fp32 : Precision::fp64;
  }
  static const char* dtype_name() { return sizeof(T) == 4 ? "float32" : "float64"; }
  bool compressed() const {
    return is_gradient(spec_.kind) && spec_.compression && spec_.storage != StorageMode::none;
  }
  std::string scatter_label() const {
    const auto b = spec_.box_begin(), e = spec_.box_end();
    std::vector<std::string> parts;
    for (int d = 0; d < spec_.ndim; ++d) parts.push_back(fmt::format("[{}, {})", b[d], e[d]));
    return fmt::format("{:+} m/s in cells {}", spec_.scatter, fmt::join(parts, " x "));
  }

  void run_window(const Device& device) {
    if (!window_)
      window_ = std::make_unique<Problem<T>>(spec_, spec_.window_shots(), spec_.window_nt());
    const Data<T>* data = nullptr;
    if (is_gradient(spec_.kind))
      data = &reference_window_data<T>(settings_, spec_, *window_, one_process(options_));
    call(device, *window_, data, nullptr);
  }

  void call(const Device& device, const Problem<T>& p, const Data<T>* data, Timers* timers) {
    outputs_.clear();
    switch (spec_.kind) {
      case Kind::forward: {
        auto out = scalar<T>(device, p.input(), options_, nullptr, timers);
        work_ = out.work;
        outputs_.push_back({"receiver_amplitudes", std::move(out.receiver_amplitudes)});
        // The final wavefield checks every cell, not only the receivers' lines.
        outputs_.push_back({"wavefield", std::move(out.state.wavefield)});
        break;
      }
      case Kind::born: {
        auto out = scalar_born<T>(device, p.born_input(), options_, nullptr, nullptr, timers);
        work_ = out.work;
        outputs_.push_back({"receiver_amplitudes", std::move(out.receiver_amplitudes)});
        outputs_.push_back({"bg_receiver_amplitudes", std::move(out.bg_receiver_amplitudes)});
        outputs_.push_back({"scattered_wavefield", std::move(out.scattered_state.wavefield)});
        break;
      }
      case Kind::gradient: {
        auto g = scalar_gradient<T>(device, p.input(), options_,
                                    std::span<const T>(data->receivers), nullptr, nullptr, timers);
        work_ = g.work;  // the forward pass (with its stores) and its adjoint
        storage_bytes_ = g.forward.storage_bytes;
        outputs_.push_back({"grad_v", std::move(g.v)});
        outputs_.push_back({"grad_source_amplitudes", std::move(g.source_amplitudes)});
        break;
      }
      case Kind::born_gradient: {
        auto g = scalar_born_gradient<T>(
            device, p.born_input(), options_, std::span<const T>(data->receivers),
            std::span<const T>(data->bg_receivers), true, nullptr, timers);
        // The image (the background forward pass and its adjoint) and the source gradient (the
        // adjoint of the coupled fields).
        work_ = g.work;
        storage_bytes_ = g.forward.storage_bytes;
        outputs_.push_back({"grad_scatter", std::move(g.scatter)});
        outputs_.push_back({"grad_source_amplitudes", std::move(g.source_amplitudes)});
        break;
      }
    }
  }

  struct Output {
    std::string name;
    std::vector<T> values;
  };

  CaseSettings settings_;
  Spec spec_;
  Problem<T> problem_;
  std::unique_ptr<Problem<T>> window_;
  ScalarOptions options_;
  std::unique_ptr<Data<T>> data_;  // the timed calls' receiver gradients (gradient cases)
  WorkModel work_;
  double storage_bytes_ = 0;
  std::vector<Output> outputs_;
};

// The gradient demos run in float64: their adjoint sums are compared at 1e-12 and 1e-11.
std::string dtype_setting(const CaseSettings& s, Kind kind) {
  return s.get("dtype", is_gradient(kind) ? "float64" : "float32");
}

template <Kind kind>
Tolerance entry_tolerance(const CaseSettings& s, const std::string& output) {
  const bool compressed = is_gradient(kind) && s.get_int("storage_compression", 0) == 1 &&
                          s.get("storage", "device") != "none";
  return output_tolerance(kind,
                          dtype_setting(s, kind) == "float64" ? Precision::fp64 : Precision::fp32,
                          compressed, output);
}

template <Kind kind>
std::unique_ptr<Case> make(const CaseSettings& s) {
  const std::string dtype = dtype_setting(s, kind);
  if (dtype == "float32") return std::make_unique<ScalarCase<float>>(s, kind);
  require(dtype == "float64", "dtype", "float32 or float64", fmt::format("\"{}\"", dtype));
  return std::make_unique<ScalarCase<double>>(s, kind);
}

// What users run: 2-D sections and 3-D cubes at accuracies 4 and 8, in float32, each point a
// fraction of a second on two cores.
std::vector<CaseSettings> scalar_sweep() {
  std::vector<CaseSettings> sweep;
  for (const char* accuracy : {"4", "8"}) {
    sweep.push_back(CaseSettings{{{"ndim", "2"},
                                  {"shape0", "200"},
                                  {"shape1", "200"},
                                  {"nt", "100"},
                                  {"shots", "2"},
                                  {"receivers", "100"},
                                  {"accuracy", accuracy}}});
    sweep.push_back(CaseSettings{{{"ndim", "3"},
                                  {"shape0", "48"},
                                  {"shape1", "48"},
                                  {"shape2", "48"},
                                  {"nt", "20"},
                                  {"shots", "1"},
                                  {"receivers", "24"},
                                  {"accuracy", accuracy}}});
  }
  return sweep;
}

}  // namespace

void register_cases(std::vector<CaseEntry>& registry) {
  registry.push_back({"scalar",
                      "wave",
                      "scalar wave forward modelling of a layered model (Deepwave's scalar)",
                      make<Kind::forward>,
                      {CaseSettings{}},
                      scalar_sweep()});
  registry.push_back({"scalar_gradient",
                      "wave",
                      "forward + adjoint: gradient with respect to velocity and source amplitudes",
                      make<Kind::gradient>,
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
  registry[registry.size() - 4].tolerance = entry_tolerance<Kind::forward>;
  registry[registry.size() - 3].tolerance = entry_tolerance<Kind::gradient>;
  registry[registry.size() - 2].tolerance = entry_tolerance<Kind::born>;
  registry[registry.size() - 1].tolerance = entry_tolerance<Kind::born_gradient>;
}

}  // namespace sciproxy::wave
