// Limited-area cut-outs of a grid with ICON's lateral-boundary rows (refin_ctrl) and ordering,
// as ICON4Py's grid_refinement.py describes them and icon-grid-generator's limited-area grids
// (its _boundary_controls and _apply_boundary_ordering) build them:
//
//   vertex rows:  1 on the boundary edges; r + 1 for the unlabelled vertices of a cell with a
//                 vertex in row r, up to boundary_depth
//   cell row:     the lowest labelled row among its vertices (0 if none)
//   edge row:     row(E2C[0]) + row(E2C[1]), a missing cell counting 0; 0 where a cell of the
//                 region has row 0 and the other a positive row
//   order:        rows 1..5 (cells, vertices) or 1..10 (edges), each in the source's order, then
//                 the rest in the source's order
// Conventions of the result: include/sciproxy/diffusion.hpp (limited_area_grid).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "diffusion/geometry.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion {

namespace {

using detail::at;
using detail::put;
using detail::Vec;
using detail::operator*;

// The ordered rows of cells and vertices (4 boundary rows and one nudging row) and of edges (8
// and two).
constexpr int kOrderedCellRows = 5, kOrderedEdgeRows = 10, kOrderedVertexRows = 5;

// The positions of `entities` (source indices, ascending) in ICON's order by row.
std::vector<std::int32_t> icon_order(const std::vector<std::int32_t>& control, int ordered_rows) {
  std::vector<std::int32_t> order;
  order.reserve(control.size());
  for (int row = 1; row <= ordered_rows; ++row)
    for (std::size_t i = 0; i < control.size(); ++i)
      if (control[i] == row) order.push_back(static_cast<std::int32_t>(i));
  for (std::size_t i = 0; i < control.size(); ++i)
    if (control[i] < 1 || control[i] > ordered_rows) order.push_back(static_cast<std::int32_t>(i));
  return order;
}

}  // namespace

