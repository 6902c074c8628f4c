// cpu backend of the TTI workshop demo operator (OpenMP + SIMD). Per step (kernels.hpp):
//   F = a g + (bma (n.g) + s) n,  g = D+ u          (flux; coefficients from demo_api.cpp)
//   u+ = (2 - d) u + (d - 1) u- + m (D- . F)        (divergence and update)
//   u+ += scaled_c s(t) at the 8 source corners     (injection)
// with the per-point arithmetic of math.hpp (shared with demo_cuda.cu); docs/kernels/tti.md.
// Performance notes: bench/tti_cpu_notes.md.
//
// Layout. The backend copies u, u- and the eight coefficient arrays once per run (before the
// time loop, timed as the region "cpu layout") into its own arrays whose rows start on 64-byte
// boundaries: u and u- with a halo of M points in x and y and of one SIMD vector (16 floats) on
// each side along z, the coefficients without any halo (they are only read at the output point);
// constant materials (demo_api.cpp decides) keep one value of each. Where |nz| >= 1/8 over the
// grid (demo_api.cpp decides, fused form) nz is not stored: the flux loop derives it from nx, ny,
// with n and s negated where nz < 0 (coefficients_to_layout). Every z loop then
// runs over whole aligned vectors (nz_vector points, DemoGrid), and only the z stencils load across
// cache lines. demo_api.cpp's padded layout starts rows at arbitrary offsets, so that every 64-byte
// load there straddled two lines (twice the load-port cost on Zen 4).
//
// two-pass: the demo's form. The flux pass writes Fx, Fy, Fz over the grid, the divergence pass
// reads them. Both sweep blocks of TtiDemoCpuTuning::block_rows y-rows through all x planes, so
// that the 2M planes of a block the x-stencil spans stay in L2.
//
// fused: one pass per step. A thread takes a tile of ty rows (full z rows) and streams along x.
// At plane j it computes the gradient and flux on the tile's rows widened by the y-stencil (M rows
// before, M - 1 after, clipped to the grid) and keeps only what is needed: Fx of the tile's rows
// in a ring of 2M planes (D-x spans them), Fy of the widened rows and Fz of the tile's rows for
// this plane only, from which it forms D-y Fy + D-z Fz at once into a ring of M planes; then it
// finishes plane i = j - M + 1 (D-x Fx from the ring, plus the stored part, and the update). The
// thread's buffers (~0.5-0.9 MB at order 8, float32) and the u planes of the stencil stay in L2,
// so DRAM sees u, u-, the coefficients and u+ once per step (44 bytes per point in float32, 40
// with nz derived). The gradient of the widened rows is computed by both neighbouring tiles (7/ty
// more at order 8, not counted in the work model, as Devito does not count its redundant work).
// With varying materials the row loops prefetch the next row's coefficients and the x-stencil's
// leading u row (and m, d, u- in the update): the hardware prefetchers left the flux loop waiting
// for them. Both forms do the same arithmetic per point in the same order, so they agree to
// rounding (the compiler may contract a*b+c differently in different loops).
//
// Denormals are flushed to zero (FlushDenormals).
#include <omp.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "sciproxy/core/cancel.hpp"
#include "tti/kernels.hpp"
#include "tti/math.hpp"

