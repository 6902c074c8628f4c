// CUDA backend of the coupled P/M TTI propagator: the scheme of kernels.hpp (Bube et al.
// 2016; WaveFD.jl's two-pass form), the per-point arithmetic of math.hpp (the same
// staggered_forward / staggered_backward / coupled_fluxes the cpu backend runs).
//
// One call keeps every shot resident: the precomputed coefficients, P, P_prev, M, M_prev and six
// flux arrays per shot, all source and receiver samples and cells go up once; the nt steps run
// back to back on one stream; the results come back at the end. Per step:
//   record    one block per shot: receivers^t = P^t (+ M^t), before the step;
//   mirror    (free surface) the odd image of P and M above the surface row;
//   flux      32 x 4 threads over (axis 2, axis 1), grid.z over axis 0 x shots (in chunks of
//             at most 65535): the box J;
//   mirror    (free surface) the even image of the axis-0 fluxes;
//   update    same shape over the box U: P_prev <- (2-d) P + (d-1) P_prev + scale D- . FP, M too;
//   inject    one thread per shot adds its sources in index order (deterministic; sources may
//             share a cell), after the P / P_prev pointers swap.
// Fluxes are zero outside J (set once), the mirror rows are cleared before the download.
// Timers: "upload", "steps", "download" from CUDA events on the stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_check.cuh"
#include "core/cuda_resources.cuh"
#include "sciproxy/core/cancel.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "tti/kernels.hpp"
#include "tti/math.hpp"

