"""Makes the ICON grid files the diffusion grid-file tests read, with icon-grid-generator (BSD-3).

  r2b2_global.nc   the global grid R2B2 (1280 cells)
  r2b2_lam.nc      a limited-area cut-out of the same R2B2: the cells whose centre lies within
                   60 degrees of (46 N, 10 E), cut from the final grid without re-optimising it,
                   ICON-ordered by refin_ctrl, with start_idx/end_idx
Both hold every variable the reader reads (ICON4Py's GridManager reads them too), the cartesian
coordinates and normals included; the tests remove variables from copies to check the rest.

Run from anywhere:  python make_grid_files.py   (writes next to this script)
"""

from pathlib import Path

import grid_generator as gg
from grid_generator import LimitedAreaGridSpec, Region, RegionSelectionOptions

HERE = Path(__file__).resolve().parent

FIELDS = [
    "clon", "clat", "vlon", "vlat", "elon", "elat",
    "edge_of_cell", "vertex_of_cell", "neighbor_cell_index", "adjacent_cell_of_edge",
    "edge_vertices", "cells_of_vertex", "edges_of_vertex", "vertices_of_vertex",
    "cell_area", "dual_area", "edge_length", "dual_edge_length", "edge_cell_distance",
    "edge_vert_distance", "orientation_of_normal", "edge_system_orientation", "edge_orientation",
    "refin_c_ctrl", "refin_e_ctrl", "refin_v_ctrl",
    "start_idx_c", "end_idx_c", "start_idx_e", "end_idx_e", "start_idx_v", "end_idx_v",
    "cell_circumcenter_cartesian_x", "cell_circumcenter_cartesian_y",
    "cell_circumcenter_cartesian_z", "edge_middle_cartesian_x", "edge_middle_cartesian_y",
    "edge_middle_cartesian_z", "cartesian_x_vertices", "cartesian_y_vertices",
    "cartesian_z_vertices",
    "edge_primal_normal_cartesian_x", "edge_primal_normal_cartesian_y",
    "edge_primal_normal_cartesian_z", "edge_dual_normal_cartesian_x",
    "edge_dual_normal_cartesian_y", "edge_dual_normal_cartesian_z",
    "zonal_normal_primal_edge", "meridional_normal_primal_edge", "zonal_normal_dual_edge",
    "meridional_normal_dual_edge",
]

LAM_CENTER_LAT, LAM_CENTER_LON, LAM_RADIUS_DEGREES = 46.0, 10.0, 60.0


def main() -> None:
    gg.generate_grid_to_netcdf("R2B2", HERE / "r2b2_global.nc", fields=FIELDS)
    spec = LimitedAreaGridSpec(
        parent="R2B2",
        region=Region.circle(lon=LAM_CENTER_LON, lat=LAM_CENTER_LAT,
                             radius_degrees=LAM_RADIUS_DEGREES),
        construction="cut_final",
        selection=RegionSelectionOptions(inclusion="center", cleanup="none"),
        local_optimization_iterations=0,
    )
    gg.generate_grid_to_netcdf(spec, HERE / "r2b2_lam.nc", fields=FIELDS)


if __name__ == "__main__":
    main()
