// CUDA backend of the scalar propagator (Deepwave's scalar.cu in spirit): the scheme of
// kernels.hpp, with the per-cell arithmetic of math.hpp.
//
// One call keeps every shot resident on the device: the model (as v^2 dt^2), the PML profiles,
// the wavefields, all source and receiver samples and the cell indices are uploaded once, the
// nt steps run back to back on one stream, and the results come back at the end.
//
// Per step, one fused kernel (template <NDIM, A, T>; 32x4 blocks over the two fastest
// dimensions, grid.z over shots, times the slowest dimension in 3D) updates every cell outside
// the halo. Per dimension, a cell inside the box where the PML vanishes (pml_interior) takes the
// plain second derivative, so warps of the interior skip all C-PML work; the others call
// pml_forward / pml_adjoint. u^{t+1} goes into the u^{t-1} buffer and the two swap; psi (and in
// the adjoint zeta-bar too) is double-buffered, the second buffer allocated here. A tiny kernel
// per step (one block per shot) then adds the sources to u^{t+1} and, after a block barrier,
// records the receivers of the next step, so receivers read u^t before step t as specified.
//
// Adjoint (steps nt-1 .. 0). The u^{t-1} buffer holds P = -(adjoint of u^t through the u^{t-1}
// slot of the state), so that the adjoint step has the forward step's shape:
//   ubar^t = 2 lambda - P + sum_x [D2((1+b) tbar) - D1(d1bar)],   P' = lambda
// written into P's buffer, after which the buffers swap (lambda: adjoint of u^{t+1}). P is
// negated once on upload and the output once before download. The source gradient of step t is
// lambda at the source cells, read before the step back; the receiver-data gradient of step t is
// added to ubar^t after it. In the adjoint the interior box is pml_interior shrunk by A/2 per
// side, where also the profiles of every stencil neighbour vanish (pml_adjoint reads b and b'
// of the neighbours); in between, pml_adjoint runs with zero profiles at the centre, which gives
// the same value.
//
// Gradient of v: at the stored steps, grad_v += lambda * stored * store_interval, per shot on the
// device (into grad_v itself when v is batched or there is one shot, else into per-shot partials
// that one final pass adds up in shot order): deterministic, no atomics.
//
// Several sources (or receivers) of one shot in the same cell are grouped on the host: one thread
// adds the group's values in index order, as the sequential host loops do (deterministic, no
// race; receivers may share cells).
//
// Storage of 2 v dt^2 W: resident on the device when it fits in the free memory (less a reserve;
// the environment variable SCIPROXY_WAVE_CUDA_STORAGE_LIMIT, in bytes, caps it further, so tests
// can force the other path); otherwise a ring of kRingSlots device snapshots streams to (forward)
// or from (backward) the host array through pinned staging buffers on a second stream, the host
// copying between the staging and the caller's array while the device computes.
//
// Born (scalar_born_forward / scalar_born_backward): the background and the scattered field are
// two field sets of the same call, stepped by one thread per cell (template flag BORN): the
// scattered update reads the background's W of the same cell from a register, and the coupled
// background adjoint reads lambda_sc, which the step does not write. 2 v scatter dt^2 is computed
// on the device like v^2 dt^2. The exchange kernel serves both fields in one launch (grid.y =
// field): sources into u and u_sc, receivers from u_sc, background receivers from u (and their
// adjoints); Born stores nothing (the image is scalar_backward's).
//
// Timers: "upload", "steps", "download", measured with CUDA events on the compute stream; each
// is also an NVTX range.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_check.cuh"
#include "core/cuda_resources.cuh"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/hd.hpp"
#include "sciproxy/core/timers.hpp"
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
  const T* u;               // forward: u^t; adjoint: lambda (adjoint of u^{t+1}); all shots
  T* u_next;                // forward: in u^{t-1}, out u^{t+1}; adjoint: in P, out ubar^t
  const T* psi[kMaxDims];   // forward: psi^t; adjoint: psibar^{t+1}
  T* psi_next[kMaxDims];    // forward: psi^{t+1}; adjoint: psibar^t
  T* zeta[kMaxDims];        // forward: zeta, updated in place; adjoint: zetabar^{t+1}
  T* zeta_next[kMaxDims];   // adjoint: zetabar^t
};

