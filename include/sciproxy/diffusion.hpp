// diffusion: ICON's horizontal diffusion on icosahedral grids (issue 16,
// docs/kernels/diffusion.md). This header holds, so far, the grid the kernels run on: ICON-style
// global icosahedral grids RnBk with their connectivities and their geometry on the sphere, ICON
// grid files (NetCDF) read and written as ICON4Py reads them, limited-area cut-outs with ICON's
// lateral-boundary rows and ordering, and the interpolation coefficients.
//
//   RnBk: the 20 triangles of the icosahedron, each triangle's edges divided into n equal arcs
//   (the root division), then k bisections (every edge halved at its great-circle midpoint, every
//   triangle cut into 4), every vertex on the unit sphere, then scaled by `radius`:
//     num_cells = 20 n^2 4^k,  num_edges = 30 n^2 4^k,  num_vertices = 10 n^2 4^k + 2
//   (R2B4: 20480, 30720, 10242), 12 vertices with 5 neighbours (the icosahedron's corners, one at
//   each pole) and all others with 6.
//
// The grid is ICON-style, not bit-identical to DWD's grid files (whose root-division interior
// points and numbering differ, and which are optimised by spring relaxation); every convention
// below is ours where ICON leaves freedom, and the names are ICON4Py's.
//
// Conventions (all tables int32, zero-based, row-major (n, k); -1 marks a missing neighbour):
// - Cells are spherical triangles whose vertices C2V run counter-clockwise seen from outside the
//   sphere. Edge i of a cell (C2E[c][i]) is the edge opposite its vertex i (C2V[c][i]), so it
//   joins C2V[c][i+1] and C2V[c][i+2] (indices mod 3), and C2E2C[c][i] is the cell across it.
// - E2V is (lower vertex index, higher), E2C is (lower cell index, higher): orientations are
//   therefore not all +1, as in ICON's files, and code using them must use the signs.
// - The primal normal of an edge points from E2C[e][0] to E2C[e][1]; edge_orientation of a cell's
//   edge is +1 where that normal points out of the cell (so +1 in E2C[e][0], -1 in E2C[e][1]).
// - The dual normal (the primal tangent) t and the primal normal n satisfy n = r x t, r the unit
//   radial vector at the edge midpoint (ICON4Py's edge_primal_normal: edge_center x tangent), so
//   t = n x r; tangent_orientation = +1 where t points from E2V[e][0] to E2V[e][1], else -1.
// - V2C and V2E run counter-clockwise around the vertex seen from outside; V2E[v][i] is the edge
//   between V2C[v][i-1] and V2C[v][i] (i - 1 mod the vertex's degree). Pentagon vertices have 5:
//   the 6th entry of both is -1.
// - Cell centres are the circumcentres of the spherical triangles (as ICON), which lie on the
//   perpendicular bisector of every edge: the dual edge (the arc between the two cell centres)
//   crosses its primal edge at the edge midpoint, at a right angle.
// - Lengths and areas are in units of `radius` (metres for the default); angles in radians,
//   longitudes in (-pi, pi].
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sciproxy/core/communicator.hpp"

namespace sciproxy {
class Timers;  // sciproxy/core/timers.hpp
}

namespace sciproxy::diffusion {

inline constexpr double kEarthRadius = 6371229.0;  // ICON4Py's constants.EARTH_RADIUS, metres

// Neighbour counts of the tables (their second dimension).
inline constexpr int kC2E = 3, kC2V = 3, kC2E2C = 3, kC2E2CO = 4;
inline constexpr int kE2C = 2, kE2V = 2, kE2C2V = 4, kV2E = 6, kV2C = 6;

// The horizontal dimensions and ICON4Py's grid zones (icon4py.model.common.grid.horizontal). On a
// limited-area grid ICON orders every array by refin_ctrl, the distance (in rows) from the lateral
// boundary: row 1 first, then row 2, ..., then the nudging rows, then the unordered interior, so
// each zone is a contiguous index range. Cells and vertices have boundary rows 1-4 and one nudging
// row; edges have rows 1-8 and two nudging rows. On a global grid every refin_ctrl is 0: the
// boundary and nudging zones are empty (start = end = 0), INTERIOR and LOCAL are everything. With
// no halos (one process) HALO and HALO_LEVEL_2 are empty at the end.
enum class Dimension : int { Cell = 0, Edge = 1, Vertex = 2 };
enum class Zone : int {
  End,
  Interior,
  Halo,
  HaloLevel2,
  Local,
  LateralBoundary,
  LateralBoundaryLevel2,
  LateralBoundaryLevel3,
  LateralBoundaryLevel4,
  LateralBoundaryLevel5,
  LateralBoundaryLevel6,
  LateralBoundaryLevel7,
  LateralBoundaryLevel8,
  Nudging,
  NudgingLevel2,
};
inline constexpr int kNumZones = 15;
// ICON4Py's names ("lb_level_5", "nudging_level_2", ...) and the reverse; zone_from_name throws
// InvalidArgument naming the unknown name and the valid ones.
const char* zone_name(Zone zone);
Zone zone_from_name(const std::string& name);
// Whether a zone exists for a dimension (cells and vertices: rows 1-4 and NUDGING; edges: rows
// 1-8, NUDGING and NUDGING_LEVEL_2; END, INTERIOR, HALO*, LOCAL everywhere).
bool zone_exists(Dimension dim, Zone zone);

struct Grid {
  int n = 0, k = 0;  // RnBk
  double radius = kEarthRadius;
  std::int32_t num_cells = 0, num_edges = 0, num_vertices = 0;

