// The derived geometry of a Grid on the sphere (areas, lengths, distances, normals,
// orientations) from its positions and tables, shared by the generator, the grid-file reader and
// the limited-area cut-outs. Formulas: src/diffusion/grid_generator.cpp and geometry.hpp.
#include "diffusion/geometry.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "sciproxy/core/error.hpp"

namespace sciproxy::diffusion::detail {

namespace {

// The clipped dual cell of a vertex whose ring of cells is open (a lateral boundary): the
// triangles (vertex, edge midpoint, cell centre) over its edges and each edge's cells.
double clipped_dual_excess(const Grid& g, std::int64_t v) {
  const Vec p = at(g.vertex_center, v);
  double sum = 0;
  for (int i = 0; i < 6; ++i) {
    const std::int32_t e = g.v2e[6 * v + i];
    if (e < 0) continue;
    const Vec m = at(g.edge_center, e);
    for (int j = 0; j < 2; ++j) {
      const std::int32_t c = g.e2c[2 * std::int64_t{e} + j];
      if (c >= 0) sum += std::abs(excess(p, m, at(g.cell_center, c)));
    }
  }
  return sum;
}

}  // namespace

void require_complete(const Grid& g, const char* argument) {
  const std::size_t nc = g.num_cells, ne = g.num_edges, nv = g.num_vertices;
  require(nc > 0 && ne > 0 && nv > 0, argument, "a grid with cells, edges and vertices",
          fmt::format("{} cells, {} edges, {} vertices", nc, ne, nv));
  struct Field {
    const char* name;
    std::size_t size, expected;
  };
  const Field fields[] = {
      {"c2e", g.c2e.size(), 3 * nc},
      {"c2v", g.c2v.size(), 3 * nc},
      {"c2e2c", g.c2e2c.size(), 3 * nc},
      {"e2c", g.e2c.size(), 2 * ne},
      {"e2v", g.e2v.size(), 2 * ne},
      {"v2e", g.v2e.size(), 6 * nv},
      {"v2c", g.v2c.size(), 6 * nv},
      {"edge_orientation", g.edge_orientation.size(), 3 * nc},
      {"tangent_orientation", g.tangent_orientation.size(), ne},
      {"vertex_edge_orientation", g.vertex_edge_orientation.size(), 6 * nv},
      {"cell_lat", g.cell_lat.size(), nc},
      {"cell_lon", g.cell_lon.size(), nc},
      {"cell_center", g.cell_center.size(), 3 * nc},
      {"vertex_lat", g.vertex_lat.size(), nv},
      {"vertex_lon", g.vertex_lon.size(), nv},
      {"vertex_center", g.vertex_center.size(), 3 * nv},
      {"edge_center_lat", g.edge_center_lat.size(), ne},
      {"edge_center_lon", g.edge_center_lon.size(), ne},
      {"edge_center", g.edge_center.size(), 3 * ne},
      {"cell_area", g.cell_area.size(), nc},
      {"dual_area", g.dual_area.size(), nv},
      {"edge_length", g.edge_length.size(), ne},
      {"dual_edge_length", g.dual_edge_length.size(), ne},
      {"edge_cell_length", g.edge_cell_length.size(), 2 * ne},
      {"edge_vert_length", g.edge_vert_length.size(), 2 * ne},
      {"primal_cart_normal", g.primal_cart_normal.size(), 3 * ne},
      {"dual_cart_normal", g.dual_cart_normal.size(), 3 * ne},
      {"primal_normal_x", g.primal_normal_x.size(), ne},
      {"primal_normal_y", g.primal_normal_y.size(), ne},
      {"dual_normal_x", g.dual_normal_x.size(), ne},
      {"dual_normal_y", g.dual_normal_y.size(), ne},
      {"cell_refin_ctrl", g.cell_refin_ctrl.size(), nc},
      {"edge_refin_ctrl", g.edge_refin_ctrl.size(), ne},
      {"vertex_refin_ctrl", g.vertex_refin_ctrl.size(), nv},
  };
  for (const Field& f : fields)
    if (f.size != f.expected)
      throw_invalid_argument(argument, fmt::format("{} with {} entries", f.name, f.expected),
                             fmt::format("{}", f.size));
  // Every index within its range; -1 (missing) only where a neighbour may be missing.
  struct Table {
    const char* name;
    const std::vector<std::int32_t>& t;
    std::size_t targets;
    bool complete;
  };
  const Table tables[] = {{"c2e", g.c2e, ne, true},      {"c2v", g.c2v, nv, true},
                          {"c2e2c", g.c2e2c, nc, false}, {"e2c", g.e2c, nc, false},
                          {"e2v", g.e2v, nv, true},      {"v2e", g.v2e, ne, false},
                          {"v2c", g.v2c, nc, false}};
  for (const Table& t : tables)
    for (std::size_t i = 0; i < t.t.size(); ++i) {
      const std::int32_t x = t.t[i];
      if (x < (t.complete ? 0 : -1) || (x >= 0 && static_cast<std::size_t>(x) >= t.targets))
        throw_invalid_argument(
            argument,
            fmt::format("{} indices in {}..{}", t.name, t.complete ? 0 : -1, t.targets - 1),
            fmt::format("{} at entry {}", x, i));
    }
}

void derive_tables(Grid& g) {
  const std::int64_t nc = g.num_cells, ne = g.num_edges;
  g.c2e2co.resize(4 * nc);
  for (std::int64_t c = 0; c < nc; ++c) {
    g.c2e2co[4 * c] = static_cast<std::int32_t>(c);
    for (int i = 0; i < 3; ++i) g.c2e2co[4 * c + 1 + i] = g.c2e2c[3 * c + i];
  }
  g.e2c2v.resize(4 * ne);
  for (std::int64_t e = 0; e < ne; ++e) {
    std::int32_t flat[6];
    for (int j = 0; j < 2; ++j) {
      const std::int32_t c = g.e2c[2 * e + j];
      for (int i = 0; i < 3; ++i) flat[3 * j + i] = c >= 0 ? g.c2v[3 * std::int64_t{c} + i] : -1;
    }
    const std::int32_t v0 = g.e2v[2 * e], v1 = g.e2v[2 * e + 1];
    g.e2c2v[4 * e] = v0, g.e2c2v[4 * e + 1] = v1;
    g.e2c2v[4 * e + 2] = g.e2c2v[4 * e + 3] = -1;
    int found = 0;
    for (int i = 0; i < 6 && found < 2; ++i)
      if (flat[i] != v0 && flat[i] != v1) g.e2c2v[4 * e + 2 + found++] = flat[i];
  }
}

void compute_geometry(Grid& g, const GeometryFields& f) {
  const std::int64_t nc = g.num_cells, ne = g.num_edges, nv = g.num_vertices;
  const double radius = g.radius, r2 = radius * radius;

  if (f.cell_area) {
    g.cell_area.resize(nc);
    for (std::int64_t c = 0; c < nc; ++c)
      g.cell_area[c] =
          r2 * excess(at(g.vertex_center, g.c2v[3 * c]), at(g.vertex_center, g.c2v[3 * c + 1]),
                      at(g.vertex_center, g.c2v[3 * c + 2]));
  }
  if (f.dual_area) {
    g.dual_area.assign(nv, 0.0);
    for (std::int64_t v = 0; v < nv; ++v) {
      int cells = 0, edges = 0;
      bool gap = false;
      for (int i = 0; i < 6; ++i) {
        if (g.v2c[6 * v + i] >= 0) {
          gap = gap || cells < i;
          ++cells;
        }
        edges += g.v2e[6 * v + i] >= 0;
      }
      // A closed ring (as many cells as edges, missing entries last): the fan over the centres.
      if (!gap && cells == edges && cells >= 3) {
        const Vec p = at(g.vertex_center, v);
        double sum = 0;
        for (int i = 0; i < cells; ++i)
          sum += excess(p, at(g.cell_center, g.v2c[6 * v + i]),
                        at(g.cell_center, g.v2c[6 * v + (i + 1) % cells]));
        g.dual_area[v] = r2 * std::abs(sum);
      } else {
        g.dual_area[v] = r2 * clipped_dual_excess(g, v);
      }
    }
  }

  auto resize = [](bool on, std::vector<double>& x, std::int64_t n) {
    if (on) x.resize(n);
  };
  resize(f.edge_length, g.edge_length, ne);
  resize(f.dual_edge_length, g.dual_edge_length, ne);
  resize(f.edge_cell_length, g.edge_cell_length, 2 * ne);
  resize(f.edge_vert_length, g.edge_vert_length, 2 * ne);
  resize(f.cart_normals, g.primal_cart_normal, 3 * ne);
  resize(f.cart_normals, g.dual_cart_normal, 3 * ne);
  resize(f.normal_components, g.primal_normal_x, ne);
  resize(f.normal_components, g.primal_normal_y, ne);
  resize(f.normal_components, g.dual_normal_x, ne);
  resize(f.normal_components, g.dual_normal_y, ne);
  if (f.tangent_orientation) g.tangent_orientation.resize(ne);
  for (std::int64_t e = 0; e < ne; ++e) {
    const Vec v0 = at(g.vertex_center, g.e2v[2 * e]), v1 = at(g.vertex_center, g.e2v[2 * e + 1]);
    const std::int32_t i0 = g.e2c[2 * e], i1 = g.e2c[2 * e + 1];
    const Vec m = at(g.edge_center, e);
    const Vec c0 = i0 >= 0 ? at(g.cell_center, i0) : m, c1 = i1 >= 0 ? at(g.cell_center, i1) : m;
    if (f.edge_length) g.edge_length[e] = radius * angle(v0, v1);
    if (f.dual_edge_length) g.dual_edge_length[e] = radius * angle(c0, c1);
    if (f.edge_cell_length) {
      g.edge_cell_length[2 * e] = radius * angle(m, c0);
      g.edge_cell_length[2 * e + 1] = radius * angle(m, c1);
    }
    if (f.edge_vert_length) {
      g.edge_vert_length[2 * e] = radius * angle(m, v0);
      g.edge_vert_length[2 * e + 1] = radius * angle(m, v1);
    }
    if (f.cart_normals) {
      // The normal is orthogonal to the edge's plane (m x (v1 - v0) lies in the tangent plane and
      // is orthogonal to the edge at m), turned to point from E2C[0] to E2C[1].
      Vec normal = normalize(cross(m, v1 - v0));
      if (dot(normal, c1 - c0) < 0) normal = -1.0 * normal;
      put(g.primal_cart_normal, e, normal);
      put(g.dual_cart_normal, e, cross(normal, m));
    }
    const Vec normal = at(g.primal_cart_normal, e), tangent = at(g.dual_cart_normal, e);
    if (f.tangent_orientation) g.tangent_orientation[e] = sign(dot(tangent, v1 - v0));
    if (f.normal_components) {
      const double lat = g.edge_center_lat[e], lon = g.edge_center_lon[e];
      const Vec e_lon = {-std::sin(lon), std::cos(lon), 0.0};
      const Vec e_lat = {-std::sin(lat) * std::cos(lon), -std::sin(lat) * std::sin(lon),
                         std::cos(lat)};
      g.primal_normal_x[e] = dot(normal, e_lon), g.primal_normal_y[e] = dot(normal, e_lat);
      g.dual_normal_x[e] = dot(tangent, e_lon), g.dual_normal_y[e] = dot(tangent, e_lat);
    }
  }
  // A cell's edge_orientation from the geometry: does the normal leave the cell?
  if (f.edge_orientation) {
    g.edge_orientation.resize(3 * nc);
    for (std::int64_t c = 0; c < nc; ++c)
      for (int i = 0; i < 3; ++i) {
        const std::int32_t e = g.c2e[3 * c + i];
        g.edge_orientation[3 * c + i] =
            sign(dot(at(g.primal_cart_normal, e), at(g.edge_center, e) - at(g.cell_center, c)));
      }
  }
  // A vertex's edge orientation from the geometry: does the normal turn counter-clockwise around
  // the vertex (along m x (m - v), seen from outside)?
  if (f.vertex_edge_orientation) {
    g.vertex_edge_orientation.assign(6 * nv, 0);
    for (std::int64_t v = 0; v < nv; ++v)
      for (int i = 0; i < 6; ++i) {
        const std::int32_t e = g.v2e[6 * v + i];
        if (e < 0) continue;
        const Vec m = at(g.edge_center, e);
        g.vertex_edge_orientation[6 * v + i] =
            sign(dot(at(g.primal_cart_normal, e), cross(m, m - at(g.vertex_center, v))));
      }
  }
}

namespace {
constexpr double kPi = 3.141592653589793;
}  // namespace

// ICON4Py's _rotate_latlon: (lat, lon) in the frame whose pole is (pollat, pollon).
void rotate_latlon(double lat, double lon, double pollat, double pollon, double& rlat,
                   double& rlon) {
  rlat = std::asin(std::sin(lat) * std::sin(pollat) +
                   std::cos(lat) * std::cos(pollat) * std::cos(lon - pollon));
  rlon = std::atan2(
      std::cos(lat) * std::sin(lon - pollon),
      std::cos(lat) * std::sin(pollat) * std::cos(lon - pollon) - std::sin(lat) * std::cos(pollat));
}

// ICON4Py's _weighting_factors for one cell: the three neighbour weights, given the central
// weight wgt_loc, that reproduce the centre's rotated position.
std::array<double, 3> weighting_factors(const std::array<double, 3>& ytemp,
                                        const std::array<double, 3>& xtemp, double yloc,
                                        double xloc, double wgt_loc) {
  const double pollat = yloc >= 0.0 ? yloc - kPi * 0.5 : yloc + kPi * 0.5;
  const double pollon = xloc;
  double ry = 0, rx = 0;
  rotate_latlon(yloc, xloc, pollat, pollon, ry, rx);
  std::array<double, 3> x{}, y{};
  for (int i = 0; i < 3; ++i) {
    double ty = 0, tx = 0;
    rotate_latlon(ytemp[i], xtemp[i], pollat, pollon, ty, tx);
    y[i] = ty - ry;
    x[i] = tx - rx;
    if (x[i] > 3.5) x[i] = x[i] - kPi * 2;  // the date line
    if (x[i] < -3.5) x[i] = x[i] + kPi * 2;
  }
  std::array<double, 3> w{};
  const double w1_nomask = 1.0 / ((y[1] - y[0]) - (x[1] - x[0]) * (y[2] - y[0]) / (x[2] - x[0])) *
                           (1.0 - wgt_loc) * (-y[0] + x[0] * (y[2] - y[0]) / (x[2] - x[0]));
  if (std::abs(x[1] - x[0]) > 1e-11 && std::abs(y[2] - y[0]) > 1e-11) {
    w[2] = 1.0 / ((y[2] - y[0]) - (x[2] - x[0]) * (y[1] - y[0]) / (x[1] - x[0])) * (1.0 - wgt_loc) *
           (-y[0] + x[0] * (y[1] - y[0]) / (x[1] - x[0]));
    w[1] = (-(1.0 - wgt_loc) * x[0] - w[2] * (x[2] - x[0])) / (x[1] - x[0]);
  } else {
    w[1] = w1_nomask;
    w[2] = (-(1.0 - wgt_loc) * x[0] - w[1] * (x[1] - x[0])) / (x[2] - x[0]);
  }
  w[0] = wgt_loc == 0.0 ? 1.0 - w[1] - w[2] : 1.0 - wgt_loc - w[1] - w[2];
  return w;
}

}  // namespace sciproxy::diffusion::detail
