// The cuda backend of diffusion: ICON4Py's stencils (math.hpp, the same per-point functions the
// reference and cpu backends call) as six kernels on one stream, one thread per (entity, level)
// point, grouped as cpu.cpp groups its passes (docs/kernels/diffusion_cuda_plan.md):
//
//   1 rbf_vn                          vertices  u, v = RBF(vn)
//                                     cells     cold-pool enhancement (two lowest levels)
//   2 smagorinsky                     edges     nabla2 of vn, Smagorinsky kh
//   3 rbf_nabla2_turbulence_nabla2_w  vertices  u, v = RBF(z_nabla2_e)
//                                     cells     div_ic, hdef_ic
//                                     cells     nabla2 w (z_nabla2_c); dwdx, dwdy
//   4 vn_w                            edges     vn update, then the cold-pool maximum of kh_smag_e
//                                     cells     w -= diff_multfac_w area^2 nabla2(nabla2 w)
//   5 theta_exner                     cells     z_temp = div(kh grad theta) (+ truly horizontal)
//   6 theta_exner                     cells     theta, exner from z_temp
//
// A kernel that runs several groups gives each group its own consecutive range of blocks (the
// choice is uniform within a block: no divergence). The groups of one kernel are independent:
// the w update and the cold pools read neither vn nor the kh being written; the vn update and the
// cold-pool maximum touch kh_smag_e at the same (edge, level) only, in that order, in one thread.
// Each boundary between kernels is a dependency through a neighbour (a stencil over the previous
// kernel's output), so six launches is the least without grid-wide synchronisation.
//
// Thread mapping: the points of a group, [begin, end) x [kbegin, kend), are numbered so that
// consecutive threads take consecutive addresses of the caller's layout: EntitiesContiguous
// (Fortran's (nproma, nlev)) runs threadIdx.x over entities, a warp reads 32 consecutive cells or
// edges of one level; LevelsContiguous (C order) runs it over levels, wrapping into the next
// entity (a flattened 2-D index), so a warp reads whole columns back to back with no idle lanes
// (a block per column would leave 31 of 96 threads idle at 65 levels). The neighbour reads are
// gathers either way; in the Fortran layout the neighbours of consecutive entities are mostly
// near each other (ICON orders its grids so); in C order the 32 lanes of a warp belong to at most
// two entities (at 32 levels or more), so they read the same few neighbour columns, consecutive
// in the level, which stay in L1/L2.
//
// Residency: the backend keeps a mirror of each Problem on the device (tables, coefficients,
// level factors, work arrays), built on its first run and cached, keyed by the Problem's address
// until release() (the granule's destructor). The caller's fields are used in place when they
// are device or managed memory (as ICON's OpenACC code passes them); host fields are copied
// in and out, page-locked ones directly, pageable ones through pinned staging buffers; the
// device copies and the staging are allocated on the first such run and kept. Nothing is
// allocated per run after the first.
//
// Timers: each group from CUDA events (the names of cpu.cpp), plus "upload", "check_finite" and
// "download" where they run; every launch is also an NVTX range.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda_check.cuh"
#include "core/cuda_resources.cuh"
#include "diffusion/kernels.hpp"
#include "diffusion/math.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"

