"""Run under mpirun by test_specex.py: ex2d with comm=MPI.COMM_WORLD against one process, bit for
bit, in both layouts, and an image that differs on the last rank failing on every rank. Rank 0
prints one line per rank: "<rank> OK" or what differed."""
import sys

import numpy as np
from mpi4py import MPI

import sciproxy.specex as sx

psf = sx.load_psf(sys.argv[1])
comm = MPI.COMM_WORLD
w = sx.wavelength_grid(6000, 6040, 1)
wide = 6000.0 + np.arange(-30, 71)
xmin, xmax, ymin, ymax = psf.xyrange((0, 15), (wide[0], wide[-1]))
r = (max(xmin - 10, 0), xmax + 10, ymin, ymax)
image, ivar = sx.simulate_image(psf, wide, np.full((15, wide.size), 500.0), specmin=0, xyrange=r,
                                read_noise=3.0, seed=7)
kw = dict(image=image, imageivar=ivar, psf=psf, specmin=0, nspec=15, wavelengths=w, xyrange=r,
          bundlesize=5, full_output=True, device="cpu")
keys = ("flux", "ivar", "resolution_data", "chi2pix", "pixmask_fraction", "modelimage")
one = sx.ex2d(**kw)
problems = []
every = sx.ex2d(comm=comm, result_layout="all_ranks", **kw)
problems += [f"all_ranks {k}" for k in keys if not np.array_equal(every[k], one[k])]
root = sx.ex2d(comm=comm, **kw)
if comm.rank == 0:
    problems += [f"root {k}" for k in keys if not np.array_equal(root[k], one[k])]
elif root is not None:
    problems.append("a rank other than 0 received a result")
changed = image.copy()
if comm.rank == comm.size - 1:
    changed[5, 5] += 1
try:
    sx.ex2d(**{**kw, "image": changed}, comm=comm)
    problems.append("no error for an image that differs on one rank")
except ValueError as e:
    if "the ranks disagree on the values of image" not in str(e):
        problems.append(f"unexpected error: {e}")
# Rank 0 prints every rank's line (the ranks' own prints may interleave).
lines = comm.gather(f"{comm.rank} " + ("OK" if not problems else "; ".join(problems)), root=0)
if comm.rank == 0:
    print("\n".join(lines), flush=True)
