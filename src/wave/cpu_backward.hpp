// Scalar wave propagator, CPU backend: the adjoint rows and the adjoint driver (plain and Born),
// the exact transpose of cpu_forward.hpp's step (math.hpp): with g = v^2 dt^2 lambda,
//   tbar = (1+b) g + b zetabar',  d1bar = b' tbar + b psibar',
//   ubar = 2 lambda - ubar_prev' + sum_x [D2((1+b) tbar) - D1(d1bar)],
//   psibar = a (psibar' - D1 tbar),  zetabar = a (g + zetabar').
// See cpu_blocking.hpp for the backend as a whole.
#pragma once

#include "cpu_rows.hpp"

namespace sciproxy::wave::kernels::cpu::detail {
namespace {

using std::int64_t;
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
    sum +=
        T(d2_coefficient<A>(k)) * (adjoint_g<BORN>(in, i + k * s) + adjoint_g<BORN>(in, i - k * s));
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
    if constexpr (kPmlLast)
      derive(j + S::W, S::first(j1 + H - j - S::W), tw.next, ow.next, dw.next);
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
          ((second +=
            T(d2_coefficient<A>(K + 1)) * (ow.template up<K + 1>() + ow.template down<K + 1>()),
            first +=
            T(d1_coefficient<A>(K + 1)) * (dw.template up<K + 1>() - dw.template down<K + 1>()),
            dtbar +=
            T(d1_coefficient<A>(K + 1)) * (tw.template up<K + 1>() - tw.template down<K + 1>())),
           ...);
        }
        (std::make_integer_sequence<int, H>{});
        const V pa = S::template load<FULL>(last.a + j, m);
        S::template store<FULL>(pout[D] + j,
                                pa * (S::template load<FULL>(pbar[D] + j, m) - dtbar * rdx), m);
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
                second +=
                    T(d2_coefficient<A>(k)) * ((1 + ob[D][H + k]) * tu + (1 + ob[D][H - k]) * td);
                first += T(d1_coefficient<A>(k)) * (d1bar(k * s, k, tu) - d1bar(-k * s, -k, td));
                dtbar += T(d1_coefficient<A>(k)) * (tu - td);
              }(),
              ...);
        }
        (std::make_integer_sequence<int, H>{});
        S::template store<FULL>(pout[D] + j,
                                oa[D] * (S::template load<FULL>(pbar[D] + j, m) - dtbar * rdx), m);
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
  const Blocks<NDIM, T> blocks(g, p.nshots, p.cpu);
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

  const int64_t batch =
      shots_per_batch(g, p.cpu, nshots,
                      (2 * nfields + (p.v_batched ? 1 + nfields - 1 : 0) + (interval > 0 ? 2 : 0)) *
                          P * int64_t(sizeof(T)),
                      4 * nfields * int64_t(sizeof(T)));
  RegionStop stop;  // as in cpu_forward.hpp
  auto run_shots = [&](int64_t first, int64_t last, bool shared) {
    std::array<T*, 2> lambda{set[0].u, set[1].u};
    std::array<T*, 2> other{set[0].u_prev, set[1].u_prev};  // adjoint of the u^t slot, times sign
    T sign = 1;
    auto psi_a = psi_cur, psi_b = psi_nxt, zeta_a = zeta_cur, zeta_b = zeta_nxt;
    std::array<T*, 2> g_ab{g_fields[0].get(), g_fields[1].get()};
    for (int64_t t = nt - 1; t >= 0; --t) {
      if (shared)
        stop.publish(t, nt - 1 - t);
      else if (stop.poll(nt - 1 - t))
        break;
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
      if (shared && stop.agreed(t)) break;
    }
  };
#pragma omp parallel
  over_shots(nshots, batch, run_shots);
  stop.throw_if_stopped(BORN ? "scalar_born_gradient (backward)" : "scalar_gradient (backward)",
                        nt);
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
}  // namespace
}  // namespace sciproxy::wave::kernels::cpu::detail
