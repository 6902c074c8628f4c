// Scalar wave propagator, CPU backend: the scheme of scalar_kernels.hpp with the per-cell
// arithmetic of scalar_math.hpp, unrolled per (ndim, accuracy).
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
//   promises it at the cell, not at its neighbours); wave.cpp's box (PML + 3h) has it everywhere.
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

#include "scalar_kernels.hpp"
#include "scalar_math.hpp"
#include "simd.hpp"
#include "sciproxy/core/error.hpp"

namespace sciproxy::wave::kernels::cpu {

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
// the per-item set-up is shared; kRowsPerBlock2D), a tile of `tile` rows of one plane, or the
// whole plane (3D: blocks run through the planes of one tile first, so that a thread's next
// plane finds the A planes of u it shares with the previous one in L2), or a chunk of the line
// (1D); and for each item the sources or receivers whose cells lie in it.
constexpr int64_t kRowsPerBlock2D = 4;

template <int NDIM, class T>
struct Blocks {
  int64_t nblocks = 1, chunk = 1, planes = 1, tile = 1;

  Blocks(const Geometry<NDIM, T>& g, int64_t nshots) {
    const int64_t inner = std::max<int64_t>(0, g.n[0] - 2 * g.h);
    if constexpr (NDIM == 2) {
      tile = kRowsPerBlock2D;
      nblocks = std::max<int64_t>(1, (inner + tile - 1) / tile);
    } else if constexpr (NDIM == 3) {
      // A+1 planes of u and of psi_0 per tile within about a quarter of a 1 MiB L2. Thin tiles
      // lose to whole planes, whose neighbour planes come from L3 (a tile also reads the 2h rows
      // beyond it): accuracy 8, 2 threads, tiles of 25 rows at 96^3 were 13% faster than planes,
      // of 19 rows at 140^3 even, of 14 rows at 200^3 15% slower. So tiles of fewer than 6h
      // rows become whole planes.
      planes = std::max<int64_t>(1, inner);
      const int64_t rows = std::max<int64_t>(1, g.n[1] - 2 * g.h);
      const int64_t bytes = 256 * 1024;
      tile = bytes / (2 * (2 * g.h + 1) * g.n[2] * int64_t(sizeof(T)));
      tile = tile < 6 * g.h ? rows : std::min(tile, rows);
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
// stay in cache (2 MiB per thread: Zen 4 has 1 MiB of L2 and 4 MiB of L3 per core; on the 2-core
// test machine 2D 291x540 runs 1.6 GPts/s with all 10 shots per step, 2.0 in batches of 2).
// bytes_per_shot: the whole-grid arrays a step touches; bytes_per_pml_cell: the auxiliary arrays,
// touched only outside the interior range of their dimension.
template <int NDIM, class T>
int64_t shots_per_batch(const Geometry<NDIM, T>& g, int64_t nshots, int64_t bytes_per_shot,
                        int64_t bytes_per_pml_cell) {
  double bytes = double(bytes_per_shot);
  for (int d = 0; d < NDIM; ++d)
    bytes += double(bytes_per_pml_cell) * double(g.points) *
             (1 - double(g.hi[d] - g.lo[d]) / double(g.n[d]));
  const double budget = 2.0 * 1024 * 1024 * omp_get_max_threads();
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

// ---------------------------------------------------------------------------------------------
// Forward

// The forward holds each auxiliary psi as q = a psi (a is fixed per cell): the C-PML term
// D1(a psi) = D1 q then needs no profile at the stencil neighbours, which saves a load (along
// the contiguous dimension) and a multiplication per neighbour. The step computes
//   psi^{t+1} = b D1 u^t + a psi^t = b D1 u^t + q^t   and stores  psi_scale * psi^{t+1},
// psi_scale = a (q^{t+1}), or 1 at the last step, so that the caller gets psi back. q^0 = a psi^0
// is formed on entry (PaddedRows::aux_in).
template <class T>
struct ForwardShot {
  const T* u;  // u^t
  T* u_next;   // in: u^{t-1}, out: u^{t+1}
  const T* v;
  const T* v2dt2;   // v^2 dt^2 (the AVX-512 rows), or null
  const T* psi[3];  // q^t = a psi^t
  T* psi_next[3];   // q^{t+1}, or psi^{t+1} at the last step
  T* zeta[3];       // in place
  T* stored;        // this step's slice, or null
  T dt2;
  const T* psi_scale[3];  // per coordinate of each dimension: a, or ones at the last step
};

// pml_forward (scalar_math.hpp) on q = a psi, storing psi_scale * psi^{t+1} (see ForwardShot).
template <int A, class T>
inline T pml_forward_q(const T* u, const T* q, T* q_next, T* zeta, int64_t i, int64_t s, int64_t x,
                       PmlProfile<T> p, const T* psi_scale, T rdx, T rdx2) {
  const T du = diff1<A>(u, i, s, rdx);
  const T tmp = (1 + p.b[x]) * diff2<A>(u, i, s, rdx2) + p.dbdx[x] * du + diff1<A>(q, i, s, rdx);
  const T w = (1 + p.b[x]) * tmp + p.a[x] * zeta[i];
  q_next[i] = psi_scale[x] * (p.b[x] * du + q[i]);
  zeta[i] = p.b[x] * tmp + p.a[x] * zeta[i];
  return w;
}

// Born: the scattered field of the same shot and the scatter (see scalar_kernels.hpp).
template <class T>
struct BornShot {
  const T* u;  // u_sc^t
  T* u_next;   // in: u_sc^{t-1}, out: u_sc^{t+1}
  const T* scatter;
  const T* psi[3];
  T* psi_next[3];
  T* zeta[3];
};

// The plain (interior) cells of a row: the Laplacian of forward_segment, in the same order of
// operations (the same rounding as the reference), out of line so that the loop keeps its few
// pointers in registers (inlined into the driver, GCC spilled them to vector registers).
template <int NDIM, int A, bool STORE, class T>
[[gnu::noinline]] void plain_segment(const Geometry<NDIM, T>& g, const ForwardShot<T>& f,
                                     int64_t base, int64_t j0, int64_t j1) {
  const T* __restrict u = f.u + base;
  T* __restrict un = f.u_next + base;
  const T* __restrict v = f.v + base;
  T* __restrict stored = STORE ? f.stored + base : nullptr;
  const int64_t s0 = g.s[0], s1 = g.s[1];
  const T r0 = g.rdx2[0], r1 = g.rdx2[1], r2 = g.rdx2[2];
  const T dt2 = f.dt2;
#pragma omp simd
  for (int64_t j = j0; j < j1; ++j) {
    T w = diff2<A>(u, j, NDIM == 1 ? int64_t(1) : s0, r0);
    if constexpr (NDIM >= 2) w += diff2<A>(u, j, NDIM == 2 ? int64_t(1) : s1, r1);
    if constexpr (NDIM >= 3) w += diff2<A>(u, j, int64_t(1), r2);
    const T vi = v[j];
    un[j] = vi * vi * dt2 * w + 2 * u[j] - un[j];
    if constexpr (STORE) stored[j] = 2 * vi * dt2 * w;
  }
}

// flatten: pml_forward must be inlined for the loop to vectorise (GCC would call it otherwise).
template <int NDIM, int A, unsigned M, bool BORN, class T>
[[gnu::flatten, gnu::noinline]] void forward_segment(const Geometry<NDIM, T>& g,
                                                     const ForwardShot<T>& f, const BornShot<T>* fs,
                                                     int64_t base, const std::array<int64_t, 3>& x,
                                                     int64_t j0, int64_t j1) {
  // Everything the loop reads besides the arrays, in locals (no aliasing with the stores).
  int64_t st[3], xo[3];
  T rdx[3], rdx2[3];
  PmlProfile<T> pr[3];
  const T* scale[3];
  const T* psi[3];
  T* psi_next[3];
  T* zeta[3];
  const T* psis[3] = {};
  T* psis_next[3] = {};
  T* zetas[3] = {};
  for (int d = 0; d < 3; ++d) {
    st[d] = g.s[d];
    xo[d] = x[d];
    rdx[d] = g.rdx[d];
    rdx2[d] = g.rdx2[d];
    pr[d] = g.prof[d];
    scale[d] = f.psi_scale[d];
    psi[d] = f.psi[d];
    psi_next[d] = f.psi_next[d];
    zeta[d] = f.zeta[d];
    if constexpr (BORN) {
      psis[d] = fs->psi[d];
      psis_next[d] = fs->psi_next[d];
      zetas[d] = fs->zeta[d];
    }
  }
  const T* __restrict u = f.u;
  T* __restrict un = f.u_next;
  const T* __restrict v = f.v;
  T* __restrict stored = f.stored;
  const T* __restrict us = BORN ? fs->u : nullptr;
  T* __restrict usn = BORN ? fs->u_next : nullptr;
  const T* __restrict scatter = BORN ? fs->scatter : nullptr;
  const T dt2 = f.dt2;
  constexpr int L = NDIM - 1;
  // W's term of dimension D for the field uu with auxiliaries ps, psn, ze.
  auto term = [&]<int D>(int64_t i, int64_t j, const T* uu, const T* const* ps, T* const* psn,
                         T* const* ze) -> T {
    if constexpr (D >= NDIM) {
      return T(0);
    } else {
      const int64_t xd = D == L ? j : xo[D];
      const int64_t sd = D == L ? int64_t(1) : st[D];  // a constant along the row: one base pointer
      if constexpr ((M >> D) & 1u)
        return pml_forward_q<A>(uu, ps[D], psn[D], ze[D], i, sd, xd, pr[D], scale[D], rdx[D],
                                rdx2[D]);
      else
        return diff2<A>(uu, i, sd, rdx2[D]);
    }
  };
#pragma omp simd
  for (int64_t j = j0; j < j1; ++j) {
    const int64_t i = base + j;
    T w = term.template operator()<0>(i, j, u, psi, psi_next, zeta);
    if constexpr (NDIM >= 2) w += term.template operator()<1>(i, j, u, psi, psi_next, zeta);
    if constexpr (NDIM >= 3) w += term.template operator()<2>(i, j, u, psi, psi_next, zeta);
    const T vi = v[i];
    un[i] = vi * vi * dt2 * w + 2 * u[i] - un[i];
    if (stored != nullptr) stored[i] = 2 * vi * dt2 * w;  // loop-invariant test
    if constexpr (BORN) {
      T ws = term.template operator()<0>(i, j, us, psis, psis_next, zetas);
      if constexpr (NDIM >= 2) ws += term.template operator()<1>(i, j, us, psis, psis_next, zetas);
      if constexpr (NDIM >= 3) ws += term.template operator()<2>(i, j, us, psis, psis_next, zetas);
      usn[i] = vi * vi * dt2 * ws + 2 * us[i] - usn[i] + 2 * vi * scatter[i] * dt2 * w;
    }
  }
}

#if defined(SCIPROXY_WAVE_SIMD)
// ---------------------------------------------------------------------------------------------
// AVX-512 segments (simd.hpp). They do the per-cell arithmetic of plain_segment,
// forward_segment, backward_segment and plain_adjoint_segment (Born aside), in the same order,
// one vector of W cells at a time. The contiguous dimension's neighbours come from sliding
// windows, the outer dimensions' from loads at j +- k s. GCC's loops load each neighbour
// unaligned, across two cache lines; a window loads one vector per W cells.

// The stencil neighbours of one field along one dimension, for the vector at j.
template <class T>
struct AlongWindow {  // the contiguous dimension
  const simd::Window<T>& w;
  typename simd::Simd<T>::V centre() const { return w.cur; }
  template <int K>
  typename simd::Simd<T>::V up() const {
    return w.template up<K>();
  }
  template <int K>
  typename simd::Simd<T>::V down() const {
    return w.template down<K>();
  }
};
template <bool FULL, class T>
struct AlongStride {  // an outer dimension of stride s; f points at cell j
  const T* f;
  int64_t s;
  typename simd::Simd<T>::Mask m;
  typename simd::Simd<T>::V c;
  typename simd::Simd<T>::V centre() const { return c; }
  template <int K>
  typename simd::Simd<T>::V up() const {
    return simd::Simd<T>::template load<FULL>(f + K * s, m);
  }
  template <int K>
  typename simd::Simd<T>::V down() const {
    return simd::Simd<T>::template load<FULL>(f - K * s, m);
  }
};

// Runs body.template operator()<FULL>(j, mask) over the vectors of [j0, j1): the whole ones with
// FULL (unmasked loads and stores), then the partial one, if any, masked.
template <class T, class Body>
inline void over_vectors(int64_t j0, int64_t j1, Body&& body) {
  using S = simd::Simd<T>;
  int64_t j = j0;
  for (; j + S::W <= j1; j += S::W) body.template operator()<true>(j, S::first(S::W));
  if (j < j1) body.template operator()<false>(j, S::first(j1 - j));
}

// diff2 and diff1 (scalar_math.hpp) of a vector of cells, in the same order.
template <int A, class T, class Along>
inline typename simd::Simd<T>::V vdiff2(const Along& f, T rdx2) {
  typename simd::Simd<T>::V sum = T(d2_coefficient<A>(0)) * f.centre();
  [&]<int... K>(std::integer_sequence<int, K...>) {
    ((sum += T(d2_coefficient<A>(K + 1)) *
             (f.template up<K + 1>() + f.template down<K + 1>())),
     ...);
  }(std::make_integer_sequence<int, A / 2>{});
  return sum * rdx2;
}
template <int A, class T, class Along>
inline typename simd::Simd<T>::V vdiff1(const Along& f, T rdx) {
  typename simd::Simd<T>::V sum = simd::Simd<T>::zero();
  [&]<int... K>(std::integer_sequence<int, K...>) {
    ((sum += T(d1_coefficient<A>(K + 1)) *
             (f.template up<K + 1>() - f.template down<K + 1>())),
     ...);
  }(std::make_integer_sequence<int, A / 2>{});
  return sum * rdx;
}

// With the weights of FoldedStencils: acc + sum_k w[k] (f[j + k] + f[j - k]), and
// sum_k w[k] (f[j + k] - f[j - k]), k = 1 .. H.
template <int H, class T, class Along>
inline typename simd::Simd<T>::V add_pairs(typename simd::Simd<T>::V acc, const Along& f,
                                           const T* w) {
  [&]<int... K>(std::integer_sequence<int, K...>) {
    ((acc += w[K + 1] * (f.template up<K + 1>() + f.template down<K + 1>())), ...);
  }(std::make_integer_sequence<int, H>{});
  return acc;
}
template <int H, class T, class Along>
inline typename simd::Simd<T>::V differences(const Along& f, const T* w) {
  typename simd::Simd<T>::V sum = w[1] * (f.template up<1>() - f.template down<1>());
  [&]<int... K>(std::integer_sequence<int, K...>) {
    ((sum += w[K + 2] * (f.template up<K + 2>() - f.template down<K + 2>())), ...);
  }(std::make_integer_sequence<int, H - 1>{});
  return sum;
}

// Calls f.template operator()<D>() for D = 0 .. N-1 in order.
template <int N, class F>
inline void for_dims(F&& f) {
  [&]<int... D>(std::integer_sequence<int, D...>) {
    (f.template operator()<D>(), ...);
  }(std::make_integer_sequence<int, N>{});
}

// The layout of one row of [j0, j1) for the vector loops: the mask of the outer dimensions in
// whose PML the row lies, and the contiguous dimension's PML strips [j0, a) and [b, j1) around
// its plain cells [a, b). a and b lie on the vector grid from j0 (the strips are widened into the
// plain cells, where the C-PML formula is exact: a = b = b' = 0 reduce it to the plain stencil
// and it writes zeros), so one window runs through the row and only its last vector is partial.
struct RowLayout {
  unsigned outer;
  int64_t a, b;
};
template <int NDIM, int V>
inline RowLayout row_layout(const std::array<int64_t, 3>& x, const std::array<int64_t, 3>& plain_lo,
                            const std::array<int64_t, 3>& plain_hi, int64_t j0, int64_t j1) {
  constexpr int L = NDIM - 1;
  RowLayout r{0, 0, 0};
  for (int d = 0; d < L; ++d)
    if (x[d] < plain_lo[d] || x[d] >= plain_hi[d]) r.outer |= 1u << d;
  r.a = std::clamp(plain_lo[L], j0, j1);
  r.b = std::clamp(plain_hi[L], r.a, j1);
  if (r.a > j0) r.a = std::min(j1, j0 + (r.a - j0 + V - 1) / V * V);
  r.b = std::max(r.b, r.a);
  if (r.b < j1) r.b = r.a + (r.b - r.a) / V * V;
  return r;
}

// The stencils of the forward with 1/dx and 1/dx^2 in their weights. Outside the PML of a cell,
// the Laplacian is one sum whose centre weight is that of all those dimensions: a multiply per
// neighbour pair and one for the centre (diff2 per dimension, scaled and summed, took 2 + NDIM
// more: 11.4 against 9.9 cycles per 16 cells in a micro-benchmark of the 2-D accuracy-4 loop; the
// whole forward's gain was within the machine's noise). This rounds differently from the
// reference (see the tolerance of tests/cross/test_scalar_cpu.cpp). A centre weight is minus twice
// the sum of the others as rounded, so that a constant field has a Laplacian of (nearly) zero:
// c0 / dx^2 rounded on its own leaves a residual that acts like a mass term, and it doubled the
// float32 error of `sciproxy scalar --verify` (1.3e-5 against 5.9e-6 before the folding; 2.9e-6
// with this centre, at accuracy 4).
template <class T, int H>
struct FoldedStencils {
  T d2[3][H + 1] = {};  // [d][k] = c2_k / dx_d^2, k >= 1 (d2_coefficient)
  T d1[3][H + 1] = {};  // [d][k] = c1_k / dx_d (d1_coefficient)
  T centre[8] = {};     // by the mask of dimensions left out (those in the PML)

  template <int NDIM>
  explicit FoldedStencils(const Geometry<NDIM, T>& g) {
    for (int d = 0; d < NDIM; ++d)
      for (int k = 1; k <= H; ++k) {
        d2[d][k] = T(d2_coefficient<2 * H>(k)) * g.rdx2[d];
        d1[d][k] = T(d1_coefficient<2 * H>(k)) * g.rdx[d];
      }
    for (unsigned out = 0; out < 8; ++out) {
      double sum = 0;
      for (int d = 0; d < NDIM; ++d)
        if (!((out >> d) & 1u))
          for (int k = 1; k <= H; ++k) sum += double(d2[d][k]);
      centre[out] = T(-2 * sum);
    }
  }
};

// One row of forward_segment (not Born) and plain_segment on vectors: the strips of the row
// layout with mask OUTER | (the contiguous dimension) and the cells between with mask OUTER, in
// one call with one window of u through the row (a call per segment cost its set-up three times
// per row, and the PML strips are only a few vectors long).
template <int NDIM, int A, unsigned OUTER, bool STORE, class T>
[[gnu::flatten, gnu::noinline]] void forward_row_simd(const Geometry<NDIM, T>& g,
                                                      const FoldedStencils<T, A / 2>& st,
                                                      const ForwardShot<T>& f, int64_t base,
                                                      const std::array<int64_t, 3>& x, int64_t j0,
                                                      RowLayout layout, int64_t j1) {
  using S = simd::Simd<T>;
  using V = typename S::V;
  using Mask = typename S::Mask;
  constexpr int H = A / 2, L = NDIM - 1;
  constexpr unsigned kLast = 1u << L;
  const T* __restrict u = f.u + base;
  T* __restrict un = f.u_next + base;
  const T* __restrict v = f.v + base;
  // The stored slices keep the caller's layout: rows of n cells, not of the pitch.
  const int64_t stored_base = NDIM >= 2 ? base / g.s[NDIM >= 2 ? NDIM - 2 : 0] * g.n[L] : 0;
  T* __restrict stored = STORE ? f.stored + stored_base : nullptr;
  const T* q[3] = {};
  T* qn[3] = {};
  T* ze[3] = {};
  T a[3] = {}, b[3] = {}, db[3] = {}, sc[3] = {};  // outer dimensions' profiles at this row
  for (int d = 0; d < NDIM; ++d) {
    if (!(((OUTER | kLast) >> d) & 1u)) continue;
    q[d] = f.psi[d] + base;
    qn[d] = f.psi_next[d] + base;
    ze[d] = f.zeta[d] + base;
    if (d < L) {
      a[d] = g.prof[d].a[x[d]];
      b[d] = g.prof[d].b[x[d]];
      db[d] = g.prof[d].dbdx[x[d]];
      sc[d] = f.psi_scale[d][x[d]];
    }
  }
  // Locals, not g's or st's members: the stores through un could alias those (both are T), and
  // GCC would load them again every vector.
  const std::array<int64_t, 3> stride = g.s;
  const PmlProfile<T> last = g.prof[L];
  const T* last_scale = f.psi_scale[L];
  const T dt2 = f.dt2;
  const T* __restrict v2dt2 = f.v2dt2 + base;
  T d2[3][H + 1], d1[3][H + 1], centre_alone[3];
  std::copy(&st.d2[0][0], &st.d2[0][0] + 3 * (H + 1), &d2[0][0]);
  std::copy(&st.d1[0][0], &st.d1[0][0] + 3 * (H + 1), &d1[0][0]);
  for (int d = 0; d < 3; ++d) centre_alone[d] = st.centre[7u & ~(1u << d)];
  const T centre_plain = st.centre[OUTER], centre_strip = st.centre[OUTER | kLast];
  auto uw = simd::Window<T>::start(u, j0, j1, H);
  simd::Window<T> qw{};  // q of the contiguous dimension, through the strip being run
  int64_t strip_end = j0;

  auto one_vector = [&]<unsigned M, bool FULL>(int64_t j, Mask m) {
    constexpr bool kPmlLast = (M >> L) & 1u;
    uw.fetch(u, j, j1, H);
    if constexpr (kPmlLast) qw.fetch(q[L], j, strip_end, H);
    constexpr bool kAnyPlain = (M & ((1u << NDIM) - 1)) != (1u << NDIM) - 1;
    V w = kAnyPlain ? (M == OUTER ? centre_plain : centre_strip) * uw.cur : S::zero();
    for_dims<NDIM>([&]<int D>() {
      auto with_u = [&](auto&& along) {
        if constexpr (!((M >> D) & 1u)) {
          w = add_pairs<H>(w, along, d2[D]);
        } else {
          // pml_forward_q: the profiles along D at the cell, q = a psi and zeta of D.
          V pa, pb, pdb, psc;
          if constexpr (D == L) {
            pa = S::template load<FULL>(last.a + j, m);
            pb = S::template load<FULL>(last.b + j, m);
            pdb = S::template load<FULL>(last.dbdx + j, m);
            psc = S::template load<FULL>(last_scale + j, m);
          } else {
            pa = a[D] + S::zero();
            pb = b[D] + S::zero();
            pdb = db[D] + S::zero();
            psc = sc[D] + S::zero();
          }
          const V du = differences<H>(along, d1[D]);
          V dq, qc;
          if constexpr (D == L) {
            dq = differences<H>(AlongWindow<T>{qw}, d1[D]);
            qc = qw.cur;
          } else {
            qc = S::template load<FULL>(q[D] + j, m);
            dq = differences<H>(AlongStride<FULL, T>{q[D] + j, stride[D], m, qc}, d1[D]);
          }
          const V laplacian = add_pairs<H>(centre_alone[D] * along.centre(), along, d2[D]);
          const V tmp = (1 + pb) * laplacian + pdb * du + dq;
          const V zc = S::template load<FULL>(ze[D] + j, m);
          w += (1 + pb) * tmp + pa * zc;
          S::template store<FULL>(qn[D] + j, psc * (pb * du + qc), m);
          S::template store<FULL>(ze[D] + j, pb * tmp + pa * zc, m);
        }
      };
      if constexpr (D == L)
        with_u(AlongWindow<T>{uw});
      else
        with_u(AlongStride<FULL, T>{u + j, stride[D], m, uw.cur});
    });
    const V u_prev = S::template load<FULL>(un + j, m);
    const V v2dt2_j = S::template load<FULL>(v2dt2 + j, m);
    S::template store<FULL>(un + j, v2dt2_j * w + (uw.cur + uw.cur - u_prev), m);
    if constexpr (STORE)
      S::template store<FULL>(stored + j, 2 * S::template load<FULL>(v + j, m) * dt2 * w, m);
    uw.advance();
    if constexpr (kPmlLast) qw.advance();
  };
  auto plain = [&](int64_t from, int64_t to) {
    over_vectors<T>(from, to, [&]<bool FULL>(int64_t j, Mask m) {
      one_vector.template operator()<OUTER, FULL>(j, m);
    });
  };
  // The auxiliaries of the contiguous dimension are touched only in its PML strips, a few cache
  // lines per row that the hardware prefetchers do not follow (3-D: a third of the forward's time
  // waited on them): fetch those of the row kRowsAhead further on.
  constexpr int64_t kRowsAhead = 4;
  auto strip = [&](int64_t from, int64_t to) {
    if constexpr (NDIM >= 2) {
      const int64_t ahead = kRowsAhead * stride[NDIM - 2];
      constexpr int64_t kLine = 64 / sizeof(T);
      for (int64_t k = from - H; k < to + H + kLine; k += kLine)
        __builtin_prefetch(q[L] + k + ahead, 0);
      for (int64_t k = from; k < to + kLine; k += kLine) {
        __builtin_prefetch(qn[L] + k + ahead, 1);
        __builtin_prefetch(ze[L] + k + ahead, 1);
      }
    }
    qw = simd::Window<T>::start(q[L], from, to, H);
    strip_end = to;
    over_vectors<T>(from, to, [&]<bool FULL>(int64_t j, Mask m) {
      one_vector.template operator()<OUTER | kLast, FULL>(j, m);
    });
  };
  if (j0 < layout.a) strip(j0, layout.a);
  if (layout.a < layout.b) plain(layout.a, layout.b);
  if (layout.b < j1) strip(layout.b, j1);
}

#endif

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
  const T* sc_sources;    // sources of the scattered field, or receiver-data gradients (adjoint)
  T* bg_receivers;        // forward: background receivers; adjoint: grad of the scattered sources
  const T* grad_bg;       // adjoint: gradient of the background receiver data
};

// The forward steps copies of the fields whose rows (along the contiguous dimension) are padded
// to whole vectors and start `shift` cells before a 64-byte boundary, so that the first computed
// cell of every row and every vector after it are aligned: an unaligned AVX-512 access spans two
// cache lines, and a row of the accuracy-8 stencil makes eleven of them per vector
// (bench/scalar_cpu_notes.md). Cell c of the caller's layout is cell(c) of the copies'. Without
// AVX-512, and for Born, rows are not padded (GCC's loops index the stored slices with the
// copies' cell numbers), but the fields are copied all the same.
template <int NDIM, class T>
struct PaddedRows {
  int64_t nl, rows, shift, pitch;

  PaddedRows(const ScalarProblem<T>& p, int64_t h, bool pad)
      : nl(p.n[NDIM - 1]), rows(p.points() / p.n[NDIM - 1]) {
    constexpr int64_t W = kVector<T>;
    shift = pad ? (h + W - 1) / W * W - h : 0;
    pitch = pad ? (nl + W - 1) / W * W : nl;  // every row starts shift cells into its pitch
  }
  int64_t points() const { return rows * pitch; }
  int64_t cell(int64_t c) const { return c / nl * pitch + c % nl; }

  // Zeroed copies of `count` grids; data + cell(c) is cell c of the first (64-byte aligned at
  // cell -shift of each row).
  struct Copy {
    Buffer<T> memory;
    T* data = nullptr;
  };
  Copy allocate(int64_t count) const {
    Copy c;
    c.memory = zeroed<T>(count * points() + shift + 64 / int64_t(sizeof(T)));
    const auto address = reinterpret_cast<std::uintptr_t>(c.memory.get());
    c.data = reinterpret_cast<T*>((address + 63) / 64 * 64) + shift;
    return c;
  }
  // Rows of `count` grids, between the caller's layout (from, or to) and the copies'.
  void copy_in(const T* from, T* to, int64_t count) const {
    map_in(from, to, count, [](T value) { return value; });
  }
  // As copy_in, each value through f.
  template <class F>
  void map_in(const T* from, T* to, int64_t count, F&& f) const {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < count * rows; ++r)
      for (int64_t c = 0; c < nl; ++c) to[r * pitch + c] = f(from[r * nl + c]);
  }
  void copy_out(const T* from, T* to, int64_t count) const {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < count * rows; ++r) std::copy_n(from + r * pitch, nl, to + r * nl);
  }
  // The C-PML auxiliaries of dimension d into the copies, in the cells outside d's plain cells
  // [plain_lo, plain_hi) (the copies hold zeros there, which the steps keep: a = b = 0), psi as
  // q = a psi (see ForwardShot).
  void aux_in(const Geometry<NDIM, T>& g, int d, int64_t count, const T* psi, const T* zeta,
              T* q, T* ze, int64_t plain_lo, int64_t plain_hi) const {
    constexpr int L = NDIM - 1;
    int64_t row_stride = 1;  // rows per step of coordinate d (d < L)
    for (int e = d + 1; e < L; ++e) row_stride *= g.n[e];
    const T* a = g.prof[d].a;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < count * rows; ++r) {
      auto one = [&](int64_t j, T scale) {
        q[r * pitch + j] = scale * psi[r * nl + j];
        ze[r * pitch + j] = zeta[r * nl + j];
      };
      if (d == L) {
        for (int64_t j = 0; j < nl; ++j)
          if (j < plain_lo || j >= plain_hi) one(j, a[j]);
      } else {
        const int64_t x = (r % rows) / row_stride % g.n[d];
        if (x < plain_lo || x >= plain_hi)
          for (int64_t j = 0; j < nl; ++j) one(j, a[x]);
      }
    }
  }
};

template <int NDIM, int A, bool BORN, class T>
void forward(const ScalarProblem<T>& p, ScalarFields<T> fields, const T* sources, T* receivers,
             T* stored, const BornArgs<T>* born) {
  if (p.nt <= 0 || p.nshots <= 0) return;
#if defined(SCIPROXY_WAVE_SIMD)
  constexpr bool kPadRows = !BORN;
#else
  constexpr bool kPadRows = false;
#endif
  const PaddedRows<NDIM, T> padded(p, A / 2, kPadRows);
  const Geometry<NDIM, T> g(p, A, padded.pitch);  // the copies' layout
  const Geometry<NDIM, T> caller(p, A);           // the caller's: stored slices, point cells
#if defined(SCIPROXY_WAVE_SIMD)
  const FoldedStencils<T, A / 2> stencils(g);
#endif
  const Blocks<NDIM, T> blocks(g, p.nshots);
  const PointLists src(caller, blocks, p.nshots, p.nsources, p.source_cells);
  const PointLists rec(caller, blocks, p.nshots, p.nreceivers, p.receiver_cells);
  const PointLists bgrec(caller, blocks, p.nshots, BORN ? p.nbg_receivers : 0, p.bg_receiver_cells);
  const int64_t P = g.points, nshots = p.nshots, nt = p.nt;
  const int64_t interval = stored != nullptr ? p.store_interval : 0;
  constexpr int nfields = BORN ? 2 : 1;
  // Field sets: 0 the background (or only) field, 1 the scattered one.
  std::array<ScalarFields<T>, 2> set{fields, BORN ? born->sc : fields};
  // Point cells in the copies' layout.
  auto cells_of = [&](const int64_t* cells, int64_t n) {
    std::vector<int64_t> out(static_cast<std::size_t>(n));
    for (int64_t k = 0; k < n; ++k) out[k] = padded.cell(cells[k]);
    return out;
  };
  const std::vector<int64_t> source_cells = cells_of(p.source_cells, nshots * p.nsources);
  const std::vector<int64_t> receiver_cells = cells_of(p.receiver_cells, nshots * p.nreceivers);
  const std::vector<int64_t> bg_receiver_cells =
      cells_of(p.bg_receiver_cells, BORN ? nshots * p.nbg_receivers : 0);

  // The copies: u^t and u^{t-1} (u^{t+1} overwrites u^{t-1}), q = a psi at t and t+1, zeta (in
  // place), and the model (and scatter).
  using Copy = typename PaddedRows<NDIM, T>::Copy;
  const int64_t nmodels = p.v_batched ? nshots : 1;
  std::array<std::array<Copy, 2>, 2> u_copy;
  std::array<std::array<std::array<Copy, 2>, 3>, 2> psi_copy;
  std::array<std::array<Copy, 3>, 2> zeta_copy;
  for (int k = 0; k < nfields; ++k) {
    for (int c = 0; c < 2; ++c) u_copy[k][c] = padded.allocate(nshots);
    padded.copy_in(set[k].u, u_copy[k][0].data, nshots);
    padded.copy_in(set[k].u_prev, u_copy[k][1].data, nshots);
    for (int d = 0; d < NDIM; ++d) {
      for (int c = 0; c < 2; ++c) psi_copy[k][d][c] = padded.allocate(nshots);
      zeta_copy[k][d] = padded.allocate(nshots);
      padded.aux_in(g, d, nshots, set[k].psi[d], set[k].zeta[d], psi_copy[k][d][0].data,
                    zeta_copy[k][d].data, g.flo[d], g.fhi[d]);
    }
  }
  Copy v_copy = padded.allocate(nmodels), v2dt2_copy, scatter_copy;
  padded.copy_in(p.v, v_copy.data, nmodels);
  if (kPadRows) {
    v2dt2_copy = padded.allocate(nmodels);
    padded.map_in(p.v, v2dt2_copy.data, nmodels, [&](T v) { return v * v * p.dt2; });
  }
  if constexpr (BORN) {
    scatter_copy = padded.allocate(nmodels);
    padded.copy_in(p.scatter, scatter_copy.data, nmodels);
  }
  std::array<std::vector<T>, 3> ones;
  for (int d = 0; d < NDIM; ++d) ones[d].assign(static_cast<std::size_t>(g.n[d]), T(1));
  if (interval > 0) {
    const int64_t slices = (nt + interval - 1) / interval * nshots;
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < slices; ++q) zero_halo(caller, stored + q * caller.points);
  }

