// The Gauss-Hermite spot of a DESI PSF, shared by every backend (docs/kernels/specex.md):
//
//   param(ispec, lambda) = sum_k c_k P_k(u),   u = (lambda - lo) * 2 / (hi - lo) - 1   (Legendre)
//   spot[y, x] = max(0, sum_ij GH-i-j g_i(x) h_j(y) + tail(x, y)),  normalised to sum 1
//   g_0(x) = (erf(u_hi / sqrt2) - erf(u_lo / sqrt2)) / 2,
//   g_m(x) = He_(m-1)(u_lo) phi(u_lo) - He_(m-1)(u_hi) phi(u_hi)   (m > 0),
//   u_lo, u_hi = (x - xc -+ 0.5) / sigma: the pixel's edges; He probabilists' Hermite,
//   phi the unit Gaussian; h_j the same along y with GHSIGY;
//   tail = TAILAMP r2 / (TAILCORE^2 + r2)^(1 + TAILINDE/2),
//   r2 = ((x - xc) TAILXSCA)^2 + ((y - yc) TAILYSCA)^2 at pixel centres.
//
// The spot covers columns trunc(xc - HSIZEX + 0.5) .. trunc(xc + HSIZEX + 1.5) - 1 and rows
// likewise (Python's int(), as specter). Source: specter.psf.gausshermite (b8490d38), whose
// pgh() integrates He_m phi over a pixel with d/du (-He_(m-1) phi) = He_m phi.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hd.hpp"
#include "sciproxy/specex.hpp"