  // Connectivities.
  std::vector<std::int32_t> c2e;     // (num_cells, 3): edge i is opposite vertex i
  std::vector<std::int32_t> c2v;     // (num_cells, 3): counter-clockwise seen from outside
  std::vector<std::int32_t> c2e2c;   // (num_cells, 3): the cell across edge i
  std::vector<std::int32_t> c2e2co;  // (num_cells, 4): the cell itself, then C2E2C
  std::vector<std::int32_t> e2c;     // (num_edges, 2): lower cell index first
  std::vector<std::int32_t> e2v;     // (num_edges, 2): lower vertex index first
  // (num_edges, 4): the diamond: E2V[e][0], E2V[e][1], then the far vertex (the one not on the
  // edge) of E2C[e][0] and of E2C[e][1].
  std::vector<std::int32_t> e2c2v;
  std::vector<std::int32_t> v2e;  // (num_vertices, 6): counter-clockwise, -1 last at pentagons
  std::vector<std::int32_t> v2c;  // (num_vertices, 6): counter-clockwise, -1 last at pentagons

  // Orientations (+1 / -1).
  std::vector<std::int32_t> edge_orientation;     // (num_cells, 3): the normal leaves the cell
  std::vector<std::int32_t> tangent_orientation;  // (num_edges): t points E2V[0] -> E2V[1]
  // (num_vertices, 6), ICON's vertex edge_orientation: +1 where the edge's primal normal points
  // counter-clockwise around the vertex (seen from outside), i.e. where t points away from the
  // vertex; 0 for a pentagon's missing 6th edge.
  std::vector<std::int32_t> vertex_edge_orientation;

  // Positions: latitude, longitude and the cartesian unit vector (x, y, z) (z to the north pole,
  // x to longitude 0 on the equator); multiply by radius for metres.
  std::vector<double> cell_lat, cell_lon, cell_center;        // center: (num_cells, 3)
  std::vector<double> vertex_lat, vertex_lon, vertex_center;  // (num_vertices, 3)
  std::vector<double> edge_center_lat, edge_center_lon;       // great-circle midpoint of E2V
  std::vector<double> edge_center;                            // (num_edges, 3)

  // Measures on the sphere of radius `radius`.
  std::vector<double> cell_area;         // (num_cells): spherical triangle of C2V
  std::vector<double> dual_area;         // (num_vertices): spherical polygon of V2C's centres
  std::vector<double> edge_length;       // (num_edges): arc between E2V's vertices
  std::vector<double> dual_edge_length;  // (num_edges): arc between E2C's cell centres
  std::vector<double> edge_cell_length;  // (num_edges, 2): edge midpoint to E2C[e][i]'s centre
  std::vector<double> edge_vert_length;  // (num_edges, 2): edge midpoint to E2V[e][i]

  // Unit vectors at the edge midpoint, tangent to the sphere: cartesian (num_edges, 3), and the
  // local (zonal, meridional) components (ICON4Py's primal_normal_x/y, dual_normal_x/y).
  std::vector<double> primal_cart_normal, dual_cart_normal;
  std::vector<double> primal_normal_x, primal_normal_y, dual_normal_x, dual_normal_y;

  // Lateral boundary. refin_ctrl per entity (ICON's refin_c_ctrl, refin_e_ctrl, refin_v_ctrl:
  // 0 in the unordered interior, 1.. the boundary row, then the nudging rows); all 0 and
  // limited_area false on a global grid. zone_start/zone_end[dim][zone] are the zero-based
  // half-open index ranges of each zone, as ICON4Py's grid_refinement.compute_domain_bounds
  // derives them from refin_ctrl; set_domain_bounds fills them.
  bool limited_area = false;
  std::vector<std::int32_t> cell_refin_ctrl, edge_refin_ctrl, vertex_refin_ctrl;
  std::array<std::array<std::int32_t, kNumZones>, 3> zone_start{}, zone_end{};

