// The stack family's cases for the harness (core/harness.hpp): a synthetic problem the way a
// detector sees one, N traces of nsamples samples starting at 0, each shift set a row of integer
// delays in [shift_min, shift_max] (default +-nsamples/10) with positive weights. The delays are
// drawn at random (shifts=uniform, the default) or are the moveouts of a station network
// (shifts=moveout: stations at random in a square, one candidate source per shift set on a grid
// over it, delays proportional to the distance, so neighbouring shift sets differ a little).
// Settings: ntraces, nshifts, nsamples, shift_min, shift_max, shifts, seed, method (0 or 1), clamp
// (1: method 1 with pyrocko's max(0, ...) quirk), dtype, and verify_macs: above this many
// multiply-adds the reference (a serial loop) would take long, so it runs an even spread of the
// shift sets only and the outputs compared are those rows; autotune (1: the cpu backend's chunk
// chosen by timing, sciproxy/core/autotune.hpp) and chunk_samples (the chunk given; 0: default).
#include "case.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/json.hpp"
#include "sciproxy/core/bench.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"
#include "sciproxy/core/resources.hpp"
#include "sciproxy/stack.hpp"

namespace sciproxy::stack {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Sample indices are int32 (pyrocko's offsets and shifts are); keep every shifted trace inside.
constexpr std::int64_t kIndexLimit = std::numeric_limits<std::int32_t>::max() / 2;

// Uniform doubles from the raw 64-bit stream, so the problem for a seed is the same with any
// standard library (std::uniform_*_distribution is implementation-defined).
struct Random {
  std::mt19937_64 engine;
  double uniform() { return static_cast<double>(engine() >> 11) * 0x1.0p-53; }  // [0, 1)
  std::int64_t integer(std::int64_t lo, std::int64_t hi) {                      // [lo, hi]
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    return lo + static_cast<std::int64_t>(engine() % span);
  }
};

// The sizes, read and checked before anything is allocated.
struct Sizes {
  std::int64_t ntraces, nshifts, nsamples, lo, hi, seed, rows;
  int method;
  bool clamp, autotune, moveout;
  std::int64_t chunk_samples;
  double elem, inputs, result;  // bytes

  Sizes(const CaseSettings& s, std::size_t elem_size) {
    s.check_known({"ntraces", "nshifts", "nsamples", "shift_min", "shift_max", "shifts", "seed",
                   "method", "clamp", "dtype", "verify_macs", "autotune", "chunk_samples"});
    ntraces = s.get_int("ntraces", 30);
    nshifts = s.get_int("nshifts", 1000);
    nsamples = s.get_int("nsamples", 6000);
    require(ntraces >= 1, "ntraces", "at least 1", std::to_string(ntraces));
    require(nshifts >= 1, "nshifts", "at least 1", std::to_string(nshifts));
    require(nsamples >= 1, "nsamples", "at least 1", std::to_string(nsamples));
    require(nsamples <= kIndexLimit, "nsamples", fmt::format("at most {}", kIndexLimit),
            std::to_string(nsamples));
    lo = s.get_int("shift_min", -(nsamples / 10));
    hi = s.get_int("shift_max", nsamples / 10);
    require(lo <= hi, "shift_min", fmt::format("at most shift_max ({})", hi), std::to_string(lo));
    require(lo >= -kIndexLimit && hi <= kIndexLimit, "shift_min, shift_max",
            fmt::format("shifts within +-{}", kIndexLimit), fmt::format("[{}, {}]", lo, hi));
    const std::string model = s.get("shifts", "uniform");
    require(model == "uniform" || model == "moveout", "shifts", "uniform or moveout",
            fmt::format("\"{}\"", model));
    moveout = model == "moveout";
    seed = s.get_int("seed", 1);
    require(seed >= 0, "seed", "0 or a positive integer", std::to_string(seed));
    const auto m = s.get_int("method", 0);
    require(m == 0 || m == 1, "method", "0 (stack) or 1 (maximum of the stack)", std::to_string(m));
    method = static_cast<int>(m);
    const auto c = s.get_int("clamp", 0);
    require(c == 0 || c == 1, "clamp", "0 or 1", std::to_string(c));
    clamp = c == 1;
    const auto a = s.get_int("autotune", 0);
    require(a == 0 || a == 1, "autotune", "0 or 1", std::to_string(a));
    autotune = a == 1;
    chunk_samples = s.get_int("chunk_samples", 0);  // checked by parstack itself
    const double max_macs = s.get_real("verify_macs", 2e9);
    require(max_macs > 0, "verify_macs", "a positive count", fmt::format("{}", max_macs));
    const double macs = double(ntraces) * double(nshifts) * double(nsamples);
    rows = macs <= max_macs
               ? nshifts
               : std::clamp<std::int64_t>(
                     static_cast<std::int64_t>(double(nshifts) * (max_macs / macs)), 1, nshifts);
    // Memory: traces, shifts and weights, the result, and the reference's rows with their copy.
    elem = static_cast<double>(elem_size);
    const double per_set = method == 0 ? double(nsamples) + double(hi - lo) : 1.0;
    const double terms = double(ntraces) * double(nshifts);
    inputs = elem * double(ntraces) * double(nsamples) + (4 + elem) * terms;
    result = elem * double(nshifts) * per_set;
    const double host =
        inputs + result + 2 * elem * double(rows) * per_set + (4 + elem) * double(ntraces * rows);
    require_case_memory(host, "ntraces, nshifts, nsamples",
                        fmt::format("{} traces x {} shift sets x {} samples ({})", ntraces, nshifts,
                                    nsamples, elem == 4 ? "float32" : "float64"),
                        fmt::format("; the result alone is {}", format_bytes(result)));
  }
};

double region_total(const Timers* timers, const char* leaf) {
  if (!timers) return 0;
  const Timers::Stat* s = timers->find(fmt::format("parstack/{}", leaf));
  return s ? s->total : 0.0;
}

template <class T>
class ParstackCase final : public Case {
 public:
  explicit ParstackCase(const CaseSettings& s) : n_(s, sizeof(T)) {
    options_.method = n_.method == 0 ? Method::stack : Method::max;
    options_.clamp_max_at_zero = n_.clamp;
    options_.autotune = n_.autotune;
    options_.chunk_samples = n_.chunk_samples;
    Random rng{std::mt19937_64(static_cast<std::uint64_t>(n_.seed))};
    // Zero-mean noise in [-1, 1): seismograms are signed, so the stack is not trivially monotone.
    data_.resize(n_.ntraces);
    for (auto& trace : data_) {
      trace.resize(n_.nsamples);
      for (auto& x : trace) x = static_cast<T>(2 * rng.uniform() - 1);
    }
    for (const auto& trace : data_) traces_.emplace_back(trace);
    offsets_.assign(n_.ntraces, 0);
    shifts_.resize(n_.ntraces * n_.nshifts);
    weights_.resize(n_.ntraces * n_.nshifts);
    if (n_.moveout)
      moveout_shifts(rng);
    else
      for (auto& v : shifts_) v = static_cast<std::int32_t>(rng.integer(n_.lo, n_.hi));
    for (auto& w : weights_) w = static_cast<T>(0.1 + 0.9 * rng.uniform());  // positive, never 0
    extent_ = parstack_extent(input(), options_);
    for (std::int64_t j = 0; j < n_.rows; ++j) rows_.push_back(j * n_.nshifts / n_.rows);
    // The result keeps pyrocko's default window; the reference's rows are computed in that same
    // window, so they line up.
    window_options_ = options_;
    window_options_.lengthout = extent_.lengthout;
    window_options_.offsetout = extent_.offsetout;
    result_.resize(parstack_result_size(n_.nshifts, extent_, options_.method));
  }

  std::string kernel() const override { return "parstack"; }
  std::string label() const override {
    return fmt::format("{} traces x {} shift sets x {} samples, method {}, {}", n_.ntraces,
                       n_.nshifts, n_.nsamples, n_.method, sizeof(T) == 4 ? "float32" : "float64");
  }
  Parameters parameters() const override {
    Parameters p;
    p.set("ntraces", static_cast<long long>(n_.ntraces));
    p.set("nshifts", static_cast<long long>(n_.nshifts));
    p.set("nsamples", static_cast<long long>(n_.nsamples));
    p.set("method", n_.method);
    p.set("dtype", sizeof(T) == 4 ? "float32" : "float64");
    p.set("shift_min", static_cast<long long>(n_.lo));
    p.set("shift_max", static_cast<long long>(n_.hi));
    p.set("shifts", n_.moveout ? "moveout" : "uniform");
    p.set("seed", static_cast<long long>(n_.seed));
    p.set("clamp_max_at_zero", n_.clamp);
    p.set("autotune", n_.autotune);
    p.set("offsetout", static_cast<long long>(extent_.offsetout));
    p.set("lengthout", static_cast<long long>(extent_.lengthout));
    p.set("verified_shift_sets", static_cast<long long>(rows_.size()));
    return p;
  }
  WorkModel work() const override { return parstack_work(input(), extent_, options_.method); }

  double run(const Device& device, Timers* timers) override {
    if (device.backend == Backend::cuda) check_gpu_memory(device);
    const double u0 = region_total(timers, "upload"), k0 = region_total(timers, "kernel"),
                 d0 = region_total(timers, "download");
    // One plan for every repetition: device buffers are allocated once, as a detector would.
    parstack<T>(device, input(), std::span<T>(result_), options_, timers, &plan_);
    if (device.backend == Backend::cuda && timers && timers->find("parstack/kernel")) {
      upload_.push_back(region_total(timers, "upload") - u0);
      kernel_.push_back(region_total(timers, "kernel") - k0);
      download_.push_back(region_total(timers, "download") - d0);
    }
    return 0;
  }

  // The rows the reference verifies (all of them below verify_macs), from the last timed call:
  // copied here, after the timing, as a method-0 stack of hundreds of MB takes a third as long to
  // copy as to compute (30 x 3000 x 6000 at +-5000, float64: 384 MB).
  void run_device_window(const Device&) override {
    if (options_.comm.rank() != 0) return;  // the gathered result is rank 0's
    const std::int64_t per_set = per_set_length();
    checked_.resize(rows_.size() * per_set);
    for (std::size_t j = 0; j < rows_.size(); ++j)
      std::copy_n(result_.begin() + rows_[j] * per_set, per_set, checked_.begin() + j * per_set);
  }

  // The reference computes those rows only, in the same output window.
  void run_reference_window() override {
    std::vector<std::int32_t> shifts;
    std::vector<T> weights;
    const std::int64_t n = n_.ntraces;
    for (const std::int64_t r : rows_) {
      shifts.insert(shifts.end(), shifts_.begin() + r * n, shifts_.begin() + (r + 1) * n);
      weights.insert(weights.end(), weights_.begin() + r * n, weights_.begin() + (r + 1) * n);
    }
    const ParstackInput<T> sub{std::span<const std::span<const T>>(traces_), offsets_, shifts,
                               weights, static_cast<std::int64_t>(rows_.size())};
    checked_.resize(rows_.size() * per_set_length());
    parstack<T>(Device{Backend::reference, 0, false}, sub, std::span<T>(checked_), window_options_);
  }

  std::vector<CaseOutput> outputs() const override {
    return {{"result", std::span<const T>(checked_)}};
  }
  Tolerance tolerance(const std::string&) const override { return parstack_tolerance<T>(); }

  // The shift sets split across the ranks, the whole result gathered on rank 0 (the others hold
  // none): rank 0 verifies it row for row against the reference of one process.
  void distribute(const Communicator& comm) override {
    options_.comm = comm;
    options_.result_layout = ResultLayout::root;
    if (comm.rank() != 0) std::vector<T>().swap(result_);
  }

  void start_timing() override {
    upload_.clear();
    kernel_.clear();
    download_.clear();
  }

  // The verification's scope, and on cuda the split of the time into transfers and kernel.
  Parameters details(const KernelReport& report) const override {
    Parameters d;
    const nlohmann::json scope = {{"shift_sets_verified", report.verification ? rows_.size() : 0},
                                  {"shift_sets_total", n_.nshifts},
                                  {"tolerance_rel_l2", parstack_tolerance<T>().rel_l2}};
    d.set_json("verification_scope", scope.dump());
    if (!kernel_.empty()) {
      const double macs = report.work.points;
      const double kernel = median_of(kernel_);
      const nlohmann::json cuda = {
          {"upload_seconds_median", median_of(upload_)},
          {"kernel_seconds_median", kernel},
          {"download_seconds_median", median_of(download_)},
          {"gmacs_including_transfers", report.seconds > 0 ? macs / report.seconds * 1e-9 : 0},
          {"gmacs_kernel_only", kernel > 0 ? macs / kernel * 1e-9 : 0}};
      d.set_json("cuda", cuda.dump());
      const auto c = plan_.counters();
      const nlohmann::json plan = {{"device_allocations", c.device_allocations},
                                   {"bytes_host_to_device", c.bytes_host_to_device},
                                   {"bytes_device_to_host", c.bytes_device_to_host},
                                   {"device_bytes_held", c.device_bytes_held}};
      d.set_json("plan", plan.dump());
    }
    return d;
  }

 private:
  ParstackInput<T> input() const {
    return {std::span<const std::span<const T>>(traces_), offsets_, shifts_, weights_, n_.nshifts};
  }

  // The moveouts of a station network: stations at random in [-1, 1]^2, the candidate sources on
  // a grid over it (shift set s is grid node s, row by row) at a depth of 0.2, and each delay the
  // distance mapped linearly onto [shift_min, shift_max], the nearest station the latest: the
  // shift that stacks a source's arrivals undoes their delay.
  void moveout_shifts(Random& rng) {
    std::vector<double> x(n_.ntraces), y(n_.ntraces), distance(shifts_.size());
    for (std::int64_t i = 0; i < n_.ntraces; ++i) {
      x[i] = 2 * rng.uniform() - 1;
      y[i] = 2 * rng.uniform() - 1;
    }
    std::int64_t side = 1;
    while (side * side < n_.nshifts) ++side;
    const auto node = [&](std::int64_t k) { return side > 1 ? -1 + 2.0 * k / (side - 1) : 0.0; };
    for (std::int64_t s = 0; s < n_.nshifts; ++s)
      for (std::int64_t i = 0; i < n_.ntraces; ++i) {
        const double dx = node(s % side) - x[i], dy = node(s / side) - y[i];
        distance[s * n_.ntraces + i] = std::sqrt(dx * dx + dy * dy + 0.04);
      }
    const auto [near, far] = std::minmax_element(distance.begin(), distance.end());
    const double lo = *near, span = *far - *near;
    for (std::size_t j = 0; j < shifts_.size(); ++j) {
      const double u = span > 0 ? (distance[j] - lo) / span : 0.0;
      shifts_[j] = static_cast<std::int32_t>(
          std::llround(static_cast<double>(n_.hi) - u * static_cast<double>(n_.hi - n_.lo)));
    }
  }
  std::int64_t per_set_length() const {
    return options_.method == Method::stack ? extent_.lengthout : 1;
  }

  void check_gpu_memory(const Device& device) const {
    const auto gpus = cuda_devices();
    if (device.index >= static_cast<int>(gpus.size()) || gpus[device.index].memory_gib <= 0) return;
    const double need = n_.inputs + n_.result;
    if (need > 0.9 * gpus[device.index].memory_gib * kGiB)
      throw InvalidArgument(fmt::format(
          "ntraces, nshifts, nsamples: {} ({}) needs about {} of memory on {} ({}), which has "
          "{:.1f} GiB",
          label(), sizeof(T) == 4 ? "float32" : "float64", format_bytes(need), device.name(),
          gpus[device.index].name, gpus[device.index].memory_gib));
  }

  Sizes n_;
  ParstackOptions options_, window_options_;
  std::vector<std::vector<T>> data_;
  std::vector<std::span<const T>> traces_;
  std::vector<std::int32_t> offsets_, shifts_;
  std::vector<T> weights_, result_, checked_;
  std::vector<std::int64_t> rows_;
  Extent extent_;
  ParstackPlan plan_;
  std::vector<double> upload_, kernel_, download_;  // per timed cuda call
};

std::unique_ptr<Case> make_parstack(const CaseSettings& s) {
  const std::string dtype = s.get("dtype", "float64");
  if (dtype == "float32") return std::make_unique<ParstackCase<float>>(s);
  require(dtype == "float64", "dtype", "float32 or float64", fmt::format("\"{}\"", dtype));
  return std::make_unique<ParstackCase<double>>(s);
}

CaseSettings variant(const char* method, const char* dtype) {
  return CaseSettings{{{"method", method}, {"dtype", dtype}}};
}

// What detectors stack: 30 traces x 1000 shift sets (pyrocko's benchmark geometry) of 6000
// samples (a minute at 100 Hz), with moveouts from a few samples (a dense local array) through
// hundreds (the default +-nsamples/10) to thousands (a regional aperture), both methods: the
// moveouts of a station network, and at the widest spread delays at random too (the least
// cache-friendly case).
std::vector<CaseSettings> parstack_sweep() {
  std::vector<CaseSettings> sweep;
  for (const char* method : {"0", "1"}) {
    for (const int spread : {10, 600, 3000})
      sweep.push_back(CaseSettings{{{"method", method},
                                    {"dtype", "float32"},
                                    {"shifts", "moveout"},
                                    {"shift_min", std::to_string(-spread)},
                                    {"shift_max", std::to_string(spread)}}});
    sweep.push_back(CaseSettings{
        {{"method", method}, {"dtype", "float32"}, {"shift_min", "-3000"}, {"shift_max", "3000"}}});
  }
  sweep.push_back(CaseSettings{{{"method", "0"}, {"dtype", "float64"}}});
  return sweep;
}

}  // namespace

void register_cases(std::vector<CaseEntry>& registry) {
  registry.push_back(
      {"parstack",
       "stack",
       "delay-and-sum stack of random traces with random or moveout shifts (pyrocko's parstack)",
       make_parstack,
       {variant("0", "float32"), variant("0", "float64"), variant("1", "float32"),
        variant("1", "float64")},
       parstack_sweep()});
  registry.back().tolerance = [](const CaseSettings& s, const std::string&) {
    return parstack_tolerance(s.get("dtype", "float64") == "float32" ? Precision::fp32
                                                                     : Precision::fp64);
  };
}

}  // namespace sciproxy::stack