namespace sciproxy::diffusion::kernels::cuda {

namespace {

using cuda_detail::DeviceArray;
using cuda_detail::Event;
using cuda_detail::NvtxRange;
using cuda_detail::PinnedArray;
using cuda_detail::Stream;

constexpr int kThreads = 256;

// ---------------------------------------------------------------------------------------------
// Points of a launch.

// One group of a launch: entities [begin, begin + count) x levels [kbegin, kbegin + nk), on the
// blocks from first_block to the next group's first_block.
struct Group {
  std::int64_t first_block = 0;
  std::int32_t begin = 0, count = 0;
  std::int32_t kbegin = 0, nk = 0;
};

template <int N>
struct Launch {
  Group group[N];
  std::int64_t blocks = 0;
};

struct GroupRange {
  std::int64_t begin, end;
  std::int32_t kbegin, kend;
  bool active;
};

// Lays out the groups' blocks. A group's points are numbered in 32 bits: more than 2^31 - 1
// points in one group (e.g. 33 million edges x 65 levels) are refused.
template <class... Ranges>
Launch<sizeof...(Ranges)> make_launch(const Ranges&... group_ranges) {
  constexpr int N = sizeof...(Ranges);
  const std::array<GroupRange, N> ranges{group_ranges...};
  Launch<N> l;
  std::int64_t block = 0;
  for (int j = 0; j < N; ++j) {
    const GroupRange& r = ranges[j];
    Group& g = l.group[j];
    g.first_block = block;
    const std::int64_t count = std::max<std::int64_t>(0, r.end - r.begin);
    const std::int64_t nk = std::max<std::int32_t>(0, r.kend - r.kbegin);
    if (!r.active || count == 0 || nk == 0) continue;
    const std::int64_t points = count * nk;
    if (points > INT32_MAX)
      throw InvalidArgument(
          "diffusion (cuda): " + std::to_string(count) + " entities x " + std::to_string(nk) +
          " levels exceed the backend's 32-bit point numbering per stencil group");
    g.begin = static_cast<std::int32_t>(r.begin);
    g.count = static_cast<std::int32_t>(count);
    g.kbegin = r.kbegin;
    g.nk = static_cast<std::int32_t>(nk);
    block += (points + kThreads - 1) / kThreads;
  }
  l.blocks = block;
  return l;
}

// The group j of this thread's block and the thread's point (i, k); false past the group's end.
template <FieldLayout L, int N>
__device__ __forceinline__ bool locate(const Launch<N>& l, int& j, std::int64_t& i,
                                       std::int32_t& k) {
  const std::int64_t b = blockIdx.x;
  Group g = l.group[0];
  j = 0;
#pragma unroll
  for (int q = 1; q < N; ++q)
    if (b >= l.group[q].first_block) {
      g = l.group[q];
      j = q;
    }
  const std::uint32_t t = static_cast<std::uint32_t>((b - g.first_block) * kThreads + threadIdx.x);
  const std::uint32_t count = static_cast<std::uint32_t>(g.count),
                      nk = static_cast<std::uint32_t>(g.nk);
  if (t >= count * nk) return false;
  if constexpr (L == FieldLayout::LevelsContiguous) {
    i = g.begin + static_cast<std::int64_t>(t / nk);
    k = g.kbegin + static_cast<std::int32_t>(t % nk);
  } else {
    i = g.begin + static_cast<std::int64_t>(t % count);
    k = g.kbegin + static_cast<std::int32_t>(t / count);
  }
  return true;
}

// The run's scalars: the regular or the initial-run factors, dtime, the lowest two levels.
template <class Real>
struct Step {
  const Real* diff_multfac_vn;
  const Real* smag_limit;
  Real smag_offset;
  Real dtime;
  std::int32_t k_cold;
};

// ---------------------------------------------------------------------------------------------
// Kernels (the equations are in math.hpp; the loops they replace in cpu.cpp).

// 1: u, v = RBF(vn) at vertices; the cold-pool enhancement of the lowest two levels at cells.
template <class Real, FieldLayout L>
__global__ void __launch_bounds__(kThreads)
    rbf_vn_kernel(const Problem<Real> p, const Real* __restrict__ vn,
                  const Real* __restrict__ theta_v, const std::int32_t k_cold, const Launch<2> l) {
  int j;
  std::int64_t i;
  std::int32_t k;
  if (!locate<L>(l, j, i, k)) return;
  if (j == 0) {
    const FieldIndex<L> xv{p.num_vertices, p.nlev};
    rbf_at_vertex<Real, L>(p, vn, i, k, p.u_vert[xv(i, k)], p.v_vert[xv(i, k)]);
  } else {
    p.enh_diffu_3d[2 * i + (k - k_cold)] = cold_pool_enhancement<Real, L>(p, theta_v, i, k);
  }
}

// 2: nabla2 of vn and the Smagorinsky coefficients at edges.
template <class Real, FieldLayout L>
__global__ void __launch_bounds__(kThreads)
    smagorinsky_kernel(const Problem<Real> p, const Real* __restrict__ vn, const Step<Real> s,
                       const Launch<1> l) {
  int j;
  std::int64_t e;
  std::int32_t k;
  if (!locate<L>(l, j, e, k)) return;
  const FieldIndex<L> xe{p.num_edges, p.nlev};
  const std::int64_t at = xe(e, k);
  Real kh_smag_e, kh_smag_ec, z_nabla2_e;
  smagorinsky_at_edge<Real, L>(p, p.u_vert, p.v_vert, vn[at], e, k, p.enh_smag_fac[k] * s.dtime,
                               s.smag_limit[k], s.smag_offset, kh_smag_e, kh_smag_ec, z_nabla2_e);
  p.kh_smag_e[at] = kh_smag_e;
  p.kh_smag_ec[at] = kh_smag_ec;
  p.z_nabla2_e[at] = z_nabla2_e;
}

// 3: u, v = RBF(z_nabla2_e) at vertices; div_ic, hdef_ic at cells; nabla2 of w at cells (when w
// is diffused), with dwdx, dwdy (shear type 2, whether or not w is diffused) where the w
// stencils run.
template <class Real, FieldLayout L>
__global__ void __launch_bounds__(kThreads)
    rbf_nabla2_kernel(const Problem<Real> p, const RunFields<Real> f, const Launch<3> l) {
  int j;
  std::int64_t i;
  std::int32_t k;
  if (!locate<L>(l, j, i, k)) return;
  const std::int32_t nlev = p.nlev;
  const FieldIndex<L> xh{p.num_cells, nlev + 1};
  if (j == 0) {
    const FieldIndex<L> xv{p.num_vertices, nlev};
    rbf_at_vertex<Real, L>(p, p.z_nabla2_e, i, k, p.u_vert[xv(i, k)], p.v_vert[xv(i, k)]);
  } else if (j == 1) {
    Real kh_c, div, kh_c_above, div_above;
    const Real* vn = f.prognostic.vn;
    turbulence_terms<Real, L>(p, p.kh_smag_ec, vn, i, k, p.enh_smag_fac[k] * f.dtime, kh_c, div);
    turbulence_terms<Real, L>(p, p.kh_smag_ec, vn, i, k - 1, p.enh_smag_fac[k - 1] * f.dtime,
                              kh_c_above, div_above);
    const Real wgt = p.wgtfac_c[xh(i, k)];
    f.diagnostic.div_ic[xh(i, k)] = wgt * div + (Real(1) - wgt) * div_above;
    const Real hdef = wgt * kh_c + (Real(1) - wgt) * kh_c_above;
    f.diagnostic.hdef_ic[xh(i, k)] = hdef * hdef;
  } else {
    const FieldIndex<L> xc{p.num_cells, nlev};
    const Real* w = f.prognostic.w;
    if (p.apply_to_vertical_wind)
      p.z_nabla2_c[xc(i, k)] = c2e2co_sum<Real, L>(p, p.geofac_n2s, w, nlev + 1, i, k);
    if (p.shear_type == 2 && k >= 1 && i >= p.cell_w_begin && i < p.cell_w_end) {
      f.diagnostic.dwdx[xh(i, k)] = c2e2co_sum<Real, L>(p, p.geofac_grg_x, w, nlev + 1, i, k);
      f.diagnostic.dwdy[xh(i, k)] = c2e2co_sum<Real, L>(p, p.geofac_grg_y, w, nlev + 1, i, k);
    }
  }
}

// 4: vn update at edges, then (same thread, same point) the cold-pool maximum of kh_smag_e; the
// w update at cells.
template <class Real, FieldLayout L>
__global__ void __launch_bounds__(kThreads)
    vn_w_kernel(const Problem<Real> p, const RunFields<Real> f, const Step<Real> s,
                const Launch<2> l) {
  int j;
  std::int64_t i;
  std::int32_t k;
  if (!locate<L>(l, j, i, k)) return;
  const std::int32_t nlev = p.nlev;
  if (j == 0) {
    const FieldIndex<L> xe{p.num_edges, nlev};
    const std::int64_t at = xe(i, k);
    if (p.apply_to_horizontal_wind && i >= p.edge_vn_begin && i < p.edge_vn_end) {
      Real* vn = f.prognostic.vn;
      const Real z_nabla2 = p.z_nabla2_e[at];
      const Real z_nabla4 = nabla4_at_edge<Real, L>(p, p.u_vert, p.v_vert, z_nabla2, i, k);
      vn[at] = diffused_vn(p, i, vn[at], z_nabla2, z_nabla4, p.kh_smag_e[at], s.diff_multfac_vn[k]);
    }
    if (p.apply_to_temperature && k >= s.k_cold && i >= p.edge_cold_begin && i < p.edge_cold_end) {
      Real m = p.kh_smag_e[at];
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const std::int32_t c = p.e2c[2 * i + q];
        if (c >= 0)
          m = max_of(m, p.enh_diffu_3d[2 * static_cast<std::int64_t>(c) + (k - s.k_cold)]);
      }
      p.kh_smag_e[at] = m;
    }
  } else {
    const FieldIndex<L> xc{p.num_cells, nlev}, xh{p.num_cells, nlev + 1};
    Real* w = f.prognostic.w;
    const Real area = p.area[i];
    Real w_new = w[xh(i, k)] - p.diff_multfac_w * (area * area) *
                                   c2e2co_sum<Real, L>(p, p.geofac_n2s, p.z_nabla2_c, nlev, i, k);
    if (k > 0 && k < p.nrdmax)
      w_new = w_new + p.diff_multfac_n2w[k] * area * p.z_nabla2_c[xc(i, k)];
    w[xh(i, k)] = w_new;
  }
}

// 5: z_temp at cells.
template <class Real, FieldLayout L>
__global__ void __launch_bounds__(kThreads)
    theta_tendency_kernel(const Problem<Real> p, const Real* __restrict__ theta_v,
                          const Launch<1> l) {
  int j;
  std::int64_t c;
  std::int32_t k;
  if (!locate<L>(l, j, c, k)) return;
  const FieldIndex<L> xc{p.num_cells, p.nlev};
  p.z_temp[xc(c, k)] = theta_tendency<Real, L>(p, p.kh_smag_e, theta_v, c, k);
}

// 6: theta and exner from z_temp.
template <class Real, FieldLayout L>
__global__ void __launch_bounds__(kThreads)
    theta_exner_kernel(const Problem<Real> p, Real* __restrict__ theta_v, Real* __restrict__ exner,
                       const Launch<1> l) {
  int j;
  std::int64_t c;
  std::int32_t k;
  if (!locate<L>(l, j, c, k)) return;
  const FieldIndex<L> xc{p.num_cells, p.nlev};
  const std::int64_t at = xc(c, k);
  Real theta = theta_v[at], ex = exner[at];
  update_theta_exner(p.area[c], p.z_temp[at], p.rd_o_cvd, theta, ex);
  theta_v[at] = theta;
  exner[at] = ex;
}

// The first non-finite flat index of each prognostic field (blockIdx.y: vn, w, theta_v, exner),
// for check_finite; first[] starts at all ones.
template <class Real>
struct FiniteCheck {
  const Real* field[4];
  std::int64_t size[4];
};

template <class Real>
__global__ void __launch_bounds__(kThreads)
    first_nonfinite_kernel(const FiniteCheck<Real> a, unsigned long long* __restrict__ first) {
  const int f = blockIdx.y;
  const Real* x = f == 0 ? a.field[0] : f == 1 ? a.field[1] : f == 2 ? a.field[2] : a.field[3];
  const std::int64_t n = f == 0 ? a.size[0] : f == 1 ? a.size[1] : f == 2 ? a.size[2] : a.size[3];
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += stride)
    if (!isfinite(x[i])) {
      atomicMin(first + f, static_cast<unsigned long long>(i));
      return;  // later indices of this thread are larger
    }
}

