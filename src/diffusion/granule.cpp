// The diffusion granule's init and run (ICON4Py's Diffusion.__init__ and Diffusion.run,
// model/atmosphere/diffusion/diffusion.py v0.4.1): checks every input, derives ICON's constants
// and the level factors, lays the coefficients out for the backend, and dispatches each run.
//
//   K2 = 1 / (8 hdiff_efdt_ratio),  K4 = K2 / 8,  K4W = 1 / (36 hdiff_w_efdt_ratio)
//   diff_multfac_vn = min(1/128, K4 ndyn_substeps / 3),  smag_limit = 1/8 - 4 diff_multfac_vn
//   initial run:  diff_multfac_vn = K4 hdiff_efdt_ratio / 3,  smag_offset = 0
//   smag_offset = K4 ndyn_substeps / 4,  diff_multfac_w = min(1/48, K4W ndyn_substeps)
//   nudgezone_diff = 0.04 / (max_nudging_coefficient + eps),
//   fac_bdydiff_v = sqrt(ndyn_substeps) / velocity_boundary_diffusion_denominator
//   enh_smag_fac(k): at zf = (vct_a[k] + vct_a[k+1]) / 2, with dz21 = z2 - z1,
//     alin = (f2 - f1) / dz21, bqdr = (df42 dz32 - df32 dz42) / (dz32 dz42 (dz42 - dz32)),
//     aqdr = df32 / dz32 - bqdr dz32, dzlin = min(dz21, max(0, zf - z1)),
//     dzqdr = min(dz42, max(0, zf - z2)):  f1 + dzlin alin + dzqdr (aqdr + dzqdr bqdr)
//   diff_multfac_n2w(k) = ((vct_a[k] - vct_a[nrd + 1]) / (vct_a[1] - vct_a[nrd + 1]))^4 / 12
//     for 1 <= k <= nrd = end_index_of_damping_layer, else 0
//   rd_o_cvd = Rd / (cpd - Rd), Rd = 287.04, cpd = 1004.64;  thresh_tdiff = -5 K
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "core/collective.hpp"
#include "core/recorded_call.hpp"
#include "diffusion/decomposition.hpp"
#include "diffusion/kernels.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"
#include "sciproxy/core/savepoint.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion {

namespace {

constexpr double kRd = 287.04, kCpd = 1004.64;

std::string count_text(std::size_t n) {
  return fmt::format("{} values", n);
}

void require_size(const std::vector<double>& v, std::int64_t n, const char* name,
                  const char* shape) {
  require(static_cast<std::int64_t>(v.size()) == n, name, fmt::format("{} = {} values", shape, n),
          count_text(v.size()));
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      throw_invalid_argument(name, "finite values", fmt::format("{} at flat index {}", v[i], i));
}

void require_table(const std::vector<std::int32_t>& t, std::int64_t rows, int cols,
                   std::int32_t bound, const char* name, bool allow_missing) {
  require(static_cast<std::int64_t>(t.size()) == rows * cols, fmt::format("grid.{}", name),
          fmt::format("({}, {}) = {} entries", rows, cols, rows * cols), count_text(t.size()));
  for (std::size_t i = 0; i < t.size(); ++i)
    if (t[i] >= bound || t[i] < (allow_missing ? -1 : 0))
      throw_invalid_argument(fmt::format("grid.{}", name),
                             fmt::format("indices in [{}, {})", allow_missing ? -1 : 0, bound),
                             fmt::format("{} at row {}", t[i], i / cols));
}

void check_config(const DiffusionConfig& c) {
  require(c.diffusion_type == 5, "config.diffusion_type",
          "5 (Smagorinsky with fourth-order background, the only one ICON4Py implements)",
          std::to_string(c.diffusion_type));
  require(c.type_vn_diffu == 1, "config.type_vn_diffu", "1 (diamond stencil on vertices)",
          std::to_string(c.type_vn_diffu));
  require(c.type_t_diffu == 2, "config.type_t_diffu", "2 (div(K grad T))",
          std::to_string(c.type_t_diffu));
  require(!c.apply_smag_diff_to_vertical_wind, "config.apply_smag_diff_to_vertical_wind",
          "false (not implemented, as in ICON4Py)", "true");
  require(!c.compute_3d_smag_coeff, "config.compute_3d_smag_coeff",
          "false (not implemented, as in ICON4Py)", "true");
  require(c.shear_type >= 0 && c.shear_type <= 2, "config.shear_type", "0, 1 or 2",
          std::to_string(c.shear_type));
  require(c.ndyn_substeps >= 1, "config.ndyn_substeps", "an integer >= 1",
          std::to_string(c.ndyn_substeps));
  auto positive = [](double v, const char* name) {
    require(std::isfinite(v) && v > 0, name, "a positive, finite number", fmt::format("{}", v));
  };
  auto finite = [](double v, const char* name) {
    require(std::isfinite(v), name, "a finite number", fmt::format("{}", v));
  };
  require(std::isfinite(c.hdiff_efdt_ratio) && c.hdiff_efdt_ratio >= 0, "config.hdiff_efdt_ratio",
          "a finite number >= 0", fmt::format("{}", c.hdiff_efdt_ratio));
  require(std::isfinite(c.hdiff_w_efdt_ratio) && c.hdiff_w_efdt_ratio >= 0,
          "config.hdiff_w_efdt_ratio", "a finite number >= 0",
          fmt::format("{}", c.hdiff_w_efdt_ratio));
  finite(c.smagorinski_scaling_factor, "config.smagorinski_scaling_factor");
  finite(c.smagorinski_scaling_factor2, "config.smagorinski_scaling_factor2");
  finite(c.smagorinski_scaling_factor3, "config.smagorinski_scaling_factor3");
  finite(c.smagorinski_scaling_factor4, "config.smagorinski_scaling_factor4");
  const double z1 = c.smagorinski_scaling_height, z2 = c.smagorinski_scaling_height2,
               z3 = c.smagorinski_scaling_height3, z4 = c.smagorinski_scaling_height4;
  // The profile divides by z2 - z1, z3 - z2, z4 - z2 and z4 - z3 (ICON4Py's defaults have z3 < z2).
  require(
      std::isfinite(z1) && std::isfinite(z2) && std::isfinite(z3) && std::isfinite(z4) &&
          z2 != z1 && z3 != z2 && z4 != z2 && z4 != z3,
      "config.smagorinski_scaling_height..height4",
      "finite heights with height2 != height, height3 and height4 != height2, height4 != height3",
      fmt::format("{}, {}, {}, {}", z1, z2, z3, z4));
  positive(c.temperature_boundary_diffusion_denominator,
           "config.temperature_boundary_diffusion_denominator");
  positive(c.velocity_boundary_diffusion_denominator,
           "config.velocity_boundary_diffusion_denominator");
  require(std::isfinite(c.max_nudging_coefficient) && c.max_nudging_coefficient >= 0,
          "config.max_nudging_coefficient", "a finite number >= 0",
          fmt::format("{}", c.max_nudging_coefficient));
  finite(c.a_hshr, "config.a_hshr");
}

// The level factor enh_smag_fac (ICON4Py's _en_smag_fac_for_zero_nshift).
std::vector<double> enh_smag_fac(const DiffusionConfig& c, const std::vector<double>& vct_a,
                                 int nlev) {
  const double f1 = c.smagorinski_scaling_factor, f2 = c.smagorinski_scaling_factor2,
               f3 = c.smagorinski_scaling_factor3, f4 = c.smagorinski_scaling_factor4;
  const double z1 = c.smagorinski_scaling_height, z2 = c.smagorinski_scaling_height2,
               z3 = c.smagorinski_scaling_height3, z4 = c.smagorinski_scaling_height4;
  const double dz21 = z2 - z1, alin = (f2 - f1) / dz21, df32 = f3 - f2, df42 = f4 - f2,
               dz32 = z3 - z2, dz42 = z4 - z2;
  const double bqdr = (df42 * dz32 - df32 * dz42) / (dz32 * dz42 * (dz42 - dz32));
  const double aqdr = df32 / dz32 - bqdr * dz32;
  std::vector<double> out(nlev);
  for (int k = 0; k < nlev; ++k) {
    const double zf = 0.5 * (vct_a[k] + vct_a[k + 1]);
    const double dzlin = std::min(dz21, std::max(0.0, zf - z1));
    const double dzqdr = std::min(dz42, std::max(0.0, zf - z2));
    out[k] = f1 + dzlin * alin + dzqdr * (aqdr + dzqdr * bqdr);
  }
  return out;
}

// A field of a rank's grid in the caller's layout: value (i, k) of n entities, nk levels.
struct LocalField {
  void* data;
  std::int32_t nk;
};
inline std::int64_t at(FieldLayout layout, std::int64_t n, std::int32_t nk, std::int64_t i,
                       std::int32_t k) {
  return layout == FieldLayout::LevelsContiguous ? i * nk + k
                                                 : static_cast<std::int64_t>(k) * n + i;
}

// One halo exchange of some fields of one entity kind: the owned entries each neighbour has in
// its halo are packed (field after field, entity after entity, level after level) and sent, the
// halo entries received are unpacked in the same order.
template <class Real>
struct HaloExchange {
  const HaloPattern* pattern = nullptr;
  std::vector<LocalField> fields;
  std::int64_t n = 0;
  FieldLayout layout = FieldLayout::LevelsContiguous;
  std::vector<Real> send, receive;
  std::vector<collective::Message<Real>> messages;
  collective::Pending pending;

