// CUDA backend of specex: many patches per launch (docs/kernels/specex_cuda_plan.md).
//
//   A[p, j] = spot of flux bin j at pixel p,  iCov = A^T W A + diag(a^2),  x = iCov^-1 A^T W p
//   signal mode Q_b = C_b^(-1/2) (C = iCov^-1), noise mode Q = iCov^(1/2);  R = diag(Q 1)^-1 Q
//
// Patches are grouped into batches of equal spectrum count and nearly equal wavelength count;
// within a batch every patch is padded to S spectra x Wv bins (n = S Wv unknowns, bin
// j = s Wv + i), padded bins decoupled (zero rows and columns, a positive diagonal), so one
// batched call factors or decomposes the whole batch. Per batch, on one of two pipelines (a
// stream, a cuSOLVER and a cuBLAS handle and their own buffers each, so that one batch's
// kernels overlap the other's):
//
//   spots            one thread per flux bin: trace, parameters and pixels (math.hpp), clipped
//                    to the patch (specter's xypix), stored compactly with their box;
//   normal_equations one block per (flux bin j, patch): W A_j in shared memory, then a warp
//                    per k >= j sums the overlap of spots j and k into iCov[j, k] = iCov[k, j];
//                    y_j, fluxweight_j and A_j^T [ivar > 0]; then one block per patch adds the
//                    prior (minweight), handles an all-masked patch and sets the padding;
//   solve            cusolverDnDpotrfBatched + cusolverDnDpotrsBatched (lower, in a copy);
//   decorrelate      signal: Z = L^-1 (cublasDtrsmBatched), C_b = Z_b^T Z_b for each spectrum
//                    (cublasDgemmStridedBatched over the batch, one call per spectrum index),
//                    the batch's S blocks decomposed by one cusolverDnXsyevBatched call;
//                    noise: iCov decomposed whole; Q = (V f(L)) V^T by a strided batched GEMM,
//                    f as specter's eigen_compose (eigenvalues below 10 eps max clipped);
//   outputs          one block per patch: s = Q 1, R = diag(1/s) Q, flux = R x, ivar = s^2,
//                    the resolution diagonals of the kept bins; full_output: a thread per
//                    pixel for A x, chi and the patch's core model, a thread per bin for
//                    chi2pix and pixmask_fraction.
//
// Every output bin is written by the one patch that keeps it. The model image is summed at the
// end from every patch's core model (kept in a slot per patch) by a thread per pixel that adds
// the patches covering it in patch order: deterministic, and a retried patch (Cholesky failed,
// solved again with regularize = 1e-4 after the first pass) replaces its slot before that.
// Buffers are held per device across calls (grow-only, freed at exit); nothing is allocated in
// the per-batch loop. Timers: the regions of kernels.hpp summed over batches from CUDA events
// (the two pipelines overlap, so the sum can exceed the wall time), plus "upload" and
// "download".
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "core/cuda_check.cuh"
#include "core/cuda_resources.cuh"
#include "sciproxy/core/cancel.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/specex.hpp"
#include "specex/kernels.hpp"
#include "specex/math.hpp"