namespace sciproxy::tti::kernels::cpu {

namespace {

using std::int64_t;

constexpr int64_t kAlign = 64;  // bytes
constexpr int64_t kZPad = 16;   // elements of z padding on each side of a u row (>= M)

// 64-byte aligned, zero-initialised array.
template <class T>
struct AlignedArray {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> ptr;
  int64_t size = 0;
  AlignedArray() = default;
  explicit AlignedArray(int64_t n) : size(n) {
    const std::size_t bytes = static_cast<std::size_t>(
        (n * static_cast<int64_t>(sizeof(T)) + kAlign - 1) / kAlign * kAlign);
    void* p = std::aligned_alloc(kAlign, bytes ? bytes : kAlign);
    if (!p) throw std::bad_alloc();
    ptr.reset(static_cast<T*>(p));
    // First touch in parallel, in the order the kernels sweep (x planes split among threads).
    char* c = static_cast<char*>(p);
    const int64_t chunk = 1 << 20;
    const int64_t nchunks = (static_cast<int64_t>(bytes) + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nchunks; ++b)
      std::memset(c + b * chunk, 0,
                  static_cast<std::size_t>(std::min<int64_t>(chunk, bytes - b * chunk)));
  }
  T* data() const {
    return ptr.get();
  }
};

// The backend's own layout (see the header comment).
struct Layout {
  int halo = 4;                // M
  std::array<int64_t, 3> n{};  // grid points
  int64_t nzv = 0;             // z points computed per row (DemoGrid::nz_vector)
  int64_t row = 0;             // u row stride: kZPad + nzv + kZPad
  int64_t plane = 0;           // u plane stride: (n[1] + 2M) row
  int64_t points = 0;          // u array size: (n[0] + 2M) plane
  explicit Layout(const DemoGrid& g) : halo(g.halo), n(g.n), nzv(g.nz_vector) {
    row = kZPad + nzv + kZPad;
    plane = (n[1] + 2 * halo) * row;
    points = (n[0] + 2 * halo) * plane;
  }
  int64_t u_index(int64_t i, int64_t j, int64_t k) const {
    return (i + halo) * plane + (j + halo) * row + kZPad + k;
  }
  // The eight coefficients, each [n0][n1][nzv], one after the other in one array. (Interleaving
  // them by row, one stream per thread instead of eight, ran 10% slower.)
  static constexpr int64_t kCoefficients = 8;
  int64_t c_index(int64_t i, int64_t j, int64_t k) const { return (i * n[1] + j) * nzv + k; }
  int64_t c_size() const { return n[0] * n[1] * nzv; }  // of one coefficient
  // Coefficient k starts at k c_stride: c_size rounded up to whole pages, plus kStaggerLines
  // cache lines. At the sizes users run (128^3, 200^3, 256^3) c_size is a whole number of pages:
  // back to back, the coefficients of one point would lie 4 KiB apart in the same L1 set (8
  // ways) and the flux loop's seven streams and their prefetches would evict each other.
  static constexpr int64_t kStaggerLines = 7;  // coprime with the 64 lines of a page
  int64_t c_stride(int64_t element_bytes) const {
    const int64_t page = 4096 / element_bytes, line = 64 / element_bytes;
    return (c_size() + page - 1) / page * page + kStaggerLines * line;
  }
};

template <class T>
struct Coef {
  const T *nx, *ny, *nz, *a, *bma, *s, *m, *d;  // each [n0][n1][nzv] (Layout::c_index)
};

// D+ along a line through u with stride s, and D- (staggered_forward / staggered_backward of
// math.hpp, written out with the constant coefficient so that the compiler sees immediates).
template <int A, class T>
inline T dplus(const T* u, int64_t s) {
  T sum = 0;
#pragma GCC unroll 8
  for (int k = 1; k <= A / 2; ++k)
    sum += T(staggered_coefficient<A>(k)) * (u[k * s] - u[(1 - k) * s]);
  return sum;
}
template <int A, class T>
inline T dminus(const T* f, int64_t s) {
  T sum = 0;
#pragma GCC unroll 8
  for (int k = 1; k <= A / 2; ++k)
    sum += T(staggered_coefficient<A>(k)) * (f[(k - 1) * s] - f[-k * s]);
  return sum;
}

// out[k] = scale D+z f (kPlus) or scale D-z f at k in [0, len), len a multiple of 16, f 64-byte
// aligned with 16 readable points before f and after f + len. With AVX-512 (float) each vector
// of 16 points loads one new aligned vector and forms the shifted neighbours in registers
// (valignd) instead of 2M - 1 unaligned loads, each of which straddles two cache lines; the
// sums are dplus / dminus's, in the same order.
#if defined(__AVX512F__)
// The all-lanes masked form of valignd: the same instruction, but GCC 12's header for the
// unmasked one starts from an undefined vector and warns (-Wmaybe-uninitialized) at every use.
constexpr __mmask16 kAllLanes = 0xFFFF;
template <int O>
inline __m512 shifted(__m512 v0, __m512 v1, __m512 v2) {  // f[k + O + lane], |O| < 16
  if constexpr (O == 0) {
    return v1;
  } else if constexpr (O > 0) {
    return _mm512_castsi512_ps(
        _mm512_maskz_alignr_epi32(kAllLanes, _mm512_castps_si512(v2), _mm512_castps_si512(v1), O));
  } else {
    return _mm512_castsi512_ps(_mm512_maskz_alignr_epi32(kAllLanes, _mm512_castps_si512(v1),
                                                         _mm512_castps_si512(v0), 16 + O));
  }
}
template <int A, bool kPlus, int... K>
inline __m512 dz_sum(__m512 v0, __m512 v1, __m512 v2, std::integer_sequence<int, K...>) {
  __m512 sum = _mm512_setzero_ps();
  // term k = K + 1: D+ pairs f[k] - f[1 - k], D- pairs f[k - 1] - f[-k]
  ((sum = _mm512_fmadd_ps(_mm512_set1_ps(static_cast<float>(staggered_coefficient<A>(K + 1))),
                          _mm512_sub_ps(shifted < kPlus ? K + 1 : K > (v0, v1, v2),
                                        shifted < kPlus ? -K : -K - 1 > (v0, v1, v2)),
                          sum)),
   ...);
  return sum;
}
#endif

struct NoPrefetch {
  void operator()(int64_t) const {}
};
template <int A, bool kPlus, class T, class Prefetch = NoPrefetch>
inline void dz_row(const T* __restrict f, T* __restrict out, int64_t len, T scale,
                   Prefetch prefetch = {}) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    const __m512 vs = _mm512_set1_ps(scale);
    __m512 v0 = _mm512_load_ps(f - 16), v1 = _mm512_load_ps(f);
    for (int64_t k = 0; k < len; k += 16) {
      prefetch(k);
      const __m512 v2 = _mm512_load_ps(f + k + 16);
      const __m512 sum = dz_sum<A, kPlus>(v0, v1, v2, std::make_integer_sequence<int, A / 2>{});
      _mm512_store_ps(out + k, _mm512_mul_ps(sum, vs));
      v0 = v1;
      v1 = v2;
    }
    return;
  }
#endif
#pragma omp simd aligned(f, out : 64)
  for (int64_t k = 0; k < len; ++k)
    out[k] = (kPlus ? dplus<A>(f + k, int64_t{1}) : dminus<A>(f + k, int64_t{1})) * scale;
}

