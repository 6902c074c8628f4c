// The backend kernels of the specex family, declared once for every backend (core/dispatch.hpp).
// Each solves patches of an extraction (sciproxy/specex.hpp):
//
//   A[p, j] = spot of flux bin j at pixel p,  iCov = A^T W A + diag(a^2),  x = iCov^-1 A^T W p
//   signal mode Q_b = C_b^(-1/2) (C = iCov^-1), noise mode Q = iCov^(1/2);  R = diag(Q 1)^-1 Q
//
// (specter's ex2d_patch; docs/kernels/specex.md). api.cpp checks the arguments, plans the
// patches and hands every backend the same Problem; reference.cpp, cpu.cpp and cuda.cu implement
// the kernels, src/core/cuda_stubs.cpp stands in for cuda.cu in builds without CUDA.
#pragma once

#include <cstdint>

#include "core/dispatch.hpp"
#include "sciproxy/specex.hpp"

namespace sciproxy::specex::kernels {

// The extraction as every backend sees it. Host pointers; the image covers `image_range` of the
// CCD (the whole CCD or the caller's cut-out), row-major.
struct Problem {
  const PsfModel* psf = nullptr;
  const double* image = nullptr;
  const double* ivar = nullptr;
  PixelRange image_range;
  const PatchPlan* patches = nullptr;
  std::int64_t npatches = 0;
  double dw = 0;                      // the wavelength step
  std::int64_t nspec = 0, nwave = 0;  // of the output
  int specmin = 0, ndiag = 0;
  double regularize = 0;
  bool ndecorr = false;
  double psferr = 0.01;
  bool full_output = true;
  int nparallel = 0;  // OpenMP threads of the cpu backend; 0: all
  // solve_patch: the patch's wavelengths as the caller gave them (any increasing grid); null
  // for extract, whose patches sit on the linear grid (patch_wavelength).
  const double* patch_wavelengths = nullptr;
};

// Wavelength i of a patch: numpy.arange(wfirst, ..., dw) as specter builds it (start + i delta,
// delta = (start + dw) - start), or the caller's grid for solve_patch.
inline double patch_wavelength(const Problem& p, const PatchPlan& plan, int i) {
  if (p.patch_wavelengths) return p.patch_wavelengths[i];
  const double delta = (plan.wfirst + p.dw) - plan.wfirst;
  return i == 0 ? plan.wfirst : plan.wfirst + i * delta;
}

// The outputs, per flux bin before the conversion to per-Angstrom units (api.cpp does that).
// Every pointer but model holds nspec x nwave values (resolution: nspec x (2 ndiag + 1) x nwave);
// chi2pix, pixmask_fraction and model are null unless full_output. model covers image_range and
// receives the sum over patches of A_core x_core (each flux bin counted once), added in patch
// order so that the sum is the same for any thread count.
struct Outputs {
  double* flux = nullptr;
  double* ivar = nullptr;
  double* resolution = nullptr;
  double* chi2pix = nullptr;
  double* pixmask_fraction = nullptr;
  double* model = nullptr;
  std::int64_t retried_patches = 0;  // written by the kernel
};

// Solves every patch of p and writes the kept part of each into out. Records the regions
// "spots", "normal_equations", "solve", "decorrelate" and "outputs" (host backends: summed over
// threads' patches as wall time of the parallel loop where they overlap, see the backend).
#define SCIPROXY_SPECEX_EXTRACT void extract(const Context& ctx, const Problem& p, Outputs& out)

// Solves one patch (p.patches[0], with nlo = nhi = 0 and all spectra kept) and returns all of
// it: specter's ex2d_patch with full_output.
#define SCIPROXY_SPECEX_SOLVE_PATCH \
  void solve_patch(const Context& ctx, const Problem& p, PatchResult& result)

#define SCIPROXY_SPECEX_KERNELS \
  SCIPROXY_SPECEX_EXTRACT;      \
  SCIPROXY_SPECEX_SOLVE_PATCH;

SCIPROXY_DECLARE_KERNELS(SCIPROXY_SPECEX_KERNELS)

}  // namespace sciproxy::specex::kernels

namespace sciproxy::specex {

// specter's xypix(ispec, wavelength, xmin, xmax, ymin, ymax) for the host backends: the spot
// clipped to `bounds`, placed relative to its corner (psf.cpp). scratch holds kMaxSpotSide^2 +
// full_spot_scratch_size(v) doubles.
struct PsfView;
Spot clipped_spot(const PsfView& v, int ispec, double wavelength, const PixelRange& bounds,
                  double* scratch);

}  // namespace sciproxy::specex