// ---------------------------------------------------------------------------------------------
// The device mirror of a Problem.

// Offsets of the pieces of one device block, each aligned to 256 bytes.
template <class U>
class Packer {
 public:
  // A piece of count elements copied from src (null: zero-filled); *slot gets its device address.
  template <class Slot>
  void add(const U* src, std::size_t count, Slot* slot) {
    pieces_.push_back({src, count, total_, reinterpret_cast<void*>(slot)});
    total_ += (count * sizeof(U) + 255) / 256 * 256 / sizeof(U);
  }
  // Allocates the block, copies or zeroes every piece, sets the slots.
  void upload(DeviceArray<U>& block) {
    block.allocate(std::max<std::size_t>(total_, 1));
    for (const Piece& q : pieces_) {
      U* at = block.get() + q.offset;
      if (q.count > 0) {
        if (q.src)
          SCIPROXY_CUDA_CHECK(cudaMemcpy(at, q.src, q.count * sizeof(U), cudaMemcpyHostToDevice));
        else
          SCIPROXY_CUDA_CHECK(cudaMemset(at, 0, q.count * sizeof(U)));
      }
      *reinterpret_cast<U**>(q.slot) = at;
    }
  }

 private:
  struct Piece {
    const U* src;
    std::size_t count, offset;
    void* slot;  // a U* or const U* member of the device Problem
  };
  std::vector<Piece> pieces_;
  std::size_t total_ = 0;
};