template <class T>
struct StepArgs {
  FieldArgs<T> f[2];
  const T* v2dt2;    // v^2 dt^2: [nshots, points] or [points]
  const T* coupling; // Born: 2 v scatter dt^2, laid out as v2dt2
  const T* v;        // forward, when storing: v, laid out as v2dt2
  int64_t v_shot_stride;  // points when v is batched, else 0
  T* stored;         // this step's snapshot [nshots, points], or null when the step stores nothing
  T* grad_v;         // adjoint, at stored steps: [nshots, points] per-shot accumulators
  T two_dt2;         // forward: 2 dt^2
  T interval;        // adjoint: store_interval
  const T* pa[kMaxDims];
  const T* pb[kMaxDims];
  const T* pdbdx[kMaxDims];
  T rdx[kMaxDims], rdx2[kMaxDims];
  int64_t n[kMaxDims];       // padded shape
  int64_t stride[kMaxDims];  // flat stride of each dimension
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
    sum += T(d2_coefficient<A>(k)) * (adjoint_g<BORN>(in, i + k * s) + adjoint_g<BORN>(in, i - k * s));
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
SCIPROXY_HD T forward_w(const StepArgs<T>& a, const FieldArgs<T>& f, int64_t off, const int64_t (&x)[kMaxDims],
                        int64_t i) {
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
SCIPROXY_HD void forward_cell(const StepArgs<T>& a, int64_t shot, const int64_t (&x)[kMaxDims], int64_t i) {
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
SCIPROXY_HD T adjoint_terms(const StepArgs<T>& a, const FieldArgs<T>& f, int64_t shot, const int64_t (&x)[kMaxDims],
                            int64_t i) {
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
      acc += pml_adjoint<A, COUPLED>(in, f.psi_next[d] + off, f.zeta_next[d] + off, i, s, x[d],
                                     PmlProfile<T>{a.pa[d], a.pb[d], a.pdbdx[d]}, a.rdx[d], a.rdx2[d]);
    }
  }
  return acc;
}

// Adjoint step at cell i of one shot; BORN: the coupled background adjoint and the plain
// adjoint of the scattered field.
template <int NDIM, int A, bool BORN, class T>
SCIPROXY_HD void backward_cell(const StepArgs<T>& a, int64_t shot, const int64_t (&x)[kMaxDims], int64_t i) {
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
__global__ void __launch_bounds__(kStepThreads) forward_step_kernel(const StepArgs<T> a, unsigned y_base,
                                                                     unsigned z_base) {
  ThreadCoord c = this_thread();
  c.block_y += y_base;
  c.block_z += z_base;
  step_thread<true, BORN, NDIM, A>(a, c);
}

template <int NDIM, int A, bool BORN, class T>
__global__ void __launch_bounds__(kStepThreads) backward_step_kernel(const StepArgs<T> a, unsigned y_base,
                                                                      unsigned z_base) {
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
  const T* add;       // [nshots, nadd] of this step, or null
  int64_t nadd;
  const int64_t* shot_groups;    // [nshots + 1]: the groups of each shot
  const int64_t* group_cell;     // [ngroups]
  const int64_t* group_members;  // [ngroups + 1]: where each group's members start
  const int64_t* members;        // [nshots * nadd]: indices into the shot's values
  T* read;            // [nshots, nread] of this step, or null
  int64_t nread;
  const int64_t* read_cells;  // [nshots, nread]
};

template <class T>
SCIPROXY_HD void exchange_add(const ExchangeArgs<T>& a, int64_t shot, int64_t thread, int64_t threads) {
  T* f = a.field + shot * a.points;
  const T* values = a.add + shot * a.nadd;
  for (int64_t g = a.shot_groups[shot] + thread; g < a.shot_groups[shot + 1]; g += threads) {
    const int64_t cell = a.group_cell[g];
    T sum = f[cell];
    for (int64_t m = a.group_members[g]; m < a.group_members[g + 1]; ++m) sum += values[a.members[m]];
    f[cell] = sum;
  }
}

template <class T>
SCIPROXY_HD void exchange_read(const ExchangeArgs<T>& a, int64_t shot, int64_t thread, int64_t threads) {
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
__global__ void __launch_bounds__(kSmallThreads) exchange_kernel(const ExchangeArgs<T> a0, const ExchangeArgs<T> a1) {
  if (blockIdx.y == 0)  // block-uniform
    exchange_field(a0);
  else
    exchange_field(a1);
}

// c = 2 v scatter dt^2 (in: c = scatter), as the cpu backend computes it.
template <class T>
__global__ void __launch_bounds__(kSmallThreads) coupling_kernel(T* c, const T* v, int64_t count, T dt2) {
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

// grad_v[i] += partials[0][i] + partials[1][i] + ..., in shot order.
template <class T>
__global__ void __launch_bounds__(kSmallThreads) sum_shots_kernel(T* grad_v, const T* partials, int64_t points,
                                                                  int64_t nshots) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < points;
       i += int64_t(gridDim.x) * blockDim.x) {
    T sum = grad_v[i];
    for (int64_t s = 0; s < nshots; ++s) sum += partials[s * points + i];
    grad_v[i] = sum;
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

using cuda_detail::DeviceArray;
using cuda_detail::elapsed_seconds;
using cuda_detail::Event;
using cuda_detail::NvtxRange;
using cuda_detail::PinnedArray;
using cuda_detail::Stream;

void require_device(int device_index) {
  const int count = sciproxy::cuda_device_count();
  if (count == 0)
    throw DeviceUnavailable("scalar on cuda:" + std::to_string(device_index) + ": " +
                            sciproxy::cuda_unavailable_reason());
  if (device_index < 0 || device_index >= count)
    throw DeviceUnavailable("scalar: no CUDA device " + std::to_string(device_index) + " (" +
                            std::to_string(count) + " present)");
}

[[noreturn]] void invalid(const char* function, const std::string& what) {
  throw InvalidArgument(std::string(function) + " (cuda): " + what);
}

template <class T>
void check_cells(const ScalarProblem<T>& p, const int64_t* cells, int64_t count, const char* what,
                 const char* function) {
  const int64_t points = p.points();
  for (int64_t j = 0; j < count; ++j)
    if (cells[j] < 0 || cells[j] >= points)
      invalid(function, std::string(what) + " index " + std::to_string(cells[j]) + " outside the padded grid of " +
                            std::to_string(points) + " cells");
}

template <class T>
void check_problem(const ScalarProblem<T>& p, const ScalarFields<T>& fields, const char* function) {
  if (p.ndim < 1 || p.ndim > kMaxDims) invalid(function, "ndim must be 1, 2 or 3, got " + std::to_string(p.ndim));
  if (p.accuracy != 2 && p.accuracy != 4 && p.accuracy != 6 && p.accuracy != 8)
    invalid(function, "accuracy must be 2, 4, 6 or 8, got " + std::to_string(p.accuracy));
  if (p.nshots < 0 || p.nt < 0 || p.nsources < 0 || p.nreceivers < 0 || p.store_interval < 0)
    invalid(function, "negative nshots, nt, nsources, nreceivers or store_interval");
  for (int d = 0; d < kMaxDims; ++d) {
    if (p.n[d] < 1) invalid(function, "padded shape entries must be positive");
    if (d >= p.ndim && p.n[d] != 1) invalid(function, "unused dimensions must have size 1");
  }
  if (p.nshots == 0 || p.nt == 0) return;
  // Launch geometry: shots (times the slowest dimension in 3D) go to grid.z, as 32-bit indices.
  const int64_t z_blocks = p.ndim == 3 ? p.nshots * std::max<int64_t>(p.n[0] - p.accuracy, 1) : p.nshots;
  if (z_blocks > int64_t(0xffffffff)) invalid(function, "too many shots x cells along dimension 0 for one call");
  if (!p.v || !fields.u || !fields.u_prev) invalid(function, "v, u and u_prev must be given");
  for (int d = 0; d < p.ndim; ++d)
    if (!p.a[d] || !p.b[d] || !p.dbdx[d] || !fields.psi[d] || !fields.zeta[d])
      invalid(function, "the PML profiles, psi and zeta of every dimension must be given");
  if (p.nsources > 0 && !p.source_cells) invalid(function, "source_cells must be given");
  if (p.nreceivers > 0 && !p.receiver_cells) invalid(function, "receiver_cells must be given");
  check_cells(p, p.source_cells, p.nshots * p.nsources, "source cell", function);
  check_cells(p, p.receiver_cells, p.nshots * p.nreceivers, "receiver cell", function);
}

// What Born adds to check_problem: the scattered fields, the scatter, the background receivers.
template <class T>
void check_born(const ScalarProblem<T>& p, const ScalarFields<T>& sc, const char* function) {
  if (p.nbg_receivers < 0) invalid(function, "negative nbg_receivers");
  if (p.nshots == 0 || p.nt == 0) return;
  if (!p.scatter) invalid(function, "scatter must be given");
  if (!sc.u || !sc.u_prev) invalid(function, "the scattered u and u_prev must be given");
  for (int d = 0; d < p.ndim; ++d)
    if (!sc.psi[d] || !sc.zeta[d]) invalid(function, "the scattered psi and zeta of every dimension must be given");
  if (p.nbg_receivers > 0 && !p.bg_receiver_cells) invalid(function, "bg_receiver_cells must be given");
  check_cells(p, p.bg_receiver_cells, p.nshots * p.nbg_receivers, "background receiver cell", function);
}

// Cells of [nshots, count] grouped per shot by cell, members in index order.
struct CellGroups {
  std::vector<int64_t> shot_groups{0}, group_cell, group_members, members;
};

CellGroups group_cells(const int64_t* cells, int64_t nshots, int64_t count) {
  CellGroups g;
  std::vector<int64_t> order(static_cast<std::size_t>(count));
  for (int64_t shot = 0; shot < nshots; ++shot) {
    const int64_t* c = cells + shot * count;
    std::iota(order.begin(), order.end(), int64_t(0));
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return c[x] < c[y]; });
    for (std::size_t j = 0; j < order.size(); ++j) {
      if (j == 0 || c[order[j]] != c[order[j - 1]]) {
        g.group_cell.push_back(c[order[j]]);
        g.group_members.push_back(static_cast<int64_t>(g.members.size()));
      }
      g.members.push_back(order[j]);
    }
    g.shot_groups.push_back(static_cast<int64_t>(g.group_cell.size()));
  }
  g.group_members.push_back(static_cast<int64_t>(g.members.size()));
  return g;
}

// Device memory that the stored snapshots may take: the free memory less a reserve, capped by
// SCIPROXY_WAVE_CUDA_STORAGE_LIMIT (bytes) when set.
std::size_t storage_budget() {
  std::size_t free_bytes = 0, total_bytes = 0;
  SCIPROXY_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::size_t reserve = std::max<std::size_t>(std::size_t(256) << 20, total_bytes / 50);
  std::size_t budget = free_bytes > reserve ? free_bytes - reserve : 0;
  if (const char* limit = std::getenv("SCIPROXY_WAVE_CUDA_STORAGE_LIMIT")) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(limit, &end, 10);
    if (errno == 0 && end != limit && *end == '\0') budget = std::min<std::size_t>(budget, value);
  }
  return budget;
}

// Copies between the caller's pageable array and pinned staging on all host threads.
void host_copy(void* to, const void* from, std::size_t bytes) {
  constexpr std::size_t kChunk = std::size_t(4) << 20;
  const auto chunks = static_cast<std::int64_t>((bytes + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
    std::memcpy(static_cast<char*>(to) + begin, static_cast<const char*>(from) + begin,
                std::min(kChunk, bytes - begin));
  }
}

dim3 elementwise_grid(int64_t count) {
  return dim3(static_cast<unsigned>(
      std::clamp<int64_t>((count + kSmallThreads - 1) / kSmallThreads, 1, kMaxElementwiseBlocks)));
}

// Blocks of the step kernels in x, y, z (y and z may exceed the launch limit: split by the caller).
struct StepGrid {
  int64_t x = 0, y = 0, z = 0;
};

template <bool kForward, bool BORN, int NDIM, int A, class T>
void launch_step_chunks(const StepArgs<T>& args, const StepGrid& g, cudaStream_t stream) {
  const dim3 block(kBlockX, kBlockY);
  for (int64_t z = 0; z < g.z; z += kMaxGridYZ) {
    for (int64_t y = 0; y < g.y; y += kMaxGridYZ) {
      const dim3 grid(static_cast<unsigned>(g.x), static_cast<unsigned>(std::min(g.y - y, kMaxGridYZ)),
                      static_cast<unsigned>(std::min(g.z - z, kMaxGridYZ)));
      if constexpr (kForward) {
        forward_step_kernel<NDIM, A, BORN, T>
            <<<grid, block, 0, stream>>>(args, static_cast<unsigned>(y), static_cast<unsigned>(z));
        SCIPROXY_CUDA_CHECK_LAUNCH("scalar forward_step_kernel");
      } else {
        backward_step_kernel<NDIM, A, BORN, T>
            <<<grid, block, 0, stream>>>(args, static_cast<unsigned>(y), static_cast<unsigned>(z));
        SCIPROXY_CUDA_CHECK_LAUNCH("scalar backward_step_kernel");
      }
    }
  }
}


// One wavefield's state on the device, and which buffer plays which role at the current step
// (the roles swap after every step).
template <class T>
struct DeviceField {
  DeviceArray<T> u, u_prev;
  std::array<DeviceArray<T>, kMaxDims> psi, psi_other, zeta, zeta_other;
  T* cur = nullptr;   // forward: u^t; adjoint: lambda
  T* prev = nullptr;  // forward: u^{t-1}; adjoint: P
  // psi (and zetabar) of this step and the buffers of the next; the forward updates zeta in place,
  // so there zeta_next is zeta_now and swapping them changes nothing.
  std::array<T*, kMaxDims> psi_now{}, psi_next{}, zeta_now{}, zeta_next{};

  void bind(FieldArgs<T>& f) const {
    f.u = cur;
    f.u_next = prev;
    for (int d = 0; d < kMaxDims; ++d) {
      f.psi[d] = psi_now[d];
      f.psi_next[d] = psi_next[d];
      f.zeta[d] = zeta_now[d];
      f.zeta_next[d] = zeta_next[d];
    }
  }
  void advance() {
    std::swap(cur, prev);
    std::swap(psi_now, psi_next);
    std::swap(zeta_now, zeta_next);
  }
};

// One field's traffic with the host on the device: the values added at cells every step (grouped
// by cell) and the cells read every step.
template <class T>
struct DeviceExchange {
  DeviceArray<T> add_values, read_values;
  DeviceArray<int64_t> read_cells, shot_groups, group_cell, group_members, members;
  int64_t nadd = 0, nread = 0;
};

// The host side of that traffic, for one field: `add` ([nt, nshots, nadd]) is added at
// `add_cells` and the field at `read_cells` is read into `read` ([nt, nshots, nread]).
template <class T>
struct Traffic {
  const T* add = nullptr;
  const int64_t* add_cells = nullptr;
  int64_t nadd = 0;
  const int64_t* read_cells = nullptr;
  int64_t nread = 0;
  T* read = nullptr;
};

// Everything one call holds on the device. Members are released in reverse order: the streams
// (declared last) synchronise first, so no copy or kernel in flight outlives its buffers.
template <class T>
struct Propagation {
  const ScalarProblem<T>& p;
  const int nfields;               // 1, or 2 for Born (background, scattered)
  const int64_t points, snapshot;  // cells per shot; cells of all shots
  const int64_t model_count;       // nshots * points when v is batched, else points
  const int64_t halo;
  bool has_cells = true;           // some cell lies outside the halo

  DeviceArray<T> model, velocity, coupling, profiles;
  std::array<DeviceField<T>, 2> field;
  std::array<DeviceExchange<T>, 2> ex;
  DeviceArray<T> stored_all, grad_v, grad_v_partials;
  std::array<DeviceArray<T>, kRingSlots> ring;
  std::array<PinnedArray<T>, kRingSlots> staging;

  Event upload_begin, steps_begin, download_begin, end;
  std::array<Event, kRingSlots> ring_ready, ring_done;
  Stream compute, copy;

  Propagation(const ScalarProblem<T>& problem, int fields)
      : p(problem),
        nfields(fields),
        points(problem.points()),
        snapshot(problem.nshots * problem.points()),
        model_count(problem.v_batched ? problem.nshots * problem.points() : problem.points()),
        halo(problem.accuracy / 2) {
    for (int d = 0; d < p.ndim; ++d) has_cells = has_cells && p.n[d] > 2 * halo;
  }

  cudaStream_t cs() const { return compute.get(); }

  template <class U>
  void upload(DeviceArray<U>& to, const U* from, int64_t count) {
    to.allocate(static_cast<std::size_t>(count));
    if (count > 0)
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(to.get(), from, to.bytes(), cudaMemcpyHostToDevice, cs()));
  }
  template <class U>
  void download(U* to, const DeviceArray<U>& from, int64_t count) {
    if (count > 0)
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(to, from.get(), static_cast<std::size_t>(count) * sizeof(U),
                                          cudaMemcpyDeviceToHost, cs()));
  }
  void negate(T* f) {
    negate_kernel<T><<<elementwise_grid(snapshot), kSmallThreads, 0, cs()>>>(f, snapshot);
    SCIPROXY_CUDA_CHECK_LAUNCH("scalar negate_kernel");
  }
  void zero(DeviceArray<T>& a) {
    if (a.size() > 0) SCIPROXY_CUDA_CHECK(cudaMemsetAsync(a.get(), 0, a.bytes(), cs()));
  }

