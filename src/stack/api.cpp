// The stack family's public entry points: argument checks, output window, work model, dispatch.
//   R[s, k] = sum_i w[s,i] * a_i[k + offsetout - offsets[i] - shifts[s,i]],  M[s] = max_k R[s, k]
// Semantics of pyrocko's parstack (docs/kernels/parstack.md).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "case.hpp"
#include "core/collective.hpp"
#include "core/recorded_call.hpp"
#include "kernels.hpp"
#include "math.hpp"
#include "sciproxy/core/autotune.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"
#include "sciproxy/stack.hpp"

namespace sciproxy::stack {

namespace {

// NaN would poison every stack it enters; the scan is vectorised and parallel because it reads
// all the input, and the slow search for the culprit runs only when there is one. x - x is 0 for a
// finite sample and NaN for inf or NaN, so the sum is NaN exactly when one is not finite: a
// reduction GCC vectorises, where a test per sample with || stays scalar (12 MB of size c's
// traces: 0.7 ms on 2 threads, a twentieth of the stacking).
template <class T>
void require_finite_samples(const ParstackInput<T>& in, const ParstackOptions& opt) {
  const auto ntraces = static_cast<std::int64_t>(in.traces.size());
  const std::string_view traces = in.traces_name ? in.traces_name : "traces";
  bool any_nonfinite = false;
  const int threads = resolve_threads(opt.nparallel, "nparallel");
#pragma omp parallel for schedule(dynamic, 1) reduction(|| : any_nonfinite) num_threads(threads)
  for (std::int64_t i = 0; i < ntraces; ++i) {
    const T* samples = in.traces[i].data();
    T probe = 0;
#pragma omp simd reduction(+ : probe)
    for (std::size_t j = 0; j < in.traces[i].size(); ++j) probe += samples[j] - samples[j];
    any_nonfinite = any_nonfinite || probe != T(0);
  }
  if (any_nonfinite)
    for (std::int64_t i = 0; i < ntraces; ++i)
      for (std::size_t j = 0; j < in.traces[i].size(); ++j)
        if (!std::isfinite(in.traces[i][j]))
          throw_invalid_argument(fmt::format("{}[{}]", traces, i), "finite samples",
                                 fmt::format("{} at index {}", in.traces[i][j], j));
}

template <class T>
void check_input(const ParstackInput<T>& in, const ParstackOptions& opt, SampleCheck samples) {
  const auto ntraces = static_cast<std::int64_t>(in.traces.size());
  const std::string_view traces = in.traces_name ? in.traces_name : "traces";
  require(ntraces >= 1, traces, "at least one trace", "none");
  require(in.offsets.size() == in.traces.size(), "offsets",
          fmt::format("one offset per trace ({} values)", ntraces),
          fmt::format("{} values", in.offsets.size()));
  // With ShiftSets::own a rank may hold none (more ranks than shift sets).
  const bool own = opt.comm.distributed() && opt.shift_sets == ShiftSets::own;
  require(in.nshifts >= (own ? 0 : 1), "shifts",
          "at least one shift set (shape (nshifts, ntraces))",
          fmt::format("nshifts = {}", in.nshifts));
  const auto nterms = static_cast<std::size_t>(in.nshifts * ntraces);
  require(
      in.shifts.size() == nterms, "shifts",
      fmt::format("shape (nshifts, ntraces) = ({}, {}), {} values", in.nshifts, ntraces, nterms),
      fmt::format("{} values", in.shifts.size()));
  require(
      in.weights.size() == nterms, "weights",
      fmt::format("shape (nshifts, ntraces) = ({}, {}), {} values", in.nshifts, ntraces, nterms),
      fmt::format("{} values", in.weights.size()));
  for (std::size_t j = 0; j < nterms; ++j)
    if (!std::isfinite(in.weights[j]))
      throw_invalid_argument(
          "weights", "finite values",
          fmt::format("{} at [{}, {}]", in.weights[j], j / ntraces, j % ntraces));
  for (std::int64_t i = 0; i < ntraces; ++i)
    require(in.traces[i].empty() || in.traces[i].data() != nullptr,
            fmt::format("{}[{}]", traces, i), "a pointer to its samples", "a null pointer");
  require(opt.method == Method::stack || opt.method == Method::max, "method",
          "0 (stack) or 1 (maximum of the stack)", std::to_string(static_cast<int>(opt.method)));
  require(opt.lengthout != 0, "lengthout", "a positive length, or -1 for the default window", "0");
  require(opt.chunk_samples == 0 ||
              (opt.chunk_samples > 0 && opt.chunk_samples * std::int64_t(sizeof(T)) % 64 == 0),
          "chunk_samples",
          fmt::format("0 (the default) or a positive multiple of {}", 64 / sizeof(T)),
          std::to_string(opt.chunk_samples));
  if (samples == SampleCheck::scan) require_finite_samples(in, opt);
}

template <class T>
kernels::Problem<T> make_problem(const ParstackInput<T>& in, const Extent& e,
                                 const ParstackOptions& opt, std::vector<const T*>& pointers,
                                 std::vector<std::int64_t>& lengths) {
  pointers.resize(in.traces.size());
  lengths.resize(in.traces.size());
  for (std::size_t i = 0; i < in.traces.size(); ++i) {
    pointers[i] = in.traces[i].data();
    lengths[i] = static_cast<std::int64_t>(in.traces[i].size());
  }
  kernels::Problem<T> p;
  p.ntraces = static_cast<std::int64_t>(in.traces.size());
  p.nshifts = in.nshifts;
  p.lengthout = e.lengthout;
  p.offsetout = e.offsetout;
  p.traces = pointers.data();
  p.lengths = lengths.data();
  p.offsets = in.offsets.data();
  p.shifts = in.shifts.data();
  p.weights = in.weights.data();
  p.method = opt.method;
  p.clamp_max_at_zero = opt.clamp_max_at_zero;
  p.accumulate = opt.accumulate && opt.method == Method::stack;
  p.nparallel = opt.nparallel;
  p.chunk_samples =
      opt.chunk_samples > 0 ? opt.chunk_samples : kDefaultChunkBytes / std::int64_t(sizeof(T));
  return p;
}

// The cpu backend's chunk, timed on this problem over 4 to 64 KiB of output samples (autotune.hpp);
// candidates run into result, or into a copy when the call accumulates into it.
template <class T>
void autotune_chunk(const Context& ctx, kernels::Problem<T>& problem, std::span<T> result,
                    ParstackPlan& plan) {
  TuningKey key;
  key.kernel = "parstack";
  key.device = "cpu";
  key.precision = sizeof(T) == 4 ? Precision::fp32 : Precision::fp64;
  key.threads = resolve_threads(problem.nparallel, "nparallel");
  std::int64_t longest = 0;
  for (std::int64_t i = 0; i < problem.ntraces; ++i)
    longest = std::max(longest, problem.lengths[i]);
  key.shape = fmt::format("method={} ntraces={} nshifts={} lengthout={} longest={}",
                          static_cast<int>(problem.method), problem.ntraces, problem.nshifts,
                          problem.lengthout, longest);
  // The static default first (autotune keeps it unless another is clearly faster).
  std::vector<TuningParameters> candidates{
      {{"chunk_samples", kDefaultChunkBytes / std::int64_t(sizeof(T))}}};
  for (std::int64_t bytes = 4096; bytes <= 65536; bytes *= 2)
    if (bytes != kDefaultChunkBytes)
      candidates.push_back({{"chunk_samples", bytes / std::int64_t(sizeof(T))}});
  std::vector<T> scratch(problem.accumulate ? result.size() : 0);
  const auto tuning = autotune(key, candidates, [&](const TuningParameters& candidate) {
    kernels::Problem<T> trial = problem;
    trial.chunk_samples = candidate.at("chunk_samples");
    if (problem.accumulate) std::copy(result.begin(), result.end(), scratch.begin());
    T* out = problem.accumulate ? scratch.data() : result.data();
    const Context quiet{ctx.device, nullptr};  // the trials are not the call's timings
    SCIPROXY_RUN_KERNEL(quiet, parstack, trial, out, plan);
  });
  const auto chunk = tuning.best.find("chunk_samples");
  if (chunk != tuning.best.end() && chunk->second > 0 &&
      chunk->second * std::int64_t(sizeof(T)) % 64 == 0)
    problem.chunk_samples = chunk->second;  // a cache entry that is not a valid chunk is ignored
}

// Calls f(overlap) for every term with a non-zero weight: the part of `window` that trace i,
// shifted by shift set s, reaches (trace_overlap; empty when it reaches none). The work model,
// the memory check and method 1's narrowing walk the terms this one way.
template <class T, class Length, class F>
void for_each_weighted_overlap(std::int64_t nshifts, std::int64_t ntraces, const T* weights,
                               const std::int32_t* offsets, const std::int32_t* shifts,
                               Length length, const Extent& window, F&& f) {
  for (std::int64_t s = 0; s < nshifts; ++s)
    for (std::int64_t i = 0; i < ntraces; ++i) {
      if (weights[s * ntraces + i] == T(0)) continue;
      f(trace_overlap(trace_start(offsets[i], shifts[s * ntraces + i], window.offsetout), length(i),
                      window.lengthout));
    }
}

// The samples [lo, hi) of `window` from the first to the last that some weighted trace reaches;
// hi <= lo when none does.
struct CoveredPart {
  std::int64_t lo, hi;
};

template <class T, class Length>
CoveredPart covered_part(std::int64_t nshifts, std::int64_t ntraces, const T* weights,
                         const std::int32_t* offsets, const std::int32_t* shifts, Length length,
                         const Extent& window) {
  CoveredPart c{window.lengthout, 0};
  for_each_weighted_overlap(nshifts, ntraces, weights, offsets, shifts, length, window,
                            [&](const Overlap& o) {
                              if (o.end <= o.begin) return;
                              c.lo = std::min(c.lo, o.begin);
                              c.hi = std::max(c.hi, o.end);
                            });
  return c;
}

// The length of trace i of a ParstackInput.
template <class T>
auto input_lengths(const ParstackInput<T>& in) {
  return [&in](std::int64_t i) { return static_cast<std::int64_t>(in.traces[i].size()); };
}

// Method 1 over a window wider than the traces reach: a sample no weighted trace covers stacks
// to exactly 0, so the kernel runs on the covered part of the window only, and the maximum takes
// in 0 when part of the window was left out (narrow_to_traces returns true then). A window of
// 2^40 samples around a few short traces costs what the traces cost, instead of a loop (and, on
// the reference, a row) over every sample. `empty`: no trace reaches the window at all.
template <class T>
bool narrow_to_traces(kernels::Problem<T>& p, bool& empty) {
  const auto [lo, hi] =
      covered_part(p.nshifts, p.ntraces, p.weights, p.offsets, p.shifts,
                   [&](std::int64_t i) { return p.lengths[i]; }, {p.offsetout, p.lengthout});
  empty = hi <= lo;
  if (empty || (lo == 0 && hi == p.lengthout)) return false;
  const std::int64_t start = static_cast<std::int64_t>(p.offsetout) + lo;
  if (start > std::numeric_limits<std::int32_t>::max()) return false;  // keep the whole window
  p.offsetout = static_cast<std::int32_t>(start);
  p.lengthout = hi - lo;
  return true;
}

}  // namespace

ParstackPlan::ParstackPlan() : state_(std::make_unique<State>()) {}
ParstackPlan::~ParstackPlan() = default;
ParstackPlan::ParstackPlan(ParstackPlan&&) noexcept = default;
ParstackPlan& ParstackPlan::operator=(ParstackPlan&&) noexcept = default;

ParstackPlan::Counters ParstackPlan::counters() const {
  return state_ ? state_->counters : Counters{};
}

// The samples of window e that some weighted trace reaches, from the first to the last: what
// method max stacks (the rest stack to 0; see narrow_to_traces).
template <class T>
std::int64_t covered_samples(const ParstackInput<T>& in, const Extent& e) {
  const auto [lo, hi] =
      covered_part(in.nshifts, static_cast<std::int64_t>(in.traces.size()), in.weights.data(),
                   in.offsets.data(), in.shifts.data(), input_lengths(in), e);
  return hi > lo ? hi - lo : 0;
}

// The host memory a call allocates beyond its inputs, refused before allocating: the result
// (the caller's, or the one Python allocates from this extent) and, for method max, one row of
// `stacked` samples per thread.
template <class T>
Extent checked_memory(const Extent& e, std::int64_t nshifts, const ParstackOptions& opt,
                      std::int64_t stacked) {
  const double rows = opt.method == Method::stack ? double(nshifts) : double(usable_cores());
  const double result = opt.method == Method::stack ? 0.0 : double(nshifts);
  require_memory(sizeof(T) * (rows * double(stacked) + result), "lengthout, shifts",
                 fmt::format("a stack of {} shift sets x {} samples ({})", nshifts, e.lengthout,
                             sizeof(T) == 4 ? "float32" : "float64"));
  return e;
}

// pyrocko's default window: from the earliest shifted trace start to the latest end.
template <class T>
std::pair<std::int64_t, std::int64_t> default_window_bounds(const ParstackInput<T>& in) {
  const auto ntraces = static_cast<std::int64_t>(in.traces.size());
  std::int64_t first = std::numeric_limits<std::int64_t>::max();
  std::int64_t last = std::numeric_limits<std::int64_t>::min();
  for (std::int64_t s = 0; s < in.nshifts; ++s)
    for (std::int64_t i = 0; i < ntraces; ++i) {
      const std::int64_t start = trace_start(in.offsets[i], in.shifts[s * ntraces + i], 0);
      first = std::min(first, start);
      last = std::max(last, start + static_cast<std::int64_t>(in.traces[i].size()));
    }
  return {first, last};
}

template <class T>
Extent default_window(const ParstackInput<T>& in, const ParstackOptions& opt, std::int64_t first,
                      std::int64_t last);

template <class T>
Extent given_window(const ParstackInput<T>& in, const ParstackOptions& opt) {
  const Extent e{opt.offsetout, opt.lengthout};
  return checked_memory<T>(e, in.nshifts, opt,
                           opt.method == Method::max ? covered_samples(in, e) : e.lengthout);
}

template <class T>
Extent parstack_extent(const ParstackInput<T>& in, const ParstackOptions& opt,
                       SampleCheck samples) {
  const Communicator& comm = opt.comm;
  if (comm.distributed() && opt.shift_sets == ShiftSets::all) {
    // Each rank's window is the whole's; collective only so a failure is every rank's.
    ParstackOptions here = opt;
    here.comm = Communicator();
    Extent e;
    collective::on_every_rank(comm, [&] { e = parstack_extent(in, here, samples); });
    return e;
  }
  if (comm.distributed() && opt.shift_sets == ShiftSets::own) {
    // The window of every rank's shift sets; collective, so every failure is every rank's.
    std::int64_t first = std::numeric_limits<std::int64_t>::max();
    std::int64_t last = std::numeric_limits<std::int64_t>::min();
    Extent e;
    collective::on_every_rank(comm, [&] {
      check_input(in, opt, samples);
      if (opt.lengthout > 0)
        e = given_window(in, opt);
      else if (in.nshifts > 0)
        std::tie(first, last) = default_window_bounds(in);
    });
    if (opt.lengthout > 0) return e;
    first = collective::allreduce_min(comm, first);
    last = collective::allreduce_max(comm, last);
    collective::on_every_rank(comm, [&] { e = default_window<T>(in, opt, first, last); });
    return e;
  }
  check_input(in, opt, samples);
  if (opt.lengthout > 0) return given_window(in, opt);
  const auto [first, last] = default_window_bounds(in);
  return default_window<T>(in, opt, first, last);
}

template <class T>
Extent default_window(const ParstackInput<T>& in, const ParstackOptions& opt, std::int64_t first,
                      std::int64_t last) {
  require(last > first, in.traces_name ? in.traces_name : "traces",
          "at least one non-empty trace (the default window is empty)", "only empty traces");
  require(first >= std::numeric_limits<std::int32_t>::min() &&
              first <= std::numeric_limits<std::int32_t>::max(),
          "offsets + shifts", "a window start that fits in int32", std::to_string(first));
  return checked_memory<T>({static_cast<std::int32_t>(first), last - first}, in.nshifts, opt,
                           last - first);
}

std::int64_t parstack_result_size(std::int64_t nshifts, const Extent& extent, Method method) {
  return method == Method::stack ? nshifts * extent.lengthout : nshifts;
}

template <class T>
WorkModel parstack_work(const ParstackInput<T>& in, const Extent& e, Method method) {
  const auto ntraces = static_cast<std::int64_t>(in.traces.size());
  double macs = 0;
  for_each_weighted_overlap(in.nshifts, ntraces, in.weights.data(), in.offsets.data(),
                            in.shifts.data(), input_lengths(in), e, [&](const Overlap& o) {
                              macs += static_cast<double>(o.end - o.begin);
                            });
  double trace_samples = 0;
  for (const auto& t : in.traces) trace_samples += static_cast<double>(t.size());
  const double terms = static_cast<double>(in.nshifts * ntraces);
  const double outputs = static_cast<double>(parstack_result_size(in.nshifts, e, method));
  WorkModel w;
  w.points = macs;
  w.point_unit = "MAC";
  // A multiply-add per overlapping sample; method 1 adds one comparison per stacked sample.
  w.flops =
      2 * macs + (method == Method::max ? static_cast<double>(in.nshifts * e.lengthout) : 0.0);
  w.bytes =
      sizeof(T) * (trace_samples + terms + outputs) + sizeof(std::int32_t) * (terms + ntraces);
  // Every multiply-add reads a trace sample: the traces are reused by every shift set, from cache.
  w.cache_bytes = sizeof(T) * macs;
  w.precision = sizeof(T) == 4 ? Precision::fp32 : Precision::fp64;
  return w;
}

namespace {

// One process's parstack; `region` names its timer region ("parstack", or "stack" inside the
// ranks' call, which has scanned the samples already: `samples`).
template <class T>
Extent parstack_here(const Device& device, const ParstackInput<T>& in, std::span<T> result,
                     const ParstackOptions& opt, Timers* timers, ParstackPlan* plan,
                     const char* region_name, SampleCheck samples) {
  RecordedCall call("parstack", device, timers);
  Extent extent;
  std::vector<T> reference_result;  // when verifying
  {
    auto region = Timers::region(call.timers(), region_name);  // closed before the reference rerun
    extent = parstack_extent(in, opt, samples);
    const std::int64_t expected = parstack_result_size(in.nshifts, extent, opt.method);
    require(static_cast<std::int64_t>(result.size()) == expected, "result",
            opt.method == Method::stack ? fmt::format("nshifts x lengthout = {} x {} = {} elements",
                                                      in.nshifts, extent.lengthout, expected)
                                        : fmt::format("nshifts = {} elements", expected),
            fmt::format("{} elements", result.size()));
    require(result.data() != nullptr, "result", "a pointer to writable memory", "a null pointer");

    std::vector<const T*> pointers;
    std::vector<std::int64_t> lengths;
    kernels::Problem<T> problem = make_problem(in, extent, opt, pointers, lengths);
    bool empty = false;
    const bool narrowed = problem.method == Method::max && narrow_to_traces(problem, empty);
    if (call.recording()) {
      call.set_work(parstack_work(in, extent, opt.method));
      auto& parameters = call.parameters();
      parameters.set("ntraces", problem.ntraces);
      parameters.set("nshifts", problem.nshifts);
      parameters.set("lengthout", extent.lengthout);  // the caller's window, not the narrowed one
      parameters.set("offsetout", extent.offsetout);
      parameters.set("method", static_cast<int>(opt.method));
    }
    // An accumulating call adds to what result holds: the reference rerun starts from the same.
    if (call.verifying() && problem.accumulate)
      reference_result.assign(result.begin(), result.end());

    // Without a plan from the caller, the call's device buffers live as long as the call.
    std::optional<ParstackPlan> local_plan;
    if (!plan) plan = &local_plan.emplace();
    const Context ctx{device, call.timers()};
    if (problem.method == Method::max && empty) {
      std::fill(result.begin(), result.end(), T(0));  // every sample of every stack is 0
    } else {
      if (opt.autotune && device.backend == Backend::cpu) {
        auto tuning = Timers::region(call.timers(), "autotune");
        autotune_chunk(Context{device, nullptr}, problem, result, *plan);
      }
      SCIPROXY_RUN_KERNEL(ctx, parstack, problem, result.data(), *plan);
      if (narrowed)  // the samples left out stack to 0
        for (T& m : result) m = std::max(m, T(0));
    }
  }
  if (call.verifying()) {
    reference_result.resize(result.size());
    call.on_reference([&] {
      parstack<T>(RecordedCall::reference_device(), in, std::span<T>(reference_result), opt);
    });
    call.compare<T>("result", result, reference_result, parstack_tolerance<T>());
  }
  return extent;
}

// The shift sets of each rank (collective with ShiftSets::own).
std::vector<std::int64_t> shift_counts(std::int64_t nshifts, const ParstackOptions& opt) {
  const Communicator& comm = opt.comm;
  if (opt.shift_sets == ShiftSets::own) return collective::allgather(comm, std::span(&nshifts, 1));
  std::vector<std::int64_t> counts;
  for (int r = 0; r < comm.size(); ++r)
    counts.push_back(collective::block_of(nshifts, r, comm.size()).count);
  return counts;
}

ShiftBlock block_from_counts(const std::vector<std::int64_t>& counts, int rank) {
  ShiftBlock b;
  for (int r = 0; r < static_cast<int>(counts.size()); ++r) {
    if (r < rank) b.first += counts[static_cast<std::size_t>(r)];
    b.total += counts[static_cast<std::size_t>(r)];
  }
  b.count = counts[static_cast<std::size_t>(rank)];
  return b;
}

// What every rank must pass alike: the options, the traces and offsets, and with ShiftSets::all
// the shifts and weights too.
template <class T>
std::vector<collective::Field> agreed_fields(const ParstackInput<T>& in,
                                             const ParstackOptions& opt) {
  std::vector<collective::Field> f{{"dtype (bytes per sample)", sizeof(T)},
                                   {"method", static_cast<int>(opt.method)},
                                   {"shift_sets", static_cast<int>(opt.shift_sets)},
                                   {"result_layout", static_cast<int>(opt.result_layout)},
                                   {"lengthout", opt.lengthout},
                                   {"offsetout", opt.lengthout > 0 ? opt.offsetout : 0},
                                   {"accumulate", opt.accumulate},
                                   {"clamp_max_at_zero", opt.clamp_max_at_zero},
                                   {"ntraces", static_cast<std::int64_t>(in.traces.size())}};
  std::vector<std::int64_t> lengths;
  std::uint64_t samples = 0;
  for (const auto& t : in.traces) {
    lengths.push_back(static_cast<std::int64_t>(t.size()));
    samples = collective::hash_bytes(t.data(), t.size_bytes(), samples);
  }
  f.push_back({"trace lengths", collective::hash_of(std::span<const std::int64_t>(lengths)), true});
  f.push_back({"offsets", collective::hash_of(in.offsets), true});
  f.push_back(
      {in.traces_name ? in.traces_name : "traces", static_cast<std::int64_t>(samples), true});
  if (opt.shift_sets == ShiftSets::all) {
    f.push_back({"nshifts", in.nshifts});
    f.push_back({"shifts", collective::hash_of(in.shifts), true});
    f.push_back({"weights", collective::hash_of(in.weights), true});
  }
  return f;
}

// parstack on the ranks of opt.comm: each stacks its block of shift sets into its rows of the
// result (in place where the rank holds them), then the rows go where result_layout says. Every
// row is computed as one process computes it, so the bits are the same.
template <class T>
Extent parstack_on_ranks(const Device& device, const ParstackInput<T>& in, std::span<T> result,
                         const ParstackOptions& opt, Timers* timers, ParstackPlan* plan) {
  const Communicator& comm = opt.comm;
  auto region = Timers::region(timers, "parstack");
  collective::on_every_rank(comm, [&] {
    check_input(in, opt, SampleCheck::scan);
    require(opt.shift_sets == ShiftSets::all || opt.shift_sets == ShiftSets::own, "shift_sets",
            "0 (all: every rank passes all) or 1 (own: each rank its own block)",
            std::to_string(static_cast<int>(opt.shift_sets)));
    require(opt.result_layout == ResultLayout::all_ranks ||
                opt.result_layout == ResultLayout::root || opt.result_layout == ResultLayout::own,
            "result_layout", "0 (all ranks), 1 (rank 0) or 2 (each rank its own rows)",
            std::to_string(static_cast<int>(opt.result_layout)));
  });
  const auto fields = agreed_fields(in, opt);
  collective::require_same(comm, fields, "parstack");

  const std::vector<std::int64_t> counts = shift_counts(in.nshifts, opt);
  const ShiftBlock block = block_from_counts(counts, comm.rank());

  ParstackOptions local = opt;
  local.comm = Communicator();
  Extent extent;
  // The samples were scanned above, with the rest of the input.
  if (opt.shift_sets == ShiftSets::own) {
    extent = parstack_extent(in, opt, SampleCheck::skip);  // collective
  } else {
    collective::on_every_rank(comm,
                              [&] { extent = parstack_extent(in, local, SampleCheck::skip); });
  }
  local.lengthout = extent.lengthout;
  local.offsetout = extent.offsetout;
  const std::int64_t row = opt.method == Method::stack ? extent.lengthout : 1;
  const bool root = comm.rank() == 0;
  const ResultLayout layout = opt.result_layout;

  // This rank's rows: in the caller's result where it holds them, else in a buffer of its own.
  std::vector<T> buffer;
  std::span<T> mine;
  collective::on_every_rank(comm, [&] {
    const std::int64_t whole = block.total * row, own = block.count * row;
    const bool holds_all =
        layout == ResultLayout::all_ranks || (layout == ResultLayout::root && root);
    if (holds_all || layout == ResultLayout::own) {
      const std::int64_t expected = holds_all ? whole : own;
      require(static_cast<std::int64_t>(result.size()) == expected, "result",
              fmt::format("{} elements ({} {}shift sets x {}, rank {} of {})", expected,
                          holds_all ? block.total : block.count, holds_all ? "" : "own ", row,
                          comm.rank(), comm.size()),
              fmt::format("{} elements", result.size()));
      require(expected == 0 || result.data() != nullptr, "result", "a pointer to writable memory",
              "a null pointer");
      mine = holds_all ? result.subspan(static_cast<std::size_t>(block.first * row),
                                        static_cast<std::size_t>(own))
                       : result;
    } else {
      buffer.resize(static_cast<std::size_t>(own));
      mine = buffer;
    }
  });
  // An accumulating call adds to rank 0's rows of the whole: each rank receives its part first.
  if (layout == ResultLayout::root && opt.accumulate && opt.method == Method::stack) {
    auto scatter = Timers::region(timers, "exchange");
    collective::scatter_rows<T>(comm, root ? std::span<const T>(result) : std::span<const T>(),
                                mine, counts, row, 0);
  }
  const ParstackInput<T> part{
      in.traces,
      in.offsets,
      opt.shift_sets == ShiftSets::all
          ? in.shifts.subspan(
                static_cast<std::size_t>(block.first * std::int64_t(in.traces.size())),
                static_cast<std::size_t>(block.count * std::int64_t(in.traces.size())))
          : in.shifts,
      opt.shift_sets == ShiftSets::all
          ? in.weights.subspan(
                static_cast<std::size_t>(block.first * std::int64_t(in.traces.size())),
                static_cast<std::size_t>(block.count * std::int64_t(in.traces.size())))
          : in.weights,
      block.count,
      in.traces_name};
  collective::on_every_rank(comm, [&] {
    if (block.count > 0)
      parstack_here<T>(device, part, mine, local, timers, plan, "stack", SampleCheck::skip);
  });
  auto exchange = Timers::region(timers, "exchange");
  if (layout == ResultLayout::all_ranks)
    collective::allgather_rows<T>(comm, result, counts, row);
  else if (layout == ResultLayout::root)
    collective::gather_rows<T>(comm, mine, root ? result : std::span<T>(), counts, row, 0);
  return extent;
}

}  // namespace

ShiftBlock parstack_shift_block(std::int64_t nshifts, const ParstackOptions& opt) {
  return block_from_counts(shift_counts(nshifts, opt), opt.comm.rank());
}

template <class T>
Extent parstack(const Device& device, const ParstackInput<T>& in, std::span<T> result,
                const ParstackOptions& opt, Timers* timers, ParstackPlan* plan) {
  if (opt.comm.distributed()) return parstack_on_ranks(device, in, result, opt, timers, plan);
  return parstack_here(device, in, result, opt, timers, plan, "parstack", SampleCheck::scan);
}

template <class T>
void argmax(std::span<const T> a, std::int64_t rows, std::int64_t cols,
            std::span<std::uint32_t> out, int nparallel, bool pyrocko_compat) {
  require(rows >= 1 && cols >= 1, "a", "a 2-D array with at least one row and one column",
          fmt::format("shape ({}, {})", rows, cols));
  require(rows < (std::int64_t(1) << 32), "a", "fewer than 2^32 rows (indices are uint32)",
          fmt::format("{} rows", rows));
  require(static_cast<std::int64_t>(a.size()) == rows * cols, "a",
          fmt::format("rows x cols = {} elements", rows * cols),
          fmt::format("{} elements", a.size()));
  require(static_cast<std::int64_t>(out.size()) == cols, "out",
          fmt::format("{} elements (one per column)", cols),
          fmt::format("{} elements", out.size()));
  resolve_threads(nparallel, "nparallel");
  // Host-only (kernels.hpp): the cpu kernel runs.
  const Device cpu{Backend::cpu, 0, false};
  RecordedCall call("argmax", cpu, nullptr);
  if (call.recording()) {
    WorkModel w;
    w.points = static_cast<double>(rows * cols);
    w.point_unit = "element";
    w.flops = w.points;  // one comparison per element
    w.bytes = sizeof(T) * w.points + sizeof(std::uint32_t) * static_cast<double>(cols);
    w.precision = sizeof(T) == 4 ? Precision::fp32 : Precision::fp64;
    call.set_work(w);
    call.parameters().set("rows", rows);
    call.parameters().set("cols", cols);
  }
  {
    ThreadCount threads(nparallel);
    kernels::cpu::argmax(Context{cpu, call.timers()}, a.data(), rows, cols, out.data(),
                         pyrocko_compat);
  }
  if (call.verifying()) {
    // Indices compare exactly; as doubles, the type the comparison takes.
    std::vector<std::uint32_t> want(out.size());
    call.on_reference([&] {
      kernels::reference::argmax(Context{RecordedCall::reference_device(), nullptr}, a.data(), rows,
                                 cols, want.data(), pyrocko_compat);
    });
    const std::vector<double> got_d(out.begin(), out.end()), want_d(want.begin(), want.end());
    call.compare<double>("indices", got_d, want_d, argmax_tolerance());
  }
}

#define SCIPROXY_INSTANTIATE(T)                                                        \
  template Extent parstack_extent<T>(const ParstackInput<T>&, const ParstackOptions&,  \
                                     SampleCheck);                                     \
  template WorkModel parstack_work<T>(const ParstackInput<T>&, const Extent&, Method); \
  template Extent parstack<T>(const Device&, const ParstackInput<T>&, std::span<T>,    \
                              const ParstackOptions&, Timers*, ParstackPlan*);         \
  template void argmax<T>(std::span<const T>, std::int64_t, std::int64_t,              \
                          std::span<std::uint32_t>, int, bool);
SCIPROXY_INSTANTIATE(float)
SCIPROXY_INSTANTIATE(double)
#undef SCIPROXY_INSTANTIATE

}  // namespace sciproxy::stack