// The field slots of a run: vn, w, theta_v, exner, hdef_ic, div_ic, dwdx, dwdy.
constexpr int kFields = 8;
constexpr const char* kFieldNames[kFields] = {
    "prognostic.vn",      "prognostic.w",      "prognostic.theta_v", "prognostic.exner",
    "diagnostic.hdef_ic", "diagnostic.div_ic", "diagnostic.dwdx",    "diagnostic.dwdy"};

template <class Real>
std::array<Real*, kFields> field_pointers(const RunFields<Real>& f) {
  return {f.prognostic.vn,      f.prognostic.w,      f.prognostic.theta_v, f.prognostic.exner,
          f.diagnostic.hdef_ic, f.diagnostic.div_ic, f.diagnostic.dwdx,    f.diagnostic.dwdy};
}

template <class Real>
RunFields<Real> with_pointers(const RunFields<Real>& f, const std::array<Real*, kFields>& x) {
  RunFields<Real> out = f;
  out.prognostic = {x[0], x[1], x[2], x[3]};
  out.diagnostic = {x[4], x[5], x[6], x[7]};
  return out;
}

struct MirrorBase {
  int device = -1;
  std::mutex run_mutex;  // one run at a time on a mirror (its work arrays and staging)
  virtual ~MirrorBase() = default;
};

template <class Real>
struct Mirror final : MirrorBase {
  const Problem<Real>* host = nullptr;
  Problem<Real> key;  // the host Problem when the mirror was built: a stale entry is rebuilt
  Problem<Real> dev;  // the same Problem with every array on the device
  std::array<std::int64_t, kFields> field_size{};
  DeviceArray<std::int32_t> tables;
  DeviceArray<Real> data;  // coefficients, level factors, work arrays
  // Host fields: device copies and pinned staging, allocated on the first run that needs them.
  DeviceArray<Real> fields;
  PinnedArray<Real> staging;
  std::array<std::int64_t, kFields> field_offset{};
  DeviceArray<unsigned long long> first_bad;
  PinnedArray<unsigned long long> first_bad_host;
  PinnedArray<Real> bad_value;
  std::array<Event, 10> events;  // the run's marks, in stream order
  Event caller_done{false};      // orders the run after the caller's work on the default stream
  Stream stream;                 // declared last: synchronised before the buffers are freed

  bool matches(const Problem<Real>& p) const {
    return host == &p && key.num_cells == p.num_cells && key.num_edges == p.num_edges &&
           key.num_vertices == p.num_vertices && key.nlev == p.nlev && key.c2e == p.c2e &&
           key.v2e == p.v2e && key.rbf_coeff_1 == p.rbf_coeff_1 && key.area == p.area &&
           key.theta_ref_mc == p.theta_ref_mc && key.enh_smag_fac == p.enh_smag_fac &&
           key.u_vert == p.u_vert;
  }

