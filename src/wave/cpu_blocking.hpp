// Scalar wave propagator, CPU backend: the scheme of kernels.hpp with the per-cell arithmetic
// of math.hpp, unrolled per (ndim, accuracy) (the Dimensions x Accuracies table of kernels.hpp).
//
// - One OpenMP parallel region per call, with the time loop inside it. As many shots as fill the
//   threads evenly run one per thread through all their steps, with no synchronisation (as
//   Deepwave's CPU backend does). The rest run shared: each step is one statically scheduled
//   `omp for` over (shot, block), whose implicit barrier is the only synchronisation. A block is
//   a few rows of the outermost dimension (2D), a tile of rows of one plane (3D: a thread runs
//   through the planes of a tile, so the A+1 planes of u that a plane reads stay in L2) or, where
//   such a tile would be thin, a whole plane, or a chunk of the line (1D). Shared shots go in
//   batches that run all their steps before the next batch starts (about 2 MiB of fields per
//   thread, so that a batch stays in cache).
// - The forward runs several steps per sweep over the grid (temporal blocking, cpu_forward.hpp):
//   2-D shots run alone, and every 3-D shot, whose threads then keep their tiles of rows through
//   the planes, with one barrier per wavefront. The sizes are ScalarCpuTuning's (wave.hpp).
// - Every row is cut along the contiguous dimension into a PML-left, a middle and a PML-right
//   segment. Each segment runs a loop compiled for its set of PML dimensions (a bit mask), so the
//   interior box is the plain Laplacian and a PML cell pays only for the dimensions in whose PML
//   it lies. The PML segments are widened to whole AVX-512 vectors (the C-PML formula is exact in
//   the interior, where it reduces to the plain stencil).
// - With AVX-512 the segments are written with vectors (simd.hpp, the `*_simd` functions): the
//   contiguous dimension's neighbours come from a sliding window of registers. GCC's `omp simd`
//   loops (the other segments, and every segment without AVX-512) load each neighbour unaligned,
//   and that took twice the cycles. The forward runs a whole row in one call (forward_row_simd,
//   one window through its three segments) on copies of the fields whose rows start on a
//   64-byte boundary at the first computed cell (PaddedRows), so that its loads are aligned. Its
//   stencil weights carry 1/dx and 1/dx^2, and outside the PML the Laplacian of all dimensions is
//   one sum with one centre weight (FoldedStencils), and it reads v^2 dt^2 for the update.
// - Receivers and sources (and in the adjoint, source gradients and receiver injection) are
//   handled by the thread that owns their cells' block, right after the block: no second barrier.
// - Double buffering without copies per step: u^{t+1} overwrites u^{t-1} and the pointers swap;
//   the forward's copies of psi alternate between two buffers, and it copies the final state
//   back; the adjoint's psi_bar, zeta_bar alternate between the caller's array and one internal
//   (calloc) array, starting from the one that makes the last step land in the caller's.
//   The adjoint keeps -(adjoint of u^{t-1}) in the old lambda buffer (it equals lambda^{t+1}), so
//   it reads that slot with a sign and negates it once at the end instead of every step.
// - The forward holds the C-PML auxiliaries psi as q = a psi (no profile at the stencil
//   neighbours); the plain adjoint keeps g = v^2 dt^2 lambda as a field (the interior stencil
//   reads one array). Segments run out of line: GCC spills the pointers of the loops when they
//   are inlined (bench/scalar_cpu_notes.md).
// - Per-cell arithmetic and the order of every sum are independent of the thread count, so the
//   results are the same for any number of threads (the shared-model velocity gradient is
//   accumulated per shot and summed in shot order at the end).
// - The adjoint uses the plain stencil only where b = b' = 0 on the whole stencil (pml_interior
//   promises it at the cell, not at its neighbours); window.cpp's box (PML + 3h) has it everywhere.
//
// The CPU backend is cpu_blocking.hpp (buffers, geometry, the block plan, the shot schedule),
// cpu_rows.hpp (the AVX-512 primitives the rows share), cpu_forward.hpp and cpu_backward.hpp (the
// rows and drivers of each pass), cpu_kernels.hpp (the kernels of kernels.hpp on those drivers)
// and the translation units cpu_<kernel>_<type>.cpp, which instantiate them (one kernel and one
// value type per unit, so that no unit compiles more than the 12 (ndim, accuracy) of one pass).
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/cancel_region.hpp"
#include "kernels.hpp"
#include "math.hpp"
#include "simd.hpp"

