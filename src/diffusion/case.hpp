// The diffusion family's tolerances, defined once: the backend tests, the command line and the
// harness compare every backend with the reference through these.
//
//   ||out - ref||_2 / ||ref||_2 <= rel_l2   for vn, w, theta_v, exner, div_ic, hdef_ic, dwdx, dwdy
//
// float64: every backend evaluates the same expressions (math.hpp) in another loop order, so
// they differ by the compiler's contraction choices only (measured below 1e-15); 1e-12 is
// ICON4Py's own rtol for its savepoints. float32: one call of float arithmetic on O(1e2) fields
// with O(1e-3) updates, 1e-5.
#pragma once

#include "sciproxy/core/metrics.hpp"
#include "sciproxy/core/verify.hpp"

namespace sciproxy::diffusion {

inline Tolerance diffusion_tolerance(Precision p) {
  Tolerance t;
  t.rel_l2 = p == Precision::fp32 ? 1e-5 : 1e-12;
  return t;
}

}  // namespace sciproxy::diffusion
