// CUDA backend of the TTI workshop demo operator. Per step (kernels.hpp; docs/kernels/tti.md,
// "The workshop operator"), with the per-point arithmetic of math.hpp shared with the cpu:
//   F = a g + (bma (n.g) + s) n,  g = D+ u               (flux)
//   u+ = (2 - d) u + (d - 1) u- + m (D- . F)             (divergence and update)
//   u+ += scaled_c s(t) at the 8 source corners           (injection; distinct cells, no atomics)
//
// two-pass: the demo's form (as Devito generated it): flux_kernel writes Fx, Fy, Fz over the grid
// (one thread per point, 32 x 8 blocks over z, y; x along grid.z), divergence_kernel reads them.
// About 72 bytes per point per step in float32 reach DRAM.
//
// fused: one kernel per step, 2.5-D blocking (Micikevicius 2009): a block of kTileZ x kTileY
// threads owns a (z, y) tile and streams along x through a chunk of planes. At plane j each
// thread computes the flux of its own point and keeps it in registers: Fx in a queue of 2M planes
// (D-x spans them), Fy and Fz in queues of M planes (they are used at plane i = j - M + 1). At
// plane i the block writes its own Fy, Fz to shared memory, computes those of the tile's y and z
// borders (M - 1 / M points, widened by the D- stencil) directly at plane i, and finishes
// div and the update of plane i. DRAM sees u (the stencil reads hit L1/L2), u-, the eight
// coefficients and u+: 44 bytes per point in float32. A chunk starts 2M - 1 planes early to fill
// the queue; chunks give the GPU enough blocks for several waves.
//
// Timers: "upload", "flux pass" and "divergence pass" (two-pass) or "fused flux + divergence",
// "source injection", "download", from CUDA events on one stream, recorded per step (no host
// clock around asynchronous launches, so no CUDA_LAUNCH_BLOCKING is needed); NVTX ranges too.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/cuda_check.cuh"
#include "core/cuda_resources.cuh"
#include "core/hd.hpp"
#include "sciproxy/core/cancel.hpp"
#include "sciproxy/core/error.hpp"
#include "tti/kernels.hpp"
#include "tti/math.hpp"

