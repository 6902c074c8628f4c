// cpu backend of the TTI workshop demo operator (OpenMP + SIMD). Per step (demo_kernels.hpp):
//   F = a g + (bma (n.g) + s) n,  g = D+ u          (flux; coefficients computed once in demo.cpp)
//   u+ = (2 - d) u + (d - 1) u- + m (D- . F)        (divergence and update)
//   u+ += scaled_c s(t) at the 8 source corners     (injection)
// with the per-point arithmetic of demo_math.hpp (shared with demo_cuda.cu); docs/kernels/tti.md.
//
// two-pass: the demo's form. The flux pass writes Fx, Fy, Fz over the grid, the divergence pass
// reads them. Both sweep blocks of kRowsPerBlock y-rows through all x planes, so that the 2M
// planes of a block the x-stencil spans stay in L2 (full planes would not).
//
// fused: one pass per step. A thread takes a tile of kTileY rows x (full rows, or kTileZ columns)
// and streams along x: at plane j it computes the fluxes of plane j over the tile widened by the
// stencil (M points in y; a whole vector in z; clipped to the grid, outside which the fluxes are
// zero) into rings, Fx of 2M planes (D-x spans them) and Fy, Fz of M planes, then finishes the
// divergence and update of plane i = j - M + 1. The rings (~1-2 MB at order 8, float32) and the
// u planes of the stencil stay in cache, so DRAM sees u, u-, the coefficients and u+ once per
// step (44 bytes per point in float32 instead of 72). The fluxes of the widened border are
// computed by both neighbouring tiles (about 22% more flux arithmetic at 32 rows; not counted in
// the work model, as Devito does not count its redundant work). The arithmetic per point is the
// same as two-pass, so both forms agree to rounding (the compiler may contract a*b+c
// differently in the two loops).
//
// Rows are nz_vector long (Grid): loops run over whole SIMD vectors, with no remainder loops,
// which at 64-wide tiles cost more than the stencils; the extra points have zero coefficients.
// Denormals are flushed to zero (FlushDenormals).
#include <omp.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "wave/tti/demo_kernels.hpp"
#include "wave/tti/demo_math.hpp"

namespace sciproxy::wave::tti::demo::cpu {

namespace {

using std::int64_t;

constexpr int64_t kRowsPerBlock = 16;  // two-pass: y-rows swept together through x
// fused: tiles of kTileY rows x (full rows or kTileZ columns), streamed along x. 32 rows widen
// by 2M - 1 = 7 at order 8 (22% more flux work); measured on 2 Zen 4 cores at 128^3 and
// 64 x 128 x 476: 16 rows 10% slower, 64 rows 3% faster but rings beyond L2 at nz ~ 500.
constexpr int64_t kTileY = 32;
constexpr int64_t kTileZ = 128;
constexpr int64_t kFullRowsUpTo = 512;  // fused: rows up to this long are not split along z

template <int A, class T>
void flux_pass(const Grid& g, const Coefficients<T>& c, const T* u, T* fx, T* fy, T* fz) {
  const int64_t sx = g.stride_x(), sy = g.stride_y();
  const T rhx = T(1 / g.spacing[0]), rhy = T(1 / g.spacing[1]), rhz = T(1 / g.spacing[2]);
  const int64_t nblocks = (g.n[1] + kRowsPerBlock - 1) / kRowsPerBlock;
#pragma omp parallel for schedule(dynamic)
  for (int64_t block = 0; block < nblocks; ++block) {
    const int64_t j0 = block * kRowsPerBlock, j1 = std::min(g.n[1], j0 + kRowsPerBlock);
    for (int64_t i = 0; i < g.n[0]; ++i)
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t q0 = g.index(i, j, 0);
#pragma omp simd
        for (int64_t k = 0; k < g.nz_vector; ++k) {  // padded columns give 0
          const int64_t q = q0 + k;
          T gx, gy, gz;
          staggered_gradient<A>(u + q, sx, sy, rhx, rhy, rhz, gx, gy, gz);
          flux_from_gradient(gx, gy, gz, c.nx[q], c.ny[q], c.nz[q], c.a[q], c.bma[q], c.s[q], fx[q],
                             fy[q], fz[q]);
        }
      }
  }
}

template <int A, class T>
void divergence_pass(const Grid& g, const Coefficients<T>& c, const T* fx, const T* fy,
                     const T* fz, const T* u, T* u_next) {
  const int64_t sx = g.stride_x(), sy = g.stride_y();
  const T rhx = T(1 / g.spacing[0]), rhy = T(1 / g.spacing[1]), rhz = T(1 / g.spacing[2]);
  const int64_t nblocks = (g.n[1] + kRowsPerBlock - 1) / kRowsPerBlock;
#pragma omp parallel for schedule(dynamic)
  for (int64_t block = 0; block < nblocks; ++block) {
    const int64_t j0 = block * kRowsPerBlock, j1 = std::min(g.n[1], j0 + kRowsPerBlock);
    for (int64_t i = 0; i < g.n[0]; ++i)
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t q0 = g.index(i, j, 0);
#pragma omp simd
        for (int64_t k = 0; k < g.nz_vector; ++k) {  // padded columns give 0
          const int64_t q = q0 + k;
          const T div = staggered_backward<A>(fx + q, sx, rhx) + staggered_backward<A>(fy + q, sy, rhy) +
                        staggered_backward<A>(fz + q, 1L, rhz);
          u_next[q] = leapfrog_update(u[q], u_next[q], c.m[q], c.d[q], div);
        }
      }
  }
}