  // v^2 dt^2 (and v itself when the forward pass stores; 2 v scatter dt^2 for Born), and the
  // profiles.
  void upload_model(bool keep_velocity, bool born) {
    upload(model, p.v, model_count);
    if (keep_velocity) {
      velocity.allocate(model.size());
      SCIPROXY_CUDA_CHECK(
          cudaMemcpyAsync(velocity.get(), model.get(), model.bytes(), cudaMemcpyDeviceToDevice, cs()));
    }
    if (born) {  // before model becomes v^2 dt^2
      upload(coupling, p.scatter, model_count);
      coupling_kernel<T><<<elementwise_grid(model_count), kSmallThreads, 0, cs()>>>(coupling.get(), model.get(),
                                                                                    model_count, p.dt2);
      SCIPROXY_CUDA_CHECK_LAUNCH("scalar coupling_kernel");
    }
    square_scale_kernel<T><<<elementwise_grid(model_count), kSmallThreads, 0, cs()>>>(model.get(), model_count,
                                                                                       p.dt2);
    SCIPROXY_CUDA_CHECK_LAUNCH("scalar square_scale_kernel");
    int64_t total = 0;
    for (int d = 0; d < p.ndim; ++d) total += 3 * p.n[d];
    profiles.allocate(static_cast<std::size_t>(total));
    int64_t at = 0;
    for (int d = 0; d < p.ndim; ++d)
      for (const T* profile : {p.a[d], p.b[d], p.dbdx[d]}) {
        SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(profiles.get() + at, profile, static_cast<std::size_t>(p.n[d]) * sizeof(T),
                                            cudaMemcpyHostToDevice, cs()));
        at += p.n[d];
      }
  }

  // The state of field k, and the second buffers of psi (and of zeta in the adjoint), which start
  // as copies so that cells the kernels never write (halo, interior box) agree in both.
  void upload_fields(int k, const ScalarFields<T>& fields, bool adjoint) {
    DeviceField<T>& f = field[k];
    upload(f.u, fields.u, snapshot);
    upload(f.u_prev, fields.u_prev, snapshot);
    f.cur = f.u.get();
    f.prev = f.u_prev.get();
    for (int d = 0; d < p.ndim; ++d) {
      upload(f.psi[d], fields.psi[d], snapshot);
      upload(f.zeta[d], fields.zeta[d], snapshot);
      f.psi_other[d].allocate(static_cast<std::size_t>(snapshot));
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(f.psi_other[d].get(), f.psi[d].get(), f.psi[d].bytes(),
                                          cudaMemcpyDeviceToDevice, cs()));
      if (adjoint) {
        f.zeta_other[d].allocate(static_cast<std::size_t>(snapshot));
        SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(f.zeta_other[d].get(), f.zeta[d].get(), f.zeta[d].bytes(),
                                            cudaMemcpyDeviceToDevice, cs()));
      }
      f.psi_now[d] = f.psi[d].get();
      f.psi_next[d] = f.psi_other[d].get();
      f.zeta_now[d] = f.zeta[d].get();
      f.zeta_next[d] = adjoint ? f.zeta_other[d].get() : f.zeta[d].get();
    }
  }

  // The current state of field k (u: cur, u_prev: prev) into the caller's arrays.
  void download_fields(int k, const ScalarFields<T>& fields) {
    const DeviceField<T>& f = field[k];
    const auto bytes = snapshot_bytes();
    SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(fields.u, f.cur, bytes, cudaMemcpyDeviceToHost, cs()));
    SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(fields.u_prev, f.prev, bytes, cudaMemcpyDeviceToHost, cs()));
    for (int d = 0; d < p.ndim; ++d) {
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(fields.psi[d], f.psi_now[d], bytes, cudaMemcpyDeviceToHost, cs()));
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(fields.zeta[d], f.zeta_now[d], bytes, cudaMemcpyDeviceToHost, cs()));
    }
  }

  void advance() {
    for (int k = 0; k < nfields; ++k) field[k].advance();
  }

  // The traffic of field k: all nt steps of the added values and the grouped cells, and the
  // buffer of the reads.
  void upload_exchange(int k, const Traffic<T>& t) {
    DeviceExchange<T>& e = ex[k];
    e.nadd = t.nadd;
    e.nread = t.nread;
    if (e.nadd > 0) {
      upload(e.add_values, t.add, p.nt * p.nshots * e.nadd);
      const CellGroups g = group_cells(t.add_cells, p.nshots, e.nadd);
      upload(e.shot_groups, g.shot_groups.data(), static_cast<int64_t>(g.shot_groups.size()));
      upload(e.group_cell, g.group_cell.data(), static_cast<int64_t>(g.group_cell.size()));
      upload(e.group_members, g.group_members.data(), static_cast<int64_t>(g.group_members.size()));
      upload(e.members, g.members.data(), static_cast<int64_t>(g.members.size()));
      // The grouping vectors are local: wait for the pageable copies before they go.
      SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(cs()));
    }
    if (e.nread > 0) {
      upload(e.read_cells, t.read_cells, p.nshots * e.nread);
      e.read_values.allocate(static_cast<std::size_t>(p.nt * p.nshots * e.nread));
    }
  }
  void download_reads(int k, T* to) { download(to, ex[k].read_values, p.nt * p.nshots * ex[k].nread); }

  // Adds step add_step's values into every field's current buffer (cur), then reads that buffer
  // into the output of step read_step; one launch for all fields.
  void exchange(int64_t add_step, int64_t read_step) {
    std::array<ExchangeArgs<T>, 2> a{};
    bool any = false;
    for (int k = 0; k < nfields; ++k) {
      const DeviceExchange<T>& e = ex[k];
      const bool adding = e.nadd > 0 && add_step >= 0;
      const bool reading = e.nread > 0 && read_step >= 0 && read_step < p.nt;
      any = any || adding || reading;
      a[k].field = field[k].cur;
      a[k].points = points;
      a[k].nshots = p.nshots;
      a[k].add = adding ? e.add_values.get() + add_step * p.nshots * e.nadd : nullptr;
      a[k].nadd = e.nadd;
      a[k].shot_groups = e.shot_groups.get();
      a[k].group_cell = e.group_cell.get();
      a[k].group_members = e.group_members.get();
      a[k].members = e.members.get();
      a[k].read = reading ? e.read_values.get() + read_step * p.nshots * e.nread : nullptr;
      a[k].nread = e.nread;
      a[k].read_cells = e.read_cells.get();
    }
    if (!any) return;
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>(p.nshots, kMaxGridX)), static_cast<unsigned>(nfields));
    exchange_kernel<T><<<grid, kSmallThreads, 0, cs()>>>(a[0], a[1]);
    SCIPROXY_CUDA_CHECK_LAUNCH("scalar exchange_kernel");
  }

  // Kernel arguments common to both passes; `adjoint` selects the interior box.
  StepArgs<T> step_args(bool adjoint) const {
    StepArgs<T> a{};
    a.v2dt2 = model.get();
    a.coupling = coupling.get();
    a.v = velocity.get();
    a.v_shot_stride = p.v_batched ? points : 0;
    a.two_dt2 = T(2) * p.dt2;
    a.interval = static_cast<T>(p.store_interval);
    a.points = points;
    a.nshots = p.nshots;
    int64_t at = 0;
    for (int d = 0; d < kMaxDims; ++d) {
      a.n[d] = p.n[d];
      a.stride[d] = 1;
      for (int e = d + 1; e < kMaxDims; ++e) a.stride[d] *= p.n[e];
      a.rdx[d] = p.rdx[d];
      a.rdx2[d] = p.rdx2[d];
      a.lo[d] = p.pml_interior[2 * d] + (adjoint ? halo : 0);
      a.hi[d] = p.pml_interior[2 * d + 1] - (adjoint ? halo : 0);
      if (d < p.ndim) {
        a.pa[d] = profiles.get() + at;
        a.pb[d] = profiles.get() + at + p.n[d];
        a.pdbdx[d] = profiles.get() + at + 2 * p.n[d];
        at += 3 * p.n[d];
      }
    }
    return a;
  }
  // The buffers of the current step.
  void bind(StepArgs<T>& a) const {
    for (int k = 0; k < nfields; ++k) field[k].bind(a.f[k]);
  }

  StepGrid step_grid() const {
    const int64_t m0 = p.n[0] - 2 * halo;
    const int64_t m1 = p.ndim >= 2 ? p.n[1] - 2 * halo : 1;
    const int64_t m2 = p.ndim >= 3 ? p.n[2] - 2 * halo : 1;
    if (p.ndim == 1) return {(m0 + kStepThreads - 1) / kStepThreads, 1, p.nshots};
    if (p.ndim == 2) return {(m1 + kBlockX - 1) / kBlockX, (m0 + kBlockY - 1) / kBlockY, p.nshots};
    return {(m2 + kBlockX - 1) / kBlockX, (m1 + kBlockY - 1) / kBlockY, p.nshots * m0};
  }

  template <bool kForward, bool BORN>
  void launch_step(const StepArgs<T>& args, const StepGrid& grid) {
    if (!has_cells) return;
    with_value<Dimensions>(p.ndim, "ndim", [&](auto ndim) {
      with_value<Accuracies>(p.accuracy, "accuracy", [&](auto accuracy) {
        launch_step_chunks<kForward, BORN, decltype(ndim)::value, decltype(accuracy)::value>(args, grid, cs());
      });
    });
  }

  // Ring of device snapshots streaming through pinned staging, when the storage does not fit.
  // The forward pass zeroes the slots (on the compute stream, before any step writes them): the
  // kernels never write the halo. The adjoint's uploads overwrite whole slots.
  void allocate_ring(int64_t nsnapshots, bool zero_slots) {
    const int64_t slots = std::min<int64_t>(kRingSlots, nsnapshots);
    for (int64_t s = 0; s < slots; ++s) {
      ring[s].allocate(static_cast<std::size_t>(snapshot));
      if (zero_slots) zero(ring[s]);
      staging[s].allocate(static_cast<std::size_t>(snapshot));
    }
  }
  std::size_t snapshot_bytes() const { return static_cast<std::size_t>(snapshot) * sizeof(T); }

  // Forward: the device slot for snapshot k, once its previous copy to the host has finished.
  T* ring_slot_for_write(int64_t k) {
    const int64_t slot = k % kRingSlots;
    if (k >= kRingSlots) SCIPROXY_CUDA_CHECK(cudaStreamWaitEvent(cs(), ring_done[slot].get(), 0));
    return ring[slot].get();
  }
  // Forward, after the step that wrote snapshot k: hands snapshot k - slots to the caller and
  // starts copying k to the staging.
  void ring_written(int64_t k, T* stored) {
    const int64_t slot = k % kRingSlots;
    ring_ready[slot].record(cs());
    if (k >= kRingSlots) ring_drain(k - kRingSlots, stored);
    SCIPROXY_CUDA_CHECK(cudaStreamWaitEvent(copy.get(), ring_ready[slot].get(), 0));
    SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(staging[slot].get(), ring[slot].get(), snapshot_bytes(), cudaMemcpyDeviceToHost,
                                        copy.get()));
    ring_done[slot].record(copy.get());
  }
  void ring_drain(int64_t k, T* stored) {
    const int64_t slot = k % kRingSlots;
    SCIPROXY_CUDA_CHECK(cudaEventSynchronize(ring_done[slot].get()));
    host_copy(stored + k * snapshot, staging[slot].get(), snapshot_bytes());
  }

  // Backward: the j-th snapshot needed (k = nsnapshots - 1 - j) goes to slot j % slots.
  void ring_prefetch(int64_t j, int64_t nsnapshots, const T* stored) {
    const int64_t slot = j % kRingSlots, k = nsnapshots - 1 - j;
    if (j >= kRingSlots) SCIPROXY_CUDA_CHECK(cudaEventSynchronize(ring_ready[slot].get()));  // staging free
    host_copy(staging[slot].get(), stored + k * snapshot, snapshot_bytes());
    if (j >= kRingSlots) SCIPROXY_CUDA_CHECK(cudaStreamWaitEvent(copy.get(), ring_done[slot].get(), 0));
    SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(ring[slot].get(), staging[slot].get(), snapshot_bytes(), cudaMemcpyHostToDevice,
                                        copy.get()));
    ring_ready[slot].record(copy.get());
  }
  T* ring_slot_for_read(int64_t j) {
    const int64_t slot = j % kRingSlots;
    SCIPROXY_CUDA_CHECK(cudaStreamWaitEvent(cs(), ring_ready[slot].get(), 0));
    return ring[slot].get();
  }
  void ring_read(int64_t j, int64_t nsnapshots, const T* stored) {
    ring_done[j % kRingSlots].record(cs());
    if (j + kRingSlots < nsnapshots) ring_prefetch(j + kRingSlots, nsnapshots, stored);
  }

  void record_timers(Timers* timers) const {
    if (!timers) return;
    timers->record("upload", elapsed_seconds(upload_begin, steps_begin));
    timers->record("steps", elapsed_seconds(steps_begin, download_begin));
    timers->record("download", elapsed_seconds(download_begin, end));
  }
};