  void start(const Communicator& comm, const HaloPattern& halo, std::vector<LocalField> what,
             std::int64_t entities, FieldLayout field_layout, int tag) {
    pattern = &halo, fields = std::move(what), n = entities, layout = field_layout;
    std::int64_t levels = 0, send_size = 0, receive_size = 0;
    for (const LocalField& f : fields) levels += f.nk;
    for (const HaloNeighbour& nb : halo) {
      send_size += static_cast<std::int64_t>(nb.send.size()) * levels;
      receive_size += static_cast<std::int64_t>(nb.receive.size()) * levels;
    }
    send.resize(send_size), receive.resize(receive_size), messages.clear();
    Real* out = send.data();
    Real* in = receive.data();
    for (const HaloNeighbour& nb : halo) {
      Real* const first = out;
      for (const LocalField& f : fields) {
        const Real* x = static_cast<const Real*>(f.data);
        for (std::int32_t i : nb.send)
          for (std::int32_t k = 0; k < f.nk; ++k) *out++ = x[at(layout, n, f.nk, i, k)];
      }
      const std::int64_t count = static_cast<std::int64_t>(nb.receive.size()) * levels;
      messages.push_back({nb.rank, std::span<const Real>(first, out), std::span<Real>(in, count)});
      in += count;
    }
    pending = collective::start_exchange<Real>(comm, messages, tag);
  }

  void finish() {
    if (pattern == nullptr) return;
    pending.wait();
    const Real* in = receive.data();
    for (const HaloNeighbour& nb : *pattern)
      for (const LocalField& f : fields) {
        Real* x = static_cast<Real*>(f.data);
        for (std::int32_t i : nb.receive)
          for (std::int32_t k = 0; k < f.nk; ++k) x[at(layout, n, f.nk, i, k)] = *in++;
      }
    pattern = nullptr;
  }
};

// The caller's fields, in the precision the granule runs.
template <class Real>
struct Storage {
  std::vector<Real> coefficients;  // every Real input, back to back
  std::vector<Real> levels;        // the level factors
  std::vector<Real> work;          // the work arrays
  std::vector<std::int32_t> zd_vertoffset;
  std::vector<std::uint8_t> cell_has_zd;
  kernels::Problem<Real> problem;
  // Under MPI: the rank's fields of the run (the 8 fields back to back), and the exchanges.
  std::vector<Real> local_fields;
  DiffusionPrognosticFields<Real> local_prognostic;
  DiffusionDiagnosticFields<Real> local_diagnostic;
  HaloExchange<Real> intermediate, vn, cells;
};

}  // namespace

struct Diffusion::Impl {
  Grid grid;
  DiffusionConfig config;
  DiffusionVerticalGrid vertical;
  DiffusionOptions options;
  Device device;
  Timers timers;
  double init_seconds = 0;
  double bytes_per_run = 0;
  double working_set_bytes = 0;
  double flops_per_run = 0;
  std::variant<Storage<double>, Storage<float>> storage;

  // The cuda backend's device mirror of the Problem goes with it.
  ~Impl() {
    if (device.backend == Backend::cuda)
      std::visit([](auto& s) { kernels::cuda::release(&s.problem); }, storage);
  }

  template <class Real>
  void build(const DiffusionMetricState& m, const DiffusionInterpolationState& in,
             const DiffusionEdgeParams& ep, const DiffusionCellParams& cp);
  long calls = 0;

  // Under a communicator of several ranks: this rank's domain (grid above is its local grid),
  // and every rank's owned cells and edges (global indices, rank after rank) for the gather.
  struct Ranks {
    Communicator comm;
    RankDomain domain;
    std::int32_t global_cells = 0, global_edges = 0;
    std::vector<std::int32_t> cells_by_rank, edges_by_rank;
    std::vector<std::int64_t> cell_counts, edge_counts;
  };
  std::unique_ptr<Ranks> ranks;
  template <class Real>
  void run_on_ranks(DiffusionDiagnosticFields<Real>& d, DiffusionPrognosticFields<Real>& f,
                    double dtime, bool initial_run);
  template <class Real>
  void run_rank(DiffusionDiagnosticFields<Real>& ld, DiffusionPrognosticFields<Real>& lp,
                double dtime, bool initial_run);
  template <class Real>
  static void halo_hook(void* context, int point);
  void set_work_model(double nc, double ne, double nv, std::size_t real_bytes);
  template <class Real>
  void check_run(const DiffusionDiagnosticFields<Real>& d, const DiffusionPrognosticFields<Real>& f,
                 double dtime, std::int64_t nc, std::int64_t ne) const;

  template <class Real>
  void run(DiffusionDiagnosticFields<Real>& d, DiffusionPrognosticFields<Real>& f, double dtime,
           bool initial_run);
  template <class Real>
  void run_kernel(DiffusionDiagnosticFields<Real>& d, DiffusionPrognosticFields<Real>& f,
                  double dtime, bool initial_run);
  template <class Real>
  void write_savepoint(const char* name, const DiffusionDiagnosticFields<Real>& d,
                       const DiffusionPrognosticFields<Real>& f, double dtime,
                       bool initial_run) const;
};

// One savepoint of the run's fields, with ICON4Py's names and (entity, level) dimensions; the
// caller's layout is recorded so that a Fortran run and a Python run compare field by field.
template <class Real>
void Diffusion::Impl::write_savepoint(const char* name, const DiffusionDiagnosticFields<Real>& d,
                                      const DiffusionPrognosticFields<Real>& f, double dtime,
                                      bool initial_run) const {
  namespace sp = sciproxy::savepoint;
  const std::size_t nc = grid.num_cells, ne = grid.num_edges, nlev = vertical.num_levels;
  const sp::Layout layout = options.layout == FieldLayout::LevelsContiguous
                                ? sp::Layout::row_major
                                : sp::Layout::column_major;
  sp::SavepointWriter w(name);
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  w.set("linit", initial_run).set("dtime", dtime).set("date", std::string(date)).set("call", calls);
  w.set("device", device.name());
  auto add = [&](const char* field, const Real* x, std::size_t n, const char* dim, std::size_t nk,
                 const char* kdim) {
    // Fortran's (nproma, nlev) is (k, entity) row-major: the writer is told the dims as the
    // data lie, (entity, k) in column-major order.
    w.add_field(field, std::span<const Real>(x, n * nk), {dim, kdim}, {n, nk}, layout);
  };
  add("vn", f.vn, ne, "edge", nlev, "k");
  add("w", f.w, nc, "cell", nlev + 1, "khalf");
  add("theta_v", f.theta_v, nc, "cell", nlev, "k");
  add("exner", f.exner, nc, "cell", nlev, "k");
  add("hdef_ic", d.hdef_ic, nc, "cell", nlev + 1, "khalf");
  add("div_ic", d.div_ic, nc, "cell", nlev + 1, "khalf");
  add("dwdx", d.dwdx, nc, "cell", nlev + 1, "khalf");
  add("dwdy", d.dwdy, nc, "cell", nlev + 1, "khalf");
  sp::write_next(w, options.savepoint_dir, options.savepoint_prefix);
}