  void build(const Problem<Real>& p, int device_index) {
    device = device_index;
    host = &p;
    key = p;
    dev = p;
    const std::size_t nc = static_cast<std::size_t>(p.num_cells),
                      ne = static_cast<std::size_t>(p.num_edges),
                      nv = static_cast<std::size_t>(p.num_vertices),
                      nlev = static_cast<std::size_t>(p.nlev);
    Packer<std::int32_t> t;
    t.add(p.c2e, 3 * nc, &dev.c2e);
    t.add(p.c2e2c, 3 * nc, &dev.c2e2c);
    t.add(p.c2e2co, 4 * nc, &dev.c2e2co);
    t.add(p.e2c, 2 * ne, &dev.e2c);
    t.add(p.e2c2v, 4 * ne, &dev.e2c2v);
    t.add(p.v2e, 6 * nv, &dev.v2e);
    for (int j = 0; j < 3; ++j) t.add(p.zd_vertoffset[j], nc * nlev, &dev.zd_vertoffset[j]);
    t.upload(tables);

    Packer<Real> d;
    d.add(p.rbf_coeff_1, 6 * nv, &dev.rbf_coeff_1);
    d.add(p.rbf_coeff_2, 6 * nv, &dev.rbf_coeff_2);
    d.add(p.tangent_orientation, ne, &dev.tangent_orientation);
    d.add(p.inv_primal_edge_length, ne, &dev.inv_primal_edge_length);
    d.add(p.inv_vert_vert_length, ne, &dev.inv_vert_vert_length);
    d.add(p.inv_dual_edge_length, ne, &dev.inv_dual_edge_length);
    d.add(p.edge_area, ne, &dev.edge_area);
    d.add(p.nudgecoeff_e, ne, &dev.nudgecoeff_e);
    d.add(p.primal_normal_vert_x, 4 * ne, &dev.primal_normal_vert_x);
    d.add(p.primal_normal_vert_y, 4 * ne, &dev.primal_normal_vert_y);
    d.add(p.dual_normal_vert_x, 4 * ne, &dev.dual_normal_vert_x);
    d.add(p.dual_normal_vert_y, 4 * ne, &dev.dual_normal_vert_y);
    d.add(p.e_bln_c_s, 3 * nc, &dev.e_bln_c_s);
    d.add(p.geofac_div, 3 * nc, &dev.geofac_div);
    d.add(p.geofac_n2s, 4 * nc, &dev.geofac_n2s);
    d.add(p.geofac_grg_x, 4 * nc, &dev.geofac_grg_x);
    d.add(p.geofac_grg_y, 4 * nc, &dev.geofac_grg_y);
    d.add(p.area, nc, &dev.area);
    d.add(p.theta_ref_mc, nc * nlev, &dev.theta_ref_mc);
    d.add(p.wgtfac_c, nc * (nlev + 1), &dev.wgtfac_c);
    d.add(p.zd_diffcoef, nc * nlev, &dev.zd_diffcoef);
    for (int j = 0; j < 3; ++j) d.add(p.zd_intcoef[j], nc * nlev, &dev.zd_intcoef[j]);
    d.add(p.enh_smag_fac, nlev, &dev.enh_smag_fac);
    d.add(p.diff_multfac_n2w, nlev, &dev.diff_multfac_n2w);
    d.add(p.diff_multfac_vn, nlev, &dev.diff_multfac_vn);
    d.add(p.smag_limit, nlev, &dev.smag_limit);
    d.add(p.diff_multfac_vn_initial, nlev, &dev.diff_multfac_vn_initial);
    d.add(p.smag_limit_initial, nlev, &dev.smag_limit_initial);
    // Work arrays, zeroed once (the host backends' are zeroed at init and kept between runs too).
    d.add(static_cast<const Real*>(nullptr), nv * nlev, &dev.u_vert);
    d.add(static_cast<const Real*>(nullptr), nv * nlev, &dev.v_vert);
    d.add(static_cast<const Real*>(nullptr), ne * nlev, &dev.kh_smag_e);
    d.add(static_cast<const Real*>(nullptr), ne * nlev, &dev.kh_smag_ec);
    d.add(static_cast<const Real*>(nullptr), ne * nlev, &dev.z_nabla2_e);
    d.add(static_cast<const Real*>(nullptr), nc * nlev, &dev.z_nabla2_c);
    d.add(static_cast<const Real*>(nullptr), nc * nlev, &dev.z_temp);
    d.add(static_cast<const Real*>(nullptr), 2 * nc, &dev.enh_diffu_3d);
    d.upload(data);
    // Not used on the device: the reference backend's copies, the cpu's scratch, the host list.
    dev.w_old = dev.theta_old = dev.diff_multfac_smag = nullptr;
    dev.zd_points = nullptr;
    dev.num_zd_points = 0;

    const std::int64_t cells_full = static_cast<std::int64_t>(nc) * (nlev + 1),
                       cells = static_cast<std::int64_t>(nc * nlev);
    field_size = {static_cast<std::int64_t>(ne * nlev),
                  cells_full,
                  cells,
                  cells,
                  cells_full,
                  cells_full,
                  cells_full,
                  cells_full};
    first_bad.allocate(4);
    first_bad_host.allocate(4);
    bad_value.allocate(1);
  }