namespace sciproxy::wave::kernels::cpu::detail {
// Everything of the cpu backend has internal linkage (an unnamed namespace in each header):
// each translation unit instantiates one kernel (cpu_kernels.hpp), and GCC specialises the
// out-of-line row functions for their constant arguments (IPA-CP clones) only when they
// are local to the unit, as they were when the backend was one file.
namespace {

using std::int64_t;

template <class T>
constexpr int kVector = 64 / sizeof(T);  // elements of one AVX-512 vector

template <class T>
std::unique_ptr<T[]> uninitialised(int64_t n) {
  return std::unique_ptr<T[]>(new T[static_cast<std::size_t>(n)]);
}

// Zeroed memory from calloc: large blocks come as untouched zero pages, so the parts that are never
// written cost nothing and the rest is first touched by the thread that computes it.
struct Free {
  void operator()(void* p) const { std::free(p); }
};
template <class T>
using Buffer = std::unique_ptr<T[], Free>;
template <class T>
Buffer<T> zeroed(int64_t n) {
  void* p = std::calloc(static_cast<std::size_t>(std::max<int64_t>(n, 1)), sizeof(T));
  if (p == nullptr) throw std::bad_alloc();
  return Buffer<T>(static_cast<T*>(p));
}

// The padded grid seen by one (NDIM, A) instantiation. Ranges [lo, hi) are pml_interior, clamped
// to the non-halo cells; [flo, fhi) the forward plain cells: [lo, hi) widened over the cells where
// b = b' = 0 and a = 0 on the whole stencil, so that the C-PML terms vanish whatever psi and
// zeta hold (pml_interior keeps a margin for the adjoint: about A/2 cells per side more PML
// work); [alo, ahi) the adjoint plain cells: those of [lo, hi) whose whole stencil sees
// b = b' = 0 (so tbar = g and d1bar = 0 at every neighbour), which the interface does not
// promise for pml_interior itself.
template <int NDIM, class T>
struct Geometry {
  int64_t h = 0;
  int64_t points = 0;
  std::array<int64_t, 3> n{}, s{}, lo{}, hi{}, flo{}, fhi{}, alo{}, ahi{};
  std::array<T, 3> rdx{}, rdx2{};
  std::array<PmlProfile<T>, 3> prof{};

