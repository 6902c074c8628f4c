// The vertical grid and the metric fields of ICON's horizontal diffusion (declarations and
// conventions: include/sciproxy/diffusion.hpp). Equations as ICON4Py 0.4.1 computes them
// (C2SM/icon4py, model/common/src/icon4py/model/common/: grid/vertical.py,
// topography/smoothing.py, interpolation/interpolation_fields.py, metrics/metrics_factory.py,
// metric_fields.py, reference_atmosphere.py, compute_weight_factors.py,
// compute_diffusion_metrics.py; they follow ICON's mo_init_vgrid.f90 and mo_vertical_grid.f90).
// N = num_levels; interfaces k = 0..N from the top, full levels k = 0..N-1.
//
// vct_a, the interface heights over flat ground (_compute_vct_a_and_vct_b):
//   lowest_layer_thickness <= 0.01:  vct_a[k] = H (N - k) / N                (uniform layers)
//   otherwise, with s = stretch_factor, H = model_top_height, dz_min = lowest_layer_thickness:
//     vct_a[k] = H (2/pi arccos(k^s / N^s))^d,  d = ln(dz_min / H) / ln(2/pi arccos((N-1)^s / N^s))
//     so that vct_a[0] = H, vct_a[N] = 0 and vct_a[N-1] = dz_min. If
//     2 dz_min < m < htop_thcknlimit / 2 (m = maximal_layer_thickness), layers thicker than m
//     below htop_thcknlimit are cut to m and the layers above are stretched by
//     a = (H - z_kt - kt m) / (Z - z_kt - kt m) so that the top stays at H (kt the lowest
//     unmodified interface, Z the top after the cut), then smoothed (ICON4Py's docstring).
//   vct_b[k] = exp(-vct_a[k] / 5000).
// Indices (VerticalGrid, zero-based interfaces):
//   end_index_of_damping_layer = (number of k with vct_a[k] >= damp_height) - 1, 0 if
//     damp_height > vct_a[0];  nflatlev = max{k : vct_a[k] >= flat_height}, 0 if flat_height >
//     vct_a[0];  kstart_moist = min{k : (vct_a[k] + vct_a[k+1]) / 2 < htop_moist_proc}.
// Topography smoothing (smooth_topography), 25 explicit steps of
//   h <- h + 0.125 A_c nabla2(h),  nabla2(h)_c = sum_i geofac_n2s[c][i] h[C2E2CO[c][i]].
// SLEVE coordinate (compute_vertical_coordinate), h_s the smoothed topography, h the topography:
//   z_ifc[c][k] = vct_a[k]                                  k <= nflatlev
//   z_ifc[c][k] = vct_a[k] + h_s f_1(vct_a[k]) + (h - h_s) f_2(vct_a[k])   nflatlev < k < N
//   z_ifc[c][N] = h,   f_i(z) = sinh((H/s_i)^n - (z/s_i)^n) / sinh((H/s_i)^n)   (decay scales s_i,
//   exponent n); then, from the ground up, every layer is kept at least dz_lim(k) thick, with
//   dz_lim from the nominal thickness dvct = vct_a[k] - vct_a[k+1] (t1, t2 = 100, 500 m;
//   r1, r2 = 1/3, 1/2):  r1 dvct if dvct < t1;  (r1 q + r2 (1 - q)) dvct, q = ((t2 - dvct) /
//   (t2 - t1))^2, if dvct < t2;  r2 t2 (dvct / t2)^(1/3) otherwise;  at least min(50, dz_min).
//   Columns where the limiter acted (at kt, 3 <= kt <= N - 3) get the two layers above kt
//   re-spaced with the ratio f = (dz(kt-3) / dz(kt+1))^(1/4); ICON4Py refuses the grid (model
//   top too low) if the limiter reaches interface 2 and N > 6, and refuses a topography that
//   moves interface max(0, nflatlev - 1).
// Heights on full levels and the interpolation weight to interfaces:
//   z_mc[c][k] = (z_ifc[c][k] + z_ifc[c][k+1]) / 2
//   wgtfac_c[c][k] = (z_ifc[k-1] - z_ifc[k]) / (z_ifc[k-1] - z_ifc[k+1])   0 < k < N
//   wgtfac_c[c][0] = (z_ifc[1] - z_ifc[0]) / (z_ifc[2] - z_ifc[0])
//   wgtfac_c[c][N] = (z_ifc[N-1] - z_ifc[N]) / (z_ifc[N-2] - z_ifc[N])
// Reference atmosphere (compute_reference_atmosphere_cell_fields) at z = z_mc, with
//   p0ref 100000 Pa, p0sl_bg 101325 Pa, t0sl_bg 288.15 K, del_t_bg 75 K, h_scal_bg 10000 m,
//   grav 9.80665, rd 287.04, cpd 1004.64, D = t0sl_bg - del_t_bg:
//   p = p0sl_bg exp(-grav / rd h_scal_bg / D ln((exp(z / h_scal_bg) D + del_t_bg) / t0sl_bg))
//   T = D + del_t_bg exp(-z / h_scal_bg),  exner_ref_mc = (p / p0ref)^(rd / cpd),
//   rho_ref_mc = p / (rd T),  theta_ref_mc = T / exner_ref_mc.
// Slopes (compute_ddxn_z_half_e, compute_maxslp_maxhgtd, compute_weighted_cell_neighbor_sum):
//   ddxn_z_half_e[e][k] = (z_ifc[E2C[e][1]][k] - z_ifc[E2C[e][0]][k]) / l'_e  (l' dual length),
//   ddxn_z_full = its average over interfaces k, k+1;
//   maxslp[c][k] = max_{e in C2E} |ddxn_z_full|,  maxhgtd[c][k] = max_{e in C2E} |ddxn_z_full l'_e|
//   maxslp_avg[c][k] = sum_i c_bln_avg[c][i] maxslp[C2E2CO[c][i]][k]  (likewise maxhgtd_avg)
// c_bln_avg (compute_mass_conserving_bilinear_cell_average_weight): central weight w = 0.5; the
//   neighbour weights make sum w_i = 1 and the weighted (rotated lat, lon) offsets vanish
//   (_weighting_factors with wgt_loc = w); then 1000 relaxation sweeps towards mass conservation
//   sum_i c_bln_avg[n_i][j_i] A_{n_i} = A_c (n_i = C2E2CO[c][i], j_i c's place among n_i's
//   C2E2CO): r_c = that sum / A_c - 1; c_bln_avg[c][i] -= 0.46 r_{n_i}; each row then shifted
//   by 1/4 of (its sum - 1); the central weight clamped to w +- 0.003; the last sweep instead
//   subtracts r_c from the central weight.
// Truly horizontal temperature diffusion (compute_diffusion_metrics):
//   max_nbhgt[c] = max_{n in C2E2C} z_mc[n][N-1];  cond[c][k] = maxslp_avg >= thslp_zdiffu or
//   maxhgtd_avg >= thhgtd_zdiffu;  kstart[c] = the first k with cond (0 if none);
//   kend[c] = 1 + the last k with z_mc[c][k] >= max_nbhgt[c], if cond[c][N-1] (else 0);
//   kstart = N if kstart > kend; the cell takes part if kend > kstart (and it lies at or after
//   the start of the nudging zone); on its levels kstart <= k < kend (mask_hdiff):
//   zd_diffcoef = min(0.002, max(sqrt(max(0, maxslp_avg - thslp_zdiffu)) / 250,
//                                2e-4 sqrt(max(0, maxhgtd_avg - thhgtd_zdiffu))))
//   and for each neighbour n = C2E2C[c][i]: j = (the number of levels l with z_mc[n][l] >=
//   z_mc[c][k]) - 1 clipped to [0, N-2] (ICON4Py's searchsorted over all participating cells),
//   zd_vertoffset = j - k,  zd_intcoef = (z_mc[c][k] - z_mc[n][j+1]) / (z_mc[n][j] - z_mc[n][j+1]).
//   Elsewhere all three are 0.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "diffusion/geometry.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion {

