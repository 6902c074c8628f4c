// Grid zones and their index ranges, as ICON4Py derives them from ICON's refinement control
// (icon4py.model.common.grid.grid_refinement.compute_domain_bounds, one process, no halos):
//
//   refin_ctrl of a nested parent grid: -4 (cells, vertices) or -8 (edges) -> 0, other v < 0 -> -v
//   zone value v:  LATERAL_BOUNDARY_LEVEL_i -> i,  NUDGING_LEVEL_j -> last boundary row + j
//                  (cells, vertices: 4 + j; edges: 8 + j)
//   [start, end) of a boundary or nudging zone = [min, max + 1) of { e : refin_ctrl[e] == v },
//                  (0, 0) when no entity has v
//   INTERIOR = [end of the last nudging zone, n),  LOCAL = [0, n),  HALO* = END = [n, n)
#include <fmt/format.h>

#include <string>

#include "sciproxy/core/error.hpp"
#include "sciproxy/diffusion.hpp"

namespace sciproxy::diffusion {

namespace {

constexpr const char* kZoneNames[kNumZones] = {
    "end",        "interior",   "halo_level_1", "halo_level_2",    "local",
    "lb_level_1", "lb_level_2", "lb_level_3",   "lb_level_4",      "lb_level_5",
    "lb_level_6", "lb_level_7", "lb_level_8",   "nudging_level_1", "nudging_level_2"};

int last_boundary_row(Dimension dim) {
  return dim == Dimension::Edge ? 8 : 4;
}
int nudging_rows(Dimension dim) {
  return dim == Dimension::Edge ? 2 : 1;
}
const char* dimension_name(Dimension dim) {
  switch (dim) {
    case Dimension::Cell:
      return "cells";
    case Dimension::Edge:
      return "edges";
    default:
      return "vertices";
  }
}

// ICON4Py's convert_to_non_nested_refinement_values: a parent grid's negative values count the
// rows of an overlap region, -4 (cells, vertices) or -8 (edges) its unordered interior.
std::int32_t non_nested(Dimension dim, std::int32_t v) {
  if (v == (dim == Dimension::Edge ? -8 : -4)) return 0;
  return v < 0 ? -v : v;
}

void fill_bounds(Grid& g, Dimension dim, const std::vector<std::int32_t>& refin_ctrl) {
  const std::int32_t n = g.size(dim);
  if (!refin_ctrl.empty() && static_cast<std::int64_t>(refin_ctrl.size()) != n)
    throw InvalidArgument(
        fmt::format("refin_ctrl of the {}: expected {} entries (one per entity) or none, got {}",
                    dimension_name(dim), n, refin_ctrl.size()));
  const int d = static_cast<int>(dim);
  auto& start = g.zone_start[d];
  auto& end = g.zone_end[d];
  start.fill(0);
  end.fill(0);
  const int rows = last_boundary_row(dim) + nudging_rows(dim);
  // first[v] and last[v] for every ordered value v = 1 .. rows.
  std::vector<std::int32_t> first(rows + 1, -1), last(rows + 1, -1);
  for (std::int32_t e = 0; e < static_cast<std::int32_t>(refin_ctrl.size()); ++e) {
    const std::int32_t v = non_nested(dim, refin_ctrl[e]);
    if (v >= 1 && v <= rows) {
      if (first[v] < 0) first[v] = e;
      last[v] = e;
    }
  }
  auto zone_of_value = [&](int v) {
    return v <= last_boundary_row(dim)
               ? static_cast<Zone>(static_cast<int>(Zone::LateralBoundary) + v - 1)
               : static_cast<Zone>(static_cast<int>(Zone::Nudging) + v - last_boundary_row(dim) -
                                   1);
  };
  for (int v = 1; v <= rows; ++v)
    if (first[v] >= 0) {
      start[static_cast<int>(zone_of_value(v))] = first[v];
      end[static_cast<int>(zone_of_value(v))] = last[v] + 1;
    }
  const int last_nudging = static_cast<int>(zone_of_value(rows));
  start[static_cast<int>(Zone::Interior)] = end[last_nudging];
  end[static_cast<int>(Zone::Interior)] = n;
  start[static_cast<int>(Zone::Local)] = 0;
  end[static_cast<int>(Zone::Local)] = n;
  for (Zone z : {Zone::Halo, Zone::HaloLevel2, Zone::End}) {
    start[static_cast<int>(z)] = n;
    end[static_cast<int>(z)] = n;
  }
}

}  // namespace

const char* zone_name(Zone zone) {
  return kZoneNames[static_cast<int>(zone)];
}

Zone zone_from_name(const std::string& name) {
  std::string valid;
  for (int z = 0; z < kNumZones; ++z) {
    if (name == kZoneNames[z]) return static_cast<Zone>(z);
    valid += (z ? ", " : "") + std::string(kZoneNames[z]);
  }
  throw InvalidArgument(fmt::format("zone: expected one of {}, got '{}'", valid, name));
}

bool zone_exists(Dimension dim, Zone zone) {
  const int z = static_cast<int>(zone);
  if (z >= static_cast<int>(Zone::LateralBoundary) &&
      z <= static_cast<int>(Zone::LateralBoundaryLevel8))
    return z - static_cast<int>(Zone::LateralBoundary) < last_boundary_row(dim);
  if (zone == Zone::NudgingLevel2) return dim == Dimension::Edge;
  return z >= 0 && z < kNumZones;
}

std::int32_t Grid::size(Dimension dim) const {
  switch (dim) {
    case Dimension::Cell:
      return num_cells;
    case Dimension::Edge:
      return num_edges;
    default:
      return num_vertices;
  }
}

std::int32_t Grid::start_index(Dimension dim, Zone zone) const {
  if (!zone_exists(dim, zone))
    throw InvalidArgument(
        fmt::format("zone: {} has no zone '{}'", dimension_name(dim), zone_name(zone)));
  return zone_start[static_cast<int>(dim)][static_cast<int>(zone)];
}

std::int32_t Grid::end_index(Dimension dim, Zone zone) const {
  if (!zone_exists(dim, zone))
    throw InvalidArgument(
        fmt::format("zone: {} has no zone '{}'", dimension_name(dim), zone_name(zone)));
  return zone_end[static_cast<int>(dim)][static_cast<int>(zone)];
}

void set_domain_bounds(Grid& grid) {
  fill_bounds(grid, Dimension::Cell, grid.cell_refin_ctrl);
  fill_bounds(grid, Dimension::Edge, grid.edge_refin_ctrl);
  fill_bounds(grid, Dimension::Vertex, grid.vertex_refin_ctrl);
  auto positive = [](const std::vector<std::int32_t>& r) {
    for (std::int32_t v : r)
      if (v > 0) return true;
    return false;
  };
  grid.limited_area = positive(grid.cell_refin_ctrl) || positive(grid.edge_refin_ctrl) ||
                      positive(grid.vertex_refin_ctrl);
}

}  // namespace sciproxy::diffusion
