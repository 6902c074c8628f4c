// parstack, CPU backend: OpenMP over (run, or block of runs, of neighbouring shift sets; chunk of
// output samples), SIMD over samples.
//   R[s, k] = sum_i w[s,i] * a_i[k - start(s,i)],  M[s] = max_k R[s, k]     (pyrocko parstack)
// Why it is faster than pyrocko's loop, which makes one pass over the output row per trace:
// - each output vector is summed over every trace in registers and written once (method 0) or
//   reduced into the running maximum and never written (method 1): one trace load per
//   multiply-add and nothing else, where a pass per trace also loads and stores the output;
// - the chunk of output samples is cut into segments at the (vector-rounded) points where a trace
//   starts or stops, so the traces active in a segment are summed without a test per sample and
//   without adding zeros: the work is the overlap, whatever the spread of the shifts (moveouts
//   of hundreds to thousands of samples cost no more per multiply-add than aligned ones);
// - the traces are copied once per call with kGrain vectors of zeros on either side, so the
//   vector that holds a trace's first or last sample is read in full and its outside lanes add
//   zero; the copy's buffer is kept per calling thread, so calls do not page-fault a fresh one;
// - more than 32 traces are summed 16 at a time: over blocks of 4 KiB, the partial sums in L1,
//   where neighbouring shift sets form runs; else in groups of 16 consecutive traces, each group
//   added by a whole block of shift sets to their partial sums over the chunk, so that the
//   group's stretch of the traces stays in L2 while the block reads it (a hundred stations'
//   moveouts over thousands of samples); jobs go by blocks of up to 32 shift sets, chunk-major;
// - runs of up to 8 neighbouring shift sets whose shifts nearly agree (the moveouts of
//   neighbouring candidate sources) are stacked one set after the other over each tile of output
//   vectors, so that the later sets' loads hit the lines the first has brought to L1;
// - a method-0 stack larger than the last-level cache is written with non-temporal stores,
//   shifted to vector boundaries (Stream), so its lines are not first read from DRAM.
// Accumulation is in T, as in pyrocko; each output sample sums its traces in trace order, on one
// thread, so the result depends neither on the thread count, nor on the chunking, nor on which
// shift sets are stacked together, nor on whether their traces go in passes or in groups.
#include <omp.h>

#if defined(__AVX__)
#include <immintrin.h>  // streaming stores
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "core/cancel_region.hpp"
#include "kernels.hpp"
#include "math.hpp"
#include "sciproxy/core/roofline.hpp"

namespace sciproxy::stack::kernels::cpu {

namespace {

// 32-byte vectors of T through GCC's vector extensions (AVX2 registers; 32 of them with
// AVX-512VL); VecU is the same vector at any element alignment. Not 64 bytes: a shift puts a
// trace's vectors anywhere, and a 64-byte load from anywhere but a line's start spans two cache
// lines, where a 32-byte one does so half the time. Zen 4, one thread, 16 traces in L2, shifts
// of +-5: 16.6 GMAC/s (float32) with 64-byte vectors, 20.9 with 32-byte ones. 2 threads,
// alternating builds: size a at +-10 1.14-1.27x faster; size c and wide spreads 0.95-1.1x, within
// the noise (docs/kernels/parstack.md).
constexpr std::size_t kVectorBytes = 32;
template <class T>
struct Simd {
  typedef T Vec __attribute__((vector_size(kVectorBytes)));
  typedef T VecU __attribute__((vector_size(kVectorBytes), aligned(sizeof(T)), may_alias));
  static constexpr std::int64_t W = kVectorBytes / sizeof(T);
  static Vec load(const T* p) { return *reinterpret_cast<const VecU*>(p); }
  static void store(T* p, Vec v) { *reinterpret_cast<VecU*>(p) = v; }
  static Vec broadcast(T x) { return Vec{} + x; }
};

// Segments start and end on multiples of kGrain vectors of the chunk: a trace's range is rounded
// out to them (reading its zero pads), which costs at most 2 * kGrain vectors of a trace and keeps
// every segment long enough to amortise choosing its traces. With moveouts of hundreds of samples
// most of a chunk lies where traces start and stop; 16 vectors (128 float32 samples) rather than
// 4 made size a at +-500 10% faster (1 thread, docs/kernels/parstack.md), for at most 2 x 128
// extra multiply-adds by zero per trace and chunk (under 2% of a 6000-sample trace per chunk).
constexpr std::int64_t kGrain = 16;

// The padded copy's memory, kept per calling thread from one call to the next and only grown: a
// fresh buffer of 12-24 MB (size c) costs thousands of page faults per call, as much as the
// stacking itself, because glibc returns such blocks to the system when they are freed. Aligned to
// a page, so that PaddedTraces can place each trace at a chosen offset within one.
constexpr std::size_t kPageBytes = 4096, kLineBytes = 64;

struct Free {
  void operator()(void* p) const { std::free(p); }
};
template <class T>
using Buffer = std::unique_ptr<T[], Free>;

// size elements of T, uninitialised, from a page boundary.
template <class T>
Buffer<T> aligned_buffer(std::int64_t size) {
  const std::size_t bytes =
      (static_cast<std::size_t>(size) * sizeof(T) + kPageBytes - 1) / kPageBytes * kPageBytes;
  Buffer<T> buffer(static_cast<T*>(std::aligned_alloc(kPageBytes, std::max(bytes, kPageBytes))));
  if (!buffer) throw std::bad_alloc();
  return buffer;
}

template <class T>
T* padded_buffer(std::int64_t size) {
  thread_local Buffer<T> buffer;
  thread_local std::int64_t capacity = 0;
  if (size > capacity) {
    buffer.reset();
    buffer = aligned_buffer<T>(size);
    capacity = size;
  }
  return buffer.get();
}

// Every trace with kGrain vectors of zeros before and after it, in one buffer (padded_buffer, so
// one parstack at a time per calling thread). Filled in parallel. Trace i starts 17 i cache lines
// (modulo a page) past a page boundary: traces whose padded length is a multiple of 4 KiB (6000
// float64 samples) would otherwise all map to the same L1 sets, and with shifts of a few samples
// the 8-way L1 held 8 of 30 streams (size a at +-10, float64: 6.5 against 9.6 GMAC/s, 1 thread).
template <class T>
struct PaddedTraces {
  static constexpr std::int64_t kPad = kGrain * Simd<T>::W;
  static constexpr std::int64_t kPage = kPageBytes / sizeof(T), kLine = kLineBytes / sizeof(T);
  T* data;
  std::vector<std::int64_t> first;  // index in data of each trace's sample 0

