// The stack family's cases for the harness (core/harness.hpp): a synthetic problem the way a
// detector sees one, N traces of nsamples samples starting at 0, each shift set a row of random
// integer delays in [shift_min, shift_max] (default +-nsamples/10) with positive weights.
// Settings: ntraces, nshifts, nsamples, shift_min, shift_max, seed, method (0 or 1), dtype, and
// verify_macs: above this many multiply-adds the reference (a serial loop) would take long, so
// it runs an even spread of the shift sets only and the outputs compared are those rows.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "case.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/harness.hpp"
#include "sciproxy/stack.hpp"

namespace sciproxy::stack {

namespace {

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

template <class T>
class ParstackCase final : public Case {
 public:
  explicit ParstackCase(const CaseSettings& s)
      : ntraces_(s.get_int("ntraces", 30)),
        nshifts_(s.get_int("nshifts", 1000)),
        nsamples_(s.get_int("nsamples", 6000)),
        lo_(s.get_int("shift_min", -(nsamples_ / 10))),
        hi_(s.get_int("shift_max", nsamples_ / 10)) {
    const auto method = s.get_int("method", 0);
    require(method == 0 || method == 1, "method", "0 (stack) or 1 (maximum of the stack)",
            std::to_string(method));
    options_.method = method == 0 ? Method::stack : Method::max;
    require(ntraces_ >= 1, "ntraces", "at least 1", std::to_string(ntraces_));
    require(nshifts_ >= 1, "nshifts", "at least 1", std::to_string(nshifts_));
    require(nsamples_ >= 1, "nsamples", "at least 1", std::to_string(nsamples_));
    require(lo_ <= hi_, "shift_min", fmt::format("at most shift_max ({})", hi_), std::to_string(lo_));
    Random rng{std::mt19937_64(static_cast<std::uint64_t>(s.get_int("seed", 1)))};
    // Zero-mean noise in [-1, 1): seismograms are signed, so the stack is not trivially monotone.
    data_.resize(ntraces_);
    for (auto& trace : data_) {
      trace.resize(nsamples_);
      for (auto& x : trace) x = static_cast<T>(2 * rng.uniform() - 1);
    }
    for (const auto& trace : data_) traces_.emplace_back(trace);
    offsets_.assign(ntraces_, 0);
    shifts_.resize(ntraces_ * nshifts_);
    weights_.resize(ntraces_ * nshifts_);
    for (auto& v : shifts_) v = static_cast<std::int32_t>(rng.integer(lo_, hi_));
    for (auto& w : weights_) w = static_cast<T>(0.1 + 0.9 * rng.uniform());  // positive, never 0
    extent_ = parstack_extent(input(), options_);
    const double macs = double(ntraces_) * double(nshifts_) * double(nsamples_);
    const double max_macs = s.get_real("verify_macs", 2e9);
    const auto count = macs <= max_macs ? nshifts_
                                        : std::clamp<std::int64_t>(
                                              static_cast<std::int64_t>(nshifts_ * (max_macs / macs)),
                                              1, nshifts_);
    for (std::int64_t j = 0; j < count; ++j) rows_.push_back(j * nshifts_ / count);
    // The reference's problem: those rows only, in the same output window.
    for (const std::int64_t r : rows_) {
      sub_shifts_.insert(sub_shifts_.end(), shifts_.begin() + r * ntraces_, shifts_.begin() + (r + 1) * ntraces_);
      sub_weights_.insert(sub_weights_.end(), weights_.begin() + r * ntraces_,
                          weights_.begin() + (r + 1) * ntraces_);
    }
    options_.lengthout = extent_.lengthout;
    options_.offsetout = extent_.offsetout;
    result_.resize(parstack_result_size(nshifts_, extent_, options_.method));
  }

  std::string kernel() const override { return "parstack"; }
  std::string label() const override {
    return fmt::format("{} traces x {} shift sets x {} samples, method {}, {}", ntraces_, nshifts_,
                       nsamples_, static_cast<int>(options_.method), sizeof(T) == 4 ? "float32" : "float64");
  }
  Parameters parameters() const override {
    Parameters p;
    p.set("ntraces", static_cast<long long>(ntraces_));
    p.set("nshifts", static_cast<long long>(nshifts_));
    p.set("nsamples", static_cast<long long>(nsamples_));
    p.set("shift_min", static_cast<long long>(lo_));
    p.set("shift_max", static_cast<long long>(hi_));
    p.set("method", static_cast<int>(options_.method));
    p.set("lengthout", static_cast<long long>(extent_.lengthout));
    p.set("dtype", sizeof(T) == 4 ? "float32" : "float64");
    p.set("verified_shift_sets", static_cast<long long>(rows_.size()));
    return p;
  }
  WorkModel work() const override { return parstack_work(input(), extent_, options_.method); }
  double run(const Device& device, Timers* timers) override {
    const std::int64_t per_set = options_.method == Method::stack ? extent_.lengthout : 1;
    checked_.resize(rows_.size() * per_set);
    if (device.backend == Backend::reference && rows_.size() < std::size_t(nshifts_)) {
      const ParstackInput<T> sub{std::span<const std::span<const T>>(traces_), offsets_, sub_shifts_,
                                 sub_weights_, static_cast<std::int64_t>(rows_.size())};
      parstack<T>(device, sub, std::span<T>(checked_), options_, timers, &plan_);
      return 0;
    }
    // One plan for every repetition: device buffers are allocated once, as a detector would.
    parstack<T>(device, input(), std::span<T>(result_), options_, timers, &plan_);
    for (std::size_t j = 0; j < rows_.size(); ++j)
      std::copy_n(result_.begin() + rows_[j] * per_set, per_set, checked_.begin() + j * per_set);
    return 0;
  }
  // The rows the reference verifies (all of them below verify_macs).
  std::vector<CaseOutput> outputs() const override {
    return {{"result", std::span<const T>(checked_)}};
  }
  Tolerance tolerance(const std::string&) const override { return parstack_tolerance<T>(); }

 private:
  ParstackInput<T> input() const {
    return {std::span<const std::span<const T>>(traces_), offsets_, shifts_, weights_, nshifts_};
  }

  std::int64_t ntraces_, nshifts_, nsamples_, lo_, hi_;
  ParstackOptions options_;
  std::vector<std::vector<T>> data_;
  std::vector<std::span<const T>> traces_;
  std::vector<std::int32_t> offsets_, shifts_;
  std::vector<T> weights_, result_, checked_;
  std::vector<std::int64_t> rows_;
  std::vector<std::int32_t> sub_shifts_;
  std::vector<T> sub_weights_;
  Extent extent_;
  ParstackPlan plan_;
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

}  // namespace

void register_cases(std::vector<CaseEntry>& registry) {
  registry.push_back({"parstack", "stack",
                      "delay-and-sum stack of random traces with random shifts (pyrocko's parstack)",
                      make_parstack,
                      {variant("0", "float32"), variant("0", "float64"), variant("1", "float32"),
                       variant("1", "float64")}});
}

}  // namespace sciproxy::stack
