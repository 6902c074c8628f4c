// The partition of a grid across ranks and each rank's local grid (decomposition.hpp has the
// definitions of the halo levels). METIS partitions the cell graph: one vertex per cell, one
// graph edge per shared grid edge (C2E2C), unit weights, k-way, METIS's default options (its
// fixed seed makes the partition the same on every rank and machine).
#include "diffusion/decomposition.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "core/collective.hpp"
#include "sciproxy/core/error.hpp"

#if defined(SCIPROXY_HAVE_METIS)
#include <metis.h>
#endif

namespace sciproxy::diffusion {

bool metis_compiled() {
#if defined(SCIPROXY_HAVE_METIS)
  return true;
#else
  return false;
#endif
}

std::vector<std::int32_t> partition_cells(const Grid& grid, int num_parts) {
  require(num_parts >= 1 && num_parts <= grid.num_cells, "num_parts",
          fmt::format("1 to num_cells = {} parts", grid.num_cells), std::to_string(num_parts));
  if (num_parts == 1) return std::vector<std::int32_t>(grid.num_cells, 0);
#if defined(SCIPROXY_HAVE_METIS)
  std::vector<idx_t> xadj(1, 0), adjncy;
  for (std::int32_t c = 0; c < grid.num_cells; ++c) {
    for (int j = 0; j < kC2E2C; ++j)
      if (const std::int32_t n = grid.c2e2c[kC2E2C * c + j]; n >= 0) adjncy.push_back(n);
    xadj.push_back(static_cast<idx_t>(adjncy.size()));
  }
  idx_t nvtxs = grid.num_cells, ncon = 1, nparts = num_parts, edgecut = 0;
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  std::vector<idx_t> part(grid.num_cells);
  const int status =
      METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adjncy.data(), nullptr, nullptr, nullptr,
                          &nparts, nullptr, nullptr, options, &edgecut, part.data());
  if (status != METIS_OK)
    throw Error(ErrorCode::runtime_error, fmt::format("METIS_PartGraphKway failed ({})", status));
  return std::vector<std::int32_t>(part.begin(), part.end());
#else
  throw NotCompiled(
      "partition_cells: sciproxy was built without METIS (libmetis-dev, SCIPROXY_METIS); give "
      "the decomposition as DiffusionOptions::cell_owner");
#endif
}

std::vector<std::int32_t> latitude_bands(const Grid& grid, int num_parts) {
  require(num_parts >= 1 && num_parts <= grid.num_cells, "num_parts",
          fmt::format("1 to num_cells = {} parts", grid.num_cells), std::to_string(num_parts));
  std::vector<std::int32_t> order(grid.num_cells);
  for (std::int32_t c = 0; c < grid.num_cells; ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return grid.cell_lat[a] > grid.cell_lat[b];
  });
  std::vector<std::int32_t> owner(grid.num_cells);
  for (std::int64_t i = 0; i < grid.num_cells; ++i)
    owner[order[i]] = static_cast<std::int32_t>(i * num_parts / grid.num_cells);
  return owner;
}

void check_cell_owner(const Grid& global, const std::vector<std::int32_t>& owner, int num_ranks) {
  require(static_cast<std::int64_t>(owner.size()) == global.num_cells, "cell_owner",
          fmt::format("num_cells = {} ranks", global.num_cells),
          fmt::format("{} values", owner.size()));
  std::vector<std::int64_t> cells_of(num_ranks, 0);
  for (std::size_t c = 0; c < owner.size(); ++c) {
    if (owner[c] < 0 || owner[c] >= num_ranks)
      throw_invalid_argument("cell_owner", fmt::format("ranks in [0, {})", num_ranks),
                             fmt::format("{} at cell {}", owner[c], c));
    ++cells_of[owner[c]];
  }
  for (int r = 0; r < num_ranks; ++r)
    require(cells_of[r] > 0, "cell_owner", "at least one cell on every rank",
            fmt::format("no cell on rank {}", r));
  require(!global.limited_area || num_ranks == 1, "grid",
          "a global grid under a communicator of several ranks (limited-area grids run on one)",
          "a limited-area grid");
}