  // pitch: cells per row (along the contiguous dimension) in memory, n[NDIM - 1] when 0.
  Geometry(const ScalarProblem<T>& p, int accuracy, int64_t pitch = 0) {
    h = accuracy / 2;
    for (int d = 0; d < NDIM; ++d) n[d] = p.n[d];
    if (pitch == 0) pitch = n[NDIM - 1];
    points = p.points() / n[NDIM - 1] * pitch;
    s[NDIM - 1] = 1;
    for (int d = NDIM - 2; d >= 0; --d) s[d] = s[d + 1] * (d + 1 == NDIM - 1 ? pitch : n[d + 1]);
    for (int d = 0; d < NDIM; ++d) {
      rdx[d] = p.rdx[d];
      rdx2[d] = p.rdx2[d];
      prof[d] = {p.a[d], p.b[d], p.dbdx[d]};
      const int64_t first = h, last = std::max(h, n[d] - h);
      lo[d] = std::clamp(p.pml_interior[2 * d], first, last);
      hi[d] = std::clamp(p.pml_interior[2 * d + 1], lo[d], last);
      auto quiet = [&](int64_t x) {
        if (prof[d].a[x] != T(0)) return false;
        for (int64_t k = -h; k <= h; ++k)
          if (prof[d].b[x + k] != T(0) || prof[d].dbdx[x + k] != T(0)) return false;
        return true;
      };
      auto forward_quiet = [&](int64_t x) {
        if (prof[d].b[x] != T(0) || prof[d].dbdx[x] != T(0)) return false;
        for (int64_t k = -h; k <= h; ++k)
          if (prof[d].a[x + k] != T(0)) return false;
        return true;
      };
      flo[d] = lo[d];
      fhi[d] = hi[d];
      if (flo[d] < fhi[d]) {
        while (flo[d] > first && forward_quiet(flo[d] - 1)) --flo[d];
        while (fhi[d] < last && forward_quiet(fhi[d])) ++fhi[d];
      }
      alo[d] = lo[d];
      ahi[d] = hi[d];
      while (alo[d] < ahi[d] && !quiet(alo[d])) ++alo[d];
      while (ahi[d] > alo[d] && !quiet(ahi[d] - 1)) --ahi[d];
    }
  }
};

// Work items: (shot, block), block = `tile` rows (2D) of the outermost dimension (a few, so that
// the per-item set-up is shared; tuning.rows_per_block), a tile of `tile` rows of one plane, or
// the whole plane (3D: blocks run through the planes of one tile first, so that a thread's next
// plane finds the A planes of u it shares with the previous one in cache), or a chunk of the line
// (1D); and for each item the sources or receivers whose cells lie in it. With `sweeps` (the 3-D
// forward's temporal blocking, cpu_forward.hpp) a plane is cut into tuning.tiles_per_thread tiles
// per thread, which each thread keeps through a sweep.
template <int NDIM, class T>
struct Blocks {
  int64_t nblocks = 1, chunk = 1, planes = 1, tile = 1;

  Blocks(const Geometry<NDIM, T>& g, int64_t nshots, const ScalarCpuTuning& tuning,
         bool sweeps = false) {
    const int64_t inner = std::max<int64_t>(0, g.n[0] - 2 * g.h);
    if constexpr (NDIM == 2) {
      tile = std::max<int64_t>(1, tuning.rows_per_block);
      nblocks = std::max<int64_t>(1, (inner + tile - 1) / tile);
    } else if constexpr (NDIM == 3) {
      planes = std::max<int64_t>(1, inner);
      const int64_t rows = std::max<int64_t>(1, g.n[1] - 2 * g.h);
      if (sweeps) {
        const int64_t tiles = std::clamp<int64_t>(
            omp_get_max_threads() * std::max<int64_t>(1, tuning.tiles_per_thread), 1, rows);
        tile = (rows + tiles - 1) / tiles;
      } else {
        // A+1 planes of u and of psi_0 per tile within about a quarter of a 1 MiB L2. Thin tiles
        // lose to whole planes, whose neighbour planes come from L3 (a tile also reads the 2h
        // rows beyond it): accuracy 8, 2 threads, tiles of 25 rows at 96^3 were 13% faster than
        // planes, of 19 rows at 140^3 even, of 14 rows at 200^3 15% slower. So tiles of fewer
        // than 6h rows become whole planes.
        const int64_t bytes = 256 * 1024;
        tile = bytes / (2 * (2 * g.h + 1) * g.n[2] * int64_t(sizeof(T)));
        tile = tile < 6 * g.h ? rows : std::min(tile, rows);
      }
      nblocks = planes * ((rows + tile - 1) / tile);
    } else {
      // Enough chunks for every thread to have a few when the shots alone do not suffice.
      const int64_t threads = omp_get_max_threads();
      const int64_t per_shot = std::max<int64_t>(1, (4 * threads + nshots - 1) / nshots);
      chunk = std::max<int64_t>(256, (inner + per_shot - 1) / per_shot);
      nblocks = std::max<int64_t>(1, (inner + chunk - 1) / chunk);
    }
  }
  int64_t of_cell(const Geometry<NDIM, T>& g, int64_t cell) const {
    int64_t b = 0;
    if constexpr (NDIM == 1) b = (cell - g.h) / chunk;
    if constexpr (NDIM == 2) b = (cell / g.s[0] - g.h) / tile;
    if constexpr (NDIM == 3) {
      const int64_t i0 = std::clamp<int64_t>(cell / g.s[0] - g.h, 0, planes - 1);
      const int64_t i1 =
          std::clamp<int64_t>((cell % g.s[0]) / g.s[1] - g.h, 0, g.n[1] - 2 * g.h - 1);
      b = (i1 / tile) * planes + i0;
    }
    return std::clamp<int64_t>(b, 0, nblocks - 1);
  }
};

// CSR lists: for work item w = shot * nblocks + block, the points (index within the shot) in
// start[w] .. start[w+1], in increasing order.
struct PointLists {
  std::vector<int64_t> start, index;