  const int64_t batch = shots_per_batch(
      g, nshots,
      (2 * nfields + (p.v_batched ? nfields : 0) + (interval > 0 ? 1 : 0)) * P * int64_t(sizeof(T)),
      3 * nfields * int64_t(sizeof(T)));
  // Step t of work item w = (shot, block): u^{t+1} overwrites u^{t-1}, q^{t+1} q^{t-1}, so the
  // buffers alternate with the parity of t.
  auto step_item = [&](int64_t t, int64_t w) {
    const int c = int(t % 2);
    std::array<T*, 2> u{u_copy[0][c].data, u_copy[1][c].data};
    std::array<T*, 2> u_other{u_copy[0][1 - c].data, u_copy[1][1 - c].data};
    std::array<std::array<T*, 3>, 2> psi_a{}, psi_b{};
    for (int k = 0; k < nfields; ++k)
      for (int d = 0; d < NDIM; ++d) {
        psi_a[k][d] = psi_copy[k][d][c].data;
        psi_b[k][d] = psi_copy[k][d][1 - c].data;
      }
    const bool store = interval > 0 && t % interval == 0;
    const int64_t shot = w / blocks.nblocks, block = w % blocks.nblocks, off = shot * P;
    ForwardShot<T> f{u[0] + off,
                     u_other[0] + off,
                     v_copy.data + (p.v_batched ? off : 0),
                     kPadRows ? v2dt2_copy.data + (p.v_batched ? off : 0) : nullptr,
                     {},
                     {},
                     {},
                     store ? stored + ((t / interval) * nshots + shot) * caller.points : nullptr,
                     p.dt2,
                     {}};
    BornShot<T> fs{};
    for (int d = 0; d < NDIM; ++d) {
      f.psi_scale[d] = t + 1 < nt ? g.prof[d].a : ones[d].data();
      f.psi[d] = psi_a[0][d] + off;
      f.psi_next[d] = psi_b[0][d] + off;
      f.zeta[d] = zeta_copy[0][d].data + off;
    }
    if constexpr (BORN) {
      fs.u = u[1] + off;
      fs.u_next = u_other[1] + off;
      fs.scatter = scatter_copy.data + (p.v_batched ? off : 0);
      for (int d = 0; d < NDIM; ++d) {
        fs.psi[d] = psi_a[1][d] + off;
        fs.psi_next[d] = psi_b[1][d] + off;
        fs.zeta[d] = zeta_copy[1][d].data + off;
      }
      for (int64_t q = bgrec.start[w]; q < bgrec.start[w + 1]; ++q) {
        const int64_t r = bgrec.index[q];
        born->bg_receivers[(t * nshots + shot) * p.nbg_receivers + r] =
            f.u[bg_receiver_cells[shot * p.nbg_receivers + r]];
      }
    }
    const T* recorded = BORN ? fs.u : f.u;  // Born: the receivers record u_sc
    for (int64_t q = rec.start[w]; q < rec.start[w + 1]; ++q) {
      const int64_t r = rec.index[q];
      receivers[(t * nshots + shot) * p.nreceivers + r] =
          recorded[receiver_cells[shot * p.nreceivers + r]];
    }
    block_rows(g, blocks, block,
               [&](int64_t base, const std::array<int64_t, 3>& x, int64_t j0, int64_t j1) {
#if defined(SCIPROXY_WAVE_SIMD)
                 if constexpr (!BORN) {
                   const RowLayout segments = row_layout<NDIM, kVector<T>>(x, g.flo, g.fhi, j0, j1);
                   with_mask<NDIM>(segments.outer, [&]<unsigned OUTER>() {
                     if constexpr (!((OUTER >> (NDIM - 1)) & 1u)) {
                       if (f.stored != nullptr)
                         forward_row_simd<NDIM, A, OUTER, true>(g, stencils, f, base, x, j0, segments,
                                                                j1);
                       else
                         forward_row_simd<NDIM, A, OUTER, false>(g, stencils, f, base, x, j0, segments,
                                                                 j1);
                     }
                   });
                   return;
                 }
#endif
                 row_segments<NDIM, kVector<T>>(
                     x, g.flo, g.fhi, j0, j1, [&]<unsigned M>(int64_t a, int64_t b) {
                       if constexpr (M == 0 && !BORN) {
                         if (f.stored != nullptr)
                           plain_segment<NDIM, A, true>(g, f, base, a, b);
                         else
                           plain_segment<NDIM, A, false>(g, f, base, a, b);
                       } else {
                         forward_segment<NDIM, A, M, BORN>(g, f, &fs, base, x, a, b);
                       }
                     });
               });
    for (int64_t q = src.start[w]; q < src.start[w + 1]; ++q) {
      const int64_t s = src.index[q];
      const int64_t cell = source_cells[shot * p.nsources + s];
      f.u_next[cell] += sources[(t * nshots + shot) * p.nsources + s];
      if constexpr (BORN) fs.u_next[cell] += born->sc_sources[(t * nshots + shot) * p.nsources + s];
    }
  };
  // Shots [first, last) through all steps; `shared`: every thread takes part (an `omp for` per
  // step), else the calling thread runs them alone. Alone in 2-D, it runs kDepth steps in one
  // sweep over the rows (temporal blocking): the rows of step t + l trail those of step t + l - 1
  // by h rows (rounded up to blocks), so the rows a step reads are still in cache from the step
  // before, and each sweep streams the fields from memory once instead of kDepth times. The two
  // buffers of u (and of q) suffice: row r of step t + l overwrites row r of u^{t+l-1}, which only
  // rows up to r + h of step t + l - 1 read, and those have run; sources and receivers go with
  // their block as before.
  auto run_shots = [&](int64_t first, int64_t last, bool shared) {
    const int64_t nblocks = blocks.nblocks;
    if (shared || NDIM != 2) {
      for (int64_t t = 0; t < nt; ++t)
        for_items(first * nblocks, last * nblocks, shared, [&](int64_t w) { step_item(t, w); });
      return;
    }
    // Blocks of step t + l trail those of step t + l - 1 by the blocks that h rows span.
    constexpr int64_t kDepth = 4;
    const int64_t lag = (A / 2 + blocks.tile - 1) / blocks.tile;
    for (int64_t shot = first; shot < last; ++shot)
      for (int64_t t0 = 0; t0 < nt; t0 += kDepth) {
        const int64_t depth = std::min(kDepth, nt - t0);
        for (int64_t i = 0; i < nblocks + (depth - 1) * lag; ++i)
          for (int64_t l = 0; l < depth; ++l) {
            const int64_t block = i - l * lag;
            if (block >= 0 && block < nblocks) step_item(t0 + l, shot * nblocks + block);
          }
      }
  };
#pragma omp parallel
  over_shots(nshots, batch, run_shots);
  // After nt steps (the buffers alternate every step) u^nt is in copy nt % 2, u^{nt-1} in the
  // other, and psi^nt in psi copy nt % 2.
  for (int k = 0; k < nfields; ++k) {
    padded.copy_out(u_copy[k][nt % 2].data, set[k].u, nshots);
    padded.copy_out(u_copy[k][1 - nt % 2].data, set[k].u_prev, nshots);
    for (int d = 0; d < NDIM; ++d) {
      padded.copy_out(psi_copy[k][d][nt % 2].data, set[k].psi[d], nshots);
      padded.copy_out(zeta_copy[k][d].data, set[k].zeta[d], nshots);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Adjoint

template <class T>
struct BackwardShot {
  const T* lambda;  // adjoint of u^{t+1}
  T* u_bar;         // in: sign * (adjoint of the u^t slot), out: adjoint of u^t
  const T* v2dt2;
  const T* psi_bar[3];  // adjoints of psi^{t+1}, zeta^{t+1}
  const T* zeta_bar[3];
  T* psi_bar_out[3];  // adjoints of psi^t, zeta^t
  T* zeta_bar_out[3];
  const T* stored;  // this step's slice, or null
  T* grad_v;        // this shot's accumulator, or null
  T sign;           // +1 at the first adjoint step, -1 afterwards
  T interval;
  // The plain adjoint (not Born): g = v^2 dt^2 lambda kept as a field, so that the interior
  // stencil D2 g reads one array instead of forming the product at every neighbour. g_out gets
  // v^2 dt^2 times the new u_bar (the next step's lambda); null in the Born adjoint.
  const T* g = nullptr;
  T* g_out = nullptr;
};

// D2 (v^2 dt^2 lambda) along one dimension: the adjoint's plain term, in the order of pml_adjoint.
template <int A, class T>
inline T diff2_product(const T* c, const T* f, int64_t i, int64_t s, T rdx2) {
  T sum = T(d2_coefficient<A>(0)) * (c[i] * f[i]);
  SCIPROXY_UNROLL
  for (int k = 1; k <= A / 2; ++k)
    sum += T(d2_coefficient<A>(k)) * (c[i + k * s] * f[i + k * s] + c[i - k * s] * f[i - k * s]);
  return sum * rdx2;
}

// D2 g along one dimension with g = adjoint_g<BORN> (the Born background adjoint's plain term).
template <int A, bool BORN, class T>
inline T diff2_g(const AdjointInputs<T>& in, int64_t i, int64_t s, T rdx2) {
  T sum = T(d2_coefficient<A>(0)) * adjoint_g<BORN>(in, i);
  SCIPROXY_UNROLL
  for (int k = 1; k <= A / 2; ++k)
    sum += T(d2_coefficient<A>(k)) * (adjoint_g<BORN>(in, i + k * s) + adjoint_g<BORN>(in, i - k * s));
  return sum * rdx2;
}

// One adjoint field over a segment. COUPLED: the Born background adjoint (g with the coupling).
template <int NDIM, int A, unsigned M, bool COUPLED, class T>
[[gnu::flatten, gnu::noinline]] void backward_segment(const Geometry<NDIM, T>& g,
                                                      const BackwardShot<T>& f, const T* coupling,
                                                      const T* lambda_sc, int64_t base,
                                                      const std::array<int64_t, 3>& x, int64_t j0,
                                                      int64_t j1) {
  int64_t st[3], xo[3];
  T rdx[3], rdx2[3];
  PmlProfile<T> pr[3];
  AdjointInputs<T> in[3];
  T* psi_out[3];
  T* zeta_out[3];
  for (int d = 0; d < 3; ++d) {
    st[d] = g.s[d];
    xo[d] = x[d];
    rdx[d] = g.rdx[d];
    rdx2[d] = g.rdx2[d];
    pr[d] = g.prof[d];
    in[d] = {f.lambda, f.v2dt2, f.psi_bar[d], f.zeta_bar[d], coupling, lambda_sc};
    psi_out[d] = f.psi_bar_out[d];
    zeta_out[d] = f.zeta_bar_out[d];
  }
  const T* __restrict lambda = f.lambda;
  const T* __restrict v2dt2 = f.v2dt2;
  T* __restrict ubar = f.u_bar;
  T* __restrict g_out = f.g_out;
  const T* __restrict stored = f.stored;
  T* __restrict grad_v = f.grad_v;
  const T sign = f.sign, interval = f.interval;
  constexpr int L = NDIM - 1;
  auto term = [&]<int D>(int64_t i, int64_t j) -> T {
    if constexpr (D >= NDIM) {
      return T(0);
    } else {
      const int64_t xd = D == L ? j : xo[D];
      const int64_t sd = D == L ? int64_t(1) : st[D];  // as in forward_segment
      if constexpr ((M >> D) & 1u)
        return pml_adjoint<A, COUPLED>(in[D], psi_out[D], zeta_out[D], i, sd, xd, pr[D], rdx[D],
                                       rdx2[D]);
      else if constexpr (COUPLED)
        return diff2_g<A, true>(in[D], i, sd, rdx2[D]);
      else
        return diff2_product<A>(v2dt2, lambda, i, sd, rdx2[D]);
    }
  };
#pragma omp simd
  for (int64_t j = j0; j < j1; ++j) {
    const int64_t i = base + j;
    const T li = lambda[i];
    T ub = 2 * li + sign * ubar[i];
    ub += term.template operator()<0>(i, j);
    if constexpr (NDIM >= 2) ub += term.template operator()<1>(i, j);
    if constexpr (NDIM >= 3) ub += term.template operator()<2>(i, j);
    ubar[i] = ub;
    if (g_out != nullptr) g_out[i] = v2dt2[i] * ub;  // loop-invariant test
    if (grad_v != nullptr) grad_v[i] += li * stored[i] * interval;
  }
}

// The plain cells of a row in the plain adjoint: D2 g per dimension, in the order of
// diff2_product (the same products, formed once per cell by the previous step), out of line as
// plain_segment.
template <int NDIM, int A, bool GRAD, class T>
[[gnu::noinline]] void plain_adjoint_segment(const Geometry<NDIM, T>& geo, const BackwardShot<T>& f,
                                             int64_t base, int64_t j0, int64_t j1) {
  const T* __restrict lambda = f.lambda + base;
  const T* __restrict g = f.g + base;
  const T* __restrict c = f.v2dt2 + base;
  T* __restrict ubar = f.u_bar + base;
  T* __restrict g_out = f.g_out + base;
  const T* __restrict stored = GRAD ? f.stored + base : nullptr;
  T* __restrict grad_v = GRAD ? f.grad_v + base : nullptr;
  const int64_t s0 = geo.s[0], s1 = geo.s[1];
  const T r0 = geo.rdx2[0], r1 = geo.rdx2[1], r2 = geo.rdx2[2];
  const T sign = f.sign, interval = f.interval;
#pragma omp simd
  for (int64_t j = j0; j < j1; ++j) {
    const T li = lambda[j];
    T ub = 2 * li + sign * ubar[j];
    ub += diff2<A>(g, j, NDIM == 1 ? int64_t(1) : s0, r0);
    if constexpr (NDIM >= 2) ub += diff2<A>(g, j, NDIM == 2 ? int64_t(1) : s1, r1);
    if constexpr (NDIM >= 3) ub += diff2<A>(g, j, int64_t(1), r2);
    ubar[j] = ub;
    g_out[j] = c[j] * ub;
    if constexpr (GRAD) grad_v[j] += li * stored[j] * interval;
  }
}

#if defined(SCIPROXY_WAVE_SIMD)
// backward_segment (plain adjoint, not Born) on vectors: pml_adjoint per PML dimension, D2 g per
// other dimension. Along the contiguous dimension the per-cell quantities of the neighbours,
//   tbar = (1+b) g + b zetabar',   (1+b) tbar,   d1bar = b' tbar + b psibar',
// are formed once per cell (for the vector entering the window) and shifted in registers.
template <int NDIM, int A, unsigned M, bool GRAD, class T>
[[gnu::noinline]] void backward_segment_simd(const Geometry<NDIM, T>& geo, const BackwardShot<T>& f,
                                             int64_t base, const std::array<int64_t, 3>& x,
                                             int64_t j0, int64_t j1) {
  using S = simd::Simd<T>;
  using V = typename S::V;
  using Mask = typename S::Mask;
  constexpr int H = A / 2, L = NDIM - 1;
  constexpr bool kPmlLast = (M >> L) & 1u;
  const T* __restrict lambda = f.lambda + base;
  const T* __restrict g = f.g + base;
  const T* __restrict c = f.v2dt2 + base;
  T* __restrict ubar = f.u_bar + base;
  T* __restrict g_out = f.g_out + base;
  const T* __restrict stored = GRAD ? f.stored + base : nullptr;
  T* __restrict grad_v = GRAD ? f.grad_v + base : nullptr;
  const T sign = f.sign, interval = f.interval;
  const T* pbar[3] = {};
  const T* zbar[3] = {};
  T* pout[3] = {};
  T* zout[3] = {};
  // Outer PML dimensions: the profiles at the row's coordinate x[d] + k, k = -H .. H.
  T ob[3][2 * H + 1] = {}, odb[3][2 * H + 1] = {}, oa[3] = {};
  for (int d = 0; d < NDIM; ++d) {
    if (!((M >> d) & 1u)) continue;
    pbar[d] = f.psi_bar[d] + base;
    zbar[d] = f.zeta_bar[d] + base;
    pout[d] = f.psi_bar_out[d] + base;
    zout[d] = f.zeta_bar_out[d] + base;
    if (d < L) {
      oa[d] = geo.prof[d].a[x[d]];
      for (int k = -H; k <= H; ++k) {
        ob[d][k + H] = geo.prof[d].b[x[d] + k];
        odb[d][k + H] = geo.prof[d].dbdx[x[d] + k];
      }
    }
  }
  const PmlProfile<T> last = geo.prof[L];
  // The derived windows of the contiguous dimension (kPmlLast): tbar, (1+b) tbar, d1bar.
  simd::Window<T> tw{}, ow{}, dw{};
  auto derive = [&](int64_t at, Mask m, V& t, V& o, V& d) {
    const V b = S::load(last.b + at, m), db = S::load(last.dbdx + at, m);
    t = (1 + b) * S::load(g + at, m) + b * S::load(zbar[L] + at, m);
    o = (1 + b) * t;
    d = db * t + b * S::load(pbar[L] + at, m);
  };
  if constexpr (kPmlLast) {
    derive(j0 - S::W, Mask(~0u << (S::W - H)), tw.prev, ow.prev, dw.prev);
    derive(j0, S::first(j1 + H - j0), tw.cur, ow.cur, dw.cur);
  }
  auto gw = simd::Window<T>::start(g, j0, j1, H);
  over_vectors<T>(j0, j1, [&]<bool FULL>(int64_t j, Mask m) {
    gw.fetch(g, j, j1, H);
    if constexpr (kPmlLast) derive(j + S::W, S::first(j1 + H - j - S::W), tw.next, ow.next, dw.next);
    const V li = S::template load<FULL>(lambda + j, m);
    V ub = 2 * li + sign * S::template load<FULL>(ubar + j, m);
    for_dims<NDIM>([&]<int D>() {
      const T rdx = geo.rdx[D], rdx2 = geo.rdx2[D];
      if constexpr (!((M >> D) & 1u)) {
        if constexpr (D == L)
          ub += vdiff2<A>(AlongWindow<T>{gw}, rdx2);
        else
          ub += vdiff2<A>(AlongStride<FULL, T>{g + j, geo.s[D], m, gw.cur}, rdx2);
      } else if constexpr (D == L) {
        V second = T(d2_coefficient<A>(0)) * ow.cur, first = S::zero(), dtbar = S::zero();
        [&]<int... K>(std::integer_sequence<int, K...>) {
          ((second += T(d2_coefficient<A>(K + 1)) *
                      (ow.template up<K + 1>() + ow.template down<K + 1>()),
            first += T(d1_coefficient<A>(K + 1)) *
                     (dw.template up<K + 1>() - dw.template down<K + 1>()),
            dtbar += T(d1_coefficient<A>(K + 1)) *
                     (tw.template up<K + 1>() - tw.template down<K + 1>())),
           ...);
        }(std::make_integer_sequence<int, H>{});
        const V pa = S::template load<FULL>(last.a + j, m);
        S::template store<FULL>(pout[D] + j, pa * (S::template load<FULL>(pbar[D] + j, m) - dtbar * rdx),
                                m);
        S::template store<FULL>(zout[D] + j, pa * (gw.cur + S::template load<FULL>(zbar[D] + j, m)),
                                m);
        ub += second * rdx2 - first * rdx;
      } else {
        const int64_t s = geo.s[D];
        auto tbar = [&](int64_t off, int k) {
          const T b = ob[D][k + H];
          return (1 + b) * S::template load<FULL>(g + j + off, m) +
                 b * S::template load<FULL>(zbar[D] + j + off, m);
        };
        auto d1bar = [&](int64_t off, int k, V t) {
          return odb[D][k + H] * t + ob[D][k + H] * S::template load<FULL>(pbar[D] + j + off, m);
        };
        const V zc = S::template load<FULL>(zbar[D] + j, m);
        const V t0 = (1 + ob[D][H]) * gw.cur + ob[D][H] * zc;
        V second = T(d2_coefficient<A>(0)) * (1 + ob[D][H]) * t0, first = S::zero(),
          dtbar = S::zero();
        [&]<int... K>(std::integer_sequence<int, K...>) {
          (
              [&] {
                constexpr int k = K + 1;
                const V tu = tbar(k * s, k), td = tbar(-k * s, -k);
                second += T(d2_coefficient<A>(k)) * ((1 + ob[D][H + k]) * tu + (1 + ob[D][H - k]) * td);
                first += T(d1_coefficient<A>(k)) * (d1bar(k * s, k, tu) - d1bar(-k * s, -k, td));
                dtbar += T(d1_coefficient<A>(k)) * (tu - td);
              }(),
              ...);
        }(std::make_integer_sequence<int, H>{});
        S::template store<FULL>(
            pout[D] + j, oa[D] * (S::template load<FULL>(pbar[D] + j, m) - dtbar * rdx), m);
        S::template store<FULL>(zout[D] + j, oa[D] * (gw.cur + zc), m);
        ub += second * rdx2 - first * rdx;
      }
    });
    S::template store<FULL>(ubar + j, ub, m);
    S::template store<FULL>(g_out + j, S::template load<FULL>(c + j, m) * ub, m);
    if constexpr (GRAD)
      S::template store<FULL>(grad_v + j,
                              S::template load<FULL>(grad_v + j, m) +
                                  li * S::template load<FULL>(stored + j, m) * interval,
                              m);
    gw.advance();
    if constexpr (kPmlLast) {
      tw.advance();
      ow.advance();
      dw.advance();
    }
  });
}

#endif

// The adjoint driver. BORN: two adjoint fields, set 0 the background (coupled to set 1 through
// g) and set 1 the scattered one; no model gradient (stored and grad_v null).
template <int NDIM, int A, bool BORN, class T>
void backward(const ScalarProblem<T>& p, ScalarFields<T> fields, const T* grad_receivers,
              T* grad_sources, const T* stored, T* grad_v, const BornArgs<T>* born) {
  if (p.nt <= 0 || p.nshots <= 0) return;
  const Geometry<NDIM, T> g(p, A);
  const Blocks<NDIM, T> blocks(g, p.nshots);
  const PointLists src(g, blocks, p.nshots, p.nsources, p.source_cells);
  const PointLists rec(g, blocks, p.nshots, p.nreceivers, p.receiver_cells);
  const PointLists bgrec(g, blocks, p.nshots, BORN ? p.nbg_receivers : 0, p.bg_receiver_cells);
  const int64_t P = g.points, nshots = p.nshots, nt = p.nt;
  const int64_t interval = !BORN && stored != nullptr && grad_v != nullptr ? p.store_interval : 0;
  const int64_t nmodels = p.v_batched ? nshots : 1;
  constexpr int nfields = BORN ? 2 : 1;
  std::array<ScalarFields<T>, 2> set{fields, BORN ? born->sc : fields};

  auto v2dt2 = uninitialised<T>(nmodels * P);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < nmodels * P; ++i) v2dt2[i] = p.v[i] * p.v[i] * p.dt2;
  Buffer<T> coupling;  // 2 v scatter dt^2
  if constexpr (BORN) {
    coupling = zeroed<T>(nmodels * P);
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < nmodels * P; ++i) coupling[i] = 2 * p.v[i] * p.scatter[i] * p.dt2;
  }

  // The plain adjoint's g = v^2 dt^2 lambda for lambda (g_a) and for the other slot (g_b), so
  // that every cell, the halo included, holds the product the stencil would form.
  std::array<Buffer<T>, 2> g_fields;
  if constexpr (!BORN) {
    for (int k = 0; k < 2; ++k) {
      g_fields[k] = zeroed<T>(nshots * P);
      const T* from = k == 0 ? set[0].u : set[0].u_prev;
      T* to = g_fields[k].get();
      const T* c = v2dt2.get();
#pragma omp parallel for schedule(static)
      for (int64_t shot = 0; shot < nshots; ++shot) {
        const T* cs = c + (p.v_batched ? shot * P : 0);
#pragma omp simd
        for (int64_t i = 0; i < P; ++i) to[shot * P + i] = cs[i] * from[shot * P + i];
      }
    }
  }

  // One model for several shots: per-shot accumulators, summed in shot order at the end.
  const bool partial = interval > 0 && !p.v_batched && nshots > 1;
  auto grad_v_shots = partial ? zeroed<T>(nshots * P) : Buffer<T>();

  std::array<std::array<Buffer<T>, 3>, 2> psi_copy, zeta_copy;
  std::array<std::array<T*, 3>, 2> psi_cur{}, psi_nxt{}, zeta_cur{}, zeta_nxt{};
  for (int k = 0; k < nfields; ++k)
    for (int d = 0; d < NDIM; ++d) {
      psi_copy[k][d] = zeroed<T>(nshots * P);
      zeta_copy[k][d] = zeroed<T>(nshots * P);
      prepare_aux(g, d, nshots, {set[k].psi[d], set[k].zeta[d]},
                  {psi_copy[k][d].get(), zeta_copy[k][d].get()}, {g.lo[d], g.hi[d]}, {0, 0},
                  nt % 2 == 1);
      const bool odd = nt % 2;
      psi_cur[k][d] = odd ? psi_copy[k][d].get() : set[k].psi[d];
      psi_nxt[k][d] = odd ? set[k].psi[d] : psi_copy[k][d].get();
      zeta_cur[k][d] = odd ? zeta_copy[k][d].get() : set[k].zeta[d];
      zeta_nxt[k][d] = odd ? set[k].zeta[d] : zeta_copy[k][d].get();
    }

  const int64_t batch = shots_per_batch(
      g, nshots,
      (2 * nfields + (p.v_batched ? 1 + nfields - 1 : 0) + (interval > 0 ? 2 : 0)) * P *
          int64_t(sizeof(T)),
      4 * nfields * int64_t(sizeof(T)));
  auto run_shots = [&](int64_t first, int64_t last, bool shared) {
    std::array<T*, 2> lambda{set[0].u, set[1].u};
    std::array<T*, 2> other{set[0].u_prev, set[1].u_prev};  // adjoint of the u^t slot, times sign
    T sign = 1;
    auto psi_a = psi_cur, psi_b = psi_nxt, zeta_a = zeta_cur, zeta_b = zeta_nxt;
    std::array<T*, 2> g_ab{g_fields[0].get(), g_fields[1].get()};
    for (int64_t t = nt - 1; t >= 0; --t) {
      const bool store = interval > 0 && t % interval == 0;
      for_items(first * blocks.nblocks, last * blocks.nblocks, shared, [&](int64_t w) {
        const int64_t shot = w / blocks.nblocks, block = w % blocks.nblocks, off = shot * P;
        std::array<BackwardShot<T>, 2> f{};
        for (int k = 0; k < nfields; ++k) {
          f[k] = BackwardShot<T>{lambda[k] + off,
                                 other[k] + off,
                                 v2dt2.get() + (p.v_batched ? off : 0),
                                 {},
                                 {},
                                 {},
                                 {},
                                 store ? stored + ((t / interval) * nshots + shot) * P : nullptr,
                                 store ? (partial ? grad_v_shots.get() : grad_v) + off : nullptr,
                                 sign,
                                 T(interval)};
          for (int d = 0; d < NDIM; ++d) {
            f[k].psi_bar[d] = psi_a[k][d] + off;
            f[k].zeta_bar[d] = zeta_a[k][d] + off;
            f[k].psi_bar_out[d] = psi_b[k][d] + off;
            f[k].zeta_bar_out[d] = zeta_b[k][d] + off;
          }
        }
        if constexpr (!BORN) {
          f[0].g = g_ab[0] + off;
          f[0].g_out = g_ab[1] + off;
        }
        for (int64_t q = src.start[w]; q < src.start[w + 1]; ++q) {
          const int64_t s = src.index[q];
          const int64_t cell = p.source_cells[shot * p.nsources + s];
          grad_sources[(t * nshots + shot) * p.nsources + s] = f[0].lambda[cell];
          if constexpr (BORN)
            born->bg_receivers[(t * nshots + shot) * p.nsources + s] = f[1].lambda[cell];
        }
        const T* cpl = BORN ? coupling.get() + (p.v_batched ? off : 0) : nullptr;
        block_rows(g, blocks, block,
                   [&](int64_t base, const std::array<int64_t, 3>& x, int64_t j0, int64_t j1) {
                     row_segments<NDIM, kVector<T>>(
                         x, g.alo, g.ahi, j0, j1, [&]<unsigned M>(int64_t a, int64_t b) {
#if defined(SCIPROXY_WAVE_SIMD)
                           if constexpr (!BORN) {  // M = 0 included: D2 g along every dimension
                             if (f[0].grad_v != nullptr)
                               backward_segment_simd<NDIM, A, M, true>(g, f[0], base, x, a, b);
                             else
                               backward_segment_simd<NDIM, A, M, false>(g, f[0], base, x, a, b);
                             return;
                           }
#else
                           if constexpr (M == 0 && !BORN) {
                             if (f[0].grad_v != nullptr)
                               plain_adjoint_segment<NDIM, A, true>(g, f[0], base, a, b);
                             else
                               plain_adjoint_segment<NDIM, A, false>(g, f[0], base, a, b);
                             return;
                           }
#endif
                           backward_segment<NDIM, A, M, BORN, T>(g, f[0], cpl, f[1].lambda, base, x,
                                                              a, b);
                           if constexpr (BORN)
                             backward_segment<NDIM, A, M, false, T>(g, f[1], nullptr, nullptr, base,
                                                                 x, a, b);
                         });
                   });
        // Born: the scattered receivers' data gradient drives set 1, the background's set 0.
        T* rec_field = BORN ? f[1].u_bar : f[0].u_bar;
        for (int64_t q = rec.start[w]; q < rec.start[w + 1]; ++q) {
          const int64_t r = rec.index[q];
          const int64_t cell = p.receiver_cells[shot * p.nreceivers + r];
          rec_field[cell] += grad_receivers[(t * nshots + shot) * p.nreceivers + r];
          if constexpr (!BORN) f[0].g_out[cell] = f[0].v2dt2[cell] * rec_field[cell];
        }
        if constexpr (BORN)
          for (int64_t q = bgrec.start[w]; q < bgrec.start[w + 1]; ++q) {
            const int64_t r = bgrec.index[q];
            f[0].u_bar[p.bg_receiver_cells[shot * p.nbg_receivers + r]] +=
                born->grad_bg[(t * nshots + shot) * p.nbg_receivers + r];
          }
      });
      // The adjoint of u^t is in `other`; the adjoint of the u^{t-1} slot is -lambda^{t+1}.
      std::swap(lambda, other);
      std::swap(g_ab[0], g_ab[1]);
      sign = -1;
      std::swap(psi_a, psi_b);
      std::swap(zeta_a, zeta_b);
    }
  };
#pragma omp parallel
  over_shots(nshots, batch, run_shots);
  // After the last step the adjoint of u^0 is in fields.u_prev when nt is odd, and the other
  // array holds minus the adjoint of u^{-1}.
  for (int k = 0; k < nfields; ++k) {
    T* u = set[k].u;
    T* up = set[k].u_prev;
    if (nt % 2) {
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < nshots * P; ++i) {
        const T lam = u[i];
        u[i] = up[i];
        up[i] = -lam;
      }
    } else {
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < nshots * P; ++i) up[i] = -up[i];
    }
  }
  if (partial) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < P; ++i) {
      T sum = grad_v_shots[i];
      for (int64_t shot = 1; shot < nshots; ++shot) sum += grad_v_shots[shot * P + i];
      grad_v[i] += sum;
    }
  }
}

