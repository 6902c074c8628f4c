// specex, cpu backend: the reference's equations (reference.cpp) with the work cut to what the
// outputs need, patches solved in parallel (OpenMP, one patch per thread, BLAS single-threaded
// inside):
//
//   iCov_jk = sum over the pixels spots j and k share (pairs whose rectangles overlap only)
//   iCov = L L^T (Cholesky, banded: bins are ordered spectrum by spectrum, so iCov is a band
//   matrix as wide as a spectrum's bins plus a spot), x = L^-T L^-1 y
//   signal mode: C = iCov^-1 inside the band from the factor (selected inversion), then per
//   spectrum
//     C_b = U diag(m) U^T and Q_b = U diag(m^-1/2) U^T: R is block diagonal, no full
//     eigendecomposition of iCov (specter's eigh of the whole iCov was ~85% of its time)
//   noise mode: iCov = V diag(l) V^T, Q = V diag(l^1/2) V^T (as the reference)
//   R = diag(Q 1)^-1 Q, flux = R x, ivar = (Q 1)^2
//
// A patch whose Cholesky fails (not positive definite) is solved again with regularize = 1e-4.
// The eigenvalue clipping follows specter's eigen_compose. Each patch's arithmetic does not
// depend on the thread count, and the model image is summed in patch order: results are the
// same for any number of threads.
#include <cblas.h>
#include <lapacke.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "core/cancel_region.hpp"
#include "kernels.hpp"
#include "patch.hpp"
#include "sciproxy/core/device.hpp"

extern "C" {
// OpenBLAS's thread control: its own threads would fight the patches' OpenMP threads.
int openblas_get_num_threads(void);
void openblas_set_num_threads(int);
}

namespace sciproxy::specex::kernels::cpu {

namespace {

using Clock = std::chrono::steady_clock;

// The patches run one per thread; OpenBLAS is kept to one thread meanwhile.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() : previous_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~SingleThreadedBlas() { openblas_set_num_threads(previous_); }
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int previous_;
};

// Seconds per section, summed over a thread's patches.
struct Sections {
  double spots = 0, normal = 0, solve = 0, decorrelate = 0, outputs = 0;
};

double since(Clock::time_point& t) {
  const auto now = Clock::now();
  const double s = std::chrono::duration<double>(now - t).count();
  t = now;
  return s;
}

// out = V diag(f) V^T for V (n x n, row-major, eigenvectors in columns).
void compose(const double* v, const std::vector<double>& f, int n, double* out,
             std::vector<double>& scratch) {
  scratch.assign(v, v + static_cast<std::size_t>(n) * n);
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < n; ++k) scratch[r * n + k] *= f[k];
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0, scratch.data(), n, v, n, 0.0,
              out, n);
}

struct Workspace {
  std::vector<double> icov, factor, x, y, fluxweight, q, block, eig, f, scratch;
  std::vector<double> band;     // (kd + 1) x n, LAPACK's lower band storage of the factor
  std::vector<double> inverse;  // n x n: the band of iCov^-1, both triangles
};

// The largest |j - k| with iCov[j, k] != 0.
int half_bandwidth(const std::vector<double>& icov, int n) {
  int kd = 0;
  for (int j = 0; j < n; ++j)
    for (int k = n - 1; k > j + kd; --k)
      if (icov[static_cast<std::size_t>(j) * n + k] != 0) {
        kd = k - j;
        break;
      }
  return kd;
}

// iCov = L L^T in band storage: band[(i - j) + j (kd + 1)] = L[i, j] for j <= i <= j + kd.
bool banded_cholesky(const std::vector<double>& icov, int n, int kd, Workspace& w) {
  const std::size_t ld = kd + 1;
  w.band.assign(ld * n, 0.0);
  for (int j = 0; j < n; ++j)
    for (int i = j; i <= std::min(n - 1, j + kd); ++i)
      w.band[(i - j) + j * ld] = icov[static_cast<std::size_t>(i) * n + j];
  return LAPACKE_dpbtrf(LAPACK_COL_MAJOR, 'L', n, kd, w.band.data(), kd + 1) == 0;
}