  explicit PaddedTraces(const Problem<T>& p) : first(p.ntraces) {
    std::int64_t size = 0;
    for (std::int64_t i = 0; i < p.ntraces; ++i) {
      const std::int64_t page = (size + kPage - 1) / kPage * kPage;
      first[i] = page + (17 * i) % (kPage / kLine) * kLine + kPad;
      size = first[i] + p.lengths[i] + kPad;
    }
    data = padded_buffer<T>(size);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < p.ntraces; ++i) {
      T* sample0 = data + first[i];
      std::fill(sample0 - kPad, sample0, T(0));
      std::copy(p.traces[i], p.traces[i] + p.lengths[i], sample0);
      std::fill(sample0 + p.lengths[i], sample0 + p.lengths[i] + kPad, T(0));
    }
  }
};

// One weighted trace over a chunk: src[j] is the (padded) trace sample of chunk sample j, read
// for the chunk's vectors [begin, end) only.
template <class T>
struct Term {
  const T* src;
  T weight;
  std::int64_t begin, end;  // in vectors of the chunk
  std::int64_t trace;
};

// A run of up to kGroup neighbouring shift sets whose shifts nearly agree (the moveouts of
// neighbouring candidate sources) is stacked one set after the other over each tile of U output
// vectors, in a job of its own or, in groups of traces, within its block's job (Job below): the
// later sets' loads of a trace hit the lines the earlier ones have just brought to L1, so the trace
// comes from L2 once per run instead of once per set. Each set's sums keep their own order (trace
// order), so the result is the same whether a set runs alone or in a run. The loop alone
// (bench/parstack_loads.cpp, one thread, float32, shifts within +-10): 30 traces 29.0 GMAC/s in
// pairs of sets (both sets' accumulators in registers, the earlier design), 31.3 in runs of 4 or 8;
// 100 traces of 30000 samples (passes of 16) 14.3 one set at a time, 15.9-17.7 in pairs, 23.7-24.4
// in runs of 8. In the kernel, runs of at most 4, 8 and 16 sets timed the same within the noise
// (sizes a, b, c at +-10 to +-2000, 2 threads, alternating builds; docs/kernels/parstack.md, "Runs
// of shift sets").
constexpr int kGroup = 8;

// One weighted trace of a segment.
template <class T>
struct Entry {
  const T* src;
  T weight;
};

// What a chunk's vectors become: written to out (method 0, added to out's values when
// accumulating) or folded into a running maximum (method 1) over the chunk's first n samples.
template <class T>
struct Sink {
  T* out = nullptr;  // method 0: the chunk's output samples; null for method 1
  bool accumulate = false;
  std::int64_t n = 0;  // samples in the chunk (the last vector may be partial)
  typename Simd<T>::Vec max;
  // Method 0 with streaming stores (Stream below): out + k is `skew` samples past a vector
  // boundary, and `carry` is the last vector given, whose last skew lanes are not written yet.
  bool stream = false;
  std::int64_t skew = 0;
  typename Simd<T>::Vec carry;

