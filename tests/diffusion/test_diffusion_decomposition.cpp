// The decomposition builder in one process: every rank's local grid built here, their halo
// levels counted by hand on the icosahedron, checked against their definitions on larger grids
// (every level-1 cell across an edge of an owned cell, every level-2 cell around a cutting-line
// vertex, each entity owned once), the local tables against the global ones, the exchange
// pattern's two sides against each other, and the METIS partition.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "diffusion/decomposition.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/diffusion.hpp"

using namespace sciproxy::diffusion;

namespace {

std::vector<std::int32_t> bands(const Grid& g, std::vector<double> shares) {
  // Uneven latitude bands, north to south: shares[r] of the cells on rank r.
  std::vector<std::int32_t> order(g.num_cells);
  for (std::int32_t c = 0; c < g.num_cells; ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int32_t a, std::int32_t b) { return g.cell_lat[a] > g.cell_lat[b]; });
  double total = 0;
  for (double s : shares) total += s;
  std::vector<std::int32_t> owner(g.num_cells);
  double upto = 0;
  std::size_t i = 0;
  for (std::size_t r = 0; r < shares.size(); ++r) {
    upto += shares[r] / total * g.num_cells;
    for (; i < order.size() && (i < upto || r + 1 == shares.size()); ++i)
      owner[order[i]] = static_cast<std::int32_t>(r);
  }
  return owner;
}

std::array<std::int32_t, 4> level_counts(const LocalEntities& e) {
  return {e.level_begin[1] - e.level_begin[0], e.level_begin[2] - e.level_begin[1],
          e.level_begin[3] - e.level_begin[2], e.level_begin[4] - e.level_begin[3]};
}

bool shares_edge(const Grid& g, std::int32_t a, std::int32_t b) {
  for (int j = 0; j < 3; ++j)
    if (g.c2e2c[3 * a + j] == b) return true;
  return false;
}

bool shares_vertex(const Grid& g, std::int32_t a, std::int32_t b) {
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      if (g.c2v[3 * a + i] == g.c2v[3 * b + j]) return true;
  return false;
}

