// What the host backends share around the solve of one patch (docs/kernels/specex.md): reading
// the patch's pixels, its spots (the columns of A), and after the solve the diagnostics specter
// computes with full_output (chi2pix, pixmask_fraction, the model) and the stitching of the
// patch's kept part into the frame's outputs.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels.hpp"
#include "math.hpp"

namespace sciproxy::specex::kernels {

// The patch's pixels and their inverse variances, row-major over plan.pixels.
struct PatchPixels {
  std::vector<double> value, ivar;
};

inline PatchPixels patch_pixels(const Problem& p, const PatchPlan& plan) {
  PatchPixels px;
  const PixelRange& r = plan.pixels;
  const std::int64_t image_nx = p.image_range.nx();
  px.value.resize(static_cast<std::size_t>(r.nx() * r.ny()));
  px.ivar.resize(px.value.size());
  for (std::int64_t y = r.ymin; y < r.ymax; ++y)
    for (std::int64_t x = r.xmin; x < r.xmax; ++x) {
      const std::int64_t from = (y - p.image_range.ymin) * image_nx + (x - p.image_range.xmin);
      const std::int64_t to = (y - r.ymin) * r.nx() + (x - r.xmin);
      px.value[to] = p.image[from];
      px.ivar[to] = p.ivar[from];
    }
  return px;
}

// The columns of A: spot j = s nwave + i of spectrum speclo + s at the patch's wavelength i,
// clipped to the patch's pixels (empty off the fibre's rows).
inline std::vector<Spot> patch_spots(const Problem& p, const PatchPlan& plan) {
  const PsfView v = host_view(*p.psf);
  std::vector<double> scratch(kMaxSpotSide * kMaxSpotSide + full_spot_scratch_size(v));
  std::vector<Spot> spots(static_cast<std::size_t>(plan.nflux()));
  const int nw = plan.nwave();
  for (int s = 0; s < plan.nspec; ++s)
    for (int i = 0; i < nw; ++i)
      spots[s * nw + i] = clipped_spot(v, plan.speclo + s, patch_wavelength(p, plan, i),
                                       plan.pixels, scratch.data());
  return spots;
}

// Calls f(pixel index in the patch, value) for every pixel of spot s.
template <class F>
void for_each_pixel(const Spot& s, std::int64_t patch_nx, F&& f) {
  for (std::int64_t iy = 0; iy < s.ny; ++iy)
    for (std::int64_t ix = 0; ix < s.nx; ++ix)
      f((s.ystart + iy) * patch_nx + s.xstart + ix, s.pixels[iy * s.nx + ix]);
}

// A patch once solved: per flux bin the flux R x, its ivar, the solution x and the weights;
// r_block(s, row, col) reads R within spectrum s's diagonal block.
struct SolvedPatch {
  std::vector<double> flux, ivar, xflux;
};

// specter's full_output diagnostics of a patch, per flux bin: pixmask_fraction = 1 - A^T [ivar
// > 0]; chi2pix = A^T chi^2 / A^T [totivar > 0] with m = A x, modelivar = (m psferr + 1e-32)^-2,
// totivar = 1 / (1/modelivar + 1/ivar), chi = (p - m) sqrt(totivar).
inline void patch_diagnostics(const PatchPlan& plan, const std::vector<Spot>& spots,
                              const PatchPixels& px, const std::vector<double>& xflux,
                              double psferr, std::vector<double>& chi2pix,
                              std::vector<double>& pixmask) {
  const std::int64_t nx = plan.pixels.nx();
  std::vector<double> model(px.value.size(), 0.0);
  for (std::size_t j = 0; j < spots.size(); ++j) {
    const double x = std::isnan(xflux[j]) ? 0.0 : xflux[j];
    for_each_pixel(spots[j], nx, [&](std::int64_t k, double a) { model[k] += a * x; });
  }
  std::vector<double> totivar(model.size(), 0.0), chi2(model.size(), 0.0);
  for (std::size_t k = 0; k < model.size(); ++k) {
    if (std::isnan(model[k])) model[k] = 0;
    const double m = model[k] * psferr + 1e-32;
    const double modelivar = 1 / (m * m);
    if (modelivar > 0 && px.ivar[k] > 0) totivar[k] = 1 / (1 / modelivar + 1 / px.ivar[k]);
    const double chi = (px.value[k] - model[k]) * std::sqrt(totivar[k]);
    chi2[k] = chi * chi;
  }
  chi2pix.assign(spots.size(), 0.0);
  pixmask.assign(spots.size(), 0.0);
  for (std::size_t j = 0; j < spots.size(); ++j) {
    double unmasked = 0, weight = 0, sum = 0;
    for_each_pixel(spots[j], nx, [&](std::int64_t k, double a) {
      unmasked += px.ivar[k] > 0 ? a : 0;
      weight += totivar[k] > 0 ? a : 0;
      sum += a * chi2[k];
    });
    pixmask[j] = 1 - unmasked;
    chi2pix[j] = weight == 0 ? 0 : sum / weight;
  }
}

// The eigenvalue function of specter's eigen_compose(w, v, invert, sqr) = V diag(f(w)) V^T:
// f = w, 1/w, sqrt(w) or 1/sqrt(w), with eigenvalues at or below 10 eps max(w) (sqrt(max(w)) for
// the square roots) replaced so that the condition number stays within double precision. As
// specter, the square-root cases compare sqrt(w) (invert) or w (not inverted) with that floor.
inline void eigen_compose_weights(const std::vector<double>& w, bool invert, bool sqr,
                                  std::vector<double>& f) {
  const double threshold = 10.0 * DBL_EPSILON;
  const double maxval = *std::max_element(w.begin(), w.end());
  const double minval = sqr ? std::sqrt(maxval) * threshold : maxval * threshold;
  f.resize(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (invert && sqr) {
      const double root = std::sqrt(w[i]);
      f[i] = root > minval ? 1.0 / root : 1.0 / minval;
    } else if (invert) {
      f[i] = w[i] > minval ? 1.0 / w[i] : 1.0 / minval;
    } else if (sqr) {
      f[i] = w[i] > minval ? std::sqrt(w[i]) : minval;
    } else {
      f[i] = w[i] > minval ? w[i] : minval;
    }
  }
}

// Writes the patch's kept spectra and core wavelengths into the frame's outputs: flux, ivar,
// the resolution diagonals Rd[ispec, k, iwave + i] = R_block[nlo + i - ndiag + k, nlo + i]
// (r_block(s, row, col)), chi2pix and pixmask_fraction when given.
template <class RBlock>
void keep_patch(const Problem& p, const PatchPlan& plan, const SolvedPatch& solved,
                RBlock&& r_block, const std::vector<double>* chi2pix,
                const std::vector<double>* pixmask, Outputs& out) {
  const int nw = plan.nwave(), nd = 2 * p.ndiag + 1;
  for (int s = plan.keeplo; s < plan.keeplo + plan.nkeep; ++s) {
    const std::int64_t row = plan.speclo + s - p.specmin;
    for (int i = 0; i < plan.ncore; ++i) {
      const int j = plan.nlo + i;
      const std::int64_t at = row * p.nwave + plan.iwave + i;
      out.flux[at] = solved.flux[s * nw + j];
      out.ivar[at] = solved.ivar[s * nw + j];
      for (int k = 0; k < nd; ++k)
        out.resolution[(row * nd + k) * p.nwave + plan.iwave + i] = r_block(s, j - p.ndiag + k, j);
      if (chi2pix) out.chi2pix[at] = (*chi2pix)[s * nw + j];
      if (pixmask) out.pixmask_fraction[at] = (*pixmask)[s * nw + j];
    }
  }
}

// The patch's share of the model image: A_core x_core, the kept spectra at the core wavelengths
// only, so that every flux bin of the frame enters the model once. Row-major over plan.pixels.
inline std::vector<double> core_model(const PatchPlan& plan, const std::vector<Spot>& spots,
                                      const std::vector<double>& xflux) {
  std::vector<double> model(static_cast<std::size_t>(plan.npix()), 0.0);
  const int nw = plan.nwave();
  for (int s = plan.keeplo; s < plan.keeplo + plan.nkeep; ++s)
    for (int i = plan.nlo; i < plan.nlo + plan.ncore; ++i) {
      const double x = std::isnan(xflux[s * nw + i]) ? 0.0 : xflux[s * nw + i];
      for_each_pixel(spots[s * nw + i], plan.pixels.nx(),
                     [&](std::int64_t k, double a) { model[k] += a * x; });
    }
  return model;
}

// Adds a patch's model into the frame's model image (covering p.image_range).
inline void add_model(const Problem& p, const PatchPlan& plan, const std::vector<double>& model,
                      double* image) {
  const PixelRange& r = plan.pixels;
  for (std::int64_t y = r.ymin; y < r.ymax; ++y)
    for (std::int64_t x = r.xmin; x < r.xmax; ++x)
      image[(y - p.image_range.ymin) * p.image_range.nx() + (x - p.image_range.xmin)] +=
          model[(y - r.ymin) * r.nx() + (x - r.xmin)];
}

}  // namespace sciproxy::specex::kernels