// Runtime (ndim, accuracy) to the unrolled instantiation.
template <class F>
void dispatch(int ndim, int accuracy, F&& f) {
  auto by_accuracy = [&]<int NDIM>() {
    switch (accuracy) {
      case 2:
        return f.template operator()<NDIM, 2>();
      case 4:
        return f.template operator()<NDIM, 4>();
      case 6:
        return f.template operator()<NDIM, 6>();
      case 8:
        return f.template operator()<NDIM, 8>();
      default:
        throw_invalid_argument("accuracy", "2, 4, 6 or 8", std::to_string(accuracy));
    }
  };
  switch (ndim) {
    case 1:
      return by_accuracy.template operator()<1>();
    case 2:
      return by_accuracy.template operator()<2>();
    case 3:
      return by_accuracy.template operator()<3>();
    default:
      throw_invalid_argument("ndim", "1, 2 or 3", std::to_string(ndim));
  }
}

}  // namespace

template <class T>
void scalar_forward(const ScalarProblem<T>& p, ScalarFields<T> fields, const T* sources,
                    T* receivers, T* stored) {
  dispatch(p.ndim, p.accuracy,
           [&]<int NDIM, int A>() {
             forward<NDIM, A, false, T>(p, fields, sources, receivers, stored, nullptr);
           });
}

