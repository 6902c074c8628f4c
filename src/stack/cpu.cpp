// parstack, CPU backend: OpenMP over (shift set, chunk of output samples), SIMD over samples.
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
// - more than 32 traces are summed 16 at a time over blocks of 4 KiB, the partial sums in L1;
//   jobs go by blocks of 32 shift sets, chunk-major, so the stretch of the traces stays in L2;
// - a method-0 stack larger than the last-level cache is written with non-temporal stores,
//   shifted to vector boundaries (Stream), so its lines are not first read from DRAM.
// Accumulation is in T, as in pyrocko; each output sample sums its traces in trace order, on one
// thread, so the result does not depend on the thread count or the chunking.
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

template <class T>
T* padded_buffer(std::int64_t size) {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<T, Free> buffer;
  thread_local std::int64_t capacity = 0;
  if (size > capacity) {
    buffer.reset();
    const std::size_t bytes =
        (static_cast<std::size_t>(size) * sizeof(T) + kPageBytes - 1) / kPageBytes * kPageBytes;
    buffer.reset(static_cast<T*>(std::aligned_alloc(kPageBytes, bytes)));
    if (!buffer) throw std::bad_alloc();
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

// The chunk's partial last vector x at sample k: only its first n - k lanes exist. Out of line
// and by value, so the accumulators of the loops stay in registers.
template <class T>
[[gnu::noinline]] void finish_partial(const Sink<T>& sink, typename Simd<T>::Vec x, std::int64_t k,
                                      typename Simd<T>::Vec& max) {
  T lanes[Simd<T>::W], m = max[0];
  Simd<T>::store(lanes, x);
  for (std::int64_t l = 0; l < sink.n - k; ++l) {
    if (sink.out)
      sink.out[k + l] = lanes[l];
    else
      m = std::max(m, lanes[l]);
  }
  max[0] = m;
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

// Vectors [v0, v1) of the chunk: the sum of the terms, U vectors at a time in registers.
template <int U, class T>
inline void sum_vectors(const Term<T>* const* terms, std::size_t nterms, std::int64_t v0,
                        std::int64_t v1, Sink<T>& sink, const Partials<T>& partials) {
  using S = Simd<T>;
  using Vec = typename S::Vec;
  constexpr std::int64_t W = S::W;
  Vec max = sink.max;
  for (std::int64_t v = v0; v + U <= v1; v += U) {
    Vec acc[U];
    for (int u = 0; u < U; ++u)
      acc[u] = partials.from     ? S::load(partials.from + (v + u - partials.base) * W)
               : sink.accumulate ? sink.load(v + u)
                                 : Vec{};
    for (std::size_t t = 0; t < nterms; ++t) {
      const T* src = terms[t]->src + v * W;
      const Vec w = S::broadcast(terms[t]->weight);
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) acc[u] += w * S::load(src + u * W);
    }
    if (partials.to) {
      for (int u = 0; u < U; ++u) S::store(partials.to + (v + u - partials.base) * W, acc[u]);
      continue;
    }
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) {
      const std::int64_t k = (v + u) * W;
      if (k + W > sink.n) {
        if (sink.stream) Stream<T>::flush(sink, k);
        finish_partial(sink, acc[u], k, max);
      } else if (sink.stream)
        Stream<T>::put(sink, acc[u], k);
      else if (sink.out)
        S::store(sink.out + k, acc[u]);
      else
        max = max > acc[u] ? max : acc[u];
    }
  }
  sink.max = max;
}

// Vectors [v0, v1) by 8, then 4, 2, 1: 8 independent accumulators keep both FMA pipes busy, and
// segments between the starts and ends of traces are often only a few vectors long.
template <class T>
void sum_vectors_by_8(const Term<T>* const* terms, std::size_t nterms, std::int64_t v0,
                      std::int64_t v1, Sink<T>& sink, const Partials<T>& partials) {
  std::int64_t v = v0;
  const auto run = [&](auto unroll) {
    constexpr int U = decltype(unroll)::value;
    const std::int64_t vu = v + (v1 - v) / U * U;
    sum_vectors<U>(terms, nterms, v, vu, sink, partials);
    v = vu;
  };
  run(std::integral_constant<int, 8>{});
  run(std::integral_constant<int, 4>{});
  run(std::integral_constant<int, 2>{});
  run(std::integral_constant<int, 1>{});
}

// A segment with more traces than the prefetchers follow streams (a hundred stations) is summed
// kTracesPerPass traces at a time over blocks of kVectorsPerBlock vectors, the block's partial
// sums in L1 between the passes; up to kTracesInOnePass traces go in one pass, as passes of short
// streams cost more than they save there (30 traces: 17% faster in one pass than in two). The
// traces are still summed in their order, so the result is the same bit for bit.
constexpr std::size_t kTracesInOnePass = 32;
constexpr std::size_t kTracesPerPass = 16;
constexpr std::int64_t kVectorsPerBlock = 4096 / kVectorBytes;

template <class T>
void sum_segment(const Term<T>* const* terms, std::size_t nterms, std::int64_t v0, std::int64_t v1,
                 Sink<T>& sink) {
  if (nterms <= kTracesInOnePass) {
    sum_vectors_by_8(terms, nterms, v0, v1, sink, Partials<T>{});
    return;
  }
  alignas(64) T partial[kVectorsPerBlock * Simd<T>::W];
  for (std::int64_t b0 = v0; b0 < v1; b0 += kVectorsPerBlock) {
    const std::int64_t b1 = std::min(v1, b0 + kVectorsPerBlock);
    for (std::size_t g = 0; g < nterms; g += kTracesPerPass) {
      const std::size_t n = std::min(kTracesPerPass, nterms - g);
      const Partials<T> partials{g > 0 ? partial : nullptr, g + n < nterms ? partial : nullptr, b0};
      sum_vectors_by_8(terms + g, n, b0, b1, sink, partials);
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

// Output samples [k0, k0 + n) of shift set s: written to out (method 0) or returned as their
// maximum (method 1, out null).
template <class T>
T stack_chunk(const Problem<T>& p, const PaddedTraces<T>& padded, std::int64_t s, std::int64_t k0,
              std::int64_t n, T* out, bool stream, std::vector<Term<T>>& terms,
              std::vector<const Term<T>*>& active, Cuts& cuts) {
  using S = Simd<T>;
  constexpr std::int64_t W = S::W;
  const std::int64_t nvec = (n + W - 1) / W;
  terms.clear();
  cuts.clear(nvec);
  for (std::int64_t i = 0; i < p.ntraces; ++i) {
    const T w = p.weights[s * p.ntraces + i];
    if (w == T(0)) continue;
    const std::int64_t start = trace_start(p.offsets[i], p.shifts[s * p.ntraces + i], p.offsetout);
    const Overlap o = trace_overlap(start, p.lengths[i], p.lengthout);
    const std::int64_t b = std::max(o.begin, k0) - k0, e = std::min(o.end, k0 + n) - k0;
    if (b >= e) continue;
    // The vectors that hold samples [b, e), rounded out to the grain: their samples outside the
    // trace read its zero pads, those past the window's end fall in lanes that are dropped.
    const std::int64_t vb = b / W / kGrain * kGrain;
    const std::int64_t ve = std::min(nvec, ((e + W - 1) / W + kGrain - 1) / kGrain * kGrain);
    terms.push_back({padded.data + padded.first[i] + (k0 - start), w, vb, ve});
    cuts.add(vb);
    if (ve < nvec) cuts.add(ve);
  }

  Sink<T> sink;
  sink.out = out;
  sink.accumulate = out && p.accumulate;
  sink.n = n;
  if (out && stream && !sink.accumulate) {
    sink.stream = true;
    sink.skew =
        static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(out) % kVectorBytes) / sizeof(T);
  }
  sink.max = S::broadcast(max_initial_value<T>(p.clamp_max_at_zero));
  bool uncovered = false;  // some sample of the chunk has no trace: R is 0 there
  cuts.for_each_segment(nvec, [&](std::int64_t v0, std::int64_t v1) {
    // The traces that cover the segment, in trace order; branch-free, as which ones do is random.
    std::size_t nactive = 0;
    for (const Term<T>& t : terms) {
      active[nactive] = &t;
      nactive += (t.begin <= v0) & (t.end >= v1);
    }
    if (nactive == 0 && !sink.accumulate) {
      if (sink.stream) {
        for (std::int64_t v = v0; v < v1; ++v) {
          if ((v + 1) * W <= n) {
            Stream<T>::put(sink, typename S::Vec{}, v * W);
          } else {
            Stream<T>::flush(sink, v * W);
            std::fill(out + v * W, out + n, T(0));
          }
        }
      } else if (out) {
        std::fill(out + v0 * W, out + std::min(n, v1 * W), T(0));
      } else {
        uncovered = true;
      }
      return;
    }
    sum_segment(active.data(), nactive, v0, v1, sink);
  });
  if (sink.stream && n % W == 0) Stream<T>::flush(sink, n);
  T m = uncovered ? std::max(T(0), sink.max[0]) : sink.max[0];
  for (std::int64_t l = 1; l < W; ++l) m = std::max(m, sink.max[l]);
  return m;
}

constexpr std::int64_t kBlock = 32;  // shift sets per block of jobs

}  // namespace

template <class T>
SCIPROXY_STACK_PARSTACK(T) {
  (void)plan;  // device state only
  auto compute = Timers::region(ctx.timers, "compute");
  ThreadCount threads(p.nparallel);
  const PaddedTraces<T> padded(p);
  // Chunks of a row: p.chunk_samples, whole vectors (api.cpp). Jobs go by blocks of kBlock shift
  // sets, chunk-major within a block (every shift set of the block on one chunk, then the next
  // chunk): consecutive jobs read the same stretch of every trace, which stays in L2, and a
  // block's rows of output are written while their freshly mapped pages are still in cache.
  const std::int64_t chunk_samples = p.chunk_samples;
  const std::int64_t nchunks = (p.lengthout + chunk_samples - 1) / chunk_samples;
  const std::int64_t njobs = nchunks * p.nshifts;
  std::vector<T> chunk_max(p.method == Method::max ? njobs : 0);
  // Streaming stores for a stack larger than the last-level cache (it leaves the caches anyway);
  // a smaller one stays cached for the caller, who reads it next.
  static const double cache_bytes = last_level_cache_bytes();
  const double out_bytes = static_cast<double>(sizeof(T)) * p.nshifts * p.lengthout;
  const bool stream = kCanStream && p.method == Method::stack && !p.accumulate &&
                      reinterpret_cast<std::uintptr_t>(result) % sizeof(T) == 0 &&
                      out_bytes > (cache_bytes > 0 ? cache_bytes : 32.0 * 1024 * 1024);
  // Cancellation (core/cancel_region.hpp): thread 0 polls as it takes a job; once stopped, every
  // thread skips its remaining jobs, and the calling thread throws after the region.
  RegionStop stop;
#pragma omp parallel
  {
    std::vector<Term<T>> terms;
    std::vector<const Term<T>*> active;
    Cuts cuts;
    terms.reserve(p.ntraces);
    active.resize(p.ntraces);
#pragma omp for schedule(dynamic, 4)
    for (std::int64_t job = 0; job < njobs; ++job) {
      if (stop.poll(job)) continue;
      const std::int64_t block = job / (kBlock * nchunks), first = block * kBlock;
      const std::int64_t size = std::min(kBlock, p.nshifts - first),
                         in_block = job - first * nchunks;
      const std::int64_t s = first + in_block % size, chunk = in_block / size;
      const std::int64_t k0 = chunk * chunk_samples;
      const std::int64_t n = std::min(p.lengthout - k0, chunk_samples);
      T* out = p.method == Method::stack ? result + s * p.lengthout + k0 : nullptr;
      const T m = stack_chunk(p, padded, s, k0, n, out, stream, terms, active, cuts);
      if (stream) stream_fence();  // the streaming stores are weakly ordered: done before the job
      if (p.method == Method::max) chunk_max[s * nchunks + chunk] = m;
    }
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