inline void prefetch_line(const void* p) {
#if defined(__SSE__)
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
#else
  __builtin_prefetch(p);
#endif
}
// Into L2 only: the flux rows' prefetches (up to seven lines per vector of 16 points) into L1
// filled its miss buffers, and the loop then stalled on the prefetch instructions themselves
// (perf: a fifth of flux_row's samples); into L2 the flux loops ran 14-27% faster at 200^3 and
// 256^3 (bench/tti_cpu_notes.md).
inline void prefetch_line_l2(const void* p) {
#if defined(__SSE__)
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

// Gradient and flux of one row [0, nzv): u points to (i, j, 0), the coefficient rows to (i, j, 0).
// Writes those of fx, fy, fz that are wanted. In chunks of kChunk points, one loop per gradient
// component (D+x and D+y into small aligned buffers, then D+z and the flux): one loop for all
// three needs about 26 base pointers (8 planes, 8 rows, the coefficients, the outputs), which
// GCC spills, while each of these loops needs at most 12.
constexpr int64_t kChunk = 256;
template <int A, class T, bool kFx, bool kFz, bool kC = false>
inline void flux_row(const T* __restrict u, int64_t sx, int64_t sy, T rhx, T rhy, T rhz,
                     const T* __restrict nx, const T* __restrict ny, const T* __restrict nz,
                     const T* __restrict a, const T* __restrict bma, const T* __restrict s, T* fx,
                     T* fy, T* fz, int64_t nzv, int64_t nvalid = 0) {
  alignas(64) T gxs[kChunk];
  alignas(64) T gys[kChunk];
  alignas(64) T gzs[kChunk];
  for (int64_t k0 = 0; k0 < nzv; k0 += kChunk) {
    const int64_t len = std::min(kChunk, nzv - k0);
    const T* __restrict uk = u + k0;
#pragma omp simd aligned(uk, gxs : 64)
    for (int64_t k = 0; k < len; ++k) gxs[k] = dplus<A>(uk + k, sx) * rhx;
#pragma omp simd aligned(uk, gys : 64)
    for (int64_t k = 0; k < len; ++k) gys[k] = dplus<A>(uk + k, sy) * rhy;
    const int64_t ck0 = kC ? 0 : k0;
    if constexpr (kC) {
      dz_row<A, true>(uk, gzs, len, rhz);
    } else {
      // The coefficient rows come from DRAM or L3 and the flux loop below did little but wait
      // for them (perf), as did the D+x loop for the x-stencil's leading plane of u: fetch the
      // next row's (coefficient rows are contiguous) into L2 while the z loop computes.
      const T* next[7] = {nx + nzv,
                          ny + nzv,
                          a + nzv,
                          bma + nzv,
                          s + nzv,
                          u + A / 2 * sx + sy,
                          nz ? nz + nzv : nullptr};
      const int nnext = nz ? 7 : 6;
      dz_row<A, true>(uk, gzs, len, rhz, [&](int64_t k) {
        for (int q = 0; q < nnext; ++q) prefetch_line_l2(next[q] + k0 + k);
      });
    }
    const T* __restrict nxk = nx + ck0;
    const T* __restrict nyk = ny + ck0;
    const T* __restrict nzk = nz ? nz + ck0 : nullptr;
    const T* __restrict ak = a + ck0;
    const T* __restrict bk = bma + ck0;
    const T* __restrict sk = s + ck0;
    T* __restrict fxk = fx + k0;
    T* __restrict fyk = fy + k0;
    T* __restrict fzk = fz + k0;
    if (kC || nz) {
#pragma omp simd aligned(gxs, gys, gzs, nxk, nyk, nzk, ak, bk, sk, fxk, fyk, fzk : 64)
      for (int64_t k = 0; k < len; ++k) {
        T f0, f1, f2;
        const int64_t kc = kC ? 0 : k;  // constant materials: one value each
        demo_flux(gxs[k], gys[k], gzs[k], nxk[kc], nyk[kc], nzk[kc], ak[kc], bk[kc], sk[kc], f0, f1,
                  f2);
        if constexpr (kFx) fxk[k] = f0;
        fyk[k] = f1;
        if constexpr (kFz) fzk[k] = f2;
      }
    } else {
      // nz not stored (DemoProblem::derived_nz): one coefficient row fewer to wait for, at the
      // price of a square root (well conditioned for |nz| >= 1/8; nz >= 0, see
      // coefficients_to_layout).
#pragma omp simd aligned(gxs, gys, gzs, nxk, nyk, ak, bk, sk, fxk, fyk, fzk : 64)
      for (int64_t k = 0; k < len; ++k) {
        T f0, f1, f2;
        const T nzp = std::sqrt(std::max(T(0), T(1) - nxk[k] * nxk[k] - nyk[k] * nyk[k]));
        demo_flux(gxs[k], gys[k], gzs[k], nxk[k], nyk[k], nzp, ak[k], bk[k], sk[k], f0, f1, f2);
        if constexpr (kFx) fxk[k] = f0;
        fyk[k] = f1;
        if constexpr (kFz) fzk[k] = f2;
      }
    }
  }
  if constexpr (kC) {
    // The padding points [nvalid, nzv) have zero coefficients in the general layout, hence zero
    // fluxes; the constant path must not give them the grid's values.
    for (int64_t k = nvalid; k < nzv; ++k) {
      if constexpr (kFx) fx[k] = 0;
      fy[k] = 0;
      if constexpr (kFz) fz[k] = 0;
    }
  }
}

// The fluxes over the planes [b.x0, b.x1) and rows [b.y0, b.y1).
template <int A, class T>
void flux_pass(const Layout& L, const DemoGrid& g, const Coef<T>& c, const T* u, T* fx, T* fy,
               T* fz, int64_t block_rows, const DemoBox& b, DemoExchange<T>* poll) {
  const int64_t sx = L.plane, sy = L.row;
  const T rhx = T(1 / g.spacing[0]), rhy = T(1 / g.spacing[1]), rhz = T(1 / g.spacing[2]);
  const int64_t nblocks = (b.y1 - b.y0 + block_rows - 1) / block_rows;
#pragma omp parallel for schedule(dynamic)
  for (int64_t block = 0; block < nblocks; ++block) {
    const int64_t j0 = b.y0 + block * block_rows, j1 = std::min(b.y1, j0 + block_rows);
    for (int64_t i = b.x0; i < b.x1; ++i)
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t q = L.u_index(i, j, 0), p = L.c_index(i, j, 0);
        flux_row<A, T, true, true>(u + q, sx, sy, rhx, rhy, rhz, c.nx + p, c.ny + p,
                                   c.nz ? c.nz + p : nullptr, c.a + p, c.bma + p, c.s + p, fx + q,
                                   fy + q, fz + q, L.nzv);
      }
    if (poll && omp_get_thread_num() == 0) poll->progress();
  }
}

// u+ = update(u, u+, m, d, dx rhx + (dy rhy + dz rhz)) over one row; pyz: the y and z part.
template <class T>
inline void update_row(const T* __restrict u, T* __restrict un, const T* __restrict m,
                       const T* __restrict d, const T* __restrict dx, T rhx,
                       const T* __restrict pyz, int64_t nzv) {
#pragma omp simd aligned(u, un, m, d, dx, pyz : 64)
  for (int64_t k = 0; k < nzv; ++k)
    un[k] = leapfrog_update(u[k], un[k], m[k], d[k], dx[k] * rhx + pyz[k]);
}

// The divergence and update over the planes [b.x0, b.x1) and rows [b.y0, b.y1).
template <int A, class T>
void divergence_pass(const Layout& L, const DemoGrid& g, const Coef<T>& c, const T* fx, const T* fy,
                     const T* fz, const T* u, T* u_next, int64_t block_rows, const DemoBox& b,
                     DemoExchange<T>* poll) {
  const int64_t sx = L.plane, sy = L.row;
  const T rhx = T(1 / g.spacing[0]), rhy = T(1 / g.spacing[1]), rhz = T(1 / g.spacing[2]);
  const int64_t nblocks = (b.y1 - b.y0 + block_rows - 1) / block_rows;
#pragma omp parallel for schedule(dynamic)
  for (int64_t block = 0; block < nblocks; ++block) {
    const int64_t j0 = b.y0 + block * block_rows, j1 = std::min(b.y1, j0 + block_rows);
    for (int64_t i = b.x0; i < b.x1; ++i)
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t q = L.u_index(i, j, 0), p = L.c_index(i, j, 0);
        const T* __restrict fxq = fx + q;
        const T* __restrict fyq = fy + q;
        const T* __restrict fzq = fz + q;
        const T* __restrict uq = u + q;
        const T* __restrict m = c.m + p;
        const T* __restrict d = c.d + p;
        T* __restrict un = u_next + q;
        alignas(64) T dzs[kChunk];
        for (int64_t k0 = 0; k0 < L.nzv; k0 += kChunk) {
          const int64_t len = std::min(kChunk, L.nzv - k0);
          dz_row<A, false>(fzq + k0, dzs, len, rhz);
#pragma omp simd aligned(uq, un, m, d, dzs : 64)
          for (int64_t k = k0; k < k0 + len; ++k) {
            const T dx = dminus<A>(fxq + k, sx);
            const T pyz = dminus<A>(fyq + k, sy) * rhy + dzs[k - k0];
            un[k] = leapfrog_update(uq[k], un[k], m[k], d[k], dx * rhx + pyz);
          }
        }
      }
    if (poll && omp_get_thread_num() == 0) poll->progress();
  }
}

