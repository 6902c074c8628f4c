// wave: the family's tolerances, defined once (relative L2 norms against the reference backend),
// used by the tests, the CLI and the harness. See docs/kernels/scalar-wave.md.
//
// Receiver amplitudes and gradients: 1e-5 (float32), 1e-12 (float64). Born: the scattered field
// is driven by the background field's Laplacian times a small perturbation, so the rounding of
// both fields reaches data of a smaller norm: 1e-4, 1e-11. A final wavefield gathers the rounding
// of every step everywhere: 1e-4, 1e-11; the final scattered wavefield 1e-2, 1e-9, because by
// the end of a run most of the scattered energy has left through the PML and what remains sits
// near the rounding floor. Outputs computed from compressed stored steps (8-bit blocks): 1e-2 in
// float32; float64 keeps its tolerance.
#pragma once

#include "sciproxy/core/metrics.hpp"
#include "sciproxy/core/verify.hpp"

namespace sciproxy::wave {

inline Tolerance scalar_tolerance(Precision p, bool born) {
  Tolerance t;
  t.rel_l2 = p == Precision::fp32 ? (born ? 1e-4 : 1e-5) : (born ? 1e-11 : 1e-12);
  return t;
}

inline Tolerance scalar_compressed_tolerance(Precision p, bool born) {
  if (p == Precision::fp64) return scalar_tolerance(p, born);
  Tolerance t;
  t.rel_l2 = 1e-2;
  return t;
}

template <class T>
constexpr Precision precision_of() {
  return sizeof(T) == 4 ? Precision::fp32 : Precision::fp64;
}

inline Tolerance scalar_state_tolerance(Precision p, bool born) {
  Tolerance t;
  t.rel_l2 = p == Precision::fp32 ? (born ? 1e-2 : 1e-4) : (born ? 1e-9 : 1e-11);
  return t;
}

}  // namespace sciproxy::wave
