// Per-cell arithmetic of the scalar propagator and of its adjoint, shared by cpu_*.cpp and
// cuda_*.cu (SCIPROXY_HD), so that the CPU tests exercise the arithmetic the GPU runs.
//
// Stencils (Fornberg 1988): central first derivative D1 and second derivative D2 of accuracy
// A = 2, 4, 6, 8, radius A/2; e.g. A = 8: D2 = (-205/72, 8/5, -1/5, 8/315, -1/560) / dx^2.
// The C-PML terms of one dimension (Pasalic and McGarry 2010, as Deepwave discretises them):
//   forward   tmp = (1+b) D2 u + b' D1 u + D1(a psi)
//             W  += (1+b) tmp + a zeta;    psi' = b D1 u + a psi;    zeta' = b tmp + a zeta
//   adjoint   with g = v^2 dt^2 lambda (lambda: adjoint of u^{t+1}) and, per cell,
//             tbar = (1+b) g + b zetabar',   d1bar = b' tbar + b psibar':
//             ubar += D2((1+b) tbar) - D1(d1bar)      (D2 is symmetric, D1 antisymmetric)
//             psibar = a (psibar' - D1 tbar),   zetabar = a (g + zetabar')
// In the interior (a = b = b' = 0) these reduce to W += D2 u and ubar += D2 g.
// Born (kernels.hpp): the scattered field uses the same terms; the background adjoint uses
// g = v^2 dt^2 lambda + 2 v scatter dt^2 lambda_sc (adjoint_g<true>).
#pragma once

#include <cstdint>

#include "core/hd.hpp"