  // Vector v of out; the lanes past n (a partial last vector) are zero, never read.
  typename Simd<T>::Vec load(std::int64_t v) const {
    constexpr std::int64_t W = Simd<T>::W;
    if ((v + 1) * W <= n) return Simd<T>::load(out + v * W);
    typename Simd<T>::Vec x{};
    for (std::int64_t l = 0; l < n - v * W; ++l) x[l] = out[v * W + l];
    return x;
  }
};

// The chunk's partial last vector x at sample k: only its first n - k lanes exist. Returns the
// running maximum `max` with them folded in. Out of line and by value, so the accumulators and the
// maximum of the loops stay in registers.
template <class T>
[[gnu::noinline]] typename Simd<T>::Vec finish_partial(const Sink<T>& sink, typename Simd<T>::Vec x,
                                                       std::int64_t k, typename Simd<T>::Vec max) {
  T lanes[Simd<T>::W], m = max[0];
  Simd<T>::store(lanes, x);
  for (std::int64_t l = 0; l < sink.n - k; ++l) {
    if (sink.out)
      sink.out[k + l] = lanes[l];
    else
      m = std::max(m, lanes[l]);
  }
  max[0] = m;
  return max;
}

// Method 0's large outputs are written with non-temporal stores: a plain store first reads the
// line it writes (twice the DRAM traffic for a stack that leaves the caches anyway). Those need
// addresses aligned to the vector, and a row's chunk starts anywhere, so each vector is stored
// shifted to the boundaries: the carried last lanes of the previous vector, then this vector's
// first ones. The vectors of a chunk reach the sink in order; the unaligned head and tail of the
// chunk get plain stores, so nothing outside the chunk is written. Only the stores change: the same
// sums land in the same samples.
#if defined(__AVX__)
constexpr bool kCanStream = true;
inline void stream_store(float* at, Simd<float>::Vec x) {
  _mm256_stream_ps(at, (__m256)x);
}
inline void stream_store(double* at, Simd<double>::Vec x) {
  _mm256_stream_pd(at, (__m256d)x);
}
inline void stream_fence() {
  _mm_sfence();
}
#else  // no AVX: plain stores, never called
constexpr bool kCanStream = false;
template <class T>
void stream_store(T* at, typename Simd<T>::Vec x) {
  Simd<T>::store(at, x);
}
inline void stream_fence() {}
#endif

template <class T>
struct Stream {
  using S = Simd<T>;
  using Vec = typename S::Vec;
  using Index = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  typedef Index IndexVec __attribute__((vector_size(kVectorBytes)));
  static constexpr std::int64_t W = S::W;

  // The full vector x of the chunk at sample k.
  static void put(Sink<T>& sink, Vec x, std::int64_t k) {
    T* at = sink.out + k - sink.skew;  // aligned to the vector
    if (sink.skew == 0) {
      stream_store(at, x);
    } else if (k == 0) {
      for (std::int64_t l = 0; l < W - sink.skew; ++l) sink.out[l] = x[l];
    } else {
      IndexVec shift;
      for (std::int64_t l = 0; l < W; ++l) shift[l] = static_cast<Index>(l + W - sink.skew);
      stream_store(at, __builtin_shuffle(sink.carry, x, shift));
    }
    sink.carry = x;
  }

  // After the chunk's full vectors, ending at sample k: the lanes still carried.
  static void flush(Sink<T>& sink, std::int64_t k) {
    if (k == 0) return;
    for (std::int64_t l = W - sink.skew; l < W; ++l) sink.out[k - W + l] = sink.carry[l];
  }
};

// Where a pass over vectors starts and ends: from null starts at zero (or at out's values when
// accumulating), else at the partial sums of the earlier traces in from[(v - base) * W ...]; to
// null finishes into the sink, else the partial sums go to to[(v - base) * W ...].
template <class T>
struct Partials {
  const T* from = nullptr;
  T* to = nullptr;
  std::int64_t base = 0;
};

// Vectors [v, v + U) of one shift set before its traces are added: zero, out's values, or the
// partial sums of an earlier pass.
template <int U, class T>
inline void start_vectors(typename Simd<T>::Vec* acc, const Sink<T>& sink,
                          const Partials<T>& partials, std::int64_t v) {
  using S = Simd<T>;
  for (int u = 0; u < U; ++u)
    acc[u] = partials.from     ? S::load(partials.from + (v + u - partials.base) * S::W)
             : sink.accumulate ? sink.load(v + u)
                               : typename S::Vec{};
}

// Vectors [v, v + U) of one shift set once its traces are added: to the next pass, or to the sink.
template <int U, class T>
inline void finish_vectors(const typename Simd<T>::Vec* acc, Sink<T>& sink,
                           const Partials<T>& partials, std::int64_t v,
                           typename Simd<T>::Vec& max) {
  using S = Simd<T>;
  constexpr std::int64_t W = S::W;
  if (partials.to) {
    for (int u = 0; u < U; ++u) S::store(partials.to + (v + u - partials.base) * W, acc[u]);
    return;
  }
  // The running maximum in a register: `max` is a T vector in memory that the stores below could
  // alias, so each fold into it would be a load and a store.
  typename Simd<T>::Vec m = max;
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
    const std::int64_t k = (v + u) * W;
    if (k + W > sink.n) {
      if (sink.stream) Stream<T>::flush(sink, k);
      m = finish_partial(sink, acc[u], k, m);
    } else if (sink.stream)
      Stream<T>::put(sink, acc[u], k);
    else if (sink.out)
      S::store(sink.out + k, acc[u]);
    else
      m = m > acc[u] ? m : acc[u];
  }
  max = m;
}

