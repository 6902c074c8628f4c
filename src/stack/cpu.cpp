// parstack, CPU backend: OpenMP over (output tile, shift set), SIMD over output samples.
//   R[s, k] = sum_i w[s,i] * a_i[k - start(s,i)],  M[s] = max_k R[s, k]     (pyrocko parstack)
// Why it is faster than pyrocko's loop, which makes one pass over the output row per trace:
// - the output is cut into tiles that stay in L1/L2, and traces are added in groups of up to eight,
//   so an output vector is loaded and stored once per eight traces instead of once per trace;
// - the traces are copied once per call with a tile of zeros on either side, so a trace that
//   covers only part of a tile is added like any other (its zeros add nothing) instead of alone;
// - tiles are ordered time-major, so consecutive jobs of a thread read nearby trace samples,
//   which stay in L2; method 1 reduces each tile to its maximum and never writes the stack.
// Accumulation is in T, as in pyrocko; the order of the sum is fixed, so the result does not
// depend on the thread count.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/cancel_region.hpp"
#include "kernels.hpp"
#include "math.hpp"

namespace sciproxy::stack::kernels::cpu {

namespace {

template <class T>
constexpr std::int64_t kTile = 16384 / sizeof(T);  // 16 KiB: long enough runs for the prefetchers

// Every trace with kTile zeros before and after it, in one buffer. Filled in parallel and without
// a zeroing pass over the samples, since the copy costs about as much as a few shift sets.
template <class T>
struct PaddedTraces {
  std::unique_ptr<T[]> data;
  std::vector<std::int64_t> first;  // index in data of each trace's sample 0

  explicit PaddedTraces(const Problem<T>& p) : first(p.ntraces) {
    std::int64_t size = 0;
    for (std::int64_t i = 0; i < p.ntraces; ++i) {
      first[i] = size + kTile<T>;
      size += p.lengths[i] + 2 * kTile<T>;
    }
    data.reset(new T[size]);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < p.ntraces; ++i) {
      T* sample0 = data.get() + first[i];
      std::fill(sample0 - kTile<T>, sample0, T(0));
      std::copy(p.traces[i], p.traces[i] + p.lengths[i], sample0);
      std::fill(sample0 + p.lengths[i], sample0 + p.lengths[i] + kTile<T>, T(0));
    }
  }
};

template <class T>
struct Term {
  const T* src;  // the padded trace sample that lands on the tile's first output sample
  T weight;
};

// out[j] (+)= sum_g w[g] * src[g][j] for j < n; G traces per pass over out. The first pass of a
// tile that is not accumulated writes out instead of adding to it, so no separate zeroing.
template <int G, bool kAdd, class T>
inline void add_traces(T* __restrict out, std::int64_t n, const Term<T>* terms) {
  const T* src[G];
  T w[G];
  for (int g = 0; g < G; ++g) {
    src[g] = terms[g].src;
    w[g] = terms[g].weight;
  }
#pragma omp simd
  for (std::int64_t j = 0; j < n; ++j) {
    T acc = kAdd ? out[j] : T(0);
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) acc += w[g] * src[g][j];
    out[j] = acc;
  }
}

// A group of 1 to kMaxGroup traces, through its unrolled specialisation (GroupSizes).
template <bool kAdd, class T>
void add_group(T* out, std::int64_t n, const Term<T>* terms, std::size_t count) {
  with_value<GroupSizes>(static_cast<int>(count), "trace group size", [&](auto group) {
    add_traces<decltype(group)::value, kAdd>(out, n, terms);
  });
}

// The stack of shift set s over output samples [k0, k1), written (or added, with accumulate)
// into tile[0 .. k1-k0).
template <class T>
void stack_tile(const Problem<T>& p, const PaddedTraces<T>& padded, std::int64_t s, std::int64_t k0,
                std::int64_t k1, bool accumulate, T* tile, std::vector<Term<T>>& terms) {
  terms.clear();
  for (std::int64_t i = 0; i < p.ntraces; ++i) {
    const T w = p.weights[s * p.ntraces + i];
    if (w == T(0)) continue;
    const std::int64_t start = trace_start(p.offsets[i], p.shifts[s * p.ntraces + i], p.offsetout);
    const Overlap o = trace_overlap(start, p.lengths[i], p.lengthout);
    if (std::max(o.begin, k0) >= std::min(o.end, k1)) continue;
    // The tile reads samples [k0 - start, k1 - start): inside the trace and its pads.
    terms.push_back({padded.data.get() + padded.first[i] + (k0 - start), w});
  }
  const std::int64_t n = k1 - k0;
  if (terms.empty()) {
    if (!accumulate) std::fill(tile, tile + n, T(0));
    return;
  }
  const std::size_t first = std::min<std::size_t>(kMaxGroup, terms.size());
  if (accumulate)
    add_group<true>(tile, n, terms.data(), first);
  else
    add_group<false>(tile, n, terms.data(), first);
  for (std::size_t g = first; g < terms.size(); g += kMaxGroup)
    add_group<true>(tile, n, terms.data() + g, std::min<std::size_t>(kMaxGroup, terms.size() - g));
}

}  // namespace