namespace {

// The highest owner among the cells of a table row (skipping missing ones).
std::int32_t highest_owner(const std::vector<std::int32_t>& table, int width, std::int64_t row,
                           const std::vector<std::int32_t>& owner) {
  std::int32_t best = -1;
  for (int j = 0; j < width; ++j)
    if (const std::int32_t c = table[width * row + j]; c >= 0) best = std::max(best, owner[c]);
  return best;
}

// Orders the entities by level, then by global index, and records where each level begins.
LocalEntities ordered(const std::map<std::int32_t, std::int8_t>& level_of,
                      const std::vector<std::int32_t>& owner_of_global) {
  LocalEntities out;
  for (int level = 0; level < 4; ++level) {
    out.level_begin[level] = out.size();
    for (const auto& [g, l] : level_of)
      if (l == level) {
        out.global.push_back(g);
        out.halo_level.push_back(l);
        out.owner.push_back(owner_of_global[g]);
      }
  }
  out.level_begin[4] = out.size();
  return out;
}

}  // namespace

std::array<LocalEntities, 3> local_entities(const Grid& g, const std::vector<std::int32_t>& owner,
                                            int rank) {
  std::vector<std::int32_t> edge_owner(g.num_edges), vertex_owner(g.num_vertices);
  for (std::int32_t e = 0; e < g.num_edges; ++e)
    edge_owner[e] = highest_owner(g.e2c, kE2C, e, owner);
  for (std::int32_t v = 0; v < g.num_vertices; ++v)
    vertex_owner[v] = highest_owner(g.v2c, kV2C, v, owner);

  std::map<std::int32_t, std::int8_t> cells, edges, vertices;
  std::vector<std::int32_t> owned;
  for (std::int32_t c = 0; c < g.num_cells; ++c)
    if (owner[c] == rank) owned.push_back(c), cells[c] = 0;
  for (std::int32_t c : owned)
    for (int j = 0; j < kC2E2C; ++j)
      if (const std::int32_t n = g.c2e2c[kC2E2C * c + j]; n >= 0 && !cells.count(n)) cells[n] = 1;
  // Vertices and edges of owned cells: owned, or level 1 where a higher rank owns them.
  std::set<std::int32_t> cutting;
  for (std::int32_t c : owned) {
    for (int j = 0; j < kC2V; ++j) {
      const std::int32_t v = g.c2v[kC2V * c + j];
      vertices[v] = vertex_owner[v] == rank ? 0 : 1;
      for (int i = 0; i < kV2C; ++i)
        if (const std::int32_t n = g.v2c[kV2C * v + i]; n >= 0 && owner[n] != rank)
          cutting.insert(v);
    }
    for (int j = 0; j < kC2E; ++j) {
      const std::int32_t e = g.c2e[kC2E * c + j];
      edges[e] = edge_owner[e] == rank ? 0 : 1;
    }
  }
  for (std::int32_t v : cutting) {
    for (int i = 0; i < kV2C; ++i)
      if (const std::int32_t n = g.v2c[kV2C * v + i]; n >= 0 && !cells.count(n)) cells[n] = 2;
    for (int i = 0; i < kV2E; ++i)
      if (const std::int32_t e = g.v2e[kV2E * v + i]; e >= 0 && !edges.count(e)) edges[e] = 2;
  }
  for (const auto& [c, level] : cells) {
    if (level == 0) continue;
    for (int j = 0; j < kC2V; ++j)
      if (const std::int32_t v = g.c2v[kC2V * c + j]; !vertices.count(v)) vertices[v] = 2;
    for (int j = 0; j < kC2E; ++j)
      if (const std::int32_t e = g.c2e[kC2E * c + j]; !edges.count(e)) edges[e] = 3;
  }
  return {ordered(cells, owner), ordered(edges, edge_owner), ordered(vertices, vertex_owner)};
}