namespace {

constexpr double kPi = 3.141592653589793;

// ICON4Py's constants.py.
constexpr double kP0ref = 100000.0;   // REFERENCE_PRESSURE
constexpr double kP0slBg = 101325.0;  // SEA_LEVEL_PRESSURE
constexpr double kT0slBg = 288.15;    // SEA_LEVEL_TEMPERATURE
constexpr double kDelTBg = 75.0;      // DELTA_TEMPERATURE
constexpr double kHScalBg = 10000.0;  // HEIGHT_SCALE_FOR_REFERENCE_ATMOSPHERE
constexpr double kGrav = 9.80665;
constexpr double kRd = 287.04;
constexpr double kCpd = 1004.64;

constexpr int kTopographySmoothingSteps = 25;  // smooth_topography's num_iterations
constexpr int kMassConservationSweeps = 1000;  // _force_mass_conservation_to_c_bln_avg's niter

std::string str(double v) {
  return fmt::format("{}", v);
}

// What vct_a's formula needs of the configuration.
void check_vct_a_config(const VerticalGridConfig& c) {
  if (c.lowest_layer_thickness > 0.01) {
    require(c.num_levels >= 2, "config.num_levels",
            "at least 2 levels for the stretched coordinate (lowest_layer_thickness > 0.01)",
            str(c.num_levels));
    require(c.lowest_layer_thickness < c.model_top_height, "config.lowest_layer_thickness",
            fmt::format("a thickness below model_top_height ({})", c.model_top_height),
            str(c.lowest_layer_thickness));
    require(std::isfinite(c.stretch_factor) && c.stretch_factor > 0, "config.stretch_factor",
            "a positive, finite factor", str(c.stretch_factor));
    require(std::isfinite(c.maximal_layer_thickness), "config.maximal_layer_thickness",
            "a finite thickness", str(c.maximal_layer_thickness));
    require(std::isfinite(c.top_height_limit_for_maximal_layer_thickness),
            "config.top_height_limit_for_maximal_layer_thickness", "a finite height",
            str(c.top_height_limit_for_maximal_layer_thickness));
  }
}

// What every vertical grid needs of the configuration.
void check_config(const VerticalGridConfig& c) {
  require(c.num_levels >= 1, "config.num_levels", "at least 1 level", str(c.num_levels));
  require(std::isfinite(c.model_top_height) && c.model_top_height > 0, "config.model_top_height",
          "a positive, finite height", str(c.model_top_height));
  require(std::isfinite(c.lowest_layer_thickness), "config.lowest_layer_thickness",
          "a finite thickness", str(c.lowest_layer_thickness));
  require(std::isfinite(c.rayleigh_damping_height) && c.rayleigh_damping_height >= 0,
          "config.rayleigh_damping_height", "a finite height >= 0", str(c.rayleigh_damping_height));
  require(std::isfinite(c.flat_height) && c.flat_height >= 0, "config.flat_height",
          "a finite height >= 0", str(c.flat_height));
  require(std::isfinite(c.htop_moist_proc), "config.htop_moist_proc", "a finite height",
          str(c.htop_moist_proc));
  require(std::isfinite(c.SLEVE_decay_scale_1) && c.SLEVE_decay_scale_1 > 0,
          "config.SLEVE_decay_scale_1", "a positive, finite scale", str(c.SLEVE_decay_scale_1));
  require(std::isfinite(c.SLEVE_decay_scale_2) && c.SLEVE_decay_scale_2 > 0,
          "config.SLEVE_decay_scale_2", "a positive, finite scale", str(c.SLEVE_decay_scale_2));
  require(std::isfinite(c.SLEVE_decay_exponent) && c.SLEVE_decay_exponent > 0,
          "config.SLEVE_decay_exponent", "a positive, finite exponent",
          str(c.SLEVE_decay_exponent));
  require(c.SLEVE_minimum_layer_thickness_1 < c.SLEVE_minimum_layer_thickness_2,
          "config.SLEVE_minimum_layer_thickness_1",
          fmt::format("a thickness below SLEVE_minimum_layer_thickness_2 ({})",
                      c.SLEVE_minimum_layer_thickness_2),
          str(c.SLEVE_minimum_layer_thickness_1));
}

// The cut of layers thicker than maximal_layer_thickness below its height limit, the stretching
// above and its smoothing (the middle part of ICON4Py's _compute_vct_a_and_vct_b), in place.
void limit_maximal_layer_thickness(const VerticalGridConfig& c, std::vector<double>& vct_a) {
  const int n = c.num_levels;
  const double m = c.maximal_layer_thickness;
  const double limit = c.top_height_limit_for_maximal_layer_thickness;
  std::vector<double> thickness(n);
  for (int k = 0; k < n; ++k) thickness[k] = vct_a[k] - vct_a[k + 1];
  int lowest_exceeding = -1;
  for (int k = 0; k < n; ++k)
    if (thickness[k] > m) lowest_exceeding = k;
  // ICON4Py fails here (the maximum of an empty set): no layer to cut.
  require(lowest_exceeding >= 0, "config.maximal_layer_thickness",
          "a thickness that some layer of the stretched coordinate exceeds", str(m));

  std::vector<double> modified(n + 1, 0.0);
  int lowest_unmodified = 0, shifted = 0;
  for (int k = n - 1; k >= 0; --k) {
    if (modified[k + 1] < limit) {
      modified[k] = modified[k + 1] + std::min(m, thickness[k]);
    } else {
      if (lowest_unmodified == 0) {
        lowest_unmodified = k + 1;
        shifted = std::max(0, lowest_exceeding - lowest_unmodified);
      }
      modified[k] = modified[k + 1] + thickness[k + shifted];
    }
  }
  const double stretch =
      shifted == 0 ? 1.0
                   : (vct_a[0] - modified[lowest_unmodified] - lowest_unmodified * m) /
                         (modified[0] - modified[lowest_unmodified] - lowest_unmodified * m);
  for (int k = n - 1; k >= 0; --k) {
    if (vct_a[k + 1] < limit)
      vct_a[k] = vct_a[k + 1] + std::min(m, thickness[k]);
    else
      vct_a[k] = vct_a[k + 1] + m + (thickness[k + shifted] - m) * stretch;
  }
  // Smooth the change of the stretching above the constant-thickness layers.
  if (stretch != 1.0 && lowest_exceeding < n - 4) {
    const int le = lowest_exceeding;
    for (int k = n - 1; k >= 0; --k) {
      if (modified[k + 1] < limit) {
        modified[k] = vct_a[k];
      } else {
        const double dz = std::min(1.025 * (vct_a[k] - vct_a[k + 1]),
                                   1.025 * (modified[le + 1] - modified[le + 2]) /
                                       (modified[le + 2] - modified[le + 3]) *
                                       (modified[k + 1] - modified[k + 2]));
        modified[k] = std::min(vct_a[k], modified[k + 1] + dz);
      }
    }
    if (modified[0] == vct_a[0]) {
      const int lu = lowest_unmodified;
      std::vector<double> smoothed = vct_a;
      smoothed[0] = modified[0];
      smoothed[1] = modified[1];
      for (int k = lu + 1; k < n; ++k) smoothed[k] = modified[k];
      for (int k = 2; k < lu + 1; ++k) smoothed[k] = 0.5 * (modified[k - 1] + modified[k + 1]);
      vct_a = std::move(smoothed);
    }
  }
}

std::vector<double> compute_vct_a(const VerticalGridConfig& c) {
  const int n = c.num_levels;
  std::vector<double> vct_a(n + 1);
  if (c.lowest_layer_thickness > 0.01) {
    const double s = c.stretch_factor;
    const double top_ratio = std::pow(static_cast<double>(n - 1), s) / std::pow(double(n), s);
    const double exponent = std::log(c.lowest_layer_thickness / c.model_top_height) /
                            std::log(2.0 / kPi * std::acos(top_ratio));
    const double n_pow_s = std::pow(static_cast<double>(n), s);
    for (int k = 0; k <= n; ++k)
      vct_a[k] = c.model_top_height *
                 std::pow(2.0 / kPi * std::acos(std::pow(double(k), s) / n_pow_s), exponent);
    if (2.0 * c.lowest_layer_thickness < c.maximal_layer_thickness &&
        c.maximal_layer_thickness < 0.5 * c.top_height_limit_for_maximal_layer_thickness)
      limit_maximal_layer_thickness(c, vct_a);
  } else {
    for (int k = 0; k <= n; ++k)
      vct_a[k] = c.model_top_height * (static_cast<double>(n) - k) / static_cast<double>(n);
  }
  return vct_a;
}

}  // namespace

