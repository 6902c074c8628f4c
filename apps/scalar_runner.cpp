// Synthetic scalar-wave problems and their timed, verified runs (shared by scalar, bench, demo).
#include "scalar_runner.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numbers>
#include <ostream>
#include <span>

#include "sciproxy/core/error.hpp"
#include "sciproxy/core/verify.hpp"
#include "wave/case.hpp"

namespace sciproxy::app {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMaxProblemBytes = 64 * kGiB;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::int64_t padded_cells(const ScalarSpec& spec) {
  std::int64_t n = 1;
  for (int d = 0; d < spec.ndim; ++d) n *= spec.shape[d] + 2 * spec.pml_width + spec.accuracy;
  return n;
}

// Velocity of the layer holding depth cell z (make_problem's model).
double layer_velocity(const ScalarSpec& spec, std::int64_t z) {
  const std::int64_t depth = spec.shape[0];
  const int layer = static_cast<int>(std::min<std::int64_t>(z * spec.layers / depth, spec.layers - 1));
  return spec.layers > 1 ? spec.vmin + (spec.vmax - spec.vmin) * layer / (spec.layers - 1)
                         : spec.vmin;
}

// Bytes the gradient's store keeps in host memory (the library's GradientStore): one record per
// stored inner step and shot, of the padded grid, or compressed (one byte per cell and one scale
// per block of 8 cells along each dimension); on disk only a chunk at a time (not counted).
double stored_bytes_in_memory(const ScalarSpec& spec) {
  if (!spec.gradient || spec.storage == wave::StorageMode::none ||
      spec.storage == wave::StorageMode::disk)
    return 0;
  const double elem = static_cast<double>(dtype_size(spec.dtype));
  const std::int64_t interval = spec.store_interval();
  const std::int64_t inner = spec.nt * spec.step_ratio();
  const double nstored = static_cast<double>((inner + interval - 1) / interval);
  double record = static_cast<double>(padded_cells(spec)) * elem;
  if (spec.storage_compression) {
    double blocks = 1;
    for (int d = 0; d < spec.ndim; ++d)
      blocks *= static_cast<double>((spec.shape[d] + 2 * spec.pml_width + spec.accuracy + 7) / 8);
    record = static_cast<double>(padded_cells(spec)) + blocks * elem;
  }
  return nstored * static_cast<double>(spec.nshots) * record;
}

}  // namespace

