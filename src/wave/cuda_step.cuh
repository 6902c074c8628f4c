// CUDA backend of the scalar propagator, device side (private to cuda_forward.cu and
// cuda_backward.cu): the step kernels, the source / receiver exchange and the elementwise
// kernels. The scheme is kernels.hpp's, with the per-cell arithmetic of math.hpp (see
// docs/kernels/scalar-wave.md).
//
// Per step, one fused kernel (template <NDIM, A, T>; 32x4 blocks over the two fastest
// dimensions, grid.z over shots, times the slowest dimension in 3D) updates every cell outside
// the halo. Per dimension, a cell inside the box where the PML vanishes (pml_interior) takes the
// plain second derivative, so warps of the interior skip all C-PML work; the others call
// pml_forward / pml_adjoint. u^{t+1} goes into the u^{t-1} buffer and the two swap; psi (and in
// the adjoint zeta-bar too) is double-buffered. A tiny kernel per step (one block per shot) then
// adds the sources to u^{t+1} and, after a block barrier, records the receivers of the next
// step, so receivers read u^t before step t as specified.
//
// Adjoint (steps nt-1 .. 0). The u^{t-1} buffer holds P = -(adjoint of u^t through the u^{t-1}
// slot of the state), so that the adjoint step has the forward step's shape:
//   ubar^t = 2 lambda - P + sum_x [D2((1+b) tbar) - D1(d1bar)],   P' = lambda
// written into P's buffer, after which the buffers swap (lambda: adjoint of u^{t+1}). In the
// adjoint the interior box is pml_interior shrunk by A/2 per side, where also the profiles of
// every stencil neighbour vanish (pml_adjoint reads b and b' of the neighbours); in between,
// pml_adjoint runs with zero profiles at the centre, which gives the same value.
//
// Gradient of v: at the stored steps, grad_v += lambda * stored * store_interval, per shot
// (into per-shot partials that sum_shots_kernel adds up in shot order when several shots share
// one model): deterministic, no atomics.
//
// Born: the background and the scattered field are two field sets of the same call, stepped by
// one thread per cell (template flag BORN): the scattered update reads the background's W of
// the same cell from a register, and the coupled background adjoint reads lambda_sc, which the
// step does not write. The exchange kernel serves both fields in one launch (grid.y = field).
//
// Everything here sits in an unnamed namespace: each of the two translation units gets its own
// kernels (no symbol is shared between them).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/hd.hpp"
#include "wave/kernels.hpp"
#include "wave/math.hpp"

