// Scalar wave propagator, CPU backend: the forward rows and the forward driver (plain and Born),
// the scheme of kernels.hpp with q = a psi held for the C-PML auxiliaries:
//   u^{t+1} = v^2 dt^2 W + 2 u^t - u^{t-1},   W = sum_x (1 + b_x) tmp_x + a_x zeta_x,
//   tmp_x = (1 + b_x) D2_x u + b'_x D1_x u + D1_x q_x,   psi_x' = b_x D1_x u + q_x
// (math.hpp). See cpu_blocking.hpp for the backend as a whole.
#pragma once

#include "cpu_plan.hpp"
#include "cpu_rows.hpp"

namespace sciproxy::wave::kernels::cpu::detail {
namespace {

using std::int64_t;
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
  const T* u;       // u^t
  T* u_next;        // in: u^{t-1}, out: u^{t+1}
  const T* v;       // null in the AVX-512 rows without stored steps
  const T* v2dt2;   // v^2 dt^2 (the AVX-512 rows), or null
  const T* psi[3];  // q^t = a psi^t
  T* psi_next[3];   // q^{t+1}, or psi^{t+1} at the last step
  T* zeta[3];       // in place
  T* stored;        // this step's slice, or null
  T dt2;
  const T* psi_scale[3];  // per coordinate of each dimension: a, or ones at the last step
  int64_t prefetch_rows;  // ScalarCpuTuning::prefetch_rows
};

// pml_forward (math.hpp) on q = a psi, storing psi_scale * psi^{t+1} (see ForwardShot).
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

// Born: the scattered field of the same shot and the scatter (see kernels.hpp).
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
// The stencils of the forward with 1/dx and 1/dx^2 in their weights. Outside the PML of a cell,
// the Laplacian is one sum whose centre weight is that of all those dimensions: a multiply per
// neighbour pair and one for the centre (diff2 per dimension, scaled and summed, took 2 + NDIM
// more: 11.4 against 9.9 cycles per 16 cells in a micro-benchmark of the 2-D accuracy-4 loop; the
// whole forward's gain was within the machine's noise). This rounds differently from the
// reference (see the tolerance of tests/wave/test_scalar_cpu.cpp). A centre weight is minus twice
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
  const T* __restrict v = STORE ? f.v + base : nullptr;  // null without stored steps
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
  // waited on them): fetch those of the row f.prefetch_rows further on.
  const int64_t rows_ahead = f.prefetch_rows;
  auto strip = [&](int64_t from, int64_t to) {
    if constexpr (NDIM >= 2) {
      const int64_t ahead = rows_ahead * stride[NDIM - 2];
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
  void aux_in(const Geometry<NDIM, T>& g, int d, int64_t count, const T* psi, const T* zeta, T* q,
              T* ze, int64_t plain_lo, int64_t plain_hi) const {
    const T* a = g.prof[d].a;
    outside(g, d, count, plain_lo, plain_hi, [&](int64_t r, int64_t j0, int64_t j1, int64_t x) {
      for (int64_t j = j0; j < j1; ++j) {
        q[r * pitch + j] = a[x < 0 ? j : x] * psi[r * nl + j];
        ze[r * pitch + j] = zeta[r * nl + j];
      }
    });
  }
  // The C-PML auxiliaries of dimension d back to the caller's layout, in the cells outside
  // [keep_lo, keep_hi) along d only. Inside, the caller's fields hold zeros (the interior box of
  // pml_interior, kernels.hpp) and the steps never write the copies there, so copying would only
  // read back zeros: at 256^3 + PML most of six grids, much of them pages that were never touched.
  void aux_out(const Geometry<NDIM, T>& g, int d, int64_t count, const T* q, const T* ze, T* psi,
               T* zeta, int64_t keep_lo, int64_t keep_hi) const {
    outside(g, d, count, keep_lo, keep_hi, [&](int64_t r, int64_t j0, int64_t j1, int64_t) {
      std::copy(q + r * pitch + j0, q + r * pitch + j1, psi + r * nl + j0);
      std::copy(ze + r * pitch + j0, ze + r * pitch + j1, zeta + r * nl + j0);
    });
  }
  // f(r, j0, j1, x) for the runs [j0, j1) of cells of row r (of `count` grids) that lie outside
  // [lo, hi) along dimension d, in parallel over the rows: x is the row's coordinate along d, or
  // -1 when d is the rows' own dimension (the runs are then the row's two ends).
  template <class F>
  void outside(const Geometry<NDIM, T>& g, int d, int64_t count, int64_t lo, int64_t hi,
               F&& f) const {
    constexpr int L = NDIM - 1;
    int64_t row_stride = 1;  // rows per step of coordinate d (d < L)
    for (int e = d + 1; e < L; ++e) row_stride *= g.n[e];
    lo = std::clamp<int64_t>(lo, 0, g.n[d]);
    hi = std::clamp<int64_t>(hi, lo, g.n[d]);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < count * rows; ++r) {
      if (d == L) {
        f(r, int64_t(0), lo, int64_t(-1));
        f(r, hi, nl, int64_t(-1));
      } else {
        const int64_t x = (r % rows) / row_stride % g.n[d];
        if (x < lo || x >= hi) f(r, int64_t(0), nl, x);
      }
    }
  }
};

template <bool BORN>
constexpr int nfields_of = BORN ? 2 : 1;  // the background field, and Born's scattered one

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
  // Steps per sweep (temporal blocking) of the shots that threads run alone and of those that
  // share the threads (3-D: a batch of one shot, as its fields exceed the batch budget).
  const int64_t threads = omp_get_max_threads();
  const int64_t plane_cells = NDIM == 3 ? g.n[1] * g.n[2] : 0;
  const int64_t sweep_alone =
      sweep_steps(NDIM, A / 2, plane_cells, int64_t(sizeof(T)) * nfields_of<BORN>, threads, p.cpu);
  const int64_t sweep_shared =
      NDIM == 3
          ? sweep_steps(NDIM, A / 2, plane_cells, int64_t(sizeof(T)) * nfields_of<BORN>, 1, p.cpu)
          : 1;
  const Blocks<NDIM, T> blocks(g, p.nshots, p.cpu,
                               NDIM == 3 && std::max(sweep_alone, sweep_shared) > 1);
  const PointLists src(caller, blocks, p.nshots, p.nsources, p.source_cells);
  const PointLists rec(caller, blocks, p.nshots, p.nreceivers, p.receiver_cells);
  const PointLists bgrec(caller, blocks, p.nshots, BORN ? p.nbg_receivers : 0, p.bg_receiver_cells);
  const int64_t P = g.points, nshots = p.nshots, nt = p.nt;
  const int64_t interval = stored != nullptr ? p.store_interval : 0;
  constexpr int nfields = nfields_of<BORN>;
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
  // place), and the model: v^2 dt^2 for the AVX-512 rows, v where rows read it (and scatter).
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
  // The rows read v itself without AVX-512, in Born, and where steps are stored (2 v dt^2 W).
  const bool rows_read_v = !kPadRows || interval > 0;
  Copy v_copy, v2dt2_copy, scatter_copy;
  if (rows_read_v) {
    v_copy = padded.allocate(nmodels);
    padded.copy_in(p.v, v_copy.data, nmodels);
  }
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
      g, p.cpu, nshots,
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
                     rows_read_v ? v_copy.data + (p.v_batched ? off : 0) : nullptr,
                     kPadRows ? v2dt2_copy.data + (p.v_batched ? off : 0) : nullptr,
                     {},
                     {},
                     {},
                     store ? stored + ((t / interval) * nshots + shot) * caller.points : nullptr,
                     p.dt2,
                     {},
                     p.cpu.prefetch_rows};
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
                         forward_row_simd<NDIM, A, OUTER, true>(g, stencils, f, base, x, j0,
                                                                segments, j1);
                       else
                         forward_row_simd<NDIM, A, OUTER, false>(g, stencils, f, base, x, j0,
                                                                 segments, j1);
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
  // step, or per wavefront of a sweep), else the calling thread runs them alone.
  //
  // Temporal blocking: one sweep over the grid runs `steps` steps, so that each sweep streams the
  // fields from memory once instead of once per step. The blocks of step t + l trail those of step
  // t + l - 1 by the blocks (2-D) or planes (3-D) that the stencil reaches, so the rows a step
  // reads are still in cache from the step before. The two buffers of u (and of q) suffice: row r
  // of step t + l overwrites row r of u^{t+l-1}, which only rows up to r + h of step t + l - 1
  // read, and those have run; zeta is read and written at its own cell only. Sources and
  // receivers go with their block as before, so the results are those of one step at a time.
  // - 2-D, shots run alone: the blocks of rows, in order (the shared 2-D steps are too short for a
  //   barrier per wavefront).
  // - 3-D: every thread keeps its tiles of rows through the sweep; wavefront i is plane i - l lag
  //   of step t0 + l for every l, shared by the threads in one `omp for` whose barrier orders the
  //   wavefronts. lag = h + 1: plane x of step t + l reads planes up to x + h of step t + l - 1,
  //   which ran at an earlier wavefront, and no item of a wavefront reads a plane that another
  //   item of it writes (the next plane of the step before lies h + 1 planes on).
  // Cancellation (core/cancel_region.hpp): thread 0 polls between its sweeps; shared sweeps agree
  // on the decision through the barrier of their `omp for`, threads alone leave at their next
  // sweep.
  RegionStop stop;
  auto run_shots = [&](int64_t first, int64_t last, bool shared) {
    const int64_t nblocks = blocks.nblocks;
    const int64_t steps = shared ? sweep_shared : sweep_alone;
    if (NDIM == 1 || steps <= 1 || (NDIM == 2 && shared)) {
      for (int64_t t = 0; t < nt; ++t) {
        if (shared)
          stop.publish(t, t);
        else if (stop.poll(t))
          break;
        for_items(first * nblocks, last * nblocks, shared, [&](int64_t w) { step_item(t, w); });
        if (shared && stop.agreed(t)) break;
      }
      return;
    }
    if constexpr (NDIM == 2) {
      const int64_t lag = (A / 2 + blocks.tile - 1) / blocks.tile;
      for (int64_t shot = first; shot < last; ++shot)
        for (int64_t t0 = 0; t0 < nt; t0 += steps) {
          if (stop.poll(t0)) return;
          const int64_t depth = std::min(steps, nt - t0);
          for (int64_t i = 0; i < nblocks + (depth - 1) * lag; ++i)
            for (int64_t l = 0; l < depth; ++l) {
              const int64_t block = i - l * lag;
              if (block >= 0 && block < nblocks) step_item(t0 + l, shot * nblocks + block);
            }
        }
    } else if constexpr (NDIM == 3) {
      const int64_t planes = blocks.planes, tiles = nblocks / planes, lag = A / 2 + 1;
      for (int64_t t0 = 0, sweep = 0; t0 < nt; t0 += steps, ++sweep) {
        if (shared)
          stop.publish(sweep, t0);
        else if (stop.poll(t0))
          break;
        const int64_t depth = std::min(steps, nt - t0);
        // Items of a wavefront: (shot, tile, l), so that a static schedule gives each thread
        // the same tiles in every wavefront.
        const int64_t per_shot = tiles * depth;
        for (int64_t i = 0; i < planes + (depth - 1) * lag; ++i)
          for_items(0, (last - first) * per_shot, shared, [&](int64_t k) {
            const int64_t shot = first + k / per_shot, tile = k % per_shot / depth, l = k % depth;
            const int64_t plane = i - l * lag;
            if (plane >= 0 && plane < planes)
              step_item(t0 + l, shot * nblocks + tile * planes + plane);
          });
        if (shared && stop.agreed(sweep)) break;
      }
    }
  };
#pragma omp parallel
  over_shots(nshots, batch, run_shots);
  stop.throw_if_stopped(BORN ? "scalar_born" : "scalar", nt);  // the copies are freed on the way
  // After nt steps (the buffers alternate every step) u^nt is in copy nt % 2, u^{nt-1} in the
  // other, and psi^nt in psi copy nt % 2.
  for (int k = 0; k < nfields; ++k) {
    padded.copy_out(u_copy[k][nt % 2].data, set[k].u, nshots);
    padded.copy_out(u_copy[k][1 - nt % 2].data, set[k].u_prev, nshots);
    // The steps write the auxiliaries of d only outside [flo, fhi) along d, and along the
    // contiguous dimension in PML strips rounded out by less than a vector; [lo, hi) lies within
    // [flo, fhi).
    for (int d = 0; d < NDIM; ++d) {
      const int64_t margin = d == NDIM - 1 ? kVector<T> : 0;
      padded.aux_out(g, d, nshots, psi_copy[k][d][nt % 2].data, zeta_copy[k][d].data, set[k].psi[d],
                     set[k].zeta[d], g.lo[d] + margin, g.hi[d] - margin);
    }
  }
}
}  // namespace
}  // namespace sciproxy::wave::kernels::cpu::detail