namespace sciproxy::tti::kernels::cuda {

namespace {

using std::int64_t;

constexpr int kPassX = 32, kPassY = 8;   // two-pass blocks (z, y)
constexpr int kTileZ = 32, kTileY = 16;  // fused blocks (z, y)
constexpr int64_t kMaxGridZ = 65535;

template <class T>
struct Args {
  const T *nx, *ny, *nz, *a, *bma, *s, *m, *d;
  int64_t sx, sy;  // strides of x and y in the padded grid
  int n0, n1, n2;  // grid points
  int halo;        // M
  T rhx, rhy, rhz;
};

template <class T>
__device__ __forceinline__ int64_t padded_index(const Args<T>& p, int64_t i, int64_t j, int64_t k) {
  return (i + p.halo) * p.sx + (j + p.halo) * p.sy + (k + p.halo);
}

// The flux at padded index q (an interior point).
template <int A, class T>
__device__ __forceinline__ void flux_at(const Args<T>& p, const T* __restrict__ u, int64_t q, T& fx,
                                        T& fy, T& fz) {
  T gx, gy, gz;
  staggered_gradient<A>(u + q, static_cast<long>(p.sx), static_cast<long>(p.sy), p.rhx, p.rhy,
                        p.rhz, gx, gy, gz);
  demo_flux(gx, gy, gz, p.nx[q], p.ny[q], p.nz[q], p.a[q], p.bma[q], p.s[q], fx, fy, fz);
}

template <int A, class T>
__global__ void __launch_bounds__(kPassX* kPassY)
    flux_kernel(Args<T> p, const T* __restrict__ u, T* __restrict__ fx, T* __restrict__ fy,
                T* __restrict__ fz) {
  const int k = blockIdx.x * kPassX + threadIdx.x;
  const int j = blockIdx.y * kPassY + threadIdx.y;
  if (k >= p.n2 || j >= p.n1) return;
  for (int64_t i = blockIdx.z; i < p.n0; i += gridDim.z) {
    const int64_t q = padded_index(p, i, j, k);
    flux_at<A>(p, u, q, fx[q], fy[q], fz[q]);
  }
}

template <int A, class T>
__global__ void __launch_bounds__(kPassX* kPassY)
    divergence_kernel(Args<T> p, const T* __restrict__ fx, const T* __restrict__ fy,
                      const T* __restrict__ fz, const T* __restrict__ u, T* __restrict__ u_next) {
  const int k = blockIdx.x * kPassX + threadIdx.x;
  const int j = blockIdx.y * kPassY + threadIdx.y;
  if (k >= p.n2 || j >= p.n1) return;
  for (int64_t i = blockIdx.z; i < p.n0; i += gridDim.z) {
    const int64_t q = padded_index(p, i, j, k);
    const T div = staggered_backward<A>(fx + q, static_cast<long>(p.sx), p.rhx) +
                  staggered_backward<A>(fy + q, static_cast<long>(p.sy), p.rhy) +
                  staggered_backward<A>(fz + q, 1L, p.rhz);
    u_next[q] = leapfrog_update(u[q], u_next[q], p.m[q], p.d[q], div);
  }
}

// One block: tile (z0 .. z0 + kTileZ, y0 .. y0 + kTileY) through output planes [x0, x1).
template <int A, class T>
__global__ void __launch_bounds__(kTileZ* kTileY)
    fused_kernel(Args<T> p, const T* __restrict__ u, T* __restrict__ u_next, int planes_per_chunk) {
  constexpr int M = A / 2;
  __shared__ T
      s_fy[kTileY + 2 * M - 1][kTileZ];  // Fy of plane i, rows y0 - M .. y0 + kTileY + M - 2
  __shared__ T s_fz[kTileY][kTileZ + 2 * M - 1];  // Fz of plane i, columns z0 - M ..
  const int tz = threadIdx.x, ty = threadIdx.y;
  const int z0 = blockIdx.x * kTileZ, y0 = blockIdx.y * kTileY;
  const int z = z0 + tz, y = y0 + ty;
  const bool inside = z < p.n2 && y < p.n1;
  const int x0 = blockIdx.z * planes_per_chunk;
  const int x1 = min(p.n0, x0 + planes_per_chunk);
  const int thread = ty * kTileZ + tz;

  T qx[2 * M], qy[M], qz[M];  // flux queues: qx[c] is plane i - M + c, qy[0] and qz[0] plane i
#pragma unroll
  for (int c = 0; c < 2 * M; ++c) qx[c] = T(0);
#pragma unroll
  for (int c = 0; c < M; ++c) qy[c] = qz[c] = T(0);

  for (int j = x0 - M; j < x1 + M - 1; ++j) {
    T fx = T(0), fy = T(0), fz = T(0);
    if (inside && j >= 0 && j < p.n0) flux_at<A>(p, u, padded_index(p, j, y, z), fx, fy, fz);
#pragma unroll
    for (int c = 0; c < 2 * M - 1; ++c) qx[c] = qx[c + 1];
    qx[2 * M - 1] = fx;
#pragma unroll
    for (int c = 0; c < M - 1; ++c) {
      qy[c] = qy[c + 1];
      qz[c] = qz[c + 1];
    }
    qy[M - 1] = fy;
    qz[M - 1] = fz;

    const int i = j - (M - 1);
    if (i < x0) continue;  // filling the queues (uniform across the block)
    s_fy[ty + M][tz] = qy[0];
    s_fz[ty][tz + M] = qz[0];
    // Fy of the 2M - 1 border rows at this thread's column set, Fz of the border columns.
    for (int h = thread; h < (2 * M - 1) * kTileZ; h += kTileZ * kTileY) {
      const int r = h / kTileZ, c = h % kTileZ;
      const int yy = r < M ? y0 - M + r : y0 + kTileY + (r - M);
      const int zz = z0 + c;
      T gx_unused, gy_flux = T(0), gz_unused;
      if (yy >= 0 && yy < p.n1 && zz < p.n2)
        flux_at<A>(p, u, padded_index(p, i, yy, zz), gx_unused, gy_flux, gz_unused);
      s_fy[yy - y0 + M][c] = gy_flux;
    }
    for (int h = thread; h < (2 * M - 1) * kTileY; h += kTileZ * kTileY) {
      const int r = h / (2 * M - 1), c = h % (2 * M - 1);
      const int zz = c < M ? z0 - M + c : z0 + kTileZ + (c - M);
      const int yy = y0 + r;
      T gx_unused, gy_unused, gz_flux = T(0);
      if (zz >= 0 && zz < p.n2 && yy < p.n1)
        flux_at<A>(p, u, padded_index(p, i, yy, zz), gx_unused, gy_unused, gz_flux);
      s_fz[r][zz - z0 + M] = gz_flux;
    }
    __syncthreads();
    if (inside) {
      T dx = T(0);
#pragma unroll
      for (int k = 1; k <= M; ++k)
        dx += T(staggered_coefficient<A>(k)) * (qx[M + k - 1] - qx[M - k]);
      const T div = dx * p.rhx +
                    staggered_backward<A>(&s_fy[ty + M][tz], static_cast<long>(kTileZ), p.rhy) +
                    staggered_backward<A>(&s_fz[ty][tz + M], 1L, p.rhz);
      const int64_t q = padded_index(p, i, y, z);
      u_next[q] = leapfrog_update(u[q], u_next[q], p.m[q], p.d[q], div);
    }
    __syncthreads();
  }
}

template <class T>
struct Injection {
  int64_t cells[8];
  T scaled[8];
};

template <class T>
__global__ void inject_kernel(Injection<T> src, const T* __restrict__ amplitudes, int64_t t,
                              T* __restrict__ u_next) {
  const int c = threadIdx.x;
  if (c < 8) u_next[src.cells[c]] += src.scaled[c] * amplitudes[t];  // 8 distinct cells
}

// ---------------------------------------------------------------------------------------------
// Host side.

using cuda_detail::DeviceArray;
using cuda_detail::elapsed_seconds;
using cuda_detail::Event;
using cuda_detail::NvtxRange;
using cuda_detail::Stream;

template <class T>
DeviceArray<T> upload(const T* host, int64_t count, cudaStream_t s) {
  DeviceArray<T> d(count);
  SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(d.get(), host, d.bytes(), cudaMemcpyHostToDevice, s));
  return d;
}

template <int A, class T>
void run_order(const DemoGrid& g, const DemoCoefficients<T>& c, const DemoSource<T>& src,
               int64_t nt, DemoFields<T> fields, TtiDemoForm form, int device_index,
               Timers* timers) {
  cuda_detail::DeviceGuard guard;
  SCIPROXY_CUDA_CHECK(cudaSetDevice(device_index));
  cudaDeviceProp prop{};
  SCIPROXY_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_index));
  Stream stream;
  const cudaStream_t s = stream.get();
  const int64_t points = g.padded_points();

  Event upload_begin, upload_end;
  upload_begin.record(s);
  DeviceArray<T> u = upload(fields.u, points, s);
  DeviceArray<T> u_prev = upload(fields.u_prev, points, s);
  DeviceArray<T> nx = upload(c.nx, points, s), ny = upload(c.ny, points, s),
                 nz = upload(c.nz, points, s);
  DeviceArray<T> a = upload(c.a, points, s), bma = upload(c.bma, points, s),
                 sc = upload(c.s, points, s);
  DeviceArray<T> m = upload(c.m, points, s), d = upload(c.d, points, s);
  DeviceArray<T> amplitudes = upload(src.amplitudes, nt, s);
  DeviceArray<T> fx, fy, fz;
  if (form == TtiDemoForm::two_pass) {
    // Zero in the halo (and the padded columns), which the flux kernel never writes.
    fx = DeviceArray<T>(points);
    fy = DeviceArray<T>(points);
    fz = DeviceArray<T>(points);
    for (auto* f : {&fx, &fy, &fz})
      SCIPROXY_CUDA_CHECK(cudaMemsetAsync(f->get(), 0, f->bytes(), s));
  }
  upload_end.record(s);

  Args<T> args{nx.get(),
               ny.get(),
               nz.get(),
               a.get(),
               bma.get(),
               sc.get(),
               m.get(),
               d.get(),
               g.stride_x(),
               g.stride_y(),
               static_cast<int>(g.n[0]),
               static_cast<int>(g.n[1]),
               static_cast<int>(g.n[2]),
               g.halo,
               T(1 / g.spacing[0]),
               T(1 / g.spacing[1]),
               T(1 / g.spacing[2])};
  Injection<T> injection{};
  for (int k = 0; k < 8; ++k) {
    injection.cells[k] = src.cells[k];
    injection.scaled[k] = src.scaled[k];
  }

  const dim3 pass_block(kPassX, kPassY);
  const dim3 pass_grid(static_cast<unsigned>((g.n[2] + kPassX - 1) / kPassX),
                       static_cast<unsigned>((g.n[1] + kPassY - 1) / kPassY),
                       static_cast<unsigned>(std::min<int64_t>(g.n[0], kMaxGridZ)));
  const dim3 tile_block(kTileZ, kTileY);
  const int64_t tiles = ((g.n[2] + kTileZ - 1) / kTileZ) * ((g.n[1] + kTileY - 1) / kTileY);
  // Chunks along x: about four waves of resident blocks, each chunk at least 8M planes long so
  // that refilling the queues (2M - 1 planes) costs little.
  const int64_t resident = static_cast<int64_t>(prop.multiProcessorCount) *
                           std::max(1, prop.maxThreadsPerMultiProcessor / (kTileZ * kTileY));
  int64_t chunks = std::max<int64_t>(1, (4 * resident + tiles - 1) / tiles);
  chunks = std::min<int64_t>({chunks, std::max<int64_t>(1, g.n[0] / (8 * (A / 2))), kMaxGridZ});
  const int planes_per_chunk = static_cast<int>((g.n[0] + chunks - 1) / chunks);
  chunks = (g.n[0] + planes_per_chunk - 1) / planes_per_chunk;
  const dim3 tile_grid(static_cast<unsigned>((g.n[2] + kTileZ - 1) / kTileZ),
                       static_cast<unsigned>((g.n[1] + kTileY - 1) / kTileY),
                       static_cast<unsigned>(chunks));

  // Events at every kernel boundary of every step: [step][0..3].
  std::vector<std::array<Event, 4>> marks(static_cast<std::size_t>(nt));
  T* cur = u.get();
  T* nxt = u_prev.get();  // u^{t-1} on entry of a step, u^{t+1} after it
  {
    NvtxRange range("tti demo steps");
    for (int64_t t = 0; t < nt; ++t) {
      throw_if_cancelled("tti_demo (cuda)", t, nt);
      auto& e = marks[static_cast<std::size_t>(t)];
      e[0].record(s);
      if (form == TtiDemoForm::two_pass) {
        flux_kernel<A, T><<<pass_grid, pass_block, 0, s>>>(args, cur, fx.get(), fy.get(), fz.get());
        SCIPROXY_CUDA_CHECK_LAUNCH("tti demo flux_kernel");
        e[1].record(s);
        divergence_kernel<A, T>
            <<<pass_grid, pass_block, 0, s>>>(args, fx.get(), fy.get(), fz.get(), cur, nxt);
        SCIPROXY_CUDA_CHECK_LAUNCH("tti demo divergence_kernel");
      } else {
        e[1].record(s);
        fused_kernel<A, T><<<tile_grid, tile_block, 0, s>>>(args, cur, nxt, planes_per_chunk);
        SCIPROXY_CUDA_CHECK_LAUNCH("tti demo fused_kernel");
      }
      e[2].record(s);
      inject_kernel<T><<<1, 32, 0, s>>>(injection, amplitudes.get(), t, nxt);
      SCIPROXY_CUDA_CHECK_LAUNCH("tti demo inject_kernel");
      e[3].record(s);
      std::swap(cur, nxt);
    }
  }
  Event download_begin, download_end;
  download_begin.record(s);
  SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(fields.u, cur, u.bytes(), cudaMemcpyDeviceToHost, s));
  SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(fields.u_prev, nxt, u.bytes(), cudaMemcpyDeviceToHost, s));
  download_end.record(s);
  SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(s));

  if (timers) {
    timers->record("upload", elapsed_seconds(upload_begin, upload_end));
    for (const auto& e : marks) {
      if (form == TtiDemoForm::two_pass) {
        timers->record("flux pass", elapsed_seconds(e[0], e[1]));
        timers->record("divergence pass", elapsed_seconds(e[1], e[2]));
      } else {
        timers->record("fused flux + divergence", elapsed_seconds(e[1], e[2]));
      }
      timers->record("source injection", elapsed_seconds(e[2], e[3]));
    }
    timers->record("download", elapsed_seconds(download_begin, download_end));
  }
}

}  // namespace

template <class T>
SCIPROXY_TTI_DEMO_FORWARD(T) {
  cuda_detail::require_device("tti_demo", ctx.device_index());
  with_value<SpaceOrders>(p.grid.order, "space_order", [&](auto a) {
    run_order<decltype(a)::value>(p.grid, p.coef, p.source, p.nt, fields, p.form,
                                  ctx.device_index(), ctx.timers);
  });
}

template SCIPROXY_TTI_DEMO_FORWARD(float);
template SCIPROXY_TTI_DEMO_FORWARD(double);

}  // namespace sciproxy::tti::kernels::cuda