namespace sciproxy::specex::kernels::cuda {

namespace {

[[noreturn]] void throw_library_error(const char* library, int status, const char* call,
                                      const char* file, int line) {
  throw RuntimeError(std::string(library) + " error " + std::to_string(status) + " in " + call +
                     " at " + file + ":" + std::to_string(line));
}

#define SPECEX_CUSOLVER_CHECK(call)                                                      \
  do {                                                                                   \
    const cusolverStatus_t specex_status_ = (call);                                      \
    if (specex_status_ != CUSOLVER_STATUS_SUCCESS)                                       \
      throw_library_error("cuSOLVER", static_cast<int>(specex_status_), #call, __FILE__, \
                          __LINE__);                                                     \
  } while (0)

#define SPECEX_CUBLAS_CHECK(call)                                                                 \
  do {                                                                                            \
    const cublasStatus_t specex_status_ = (call);                                                 \
    if (specex_status_ != CUBLAS_STATUS_SUCCESS)                                                  \
      throw_library_error("cuBLAS", static_cast<int>(specex_status_), #call, __FILE__, __LINE__); \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Device data.

// The PSF as the spot kernel reads it (pointers into device copies of the PsfModel's arrays).
struct DevicePsf {
  const double *x_coeff, *y_coeff, *params, *wmin_spec, *wmax_spec;
  double x_lo, x_hi, y_lo, y_hi, param_lo, param_hi;
  int x_ncoeff, y_ncoeff, param_ncoeff, nparams, nspec;
  int hsizex, hsizey, ghdegx, ghdegy;
  bool has_tail;
};

// One patch of a batch.
struct PatchDesc {
  std::int64_t xmin, ymin;  // CCD corner of the patch's pixels
  std::int64_t iwave;       // first output column of the core
  std::int64_t model_slot;  // its core model's offset in the model slots (full output)
  double wfirst, regularize;
  int pnx, pny;                   // pixels of the patch
  int speclo, nspec, nwave;       // PSF fibre of spectrum 0; spectra and bins solved
  int keeplo, nkeep, nlo, ncore;  // kept spectra and core bins
  int out_row0;                   // output row of spectrum 0 (speclo - specmin)
  int fallback;                   // failed twice: flux 0, ivar 0, x 0, R = I (the reference's)
  std::int64_t wave_offset;       // its wavelengths in the wavelength table, -1: the linear grid
};

// The clipped box of a spot in CCD pixels; nx = ny = 0: empty.
struct alignas(16) SpotBox {
  int x0, y0, nx, ny;
};

// Where the image lies: pixel (x, y) of the CCD is image[(y - ymin) * nx + (x - xmin)].
struct ImageGeometry {
  std::int64_t xmin, ymin, nx, ny;
};

// The kept outputs, (nspec_out, nwave_out) each (resolution: (nspec_out, 2 ndiag + 1, nwave_out)).
struct OutputPointers {
  double *flux, *ivar, *resolution, *chi2pix, *pixmask_fraction;
  std::int64_t nwave;
  int ndiag;
};

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr double kEps = 2.220446049250313e-16;  // np.finfo(np.float64).eps

__device__ __forceinline__ bool real_bin(const PatchDesc& d, int s, int i) {
  return s < d.nspec && i < d.nwave;
}

__device__ __forceinline__ bool kept_bin(const PatchDesc& d, int s, int i) {
  return s >= d.keeplo && s < d.keeplo + d.nkeep && i >= d.nlo && i < d.nlo + d.ncore;
}

__device__ __forceinline__ std::int64_t image_index(const ImageGeometry& g, std::int64_t x,
                                                    std::int64_t y) {
  return (y - g.ymin) * g.nx + (x - g.xmin);
}

// Sum over the block in a fixed order (warp shuffles, then warp 0 over the warps): the same
// bits on every run. Every thread gets the total. shared holds kWarps doubles.
__device__ double block_sum(double v, double* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += shared[w];
  return total;
}

__device__ double block_max(double v, double* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_down_sync(0xffffffffu, v, o));
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double m = shared[0];
  for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) m = fmax(m, shared[w]);
  return m;
}

// specter's eigen_compose on one eigenvalue w of a matrix whose largest is wmax (the reference
// backend's rules, threshold 10 eps): invert and sqr give 1/sqrt(w), floored at sqrt(wmax) thr;
// sqr alone gives sqrt(w) where w > sqrt(wmax) thr, else sqrt(wmax) thr (specter's comparison).
__device__ __forceinline__ double compose_value(double w, double wmax, bool invert, bool sqr) {
  const double threshold = 10.0 * kEps;
  if (invert && sqr) {
    const double minval = sqrt(wmax) * threshold, root = sqrt(w);
    return root > minval ? 1.0 / root : 1.0 / minval;
  }
  if (invert) {
    const double minval = wmax * threshold;
    return w > minval ? 1.0 / w : 1.0 / minval;
  }
  if (sqr) {
    const double minval = sqrt(wmax) * threshold;
    return w > minval ? sqrt(w) : minval;
  }
  const double minval = wmax * threshold;
  return w > minval ? w : minval;
}

// ---------------------------------------------------------------------------------------------
// Kernels.

// One thread per flux bin (grid-stride; per-thread scratch in global memory, scratch_per_thread
// doubles: the unclipped pixels, the parameter values, spot_pixels' scratch).
__global__ void __launch_bounds__(kThreads)
    spots_kernel(DevicePsf psf, const PatchDesc* __restrict__ desc, int nb, int S, int Wv,
                 double dw, const double* __restrict__ wave_table, int side_x, int side_y, int slot,
                 double* __restrict__ spots, SpotBox* __restrict__ boxes,
                 double* __restrict__ scratch, int scratch_per_thread) {
  const std::int64_t n = static_cast<std::int64_t>(S) * Wv;
  const std::int64_t total = nb * n;
  const std::int64_t gid = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  double* pixels = scratch + gid * scratch_per_thread;
  double* values = pixels + side_x * side_y;
  double* spot_scratch = values + psf.nparams;
  for (std::int64_t t = gid; t < total; t += stride) {
    const int b = static_cast<int>(t / n);
    const int j = static_cast<int>(t % n);
    const int s = j / Wv, i = j % Wv;
    const PatchDesc& d = desc[b];
    SpotBox box{0, 0, 0, 0};
    if (real_bin(d, s, i)) {
      const int ispec = d.speclo + s;
      // numpy.arange(wfirst, ..., dw) as specter builds it (kernels.hpp's patch_wavelength).
      const double wavelength = d.wave_offset >= 0 ? wave_table[d.wave_offset + i]
                                : i == 0           ? d.wfirst
                                                   : d.wfirst + i * ((d.wfirst + dw) - d.wfirst);
      const double xc =
          legendre_sum(psf.x_coeff + static_cast<std::int64_t>(ispec) * psf.x_ncoeff, psf.x_ncoeff,
                       legendre_argument(wavelength, psf.x_lo, psf.x_hi));
      const double yc =
          legendre_sum(psf.y_coeff + static_cast<std::int64_t>(ispec) * psf.y_ncoeff, psf.y_ncoeff,
                       legendre_argument(wavelength, psf.y_lo, psf.y_hi));
      const SpotAxis ax = spot_axis(xc, psf.hsizex), ay = spot_axis(yc, psf.hsizey);
      const bool on_rows =
          !(wavelength < psf.wmin_spec[ispec]) && !(wavelength > psf.wmax_spec[ispec]);
      if (on_rows && ax.n > 0 && ay.n > 0 && ax.n <= side_x && ay.n <= side_y) {
        spot_parameters(psf.params, psf.nparams, psf.nspec, psf.param_ncoeff, psf.param_lo,
                        psf.param_hi, ispec, wavelength, values);
        if (spot_pixels(values, psf.ghdegx, psf.ghdegy, psf.has_tail, xc, yc, ax, ay, pixels,
                        spot_scratch)) {
          const std::int64_t x0 = ax.start > d.xmin ? ax.start : d.xmin;
          const std::int64_t x1 =
              ax.start + ax.n < d.xmin + d.pnx ? ax.start + ax.n : d.xmin + d.pnx;
          const std::int64_t y0 = ay.start > d.ymin ? ay.start : d.ymin;
          const std::int64_t y1 =
              ay.start + ay.n < d.ymin + d.pny ? ay.start + ay.n : d.ymin + d.pny;
          if (x1 > x0 && y1 > y0) {
            box = SpotBox{static_cast<int>(x0), static_cast<int>(y0), static_cast<int>(x1 - x0),
                          static_cast<int>(y1 - y0)};
            double* out = spots + t * slot;
            for (int yy = 0; yy < box.ny; ++yy)
              for (int xx = 0; xx < box.nx; ++xx)
                out[yy * box.nx + xx] = pixels[(y0 - ay.start + yy) * ax.n + (x0 - ax.start + xx)];
          }
        }
      }
    }
    boxes[t] = box;
  }
}

// Block (j, b): row j of patch b's A^T W A for k >= j (mirrored), and y_j, fluxweight_j,
// A_j^T [ivar > 0]. Dynamic shared memory: slot doubles (W A_j). Padded rows get zeros (their
// diagonal is set by prior_kernel).
__global__ void __launch_bounds__(kThreads)
    normal_kernel(const PatchDesc* __restrict__ desc, int S, int Wv, int slot,
                  const double* __restrict__ spots, const SpotBox* __restrict__ boxes,
                  const double* __restrict__ image, const double* __restrict__ ivar,
                  ImageGeometry g, double* __restrict__ icov, double* __restrict__ y,
                  double* __restrict__ fluxweight, double* __restrict__ unmasked) {
  extern __shared__ double wa[];
  __shared__ double reduce[kWarps];
  const int n = S * Wv;
  const int j = blockIdx.x, b = blockIdx.y;
  const PatchDesc& d = desc[b];
  const std::int64_t bn = static_cast<std::int64_t>(b) * n;
  const SpotBox mj = boxes[bn + j];
  const double* aj = spots + (bn + j) * slot;
  const int npx = mj.nx * mj.ny;
  double sw = 0, sy = 0, sm = 0;
  for (int q = threadIdx.x; q < npx; q += blockDim.x) {
    const std::int64_t at = image_index(g, mj.x0 + q % mj.nx, mj.y0 + q / mj.nx);
    const double a = aj[q], iv = ivar[at];
    const double w = iv * a;
    wa[q] = w;
    sw += w;
    sy += w * image[at];
    sm += iv > 0 ? a : 0.0;
  }
  sw = block_sum(sw, reduce);
  sy = block_sum(sy, reduce);
  sm = block_sum(sm, reduce);
  if (threadIdx.x == 0) {
    y[bn + j] = sy;
    fluxweight[bn + j] = sw;
    unmasked[bn + j] = sm;
  }
  __syncthreads();  // wa complete
  (void)d;
  double* ic = icov + static_cast<std::int64_t>(b) * n * n;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int k = j + warp; k < n; k += kWarps) {
    const SpotBox mk = boxes[bn + k];
    const int ox0 = max(mj.x0, mk.x0), ox1 = min(mj.x0 + mj.nx, mk.x0 + mk.nx);
    const int oy0 = max(mj.y0, mk.y0), oy1 = min(mj.y0 + mj.ny, mk.y0 + mk.ny);
    double v = 0;
    if (ox1 > ox0 && oy1 > oy0) {
      const int ow = ox1 - ox0, count = ow * (oy1 - oy0);
      const double* ak = spots + (bn + k) * slot;
      for (int q = lane; q < count; q += 32) {
        const int xx = ox0 + q % ow, yy = oy0 + q / ow;
        v += wa[(yy - mj.y0) * mj.nx + (xx - mj.x0)] *
             __ldg(ak + (yy - mk.y0) * mk.nx + (xx - mk.x0));
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    }
    if (lane == 0) {
      ic[j + static_cast<std::int64_t>(k) * n] = v;
      ic[k + static_cast<std::int64_t>(j) * n] = v;
    }
  }
}

// Block b: the prior diag(alpha^2) (alpha_j = regularize, or minweight - fluxweight_j below
// minweight = 1e-4 max fluxweight), iCov = 1e-8 I for an all-masked patch (flagged in
// masked[b]), the padded diagonal set to the largest real one (so that it never
// raises the eigenvalue floor of noise mode), and x = y (potrs solves in place).
__global__ void __launch_bounds__(256)
    prior_kernel(const PatchDesc* __restrict__ desc, int S, int Wv, const double* __restrict__ ivar,
                 ImageGeometry g, const double* __restrict__ fluxweight,
                 const double* __restrict__ y, double* __restrict__ icov, double* __restrict__ x,
                 int* __restrict__ masked) {
  __shared__ double reduce[8];
  const int n = S * Wv, b = blockIdx.x;
  const PatchDesc& d = desc[b];
  const std::int64_t bn = static_cast<std::int64_t>(b) * n;
  double* ic = icov + bn * n;
  int any = 0;
  const int npix = d.pnx * d.pny;
  for (int q = threadIdx.x; q < npix && !any; q += blockDim.x)
    any = ivar[image_index(g, d.xmin + q % d.pnx, d.ymin + q / d.pnx)] > 0;
  const bool unmasked = __syncthreads_or(any) != 0;
  double m = 0;
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    if (real_bin(d, j / Wv, j % Wv)) m = fmax(m, fluxweight[bn + j]);
  const double minweight = 1e-4 * block_max(m, reduce);
  double dmax = 0;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    x[bn + j] = y[bn + j];
    if (!real_bin(d, j / Wv, j % Wv)) continue;
    const double fw = fluxweight[bn + j];
    const double alpha = fw < minweight ? minweight - fw : d.regularize;
    double& diag = ic[j + static_cast<std::int64_t>(j) * n];
    diag += alpha * alpha;
    dmax = fmax(dmax, diag);
  }
  dmax = block_max(dmax, reduce);
  // The reference's all-masked patch: no unmasked pixel, or iCov all 0 (with w >= 0 and A >= 0
  // an off-diagonal entry is 0 wherever the diagonal is: Cauchy-Schwarz). Off-diagonal entries
  // are 0 then too (W = 0, or every spot's weighted column is 0).
  const bool all_masked = !unmasked || !(dmax > 0);
  if (all_masked) {
    for (int j = threadIdx.x; j < n; j += blockDim.x)
      if (real_bin(d, j / Wv, j % Wv)) ic[j + static_cast<std::int64_t>(j) * n] = 1e-8;
    dmax = 1e-8;
  }
  const double pad = dmax > 0 ? dmax : 1.0;
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    if (!real_bin(d, j / Wv, j % Wv)) ic[j + static_cast<std::int64_t>(j) * n] = pad;
  if (threadIdx.x == 0) masked[b] = all_masked ? 1 : 0;
}

// ptrs[b] = base + b * stride, for the pointer-array batched calls.
__global__ void pointers_kernel(double* base, std::int64_t stride, int count, double** ptrs) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < count) ptrs[b] = base + b * stride;
}

// Block b: whether patch b's solve failed (the reference's: the factorisation, a non-finite x or
// an eigendecomposition), into failed[b]; a fallback patch's x is set to 0.
__global__ void failures_kernel(const PatchDesc* __restrict__ desc, int n, int neig,
                                const int* __restrict__ potrf_info,
                                const int* __restrict__ syev_info, double* __restrict__ x,
                                int* __restrict__ failed) {
  const int b = blockIdx.x;
  const std::int64_t bn = static_cast<std::int64_t>(b) * n;
  int bad = 0;
  if (desc[b].fallback) {
    for (int j = threadIdx.x; j < n; j += blockDim.x) x[bn + j] = 0;
  } else {
    for (int j = threadIdx.x; j < n; j += blockDim.x) bad |= !isfinite(x[bn + j]);
    for (int k = threadIdx.x; k < neig; k += blockDim.x) bad |= syev_info[b * neig + k] != 0;
    if (threadIdx.x == 0) bad |= potrf_info[b] != 0;
  }
  bad = __syncthreads_or(bad);
  if (threadIdx.x == 0) failed[b] = bad;
}