namespace sciproxy::specex {

// The most a spot spans along one axis (2 hsize + 2) and the highest Hermite degree a PSF may
// have: the loader refuses larger ones, and kernels size their scratch with them.
constexpr int kMaxSpotSide = 2 * 40 + 2;
constexpr int kMaxGhDegree = 16;

// sum_k c[k] P_k(u) by the three-term recurrence.
SCIPROXY_HD double legendre_sum(const double* c, int n, double u) {
  if (n <= 0) return 0;
  double p0 = 1, p1 = u, s = c[0];
  if (n > 1) s += c[1] * u;
  for (int k = 2; k < n; ++k) {
    const double p2 = ((2 * k - 1) * u * p1 - (k - 1) * p0) / k;
    s += c[k] * p2;
    p0 = p1;
    p1 = p2;
  }
  return s;
}

// specter's TraceSet._xnorm: (t - lo) * (2 / (hi - lo)) - 1, in that order of operations.
SCIPROXY_HD double legendre_argument(double t, double lo, double hi) {
  return (t - lo) * (2.0 / (hi - lo)) - 1.0;
}

// The first pixel and the width of a spot centred at c with half size h, in whole pixels.
struct SpotAxis {
  std::int64_t start = 0;
  int n = 0;
};
SCIPROXY_HD SpotAxis spot_axis(double c, int h) {
  // Python's int() truncates toward zero (also for negative values).
  const auto lo = static_cast<std::int64_t>(c - h + 0.5);
  const auto hi = static_cast<std::int64_t>(c + h + 1.5);
  return {lo, static_cast<int>(hi - lo)};
}

// Pixel-integrated Gauss-Hermite functions g_m for m = 0..degree over n pixels whose centres are
// start, start + 1, ...: out[m * n + i]. edge_scratch holds 2 (n + 1) doubles.
SCIPROXY_HD void integrated_hermite(int degree, std::int64_t start, int n, double centre,
                                    double sigma, double* out, double* edge_scratch) {
  constexpr double kInvSqrt2 = 0.70710678118654752440;
  constexpr double kInvSqrt2Pi = 0.39894228040143267794;
  double* u = edge_scratch;              // the n + 1 pixel edges, in sigmas
  double* phi = edge_scratch + (n + 1);  // the unit Gaussian there
  for (int k = 0; k <= n; ++k) {
    u[k] = (static_cast<double>(start + k) - centre - 0.5) / sigma;
    phi[k] = std::exp(-0.5 * u[k] * u[k]) * kInvSqrt2Pi;
  }
  double erf_lo = std::erf(u[0] * kInvSqrt2);
  for (int i = 0; i < n; ++i) {
    const double erf_hi = std::erf(u[i + 1] * kInvSqrt2);
    out[i] = 0.5 * (erf_hi - erf_lo);
    erf_lo = erf_hi;
  }
  if (degree < 1) return;
  // He_(m-1) at each edge by the recurrence He_(k+1) = u He_k - k He_(k-1), carried along m.
  for (int k = 0; k <= n; ++k) {
    double he_prev = 0, he = 1;  // He_(-1) (unused), He_0
    for (int m = 1; m <= degree; ++m) {
      // g_m uses He_(m-1) at edges k and k + 1: accumulate the edge's term into both pixels.
      const double term = he * phi[k];
      // Edge k is pixel k's lower edge (met first, so it sets the value) and pixel k - 1's upper.
      if (k < n) out[m * n + k] = term;
      if (k > 0) out[m * n + k - 1] -= term;
      const double next = u[k] * he - (m - 1) * he_prev;
      he_prev = he;
      he = next;
    }
  }
}

// The parameters of one spot, evaluated from the PSF's Legendre coefficients.
struct SpotParams {
  double x = 0, y = 0;  // trace centre
  int ispec = 0;
  double wavelength = 0;
  bool on_ccd = false;  // wavelength within the fibre's rows (specter's xypix: else empty)
};

// Evaluates every parameter of the PsfParam list at (ispec, lambda) into values (nparams).
SCIPROXY_HD void spot_parameters(const double* params, int nparams, int nspec, int ncoeff,
                                 double param_lo, double param_hi, int ispec, double wavelength,
                                 double* values) {
  const double u = legendre_argument(wavelength, param_lo, param_hi);
  for (int k = 0; k < nparams; ++k)
    values[k] =
        legendre_sum(params + (static_cast<std::int64_t>(k) * nspec + ispec) * ncoeff, ncoeff, u);
}

// The spot's pixels (ny x nx, row-major, unclipped) from its parameter values and centre.
// scratch holds (ghdegx + 1) nx + (ghdegy + 1) ny + nx + 2 (max(nx, ny) + 1) doubles
// (spot_scratch_size). Returns false when every pixel clips to 0 (no normalisation possible);
// the pixels are then all 0.
SCIPROXY_HD int spot_scratch_size(int ghdegx, int ghdegy, int nx, int ny) {
  const int side = nx > ny ? nx : ny;
  return (ghdegx + 1) * nx + (ghdegy + 1) * ny + nx + 2 * (side + 1);
}

SCIPROXY_HD bool spot_pixels(const double* values, int ghdegx, int ghdegy, bool has_tail, double xc,
                             double yc, SpotAxis ax, SpotAxis ay, double* pixels, double* scratch) {
  const int nx = ax.n, ny = ay.n;
  double* gx = scratch;                  // (ghdegx + 1) x nx
  double* gy = gx + (ghdegx + 1) * nx;   // (ghdegy + 1) x ny
  double* row = gy + (ghdegy + 1) * ny;  // nx: sum_i c_ij g_i(x) for one j
  double* edges = row + nx;
  integrated_hermite(ghdegx, ax.start, nx, xc, values[kGhSigX], gx, edges);
  integrated_hermite(ghdegy, ay.start, ny, yc, values[kGhSigY], gy, edges);
  for (int k = 0; k < nx * ny; ++k) pixels[k] = 0;
  for (int j = 0; j <= ghdegy; ++j) {
    for (int ix = 0; ix < nx; ++ix) row[ix] = 0;
    for (int i = 0; i <= ghdegx; ++i) {
      const double c = values[kFirstGh + i * (ghdegy + 1) + j];
      for (int ix = 0; ix < nx; ++ix) row[ix] += c * gx[i * nx + ix];
    }
    for (int iy = 0; iy < ny; ++iy) {
      const double h = gy[j * ny + iy];
      for (int ix = 0; ix < nx; ++ix) pixels[iy * nx + ix] += h * row[ix];
    }
  }
  // A zero amplitude adds exactly 0 (the r0 PSF's tail): skip its powers.
  if (has_tail && values[kTailAmp] != 0) {
    const double amp = values[kTailAmp], core2 = values[kTailCore] * values[kTailCore];
    const double xsca = values[kTailXsca], ysca = values[kTailYsca];
    const double power = 1 + values[kTailInde] / 2;
    for (int iy = 0; iy < ny; ++iy) {
      const double dy = (static_cast<double>(ay.start + iy) - yc) * ysca;
      for (int ix = 0; ix < nx; ++ix) {
        const double dx = (static_cast<double>(ax.start + ix) - xc) * xsca;
        const double r2 = dx * dx + dy * dy;
        pixels[iy * nx + ix] += amp * r2 / std::pow(core2 + r2, power);
      }
    }
  }
  double sum = 0;
  for (int k = 0; k < nx * ny; ++k) {
    if (!(pixels[k] > 0)) pixels[k] = 0;  // specter's clip(0.0)
    sum += pixels[k];
  }
  if (!(sum > 0)) return false;
  for (int k = 0; k < nx * ny; ++k) pixels[k] /= sum;
  return true;
}

}  // namespace sciproxy::specex

