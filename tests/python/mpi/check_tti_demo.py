"""sciproxy.tti.tti_demo with an mpi4py communicator, run by tests/python/test_mpi.py under
mpiexec: the grid split into blocks among the ranks (the process grid chosen, and given along x
and z) gives one process's u and u_prev bit for bit, in float32 and float64, on every rank
(results='all'), on rank 0 alone ('root', the others None) and each rank its block ('own', placed
by block_origin and block_shape); a process grid that does not fit, bad input on one rank and
ranks that disagree fail every rank, naming the argument; a non-communicator is a TypeError
naming comm."""

import numpy as np

from sciproxy import tti as sciproxy_tti
from ranks import check, comm, finish, prefix, rank, size


def expect_error(kind, start, call, what):
    try:
        call()
        check(False, f"{what}: no error")
    except kind as e:
        check(str(e).startswith(start), f"{what}: {e}")


# (NX, NY, NZ) points of 10 m, every material varying per point: at order 8 one step per sweep,
# a ghost ring of 7 points; two steps per sweep (asked for), a ring of 14 points, which blocks of
# 44 points along x split among 1 to 3 ranks hold. The source lies between the blocks of two and
# of three ranks.
shape, nt = (44, 30, 27), 9
x, y, z = np.meshgrid(*(np.arange(n) for n in shape), indexing="ij")
materials = dict(vp=1500.0 + 20 * x + 9 * ((y + 2 * z) % 7), b=1.0 / (1.0 + 0.01 * ((x + z) % 11)),
                 epsilon=0.15 + 0.01 * (z % 5), eta=0.3 + 0.02 * (y % 6), f=0.85,
                 theta=0.4 + 0.01 * x - 0.005 * z, phi=0.2 + 0.015 * y, damping=0.002)
limits = {k: materials[k] for k in ("vp", "b", "epsilon", "eta", "f", "damping")}
dt = 0.9 * sciproxy_tti.tti_demo_dt_limit(shape, 10.0, dtype=np.float64, **limits)
amplitudes = sciproxy_tti.ricker(15.0, dt, nt, dtype=np.float64)
common = dict(source_position=(145.4, 143.0, 127.0), source_amplitudes=amplitudes, device="cpu",
              nparallel=1, dtype=np.float64, **materials)


def run(**kw):
    return sciproxy_tti.tti_demo(shape, 10.0, kw.pop("dt", dt), **dict(common, **kw))


alone = run()
check(np.abs(alone.u).max() > 0, "one process: the wave moved")
check(alone.block_origin == (0, 0, 0) and alone.block_shape == shape
      and alone.process_grid == (1, 1, 1), "one process: the whole grid")
for grid in (None, [size, 1, 1], np.array([1, 1, 0])):
    whole = run(comm=comm, process_grid=grid)
    check(np.array_equal(whole.u, alone.u) and np.array_equal(whole.u_prev, alone.u_prev),
          f"results 'all', grid {grid}: one process's bits")
    check(whole.block_shape == shape and np.prod(whole.process_grid) == size,
          f"results 'all', grid {grid}: the whole grid")
    if grid is not None:
        given = tuple(int(g) if g > 0 else size for g in grid)  # the one 0 takes the ranks
        check(whole.process_grid == given, f"grid {grid}: the process grid given")

    root = run(comm=comm, process_grid=grid, results="root")
    if rank == 0:
        check(np.array_equal(root.u, alone.u) and np.array_equal(root.u_prev, alone.u_prev)
              and root.block_shape == shape, f"results 'root', grid {grid}: rank 0's bits")
    else:
        check(root.u is None and root.u_prev is None and root.block_shape == (0, 0, 0),
              f"results 'root', grid {grid}: nothing off rank 0")

    own = run(comm=comm, process_grid=grid, results="own")
    o, s = own.block_origin, own.block_shape
    part = tuple(slice(o[a], o[a] + s[a]) for a in range(3))
    check(own.u.shape == s and np.array_equal(own.u, alone.u[part])
          and np.array_equal(own.u_prev, alone.u_prev[part]),
          f"results 'own', grid {grid}: the block {o} + {s} has one process's bits")
    check(comm.allreduce(int(np.prod(s))) == int(np.prod(shape)),
          f"results 'own', grid {grid}: the blocks cover the grid once")
    check(size == 1 or own.u.size < alone.u.size, f"results 'own', grid {grid}: a block")