  // Device copies and staging for the caller's host fields, all eight, once.
  void allocate_staging() {
    if (fields.get()) return;
    std::int64_t total = 0;
    for (int f = 0; f < kFields; ++f) {
      field_offset[f] = total;
      total += (field_size[f] + 63) / 64 * 64;
    }
    fields.allocate(static_cast<std::size_t>(total));
    staging.allocate(static_cast<std::size_t>(total));
  }
};

// The mirrors by the address of their host Problem. Never destroyed: a granule that outlives
// static destruction (a static object of the caller's) can still release its mirror; what is
// left at exit goes with the process.
std::mutex mirrors_mutex;
std::map<const void*, std::shared_ptr<MirrorBase>>& mirrors() {
  static auto* map = new std::map<const void*, std::shared_ptr<MirrorBase>>();
  return *map;
}

// The Problem's mirror on device_index (current), built on first use or when stale.
template <class Real>
std::shared_ptr<Mirror<Real>> mirror_for(const Problem<Real>& p, int device_index) {
  std::lock_guard<std::mutex> lock(mirrors_mutex);
  auto& map = mirrors();
  auto it = map.find(&p);
  if (it != map.end()) {
    auto m = std::dynamic_pointer_cast<Mirror<Real>>(it->second);
    if (m && m->device == device_index && m->matches(p)) return m;
    map.erase(it);  // another precision, device or Problem at this address
  }
  auto m = std::make_shared<Mirror<Real>>();
  m->build(p, device_index);
  map.emplace(&p, m);
  return m;
}

// Where a caller's field lies: device (or managed) memory is used in place; page-locked host
// memory is copied to and from directly; pageable host memory goes through the pinned staging.
enum class Where { device, pinned, pageable };

Where where_is(const void* ptr, int device_index, const char* name) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // older runtimes: an unregistered host pointer is an error
    return Where::pageable;
  }
  if (a.type == cudaMemoryTypeManaged) return Where::device;
  if (a.type == cudaMemoryTypeDevice) {
    if (a.device != device_index)
      throw_invalid_argument(name,
                             "host memory, managed memory or memory of cuda:" +
                                 std::to_string(device_index) + " (the granule's device)",
                             "memory of cuda:" + std::to_string(a.device));
    return Where::device;
  }
  return a.type == cudaMemoryTypeHost ? Where::pinned : Where::pageable;
}

void check_launch(const char* kernel, const char* file, int line) {
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) cuda_detail::throw_cuda_error(error, kernel, file, line);
}

// The marks of a run: event i closes the region names[i] that event i - 1 opened.
struct Marks {
  std::array<Event, 10>& events;
  cudaStream_t stream;
  std::array<const char*, 10> names{};
  int n = 0;
  void mark(const char* name) {
    events[n].record(stream);
    names[n++] = name;
  }
  void report(Timers* timers) const {
    if (!timers) return;
    for (int i = 1; i < n; ++i)
      timers->record(names[i], cuda_detail::elapsed_seconds(events[i - 1], events[i]));
  }
};

