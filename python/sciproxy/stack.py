"""sciproxy.stack: delay-and-sum stacking of seismic traces, pyrocko's way.

``parstack`` and ``argmax`` are drop-in replacements for ``pyrocko.parstack.parstack`` and
``pyrocko.parstack.argmax`` (same arguments, same results), with the backend chosen at run time
by ``impl``; ``sciproxy.parstack`` and ``sciproxy.argmax`` are these functions::

    from sciproxy import parstack          # instead of: from pyrocko.parstack import parstack
    result, offsetout = parstack(arrays, offsets, shifts, weights, method=0, impl="cpu")

Bad input raises ValueError (a value or shape), TypeError (a type or dtype) or RuntimeError (a
backend not built, a device absent); every message names the argument, what was expected and
what came: ``"shifts: expected integers (int32), got float64 ..."``.
"""

from __future__ import annotations

import collections.abc

import numpy as np

from . import _args, _sciproxy

__all__ = ["parstack", "argmax", "resolve_impl", "release_cached_results"]

_IMPL_ALIASES = {"openmp": "cpu", "numpy": "reference"}  # pyrocko's names
_IMPL_ACCEPTED = (
    "one of 'auto', 'reference', 'cpu', 'cuda', 'cuda:N' "
    "(or pyrocko's 'openmp' = 'cpu' and 'numpy' = 'reference')"
)


def _device_spec(impl) -> str:
    return _args.device(impl, "impl", _IMPL_ALIASES, _IMPL_ACCEPTED)


def resolve_impl(impl: str = "auto") -> str:
    """The backend ``impl`` runs on here: 'reference', 'cpu' or 'cuda:N' ('auto' picks one).

    Raises RuntimeError when the backend was not built or the device is absent.
    """
    return _sciproxy.select_device(_device_spec(impl))


def _index_array(name: str, value, ndim: int, what: str) -> np.ndarray:
    """An integer array of `ndim` dimensions whose values fit in int32, as C-contiguous int32."""
    a = _args.as_array(name, value)
    if a.dtype.kind not in "iu":
        hint = ""
        if a.dtype.kind == "f":
            hint = (
                "; they are sample indices, so round them explicitly, "
                f"e.g. numpy.round({name}).astype(numpy.int32)"
            )
        raise TypeError(f"{name}: expected integers (int32), got {_args.describe(a)}{hint}")
    if a.ndim != ndim:
        raise ValueError(f"{name}: expected {what}, got {_args.describe(a)}")
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < _args.INT32_MIN or hi > _args.INT32_MAX:
            raise ValueError(
                f"{name}: expected values that fit in int32, got values in [{lo}, {hi}]"
            )
    return np.ascontiguousarray(a, dtype=np.int32)


def _traces(arrays, dtype: np.dtype) -> list:
    if isinstance(arrays, np.ndarray):
        if arrays.ndim != 2:
            raise ValueError(
                "arrays: expected a list of 1-D arrays (one per trace) or a 2-D array, "
                f"got {_args.describe(arrays)}"
            )
        items = list(arrays)
    elif isinstance(arrays, (str, bytes)) or not isinstance(arrays, collections.abc.Sequence):
        raise TypeError(
            f"arrays: expected a list of 1-D numpy arrays (one per trace), got {_args.describe(arrays)}"
        )
    else:
        items = list(arrays)
    if not items:
        raise ValueError("arrays: expected at least one trace, got an empty sequence")
    traces = []
    for i, item in enumerate(items):
        name = f"arrays[{i}]"
        a = _args.as_array(name, item)
        if a.dtype.kind not in "biuf":
            raise TypeError(f"{name}: expected a 1-D array of real numbers, got {_args.describe(item)}")
        if a.ndim != 1:
            raise ValueError(f"{name}: expected a 1-D array, got {_args.describe(a)}")
        # Cast like pyrocko (a.astype(dtype, copy=False)); copy only what is not C-contiguous.
        # Values that overflow float32 become inf, which the C++ layer reports by index.
        with np.errstate(over="ignore", invalid="ignore"):
            traces.append(np.ascontiguousarray(a.astype(dtype, copy=False)))
    return traces