// The forward pass, plain (one field; stores 2 v dt^2 W when `stored` is given) or Born (two).
// traffic[k]: what field k exchanges with the host.
template <bool BORN, class T>
void forward_pass(const ScalarProblem<T>& p, const std::array<ScalarFields<T>, 2>& fields,
                  const std::array<Traffic<T>, 2>& traffic, T* stored, int device_index, Timers* timers) {
  constexpr int nfields = BORN ? 2 : 1;
  require_device(device_index);
  cuda_detail::DeviceGuard guard;
  SCIPROXY_CUDA_CHECK(cudaSetDevice(device_index));
  if (p.nshots == 0 || p.nt == 0) return;  // nothing moves

  const bool storing = stored && p.store_interval > 0;
  Propagation<T> run(p, nfields);
  const cudaStream_t cs = run.cs();
  const int64_t nsnapshots = storing ? (p.nt + p.store_interval - 1) / p.store_interval : 0;
  bool resident = true;
  {
    NvtxRange range("upload");
    run.upload_begin.record(cs);
    run.upload_model(storing, BORN);
    for (int k = 0; k < nfields; ++k) {
      run.upload_fields(k, fields[k], false);
      run.upload_exchange(k, traffic[k]);
    }
    if (storing) {
      resident = static_cast<std::size_t>(nsnapshots) * run.snapshot_bytes() <= storage_budget();
      if (resident) {
        run.stored_all.allocate(static_cast<std::size_t>(nsnapshots * run.snapshot));
        run.zero(run.stored_all);  // the halo is never written
      } else {
        run.allocate_ring(nsnapshots, true);
      }
    }
  }
  {
    NvtxRange range("steps");
    run.steps_begin.record(cs);
    StepArgs<T> args = run.step_args(false);
    const StepGrid grid = run.step_grid();
    run.exchange(-1, 0);  // receivers of step 0
    for (int64_t t = 0; t < p.nt; ++t) {
      const bool store_now = storing && t % p.store_interval == 0;
      const int64_t k = storing ? t / p.store_interval : 0;
      run.bind(args);
      args.stored = !store_now ? nullptr
                    : resident ? run.stored_all.get() + k * run.snapshot
                               : run.ring_slot_for_write(k);
      run.template launch_step<true, BORN>(args, grid);
      if (store_now && !resident) run.ring_written(k, stored);
      run.advance();        // cur: u^{t+1}
      run.exchange(t, t + 1);  // sources of step t into u^{t+1}, receivers of step t + 1
    }
  }
  {
    NvtxRange range("download");
    run.download_begin.record(cs);
    for (int k = 0; k < nfields; ++k) {
      run.download_fields(k, fields[k]);
      run.download_reads(k, traffic[k].read);
    }
    if (storing && resident) run.download(stored, run.stored_all, nsnapshots * run.snapshot);
    if (storing && !resident)  // the last snapshot copies count to this region
      SCIPROXY_CUDA_CHECK(cudaStreamWaitEvent(cs, run.ring_done[(nsnapshots - 1) % kRingSlots].get(), 0));
    run.end.record(cs);
    SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(cs));
    if (storing && !resident)
      for (int64_t k = std::max<int64_t>(0, nsnapshots - kRingSlots); k < nsnapshots; ++k) run.ring_drain(k, stored);
  }
  run.record_timers(timers);
}

