// Per-point arithmetic of the TTI workshop demo operator, shared by the cpu and cuda backends
// (SCIPROXY_HD), so that the CPU tests exercise what the GPU runs. The equations and the
// coefficients a, bma, s, m are those of demo_kernels.hpp (docs/kernels/tti.md, "The workshop
// operator"); the staggered derivatives are tti_math.hpp's.
//
// Flops per point as written (each add, sub, mul = 1), for M = A/2 terms per derivative:
//   one staggered derivative: M subs + M muls + (M - 1) adds + 1 mul by 1/h   = 3M
//   flux pass:       3 derivatives + flux_from_gradient (5 for n.g, 2, 3 x 3)  = 9M + 16
//   divergence pass: 3 derivatives + 2 adds + update (2 for 2-d and d-1, 3 muls, 2 adds) = 9M + 9
#pragma once

#include "sciproxy/core/hd.hpp"
#include "tti/tti_math.hpp"

namespace sciproxy::tti::demo {

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
SCIPROXY_HD void flux_from_gradient(T gx, T gy, T gz, T nx, T ny, T nz, T a, T bma, T s, T& fx,
                                    T& fy, T& fz) {
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

constexpr double flux_flops(int order) { return 9.0 * (order / 2) + 16; }
constexpr double divergence_flops(int order) { return 9.0 * (order / 2) + 9; }

}  // namespace sciproxy::tti::demo