// The traces of one shift set over a segment (or one pass's share of them), and where its sums go.
template <class T>
struct SetRun {
  const Entry<T>* entries;
  std::size_t count;
  Sink<T>* sink;
  Partials<T> partials;
};

// The U vectors at v of one set: its entries summed into U accumulators (registers).
template <int U, class T>
[[gnu::always_inline]] inline void sum_tile(const SetRun<T>& run, std::int64_t v,
                                            typename Simd<T>::Vec& max) {
  using S = Simd<T>;
  using Vec = typename S::Vec;
  constexpr std::int64_t W = S::W;
  Vec acc[U];
  start_vectors<U>(acc, *run.sink, run.partials, v);
  for (std::size_t t = 0; t < run.count; ++t) {
    const T* src = run.entries[t].src + v * W;
    // One register for the trace's tile, read at constant displacements: without this GCC keeps
    // the U offsets (v + u) W in registers of their own, spills them and reloads one per
    // multiply-add (size c ran 25% slower).
    asm("" : "+r"(src));
    const Vec w = S::broadcast(run.entries[t].weight);
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) acc[u] += w * S::load(src + u * W);
  }
  finish_vectors<U>(acc, *run.sink, run.partials, v, max);
}

// Vectors [v0, v1) of the chunk for the runs' shift sets, U vectors at a time: for each tile, one
// set after the other. Out of line, one function per case, each small enough that GCC keeps the
// U accumulators in registers (inlined into one larger function, it kept some on the stack, a
// store and a load per multiply-add: size a at +-5000 ran 30% slower). A single set (most
// segments at wide spreads, where sets rarely join) keeps its run and running maximum in
// registers through the segment.
template <int U, class T>
[[gnu::noinline]] void sum_vectors_one(SetRun<T> run, std::int64_t v0, std::int64_t v1) {
  typename Simd<T>::Vec max = run.sink->max;
  for (std::int64_t v = v0; v + U <= v1; v += U) sum_tile<U>(run, v, max);
  run.sink->max = max;
}

template <int U, class T>
[[gnu::noinline]] void sum_vectors_many(const SetRun<T>* runs, int nruns, std::int64_t v0,
                                        std::int64_t v1) {
  for (std::int64_t v = v0; v + U <= v1; v += U)
    for (int r = 0; r < nruns; ++r) {
      typename Simd<T>::Vec max = runs[r].sink->max;
      sum_tile<U>(runs[r], v, max);
      runs[r].sink->max = max;
    }
}

template <int U, class T>
inline void sum_vectors(const SetRun<T>* runs, int nruns, std::int64_t v0, std::int64_t v1) {
  if (v0 + U > v1) return;
  if (nruns == 1)
    sum_vectors_one<U>(runs[0], v0, v1);
  else
    sum_vectors_many<U>(runs, nruns, v0, v1);
}

// Vectors [v0, v1) by 8, then 4, 2, 1: 8 independent accumulators keep both FMA pipes busy, and
// segments between the starts and ends of traces are often only a few vectors long.
template <class T>
void sum_vectors_by_8(const SetRun<T>* runs, int nruns, std::int64_t v0, std::int64_t v1) {
  std::int64_t v = v0;
  const auto run = [&](auto unroll) {
    constexpr int U = decltype(unroll)::value;
    const std::int64_t vu = v + (v1 - v) / U * U;
    sum_vectors<U>(runs, nruns, v, vu);
    v = vu;
  };
  run(std::integral_constant<int, 8>{});
  run(std::integral_constant<int, 4>{});
  run(std::integral_constant<int, 2>{});
  run(std::integral_constant<int, 1>{});
}

// A segment with up to kTracesInOnePass traces is summed in one pass, every output vector's sums in
// registers from its first trace to its last; passes cost more than they save there (30 traces:
// 17% faster in one pass than in two). More (a hundred stations, more than the prefetchers
// follow streams) go kTracesPerPass traces at a time: over blocks of kVectorsPerBlock vectors,
// the block's partial sums in L1 between the passes (sum_segment), or, where the shift sets do not
// form runs, in groups of consecutive traces over a whole block of sets (stack_groups). Either
// way each output sample sums its traces in trace order, so the result is the same bit for bit.
constexpr std::size_t kTracesInOnePass = 32;
constexpr std::size_t kTracesPerPass = 16;
constexpr std::int64_t kVectorsPerBlock = 4096 / kVectorBytes;