// The adjoint pass, plain (one field; accumulates grad_v from `stored` when both are given) or
// Born (two: the coupled background adjoint and the scattered one). traffic[k]: the receiver-data
// gradients added to field k and the source gradients read from it.
template <bool BORN, class T>
void backward_pass(const ScalarProblem<T>& p, const std::array<ScalarFields<T>, 2>& fields,
                   const std::array<Traffic<T>, 2>& traffic, const T* stored, T* grad_v, int device_index,
                   Timers* timers) {
  constexpr int nfields = BORN ? 2 : 1;
  require_device(device_index);
  cuda_detail::DeviceGuard guard;
  SCIPROXY_CUDA_CHECK(cudaSetDevice(device_index));
  if (p.nshots == 0 || p.nt == 0) return;  // nothing moves

  const bool storing = stored && grad_v && p.store_interval > 0;
  Propagation<T> run(p, nfields);
  const cudaStream_t cs = run.cs();
  const int64_t nsnapshots = storing ? (p.nt + p.store_interval - 1) / p.store_interval : 0;
  // Per-shot accumulators in grad_v itself unless several shots share one model.
  const bool partials = storing && !p.v_batched && p.nshots > 1;
  bool resident = true;
  {
    NvtxRange range("upload");
    run.upload_begin.record(cs);
    run.upload_model(false, BORN);
    for (int k = 0; k < nfields; ++k) {
      run.upload_fields(k, fields[k], true);
      run.negate(run.field[k].prev);  // P = -(adjoint of u^{nt-1})
      run.upload_exchange(k, traffic[k]);
    }
    if (storing) {
      run.upload(run.grad_v, grad_v, run.model_count);
      if (partials) {
        run.grad_v_partials.allocate(static_cast<std::size_t>(run.snapshot));
        run.zero(run.grad_v_partials);
      }
      resident = static_cast<std::size_t>(nsnapshots) * run.snapshot_bytes() <= storage_budget();
      if (resident) {
        run.upload(run.stored_all, stored, nsnapshots * run.snapshot);
      } else {
        run.allocate_ring(nsnapshots, false);
        for (int64_t j = 0; j < std::min<int64_t>(kRingSlots, nsnapshots); ++j) run.ring_prefetch(j, nsnapshots, stored);
      }
    }
  }
  {
    NvtxRange range("steps");
    run.steps_begin.record(cs);
    StepArgs<T> args = run.step_args(true);
    args.grad_v = partials ? run.grad_v_partials.get() : run.grad_v.get();
    const StepGrid grid = run.step_grid();
    run.exchange(-1, p.nt - 1);  // source gradient of step nt - 1
    for (int64_t t = p.nt - 1; t >= 0; --t) {
      const bool store_now = storing && t % p.store_interval == 0;
      const int64_t k = storing ? t / p.store_interval : 0;
      const int64_t j = nsnapshots - 1 - k;  // order in which the adjoint needs the snapshots
      run.bind(args);
      args.stored = !store_now ? nullptr
                    : resident ? run.stored_all.get() + k * run.snapshot
                               : run.ring_slot_for_read(j);
      run.template launch_step<false, BORN>(args, grid);
      if (store_now && !resident) run.ring_read(j, nsnapshots, stored);
      run.advance();           // cur: ubar^t, the lambda of step t - 1
      run.exchange(t, t - 1);  // receiver-data gradient of step t, source gradient of t - 1
    }
    for (int k = 0; k < nfields; ++k) run.negate(run.field[k].prev);  // the adjoint of u^{-1} is -P
    if (partials) {
      sum_shots_kernel<T><<<elementwise_grid(run.points), kSmallThreads, 0, cs>>>(
          run.grad_v.get(), run.grad_v_partials.get(), run.points, p.nshots);
      SCIPROXY_CUDA_CHECK_LAUNCH("scalar sum_shots_kernel");
    }
  }
  {
    NvtxRange range("download");
    run.download_begin.record(cs);
    for (int k = 0; k < nfields; ++k) {
      run.download_fields(k, fields[k]);
      run.download_reads(k, traffic[k].read);
    }
    if (storing) run.download(grad_v, run.grad_v, run.model_count);
    run.end.record(cs);
    SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(cs));
  }
  run.record_timers(timers);
}

}  // namespace