OwnedByRank owned_by_rank(const Grid& g, const std::vector<std::int32_t>& owner, int num_ranks,
                          Dimension dim) {
  const std::int32_t n = g.size(dim);
  std::vector<std::int32_t> owner_of(n);
  for (std::int32_t i = 0; i < n; ++i)
    owner_of[i] = dim == Dimension::Cell   ? owner[i]
                  : dim == Dimension::Edge ? highest_owner(g.e2c, kE2C, i, owner)
                                           : highest_owner(g.v2c, kV2C, i, owner);
  OwnedByRank out;
  out.counts.assign(num_ranks, 0);
  for (std::int32_t r : owner_of) ++out.counts[r];
  std::vector<std::int64_t> next(num_ranks, 0);
  for (int r = 1; r < num_ranks; ++r) next[r] = next[r - 1] + out.counts[r - 1];
  out.order.resize(n);
  for (std::int32_t i = 0; i < n; ++i) out.order[next[owner_of[i]]++] = i;
  return out;
}

HaloPattern halo_pattern_by_request(const Communicator& comm,
                                    const std::vector<std::int32_t>& global_index,
                                    const std::vector<std::int32_t>& owner,
                                    const std::string& what) {
  const int ranks = comm.size(), me = comm.rank();
  std::vector<std::vector<std::int32_t>> wanted(ranks), wanted_at(ranks);
  collective::on_every_rank(comm, [&] {
    for (std::size_t i = 0; i < owner.size(); ++i) {
      if (owner[i] < 0 || owner[i] >= ranks)
        throw_invalid_argument(what, fmt::format("ranks in [0, {})", ranks),
                               fmt::format("{} at local entry {}", owner[i], i));
      if (owner[i] == me) continue;
      wanted[owner[i]].push_back(global_index[i]);
      wanted_at[owner[i]].push_back(static_cast<std::int32_t>(i));
    }
  });
  std::vector<std::int64_t> counts(ranks);
  for (int q = 0; q < ranks; ++q) counts[q] = static_cast<std::int64_t>(wanted[q].size());
  const std::vector<std::int64_t> all = collective::allgather(comm, counts);  // [asker][owner]
  std::vector<std::vector<std::int32_t>> asked(ranks);
  std::vector<collective::Message<std::int32_t>> messages;
  for (int q = 0; q < ranks; ++q) {
    if (q == me) continue;
    asked[q].resize(static_cast<std::size_t>(all[static_cast<std::size_t>(q) * ranks + me]));
    if (!wanted[q].empty() || !asked[q].empty()) messages.push_back({q, wanted[q], asked[q]});
  }
  collective::start_exchange<std::int32_t>(comm, messages, 4).wait();
  HaloPattern pattern;
  collective::on_every_rank(comm, [&] {
    std::unordered_map<std::int32_t, std::int32_t> owned_at;
    for (std::size_t i = 0; i < owner.size(); ++i)
      if (owner[i] == me) owned_at[global_index[i]] = static_cast<std::int32_t>(i);
    for (int q = 0; q < ranks; ++q) {
      if (q == me || (wanted[q].empty() && asked[q].empty())) continue;
      HaloNeighbour n;
      n.rank = q;
      n.receive = wanted_at[q];
      for (std::int32_t g : asked[q]) {
        const auto it = owned_at.find(g);
        if (it == owned_at.end())
          throw_invalid_argument(what, "every halo entry owned by the rank named its owner",
                                 fmt::format("rank {} names rank {} the owner of global index {}, "
                                             "which rank {} does not own",
                                             q, me, g, me));
        n.send.push_back(it->second);
      }
      pattern.push_back(std::move(n));
    }
  });
  return pattern;
}

namespace {

// Rows of a per-entity array for the local entities (empty stays empty).
template <class T>
std::vector<T> rows_of(const std::vector<T>& x, const LocalEntities& local, int width) {
  if (x.empty()) return {};
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(local.size()) * width);
  for (std::int32_t g : local.global)
    out.insert(out.end(), x.begin() + std::int64_t{g} * width,
               x.begin() + (std::int64_t{g} + 1) * width);
  return out;
}