namespace sciproxy::tti::kernels::cuda {

namespace {

constexpr int kBlockX = 32, kBlockY = 4;

// The box [lo, hi) of one pass and the grid geometry shared by the kernels.
struct Box {
  std::int64_t lo0, lo1, lo2, hi0, hi1, hi2;
};

template <class T>
struct DeviceCoefficients {
  const T *e, *g, *a, *c, *mm, *n0, *n1, *n2, *scale, *damping;
};

template <int A, class T>
__global__ void __launch_bounds__(kBlockX* kBlockY)
    flux_kernel(Box box, std::int64_t n1, std::int64_t n2, std::int64_t points, T r0, T r1, T r2,
                const T* __restrict__ P, const T* __restrict__ M, DeviceCoefficients<T> co,
                T* __restrict__ fp0, T* __restrict__ fp1, T* __restrict__ fp2, T* __restrict__ fm0,
                T* __restrict__ fm1, T* __restrict__ fm2) {
  const std::int64_t i2 = box.lo2 + std::int64_t(blockIdx.x) * kBlockX + threadIdx.x;
  const std::int64_t i1 = box.lo1 + std::int64_t(blockIdx.y) * kBlockY + threadIdx.y;
  const std::int64_t rows = box.hi0 - box.lo0;
  const std::int64_t shot = blockIdx.z / rows, i0 = box.lo0 + blockIdx.z % rows;
  if (i2 >= box.hi2 || i1 >= box.hi1) return;
  const std::int64_t s0 = n1 * n2, k = (i0 * n1 + i1) * n2 + i2, base = shot * points;
  const T* p = P + base + k;
  const T* m = M + base + k;
  const T gp[3] = {tti::staggered_forward<A>(p, s0, r0), tti::staggered_forward<A>(p, n2, r1),
                   tti::staggered_forward<A>(p, 1, r2)};
  const T gm[3] = {tti::staggered_forward<A>(m, s0, r0), tti::staggered_forward<A>(m, n2, r1),
                   tti::staggered_forward<A>(m, 1, r2)};
  const T n[3] = {co.n0[k], co.n1[k], co.n2[k]};
  T fp[3], fm[3];
  tti::coupled_fluxes(gp, gm, co.e[k], co.g[k], co.a[k], co.c[k], co.mm[k], n, fp, fm);
  fp0[base + k] = fp[0];
  fp1[base + k] = fp[1];
  fp2[base + k] = fp[2];
  fm0[base + k] = fm[0];
  fm1[base + k] = fm[1];
  fm2[base + k] = fm[2];
}

template <int A, class T>
__global__ void __launch_bounds__(kBlockX* kBlockY)
    update_kernel(Box box, std::int64_t n1, std::int64_t n2, std::int64_t points, T r0, T r1, T r2,
                  const T* __restrict__ P, T* __restrict__ P_prev, const T* __restrict__ M,
                  T* __restrict__ M_prev, DeviceCoefficients<T> co, const T* __restrict__ fp0,
                  const T* __restrict__ fp1, const T* __restrict__ fp2, const T* __restrict__ fm0,
                  const T* __restrict__ fm1, const T* __restrict__ fm2) {
  const std::int64_t i2 = box.lo2 + std::int64_t(blockIdx.x) * kBlockX + threadIdx.x;
  const std::int64_t i1 = box.lo1 + std::int64_t(blockIdx.y) * kBlockY + threadIdx.y;
  const std::int64_t rows = box.hi0 - box.lo0;
  const std::int64_t shot = blockIdx.z / rows, i0 = box.lo0 + blockIdx.z % rows;
  if (i2 >= box.hi2 || i1 >= box.hi1) return;
  const std::int64_t s0 = n1 * n2, k = (i0 * n1 + i1) * n2 + i2, at = shot * points + k;
  const T div_p = tti::staggered_backward<A>(fp0 + at, s0, r0) +
                  tti::staggered_backward<A>(fp1 + at, n2, r1) +
                  tti::staggered_backward<A>(fp2 + at, 1, r2);
  const T div_m = tti::staggered_backward<A>(fm0 + at, s0, r0) +
                  tti::staggered_backward<A>(fm1 + at, n2, r1) +
                  tti::staggered_backward<A>(fm2 + at, 1, r2);
  const T d = co.damping[k], s = co.scale[k];
  P_prev[at] = (2 - d) * P[at] + (d - 1) * P_prev[at] + s * div_p;
  M_prev[at] = (2 - d) * M[at] + (d - 1) * M_prev[at] + s * div_m;
}

// Rows 0 .. rows-1 of axis 0 (every shot) set to sign * f[twice_centre - row].
template <class T>
__global__ void mirror_kernel(T* f, std::int64_t rows, std::int64_t twice_centre,
                              std::int64_t plane, std::int64_t points, std::int64_t nshots,
                              T sign) {
  const std::int64_t total = nshots * rows * plane;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t shot = i / (rows * plane), r = (i / plane) % rows, j = i % plane;
    f[shot * points + r * plane + j] = sign * f[shot * points + (twice_centre - r) * plane + j];
  }
}

template <class T>
__global__ void record_kernel(const T* P, const T* M, bool record_m, const std::int64_t* cells,
                              std::int64_t nreceivers, std::int64_t points, T* out) {
  const std::int64_t shot = blockIdx.x;
  for (std::int64_t r = threadIdx.x; r < nreceivers; r += blockDim.x) {
    const std::int64_t k = shot * points + cells[shot * nreceivers + r];
    out[shot * nreceivers + r] = record_m ? P[k] + M[k] : P[k];
  }
}

template <class T>
__global__ void inject_kernel(T* P, T* M, bool inject_m, const std::int64_t* cells, const T* scale,
                              const T* samples, std::int64_t nsources, std::int64_t points,
                              std::int64_t nshots) {
  const std::int64_t shot = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (shot >= nshots) return;
  for (std::int64_t q = 0; q < nsources; ++q) {
    const std::int64_t at = shot * nsources + q, k = shot * points + cells[at];
    const T amount = scale[at] * samples[at];
    P[k] += amount;
    if (inject_m) M[k] += amount;
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

using cuda_detail::DeviceArray;
using cuda_detail::elapsed_seconds;
using cuda_detail::Event;
using cuda_detail::Stream;

template <class U>
void upload(DeviceArray<U>& to, const U* from, std::size_t count, cudaStream_t s) {
  to.allocate(count);
  if (count > 0)
    SCIPROXY_CUDA_CHECK(
        cudaMemcpyAsync(to.get(), from, count * sizeof(U), cudaMemcpyHostToDevice, s));
}

template <int A, class T>
void run_order(const TtiProblem<T>& p, TtiFields<T> fields, const T* sources, T* receivers,
               Timers* timers) {
  const std::int64_t points = p.points(), halo = A / 2, nshots = p.nshots;
  const std::int64_t plane = p.n[1] * p.n[2];
  const std::size_t all = static_cast<std::size_t>(nshots * points);
  Box j{halo - 1, halo - 1, halo - 1, p.n[0] - halo, p.n[1] - halo, p.n[2] - halo};
  Box u{halo, halo, halo, p.n[0] - halo, p.n[1] - halo, p.n[2] - halo};
  if (p.free_surface) {
    j.lo0 = halo;
    u.lo0 = halo + 1;
  }
  Stream stream;
  const cudaStream_t s = stream.get();
  Event start, uploaded, stepped, done;
  start.record(s);

  std::array<DeviceArray<T>, 10> coef;
  const T* host_coef[10] = {p.coef.e,    p.coef.g,    p.coef.a,    p.coef.c,     p.coef.mm,
                            p.coef.n[0], p.coef.n[1], p.coef.n[2], p.coef.scale, p.coef.damping};
  for (int i = 0; i < 10; ++i) upload(coef[i], host_coef[i], static_cast<std::size_t>(points), s);
  const DeviceCoefficients<T> co{coef[0].get(), coef[1].get(), coef[2].get(), coef[3].get(),
                                 coef[4].get(), coef[5].get(), coef[6].get(), coef[7].get(),
                                 coef[8].get(), coef[9].get()};
  DeviceArray<T> d_p, d_p_prev, d_m, d_m_prev;
  upload(d_p, fields.p, all, s);
  upload(d_p_prev, fields.p_prev, all, s);
  upload(d_m, fields.m, all, s);
  upload(d_m_prev, fields.m_prev, all, s);
  std::array<DeviceArray<T>, 6> flux;
  for (auto& f : flux) {
    f.allocate(all);
    SCIPROXY_CUDA_CHECK(cudaMemsetAsync(f.get(), 0, f.bytes(), s));
  }
  const std::size_t ns = static_cast<std::size_t>(nshots * p.nsources),
                    nr = static_cast<std::size_t>(nshots * p.nreceivers);
  DeviceArray<std::int64_t> d_source_cells, d_receiver_cells;
  DeviceArray<T> d_source_scale, d_sources, d_receivers;
  upload(d_source_cells, p.source_cells, ns, s);
  upload(d_receiver_cells, p.receiver_cells, nr, s);
  upload(d_source_scale, p.source_scale, ns, s);
  upload(d_sources, sources, ns * static_cast<std::size_t>(p.nt), s);
  d_receivers.allocate(nr * static_cast<std::size_t>(p.nt));
  uploaded.record(s);

  T *P = d_p.get(), *P_prev = d_p_prev.get(), *M = d_m.get(), *M_prev = d_m_prev.get();
  // grid.z = rows x shots of one launch, at most 65535: shots go in chunks.
  const std::int64_t chunk = std::max<std::int64_t>(1, 65535 / std::max<std::int64_t>(p.n[0], 1));
  auto grid_of = [&](const Box& b, std::int64_t shots) {
    return dim3(static_cast<unsigned>((b.hi2 - b.lo2 + kBlockX - 1) / kBlockX),
                static_cast<unsigned>((b.hi1 - b.lo1 + kBlockY - 1) / kBlockY),
                static_cast<unsigned>((b.hi0 - b.lo0) * shots));
  };
  const dim3 block(kBlockX, kBlockY);
  const bool j_empty = j.hi0 <= j.lo0 || j.hi1 <= j.lo1 || j.hi2 <= j.lo2;
  const bool u_empty = u.hi0 <= u.lo0 || u.hi1 <= u.lo1 || u.hi2 <= u.lo2;
  const std::int64_t mirror_total = nshots * halo * plane;
  const unsigned mirror_blocks =
      static_cast<unsigned>(std::min<std::int64_t>((mirror_total + 255) / 256, 65535));
  for (std::int64_t t = 0; t < p.nt; ++t) {
    throw_if_cancelled("tti (cuda)", t, p.nt);
    if (p.nreceivers > 0) {
      record_kernel<<<static_cast<unsigned>(nshots), 128, 0, s>>>(
          P, M, p.record_m, d_receiver_cells.get(), p.nreceivers, points,
          d_receivers.get() + static_cast<std::size_t>(t) * nr);
      SCIPROXY_CUDA_CHECK_LAUNCH("tti record_kernel");
    }
    if (p.free_surface) {
      mirror_kernel<<<mirror_blocks, 256, 0, s>>>(P, halo, 2 * halo, plane, points, nshots, T(-1));
      mirror_kernel<<<mirror_blocks, 256, 0, s>>>(M, halo, 2 * halo, plane, points, nshots, T(-1));
      SCIPROXY_CUDA_CHECK_LAUNCH("tti mirror_kernel");
    }
    for (std::int64_t first = 0; first < nshots && !j_empty; first += chunk) {
      const std::int64_t o = first * points;
      flux_kernel<A, T><<<grid_of(j, std::min(chunk, nshots - first)), block, 0, s>>>(
          j, p.n[1], p.n[2], points, p.rh[0], p.rh[1], p.rh[2], P + o, M + o, co, flux[0].get() + o,
          flux[1].get() + o, flux[2].get() + o, flux[3].get() + o, flux[4].get() + o,
          flux[5].get() + o);
      SCIPROXY_CUDA_CHECK_LAUNCH("tti flux_kernel");
    }
    if (p.free_surface) {
      mirror_kernel<<<mirror_blocks, 256, 0, s>>>(flux[0].get(), halo, 2 * halo - 1, plane, points,
                                                  nshots, T(1));
      mirror_kernel<<<mirror_blocks, 256, 0, s>>>(flux[3].get(), halo, 2 * halo - 1, plane, points,
                                                  nshots, T(1));
      SCIPROXY_CUDA_CHECK_LAUNCH("tti mirror_kernel");
    }
    for (std::int64_t first = 0; first < nshots && !u_empty; first += chunk) {
      const std::int64_t o = first * points;
      update_kernel<A, T><<<grid_of(u, std::min(chunk, nshots - first)), block, 0, s>>>(
          u, p.n[1], p.n[2], points, p.rh[0], p.rh[1], p.rh[2], P + o, P_prev + o, M + o,
          M_prev + o, co, flux[0].get() + o, flux[1].get() + o, flux[2].get() + o,
          flux[3].get() + o, flux[4].get() + o, flux[5].get() + o);
      SCIPROXY_CUDA_CHECK_LAUNCH("tti update_kernel");
    }
    std::swap(P, P_prev);
    std::swap(M, M_prev);
    if (p.nsources > 0) {
      inject_kernel<<<static_cast<unsigned>((nshots + 63) / 64), 64, 0, s>>>(
          P, M, p.inject_m, d_source_cells.get(), d_source_scale.get(),
          d_sources.get() + static_cast<std::size_t>(t) * ns, p.nsources, points, nshots);
      SCIPROXY_CUDA_CHECK_LAUNCH("tti inject_kernel");
    }
  }
  if (p.free_surface)  // the mirror rows are the first halo * plane values of every shot
    for (T* f : {P, P_prev, M, M_prev})
      SCIPROXY_CUDA_CHECK(cudaMemset2DAsync(f, static_cast<std::size_t>(points) * sizeof(T), 0,
                                            static_cast<std::size_t>(halo * plane) * sizeof(T),
                                            static_cast<std::size_t>(nshots), s));
  stepped.record(s);
  // The device pointers swapped with the steps: P is u^nt whatever the parity of nt.
  SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(fields.p, P, all * sizeof(T), cudaMemcpyDeviceToHost, s));
  SCIPROXY_CUDA_CHECK(
      cudaMemcpyAsync(fields.p_prev, P_prev, all * sizeof(T), cudaMemcpyDeviceToHost, s));
  SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(fields.m, M, all * sizeof(T), cudaMemcpyDeviceToHost, s));
  SCIPROXY_CUDA_CHECK(
      cudaMemcpyAsync(fields.m_prev, M_prev, all * sizeof(T), cudaMemcpyDeviceToHost, s));
  if (nr > 0 && p.nt > 0)
    SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(receivers, d_receivers.get(),
                                        nr * static_cast<std::size_t>(p.nt) * sizeof(T),
                                        cudaMemcpyDeviceToHost, s));
  done.record(s);
  SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(s));
  if (timers) {
    timers->record("upload", elapsed_seconds(start, uploaded));
    timers->record("steps", elapsed_seconds(uploaded, stepped));
    timers->record("download", elapsed_seconds(stepped, done));
  }
}

}  // namespace

template <class T>
SCIPROXY_TTI_FORWARD(T) {
  const int device_index = ctx.device_index();
  cuda_detail::require_device("tti", device_index);
  cuda_detail::DeviceGuard guard;
  SCIPROXY_CUDA_CHECK(cudaSetDevice(device_index));
  with_value<SpaceOrders>(p.order, "space_order", [&](auto a) {
    run_order<decltype(a)::value>(p, fields, sources, receivers, ctx.timers);
  });
}

template SCIPROXY_TTI_FORWARD(float);
template SCIPROXY_TTI_FORWARD(double);

}  // namespace sciproxy::tti::kernels::cuda
