// specex, reference backend: each patch solved the way specter's ex2d_patch does it, in plain
// loops and double precision, one patch after another. The definition of correct for the other
// backends.
//
//   A[p, j] = spot j at pixel p;  fluxweight_j = sum_p w_p A_pj;  y_j = sum_p w_p A_pj pix_p
//   iCov_jk = sum_p w_p A_pj A_pk + delta_jk a_j^2   (a_j: regularize, or minweight - fluxweight_j
//             for weak bins, minweight = 1e-4 max fluxweight); iCov = 1e-8 I if every w_p = 0
//   x = iCov^-1 y (LU, as scipy's spsolve);  iCov = V diag(l) V^T (one full eigendecomposition)
//   signal: C = V diag(1/l) V^T, C_b = U diag(m) U^T per spectrum, Q_b = U diag(m^-1/2) U^T
//   noise:  Q = V diag(l^1/2) V^T;   eigenvalues at or below 10 eps max are replaced as specter's
//           eigen_compose does;   s = Q 1, R = diag(s)^-1 Q, flux = R x, ivar = s^2
//
// Source: specter.extract.ex2d (ex2d_patch, resolution_from_icov, eigen_compose), b8490d38.
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels.hpp"
#include "patch.hpp"
#include "sciproxy/core/cancel.hpp"

namespace sciproxy::specex::kernels::reference {

namespace {

using Matrix = std::vector<double>;  // n x n, row-major

// specter's eigen_compose: V diag(f(l)) V^T with f one of l, 1/l, sqrt(l), 1/sqrt(l), small
// eigenvalues replaced so that the condition number stays within double precision.
Matrix eigen_compose(const std::vector<double>& l, const Matrix& v, int n, bool invert, bool sqr) {
  std::vector<double> f;
  eigen_compose_weights(l, invert, sqr, f);
  Matrix out(static_cast<std::size_t>(n) * n, 0.0);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c) {
      double sum = 0;
      for (int k = 0; k < n; ++k) sum += v[r * n + k] * f[k] * v[c * n + k];
      out[r * n + c] = sum;
    }
  return out;
}

// Eigenvalues (ascending) and eigenvectors (columns of v) of a symmetric matrix, as scipy's
// eigh. False when LAPACK does not converge.
bool eigh(Matrix a, int n, std::vector<double>& l, Matrix& v) {
  l.resize(n);
  if (LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, a.data(), n, l.data()) != 0) return false;
  v = std::move(a);
  return true;
}

struct Solved {
  SolvedPatch patch;
  Matrix r, icov;
};

// One patch with a given regularisation; false when the solve or an eigendecomposition fails.
bool solve(const Problem& p, const PatchPlan& plan, const PatchPixels& px,
           const std::vector<Spot>& spots, double regularize, Solved& out) {
  const int n = plan.nflux();
  const std::int64_t nx = plan.pixels.nx();
  std::vector<double> fluxweight(n, 0.0), y(n, 0.0);
  for (int j = 0; j < n; ++j)
    for_each_pixel(spots[j], nx, [&](std::int64_t k, double a) {
      fluxweight[j] += px.ivar[k] * a;
      y[j] += px.ivar[k] * a * px.value[k];
    });
  // A^T W A: the pixels two spots share.
  Matrix icov(static_cast<std::size_t>(n) * n, 0.0);
  std::vector<double> column(px.value.size(), 0.0);
  for (int j = 0; j < n; ++j) {
    for_each_pixel(spots[j], nx, [&](std::int64_t k, double a) { column[k] = px.ivar[k] * a; });
    for (int k = 0; k < n; ++k) {
      double sum = 0;
      for_each_pixel(spots[k], nx, [&](std::int64_t q, double a) { sum += column[q] * a; });
      icov[j * n + k] = sum;
    }
    for_each_pixel(spots[j], nx, [&](std::int64_t k, double) { column[k] = 0; });
  }
  for (int j = 0; j < n; ++j)
    for (int k = j + 1; k < n; ++k) {
      const double mean = 0.5 * (icov[j * n + k] + icov[k * n + j]);
      icov[j * n + k] = icov[k * n + j] = mean;
    }
  const double minweight = 1e-4 * *std::max_element(fluxweight.begin(), fluxweight.end());
  for (int j = 0; j < n; ++j) {
    const double a = fluxweight[j] < minweight ? minweight - fluxweight[j] : regularize;
    icov[j * n + j] += a * a;
  }
  const bool all_masked =
      std::all_of(px.ivar.begin(), px.ivar.end(), [](double w) { return w == 0; }) ||
      std::all_of(icov.begin(), icov.end(), [](double v) { return v == 0; });
  if (all_masked) {
    std::fill(icov.begin(), icov.end(), 0.0);
    for (int j = 0; j < n; ++j) icov[j * n + j] = 1e-8;
  }

  // x = iCov^-1 y.
  std::vector<double> x = y;
  {
    Matrix lu = icov;
    std::vector<lapack_int> pivots(n);
    if (LAPACKE_dgesv(LAPACK_ROW_MAJOR, n, 1, lu.data(), n, pivots.data(), x.data(), 1) != 0)
      return false;
    for (const double v : x)
      if (!std::isfinite(v)) return false;
  }

  // Q: the square root of the inverse of each spectrum's block of C (signal), or of iCov (noise).
  std::vector<double> l;
  Matrix v;
  if (!eigh(icov, n, l, v)) return false;
  Matrix q(static_cast<std::size_t>(n) * n, 0.0);
  if (p.ndecorr) {
    q = eigen_compose(l, v, n, false, true);
  } else {
    const Matrix c = eigen_compose(l, v, n, true, false);
    const int nw = plan.nwave();
    for (int s = 0; s < plan.nspec; ++s) {
      Matrix block(static_cast<std::size_t>(nw) * nw);
      for (int r = 0; r < nw; ++r)
        for (int col = 0; col < nw; ++col) block[r * nw + col] = c[(s * nw + r) * n + s * nw + col];
      std::vector<double> bl;
      Matrix bv;
      if (!eigh(block, nw, bl, bv)) return false;
      const Matrix qb = eigen_compose(bl, bv, nw, true, true);
      for (int r = 0; r < nw; ++r)
        for (int col = 0; col < nw; ++col) q[(s * nw + r) * n + s * nw + col] = qb[r * nw + col];
    }
  }
  out.patch.flux.assign(n, 0.0);
  out.patch.ivar.assign(n, 0.0);
  out.r.assign(static_cast<std::size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) {
    double norm = 0;
    for (int j = 0; j < n; ++j) norm += q[i * n + j];
    double flux = 0;
    for (int j = 0; j < n; ++j) {
      out.r[i * n + j] = q[i * n + j] / norm;
      flux += out.r[i * n + j] * x[j];
    }
    out.patch.flux[i] = flux;
    out.patch.ivar[i] = norm * norm;
    // Bins no pixel constrains (numpy.isclose(fluxweight, 0)) and all-masked patches: ivar 0.
    if (all_masked || std::abs(fluxweight[i]) <= 1e-8) out.patch.ivar[i] = 0;
  }
  out.patch.xflux = std::move(x);
  out.icov = std::move(icov);
  return true;
}