// The roofline's numbers for a grid of nc cells, ne edges, nv vertices (under MPI: the whole
// grid's, as the case's work model is the whole problem's).
void Diffusion::Impl::set_work_model(double nc, double ne, double nv, std::size_t real_bytes) {
  const std::int32_t nlev = vertical.num_levels;
  const bool turbulence_diagnostics =
      config.shear_type >= 1 || config.loutshs || config.a_hshr > 0.0;
  // Compulsory bytes of a run: vn, w, theta_v, exner read and written; div_ic, hdef_ic, dwdx,
  // dwdy written (as configured); the coefficients read once.
  const double r = static_cast<double>(real_bytes);
  double fields = 2.0 * ne * nlev + 2.0 * nc * (nlev + 1) + 4.0 * nc * nlev;
  if (turbulence_diagnostics) fields += 2.0 * nc * (nlev - 1) + nc * (nlev + 1);  // + wgtfac_c
  if (config.shear_type == 2) fields += 2.0 * nc * (nlev - 1);
  fields += nc * nlev;  // zd_diffcoef
  const double coefficients = 6.0 * nv + 13.0 * ne + 15.0 * nc;
  const double tables = 4.0 * (6.0 * nv + 4.0 * ne + 2.0 * ne + 3.0 * nc + 3.0 * nc + 4.0 * nc);
  bytes_per_run = r * (fields + coefficients) + tables;
  // The working set adds the temporaries (u_vert, v_vert; kh_smag_e, kh_smag_ec, z_nabla2_e;
  // z_nabla2_c, z_temp, theta_old; w_old) to them; a field read and written counts twice in the
  // bytes, so this overstates it a little.
  const double temporaries = 2.0 * nv * nlev + 3.0 * ne * nlev + 3.0 * nc * nlev + nc * (nlev + 1);
  working_set_bytes = bytes_per_run + r * temporaries;
  flops_per_run = double(nlev) * (48.0 * double(nv) + 89.0 * double(ne) + 94.0 * double(nc));
}

template <class Real>
void Diffusion::Impl::build(const DiffusionMetricState& m, const DiffusionInterpolationState& in,
                            const DiffusionEdgeParams& ep, const DiffusionCellParams& cp) {
  const std::int64_t nc = grid.num_cells, ne = grid.num_edges, nv = grid.num_vertices;
  const std::int32_t nlev = vertical.num_levels;
  Storage<Real>& s = storage.template emplace<Storage<Real>>();
  kernels::Problem<Real>& p = s.problem;
  p.num_cells = grid.num_cells;
  p.num_edges = grid.num_edges;
  p.num_vertices = grid.num_vertices;
  p.nlev = nlev;
  p.limited_area = grid.limited_area;
  p.c2e = grid.c2e.data();
  p.c2e2c = grid.c2e2c.data();
  p.c2e2co = grid.c2e2co.data();
  p.e2c = grid.e2c.data();
  p.e2c2v = grid.e2c2v.data();
  p.v2e = grid.v2e.data();

  // The level-dependent inputs in the caller's layout; the others as they come.
  const bool entities_first = options.layout == FieldLayout::EntitiesContiguous;
  auto level_field = [&](const double* src, std::int64_t n, int nk, Real* dst) {
    for (std::int64_t i = 0; i < n; ++i)
      for (int k = 0; k < nk; ++k)
        dst[entities_first ? k * n + i : i * nk + k] = static_cast<Real>(src[i * nk + k]);
  };
  const std::vector<const std::vector<double>*> flat = {&in.rbf_coeff_1,
                                                        &in.rbf_coeff_2,
                                                        &ep.tangent_orientation,
                                                        &ep.inverse_primal_edge_lengths,
                                                        &ep.inverse_vertex_vertex_lengths,
                                                        &ep.inverse_dual_edge_lengths,
                                                        &ep.edge_areas,
                                                        &in.nudgecoeff_e,
                                                        &ep.primal_normal_vert_x,
                                                        &ep.primal_normal_vert_y,
                                                        &ep.dual_normal_vert_x,
                                                        &ep.dual_normal_vert_y,
                                                        &in.e_bln_c_s,
                                                        &in.geofac_div,
                                                        &in.geofac_n2s,
                                                        &in.geofac_grg_x,
                                                        &in.geofac_grg_y,
                                                        &cp.area};
  std::int64_t total = 0;
  for (const auto* v : flat) total += static_cast<std::int64_t>(v->size());
  const std::int64_t level_total = nc * nlev * 5 + nc * (nlev + 1);  // theta_ref, zd x4, wgtfac_c
  s.coefficients.resize(total + level_total);
  std::vector<const Real*> ptr;
  Real* at = s.coefficients.data();
  for (const auto* v : flat) {
    ptr.push_back(at);
    for (double x : *v) *at++ = static_cast<Real>(x);
  }
  int i = 0;
  p.rbf_coeff_1 = ptr[i++], p.rbf_coeff_2 = ptr[i++], p.tangent_orientation = ptr[i++];
  p.inv_primal_edge_length = ptr[i++], p.inv_vert_vert_length = ptr[i++];
  p.inv_dual_edge_length = ptr[i++], p.edge_area = ptr[i++], p.nudgecoeff_e = ptr[i++];
  p.primal_normal_vert_x = ptr[i++], p.primal_normal_vert_y = ptr[i++];
  p.dual_normal_vert_x = ptr[i++], p.dual_normal_vert_y = ptr[i++];
  p.e_bln_c_s = ptr[i++], p.geofac_div = ptr[i++], p.geofac_n2s = ptr[i++];
  p.geofac_grg_x = ptr[i++], p.geofac_grg_y = ptr[i++], p.area = ptr[i++];
  level_field(m.theta_ref_mc.data(), nc, nlev, at);
  p.theta_ref_mc = at, at += nc * nlev;
  level_field(m.wgtfac_c.data(), nc, nlev + 1, at);
  p.wgtfac_c = at, at += nc * (nlev + 1);
  level_field(m.zd_diffcoef.data(), nc, nlev, at);
  p.zd_diffcoef = at, at += nc * nlev;
  // zd_intcoef and zd_vertoffset come as (cells, 3, levels): one (cells, levels) field per j.
  s.zd_vertoffset.resize(3 * nc * nlev);
  for (int j = 0; j < 3; ++j) {
    std::vector<double> coef(nc * nlev);
    for (std::int64_t c = 0; c < nc; ++c)
      for (int k = 0; k < nlev; ++k) {
        const std::int64_t from = (c * 3 + j) * nlev + k;
        const std::int64_t to = entities_first ? k * nc + c : c * nlev + k;
        coef[c * nlev + k] = m.zd_intcoef[from];
        s.zd_vertoffset[j * nc * nlev + to] = m.zd_vertoffset[from];
      }
    level_field(coef.data(), nc, nlev, at);
    p.zd_intcoef[j] = at, at += nc * nlev;
    p.zd_vertoffset[j] = s.zd_vertoffset.data() + j * nc * nlev;
  }

  // Constants and level factors.
  const DiffusionConfig& c = config;
  const double K2 = c.hdiff_efdt_ratio > 0 ? 1.0 / (c.hdiff_efdt_ratio * 8.0) : 0.0;
  const double K4 = K2 / 8.0;
  const double K4W = c.hdiff_w_efdt_ratio > 0 ? 1.0 / (c.hdiff_w_efdt_ratio * 36.0) : 0.0;
  const double substeps = c.ndyn_substeps;
  const double multfac_vn = std::min(1.0 / 128.0, K4 * substeps / 3.0);
  const double multfac_vn_initial = K4 / 3.0 * c.hdiff_efdt_ratio;
  const std::vector<double> enh = enh_smag_fac(c, vertical.vct_a, nlev);
  const std::int32_t nrd = vertical.end_index_of_damping_layer;
  s.levels.assign(6 * static_cast<std::size_t>(nlev), Real(0));
  Real* lv = s.levels.data();
  for (int k = 0; k < nlev; ++k) {
    lv[k] = static_cast<Real>(enh[k]);
    if (k >= 1 && k < nrd + 1) {
      const double h = vertical.vct_a[k], h_nrd = vertical.vct_a[nrd + 1], h1 = vertical.vct_a[1];
      lv[nlev + k] = static_cast<Real>(1.0 / 12.0 * std::pow((h - h_nrd) / (h1 - h_nrd), 4));
    }
    lv[2 * nlev + k] = static_cast<Real>(multfac_vn);
    lv[3 * nlev + k] = static_cast<Real>(0.125 - 4.0 * multfac_vn);
    lv[4 * nlev + k] = static_cast<Real>(multfac_vn_initial);
    lv[5 * nlev + k] = static_cast<Real>(0.125 - 4.0 * multfac_vn_initial);
  }
  p.enh_smag_fac = lv, p.diff_multfac_n2w = lv + nlev, p.diff_multfac_vn = lv + 2 * nlev;
  p.smag_limit = lv + 3 * nlev, p.diff_multfac_vn_initial = lv + 4 * nlev;
  p.smag_limit_initial = lv + 5 * nlev;
  p.smag_offset = static_cast<Real>(0.25 * K4 * substeps);
  p.diff_multfac_w = static_cast<Real>(std::min(1.0 / 48.0, K4W * substeps));
  p.nudgezone_diff = static_cast<Real>(
      0.04 / (c.max_nudging_coefficient + std::numeric_limits<double>::epsilon()));
  p.fac_bdydiff_v =
      static_cast<Real>(std::sqrt(substeps) / c.velocity_boundary_diffusion_denominator);
  p.rd_o_cvd = static_cast<Real>(kRd / (kCpd - kRd));
  p.thresh_tdiff = Real(-5);
  p.smallest_vpfloat =
      static_cast<Real>(std::numeric_limits<double>::epsilon());  // ICON4Py: DBL_EPS
  p.nrdmax = nrd + 1;
  p.shear_type = c.shear_type;
  p.turbulence_diagnostics = c.shear_type >= 1 || c.loutshs || c.a_hshr > 0.0;
  p.apply_to_vertical_wind = c.apply_to_vertical_wind;
  p.apply_to_horizontal_wind = c.apply_to_horizontal_wind;
  p.apply_to_temperature = c.apply_to_temperature;
  p.apply_zdiffusion_t = c.apply_zdiffusion_t;

  // ICON4Py's domains.
  using D = Dimension;
  p.vertex_begin = grid.start_index(D::Vertex, Zone::LateralBoundaryLevel2);
  p.vertex_end = grid.end_index(D::Vertex, Zone::Local);
  p.edge_smag_begin = grid.start_index(D::Edge, Zone::LateralBoundaryLevel5);
  p.edge_smag_end = grid.end_index(D::Edge, Zone::HaloLevel2);
  p.edge_vn_begin = p.edge_smag_begin;
  p.edge_vn_end = grid.end_index(D::Edge, Zone::Local);
  p.edge_nudge2_begin = grid.start_index(D::Edge, Zone::NudgingLevel2);
  p.cell_turb_begin = grid.start_index(D::Cell, Zone::Nudging);
  p.cell_turb_end = grid.end_index(D::Cell, Zone::Local);
  p.cell_w_begin = grid.limited_area ? grid.start_index(D::Cell, Zone::Nudging)
                                     : grid.start_index(D::Cell, Zone::LateralBoundaryLevel4);
  p.cell_w_end = grid.end_index(D::Cell, Zone::Halo);
  p.cell_interior_begin = grid.start_index(D::Cell, Zone::Interior);
  p.cell_local_end = grid.end_index(D::Cell, Zone::Local);
  p.edge_cold_begin = grid.start_index(D::Edge, Zone::Nudging);
  p.edge_cold_end = grid.end_index(D::Edge, Zone::Halo);
  p.cell_theta_begin = grid.start_index(D::Cell, Zone::Nudging);
  p.cell_theta_end = grid.end_index(D::Cell, Zone::Local);

  // Work arrays.
  const std::int64_t work = 2 * nv * nlev + 3 * ne * nlev + nc * nlev + nc * nlev +
                            nc * (nlev + 1) + nc * nlev + 2 * nc + nlev + (nlev + 1);
  s.work.assign(work, Real(0));
  Real* wk = s.work.data();
  auto take = [&](std::int64_t n) {
    Real* q = wk;
    wk += n;
    return q;
  };
  p.u_vert = take(nv * nlev), p.v_vert = take(nv * nlev);
  p.kh_smag_e = take(ne * nlev), p.kh_smag_ec = take(ne * nlev), p.z_nabla2_e = take(ne * nlev);
  p.z_nabla2_c = take(nc * nlev), p.z_temp = take(nc * nlev), p.w_old = take(nc * (nlev + 1));
  p.theta_old = take(nc * nlev), p.enh_diffu_3d = take(2 * nc), p.diff_multfac_smag = take(nlev);
  p.zero_row = take(nlev + 1);
  s.cell_has_zd.assign(nc, 0);
  for (std::int64_t c = 0; c < nc; ++c)
    for (int k = 0; k < nlev; ++k)
      if (m.zd_diffcoef[c * nlev + k] != 0.0) s.cell_has_zd[c] = 1;
  p.cell_has_zd = s.cell_has_zd.data();
  p.nparallel = options.nparallel;
  p.check_finite = options.check_finite;

  set_work_model(nc, ne, nv, sizeof(Real));
}