template <class Real, FieldLayout L>
void run_on_device(const Context& ctx, const Problem<Real>& p, const RunFields<Real>& f) {
  const int device_index = ctx.device_index();
  cuda_detail::require_device("diffusion", device_index);
  cuda_detail::DeviceGuard guard;
  SCIPROXY_CUDA_CHECK(cudaSetDevice(device_index));
  const std::shared_ptr<Mirror<Real>> mirror = mirror_for(p, device_index);
  Mirror<Real>& m = *mirror;
  std::lock_guard<std::mutex> lock(m.run_mutex);
  const Problem<Real>& d = m.dev;
  const cudaStream_t stream = m.stream.get();
  // A run that threw may have left copies in flight that still use the staging buffer.
  SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(stream));

  const std::int32_t nlev = p.nlev;
  const bool temperature = p.apply_to_temperature;
  const bool vertical = p.apply_to_vertical_wind;
  const bool turbulence = p.turbulence_diagnostics;
  // dwdx, dwdy: turbulence diagnostics from w before its update, whether or not w is diffused.
  const bool shear = p.shear_type == 2;
  // What the kernels read (upload) and write (download) of each field.
  const std::array<bool, kFields> reads = {true,       vertical || shear, temperature, temperature,
                                           turbulence, turbulence,        shear,       shear};
  const std::array<bool, kFields> writes = {p.apply_to_horizontal_wind,
                                            vertical,
                                            temperature,
                                            temperature,
                                            turbulence,
                                            turbulence,
                                            shear,
                                            shear};

  // The caller's fields: device ones in place, host ones through the staging buffers.
  const std::array<Real*, kFields> caller = field_pointers(f);
  std::array<Real*, kFields> used = caller;
  // staged: a device copy is used; host: the page-locked memory the copies use (the caller's own
  // where it is page-locked, else its section of the staging buffer).
  std::array<bool, kFields> staged{};
  std::array<Real*, kFields> host{};
  std::array<Where, kFields> where{};
  bool any_staged = false, any_device = false;
  for (int i = 0; i < kFields; ++i) {
    where[i] = where_is(caller[i], device_index, kFieldNames[i]);
    staged[i] = where[i] != Where::device;
    any_staged = any_staged || staged[i];
    any_device = any_device || !staged[i];
  }
  if (any_staged) m.allocate_staging();
  for (int i = 0; i < kFields; ++i) {
    if (!staged[i]) continue;
    used[i] = m.fields.get() + m.field_offset[i];
    host[i] = where[i] == Where::pinned ? caller[i] : m.staging.get() + m.field_offset[i];
  }

  // Device fields may still be being written by the caller's kernels: wait for everything queued
  // on the legacy default stream (which itself waits for every blocking stream). Work on the
  // caller's non-blocking streams must be complete before run() (e.g. !$acc wait). run() returns
  // when the fields are updated.
  if (any_device) {
    SCIPROXY_CUDA_CHECK(cudaEventRecord(m.caller_done.get(), cudaStreamLegacy));
    SCIPROXY_CUDA_CHECK(cudaStreamWaitEvent(stream, m.caller_done.get(), 0));
  }

  Marks marks{m.events, stream};
  marks.mark(nullptr);
  if (any_staged) {
    NvtxRange range("diffusion upload");
    for (int i = 0; i < kFields; ++i) {
      // check_finite reads every prognostic field.
      if (!staged[i] || !(reads[i] || (p.check_finite && i < 4))) continue;
      const std::size_t bytes = static_cast<std::size_t>(m.field_size[i]) * sizeof(Real);
      if (host[i] != caller[i]) std::memcpy(host[i], caller[i], bytes);
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(used[i], host[i], bytes, cudaMemcpyHostToDevice, stream));
    }
    marks.mark("upload");
  }

  if (p.check_finite) {
    NvtxRange range("diffusion check_finite");
    FiniteCheck<Real> a{};
    std::int64_t largest = 0;
    for (int i = 0; i < 4; ++i) {
      a.field[i] = used[i];
      a.size[i] = m.field_size[i];
      largest = std::max(largest, a.size[i]);
    }
    SCIPROXY_CUDA_CHECK(
        cudaMemsetAsync(m.first_bad.get(), 0xff, 4 * sizeof(unsigned long long), stream));
    const dim3 grid(static_cast<unsigned>(
                        std::clamp<std::int64_t>((largest + kThreads - 1) / kThreads, 1, 2048)),
                    4);
    first_nonfinite_kernel<Real><<<grid, kThreads, 0, stream>>>(a, m.first_bad.get());
    check_launch("first_nonfinite_kernel", __FILE__, __LINE__);
    SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(m.first_bad_host.get(), m.first_bad.get(),
                                        4 * sizeof(unsigned long long), cudaMemcpyDeviceToHost,
                                        stream));
    marks.mark("check_finite");
    SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int i = 0; i < 4; ++i) {
      const unsigned long long bad = m.first_bad_host.get()[i];
      if (bad == ~0ull) continue;
      SCIPROXY_CUDA_CHECK(
          cudaMemcpy(m.bad_value.get(), used[i] + bad, sizeof(Real), cudaMemcpyDeviceToHost));
      char value[32];
      std::snprintf(value, sizeof value, "%g", static_cast<double>(m.bad_value.get()[0]));
      throw_invalid_argument(kFieldNames[i], "finite values",
                             std::string(value) + " at flat index " + std::to_string(bad) +
                                 " (of " + std::to_string(m.field_size[i]) + ")");
    }
  }

  const RunFields<Real> df = with_pointers(f, used);
  Step<Real> s{};
  s.diff_multfac_vn = f.initial_run ? d.diff_multfac_vn_initial : d.diff_multfac_vn;
  s.smag_limit = f.initial_run ? d.smag_limit_initial : d.smag_limit;
  s.smag_offset = f.initial_run ? Real(0) : p.smag_offset;
  s.dtime = f.dtime;
  s.k_cold = std::max(0, nlev - 2);
  const std::int64_t nc = p.num_cells;

  auto launched = [&](const char* name) { check_launch(name, __FILE__, __LINE__); };
  {
    NvtxRange range("diffusion rbf_vn");
    const auto l = make_launch(GroupRange{p.vertex_begin, p.vertex_end, 0, nlev, true},
                               GroupRange{0, nc, s.k_cold, nlev, temperature});
    if (l.blocks > 0) {
      rbf_vn_kernel<Real, L><<<static_cast<unsigned>(l.blocks), kThreads, 0, stream>>>(
          d, df.prognostic.vn, df.prognostic.theta_v, s.k_cold, l);
      launched("rbf_vn_kernel");
    }
    marks.mark("rbf_vn");
  }
  {
    NvtxRange range("diffusion smagorinsky");
    const auto l = make_launch(GroupRange{p.edge_smag_begin, p.edge_smag_end, 0, nlev, true});
    if (l.blocks > 0) {
      smagorinsky_kernel<Real, L>
          <<<static_cast<unsigned>(l.blocks), kThreads, 0, stream>>>(d, df.prognostic.vn, s, l);
      launched("smagorinsky_kernel");
    }
    marks.mark("smagorinsky");
  }
  {
    NvtxRange range("diffusion rbf_nabla2_turbulence_nabla2_w");
    const auto l = make_launch(GroupRange{p.vertex_begin, p.vertex_end, 0, nlev, true},
                               GroupRange{p.cell_turb_begin, p.cell_turb_end, 1, nlev, turbulence},
                               GroupRange{0, nc, 0, nlev, vertical || shear});
    if (l.blocks > 0) {
      rbf_nabla2_kernel<Real, L>
          <<<static_cast<unsigned>(l.blocks), kThreads, 0, stream>>>(d, df, l);
      launched("rbf_nabla2_kernel");
    }
    marks.mark("rbf_nabla2_turbulence_nabla2_w");
  }
  {
    NvtxRange range("diffusion vn_w");
    // One edge group over the union of the vn and cold-pool ranges; each thread checks both.
    std::int64_t lo = INT64_MAX, hi = INT64_MIN;
    if (p.apply_to_horizontal_wind)
      lo = std::min<std::int64_t>(lo, p.edge_vn_begin),
      hi = std::max<std::int64_t>(hi, p.edge_vn_end);
    if (temperature)
      lo = std::min<std::int64_t>(lo, p.edge_cold_begin),
      hi = std::max<std::int64_t>(hi, p.edge_cold_end);
    const bool edges = p.apply_to_horizontal_wind || temperature;
    const std::int64_t w_begin = std::max(p.cell_w_begin, p.cell_interior_begin);
    const std::int64_t w_end = std::min(p.cell_w_end, p.cell_local_end);
    const auto l = make_launch(GroupRange{edges ? lo : 0, edges ? hi : 0, 0, nlev, edges},
                               GroupRange{w_begin, w_end, 0, nlev, vertical});
    if (l.blocks > 0) {
      vn_w_kernel<Real, L><<<static_cast<unsigned>(l.blocks), kThreads, 0, stream>>>(d, df, s, l);
      launched("vn_w_kernel");
    }
    marks.mark("vn_w");
  }
  if (temperature) {
    NvtxRange range("diffusion theta_exner");
    const auto l = make_launch(GroupRange{p.cell_theta_begin, p.cell_theta_end, 0, nlev, true});
    if (l.blocks > 0) {
      theta_tendency_kernel<Real, L>
          <<<static_cast<unsigned>(l.blocks), kThreads, 0, stream>>>(d, df.prognostic.theta_v, l);
      launched("theta_tendency_kernel");
      theta_exner_kernel<Real, L><<<static_cast<unsigned>(l.blocks), kThreads, 0, stream>>>(
          d, df.prognostic.theta_v, df.prognostic.exner, l);
      launched("theta_exner_kernel");
    }
    marks.mark("theta_exner");
  }

  bool download = false;
  if (any_staged) {
    NvtxRange range("diffusion download");
    for (int i = 0; i < kFields; ++i) {
      if (!staged[i] || !writes[i]) continue;
      const std::size_t bytes = static_cast<std::size_t>(m.field_size[i]) * sizeof(Real);
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(host[i], used[i], bytes, cudaMemcpyDeviceToHost, stream));
      download = true;
    }
    if (download) marks.mark("download");
  }
  SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (download)
    for (int i = 0; i < kFields; ++i)
      if (staged[i] && writes[i] && host[i] != caller[i])
        std::memcpy(caller[i], host[i], static_cast<std::size_t>(m.field_size[i]) * sizeof(Real));
  marks.report(ctx.timers);
}

}  // namespace

