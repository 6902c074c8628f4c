// stack: delay-and-sum stacking of seismic traces, the job of pyrocko's parstack.
//
//   R[s, k] = sum_i w[s,i] * a_i[k + offsetout - offsets[i] - shifts[s,i]]      (method 0)
//   M[s]    = max_k R[s, k]                                                     (method 1)
//
// counting only samples inside trace i; traces with weight exactly 0 are skipped. Semantics of
// pyrocko's parstack; see docs/kernels/parstack.md.
//
// On several ranks (ParstackOptions::comm) the shift sets are split across them in contiguous
// blocks, and each rank stacks its own; each output row is the same bits as a one-process run.
//
// Long calls stop between batches of shifts when asked (sciproxy/core/cancel.hpp): they throw
// Cancelled and their outputs (result, even with accumulate) are unspecified.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sciproxy/core/communicator.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/metrics.hpp"
#include "sciproxy/core/timers.hpp"

namespace sciproxy::stack {

enum class Method : int { stack = 0, max = 1 };

// On several ranks: which shift sets a rank passes (all of them, the same arrays on every rank,
// or its own block), and where the result's rows go (the whole on every rank, the whole on rank
// 0 with the others passing an empty result, or each rank the rows of its own shift sets, see
// parstack_shift_block).
using ShiftSets = RankItems;
using sciproxy::ResultLayout;

// The inputs of one parstack call. Spans only: nothing is copied.
template <class T>
struct ParstackInput {
  std::span<const std::span<const T>> traces;  // N traces, lengths may differ
  std::span<const std::int32_t> offsets;       // (N): absolute start index of each trace
  std::span<const std::int32_t> shifts;        // (nshifts, N), row-major
  std::span<const T> weights;                  // (nshifts, N), row-major
  std::int64_t nshifts = 0;
  // What the caller's interface calls the traces, for error messages ("traces[3]: ..."): the
  // C ABI's and C++'s traces, Python's arrays (pyrocko's name). The library names the argument
  // the caller used; nothing renames its messages on the way up.
  const char* traces_name = "traces";
};

struct ParstackOptions {
  Method method = Method::stack;
  std::int64_t lengthout = -1;  // < 0: the extent that holds every shifted trace
  std::int32_t offsetout = 0;   // used as given when lengthout >= 0
  bool accumulate = false;      // method 0: add the stack into `result` instead of overwriting it
  // Method 1: pyrocko's C code starts its running maximum at 0 and so returns max(0, max_k R).
  // Off by default (the true maximum); on reproduces pyrocko's output exactly.
  bool clamp_max_at_zero = false;
  int nparallel = 0;  // OpenMP threads for the cpu backend; 0: all
  // cpu backend: output samples per job (a multiple of 64 bytes of samples); 0: the static
  // default (kDefaultChunkBytes). The result does not depend on it.
  std::int64_t chunk_samples = 0;
  // cpu backend: choose chunk_samples by timing candidates on this call's problem, once per
  // machine, shape, dtype and thread count (sciproxy/core/autotune.hpp); later calls read the
  // choice from the cache. Overrides chunk_samples.
  bool autotune = false;
  // The ranks the call runs on (collective; sciproxy/core/communicator.hpp): the shift sets are
  // split across them, each rank stacks its block, and the rows are gathered as result_layout
  // says. Every rank passes the same traces, offsets and options; with ShiftSets::all also the
  // same shifts and weights. Without a communicator (the default) the call runs here alone.
  Communicator comm;
  ShiftSets shift_sets = ShiftSets::all;
  ResultLayout result_layout = ResultLayout::all_ranks;
};

// The shift sets [first, first + count) of the whole that this rank stacks: its block of
// nshifts (ShiftSets::all), or where its own nshifts fall among the ranks' (ShiftSets::own;
// collective then). With ResultLayout::own the result holds these rows.
struct ShiftBlock {
  std::int64_t first = 0;
  std::int64_t count = 0;
  std::int64_t total = 0;  // shift sets on all ranks
};
ShiftBlock parstack_shift_block(std::int64_t nshifts, const ParstackOptions& opt);

// The cpu backend's static chunk: 16 KiB of output samples per job.
inline constexpr std::int64_t kDefaultChunkBytes = 16384;

struct Extent {
  std::int32_t offsetout = 0;
  std::int64_t lengthout = 0;
};

// What parstack_extent checks of the trace samples: `scan` reads them all for values that are not
// finite; `skip` leaves that to parstack, which always scans them, for callers that size the
// result just before calling it (the scan is a pass over every trace: 12 MB at qseek's size).
enum class SampleCheck { scan, skip };

// Output window: the given one, or pyrocko's default (offsetout = min(offsets + shifts),
// lengthout = max(offsets + shifts + lengths) - offsetout). Checks the input first (the samples
// as `samples` says). With opt.comm of several ranks it is collective: with ShiftSets::own the
// window of every rank's shift sets, and a bad input on any rank fails every rank.
template <class T>
Extent parstack_extent(const ParstackInput<T>& in, const ParstackOptions& opt,
                       SampleCheck samples = SampleCheck::scan);

// Elements `result` must hold: nshifts * lengthout (method 0) or nshifts (method 1).
std::int64_t parstack_result_size(std::int64_t nshifts, const Extent& extent, Method method);

// Multiply-adds (the overlap of every weighted trace with the window), flops, compulsory bytes.
template <class T>
WorkModel parstack_work(const ParstackInput<T>& in, const Extent& extent, Method method);

namespace detail {
struct ParstackPlanAccess;  // the library's way to the plan's state
}  // namespace detail

// Device buffers that persist across calls, so repeated calls on same-sized problems allocate
// nothing on the GPU. Host backends ignore it. Not thread-safe: one plan per calling thread.
// What it holds is private to the library; callers see its counters.
class ParstackPlan {
 public:
  ParstackPlan();
  ~ParstackPlan();
  ParstackPlan(ParstackPlan&&) noexcept;
  ParstackPlan& operator=(ParstackPlan&&) noexcept;

  struct Counters {
    long device_allocations = 0;      // cudaMalloc calls made by this plan so far
    double bytes_host_to_device = 0;  // over the plan's life
    double bytes_device_to_host = 0;
    double device_bytes_held = 0;  // current size of the persistent buffers
  };
  Counters counters() const;  // zeros for a moved-from plan

 private:
  friend struct detail::ParstackPlanAccess;
  struct State;
  std::unique_ptr<State> state_;
};

// Runs parstack on `device`, writing `result` (see parstack_result_size; on several ranks, the
// rows result_layout gives the rank), and returns the output window. `timers` (optional) receives
// the regions "parstack/…"; `plan` (optional) keeps device buffers alive between calls. Throws
// InvalidArgument / TypeError / NotCompiled / DeviceUnavailable.
template <class T>
Extent parstack(const Device& device, const ParstackInput<T>& in, std::span<T> result,
                const ParstackOptions& opt = {}, Timers* timers = nullptr,
                ParstackPlan* plan = nullptr);

// Index of the maximum along axis 0 of a (rows, cols) row-major array: out[c] = argmax_r a[r, c].
// The first maximum wins, like numpy, and NaN counts as the largest value (numpy's argmax returns
// the first NaN of a column). pyrocko_compat reproduces pyrocko's C code: the running maximum
// starts at DBL_MIN, so a column whose values are all <= 0 gives 0, and NaN never wins.
template <class T>
void argmax(std::span<const T> a, std::int64_t rows, std::int64_t cols,
            std::span<std::uint32_t> out, int nparallel = 0, bool pyrocko_compat = false);

}  // namespace sciproxy::stack