// Per-thread buffers of the fused pass for tiles of up to ty rows, rows of `row` elements
// (aligned, kZPad zeros on each side of the nzv computed points).
template <class T>
struct FusedBuffers {
  int64_t ty = 0, ext = 0, row = 0, ext_u = 0;
  AlignedArray<T> ring_x;  // [2M][ty][row]: Fx
  AlignedArray<T> fy;      // [ext][row]: Fy of the widened rows, this plane
  AlignedArray<T> fz;      // [ty][row]: Fz, this plane
  AlignedArray<T> pyz;     // [M][ty][row]: D-y Fy rhy + D-z Fz rhz
  AlignedArray<T> u;       // two steps, first stage: [2][2M][ext_u][row], u^{t+1} (fused_tile2)
  // ty rows out; with_u: the first stage of fused_tile2, whose output rows ty are the second
  // stage's rows widened by 2M - 1 on each side (ext_u = ty).
  FusedBuffers(int M, int64_t ty_, int64_t nzv, bool with_u = false)
      : ty(ty_),
        ext(ty_ + 2 * M - 1),
        row(kZPad + nzv + kZPad),
        ext_u(with_u ? ty_ : 0),
        ring_x(2 * M * ty_ * row),
        fy(ext * row),
        fz(ty_ * row),
        pyz(M * ty_ * row),
        u(2 * 2 * M * ext_u * row) {}
};

// Where the rows of a field lie for a fused stage: at(p, y) is element 0 of row y of plane p,
// and the planes p - M + 1 .. p + M (the x-stencil's reach) lie sx apart from it. Either a
// global array (plane p at base + p sx), or a ring of R >= 2M planes held twice (plane p in
// slots p mod R and p mod R + R), so that every reach is one strided run of slots.
template <class T>
struct PlaneView {
  T* base = nullptr;  // global: plane 0, row 0; ring: slot 0, row y0
  int64_t sx = 0, sy = 0, y0 = 0;
  int64_t ring = 0;  // R, 0 for a global array
  int M = 4;
  T* at(int64_t p, int64_t y) const {
    const int64_t slot = ring ? ((p - M + 1) % ring + ring) % ring + M - 1 : p;
    return base + slot * sx + (y - y0) * sy;
  }
};

// One fused step over the output rows [j0, j1) of a tile, as a stage that streams along x:
// flux(j) computes the gradient and flux of plane j on the rows widened by the y-stencil (M
// before, M - 1 after, clipped to the grid) and keeps Fx of the output rows in a ring of 2M
// planes (D-x spans them) and D-y Fy + D-z Fz in a ring of M planes; update(i) then finishes
// plane i = j - M + 1 (D-x Fx from the ring plus the stored part, and the leapfrog update).
template <int A, class T, bool kC>
class FusedStage {
 public:
  static constexpr int M = A / 2;
  FusedStage(const Layout& L, const DemoGrid& g, const Coef<T>& c, FusedBuffers<T>& B, int64_t j0,
             int64_t j1)
      : L_(L), c_(c), B_(B), j0_(j0), j1_(j1), ey0_(j0 - M) {
    rhx_ = T(1 / g.spacing[0]);
    rhy_ = T(1 / g.spacing[1]);
    rhz_ = T(1 / g.spacing[2]);
    cy0_ = std::max<int64_t>(ey0_, 0);
    cy1_ = std::min<int64_t>(j1 + M - 1, L.n[1]);
    tile_rows_ = (j1 - j0) * B.row;
    // Fx of planes before the grid, Fy of rows outside the grid: zero.
    std::memset(B.ring_x.data(), 0, sizeof(T) * static_cast<std::size_t>(2 * M * B.ty * B.row));
    std::memset(B.fy.data(), 0, sizeof(T) * static_cast<std::size_t>(B.ext * B.row));
  }

  void flux(int64_t j, const PlaneView<const T>& u) {
    const int64_t row = B_.row, nzv = L_.nzv, sx = u.sx, sy = u.sy;
    T* slot_x = B_.ring_x.data() + (j % (2 * M)) * tile_rows_;
    if (j >= L_.n[0]) {  // beyond the grid
      std::memset(slot_x, 0, sizeof(T) * static_cast<std::size_t>(tile_rows_));
      return;
    }
    const Coef<T>& c = c_;
    for (int64_t y = cy0_; y < cy1_; ++y) {
      const T* uq = u.at(j, y);
      const int64_t p = kC ? 0 : L_.c_index(j, y, 0);
      T* fyr = B_.fy.data() + (y - ey0_) * row + kZPad;
      if (y >= j0_ && y < j1_) {
        T* fxr = slot_x + (y - j0_) * row + kZPad;
        T* fzr = B_.fz.data() + (y - j0_) * row + kZPad;
        flux_row<A, T, true, true, kC>(uq, sx, sy, rhx_, rhy_, rhz_, c.nx + p, c.ny + p,
                                       c.nz ? c.nz + p : nullptr, c.a + p, c.bma + p, c.s + p, fxr,
                                       fyr, fzr, nzv, L_.n[2]);
      } else {  // only Fy is wanted
        flux_row<A, T, false, false, kC>(uq, sx, sy, rhx_, rhy_, rhz_, c.nx + p, c.ny + p,
                                         c.nz ? c.nz + p : nullptr, c.a + p, c.bma + p, c.s + p,
                                         fyr, fyr, fyr, nzv, L_.n[2]);
      }
    }
    T* pyz_slot = B_.pyz.data() + (j % M) * tile_rows_;
    const T rhy = rhy_;  // a local: a store through out might otherwise alias the member
    for (int64_t y = j0_; y < j1_; ++y) {
      const T* __restrict fyr = B_.fy.data() + (y - ey0_) * row + kZPad;
      const T* __restrict fzr = B_.fz.data() + (y - j0_) * row + kZPad;
      T* __restrict out = pyz_slot + (y - j0_) * row + kZPad;
      dz_row<A, false>(fzr, out, nzv, rhz_);  // D-z Fz rhz, then D-y Fy rhy added before it
#pragma omp simd aligned(fyr, out : 64)
      for (int64_t k = 0; k < nzv; ++k) out[k] = dminus<A>(fyr + k, row) * rhy + out[k];
    }
  }