// Every property of the definitions (decomposition.hpp) on every rank.
void check_decomposition(const Grid& g, const std::vector<std::int32_t>& owner, int ranks) {
  std::vector<RankDomain> domains;
  for (int r = 0; r < ranks; ++r) domains.push_back(rank_domain(g, owner, ranks, r));
  std::vector<int> cell_owned(g.num_cells), edge_owned(g.num_edges), vertex_owned(g.num_vertices);
  for (const RankDomain& d : domains) {
    const int r = d.rank;
    SCOPED_TRACE("rank " + std::to_string(r));
    std::vector<std::int32_t> level_of(g.num_cells, -1);
    for (std::int32_t i = 0; i < d.cells.size(); ++i)
      level_of[d.cells.global[i]] = d.cells.halo_level[i];
    for (std::int32_t c = 0; c < g.num_cells; ++c) EXPECT_EQ(level_of[c] == 0, owner[c] == r);
    for (std::int32_t c = 0; c < g.num_cells; ++c) {
      if (level_of[c] == 0) ++cell_owned[c];
      bool by_edge = false, by_vertex = false;
      for (std::int32_t o = 0; o < g.num_cells; ++o)
        if (owner[o] == r) by_edge |= shares_edge(g, c, o), by_vertex |= shares_vertex(g, c, o);
      // Level 1: across an edge of an owned cell; level 2: a vertex only; farther: not local.
      if (level_of[c] == 1) {
        EXPECT_TRUE(by_edge) << "cell " << c;
      }
      if (level_of[c] == 2) {
        EXPECT_TRUE(by_vertex && !by_edge) << "cell " << c;
      }
      if (owner[c] != r && by_edge) {
        EXPECT_EQ(level_of[c], 1) << "cell " << c;
      }
    }
    // Local order: owned first, then by level, ascending global index within a level.
    for (const LocalEntities* e : {&d.cells, &d.edges, &d.vertices})
      for (std::int32_t i = 1; i < e->size(); ++i) {
        EXPECT_LE(e->halo_level[i - 1], e->halo_level[i]);
        if (e->halo_level[i - 1] == e->halo_level[i]) {
          EXPECT_LT(e->global[i - 1], e->global[i]);
        }
      }
    for (std::int32_t i = 0; i < d.edges.size(); ++i) {
      const int level = d.edges.halo_level[i];
      EXPECT_EQ(level == 0, d.edges.owner[i] == r);
      if (level == 0) ++edge_owned[d.edges.global[i]];
    }
    for (std::int32_t i = 0; i < d.vertices.size(); ++i) {
      EXPECT_EQ(d.vertices.halo_level[i] == 0, d.vertices.owner[i] == r);
      if (d.vertices.halo_level[i] == 0) ++vertex_owned[d.vertices.global[i]];
    }
    // Local tables map back to the global ones; C2E is complete on every local cell, and every
    // diamond is complete on the edges the Smagorinsky stencil runs over (up to halo level 2).
    const Grid& l = d.grid;
    for (std::int32_t c = 0; c < l.num_cells; ++c)
      for (int j = 0; j < 3; ++j) {
        ASSERT_GE(l.c2e[3 * c + j], 0);
        EXPECT_EQ(d.edges.global[l.c2e[3 * c + j]], g.c2e[3 * d.cells.global[c] + j]);
        const std::int32_t n = l.c2e2c[3 * c + j];
        if (n >= 0) {
          EXPECT_EQ(d.cells.global[n], g.c2e2c[3 * d.cells.global[c] + j]);
        }
        if (c < d.cells.level_begin[2]) {
          EXPECT_GE(n, 0) << "owned and level-1 cells see all";
        }
      }
    for (std::int32_t e = 0; e < l.end_index(Dimension::Edge, Zone::HaloLevel2); ++e)
      for (int i = 0; i < 4; ++i) {
        ASSERT_GE(l.e2c2v[4 * e + i], 0) << "edge " << e;
        EXPECT_EQ(d.vertices.global[l.e2c2v[4 * e + i]], g.e2c2v[4 * d.edges.global[e] + i]);
      }
    EXPECT_EQ(l.end_index(Dimension::Cell, Zone::Local), d.cells.num_owned());
    EXPECT_EQ(l.start_index(Dimension::Cell, Zone::Halo), d.cells.num_owned());
    EXPECT_EQ(l.end_index(Dimension::Cell, Zone::HaloLevel2), d.cells.size());
  }
  // The gather's order: every rank's owned entities, rank after rank, as each rank numbers them.
  for (const Dimension dim : {Dimension::Cell, Dimension::Edge, Dimension::Vertex}) {
    const OwnedByRank all = owned_by_rank(g, owner, ranks, dim);
    std::size_t at = 0;
    for (const RankDomain& d : domains) {
      const LocalEntities& e = dim == Dimension::Cell   ? d.cells
                               : dim == Dimension::Edge ? d.edges
                                                        : d.vertices;
      ASSERT_EQ(all.counts[d.rank], e.num_owned());
      for (std::int32_t i = 0; i < e.num_owned(); ++i) EXPECT_EQ(all.order[at++], e.global[i]);
    }
    EXPECT_EQ(at, all.order.size());
  }
  for (std::int32_t c = 0; c < g.num_cells; ++c) EXPECT_EQ(cell_owned[c], 1) << "cell " << c;
  for (std::int32_t e = 0; e < g.num_edges; ++e) EXPECT_EQ(edge_owned[e], 1) << "edge " << e;
  for (std::int32_t v = 0; v < g.num_vertices; ++v) EXPECT_EQ(vertex_owned[v], 1) << "vertex " << v;

  // The two sides of every exchange: what r sends q is what q receives from r, in its order,
  // and every halo entry is received exactly once.
  for (int kind = 0; kind < 3; ++kind)
    for (const RankDomain& d : domains) {
      const auto& mine = kind == 0 ? d.cells : kind == 1 ? d.edges : d.vertices;
      const auto& pattern = kind == 0 ? d.cell_halo : kind == 1 ? d.edge_halo : d.vertex_halo;
      std::vector<int> received(mine.size(), 0);
      for (const HaloNeighbour& n : pattern) {
        const RankDomain& other = domains[n.rank];
        const auto& theirs = kind == 0 ? other.cells : kind == 1 ? other.edges : other.vertices;
        const auto& back = kind == 0   ? other.cell_halo
                           : kind == 1 ? other.edge_halo
                                       : other.vertex_halo;
        const auto it = std::find_if(back.begin(), back.end(),
                                     [&](const HaloNeighbour& b) { return b.rank == d.rank; });
        ASSERT_NE(it, back.end());
        ASSERT_EQ(n.receive.size(), it->send.size());
        for (std::size_t i = 0; i < n.receive.size(); ++i) {
          EXPECT_EQ(mine.global[n.receive[i]], theirs.global[it->send[i]]);
          EXPECT_EQ(theirs.halo_level[it->send[i]], 0);
          ++received[n.receive[i]];
        }
      }
      for (std::int32_t i = 0; i < mine.size(); ++i)
        EXPECT_EQ(received[i], i < mine.num_owned() ? 0 : 1) << "kind " << kind << " entry " << i;
    }
}