void release(const void* problem) noexcept {
  try {
    std::shared_ptr<MirrorBase> gone;
    {
      std::lock_guard<std::mutex> lock(mirrors_mutex);
      auto& map = mirrors();
      auto it = map.find(problem);
      if (it == map.end()) return;
      gone = std::move(it->second);
      map.erase(it);
    }
    // Freed on its own device (a run still holding it frees it when it ends instead).
    cuda_detail::DeviceGuard guard;
    if (gone->device >= 0) (void)cudaSetDevice(gone->device);
    gone.reset();
    (void)cudaGetLastError();
  } catch (...) {
    // A destructor's hook: nothing to report to.
  }
}

#define SCIPROXY_DIFFUSION_CUDA_RUN(Real, L) \
  SCIPROXY_DIFFUSION_RUN(Real, L) {          \
    run_on_device<Real, L>(ctx, p, f);       \
  }
SCIPROXY_DIFFUSION_CUDA_RUN(double, FieldLayout::LevelsContiguous)
SCIPROXY_DIFFUSION_CUDA_RUN(double, FieldLayout::EntitiesContiguous)
SCIPROXY_DIFFUSION_CUDA_RUN(float, FieldLayout::LevelsContiguous)
SCIPROXY_DIFFUSION_CUDA_RUN(float, FieldLayout::EntitiesContiguous)

}  // namespace sciproxy::diffusion::kernels::cuda
