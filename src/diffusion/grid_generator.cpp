// ICON-style global icosahedral grids RnBk (Wan et al. 2013, GMD 6, 735, section 2.1; Zaengl et
// al. 2015, QJRMS 141, 563): the icosahedron, each triangle's edges divided into n equal
// great-circle arcs, then k bisections, on the sphere. Conventions: include/sciproxy/diffusion.hpp.
//
//   circumcentre of the spherical triangle (a, b, c), counter-clockwise:  normalize((b-a) x (c-a))
//   spherical triangle area (spherical excess, Van Oosterom & Strackee 1983):
//     tan(E / 2) = a . (b x c) / (1 + a.b + b.c + c.a),   area = r^2 E
//   arc length between unit vectors:  r atan2(|a x b|, a . b)      (accurate at small angles)
//   dual area: the fan of signed triangles (v, c_i, c_i+1) over V2C's centres around v
//   primal normal n: unit, tangent at the edge midpoint m, orthogonal to the edge, from E2C[0]
//   to E2C[1];  dual normal t = n x m  (so n = m x t, ICON4Py's edge_primal_normal)
//   local components at (lat, lon):  e_lon = (-sin lon, cos lon, 0),
//     e_lat = (-sin lat cos lon, -sin lat sin lon, cos lat)
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "diffusion/geometry.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"
#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion {

