// The specex family's tolerances, defined once: the backend tests, the command line and the
// harness compare every backend with the reference through these.
//
//   ||out - ref||_2 / ||ref||_2 <= rel_l2   for flux, ivar and the resolution diagonals
//
// The reference and the cpu backend solve the same equations in double precision by different
// factorisations (LU and a full eigendecomposition of iCov, against a banded Cholesky, the band
// of its inverse and per-fibre blocks), so they agree to rounding amplified by the patch's
// condition number. Measured: 3e-11 on patches of 5 to 7 fibres, 1e-8 to 2e-8 on 10 fibres,
// 1e-7 to 2e-7 on specter's default 25-fibre patches (nsubbundles 1), whose iCov, with the
// minweight prior pinning edge bins, has condition numbers near 1e9. 1e-6 bounds all of these
// with room; it is 500 times below gpu_specter's own GPU-vs-CPU bar (|pull| < 5e-4).
#pragma once

#include "sciproxy/core/verify.hpp"

namespace sciproxy::specex {

inline Tolerance ex2d_tolerance() {
  Tolerance t;
  t.rel_l2 = 1e-6;
  return t;
}

}  // namespace sciproxy::specex