// The band of Z = iCov^-1 from the banded factor (the Takahashi recurrences), last column first:
//   Z[i, j] = -(1 / L[j, j]) sum_{k = j+1}^{j+kd} Z[i, k] L[k, j]           (j < i <= j + kd)
//   Z[j, j] = (1 / L[j, j]) (1 / L[j, j] - sum_{k = j+1}^{j+kd} L[k, j] Z[k, j])
// Every Z entry these read lies in the band of a later column, so the band is exact. Z is kept
// dense and symmetric (n x n, only the band written) so that the sums run over contiguous rows.
void selected_inverse(int n, int kd, Workspace& w) {
  const std::size_t ld = kd + 1;
  w.inverse.assign(static_cast<std::size_t>(n) * n, 0.0);
  const double* l = w.band.data();
  double* z = w.inverse.data();
  for (int j = n - 1; j >= 0; --j) {
    const int last = std::min(n - 1, j + kd);
    const double ljj = l[j * ld];
    const double* lj = l + j * ld - j;  // lj[k] = L[k, j]
    for (int i = last; i > j; --i) {
      const double* zi = z + static_cast<std::size_t>(i) * n;
      double sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int k = j + 1; k <= last; ++k) sum += zi[k] * lj[k];
      z[static_cast<std::size_t>(i) * n + j] = z[static_cast<std::size_t>(j) * n + i] = -sum / ljj;
    }
    const double* zj = z + static_cast<std::size_t>(j) * n;
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int k = j + 1; k <= last; ++k) sum += lj[k] * zj[k];
    z[static_cast<std::size_t>(j) * n + j] = (1 / ljj - sum) / ljj;
  }
}

// The solved patch: flux, ivar, x, and R's diagonal blocks (nspec blocks of nwave x nwave).
struct Solved {
  SolvedPatch patch;
  std::vector<double> blocks;
  std::vector<double> r_full;  // noise mode and solve_patch: all of R
};

// A^T W A over overlapping spot pairs, fluxweight and y = A^T W p.
void normal_equations(const PatchPlan& plan, const std::vector<Spot>& spots, const PatchPixels& px,
                      Workspace& w) {
  const int n = plan.nflux();
  const std::int64_t nx = plan.pixels.nx();
  w.icov.assign(static_cast<std::size_t>(n) * n, 0.0);
  w.fluxweight.assign(n, 0.0);
  w.y.assign(n, 0.0);
  for (int j = 0; j < n; ++j) {
    const Spot& a = spots[j];
    double fw = 0, y = 0;
    for (std::int64_t iy = 0; iy < a.ny; ++iy) {
      const double* av = a.pixels.data() + iy * a.nx;
      const std::int64_t base = (a.ystart + iy) * nx + a.xstart;
#pragma omp simd reduction(+ : fw, y)
      for (std::int64_t ix = 0; ix < a.nx; ++ix) {
        fw += px.ivar[base + ix] * av[ix];
        y += px.ivar[base + ix] * av[ix] * px.value[base + ix];
      }
    }
    w.fluxweight[j] = fw;
    w.y[j] = y;
    for (int k = j; k < n; ++k) {
      const Spot& b = spots[k];
      const std::int64_t x0 = std::max(a.xstart, b.xstart),
                         x1 = std::min(a.xstart + a.nx, b.xstart + b.nx);
      const std::int64_t y0 = std::max(a.ystart, b.ystart),
                         y1 = std::min(a.ystart + a.ny, b.ystart + b.ny);
      if (x1 <= x0 || y1 <= y0) continue;
      double sum = 0;
      for (std::int64_t yy = y0; yy < y1; ++yy) {
        const double* av = a.pixels.data() + (yy - a.ystart) * a.nx - a.xstart;
        const double* bv = b.pixels.data() + (yy - b.ystart) * b.nx - b.xstart;
        const double* iv = px.ivar.data() + yy * nx;
#pragma omp simd reduction(+ : sum)
        for (std::int64_t xx = x0; xx < x1; ++xx) sum += iv[xx] * av[xx] * bv[xx];
      }
      w.icov[j * n + k] = w.icov[k * n + j] = sum;
    }
  }
}