// A table's rows renumbered into local indices of its target kind (-1: not on this rank).
std::vector<std::int32_t> table_of(const std::vector<std::int32_t>& table,
                                   const LocalEntities& rows, int width,
                                   const std::vector<std::int32_t>& to_local) {
  std::vector<std::int32_t> out = rows_of(table, rows, width);
  for (std::int32_t& t : out) t = t >= 0 ? to_local[t] : -1;
  return out;
}

std::vector<std::int32_t> local_index(const LocalEntities& local, std::int32_t global_size) {
  std::vector<std::int32_t> out(global_size, -1);
  for (std::int32_t i = 0; i < local.size(); ++i) out[local.global[i]] = i;
  return out;
}

void set_zones(Grid& grid, Dimension dim, const LocalEntities& local) {
  set_halo_zones(grid, dim, local.halo_level, "halo_level");
}

// For each other rank: what it owns in my halo (receive), and what I own in its halo (send,
// in its local order, which is ascending global index within its levels: the order it receives).
HaloPattern halo_pattern(const LocalEntities& mine, const std::vector<LocalEntities>& everyone,
                         const std::vector<std::int32_t>& to_local, int rank) {
  HaloPattern pattern;
  for (int other = 0; other < static_cast<int>(everyone.size()); ++other) {
    if (other == rank) continue;
    HaloNeighbour n;
    n.rank = other;
    for (std::int32_t i = mine.num_owned(); i < mine.size(); ++i)
      if (mine.owner[i] == other) n.receive.push_back(i);
    const LocalEntities& theirs = everyone[other];
    for (std::int32_t i = theirs.num_owned(); i < theirs.size(); ++i)
      if (theirs.owner[i] == rank) n.send.push_back(to_local[theirs.global[i]]);
    if (!n.send.empty() || !n.receive.empty()) pattern.push_back(std::move(n));
  }
  return pattern;
}

}  // namespace

void set_halo_zones(Grid& grid, Dimension dim, const std::vector<std::int8_t>& halo_level,
                    const std::string& argument) {
  const std::int32_t n = grid.size(dim);
  require(static_cast<std::int64_t>(halo_level.size()) == n, argument,
          fmt::format("{} values (one per local entity)", n), std::to_string(halo_level.size()));
  // begin[l]: the first entity of level l (levels 0 .. 3 in order, then the end).
  std::array<std::int32_t, 5> begin{0, n, n, n, n};
  int previous = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    const int l = halo_level[i];
    if (l < 0 || l > 3 || l < previous)
      throw_invalid_argument(argument,
                             "halo levels in [0, 3], the owned entities (0) first, then levels 1, "
                             "2 and 3 in order",
                             fmt::format("{} at local entry {} after {}", l, i, previous));
    for (int k = previous + 1; k <= l; ++k) begin[k] = i;
    previous = l;
  }
  auto& start = grid.zone_start[static_cast<int>(dim)];
  auto& end = grid.zone_end[static_cast<int>(dim)];
  start.fill(0), end.fill(0);
  auto zone = [&](Zone z, std::int32_t first, std::int32_t stop) {
    start[static_cast<int>(z)] = first, end[static_cast<int>(z)] = stop;
  };
  zone(Zone::Interior, 0, begin[1]);
  zone(Zone::Local, 0, begin[1]);
  zone(Zone::Halo, begin[1], begin[2]);
  zone(Zone::HaloLevel2, begin[2], begin[3]);
  zone(Zone::End, n, n);
}