template <class T>
void sum_segment(const SetRun<T>* runs, int nruns, std::int64_t v0, std::int64_t v1) {
  std::size_t most = 0;
  for (int r = 0; r < nruns; ++r) most = std::max(most, runs[r].count);
  if (most <= kTracesInOnePass) {
    sum_vectors_by_8(runs, nruns, v0, v1);
    return;
  }
  alignas(64) T partial[kGroup][kVectorsPerBlock * Simd<T>::W];
  for (std::int64_t b0 = v0; b0 < v1; b0 += kVectorsPerBlock) {
    const std::int64_t b1 = std::min(v1, b0 + kVectorsPerBlock);
    for (std::size_t g = 0; g < most; g += kTracesPerPass) {
      SetRun<T> pass[kGroup];
      int npass = 0;
      for (int r = 0; r < nruns; ++r) {
        const std::size_t count = runs[r].count;
        if (count <= g) continue;
        const std::size_t n = std::min(kTracesPerPass, count - g);
        pass[npass++] = {runs[r].entries + g,
                         n,
                         runs[r].sink,
                         {g > 0 ? partial[r] : nullptr, g + n < count ? partial[r] : nullptr, b0}};
      }
      sum_vectors_by_8(pass, npass, b0, b1);
    }
  }
}

// Where a chunk's segments start: bit g of `bits` marks vector g * kGrain. Traces start and end on
// whole grains (or at the chunk's end), so the boundaries come out sorted and unique without a
// sort per job.
struct Cuts {
  std::vector<std::uint64_t> bits;

  void clear(std::int64_t nvec) {
    bits.assign(static_cast<std::size_t>(nvec / kGrain / 64 + 1), 0);
  }
  void add(std::int64_t v) { bits[v / kGrain / 64] |= std::uint64_t(1) << (v / kGrain % 64); }
  // f(v0, v1) for each segment of [0, nvec), in order.
  template <class F>
  void for_each_segment(std::int64_t nvec, F&& f) const {
    std::int64_t v0 = 0;
    for (std::size_t word = 0; word < bits.size(); ++word)
      for (std::uint64_t b = bits[word]; b != 0; b &= b - 1) {
        const std::int64_t v = (static_cast<std::int64_t>(word) * 64 + __builtin_ctzll(b)) * kGrain;
        if (v <= v0 || v >= nvec) continue;
        f(v0, v);
        v0 = v;
      }
    f(v0, nvec);
  }
};

constexpr std::int64_t kBlock = 32;  // shift sets per block of jobs (at least kGroup)

// What a thread keeps from one job to the next.
template <class T>
struct Scratch {
  std::vector<Term<T>> terms[kBlock];     // per set of the job
  std::vector<Entry<T>> entries[kBlock];  // grown to the terms
  Cuts cuts[kBlock];                      // per run of the job
  Buffer<T> partial;  // stack_groups: the sums of every set of the job over its chunk
  std::int64_t partial_size = 0;

  T* partials(std::int64_t size) {
    if (size > partial_size) {
      partial = aligned_buffer<T>(size);
      partial_size = size;
    }
    return partial.get();
  }
};

// A job: the runs [r0, r1) of shift sets (run r is the sets [run_first[r], run_first[r + 1]),
// at most kBlock sets in all) on one chunk of output samples, their traces summed by segments
// (stack_segments) or, with more than kTracesInOnePass traces and sets that form no runs, in
// groups (stack_groups).
struct Job {
  std::int64_t r0, r1, chunk;
  bool grouped;
};

// What a job's sets have in the chunk: their traces (terms, in trace order), the cuts of each run
// into segments, and their sinks.
template <class T>
struct JobSets {
  const std::int64_t* run_first = nullptr;
  std::int64_t r0 = 0, r1 = 0, s0 = 0;
  std::int64_t nvec = 0;
  Sink<T> sinks[kBlock];
  bool uncovered[kBlock] = {};  // some sample of the chunk has no trace of the set: R is 0 there
};

// Set j's traces from its term `from` on, up to trace g1 (exclusive), that cover the segment of
// vectors [v0, v1): into its entries, in trace order; returns how many. Branch-free, as which
// ones do is random.
template <class T>
std::size_t covering_traces(Scratch<T>& scratch, std::int64_t j, std::size_t from, std::int64_t g1,
                            std::int64_t v0, std::int64_t v1) {
  Entry<T>* entries = scratch.entries[j].data();
  const std::vector<Term<T>>& terms = scratch.terms[j];
  std::size_t count = 0;
  for (std::size_t t = from; t < terms.size() && terms[t].trace < g1; ++t) {
    entries[count] = {terms[t].src, terms[t].weight};
    count += (terms[t].begin <= v0) & (terms[t].end >= v1);
  }
  return count;
}