namespace sciproxy::specex {

// The PSF as kernels read it: raw pointers into a PsfModel (host) or into its copy on a device.
struct PsfView {
  const double* x_coeff = nullptr;  // (nspec, x_ncoeff)
  const double* y_coeff = nullptr;
  const double* params = nullptr;  // (nparams, nspec, param_ncoeff)
  const double* wmin_spec = nullptr;
  const double* wmax_spec = nullptr;
  double x_lo = 0, x_hi = 0, y_lo = 0, y_hi = 0, param_lo = 0, param_hi = 0;
  int x_ncoeff = 0, y_ncoeff = 0, param_ncoeff = 0, nparams = 0, nspec = 0;
  int hsizex = 0, hsizey = 0, ghdegx = 0, ghdegy = 0;
  bool has_tail = false;
};

inline PsfView host_view(const PsfModel& m) {
  PsfView v;
  v.x_coeff = m.x.coeff.data();
  v.y_coeff = m.y.coeff.data();
  v.params = m.params.data();
  v.wmin_spec = m.wmin_spec.data();
  v.wmax_spec = m.wmax_spec.data();
  v.x_lo = m.x.lo, v.x_hi = m.x.hi, v.y_lo = m.y.lo, v.y_hi = m.y.hi;
  v.param_lo = m.param_lo, v.param_hi = m.param_hi;
  v.x_ncoeff = m.x.ncoeff, v.y_ncoeff = m.y.ncoeff, v.param_ncoeff = m.param_ncoeff;
  v.nparams = m.nparams(), v.nspec = m.nspec;
  v.hsizex = m.hsizex, v.hsizey = m.hsizey, v.ghdegx = m.ghdegx, v.ghdegy = m.ghdegy;
  v.has_tail = m.has_tail;
  return v;
}

// Scratch doubles full_spot needs besides the pixels: the parameter values and spot_pixels'.
SCIPROXY_HD int full_spot_scratch_size(const PsfView& v) {
  return v.nparams + spot_scratch_size(v.ghdegx, v.ghdegy, kMaxSpotSide, kMaxSpotSide);
}

// The unclipped spot of fibre ispec at `wavelength`: its pixel axes and pixels (ay.n x ax.n,
// at most kMaxSpotSide^2). False when the wavelength is off the fibre's rows (specter's xypix
// returns nothing there) or the spot clips to nothing; the axes are then still set.
SCIPROXY_HD bool full_spot(const PsfView& v, int ispec, double wavelength, SpotAxis& ax,
                           SpotAxis& ay, double* pixels, double* scratch) {
  const double xc = legendre_sum(v.x_coeff + static_cast<std::int64_t>(ispec) * v.x_ncoeff,
                                 v.x_ncoeff, legendre_argument(wavelength, v.x_lo, v.x_hi));
  const double yc = legendre_sum(v.y_coeff + static_cast<std::int64_t>(ispec) * v.y_ncoeff,
                                 v.y_ncoeff, legendre_argument(wavelength, v.y_lo, v.y_hi));
  ax = spot_axis(xc, v.hsizex);
  ay = spot_axis(yc, v.hsizey);
  if (wavelength < v.wmin_spec[ispec] || wavelength > v.wmax_spec[ispec]) return false;
  double* values = scratch;
  spot_parameters(v.params, v.nparams, v.nspec, v.param_ncoeff, v.param_lo, v.param_hi, ispec,
                  wavelength, values);
  return spot_pixels(values, v.ghdegx, v.ghdegy, v.has_tail, xc, yc, ax, ay, pixels,
                     scratch + v.nparams);
}

}  // namespace sciproxy::specex