template <class T>
SCIPROXY_WAVE_SCALAR_FORWARD(T) {
  constexpr const char* kName = "scalar_forward";
  check_problem(p, fields, kName);
  const bool storing = p.store_interval > 0;
  if (p.nshots > 0 && p.nt > 0) {
    if (p.nsources > 0 && !sources) invalid(kName, "sources must be given");
    if (p.nreceivers > 0 && !receivers) invalid(kName, "receivers must be given");
    if (storing && !stored) invalid(kName, "stored must be given when store_interval > 0");
  }
  const Traffic<T> io{sources, p.source_cells, p.nsources, p.receiver_cells, p.nreceivers, receivers};
  forward_pass<false>(p, {fields, ScalarFields<T>{}}, {io, Traffic<T>{}}, storing ? stored : nullptr,
                      context.device_index(), context.timers);
}

template <class T>
SCIPROXY_WAVE_SCALAR_BACKWARD(T) {
  constexpr const char* kName = "scalar_backward";
  check_problem(p, fields, kName);
  const bool storing = p.store_interval > 0;
  if (p.nshots > 0 && p.nt > 0) {
    if (p.nreceivers > 0 && !grad_receivers) invalid(kName, "grad_receivers must be given");
    if (p.nsources > 0 && !grad_sources) invalid(kName, "grad_sources must be given");
    if (storing && (!stored || !grad_v)) invalid(kName, "stored and grad_v must be given when store_interval > 0");
  }
  // Adds the receiver-data gradient, reads the source gradient.
  const Traffic<T> io{grad_receivers, p.receiver_cells, p.nreceivers, p.source_cells, p.nsources, grad_sources};
  backward_pass<false>(p, {fields, ScalarFields<T>{}}, {io, Traffic<T>{}}, storing ? stored : nullptr,
                       storing ? grad_v : nullptr, context.device_index(), context.timers);
}