template <class T>
SCIPROXY_STACK_PARSTACK(T) {
  (void)plan;  // device state only
  auto compute = Timers::region(ctx.timers, "compute");
  ThreadCount threads(p.nparallel);
  const PaddedTraces<T> padded(p);
  const std::int64_t ntiles = (p.lengthout + kTile<T> - 1) / kTile<T>;
  const std::int64_t njobs = ntiles * p.nshifts;
  std::vector<T> tile_max(p.method == Method::max ? njobs : 0);
  // Cancellation (core/cancel_region.hpp): thread 0 polls as it takes a job; once stopped, every
  // thread skips its remaining jobs, and the calling thread throws after the region.
  RegionStop stop;
#pragma omp parallel
  {
    std::vector<Term<T>> terms;
    terms.reserve(p.ntraces);
    std::vector<T> scratch(p.method == Method::max ? kTile<T> : 0);
#pragma omp for schedule(dynamic, 4)
    for (std::int64_t job = 0; job < njobs; ++job) {
      if (stop.poll(job)) continue;
      const std::int64_t s = job % p.nshifts, k0 = (job / p.nshifts) * kTile<T>;
      const std::int64_t k1 = std::min(p.lengthout, k0 + kTile<T>);
      if (p.method == Method::stack) {
        stack_tile(p, padded, s, k0, k1, p.accumulate, result + s * p.lengthout + k0, terms);
      } else {
        stack_tile(p, padded, s, k0, k1, false, scratch.data(), terms);
        T m = scratch[0];
#pragma omp simd reduction(max : m)
        for (std::int64_t j = 1; j < k1 - k0; ++j) m = std::max(m, scratch[j]);
        tile_max[job] = m;
      }
    }
    if (p.method == Method::max && !stop.stopped()) {  // the same value on every thread here
#pragma omp for schedule(static)
      for (std::int64_t s = 0; s < p.nshifts; ++s) {
        T m = max_initial_value<T>(p.clamp_max_at_zero);
        for (std::int64_t t = 0; t < ntiles; ++t) m = std::max(m, tile_max[t * p.nshifts + s]);
        result[s] = m;
      }
    }
  }
  stop.throw_if_stopped("parstack", njobs, "tiles of shifts");
}

template <class T>
SCIPROXY_STACK_ARGMAX(T) {
  (void)ctx;
  // Blocks of columns, so each row read is a contiguous run and the running maxima stay in L1.
  constexpr std::int64_t kColumns = 256;
  const std::int64_t nblocks = (cols + kColumns - 1) / kColumns;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t b = 0; b < nblocks; ++b) {
    const std::int64_t c0 = b * kColumns, n = std::min(cols, c0 + kColumns) - c0;
    double best[kColumns];
    std::uint32_t where[kColumns];
    for (std::int64_t j = 0; j < n; ++j) {
      best[j] =
          pyrocko_compat ? 2.2250738585072014e-308 /* DBL_MIN */ : static_cast<double>(a[c0 + j]);
      where[j] = 0;
    }
    for (std::int64_t r = pyrocko_compat ? 0 : 1; r < rows; ++r) {
      const T* row = a + r * cols + c0;
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) {
        const double v = row[j];
        const bool larger = argmax_replaces(v, best[j], pyrocko_compat);
        best[j] = larger ? v : best[j];
        where[j] = larger ? static_cast<std::uint32_t>(r) : where[j];
      }
    }
    std::copy(where, where + n, out + c0);
  }
}

template SCIPROXY_STACK_PARSTACK(float);
template SCIPROXY_STACK_PARSTACK(double);
template SCIPROXY_STACK_ARGMAX(float);
template SCIPROXY_STACK_ARGMAX(double);

}  // namespace sciproxy::stack::kernels::cpu
