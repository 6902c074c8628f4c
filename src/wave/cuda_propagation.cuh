// CUDA backend of the scalar propagator, host side (private to cuda_forward.cu and
// cuda_backward.cu): the checks of the kernel arguments, and Propagation, everything one call
// holds on the device (see docs/kernels/scalar-wave.md).
//
// One call keeps every shot resident on the device: the model (as v^2 dt^2; for Born also
// 2 v scatter dt^2), the PML profiles, the wavefields, all source and receiver samples and the
// cell indices are uploaded once, the nt steps run back to back on one stream, and the results
// come back at the end.
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
// Timers: "upload", "steps", "download", measured with CUDA events on the compute stream; each
// is also an NVTX range (opened by the passes).
#pragma once

#include <cuda_runtime.h>

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
#include "sciproxy/core/timers.hpp"
#include "wave/cuda_step.cuh"
#include "wave/kernels.hpp"

namespace sciproxy::wave::kernels::cuda {

namespace {

using cuda_detail::DeviceArray;
using cuda_detail::elapsed_seconds;
using cuda_detail::Event;
using cuda_detail::NvtxRange;
using cuda_detail::PinnedArray;
using cuda_detail::Stream;

[[noreturn]] inline void invalid(const char* function, const std::string& what) {
  throw InvalidArgument(std::string(function) + " (cuda): " + what);
}

template <class T>
void check_cells(const ScalarProblem<T>& p, const int64_t* cells, int64_t count, const char* what,
                 const char* function) {
  const int64_t points = p.points();
  for (int64_t j = 0; j < count; ++j)
    if (cells[j] < 0 || cells[j] >= points)
      invalid(function, std::string(what) + " index " + std::to_string(cells[j]) +
                            " outside the padded grid of " + std::to_string(points) + " cells");
}

template <class T>
void check_problem(const ScalarProblem<T>& p, const ScalarFields<T>& fields, const char* function) {
  if (p.ndim < 1 || p.ndim > kMaxDims)
    invalid(function, "ndim must be 1, 2 or 3, got " + std::to_string(p.ndim));
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
  const int64_t z_blocks =
      p.ndim == 3 ? p.nshots * std::max<int64_t>(p.n[0] - p.accuracy, 1) : p.nshots;
  if (z_blocks > int64_t(0xffffffff))
    invalid(function, "too many shots x cells along dimension 0 for one call");
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
    if (!sc.psi[d] || !sc.zeta[d])
      invalid(function, "the scattered psi and zeta of every dimension must be given");
  if (p.nbg_receivers > 0 && !p.bg_receiver_cells)
    invalid(function, "bg_receiver_cells must be given");
  check_cells(p, p.bg_receiver_cells, p.nshots * p.nbg_receivers, "background receiver cell",
              function);
}

// Cells of [nshots, count] grouped per shot by cell, members in index order.
struct CellGroups {
  std::vector<int64_t> shot_groups{0}, group_cell, group_members, members;
};

inline CellGroups group_cells(const int64_t* cells, int64_t nshots, int64_t count) {
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
inline std::size_t storage_budget() {
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
inline void host_copy(void* to, const void* from, std::size_t bytes) {
  constexpr std::size_t kChunk = std::size_t(4) << 20;
  const auto chunks = static_cast<std::int64_t>((bytes + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * kChunk;
    std::memcpy(static_cast<char*>(to) + begin, static_cast<const char*>(from) + begin,
                std::min(kChunk, bytes - begin));
  }
}

inline dim3 elementwise_grid(int64_t count) {
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
      const dim3 grid(static_cast<unsigned>(g.x),
                      static_cast<unsigned>(std::min(g.y - y, kMaxGridYZ)),
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
  bool has_cells = true;  // some cell lies outside the halo

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
      SCIPROXY_CUDA_CHECK(
          cudaMemcpyAsync(to.get(), from, to.bytes(), cudaMemcpyHostToDevice, cs()));
  }
  template <class U>
  void download(U* to, const DeviceArray<U>& from, int64_t count) {
    if (count > 0)
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(to, from.get(),
                                          static_cast<std::size_t>(count) * sizeof(U),
                                          cudaMemcpyDeviceToHost, cs()));
  }
  void negate(T* f) {
    negate_kernel<T><<<elementwise_grid(snapshot), kSmallThreads, 0, cs()>>>(f, snapshot);
    SCIPROXY_CUDA_CHECK_LAUNCH("scalar negate_kernel");
  }
  // Zeroes the cells of f whose coordinate along d lies in the adjoint's interior box of d.
  void zero_interior_box(T* f, int d) {
    int64_t stride = 1;
    for (int e = d + 1; e < kMaxDims; ++e) stride *= p.n[e];
    zero_slab_kernel<T><<<elementwise_grid(snapshot), kSmallThreads, 0, cs()>>>(
        f, snapshot, stride, p.n[d], p.pml_interior[2 * d] + halo,
        p.pml_interior[2 * d + 1] - halo);
    SCIPROXY_CUDA_CHECK_LAUNCH("scalar zero_slab_kernel");
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
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(velocity.get(), model.get(), model.bytes(),
                                          cudaMemcpyDeviceToDevice, cs()));
    }
    if (born) {  // before model becomes v^2 dt^2
      upload(coupling, p.scatter, model_count);
      coupling_kernel<T><<<elementwise_grid(model_count), kSmallThreads, 0, cs()>>>(
          coupling.get(), model.get(), model_count, p.dt2);
      SCIPROXY_CUDA_CHECK_LAUNCH("scalar coupling_kernel");
    }
    square_scale_kernel<T><<<elementwise_grid(model_count), kSmallThreads, 0, cs()>>>(
        model.get(), model_count, p.dt2);
    SCIPROXY_CUDA_CHECK_LAUNCH("scalar square_scale_kernel");
    int64_t total = 0;
    for (int d = 0; d < p.ndim; ++d) total += 3 * p.n[d];
    profiles.allocate(static_cast<std::size_t>(total));
    int64_t at = 0;
    for (int d = 0; d < p.ndim; ++d)
      for (const T* profile : {p.a[d], p.b[d], p.dbdx[d]}) {
        SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(profiles.get() + at, profile,
                                            static_cast<std::size_t>(p.n[d]) * sizeof(T),
                                            cudaMemcpyHostToDevice, cs()));
        at += p.n[d];
      }
  }

