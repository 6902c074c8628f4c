"""sciproxy.parstack with an mpi4py communicator, run by tests/python/test_mpi.py under mpiexec:
every layout against one process bit for bit, and bad input on one rank raised on every rank.
Exits non-zero when any rank fails; rank 0 prints the summary line."""

import numpy as np

import sciproxy
from ranks import block, check, comm, finish, prefix, rank, size



rng = np.random.default_rng(5)
arrays = [rng.standard_normal(300 + 17 * i) for i in range(6)]
offsets = np.arange(6, dtype=np.int32) * 3
for nshifts in (1, 2, 25):  # fewer than the ranks, uneven, more
    shifts = rng.integers(-200, 200, size=(nshifts, 6)).astype(np.int32)
    weights = rng.uniform(0.5, 1.0, size=(nshifts, 6))
    for method in (0, 1):
        expected, offset = sciproxy.parstack(arrays, offsets, shifts, weights, method=method,
                                             impl="cpu")
        first, count = block(nshifts)
        for sets in ("all", "own"):
            s = shifts if sets == "all" else shifts[first:first + count]
            w = weights if sets == "all" else weights[first:first + count]
            for layout in ("all", "root", "own"):
                got, got_offset = sciproxy.parstack(arrays, offsets, s, w, method=method,
                                                    impl="cpu", comm=comm, shift_sets=sets,
                                                    result_layout=layout)
                where = f"nshifts {nshifts}, method {method}, {sets}/{layout}"
                check(got_offset == offset, f"{where}: offsetout {got_offset} != {offset}")
                if layout == "all" or (layout == "root" and rank == 0):
                    check(got is not None and np.array_equal(got, expected), f"{where}: whole")
                elif layout == "root":
                    check(got is None, f"{where}: rank {rank} got a result")
                else:
                    check(np.array_equal(got, expected[first:first + count]), f"{where}: own rows")

# Accumulating into a flat result of the rank's own rows.
shifts = rng.integers(-50, 50, size=(7, 6)).astype(np.int32)
weights = np.ones((7, 6))
window = sciproxy.parstack(arrays, offsets, shifts, weights, impl="cpu")[0].shape
expected, _ = sciproxy.parstack(arrays, offsets, shifts, weights, impl="cpu",
                                result=np.ones(window))
first, count = block(7)
mine = np.ones(count * expected.shape[1])
got, _ = sciproxy.parstack(arrays, offsets, shifts, weights, impl="cpu", comm=comm,
                           result_layout="own", result=mine)
check(got.shape == (count, expected.shape[1]), f"own flat result: shape {got.shape}")
check(np.array_equal(got, expected[first:first + count]), "own flat result: values")

# A bad weight on the last rank only: every rank raises, naming that rank.
bad = np.ones((7, 6))
if rank == size - 1:
    bad[3, 2] = np.inf
try:
    sciproxy.parstack(arrays, offsets, shifts, bad, impl="cpu", comm=comm)
    check(False, "bad weights on one rank: no error")
except ValueError as e:
    check(str(e).startswith(prefix() + "weights: expected finite values"), f"bad weights: {e}")

# Ranks that disagree on the method (Python's checks pass on each): every rank raises.
if size > 1:
    try:
        sciproxy.parstack(arrays, offsets, shifts, weights, impl="cpu", comm=comm,
                          method=1 if rank == size - 1 else 0)
        check(False, "disagreeing method: no error")
    except ValueError as e:
        check("the ranks disagree on method" in str(e), f"disagreeing method: {e}")

# Not a communicator, and a shape that only one rank gets wrong (the Python layer's check).
try:
    sciproxy.parstack(arrays, offsets, shifts, weights, comm="world")
    check(False, "comm='world': no error")
except TypeError as e:
    check(str(e).startswith("comm: expected an mpi4py communicator"), f"comm='world': {e}")
try:
    sciproxy.parstack(arrays, offsets if rank != size - 1 else offsets[:5], shifts, weights,
                      comm=comm)
    check(False, "offsets too short on one rank: no error")
except ValueError as e:
    check(str(e).startswith(prefix() + "offsets: expected one offset per trace"), f"offsets: {e}")

finish("check_stack")
