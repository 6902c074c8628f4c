// The stack family's tolerances, defined once: the backend tests, the command line and the
// harness compare every backend with the reference through these.
//
//   ||out - ref||_2 / ||ref||_2 <= rel_l2
//
// float32: the cpu and cuda backends accumulate in float, the reference in double; the sums of
// tens of unit-size terms that the tests and the default problems stack lose far less than 1e-5.
// float64: the same sums in double (docs/kernels/parstack.md).
#pragma once

#include "sciproxy/core/metrics.hpp"
#include "sciproxy/core/verify.hpp"

namespace sciproxy::stack {

inline Tolerance parstack_tolerance(Precision p) {
  Tolerance t;
  t.rel_l2 = p == Precision::fp32 ? 1e-5 : 1e-12;
  return t;
}

// The tolerance for value type T (float or double).
template <class T>
Tolerance parstack_tolerance() {
  return parstack_tolerance(sizeof(T) == 4 ? Precision::fp32 : Precision::fp64);
}

// argmax returns indices: they must agree exactly.
inline Tolerance argmax_tolerance() {
  Tolerance t;
  t.rel_l2 = 0;
  t.max_abs = 0;
  return t;
}

}  // namespace sciproxy::stack