// One tile of the fused pass: grid rows [j0, j1), columns [k0, k1) (multiples of the vector
// length, up to nz_vector). `ring_x` holds the Fx of 2M planes (D-x spans them), `ring_yz` the
// Fy and Fz of M planes (made at plane j, used at plane j - M + 1); rows of `row` elements.
template <int A, class T>
void fused_tile(const Grid& g, const Coefficients<T>& c, const T* u, T* u_next, int64_t j0,
                int64_t j1, int64_t k0, int64_t k1, std::vector<T>& ring_x, std::vector<T>& ring_yz) {
  constexpr int M = A / 2;
  constexpr int64_t V = Grid::kVectorLength;
  const int64_t sx = g.stride_x(), sy = g.stride_y();
  const T rhx = T(1 / g.spacing[0]), rhy = T(1 / g.spacing[1]), rhz = T(1 / g.spacing[2]);
  // The widened tile: y in [j0 - M, j1 + M - 1); z in [k0 - V, k1 + V), a whole vector beyond
  // each side so that the flux loop runs over whole vectors too. Clipped to the grid's rows and
  // padded columns; the ring stays zero where nothing is computed (outside the grid).
  const int64_t ey0 = j0 - M, ez0 = k0 - V;
  const int64_t ext_y = (j1 - j0) + 2 * M - 1;
  const int64_t row = (k1 - k0) + 2 * V;
  const int64_t comp = ext_y * row;  // one component of one plane
  ring_x.assign(static_cast<std::size_t>(2 * M * comp), T(0));
  ring_yz.assign(static_cast<std::size_t>(2 * M * comp), T(0));
  const int64_t cy0 = std::max<int64_t>(ey0, 0), cy1 = std::min<int64_t>(j1 + M - 1, g.n[1]);
  const int64_t cz0 = std::max<int64_t>(ez0, 0), cz1 = std::min<int64_t>(k1 + V, g.nz_vector);

  for (int64_t j = 0; j < g.n[0] + M - 1; ++j) {
    T* slot_x = ring_x.data() + (j % (2 * M)) * comp;
    if (j < g.n[0]) {
      T* slot_yz = ring_yz.data() + (j % M) * 2 * comp;
      for (int64_t y = cy0; y < cy1; ++y) {
        const int64_t q0 = g.index(j, y, 0);
        T* fx = slot_x + (y - ey0) * row - ez0;
        T* fy = slot_yz + (y - ey0) * row - ez0;
        T* fz = fy + comp;
#pragma omp simd
        for (int64_t z = cz0; z < cz1; ++z) {
          const int64_t q = q0 + z;
          T gx, gy, gz;
          staggered_gradient<A>(u + q, sx, sy, rhx, rhy, rhz, gx, gy, gz);
          flux_from_gradient(gx, gy, gz, c.nx[q], c.ny[q], c.nz[q], c.a[q], c.bma[q], c.s[q],
                             fx[z], fy[z], fz[z]);
        }
      }
    } else {
      std::fill_n(slot_x, comp, T(0));  // beyond the last plane Fx is zero
    }
    const int64_t i = j - (M - 1);
    if (i < 0) continue;
    const T* here = ring_yz.data() + (i % M) * 2 * comp;
    for (int64_t y = j0; y < j1; ++y) {
      const int64_t q0 = g.index(i, y, 0);
      const int64_t r = (y - ey0) * row - ez0;  // ring offset of (y, z = 0)
      const T* fy = here + r;
      const T* fz = here + comp + r;
      const T* above[M];  // Fx of plane i + k - 1 at (y, z = 0); planes below 0 are zero slots
      const T* below[M];  // Fx of plane i - k
      for (int k = 1; k <= M; ++k) {
        above[k - 1] = ring_x.data() + ((i + k - 1) % (2 * M)) * comp + r;
        below[k - 1] = ring_x.data() + ((i - k + 2 * M) % (2 * M)) * comp + r;
      }
#pragma omp simd
      for (int64_t z = k0; z < k1; ++z) {
        // D-x as staggered_backward sums it, across ring planes instead of a stride.
        T dx = 0;
        SCIPROXY_UNROLL
        for (int k = 1; k <= M; ++k)
          dx += T(staggered_coefficient<A>(k)) * (above[k - 1][z] - below[k - 1][z]);
        const T div = dx * rhx + staggered_backward<A>(fy + z, row, rhy) +
                      staggered_backward<A>(fz + z, 1L, rhz);
        const int64_t q = q0 + z;
        u_next[q] = leapfrog_update(u[q], u_next[q], c.m[q], c.d[q], div);
      }
    }
  }
}