two = run(comm=comm, process_grid=[size, 1, 1], cpu_tuning={"sweep_steps": 2})
check(np.array_equal(two.u, alone.u) and np.array_equal(two.u_prev, alone.u_prev),
      "two steps per sweep, split along x: one process's bits")

# float32, constant materials (one step per sweep), split along x.
const = dict(vp=1500.0, b=1.0, epsilon=0.2, eta=0.4, f=0.85, theta=0.5, phi=0.3, damping=0.002)
dt32 = 0.9 * sciproxy_tti.tti_demo_dt_limit(shape, 10.0, **{k: const[k] for k in limits})
common32 = dict(common, dtype=np.float32, source_amplitudes=sciproxy_tti.ricker(15.0, dt32, nt),
                **const)
alone32 = sciproxy_tti.tti_demo(shape, 10.0, dt32, **common32)
out32 = sciproxy_tti.tti_demo(shape, 10.0, dt32, comm=comm, process_grid=[size, 1, 1],
                              results="own", **common32)
part = tuple(slice(out32.block_origin[a], out32.block_origin[a] + out32.block_shape[a])
             for a in range(3))
check(out32.u.dtype == np.float32 and np.array_equal(out32.u, alone32.u[part]),
      "float32, results 'own': one process's bits")

# A process grid that does not fit: every rank raises, naming it (the library's check).
expect_error(ValueError, prefix(0) + "process_grid",
             lambda: run(comm=comm, process_grid=[1, size + 1, 1]),
             "process grid of the wrong ranks")
if size > 1:
    # At order 16 one step's ring is 15 points: blocks of 27 / size <= 13 along z are too thin.
    dt16 = 0.9 * sciproxy_tti.tti_demo_dt_limit(shape, 10.0, space_order=16, dtype=np.float64,
                                                **limits)
    expect_error(ValueError, prefix(0) + "process_grid",
                 lambda: run(dt=dt16, comm=comm, process_grid=[1, 1, size], space_order=16),
                 "too thin a block")
# Without a communicator only one rank fits.
expect_error(ValueError, "process_grid", lambda: run(process_grid=[2, 1, 1]),
             "one process: two ranks")

# The Python layer's checks on one rank only (the last): raised on every rank, naming it.
last = size - 1
expect_error(ValueError, prefix(last) + "process_grid[2]",
             lambda: run(comm=comm, process_grid=[0, 0, -1] if rank == last else None),
             "negative process_grid on one rank")
expect_error(TypeError, prefix(last) + "process_grid",
             lambda: run(comm=comm, process_grid="xyz" if rank == last else None),
             "a string process_grid on one rank")
expect_error(ValueError, prefix(last) + "results",
             lambda: run(comm=comm, results="mine" if rank == last else "all"),
             "an unknown results on one rank")
expect_error(ValueError, prefix(last) + "vp: expected a number or an array of shape",
             lambda: run(comm=comm, vp=materials["vp"][:-1] if rank == last else materials["vp"]),
             "vp of the wrong shape on one rank")

# Ranks that disagree (the library's check): every rank raises, naming dt.
if size > 1:
    try:
        run(dt=dt * (0.9 if rank == last else 1.0), comm=comm)
        check(False, "ranks disagreeing on dt: no error")
    except ValueError as e:
        check("the ranks disagree on dt" in str(e), f"ranks disagreeing on dt: {e}")

# Not a communicator.
expect_error(TypeError, "comm: expected an mpi4py communicator", lambda: run(comm="x"),
             "comm='x'")

finish("check_tti_demo")