  // u+ at plane i over the output rows: u from `u`, u- from `um`, written to out(y) (which may be
  // u-'s own row: each point is read before it is written).
  template <class Out>
  void update(int64_t i, const PlaneView<const T>& u, const PlaneView<const T>& um, Out out) {
    const int64_t row = B_.row, nzv = L_.nzv;
    const T rhx = rhx_;
    const T* pyz_slot = B_.pyz.data() + (i % M) * tile_rows_;
    const T* above[M];  // Fx of plane i + k - 1
    const T* below[M];  // Fx of plane i - k
    for (int k = 1; k <= M; ++k) {
      above[k - 1] = B_.ring_x.data() + ((i + k - 1) % (2 * M)) * tile_rows_;
      below[k - 1] = B_.ring_x.data() + ((i - k + 2 * M) % (2 * M)) * tile_rows_;
    }
    for (int64_t y = j0_; y < j1_; ++y) {
      const int64_t r = (y - j0_) * row + kZPad;
      const int64_t p = kC ? 0 : L_.c_index(i, y, 0);
      const T* up = um.at(i, y);
      T* un = out(y);
      // The next row's m, d and u- (from DRAM or L3), fetched while this row computes.
      const T* next[3] = {c_.m + p + nzv, c_.d + p + nzv, y + 1 < j1_ ? um.at(i, y + 1) : up};
      if (up == un)  // in place: every pointer of the loop restrict
        update_row<true>(u.at(i, y), nullptr, un, c_.m + p, c_.d + p, pyz_slot + r, above, below, r,
                         nzv, rhx, next);
      else
        update_row<false>(u.at(i, y), up, un, c_.m + p, c_.d + p, pyz_slot + r, above, below, r,
                          nzv, rhx, next);
      if constexpr (kC)  // padding points stay zero (zero coefficients in the general layout)
        for (int64_t k = L_.n[2]; k < nzv; ++k) un[k] = 0;
    }
  }

 private:
  // One row of the update; kInPlace: u- is read from un itself (up null).
  template <bool kInPlace>
  static void update_row(const T* __restrict uq, const T* __restrict up, T* __restrict un,
                         const T* __restrict m, const T* __restrict d, const T* __restrict pyz,
                         const T* const* above, const T* const* below, int64_t r, int64_t nzv,
                         T rhx, const T* const* next) {
    const T* __restrict a0 = above[0] + r;
    const T* __restrict b0 = below[0] + r;
    const T* __restrict a1 = above[M > 1 ? 1 : 0] + r;
    const T* __restrict b1 = below[M > 1 ? 1 : 0] + r;
    const T* __restrict a2 = above[M > 2 ? 2 : 0] + r;
    const T* __restrict b2 = below[M > 2 ? 2 : 0] + r;
    const T* __restrict a3 = above[M > 3 ? 3 : 0] + r;
    const T* __restrict b3 = below[M > 3 ? 3 : 0] + r;
    if constexpr (M <= 4) {
      constexpr int64_t kLine = 64 / sizeof(T);
      for (int64_t k0 = 0; k0 < nzv; k0 += kLine) {
        if constexpr (!kC)
          for (int q = 0; q < 3; ++q) prefetch_line(next[q] + k0);
#pragma omp simd aligned(uq, un, pyz, a0, b0, a1, b1, a2, b2, a3, b3 : 64)
        for (int64_t k = k0; k < k0 + kLine; ++k) {
          // D-x as dminus sums it, across ring planes instead of a stride.
          T dx = T(staggered_coefficient<A>(1)) * (a0[k] - b0[k]);
          if constexpr (M > 1) dx += T(staggered_coefficient<A>(2)) * (a1[k] - b1[k]);
          if constexpr (M > 2) dx += T(staggered_coefficient<A>(3)) * (a2[k] - b2[k]);
          if constexpr (M > 3) dx += T(staggered_coefficient<A>(4)) * (a3[k] - b3[k]);
          const int64_t kc = kC ? 0 : k;
          un[k] = leapfrog_update(uq[k], kInPlace ? un[k] : up[k], m[kc], d[kc], dx * rhx + pyz[k]);
        }
      }
    } else {
      const T* ab[2 * M];
      for (int k = 0; k < M; ++k) {
        ab[2 * k] = above[k] + r;
        ab[2 * k + 1] = below[k] + r;
      }
#pragma omp simd aligned(uq, un, pyz : 64)
      for (int64_t k = 0; k < nzv; ++k) {
        T dx = 0;
#pragma GCC unroll 8
        for (int kk = 0; kk < M; ++kk)
          dx += T(staggered_coefficient<A>(kk + 1)) * (ab[2 * kk][k] - ab[2 * kk + 1][k]);
        const int64_t kc = kC ? 0 : k;
        un[k] = leapfrog_update(uq[k], kInPlace ? un[k] : up[k], m[kc], d[kc], dx * rhx + pyz[k]);
      }
    }
  }

  const Layout& L_;
  const Coef<T>& c_;
  FusedBuffers<T>& B_;
  int64_t j0_, j1_, ey0_, cy0_ = 0, cy1_ = 0, tile_rows_ = 0;
  T rhx_, rhy_, rhz_;
};

template <class T>
PlaneView<const T> global_view(const Layout& L, const T* u) {
  return {u + L.u_index(0, 0, 0), L.plane, L.row, 0, 0, L.halo};
}

// One step over the tile rows [j0, j1): u+ written over u- (each point read before written).
// Planes [x0, x1) only: the flux from plane x0 - M (the first that D-x of plane x0 reads).
template <int A, class T, bool kC>
void fused_tile(const Layout& L, const DemoGrid& g, const Coef<T>& c, const T* u, T* u_next,
                int64_t j0, int64_t j1, int64_t x0, int64_t x1, FusedBuffers<T>& B) {
  constexpr int M = A / 2;
  FusedStage<A, T, kC> stage(L, g, c, B, j0, j1);
  const PlaneView<const T> uv = global_view(L, u), umv = global_view(L, u_next);
  for (int64_t j = std::max<int64_t>(x0 - M, 0); j < x1 + M - 1; ++j) {
    stage.flux(j, uv);
    const int64_t i = j - (M - 1);
    if (i >= x0) stage.update(i, uv, umv, [&](int64_t y) { return u_next + L.u_index(i, y, 0); });
  }
}