RankDomain rank_domain(const Grid& g, const std::vector<std::int32_t>& owner, int num_ranks,
                       int rank) {
  RankDomain d;
  d.rank = rank;
  d.num_ranks = num_ranks;
  std::array<std::vector<LocalEntities>, 3> everyone;
  for (int r = 0; r < num_ranks; ++r) {
    auto kinds = local_entities(g, owner, r);
    for (int k = 0; k < 3; ++k) everyone[k].push_back(std::move(kinds[k]));
  }
  d.cells = everyone[0][rank], d.edges = everyone[1][rank], d.vertices = everyone[2][rank];
  const auto cell_of = local_index(d.cells, g.num_cells);
  const auto edge_of = local_index(d.edges, g.num_edges);
  const auto vertex_of = local_index(d.vertices, g.num_vertices);

  Grid& l = d.grid;
  l.n = g.n, l.k = g.k, l.radius = g.radius;
  l.num_cells = d.cells.size(), l.num_edges = d.edges.size(), l.num_vertices = d.vertices.size();
  const LocalEntities &C = d.cells, &E = d.edges, &V = d.vertices;
  l.c2e = table_of(g.c2e, C, kC2E, edge_of);
  l.c2v = table_of(g.c2v, C, kC2V, vertex_of);
  l.c2e2c = table_of(g.c2e2c, C, kC2E2C, cell_of);
  l.c2e2co = table_of(g.c2e2co, C, kC2E2CO, cell_of);
  l.e2c = table_of(g.e2c, E, kE2C, cell_of);
  l.e2v = table_of(g.e2v, E, kE2V, vertex_of);
  l.e2c2v = table_of(g.e2c2v, E, kE2C2V, vertex_of);
  l.v2e = table_of(g.v2e, V, kV2E, edge_of);
  l.v2c = table_of(g.v2c, V, kV2C, cell_of);
  l.edge_orientation = rows_of(g.edge_orientation, C, 3);
  l.tangent_orientation = rows_of(g.tangent_orientation, E, 1);
  l.vertex_edge_orientation = rows_of(g.vertex_edge_orientation, V, 6);
  l.cell_lat = rows_of(g.cell_lat, C, 1), l.cell_lon = rows_of(g.cell_lon, C, 1);
  l.cell_center = rows_of(g.cell_center, C, 3);
  l.vertex_lat = rows_of(g.vertex_lat, V, 1), l.vertex_lon = rows_of(g.vertex_lon, V, 1);
  l.vertex_center = rows_of(g.vertex_center, V, 3);
  l.edge_center_lat = rows_of(g.edge_center_lat, E, 1);
  l.edge_center_lon = rows_of(g.edge_center_lon, E, 1);
  l.edge_center = rows_of(g.edge_center, E, 3);
  l.cell_area = rows_of(g.cell_area, C, 1);
  l.dual_area = rows_of(g.dual_area, V, 1);
  l.edge_length = rows_of(g.edge_length, E, 1);
  l.dual_edge_length = rows_of(g.dual_edge_length, E, 1);
  l.edge_cell_length = rows_of(g.edge_cell_length, E, 2);
  l.edge_vert_length = rows_of(g.edge_vert_length, E, 2);
  l.primal_cart_normal = rows_of(g.primal_cart_normal, E, 3);
  l.dual_cart_normal = rows_of(g.dual_cart_normal, E, 3);
  l.primal_normal_x = rows_of(g.primal_normal_x, E, 1);
  l.primal_normal_y = rows_of(g.primal_normal_y, E, 1);
  l.dual_normal_x = rows_of(g.dual_normal_x, E, 1);
  l.dual_normal_y = rows_of(g.dual_normal_y, E, 1);
  l.limited_area = false;
  l.cell_refin_ctrl = rows_of(g.cell_refin_ctrl, C, 1);
  l.edge_refin_ctrl = rows_of(g.edge_refin_ctrl, E, 1);
  l.vertex_refin_ctrl = rows_of(g.vertex_refin_ctrl, V, 1);
  set_zones(l, Dimension::Cell, C);
  set_zones(l, Dimension::Edge, E);
  set_zones(l, Dimension::Vertex, V);

  d.cell_halo = halo_pattern(C, everyone[0], cell_of, rank);
  d.edge_halo = halo_pattern(E, everyone[1], edge_of, rank);
  d.vertex_halo = halo_pattern(V, everyone[2], vertex_of, rank);
  return d;
}

}  // namespace sciproxy::diffusion
