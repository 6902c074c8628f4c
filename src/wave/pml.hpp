// C-PML profiles of the scalar propagator (Pasalic and McGarry 2010, as Deepwave sets them up:
// deepwave/_common.py setup_pml, _regular_grid.py set_pml_profiles).
//
// Along one dimension of the padded grid [halo | PML low | window | PML high | halo], with
// frac = the distance into the PML of that side divided by its width (clamped to [0, 1], so the
// halo continues the outermost PML cell):
//   sigma = sigma0 frac^n,  sigma0 = -(1 + n) max_vel ln(R) / (2 * width of that side in metres),
//   alpha = pi pml_freq (1 - frac),   a = exp(-(sigma + alpha) dt),
//   b = sigma / (sigma + alpha) (a - 1),   a = b = 0 where frac = 0,   dbdx = D1 b,
// with R = 1e-3, n = 2, dt the inner time step. Deepwave up to v0.0.2x normalised sigma0 by the
// largest PML width of all sides; v0.1 (the version the tests compare with) uses each side's own
// width, so that every side has the designed reflection coefficient. Equal widths agree.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sciproxy/wave.hpp"

namespace sciproxy::wave::detail {

// Profiles of dimension d have length n[d] (the padded size); unused dimensions stay empty.
struct PmlProfiles {
  std::array<std::vector<double>, kMaxDims> a, b, dbdx;
};

PmlProfiles make_pml_profiles(int ndim, int accuracy, const std::array<std::int64_t, kMaxDims>& n,
                              const std::array<std::int64_t, 2 * kMaxDims>& pml_width,
                              const std::array<double, kMaxDims>& spacing, double dt,
                              double max_vel, double pml_freq);

// The box of ScalarProblem::pml_interior: per dimension [width_low + 3 h, n - width_high - 3 h)
// with h = accuracy / 2 (Deepwave's backward-pass bound, the more conservative of its two).
// Outside the PML and the halo the profiles vanish, but D1 b does so only h cells further in,
// psi and zeta of the forward pass another h cells (their stencil neighbours), and the adjoint
// reads b' and psibar of neighbours one more stencil radius away; 3 h covers all of them.
// Unused dimensions get {0, 1}.
std::array<std::int64_t, 2 * kMaxDims> pml_interior(
    int ndim, int accuracy, const std::array<std::int64_t, kMaxDims>& n,
    const std::array<std::int64_t, 2 * kMaxDims>& pml_width);

}  // namespace sciproxy::wave::detail