VerticalGrid vertical_grid(const VerticalGridConfig& config, std::vector<double> vct_a,
                           std::vector<double> vct_b) {
  check_config(config);
  const auto size = static_cast<std::size_t>(config.num_levels) + 1;
  require(vct_a.size() == size, "vct_a", fmt::format("num_levels + 1 = {} values", size),
          str(static_cast<double>(vct_a.size())));
  require(vct_b.empty() || vct_b.size() == size, "vct_b",
          fmt::format("none or num_levels + 1 = {} values", size),
          str(static_cast<double>(vct_b.size())));
  for (double v : vct_a) require(std::isfinite(v), "vct_a", "finite heights", str(v));
  VerticalGrid g;
  g.config = config;
  const int n = config.num_levels;

  const double damp = config.rayleigh_damping_height;
  std::int32_t at_or_above_damping = 0;
  for (double v : vct_a) at_or_above_damping += v >= damp ? 1 : 0;
  // ICON4Py takes the position of the last such index (argmax over the index list).
  g.end_index_of_damping_layer = damp > vct_a[0] ? 0 : at_or_above_damping - 1;

  const double flat = config.flat_height;
  g.nflatlev = 0;
  if (!(flat > vct_a[0]))
    for (int k = 0; k <= n; ++k)
      if (vct_a[k] >= flat) g.nflatlev = k;

  g.kstart_moist = -1;
  for (int k = 0; k < n && g.kstart_moist < 0; ++k)
    if (0.5 * (vct_a[k] + vct_a[k + 1]) < config.htop_moist_proc) g.kstart_moist = k;
  require(g.kstart_moist >= 0, "config.htop_moist_proc",
          fmt::format("a height above the lowest full level ({})", 0.5 * (vct_a[n - 1] + vct_a[n])),
          str(config.htop_moist_proc));

  g.vct_a = std::move(vct_a);
  g.vct_b = std::move(vct_b);
  return g;
}