// Two steps over the tile rows [j0, j1) in one sweep along x: u^{t+1} = step(u^t, u^{t-1}) and
// u^{t+2} = step(u^{t+1}, u^t), the second stage 2M - 1 planes behind the first. Stage 1 computes
// u^{t+1} on the rows the second stage's stencils reach (2M - 1 more on each side, clipped to the
// grid; its neighbours compute those too) into a ring of 2M planes (B1.u), adds the source of step
// t at its corners, and writes the tile's rows to u1; stage 2 writes u^{t+2} to u2. The arrays
// u1, u2 are not u, um: neighbouring tiles still read u and um along the tile's borders. The
// coefficients and u^t are read from memory once for two steps (28 bytes per point and step
// instead of 44 in float32).
template <int A, class T, bool kC>
void fused_tile2(const Layout& L, const DemoGrid& g, const Coef<T>& c, const T* u, const T* um,
                 T* u1, T* u2, int64_t j0, int64_t j1, FusedBuffers<T>& B1, FusedBuffers<T>& B2,
                 const DemoSource<T>& src, T amplitude) {
  constexpr int M = A / 2;
  constexpr int64_t W = 2 * M - 1;
  const int64_t e0 = std::max<int64_t>(j0 - W, 0), e1 = std::min<int64_t>(j1 + W, L.n[1]);
  FusedStage<A, T, kC> first(L, g, c, B1, e0, e1);
  FusedStage<A, T, kC> second(L, g, c, B2, j0, j1);
  const int64_t R = 2 * M, row = L.row, ring_plane = B1.ext_u * row;
  T* ring = B1.u.data();
  std::memset(ring, 0, sizeof(T) * static_cast<std::size_t>(2 * R * ring_plane));
  // Ring rows hold the grid rows [j0 - W, j1 + W); those outside the grid stay zero.
  const PlaneView<const T> rv{ring + kZPad, ring_plane, row, j0 - W, R, M};
  auto ring_row = [&](int64_t p, int64_t y, int copy) {
    return ring + ((p % R) + copy * R) * ring_plane + (y - (j0 - W)) * row + kZPad;
  };
  const PlaneView<const T> uv = global_view(L, u), umv = global_view(L, um);
  const std::size_t row_bytes = sizeof(T) * static_cast<std::size_t>(L.nzv);
  for (int64_t j = 0; j < L.n[0] + 3 * M - 2; ++j) {
    if (j < L.n[0] + M - 1) first.flux(j, uv);
    const int64_t i1 = j - (M - 1);  // stage 1 finishes plane i1
    if (i1 >= 0 && i1 < L.n[0]) {
      first.update(i1, uv, umv, [&](int64_t y) { return ring_row(i1, y, 0); });
      // The source of step t, as run_order adds it after a step.
      for (int k = 0; k < src.corners; ++k)
        if (src.points[k][0] == i1 && src.points[k][1] >= e0 && src.points[k][1] < e1)
          ring_row(i1, src.points[k][1], 0)[src.points[k][2]] += src.scaled[k] * amplitude;
      for (int64_t y = e0; y < e1; ++y) {
        std::memcpy(ring_row(i1, y, 1), ring_row(i1, y, 0), row_bytes);
        if (y >= j0 && y < j1) std::memcpy(u1 + L.u_index(i1, y, 0), ring_row(i1, y, 0), row_bytes);
      }
    } else if (i1 >= L.n[0]) {  // planes beyond the grid: zero
      for (int copy = 0; copy < 2; ++copy)
        std::memset(ring + ((i1 % R) + copy * R) * ring_plane, 0,
                    sizeof(T) * static_cast<std::size_t>(ring_plane));
    }
    const int64_t j2 = i1 - M;  // stage 2's flux plane: its reach ends at plane i1
    if (j2 >= 0) second.flux(j2, rv);
    const int64_t i2 = j2 - (M - 1);
    if (i2 >= 0) second.update(i2, rv, uv, [&](int64_t y) { return u2 + L.u_index(i2, y, 0); });
  }
}

// Rows per fused tile (TtiDemoCpuTuning::tile_rows when set): n[1] / (k threads) for the
// smallest k >= 1 whose working set per thread (u planes of the x-stencil over the widened rows,
// the Fx ring, the y/z buffers) stays within tile_kib, so that every thread has a tile per step
// and the widened rows (2M - 1 per tile, whose gradient both neighbours compute) are few. The
// working set then lives in L3, not L2: measured on 2 Zen 4 cores at 256^3
// (bench/tti_cpu_notes.md), 128 rows (3.3 MB) ran 20% faster than 16 rows (0.5 MB, within L2),
// the saving being the redundant gradients.
int64_t fused_tile_rows(int M, int64_t nzv, int64_t ny, std::size_t elem, int threads,
                        const TtiDemoCpuTuning& tuning) {
  if (tuning.tile_rows > 0) return std::min(tuning.tile_rows, ny);
  const double budget = 1024.0 * static_cast<double>(tuning.tile_kib);
  const double row_bytes = static_cast<double>(nzv + 2 * kZPad) * static_cast<double>(elem);
  for (int64_t k = 1;; ++k) {
    const int64_t ty = (ny + k * threads - 1) / (k * threads);
    const double rows = 2.0 * M * static_cast<double>(ty + 2 * M)       // u planes of the stencil
                        + 2.0 * M * ty + (ty + 2.0 * M) + ty + M * ty;  // Fx ring, Fy, Fz, pyz
    if (rows * row_bytes <= budget || ty <= 8) return std::max<int64_t>(ty, 1);
  }
}

// One step, u+ over the planes [b.x0, b.x1) and rows [b.y0, b.y1).
template <int A, class T, bool kC>
void fused_pass(const Layout& L, const DemoGrid& g, const Coef<T>& c, const T* u, T* u_next,
                std::vector<std::unique_ptr<FusedBuffers<T>>>& buffers, int64_t tile_y,
                const DemoBox& b, DemoExchange<T>* poll) {
  const int64_t nty = (b.y1 - b.y0 + tile_y - 1) / tile_y;
#pragma omp parallel
  {
    FusedBuffers<T>& B = *buffers[static_cast<std::size_t>(omp_get_thread_num())];
#pragma omp for schedule(dynamic)
    for (int64_t ty = 0; ty < nty; ++ty) {
      fused_tile<A, T, kC>(L, g, c, u, u_next, b.y0 + ty * tile_y,
                           std::min(b.y1, b.y0 + (ty + 1) * tile_y), b.x0, b.x1, B);
      if (poll && omp_get_thread_num() == 0) poll->progress();
    }
  }
}

