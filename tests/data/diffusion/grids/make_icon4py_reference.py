"""Writes what ICON4Py's GridManager (icon4py-common 0.4.1) reads from the grid files here, for
test_diffusion_grid_file.cpp to compare read_grid_file with: icon4py_reference.json.

  r2b2_lam.nc     every connectivity the reader fills (zero-based, -1 kept: keep_skip_values)
                  and every zone's (start_index, end_index)
  r2b2_global.nc  E2C2V, C2E2CO and the zones

Needs ICON4Py (Python >= 3.12):  python make_icon4py_reference.py   (writes next to this script)
"""

import json
from pathlib import Path

import numpy as np
from icon4py.model.common import dimension as dims
from icon4py.model.common.grid import grid_manager, gridfile, horizontal as h_grid
from icon4py.model.common.grid import vertical as v_grid

HERE = Path(__file__).resolve().parent
TABLES = ["C2E", "C2V", "C2E2C", "C2E2CO", "E2C", "E2V", "E2C2V", "V2E", "V2C"]


def zone_name(zone: h_grid.Zone) -> str:
    return f"{zone._name}_{zone.level}" if zone.level > 0 else zone._name


def read(path: Path, tables: list[str]) -> dict:
    manager = grid_manager.GridManager(
        str(path),
        config=v_grid.VerticalGridConfig(num_levels=1),
        offset_transformation=gridfile.ToZeroBasedIndexTransformation(),
    )
    manager(allocator=None, keep_skip_values=True)
    grid = manager.grid
    zones = {}
    for name, dim in (("cell", dims.CellDim), ("edge", dims.EdgeDim), ("vertex", dims.VertexDim)):
        zones[name] = {}
        for zone in h_grid.Zone:
            try:
                domain = h_grid.domain(dim)(zone)
            except AssertionError:
                continue  # no such zone for this dimension
            zones[name][zone_name(zone)] = [
                int(grid.start_index(domain)),
                int(grid.end_index(domain)),
            ]
    return {
        "limited_area": bool(grid.config.limited_area),
        "tables": {
            t: np.asarray(grid.get_connectivity(t).ndarray).astype(int).ravel().tolist()
            for t in tables
        },
        "zones": zones,
    }


def main() -> None:
    reference = {
        "source": "icon4py-common 0.4.1 GridManager, ToZeroBasedIndexTransformation, "
        "keep_skip_values=True",
        "r2b2_lam.nc": read(HERE / "r2b2_lam.nc", TABLES),
        "r2b2_global.nc": read(HERE / "r2b2_global.nc", ["E2C2V", "C2E2CO"]),
    }
    (HERE / "icon4py_reference.json").write_text(json.dumps(reference, separators=(",", ":")))


if __name__ == "__main__":
    main()