// The icosahedron, cell 0 on rank 0 and the other 19 on rank 1, counted by hand. Rank 0: its
// cell; the 3 across its edges (level 1); around each of its 3 vertices (pentagons) 2 more cells
// (level 2: 6). Its 3 vertices and 3 edges lie on rank 1's cells too and go to the higher rank
// (level 1); level 2 holds the far vertex of each level-1 cell and the fifth vertex of each
// pentagon (6), and the 9 edges from its vertices not on its cell; level 3 the 6 outer edges of
// the level-2 cells. A disk of 10 cells, 18 edges, 9 vertices (Euler: 9 - 18 + 10 = 1).
TEST(DiffusionDecomposition, IcosahedronByHand) {
  const Grid g = icosahedral_grid(1, 0);
  ASSERT_EQ(g.num_cells, 20);
  std::vector<std::int32_t> owner(20, 1);
  owner[0] = 0;
  const RankDomain r0 = rank_domain(g, owner, 2, 0), r1 = rank_domain(g, owner, 2, 1);
  EXPECT_EQ(level_counts(r0.cells), (std::array<std::int32_t, 4>{1, 3, 6, 0}));
  EXPECT_EQ(level_counts(r0.vertices), (std::array<std::int32_t, 4>{0, 3, 6, 0}));
  EXPECT_EQ(level_counts(r0.edges), (std::array<std::int32_t, 4>{0, 3, 9, 6}));
  // Rank 1 owns every vertex and edge (all lie on its cells, and it is the higher rank); its
  // only halo cell is rank 0's.
  EXPECT_EQ(level_counts(r1.cells), (std::array<std::int32_t, 4>{19, 1, 0, 0}));
  EXPECT_EQ(level_counts(r1.vertices), (std::array<std::int32_t, 4>{12, 0, 0, 0}));
  EXPECT_EQ(level_counts(r1.edges), (std::array<std::int32_t, 4>{30, 0, 0, 0}));
  // Exchanges: rank 0 receives its 9 vertices and 18 edges, sends its cell.
  ASSERT_EQ(r0.vertex_halo.size(), 1u);
  EXPECT_EQ(r0.vertex_halo[0].receive.size(), 9u);
  EXPECT_EQ(r0.edge_halo[0].receive.size(), 18u);
  ASSERT_EQ(r0.cell_halo.size(), 1u);
  EXPECT_EQ(r0.cell_halo[0].send.size(), 1u);
  EXPECT_EQ(r0.cell_halo[0].receive.size(), 9u);
  EXPECT_EQ(r1.cell_halo[0].receive.size(), 1u);
  EXPECT_TRUE(r1.vertex_halo.empty() || r1.vertex_halo[0].receive.empty());
  check_decomposition(g, owner, 2);
}

