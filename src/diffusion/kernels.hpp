// The backend kernels of the diffusion family, declared once for every backend
// (core/dispatch.hpp). granule.cpp checks the inputs, builds one Problem at init and hands it to
// the backend with the fields of each run; reference.cpp runs ICON4Py's stencils one by one with
// full temporaries, cpu.cpp fuses them into a few OpenMP passes, cuda.cu launches them on the
// GPU. The per-point arithmetic they share is math.hpp.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/dispatch.hpp"
#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion::kernels {

// Index of (entity i, level k) in a field of n entities and nk levels, in the caller's layout.
template <FieldLayout L>
struct FieldIndex {
  std::int64_t n = 0;
  std::int32_t nk = 0;
#if defined(__CUDACC__)
  __host__ __device__
#endif
      std::int64_t
      operator()(std::int64_t i, std::int32_t k) const {
    if constexpr (L == FieldLayout::LevelsContiguous)
      return i * nk + k;
    else
      return static_cast<std::int64_t>(k) * n + i;
  }
};

// Everything a run needs besides the caller's fields: the grid's tables, the coefficients (in
// Real, the level-dependent ones in the caller's layout), the level factors, the index ranges
// of each stencil group (ICON4Py's horizontal_start/end), and the work arrays. Pointers are in
// the backend's memory (host for reference and cpu, device for cuda). Built by granule.cpp.
template <class Real>
struct Problem {
  std::int32_t num_cells = 0, num_edges = 0, num_vertices = 0, nlev = 0;
  bool limited_area = false;

  // Tables (zero-based, -1 for a missing neighbour), row-major (entity, neighbour).
  const std::int32_t *c2e = nullptr, *c2e2c = nullptr, *c2e2co = nullptr, *e2c = nullptr,
                     *e2c2v = nullptr, *v2e = nullptr;

  // Coefficients.
  const Real *rbf_coeff_1 = nullptr, *rbf_coeff_2 = nullptr;  // (vertices, 6)
  const Real *tangent_orientation = nullptr, *inv_primal_edge_length = nullptr,
             *inv_vert_vert_length = nullptr, *inv_dual_edge_length = nullptr, *edge_area = nullptr,
             *nudgecoeff_e = nullptr;  // (edges)
  const Real *primal_normal_vert_x = nullptr, *primal_normal_vert_y = nullptr,
             *dual_normal_vert_x = nullptr, *dual_normal_vert_y = nullptr;             // (edges, 4)
  const Real *e_bln_c_s = nullptr, *geofac_div = nullptr;                              // (cells, 3)
  const Real *geofac_n2s = nullptr, *geofac_grg_x = nullptr, *geofac_grg_y = nullptr;  // (cells, 4)
  const Real* area = nullptr;                                                          // (cells)
  // Level-dependent, in the caller's layout: theta_ref_mc (cells, nlev), wgtfac_c (cells,
  // nlev + 1), zd_diffcoef (cells, nlev); zd_intcoef[j], zd_vertoffset[j] (cells, nlev) for the
  // j-th neighbour of C2E2C.
  const Real *theta_ref_mc = nullptr, *wgtfac_c = nullptr, *zd_diffcoef = nullptr;
  const Real* zd_intcoef[3] = {nullptr, nullptr, nullptr};
  const std::int32_t* zd_vertoffset[3] = {nullptr, nullptr, nullptr};
  // Host copies of the nonzero zd_diffcoef points (cell, level), for the backends that loop over
  // the list as ICON does.
  std::int64_t num_zd_points = 0;
  const std::int32_t* zd_points = nullptr;  // (num_zd_points, 2): cell, level

  // Level factors (nlev): enh_smag_fac, diff_multfac_n2w; diff_multfac_vn and smag_limit of a
  // regular and of the initial run.
  const Real *enh_smag_fac = nullptr, *diff_multfac_n2w = nullptr;
  const Real *diff_multfac_vn = nullptr, *smag_limit = nullptr;
  const Real *diff_multfac_vn_initial = nullptr, *smag_limit_initial = nullptr;

  // Scalars (ICON4Py's names).
  Real smag_offset = 0, diff_multfac_w = 0, nudgezone_diff = 0, fac_bdydiff_v = 0, rd_o_cvd = 0,
       thresh_tdiff = 0, smallest_vpfloat = 0;
  std::int32_t nrdmax = 0;  // end_index_of_damping_layer + 1
  int shear_type = 0;
  bool turbulence_diagnostics = false;  // shear_type >= 1 or loutshs or a_hshr > 0
  bool apply_to_vertical_wind = true, apply_to_horizontal_wind = true, apply_to_temperature = true,
       apply_zdiffusion_t = true;

  // Index ranges [begin, end) of the stencil groups (ICON4Py's domains).
  std::int32_t vertex_begin = 0, vertex_end = 0;        // RBF: LB level 2 .. local
  std::int32_t edge_smag_begin = 0, edge_smag_end = 0;  // nabla2, Smagorinsky: LB 5 .. halo 2
  std::int32_t edge_vn_begin = 0, edge_vn_end = 0;      // vn update: LB 5 .. local
  std::int32_t edge_nudge2_begin = 0;  // below: lateral-boundary nabla2 only (limited area)
  std::int32_t cell_turb_begin = 0, cell_turb_end = 0;       // div_ic, hdef_ic: nudging .. local
  std::int32_t cell_w_begin = 0, cell_w_end = 0;             // dwdx, dwdy, nabla2 w: .. halo
  std::int32_t cell_interior_begin = 0, cell_local_end = 0;  // w is updated here
  std::int32_t edge_cold_begin = 0, edge_cold_end = 0;       // cold pools: nudging .. halo
  std::int32_t cell_theta_begin = 0, cell_theta_end = 0;     // theta, exner: nudging .. local

