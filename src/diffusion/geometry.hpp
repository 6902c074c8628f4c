// Geometry on the sphere shared by the grid generator, the grid-file reader and the limited-area
// cut-outs (internal): vector helpers and the derived geometry of a Grid (areas, lengths,
// distances, normals, orientations) from its positions and tables. The formulas are at the top of
// src/diffusion/grid_generator.cpp; here they also cover missing neighbours (-1) at the lateral
// boundary of a limited-area grid:
//   dual_edge_length of a boundary edge: the clipped dual edge, its one cell centre to the edge
//     midpoint (as icon-grid-generator's limited-area files); edge_cell_length of the missing
//     cell: 0
//   primal normal of a boundary edge: orthogonal to the edge, out of E2C[0] (or into E2C[1])
//   dual area of a vertex whose ring of cells is not closed: the clipped dual cell, the sum of
//     the triangles (vertex, edge midpoint, cell centre) over its edges and their cells
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion::detail {

using Vec = std::array<double, 3>;

inline Vec operator+(const Vec& a, const Vec& b) {
  return {a[0] + b[0], a[1] + b[1], a[2] + b[2]};
}
inline Vec operator-(const Vec& a, const Vec& b) {
  return {a[0] - b[0], a[1] - b[1], a[2] - b[2]};
}
inline Vec operator*(double s, const Vec& a) {
  return {s * a[0], s * a[1], s * a[2]};
}
inline double dot(const Vec& a, const Vec& b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
inline Vec cross(const Vec& a, const Vec& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
inline double norm(const Vec& a) {
  return std::sqrt(dot(a, a));
}
inline Vec normalize(const Vec& a) {
  return (1.0 / norm(a)) * a;
}
// Arc between unit vectors (radians), accurate at small angles.
inline double angle(const Vec& a, const Vec& b) {
  return std::atan2(norm(cross(a, b)), dot(a, b));
}
// Signed spherical excess of (a, b, c): positive when counter-clockwise seen from outside.
inline double excess(const Vec& a, const Vec& b, const Vec& c) {
  return 2.0 * std::atan2(dot(a, cross(b, c)), 1.0 + dot(a, b) + dot(b, c) + dot(c, a));
}
inline Vec at(const std::vector<double>& xyz, std::int64_t i) {
  return {xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2]};
}
inline void put(std::vector<double>& xyz, std::int64_t i, const Vec& v) {
  xyz[3 * i] = v[0], xyz[3 * i + 1] = v[1], xyz[3 * i + 2] = v[2];
}
inline int sign(double x) {
  return x >= 0 ? 1 : -1;
}
inline void lat_lon(const Vec& p, double& lat, double& lon) {
  lat = std::atan2(p[2], std::hypot(p[0], p[1]));
  lon = std::atan2(p[1], p[0]);
}
inline Vec from_lat_lon(double lat, double lon) {
  return {std::cos(lat) * std::cos(lon), std::cos(lat) * std::sin(lon), std::sin(lat)};
}

// Refuses (InvalidArgument naming `argument`) a grid whose arrays do not match its counts or whose
// tables hold indices out of range (-1 only where a neighbour may be missing: not in C2E, C2V,
// E2V).
void require_complete(const Grid& g, const char* argument);

// C2E2CO and E2C2V from the other tables, as ICON4Py's GridManager derives them
// (_get_derived_connectivities): C2E2CO = (the cell, C2E2C); E2C2V = (E2V, then the first two
// entries of C2V[E2C[0]] ++ C2V[E2C[1]] that are not on the edge, a missing cell giving -1s).
void derive_tables(Grid& g);

// Which derived fields compute_geometry fills; the others are left as they are.
struct GeometryFields {
  bool cell_area = true, dual_area = true, edge_length = true, dual_edge_length = true;
  bool edge_cell_length = true, edge_vert_length = true;
  bool cart_normals = true;       // primal_cart_normal and dual_cart_normal
  bool normal_components = true;  // primal_normal_x/y, dual_normal_x/y
  bool tangent_orientation = true, edge_orientation = true, vertex_edge_orientation = true;
};

// Fills the chosen fields from the tables, vertex_center, cell_center and edge_center (with
// edge_center_lat/lon) and radius; the normals' components and every orientation use the
// cartesian normals (computed or given).
void compute_geometry(Grid& g, const GeometryFields& fields = {});

// ICON4Py's _rotate_latlon, and its _weighting_factors: the three neighbour weights that, with
// the central weight wgt_loc, reproduce the centre's position in a frame rotated to put it on
// the equator (interpolation_fields.py; used by e_bln_c_s and the metrics' cell averages).
void rotate_latlon(double lat, double lon, double pollat, double pollon, double& rlat,
                   double& rlon);
std::array<double, 3> weighting_factors(const std::array<double, 3>& ytemp,
                                        const std::array<double, 3>& xtemp, double yloc,
                                        double xloc, double wgt_loc);

}  // namespace sciproxy::diffusion::detail