namespace {

// The first NaN or infinity of a field, searched in parallel (a run's fields are tens of MB:
// a serial scan would cost a tenth of the run).
template <class Real>
void check_finite_field(const Real* x, std::int64_t n, const char* name, int threads) {
  std::int64_t first = n;
#pragma omp parallel for reduction(min : first) num_threads(threads) schedule(static)
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]) && i < first) first = i;
  if (first < n)
    throw_invalid_argument(
        name, "finite values",
        fmt::format("{} at flat index {} (of {})", static_cast<double>(x[first]), first, n));
}

}  // namespace

// The run's arguments: the precision, dtime, every field present, and (check_finite) finite
// prognostic fields of nc cells and ne edges.
template <class Real>
void Diffusion::Impl::check_run(const DiffusionDiagnosticFields<Real>& d,
                                const DiffusionPrognosticFields<Real>& f, double dtime,
                                std::int64_t nc, std::int64_t ne) const {
  auto* s = std::get_if<Storage<Real>>(&storage);
  require(s != nullptr, "fields",
          options.single_precision
              ? "float32 fields (the granule was initialised in single precision)"
              : "float64 fields (the granule was initialised in double precision)",
          sizeof(Real) == 4 ? "float32" : "float64");
  require(std::isfinite(dtime) && dtime > 0, "dtime", "a positive, finite time step in seconds",
          fmt::format("{}", dtime));
  const struct {
    const Real* ptr;
    const char* name;
  } required[] = {{f.vn, "prognostic.vn"},           {f.w, "prognostic.w"},
                  {f.theta_v, "prognostic.theta_v"}, {f.exner, "prognostic.exner"},
                  {d.hdef_ic, "diagnostic.hdef_ic"}, {d.div_ic, "diagnostic.div_ic"},
                  {d.dwdx, "diagnostic.dwdx"},       {d.dwdy, "diagnostic.dwdy"}};
  for (const auto& r : required) require(r.ptr != nullptr, r.name, "a field", "a null pointer");
  const std::int32_t nlev = vertical.num_levels;
  // The cuda backend checks on the device: the fields may be device pointers.
  if (options.check_finite && device.backend != Backend::cuda) {
    const int threads = options.nparallel > 0 ? options.nparallel : max_threads();
    check_finite_field(f.vn, ne * nlev, "prognostic.vn", threads);
    check_finite_field(f.w, nc * (nlev + 1), "prognostic.w", threads);
    check_finite_field(f.theta_v, nc * nlev, "prognostic.theta_v", threads);
    check_finite_field(f.exner, nc * nlev, "prognostic.exner", threads);
  }
}

template <class Real>
void Diffusion::Impl::run(DiffusionDiagnosticFields<Real>& d, DiffusionPrognosticFields<Real>& f,
                          double dtime, bool initial_run) {
  if (ranks) return run_on_ranks(d, f, dtime, initial_run);
  const std::int64_t nc = grid.num_cells, ne = grid.num_edges;
  const std::int32_t nlev = vertical.num_levels;
  check_run(d, f, dtime, nc, ne);
  RecordedCall call("diffusion", device, &timers);
  WorkModel work;
  work.points = static_cast<double>(ne * nlev + nc * nlev);
  work.bytes = bytes_per_run;
  work.working_set_bytes = working_set_bytes;
  work.flops = flops_per_run;
  work.precision = sizeof(Real) == 4 ? Precision::fp32 : Precision::fp64;
  call.set_work(work);
  if (!options.savepoint_dir.empty())
    write_savepoint("call-diffusion-init", d, f, dtime, initial_run);
  {
    auto t = Timers::region(&timers, "diffusion_run");
    run_kernel(d, f, dtime, initial_run);
  }
  if (!options.savepoint_dir.empty())
    write_savepoint("call-diffusion-exit", d, f, dtime, initial_run);
  ++calls;
}

template <class Real>
void Diffusion::Impl::run_kernel(DiffusionDiagnosticFields<Real>& d,
                                 DiffusionPrognosticFields<Real>& f, double dtime,
                                 bool initial_run) {
  auto* s = std::get_if<Storage<Real>>(&storage);
  kernels::RunFields<Real> fields{f, d, static_cast<Real>(dtime), initial_run};
  const Context ctx{device, &timers};
  if (options.layout == FieldLayout::LevelsContiguous)
    SCIPROXY_RUN_KERNEL(ctx, run, s->problem, fields,
                        std::integral_constant<FieldLayout, FieldLayout::LevelsContiguous>{});
  else
    SCIPROXY_RUN_KERNEL(ctx, run, s->problem, fields,
                        std::integral_constant<FieldLayout, FieldLayout::EntitiesContiguous>{});
}