TEST(DiffusionDecomposition, LatitudeBandsFollowTheDefinitions) {
  const Grid g = icosahedral_grid(2, 1);
  check_decomposition(g, bands(g, {1, 2, 3}), 3);
  check_decomposition(g, bands(g, {5, 1, 1, 2}), 4);
  // The library's equal bands: as many cells on each rank (to one), rank 0 the northernmost.
  const std::vector<std::int32_t> equal = latitude_bands(g, 3);
  check_decomposition(g, equal, 3);
  std::vector<int> count(3, 0);
  double south_of_0 = 1e9, north_of_1 = -1e9;
  for (std::int32_t c = 0; c < g.num_cells; ++c) {
    ++count[equal[c]];
    if (equal[c] == 0) south_of_0 = std::min(south_of_0, g.cell_lat[c]);
    if (equal[c] == 1) north_of_1 = std::max(north_of_1, g.cell_lat[c]);
  }
  for (int n : count) EXPECT_NEAR(n, g.num_cells / 3.0, 1.0);
  EXPECT_GE(south_of_0, north_of_1);
  EXPECT_THROW(latitude_bands(g, 0), sciproxy::InvalidArgument);
}

TEST(DiffusionDecomposition, OneRankHasNoHalo) {
  const Grid g = icosahedral_grid(2, 0);
  const RankDomain d = rank_domain(g, std::vector<std::int32_t>(g.num_cells, 0), 1, 0);
  EXPECT_EQ(d.cells.size(), g.num_cells);
  EXPECT_EQ(d.cells.num_owned(), g.num_cells);
  EXPECT_EQ(d.edges.num_owned(), g.num_edges);
  EXPECT_EQ(d.vertices.num_owned(), g.num_vertices);
  EXPECT_EQ(d.grid.c2e, g.c2e);
  EXPECT_EQ(d.grid.e2c2v, g.e2c2v);
  EXPECT_TRUE(d.cell_halo.empty() && d.edge_halo.empty() && d.vertex_halo.empty());
}

TEST(DiffusionDecomposition, BadCellOwnerIsRefused) {
  const Grid g = icosahedral_grid(1, 0);
  EXPECT_THROW(check_cell_owner(g, std::vector<std::int32_t>(19, 0), 1), sciproxy::InvalidArgument);
  std::vector<std::int32_t> owner(20, 0);
  owner[7] = 2;
  EXPECT_THROW(check_cell_owner(g, owner, 2), sciproxy::InvalidArgument);
  owner[7] = -1;
  EXPECT_THROW(check_cell_owner(g, owner, 2), sciproxy::InvalidArgument);
  owner[7] = 0;  // rank 1 without a cell
  EXPECT_THROW(check_cell_owner(g, owner, 2), sciproxy::InvalidArgument);
  owner[7] = 1;
  EXPECT_NO_THROW(check_cell_owner(g, owner, 2));
}

TEST(DiffusionDecomposition, MetisPartition) {
  const Grid g = icosahedral_grid(2, 2);
  if (!metis_compiled()) {
    EXPECT_THROW(partition_cells(g, 3), sciproxy::NotCompiled);
    return;
  }
  const std::vector<std::int32_t> parts = partition_cells(g, 3);
  ASSERT_EQ(parts.size(), static_cast<std::size_t>(g.num_cells));
  std::vector<int> count(3, 0);
  for (std::int32_t p : parts) {
    ASSERT_TRUE(p >= 0 && p < 3);
    ++count[p];
  }
  // METIS balances to within its default 3% imbalance.
  for (int c : count) EXPECT_NEAR(c, g.num_cells / 3.0, 0.04 * g.num_cells / 3.0);
  EXPECT_EQ(partition_cells(g, 3), parts) << "the same partition every time";
  EXPECT_EQ(partition_cells(g, 1), std::vector<std::int32_t>(g.num_cells, 0));
  EXPECT_THROW(partition_cells(g, 0), sciproxy::InvalidArgument);
  check_decomposition(icosahedral_grid(2, 1), partition_cells(icosahedral_grid(2, 1), 3), 3);
}

}  // namespace
