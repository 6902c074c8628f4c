// The backend interface of the coupled P/M TTI propagator (include/sciproxy/tti.hpp): declared
// once, implemented by reference.cpp, cpu.cpp and cuda.cu (cuda_hooks.cpp when CUDA is not
// built). tti.cpp checks the arguments, pads the model, precomputes the material coefficients,
// the damping and the scaling once, and hands every backend the same TtiProblem; the adjoint is
// this same forward kernel run from the receivers (tti.cpp).
//
// Padded grid, per axis a (size n[a]): [halo | sponge low | model | sponge high | halo], halo
// H = order/2 cells where the fields are zero. Flat index (i0 * n[1] + i1) * n[2] + i2.
// Per step t, for P and M (gP = D+ P, the three staggered derivatives, tti_math.hpp):
//   flux boxes J (every axis [H-1, n-H)) : FP = e gP + n (a (n.gP) + c (n.gM))
//                                          FM = g gM + n (c (n.gP) + mm (n.gM))
//   fluxes are zero outside J, so the divergence D- . F at the cells U (every axis [H, n-H)) is
//   exactly -(D+)^T . F and the operator is symmetric;
//   receivers^t = P^t (+ M^t when record_m) at the receiver cells, before the step;
//   P^{t+1} = (2 - d) P^t + (d - 1) P^{t-1} + scale (D- . FP),  the same for M;
//   P^{t+1}[source] += source_scale * s^t  (and M^{t+1} when inject_m).
// Free surface (free_surface): the surface is row H of axis 0 (P = M = 0 there, never updated);
// before the flux pass the rows H-1 .. 0 of P and M hold the odd mirror (P[H-r] = -P[H+r]),
// before the divergence pass the rows H-1 .. 0 of the axis-0 fluxes hold the even mirror about
// H - 1/2 (F[H-1-r] = F[H+r]); J starts at row H and U at row H+1 along axis 0. This is
// D-_fs = -(D+_fs)^T again. The backends leave the mirror rows at zero on return.
#pragma once

#include <array>
#include <cstdint>

#include "sciproxy/core/timers.hpp"

namespace sciproxy::tti::kernels {

// Per-cell coefficient arrays of the padded grid (b = buoyancy, n = symmetry axis, each [points]).
template <class T>
struct TtiCoefficients {
  const T* e = nullptr;      // b (1 + 2 eps)
  const T* g = nullptr;      // b (1 - f)
  const T* a = nullptr;      // -b (2 eps + f eta^2)
  const T* c = nullptr;      // b f eta sqrt(1 - eta^2)
  const T* mm = nullptr;     // b f eta^2
  std::array<const T*, 3> n = {};  // n along axes 0, 1, 2
  const T* scale = nullptr;  // dt^2 vp^2 / b
  const T* damping = nullptr;  // d = dt w / Q
};

template <class T>
struct TtiProblem {
  int order = 8;  // 4, 8, 12, 16
  std::int64_t nshots = 1;
  std::array<std::int64_t, 3> n = {1, 1, 1};  // padded shape
  std::int64_t points() const { return n[0] * n[1] * n[2]; }
  std::int64_t halo() const { return order / 2; }
  std::array<T, 3> rh = {0, 0, 0};  // 1 / spacing
  bool free_surface = false;
  TtiCoefficients<T> coef;
  std::int64_t nsources = 0, nreceivers = 0;  // per shot
  const std::int64_t* source_cells = nullptr;    // [nshots, nsources] flat padded index
  const T* source_scale = nullptr;               // [nshots, nsources]
  const std::int64_t* receiver_cells = nullptr;  // [nshots, nreceivers] flat padded index
  bool inject_m = true;   // sources go into P and M (forward) or P only (adjoint)
  bool record_m = false;  // receivers record P (forward) or P + M (adjoint)
  std::int64_t nt = 0;
};

// P^t, P^{t-1}, M^t, M^{t-1} of every shot, each [nshots, points] (in: t = 0, out: t = nt).
template <class T>
struct TtiFields {
  T* p = nullptr;
  T* p_prev = nullptr;
  T* m = nullptr;
  T* m_prev = nullptr;
};

// sources: [nt, nshots, nsources]; receivers: [nt, nshots, nreceivers] written.
namespace reference {
template <class T>
void tti_forward(const TtiProblem<T>& p, TtiFields<T> fields, const T* sources, T* receivers);
}
namespace cpu {
template <class T>
void tti_forward(const TtiProblem<T>& p, TtiFields<T> fields, const T* sources, T* receivers);
}
namespace cuda {
// Host arrays in and out; regions "upload", "steps", "download" recorded with CUDA events.
template <class T>
void tti_forward(const TtiProblem<T>& p, TtiFields<T> fields, const T* sources, T* receivers,
                 int device_index, Timers* timers);
}

}  // namespace sciproxy::tti::kernels