namespace sciproxy::wave::kernels::cuda {

namespace {
using std::int64_t;

constexpr int kBlockX = 32;  // threads along the fastest dimension (one warp)
constexpr int kBlockY = 4;   // along the next one
constexpr int kStepThreads = kBlockX * kBlockY;
constexpr int kSmallThreads = 128;  // exchange and elementwise kernels
constexpr int64_t kMaxGridYZ = 65535;
constexpr int64_t kMaxGridX = 2147483647;
constexpr int64_t kMaxElementwiseBlocks = 65536;
constexpr int kRingSlots = 3;  // device snapshots in flight when the storage streams

// ---------------------------------------------------------------------------------------------
// Device side. The thread -> cell mapping and the per-cell work are __host__ __device__, so the
// same code can be replayed on the host for checking; the kernels only supply the coordinates.

// One wavefield's buffers in a step: the only field, or in Born [0] the background and [1] the
// scattered field.
template <class T>
struct FieldArgs {
  const T* u;              // forward: u^t; adjoint: lambda (adjoint of u^{t+1}); all shots
  T* u_next;               // forward: in u^{t-1}, out u^{t+1}; adjoint: in P, out ubar^t
  const T* psi[kMaxDims];  // forward: psi^t; adjoint: psibar^{t+1}
  T* psi_next[kMaxDims];   // forward: psi^{t+1}; adjoint: psibar^t
  T* zeta[kMaxDims];       // forward: zeta, updated in place; adjoint: zetabar^{t+1}
  T* zeta_next[kMaxDims];  // adjoint: zetabar^t
};

template <class T>
struct StepArgs {
  FieldArgs<T> f[2];
  const T* v2dt2;         // v^2 dt^2: [nshots, points] or [points]
  const T* coupling;      // Born: 2 v scatter dt^2, laid out as v2dt2
  const T* v;             // forward, when storing: v, laid out as v2dt2
  int64_t v_shot_stride;  // points when v is batched, else 0
  T* stored;   // this step's snapshot [nshots, points], or null when the step stores nothing
  T* grad_v;   // adjoint, at stored steps: [nshots, points] per-shot accumulators
  T two_dt2;   // forward: 2 dt^2
  T interval;  // adjoint: store_interval
  const T* pa[kMaxDims];
  const T* pb[kMaxDims];
  const T* pdbdx[kMaxDims];
  T rdx[kMaxDims], rdx2[kMaxDims];
  int64_t n[kMaxDims];                 // padded shape
  int64_t stride[kMaxDims];            // flat stride of each dimension
  int64_t lo[kMaxDims], hi[kMaxDims];  // per dimension, the box that skips the C-PML terms
  int64_t points, nshots;
};

// Block and thread indices of a step kernel (block_y and block_z already offset by the chunk
// bases when the grid is split).
struct ThreadCoord {
  unsigned block_x, block_y, block_z, thread_x, thread_y;
};

// D2 g along one dimension, g = adjoint_g<BORN> (v^2 dt^2 lambda, plus in the Born background
// adjoint the coupling term), in the order pml_adjoint evaluates it when every profile is zero.
template <int A, bool BORN, class T>
SCIPROXY_HD T diff2_g(const AdjointInputs<T>& in, int64_t i, int64_t s, T rdx2) {
  T sum = T(d2_coefficient<A>(0)) * adjoint_g<BORN>(in, i);
  SCIPROXY_UNROLL
  for (int k = 1; k <= A / 2; ++k)
    sum +=
        T(d2_coefficient<A>(k)) * (adjoint_g<BORN>(in, i + k * s) + adjoint_g<BORN>(in, i - k * s));
  return sum * rdx2;
}

// Flat stride of dimension d: the last used one is contiguous (a literal 1 after unrolling).
template <int NDIM, class T>
SCIPROXY_HD int64_t stride_of(const StepArgs<T>& a, int d) {
  return d == NDIM - 1 ? int64_t(1) : a.stride[d];
}

// W of one field at cell i (coordinates x) of the shot at offset off; writes psi^{t+1} and updates
// zeta in the PML.
template <int NDIM, int A, class T>
SCIPROXY_HD T forward_w(const StepArgs<T>& a, const FieldArgs<T>& f, int64_t off,
                        const int64_t (&x)[kMaxDims], int64_t i) {
  const T* u = f.u + off;
  T w = 0;
  SCIPROXY_UNROLL
  for (int d = 0; d < NDIM; ++d) {
    const int64_t s = stride_of<NDIM>(a, d);
    if (x[d] >= a.lo[d] && x[d] < a.hi[d]) {
      w += diff2<A>(u, i, s, a.rdx2[d]);
    } else {
      w += pml_forward<A>(u, f.psi[d] + off, f.psi_next[d] + off, f.zeta[d] + off, i, s, x[d],
                          PmlProfile<T>{a.pa[d], a.pb[d], a.pdbdx[d]}, a.rdx[d], a.rdx2[d]);
    }
  }
  return w;
}

// Forward step at cell i of one shot; BORN also steps the scattered field, driven by the
// background's W of the same cell.
template <int NDIM, int A, bool BORN, class T>
SCIPROXY_HD void forward_cell(const StepArgs<T>& a, int64_t shot, const int64_t (&x)[kMaxDims],
                              int64_t i) {
  const int64_t off = shot * a.points;
  const T w = forward_w<NDIM, A>(a, a.f[0], off, x, i);
  const int64_t vi = shot * a.v_shot_stride + i;
  const T v2dt2 = a.v2dt2[vi];
  T* un = a.f[0].u_next + off;
  un[i] = v2dt2 * w + T(2) * a.f[0].u[off + i] - un[i];
  if (a.stored) a.stored[off + i] = a.two_dt2 * a.v[vi] * w;
  if constexpr (BORN) {
    const T ws = forward_w<NDIM, A>(a, a.f[1], off, x, i);
    T* usn = a.f[1].u_next + off;
    usn[i] = v2dt2 * ws + T(2) * a.f[1].u[off + i] - usn[i] + a.coupling[vi] * w;
  }
}

// The adjoint's stencil terms of one field at cell i of one shot (writes psibar^t and zetabar^t
// in the PML). COUPLED: the Born background adjoint, g with the coupling to lambda_sc = f[1].u.
template <int NDIM, int A, bool COUPLED, class T>
SCIPROXY_HD T adjoint_terms(const StepArgs<T>& a, const FieldArgs<T>& f, int64_t shot,
                            const int64_t (&x)[kMaxDims], int64_t i) {
  const int64_t off = shot * a.points, model = shot * a.v_shot_stride;
  T acc = 0;
  SCIPROXY_UNROLL
  for (int d = 0; d < NDIM; ++d) {
    const int64_t s = stride_of<NDIM>(a, d);
    const AdjointInputs<T> in{f.u + off,
                              a.v2dt2 + model,
                              f.psi[d] + off,
                              f.zeta[d] + off,
                              COUPLED ? a.coupling + model : nullptr,
                              COUPLED ? a.f[1].u + off : nullptr};
    if (x[d] >= a.lo[d] && x[d] < a.hi[d]) {
      acc += diff2_g<A, COUPLED>(in, i, s, a.rdx2[d]);
    } else {
      acc +=
          pml_adjoint<A, COUPLED>(in, f.psi_next[d] + off, f.zeta_next[d] + off, i, s, x[d],
                                  PmlProfile<T>{a.pa[d], a.pb[d], a.pdbdx[d]}, a.rdx[d], a.rdx2[d]);
    }
  }
  return acc;
}

// Adjoint step at cell i of one shot; BORN: the coupled background adjoint and the plain
// adjoint of the scattered field.
template <int NDIM, int A, bool BORN, class T>
SCIPROXY_HD void backward_cell(const StepArgs<T>& a, int64_t shot, const int64_t (&x)[kMaxDims],
                               int64_t i) {
  const int64_t off = shot * a.points;
  const T acc = adjoint_terms<NDIM, A, BORN>(a, a.f[0], shot, x, i);
  const T l = a.f[0].u[off + i];
  T* p = a.f[0].u_next + off;
  p[i] = T(2) * l - p[i] + acc;
  if (a.stored) a.grad_v[off + i] += l * a.stored[off + i] * a.interval;
  if constexpr (BORN) {
    const T acc_sc = adjoint_terms<NDIM, A, false>(a, a.f[1], shot, x, i);
    T* ps = a.f[1].u_next + off;
    ps[i] = T(2) * a.f[1].u[off + i] - ps[i] + acc_sc;
  }
}

// The cell of one thread: 1D: 128 consecutive cells per block, z over shots; 2D: x over dim 1,
// y over dim 0, z over shots; 3D: x over dim 2, y over dim 1, z over shots x dim 0. No loops, so
// that nothing stays live across cells: grids beyond the limits of y and z are split into
// several launches (ThreadCoord carries the offsets).
template <bool kForward, bool BORN, int NDIM, int A, class T>
SCIPROXY_HD void step_thread(const StepArgs<T>& a, const ThreadCoord& c) {
  constexpr int64_t H = A / 2;
  int64_t shot, x0, x1 = 0, x2 = 0, i;
  if constexpr (NDIM == 1) {
    x0 = H + (int64_t(c.block_x) * kBlockY + c.thread_y) * kBlockX + c.thread_x;
    if (x0 >= a.n[0] - H) return;
    shot = c.block_z;
    i = x0;
  } else if constexpr (NDIM == 2) {
    x1 = H + int64_t(c.block_x) * kBlockX + c.thread_x;
    x0 = H + int64_t(c.block_y) * kBlockY + c.thread_y;
    if (x1 >= a.n[1] - H || x0 >= a.n[0] - H) return;
    shot = c.block_z;
    i = x0 * a.n[1] + x1;
  } else {
    x2 = H + int64_t(c.block_x) * kBlockX + c.thread_x;
    x1 = H + int64_t(c.block_y) * kBlockY + c.thread_y;
    if (x2 >= a.n[2] - H || x1 >= a.n[1] - H) return;
    const auto nz = static_cast<unsigned>(a.n[0] - 2 * H);  // grid.z = nshots * nz < 2^32
    shot = c.block_z / nz;
    x0 = H + (c.block_z - static_cast<unsigned>(shot) * nz);
    i = (x0 * a.n[1] + x1) * a.n[2] + x2;
  }
  const int64_t x[kMaxDims] = {x0, x1, x2};
  if constexpr (kForward)
    forward_cell<NDIM, A, BORN>(a, shot, x, i);
  else
    backward_cell<NDIM, A, BORN>(a, shot, x, i);
}

__device__ __forceinline__ ThreadCoord this_thread() {
  return {blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y};
}

template <int NDIM, int A, bool BORN, class T>
__global__ void __launch_bounds__(kStepThreads)
    forward_step_kernel(const StepArgs<T> a, unsigned y_base, unsigned z_base) {
  ThreadCoord c = this_thread();
  c.block_y += y_base;
  c.block_z += z_base;
  step_thread<true, BORN, NDIM, A>(a, c);
}

template <int NDIM, int A, bool BORN, class T>
__global__ void __launch_bounds__(kStepThreads)
    backward_step_kernel(const StepArgs<T> a, unsigned y_base, unsigned z_base) {
  ThreadCoord c = this_thread();
  c.block_y += y_base;
  c.block_z += z_base;
  step_thread<false, BORN, NDIM, A>(a, c);
}

// Adds values at groups of cells (sources in the forward pass, receiver-data gradients in the
// adjoint), then reads a field at cells (receivers; source gradients), per shot, for one field.
template <class T>
struct ExchangeArgs {
  T* field;  // [nshots, points]
  int64_t points, nshots;
  const T* add;  // [nshots, nadd] of this step, or null
  int64_t nadd;
  const int64_t* shot_groups;    // [nshots + 1]: the groups of each shot
  const int64_t* group_cell;     // [ngroups]
  const int64_t* group_members;  // [ngroups + 1]: where each group's members start
  const int64_t* members;        // [nshots * nadd]: indices into the shot's values
  T* read;                       // [nshots, nread] of this step, or null
  int64_t nread;
  const int64_t* read_cells;  // [nshots, nread]
};

template <class T>
SCIPROXY_HD void exchange_add(const ExchangeArgs<T>& a, int64_t shot, int64_t thread,
                              int64_t threads) {
  T* f = a.field + shot * a.points;
  const T* values = a.add + shot * a.nadd;
  for (int64_t g = a.shot_groups[shot] + thread; g < a.shot_groups[shot + 1]; g += threads) {
    const int64_t cell = a.group_cell[g];
    T sum = f[cell];
    for (int64_t m = a.group_members[g]; m < a.group_members[g + 1]; ++m)
      sum += values[a.members[m]];
    f[cell] = sum;
  }
}

template <class T>
SCIPROXY_HD void exchange_read(const ExchangeArgs<T>& a, int64_t shot, int64_t thread,
                               int64_t threads) {
  const T* f = a.field + shot * a.points;
  for (int64_t r = thread; r < a.nread; r += threads)
    a.read[shot * a.nread + r] = f[a.read_cells[shot * a.nread + r]];
}

template <class T>
__device__ __forceinline__ void exchange_field(const ExchangeArgs<T>& a) {
  for (int64_t shot = blockIdx.x; shot < a.nshots; shot += gridDim.x) {  // block-uniform
    if (a.add) exchange_add(a, shot, threadIdx.x, blockDim.x);
    __syncthreads();  // a receiver in a source cell reads the value after the injection
    if (a.read) exchange_read(a, shot, threadIdx.x, blockDim.x);
  }
}

// grid.y: the field (a0: the only or the background field; a1: Born's scattered field).
template <class T>
__global__ void __launch_bounds__(kSmallThreads)
    exchange_kernel(const ExchangeArgs<T> a0, const ExchangeArgs<T> a1) {
  if (blockIdx.y == 0)  // block-uniform
    exchange_field(a0);
  else
    exchange_field(a1);
}

// c = 2 v scatter dt^2 (in: c = scatter), as the cpu backend computes it.
template <class T>
__global__ void __launch_bounds__(kSmallThreads)
    coupling_kernel(T* c, const T* v, int64_t count, T dt2) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    c[i] = T(2) * v[i] * c[i] * dt2;
}

template <class T>
__global__ void __launch_bounds__(kSmallThreads) square_scale_kernel(T* v, int64_t count, T dt2) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    v[i] = v[i] * v[i] * dt2;
}

template <class T>
__global__ void __launch_bounds__(kSmallThreads) negate_kernel(T* f, int64_t count) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x)
    f[i] = -f[i];
}

// Zeroes the cells of f (snapshots of extent n along the dimension of stride `stride`) whose
// coordinate along that dimension lies in [lo, hi).
template <class T>
__global__ void __launch_bounds__(kSmallThreads)
    zero_slab_kernel(T* f, int64_t count, int64_t stride, int64_t n, int64_t lo, int64_t hi) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t x = (i / stride) % n;
    if (x >= lo && x < hi) f[i] = T(0);
  }
}

// grad_v[i] += partials[0][i] + partials[1][i] + ..., in shot order.
template <class T>
__global__ void __launch_bounds__(kSmallThreads)
    sum_shots_kernel(T* grad_v, const T* partials, int64_t points, int64_t nshots) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < points;
       i += int64_t(gridDim.x) * blockDim.x) {
    T sum = grad_v[i];
    for (int64_t s = 0; s < nshots; ++s) sum += partials[s * points + i];
    grad_v[i] = sum;
  }
}

}  // namespace

}  // namespace sciproxy::wave::kernels::cuda
