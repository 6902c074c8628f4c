// The tolerances of the tti family, defined once: the backend tests (tests/tti/), the command
// line (sciproxy tti, sciproxy demo) and the harness compare a backend's outputs with the
// reference backend's by these relative L2 norms ||out - ref|| / ||ref|| (docs/kernels/tti.md,
// "Tolerances"). NaN never passes (core/verify).
//
// Why these values. The reference sums in double and rounds once per step; cpu and cuda round
// every operation in T, so in float32 the difference grows with the steps (as for the scalar
// propagator's final wavefield), while in float64 it stays at rounding level. cpu and cuda run
// the same per-point arithmetic (math.hpp), so they agree more closely with each other than with
// the reference: only where the compilers contract a*b+c differently.
#pragma once

#include "sciproxy/core/metrics.hpp"
#include "sciproxy/core/verify.hpp"

namespace sciproxy::tti {

namespace detail {
inline Tolerance rel_l2_tolerance(Precision p, double fp32, double fp64) {
  Tolerance t;
  t.rel_l2 = p == Precision::fp32 ? fp32 : fp64;
  return t;
}
}  // namespace detail

// The coupled P/M system (tti_forward, tti_adjoint), a backend against the reference (and cuda
// against cpu): the traces (receiver amplitudes, the adjoint's source amplitudes).
inline Tolerance tti_tolerance(Precision p) {
  return detail::rel_l2_tolerance(p, 1e-5, 1e-12);
}

// The same for the final state P, P_prev, M, M_prev, and for the traces of a run continued from
// a state (rounding accumulated over the first run's steps too).
inline Tolerance tti_state_tolerance(Precision p) {
  return detail::rel_l2_tolerance(p, 1e-4, 1e-12);
}

// The adjoint identity <F s, d> = <s, F* d> of one backend, relative to |<F s, d>| (float64:
// rounding only).
inline double tti_adjoint_identity_tolerance() {
  return 1e-10;
}

// The workshop operator (tti_demo), u and u_prev of a backend (either form) against the
// reference.
inline Tolerance tti_demo_tolerance(Precision p) {
  return detail::rel_l2_tolerance(p, 1e-4, 1e-11);
}

// The workshop operator, cuda against cpu, and cuda's two forms against each other: the same
// per-point arithmetic.
inline Tolerance tti_demo_backends_tolerance(Precision p) {
  return detail::rel_l2_tolerance(p, 1e-5, 1e-12);
}

// The workshop operator, the cpu backend's fused form against its two-pass form: the same
// arithmetic per point in the same order.
inline Tolerance tti_demo_forms_tolerance(Precision p) {
  return detail::rel_l2_tolerance(p, 1e-6, 1e-13);
}

template <class T>
constexpr Precision precision_of() {
  return sizeof(T) == 4 ? Precision::fp32 : Precision::fp64;
}

}  // namespace sciproxy::tti