VerticalGrid vertical_grid(const VerticalGridConfig& config) {
  check_config(config);
  check_vct_a_config(config);
  std::vector<double> vct_a = compute_vct_a(config);
  std::vector<double> vct_b(vct_a.size());
  for (std::size_t k = 0; k < vct_a.size(); ++k) vct_b[k] = std::exp(-vct_a[k] / 5000.0);
  return vertical_grid(config, std::move(vct_a), std::move(vct_b));
}

std::vector<double> synthetic_orography(const Grid& grid, const GaussianMountain& mountain) {
  require(std::isfinite(mountain.mount_height) && mountain.mount_height >= 0,
          "mountain.mount_height", "a finite height >= 0", str(mountain.mount_height));
  require(std::isfinite(mountain.mount_width) && mountain.mount_width > 0, "mountain.mount_width",
          "a positive, finite width", str(mountain.mount_width));
  require(std::isfinite(mountain.mount_lat) && std::abs(mountain.mount_lat) <= 0.5 * kPi,
          "mountain.mount_lat", "a latitude in [-pi/2, pi/2]", str(mountain.mount_lat));
  require(std::isfinite(mountain.mount_lon), "mountain.mount_lon", "a finite longitude",
          str(mountain.mount_lon));
  const std::array<double, 3> centre = {std::cos(mountain.mount_lat) * std::cos(mountain.mount_lon),
                                        std::cos(mountain.mount_lat) * std::sin(mountain.mount_lon),
                                        std::sin(mountain.mount_lat)};
  std::vector<double> h(grid.num_cells);
  for (std::int32_t c = 0; c < grid.num_cells; ++c) {
    const double* p = &grid.cell_center[3 * static_cast<std::size_t>(c)];
    const double cx = p[1] * centre[2] - p[2] * centre[1];
    const double cy = p[2] * centre[0] - p[0] * centre[2];
    const double cz = p[0] * centre[1] - p[1] * centre[0];
    const double dot = p[0] * centre[0] + p[1] * centre[1] + p[2] * centre[2];
    const double distance = grid.radius * std::atan2(std::sqrt(cx * cx + cy * cy + cz * cz), dot);
    const double x = distance / mountain.mount_width;
    h[c] = mountain.mount_height * std::exp(-x * x);
  }
  return h;
}