// Solves a patch, again with regularize = 1e-4 when the first solve fails (gpu_specter's
// retry); a patch that fails twice keeps flux 0, ivar 0 and R = I.
bool solve_with_retry(const Problem& p, const PatchPlan& plan, const PatchPixels& px,
                      const std::vector<Spot>& spots, Solved& out) {
  if (solve(p, plan, px, spots, p.regularize, out)) return false;
  if (p.regularize < 1e-4 && solve(p, plan, px, spots, 1e-4, out)) return true;
  const int n = plan.nflux();
  out.patch.flux.assign(n, 0.0);
  out.patch.ivar.assign(n, 0.0);
  out.patch.xflux.assign(n, 0.0);
  out.r.assign(static_cast<std::size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) out.r[i * n + i] = 1;
  return true;
}

}  // namespace

SCIPROXY_SPECEX_EXTRACT {
  auto region = Timers::region(ctx.timers, "reference");
  for (std::int64_t ip = 0; ip < p.npatches; ++ip) {
    throw_if_cancelled("ex2d", ip, p.npatches, "patches");
    const PatchPlan& plan = p.patches[ip];
    const PatchPixels px = patch_pixels(p, plan);
    const std::vector<Spot> spots = patch_spots(p, plan);
    Solved solved;
    out.retried_patches += solve_with_retry(p, plan, px, spots, solved) ? 1 : 0;
    const int n = plan.nflux(), nw = plan.nwave();
    auto r_block = [&](int s, int row, int col) {
      return solved.r[static_cast<std::size_t>(s * nw + row) * n + s * nw + col];
    };
    if (p.full_output) {
      std::vector<double> chi2pix, pixmask;
      patch_diagnostics(plan, spots, px, solved.patch.xflux, p.psferr, chi2pix, pixmask);
      keep_patch(p, plan, solved.patch, r_block, &chi2pix, &pixmask, out);
      add_model(p, plan, core_model(plan, spots, solved.patch.xflux), out.model);
    } else {
      keep_patch(p, plan, solved.patch, r_block, nullptr, nullptr, out);
    }
  }
}

SCIPROXY_SPECEX_SOLVE_PATCH {
  auto region = Timers::region(ctx.timers, "reference");
  const PatchPlan& plan = p.patches[0];
  const PatchPixels px = patch_pixels(p, plan);
  const std::vector<Spot> spots = patch_spots(p, plan);
  Solved solved;
  result.retried = solve_with_retry(p, plan, px, spots, solved);
  result.nflux = plan.nflux();
  result.flux = std::move(solved.patch.flux);
  result.ivar = std::move(solved.patch.ivar);
  result.xflux = std::move(solved.patch.xflux);
  result.resolution = std::move(solved.r);
  result.icov = std::move(solved.icov);
}

}  // namespace sciproxy::specex::kernels::reference
