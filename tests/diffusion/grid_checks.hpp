// Checks shared by the grid-file and limited-area tests: the same grid field by field, the
// consistency of every table with missing neighbours (-1) allowed, the divergence theorem,
// and scratch directories.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "sciproxy/diffusion.hpp"

namespace grid_checks {

namespace dif = sciproxy::diffusion;

// Every field of two grids equal, bit for bit; a failure names the field.
inline void expect_same_grid(const dif::Grid& a, const dif::Grid& b) {
#define SCIPROXY_SAME(field) EXPECT_TRUE(a.field == b.field) << "field " #field " differs"
  SCIPROXY_SAME(n);
  SCIPROXY_SAME(k);
  SCIPROXY_SAME(radius);
  SCIPROXY_SAME(num_cells);
  SCIPROXY_SAME(num_edges);
  SCIPROXY_SAME(num_vertices);
  SCIPROXY_SAME(c2e);
  SCIPROXY_SAME(c2v);
  SCIPROXY_SAME(c2e2c);
  SCIPROXY_SAME(c2e2co);
  SCIPROXY_SAME(e2c);
  SCIPROXY_SAME(e2v);
  SCIPROXY_SAME(e2c2v);
  SCIPROXY_SAME(v2e);
  SCIPROXY_SAME(v2c);
  SCIPROXY_SAME(edge_orientation);
  SCIPROXY_SAME(tangent_orientation);
  SCIPROXY_SAME(vertex_edge_orientation);
  SCIPROXY_SAME(cell_lat);
  SCIPROXY_SAME(cell_lon);
  SCIPROXY_SAME(cell_center);
  SCIPROXY_SAME(vertex_lat);
  SCIPROXY_SAME(vertex_lon);
  SCIPROXY_SAME(vertex_center);
  SCIPROXY_SAME(edge_center_lat);
  SCIPROXY_SAME(edge_center_lon);
  SCIPROXY_SAME(edge_center);
  SCIPROXY_SAME(cell_area);
  SCIPROXY_SAME(dual_area);
  SCIPROXY_SAME(edge_length);
  SCIPROXY_SAME(dual_edge_length);
  SCIPROXY_SAME(edge_cell_length);
  SCIPROXY_SAME(edge_vert_length);
  SCIPROXY_SAME(primal_cart_normal);
  SCIPROXY_SAME(dual_cart_normal);
  SCIPROXY_SAME(primal_normal_x);
  SCIPROXY_SAME(primal_normal_y);
  SCIPROXY_SAME(dual_normal_x);
  SCIPROXY_SAME(dual_normal_y);
  SCIPROXY_SAME(limited_area);
  SCIPROXY_SAME(cell_refin_ctrl);
  SCIPROXY_SAME(edge_refin_ctrl);
  SCIPROXY_SAME(vertex_refin_ctrl);
  SCIPROXY_SAME(zone_start);
  SCIPROXY_SAME(zone_end);
#undef SCIPROXY_SAME
}

inline bool holds(const std::vector<std::int32_t>& table, std::int64_t row, int width,
                  std::int32_t value) {
  const auto* p = &table[width * row];
  return std::find(p, p + width, value) != p + width;
}

// The tables agree with each other (inverse relations); -1 only where a neighbour may be
// missing. Returns the number of missing C2E2C entries (0 on a closed sphere).
inline std::int64_t check_tables(const dif::Grid& g) {
  const std::int64_t nc = g.num_cells, ne = g.num_edges, nv = g.num_vertices;
  EXPECT_EQ(g.c2e.size(), 3u * nc);
  EXPECT_EQ(g.e2c2v.size(), 4u * ne);
  EXPECT_EQ(g.v2c.size(), 6u * nv);
  std::int64_t missing = 0;
  std::vector<int> cells_of_edge(ne, 0), edges_at_vertex(nv, 0);
  for (std::int64_t c = 0; c < nc; ++c) {
    EXPECT_EQ(g.c2e2co[4 * c], c);
    for (int i = 0; i < 3; ++i) {
      const std::int32_t e = g.c2e[3 * c + i], v = g.c2v[3 * c + i], nb = g.c2e2c[3 * c + i];
      EXPECT_TRUE(e >= 0 && e < ne && v >= 0 && v < nv) << "cell " << c;
      if (!(e >= 0 && e < ne && v >= 0 && v < nv)) return missing;
      ++cells_of_edge[e];
      EXPECT_TRUE(holds(g.e2c, e, 2, static_cast<std::int32_t>(c))) << "C2E/E2C, cell " << c;
      EXPECT_TRUE(holds(g.v2c, v, 6, static_cast<std::int32_t>(c))) << "C2V/V2C, cell " << c;
      // The edge's vertices are the cell's.
      for (int j = 0; j < 2; ++j)
        EXPECT_TRUE(holds(g.c2v, c, 3, g.e2v[2 * e + j])) << "C2E/E2V, cell " << c;
      // C2E2C[i] is the cell across C2E[i] (-1 where that edge has no other cell).
      const std::int32_t other = g.e2c[2 * e] == c ? g.e2c[2 * e + 1] : g.e2c[2 * e];
      EXPECT_EQ(nb, other) << "C2E2C, cell " << c << " edge " << i;
      EXPECT_EQ(g.c2e2co[4 * c + 1 + i], nb);
      if (nb < 0) {
        ++missing;
      } else {
        EXPECT_TRUE(holds(g.c2e2c, nb, 3, static_cast<std::int32_t>(c))) << "C2E2C symmetric";
      }
    }
  }
  for (std::int64_t e = 0; e < ne; ++e) {
    int present = 0;
    for (int j = 0; j < 2; ++j) {
      const std::int32_t c = g.e2c[2 * e + j], v = g.e2v[2 * e + j];
      EXPECT_TRUE(v >= 0 && v < nv) << "edge " << e;
      if (v < 0 || v >= nv) return missing;
      ++edges_at_vertex[v];
      EXPECT_TRUE(holds(g.v2e, v, 6, static_cast<std::int32_t>(e))) << "E2V/V2E, edge " << e;
      EXPECT_EQ(g.e2c2v[4 * e + j], v);
      if (c >= 0) {
        ++present;
        EXPECT_TRUE(holds(g.c2e, c, 3, static_cast<std::int32_t>(e))) << "E2C/C2E, edge " << e;
      }
      // The diamond's far vertices: the third vertex of each cell, where there is one.
      const std::int32_t far = g.e2c2v[4 * e + 2 + j];
      if (far >= 0) {
        EXPECT_NE(far, g.e2v[2 * e]);
        EXPECT_NE(far, g.e2v[2 * e + 1]);
      }
    }
    EXPECT_GE(present, 1) << "edge " << e;
    EXPECT_EQ(present, cells_of_edge[e]) << "edge " << e;
    if (g.e2c[2 * e] >= 0 && g.e2c[2 * e + 1] >= 0) {
      EXPECT_TRUE(holds(g.c2v, g.e2c[2 * e], 3, g.e2c2v[4 * e + 2])) << "E2C2V, edge " << e;
      EXPECT_TRUE(holds(g.c2v, g.e2c[2 * e + 1], 3, g.e2c2v[4 * e + 3])) << "E2C2V, edge " << e;
    }
  }
  for (std::int64_t v = 0; v < nv; ++v) {
    int edges = 0;
    for (int i = 0; i < 6; ++i) {
      const std::int32_t e = g.v2e[6 * v + i], c = g.v2c[6 * v + i];
      if (e >= 0) {
        ++edges;
        EXPECT_TRUE(g.e2v[2 * e] == v || g.e2v[2 * e + 1] == v) << "V2E, vertex " << v;
      }
      if (c >= 0) {
        EXPECT_TRUE(holds(g.c2v, c, 3, static_cast<std::int32_t>(v))) << "V2C, vertex " << v;
      }
    }
    EXPECT_EQ(edges, edges_at_vertex[v]) << "V2E holds every edge of vertex " << v;
  }
  return missing;
}

// A fresh scratch directory, removed with its contents when the object goes.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("sciproxy-grid-files-{}-{}", getpid(), counter++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Gauss on the discrete sphere: for random edge fields u, sum over cells and their edges of
// edge_orientation x edge_length x u is 0 (each edge counted once with each sign). Returns the
// largest |sum| / sum of |terms| over three fields (seed 16).
inline double divergence_theorem_residual(const dif::Grid& g) {
  std::mt19937_64 rng(16);
  std::uniform_real_distribution<double> uniform(-1, 1);
  double worst = 0;
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<double> u(g.num_edges);
    for (double& x : u) x = uniform(rng);
    double total = 0, scale = 0;
    for (std::int64_t c = 0; c < g.num_cells; ++c)
      for (int i = 0; i < 3; ++i) {
        const std::int32_t e = g.c2e[3 * c + i];
        const double flux = g.edge_orientation[3 * c + i] * g.edge_length[e] * u[e];
        total += flux;
        scale += std::abs(flux);
      }
    worst = std::max(worst, std::abs(total) / scale);
  }
  return worst;
}

}  // namespace grid_checks