// Two steps (fused_tile2): u1 = u^{t+1} with the source of step t, u2 = u^{t+2} without its own.
template <int A, class T, bool kC>
void fused_pass2(const Layout& L, const DemoGrid& g, const Coef<T>& c, const T* u, const T* um,
                 T* u1, T* u2, std::vector<std::unique_ptr<FusedBuffers<T>>>& buffers,
                 std::vector<std::unique_ptr<FusedBuffers<T>>>& first, int64_t tile_y,
                 const DemoSource<T>& src, T amplitude) {
  const int64_t nty = (L.n[1] + tile_y - 1) / tile_y;
#pragma omp parallel
  {
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
#pragma omp for schedule(dynamic)
    for (int64_t ty = 0; ty < nty; ++ty)
      fused_tile2<A, T, kC>(L, g, c, u, um, u1, u2, ty * tile_y,
                            std::min(L.n[1], (ty + 1) * tile_y), *first[t], *buffers[t], src,
                            amplitude);
  }
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

// Copies between demo_api.cpp's padded layout (DemoGrid) and the backend's (Layout): the nz_vector
// points of every grid row; halos stay zero.
template <class T>
void to_layout(const DemoGrid& g, const Layout& L, const T* src, T* dst) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t i = 0; i < L.n[0]; ++i)
    for (int64_t j = 0; j < L.n[1]; ++j)
      std::memcpy(dst + L.u_index(i, j, 0), src + g.index(i, j, 0),
                  sizeof(T) * static_cast<std::size_t>(L.nzv));
}
// The coefficient arrays into one array (Layout::c_index, c_stride), in the order nx, ny, a, bma,
// s, m, d, nz; without nz where `derived_nz`, with n and s negated at the points where nz < 0
// (F = a g + (bma (n.g) + s) n is the same, exactly: only signs change), so that the kernel's
// nz = sqrt(1 - nx^2 - ny^2) is the stored one to rounding.
template <class T>
void coefficients_to_layout(const DemoGrid& g, const Layout& L, const DemoCoefficients<T>& cin,
                            bool derived_nz, T* dst) {
  const T* in[Layout::kCoefficients] = {cin.nx, cin.ny, cin.a, cin.bma,
                                        cin.s,  cin.m,  cin.d, cin.nz};
  const int64_t arrays = derived_nz ? Layout::kCoefficients - 1 : Layout::kCoefficients;
  const int64_t stride = L.c_stride(sizeof(T));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t i = 0; i < L.n[0]; ++i)
    for (int64_t j = 0; j < L.n[1]; ++j) {
      for (int64_t a = 0; a < arrays; ++a)
        std::memcpy(dst + a * stride + L.c_index(i, j, 0), in[a] + g.index(i, j, 0),
                    sizeof(T) * static_cast<std::size_t>(L.nzv));
      if (!derived_nz) continue;
      const T* nz = cin.nz + g.index(i, j, 0);
      T* row = dst + L.c_index(i, j, 0);
      for (int64_t k = 0; k < L.nzv; ++k)
        if (nz[k] < 0)
          for (int64_t a : {0, 1, 4}) row[a * stride + k] = -row[a * stride + k];
    }
}
template <class T>
void from_layout(const DemoGrid& g, const Layout& L, const T* src, T* dst) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t i = 0; i < L.n[0]; ++i)
    for (int64_t j = 0; j < L.n[1]; ++j)
      std::memcpy(dst + g.index(i, j, 0), src + L.u_index(i, j, 0),
                  sizeof(T) * static_cast<std::size_t>(L.nzv));
}

