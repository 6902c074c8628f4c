"""sciproxy.tti.tti and tti_adjoint with an mpi4py communicator, run by tests/python/test_mpi.py
under mpiexec: the padded grid split among the ranks (the process grid chosen, and given along
each axis) gives every rank one process's receiver and adjoint source amplitudes bit for bit, in
float64 and float32; a process grid that does not fit, bad input on one rank and ranks that
disagree fail every rank, naming the argument; a non-communicator is a TypeError naming comm."""

import numpy as np

from sciproxy import tti as sciproxy_tti
from ranks import check, comm, finish, prefix, rank, size



def expect_error(kind, start, call, what):
    try:
        call()
        check(False, f"{what}: no error")
    except kind as e:
        check(str(e).startswith(start), f"{what}: {e}")


# A tilted layered model, two shots, receivers on a diagonal line across the grid (some in every
# rank's subdomain, whatever the process grid).
shape, nt, nshots, nrec = (12, 9, 14), 40, 2, 6
i0, i1, i2 = np.meshgrid(*(np.arange(n) for n in shape), indexing="ij")
vp = 1500.0 + 60 * i0 + 7 * ((i1 + 2 * i2) % 5)
model = dict(epsilon=0.1 + 0.01 * (i2 % 4), delta=0.05 + 0.005 * (i1 % 3), theta=0.4 + 0.02 * i0,
             phi=0.3 - 0.01 * i2, buoyancy=1.0 / (1000 + 20 * i0))
t = np.arange(nt)
amplitudes = np.stack([(1 - 2 * a**2) * np.exp(-a**2)
                       for a in (np.pi * 0.08 * (t - 10 - 3 * s) for s in range(nshots))])
amplitudes = amplitudes[:, None, :]
sources = np.array([[[3 + 4 * s, 4, 2 + 9 * s]] for s in range(nshots)])
receivers = np.array([[[(2 * r + s) % shape[0], (r + 3 * s) % shape[1], (shape[2] - 1 - 2 * r)]
                       for r in range(nrec)] for s in range(nshots)])
data = np.sin(0.17 * np.arange(nshots * nrec * nt)).reshape(nshots, nrec, nt)
common = dict(space_order=4, sponge_width=[2, 3, 1, 2, 3, 1], device="cpu", nparallel=1, **model)
dt = 0.9 * sciproxy_tti.tti_max_dt(vp, [10.0, 12.0, 10.0], epsilon=model["epsilon"],
                                   space_order=4, sponge_width=[2, 3, 1, 2, 3, 1])
spacing = [10.0, 12.0, 10.0]

alone = sciproxy_tti.tti(vp, spacing, dt, amplitudes, sources, receivers, **common)
back_alone = sciproxy_tti.tti_adjoint(vp, spacing, dt, data, sources, receivers, **common)
check(np.linalg.norm(alone) > 0 and np.linalg.norm(back_alone) > 0, "one process: non-zero")
for grid in (None, [size, 1, 1], (1, size, 1), np.array([1, 1, 0])):
    out = sciproxy_tti.tti(vp, spacing, dt, amplitudes, sources, receivers, comm=comm,
                           process_grid=grid, **common)
    check(out.shape == alone.shape and np.array_equal(out, alone), f"forward, grid {grid}")
    back = sciproxy_tti.tti_adjoint(vp, spacing, dt, data, sources, receivers, comm=comm,
                                    process_grid=grid, **common)
    check(back.shape == back_alone.shape and np.array_equal(back, back_alone),
          f"adjoint, grid {grid}")

# float32, order 8, the free surface.
vp32 = vp.astype(np.float32)
model32 = {k: v.astype(np.float32) for k, v in model.items()}
opts32 = dict(space_order=8, sponge_width=3, free_surface=True, device="cpu", nparallel=1)
dt32 = 0.9 * sciproxy_tti.tti_max_dt(vp32, spacing, epsilon=model32["epsilon"], **{
    k: opts32[k] for k in ("space_order", "sponge_width", "free_surface")})