// A segment that no trace of a set covers: R is 0 there.
template <class T>
void empty_segment(Sink<T>& sink, bool& uncovered, std::int64_t v0, std::int64_t v1) {
  using S = Simd<T>;
  constexpr std::int64_t W = S::W;
  if (sink.accumulate) {
    // nothing to add: the output keeps its values
  } else if (sink.stream) {
    for (std::int64_t v = v0; v < v1; ++v) {
      if ((v + 1) * W <= sink.n) {
        Stream<T>::put(sink, typename S::Vec{}, v * W);
      } else {
        Stream<T>::flush(sink, v * W);
        std::fill(sink.out + v * W, sink.out + sink.n, T(0));
      }
    }
  } else if (sink.out) {
    std::fill(sink.out + v0 * W, sink.out + std::min(sink.n, v1 * W), T(0));
  } else {
    uncovered = true;
  }
}

// Each run's segments, straight into the sinks (sum_segment).
template <class T>
void stack_segments(const Problem<T>& p, JobSets<T>& job, Scratch<T>& scratch) {
  for (std::int64_t r = job.r0; r < job.r1; ++r)
    scratch.cuts[r - job.r0].for_each_segment(job.nvec, [&](std::int64_t v0, std::int64_t v1) {
      SetRun<T> runs[kGroup];  // the sets with traces in the segment
      int nruns = 0;
      for (std::int64_t j = job.run_first[r] - job.s0; j < job.run_first[r + 1] - job.s0; ++j) {
        const std::size_t count = covering_traces(scratch, j, 0, p.ntraces, v0, v1);
        if (count > 0)
          runs[nruns++] = {scratch.entries[j].data(), count, &job.sinks[j], {}};
        else
          empty_segment(job.sinks[j], job.uncovered[j], v0, v1);
      }
      if (nruns > 0) sum_segment(runs, nruns, v0, v1);
    });
}

// More than kTracesInOnePass traces, where shift sets do not form runs (moveouts that spread over
// thousands of samples): a group of kTracesPerPass consecutive traces at a time, added by every
// set of the job (every segment of every run) to its partial sums over the whole chunk, then the
// next group. A group's stretch of the traces (16 traces x the chunk and the spread of the
// block's shifts) stays in L2 while the block's sets read it, where a set that sums all its
// traces in turn reads a hundred traces' stretches, which come from L3, and the next set reads
// them again. The partial sums are in L2 rather than L1 (sum_segment's), which is slower where
// runs of sets read their traces from L1 (docs/kernels/parstack.md). Each set's sums start at
// zero (or out's values) over the whole chunk and its traces are still added in trace order.
template <class T>
void stack_groups(const Problem<T>& p, JobSets<T>& job, Scratch<T>& scratch) {
  constexpr std::int64_t W = Simd<T>::W;
  const std::int64_t pitch = job.nvec * W;
  const std::int64_t nsets = job.run_first[job.r1] - job.s0;
  T* partial = scratch.partials(nsets * pitch);
  for (std::int64_t j = 0; j < nsets; ++j) {
    T* sums = partial + j * pitch;
    const Sink<T>& sink = job.sinks[j];
    const std::int64_t kept = sink.accumulate ? sink.n : 0;
    if (kept > 0) std::copy(sink.out, sink.out + kept, sums);
    std::fill(sums + kept, sums + pitch, T(0));
  }
  std::size_t from[kBlock] = {};  // each set's first term of the group
  constexpr auto kPass = static_cast<std::int64_t>(kTracesPerPass);
  for (std::int64_t g0 = 0; g0 < p.ntraces; g0 += kPass) {
    const std::int64_t g1 = g0 + kPass;
    for (std::int64_t r = job.r0; r < job.r1; ++r)
      scratch.cuts[r - job.r0].for_each_segment(job.nvec, [&](std::int64_t v0, std::int64_t v1) {
        SetRun<T> runs[kGroup];  // the sets with traces of the group in the segment
        int nruns = 0;
        for (std::int64_t j = job.run_first[r] - job.s0; j < job.run_first[r + 1] - job.s0; ++j) {
          T* sums = partial + j * pitch;
          const std::size_t count = covering_traces(scratch, j, from[j], g1, v0, v1);
          if (count > 0)
            runs[nruns++] = {scratch.entries[j].data(), count, &job.sinks[j], {sums, sums, 0}};
        }
        if (nruns > 0) sum_vectors_by_8(runs, nruns, v0, v1);
      });
    for (std::int64_t j = 0; j < nsets; ++j)
      while (from[j] < scratch.terms[j].size() && scratch.terms[j][from[j]].trace < g1) ++from[j];
  }
  for (std::int64_t j = 0; j < nsets; ++j) {  // the sums to the sinks: a pass over no traces
    const SetRun<T> finish{nullptr, 0, &job.sinks[j], {partial + j * pitch, nullptr, 0}};
    sum_vectors_by_8(&finish, 1, 0, job.nvec);
  }
}