template <int A, class T>
void fused_pass(const Grid& g, const Coefficients<T>& c, const T* u, T* u_next) {
  // Full rows up to kFullRowsUpTo (no widening along z, long SIMD streams), else tiles of kTileZ.
  const int64_t tile_z = g.nz_vector <= kFullRowsUpTo ? g.nz_vector : kTileZ;
  const int64_t tile_y = std::min<int64_t>(g.n[1], kTileY);
  const int64_t ntz = (g.nz_vector + tile_z - 1) / tile_z, nty = (g.n[1] + tile_y - 1) / tile_y;
#pragma omp parallel
  {
    std::vector<T> ring_x, ring_yz;
#pragma omp for schedule(dynamic) collapse(2)
    for (int64_t ty = 0; ty < nty; ++ty)
      for (int64_t tz = 0; tz < ntz; ++tz)
        fused_tile<A>(g, c, u, u_next, ty * tile_y, std::min(g.n[1], (ty + 1) * tile_y),
                      tz * tile_z, std::min(g.nz_vector, (tz + 1) * tile_z), ring_x, ring_yz);
  }
}

template <class T>
void inject(const Source<T>& src, std::int64_t t, T* u_next) {
  for (int c = 0; c < 8; ++c) u_next[src.cells[c]] += src.scaled[c] * src.amplitudes[t];
}

// Flushes denormal results and inputs to zero on every OpenMP thread for the lifetime of the
// object, then restores the previous modes. From rest, the stencils spread ever smaller values
// ahead of the wavefront; once they underflow into denormals, each operation on them costs
// about 100 times more on x86, which made whole steps several times slower. Devito's generated
// code sets the same flags. Values below 1e-38 (float32) are lost, far below any tolerance.
class FlushDenormals {
 public:
  FlushDenormals() {
#if defined(__SSE__)
#pragma omp parallel
    {
#pragma omp single
      saved_.assign(static_cast<std::size_t>(omp_get_num_threads()), 0u);
      saved_[static_cast<std::size_t>(omp_get_thread_num())] = _mm_getcsr();
      _mm_setcsr(_mm_getcsr() | kFlushToZero | kDenormalsAreZero);
    }
#endif
  }
  ~FlushDenormals() {
#if defined(__SSE__)
#pragma omp parallel
    {
      const auto t = static_cast<std::size_t>(omp_get_thread_num());
      if (t < saved_.size()) _mm_setcsr(saved_[t]);
    }
#endif
  }
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
  static constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
  std::vector<unsigned> saved_;
};

template <int A, class T>
void run_order(const Grid& g, const Coefficients<T>& c, const Source<T>& src, int64_t nt,
               Fields<T> fields, TtiDemoForm form, Timers* timers) {
  T* u = fields.u;
  T* u_prev = fields.u_prev;  // u^{t-1} on entry of a step, u^{t+1} after it
  const FlushDenormals flush;  // on the OpenMP threads; the injection runs on this one
  std::vector<T> fx, fy, fz;
  if (form == TtiDemoForm::two_pass) {
    // Zero in the halo, which the passes never write.
    fx.assign(static_cast<std::size_t>(g.padded_points()), T(0));
    fy.assign(fx.size(), T(0));
    fz.assign(fx.size(), T(0));
  }
  for (int64_t t = 0; t < nt; ++t) {
    if (form == TtiDemoForm::two_pass) {
      {
        auto r = Timers::region(timers, "flux pass");
        flux_pass<A>(g, c, u, fx.data(), fy.data(), fz.data());
      }
      auto r = Timers::region(timers, "divergence pass");
      divergence_pass<A>(g, c, fx.data(), fy.data(), fz.data(), u, u_prev);
    } else {
      auto r = Timers::region(timers, "fused flux + divergence");
      fused_pass<A>(g, c, u, u_prev);
    }
    {
      auto r = Timers::region(timers, "source injection");
      inject(src, t, u_prev);
    }
    std::swap(u, u_prev);
  }
  if (u != fields.u) std::swap_ranges(fields.u, fields.u + g.padded_points(), fields.u_prev);
}

}  // namespace

template <class T>
void run(const Grid& g, const Coefficients<T>& c, const Source<T>& src, std::int64_t nt,
         Fields<T> fields, TtiDemoForm form, Timers* timers) {
  switch (g.order) {
    case 4: return run_order<4>(g, c, src, nt, fields, form, timers);
    case 8: return run_order<8>(g, c, src, nt, fields, form, timers);
    case 12: return run_order<12>(g, c, src, nt, fields, form, timers);
    default: return run_order<16>(g, c, src, nt, fields, form, timers);
  }
}

template void run<float>(const Grid&, const Coefficients<float>&, const Source<float>&, std::int64_t,
                         Fields<float>, TtiDemoForm, Timers*);
template void run<double>(const Grid&, const Coefficients<double>&, const Source<double>&,
                          std::int64_t, Fields<double>, TtiDemoForm, Timers*);

}  // namespace sciproxy::wave::tti::demo::cpu
