"""sciproxy.diffusion.Diffusion with an mpi4py communicator, run by tests/python/test_mpi.py under
mpiexec: on METIS's partition and on a caller's decomposition (uneven latitude bands), with the
global fields on every rank (both layouts) and with each rank's own fields, three calls (the
initial run, then two steps, shear type 2) equal one process's bit for bit; a bad cell_owner or
a bad field on one rank is raised on every rank; a comm that is no communicator is a TypeError
naming comm."""

import numpy as np

from sciproxy import diffusion as dif
from ranks import check, comm, finish, prefix, rank, size

FIELDS = ("vn", "w", "theta_v", "exner", "hdef_ic", "div_ic", "dwdx", "dwdy")
PROGNOSTIC = FIELDS[:4]


grid = dif.icosahedral_grid(2, 2, num_levels=10)  # R2B2: 1280 cells
inputs = dif.coefficients(grid)
vertical = dif.vertical_grid(grid)
config = dif.DiffusionConfig(shear_type=2)
dtime = dif.smagorinsky_dtime(grid)
start = dif.synthetic_state(grid, seed=7)


def three_calls(granule, state):
    for call in range(3):
        granule.run(state, state, dtime, initial_run=call == 0)
    return state


def fresh(order="C"):
    return {k: (np.asfortranarray(v) if order == "F" else v.copy()) for k, v in start.items()}


alone = three_calls(dif.Diffusion(grid, config, vertical, *inputs, device="cpu"), fresh())
# ICON's layout in one process (its loops, so not the C order's bits everywhere).
alone_f = three_calls(dif.Diffusion(grid, config, vertical, *inputs, device="cpu",
                                    layout="entities"), fresh("F"))

# Uneven latitude bands, north to south: rank r owns a share r + 1 (1 : 2 : 3 of the cells).
order = np.argsort(-grid.field("cell_lat"), kind="stable")
shares = np.cumsum(np.arange(1, size + 1)) / (size * (size + 1) / 2)
bands = np.empty(grid.num_cells, np.int32)
bands[order] = np.searchsorted(shares * grid.num_cells, np.arange(grid.num_cells), side="right")

for name, owner in (("METIS", None), ("bands", bands)):
    try:
        granule = dif.Diffusion(grid, config, vertical, *inputs, device="cpu", comm=comm,
                                cell_owner=owner)
    except Exception as e:  # a build without METIS: only the caller's decomposition runs
        check(owner is None and "METIS" in str(e), f"{name}: init: {e}")
        if rank == 0:
            print(f"check_diffusion: {name} skipped: {e}")
        continue
    got = three_calls(granule, fresh())
    for f in FIELDS:
        check(np.array_equal(got[f], alone[f]), f"{name}, global fields: {f} differs")
    # ICON's layout (entities contiguous, Fortran order), global fields.
    granule = dif.Diffusion(grid, config, vertical, *inputs, device="cpu", comm=comm,
                            cell_owner=owner, layout="entities")
    got = three_calls(granule, fresh("F"))
    for f in FIELDS:
        check(np.array_equal(got[f], alone_f[f]), f"{name}, layout entities: {f} differs")
    # Each rank's own fields, rows in the order of global_index.
    granule = dif.Diffusion(grid, config, vertical, *inputs, device="cpu", comm=comm,
                            cell_owner=owner, rank_local_fields=True)
    cells, edges = granule.global_index("cell"), granule.global_index("edge")
    halo = granule.halo_level("cell")
    check(len(cells) == len(halo) and np.all(halo[:np.count_nonzero(halo == 0)] == 0),
          f"{name}: halo levels not owned first")
    owned = cells[halo == 0]
    if owner is not None:
        check(np.array_equal(np.sort(owned), np.flatnonzero(bands == rank)),
              f"{name}: owned cells are not cell_owner's")
    total = comm.allreduce(len(owned))
    check(total == grid.num_cells, f"{name}: {total} owned cells in all, not {grid.num_cells}")
    local = {f: np.ascontiguousarray(start[f][edges if f == "vn" else cells]) for f in FIELDS}
    got = three_calls(granule, local)
    for f in FIELDS:
        rows = edges if f == "vn" else cells
        if f in PROGNOSTIC:  # every local entry, halos included
            check(np.array_equal(got[f], alone[f][rows]), f"{name}, rank-local: {f} differs")
        else:  # the diagnostics on the owned cells
            check(np.array_equal(got[f][halo == 0], alone[f][owned]),
                  f"{name}, rank-local: {f} differs on owned cells")


# A cell_owner of the wrong size on the last rank only: every rank raises, naming it.
bad = bands if rank != size - 1 else bands[:-1]
try:
    dif.Diffusion(grid, config, vertical, *inputs, device="cpu", comm=comm, cell_owner=bad)
    check(False, "cell_owner of the wrong size on one rank: no error")
except ValueError as e:
    check(str(e).startswith(prefix() + "cell_owner: expected"), f"cell_owner size: {e}")
# A rank out of range on the last rank only.
bad = bands.copy()
if rank == size - 1:
    bad[5] = size
try:
    dif.Diffusion(grid, config, vertical, *inputs, device="cpu", comm=comm, cell_owner=bad)
    check(False, "cell_owner out of range on one rank: no error")
except ValueError as e:
    check(str(e).startswith(prefix() + "cell_owner: expected ranks in"), f"cell_owner range: {e}")
# Float ranks on the last rank only.
bad = bands if rank != size - 1 else bands.astype(np.float64)
try:
    dif.Diffusion(grid, config, vertical, *inputs, device="cpu", comm=comm, cell_owner=bad)
    check(False, "float cell_owner on one rank: no error")
except TypeError as e:
    check(str(e).startswith(prefix() + "cell_owner: expected integers"), f"cell_owner dtype: {e}")

# A field of the wrong dtype on the last rank only: every rank's run raises, then runs again.
granule = dif.Diffusion(grid, config, vertical, *inputs, device="cpu", comm=comm, cell_owner=bands)
state = fresh()
if rank == size - 1:
    state["theta_v"] = state["theta_v"].astype(np.float32)
try:
    granule.run(state, state, dtime, initial_run=True)
    check(False, "bad field on one rank: no error")
except TypeError as e:
    check(str(e).startswith(prefix() + "prognostic_state.theta_v: expected float64"), f"field: {e}")
got = three_calls(granule, fresh())
check(all(np.array_equal(got[f], alone[f]) for f in FIELDS), "after a refused run: differs")

# comm that is no communicator.
try:
    dif.Diffusion(grid, config, vertical, *inputs, device="cpu", comm="x")
    check(False, "comm='x': no error")
except TypeError as e:
    check(str(e).startswith("comm: expected an mpi4py communicator"), f"comm: {e}")

finish("check_diffusion")