  std::int32_t size(Dimension dim) const;
  // ICON4Py's grid.start_index(Domain(dim, zone)) / end_index; InvalidArgument for a zone the
  // dimension does not have.
  std::int32_t start_index(Dimension dim, Zone zone) const;
  std::int32_t end_index(Dimension dim, Zone zone) const;
};

// Fills limited_area, zone_start and zone_end from the refin_ctrl arrays (which must hold
// num_cells/num_edges/num_vertices entries, or be empty for all zeros), ICON4Py's way: a zone's
// range spans the first to the last entity with its refin_ctrl value (empty, (0, 0), if none);
// INTERIOR starts where the last nudging zone ends; LOCAL is [0, n); HALO* are [n, n). A nested
// parent grid's negative values count as ICON4Py converts them (-4, or -8 for edges: 0; other
// v < 0: -v).
void set_domain_bounds(Grid& grid);

// The zones of one dimension of a rank's local grid as ICON orders it (DiffusionOptions::
// local_decomposition): halo_level per local entity, 0 for the owned ones first, then the halo
// levels 1, 2 (and 3 for edges) in order. LOCAL and INTERIOR are the owned entities, HALO level
// 1, HALO_LEVEL_2 level 2, END the size. InvalidArgument naming `argument` when halo_level has
// not grid.size(dim) values, or its values are out of [0, 3] or not in that order.
void set_halo_zones(Grid& grid, Dimension dim, const std::vector<std::int8_t>& halo_level,
                    const std::string& argument);

// ICON grid files (NetCDF; docs/kernels/diffusion.md), read as ICON4Py's GridManager reads them
// (one process, skip values kept): every table transposed from the file's (k, n) to (n, k), its
// 1-based indices made zero-based, 0 and -1 (a missing neighbour) both -1, on every grid,
// limited-area included; C2E2CO = (the cell, C2E2C); E2C2V = (E2V[e][0], E2V[e][1], then the
// first two entries of C2V[E2C[e][0]] followed by C2V[E2C[e][1]] that are not on the edge, a
// missing cell giving three -1: the far vertex of each cell; both -1 where E2C[e][0] is missing,
// the last where E2C[e][1] is); V2E, V2C, the vertex edge_orientation
// and refin_c/e/v_ctrl as stored. The grid keeps the file's numbering and order, so where the
// conventions above differ from the generator's, a read grid has the file's: E2V and E2C are in
// the file's order (not by index), the primal normal and the orientations are the file's, V2E and
// V2C run as the file has them (ICON: counter-clockwise, missing entries last), cell centres are
// the file's (not necessarily circumcentres), and a limited-area grid has -1 in C2E2C, E2C, V2C,
// V2E and E2C2V at its lateral boundary. n and k are the file's grid_root and grid_level (0 if
// absent). radius 0 takes the file's sphere_radius attribute (kEarthRadius where it has none);
// another radius scales the file's lengths and areas by radius / sphere_radius. Geometry comes
// from the file where present (cell_area, dual_area, edge_length, dual_edge_length,
// edge_cell_distance, edge_vert_distance, edge_primal/dual_normal_cartesian_x/y/z,
// zonal/meridional_normal_primal/dual_edge, orientation_of_normal, edge_system_orientation,
// edge_orientation); what is absent is computed from the positions as the generator computes it
// (at a lateral boundary: the clipped dual edge and dual cell). Positions are clat/clon,
// vlat/vlon, elat/elon and, where present, the file's cartesian unit vectors. refin_ctrl absent:
// all 0 (a global grid). Zones: set_domain_bounds. A bad file is an InvalidArgument starting
// "path: " that names the file and the fault: not NetCDF or missing, a variable or dimension
// missing, a variable whose shape disagrees with the cell/edge/vertex counts, an index outside
// 1..count (or missing where every entry needs one: C2E, C2V, E2V), NaN or infinite positions or
// geometry.
Grid read_grid_file(const std::string& path, double radius = 0);

// Writes the grid as an ICON grid file (NetCDF-4) with the variables read_grid_file reads (the
// tables 1-based, -1 for a missing neighbour, the (n, k) tables as (k, n)), the cartesian
// positions, vertices_of_vertex, start_idx/end_idx as ICON defines them from refin_ctrl, and the
// global attributes uuidOfHGrid (derived from the grid), number_of_grid_used (0), grid_root and
// grid_level (where n > 0), sphere_radius, grid_geometry, grid_cell_type and global_grid, so that
// read_grid_file(path) gives the same grid exactly. Written to a temporary file in the target's
// directory and renamed onto the target: a failed write leaves the target as it was.
// InvalidArgument ("grid: ...") for a grid whose arrays do not match its counts or whose tables
// hold indices out of range; IoError where the file cannot be written.
void write_grid_file(const Grid& grid, const std::string& path);

// Limited-area cut-outs of a grid, as ICON's limited-area grids are laid out (ICON4Py's
// grid_refinement.py; icon-grid-generator's limited-area grids):
// - the region: the cells whose centre lies within the angular distance radius_rad of
//   (center_lat, center_lon) (radians); the edges and vertices of those cells;
// - refin_ctrl rows, from the lateral boundary (the region's edges with only one cell in the
//   region): vertices on it are row 1; the other vertices of a cell with a vertex in
//   row r are in row r + 1; a cell is in the lowest row of its vertices; an edge is in row
//   (row of E2C[0]) + (row of E2C[1]) (a boundary edge: 1; an edge between rows r and r: 2r,
//   between r and r + 1: 2r + 1: twice as many edge rows as cell rows); rows are counted up to
//   boundary_depth (cells and vertices; edges up to 2 boundary_depth), deeper entities are 0;
// - the order: rows 1..4 and the nudging row 5 of cells and vertices, rows 1..8 and the nudging
//   rows 9 and 10 of edges, each in the source grid's order, then the rest (0 or deeper rows) in
//   the source's order; every zone a contiguous index range (set_domain_bounds);
// - the tables remapped, -1 for a neighbour outside the region; a boundary edge's cell first in
//   E2C (its normal, tangent and orientations turned where that swaps its cells); V2C and V2E of
//   a boundary vertex start at the boundary (V2E[v][0] is a boundary edge, V2C[v][0] the cell
//   after it, counter-clockwise), missing entries last; geometry and positions copied (so the
//   dual cells and dual edges at the boundary are the source's, not clipped as in
//   icon-grid-generator's files).
struct LimitedAreaOptions {
  int boundary_depth = 14;  // rows labelled (ICON's bdy_indexing_depth; icon-grid-generator's 14)
};
// InvalidArgument ("center_lat: ...", "radius_rad: ...", "options.boundary_depth: ...",
// "global: ...") for coordinates or a radius that are not finite, a depth below 5, a region that
// selects no cell or every cell (no lateral boundary), or a source grid whose arrays do not
// match its counts or whose tables hold indices out of range.
Grid limited_area_grid(const Grid& global, double center_lat, double center_lon, double radius_rad,
                       const LimitedAreaOptions& options = {});

// ICON's sparse offsets, flattening a neighbour table's (entity, neighbour) into one index.
inline constexpr std::int64_t e2ecv(std::int64_t edge, int i) {
  return edge * 4 + i;
}
inline constexpr std::int64_t c2ce(std::int64_t cell, int i) {
  return cell * 3 + i;
}

// Interpolation and geometry coefficients of the diffusion granule (ICON4Py's names, computed
// as ICON4Py's interpolation_fields.py and rbf_interpolation.py compute them; the equations are
// at the top of src/diffusion/coefficients.cpp). Arrays are row-major, shapes in the comments;
// where a pentagon vertex has no 6th edge the entry is 0. Lengths in units of Grid::radius.
struct RbfOptions {
  // Gaussian kernel exp(-(d / scale_factor)^2), d the arc between points on the unit sphere
  // (radians). 0.5 is ICON4Py's compute_default_rbf_scale_vertex for grids coarser than 2 km.
  double scale_factor = 0.5;
};

// The lateral-boundary nudging of limited-area grids (ICON4Py's InterpolationConfig defaults):
// nudgecoeff_e = max_nudging_coefficient exp(-(refin_e_ctrl - 10) / (2 nudge_efold_width)) on
// the edges from the start of the NUDGING_LEVEL_2 zone on whose refin_e_ctrl is in
// 1..2 nudge_zone_width + 7, else 0 (ICON4Py's compute_nudgecoeffs, grf_nudge_start_e = 10).
struct NudgingOptions {
  double max_nudging_coefficient = 0.375;
  double nudge_efold_width = 2.0;  // rows
  int nudge_zone_width = 10;       // rows
};

struct InterpolationCoefficients {
  std::vector<double> geofac_div;  // (num_cells, 3): divergence over C2E
  std::vector<double> geofac_rot;  // (num_vertices, 6): curl over V2E
  std::vector<double> geofac_n2s;  // (num_cells, 4): nabla2 of a cell scalar over C2E2CO
  // (num_cells, 4, 2): Green-Gauss gradient of a cell scalar over C2E2CO, [c][i][0] the zonal
  // (x) and [c][i][1] the meridional (y) component at the cell centre.
  std::vector<double> geofac_grg;
  std::vector<double> c_lin_e;    // (num_edges, 2): linear cell -> edge weights over E2C
  std::vector<double> e_bln_c_s;  // (num_cells, 3): bilinear edge -> cell centre over C2E
  std::vector<double> inverse_primal_edge_lengths;    // (num_edges)
  std::vector<double> inverse_dual_edge_lengths;      // (num_edges)
  std::vector<double> inverse_vertex_vertex_lengths;  // (num_edges): 1 / |E2C2V[2] E2C2V[3]|
  // (num_vertices, 6) each: zonal (v1) and meridional (v2) wind at a vertex from the normal
  // components on V2E: u = sum_i rbf_vec_coeff_v1[v][i] vn[V2E[v][i]].
  std::vector<double> rbf_vec_coeff_v1, rbf_vec_coeff_v2;
  // (num_edges): the lateral-boundary nudging coefficient (NudgingOptions); 0 everywhere on a
  // global grid.
  std::vector<double> nudgecoeff_e;
};

InterpolationCoefficients interpolation_coefficients(const Grid& grid, const RbfOptions& rbf = {},
                                                     const NudgingOptions& nudging = {});

// The vertical grid and the metric fields of the diffusion granule (ICON4Py's names and defaults:
// icon4py.model.common.grid.vertical and icon4py.model.common.metrics; the equations are at the
// top of src/diffusion/metrics.cpp). Heights in metres, levels counted from the model top:
// interfaces (half levels) k = 0..num_levels, k = 0 the model top and k = num_levels the
// surface; full level k lies between interfaces k and k + 1.
struct VerticalGridConfig {
  // Number of full levels. Required (ICON4Py has no default); at least 1, and at least 2 for the
  // stretched coordinate (lowest_layer_thickness > 0.01) and for metric_state.
  std::int32_t num_levels = 0;
  // max_lay_thckn and htop_thcknlimit: no layer below the height limit is thicker than the
  // maximal thickness (applied only if 2 lowest_layer_thickness < maximal < limit / 2).
  double maximal_layer_thickness = 25000.0;
  double top_height_limit_for_maximal_layer_thickness = 15000.0;
  double lowest_layer_thickness = 50.0;      // min_lay_thckn; <= 0.01 selects uniform layers
  double model_top_height = 23500.0;         // top_height
  double flat_height = 16000.0;              // above it coordinate surfaces are flat
  double stretch_factor = 1.0;               // stretch_fac
  double rayleigh_damping_height = 45000.0;  // damp_height: Rayleigh damping of w above it
  double htop_moist_proc = 22500.0;          // no moist physics above it
  // SLEVE: decay of the large-scale (1) and small-scale (2) topography with height.
  double SLEVE_decay_scale_1 = 4000.0;
  double SLEVE_decay_scale_2 = 2500.0;
  double SLEVE_decay_exponent = 1.2;
  // The layer-thickness limiter of ICON's init_vert_coord (not namelist parameters; ICON4Py
  // spells them with a leading underscore).
  double SLEVE_minimum_layer_thickness_1 = 100.0;
  double SLEVE_minimum_relative_layer_thickness_1 = 1.0 / 3.0;
  double SLEVE_minimum_layer_thickness_2 = 500.0;
  double SLEVE_minimum_relative_layer_thickness_2 = 0.5;
};

struct VerticalGrid {
  VerticalGridConfig config;
  // (num_levels + 1): interface heights over flat ground, vct_a[0] the model top, and ICON's
  // vct_b = exp(-vct_a / 5000) (used only to initialise w).
  std::vector<double> vct_a, vct_b;
  // Zero-based interface indices, as ICON4Py's VerticalGrid gives them:
  // - end_index_of_damping_layer: the lowest interface with vct_a >= rayleigh_damping_height (0
  //   when the damping height is above the model top); full levels 0..end_index_of_damping_layer
  //   are damped, so kernels loop to the exclusive end end_index_of_damping_layer + 1 (the
  //   granule's vertical_end, ICON's nrdmax).
  // - nflatlev: the lowest interface with vct_a >= flat_height (0 if flat_height is above the
  //   top); interfaces 0..nflatlev are flat (z_ifc = vct_a everywhere).
  // - kstart_moist: the first full level whose mid-height 0.5 (vct_a[k] + vct_a[k+1]) is below
  //   htop_moist_proc.
  std::int32_t end_index_of_damping_layer = 0, nflatlev = 0, kstart_moist = 0;
  std::int32_t num_levels() const { return config.num_levels; }
};

// vct_a and vct_b computed from the configuration (ICON4Py's _compute_vct_a_and_vct_b), then the
// indices. InvalidArgument, naming the field (config.num_levels, ...), for an inconsistent
// configuration.
VerticalGrid vertical_grid(const VerticalGridConfig& config);
// The same from given vct_a / vct_b (ICON4Py's VerticalGrid(config, vct_a, vct_b), e.g. a table
// read from a file); both must hold num_levels + 1 finite values (vct_b may be empty).
VerticalGrid vertical_grid(const VerticalGridConfig& config, std::vector<double> vct_a,
                           std::vector<double> vct_b);

// A Gaussian mountain h(d) = mount_height exp(-(d / mount_width)^2), d the great-circle distance
// (metres, on the grid's sphere) from the centre (mount_lat, mount_lon, radians). ICON4Py's
// gaussian_hill names, on the sphere. The defaults (4 km, 400 km, in the Alps) are steep enough at
// R2B4 (about 160 km between cell centres) for truly horizontal temperature diffusion.
struct GaussianMountain {
  double mount_height = 4000.0;
  double mount_width = 400.0e3;
  double mount_lat = 46.0 / 180.0 * 3.141592653589793;
  double mount_lon = 10.0 / 180.0 * 3.141592653589793;
};
// (num_cells): the mountain at the cell centres. InvalidArgument for a non-finite or negative
// height, or a width that is not positive and finite.
std::vector<double> synthetic_orography(const Grid& grid, const GaussianMountain& mountain = {});

struct MetricOptions {
  // ICON4Py's MetricsConfig (and ICON's nonhydrostatic_nml) defaults: truly horizontal
  // temperature diffusion where the averaged slope reaches thslp_zdiffu or the averaged height
  // difference to a neighbour reaches thhgtd_zdiffu (metres).
  double thslp_zdiffu = 0.025;
  double thhgtd_zdiffu = 200.0;
  // ICON4Py's InterpolationConfig (ICON's divavg_cntrwgt): the central weight of c_bln_avg.
  double divergence_averaging_central_cell_weight = 0.5;
};

// The metric fields, row-major, shapes in the comments (ICON4Py's names; the granule's
// DiffusionMetricState is theta_ref_mc, wgtfac_c, zd_intcoef, zd_vertoffset, zd_diffcoef).
struct MetricState {
  std::int32_t num_cells = 0, num_levels = 0;
  std::vector<double> smoothed_topography;  // (num_cells): 25 nabla2 smoothing steps
  std::vector<double> z_ifc;                // (num_cells, num_levels + 1): interface heights
  std::vector<double> z_mc;                 // (num_cells, num_levels): full-level heights
  // (num_cells, num_levels): the reference atmosphere at z_mc.
  std::vector<double> theta_ref_mc, exner_ref_mc, rho_ref_mc;
  // (num_cells, num_levels + 1): w_ic(k) = wgtfac_c(k) f(k) + (1 - wgtfac_c(k)) f(k - 1)
  // interpolates full-level f to interface k (extrapolates at k = 0 and k = num_levels).
  std::vector<double> wgtfac_c;
  std::vector<double> c_bln_avg;  // (num_cells, 4): mass-conserving average over C2E2CO
  // (num_cells, num_levels): the steepest slope and height difference to a neighbour, averaged
  // with c_bln_avg; max_nbhgt (num_cells): the highest lowest-level z_mc of the C2E2C neighbours.
  std::vector<double> maxslp_avg, maxhgtd_avg, max_nbhgt;
  // Truly horizontal temperature diffusion, zero wherever mask_hdiff is 0:
  // zd_diffcoef (num_cells, num_levels); zd_intcoef (num_cells, 3, num_levels) and zd_vertoffset
  // (num_cells, 3, num_levels): neighbour i = C2E2C[c][i] is read at levels
  // k + zd_vertoffset and k + zd_vertoffset + 1 (both in [0, num_levels)), weighted
  // zd_intcoef and 1 - zd_intcoef, to find its value at the height z_mc[c][k].
  std::vector<double> zd_diffcoef, zd_intcoef;
  std::vector<std::int32_t> zd_vertoffset;
  // (num_cells, num_levels): ICON's mask_hdiff, the (cell, level) points with the correction
  // (ICON4Py 0.4.1's DiffusionMetricState does not carry it; it is the level range [kstart, kend)
  // of compute_diffusion_metrics).
  std::vector<std::uint8_t> mask_hdiff;
};

// The metric fields as ICON4Py's MetricsFieldsFactory derives them (one process, no halos) from
// the grid, its interpolation coefficients (geofac_n2s, inverse_dual_edge_lengths), the vertical
// grid and the topography (num_cells, metres). InvalidArgument naming the argument for a
// topography of the wrong size or with non-finite values, coefficients that do not belong to the
// grid, a vertical grid with fewer than 2 levels, and for the configurations ICON4Py refuses
// (the model top too low for the thickness limiter, interface max(0, nflatlev - 1) no longer
// flat).
MetricState metric_state(const Grid& grid, const InterpolationCoefficients& coefficients,
                         const VerticalGrid& vertical, const std::vector<double>& topography,
                         const MetricOptions& options = {});

// The global grid RnBk on a sphere of `radius`. Refuses (InvalidArgument, naming the argument)
// n < 1, k < 0, radius not positive and finite, and grids whose sizes (up to the sparse offsets
// 4 * num_edges) do not fit int32. R2B4 takes a few tens of milliseconds, R2B6 under a second.
Grid icosahedral_grid(int n, int k, double radius = kEarthRadius);

// ---------------------------------------------------------------------------------------------
// The granule: ICON's horizontal diffusion (mo_nh_diffusion, hdiff_order 5: Smagorinsky plus
// fourth-order background), as ICON4Py's Diffusion runs it: constructed once (init) with the
// grid, the configuration, the vertical grid, the metric, interpolation and geometry fields,
// then run() every dynamics step on the prognostic and diagnostic fields, in place. The
// equations are at the top of src/diffusion/math.hpp; the names below are ICON4Py's.
// ---------------------------------------------------------------------------------------------

// ICON4Py's DiffusionConfig (icon4py.model.atmosphere.diffusion.DiffusionConfig) with its
// defaults; enums as ICON's integers. Only what ICON4Py implements is accepted: diffusion_type 5,
// type_vn_diffu 1, type_t_diffu 2, shear_type 0-2, no 3-D or w Smagorinsky (checked at init,
// InvalidArgument naming the option).
struct DiffusionConfig {
  int diffusion_type = 5;                // hdiff_order
  bool apply_to_vertical_wind = true;    // lhdiff_w
  bool apply_to_horizontal_wind = true;  // lhdiff_vn
  bool apply_to_temperature = true;      // lhdiff_temp
  bool apply_smag_diff_to_vertical_wind = false;
  bool compute_3d_smag_coeff = false;
  int type_vn_diffu = 1;  // diamond stencil on vertices
  int type_t_diffu = 2;   // div(K grad T)
  double hdiff_efdt_ratio = 36.0;
  double hdiff_w_efdt_ratio = 15.0;
  // enh_smag_fac(z): constant smagorinski_scaling_factor below height, linear to factor2 at
  // height2, then quadratic through factor3 at height3 to factor4 at height4.
  double smagorinski_scaling_factor = 0.015;
  // 9086.25... = sqrt(1600 (1600 + 50000)), ICON4Py's defaults written out.
  double smagorinski_scaling_factor2 = 2e-6 * (1600.0 + 25000.0 + 9086.253353280437);
  double smagorinski_scaling_factor3 = 0.0;
  double smagorinski_scaling_factor4 = 1.0;
  double smagorinski_scaling_height = 32500.0;
  double smagorinski_scaling_height2 = 1600.0 + 50000.0 + 9086.253353280437;
  double smagorinski_scaling_height3 = 50000.0;
  double smagorinski_scaling_height4 = 90000.0;
  bool apply_zdiffusion_t = true;  // truly horizontal temperature diffusion over steep terrain
  int ndyn_substeps = 5;
  double temperature_boundary_diffusion_denominator = 135.0;
  double velocity_boundary_diffusion_denominator = 200.0;
  double max_nudging_coefficient = 0.1;  // 5 (dynamics-to-physics ratio) x 0.02
  int shear_type = 0;                    // itype_sher: 0, 1 (div_ic, hdef_ic), 2 (also dwdx, dwdy)
  int iforcing = 0;
  double a_hshr = 1.0;
  bool loutshs = false;
};

// The vertical grid as the granule uses it: vct_a (num_levels + 1 interface heights, from the
// model top down, metres) and the zero-based index of the last level of the Rayleigh damping
// layer (ICON4Py's VerticalGrid.end_index_of_damping_layer).
struct DiffusionVerticalGrid {
  std::int32_t num_levels = 0;
  std::vector<double> vct_a;
  std::int32_t end_index_of_damping_layer = 0;
};

// ICON4Py's DiffusionMetricState, row-major with the level last: theta_ref_mc (cells, levels),
// wgtfac_c (cells, levels + 1), zd_intcoef and zd_vertoffset (cells, 3, levels): the
// neighbour's level offset and weight of the truly horizontal temperature diffusion, zd_diffcoef
// (cells, levels): 0 where that correction is off.
struct DiffusionMetricState {
  std::vector<double> theta_ref_mc, wgtfac_c, zd_intcoef, zd_diffcoef;
  std::vector<std::int32_t> zd_vertoffset;
};

// ICON4Py's DiffusionInterpolationState: e_bln_c_s, geofac_div (cells, 3), rbf_coeff_1/2
// (vertices, 6), geofac_n2s, geofac_grg_x/y (cells, 4), nudgecoeff_e (edges).
struct DiffusionInterpolationState {
  std::vector<double> e_bln_c_s, rbf_coeff_1, rbf_coeff_2, geofac_div, geofac_n2s, geofac_grg_x,
      geofac_grg_y, nudgecoeff_e;
};

// ICON4Py's EdgeParams as the granule uses them (edges; the *_vert fields (edges, 4) over
// E2C2V: the edge's primal and dual unit normals in the local (zonal, meridional) frame of each
// diamond vertex), and CellParams (area (cells), mean_cell_area).
struct DiffusionEdgeParams {
  std::vector<double> tangent_orientation, inverse_primal_edge_lengths,
      inverse_vertex_vertex_lengths, inverse_dual_edge_lengths, edge_areas;
  std::vector<double> primal_normal_vert_x, primal_normal_vert_y, dual_normal_vert_x,
      dual_normal_vert_y;
};
struct DiffusionCellParams {
  std::vector<double> area;
  double mean_cell_area = 0;
};

// The granule's inputs computed by sciproxy from a grid (ICON4Py's defaults: RBF, nudging,
// arc lengths on grid.radius), for callers who do not bring ICON's own.
DiffusionInterpolationState interpolation_state(const Grid& grid,
                                                const InterpolationCoefficients& c);
DiffusionEdgeParams edge_params(const Grid& grid, const InterpolationCoefficients& c);
DiffusionCellParams cell_params(const Grid& grid);

// Every input of the granule computed by sciproxy for a grid and a number of levels, as
// ICON4Py's factories compute them: the interpolation and geometry fields above, ICON4Py's
// vertical grid (default: 23.5 km top, the damping layer from 12.5 km so that the upper damping
// of w runs), and the metric fields over a Gaussian mountain (synthetic_orography, metric_state)
// whose steep slopes switch the truly horizontal temperature diffusion on.
struct ComputedInputsOptions {
  VerticalGridConfig vertical = [] {
    VerticalGridConfig c;
    c.rayleigh_damping_height = 12500.0;
    return c;
  }();
  GaussianMountain mountain;
  MetricOptions metrics;
};
struct DiffusionInputs {
  Grid grid;
  DiffusionConfig config;
  DiffusionVerticalGrid vertical;
  VerticalGrid vertical_grid;  // the whole of it (vct_b, its configuration, nflatlev)
  DiffusionMetricState metrics;
  DiffusionInterpolationState interpolation;
  DiffusionEdgeParams edges;
  DiffusionCellParams cells;
};
DiffusionInputs computed_inputs(Grid grid, int num_levels,
                                const ComputedInputsOptions& options = {});

// A state to diffuse, row-major (entity, level), float64: a zonal wind of 20 m/s cos(lat) with
// uniform noise of +-1 m/s, w noise of +-0.1 m/s, theta_v at theta_ref_mc +-0.5 K with cold pools
// (8 K colder) on every 13th cell's two lowest levels, exner from 0.7 to 0.95 downwards;
// diagnostics zero. The same for a seed on every machine.
struct DiffusionState {
  std::vector<double> vn, w, theta_v, exner, hdef_ic, div_ic, dwdx, dwdy;
};
DiffusionState synthetic_state(const DiffusionInputs& inputs, std::uint64_t seed);
// The mean grid spacing sqrt(mean cell area) in metres, and ICON4Py's rule of thumb for a time
// step where the Smagorinsky branch is on: 9 s per km.
double smagorinsky_dtime(const DiffusionInputs& inputs);

// How the caller's (entity, level) fields lie in memory. LevelsContiguous: row-major (entity,
// level), numpy's C order as ICON4Py allocates them. EntitiesContiguous: Fortran's (nproma,
// nlev) with one block, ICON's own arrays: the entity index runs fastest.
enum class FieldLayout { LevelsContiguous, EntitiesContiguous };

// A row-major (n, nk) float64 field copied into a layout's order and precision, and back: for
// callers who build fields one way and run the granule with the other.
template <class Real>
std::vector<Real> to_layout(const std::vector<double>& x, std::int64_t n, int nk,
                            FieldLayout layout) {
  std::vector<Real> y(x.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (int k = 0; k < nk; ++k)
      y[layout == FieldLayout::LevelsContiguous ? i * nk + k : k * n + i] =
          static_cast<Real>(x[i * nk + k]);
  return y;
}
template <class Real>
std::vector<double> from_layout(const std::vector<Real>& y, std::int64_t n, int nk,
                                FieldLayout layout) {
  std::vector<double> x(y.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (int k = 0; k < nk; ++k)
      x[i * nk + k] = y[layout == FieldLayout::LevelsContiguous ? i * nk + k : k * n + i];
  return x;
}

// The fields of one run(), the caller's memory, updated in place. vn (edges, levels); w,
// div_ic, hdef_ic, dwdx, dwdy (cells, levels + 1); theta_v, exner (cells, levels). Real is the
// precision the granule was initialised with (DiffusionOptions::single_precision).
template <class Real>
struct DiffusionPrognosticFields {
  Real* vn = nullptr;
  Real* w = nullptr;
  Real* theta_v = nullptr;
  Real* exner = nullptr;
};
template <class Real>
struct DiffusionDiagnosticFields {
  Real* hdef_ic = nullptr;
  Real* div_ic = nullptr;
  Real* dwdx = nullptr;
  Real* dwdy = nullptr;
};

struct DiffusionOptions {
  std::string device = "auto";  // reference, cpu, cuda[:N], auto
  int nparallel = 0;            // OpenMP threads of the cpu backend; 0: all
  FieldLayout layout = FieldLayout::LevelsContiguous;
  bool single_precision = false;  // float32 fields and coefficients (ICON's vpfloat everywhere)
  // Check every prognostic field for NaN and infinity before a run (InvalidArgument naming the
  // field, its first bad index). One extra read of the fields: off for benchmarks.
  bool check_finite = true;
  // When not empty: every run writes Serialbox-style savepoints (sciproxy/core/savepoint.hpp)
  // of its fields into this existing directory, "call-diffusion-init" before and
  // "call-diffusion-exit" after, as <dir>/<savepoint_prefix>_<savepoint>_<n>.nc, metadata
  // linit, dtime, date (the call's wall-clock time) and call (its number from 0). Compare two
  // runs' files with `sciproxy verify`.
  std::string savepoint_dir;
  std::string savepoint_prefix = "diffusion";
  // Under MPI (docs/kernels/diffusion.md, "Under MPI"): the ranks of comm share the grid. Every
  // rank passes the same global grid and inputs to init; each rank computes on its part of the
  // grid with ICON's two cell halo lines and exchanges halos where ICON4Py's granule does.
  // run() takes either the same global fields on every rank (rank_local_fields false): the
  // whole grid's results come back on every rank, equal bit for bit to the run of one process;
  // or, as ICON passes them, each rank's own fields (rank_local_fields true) over its local
  // entities in Diffusion::global_index's order (owned, then halo levels): afterwards vn, w,
  // theta_v and exner equal the one-process run's on every local entry, halos included, and
  // the diagnostics on the owned cells. cell_owner: the rank of every global cell (num_cells
  // values in [0, comm size)), as ICON gives its own decomposition; empty: METIS
  // (partition_cells).
  // Ranks that disagree on the grid, the inputs' sizes or cell_owner, and a bad cell_owner,
  // make init throw InvalidArgument on every rank. Only global grids, host backends (reference,
  // cpu) and no savepoints under a communicator of several ranks.
  Communicator comm;
  std::vector<std::int32_t> cell_owner;
  bool rank_local_fields = false;
  // ICON's own form: when set, the grid and every input init takes are this rank's local ones
  // (its entities in its own numbering, the owned ones first, then the halos as ICON orders
  // them, the grid's zones LOCAL, HALO and HALO_LEVEL_2 marking them; a global grid's halo of
  // two cell lines), rank_local_fields must be true, and cell_owner is not used. For each local
  // entity: its index in the global grid and the rank owning it. The ranks ask the owners of
  // their halo entries for them by global index at init (one exchange), so the halos need not
  // be ICON4Py's exactly, only deep enough for the stencils and owned by whoever is named.
  struct LocalDecomposition {
    std::vector<std::int32_t> cell_global_index, edge_global_index, vertex_global_index;
    std::vector<std::int32_t> cell_owner, edge_owner, vertex_owner;
  };
  std::optional<LocalDecomposition> local_decomposition;
};

// Whether this library was built with METIS (the build option SCIPROXY_METIS).
bool metis_compiled();
// The owner of every cell when the grid is split into num_parts parts by METIS
// (METIS_PartGraphKway on the cells' edge adjacency C2E2C, as ICON4Py's SimpleMetisDecomposer):
// num_cells values in [0, num_parts), the same on every machine for the same grid. num_parts 1:
// all 0. NotCompiled without METIS; InvalidArgument for num_parts < 1 or > num_cells.
std::vector<std::int32_t> partition_cells(const Grid& grid, int num_parts);
// The owner of every cell when the grid is cut into num_parts bands of latitude with equal
// numbers of cells, north to south (ties by cell index): a partition without METIS, with longer
// boundaries. InvalidArgument for num_parts < 1 or > num_cells.
std::vector<std::int32_t> latitude_bands(const Grid& grid, int num_parts);

class Diffusion {
 public:
  // init: checks every input against the grid and the levels (InvalidArgument naming it),
  // copies the coefficients to the backend's memory, computes the level-dependent factors.
  Diffusion(const Grid& grid, const DiffusionConfig& config, const DiffusionVerticalGrid& vertical,
            const DiffusionMetricState& metrics, const DiffusionInterpolationState& interpolation,
            const DiffusionEdgeParams& edges, const DiffusionCellParams& cells,
            const DiffusionOptions& options = {});
  ~Diffusion();
  Diffusion(Diffusion&&) noexcept;
  Diffusion& operator=(Diffusion&&) noexcept;

  // One diffusion step of dtime seconds (> 0), ICON4Py's Diffusion.run; initial_run is ICON's
  // linit (the extra call before the first step: K4/3 efdt background, no Smagorinsky offset).
  void run(DiffusionDiagnosticFields<double>& diagnostic,
           DiffusionPrognosticFields<double>& prognostic, double dtime, bool initial_run = false);
  void run(DiffusionDiagnosticFields<float>& diagnostic,
           DiffusionPrognosticFields<float>& prognostic, double dtime, bool initial_run = false);

  // ICON's timer table of every run so far: one region per stencil group, and "init".
  sciproxy::Timers& timers();
  std::string device() const;  // the backend that runs, e.g. "cpu"
  std::int32_t num_levels() const;
  // The grid the granule runs on: under a communicator of several ranks, this rank's local grid
  // (owned entities, then the halo levels; docs/kernels/diffusion.md, "Under MPI").
  const Grid& grid() const;
  // This rank's local entities of a dimension: the global index of each (owned first, then
  // halo level 1, 2, and 3 for edges, each ascending), and its halo level (0: owned). The order
  // of rank_local_fields. On one rank: 0 .. n - 1, all owned.
  std::vector<std::int32_t> global_index(Dimension dim) const;
  std::vector<std::int8_t> halo_level(Dimension dim) const;
  // Bytes one run moves at least (each field read or written once) for the roofline; under MPI
  // the whole grid's (as are working_set_bytes and flops_per_run).
  double bytes_per_run() const;
  // The arrays a run touches (fields, their temporaries, coefficients and tables): when they fit
  // the last-level cache, repeated runs read them from there, and the roofline says so.
  double working_set_bytes() const;
  // Floating-point operations of one run as the stencils are written (math.hpp), counted per
  // point: RBF 24 per vertex and level (twice), Smagorinsky and nabla2 59 and the vn update 30
  // per edge and level, turbulence 32, nabla2 w and its gradients 36, theta 26 per cell and level.
  double flops_per_run() const;
  double init_seconds() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace sciproxy::diffusion