// Under MPI, the rank's fields in its local numbering: the kernel run with the halo exchanges
// of ICON4Py's granule (halo_hook), then w, theta_v and exner exchanged (and vn waited for).
template <class Real>
void Diffusion::Impl::run_rank(DiffusionDiagnosticFields<Real>& ld,
                               DiffusionPrognosticFields<Real>& lp, double dtime,
                               bool initial_run) {
  const Ranks& r = *ranks;
  Storage<Real>& s = std::get<Storage<Real>>(storage);
  const std::int32_t nlev = vertical.num_levels;
  RecordedCall call("diffusion", device, &timers);
  WorkModel work;
  work.points = static_cast<double>(r.global_edges + r.global_cells) * nlev;
  work.bytes = bytes_per_run;
  work.working_set_bytes = working_set_bytes;
  work.flops = flops_per_run;
  work.precision = sizeof(Real) == 4 ? Precision::fp32 : Precision::fp64;
  call.set_work(work);
  auto t = Timers::region(&timers, "diffusion_run");
  s.problem.exchange_halo = &halo_hook<Real>;
  s.problem.exchange_context = this;
  s.local_prognostic = lp;
  run_kernel(ld, lp, dtime, initial_run);
  auto h = Timers::region(&timers, "halo_exchange");
  s.cells.start(r.comm, r.domain.cell_halo,
                {{lp.w, nlev + 1}, {lp.theta_v, nlev}, {lp.exner, nlev}}, grid.num_cells,
                options.layout, 2);
  s.vn.finish();
  s.cells.finish();
}

// Under MPI: with rank_local_fields the caller's fields are the rank's; otherwise the rank's
// fields are copied from the caller's global ones, run, and every rank's owned entries gathered
// into the caller's global fields on every rank.
template <class Real>
void Diffusion::Impl::run_on_ranks(DiffusionDiagnosticFields<Real>& d,
                                   DiffusionPrognosticFields<Real>& f, double dtime,
                                   bool initial_run) {
  Ranks& r = *ranks;
  if (options.rank_local_fields) {
    // A bad field on one rank fails every rank before any exchange.
    collective::on_every_rank(r.comm,
                              [&] { check_run(d, f, dtime, grid.num_cells, grid.num_edges); });
    run_rank(d, f, dtime, initial_run);
    ++calls;
    return;
  }
  // Every rank holds the same global fields, so the checks fail alike; on_every_rank makes sure.
  collective::on_every_rank(r.comm,
                            [&] { check_run(d, f, dtime, r.global_cells, r.global_edges); });
  Storage<Real>& s = std::get<Storage<Real>>(storage);
  const std::int32_t nlev = vertical.num_levels;
  const FieldLayout layout = options.layout;
  const std::int64_t nc = grid.num_cells, ne = grid.num_edges;
  const std::int64_t gc = r.global_cells, ge = r.global_edges;
  Real* x = s.local_fields.data();
  auto take = [&](std::int64_t n) {
    Real* q = x;
    x += n;
    return q;
  };
  DiffusionPrognosticFields<Real> lp;
  DiffusionDiagnosticFields<Real> ld;
  lp.vn = take(ne * nlev), lp.w = take(nc * (nlev + 1)), lp.theta_v = take(nc * nlev);
  lp.exner = take(nc * nlev);
  ld.hdef_ic = take(nc * (nlev + 1)), ld.div_ic = take(nc * (nlev + 1));
  ld.dwdx = take(nc * (nlev + 1)), ld.dwdy = take(nc * (nlev + 1));
  struct Pair {
    Real* global;
    Real* local;
    std::int32_t nk;
  };
  const Pair cell_fields[] = {{f.w, lp.w, nlev + 1},           {f.theta_v, lp.theta_v, nlev},
                              {f.exner, lp.exner, nlev},       {d.hdef_ic, ld.hdef_ic, nlev + 1},
                              {d.div_ic, ld.div_ic, nlev + 1}, {d.dwdx, ld.dwdx, nlev + 1},
                              {d.dwdy, ld.dwdy, nlev + 1}};
  const std::vector<std::int32_t>& cells = r.domain.cells.global;
  const std::vector<std::int32_t>& edges = r.domain.edges.global;
  for (std::int64_t i = 0; i < ne; ++i)
    for (std::int32_t k = 0; k < nlev; ++k)
      lp.vn[at(layout, ne, nlev, i, k)] = f.vn[at(layout, ge, nlev, edges[i], k)];
  for (const Pair& p : cell_fields)
    for (std::int64_t i = 0; i < nc; ++i)
      for (std::int32_t k = 0; k < p.nk; ++k)
        p.local[at(layout, nc, p.nk, i, k)] = p.global[at(layout, gc, p.nk, cells[i], k)];

  run_rank(ld, lp, dtime, initial_run);

  // Every rank's owned rows, rank after rank, on every rank; then into the global fields.
  auto t = Timers::region(&timers, "gather");
  const int rank = r.comm.rank();
  std::int64_t first_cell = 0, first_edge = 0;
  for (int q = 0; q < rank; ++q) first_cell += r.cell_counts[q], first_edge += r.edge_counts[q];
  const std::int64_t cell_row = 5 * (nlev + 1) + 2 * nlev;
  std::vector<Real> all_cells(gc * cell_row), all_edges(ge * nlev);
  Real* out = all_cells.data() + first_cell * cell_row;
  for (std::int64_t i = 0; i < r.domain.cells.num_owned(); ++i)
    for (const Pair& p : cell_fields)
      for (std::int32_t k = 0; k < p.nk; ++k) *out++ = p.local[at(layout, nc, p.nk, i, k)];
  out = all_edges.data() + first_edge * nlev;
  for (std::int64_t i = 0; i < r.domain.edges.num_owned(); ++i)
    for (std::int32_t k = 0; k < nlev; ++k) *out++ = lp.vn[at(layout, ne, nlev, i, k)];
  collective::allgather_rows<Real>(r.comm, all_cells, r.cell_counts, cell_row);
  collective::allgather_rows<Real>(r.comm, all_edges, r.edge_counts, nlev);
  const Real* in = all_cells.data();
  for (std::int32_t g : r.cells_by_rank)
    for (const Pair& p : cell_fields)
      for (std::int32_t k = 0; k < p.nk; ++k) p.global[at(layout, gc, p.nk, g, k)] = *in++;
  in = all_edges.data();
  for (std::int32_t g : r.edges_by_rank)
    for (std::int32_t k = 0; k < nlev; ++k) f.vn[at(layout, ge, nlev, g, k)] = *in++;
  ++calls;
}

// The exchanges inside a run (kernels::HaloPoint): u_vert and v_vert, z_nabla2_e waited for at
// once (the next stencil reads them), vn started (theta and exner do not read it).
template <class Real>
void Diffusion::Impl::halo_hook(void* context, int point) {
  Impl& m = *static_cast<Impl*>(context);
  const Ranks& r = *m.ranks;
  Storage<Real>& s = std::get<Storage<Real>>(m.storage);
  const kernels::Problem<Real>& p = s.problem;
  const FieldLayout layout = m.options.layout;
  auto t = Timers::region(&m.timers, "halo_exchange");
  switch (point) {
    case kernels::kHaloVn:
      s.vn.start(r.comm, r.domain.edge_halo, {{s.local_prognostic.vn, p.nlev}}, p.num_edges, layout,
                 1);
      return;
    case kernels::kHaloNabla2Edges:
      s.intermediate.start(r.comm, r.domain.edge_halo, {{p.z_nabla2_e, p.nlev}}, p.num_edges,
                           layout, 0);
      break;
    default:  // kHaloVertexWind, kHaloVertexNabla2
      s.intermediate.start(r.comm, r.domain.vertex_halo, {{p.u_vert, p.nlev}, {p.v_vert, p.nlev}},
                           p.num_vertices, layout, 0);
  }
  s.intermediate.finish();
}