namespace {

using Index = std::size_t;

// smooth_topography: explicit nabla2 steps (the Laplacian from all cells first, then the update).
std::vector<double> smooth_topography(const Grid& grid, const std::vector<double>& geofac_n2s,
                                      const std::vector<double>& topography) {
  const Index nc = static_cast<Index>(grid.num_cells);
  std::vector<double> smooth = topography, nabla2(nc);
  for (int step = 0; step < kTopographySmoothingSteps; ++step) {
    for (Index c = 0; c < nc; ++c) {
      double sum = 0.0;
      for (int i = 0; i < kC2E2CO; ++i) {
        const std::int32_t n = grid.c2e2co[kC2E2CO * c + i];
        if (n < 0) continue;  // outside a limited-area grid: no term
        sum += smooth[static_cast<Index>(n)] * geofac_n2s[kC2E2CO * c + i];
      }
      nabla2[c] = sum;
    }
    for (Index c = 0; c < nc; ++c) smooth[c] = smooth[c] + 0.125 * nabla2[c] * grid.cell_area[c];
  }
  return smooth;
}

double sleve_decay(double z, double top, double scale, double exponent) {
  const double top_term = std::pow(top / scale, exponent);
  return std::sinh(top_term - std::pow(z / scale, exponent)) / std::sinh(top_term);
}

// The smallest thickness the limiter allows for a layer of nominal thickness dvct.
double minimum_layer_thickness(const VerticalGridConfig& c, double dvct) {
  const double t1 = c.SLEVE_minimum_layer_thickness_1, t2 = c.SLEVE_minimum_layer_thickness_2;
  const double r1 = c.SLEVE_minimum_relative_layer_thickness_1;
  const double r2 = c.SLEVE_minimum_relative_layer_thickness_2;
  double limit = 0.0;
  if (dvct < t1) {
    limit = r1 * dvct;
  } else if (dvct < t2) {
    const double q0 = (t2 - dvct) / (t2 - t1);
    const double q = q0 * q0;
    limit = (r1 * q + r2 * (1.0 - q)) * dvct;
  } else {
    limit = r2 * t2 * std::pow(dvct / t2, 1.0 / 3.0);
  }
  return std::max(limit, std::min(50.0, c.lowest_layer_thickness));
}

// compute_vertical_coordinate: the SLEVE coordinate, the thickness limiter and the checks.
void vertical_coordinate(const VerticalGrid& vg, const std::vector<double>& topography,
                         const std::vector<double>& smoothed, std::vector<double>& z_ifc) {
  const VerticalGridConfig& cfg = vg.config;
  const int n = cfg.num_levels;
  const Index nc = topography.size(), nh = static_cast<Index>(n) + 1;
  const std::vector<double>& vct_a = vg.vct_a;
  z_ifc.assign(nc * nh, 0.0);
  const int last_flat = std::min(vg.nflatlev, n);
  std::vector<double> fac1(nh, 0.0), fac2(nh, 0.0);
  for (int k = vg.nflatlev + 1; k < n; ++k) {
    fac1[k] = sleve_decay(vct_a[k], cfg.model_top_height, cfg.SLEVE_decay_scale_1,
                          cfg.SLEVE_decay_exponent);
    fac2[k] = sleve_decay(vct_a[k], cfg.model_top_height, cfg.SLEVE_decay_scale_2,
                          cfg.SLEVE_decay_exponent);
  }
  for (Index c = 0; c < nc; ++c) {
    double* z = &z_ifc[c * nh];
    z[n] = topography[c];
    for (int k = 0; k <= last_flat; ++k) z[k] = vct_a[k];  // (nflatlev = N also flattens k = N)
    const double small_scale = topography[c] - smoothed[c];
    for (int k = vg.nflatlev + 1; k < n; ++k)
      z[k] = vct_a[k] + smoothed[c] * fac1[k] + small_scale * fac2[k];
  }

  // Keep layers from becoming too thin over steep topography, from the ground up; ktop is the
  // highest interface the limiter moved (N where it did nothing).
  std::vector<int> ktop(nc, n);
  for (int k = n - 1; k >= 0; --k) {
    const double limit = minimum_layer_thickness(cfg, vct_a[k] - vct_a[k + 1]);
    for (Index c = 0; c < nc; ++c) {
      double* z = &z_ifc[c * nh];
      if (z[k + 1] + limit > z[k]) {
        z[k] = z[k + 1] + limit;
        ktop[c] = k;
      }
    }
  }
  // Re-space the two layers above the limited ones so that the thickness ratio changes smoothly.
  for (Index c = 0; c < nc; ++c) {
    const int kt = ktop[c];
    if (kt > n - 3 || kt < 3) continue;
    double* z = &z_ifc[c * nh];
    const double dz1 = z[kt + 1] - z[kt + 2];
    const double dz2 = z[kt - 3] - z[kt - 2];
    const double f = std::pow(dz2 / dz1, 0.25);
    const double dz3 = (z[kt - 2] - z[kt + 1]) / (f * (1.0 + f * (1.0 + f)));
    z[kt] = std::max(z[kt], z[kt + 1] + dz3 * f);
    z[kt - 1] = std::max(z[kt - 1], z[kt] + dz3 * (f * f));
  }
  if (n > 6)
    for (Index c = 0; c < nc; ++c)
      require(ktop[c] > 2, "vertical.config.model_top_height",
              fmt::format("a model top high enough that the layer-thickness limiter stays below "
                          "interface 2 (it reaches interface {} in cell {})",
                          ktop[c], c),
              str(cfg.model_top_height));
  const int check = std::max(0, vg.nflatlev - 1);
  for (Index c = 0; c < nc; ++c)
    require(z_ifc[c * nh + check] == vct_a[check], "topography",
            fmt::format("a topography that leaves interface max(0, nflatlev - 1) = {} flat", check),
            fmt::format("cell {} moves it to {} m (vct_a {} m)", c, z_ifc[c * nh + check],
                        vct_a[check]));
}

void reference_atmosphere(double z, double& theta, double& exner, double& rho) {
  const double denom = kT0slBg - kDelTBg;
  const double logval = std::log((std::exp(z / kHScalBg) * denom + kDelTBg) / kT0slBg);
  const double pressure = kP0slBg * std::exp(-kGrav / kRd * kHScalBg / denom * logval);
  exner = std::pow(pressure / kP0ref, kRd / kCpd);
  const double temperature = denom + kDelTBg * std::exp(-z / kHScalBg);
  rho = pressure / (kRd * temperature);
  theta = temperature / exner;
}

// compute_mass_conserving_bilinear_cell_average_weight (one process: every cell owned).
std::vector<double> mass_conserving_cell_average_weight(const Grid& grid, double central_weight) {
  const Index nc = static_cast<Index>(grid.num_cells);
  const Index start =
      static_cast<Index>(grid.start_index(Dimension::Cell, Zone::LateralBoundaryLevel2));
  const Index start3 =
      static_cast<Index>(grid.start_index(Dimension::Cell, Zone::LateralBoundaryLevel3));
  std::vector<double> w(nc * kC2E2CO, 0.0);
  for (Index c = start; c < nc; ++c) {
    std::array<double, 3> lat{}, lon{};
    for (int i = 0; i < 3; ++i) {
      const auto n = static_cast<Index>(grid.c2e2c[3 * c + i]);
      lat[i] = grid.cell_lat[n];
      lon[i] = grid.cell_lon[n];
    }
    const auto wn =
        detail::weighting_factors(lat, lon, grid.cell_lat[c], grid.cell_lon[c], central_weight);
    w[4 * c] = central_weight;
    for (int i = 0; i < 3; ++i) w[4 * c + 1 + i] = wn[i];
  }

  // inverse[c][i]: c's place among the C2E2CO of its i-th C2E2CO cell.
  std::vector<int> inverse(nc * kC2E2CO, -1);
  for (Index c = 0; c < nc; ++c)
    for (int i = 0; i < kC2E2CO; ++i) {
      if (grid.c2e2co[4 * c + i] < 0) continue;
      const auto n = static_cast<Index>(grid.c2e2co[4 * c + i]);
      for (int j = 0; j < kC2E2CO; ++j)
        if (static_cast<Index>(grid.c2e2co[4 * n + j]) == c) {
          inverse[4 * c + i] = j;
          break;
        }
    }

  const double max_weight = central_weight + 0.003, min_weight = central_weight - 0.003;
  const double relax = 0.46;
  std::vector<double> residual(nc, 0.0), row_excess(nc, 0.0);
  for (int sweep = 0; sweep < kMassConservationSweeps; ++sweep) {
    for (Index c = start3; c < nc; ++c) {
      double sum = 0.0;
      for (int i = 0; i < kC2E2CO; ++i) {
        if (inverse[4 * c + i] < 0) continue;  // a missing neighbour (limited area)
        const auto n = static_cast<Index>(grid.c2e2co[4 * c + i]);
        sum += w[4 * n + static_cast<Index>(inverse[4 * c + i])] * grid.cell_area[n];
      }
      residual[c] = sum / grid.cell_area[c] - 1.0;
    }
    if (sweep == kMassConservationSweeps - 1) {
      for (Index c = start3; c < nc; ++c) w[4 * c] = w[4 * c] - residual[c];
      break;
    }
    for (Index c = start3; c < nc; ++c)
      for (int i = 0; i < kC2E2CO; ++i)
        if (grid.c2e2co[4 * c + i] >= 0)
          w[4 * c + i] =
              w[4 * c + i] - relax * residual[static_cast<Index>(grid.c2e2co[4 * c + i])];
    for (Index c = 0; c < nc; ++c)
      row_excess[c] = w[4 * c] + w[4 * c + 1] + w[4 * c + 2] + w[4 * c + 3] - 1.0;
    for (Index c = start3; c < nc; ++c) {
      for (int i = 0; i < kC2E2CO; ++i) w[4 * c + i] = w[4 * c + i] - 0.25 * row_excess[c];
      w[4 * c] = std::min(std::max(w[4 * c], min_weight), max_weight);
    }
  }
  return w;
}

}  // namespace