// One patch with a given regularisation; false when the Cholesky factorisation or an
// eigendecomposition fails.
bool solve(const Problem& p, const PatchPlan& plan, const PatchPixels& px,
           const std::vector<Spot>& spots, double regularize, bool full_r, Workspace& w,
           Solved& out, Sections& t) {
  auto clock = Clock::now();
  const int n = plan.nflux(), nw = plan.nwave();
  normal_equations(plan, spots, px, w);
  const double minweight = 1e-4 * *std::max_element(w.fluxweight.begin(), w.fluxweight.end());
  for (int j = 0; j < n; ++j) {
    const double a = w.fluxweight[j] < minweight ? minweight - w.fluxweight[j] : regularize;
    w.icov[j * n + j] += a * a;
  }
  const bool all_masked =
      std::all_of(px.ivar.begin(), px.ivar.end(), [](double v) { return v == 0; }) ||
      std::all_of(w.icov.begin(), w.icov.end(), [](double v) { return v == 0; });
  if (all_masked) {
    std::fill(w.icov.begin(), w.icov.end(), 0.0);
    for (int j = 0; j < n; ++j) w.icov[j * n + j] = 1e-8;
  }
  t.normal += since(clock);

  // Spectrum-major bins couple only where spots overlap: iCov is a band matrix of half width
  // kd (neighbouring fibres, nearby wavelengths). Signal mode needs C = iCov^-1 only inside each
  // spectrum's diagonal block, which lies inside that band when kd >= nwave - 1: then a banded
  // Cholesky and the selected inversion cost n kd^2 instead of n^3.
  const int kd = half_bandwidth(w.icov, n);
  const bool banded = !p.ndecorr && kd >= nw - 1 && 2 * kd < n;
  w.x = w.y;
  if (banded) {
    if (!banded_cholesky(w.icov, n, kd, w)) return false;
    LAPACKE_dpbtrs(LAPACK_COL_MAJOR, 'L', n, kd, 1, w.band.data(), kd + 1, w.x.data(), n);
  } else {
    w.factor = w.icov;
    if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', n, w.factor.data(), n) != 0) return false;
    LAPACKE_dpotrs(LAPACK_ROW_MAJOR, 'L', n, 1, w.factor.data(), n, w.x.data(), 1);
  }
  for (const double v : w.x)
    if (!std::isfinite(v)) return false;
  t.solve += since(clock);

  out.patch.flux.assign(n, 0.0);
  out.patch.ivar.assign(n, 0.0);
  out.blocks.assign(static_cast<std::size_t>(plan.nspec) * nw * nw, 0.0);
  out.r_full.clear();
  std::vector<double> norm(n, 0.0);
  if (p.ndecorr) {
    // Q = iCov^1/2 couples every bin: the full eigendecomposition.
    w.q = w.icov;
    w.eig.resize(n);
    if (LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, w.q.data(), n, w.eig.data()) != 0)
      return false;
    eigen_compose_weights(w.eig, false, true, w.f);
    out.r_full.resize(static_cast<std::size_t>(n) * n);
    compose(w.q.data(), w.f, n, out.r_full.data(), w.scratch);
    for (int i = 0; i < n; ++i) {
      double s = 0;
      for (int j = 0; j < n; ++j) s += out.r_full[i * n + j];
      norm[i] = s;
      double flux = 0;
      for (int j = 0; j < n; ++j) {
        out.r_full[i * n + j] /= s;
        flux += out.r_full[i * n + j] * w.x[j];
      }
      out.patch.flux[i] = flux;
    }
    for (int s = 0; s < plan.nspec; ++s)
      for (int r = 0; r < nw; ++r)
        for (int c = 0; c < nw; ++c)
          out.blocks[(s * nw + r) * nw + c] = out.r_full[(s * nw + r) * n + s * nw + c];
  } else {
    // C = iCov^-1 (its band, or all of it from the dense factor), then each spectrum's block.
    if (banded) {
      selected_inverse(n, kd, w);
    } else if (LAPACKE_dpotri(LAPACK_ROW_MAJOR, 'L', n, w.factor.data(), n) != 0) {
      return false;
    }
    auto c_lower = [&](int i, int j) {  // C[i, j], i >= j
      return banded ? w.inverse[static_cast<std::size_t>(i) * n + j]
                    : w.factor[static_cast<std::size_t>(i) * n + j];
    };
    for (int s = 0; s < plan.nspec; ++s) {
      w.block.resize(static_cast<std::size_t>(nw) * nw);
      for (int r = 0; r < nw; ++r)
        for (int c = 0; c <= r; ++c)
          w.block[r * nw + c] = w.block[c * nw + r] = c_lower(s * nw + r, s * nw + c);
      w.eig.resize(nw);
      if (LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', nw, w.block.data(), nw, w.eig.data()) != 0)
        return false;
      eigen_compose_weights(w.eig, true, true, w.f);
      double* rb = out.blocks.data() + static_cast<std::size_t>(s) * nw * nw;
      compose(w.block.data(), w.f, nw, rb, w.scratch);
      for (int r = 0; r < nw; ++r) {
        double sum = 0;
        for (int c = 0; c < nw; ++c) sum += rb[r * nw + c];
        norm[s * nw + r] = sum;
        double flux = 0;
        for (int c = 0; c < nw; ++c) {
          rb[r * nw + c] /= sum;
          flux += rb[r * nw + c] * w.x[s * nw + c];
        }
        out.patch.flux[s * nw + r] = flux;
      }
    }
    if (full_r) {
      out.r_full.assign(static_cast<std::size_t>(n) * n, 0.0);
      for (int s = 0; s < plan.nspec; ++s)
        for (int r = 0; r < nw; ++r)
          for (int c = 0; c < nw; ++c)
            out.r_full[(s * nw + r) * n + s * nw + c] = out.blocks[(s * nw + r) * nw + c];
    }
  }
  for (int i = 0; i < n; ++i) {
    out.patch.ivar[i] = norm[i] * norm[i];
    if (all_masked || std::abs(w.fluxweight[i]) <= 1e-8) out.patch.ivar[i] = 0;
  }
  out.patch.xflux = w.x;
  t.decorrelate += since(clock);
  return true;
}