namespace {

// Every input against the grid and the levels; selects the device.
void check_inputs(Diffusion::Impl& m, const Grid& grid, const DiffusionConfig& config,
                  const DiffusionVerticalGrid& vertical, const DiffusionMetricState& metrics,
                  const DiffusionInterpolationState& interpolation,
                  const DiffusionEdgeParams& edges, const DiffusionCellParams& cells,
                  const DiffusionOptions& options) {
  check_config(config);
  m.device = select_device(options.device);
  if (!options.savepoint_dir.empty()) {
    std::error_code ec;
    require(std::filesystem::is_directory(options.savepoint_dir, ec), "options.savepoint_dir",
            "an existing directory to write savepoints in", options.savepoint_dir);
    // The savepoints are written from the host: the cuda backend's fields may live on the GPU.
    require(m.device.backend != Backend::cuda, "options.savepoint_dir",
            "savepoints with a host backend (reference, cpu)", "the cuda backend");
  }
  require(options.nparallel >= 0, "options.nparallel", "0 (all threads) or a positive thread count",
          std::to_string(options.nparallel));
  const std::int64_t nc = grid.num_cells, ne = grid.num_edges, nv = grid.num_vertices;
  require(nc > 0 && ne > 0 && nv > 0, "grid", "a grid with cells, edges and vertices",
          fmt::format("{} cells, {} edges, {} vertices", nc, ne, nv));
  require_table(grid.c2e, nc, 3, grid.num_edges, "c2e", false);
  require_table(grid.c2e2c, nc, 3, grid.num_cells, "c2e2c", true);
  require_table(grid.c2e2co, nc, 4, grid.num_cells, "c2e2co", true);
  require_table(grid.e2c, ne, 2, grid.num_cells, "e2c", true);
  require_table(grid.e2c2v, ne, 4, grid.num_vertices, "e2c2v", true);
  require_table(grid.v2e, nv, 6, grid.num_edges, "v2e", true);
  const std::int32_t nlev = vertical.num_levels;
  require(nlev >= 2, "vertical_grid.num_levels", "at least 2 levels", std::to_string(nlev));
  require_size(vertical.vct_a, nlev + 1, "vertical_grid.vct_a", "num_levels + 1");
  for (int k = 0; k < nlev; ++k)
    require(vertical.vct_a[k] > vertical.vct_a[k + 1], "vertical_grid.vct_a",
            "interface heights decreasing from the model top",
            fmt::format("vct_a[{}] = {} <= vct_a[{}] = {}", k, vertical.vct_a[k], k + 1,
                        vertical.vct_a[k + 1]));
  require(vertical.end_index_of_damping_layer >= 0 && vertical.end_index_of_damping_layer < nlev,
          "vertical_grid.end_index_of_damping_layer", fmt::format("an index in [0, {})", nlev),
          std::to_string(vertical.end_index_of_damping_layer));
  require_size(metrics.theta_ref_mc, nc * nlev, "metric_state.theta_ref_mc", "(cells, levels)");
  require_size(metrics.wgtfac_c, nc * (nlev + 1), "metric_state.wgtfac_c", "(cells, levels + 1)");
  require_size(metrics.zd_intcoef, nc * 3 * nlev, "metric_state.zd_intcoef", "(cells, 3, levels)");
  require_size(metrics.zd_diffcoef, nc * nlev, "metric_state.zd_diffcoef", "(cells, levels)");
  require(static_cast<std::int64_t>(metrics.zd_vertoffset.size()) == nc * 3 * nlev,
          "metric_state.zd_vertoffset",
          fmt::format("(cells, 3, levels) = {} values", nc * 3 * nlev),
          count_text(metrics.zd_vertoffset.size()));
  // (On a rank: its owned cells, where the stencil runs; the whole grid was checked before.)
  if (config.apply_zdiffusion_t && config.apply_to_temperature)
    for (std::int64_t c = 0; c < grid.end_index(Dimension::Cell, Zone::Local); ++c)
      for (int k = 0; k < nlev; ++k) {
        if (metrics.zd_diffcoef[c * nlev + k] == 0.0) continue;
        for (int j = 0; j < 3; ++j) {
          const std::int32_t target = k + metrics.zd_vertoffset[(c * 3 + j) * nlev + k];
          if (target < 0 || target + 1 >= nlev || grid.c2e2c[3 * c + j] < 0)
            throw_invalid_argument(
                "metric_state.zd_vertoffset",
                "levels k + offset and k + offset + 1 inside the column, at a neighbour that "
                "exists",
                fmt::format("k + offset = {} at cell {}, level {}, neighbour {}", target, c, k, j));
        }
      }
  require_size(interpolation.e_bln_c_s, nc * 3, "interpolation_state.e_bln_c_s", "(cells, 3)");
  require_size(interpolation.geofac_div, nc * 3, "interpolation_state.geofac_div", "(cells, 3)");
  require_size(interpolation.rbf_coeff_1, nv * 6, "interpolation_state.rbf_coeff_1",
               "(vertices, 6)");
  require_size(interpolation.rbf_coeff_2, nv * 6, "interpolation_state.rbf_coeff_2",
               "(vertices, 6)");
  require_size(interpolation.geofac_n2s, nc * 4, "interpolation_state.geofac_n2s", "(cells, 4)");
  require_size(interpolation.geofac_grg_x, nc * 4, "interpolation_state.geofac_grg_x",
               "(cells, 4)");
  require_size(interpolation.geofac_grg_y, nc * 4, "interpolation_state.geofac_grg_y",
               "(cells, 4)");
  require_size(interpolation.nudgecoeff_e, ne, "interpolation_state.nudgecoeff_e", "(edges)");
  require_size(edges.tangent_orientation, ne, "edge_params.tangent_orientation", "(edges)");
  require_size(edges.inverse_primal_edge_lengths, ne, "edge_params.inverse_primal_edge_lengths",
               "(edges)");
  require_size(edges.inverse_vertex_vertex_lengths, ne, "edge_params.inverse_vertex_vertex_lengths",
               "(edges)");
  require_size(edges.inverse_dual_edge_lengths, ne, "edge_params.inverse_dual_edge_lengths",
               "(edges)");
  require_size(edges.edge_areas, ne, "edge_params.edge_areas", "(edges)");
  require_size(edges.primal_normal_vert_x, ne * 4, "edge_params.primal_normal_vert_x",
               "(edges, 4)");
  require_size(edges.primal_normal_vert_y, ne * 4, "edge_params.primal_normal_vert_y",
               "(edges, 4)");
  require_size(edges.dual_normal_vert_x, ne * 4, "edge_params.dual_normal_vert_x", "(edges, 4)");
  require_size(edges.dual_normal_vert_y, ne * 4, "edge_params.dual_normal_vert_y", "(edges, 4)");
  require_size(cells.area, nc, "cell_params.area", "(cells)");
  // Every vertex of a diamond the stencils read must exist in the edge range they run over.
  const std::int32_t smag_begin = grid.start_index(Dimension::Edge, Zone::LateralBoundaryLevel5);
  const std::int32_t smag_end = grid.end_index(Dimension::Edge, Zone::HaloLevel2);
  for (std::int64_t e = smag_begin; e < smag_end; ++e)
    for (int i = 0; i < 4; ++i)
      if (grid.e2c2v[4 * e + i] < 0)
        throw_invalid_argument(
            "grid.e2c2v", "four diamond vertices at every edge the stencils update",
            fmt::format("a missing vertex at edge {} (refin_ctrl {})", e,
                        grid.edge_refin_ctrl.empty() ? 0 : grid.edge_refin_ctrl[e]));
  // The temperature stencil differences theta_v across every edge of the cells it updates
  // (E2C without a check for missing cells): both cells must exist there.
  if (config.apply_to_temperature)
    for (std::int64_t c = grid.start_index(Dimension::Cell, Zone::Nudging);
         c < grid.end_index(Dimension::Cell, Zone::Local); ++c)
      for (int j = 0; j < 3; ++j) {
        const std::int32_t e = grid.c2e[3 * c + j];
        if (grid.e2c[2 * e] < 0 || grid.e2c[2 * e + 1] < 0)
          throw_invalid_argument(
              "grid.e2c", "two cells at every edge of the cells the temperature diffusion updates",
              fmt::format("a missing cell at edge {} of cell {}", e, c));
      }
  const double field_bytes =
      (options.single_precision ? 4.0 : 8.0) *
      (16.0 * nc * (nlev + 1) + 4.0 * ne * nlev + 2.0 * nv * nlev + 30.0 * ne);
  require_memory(field_bytes, "grid, vertical_grid.num_levels",
                 fmt::format("{} cells x {} levels", nc, nlev));
}

void build(Diffusion::Impl& m, const Grid& grid, const DiffusionConfig& config,
           const DiffusionVerticalGrid& vertical, const DiffusionMetricState& metrics,
           const DiffusionInterpolationState& interpolation, const DiffusionEdgeParams& edges,
           const DiffusionCellParams& cells, const DiffusionOptions& options) {
  m.grid = grid;
  m.config = config;
  m.vertical = vertical;
  m.options = options;
  if (options.single_precision)
    m.build<float>(metrics, interpolation, edges, cells);
  else
    m.build<double>(metrics, interpolation, edges, cells);
}

// Rows of a per-entity input (width values each) for a rank's entities.
template <class T>
std::vector<T> rows_for(const std::vector<T>& x, const LocalEntities& local, std::int64_t width) {
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(local.size() * width));
  for (std::int32_t g : local.global)
    out.insert(out.end(), x.begin() + g * width, x.begin() + (g + 1) * width);
  return out;
}