namespace sciproxy::wave {

// Coefficient k (0 .. A/2) of the first (k >= 1) and second derivative stencils.
template <int A>
SCIPROXY_HD constexpr double d1_coefficient(int k) {
  static_assert(A == 2 || A == 4 || A == 6 || A == 8, "accuracy must be 2, 4, 6 or 8");
  if constexpr (A == 2) return k == 1 ? 1.0 / 2 : 0.0;
  if constexpr (A == 4) return k == 1 ? 2.0 / 3 : k == 2 ? -1.0 / 12 : 0.0;
  if constexpr (A == 6) return k == 1 ? 3.0 / 4 : k == 2 ? -3.0 / 20 : k == 3 ? 1.0 / 60 : 0.0;
  if constexpr (A == 8)
    return k == 1 ? 4.0 / 5 : k == 2 ? -1.0 / 5 : k == 3 ? 4.0 / 105 : k == 4 ? -1.0 / 280 : 0.0;
  return 0.0;
}

template <int A>
SCIPROXY_HD constexpr double d2_coefficient(int k) {
  if constexpr (A == 2) return k == 0 ? -2.0 : k == 1 ? 1.0 : 0.0;
  if constexpr (A == 4) return k == 0 ? -5.0 / 2 : k == 1 ? 4.0 / 3 : k == 2 ? -1.0 / 12 : 0.0;
  if constexpr (A == 6)
    return k == 0 ? -49.0 / 18 : k == 1 ? 3.0 / 2 : k == 2 ? -3.0 / 20 : k == 3 ? 1.0 / 90 : 0.0;
  if constexpr (A == 8)
    return k == 0   ? -205.0 / 72
           : k == 1 ? 8.0 / 5
           : k == 2 ? -1.0 / 5
           : k == 3 ? 8.0 / 315
           : k == 4 ? -1.0 / 560
                    : 0.0;
  return 0.0;
}

// D1 f at flat index i along a dimension of stride s; rdx = 1 / dx.
template <int A, class T>
SCIPROXY_HD T diff1(const T* f, std::int64_t i, std::int64_t s, T rdx) {
  T sum = 0;
  SCIPROXY_UNROLL
  for (int k = 1; k <= A / 2; ++k) sum += T(d1_coefficient<A>(k)) * (f[i + k * s] - f[i - k * s]);
  return sum * rdx;
}

// D2 f at flat index i along a dimension of stride s; rdx2 = 1 / dx^2.
template <int A, class T>
SCIPROXY_HD T diff2(const T* f, std::int64_t i, std::int64_t s, T rdx2) {
  T sum = T(d2_coefficient<A>(0)) * f[i];
  SCIPROXY_UNROLL
  for (int k = 1; k <= A / 2; ++k) sum += T(d2_coefficient<A>(k)) * (f[i + k * s] + f[i - k * s]);
  return sum * rdx2;
}

// Profiles of one dimension, indexed by the cell's coordinate along it.
template <class T>
struct PmlProfile {
  const T* a;
  const T* b;
  const T* dbdx;
};

// Forward C-PML term of one dimension at cell i (coordinate x along the dimension): returns its
// contribution to W, writes psi_next[i] and updates zeta[i] in place (only cell i reads it).
template <int A, class T>
SCIPROXY_HD T pml_forward(const T* u, const T* psi, T* psi_next, T* zeta, std::int64_t i,
                          std::int64_t s, std::int64_t x, PmlProfile<T> p, T rdx, T rdx2) {
  const T du = diff1<A>(u, i, s, rdx);
  T dapsi = 0;
  SCIPROXY_UNROLL
  for (int k = 1; k <= A / 2; ++k)
    dapsi += T(d1_coefficient<A>(k)) * (p.a[x + k] * psi[i + k * s] - p.a[x - k] * psi[i - k * s]);
  const T tmp = (1 + p.b[x]) * diff2<A>(u, i, s, rdx2) + p.dbdx[x] * du + dapsi * rdx;
  const T w = (1 + p.b[x]) * tmp + p.a[x] * zeta[i];
  psi_next[i] = p.b[x] * du + p.a[x] * psi[i];
  zeta[i] = p.b[x] * tmp + p.a[x] * zeta[i];
  return w;
}

// The adjoint fields a backward step reads at the cells around the one it updates.
template <class T>
struct AdjointInputs {
  const T* lambda;    // adjoint of u^{t+1}
  const T* v2dt2;     // v^2 dt^2 (of this shot's model)
  const T* psi_bar;   // adjoint of psi^{t+1} of this dimension
  const T* zeta_bar;  // adjoint of zeta^{t+1} of this dimension
  // Born background adjoint (BORN = true) only: g = v^2 dt^2 lambda + coupling * lambda_sc, with
  // coupling = 2 v scatter dt^2 and lambda_sc the adjoint of u_sc^{t+1} (kernels.hpp).
  const T* coupling = nullptr;
  const T* lambda_sc = nullptr;
};

// g at cell j: the adjoint of W there, times what multiplies W in the step(s).
template <bool BORN, class T>
SCIPROXY_HD T adjoint_g(const AdjointInputs<T>& in, std::int64_t j) {
  if constexpr (BORN)
    return in.v2dt2[j] * in.lambda[j] + in.coupling[j] * in.lambda_sc[j];
  else
    return in.v2dt2[j] * in.lambda[j];
}

// tbar = (1+b) g + b zetabar' at cell j (coordinate xj).
template <bool BORN = false, class T>
SCIPROXY_HD T pml_tbar(const AdjointInputs<T>& in, PmlProfile<T> p, std::int64_t j,
                       std::int64_t xj) {
  return (1 + p.b[xj]) * adjoint_g<BORN>(in, j) + p.b[xj] * in.zeta_bar[j];
}

// Adjoint C-PML term of one dimension at cell i: returns its contribution to the adjoint of u^t
// and writes the adjoints of psi^t and zeta^t at i (into other buffers than in.psi_bar and
// in.zeta_bar, which the neighbours still read).
template <int A, bool BORN = false, class T>
SCIPROXY_HD T pml_adjoint(const AdjointInputs<T>& in, T* psi_bar_out, T* zeta_bar_out,
                          std::int64_t i, std::int64_t s, std::int64_t x, PmlProfile<T> p, T rdx,
                          T rdx2) {
  auto d1bar = [&](std::int64_t j, std::int64_t xj) {
    return p.dbdx[xj] * pml_tbar<BORN>(in, p, j, xj) + p.b[xj] * in.psi_bar[j];
  };
  T second = T(d2_coefficient<A>(0)) * (1 + p.b[x]) * pml_tbar<BORN>(in, p, i, x);
  T first = 0, dtbar = 0;
  SCIPROXY_UNROLL
  for (int k = 1; k <= A / 2; ++k) {
    const std::int64_t up = i + k * s, down = i - k * s;
    const T t_up = pml_tbar<BORN>(in, p, up, x + k), t_down = pml_tbar<BORN>(in, p, down, x - k);
    second += T(d2_coefficient<A>(k)) * ((1 + p.b[x + k]) * t_up + (1 + p.b[x - k]) * t_down);
    first += T(d1_coefficient<A>(k)) * (d1bar(up, x + k) - d1bar(down, x - k));
    dtbar += T(d1_coefficient<A>(k)) * (t_up - t_down);
  }
  psi_bar_out[i] = p.a[x] * (in.psi_bar[i] - dtbar * rdx);
  zeta_bar_out[i] = p.a[x] * (adjoint_g<BORN>(in, i) + in.zeta_bar[i]);
  return second * rdx2 - first * rdx;
}

}  // namespace sciproxy::wave
