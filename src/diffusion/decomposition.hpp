// The grid of one rank under MPI: from the owner rank of every global cell, the rank's cells,
// edges and vertices with ICON's halo levels, their local numbering, the local grid the granule
// runs on, and the halo exchange pattern. Built alike on every rank from the replicated global
// grid and owner array, so no rank needs to ask another which entries it wants. The definitions
// (ICON4Py's IconLikeHaloConstructor, decomposition/halo.py):
//
//   owned cells O: owner == rank
//   halo level 1 cells H1 = C2E2C(O) \ O (the cells across an edge of an owned cell)
//   cutting-line vertices X: the vertices of owned cells with a cell around them (V2C) not in O
//   halo level 2 cells H2 = V2C(X) \ (O u H1) (those closing the hexagons of X)
//   owner of an edge: the highest owner of its cells E2C; of a vertex: of its cells V2C (ICON
//     puts an entity on the cutting line on the higher rank, mo_decomposition_tools.f90)
//   vertices: level 0 (owned) or 1 (not owned) on owned cells, level 2 on halo cells only
//   edges: level 0 or 1 on owned cells, level 2: V2E(X) not on owned cells, level 3: the other
//     edges of halo cells (ICON4Py only, so that C2E is complete on every local cell)
//   local order: owned, then level 1, 2, (3), each by ascending global index
//
// Every local entity's value is owned by exactly one rank, which sends it to the ranks that have
// it in their halo: exchanging an entity kind's halo after a stencil makes every local entry
// equal to the global field's.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion {

// One entity kind (cells, edges or vertices) on one rank.
struct LocalEntities {
  std::vector<std::int32_t> global;           // local index -> global index
  std::vector<std::int8_t> halo_level;        // 0 owned, 1, 2, 3 (edges only)
  std::vector<std::int32_t> owner;            // the rank owning each local entity
  std::array<std::int32_t, 5> level_begin{};  // local [level_begin[l], level_begin[l + 1])
  std::int32_t size() const { return static_cast<std::int32_t>(global.size()); }
  std::int32_t num_owned() const { return level_begin[1]; }
};

// Who sends which local entries to whom, per entity kind: the same order on both sides.
struct HaloNeighbour {
  int rank = 0;
  std::vector<std::int32_t> send;     // local indices of owned entries rank `rank` has in its halo
  std::vector<std::int32_t> receive;  // local indices of halo entries owned by rank `rank`
};
using HaloPattern = std::vector<HaloNeighbour>;

struct RankDomain {
  int rank = 0, num_ranks = 1;
  LocalEntities cells, edges, vertices;
  // The local grid: every table renumbered (-1 where the neighbour is not local), the positions
  // and measures of the local entities, zones LOCAL = INTERIOR = the owned entities, HALO and
  // HALO_LEVEL_2 the halo levels 1 and 2 (edges of level 3 after them, up to END).
  Grid grid;
  HaloPattern cell_halo, edge_halo, vertex_halo;
};

// InvalidArgument ("cell_owner") unless owner holds num_cells ranks in [0, num_ranks), each
// rank owning at least one cell; and for a limited-area grid with more than one rank.
void check_cell_owner(const Grid& global, const std::vector<std::int32_t>& owner, int num_ranks);

// The entities of `rank` (no grid, no pattern): cheap enough to build for every rank.
std::array<LocalEntities, 3> local_entities(const Grid& global,
                                            const std::vector<std::int32_t>& owner, int rank);

// Every rank's owned entities of a dimension, rank after rank (ascending global index within a
// rank), and how many each rank owns: where a gather of every rank's owned rows puts them.
struct OwnedByRank {
  std::vector<std::int32_t> order;
  std::vector<std::int64_t> counts;
};
OwnedByRank owned_by_rank(const Grid& global, const std::vector<std::int32_t>& owner, int num_ranks,
                          Dimension dim);

// ICON's form, each rank's own numbering: the exchange pattern of one entity kind found by
// asking the owner of every halo entry for it by global index (a count per pair of ranks, then
// one exchange of index lists). Collective. InvalidArgument (naming `what`) on every rank when
// an owner is out of range, or is asked for an index it does not own.
HaloPattern halo_pattern_by_request(const Communicator& comm,
                                    const std::vector<std::int32_t>& global_index,
                                    const std::vector<std::int32_t>& owner,
                                    const std::string& what);

// The whole domain of `rank` (check_cell_owner first).
RankDomain rank_domain(const Grid& global, const std::vector<std::int32_t>& owner, int num_ranks,
                       int rank);

}  // namespace sciproxy::diffusion