// count n x n identity matrices.
__global__ void identity_kernel(double* a, int n, int count) {
  const std::int64_t total = static_cast<std::int64_t>(count) * n * n;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t e = t % (static_cast<std::int64_t>(n) * n);
    a[t] = (e % n) == (e / n) ? 1.0 : 0.0;
  }
}

// Block (s, b): the padded entries of C_b (Wv x Wv): zero rows and columns with the largest real
// diagonal (identity for a padded spectrum), so the eigenvalue floor stays the real block's.
__global__ void pad_blocks_kernel(const PatchDesc* __restrict__ desc, int S, int Wv,
                                  double* __restrict__ blocks) {
  __shared__ double reduce[kWarps];
  const int s = blockIdx.x, b = blockIdx.y;
  const PatchDesc& d = desc[b];
  double* c = blocks + (static_cast<std::int64_t>(b) * S + s) * Wv * Wv;
  const int nw = s < d.nspec ? d.nwave : 0;
  double dmax = 0;
  for (int i = threadIdx.x; i < nw; i += blockDim.x) dmax = fmax(dmax, c[i + i * Wv]);
  dmax = block_max(dmax, reduce);
  const double pad = dmax > 0 ? dmax : 1.0;
  for (int e = threadIdx.x; e < Wv * Wv; e += blockDim.x) {
    const int r = e % Wv, col = e / Wv;
    if (r < nw && col < nw) continue;
    c[e] = r == col ? pad : 0.0;
  }
}

// V[:, c] *= f(w_c) for count matrices of size m (eigen_compose's middle factor), into vd.
__global__ void __launch_bounds__(kThreads)
    scale_columns_kernel(const double* __restrict__ v, const double* __restrict__ w, int m,
                         int count, bool invert, double* __restrict__ vd) {
  __shared__ double reduce[kWarps];
  const int mat = blockIdx.x;
  if (mat >= count) return;
  const double* wm = w + static_cast<std::int64_t>(mat) * m;
  double wmax = -INFINITY;
  for (int c = threadIdx.x; c < m; c += blockDim.x) wmax = fmax(wmax, wm[c]);
  wmax = block_max(wmax, reduce);
  const std::int64_t base = static_cast<std::int64_t>(mat) * m * m;
  for (std::int64_t e = threadIdx.x; e < static_cast<std::int64_t>(m) * m; e += blockDim.x)
    vd[base + e] = v[base + e] * compose_value(wm[e / m], wmax, invert, true);
}

// Block b: s = Q 1 over the real bins, flux = R x with R = diag(1/s) Q, ivar = s^2 (0 where
// |fluxweight| <= 1e-8 or the patch is masked), and the kept bins' outputs. Q: signal mode the
// S blocks (Wv x Wv, column-major) per patch, noise mode n x n.
__global__ void __launch_bounds__(256)
    finish_kernel(const PatchDesc* __restrict__ desc, int S, int Wv, bool noise,
                  const double* __restrict__ q, const double* __restrict__ x,
                  const double* __restrict__ fluxweight, const int* __restrict__ masked,
                  double* __restrict__ rowsum, OutputPointers out) {
  const int n = S * Wv, b = blockIdx.x;
  const PatchDesc& d = desc[b];
  const std::int64_t bn = static_cast<std::int64_t>(b) * n;
  auto Q = [&](int r, int c) -> double {
    if (noise) return q[bn * n + r + static_cast<std::int64_t>(c) * n];
    const int s = r / Wv;  // same block as c (the caller asks only for those)
    return q[(bn + static_cast<std::int64_t>(s) * Wv) * Wv + (r % Wv) + (c % Wv) * Wv];
  };
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    const int s = r / Wv, i = r % Wv;
    if (!real_bin(d, s, i)) continue;
    double sum = 0;
    if (noise) {
      for (int c = 0; c < n; ++c)
        if (real_bin(d, c / Wv, c % Wv)) sum += Q(r, c);
    } else {
      for (int c = s * Wv; c < s * Wv + d.nwave; ++c) sum += Q(r, c);
    }
    rowsum[bn + r] = sum;
  }
  __syncthreads();
  const int nd = 2 * out.ndiag + 1;
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    const int s = r / Wv, i = r % Wv;
    if (!real_bin(d, s, i) || !kept_bin(d, s, i)) continue;
    const double sr = rowsum[bn + r];
    double flux = 0;
    if (noise) {
      for (int c = 0; c < n; ++c)
        if (real_bin(d, c / Wv, c % Wv)) flux += (Q(r, c) / sr) * x[bn + c];
    } else {
      for (int c = s * Wv; c < s * Wv + d.nwave; ++c) flux += (Q(r, c) / sr) * x[bn + c];
    }
    double iv = sr * sr;
    if (!(fabs(fluxweight[bn + r]) > 1e-8) || masked[b]) iv = 0;
    if (d.fallback) flux = iv = 0;
    const std::int64_t row = d.out_row0 + s;
    const std::int64_t col = d.iwave + i - d.nlo;
    out.flux[row * out.nwave + col] = flux;
    out.ivar[row * out.nwave + col] = iv;
    for (int k = 0; k < nd; ++k) {
      const int ri = i - out.ndiag + k;
      double v = 0;
      if (d.fallback)
        v = ri == i ? 1.0 : 0.0;
      else if (ri >= 0 && ri < d.nwave)
        v = Q(s * Wv + ri, r) / rowsum[bn + s * Wv + ri];
      out.resolution[(row * nd + k) * out.nwave + col] = v;
    }
  }
}

// Block (pixel chunk, b): the patch's model A x (NaN -> 0), chi^2 and [totivar > 0] per pixel
// (into the batch's pixel buffers) and the core model A_core x_core into the patch's slot.
__global__ void __launch_bounds__(256)
    pixels_kernel(const PatchDesc* __restrict__ desc, int S, int Wv, int slot, int npix_max,
                  const double* __restrict__ spots, const SpotBox* __restrict__ boxes,
                  const double* __restrict__ x, const double* __restrict__ image,
                  const double* __restrict__ ivar, ImageGeometry g, double psferr,
                  double* __restrict__ chi2, double* __restrict__ valid,
                  double* __restrict__ model_slots) {
  const int n = S * Wv, b = blockIdx.y;
  const PatchDesc& d = desc[b];
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= d.pnx * d.pny) return;
  const int px = static_cast<int>(d.xmin) + p % d.pnx, py = static_cast<int>(d.ymin) + p / d.pnx;
  const std::int64_t bn = static_cast<std::int64_t>(b) * n;
  double m = 0, mcore = 0;
  for (int s = 0; s < d.nspec; ++s) {
    for (int i = 0; i < d.nwave; ++i) {
      const int j = s * Wv + i;
      const SpotBox box = boxes[bn + j];
      if (px < box.x0 || px >= box.x0 + box.nx || py < box.y0 || py >= box.y0 + box.ny) continue;
      const double xj = isnan(x[bn + j]) ? 0.0 : x[bn + j];  // the reference's NaN -> 0
      const double ax =
          __ldg(spots + (bn + j) * slot + (py - box.y0) * box.nx + (px - box.x0)) * xj;
      m += ax;
      if (kept_bin(d, s, i)) mcore += ax;
    }
  }
  if (isnan(m)) m = 0;
  const std::int64_t at = image_index(g, px, py);
  const double iv = ivar[at];
  const double e = m * psferr + 1e-32;
  const double modelivar = 1.0 / (e * e);
  const double totivar = (modelivar > 0 && iv > 0) ? 1.0 / (1.0 / modelivar + 1.0 / iv) : 0.0;
  const double chi = (image[at] - m) * sqrt(totivar);
  const std::int64_t bp = static_cast<std::int64_t>(b) * npix_max + p;
  chi2[bp] = chi * chi;
  valid[bp] = totivar > 0 ? 1.0 : 0.0;
  if (model_slots) model_slots[d.model_slot + p] = mcore;
}

// One thread per (bin, patch): chi2pix = A^T chi^2 / A^T [totivar > 0] (0 where that is 0) and
// pixmask_fraction = 1 - A^T [ivar > 0], for the kept bins.
__global__ void __launch_bounds__(kThreads)
    bins_kernel(const PatchDesc* __restrict__ desc, int S, int Wv, int slot, int npix_max,
                const double* __restrict__ spots, const SpotBox* __restrict__ boxes,
                const double* __restrict__ chi2, const double* __restrict__ valid,
                const double* __restrict__ unmasked, OutputPointers out) {
  const int n = S * Wv, b = blockIdx.y;
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  const PatchDesc& d = desc[b];
  const int s = j / Wv, i = j % Wv;
  if (!real_bin(d, s, i) || !kept_bin(d, s, i)) return;
  const std::int64_t bn = static_cast<std::int64_t>(b) * n;
  const SpotBox box = boxes[bn + j];
  const double* a = spots + (bn + j) * slot;
  const std::int64_t bp = static_cast<std::int64_t>(b) * npix_max;
  double num = 0, den = 0;
  for (int yy = 0; yy < box.ny; ++yy)
    for (int xx = 0; xx < box.nx; ++xx) {
      const int p = static_cast<int>((box.y0 + yy - d.ymin) * d.pnx + (box.x0 + xx - d.xmin));
      const double av = a[yy * box.nx + xx];
      num += av * chi2[bp + p];
      den += av * valid[bp + p];
    }
  const std::int64_t row = d.out_row0 + s;
  const std::int64_t col = d.iwave + i - d.nlo;
  out.chi2pix[row * out.nwave + col] = den > 0 ? num / den : 0.0;
  out.pixmask_fraction[row * out.nwave + col] = 1.0 - unmasked[bn + j];
}

// The patches' boxes for the final sum of the model image.
struct ModelBox {
  std::int64_t xmin, ymin, slot;
  int pnx, pny;
};

