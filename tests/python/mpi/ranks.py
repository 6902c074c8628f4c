"""What the check scripts under mpiexec share: the world's ranks, the failures of this rank, the
library's split of n items (contiguous blocks, the first n % size ranks one more), and the end:
rank 0 prints every rank's failures and the summary line, and every rank exits non-zero when any
rank failed."""

import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)


def block(n):
    """(first, count) of the n items this rank holds."""
    base, extra = divmod(n, size)
    return rank * base + min(rank, extra), base + (1 if rank < extra else 0)


def prefix(failing=None):
    """How the library names the lowest failing rank (default: the last rank) on several ranks."""
    failing = size - 1 if failing is None else failing
    return f"rank {failing} of {size}: " if size > 1 else ""


def finish(name):
    every = comm.gather(failures, root=0)
    if rank == 0:
        flat = [f"rank {r}: {f}" for r, fs in enumerate(every) for f in fs]
        for line in flat:
            print("FAILED", line)
        print(f"{name}: {size} ranks: {'all checks passed' if not flat else 'FAILED'}")
    sys.exit(1 if comm.allreduce(len(failures)) else 0)