  // The state of field k, and the second buffers of psi (and of zeta in the adjoint), which start
  // as copies so that cells the kernels never write (halo, interior box) agree in both. The
  // adjoint's psi and zeta are cleared in the interior box of their dimension: every step writes
  // zeros there (a = b = 0), so the result must not depend on what a final-state gradient held.
  void upload_fields(int k, const ScalarFields<T>& fields, bool adjoint) {
    DeviceField<T>& f = field[k];
    upload(f.u, fields.u, snapshot);
    upload(f.u_prev, fields.u_prev, snapshot);
    f.cur = f.u.get();
    f.prev = f.u_prev.get();
    for (int d = 0; d < p.ndim; ++d) {
      upload(f.psi[d], fields.psi[d], snapshot);
      upload(f.zeta[d], fields.zeta[d], snapshot);
      if (adjoint) {
        for (T* aux : {f.psi[d].get(), f.zeta[d].get()}) zero_interior_box(aux, d);
      }
      f.psi_other[d].allocate(static_cast<std::size_t>(snapshot));
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(f.psi_other[d].get(), f.psi[d].get(), f.psi[d].bytes(),
                                          cudaMemcpyDeviceToDevice, cs()));
      if (adjoint) {
        f.zeta_other[d].allocate(static_cast<std::size_t>(snapshot));
        SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(f.zeta_other[d].get(), f.zeta[d].get(),
                                            f.zeta[d].bytes(), cudaMemcpyDeviceToDevice, cs()));
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
    SCIPROXY_CUDA_CHECK(
        cudaMemcpyAsync(fields.u_prev, f.prev, bytes, cudaMemcpyDeviceToHost, cs()));
    for (int d = 0; d < p.ndim; ++d) {
      SCIPROXY_CUDA_CHECK(
          cudaMemcpyAsync(fields.psi[d], f.psi_now[d], bytes, cudaMemcpyDeviceToHost, cs()));
      SCIPROXY_CUDA_CHECK(
          cudaMemcpyAsync(fields.zeta[d], f.zeta_now[d], bytes, cudaMemcpyDeviceToHost, cs()));
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
  void download_reads(int k, T* to) {
    download(to, ex[k].read_values, p.nt * p.nshots * ex[k].nread);
  }

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
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>(p.nshots, kMaxGridX)),
                    static_cast<unsigned>(nfields));
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
        launch_step_chunks<kForward, BORN, decltype(ndim)::value, decltype(accuracy)::value>(
            args, grid, cs());
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
    SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(staging[slot].get(), ring[slot].get(), snapshot_bytes(),
                                        cudaMemcpyDeviceToHost, copy.get()));
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
    if (j >= kRingSlots)
      SCIPROXY_CUDA_CHECK(cudaEventSynchronize(ring_ready[slot].get()));  // staging free
    host_copy(staging[slot].get(), stored + k * snapshot, snapshot_bytes());
    if (j >= kRingSlots)
      SCIPROXY_CUDA_CHECK(cudaStreamWaitEvent(copy.get(), ring_done[slot].get(), 0));
    SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(ring[slot].get(), staging[slot].get(), snapshot_bytes(),
                                        cudaMemcpyHostToDevice, copy.get()));
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

}  // namespace

}  // namespace sciproxy::wave::kernels::cuda