// Born stores nothing: store_interval is ignored, as by the host backends.
template <class T>
SCIPROXY_WAVE_SCALAR_BORN_FORWARD(T) {
  constexpr const char* kName = "scalar_born_forward";
  check_problem(p, bg, kName);
  check_born(p, sc, kName);
  if (p.nshots > 0 && p.nt > 0) {
    if (p.nsources > 0 && (!sources || !scattered_sources)) invalid(kName, "sources and scattered_sources must be given");
    if (p.nreceivers > 0 && !receivers) invalid(kName, "receivers must be given");
    if (p.nbg_receivers > 0 && !bg_receivers) invalid(kName, "bg_receivers must be given");
  }
  // The background's sources and receivers, the scattered field's sources and receivers.
  const Traffic<T> bg_io{sources, p.source_cells, p.nsources, p.bg_receiver_cells, p.nbg_receivers, bg_receivers};
  const Traffic<T> sc_io{scattered_sources, p.source_cells, p.nsources, p.receiver_cells, p.nreceivers, receivers};
  forward_pass<true>(p, {bg, sc}, {bg_io, sc_io}, static_cast<T*>(nullptr), context.device_index(),
                     context.timers);
}

template <class T>
SCIPROXY_WAVE_SCALAR_BORN_BACKWARD(T) {
  constexpr const char* kName = "scalar_born_backward";
  check_problem(p, bg, kName);
  check_born(p, sc, kName);
  if (p.nshots > 0 && p.nt > 0) {
    if (p.nreceivers > 0 && !grad_receivers) invalid(kName, "grad_receivers must be given");
    if (p.nbg_receivers > 0 && !grad_bg_receivers) invalid(kName, "grad_bg_receivers must be given");
    if (p.nsources > 0 && (!grad_sources || !grad_scattered_sources))
      invalid(kName, "grad_sources and grad_scattered_sources must be given");
  }
  // lambda: the background receivers' data gradient in, the background source gradient out;
  // lambda_sc: the receivers' data gradient in, the scattered source gradient out.
  const Traffic<T> bg_io{grad_bg_receivers, p.bg_receiver_cells, p.nbg_receivers,
                         p.source_cells,    p.nsources,          grad_sources};
  const Traffic<T> sc_io{grad_receivers, p.receiver_cells, p.nreceivers,
                         p.source_cells, p.nsources,       grad_scattered_sources};
  backward_pass<true>(p, {bg, sc}, {bg_io, sc_io}, static_cast<const T*>(nullptr), static_cast<T*>(nullptr),
                      context.device_index(), context.timers);
}

template SCIPROXY_WAVE_SCALAR_FORWARD(float);
template SCIPROXY_WAVE_SCALAR_FORWARD(double);
template SCIPROXY_WAVE_SCALAR_BACKWARD(float);
template SCIPROXY_WAVE_SCALAR_BACKWARD(double);
template SCIPROXY_WAVE_SCALAR_BORN_FORWARD(float);
template SCIPROXY_WAVE_SCALAR_BORN_FORWARD(double);
template SCIPROXY_WAVE_SCALAR_BORN_BACKWARD(float);
template SCIPROXY_WAVE_SCALAR_BORN_BACKWARD(double);

}  // namespace sciproxy::wave::kernels::cuda