// As the reference: again with regularize = 1e-4 after a failure; flux 0, ivar 0, R = I if
// that fails too. Returns whether the patch was retried.
bool solve_with_retry(const Problem& p, const PatchPlan& plan, const PatchPixels& px,
                      const std::vector<Spot>& spots, bool full_r, Workspace& w, Solved& out,
                      Sections& t) {
  if (solve(p, plan, px, spots, p.regularize, full_r, w, out, t)) return false;
  if (p.regularize < 1e-4 && solve(p, plan, px, spots, 1e-4, full_r, w, out, t)) return true;
  const int n = plan.nflux(), nw = plan.nwave();
  out.patch.flux.assign(n, 0.0);
  out.patch.ivar.assign(n, 0.0);
  out.patch.xflux.assign(n, 0.0);
  out.blocks.assign(static_cast<std::size_t>(plan.nspec) * nw * nw, 0.0);
  for (int s = 0; s < plan.nspec; ++s)
    for (int r = 0; r < nw; ++r) out.blocks[(s * nw + r) * nw + r] = 1;
  out.r_full.clear();
  if (full_r) {
    out.r_full.assign(static_cast<std::size_t>(n) * n, 0.0);
    for (int i = 0; i < n; ++i) out.r_full[i * n + i] = 1;
  }
  return true;
}

}  // namespace