std::int64_t ScalarSpec::cells() const {
  std::int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

double ScalarSpec::max_velocity() const {
  double vmax_seen = 0;
  for (std::int64_t z = 0; z < shape[0]; ++z) {
    const double v = layer_velocity(*this, z);
    // As the library sees it: max |v| of the array it is given, in dtype.
    vmax_seen = std::max(vmax_seen, dtype == Dtype::float32
                                        ? std::abs(static_cast<double>(static_cast<float>(v)))
                                        : std::abs(v));
  }
  return vmax_seen;
}

std::int64_t ScalarSpec::step_ratio() const {
  wave::Grid grid;
  grid.ndim = ndim;
  for (int d = 0; d < ndim; ++d) {
    grid.shape[d] = shape[d];
    grid.spacing[d] = spacing;
  }
  return wave::cfl_time_stepping(grid, dt, max_velocity()).step_ratio;
}

std::int64_t ScalarSpec::store_interval() const {
  return gradient_sampling > 0 ? gradient_sampling : step_ratio();
}

wave::StorageMode parse_storage_mode(const std::string& name, std::string_view option) {
  if (name == "device") return wave::StorageMode::device;
  if (name == "host") return wave::StorageMode::host;
  if (name == "disk") return wave::StorageMode::disk;
  if (name == "none") return wave::StorageMode::none;
  throw UsageError(
      fmt::format("{}: expected device, host, disk or none, got \"{}\"", option, name));
}

const char* storage_mode_name(wave::StorageMode mode) {
  switch (mode) {
    case wave::StorageMode::device: return "device";
    case wave::StorageMode::host: return "host";
    case wave::StorageMode::disk: return "disk";
    case wave::StorageMode::none: return "none";
  }
  return "?";
}

std::string gradient_storage_label(const ScalarSpec& spec) {
  if (spec.storage == wave::StorageMode::none)
    return fmt::format("nothing (--storage none: no {} gradient; the source gradient only)",
                       spec.born ? "scatter (image)" : "velocity");
  const std::int64_t ratio = spec.step_ratio();
  const std::int64_t interval = spec.store_interval();
  std::string why;
  if (spec.gradient_sampling == 0)
    why = fmt::format("the step ratio: once per sample of dt, as Deepwave; --gradient-sampling 1 "
                      "for the exact gradient of the discrete forward");
  else if (interval == 1)
    why = "--gradient-sampling 1: the exact gradient of the discrete forward";
  else
    why = fmt::format("--gradient-sampling {}; the step ratio is {}", interval, ratio);
  std::string where;
  switch (spec.storage) {
    case wave::StorageMode::device: where = "in the device's memory"; break;
    case wave::StorageMode::host: where = "in host memory"; break;
    case wave::StorageMode::disk:
      where = fmt::format("on disk in '{}'", spec.storage_directory);
      break;
    case wave::StorageMode::none: break;
  }
  return fmt::format("every {} inner step{} ({}), {}{}", interval, interval == 1 ? "" : "s", why,
                     where, spec.storage_compression ? ", compressed to 8 bits" : "");
}

nlohmann::json gradient_storage_json(const ScalarSpec& spec) {
  const bool none = spec.storage == wave::StorageMode::none;
  return {{"sampling_interval", none ? nlohmann::json(nullptr) : nlohmann::json(spec.store_interval())},
          {"sampling_default", spec.gradient_sampling == 0},
          {"storage", storage_mode_name(spec.storage)},
          {"compression", spec.storage_compression}};
}

void GradientStorageCli::add_to(CLI::App* sub) {
  sampling_option =
      sub->add_option(
             "--gradient-sampling", sampling,
             "With --gradient: store what the gradient needs every N inner time steps (the "
             "library's model_gradient_sampling_interval). Default: the step ratio, i.e. once per "
             "sample of --dt, as Deepwave does (Deepwave samples every step_ratio inner steps; "
             "its interval k is k x the step ratio here). 1: every inner step, the exact gradient "
             "of the discrete forward, at step ratio times the memory")
          ->type_name("N");
  storage_option =
      sub->add_option("--storage", storage,
                      "With --gradient: where the stored steps live: device (the memory of the "
                      "device that propagates; host memory for cpu), host (host memory, pinned "
                      "for cuda), disk (one file per shot in --storage-dir, removed afterwards), "
                      "none (nothing: no velocity gradient or image, the source gradient only)")
          ->type_name("MODE")
          ->capture_default_str();
  compression_option = sub->add_flag(
      "--storage-compression", compression,
      "With --gradient: compress the stored steps to 8 bits (one scale per block of 8 cells "
      "along each dimension): a quarter of the memory in float32, an eighth in float64; lossy");
  directory_option =
      sub->add_option("--storage-dir", directory,
                      "With --storage disk: an existing directory for the storage files")
          ->type_name("DIR")
          ->capture_default_str();
}

void GradientStorageCli::apply(ScalarSpec& spec, bool gradient) const {
  for (const CLI::Option* o : {sampling_option, storage_option, compression_option, directory_option})
    if (o && o->count() > 0 && !gradient)
      throw UsageError(fmt::format("{}: only used with --gradient (what the gradient stores)",
                                   o->get_name()));
  if (sampling_given() && sampling < 1)
    throw UsageError(fmt::format("--gradient-sampling: expected an interval of at least 1 inner "
                                 "step (1: every inner step, the exact gradient), got {}",
                                 sampling));
  spec.gradient_sampling = sampling_given() ? sampling : 0;
  spec.storage = parse_storage_mode(storage);
  spec.storage_compression = compression;
  spec.storage_directory = directory;
  if (directory_option && directory_option->count() > 0 && spec.storage != wave::StorageMode::disk)
    throw UsageError(fmt::format("--storage-dir: only used with --storage disk, got --storage {}",
                                 storage));
  if (spec.storage == wave::StorageMode::disk) {
    std::error_code ec;
    if (!std::filesystem::is_directory(directory, ec))
      throw UsageError(fmt::format("--storage-dir: expected an existing directory for --storage "
                                   "disk, got '{}'",
                                   directory));
  }
}

std::string ScalarSpec::label() const {
  return fmt::format("{}-D {} cells ({} m), {} shot{} x {} receivers, nt {} (dt {} s), accuracy {}",
                     ndim, fmt::join(shape, " x "), spacing, nshots, nshots == 1 ? "" : "s",
                     nreceivers, nt, dt, accuracy);
}

std::string ScalarSpec::kernel() const {
  if (born) return gradient ? "scalar_born_gradient" : "scalar_born";
  return gradient ? "scalar_gradient" : "scalar";
}

std::array<std::int64_t, 3> ScalarSpec::box_begin() const {
  std::array<std::int64_t, 3> b = {0, 0, 0};
  for (int d = 0; d < ndim && d < static_cast<int>(shape.size()); ++d)
    b[d] = shape[d] / 2 - shape[d] / 20;
  return b;
}

std::array<std::int64_t, 3> ScalarSpec::box_end() const {
  std::array<std::int64_t, 3> e = {1, 1, 1};
  for (int d = 0; d < ndim && d < static_cast<int>(shape.size()); ++d)
    e[d] = shape[d] / 2 + std::max<std::int64_t>(shape[d] / 20, 1);
  return e;
}

std::string ScalarSpec::scatter_label() const {
  const auto b = box_begin(), e = box_end();
  std::vector<std::string> parts;
  for (int d = 0; d < ndim; ++d) parts.push_back(fmt::format("[{}, {})", b[d], e[d]));
  return fmt::format("{:+} m/s in cells {}", scatter, fmt::join(parts, " x "));
}

// The family's tolerances (src/wave/case.hpp), by the CLI's dtype.
Tolerance scalar_tolerance(Dtype dtype, bool born) {
  return wave::scalar_tolerance(dtype == Dtype::float32 ? Precision::fp32 : Precision::fp64, born);
}

Tolerance scalar_compressed_tolerance(Dtype dtype, bool born) {
  return wave::scalar_compressed_tolerance(
      dtype == Dtype::float32 ? Precision::fp32 : Precision::fp64, born);
}

Tolerance scalar_state_tolerance(Dtype dtype, bool born) {
  return wave::scalar_state_tolerance(dtype == Dtype::float32 ? Precision::fp32 : Precision::fp64,
                                      born);
}

void check_scalar_spec(const ScalarSpec& spec, const std::vector<Device>& devices) {
  if (spec.ndim < 1 || spec.ndim > 3)
    throw UsageError(fmt::format("--ndim: expected 1, 2 or 3, got {}", spec.ndim));
  if (static_cast<int>(spec.shape.size()) != spec.ndim)
    throw UsageError(fmt::format("--shape: expected {} cell counts (one per dimension of --ndim "
                                 "{}), got {}",
                                 spec.ndim, spec.ndim, spec.shape.size()));
  for (std::size_t d = 0; d < spec.shape.size(); ++d)
    if (spec.shape[d] < 1 || spec.shape[d] > 1000000)
      throw UsageError(fmt::format("--shape: expected cell counts in [1, 1000000], got {} for "
                                   "dimension {}",
                                   spec.shape[d], d));
  if (!(spec.spacing > 0) || !std::isfinite(spec.spacing))
    throw UsageError(fmt::format("--spacing: expected a positive grid spacing in metres, got {}",
                                 spec.spacing));
  if (!(spec.dt > 0) || !std::isfinite(spec.dt))
    throw UsageError(fmt::format("--dt: expected a positive time step in seconds, got {}", spec.dt));
  if (spec.nt < 1) throw UsageError(fmt::format("--nt: expected at least 1, got {}", spec.nt));
  if (spec.nshots < 1)
    throw UsageError(fmt::format("--shots: expected at least 1, got {}", spec.nshots));
  if (spec.nreceivers < 0)
    throw UsageError(fmt::format("--receivers: expected 0 or more, got {}", spec.nreceivers));
  if (spec.accuracy != 2 && spec.accuracy != 4 && spec.accuracy != 6 && spec.accuracy != 8)
    throw UsageError(fmt::format("--accuracy: expected 2, 4, 6 or 8, got {}", spec.accuracy));
  if (spec.pml_width < 0 || spec.pml_width > 10000)
    throw UsageError(fmt::format("--pml-width: expected a width in [0, 10000] cells, got {}",
                                 spec.pml_width));
  if (!(spec.freq > 0) || !std::isfinite(spec.freq))
    throw UsageError(fmt::format("--freq: expected a positive frequency in Hz, got {}", spec.freq));
  if (spec.born && (!std::isfinite(spec.scatter) || std::abs(spec.scatter) >= spec.vmin))
    throw UsageError(fmt::format("--scatter: expected a finite velocity perturbation in m/s of "
                                 "magnitude below {} (the slowest layer), got {}",
                                 spec.vmin, spec.scatter));
  const std::int64_t along = spec.shape.back();
  if (spec.nreceivers > along)
    throw UsageError(fmt::format("--receivers: expected at most {} (one per cell along the "
                                 "surface), got {}",
                                 along, spec.nreceivers));

  // Memory before anything is allocated: the state (u, u_prev, psi, zeta per dimension) twice
  // (the backend's and the returned copy), the inputs, the receivers, and for a gradient the
  // stored history (one field per sample) and the adjoint state.
  const double elem = static_cast<double>(dtype_size(spec.dtype));
  // Born: a scattered state beside the background one, background receivers beside the
  // scattered ones, and the scatter beside v.
  const double fields = spec.born ? 2 : 1;
  const double state = fields * static_cast<double>(2 + 2 * spec.ndim) *
                       static_cast<double>(padded_cells(spec)) * static_cast<double>(spec.nshots) *
                       elem;
  const double traces = elem * static_cast<double>(spec.nshots) *
                        static_cast<double>(fields * spec.nreceivers + 1) *
                        static_cast<double>(spec.nt);
  double host = 2 * state + traces * 2 + elem * static_cast<double>(spec.cells()) * 2 * fields;
  if (spec.gradient) {
    if (spec.gradient_sampling < 0)
      throw UsageError(fmt::format("--gradient-sampling: expected at least 1, got {}",
                                   spec.gradient_sampling));
    host += 2 * state;
  }
  // What the gradient stores (every store_interval() inner steps, as the library counts them).
  const double stored = stored_bytes_in_memory(spec);
  host += stored;
  const double physical = physical_memory_bytes();
  const double limit = physical > 0 ? std::min(kMaxProblemBytes, 0.8 * physical) : kMaxProblemBytes;
  if (host > limit)
    throw UsageError(fmt::format(
        "{} ({}, {}) needs about {} of host memory; the limit is {} ({}){}", spec.label(),
        dtype_name(spec.dtype), spec.kernel(), format_bytes(host),
        format_bytes(limit), limit < kMaxProblemBytes ? "80% of this machine's memory" : "64 GiB",
        stored > 0 ? fmt::format("; {} of it is what the gradient stores (every {} inner step{} "
                                 "of {}): use --storage disk, --storage-compression or a larger "
                                 "--gradient-sampling",
                                 format_bytes(stored), spec.store_interval(),
                                 spec.store_interval() == 1 ? "" : "s",
                                 spec.nt * spec.step_ratio())
                   : std::string()));
  for (const Device& d : devices) {
    if (d.backend != Backend::cuda) continue;
    const auto gpus = cuda_devices();
    if (d.index >= static_cast<int>(gpus.size()) || gpus[d.index].memory_gib <= 0) continue;
    const double gpu_bytes = 0.9 * gpus[d.index].memory_gib * kGiB;
    // The stored steps are held in host memory; the cuda backend keeps them on the GPU only
    // when they fit, and streams them through a ring of snapshots otherwise.
    const double on_gpu = (host - stored) / 2;
    if (on_gpu > gpu_bytes)
      throw UsageError(fmt::format("{} ({}) needs about {} on {} ({}), which has {:.1f} GiB",
                                   spec.label(), dtype_name(spec.dtype), format_bytes(on_gpu),
                                   d.name(), gpus[d.index].name, gpus[d.index].memory_gib));
  }
}

std::string ScalarOutcome::verification_scope() const {
  if (verified_nt == 0) return "not verified";
  return fmt::format("shot{} 0{}, samples 0-{} ({} inner steps)", verified_shots == 1 ? "" : "s",
                     verified_shots == 1 ? "" : fmt::format("-{}", verified_shots - 1),
                     verified_nt - 1, verified_nt * step_ratio);
}

nlohmann::json ScalarOutcome::to_json() const {
  nlohmann::json j = sciproxy::to_json(report);
  j["bench"] = sciproxy::to_json(stats);
  j["step_ratio"] = step_ratio;
  j["inner_dt"] = inner_dt;
  j["storage_bytes"] = storage_bytes;
  j["gpts"] = gpts(stats.median);
  nlohmann::json checks_json = nlohmann::json::object();
  for (const auto& [name, c] : this->checks) checks_json[name] = sciproxy::to_json(c);
  j["verification_scope"] = {{"samples", verified_nt},
                             {"shots", verified_shots},
                             {"inner_steps", verified_nt * step_ratio},
                             {"tolerance_rel_l2",
                              scalar_tolerance(report.work.precision == Precision::fp32
                                                   ? Dtype::float32
                                                   : Dtype::float64,
                                               report.kernel.starts_with("scalar_born"))
                                  .rel_l2},
                             {"checks", checks_json}};
  // With compressed gradient storage: the tolerance of the outputs computed from the stored steps.
  const nlohmann::json p = sciproxy::to_json(report.parameters);
  if (p.is_object() && p.contains("gradient_storage") && p["gradient_storage"].value("compression", false) &&
      p["gradient_storage"].value("storage", "") != "none")
    j["verification_scope"]["tolerance_rel_l2_stored"] =
        scalar_compressed_tolerance(
            report.work.precision == Precision::fp32 ? Dtype::float32 : Dtype::float64,
            report.kernel.starts_with("scalar_born"))
            .rel_l2;
  return j;
}

namespace {

// The problem's arrays; ScalarInput only points into them.
template <class T>
struct Problem {
  wave::Grid grid;
  std::vector<T> v, amplitudes, scatter;
  std::vector<std::int64_t> sources, receivers;
  std::int64_t nshots = 0, nt = 0, nreceivers = 0;
  double dt = 0;

  wave::ScalarInput<T> input() const {
    wave::ScalarInput<T> in;
    in.grid = grid;
    in.v = v;
    in.nmodels = 1;
    in.dt = dt;
    in.nt = nt;
    in.nshots = nshots;
    in.nsources = 1;
    in.nreceivers = nreceivers;
    in.source_amplitudes = amplitudes;
    in.source_locations = sources;
    in.receiver_locations = receivers;
    return in;
  }

  // Born: the scattered field and the background field are both recorded at the receivers.
  wave::ScalarBornInput<T> born_input() const {
    wave::ScalarBornInput<T> in;
    in.background = input();
    in.scatter = scatter;
    in.nbg_receivers = nreceivers;
    in.bg_receiver_locations = receivers;
    return in;
  }
};

// Cell index of item i of n spread evenly over [0, size).
std::int64_t spread(std::int64_t i, std::int64_t n, std::int64_t size) {
  return std::clamp<std::int64_t>((2 * i + 1) * size / (2 * n), 0, size - 1);
}

template <class T>
Problem<T> make_problem(const ScalarSpec& spec, std::int64_t nshots, std::int64_t nt) {
  Problem<T> p;
  p.grid.ndim = spec.ndim;
  for (int d = 0; d < spec.ndim; ++d) {
    p.grid.shape[d] = spec.shape[d];
    p.grid.spacing[d] = spec.spacing;
  }
  p.nshots = nshots;
  p.nt = nt;
  p.dt = spec.dt;
  p.nreceivers = spec.nreceivers;
  const std::int64_t depth = spec.shape[0];
  const std::int64_t per_depth = spec.cells() / depth;
  p.v.resize(static_cast<std::size_t>(spec.cells()));
  for (std::int64_t z = 0; z < depth; ++z)
    std::fill_n(p.v.begin() + z * per_depth, per_depth, static_cast<T>(layer_velocity(spec, z)));
  if (spec.born) {
    // The scatter box, row-major like v.
    p.scatter.assign(p.v.size(), T(0));
    const auto b = spec.box_begin(), e = spec.box_end();
    std::array<std::int64_t, 3> n = {1, 1, 1};
    for (int d = 0; d < spec.ndim; ++d) n[3 - spec.ndim + d] = spec.shape[d];
    std::array<std::int64_t, 3> lo = {0, 0, 0}, hi = {1, 1, 1};
    for (int d = 0; d < spec.ndim; ++d) {
      lo[3 - spec.ndim + d] = b[d];
      hi[3 - spec.ndim + d] = e[d];
    }
    for (std::int64_t i = lo[0]; i < hi[0]; ++i)
      for (std::int64_t j = lo[1]; j < hi[1]; ++j)
        for (std::int64_t k = lo[2]; k < hi[2]; ++k)
          p.scatter[static_cast<std::size_t>((i * n[1] + j) * n[2] + k)] = static_cast<T>(spec.scatter);
  }
  // Ricker wavelet of peak frequency f, delayed by 1.5 / f.
  p.amplitudes.resize(static_cast<std::size_t>(nshots * nt));
  const double t0 = 1.5 / spec.freq;
  for (std::int64_t t = 0; t < nt; ++t) {
    const double a = std::numbers::pi * spec.freq * (static_cast<double>(t) * spec.dt - t0);
    const T w = static_cast<T>((1 - 2 * a * a) * std::exp(-a * a));
    for (std::int64_t s = 0; s < nshots; ++s) p.amplitudes[s * nt + t] = w;
  }
  const int nd = spec.ndim;
  const std::int64_t along = spec.shape.back();
  auto place = [&](std::vector<std::int64_t>& out, std::int64_t depth_cell, std::int64_t lateral) {
    if (nd == 1) {
      out.push_back(lateral);
      return;
    }
    out.push_back(depth_cell);
    if (nd == 3) out.push_back(spec.shape[1] / 2);
    out.push_back(lateral);
  };
  for (std::int64_t s = 0; s < nshots; ++s) {
    // 1-D: the source at source_depth, the receivers spread along the model.
    place(p.sources, spec.source_depth, nd == 1 ? spec.source_depth : spread(s, spec.nshots, along));
    for (std::int64_t r = 0; r < spec.nreceivers; ++r)
      place(p.receivers, spec.receiver_depth, spread(r, spec.nreceivers, along));
  }
  return p;
}

nlohmann::json parameters_of(const ScalarSpec& spec, int threads, const ScalarRunOptions& options,
                             std::int64_t step_ratio) {
  nlohmann::json j = {{"ndim", spec.ndim},
                      {"shape", spec.shape},
                      {"spacing", spec.spacing},
                      {"dt", spec.dt},
                      {"nt", spec.nt},
                      {"shots", spec.nshots},
                      {"receivers", spec.nreceivers},
                      {"accuracy", spec.accuracy},
                      {"pml_width", spec.pml_width},
                      {"pml_freq", spec.freq},
                      {"dtype", dtype_name(spec.dtype)},
                      {"gradient", spec.gradient},
                      {"born", spec.born},
                      {"step_ratio", step_ratio},
                      {"threads", threads},
                      {"warmup", options.warmup},
                      {"repetitions", options.reps}};
  if (spec.gradient) {
    // The interval in inner steps (as the library's model_gradient_sampling_interval counts
    // them) and whether it was the default (the step ratio).
    j["gradient_storage"] = gradient_storage_json(spec);
  }
  if (spec.born) {
    const auto b = spec.box_begin(), e = spec.box_end();
    j["scatter"] = {{"value", spec.scatter},
                    {"box_begin", std::vector<std::int64_t>(b.begin(), b.begin() + spec.ndim)},
                    {"box_end", std::vector<std::int64_t>(e.begin(), e.begin() + spec.ndim)}};
  }
  return j;
}

wave::ScalarOptions options_of(const ScalarSpec& spec, int threads) {
  wave::ScalarOptions o;
  o.accuracy = spec.accuracy;
  o.pml_width.fill(spec.pml_width);
  o.pml_freq = spec.freq;
  o.max_vel = 0;
  o.nparallel = threads;
  if (spec.gradient) {
    o.model_gradient_sampling_interval = spec.store_interval();
    o.storage = spec.storage;
    o.storage_compression = spec.storage_compression;
    o.storage_directory = spec.storage_directory;
  }
  return o;
}

// One output of a call, compared by name; `state`: a final wavefield (scalar_state_tolerance).
template <class T>
struct Output {
  const char* name;
  std::vector<T> values;
  bool state = false;
  bool stored = false;  // computed from the stored steps (scalar_compressed_tolerance)
};

// What one call produced, for verification, and the numbers its report needs.
template <class T>
struct Result {
  std::vector<Output<T>> outputs;
  std::int64_t step_ratio = 1;
  double inner_dt = 0;
  WorkModel work;
  double storage_bytes = 0;
};

// The gradients a gradient run is given (see receiver_gradients), and for Born the work of the
// coupled background + scattered pass (the source gradient's adjoint does as much).
template <class T>
struct Gradients {
  std::vector<T> receivers, bg_receivers;
  WorkModel born_work;
};

template <class T>
Result<T> run_once(const Device& device, const Problem<T>& problem, const ScalarSpec& spec,
                   const wave::ScalarOptions& opt, const Gradients<T>& grads, Timers* timers) {
  Result<T> r;
  if (spec.born && spec.gradient) {
    auto g = wave::scalar_born_gradient<T>(device, problem.born_input(), opt,
                                           std::span<const T>(grads.receivers),
                                           std::span<const T>(grads.bg_receivers), true, nullptr,
                                           timers);
    r.outputs.push_back({"grad_scatter", std::move(g.scatter), false, true});
    r.outputs.push_back({"grad_source_amplitudes", std::move(g.source_amplitudes)});
    r.step_ratio = g.forward.step_ratio;
    r.inner_dt = g.forward.inner_dt;
    r.storage_bytes = g.forward.storage_bytes;
    // The image: the background forward pass (with its stores) and its adjoint, about the same
    // work each; the source gradient: the adjoint of the coupled fields, as much as Born.
    r.work = g.forward.work;
    r.work.points = 2 * r.work.points + grads.born_work.points;
    r.work.flops = 2 * r.work.flops + grads.born_work.flops;
    r.work.bytes = 2 * r.work.bytes + grads.born_work.bytes;
  } else if (spec.born) {
    auto out = wave::scalar_born<T>(device, problem.born_input(), opt, nullptr, nullptr, timers);
    r.outputs.push_back({"receiver_amplitudes", std::move(out.receiver_amplitudes)});
    r.outputs.push_back({"bg_receiver_amplitudes", std::move(out.bg_receiver_amplitudes)});
    r.outputs.push_back({"scattered_wavefield", std::move(out.scattered_state.wavefield), true});
    r.step_ratio = out.step_ratio;
    r.inner_dt = out.inner_dt;
    r.work = out.work;
  } else if (spec.gradient) {
    auto g = wave::scalar_gradient<T>(device, problem.input(), opt,
                                      std::span<const T>(grads.receivers), nullptr, nullptr, timers);
    r.outputs.push_back({"grad_v", std::move(g.v), false, true});
    r.outputs.push_back({"grad_source_amplitudes", std::move(g.source_amplitudes)});
    r.step_ratio = g.forward.step_ratio;
    r.inner_dt = g.forward.inner_dt;
    r.storage_bytes = g.forward.storage_bytes;
    // The library's work model is that of the forward pass (with its stores); the adjoint
    // steps over the same points with about the same arithmetic and traffic (plus reading
    // back what was stored): count both.
    r.work = g.forward.work;
    r.work.points *= 2;
    r.work.flops *= 2;
    r.work.bytes *= 2;
  } else {
    auto out = wave::scalar<T>(device, problem.input(), opt, nullptr, timers);
    r.outputs.push_back({"receiver_amplitudes", std::move(out.receiver_amplitudes)});
    // The final wavefield gathers the rounding of every step everywhere (also where it is
    // small): it is held to scalar_state_tolerance.
    r.outputs.push_back({"wavefield", std::move(out.state.wavefield), true});
    r.step_ratio = out.step_ratio;
    r.inner_dt = out.inner_dt;
    r.work = out.work;
  }
  return r;
}

// The loss whose gradient a gradient run computes: 0.5 ||receivers - d||^2 with d = 0 (for Born
// 0.5 ||Born data||^2 + 0.5 ||background data||^2), so the receiver gradients are the data
// themselves; the forward pass that gives them is not timed.
template <class T>
Gradients<T> receiver_gradients(const Device& device, const Problem<T>& problem,
                                const ScalarSpec& spec, const wave::ScalarOptions& opt) {
  Gradients<T> g;
  if (!spec.gradient) return g;
  if (spec.born) {
    auto out = wave::scalar_born<T>(device, problem.born_input(), opt);
    g.receivers = std::move(out.receiver_amplitudes);
    g.bg_receivers = std::move(out.bg_receiver_amplitudes);
    g.born_work = out.work;
  } else {
    g.receivers = wave::scalar<T>(device, problem.input(), opt).receiver_amplitudes;
  }
  return g;
}

template <class T>
std::vector<ScalarOutcome> run_typed(const ScalarSpec& spec, const std::vector<Device>& devices,
                                     const ScalarRunOptions& options, std::ostream& log) {
  const Problem<T> problem = make_problem<T>(spec, spec.nshots, spec.nt);
  const int threads = effective_threads(options.threads);
  const wave::ScalarOptions opt = options_of(spec, options.threads);
  ThreadCount thread_count(options.threads);

  // Verification window, computed once on the reference for every device to match.
  const std::int64_t vnt = std::min(spec.nt, options.verify_nt > 0 ? options.verify_nt : 100);
  const std::int64_t vshots =
      std::min(spec.nshots, options.verify_shots > 0 ? options.verify_shots : 2);
  std::optional<Problem<T>> window;
  Gradients<T> window_grads;
  Result<T> expected;
  const bool any_to_verify =
      options.verify && std::any_of(devices.begin(), devices.end(), [](const Device& d) {
        return d.backend != Backend::reference;
      });
  if (any_to_verify) {
    window = make_problem<T>(spec, vshots, vnt);
    const Device ref{Backend::reference, 0, false};
    window_grads = receiver_gradients<T>(ref, *window, spec, opt);
    log << fmt::format("Verification: the reference runs shots 0-{} for samples 0-{} ...\n",
                       vshots - 1, vnt - 1);
    log.flush();
    const auto t0 = std::chrono::steady_clock::now();
    expected = run_once<T>(ref, *window, spec, opt, window_grads, nullptr);
    log << fmt::format("Verification: reference done in {:.2f} s\n", seconds_since(t0));
  }

  std::vector<ScalarOutcome> outcomes;
  for (const Device& device : devices) {
    ScalarOutcome out;
    KernelReport& report = out.report;
    report.kernel = spec.kernel();
    report.device = device;
    report.roofline = roofline_for(device, threads, options.roofline, log);
    const Gradients<T> grads = receiver_gradients<T>(device, problem, spec, opt);

    int call = 0;
    Result<T> last;
    auto once = [&]() -> double {
      if (call++ == options.warmup) report.timers.clear();  // the table shows timed calls only
      const auto t0 = std::chrono::steady_clock::now();
      last = run_once<T>(device, problem, spec, opt, grads, &report.timers);
      return seconds_since(t0);
    };
    out.stats = run_benchmark(once, options.warmup, options.reps);
    out.step_ratio = last.step_ratio;
    out.inner_dt = last.inner_dt;
    out.storage_bytes = last.storage_bytes;
    report.work = last.work;
    report.parameters = parameters_from_json(parameters_of(
        spec, device.backend == Backend::reference ? 1 : threads, options, out.step_ratio));
    report.seconds = out.stats.median;
    report.rates = derive_rates(report.work, report.seconds, report.roofline);

    if (any_to_verify && device.backend != Backend::reference) {
      const Result<T> got = run_once<T>(device, *window, spec, opt, window_grads, nullptr);
      for (std::size_t i = 0; i < got.outputs.size(); ++i) {
        const Output<T>& g = got.outputs[i];
        const Output<T>& e = expected.outputs[i];
        const Tolerance tol =
            g.state ? scalar_state_tolerance(spec.dtype, spec.born)
            : g.stored && spec.storage_compression && spec.storage != wave::StorageMode::none
                ? scalar_compressed_tolerance(spec.dtype, spec.born)
                : scalar_tolerance(spec.dtype, spec.born);
        out.checks.emplace_back(g.name, compare<T, T>(std::span<const T>(g.values),
                                                      std::span<const T>(e.values), tol));
      }
      // The report shows the first failing check, else the first (the primary output).
      const auto failing = std::find_if(out.checks.begin(), out.checks.end(),
                                        [](const auto& c) { return !c.second.pass; });
      report.verification = (failing != out.checks.end() ? failing : out.checks.begin())->second;
      out.verified_nt = vnt;
      out.verified_shots = vshots;
    }
    outcomes.push_back(std::move(out));
  }
  return outcomes;
}

}  // namespace

std::vector<ScalarOutcome> run_scalar(const ScalarSpec& spec, const std::vector<Device>& devices,
                                      const ScalarRunOptions& options, std::ostream& log) {
  return spec.dtype == Dtype::float32 ? run_typed<float>(spec, devices, options, log)
                                      : run_typed<double>(spec, devices, options, log);
}

}  // namespace sciproxy::app
