"""Argument checking shared by every family module (sciproxy.stack, sciproxy.wave, sciproxy.tti).

Only what must be settled before crossing into C++ is checked here: Python types, dtypes,
shapes that a flat buffer would lose, contiguity (by copying), and Python-only forms (None,
torch tensors and devices, pyrocko's impl names). Values (finiteness, ranges that depend on the
problem, stability limits) are checked once, by the library, whose messages name the
arguments as these functions do: ``"<argument>: expected <what>, got <what came>"``.
"""

from __future__ import annotations

import math
import numbers
import operator
import re

import numpy as np

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
DEVICE_ACCEPTED = "one of 'auto', 'reference', 'cpu', 'cuda', 'cuda:N'"


def describe(value) -> str:
    """What came, for error messages: 'float64 array of shape (3, 4)' or the type and value."""
    if isinstance(value, np.ndarray):
        text = f"{value.dtype} array of shape {value.shape}"
        if not value.flags.c_contiguous:
            text += ", not C-contiguous"
        if not value.flags.writeable:
            text += ", read-only"
        return text
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def integer(name: str, value, lo: int, hi: int | None = None, expected: str | None = None) -> int:
    """An integer (not a bool, not a float) in [lo, hi].

    hi None: up to INT64_MAX, the most the library's int64 arguments hold, so that no value is
    wrapped or refused by the binding's conversion with a message that names no argument."""
    if is_bool(value):
        raise TypeError(f"{name}: expected an integer, got {describe(value)}")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: expected an integer, got {describe(value)}") from None
    if number < lo or number > (INT64_MAX if hi is None else hi):
        if expected is None:
            expected = (f"an integer in [{lo}, 2**63 - 1]" if hi is None
                        else f"an integer in [{lo}, {hi}]")
        raise ValueError(f"{name}: expected {expected}, got {number}")
    return number


def real(name: str, value, *, positive: bool = False, nonnegative: bool = False) -> float:
    """A finite real number (not a bool), optionally > 0 or >= 0."""
    if is_bool(value) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a real number, got {describe(value)}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{name}: expected a finite number, got {x}")
    if positive and not x > 0:
        raise ValueError(f"{name}: expected a positive number, got {x}")
    if nonnegative and x < 0:
        raise ValueError(f"{name}: expected a number >= 0, got {x}")
    return x


def boolean(name: str, value) -> bool:
    if not is_bool(value):
        raise TypeError(f"{name}: expected True or False, got {describe(value)}")
    return bool(value)


def as_array(name: str, value) -> np.ndarray:
    """numpy's view of `value` (a torch tensor is detached and brought to the host)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as error:
        raise TypeError(f"{name}: expected an array, got {describe(value)} ({error})") from None


def float_array(name: str, value) -> np.ndarray:
    """A float32 or float64 array (its dtype is the dtype of the computation)."""
    a = as_array(name, value)
    if a.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name}: expected a float32 or float64 array, got {describe(a)}")
    return a


def real_array(name: str, value, dtype: np.dtype | None = None) -> np.ndarray:
    """Real numbers (bool, int or float), cast to `dtype` and C-contiguous when dtype is given.

    Values that overflow float32 become inf, which the library reports by index."""
    a = as_array(name, value)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name}: expected real numbers, got {describe(a)}")
    if dtype is None:
        return a
    with np.errstate(over="ignore", invalid="ignore"):
        return np.ascontiguousarray(a.astype(dtype, copy=False))


def index_array(name: str, value, dtype=np.int64) -> np.ndarray:
    """Integer cell or sample indices, C-contiguous, of `dtype`."""
    a = as_array(name, value)
    if a.dtype.kind not in "iu":
        hint = ""
        if a.dtype.kind == "f":
            hint = (f"; they are indices, so round them explicitly, "
                    f"e.g. numpy.round({name}).astype(numpy.{np.dtype(dtype).name})")
        raise TypeError(f"{name}: expected integers ({np.dtype(dtype).name}), got {describe(a)}{hint}")
    return a


IGNORE_LOCATION = -(2**31)  # the library's kIgnoreLocation (include/sciproxy/seismic.hpp)


def location_array(name: str, value, ndim: int | None = None) -> np.ndarray:
    """Cell indices [n_shots, n, ndim] as C-contiguous int64, every value range-checked first.

    A value that int64 cannot hold (a uint64 near 2**64) is refused here rather than cast: the
    cast would wrap it, possibly to IGNORE_LOCATION, and the receiver would vanish silently.
    Whether each index lies inside the model is the library's check."""
    a = as_array(name, value)
    if a.dtype.kind not in "iu":
        hint = ""
        if a.dtype.kind == "f":
            hint = (f"; they are cell indices, so round them explicitly, "
                    f"e.g. numpy.round({name}).astype(numpy.int64)")
        raise TypeError(f"{name}: expected integer (int64) cell indices, got {describe(a)}{hint}")
    if a.ndim != 3 or (ndim is not None and a.shape[2] != ndim):
        last = "ndim" if ndim is None else str(ndim)
        raise ValueError(f"{name}: expected an array of shape [n_shots, n, {last}], "
                         f"got {describe(a)}")
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < INT64_MIN or hi > INT64_MAX:
            raise ValueError(f"{name}: expected cell indices inside the model (or {IGNORE_LOCATION}"
                             f" to ignore a location), got values in [{lo}, {hi}]")
    return np.ascontiguousarray(a, dtype=np.int64)