// One thread per image pixel: model += the core models of the patches covering it, in patch
// order (row_patches lists, per image row, the patches whose rows cover it, in patch order).
__global__ void model_sum_kernel(ImageGeometry g, const std::int64_t* __restrict__ row_start,
                                 const int* __restrict__ row_patches,
                                 const ModelBox* __restrict__ mboxes,
                                 const double* __restrict__ model_slots,
                                 double* __restrict__ model) {
  const std::int64_t total = g.nx * g.ny;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = t / g.nx, px = g.xmin + t % g.nx, py = g.ymin + r;
    double v = model[t];
    for (std::int64_t e = row_start[r]; e < row_start[r + 1]; ++e) {
      const ModelBox mb = mboxes[row_patches[e]];
      if (px < mb.xmin || px >= mb.xmin + mb.pnx) continue;
      v += model_slots[mb.slot + (py - mb.ymin) * mb.pnx + (px - mb.xmin)];
    }
    model[t] = v;
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

using cuda_detail::NvtxRange;

// Grow-only device memory: reserve() keeps a large enough allocation.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { release(); }
  void reserve(std::size_t bytes) {
    if (bytes <= capacity_) return;
    release();
    const std::size_t rounded = (bytes + 255) / 256 * 256;
    SCIPROXY_CUDA_CHECK(cudaMalloc(&ptr_, rounded));
    capacity_ = rounded;
  }
  void release() noexcept {
    if (ptr_) (void)cudaFree(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
  }
  template <class U>
  U* as() const {
    return static_cast<U*>(ptr_);
  }
  std::size_t capacity() const { return capacity_; }

 private:
  void* ptr_ = nullptr;
  std::size_t capacity_ = 0;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (ptr_) (void)cudaFreeHost(ptr_);
  }
  void reserve(std::size_t bytes) {
    if (bytes <= capacity_) return;
    if (ptr_) (void)cudaFreeHost(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
    SCIPROXY_CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
    capacity_ = bytes;
  }
  template <class U>
  U* as() const {
    return static_cast<U*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  std::size_t capacity_ = 0;
};

enum Stage { kStart, kSpots, kNormal, kSolve, kDecorrelate, kOutputs, kStages };
constexpr const char* kStageNames[kStages - 1] = {"spots", "normal_equations", "solve",
                                                  "decorrelate", "outputs"};

// What one batch solves: patch indices and the padded shape.
struct Batch {
  std::vector<int> patches;
  int S = 0, Wv = 0, npix_max = 0;
  int pass = 0;  // 0: the caller's regularize; 1: regularize = 1e-4; 2: the fallback
};

// The largest batch the buffers are sized for.
struct Capacity {
  int batch = 0, n = 0, S = 0, Wv = 0, npix = 0, slot = 0;
};

// A stream with its library handles, buffers and timing events: one batch in flight at a time.
struct Pipeline {
  cudaStream_t stream = nullptr;
  cusolverDnHandle_t solver = nullptr;
  cusolverDnParams_t params = nullptr;
  cublasHandle_t blas = nullptr;
  std::array<cudaEvent_t, kStages> events{};
  Buffer desc, spots, boxes, icov, factor, work, blocks, y, x, fluxweight, unmasked, eig, rowsum,
      info, syev_info, masked, ptr_factor, ptr_x, ptr_work, chi2, valid, scratch, syev_workspace;
  std::vector<char> syev_host_workspace;
  PinnedBuffer host_desc, host_info;
  // The batch in flight, an index into the run's batches (harvested when the pipeline is next
  // used or at the end); -1: none.
  std::int64_t in_flight = -1;
  bool batched_syev = true;  // cusolverDnXsyevBatched takes this shape; else one Xsyevd each

  Pipeline() = default;
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;
  ~Pipeline() {
    if (stream) (void)cudaStreamSynchronize(stream);
    for (cudaEvent_t e : events)
      if (e) (void)cudaEventDestroy(e);
    if (params) (void)cusolverDnDestroyParams(params);
    if (solver) (void)cusolverDnDestroy(solver);
    if (blas) (void)cublasDestroy(blas);
    if (stream) (void)cudaStreamDestroy(stream);
    (void)cudaGetLastError();
  }
  void create() {
    if (stream) return;
    SCIPROXY_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (cudaEvent_t& e : events) SCIPROXY_CUDA_CHECK(cudaEventCreate(&e));
    SPECEX_CUSOLVER_CHECK(cusolverDnCreate(&solver));
    SPECEX_CUSOLVER_CHECK(cusolverDnSetStream(solver, stream));
    SPECEX_CUSOLVER_CHECK(cusolverDnCreateParams(&params));
    SPECEX_CUBLAS_CHECK(cublasCreate(&blas));
    SPECEX_CUBLAS_CHECK(cublasSetStream(blas, stream));
  }
};

constexpr int kPipelines = 2;
constexpr int kMaxBatch = 256;
constexpr int kMaxPadWave = 8;  // a batch's patches differ by at most this many bins

// Everything one device holds between calls.
struct Engine {
  int device = -1;
  std::array<Pipeline, kPipelines> pipes;
  Buffer psf_x, psf_y, psf_params, psf_wmin, psf_wmax, waves;
  Buffer image, ivar, flux, out_ivar, resolution, chi2pix, pixmask, model, model_slots, row_start,
      row_patches, model_boxes;
  cudaEvent_t upload_begin = nullptr, upload_end = nullptr, download_begin = nullptr,
              download_end = nullptr, pipes_done = nullptr;
  int multiprocessors = 1;

  ~Engine() {
    for (cudaEvent_t e : {upload_begin, upload_end, download_begin, download_end, pipes_done})
      if (e) (void)cudaEventDestroy(e);
  }
  void create(int device_index) {
    device = device_index;
    for (Pipeline& p : pipes) p.create();
    for (cudaEvent_t* e : {&upload_begin, &upload_end, &download_begin, &download_end})
      SCIPROXY_CUDA_CHECK(cudaEventCreate(e));
    SCIPROXY_CUDA_CHECK(cudaEventCreateWithFlags(&pipes_done, cudaEventDisableTiming));
    SCIPROXY_CUDA_CHECK(
        cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device_index));
  }
};

// The per-device engines, freed at exit (errors ignored there, see cuda_resources.cuh).
std::mutex engines_mutex;
std::map<int, std::unique_ptr<Engine>>& engines() {
  static std::map<int, std::unique_ptr<Engine>> map;
  return map;
}

template <class U>
void upload(Buffer& to, const U* from, std::size_t count, cudaStream_t s) {
  to.reserve(std::max<std::size_t>(count, 1) * sizeof(U));
  if (count > 0)
    SCIPROXY_CUDA_CHECK(
        cudaMemcpyAsync(to.as<U>(), from, count * sizeof(U), cudaMemcpyHostToDevice, s));
}

unsigned blocks_for(std::int64_t work, int threads, std::int64_t cap = 1 << 20) {
  return static_cast<unsigned>(
      std::max<std::int64_t>(1, std::min(cap, (work + threads - 1) / threads)));
}

// solve_patch's wavelengths as the caller gave them (Problem::patch_wavelengths, a field newer
// than some versions of kernels.hpp); null: the patches' linear grid.
template <class P>
const double* patch_wavelengths_of(const P& p) {
  if constexpr (requires { p.patch_wavelengths; })
    return p.patch_wavelengths;
  else
    return nullptr;
}

// What solve_patch wants beyond the outputs: iCov, x, Q and s of patch 0, read back after its
// (last) solve.
struct Capture {
  std::vector<double> icov, x, q, rowsum;
  int S = 0, Wv = 0;
  bool fallback = false;  // failed twice: the reference's flux 0, x 0, R = I
};

// One extraction on one device: plans the batches, runs them on the pipelines, retries failed
// patches, sums the model and reads the outputs back.
class Run {
 public:
  Run(Engine& engine, const Context& ctx, const Problem& p, Outputs& out, Capture* capture)
      : e_(engine), ctx_(ctx), p_(p), out_(out), capture_(capture) {}

  void run() {
    const PsfModel& psf = *p_.psf;
    const std::int64_t npatches = p_.npatches;
    side_x_ = 2 * psf.hsizex + 2;
    side_y_ = 2 * psf.hsizey + 2;
    slot_ = side_x_ * side_y_;
    scratch_per_thread_ =
        slot_ + psf.nparams() + spot_scratch_size(psf.ghdegx, psf.ghdegy, side_x_, side_y_);
    full_ = p_.full_output && out_.chi2pix && out_.pixmask_fraction;
    noise_ = p_.ndecorr;

    // A call that threw may have left work in flight on the pipelines: wait, and forget it.
    for (Pipeline& pipe : e_.pipes) {
      SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(pipe.stream));
      pipe.in_flight = -1;
    }
    upload_inputs();

    // Model slots: one per patch, in patch order.
    slot_offsets_.resize(static_cast<std::size_t>(npatches) + 1, 0);
    for (std::int64_t k = 0; k < npatches; ++k)
      slot_offsets_[k + 1] = slot_offsets_[k] + (full_ && out_.model ? p_.patches[k].npix() : 0);

    std::vector<int> order(static_cast<std::size_t>(npatches));
    std::iota(order.begin(), order.end(), 0);
    plan(order, 0);
    reserve();
    info_.assign(static_cast<std::size_t>(npatches), 0);
    run_batches(0);

    // The reference's retry: a patch whose solve failed is solved again with regularize = 1e-4
    // (when the caller's was smaller); one that fails again keeps flux 0, ivar 0, x 0, R = I.
    std::vector<int> failed;
    for (std::int64_t k = 0; k < npatches; ++k)
      if (info_[k] != 0) failed.push_back(static_cast<int>(k));
    out_.retried_patches = static_cast<std::int64_t>(failed.size());
    for (int pass = p_.regularize < 1e-4 ? 1 : 2; pass <= 2 && !failed.empty(); ++pass) {
      const std::size_t first = batches_.size();
      plan(failed, pass);
      reserve();  // the retry shapes may need a different eigensolver workspace
      for (int k : failed) info_[k] = 0;
      run_batches(first);
      std::vector<int> again;
      for (int k : failed)
        if (info_[k] != 0) again.push_back(k);
      failed.swap(again);
    }
    finish();
  }

 private:
  Engine& e_;
  const Context& ctx_;
  const Problem& p_;
  Outputs& out_;
  Capture* capture_;
  int side_x_ = 0, side_y_ = 0, slot_ = 0, scratch_per_thread_ = 0;
  bool full_ = false, noise_ = false;
  std::vector<Batch> batches_;
  Capacity cap_;
  std::vector<std::int64_t> slot_offsets_;
  std::vector<int> info_;
  std::array<double, kStages - 1> stage_seconds_{};
  std::int64_t done_ = 0;
  ImageGeometry geometry_{};
  const double* wave_table_ = nullptr;  // device copy of solve_patch's wavelengths, else null
  DevicePsf dpsf_{};

  // The pixels of geometry_ from an array covering the image range (row-major), and back.
  std::size_t host_offset() const {
    const PixelRange& r = p_.image_range;
    return static_cast<std::size_t>((geometry_.ymin - r.ymin) * r.nx() + (geometry_.xmin - r.xmin));
  }
  void upload_box(Buffer& to, const double* from, cudaStream_t s) {
    const std::size_t npix = static_cast<std::size_t>(geometry_.nx * geometry_.ny);
    to.reserve(std::max<std::size_t>(npix, 1) * sizeof(double));
    if (npix == 0) return;
    SCIPROXY_CUDA_CHECK(
        cudaMemcpy2DAsync(to.as<double>(), geometry_.nx * sizeof(double), from + host_offset(),
                          p_.image_range.nx() * sizeof(double), geometry_.nx * sizeof(double),
                          geometry_.ny, cudaMemcpyHostToDevice, s));
  }
  void download_box(double* to, const Buffer& from, cudaStream_t s) {
    if (geometry_.nx * geometry_.ny == 0) return;
    SCIPROXY_CUDA_CHECK(cudaMemcpy2DAsync(to + host_offset(), p_.image_range.nx() * sizeof(double),
                                          from.as<double>(), geometry_.nx * sizeof(double),
                                          geometry_.nx * sizeof(double), geometry_.ny,
                                          cudaMemcpyDeviceToHost, s));
  }

  // Output rows [row_lo_, row_hi_) of an (nspec, per_row, nwave) array between host and device.
  void rows(double* host, const Buffer& device, int per_row, cudaMemcpyKind kind, cudaStream_t s) {
    if (!host || row_hi_ <= row_lo_) return;
    const std::size_t row = static_cast<std::size_t>(per_row) * static_cast<std::size_t>(p_.nwave);
    const std::size_t at = static_cast<std::size_t>(row_lo_) * row;
    const std::size_t bytes = static_cast<std::size_t>(row_hi_ - row_lo_) * row * sizeof(double);
    double* d = device.as<double>() + at;
    if (kind == cudaMemcpyHostToDevice)
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(d, host + at, bytes, kind, s));
    else
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(host + at, d, bytes, kind, s));
  }
  std::int64_t row_lo_ = 0, row_hi_ = 0;

  void upload_inputs() {
    const PsfModel& psf = *p_.psf;
    cudaStream_t s = e_.pipes[0].stream;
    SCIPROXY_CUDA_CHECK(cudaEventRecord(e_.upload_begin, s));
    upload(e_.psf_x, psf.x.coeff.data(), psf.x.coeff.size(), s);
    upload(e_.psf_y, psf.y.coeff.data(), psf.y.coeff.size(), s);
    upload(e_.psf_params, psf.params.data(), psf.params.size(), s);
    upload(e_.psf_wmin, psf.wmin_spec.data(), psf.wmin_spec.size(), s);
    upload(e_.psf_wmax, psf.wmax_spec.data(), psf.wmax_spec.size(), s);
    dpsf_ = DevicePsf{e_.psf_x.as<double>(),
                      e_.psf_y.as<double>(),
                      e_.psf_params.as<double>(),
                      e_.psf_wmin.as<double>(),
                      e_.psf_wmax.as<double>(),
                      psf.x.lo,
                      psf.x.hi,
                      psf.y.lo,
                      psf.y.hi,
                      psf.param_lo,
                      psf.param_hi,
                      psf.x.ncoeff,
                      psf.y.ncoeff,
                      psf.param_ncoeff,
                      psf.nparams(),
                      psf.nspec,
                      psf.hsizex,
                      psf.hsizey,
                      psf.ghdegx,
                      psf.ghdegy,
                      psf.has_tail};
    // Only the pixels the patches cover travel (api.cpp calls once per bundle): their bounding
    // box within the image.
    const PixelRange& r = p_.image_range;
    PixelRange box = p_.patches[0].pixels;
    for (std::int64_t k = 1; k < p_.npatches; ++k) {
      const PixelRange& q = p_.patches[k].pixels;
      box.xmin = std::min(box.xmin, q.xmin);
      box.xmax = std::max(box.xmax, q.xmax);
      box.ymin = std::min(box.ymin, q.ymin);
      box.ymax = std::max(box.ymax, q.ymax);
    }
    box.xmin = std::max(box.xmin, r.xmin);
    box.ymin = std::max(box.ymin, r.ymin);
    box.xmax = std::max(box.xmin, std::min(box.xmax, r.xmax));
    box.ymax = std::max(box.ymin, std::min(box.ymax, r.ymax));
    geometry_ = ImageGeometry{box.xmin, box.ymin, box.nx(), box.ny()};
    upload_box(e_.image, p_.image, s);
    upload_box(e_.ivar, p_.ivar, s);
    if (const double* waves = patch_wavelengths_of(p_)) {
      upload(e_.waves, waves, static_cast<std::size_t>(p_.patches[0].nwave()), s);
      wave_table_ = e_.waves.as<double>();
    }
    // The output rows this call's patches keep go up and come back: the rest of the caller's
    // arrays (other bundles' calls) is never touched.
    row_lo_ = p_.nspec;
    row_hi_ = 0;
    for (std::int64_t k = 0; k < p_.npatches; ++k) {
      const PatchPlan& q = p_.patches[k];
      row_lo_ = std::min<std::int64_t>(row_lo_, q.speclo + q.keeplo - p_.specmin);
      row_hi_ = std::max<std::int64_t>(row_hi_, q.speclo + q.keeplo + q.nkeep - p_.specmin);
    }
    row_hi_ = std::max(row_hi_, row_lo_);
    const std::size_t nout = static_cast<std::size_t>(p_.nspec * p_.nwave);
    const std::size_t nres = nout * static_cast<std::size_t>(2 * p_.ndiag + 1);
    for (Buffer* b : {&e_.flux, &e_.out_ivar, &e_.chi2pix, &e_.pixmask})
      b->reserve(std::max<std::size_t>(nout, 1) * sizeof(double));
    e_.resolution.reserve(std::max<std::size_t>(nres, 1) * sizeof(double));
    rows(out_.flux, e_.flux, 1, cudaMemcpyHostToDevice, s);
    rows(out_.ivar, e_.out_ivar, 1, cudaMemcpyHostToDevice, s);
    rows(out_.resolution, e_.resolution, 2 * p_.ndiag + 1, cudaMemcpyHostToDevice, s);
    if (full_) {
      rows(out_.chi2pix, e_.chi2pix, 1, cudaMemcpyHostToDevice, s);
      rows(out_.pixmask_fraction, e_.pixmask, 1, cudaMemcpyHostToDevice, s);
    }
    if (full_ && out_.model) upload_box(e_.model, out_.model, s);  // the sum adds onto it
    SCIPROXY_CUDA_CHECK(cudaEventRecord(e_.upload_end, s));
    for (int k = 1; k < kPipelines; ++k)
      SCIPROXY_CUDA_CHECK(cudaStreamWaitEvent(e_.pipes[k].stream, e_.upload_end, 0));
  }

  // Batches of `which`: sorted by (spectra, bins) descending, cut where the spectra change, the
  // bins differ by more than kMaxPadWave, or the batch is full. Sets cap_ to cover them.
  void plan(std::vector<int> which, int pass) {
    const PatchPlan* pp = p_.patches;
    std::stable_sort(which.begin(), which.end(), [&](int a, int b) {
      if (pp[a].nspec != pp[b].nspec) return pp[a].nspec > pp[b].nspec;
      return pp[a].nwave() > pp[b].nwave();
    });
    // The batch capacity from the largest patch and the free memory.
    int nmax = 0, npix_max = 0;
    for (int k : which) {
      nmax = std::max(nmax, pp[k].nflux());
      npix_max = std::max<int>(npix_max, static_cast<int>(pp[k].npix()));
    }
    if (cap_.batch == 0) {
      std::size_t free_bytes = 0, total_bytes = 0;
      SCIPROXY_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
      const double n = nmax;
      const double per_patch =
          8.0 * (n * slot_ + 3.0 * n * n + 10.0 * n + 2.0 * npix_max) + 16.0 * n + 64.0;
      const double budget = 0.6 * static_cast<double>(free_bytes) / kPipelines;
      cap_.batch = static_cast<int>(std::clamp(budget / per_patch, 1.0, double(kMaxBatch)));
    }
    std::size_t at = 0;
    while (at < which.size()) {
      Batch b;
      b.pass = pass;
      const PatchPlan& first = pp[which[at]];
      b.S = first.nspec;
      b.Wv = first.nwave();
      while (at < which.size() && static_cast<int>(b.patches.size()) < cap_.batch) {
        const PatchPlan& q = pp[which[at]];
        if (q.nspec != b.S || b.Wv - q.nwave() > kMaxPadWave) break;
        b.patches.push_back(which[at]);
        b.npix_max = std::max<int>(b.npix_max, static_cast<int>(q.npix()));
        ++at;
      }
      cap_.S = std::max(cap_.S, b.S);
      cap_.Wv = std::max(cap_.Wv, b.Wv);
      cap_.n = std::max(cap_.n, b.S * b.Wv);
      cap_.npix = std::max(cap_.npix, b.npix_max);
      batches_.push_back(std::move(b));
    }
    cap_.slot = slot_;
  }

  // Sizes every buffer for cap_ (outside the batch loop).
  void reserve() {
    const std::size_t B = cap_.batch, n = cap_.n, n2 = n * n;
    // Whole blocks: every launched thread owns a scratch area.
    const std::int64_t spot_threads =
        (std::min<std::int64_t>(static_cast<std::int64_t>(B) * static_cast<std::int64_t>(n),
                                static_cast<std::int64_t>(e_.multiprocessors) * 4 * kThreads) +
         kThreads - 1) /
        kThreads * kThreads;
    spot_threads_ = spot_threads;
    for (Pipeline& pipe : e_.pipes) {
      pipe.desc.reserve(B * sizeof(PatchDesc));
      pipe.host_desc.reserve(B * sizeof(PatchDesc));
      pipe.host_info.reserve(B * sizeof(int));
      pipe.spots.reserve(B * n * static_cast<std::size_t>(slot_) * sizeof(double));
      pipe.boxes.reserve(B * n * sizeof(SpotBox));
      for (Buffer* b : {&pipe.icov, &pipe.factor, &pipe.work}) b->reserve(B * n2 * sizeof(double));
      pipe.blocks.reserve(B * n * static_cast<std::size_t>(cap_.Wv) * sizeof(double));
      for (Buffer* b :
           {&pipe.y, &pipe.x, &pipe.fluxweight, &pipe.unmasked, &pipe.eig, &pipe.rowsum})
        b->reserve(B * n * sizeof(double));
      pipe.info.reserve(B * sizeof(int));
      pipe.syev_info.reserve(B * static_cast<std::size_t>(cap_.S) * sizeof(int));
      pipe.masked.reserve(2 * B * sizeof(int));  // masked flags, then failed flags
      for (Buffer* b : {&pipe.ptr_factor, &pipe.ptr_x, &pipe.ptr_work})
        b->reserve(B * sizeof(double*));
      if (full_) {
        pipe.chi2.reserve(B * static_cast<std::size_t>(cap_.npix) * sizeof(double));
        pipe.valid.reserve(B * static_cast<std::size_t>(cap_.npix) * sizeof(double));
      }
      pipe.scratch.reserve(static_cast<std::size_t>(spot_threads) * scratch_per_thread_ *
                           sizeof(double));
    }
    // The eigensolver's workspace: the largest over the batch shapes.
    std::size_t device_bytes = 0, host_bytes = 0;
    for (const Batch& b : batches_) {
      const int nb = static_cast<int>(b.patches.size());
      const std::int64_t m = noise_ ? std::int64_t(b.S) * b.Wv : b.Wv;
      const std::int64_t count = noise_ ? nb : std::int64_t(nb) * b.S;
      for (Pipeline& pipe : e_.pipes) {
        double* a = noise_ ? pipe.work.as<double>() : pipe.blocks.as<double>();
        std::size_t d = 0, h = 0;
        const cusolverStatus_t st = cusolverDnXsyevBatched_bufferSize(
            pipe.solver, pipe.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, m,
            CUDA_R_64F, a, m, CUDA_R_64F, pipe.eig.as<double>(), CUDA_R_64F, &d, &h, count);
        if (st != CUSOLVER_STATUS_SUCCESS) {
          pipe.batched_syev = false;  // one Xsyevd per matrix instead
        }
        if (!pipe.batched_syev) {
          SPECEX_CUSOLVER_CHECK(cusolverDnXsyevd_bufferSize(
              pipe.solver, pipe.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, m,
              CUDA_R_64F, a, m, CUDA_R_64F, pipe.eig.as<double>(), CUDA_R_64F, &d, &h));
        }
        device_bytes = std::max(device_bytes, d);
        host_bytes = std::max(host_bytes, h);
      }
    }
    for (Pipeline& pipe : e_.pipes) {
      pipe.syev_workspace.reserve(std::max<std::size_t>(device_bytes, 8));
      if (pipe.syev_host_workspace.size() < host_bytes) pipe.syev_host_workspace.resize(host_bytes);
    }
    if (full_ && out_.model) {
      e_.model_slots.reserve(
          std::max<std::size_t>(static_cast<std::size_t>(slot_offsets_.back()), 1) *
          sizeof(double));
    }
  }
  std::int64_t spot_threads_ = 0;

  OutputPointers outputs() const {
    return OutputPointers{e_.flux.as<double>(),
                          e_.out_ivar.as<double>(),
                          e_.resolution.as<double>(),
                          e_.chi2pix.as<double>(),
                          e_.pixmask.as<double>(),
                          p_.nwave,
                          p_.ndiag};
  }

  // Waits for the pipeline's batch in flight and collects its timings and Cholesky infos.
  void harvest(Pipeline& pipe) {
    if (pipe.in_flight < 0) return;
    SCIPROXY_CUDA_CHECK(cudaEventSynchronize(pipe.events[kOutputs]));
    for (int st = 1; st < kStages; ++st) {
      float ms = 0;
      SCIPROXY_CUDA_CHECK(cudaEventElapsedTime(&ms, pipe.events[st - 1], pipe.events[st]));
      stage_seconds_[st - 1] += 1e-3 * ms;
    }
    const int* infos = pipe.host_info.as<int>();
    const std::vector<int>& ks = batches_[static_cast<std::size_t>(pipe.in_flight)].patches;
    for (std::size_t b = 0; b < ks.size(); ++b) info_[ks[b]] = infos[b];
    pipe.in_flight = -1;
  }

  void run_batches(std::size_t first) {
    for (std::size_t k = first; k < batches_.size(); ++k) {
      throw_if_cancelled("ex2d (cuda)", done_, p_.npatches, "patches");
      Pipeline& pipe = e_.pipes[k % kPipelines];
      harvest(pipe);  // its buffers (pinned ones included) are free after this
      enqueue(pipe, batches_[k]);
      pipe.in_flight = static_cast<std::int64_t>(k);
      done_ += static_cast<std::int64_t>(batches_[k].patches.size());
    }
    for (Pipeline& pipe : e_.pipes) harvest(pipe);
  }

  void enqueue(Pipeline& pipe, const Batch& batch) {
    const int nb = static_cast<int>(batch.patches.size());
    const int S = batch.S, Wv = batch.Wv, n = S * Wv;
    const std::int64_t n2 = static_cast<std::int64_t>(n) * n;
    cudaStream_t s = pipe.stream;
    PatchDesc* hd = pipe.host_desc.as<PatchDesc>();
    for (int b = 0; b < nb; ++b) {
      const int k = batch.patches[b];
      const PatchPlan& q = p_.patches[k];
      PatchDesc& d = hd[b];
      d.xmin = q.pixels.xmin;
      d.ymin = q.pixels.ymin;
      d.iwave = q.iwave;
      d.model_slot = slot_offsets_[k];
      d.wfirst = q.wfirst;
      d.regularize = batch.pass == 0 ? p_.regularize : 1e-4;
      d.fallback = batch.pass == 2 ? 1 : 0;
      d.wave_offset = wave_table_ ? 0 : -1;  // solve_patch's one patch: the caller's grid
      d.pnx = static_cast<int>(q.pixels.nx());
      d.pny = static_cast<int>(q.pixels.ny());
      d.speclo = q.speclo;
      d.nspec = q.nspec;
      d.nwave = q.nwave();
      d.keeplo = q.keeplo;
      d.nkeep = q.nkeep;
      d.nlo = q.nlo;
      d.ncore = q.ncore;
      d.out_row0 = q.speclo - p_.specmin;
    }
    NvtxRange range("specex batch");
    SCIPROXY_CUDA_CHECK(cudaEventRecord(pipe.events[kStart], s));
    SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(pipe.desc.as<void>(), hd, nb * sizeof(PatchDesc),
                                        cudaMemcpyHostToDevice, s));
    const PatchDesc* desc = pipe.desc.as<PatchDesc>();

    // Spots.
    const std::int64_t nbins = static_cast<std::int64_t>(nb) * n;
    const unsigned spot_blocks = blocks_for(std::min<std::int64_t>(nbins, spot_threads_), kThreads);
    spots_kernel<<<spot_blocks, kThreads, 0, s>>>(dpsf_, desc, nb, S, Wv, p_.dw, wave_table_,
                                                  side_x_, side_y_, slot_, pipe.spots.as<double>(),
                                                  pipe.boxes.as<SpotBox>(),
                                                  pipe.scratch.as<double>(), scratch_per_thread_);
    SCIPROXY_CUDA_CHECK_LAUNCH("specex spots_kernel");
    SCIPROXY_CUDA_CHECK(cudaEventRecord(pipe.events[kSpots], s));

    // Normal equations and the prior.
    const std::size_t smem = static_cast<std::size_t>(slot_) * sizeof(double);
    if (smem > 48 * 1024)
      SCIPROXY_CUDA_CHECK(cudaFuncSetAttribute(
          normal_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    normal_kernel<<<dim3(n, nb), kThreads, smem, s>>>(
        desc, S, Wv, slot_, pipe.spots.as<double>(), pipe.boxes.as<SpotBox>(),
        e_.image.as<double>(), e_.ivar.as<double>(), geometry_, pipe.icov.as<double>(),
        pipe.y.as<double>(), pipe.fluxweight.as<double>(), pipe.unmasked.as<double>());
    SCIPROXY_CUDA_CHECK_LAUNCH("specex normal_kernel");
    prior_kernel<<<nb, 256, 0, s>>>(
        desc, S, Wv, e_.ivar.as<double>(), geometry_, pipe.fluxweight.as<double>(),
        pipe.y.as<double>(), pipe.icov.as<double>(), pipe.x.as<double>(), pipe.masked.as<int>());
    SCIPROXY_CUDA_CHECK_LAUNCH("specex prior_kernel");
    const bool capture = capture_ && batch.patches[0] == 0;
    if (capture) {
      capture_->icov.resize(static_cast<std::size_t>(n2));
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(capture_->icov.data(), pipe.icov.as<double>(),
                                          n2 * sizeof(double), cudaMemcpyDeviceToHost, s));
    }
    SCIPROXY_CUDA_CHECK(cudaEventRecord(pipe.events[kNormal], s));

    // Solve: L L^T = iCov in a copy, x = iCov^-1 y.
    SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(pipe.factor.as<void>(), pipe.icov.as<void>(),
                                        nb * n2 * sizeof(double), cudaMemcpyDeviceToDevice, s));
    double** ptr_factor = pipe.ptr_factor.as<double*>();
    double** ptr_x = pipe.ptr_x.as<double*>();
    double** ptr_work = pipe.ptr_work.as<double*>();
    const unsigned pblocks = blocks_for(nb, 128);
    pointers_kernel<<<pblocks, 128, 0, s>>>(pipe.factor.as<double>(), n2, nb, ptr_factor);
    pointers_kernel<<<pblocks, 128, 0, s>>>(pipe.x.as<double>(), n, nb, ptr_x);
    pointers_kernel<<<pblocks, 128, 0, s>>>(pipe.work.as<double>(), n2, nb, ptr_work);
    SCIPROXY_CUDA_CHECK_LAUNCH("specex pointers_kernel");
    SPECEX_CUSOLVER_CHECK(cusolverDnDpotrfBatched(pipe.solver, CUBLAS_FILL_MODE_LOWER, n,
                                                  ptr_factor, n, pipe.info.as<int>(), nb));
    SPECEX_CUSOLVER_CHECK(cusolverDnDpotrsBatched(pipe.solver, CUBLAS_FILL_MODE_LOWER, n, 1,
                                                  ptr_factor, n, ptr_x, n, pipe.syev_info.as<int>(),
                                                  nb));
    SCIPROXY_CUDA_CHECK(cudaEventRecord(pipe.events[kSolve], s));

    // Decorrelate: Q (signal: S blocks of Wv x Wv per patch, in `work`; noise: n x n, in icov).
    const double one = 1.0, zero = 0.0;
    const double* q = nullptr;
    if (!noise_) {
      identity_kernel<<<blocks_for(nb * n2, 256, 65535), 256, 0, s>>>(pipe.work.as<double>(), n,
                                                                      nb);
      SCIPROXY_CUDA_CHECK_LAUNCH("specex identity_kernel");
      SPECEX_CUBLAS_CHECK(cublasDtrsmBatched(pipe.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER,
                                             CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, n, n, &one,
                                             ptr_factor, n, ptr_work, n, nb));
      // C_b = Z[:, b]^T Z[:, b], Z = L^-1 lower triangular: rows from b Wv on.
      double* blocks = pipe.blocks.as<double>();
      for (int sp = 0; sp < S; ++sp) {
        const std::int64_t off = static_cast<std::int64_t>(sp) * Wv * n + sp * Wv;
        const double* z = pipe.work.as<double>() + off;
        SPECEX_CUBLAS_CHECK(cublasDgemmStridedBatched(
            pipe.blas, CUBLAS_OP_T, CUBLAS_OP_N, Wv, Wv, n - sp * Wv, &one, z, n, n2, z, n, n2,
            &zero, blocks + static_cast<std::int64_t>(sp) * Wv * Wv, Wv,
            static_cast<std::int64_t>(S) * Wv * Wv, nb));
      }
      pad_blocks_kernel<<<dim3(S, nb), kThreads, 0, s>>>(desc, S, Wv, blocks);
      SCIPROXY_CUDA_CHECK_LAUNCH("specex pad_blocks_kernel");
      eigen(pipe, blocks, Wv, nb * S);
      // Q_b = V f V^T with f = w^-1/2: V f into icov (free now), Q into work.
      scale_columns_kernel<<<nb * S, kThreads, 0, s>>>(blocks, pipe.eig.as<double>(), Wv, nb * S,
                                                       true, pipe.icov.as<double>());
      SCIPROXY_CUDA_CHECK_LAUNCH("specex scale_columns_kernel");
      SPECEX_CUBLAS_CHECK(cublasDgemmStridedBatched(
          pipe.blas, CUBLAS_OP_N, CUBLAS_OP_T, Wv, Wv, Wv, &one, pipe.icov.as<double>(), Wv,
          static_cast<std::int64_t>(Wv) * Wv, blocks, Wv, static_cast<std::int64_t>(Wv) * Wv, &zero,
          pipe.work.as<double>(), Wv, static_cast<std::int64_t>(Wv) * Wv, nb * S));
      q = pipe.work.as<double>();
    } else {
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(pipe.work.as<void>(), pipe.icov.as<void>(),
                                          nb * n2 * sizeof(double), cudaMemcpyDeviceToDevice, s));
      eigen(pipe, pipe.work.as<double>(), n, nb);
      scale_columns_kernel<<<nb, kThreads, 0, s>>>(pipe.work.as<double>(), pipe.eig.as<double>(), n,
                                                   nb, false, pipe.factor.as<double>());
      SCIPROXY_CUDA_CHECK_LAUNCH("specex scale_columns_kernel");
      SPECEX_CUBLAS_CHECK(cublasDgemmStridedBatched(
          pipe.blas, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &one, pipe.factor.as<double>(), n, n2,
          pipe.work.as<double>(), n, n2, &zero, pipe.icov.as<double>(), n, n2, nb));
      q = pipe.icov.as<double>();
    }
    failures_kernel<<<nb, kThreads, 0, s>>>(desc, n, noise_ ? 1 : S, pipe.info.as<int>(),
                                            pipe.syev_info.as<int>(), pipe.x.as<double>(),
                                            pipe.masked.as<int>() + cap_.batch);
    SCIPROXY_CUDA_CHECK_LAUNCH("specex failures_kernel");
    SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(pipe.host_info.as<void>(),
                                        pipe.masked.as<int>() + cap_.batch, nb * sizeof(int),
                                        cudaMemcpyDeviceToHost, s));
    SCIPROXY_CUDA_CHECK(cudaEventRecord(pipe.events[kDecorrelate], s));

    // Outputs.
    const OutputPointers o = outputs();
    finish_kernel<<<nb, 256, 0, s>>>(desc, S, Wv, noise_, q, pipe.x.as<double>(),
                                     pipe.fluxweight.as<double>(), pipe.masked.as<int>(),
                                     pipe.rowsum.as<double>(), o);
    SCIPROXY_CUDA_CHECK_LAUNCH("specex finish_kernel");
    if (full_) {
      pixels_kernel<<<dim3(blocks_for(batch.npix_max, 256), nb), 256, 0, s>>>(
          desc, S, Wv, slot_, cap_.npix, pipe.spots.as<double>(), pipe.boxes.as<SpotBox>(),
          pipe.x.as<double>(), e_.image.as<double>(), e_.ivar.as<double>(), geometry_, p_.psferr,
          pipe.chi2.as<double>(), pipe.valid.as<double>(),
          out_.model ? e_.model_slots.as<double>() : nullptr);
      SCIPROXY_CUDA_CHECK_LAUNCH("specex pixels_kernel");
      bins_kernel<<<dim3(blocks_for(n, kThreads), nb), kThreads, 0, s>>>(
          desc, S, Wv, slot_, cap_.npix, pipe.spots.as<double>(), pipe.boxes.as<SpotBox>(),
          pipe.chi2.as<double>(), pipe.valid.as<double>(), pipe.unmasked.as<double>(), o);
      SCIPROXY_CUDA_CHECK_LAUNCH("specex bins_kernel");
    }
    if (capture) {
      capture_->fallback = batch.pass == 2;
      capture_->S = S;
      capture_->Wv = Wv;
      const std::size_t qn =
          noise_ ? static_cast<std::size_t>(n2) : static_cast<std::size_t>(S) * Wv * Wv;
      capture_->q.resize(qn);
      capture_->x.resize(static_cast<std::size_t>(n));
      capture_->rowsum.resize(static_cast<std::size_t>(n));
      SCIPROXY_CUDA_CHECK(
          cudaMemcpyAsync(capture_->q.data(), q, qn * sizeof(double), cudaMemcpyDeviceToHost, s));
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(capture_->x.data(), pipe.x.as<double>(),
                                          n * sizeof(double), cudaMemcpyDeviceToHost, s));
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(capture_->rowsum.data(), pipe.rowsum.as<double>(),
                                          n * sizeof(double), cudaMemcpyDeviceToHost, s));
    }
    SCIPROXY_CUDA_CHECK(cudaEventRecord(pipe.events[kOutputs], s));
  }

  // Eigenvalues into pipe.eig and eigenvectors in place for count m x m matrices at a.
  void eigen(Pipeline& pipe, double* a, int m, int count) {
    const std::size_t dbytes = pipe.syev_workspace.capacity();
    void* host = pipe.syev_host_workspace.empty() ? nullptr : pipe.syev_host_workspace.data();
    const std::size_t hbytes = pipe.syev_host_workspace.size();
    if (pipe.batched_syev) {
      SPECEX_CUSOLVER_CHECK(cusolverDnXsyevBatched(
          pipe.solver, pipe.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, m, CUDA_R_64F,
          a, m, CUDA_R_64F, pipe.eig.as<double>(), CUDA_R_64F, pipe.syev_workspace.as<void>(),
          dbytes, host, hbytes, pipe.syev_info.as<int>(), count));
      return;
    }
    const std::int64_t mm = static_cast<std::int64_t>(m) * m;
    for (int k = 0; k < count; ++k)
      SPECEX_CUSOLVER_CHECK(cusolverDnXsyevd(
          pipe.solver, pipe.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, m, CUDA_R_64F,
          a + k * mm, m, CUDA_R_64F, pipe.eig.as<double>() + static_cast<std::int64_t>(k) * m,
          CUDA_R_64F, pipe.syev_workspace.as<void>(), dbytes, host, hbytes,
          pipe.syev_info.as<int>() + k));
  }

  // The model sum in patch order, then the read-back and the timers.
  void finish() {
    cudaStream_t s = e_.pipes[0].stream;
    for (int k = 1; k < kPipelines; ++k) {
      SCIPROXY_CUDA_CHECK(cudaEventRecord(e_.pipes_done, e_.pipes[k].stream));
      SCIPROXY_CUDA_CHECK(cudaStreamWaitEvent(s, e_.pipes_done, 0));
    }
    const std::int64_t ny = geometry_.ny, nx = geometry_.nx;
    const std::size_t npix = static_cast<std::size_t>(nx * ny);
    if (full_ && out_.model) {
      // Per image row, the patches whose rows cover it, in patch order.
      std::vector<std::int64_t> row_start(static_cast<std::size_t>(ny) + 1, 0);
      std::vector<ModelBox> boxes(static_cast<std::size_t>(p_.npatches));
      for (std::int64_t k = 0; k < p_.npatches; ++k) {
        const PixelRange& r = p_.patches[k].pixels;
        boxes[k] = ModelBox{r.xmin, r.ymin, slot_offsets_[k], static_cast<int>(r.nx()),
                            static_cast<int>(r.ny())};
        for (std::int64_t yy = std::max(r.ymin, geometry_.ymin);
             yy < std::min(r.ymax, geometry_.ymin + ny); ++yy)
          ++row_start[yy - geometry_.ymin + 1];
      }
      for (std::int64_t r = 0; r < ny; ++r) row_start[r + 1] += row_start[r];
      std::vector<int> row_patches(static_cast<std::size_t>(row_start.back()));
      std::vector<std::int64_t> fill(row_start.begin(), row_start.end() - 1);
      for (std::int64_t k = 0; k < p_.npatches; ++k) {
        const PixelRange& r = p_.patches[k].pixels;
        for (std::int64_t yy = std::max(r.ymin, geometry_.ymin);
             yy < std::min(r.ymax, geometry_.ymin + ny); ++yy)
          row_patches[fill[yy - geometry_.ymin]++] = static_cast<int>(k);
      }
      upload(e_.row_start, row_start.data(), row_start.size(), s);
      upload(e_.row_patches, row_patches.data(), row_patches.size(), s);
      upload(e_.model_boxes, boxes.data(), boxes.size(), s);
      model_sum_kernel<<<blocks_for(static_cast<std::int64_t>(npix), 256, 65535), 256, 0, s>>>(
          geometry_, e_.row_start.as<std::int64_t>(), e_.row_patches.as<int>(),
          e_.model_boxes.as<ModelBox>(), e_.model_slots.as<double>(), e_.model.as<double>());
      SCIPROXY_CUDA_CHECK_LAUNCH("specex model_sum_kernel");
      // The host vectors must outlive the copies: wait here.
      SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(s));
    }
    SCIPROXY_CUDA_CHECK(cudaEventRecord(e_.download_begin, s));
    rows(out_.flux, e_.flux, 1, cudaMemcpyDeviceToHost, s);
    rows(out_.ivar, e_.out_ivar, 1, cudaMemcpyDeviceToHost, s);
    rows(out_.resolution, e_.resolution, 2 * p_.ndiag + 1, cudaMemcpyDeviceToHost, s);
    if (full_) {
      rows(out_.chi2pix, e_.chi2pix, 1, cudaMemcpyDeviceToHost, s);
      rows(out_.pixmask_fraction, e_.pixmask, 1, cudaMemcpyDeviceToHost, s);
      if (out_.model) download_box(out_.model, e_.model, s);
    }
    SCIPROXY_CUDA_CHECK(cudaEventRecord(e_.download_end, s));
    SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(s));
    if (ctx_.timers) {
      float ms = 0;
      SCIPROXY_CUDA_CHECK(cudaEventElapsedTime(&ms, e_.upload_begin, e_.upload_end));
      ctx_.timers->record("upload", 1e-3 * ms);
      for (int st = 0; st < kStages - 1; ++st)
        ctx_.timers->record(kStageNames[st], stage_seconds_[st]);
      SCIPROXY_CUDA_CHECK(cudaEventElapsedTime(&ms, e_.download_begin, e_.download_end));
      ctx_.timers->record("download", 1e-3 * ms);
    }
  }
};

