// parstack, CPU backend: OpenMP over (output tile, shift set), SIMD over output samples.
//   R[s, k] = sum_i w[s,i] * a_i[k - start(s,i)],  M[s] = max_k R[s, k]     (pyrocko parstack)
// Why it is faster than pyrocko's loop (one pass over the output row per trace): the output is cut
// into tiles that stay in L1, and the traces that cover a whole tile are added in groups of
// eight, so each output vector is loaded and stored once per eight traces instead of once per
// trace. Tiles are ordered time-major so that consecutive shift sets of one thread read nearby
// trace samples from L2. Accumulation is in T, as in pyrocko.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "parstack_kernels.hpp"
#include "parstack_math.hpp"

namespace sciproxy::stack::kernels::cpu {

namespace {

template <class T>
constexpr std::int64_t kTile = 8192 / sizeof(T);  // 8 KiB of output per tile

template <class T>
struct Term {
  const T* src;  // trace sample that lands on the tile's first covered output sample
  T weight;
  std::int64_t begin, end;  // output samples of the tile this trace covers
};

// out[j] += sum_g w[g] * src[g][j] for j < n; G traces per pass over out.
template <int G, class T>
inline void add_traces(T* __restrict out, std::int64_t n, const Term<T>* terms) {
  const T* src[G];
  T w[G];
  for (int g = 0; g < G; ++g) {
    src[g] = terms[g].src;
    w[g] = terms[g].weight;
  }
#pragma omp simd
  for (std::int64_t j = 0; j < n; ++j) {
    T acc = out[j];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) acc += w[g] * src[g][j];
    out[j] = acc;
  }
}

// Adds the stack of shift set s over output samples [k0, k1) into tile[0 .. k1-k0).
template <class T>
void stack_tile(const Problem<T>& p, std::int64_t s, std::int64_t k0, std::int64_t k1, T* tile,
                std::vector<Term<T>>& full, std::vector<Term<T>>& partial) {
  full.clear();
  partial.clear();
  for (std::int64_t i = 0; i < p.ntraces; ++i) {
    const T w = p.weights[s * p.ntraces + i];
    if (w == T(0)) continue;
    const std::int64_t start = trace_start(p.offsets[i], p.shifts[s * p.ntraces + i], p.offsetout);
    const Overlap o = trace_overlap(start, p.lengths[i], p.lengthout);
    const std::int64_t b = std::max(o.begin, k0), e = std::min(o.end, k1);
    if (b >= e) continue;
    const Term<T> t{p.traces[i] + (b - start), w, b, e};
    (b == k0 && e == k1 ? full : partial).push_back(t);
  }
  const std::int64_t n = k1 - k0;
  std::size_t g = 0;
  for (; g + 8 <= full.size(); g += 8) add_traces<8>(tile, n, &full[g]);
  for (; g + 4 <= full.size(); g += 4) add_traces<4>(tile, n, &full[g]);
  for (; g < full.size(); ++g) add_traces<1>(tile, n, &full[g]);
  for (const Term<T>& t : partial) add_traces<1>(tile + (t.begin - k0), t.end - t.begin, &t);
}

}  // namespace

template <class T>
void parstack(const Problem<T>& p, T* result) {
  const std::int64_t ntiles = (p.lengthout + kTile<T> - 1) / kTile<T>;
  if (p.method == Method::stack) {
#pragma omp parallel
    {
      std::vector<Term<T>> full, partial;
      full.reserve(p.ntraces);
      partial.reserve(p.ntraces);
#pragma omp for schedule(dynamic, 4)
      for (std::int64_t job = 0; job < ntiles * p.nshifts; ++job) {
        const std::int64_t s = job % p.nshifts, k0 = (job / p.nshifts) * kTile<T>;
        const std::int64_t k1 = std::min(p.lengthout, k0 + kTile<T>);
        T* tile = result + s * p.lengthout + k0;
        // Zeroed here, while the tile is in L1, rather than in a separate pass over all the output.
        if (!p.accumulate) std::fill(tile, tile + (k1 - k0), T(0));
        stack_tile(p, s, k0, k1, tile, full, partial);
      }
    }
  } else {
#pragma omp parallel
    {
      std::vector<Term<T>> full, partial;
      full.reserve(p.ntraces);
      partial.reserve(p.ntraces);
      std::vector<T> tile(static_cast<std::size_t>(kTile<T>));
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t s = 0; s < p.nshifts; ++s) {
        T m = max_initial_value<T>(p.clamp_max_at_zero);
        for (std::int64_t k0 = 0; k0 < p.lengthout; k0 += kTile<T>) {
          const std::int64_t k1 = std::min(p.lengthout, k0 + kTile<T>);
          std::fill(tile.begin(), tile.begin() + (k1 - k0), T(0));
          stack_tile(p, s, k0, k1, tile.data(), full, partial);
#pragma omp simd reduction(max : m)
          for (std::int64_t j = 0; j < k1 - k0; ++j) m = std::max(m, tile[j]);
        }
        result[s] = m;
      }
    }
  }
}

template <class T>
void argmax(const T* a, std::int64_t rows, std::int64_t cols, std::uint32_t* out, bool pyrocko_compat) {
  // Blocks of columns, so each row read is a contiguous run and the running maxima stay in L1.
  constexpr std::int64_t kColumns = 256;
  const std::int64_t nblocks = (cols + kColumns - 1) / kColumns;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t b = 0; b < nblocks; ++b) {
    const std::int64_t c0 = b * kColumns, n = std::min(cols, c0 + kColumns) - c0;
    double best[kColumns];
    std::uint32_t where[kColumns];
    for (std::int64_t j = 0; j < n; ++j) {
      best[j] = pyrocko_compat ? 2.2250738585072014e-308 /* DBL_MIN */ : static_cast<double>(a[c0 + j]);
      where[j] = 0;
    }
    for (std::int64_t r = pyrocko_compat ? 0 : 1; r < rows; ++r) {
      const T* row = a + r * cols + c0;
#pragma omp simd
      for (std::int64_t j = 0; j < n; ++j) {
        const double v = row[j];
        const bool larger = v > best[j];
        best[j] = larger ? v : best[j];
        where[j] = larger ? static_cast<std::uint32_t>(r) : where[j];
      }
    }
    std::copy(where, where + n, out + c0);
  }
}

template void parstack<float>(const Problem<float>&, float*);
template void parstack<double>(const Problem<double>&, double*);
template void argmax<float>(const float*, std::int64_t, std::int64_t, std::uint32_t*, bool);
template void argmax<double>(const double*, std::int64_t, std::int64_t, std::uint32_t*, bool);

}  // namespace sciproxy::stack::kernels::cpu