// ICON's form (DiffusionOptions::local_decomposition): the caller's local grid and inputs as
// they come; the exchange pattern by asking the owners of the halo entries.
void init_on_rank_grid(Diffusion::Impl& m, const Grid& grid, const DiffusionConfig& config,
                       const DiffusionVerticalGrid& vertical, const DiffusionMetricState& metrics,
                       const DiffusionInterpolationState& interpolation,
                       const DiffusionEdgeParams& edges, const DiffusionCellParams& cells,
                       const DiffusionOptions& options) {
  namespace co = collective;
  const Communicator& comm = options.comm;
  const DiffusionOptions::LocalDecomposition& dec = *options.local_decomposition;
  const int rank = comm.rank();
  co::on_every_rank(comm, [&] {
    require(options.rank_local_fields, "options.rank_local_fields",
            "true with options.local_decomposition (the fields are the rank's too)", "false");
    check_inputs(m, grid, config, vertical, metrics, interpolation, edges, cells, options);
    if (comm.distributed()) {
      require(options.savepoint_dir.empty(), "options.savepoint_dir",
              "no savepoints under a communicator of several ranks", options.savepoint_dir);
      require(m.device.backend != Backend::cuda, "options.device",
              "a host backend (reference, cpu) under a communicator of several ranks", "cuda");
      require(!grid.limited_area, "grid", "a global grid's part under a communicator",
              "a limited-area grid");
    }
    const struct {
      const std::vector<std::int32_t>& values;
      std::int32_t n;
      const char* name;
    } arrays[] = {
        {dec.cell_global_index, grid.num_cells, "options.local_decomposition.cell_global_index"},
        {dec.edge_global_index, grid.num_edges, "options.local_decomposition.edge_global_index"},
        {dec.vertex_global_index, grid.num_vertices,
         "options.local_decomposition.vertex_global_index"},
        {dec.cell_owner, grid.num_cells, "options.local_decomposition.cell_owner"},
        {dec.edge_owner, grid.num_edges, "options.local_decomposition.edge_owner"},
        {dec.vertex_owner, grid.num_vertices, "options.local_decomposition.vertex_owner"}};
    for (const auto& a : arrays)
      require(static_cast<std::int64_t>(a.values.size()) == a.n, a.name,
              fmt::format("{} values (one per local entity)", a.n), count_text(a.values.size()));
    // The stencils update the zone LOCAL: it must be the owned entities, first.
    const struct {
      const std::vector<std::int32_t>& owner;
      Dimension dim;
      const char* name;
    } owners[] = {
        {dec.cell_owner, Dimension::Cell, "options.local_decomposition.cell_owner"},
        {dec.edge_owner, Dimension::Edge, "options.local_decomposition.edge_owner"},
        {dec.vertex_owner, Dimension::Vertex, "options.local_decomposition.vertex_owner"}};
    for (const auto& o : owners) {
      const std::int32_t local_end = grid.end_index(o.dim, Zone::Local);
      for (std::size_t i = 0; i < o.owner.size(); ++i)
        if ((o.owner[i] == rank) != (static_cast<std::int32_t>(i) < local_end))
          throw_invalid_argument(
              o.name,
              fmt::format("this rank ({}) owning exactly the entities of the zone LOCAL, [0, {})",
                          rank, local_end),
              fmt::format("owner {} at local entry {}", o.owner[i], i));
    }
  });
  auto ranks = std::make_unique<Diffusion::Impl::Ranks>();
  ranks->comm = comm;
  RankDomain& d = ranks->domain;
  d.rank = rank;
  d.num_ranks = comm.size();
  // Halo levels are the caller's; here 0 (owned) or 1 (any halo).
  auto entities = [&](const std::vector<std::int32_t>& global,
                      const std::vector<std::int32_t>& owner) {
    LocalEntities e;
    e.global = global;
    e.owner = owner;
    std::int32_t owned = 0;
    for (std::int32_t r : owner) {
      e.halo_level.push_back(r == rank ? 0 : 1);
      owned += r == rank;
    }
    const auto n = static_cast<std::int32_t>(owner.size());
    e.level_begin = {0, owned, n, n, n};
    return e;
  };
  d.cells = entities(dec.cell_global_index, dec.cell_owner);
  d.edges = entities(dec.edge_global_index, dec.edge_owner);
  d.vertices = entities(dec.vertex_global_index, dec.vertex_owner);
  d.cell_halo = halo_pattern_by_request(comm, dec.cell_global_index, dec.cell_owner,
                                        "options.local_decomposition.cell_owner");
  d.edge_halo = halo_pattern_by_request(comm, dec.edge_global_index, dec.edge_owner,
                                        "options.local_decomposition.edge_owner");
  d.vertex_halo = halo_pattern_by_request(comm, dec.vertex_global_index, dec.vertex_owner,
                                          "options.local_decomposition.vertex_owner");
  std::int64_t owned[3] = {d.cells.num_owned(), d.edges.num_owned(), d.vertices.num_owned()};
  co::allreduce_sum<std::int64_t>(comm, std::span<std::int64_t>(owned, 3));
  ranks->global_cells = static_cast<std::int32_t>(owned[0]);
  ranks->global_edges = static_cast<std::int32_t>(owned[1]);
  co::on_every_rank(comm, [&] {
    build(m, grid, config, vertical, metrics, interpolation, edges, cells, options);
  });
  m.ranks = std::move(ranks);
  m.set_work_model(static_cast<double>(owned[0]), static_cast<double>(owned[1]),
                   static_cast<double>(owned[2]), options.single_precision ? 4 : 8);
}

