// Per-point arithmetic of the tti family, shared by the cpu and cuda backends of both operators
// (SCIPROXY_HD: host and device), so that the CPU tests exercise what the GPU runs; the
// reference backends take the coefficients from here too. docs/kernels/tti.md.
//
// Staggered first derivatives of order A = 4, 8, 12, 16 (radius M = A/2), coefficients c_k from
// the Taylor conditions sum_k c_k (2k-1)^(2j+1) / 2^(2j) = delta_j0 (Fornberg 1988); A = 8 gives
// WaveFD's 1225/1024, -245/3072, 49/5120, -5/7168. On a grid of spacing h:
//   D+ f[i] = sum_{k=1..M} c_k (f[i+k] - f[i-k+1]) / h     (at i + 1/2; offsets -(M-1) .. +M)
//   D- g[i] = sum_{k=1..M} c_k (g[i+k-1] - g[i-k]) / h     (at i;       offsets -M .. M-1)
// D- = -(D+)^T on a grid whose fields vanish in a halo of M cells, so D- . (C D+) is symmetric
// (negative semi-definite for C symmetric positive semi-definite): the operators are
// self-adjoint, and their adjoint is the same stencil.
#pragma once

#include "core/hd.hpp"

namespace sciproxy::tti {

// Coefficient c_k (k = 1 .. A/2) of the staggered first derivative of order A.
template <int A>
SCIPROXY_HD constexpr double staggered_coefficient(int k) {
  static_assert(A == 4 || A == 8 || A == 12 || A == 16, "space order must be 4, 8, 12 or 16");
  if constexpr (A == 4) {
    constexpr double c[] = {9.0 / 8, -1.0 / 24};
    return c[k - 1];
  } else if constexpr (A == 8) {
    constexpr double c[] = {1225.0 / 1024, -245.0 / 3072, 49.0 / 5120, -5.0 / 7168};
    return c[k - 1];
  } else if constexpr (A == 12) {
    constexpr double c[] = {160083.0 / 131072, -12705.0 / 131072, 22869.0 / 1310720,
                            -5445.0 / 1835008, 847.0 / 2359296,   -63.0 / 2883584};
    return c[k - 1];
  } else {
    constexpr double c[] = {41409225.0 / 33554432,  -3578575.0 / 33554432, 3864861.0 / 167772160,
                            -1254825.0 / 234881024, 325325.0 / 301989888,  -61425.0 / 369098752,
                            7425.0 / 436207616,     -143.0 / 167772160};
    return c[k - 1];
  }
}

// D+ along a line through f with stride s (in elements); rh = 1 / h.
template <int A, class T>
SCIPROXY_HD T staggered_forward(const T* f, long s, T rh) {
  T sum = 0;
  SCIPROXY_UNROLL
  for (int k = 1; k <= A / 2; ++k)
    sum += T(staggered_coefficient<A>(k)) * (f[k * s] - f[(1 - k) * s]);
  return sum * rh;
}

// D- along a line through g with stride s.
template <int A, class T>
SCIPROXY_HD T staggered_backward(const T* g, long s, T rh) {
  T sum = 0;
  SCIPROXY_UNROLL
  for (int k = 1; k <= A / 2; ++k)
    sum += T(staggered_coefficient<A>(k)) * (g[(k - 1) * s] - g[-k * s]);
  return sum * rh;
}

// ---------------------------------------------------------------------------------------------
// The coupled P/M system.

// Fluxes of the coupled P/M system of Bube et al. (2016) at one point (kernels.hpp), from the
// staggered gradients gp = D+ P and gm = D+ M and the precomputed coefficients:
//   fp = e gp + n (a (n.gp) + c (n.gm)),   fm = g gm + n (c (n.gp) + mm (n.gm)).
template <class T>
SCIPROXY_HD void coupled_fluxes(const T (&gp)[3], const T (&gm)[3], T e, T g, T a, T c, T mm,
                                const T (&n)[3], T (&fp)[3], T (&fm)[3]) {
  const T n_gp = n[0] * gp[0] + n[1] * gp[1] + n[2] * gp[2];
  const T n_gm = n[0] * gm[0] + n[1] * gm[1] + n[2] * gm[2];
  const T along_p = a * n_gp + c * n_gm;
  const T along_m = c * n_gp + mm * n_gm;
  SCIPROXY_UNROLL
  for (int d = 0; d < 3; ++d) {
    fp[d] = e * gp[d] + n[d] * along_p;
    fm[d] = g * gm[d] + n[d] * along_m;
  }
}

// ---------------------------------------------------------------------------------------------
// The workshop operator: the equations and the coefficients a, bma, s, m of kernels.hpp
// (docs/kernels/tti.md, "The workshop operator").
//
// Flops per point as written (each add, sub, mul = 1), for M = A/2 terms per derivative:
//   one staggered derivative: M subs + M muls + (M - 1) adds + 1 mul by 1/h   = 3M
//   flux pass:       3 derivatives + demo_flux (5 for n.g, 2, 3 x 3)          = 9M + 16
//   divergence pass: 3 derivatives + 2 adds + update (2 for 2-d and d-1, 3 muls, 2 adds) = 9M + 9

// g = (D+x u, D+y u, D+z u) at the point u points to; sx, sy: strides of x and y (z is 1).
template <int A, class T>
SCIPROXY_HD void staggered_gradient(const T* u, long sx, long sy, T rhx, T rhy, T rhz, T& gx, T& gy,
                                    T& gz) {
  gx = staggered_forward<A>(u, sx, rhx);
  gy = staggered_forward<A>(u, sy, rhy);
  gz = staggered_forward<A>(u, 1L, rhz);
}

// F = a g + (bma (n.g) + s) n: the demo's flux b(1+2eps)[e1(e1.g) + e2(e2.g)] + n[b(1-f eta^2)(n.g)
// + b f eta sqrt(1-eta^2)] with e1 e1^T + e2 e2^T = I - n n^T.
template <class T>
SCIPROXY_HD void demo_flux(T gx, T gy, T gz, T nx, T ny, T nz, T a, T bma, T s, T& fx, T& fy,
                           T& fz) {
  const T n_dot_g = nx * gx + ny * gy + nz * gz;
  const T along_n = bma * n_dot_g + s;
  fx = a * gx + along_n * nx;
  fy = a * gy + along_n * ny;
  fz = a * gz + along_n * nz;
}

// u+ = (2 - d) u + (d - 1) u- + m div.
template <class T>
SCIPROXY_HD T leapfrog_update(T u, T u_prev, T m, T d, T div) {
  return (T(2) - d) * u + (d - T(1)) * u_prev + m * div;
}

constexpr double demo_flux_flops(int order) {
  return 9.0 * (order / 2) + 16;
}
constexpr double demo_divergence_flops(int order) {
  return 9.0 * (order / 2) + 9;
}

}  // namespace sciproxy::tti