def dtype(value, name: str = "dtype") -> np.dtype:
    """numpy.float32 or numpy.float64 (anything numpy.dtype() turns into one of them)."""
    try:
        dt = np.dtype(value)
    except TypeError:
        dt = None
    if dt is None or dt not in FLOAT_DTYPES:
        raise TypeError(f"{name}: expected numpy.float32 or numpy.float64, got {value!r}")
    return dt


# The library's largest thread count (sciproxy::kMaxThreads); counts above the usable cores run
# on those cores.
MAX_THREADS = 4096


def nparallel(value) -> int:
    """None: every core this process may use (0 for the library); otherwise 1..MAX_THREADS."""
    if value is None:
        return 0
    return integer("nparallel", value, 1, MAX_THREADS,
                   f"a thread count from 1 to {MAX_THREADS} (counts above the usable cores run "
                   "on those cores), or None for all cores")


def device(value, name: str = "device", aliases: dict | None = None,
           accepted: str = DEVICE_ACCEPTED) -> str:
    """A device string the library parses: 'auto', 'reference', 'cpu', 'cuda', 'cuda:N'.

    A torch.device becomes its string; `aliases` maps other names (pyrocko's) to ours."""
    if hasattr(value, "type") and hasattr(value, "index"):  # a torch.device
        value = value.type if value.index is None else f"{value.type}:{value.index}"
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected a string, {accepted}, got {describe(value)}")
    spec = (aliases or {}).get(value, value)
    if spec in ("auto", "reference", "cpu", "cuda") or re.fullmatch(r"cuda:[0-9]+", spec):
        return spec
    raise ValueError(f"{name}: expected {accepted}, got {value!r}")


def per_dimension(name: str, value, ndim: int, *, positive: bool = True) -> list:
    """One real number for every dimension, from a number or a sequence of 1 or ndim."""
    if isinstance(value, numbers.Real) and not is_bool(value):
        return [real(name, value, positive=positive)] * ndim
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{name}: expected a number or one per dimension, "
                        f"got {describe(value)}") from None
    if len(items) == 1:
        items = items * ndim
    if len(items) != ndim:
        raise ValueError(f"{name}: expected a number or {ndim} (one per dimension), "
                         f"got {len(items)} values")
    return [real(f"{name}[{i}]", x, positive=positive) for i, x in enumerate(items)]


NO_COMM = -1  # the library's "this process alone" (kNoCommunicator)


def process_grid(value) -> list:
    """Ranks per axis of a grid of subdomains, 0 = chosen (None: every entry chosen). Whether
    they multiply to the ranks and fit the grid is the library's check (naming process_grid)."""
    if value is None:
        return [0, 0, 0]
    if isinstance(value, (str, bytes)) or np.ndim(value) != 1:
        raise TypeError(f"process_grid: expected None or 3 integers (ranks per axis, 0: chosen), "
                        f"got {describe(value)}")
    grid = [integer(f"process_grid[{i}]", p, 0, INT32_MAX,
                    "ranks per axis >= 1, or 0 for a number chosen")
            for i, p in enumerate(value)]
    if len(grid) != 3:
        raise ValueError(f"process_grid: expected 3 integers (ranks per axis, 0: chosen), got "
                         f"{len(grid)}")
    return grid


def communicator(name: str, comm) -> int:
    """The Fortran handle of an mpi4py intracommunicator (``comm.py2f()``), or NO_COMM for None.

    The library checks the rest (MPI running, the build's MPI support) and names ``name``."""
    if comm is None:
        return NO_COMM
    try:
        from mpi4py import MPI
    except ImportError:
        raise TypeError(f"{name}: expected an mpi4py communicator or None, got {describe(comm)} "
                        "(mpi4py is not installed)") from None
    if not isinstance(comm, MPI.Comm):
        raise TypeError(f"{name}: expected an mpi4py communicator (MPI.Intracomm) or None, "
                        f"got {describe(comm)}")
    if isinstance(comm, MPI.Intercomm):
        raise TypeError(f"{name}: expected an intracommunicator, got an mpi4py Intercomm")
    if comm == MPI.COMM_NULL:
        raise ValueError(f"{name}: expected a communicator, got MPI.COMM_NULL")
    return comm.py2f()


def agree(comm, check):
    """Runs ``check()`` (the argument checks of a call on `comm`) on every rank; when it raises
    on any rank, every rank raises the same kind, naming the lowest failing rank, so that no rank
    waits forever in the call's first collective. Returns what ``check()`` returns."""
    if comm is None or comm.Get_size() == 1:
        return check()
    from mpi4py import MPI

    error, value = None, None
    try:
        value = check()
    except (TypeError, ValueError, RuntimeError) as e:  # RuntimeError: a device absent here
        error = e
    size, rank = comm.Get_size(), comm.Get_rank()
    failing = comm.allreduce(rank if error is not None else size, op=MPI.MIN)
    if failing == size:
        return value
    kind, text = comm.bcast((type(error).__name__, str(error)) if rank == failing else None,
                            root=failing)
    kinds = {"TypeError": TypeError, "ValueError": ValueError}
    raise kinds.get(kind, RuntimeError)(f"rank {failing} of {size}: {text}")