namespace {

using detail::angle;
using detail::cross;
using detail::dot;
using detail::lat_lon;
using detail::normalize;
using detail::put;
using detail::Vec;
using detail::operator+;
using detail::operator-;
using detail::operator*;
using Tri = std::array<std::int32_t, 3>;

// The point a fraction t along the great-circle arc from unit vector a to unit vector b.
Vec slerp(const Vec& a, const Vec& b, double t) {
  const double theta = angle(a, b);
  const double s = std::sin(theta);
  return normalize((std::sin((1.0 - t) * theta) / s) * a + (std::sin(t * theta) / s) * b);
}
struct Mesh {
  std::vector<Vec> points;  // unit vectors
  std::vector<Tri> tris;    // counter-clockwise seen from outside
};

// The icosahedron with a vertex at each pole, the others on the rings at latitude +-atan(1/2)
// (longitudes 0, 72, ... north and 36, 108, ... south).
Mesh icosahedron() {
  Mesh m;
  const double lat = std::atan(0.5), pi = std::acos(-1.0);
  m.points.push_back({0, 0, 1});
  for (int i = 0; i < 5; ++i) {
    const double lon = 2 * pi * i / 5;
    m.points.push_back(
        {std::cos(lat) * std::cos(lon), std::cos(lat) * std::sin(lon), std::sin(lat)});
  }
  for (int i = 0; i < 5; ++i) {
    const double lon = 2 * pi * (i + 0.5) / 5;
    m.points.push_back(
        {std::cos(lat) * std::cos(lon), std::cos(lat) * std::sin(lon), -std::sin(lat)});
  }
  m.points.push_back({0, 0, -1});
  // Faces: the triples of mutually nearest corners (edge length ~1.05 on the unit sphere; the
  // next distance is ~1.70), oriented counter-clockwise seen from outside.
  const double edge = angle(m.points[0], m.points[1]);
  auto adjacent = [&](int a, int b) {
    return std::abs(angle(m.points[a], m.points[b]) - edge) < 1e-9;
  };
  for (int a = 0; a < 12; ++a)
    for (int b = a + 1; b < 12; ++b)
      for (int c = b + 1; c < 12; ++c) {
        if (!adjacent(a, b) || !adjacent(b, c) || !adjacent(a, c)) continue;
        const Vec& pa = m.points[a];
        const bool ccw = dot(cross(m.points[b] - pa, m.points[c] - pa), pa) > 0;
        m.tris.push_back(ccw ? Tri{a, b, c} : Tri{a, c, b});
      }
  return m;
}

// The root division: each face's edges in n equal arcs, a triangular lattice of n^2 triangles.
// Lattice point (r, s), 0 <= s <= r <= n, of face (A, B, C) has barycentric weights
// (n - r, r - s, s) / n. Points on the icosahedron's corners and edges are numbered once (the
// faces sharing them agree) and placed by slerp along the edge, from its lower corner; interior
// points are the normalised mean of the three constructions "slerp along the row parallel to the
// side opposite corner X", one per corner, so that no corner is preferred.
Mesh root_division(const Mesh& ico, int n) {
  if (n == 1) return ico;
  std::map<std::pair<int, int>, int> edge_index;  // (lower corner, higher corner) -> edge
  for (const Tri& t : ico.tris)
    for (int i = 0; i < 3; ++i) {
      const auto key = std::minmax(t[i], t[(i + 1) % 3]);
      edge_index.emplace(key, static_cast<int>(edge_index.size()));
    }
  const std::int64_t interior = static_cast<std::int64_t>(n - 1) * (n - 2) / 2;
  Mesh m;
  m.points.resize(12 + 30 * static_cast<std::int64_t>(n - 1) + 20 * interior);
  std::copy(ico.points.begin(), ico.points.end(), m.points.begin());
  for (const auto& [key, e] : edge_index)
    for (int j = 1; j < n; ++j)
      m.points[12 + static_cast<std::int64_t>(e) * (n - 1) + (j - 1)] =
          slerp(ico.points[key.first], ico.points[key.second], static_cast<double>(j) / n);

  std::vector<std::int32_t> lattice((n + 1) * (n + 2) / 2);
  auto id = [&](int r, int s) -> std::int32_t& { return lattice[r * (r + 1) / 2 + s]; };
  for (int f = 0; f < 20; ++f) {
    const Tri& corner = ico.tris[f];
    for (int r = 0; r <= n; ++r)
      for (int s = 0; s <= r; ++s) {
        const std::array<int, 3> w = {n - r, r - s, s};
        const int zeros = (w[0] == 0) + (w[1] == 0) + (w[2] == 0);
        if (zeros == 2) {  // a corner
          id(r, s) = corner[w[0] ? 0 : w[1] ? 1 : 2];
        } else if (zeros == 1) {  // on an icosahedron edge between corners x and y
          const int z = w[0] == 0 ? 0 : w[1] == 0 ? 1 : 2;
          const int x = (z + 1) % 3, y = (z + 2) % 3;
          // Steps from corner x towards y is y's weight; count from the lower corner.
          const bool x_low = corner[x] < corner[y];
          const int steps = x_low ? w[y] : w[x];
          const int e = edge_index.at(std::minmax(corner[x], corner[y]));
          id(r, s) =
              static_cast<std::int32_t>(12 + static_cast<std::int64_t>(e) * (n - 1) + (steps - 1));
        } else {
          const std::int64_t local = static_cast<std::int64_t>(r - 1) * (r - 2) / 2 + (s - 1);
          const std::int64_t index =
              12 + 30 * static_cast<std::int64_t>(n - 1) + f * interior + local;
          Vec sum{0, 0, 0};
          for (int x = 0; x < 3; ++x) {
            const int y = (x + 1) % 3, z = (x + 2) % 3;
            const Vec &px = ico.points[corner[x]], &py = ico.points[corner[y]],
                      &pz = ico.points[corner[z]];
            const double t = static_cast<double>(n - w[x]) / n;
            sum = sum +
                  slerp(slerp(px, py, t), slerp(px, pz, t), static_cast<double>(w[z]) / (n - w[x]));
          }
          m.points[index] = normalize(sum);
          id(r, s) = static_cast<std::int32_t>(index);
        }
      }
    // Up triangles (r,s) (r+1,s) (r+1,s+1) and down triangles (r,s) (r+1,s+1) (r,s+1) keep the
    // face's orientation.
    for (int r = 0; r < n; ++r)
      for (int s = 0; s <= r; ++s) {
        m.tris.push_back({id(r, s), id(r + 1, s), id(r + 1, s + 1)});
        if (s < r) m.tris.push_back({id(r, s), id(r + 1, s + 1), id(r, s + 1)});
      }
  }
  return m;
}

// The edges of a closed triangulation: edge i of triangle t is opposite its vertex i. Edges are
// numbered by (lower vertex, higher vertex); each edge's two triangles come in index order.
struct Edges {
  std::vector<std::array<std::int32_t, 2>> vertices, cells;
  std::vector<std::int32_t> of_tri;  // (num_tris, 3)
};

Edges find_edges(const std::vector<Tri>& tris, std::int64_t num_points) {
  const std::int64_t slots = 3 * static_cast<std::int64_t>(tris.size());
  auto ends = [&](std::int64_t slot) {
    const Tri& t = tris[slot / 3];
    const int i = static_cast<int>(slot % 3);
    return std::minmax(t[(i + 1) % 3], t[(i + 2) % 3]);
  };
  // Bucket the slots by their edge's lower vertex (counting sort: linear, no hashing), then
  // pair them within each bucket (at most 12 slots) by the higher vertex.
  std::vector<std::int64_t> start(num_points + 1, 0);
  for (std::int64_t s = 0; s < slots; ++s) ++start[ends(s).first + 1];
  for (std::int64_t p = 0; p < num_points; ++p) start[p + 1] += start[p];
  std::vector<std::int64_t> bucket(slots), fill(start.begin(), start.end() - 1);
  for (std::int64_t s = 0; s < slots; ++s) bucket[fill[ends(s).first]++] = s;
  Edges edges;
  edges.of_tri.assign(slots, -1);
  edges.vertices.reserve(slots / 2);
  edges.cells.reserve(slots / 2);
  for (std::int64_t p = 0; p < num_points; ++p) {
    const auto first = bucket.begin() + start[p], last = bucket.begin() + start[p + 1];
    std::sort(first, last, [&](std::int64_t a, std::int64_t b) {
      return std::make_pair(ends(a).second, a) < std::make_pair(ends(b).second, b);
    });
    for (auto it = first; it != last; it += 2) {
      if (it + 1 == last || ends(*it) != ends(*(it + 1)) ||
          (it + 2 != last && ends(*(it + 2)) == ends(*it)))
        throw RuntimeError("icosahedral_grid: internal error: an edge not shared by two cells");
      const auto e = static_cast<std::int32_t>(edges.vertices.size());
      edges.vertices.push_back({ends(*it).first, ends(*it).second});
      edges.cells.push_back(
          {static_cast<std::int32_t>(*it / 3), static_cast<std::int32_t>(*(it + 1) / 3)});
      edges.of_tri[*it] = edges.of_tri[*(it + 1)] = e;
    }
  }
  return edges;
}

// One bisection: a new point at each edge's great-circle midpoint (numbered after the old
// points, in edge order), each triangle into its 3 corner triangles and the middle one.
Mesh bisect(const Mesh& m) {
  const Edges edges = find_edges(m.tris, static_cast<std::int64_t>(m.points.size()));
  Mesh fine;
  const auto base = static_cast<std::int32_t>(m.points.size());
  fine.points = m.points;
  for (const auto& [a, b] : edges.vertices)
    fine.points.push_back(normalize(m.points[a] + m.points[b]));
  fine.tris.reserve(4 * m.tris.size());
  for (std::size_t t = 0; t < m.tris.size(); ++t) {
    const Tri& v = m.tris[t];
    // mid[i]: the midpoint of edge i, opposite vertex i.
    const Tri mid = {base + edges.of_tri[3 * t], base + edges.of_tri[3 * t + 1],
                     base + edges.of_tri[3 * t + 2]};
    fine.tris.push_back({v[0], mid[2], mid[1]});
    fine.tris.push_back({mid[2], v[1], mid[0]});
    fine.tris.push_back({mid[1], mid[0], v[2]});
    fine.tris.push_back({mid[0], mid[1], mid[2]});
  }
  return fine;
}

}  // namespace