amps32 = amplitudes.astype(np.float32)
alone32 = sciproxy_tti.tti(vp32, spacing, dt32, amps32, sources, receivers, **opts32, **model32)
out32 = sciproxy_tti.tti(vp32, spacing, dt32, amps32, sources, receivers, comm=comm, **opts32,
                         **model32)
check(out32.dtype == np.float32 and np.array_equal(out32, alone32), "float32 forward")

# A process grid that does not fit: every rank raises, naming it (the library's check).
expect_error(ValueError, prefix(0) + "process_grid",
             lambda: sciproxy_tti.tti(vp, spacing, dt, amplitudes, sources, receivers, comm=comm,
                                      process_grid=[1, size + 1, 1], **common),
             "process grid of the wrong ranks")
expect_error(ValueError, prefix(0) + "process_grid",
             lambda: sciproxy_tti.tti_adjoint(vp, spacing, dt, data, sources, receivers,
                                              comm=comm, process_grid=[size + 1, 1, 1], **common),
             "adjoint: process grid of the wrong ranks")
if size > 1:
    # Axis 1 holds 9 + 3 = 12 cells of model and sponge: fewer than space_order/2 = 8 per rank.
    dt16 = 0.9 * sciproxy_tti.tti_max_dt(vp, spacing, epsilon=model["epsilon"], space_order=16,
                                         sponge_width=[2, 3, 1, 2, 3, 1])
    thin = dict(common, space_order=16)
    expect_error(ValueError, prefix(0) + "process_grid",
                 lambda: sciproxy_tti.tti(vp, spacing, dt16, amplitudes, sources, receivers,
                                          comm=comm, process_grid=[1, size, 1], **thin),
                 "too thin a subdomain")

# The Python layer's checks on one rank only (the last): raised on every rank, naming it.
last = size - 1
expect_error(ValueError, prefix(last) + "process_grid[2]",
             lambda: sciproxy_tti.tti(vp, spacing, dt, amplitudes, sources, receivers, comm=comm,
                                      process_grid=[0, 0, -1] if rank == last else None,
                                      **common),
             "negative process_grid on one rank")
expect_error(ValueError, prefix(last) + "receiver_amplitudes: expected shape",
             lambda: sciproxy_tti.tti_adjoint(vp, spacing, dt,
                                              data[:, :-1] if rank == last else data, sources,
                                              receivers, comm=comm, **common),
             "adjoint data of the wrong shape on one rank")
expect_error(TypeError, prefix(last) + "source_amplitudes: expected a float64 array",
             lambda: sciproxy_tti.tti(vp, spacing, dt,
                                      amps32 if rank == last else amplitudes, sources, receivers,
                                      comm=comm, **common),
             "float32 amplitudes on one rank")
expect_error(TypeError, prefix(last) + "process_grid",
             lambda: sciproxy_tti.tti(vp, spacing, dt, amplitudes, sources, receivers, comm=comm,
                                      process_grid="xyz" if rank == last else None, **common),
             "a string process_grid on one rank")

# Ranks that disagree (the library's check): every rank raises, naming dt.
if size > 1:
    try:
        sciproxy_tti.tti(vp, spacing, dt * (0.9 if rank == last else 1.0), amplitudes, sources,
                         receivers, comm=comm, **common)
        check(False, "ranks disagreeing on dt: no error")
    except ValueError as e:
        check("dt" in str(e), f"ranks disagreeing on dt: {e}")

# Not a communicator.
expect_error(TypeError, "comm: expected an mpi4py communicator",
             lambda: sciproxy_tti.tti(vp, spacing, dt, amplitudes, sources, receivers, comm="x",
                                      **common),
             "comm='x'")
expect_error(TypeError, "comm: expected an mpi4py communicator",
             lambda: sciproxy_tti.tti_adjoint(vp, spacing, dt, data, sources, receivers,
                                              comm="x", **common),
             "adjoint comm='x'")

finish("check_tti")