template <int A, class T>
void run_order(const DemoProblem<T>& p, DemoFields<T> fields, Timers* timers) {
  const FlushDenormals flush;  // on the OpenMP threads; the injection runs on this one
  const DemoGrid& g = p.grid;
  const DemoSource<T>& src = p.source;
  const int64_t nt = p.nt;
  const TtiDemoForm form = p.form;
  const Layout L(g);
  AlignedArray<T> ua, ub, carr;
  Coef<T> c{};
  std::array<int64_t, 8> cells{};
  std::vector<std::unique_ptr<FusedBuffers<T>>> buffers, stage1;  // per thread
  AlignedArray<T> w1, w2;  // two steps per sweep: u^{t+1}, u^{t+2}
  const bool two = form == TtiDemoForm::fused && p.tuning.sweep_steps == 2 && nt >= 2;
  // The points whose u+ is wanted (DemoProblem::update_box; two steps per sweep compute the
  // whole grid).
  constexpr int64_t M = A / 2;
  const DemoBox box = two || p.update_box.x1 == 0 ? DemoBox{0, g.n[0], 0, g.n[1]} : p.update_box;

  AlignedArray<T> fx, fy, fz;
  int64_t tile_y = 0;
  // Constant materials (every coefficient one value over the grid, as in the demo; demo_api.cpp
  // decides, fused form only): the kernel reads one value of each instead of eight arrays (32 of
  // its 44 bytes per point).
  const bool constant = p.constant && form == TtiDemoForm::fused;
  // nz computed from nx and ny (demo_api.cpp decides, where |nz| >= 1/8 over the grid): seven
  // coefficient arrays instead of eight; the flux loop waited for their rows (perf).
  const bool derived_nz = p.derived_nz && form == TtiDemoForm::fused && !constant;
  {
    auto r = Timers::region(timers, "cpu layout");
    ua = AlignedArray<T>(L.points);
    ub = AlignedArray<T>(L.points);
    to_layout(g, L, fields.u, ua.data());
    to_layout(g, L, fields.u_prev, ub.data());
    const int64_t first = g.index(0, 0, 0), stride = constant ? 1 : L.c_stride(sizeof(T));
    const DemoCoefficients<T>& cin = p.coef;
    if (constant) {
      carr = AlignedArray<T>(Layout::kCoefficients);
      const T* in[Layout::kCoefficients] = {cin.nx, cin.ny, cin.a, cin.bma,
                                            cin.s,  cin.m,  cin.d, cin.nz};
      for (int a = 0; a < Layout::kCoefficients; ++a) carr.data()[a] = in[a][first];
    } else {
      carr = AlignedArray<T>((derived_nz ? Layout::kCoefficients - 1 : Layout::kCoefficients) *
                             stride);
      coefficients_to_layout(g, L, cin, derived_nz, carr.data());
    }
    T* c0 = carr.data();
    c = {c0,
         c0 + stride,
         derived_nz ? nullptr : c0 + 7 * stride,
         c0 + 2 * stride,
         c0 + 3 * stride,
         c0 + 4 * stride,
         c0 + 5 * stride,
         c0 + 6 * stride};
    for (int k = 0; k < src.corners; ++k)
      cells[k] = L.u_index(src.points[k][0], src.points[k][1], src.points[k][2]);
    if (form == TtiDemoForm::two_pass) {
      fx = AlignedArray<T>(L.points);  // zero in the halo, which the passes never write
      fy = AlignedArray<T>(L.points);
      fz = AlignedArray<T>(L.points);
    } else {
      tile_y = fused_tile_rows(A / 2, L.nzv, box.y1 - box.y0, sizeof(T), omp_get_max_threads(),
                               p.tuning);
      buffers.resize(static_cast<std::size_t>(omp_get_max_threads()));
      stage1.resize(buffers.size());
#pragma omp parallel
      {
        // Each thread allocates (and first touches) its own buffers.
        buffers[static_cast<std::size_t>(omp_get_thread_num())] =
            std::make_unique<FusedBuffers<T>>(A / 2, tile_y, L.nzv);
        if (two)
          stage1[static_cast<std::size_t>(omp_get_thread_num())] =
              std::make_unique<FusedBuffers<T>>(A / 2, tile_y + 2 * (A - 1), L.nzv, true);
      }
      if (two) {
        w1 = AlignedArray<T>(L.points);
        w2 = AlignedArray<T>(L.points);
      }
    }
  }
  T* u = ua.data();
  T* u_prev = ub.data();  // u^{t-1} on entry of a step, u^{t+1} after it
  T* u1 = w1.data();
  T* u2 = w2.data();
  auto inject = [&](T* field, int64_t t) {
    auto r = Timers::region(timers, "source injection");
    for (int k = 0; k < src.corners; ++k) field[cells[k]] += src.scaled[k] * src.amplitudes[t];
  };
  // One step over the points of b (u+ there, the fluxes on it widened by M), u+ over u-; with
  // `poll`, thread 0 lets the ring's messages move after each tile or block.
  auto step = [&](const DemoBox& b, DemoExchange<T>* poll) {
    if (b.x0 >= b.x1 || b.y0 >= b.y1) return;
    if (form == TtiDemoForm::two_pass) {
      const DemoBox fb{std::max<int64_t>(b.x0 - M, 0), std::min(b.x1 + M - 1, g.n[0]),
                       std::max<int64_t>(b.y0 - M, 0), std::min(b.y1 + M - 1, g.n[1])};
      {
        auto r = Timers::region(timers, "flux pass");
        flux_pass<A>(L, g, c, u, fx.data(), fy.data(), fz.data(), p.tuning.block_rows, fb, poll);
      }
      auto r = Timers::region(timers, "divergence pass");
      divergence_pass<A>(L, g, c, fx.data(), fy.data(), fz.data(), u, u_prev, p.tuning.block_rows,
                         b, poll);
    } else {
      auto r = Timers::region(timers, "fused flux + divergence");
      if (constant)
        fused_pass<A, T, true>(L, g, c, u, u_prev, buffers, tile_y, b, poll);
      else
        fused_pass<A, T, false>(L, g, c, u, u_prev, buffers, tile_y, b, poll);
    }
  };
  // Under MPI: the window's ghost ring from the neighbours, started after each sweep but the
  // last and finished before the next sweep reads it (one step per sweep: after its interior).
  bool in_flight = false;
  auto start_exchange = [&](int64_t done) {
    if (!p.exchange || done >= nt) return;
    auto r = Timers::region(timers, "halo exchange");
    const int64_t first = L.u_index(0, 0, 0);
    p.exchange->start({u + first, L.plane, L.row}, {u_prev + first, L.plane, L.row},
                      poll_cancellation());
    in_flight = true;
  };
  // Under MPI the ranks vote on stopping with the exchange (kernels.hpp), and stop together.
  auto finish_exchange = [&](int64_t t) {
    if (!in_flight) return;
    auto r = Timers::region(timers, "halo exchange");
    in_flight = false;
    if (p.exchange->finish()) throw_cancelled("tti_demo", t, nt);
  };
  const DemoBox& inner = p.interior_box;
  const bool overlap = inner.x0 < inner.x1 && inner.y0 < inner.y1;
  for (int64_t t = 0; t < nt;) {
    if (!p.exchange) throw_if_cancelled("tti_demo", t, nt);  // the arrays are freed on the way out
    if (two && t + 1 < nt) {
      finish_exchange(t);
      {
        auto r = Timers::region(timers, "fused flux + divergence");
        if (constant)
          fused_pass2<A, T, true>(L, g, c, u, u_prev, u1, u2, buffers, stage1, tile_y, src,
                                  src.amplitudes[t]);
        else
          fused_pass2<A, T, false>(L, g, c, u, u_prev, u1, u2, buffers, stage1, tile_y, src,
                                   src.amplitudes[t]);
      }
      inject(u2, t + 1);
      // u^{t+2}, u^{t+1} are the new pair; the old pair's arrays take the next sweep's output.
      std::swap(u1, u_prev);
      std::swap(u2, u);
      t += 2;
      start_exchange(t);
      continue;
    }
    if (in_flight && overlap) {
      // The interior while the ring travels, then the shell around it.
      step(inner, p.exchange);
      finish_exchange(t);
      step({box.x0, inner.x0, box.y0, box.y1}, nullptr);
      step({inner.x1, box.x1, box.y0, box.y1}, nullptr);
      step({inner.x0, inner.x1, box.y0, inner.y0}, nullptr);
      step({inner.x0, inner.x1, inner.y1, box.y1}, nullptr);
    } else {
      finish_exchange(t);
      step(box, nullptr);
    }
    inject(u_prev, t);
    std::swap(u, u_prev);
    t += 1;
    start_exchange(t);
  }
  {
    auto r = Timers::region(timers, "cpu layout");
    from_layout(g, L, u, fields.u);
    from_layout(g, L, u_prev, fields.u_prev);
  }
}

}  // namespace

template <class T>
SCIPROXY_TTI_DEMO_FORWARD(T) {
  with_value<SpaceOrders>(p.grid.order, "space_order",
                          [&](auto a) { run_order<a.value>(p, fields, ctx.timers); });
}

template SCIPROXY_TTI_DEMO_FORWARD(float);
template SCIPROXY_TTI_DEMO_FORWARD(double);

}  // namespace sciproxy::tti::kernels::cpu