template <class T>
void scalar_backward(const ScalarProblem<T>& p, ScalarFields<T> fields, const T* grad_receivers,
                     T* grad_sources, const T* stored, T* grad_v) {
  dispatch(p.ndim, p.accuracy, [&]<int NDIM, int A>() {
    backward<NDIM, A, false, T>(p, fields, grad_receivers, grad_sources, stored, grad_v, nullptr);
  });
}

template <class T>
void scalar_born_forward(const ScalarProblem<T>& p, ScalarFields<T> bg, ScalarFields<T> sc,
                         const T* sources, const T* scattered_sources, T* receivers,
                         T* bg_receivers) {
  const BornArgs<T> born{sc, scattered_sources, bg_receivers, nullptr};
  dispatch(p.ndim, p.accuracy, [&]<int NDIM, int A>() {
    forward<NDIM, A, true>(p, bg, sources, receivers, static_cast<T*>(nullptr), &born);
  });
}

template <class T>
void scalar_born_backward(const ScalarProblem<T>& p, ScalarFields<T> bg, ScalarFields<T> sc,
                          const T* grad_receivers, const T* grad_bg_receivers, T* grad_sources,
                          T* grad_scattered_sources) {
  const BornArgs<T> born{sc, nullptr, grad_scattered_sources, grad_bg_receivers};
  dispatch(p.ndim, p.accuracy, [&]<int NDIM, int A>() {
    backward<NDIM, A, true>(p, bg, grad_receivers, grad_sources, static_cast<const T*>(nullptr),
                            static_cast<T*>(nullptr), &born);
  });
}

template void scalar_forward<float>(const ScalarProblem<float>&, ScalarFields<float>, const float*,
                                    float*, float*);
template void scalar_forward<double>(const ScalarProblem<double>&, ScalarFields<double>,
                                     const double*, double*, double*);
template void scalar_backward<float>(const ScalarProblem<float>&, ScalarFields<float>, const float*,
                                     float*, const float*, float*);
template void scalar_backward<double>(const ScalarProblem<double>&, ScalarFields<double>,
                                      const double*, double*, const double*, double*);
#define SCIPROXY_INSTANTIATE_BORN(T)                                                              \
  template void scalar_born_forward<T>(const ScalarProblem<T>&, ScalarFields<T>, ScalarFields<T>, \
                                       const T*, const T*, T*, T*);                               \
  template void scalar_born_backward<T>(const ScalarProblem<T>&, ScalarFields<T>, ScalarFields<T>, \
                                        const T*, const T*, T*, T*);
SCIPROXY_INSTANTIATE_BORN(float)
SCIPROXY_INSTANTIATE_BORN(double)
#undef SCIPROXY_INSTANTIATE_BORN

}  // namespace sciproxy::wave::kernels::cpu