// The device's engine, created on first use; the caller holds engines_mutex.
Engine& engine_for(int device_index) {
  auto& map = engines();
  auto it = map.find(device_index);
  if (it == map.end()) {
    auto engine = std::make_unique<Engine>();
    engine->create(device_index);
    it = map.emplace(device_index, std::move(engine)).first;
  }
  return *it->second;
}

}  // namespace

SCIPROXY_SPECEX_EXTRACT {
  const int device_index = ctx.device_index();
  cuda_detail::require_device("ex2d", device_index);
  cuda_detail::DeviceGuard guard;
  SCIPROXY_CUDA_CHECK(cudaSetDevice(device_index));
  out.retried_patches = 0;
  if (p.npatches == 0) return;
  std::lock_guard<std::mutex> lock(engines_mutex);
  Engine& engine = engine_for(device_index);
  Run run(engine, ctx, p, out, nullptr);
  run.run();
}

SCIPROXY_SPECEX_SOLVE_PATCH {
  const int device_index = ctx.device_index();
  cuda_detail::require_device("ex2d", device_index);
  if (p.npatches < 1) throw InvalidArgument("ex2d_patch: no patch to solve");
  cuda_detail::DeviceGuard guard;
  SCIPROXY_CUDA_CHECK(cudaSetDevice(device_index));
  // The patch whole: every spectrum and bin kept, outputs in the patch's own (nspec, nwave).
  PatchPlan plan = p.patches[0];
  const int nspec = plan.nspec, nwave = plan.nwave();
  plan.keeplo = 0;
  plan.nkeep = nspec;
  plan.iwave = 0;
  plan.ncore = nwave;
  plan.nlo = 0;
  plan.nhi = 0;
  Problem q = p;
  q.patches = &plan;
  q.npatches = 1;
  q.specmin = plan.speclo;
  q.nspec = nspec;
  q.nwave = nwave;
  q.full_output = false;
  const std::int64_t nflux = static_cast<std::int64_t>(nspec) * nwave;
  std::vector<double> diagonals(static_cast<std::size_t>(nflux * (2 * q.ndiag + 1)));
  result.nflux = nflux;
  result.flux.assign(static_cast<std::size_t>(nflux), 0.0);
  result.ivar.assign(static_cast<std::size_t>(nflux), 0.0);
  Outputs out;
  out.flux = result.flux.data();
  out.ivar = result.ivar.data();
  out.resolution = diagonals.data();
  Capture capture;
  {
    std::lock_guard<std::mutex> lock(engines_mutex);
    Engine& engine = engine_for(device_index);
    Run run(engine, ctx, q, out, &capture);
    run.run();
  }
  // One patch: no padding (S = nspec, Wv = nwave, n = nflux).
  result.retried = out.retried_patches > 0;
  result.range = plan.pixels;
  result.xflux = capture.x;
  result.icov = capture.icov;  // symmetric: row-major = column-major
  result.resolution.assign(static_cast<std::size_t>(nflux * nflux), 0.0);
  const std::int64_t n = nflux;
  if (capture.fallback) {  // as the reference: x 0, R = I, and no iCov (no solve succeeded)
    std::fill(result.xflux.begin(), result.xflux.end(), 0.0);
    result.icov.clear();
    for (std::int64_t r = 0; r < n; ++r) result.resolution[r * n + r] = 1;
    return;
  }
  for (std::int64_t r = 0; r < n; ++r) {
    const double sr = capture.rowsum[r];
    if (q.ndecorr) {
      for (std::int64_t c = 0; c < n; ++c) result.resolution[r * n + c] = capture.q[r + c * n] / sr;
    } else {
      const std::int64_t s = r / nwave, i = r % nwave;
      const double* blk = capture.q.data() + s * nwave * nwave;
      for (std::int64_t c = 0; c < nwave; ++c)
        result.resolution[r * n + s * nwave + c] = blk[i + c * nwave] / sr;
    }
  }
}

}  // namespace sciproxy::specex::kernels::cuda