  // Work arrays in the caller's layout: u_vert, v_vert (vertices, nlev); kh_smag_e, kh_smag_ec,
  // z_nabla2_e (edges, nlev); z_nabla2_c (cells, nlev + 1); z_temp (cells, nlev); the kept
  // copies w_old (cells, nlev + 1) and theta_old (cells, nlev) of the reference backend.
  Real *u_vert = nullptr, *v_vert = nullptr, *kh_smag_e = nullptr, *kh_smag_ec = nullptr,
       *z_nabla2_e = nullptr, *z_nabla2_c = nullptr, *z_temp = nullptr, *w_old = nullptr,
       *theta_old = nullptr;
  Real* enh_diffu_3d = nullptr;  // (cells, 2): the cold-pool enhancement of the two lowest levels
  // (nlev + 1) zeros: the row a missing neighbour reads (with a zero weight) in the cpu
  // backend's row loops, which stay free of branches so that they vectorise.
  Real* zero_row = nullptr;
  // (cells): whether a cell has a truly-horizontal-diffusion point at some level.
  const std::uint8_t* cell_has_zd = nullptr;
  // (nlev) scratch: diff_multfac_smag = enh_smag_fac dtime, of this run.
  Real* diff_multfac_smag = nullptr;

  // Under MPI: the granule's halo exchange, which the host backends call at the points of
  // ICON4Py's granule (HaloPoint); null on one rank.
  void (*exchange_halo)(void* context, int point) = nullptr;
  void* exchange_context = nullptr;

  int nparallel = 0;  // OpenMP threads of the cpu backend; 0: all
  // The cuda backend checks the prognostic fields for NaN and infinity itself, on the device
  // (they may be device pointers); the granule checks them on the host for the other backends.
  bool check_finite = false;
};

// Where a run exchanges halos under MPI, ICON4Py's Diffusion.run order: u_vert, v_vert after
// the RBF of vn; z_nabla2_e after the Smagorinsky stencil; u_vert, v_vert after the RBF of
// z_nabla2_e; vn (started) after its update. w, theta_v and exner (and the wait for vn) follow
// the backend's run, in the granule.
enum HaloPoint : int {
  kHaloVertexWind = 0,
  kHaloNabla2Edges = 1,
  kHaloVertexNabla2 = 2,
  kHaloVn = 3
};
template <class Real>
void exchange_halo(const Problem<Real>& p, HaloPoint point) {
  if (p.exchange_halo != nullptr) p.exchange_halo(p.exchange_context, point);
}

// One run's fields (the caller's memory for host backends, the device mirror for cuda) and
// scalars.
template <class Real>
struct RunFields {
  DiffusionPrognosticFields<Real> prognostic;
  DiffusionDiagnosticFields<Real> diagnostic;
  Real dtime = 0;
  bool initial_run = false;
};

// The level factors of one run: ICON4Py's regular or initial-run diff_multfac_vn, smag_limit
// and smag_offset, and diff_multfac_smag = enh_smag_fac dtime, written into p's scratch (host
// backends).
template <class Real>
struct RunFactors {
  const Real* diff_multfac_vn;
  const Real* smag_limit;
  Real smag_offset;
  const Real* diff_multfac_smag;
};
template <class Real>
RunFactors<Real> run_factors(const Problem<Real>& p, const RunFields<Real>& f) {
  for (std::int32_t k = 0; k < p.nlev; ++k) p.diff_multfac_smag[k] = p.enh_smag_fac[k] * f.dtime;
  if (f.initial_run)
    return {p.diff_multfac_vn_initial, p.smag_limit_initial, Real(0), p.diff_multfac_smag};
  return {p.diff_multfac_vn, p.smag_limit, p.smag_offset, p.diff_multfac_smag};
}

// Runs one diffusion step on the fields. Records the regions "rbf_vn", "smagorinsky",
// "turbulence", "rbf_nabla2", "vn", "w", "cold_pools", "theta_exner" (fused backends record the
// fused group names they run instead).
#define SCIPROXY_DIFFUSION_RUN(Real, L)                                          \
  void run(const Context& ctx, const Problem<Real>& p, const RunFields<Real>& f, \
           std::integral_constant<FieldLayout, L>)

#define SCIPROXY_DIFFUSION_KERNELS                                 \
  SCIPROXY_DIFFUSION_RUN(double, FieldLayout::LevelsContiguous);   \
  SCIPROXY_DIFFUSION_RUN(double, FieldLayout::EntitiesContiguous); \
  SCIPROXY_DIFFUSION_RUN(float, FieldLayout::LevelsContiguous);    \
  SCIPROXY_DIFFUSION_RUN(float, FieldLayout::EntitiesContiguous);

SCIPROXY_DECLARE_KERNELS(SCIPROXY_DIFFUSION_KERNELS)

namespace cuda {
// The cuda backend keeps a device mirror of each Problem it has run (cuda.cu), keyed by the
// Problem's address; the granule releases it when it is destroyed. Never throws; does nothing
// for a Problem the backend never saw, and in builds without CUDA (core/cuda_stubs.cpp).
void release(const void* problem) noexcept;
}  // namespace cuda

}  // namespace sciproxy::diffusion::kernels