SCIPROXY_SPECEX_EXTRACT {
  const ThreadCount threads(p.nparallel);
  const SingleThreadedBlas blas;
  const int nthreads = max_threads();
  std::vector<Sections> sections(nthreads);
  std::vector<std::vector<double>> models(p.full_output ? p.npatches : 0);
  std::int64_t retried = 0;
  RegionStop stop;
  auto region = Timers::region(ctx.timers, "patches");
#pragma omp parallel reduction(+ : retried)
  {
    Workspace w;
    Sections& t = sections[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t ip = 0; ip < p.npatches; ++ip) {
      if (stop.poll(ip)) continue;
      const PatchPlan& plan = p.patches[ip];
      auto clock = Clock::now();
      const PatchPixels px = patch_pixels(p, plan);
      const std::vector<Spot> spots = patch_spots(p, plan);
      t.spots += since(clock);
      Solved solved;
      retried += solve_with_retry(p, plan, px, spots, false, w, solved, t) ? 1 : 0;
      clock = Clock::now();
      const int nw = plan.nwave();
      auto r_block = [&](int s, int row, int col) {
        return solved.blocks[(static_cast<std::size_t>(s) * nw + row) * nw + col];
      };
      if (p.full_output) {
        std::vector<double> chi2pix, pixmask;
        patch_diagnostics(plan, spots, px, solved.patch.xflux, p.psferr, chi2pix, pixmask);
        keep_patch(p, plan, solved.patch, r_block, &chi2pix, &pixmask, out);
        models[ip] = core_model(plan, spots, solved.patch.xflux);
      } else {
        keep_patch(p, plan, solved.patch, r_block, nullptr, nullptr, out);
      }
      t.outputs += since(clock);
    }
  }
  stop.throw_if_stopped("ex2d", p.npatches, "patches");
  for (std::int64_t ip = 0; ip < static_cast<std::int64_t>(models.size()); ++ip)
    add_model(p, p.patches[ip], models[ip], out.model);
  out.retried_patches += retried;
  if (ctx.timers) {
    // Thread-seconds per section over the team, per thread: the share of the parallel loop.
    Sections sum;
    for (const Sections& s : sections) {
      sum.spots += s.spots;
      sum.normal += s.normal;
      sum.solve += s.solve;
      sum.decorrelate += s.decorrelate;
      sum.outputs += s.outputs;
    }
    ctx.timers->record("spots", sum.spots / nthreads);
    ctx.timers->record("normal_equations", sum.normal / nthreads);
    ctx.timers->record("solve", sum.solve / nthreads);
    ctx.timers->record("decorrelate", sum.decorrelate / nthreads);
    ctx.timers->record("outputs", sum.outputs / nthreads);
  }
}

SCIPROXY_SPECEX_SOLVE_PATCH {
  const ThreadCount threads(p.nparallel);
  auto region = Timers::region(ctx.timers, "patch");
  const PatchPlan& plan = p.patches[0];
  const PatchPixels px = patch_pixels(p, plan);
  const std::vector<Spot> spots = patch_spots(p, plan);
  Workspace w;
  Solved solved;
  Sections t;
  result.retried = solve_with_retry(p, plan, px, spots, true, w, solved, t);
  result.nflux = plan.nflux();
  result.flux = std::move(solved.patch.flux);
  result.ivar = std::move(solved.patch.ivar);
  result.xflux = std::move(solved.patch.xflux);
  result.resolution = std::move(solved.r_full);
  result.icov = std::move(w.icov);
}

}  // namespace sciproxy::specex::kernels::cpu