// Output samples [k0, k0 + n) of the job's sets: set s's are written to result's row s (method 0;
// result null for method 1) and its maximum over them to max[s - run_first[r0]].
template <class T>
void stack_job(const Problem<T>& p, const PaddedTraces<T>& padded, const std::int64_t* run_first,
               const Job& jb, std::int64_t k0, std::int64_t n, T* result, bool stream, T* max,
               Scratch<T>& scratch) {
  using S = Simd<T>;
  constexpr std::int64_t W = S::W;
  JobSets<T> job;
  job.run_first = run_first;
  job.r0 = jb.r0;
  job.r1 = jb.r1;
  job.s0 = run_first[jb.r0];
  job.nvec = (n + W - 1) / W;
  const std::int64_t nsets = run_first[jb.r1] - job.s0;
  for (std::int64_t r = jb.r0; r < jb.r1; ++r) {
    Cuts& cuts = scratch.cuts[r - jb.r0];
    cuts.clear(job.nvec);
    for (std::int64_t s = run_first[r]; s < run_first[r + 1]; ++s) {
      std::vector<Term<T>>& terms = scratch.terms[s - job.s0];
      terms.clear();
      for (std::int64_t i = 0; i < p.ntraces; ++i) {
        const T w = p.weights[s * p.ntraces + i];
        if (w == T(0)) continue;
        const std::int64_t start =
            trace_start(p.offsets[i], p.shifts[s * p.ntraces + i], p.offsetout);
        const Overlap o = trace_overlap(start, p.lengths[i], p.lengthout);
        const std::int64_t b = std::max(o.begin, k0) - k0, e = std::min(o.end, k0 + n) - k0;
        if (b >= e) continue;
        // The vectors that hold samples [b, e), rounded out to the grain: their samples outside
        // the trace read its zero pads, those past the window's end fall in lanes that are dropped.
        const std::int64_t vb = b / W / kGrain * kGrain;
        const std::int64_t ve =
            std::min(job.nvec, ((e + W - 1) / W + kGrain - 1) / kGrain * kGrain);
        terms.push_back({padded.data + padded.first[i] + (k0 - start), w, vb, ve, i});
        cuts.add(vb);
        if (ve < job.nvec) cuts.add(ve);
      }
      std::vector<Entry<T>>& entries = scratch.entries[s - job.s0];
      if (entries.size() < terms.size()) entries.resize(terms.size());
      Sink<T>& sink = job.sinks[s - job.s0];
      sink.out = result ? result + s * p.lengthout + k0 : nullptr;
      sink.accumulate = sink.out && p.accumulate;
      sink.n = n;
      if (sink.out && stream && !sink.accumulate) {
        sink.stream = true;
        sink.skew =
            static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(sink.out) % kVectorBytes) /
            sizeof(T);
      }
      sink.max = S::broadcast(max_initial_value<T>(p.clamp_max_at_zero));
    }
  }
  if (jb.grouped)
    stack_groups(p, job, scratch);
  else
    stack_segments(p, job, scratch);
  for (std::int64_t j = 0; j < nsets; ++j) {
    Sink<T>& sink = job.sinks[j];
    if (sink.stream && n % W == 0) Stream<T>::flush(sink, n);
    T m = job.uncovered[j] ? std::max(T(0), sink.max[0]) : sink.max[0];
    for (std::int64_t l = 1; l < W; ++l) m = std::max(m, sink.max[l]);
    max[j] = m;
  }
}

// How far (in samples) the shifts of a run's sets may lie from its first set's. Alternating
// builds on the moveouts of sizes a, b and c (2 threads, both methods and dtypes): 128 samples was
// as fast as or faster than 64, 256 and a budget of 16 KiB of L1 per traces of a pass (36-192
// samples), within the machine's noise in every row; it is also where neighbouring moveouts of
// size a at +-2000 (median 41 samples apart) begin to pair.
constexpr std::int64_t kRunReach = 128;

// Whether shift set s1 joins the run that starts at set s0: when, for three quarters of the traces
// that both weight, their shifts differ by at most `reach`. Moveouts of neighbouring candidate
// sources differ by a few samples; a random pair, or the last and the first source of two rows of
// a grid, gains nothing from the extra set's streams.
template <class T>
bool stack_together(const Problem<T>& p, std::int64_t s0, std::int64_t s1, std::int64_t reach) {
  std::int64_t both = 0, near = 0;
  for (std::int64_t i = 0; i < p.ntraces; ++i) {
    if (p.weights[s0 * p.ntraces + i] == T(0) || p.weights[s1 * p.ntraces + i] == T(0)) continue;
    const std::int64_t d =
        std::int64_t(p.shifts[s0 * p.ntraces + i]) - p.shifts[s1 * p.ntraces + i];
    ++both;
    near += d >= -reach && d <= reach;
  }
  return both > 0 && 4 * near >= 3 * both;
}

}  // namespace