  template <int NDIM, class T>
  PointLists(const Geometry<NDIM, T>& g, const Blocks<NDIM, T>& blocks, int64_t nshots,
             int64_t npoints, const int64_t* cells)
      : start(static_cast<std::size_t>(nshots * blocks.nblocks + 1), 0),
        index(static_cast<std::size_t>(nshots * npoints)) {
    std::vector<int64_t> item(index.size());
    for (int64_t shot = 0; shot < nshots; ++shot)
      for (int64_t k = 0; k < npoints; ++k) {
        const int64_t w = shot * blocks.nblocks + blocks.of_cell(g, cells[shot * npoints + k]);
        item[shot * npoints + k] = w;
        ++start[w + 1];
      }
    for (std::size_t w = 1; w < start.size(); ++w) start[w] += start[w - 1];
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t q = 0; q < nshots * npoints; ++q) index[fill[item[q]]++] = q % npoints;
  }
};

// Calls f.template operator()<M>() for the runtime mask m < 2^NDIM.
template <int NDIM, class F>
inline void with_mask(unsigned m, F&& f) {
  switch (m) {
    case 0:
      f.template operator()<0u>();
      break;
    case 1:
      f.template operator()<1u>();
      break;
    case 2:
      if constexpr (NDIM >= 2) f.template operator()<2u>();
      break;
    case 3:
      if constexpr (NDIM >= 2) f.template operator()<3u>();
      break;
    case 4:
      if constexpr (NDIM >= 3) f.template operator()<4u>();
      break;
    case 5:
      if constexpr (NDIM >= 3) f.template operator()<5u>();
      break;
    case 6:
      if constexpr (NDIM >= 3) f.template operator()<6u>();
      break;
    case 7:
      if constexpr (NDIM >= 3) f.template operator()<7u>();
      break;
    default:
      break;
  }
}

// Visits the cells [j0, j1) of the contiguous dimension of one row (outer coordinates x) as up to
// three segments, each with its mask of the dimensions in whose PML they lie: outer dimensions
// from x, the last one from [plain_lo, plain_hi). The two PML segments are widened into the plain
// cells to whole vectors of V elements (no scalar remainder in the expensive loops): there the
// C-PML formula is exact, as a = b = b' = 0 reduce it to the plain stencil and it writes zeros.
template <int NDIM, int V, class Segment>
inline void row_segments(const std::array<int64_t, 3>& x, const std::array<int64_t, 3>& plain_lo,
                         const std::array<int64_t, 3>& plain_hi, int64_t j0, int64_t j1,
                         Segment&& segment) {
  constexpr int L = NDIM - 1;
  unsigned outer = 0;
  for (int d = 0; d < L; ++d)
    if (x[d] < plain_lo[d] || x[d] >= plain_hi[d]) outer |= 1u << d;
  int64_t a = std::clamp(plain_lo[L], j0, j1), b = std::clamp(plain_hi[L], a, j1);
  if (a > j0) a = std::min(b, j0 + (a - j0 + V - 1) / V * V);
  if (b < j1) b = std::max(a, j1 - (j1 - b + V - 1) / V * V);
  if (j0 < a)
    with_mask<NDIM>(outer | 1u << L, [&]<unsigned M>() { segment.template operator()<M>(j0, a); });
  if (a < b) with_mask<NDIM>(outer, [&]<unsigned M>() { segment.template operator()<M>(a, b); });
  if (b < j1)
    with_mask<NDIM>(outer | 1u << L, [&]<unsigned M>() { segment.template operator()<M>(b, j1); });
}

// Calls row(base, x, j0, j1) for every row of block `block`.
template <int NDIM, class T, class Row>
inline void block_rows(const Geometry<NDIM, T>& g, const Blocks<NDIM, T>& blocks, int64_t block,
                       Row&& row) {
  const int64_t h = g.h;
  std::array<int64_t, 3> x{};
  if constexpr (NDIM == 1) {
    const int64_t j0 = h + block * blocks.chunk, j1 = std::min(g.n[0] - h, j0 + blocks.chunk);
    if (j0 < j1) row(int64_t(0), x, j0, j1);
  } else if constexpr (NDIM == 2) {
    const int64_t first = h + block * blocks.tile, last = std::min(g.n[0] - h, first + blocks.tile);
    for (x[0] = first; x[0] < last; ++x[0]) row(x[0] * g.s[0], x, h, g.n[1] - h);
  } else {
    x[0] = h + block % blocks.planes;
    const int64_t first = h + block / blocks.planes * blocks.tile;
    const int64_t last = std::min(g.n[1] - h, first + blocks.tile);
    if (x[0] >= g.n[0] - h) return;
    for (x[1] = first; x[1] < last; ++x[1]) row(x[0] * g.s[0] + x[1] * g.s[1], x, h, g.n[2] - h);
  }
}

// Shots per batch: a batch runs all its time steps before the next one starts, so that its fields
// stay in cache (tuning.batch_bytes_per_thread, 2 MiB: Zen 4 has 1 MiB of L2 and 4 MiB of L3 per
// core; on the 2-core test machine 2D 291x540 runs 1.6 GPts/s with all 10 shots per step, 2.0 in
// batches of 2).
// bytes_per_shot: the whole-grid arrays a step touches; bytes_per_pml_cell: the auxiliary arrays,
// touched only outside the interior range of their dimension.
template <int NDIM, class T>
int64_t shots_per_batch(const Geometry<NDIM, T>& g, const ScalarCpuTuning& tuning, int64_t nshots,
                        int64_t bytes_per_shot, int64_t bytes_per_pml_cell) {
  double bytes = double(bytes_per_shot);
  for (int d = 0; d < NDIM; ++d)
    bytes += double(bytes_per_pml_cell) * double(g.points) *
             (1 - double(g.hi[d] - g.lo[d]) / double(g.n[d]));
  const double budget =
      double(std::max<int64_t>(1, tuning.batch_bytes_per_thread)) * omp_get_max_threads();
  return std::clamp<int64_t>(int64_t(budget / bytes), 1, nshots);
}

// The work items [w0, w1) of one step: shared among the threads of the enclosing parallel region
// (an orphaned `omp for`, whose implicit barrier ends the step), or all run by the calling thread.
template <class Item>
inline void for_items(int64_t w0, int64_t w1, bool shared, Item&& item) {
  if (shared) {
#pragma omp for schedule(static)
    for (int64_t w = w0; w < w1; ++w) item(w);
  } else {
    for (int64_t w = w0; w < w1; ++w) item(w);
  }
}

// Called by every thread of a parallel region: as many shots as fill the threads evenly run one
// per thread through all their steps, with no synchronisation at all (Deepwave's CPU schedule;
// a barrier per step cost 11% in 2-D with 10 shots on 2 threads, most of it waiting on the other
// thread's jitter); the rest run shared, in batches of `batch` shots, each step an `omp for` over
// (shot, block). run_shots(first, last, shared) runs shots [first, last).
template <class RunShots>
inline void over_shots(int64_t nshots, int64_t batch, RunShots&& run_shots) {
  const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
  const int64_t alone = nshots / threads * threads;
  for (int64_t shot = thread; shot < alone; shot += threads) run_shots(shot, shot + 1, false);
  for (int64_t first = alone; first < nshots; first += batch)
    run_shots(first, std::min(nshots, first + batch), true);
}

// Zeroes the halo cells of one [points] array (stored slices: defined everywhere).
template <int NDIM, class T>
void zero_halo(const Geometry<NDIM, T>& g, T* a) {
  const int64_t h = g.h, nl = g.n[NDIM - 1];
  auto row = [&](T* r, bool halo_row) {
    if (halo_row) {
      std::fill(r, r + nl, T(0));
    } else {
      std::fill(r, r + std::min(h, nl), T(0));
      std::fill(r + std::max<int64_t>(0, nl - h), r + nl, T(0));
    }
  };
  if constexpr (NDIM == 1) {
    row(a, false);
  } else if constexpr (NDIM == 2) {
    for (int64_t i0 = 0; i0 < g.n[0]; ++i0) row(a + i0 * g.s[0], i0 < h || i0 >= g.n[0] - h);
  } else {
    for (int64_t i0 = 0; i0 < g.n[0]; ++i0)
      for (int64_t i1 = 0; i1 < g.n[1]; ++i1)
        row(a + i0 * g.s[0] + i1 * g.s[1],
            i0 < h || i0 >= g.n[0] - h || i1 < h || i1 >= g.n[1] - h);
  }
}

// Prepares the auxiliary fields of dimension d, which alternate between `fields` (the caller's)
// and `copies` (zeroed internal buffers, or null for a field updated in place). In the plain cells
// [plain[0], plain[1]) of d they are never written: every step would write zeros there
// (a = b = 0), so both buffers must hold zeros. The caller's state is zero in [zero[0], zero[1])
// by the interface (a forward state within pml_interior); the other plain cells are cleared (a
// read-only scan when they are zero already: a final-state gradient, or a forward state next to
// the PML, need not be). With `copy` (an odd number of steps: the first step reads the copy) the
// non-plain cells are copied.
template <int NDIM, class T>
void prepare_aux(const Geometry<NDIM, T>& g, int d, int64_t nshots, std::array<T*, 2> fields,
                 std::array<T*, 2> copies, std::array<int64_t, 2> plain,
                 std::array<int64_t, 2> zero, bool copy) {
  const bool zero_plain = zero[0] > plain[0] || zero[1] < plain[1];
  if (!zero_plain && !copy) return;
  const int64_t inner = g.s[d], nd = g.n[d];
  const int64_t outer = nshots * g.points / (inner * nd);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t xd = 0; xd < nd; ++xd) {
      const int64_t first = (o * nd + xd) * inner;
      const bool in_plain = xd >= plain[0] && xd < plain[1];
      const bool known_zero = xd >= zero[0] && xd < zero[1];
      for (int k = 0; k < 2; ++k) {
        if (fields[k] == nullptr) continue;
        T* from = fields[k] + first;
        if (in_plain && !known_zero) {
          bool nonzero = false;
          for (int64_t q = 0; q < inner; ++q) nonzero |= from[q] != T(0);
          if (nonzero) std::fill(from, from + inner, T(0));
        } else if (!in_plain && copy && copies[k] != nullptr) {
          std::copy(from, from + inner, copies[k] + first);
        }
      }
    }
}

// Born: what the forward driver adds (scattered fields, their sources, background receivers).
template <class T>
struct BornArgs {
  ScalarFields<T> sc;
  const T* sc_sources;  // sources of the scattered field, or receiver-data gradients (adjoint)
  T* bg_receivers;      // forward: background receivers; adjoint: grad of the scattered sources
  const T* grad_bg;     // adjoint: gradient of the background receiver data
};

}  // namespace
}  // namespace sciproxy::wave::kernels::cpu::detail