def parstack(
    arrays,
    offsets,
    shifts,
    weights,
    method=0,
    lengthout=-1,
    offsetout=0,
    result=None,
    nparallel=None,
    dtype=np.float64,
    impl="auto",
    clamp_max_at_zero=False,
    autotune=False,
    comm=None,
    shift_sets="all",
    result_layout="all",
):
    """Weighted delay-and-sum of traces, like ``pyrocko.parstack.parstack``.

    For every shift set s (a row of `shifts` and `weights`)::

        R[s, k] = sum_i weights[s, i] * arrays[i][k + offsetout - offsets[i] - shifts[s, i]]

    counting only samples inside trace i (traces whose weight is exactly 0 are skipped).

    Parameters
    ----------
    arrays : list of N 1-D arrays (lengths may differ), cast to `dtype`.
    offsets : (N,) integers: absolute start index of each trace.
    shifts : (nshifts, N) integers: the shift of each trace in each shift set.
    weights : (nshifts, N) finite real numbers, cast to `dtype`.
    method : 0 returns the stacks, shape (nshifts, lengthout); 1 the maximum over time of
        each stack, shape (nshifts,).
    lengthout, offsetout : the output window. ``lengthout < 0`` (default): the window that holds
        every shifted trace (offsetout = min(offsets + shifts)); otherwise the samples
        [offsetout, offsetout + lengthout) of the stack.
    result : optional output array of `dtype`, C-contiguous. Method 0 adds the stack into it
        (shape (nshifts, lengthout) or flat (nshifts * lengthout,)), method 1 overwrites it
        (shape (nshifts,)); it is returned (method 0: reshaped to 2-D). None: a new array; a
        stack of 4 MB and more reuses the memory of earlier results that are gone (see
        release_cached_results).
    nparallel : threads of the cpu backend; None: all.
    dtype : numpy.float32 or numpy.float64 (default, like pyrocko).
    impl : 'auto' (cuda when built and a GPU is present, else cpu), 'reference', 'cpu',
        'cuda', 'cuda:N'; pyrocko's 'openmp' means 'cpu' and 'numpy' means 'reference'.
    clamp_max_at_zero : method 1 only: return max(0, max_k R) as pyrocko's C code does.
        By default the true maximum (what pyrocko's numpy code returns).
    autotune : cpu backend: choose the chunk of output samples per job by timing candidates on
        this call's problem, the first time a shape is seen (that call takes several times
        longer); the choice is cached per machine, shape, dtype and thread count, and later
        calls read it. The result does not depend on it.
    comm : an mpi4py intracommunicator (None: this process alone). The call is then collective:
        the shift sets are split across the ranks in contiguous blocks, each rank stacks its
        own, and every row is the same bits as one process computes. Every rank passes the same
        arrays, offsets and options; an error on any rank is raised on every rank.
    shift_sets : with `comm`: 'all' (every rank passes every shift set) or 'own' (each rank
        passes its own block; the whole is the ranks' blocks in rank order).
    result_layout : with `comm`: 'all' (every rank receives the whole result), 'root' (rank 0
        receives it, the others get None) or 'own' (each rank the rows of its own shift sets).

    Returns
    -------
    (result, offsetout) : the output and the absolute index of its first sample.
    """
    handle = _args.communicator("comm", comm)
    sets = _choice("shift_sets", shift_sets, _SHIFT_SETS)
    layout = _choice("result_layout", result_layout, _RESULT_LAYOUTS)
    prepared = _args.agree(comm, lambda: _prepare(
        arrays, offsets, shifts, weights, method, lengthout, offsetout, result, nparallel,
        dtype, impl, clamp_max_at_zero, autotune, comm is not None and sets == 1))
    dt, method, lengthout, offsetout, traces, offsets, shifts, w, accumulate, threads, device = prepared
    kernel = _sciproxy.parstack_float32 if dt == np.float32 else _sciproxy.parstack_float64
    out, offset = kernel(
        traces, offsets, shifts, w, method, lengthout, offsetout, result, accumulate,
        bool(clamp_max_at_zero), threads, device, bool(autotune), handle, sets, layout,
    )
    if comm is not None and layout == 1 and comm.Get_rank() != 0:
        return None, int(offset)
    if method == 0 and out.ndim == 1:  # a flat result given: 2-D, one row per shift set it holds
        rows = _rows_held(comm, shifts.shape[0], sets, layout)
        out = out.reshape((rows, out.size // rows))
    return out, int(offset)


def _rows_held(comm, nshifts, sets, layout):
    """The shift sets whose rows this rank's result holds (the library's split: contiguous
    blocks, the first nshifts % size ranks one more)."""
    if comm is None or comm.Get_size() == 1:
        return nshifts
    size, rank = comm.Get_size(), comm.Get_rank()
    if layout == 2:  # its own rows
        return nshifts if sets == 1 else nshifts // size + (1 if rank < nshifts % size else 0)
    return comm.allreduce(nshifts) if sets == 1 else nshifts


_SHIFT_SETS = {"all": 0, "own": 1}
_RESULT_LAYOUTS = {"all": 0, "root": 1, "own": 2}


def _choice(name, value, choices):
    if not isinstance(value, str) or value not in choices:
        accepted = " or ".join(repr(c) for c in choices)
        raise ValueError(f"{name}: expected {accepted}, got {_args.describe(value)}")
    return choices[value]


def _prepare(arrays, offsets, shifts, weights, method, lengthout, offsetout, result, nparallel,
             dtype, impl, clamp_max_at_zero, autotune, own_shift_sets):
    """The arguments checked and converted; raises TypeError or ValueError naming one."""
    device = _device_spec(impl)
    dt = _args.dtype(dtype)
    method = _args.integer("method", method, 0, 1, "0 (stack) or 1 (maximum of the stack)")
    lengthout = _args.integer(
        "lengthout", lengthout, _args.INT64_MIN, _args.INT64_MAX,
        "a positive length, or a negative one for the default window",
    )
    if lengthout == 0:
        raise ValueError("lengthout: expected a positive length, or -1 for the default window, got 0")
    lengthout = max(lengthout, -1)
    offsetout = _args.integer("offsetout", offsetout, _args.INT32_MIN, _args.INT32_MAX, "an integer that fits in int32")
    threads = _args.nparallel(nparallel)
    if not isinstance(clamp_max_at_zero, (bool, np.bool_)):
        raise TypeError(f"clamp_max_at_zero: expected True or False, got {_args.describe(clamp_max_at_zero)}")
    if not isinstance(autotune, (bool, np.bool_)):
        raise TypeError(f"autotune: expected True or False, got {_args.describe(autotune)}")

    traces = _traces(arrays, dt)
    ntraces = len(traces)
    offsets = _index_array("offsets", offsets, 1, f"a 1-D array of {ntraces} offsets (one per trace)")
    if offsets.shape != (ntraces,):
        raise ValueError(
            f"offsets: expected one offset per trace, shape ({ntraces},), got shape {offsets.shape}"
        )
    shifts = _index_array("shifts", shifts, 2, f"a 2-D array of shape (nshifts, {ntraces})")
    if shifts.shape[1] != ntraces:
        raise ValueError(
            f"shifts: expected shape (nshifts, {ntraces}) (one column per trace), "
            f"got shape {shifts.shape}"
        )
    nshifts = shifts.shape[0]
    if nshifts == 0 and not own_shift_sets:  # with shift_sets='own' a rank may hold none
        raise ValueError(f"shifts: expected at least one shift set, got shape {shifts.shape}")

    w = _args.as_array("weights", weights)
    if w.dtype.kind not in "biuf":
        raise TypeError(f"weights: expected real numbers, got {_args.describe(weights)}")
    if w.shape != shifts.shape:
        raise ValueError(f"weights: expected the shape of shifts {shifts.shape}, got {_args.describe(w)}")
    with np.errstate(over="ignore", invalid="ignore"):  # inf is reported by the C++ layer
        w = np.ascontiguousarray(w.astype(dt, copy=False))

    if method == 0 and lengthout > 0 and nshifts * lengthout * dt.itemsize > _args.INT64_MAX:
        # The result is (nshifts, lengthout): refused by name, not as numpy's "array is too big".
        raise ValueError(f"lengthout: expected a window whose result (nshifts x lengthout = "
                         f"{nshifts} x lengthout {dt.name} values) fits in int64 bytes, "
                         f"got {lengthout}")
    accumulate = False
    if result is not None:
        _check_result(result, dt, method, nshifts, lengthout)
        accumulate = method == 0

    return dt, method, lengthout, offsetout, traces, offsets, shifts, w, accumulate, threads, device


def _check_result(result, dt: np.dtype, method: int, nshifts: int, lengthout: int) -> None:
    if not isinstance(result, np.ndarray):
        raise TypeError(f"result: expected a numpy array of dtype {dt} or None, got {_args.describe(result)}")
    if result.dtype != dt:
        raise TypeError(
            f"result: expected dtype {dt} (the dtype argument, float64 by default like pyrocko), "
            f"got {_args.describe(result)}"
        )
    if not result.flags.c_contiguous:
        raise ValueError(
            f"result: expected a C-contiguous array (it is written in place), got {_args.describe(result)}"
        )
    if not result.flags.writeable:
        raise ValueError(f"result: expected a writable array, got {_args.describe(result)}")
    if method == 1:
        if result.shape != (nshifts,):
            raise ValueError(
                f"result: expected shape ({nshifts},) for method 1 (one maximum per shift set), "
                f"got {_args.describe(result)}"
            )
        return
    window = str(lengthout) if lengthout > 0 else "lengthout"
    expected = f"shape ({nshifts}, {window}) or ({nshifts} * {window},) for method 0"
    if result.ndim == 2:
        if result.shape[0] != nshifts or (lengthout > 0 and result.shape[1] != lengthout):
            raise ValueError(f"result: expected {expected}, got {_args.describe(result)}")
    elif result.ndim == 1:
        if lengthout > 0 and result.size != nshifts * lengthout:
            raise ValueError(f"result: expected {expected}, got {_args.describe(result)}")
    else:
        raise ValueError(f"result: expected {expected}, got {_args.describe(result)}")
    # With the default window the C++ layer checks the size against the window it computes.


def release_cached_results() -> int:
    """Frees the memory that large results (method 0's stacks of 4 MB and more) leave behind
    when they are gone, and returns its bytes.

    parstack keeps the memory of the two most recent such results that were dropped, so that a
    loop of calls (a detector over time windows) writes its stacks into memory that is already
    mapped instead of having the kernel map and clear fresh pages on every call (30-60% of a
    method-0 call on the machines of docs/kernels/parstack.md). A result array is a view of its
    block (its ``base`` holds it); the block comes back when the array and its views are gone.
    ``SCIPROXY_RESULT_CACHE_BYTES`` (read once, at the first large result) caps the memory kept:
    by default a quarter of physical memory; 0 keeps none."""
    return int(_sciproxy.release_cached_results())


def argmax(a, nparallel=None, pyrocko_compat=False):
    """Index of the maximum along axis 0 of a 2-D float32/float64 array, as uint32.

    Same as ``numpy.argmax(a, axis=0)``: the first maximum wins, and a column holding NaN gives
    the index of its first NaN. ``pyrocko_compat=True`` reproduces ``pyrocko.parstack.argmax``,
    whose running maximum starts at DBL_MIN, so that a column whose values are all <= 0 gives 0,
    and which compares with ``>`` only, so that NaN is skipped (an all-NaN column gives 0).
    """
    x = _args.as_array("a", a)
    if x.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"a: expected a float32 or float64 array, got {_args.describe(x)}")
    if x.ndim != 2:
        raise ValueError(f"a: expected a 2-D array, got {_args.describe(x)}")
    if not isinstance(pyrocko_compat, (bool, np.bool_)):
        raise TypeError(f"pyrocko_compat: expected True or False, got {_args.describe(pyrocko_compat)}")
    threads = _args.nparallel(nparallel)
    x = np.ascontiguousarray(x)
    kernel = _sciproxy.argmax_float32 if x.dtype == np.float32 else _sciproxy.argmax_float64
    return kernel(x, threads, bool(pyrocko_compat))