template <class T>
SCIPROXY_STACK_PARSTACK(T) {
  (void)plan;  // device state only
  auto compute = Timers::region(ctx.timers, "compute");
  ThreadCount threads(p.nparallel);
  const PaddedTraces<T> padded(p);
  // Chunks of a row: p.chunk_samples, whole vectors (api.cpp).
  const std::int64_t chunk_samples = p.chunk_samples;
  const std::int64_t nchunks = (p.lengthout + chunk_samples - 1) / chunk_samples;
  std::vector<T> chunk_max(p.method == Method::max ? nchunks * p.nshifts : 0);
  // Streaming stores for a stack larger than the last-level cache (it leaves the caches anyway);
  // a smaller one stays cached for the caller, who reads it next.
  static const double cache_bytes = last_level_cache_bytes();
  const double out_bytes = static_cast<double>(sizeof(T)) * p.nshifts * p.lengthout;
  const bool stream = kCanStream && p.method == Method::stack && !p.accumulate &&
                      reinterpret_cast<std::uintptr_t>(result) % sizeof(T) == 0 &&
                      out_bytes > (cache_bytes > 0 ? cache_bytes : 32.0 * 1024 * 1024);
  // Runs of neighbouring shift sets stacked together (stack_together), at most kGroup sets each,
  // decided per group of kGroup sets: run r is the sets [run_first[r], run_first[r + 1]).
  std::vector<char> joins(p.nshifts, 0);
#pragma omp parallel for schedule(static)
  for (std::int64_t g0 = 0; g0 < p.nshifts; g0 += kGroup) {
    std::int64_t first = g0;
    for (std::int64_t s = g0 + 1; s < std::min(p.nshifts, g0 + kGroup); ++s) {
      joins[s] = stack_together(p, first, s, kRunReach);
      if (!joins[s]) first = s;
    }
  }
  std::vector<std::int64_t> run_first;
  for (std::int64_t s = 0; s < p.nshifts; ++s)
    if (!joins[s]) run_first.push_back(s);
  run_first.push_back(p.nshifts);
  const std::int64_t nruns = static_cast<std::int64_t>(run_first.size()) - 1;
  // Jobs go by blocks of runs that span up to kBlock sets, chunk-major within a block (every set
  // of the block on one chunk, then the next chunk): consecutive jobs read the same stretch of
  // every trace, and a block's rows of output are written while their freshly mapped pages are
  // still in cache. A block of more than kTracesInOnePass traces whose sets mostly stand alone
  // (runs of fewer than two sets on average) is one job per chunk, summed in groups of traces
  // (stack_groups); otherwise a job is one run on one chunk.
  std::vector<Job> jobs;
  for (std::int64_t r0 = 0, r1; r0 < nruns; r0 = r1) {
    for (r1 = r0 + 1; r1 < nruns && run_first[r1 + 1] - run_first[r0] <= kBlock;) ++r1;
    const bool grouped = p.ntraces > static_cast<std::int64_t>(kTracesInOnePass) &&
                         2 * (r1 - r0) > run_first[r1] - run_first[r0];
    for (std::int64_t chunk = 0; chunk < nchunks; ++chunk)
      if (grouped)
        jobs.push_back({r0, r1, chunk, true});
      else
        for (std::int64_t r = r0; r < r1; ++r) jobs.push_back({r, r + 1, chunk, false});
  }
  const std::int64_t njobs = static_cast<std::int64_t>(jobs.size());
  // Cancellation (core/cancel_region.hpp): thread 0 polls as it takes a job; once stopped, every
  // thread skips its remaining jobs, and the calling thread throws after the region.
  RegionStop stop;
#pragma omp parallel
  {
    Scratch<T> scratch;
#pragma omp for schedule(dynamic, 2) nowait
    for (std::int64_t job = 0; job < njobs; ++job) {
      if (stop.poll(job)) continue;
      const Job& jb = jobs[job];
      const std::int64_t s0 = run_first[jb.r0], nsets = run_first[jb.r1] - s0;
      const std::int64_t k0 = jb.chunk * chunk_samples;
      const std::int64_t n = std::min(p.lengthout - k0, chunk_samples);
      T max[kBlock];
      stack_job(p, padded, run_first.data(), jb, k0, n,
                p.method == Method::stack ? result : nullptr, stream, max, scratch);
      if (p.method == Method::max)
        for (std::int64_t j = 0; j < nsets; ++j) chunk_max[(s0 + j) * nchunks + jb.chunk] = max[j];
    }
    // The streaming stores are weakly ordered: each thread's are made visible before the barrier
    // that ends the jobs. No thread reads the stack before then, so one fence per thread is enough
    // (a fence per job drained the write-combining buffers thousands of times per call).
    if (stream) stream_fence();
#pragma omp barrier
    if (p.method == Method::max && !stop.stopped()) {  // the same value on every thread here
#pragma omp for schedule(static)
      for (std::int64_t s = 0; s < p.nshifts; ++s) {
        T m = max_initial_value<T>(p.clamp_max_at_zero);
        for (std::int64_t c = 0; c < nchunks; ++c) m = std::max(m, chunk_max[s * nchunks + c]);
        result[s] = m;
      }
    }
  }
  stop.throw_if_stopped("parstack", njobs, "chunks of shift sets");
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