Grid icosahedral_grid(int n, int k, double radius) {
  require(n >= 1, "n", "a root division n >= 1", fmt::format("{}", n));
  require(k >= 0, "k", "a number of bisections k >= 0", fmt::format("{}", k));
  require(std::isfinite(radius) && radius > 0, "radius", "a positive, finite sphere radius",
          fmt::format("{}", radius));
  // The largest index, the sparse offset 4 * num_edges = 120 n^2 4^k, must fit int32.
  constexpr std::int64_t limit = std::numeric_limits<std::int32_t>::max();
  const bool fits = n <= 5000 && k <= 15 &&
                    120 * static_cast<std::int64_t>(n) * n * (std::int64_t{1} << (2 * k)) <= limit;
  require(fits, "n, k",
          "a grid whose sparse offsets 4 * num_edges = 120 n^2 4^k fit int32 (at most R2B11)",
          fmt::format("R{}B{}", n, k));
  const std::int64_t cells = 20 * static_cast<std::int64_t>(n) * n << (2 * k);
  // About 500 bytes per cell: the tables, the geometry and the meshes of the last bisection.
  require_memory(500.0 * static_cast<double>(cells), "n, k",
                 fmt::format("the icosahedral grid R{}B{} ({} cells)", n, k, cells));

  Mesh mesh = root_division(icosahedron(), n);
  for (int level = 0; level < k; ++level) mesh = bisect(mesh);
  const Edges edges = find_edges(mesh.tris, static_cast<std::int64_t>(mesh.points.size()));

  Grid g;
  g.n = n, g.k = k, g.radius = radius;
  const auto nc = static_cast<std::int32_t>(mesh.tris.size());
  const auto ne = static_cast<std::int32_t>(edges.vertices.size());
  const auto nv = static_cast<std::int32_t>(mesh.points.size());
  g.num_cells = nc, g.num_edges = ne, g.num_vertices = nv;

  // Connectivities.
  g.c2v.resize(3 * std::int64_t{nc});
  g.c2e.resize(3 * std::int64_t{nc});
  g.c2e2c.resize(3 * std::int64_t{nc});
  g.c2e2co.resize(4 * std::int64_t{nc});
  for (std::int64_t c = 0; c < nc; ++c) {
    g.c2e2co[4 * c] = static_cast<std::int32_t>(c);
    for (int i = 0; i < 3; ++i) {
      const std::int32_t e = edges.of_tri[3 * c + i];
      g.c2v[3 * c + i] = mesh.tris[c][i];
      g.c2e[3 * c + i] = e;
      const auto& cells = edges.cells[e];
      g.c2e2c[3 * c + i] = g.c2e2co[4 * c + 1 + i] = cells[0] == c ? cells[1] : cells[0];
    }
  }
  g.e2v.resize(2 * std::int64_t{ne});
  g.e2c.resize(2 * std::int64_t{ne});
  g.e2c2v.resize(4 * std::int64_t{ne});
  for (std::int64_t e = 0; e < ne; ++e) {
    for (int j = 0; j < 2; ++j) {
      const std::int32_t c = edges.cells[e][j];
      g.e2v[2 * e + j] = edges.vertices[e][j];
      g.e2c[2 * e + j] = c;
      g.e2c2v[4 * e + j] = edges.vertices[e][j];
      // The far vertex of cell c: the one opposite this edge.
      for (int i = 0; i < 3; ++i)
        if (g.c2e[3 * std::int64_t{c} + i] == e)
          g.e2c2v[4 * e + 2 + j] = g.c2v[3 * std::int64_t{c} + i];
    }
  }
  // Around each vertex, counter-clockwise: in cell c with the vertex at position j, the cells run
  // from the edge (v, C2V[j+1]) (opposite j+2) to the edge (v, C2V[j+2]) (opposite j+1), across
  // which lies the next cell.
  std::vector<std::int32_t> any_cell(nv, -1);
  for (std::int64_t c = 0; c < nc; ++c)
    for (int i = 0; i < 3; ++i) any_cell[g.c2v[3 * c + i]] = static_cast<std::int32_t>(c);
  g.v2c.assign(6 * std::int64_t{nv}, -1);
  g.v2e.assign(6 * std::int64_t{nv}, -1);
  for (std::int64_t v = 0; v < nv; ++v) {
    std::int32_t c = any_cell[v];
    for (int i = 0;; ++i) {
      if (i == 6) throw RuntimeError("icosahedral_grid: internal error: a vertex with > 6 cells");
      int j = 0;
      while (g.c2v[3 * std::int64_t{c} + j] != v) ++j;
      g.v2c[6 * v + i] = c;
      g.v2e[6 * v + i] = g.c2e[3 * std::int64_t{c} + (j + 2) % 3];
      c = g.c2e2c[3 * std::int64_t{c} + (j + 1) % 3];
      if (c == any_cell[v]) break;
    }
  }

  // Positions.
  g.vertex_center.resize(3 * std::int64_t{nv});
  g.vertex_lat.resize(nv);
  g.vertex_lon.resize(nv);
  for (std::int64_t v = 0; v < nv; ++v) {
    put(g.vertex_center, v, mesh.points[v]);
    lat_lon(mesh.points[v], g.vertex_lat[v], g.vertex_lon[v]);
  }
  g.cell_center.resize(3 * std::int64_t{nc});
  g.cell_lat.resize(nc);
  g.cell_lon.resize(nc);
  for (std::int64_t c = 0; c < nc; ++c) {
    const Vec &a = mesh.points[mesh.tris[c][0]], &b = mesh.points[mesh.tris[c][1]],
              &d = mesh.points[mesh.tris[c][2]];
    const Vec centre = normalize(cross(b - a, d - a));
    put(g.cell_center, c, centre);
    lat_lon(centre, g.cell_lat[c], g.cell_lon[c]);
  }
  g.edge_center.resize(3 * std::int64_t{ne});
  g.edge_center_lat.resize(ne);
  g.edge_center_lon.resize(ne);
  for (std::int64_t e = 0; e < ne; ++e) {
    const Vec m = normalize(mesh.points[g.e2v[2 * e]] + mesh.points[g.e2v[2 * e + 1]]);
    put(g.edge_center, e, m);
    lat_lon(m, g.edge_center_lat[e], g.edge_center_lon[e]);
  }
  // Areas, lengths, normals and orientations (src/diffusion/geometry.cpp).
  detail::compute_geometry(g);
  // A global grid: every refin_ctrl 0, the boundary and nudging zones empty.
  g.cell_refin_ctrl.assign(nc, 0);
  g.edge_refin_ctrl.assign(ne, 0);
  g.vertex_refin_ctrl.assign(nv, 0);
  set_domain_bounds(g);
  return g;
}

}  // namespace sciproxy::diffusion