MetricState metric_state(const Grid& grid, const InterpolationCoefficients& coefficients,
                         const VerticalGrid& vertical, const std::vector<double>& topography,
                         const MetricOptions& options) {
  const int n = vertical.config.num_levels;
  require(n >= 2, "vertical.config.num_levels", "at least 2 levels", str(n));
  require(vertical.vct_a.size() == static_cast<Index>(n) + 1, "vertical.vct_a",
          fmt::format("num_levels + 1 = {} heights", n + 1),
          str(static_cast<double>(vertical.vct_a.size())));
  require(vertical.nflatlev >= 0 && vertical.nflatlev <= n, "vertical.nflatlev",
          fmt::format("an interface index in [0, {}]", n), str(vertical.nflatlev));
  require(grid.num_cells > 0, "grid", "a grid with cells", str(grid.num_cells));
  const Index nc = static_cast<Index>(grid.num_cells), ne = static_cast<Index>(grid.num_edges);
  require(topography.size() == nc, "topography", fmt::format("one height per cell ({} values)", nc),
          fmt::format("{} values", topography.size()));
  for (Index c = 0; c < nc; ++c)
    require(std::isfinite(topography[c]), "topography", "finite heights",
            fmt::format("{} in cell {}", topography[c], c));
  require(coefficients.geofac_n2s.size() == nc * kC2E2CO, "coefficients.geofac_n2s",
          fmt::format("(num_cells, 4) = {} values", nc * kC2E2CO),
          fmt::format("{} values", coefficients.geofac_n2s.size()));
  require(coefficients.inverse_dual_edge_lengths.size() == ne,
          "coefficients.inverse_dual_edge_lengths", fmt::format("num_edges = {} values", ne),
          fmt::format("{} values", coefficients.inverse_dual_edge_lengths.size()));
  require(std::isfinite(options.thslp_zdiffu), "options.thslp_zdiffu", "a finite slope",
          str(options.thslp_zdiffu));
  require(std::isfinite(options.thhgtd_zdiffu), "options.thhgtd_zdiffu", "a finite height",
          str(options.thhgtd_zdiffu));
  require(std::isfinite(options.divergence_averaging_central_cell_weight),
          "options.divergence_averaging_central_cell_weight", "a finite weight",
          str(options.divergence_averaging_central_cell_weight));

  MetricState m;
  m.num_cells = grid.num_cells;
  m.num_levels = n;
  const Index nl = static_cast<Index>(n), nh = nl + 1;

  m.smoothed_topography = smooth_topography(grid, coefficients.geofac_n2s, topography);
  vertical_coordinate(vertical, topography, m.smoothed_topography, m.z_ifc);

  m.z_mc.resize(nc * nl);
  m.theta_ref_mc.resize(nc * nl);
  m.exner_ref_mc.resize(nc * nl);
  m.rho_ref_mc.resize(nc * nl);
  m.wgtfac_c.resize(nc * nh);
  for (Index c = 0; c < nc; ++c) {
    const double* z = &m.z_ifc[c * nh];
    for (Index k = 0; k < nl; ++k) {
      const Index ck = c * nl + k;
      m.z_mc[ck] = 0.5 * (z[k] + z[k + 1]);
      reference_atmosphere(m.z_mc[ck], m.theta_ref_mc[ck], m.exner_ref_mc[ck], m.rho_ref_mc[ck]);
    }
    double* w = &m.wgtfac_c[c * nh];
    w[0] = (z[1] - z[0]) / (z[2] - z[0]);
    for (Index k = 1; k < nl; ++k) w[k] = (z[k - 1] - z[k]) / (z[k - 1] - z[k + 1]);
    w[nl] = (z[nl - 1] - z[nl]) / (z[nl - 2] - z[nl]);
  }

  // Slopes on edges, full levels: (num_edges, num_levels).
  std::vector<double> ddxn_z_full(ne * nl), ddxn_half(nh);
  for (Index e = 0; e < ne; ++e) {
    // A lateral boundary edge of a limited-area grid has one cell: no slope across it.
    const std::int32_t c0 = grid.e2c[2 * e], c1 = grid.e2c[2 * e + 1];
    const double* z0 = &m.z_ifc[static_cast<Index>(c0 >= 0 ? c0 : c1) * nh];
    const double* z1 = &m.z_ifc[static_cast<Index>(c1 >= 0 ? c1 : c0) * nh];
    const double inv = coefficients.inverse_dual_edge_lengths[e];
    for (Index k = 0; k < nh; ++k) ddxn_half[k] = (z1[k] - z0[k]) * inv;
    for (Index k = 0; k < nl; ++k)
      ddxn_z_full[e * nl + k] = 0.5 * (ddxn_half[k] + ddxn_half[k + 1]);
  }
  std::vector<double> maxslp(nc * nl), maxhgtd(nc * nl);
  for (Index c = 0; c < nc; ++c)
    for (Index k = 0; k < nl; ++k) {
      double slope = 0.0, height = 0.0;
      for (int i = 0; i < kC2E; ++i) {
        const auto e = static_cast<Index>(grid.c2e[3 * c + i]);
        const double d = ddxn_z_full[e * nl + k];
        // max_over starts from the first neighbour; |.| >= 0 so starting from 0 is the same.
        slope = std::max(slope, std::abs(d));
        height = std::max(height, std::abs(d * grid.dual_edge_length[e]));
      }
      maxslp[c * nl + k] = slope;
      maxhgtd[c * nl + k] = height;
    }

  m.c_bln_avg =
      mass_conserving_cell_average_weight(grid, options.divergence_averaging_central_cell_weight);
  m.maxslp_avg.assign(nc * nl, 0.0);
  m.maxhgtd_avg.assign(nc * nl, 0.0);
  const Index avg_start =
      static_cast<Index>(grid.start_index(Dimension::Cell, Zone::LateralBoundaryLevel2));
  for (Index c = avg_start; c < nc; ++c)
    for (Index k = 0; k < nl; ++k) {
      double slope = 0.0, height = 0.0;
      for (int i = 0; i < kC2E2CO; ++i) {
        if (grid.c2e2co[4 * c + i] < 0) continue;
        const auto nb = static_cast<Index>(grid.c2e2co[4 * c + i]);
        slope += maxslp[nb * nl + k] * m.c_bln_avg[4 * c + i];
        height += maxhgtd[nb * nl + k] * m.c_bln_avg[4 * c + i];
      }
      m.maxslp_avg[c * nl + k] = slope;
      m.maxhgtd_avg[c * nl + k] = height;
    }

  m.max_nbhgt.resize(nc);
  for (Index c = 0; c < nc; ++c) {
    double highest = -std::numeric_limits<double>::infinity();
    for (int i = 0; i < kC2E2C; ++i)
      if (grid.c2e2c[3 * c + i] >= 0)
        highest =
            std::max(highest, m.z_mc[static_cast<Index>(grid.c2e2c[3 * c + i]) * nl + nl - 1]);
    m.max_nbhgt[c] = highest;
  }

  // The level range [kstart, kend) of truly horizontal diffusion per cell.
  const double thslp = options.thslp_zdiffu, thhgtd = options.thhgtd_zdiffu;
  const Index nudging_start = static_cast<Index>(grid.start_index(Dimension::Cell, Zone::Nudging));
  std::vector<Index> participating;
  std::vector<Index> kstart(nc, 0), kend(nc, 0);
  for (Index c = 0; c < nc; ++c) {
    const double* slope = &m.maxslp_avg[c * nl];
    const double* height = &m.maxhgtd_avg[c * nl];
    auto steep = [&](Index k) { return slope[k] >= thslp || height[k] >= thhgtd; };
    Index first = 0;
    while (first < nl && !steep(first)) ++first;
    kstart[c] = first == nl ? 0 : first;
    if (steep(nl - 1))
      for (Index k = 0; k < nl; ++k)
        if (m.z_mc[c * nl + k] >= m.max_nbhgt[c]) kend[c] = k + 1;
    if (kstart[c] > kend[c]) kstart[c] = nl;
    if (kend[c] > kstart[c] && c >= nudging_start) participating.push_back(c);
  }

  m.zd_diffcoef.assign(nc * nl, 0.0);
  m.zd_intcoef.assign(nc * kC2E2C * nl, 0.0);
  m.zd_vertoffset.assign(nc * kC2E2C * nl, 0);
  m.mask_hdiff.assign(nc * nl, 0);
  for (Index c : participating)
    for (Index k = kstart[c]; k < kend[c]; ++k) {
      const Index ck = c * nl + k;
      m.mask_hdiff[ck] = 1;
      const double coef = std::max(std::sqrt(std::max(0.0, m.maxslp_avg[ck] - thslp)) / 250.0,
                                   2.0e-4 * std::sqrt(std::max(0.0, m.maxhgtd_avg[ck] - thhgtd)));
      m.zd_diffcoef[ck] = std::min(0.002, coef);
    }

  if (!participating.empty()) {
    const auto [zmin, zmax] = std::minmax_element(m.z_mc.begin(), m.z_mc.end());
    const double zrange = std::max(*zmax - *zmin, 0.0);
    const Index np = participating.size();
    // ICON4Py finds the neighbour level by one sorted search over all participating cells: the
    // neighbours' -z_mc, cell j shifted by j * zrange so that the columns follow each other.
    std::vector<double> sorted(np * nl);
    for (int i = 0; i < kC2E2C; ++i) {
      for (Index j = 0; j < np; ++j) {
        const auto nb = static_cast<Index>(grid.c2e2c[3 * participating[j] + i]);
        const double offset = static_cast<double>(j) * zrange;
        for (Index k = 0; k < nl; ++k) sorted[j * nl + k] = -m.z_mc[nb * nl + k] + offset;
      }
      for (Index j = 0; j < np; ++j) {
        const Index c = participating[j];
        const auto nb = static_cast<Index>(grid.c2e2c[3 * c + i]);
        const double* zn = &m.z_mc[nb * nl];
        const double offset = static_cast<double>(j) * zrange;
        for (Index k = kstart[c]; k < kend[c]; ++k) {
          const double key = -m.z_mc[c * nl + k] + offset;
          const auto found = static_cast<std::int64_t>(
              std::upper_bound(sorted.begin(), sorted.end(), key) - sorted.begin());
          const std::int64_t level = found - static_cast<std::int64_t>(j * nl) - 1;
          const auto upper = static_cast<Index>(
              std::clamp<std::int64_t>(level, 0, static_cast<std::int64_t>(nl) - 2));
          const Index at = (c * kC2E2C + static_cast<Index>(i)) * nl + k;
          m.zd_intcoef[at] = (m.z_mc[c * nl + k] - zn[upper + 1]) / (zn[upper] - zn[upper + 1]);
          m.zd_vertoffset[at] = static_cast<std::int32_t>(upper) - static_cast<std::int32_t>(k);
        }
      }
    }
  }
  return m;
}

}  // namespace sciproxy::diffusion