// The replicated form: every rank's global grid and inputs, each rank's rows of them on its
// part of the partition (METIS's, or the caller's cell_owner).
void init_on_partition(Diffusion::Impl& m, const Grid& grid, const DiffusionConfig& config,
                       const DiffusionVerticalGrid& vertical, const DiffusionMetricState& metrics,
                       const DiffusionInterpolationState& interpolation,
                       const DiffusionEdgeParams& edges, const DiffusionCellParams& cells,
                       const DiffusionOptions& options) {
  const Communicator& comm = options.comm;
  // Ranks that disagree on what they pass fail alike (before anything reads the arrays).
  namespace co = collective;
  const std::int32_t nlev = vertical.num_levels;
  const co::Field same[] = {
      {"grid.num_cells", grid.num_cells},
      {"grid.num_edges", grid.num_edges},
      {"grid.num_vertices", grid.num_vertices},
      {"grid.c2e", co::hash_of(std::span<const std::int32_t>(grid.c2e)), true},
      {"grid.c2e2c", co::hash_of(std::span<const std::int32_t>(grid.c2e2c)), true},
      {"grid.e2c2v", co::hash_of(std::span<const std::int32_t>(grid.e2c2v)), true},
      {"grid.v2e", co::hash_of(std::span<const std::int32_t>(grid.v2e)), true},
      {"vertical_grid.num_levels", nlev},
      {"options.layout", static_cast<std::int64_t>(options.layout)},
      {"options.single_precision", options.single_precision},
      {"options.rank_local_fields", options.rank_local_fields},
      {"options.cell_owner", co::hash_of(std::span<const std::int32_t>(options.cell_owner)), true}};
  co::require_same(comm, same, "diffusion init");
  co::on_every_rank(comm, [&] {
    require(options.savepoint_dir.empty(), "options.savepoint_dir",
            "no savepoints under a communicator of several ranks", options.savepoint_dir);
    if (!options.cell_owner.empty()) check_cell_owner(grid, options.cell_owner, comm.size());
    check_inputs(m, grid, config, vertical, metrics, interpolation, edges, cells, options);
    require(m.device.backend != Backend::cuda, "options.device",
            "a host backend (reference, cpu) under a communicator of several ranks", "cuda");
    require(!grid.limited_area, "grid",
            "a global grid under a communicator of several ranks (limited-area grids run on "
            "one)",
            "a limited-area grid");
  });
  // METIS on rank 0, its partition sent to every rank.
  std::vector<std::int32_t> owner = options.cell_owner;
  if (owner.empty()) {
    std::string bytes;
    co::on_every_rank(comm, [&] {
      if (comm.rank() != 0) return;
      const std::vector<std::int32_t> parts = partition_cells(grid, comm.size());
      bytes.assign(reinterpret_cast<const char*>(parts.data()), parts.size() * sizeof parts[0]);
    });
    co::broadcast(comm, bytes, 0);
    owner.resize(grid.num_cells);
    std::memcpy(owner.data(), bytes.data(), owner.size() * sizeof owner[0]);
  }
  co::on_every_rank(comm, [&] {
    check_cell_owner(grid, owner, comm.size());
    auto ranks = std::make_unique<Diffusion::Impl::Ranks>();
    ranks->comm = comm;
    ranks->domain = rank_domain(grid, owner, comm.size(), comm.rank());
    ranks->global_cells = grid.num_cells;
    ranks->global_edges = grid.num_edges;
    OwnedByRank cells_by_rank = owned_by_rank(grid, owner, comm.size(), Dimension::Cell);
    OwnedByRank edges_by_rank = owned_by_rank(grid, owner, comm.size(), Dimension::Edge);
    ranks->cells_by_rank = std::move(cells_by_rank.order);
    ranks->cell_counts = std::move(cells_by_rank.counts);
    ranks->edges_by_rank = std::move(edges_by_rank.order);
    ranks->edge_counts = std::move(edges_by_rank.counts);

    // The rank's inputs: the global ones' rows of its local entities.
    const RankDomain& dom = ranks->domain;
    const LocalEntities &C = dom.cells, &E = dom.edges, &V = dom.vertices;
    DiffusionMetricState lm;
    lm.theta_ref_mc = rows_for(metrics.theta_ref_mc, C, nlev);
    lm.wgtfac_c = rows_for(metrics.wgtfac_c, C, nlev + 1);
    lm.zd_intcoef = rows_for(metrics.zd_intcoef, C, 3 * nlev);
    lm.zd_diffcoef = rows_for(metrics.zd_diffcoef, C, nlev);
    lm.zd_vertoffset = rows_for(metrics.zd_vertoffset, C, 3 * nlev);
    DiffusionInterpolationState li;
    li.e_bln_c_s = rows_for(interpolation.e_bln_c_s, C, 3);
    li.geofac_div = rows_for(interpolation.geofac_div, C, 3);
    li.rbf_coeff_1 = rows_for(interpolation.rbf_coeff_1, V, 6);
    li.rbf_coeff_2 = rows_for(interpolation.rbf_coeff_2, V, 6);
    li.geofac_n2s = rows_for(interpolation.geofac_n2s, C, 4);
    li.geofac_grg_x = rows_for(interpolation.geofac_grg_x, C, 4);
    li.geofac_grg_y = rows_for(interpolation.geofac_grg_y, C, 4);
    li.nudgecoeff_e = rows_for(interpolation.nudgecoeff_e, E, 1);
    DiffusionEdgeParams le;
    le.tangent_orientation = rows_for(edges.tangent_orientation, E, 1);
    le.inverse_primal_edge_lengths = rows_for(edges.inverse_primal_edge_lengths, E, 1);
    le.inverse_vertex_vertex_lengths = rows_for(edges.inverse_vertex_vertex_lengths, E, 1);
    le.inverse_dual_edge_lengths = rows_for(edges.inverse_dual_edge_lengths, E, 1);
    le.edge_areas = rows_for(edges.edge_areas, E, 1);
    le.primal_normal_vert_x = rows_for(edges.primal_normal_vert_x, E, 4);
    le.primal_normal_vert_y = rows_for(edges.primal_normal_vert_y, E, 4);
    le.dual_normal_vert_x = rows_for(edges.dual_normal_vert_x, E, 4);
    le.dual_normal_vert_y = rows_for(edges.dual_normal_vert_y, E, 4);
    DiffusionCellParams lc;
    lc.area = rows_for(cells.area, C, 1);
    lc.mean_cell_area = cells.mean_cell_area;  // the whole grid's, as on one rank
    check_inputs(m, dom.grid, config, vertical, lm, li, le, lc, options);
    build(m, dom.grid, config, vertical, lm, li, le, lc, options);
    const std::int64_t nc = dom.grid.num_cells, ne = dom.grid.num_edges;
    const std::int64_t local = ne * nlev + 2 * nc * nlev + 5 * nc * (nlev + 1);
    if (!options.rank_local_fields)
      std::visit([&](auto& st) { st.local_fields.assign(local, 0); }, m.storage);
    m.ranks = std::move(ranks);
    m.set_work_model(grid.num_cells, grid.num_edges, grid.num_vertices,
                     options.single_precision ? 4 : 8);
  });
}

}  // namespace

Diffusion::Diffusion(const Grid& grid, const DiffusionConfig& config,
                     const DiffusionVerticalGrid& vertical, const DiffusionMetricState& metrics,
                     const DiffusionInterpolationState& interpolation,
                     const DiffusionEdgeParams& edges, const DiffusionCellParams& cells,
                     const DiffusionOptions& options)
    : impl_(std::make_unique<Impl>()) {
  const auto start = std::chrono::steady_clock::now();
  Impl& m = *impl_;
  const Communicator& comm = options.comm;
  if (comm.distributed()) {
    // Which form each rank takes decides which collective calls follow: agree on it first.
    const collective::Field form[] = {
        {"options.local_decomposition", options.local_decomposition.has_value()},
        {"options.rank_local_fields", options.rank_local_fields}};
    collective::require_same(comm, form, "diffusion init");
  }
  if (options.local_decomposition) {
    init_on_rank_grid(m, grid, config, vertical, metrics, interpolation, edges, cells, options);
  } else if (!comm.distributed()) {
    if (!options.cell_owner.empty()) check_cell_owner(grid, options.cell_owner, 1);
    check_inputs(m, grid, config, vertical, metrics, interpolation, edges, cells, options);
    build(m, grid, config, vertical, metrics, interpolation, edges, cells, options);
  } else {
    init_on_partition(m, grid, config, vertical, metrics, interpolation, edges, cells, options);
  }
  m.init_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.timers.record("init", m.init_seconds);
}

Diffusion::~Diffusion() = default;
Diffusion::Diffusion(Diffusion&&) noexcept = default;
Diffusion& Diffusion::operator=(Diffusion&&) noexcept = default;

void Diffusion::run(DiffusionDiagnosticFields<double>& diagnostic,
                    DiffusionPrognosticFields<double>& prognostic, double dtime, bool initial_run) {
  impl_->run(diagnostic, prognostic, dtime, initial_run);
}
void Diffusion::run(DiffusionDiagnosticFields<float>& diagnostic,
                    DiffusionPrognosticFields<float>& prognostic, double dtime, bool initial_run) {
  impl_->run(diagnostic, prognostic, dtime, initial_run);
}

std::vector<std::int32_t> Diffusion::global_index(Dimension dim) const {
  if (!impl_->ranks) {
    std::vector<std::int32_t> all(impl_->grid.size(dim));
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int32_t>(i);
    return all;
  }
  const RankDomain& d = impl_->ranks->domain;
  return (dim == Dimension::Cell ? d.cells : dim == Dimension::Edge ? d.edges : d.vertices).global;
}
std::vector<std::int8_t> Diffusion::halo_level(Dimension dim) const {
  if (!impl_->ranks) return std::vector<std::int8_t>(impl_->grid.size(dim), 0);
  const RankDomain& d = impl_->ranks->domain;
  return (dim == Dimension::Cell   ? d.cells
          : dim == Dimension::Edge ? d.edges
                                   : d.vertices)
      .halo_level;
}

Timers& Diffusion::timers() {
  return impl_->timers;
}
std::string Diffusion::device() const {
  return impl_->device.name();
}
std::int32_t Diffusion::num_levels() const {
  return impl_->vertical.num_levels;
}
const Grid& Diffusion::grid() const {
  return impl_->grid;
}
double Diffusion::bytes_per_run() const {
  return impl_->bytes_per_run;
}
double Diffusion::working_set_bytes() const {
  return impl_->working_set_bytes;
}
double Diffusion::flops_per_run() const {
  return impl_->flops_per_run;
}
double Diffusion::init_seconds() const {
  return impl_->init_seconds;
}

}  // namespace sciproxy::diffusion