Grid limited_area_grid(const Grid& src, double center_lat, double center_lon, double radius_rad,
                       const LimitedAreaOptions& options) {
  const double kPi = std::acos(-1.0);
  require(std::isfinite(center_lat) && std::abs(center_lat) <= kPi / 2, "center_lat",
          "a latitude in [-pi/2, pi/2] (radians)", fmt::format("{}", center_lat));
  require(std::isfinite(center_lon), "center_lon", "a finite longitude (radians)",
          fmt::format("{}", center_lon));
  require(std::isfinite(radius_rad) && radius_rad > 0, "radius_rad",
          "a positive, finite angular radius (radians)", fmt::format("{}", radius_rad));
  const int depth = options.boundary_depth;
  require(depth >= kOrderedCellRows && depth <= 1000, "options.boundary_depth",
          "5 to 1000 rows (ICON orders 5 rows of cells)", fmt::format("{}", depth));
  detail::require_complete(src, "global");
  const std::int64_t snc = src.num_cells, sne = src.num_edges, snv = src.num_vertices;

  // The region: cells by their centre; their edges and vertices. Local ids run in source order.
  const Vec centre = detail::from_lat_lon(center_lat, center_lon);
  std::vector<std::int32_t> cell_id(snc, -1), edge_id(sne, -1), vertex_id(snv, -1);
  std::vector<std::int32_t> cells, edges, vertices;  // source indices
  constexpr std::int32_t kMarked = -2;               // in the region, not yet numbered
  for (std::int64_t c = 0; c < snc; ++c)
    if (detail::angle(centre, at(src.cell_center, c)) <= radius_rad) {
      cell_id[c] = static_cast<std::int32_t>(cells.size());
      cells.push_back(static_cast<std::int32_t>(c));
      for (int i = 0; i < 3; ++i) {
        edge_id[src.c2e[3 * c + i]] = kMarked;
        vertex_id[src.c2v[3 * c + i]] = kMarked;
      }
    }
  require(!cells.empty(), "radius_rad", "a region holding at least one cell centre",
          fmt::format("{} around ({}, {}), which holds none", radius_rad, center_lat, center_lon));
  for (std::int64_t e = 0; e < sne; ++e)
    if (edge_id[e] == kMarked) {
      edge_id[e] = static_cast<std::int32_t>(edges.size());
      edges.push_back(static_cast<std::int32_t>(e));
    }
  for (std::int64_t v = 0; v < snv; ++v)
    if (vertex_id[v] == kMarked) {
      vertex_id[v] = static_cast<std::int32_t>(vertices.size());
      vertices.push_back(static_cast<std::int32_t>(v));
    }
  const auto nc = static_cast<std::int32_t>(cells.size());
  const auto ne = static_cast<std::int32_t>(edges.size());
  const auto nv = static_cast<std::int32_t>(vertices.size());
  auto inside = [&](std::int32_t c) { return c >= 0 && cell_id[c] >= 0; };

  // Rows, on local ids.
  std::vector<std::int32_t> vertex_row(nv, 0), cell_row(nc, 0), edge_row(ne, 0);
  bool boundary = false;
  for (std::int32_t le = 0; le < ne; ++le) {
    const std::int64_t e = edges[le];
    if (inside(src.e2c[2 * e]) + inside(src.e2c[2 * e + 1]) == 1) {
      boundary = true;
      vertex_row[vertex_id[src.e2v[2 * e]]] = vertex_row[vertex_id[src.e2v[2 * e + 1]]] = 1;
    }
  }
  require(boundary, "radius_rad", "a region with a lateral boundary",
          fmt::format("{}, which covers every cell", radius_rad));
  for (int row = 1; row < depth; ++row)
    for (std::int32_t lc = 0; lc < nc; ++lc) {
      const std::int64_t c = cells[lc];
      bool touched = false;
      for (int i = 0; i < 3; ++i)
        touched = touched || vertex_row[vertex_id[src.c2v[3 * c + i]]] == row;
      if (!touched) continue;
      for (int i = 0; i < 3; ++i) {
        std::int32_t& r = vertex_row[vertex_id[src.c2v[3 * c + i]]];
        if (r == 0) r = row + 1;
      }
    }
  for (std::int32_t lc = 0; lc < nc; ++lc) {
    std::int32_t lowest = 0;
    for (int i = 0; i < 3; ++i) {
      const std::int32_t r = vertex_row[vertex_id[src.c2v[3 * std::int64_t{cells[lc]} + i]]];
      if (r > 0 && (lowest == 0 || r < lowest)) lowest = r;
    }
    cell_row[lc] = lowest;
  }
  for (std::int32_t le = 0; le < ne; ++le) {
    const std::int64_t e = edges[le];
    const std::int32_t a = src.e2c[2 * e], b = src.e2c[2 * e + 1];
    const std::int32_t ra = inside(a) ? cell_row[cell_id[a]] : 0;
    const std::int32_t rb = inside(b) ? cell_row[cell_id[b]] : 0;
    const bool transition = (ra == 0 && rb > 0 && inside(a)) || (rb == 0 && ra > 0 && inside(b));
    edge_row[le] = transition ? 0 : ra + rb;
  }

  // ICON's order: new index -> local id, and local id -> new index.
  const std::vector<std::int32_t> cell_order = icon_order(cell_row, kOrderedCellRows);
  const std::vector<std::int32_t> edge_order = icon_order(edge_row, kOrderedEdgeRows);
  const std::vector<std::int32_t> vertex_order = icon_order(vertex_row, kOrderedVertexRows);
  std::vector<std::int32_t> new_cell(nc), new_edge(ne), new_vertex(nv);
  for (std::int32_t i = 0; i < nc; ++i) new_cell[cell_order[i]] = i;
  for (std::int32_t i = 0; i < ne; ++i) new_edge[edge_order[i]] = i;
  for (std::int32_t i = 0; i < nv; ++i) new_vertex[vertex_order[i]] = i;
  // Source index -> new index, -1 outside the region.
  auto cell_of = [&](std::int32_t c) { return inside(c) ? new_cell[cell_id[c]] : -1; };
  auto edge_of = [&](std::int32_t e) {
    return e >= 0 && edge_id[e] >= 0 ? new_edge[edge_id[e]] : -1;
  };
  auto vertex_of = [&](std::int32_t v) {
    return v >= 0 && vertex_id[v] >= 0 ? new_vertex[vertex_id[v]] : -1;
  };

  Grid g;
  g.n = src.n, g.k = src.k, g.radius = src.radius;
  g.num_cells = nc, g.num_edges = ne, g.num_vertices = nv;

  // Edges first: which turn (their cell outside the region was E2C[0]).
  std::vector<char> turned(ne, 0);
  g.e2c.resize(2 * std::int64_t{ne});
  g.e2v.resize(2 * std::int64_t{ne});
  g.edge_center.resize(3 * std::int64_t{ne});
  g.edge_center_lat.resize(ne), g.edge_center_lon.resize(ne);
  g.edge_length.resize(ne), g.dual_edge_length.resize(ne);
  g.edge_cell_length.resize(2 * std::int64_t{ne}), g.edge_vert_length.resize(2 * std::int64_t{ne});
  g.primal_cart_normal.resize(3 * std::int64_t{ne}),
      g.dual_cart_normal.resize(3 * std::int64_t{ne});
  g.primal_normal_x.resize(ne), g.primal_normal_y.resize(ne);
  g.dual_normal_x.resize(ne), g.dual_normal_y.resize(ne);
  g.tangent_orientation.resize(ne);
  g.edge_refin_ctrl.resize(ne);
  for (std::int64_t e = 0; e < ne; ++e) {
    const std::int32_t le = edge_order[e];
    const std::int64_t s = edges[le];
    std::int32_t c0 = cell_of(src.e2c[2 * s]), c1 = cell_of(src.e2c[2 * s + 1]);
    const bool turn = c0 < 0 && c1 >= 0;
    const double f = turn ? -1.0 : 1.0;
    turned[e] = turn;
    if (turn) std::swap(c0, c1);
    g.e2c[2 * e] = c0, g.e2c[2 * e + 1] = c1;
    for (int j = 0; j < 2; ++j) {
      g.e2v[2 * e + j] = vertex_of(src.e2v[2 * s + j]);
      g.edge_vert_length[2 * e + j] = src.edge_vert_length[2 * s + j];
      g.edge_cell_length[2 * e + j] = src.edge_cell_length[2 * s + (turn ? 1 - j : j)];
    }
    put(g.edge_center, e, at(src.edge_center, s));
    g.edge_center_lat[e] = src.edge_center_lat[s], g.edge_center_lon[e] = src.edge_center_lon[s];
    g.edge_length[e] = src.edge_length[s], g.dual_edge_length[e] = src.dual_edge_length[s];
    put(g.primal_cart_normal, e, f * at(src.primal_cart_normal, s));
    put(g.dual_cart_normal, e, f * at(src.dual_cart_normal, s));
    g.primal_normal_x[e] = f * src.primal_normal_x[s],
    g.primal_normal_y[e] = f * src.primal_normal_y[s];
    g.dual_normal_x[e] = f * src.dual_normal_x[s], g.dual_normal_y[e] = f * src.dual_normal_y[s];
    // The tangent turns with the normal while E2V stays: its orientation flips too.
    g.tangent_orientation[e] = turn ? -src.tangent_orientation[s] : src.tangent_orientation[s];
    g.edge_refin_ctrl[e] = edge_row[le];
  }

  g.c2e.resize(3 * std::int64_t{nc}), g.c2v.resize(3 * std::int64_t{nc});
  g.c2e2c.resize(3 * std::int64_t{nc}), g.edge_orientation.resize(3 * std::int64_t{nc});
  g.cell_center.resize(3 * std::int64_t{nc});
  g.cell_lat.resize(nc), g.cell_lon.resize(nc), g.cell_area.resize(nc);
  g.cell_refin_ctrl.resize(nc);
  for (std::int64_t c = 0; c < nc; ++c) {
    const std::int32_t lc = cell_order[c];
    const std::int64_t s = cells[lc];
    for (int i = 0; i < 3; ++i) {
      const std::int32_t e = edge_of(src.c2e[3 * s + i]);
      g.c2e[3 * c + i] = e;
      g.c2v[3 * c + i] = vertex_of(src.c2v[3 * s + i]);
      g.c2e2c[3 * c + i] = cell_of(src.c2e2c[3 * s + i]);
      g.edge_orientation[3 * c + i] =
          turned[e] ? -src.edge_orientation[3 * s + i] : src.edge_orientation[3 * s + i];
    }
    put(g.cell_center, c, at(src.cell_center, s));
    g.cell_lat[c] = src.cell_lat[s], g.cell_lon[c] = src.cell_lon[s];
    g.cell_area[c] = src.cell_area[s];
    g.cell_refin_ctrl[c] = cell_row[lc];
  }

  g.v2c.assign(6 * std::int64_t{nv}, -1), g.v2e.assign(6 * std::int64_t{nv}, -1);
  g.vertex_edge_orientation.assign(6 * std::int64_t{nv}, 0);
  g.vertex_center.resize(3 * std::int64_t{nv});
  g.vertex_lat.resize(nv), g.vertex_lon.resize(nv), g.dual_area.resize(nv);
  g.vertex_refin_ctrl.resize(nv);
  for (std::int64_t v = 0; v < nv; ++v) {
    const std::int32_t lv = vertex_order[v];
    const std::int64_t s = vertices[lv];
    int degree = 0;
    while (degree < 6 && src.v2c[6 * s + degree] >= 0) ++degree;
    // Start the walk at the first cell of the region after one outside it (at the boundary), so
    // that the cells of the region run on without a gap.
    int first = 0;
    for (int i = 0; i < degree; ++i)
      if (cell_of(src.v2c[6 * s + i]) >= 0 &&
          cell_of(src.v2c[6 * s + (i + degree - 1) % degree]) < 0) {
        first = i;
        break;
      }
    int cells_out = 0, edges_out = 0;
    for (int j = 0; j < degree; ++j) {
      const int i = (first + j) % degree;
      const std::int32_t c = cell_of(src.v2c[6 * s + i]);
      if (c >= 0) g.v2c[6 * v + cells_out++] = c;
      const std::int32_t e = edge_of(src.v2e[6 * s + i]);
      if (e >= 0) {
        g.v2e[6 * v + edges_out] = e;
        g.vertex_edge_orientation[6 * v + edges_out++] =
            turned[e] ? -src.vertex_edge_orientation[6 * s + i]
                      : src.vertex_edge_orientation[6 * s + i];
      }
    }
    put(g.vertex_center, v, at(src.vertex_center, s));
    g.vertex_lat[v] = src.vertex_lat[s], g.vertex_lon[v] = src.vertex_lon[s];
    g.dual_area[v] = src.dual_area[s];
    g.vertex_refin_ctrl[v] = vertex_row[lv];
  }

  detail::derive_tables(g);
  set_domain_bounds(g);
  return g;
}

}  // namespace sciproxy::diffusion
