"""sciproxy: GPU-ready scientific kernels with built-in verification and performance reports.

The Python face of the C++ library. ``parstack`` and ``argmax`` are drop-in replacements for
``pyrocko.parstack.parstack`` and ``pyrocko.parstack.argmax`` (same arguments, same results),
with the backend chosen at run time by ``impl``::

    import sciproxy
    result, offsetout = sciproxy.parstack(arrays, offsets, shifts, weights, method=0, impl="cpu")
    sciproxy.info()    # version, backends built, CUDA devices, threads

Bad input raises ValueError (a value or shape is wrong), TypeError (a type or dtype is wrong) or
RuntimeError (a backend that was not built or a device that is absent); every message names the
argument, what was expected and what came: ``"shifts: expected integers (int32), got float64 ..."``.
"""

from __future__ import annotations

import atexit
import collections.abc
import operator
import re

import numpy as np

from . import _sciproxy

__version__ = _sciproxy.__version__
__all__ = ["parstack", "argmax", "info", "resolve_impl", "__version__"]

# The C++ buffers of the CUDA backend persist between calls; free them while CUDA is still alive.
atexit.register(_sciproxy.release_plans)

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_IMPL_ALIASES = {"openmp": "cpu", "numpy": "reference"}  # pyrocko's names
_IMPL_ACCEPTED = (
    "one of 'auto', 'reference', 'cpu', 'cuda', 'cuda:N' "
    "(or pyrocko's 'openmp' = 'cpu' and 'numpy' = 'reference')"
)


def _describe(value) -> str:
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


def _integer(name: str, value, lo: int, hi: int, expected: str | None = None) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected an integer, got {_describe(value)}")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: expected an integer, got {_describe(value)}") from None
    if not lo <= number <= hi:
        raise ValueError(f"{name}: expected {expected or f'an integer in [{lo}, {hi}]'}, got {number}")
    return number


def _nparallel(nparallel) -> int:
    """None: every thread OpenMP offers (0 for the C++ layer); otherwise a count >= 1."""
    if nparallel is None:
        return 0
    return _integer("nparallel", nparallel, 1, _INT32_MAX, "a thread count >= 1 (or None for all)")


def _dtype(dtype) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype: expected numpy.float32 or numpy.float64, got {dtype!r}")
    return dt


def resolve_impl(impl: str = "auto") -> str:
    """The backend ``impl`` runs on here: 'reference', 'cpu' or 'cuda:N' ('auto' picks one).

    Raises RuntimeError when the backend was not built or the device is absent.
    """
    return _sciproxy.select_device(_device_spec(impl))


def _device_spec(impl) -> str:
    if not isinstance(impl, str):
        raise TypeError(f"impl: expected a string, {_IMPL_ACCEPTED}, got {_describe(impl)}")
    spec = _IMPL_ALIASES.get(impl, impl)
    if spec in ("auto", "reference", "cpu", "cuda") or re.fullmatch(r"cuda:[0-9]+", spec):
        return spec
    raise ValueError(f"impl: expected {_IMPL_ACCEPTED}, got {impl!r}")


def _as_array(name: str, value) -> np.ndarray:
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as error:
        raise TypeError(f"{name}: expected an array, got {_describe(value)} ({error})") from None


def _index_array(name: str, value, ndim: int, what: str) -> np.ndarray:
    """An integer array of `ndim` dimensions whose values fit in int32, as C-contiguous int32."""
    a = _as_array(name, value)
    if a.dtype.kind not in "iu":
        hint = ""
        if a.dtype.kind == "f":
            hint = (
                "; they are sample indices, so round them explicitly, "
                f"e.g. numpy.round({name}).astype(numpy.int32)"
            )
        raise TypeError(f"{name}: expected integers (int32), got {_describe(a)}{hint}")
    if a.ndim != ndim:
        raise ValueError(f"{name}: expected {what}, got {_describe(a)}")
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < _INT32_MIN or hi > _INT32_MAX:
            raise ValueError(
                f"{name}: expected values that fit in int32, got values in [{lo}, {hi}]"
            )
    return np.ascontiguousarray(a, dtype=np.int32)


def _traces(arrays, dtype: np.dtype) -> list:
    if isinstance(arrays, np.ndarray):
        if arrays.ndim != 2:
            raise ValueError(
                "arrays: expected a list of 1-D arrays (one per trace) or a 2-D array, "
                f"got {_describe(arrays)}"
            )
        items = list(arrays)
    elif isinstance(arrays, (str, bytes)) or not isinstance(arrays, collections.abc.Sequence):
        raise TypeError(
            f"arrays: expected a list of 1-D numpy arrays (one per trace), got {_describe(arrays)}"
        )
    else:
        items = list(arrays)
    if not items:
        raise ValueError("arrays: expected at least one trace, got an empty sequence")
    traces = []
    for i, item in enumerate(items):
        name = f"arrays[{i}]"
        a = _as_array(name, item)
        if a.dtype.kind not in "biuf":
            raise TypeError(f"{name}: expected a 1-D array of real numbers, got {_describe(item)}")
        if a.ndim != 1:
            raise ValueError(f"{name}: expected a 1-D array, got {_describe(a)}")
        # Cast like pyrocko (a.astype(dtype, copy=False)); copy only what is not C-contiguous.
        # Values that overflow float32 become inf, which the C++ layer reports by index.
        with np.errstate(over="ignore", invalid="ignore"):
            traces.append(np.ascontiguousarray(a.astype(dtype, copy=False)))
    return traces


def _rename_traces(error: Exception) -> Exception:
    """The C++ layer calls the traces 'traces'; this function's argument is 'arrays'."""
    message = str(error)
    if message.startswith("traces"):
        return type(error)("arrays" + message[len("traces"):])
    return error


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
        (shape (nshifts,)); it is returned (method 0: reshaped to 2-D).
    nparallel : threads of the cpu backend; None: all.
    dtype : numpy.float32 or numpy.float64 (default, like pyrocko).
    impl : 'auto' (cuda when built and a GPU is present, else cpu), 'reference', 'cpu',
        'cuda', 'cuda:N'; pyrocko's 'openmp' means 'cpu' and 'numpy' means 'reference'.
    clamp_max_at_zero : method 1 only: return max(0, max_k R) as pyrocko's C code does.
        By default the true maximum (what pyrocko's numpy code returns).

    Returns
    -------
    (result, offsetout) : the output and the absolute index of its first sample.
    """
    device = _device_spec(impl)
    dt = _dtype(dtype)
    method = _integer("method", method, 0, 1, "0 (stack) or 1 (maximum of the stack)")
    lengthout = _integer(
        "lengthout", lengthout, _INT64_MIN, _INT64_MAX,
        "a positive length, or a negative one for the default window",
    )
    if lengthout == 0:
        raise ValueError("lengthout: expected a positive length, or -1 for the default window, got 0")
    lengthout = max(lengthout, -1)
    offsetout = _integer("offsetout", offsetout, _INT32_MIN, _INT32_MAX, "an integer that fits in int32")
    threads = _nparallel(nparallel)
    if not isinstance(clamp_max_at_zero, (bool, np.bool_)):
        raise TypeError(f"clamp_max_at_zero: expected True or False, got {_describe(clamp_max_at_zero)}")

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
    if nshifts == 0:
        raise ValueError(f"shifts: expected at least one shift set, got shape {shifts.shape}")

    w = _as_array("weights", weights)
    if w.dtype.kind not in "biuf":
        raise TypeError(f"weights: expected real numbers, got {_describe(weights)}")
    if w.shape != shifts.shape:
        raise ValueError(f"weights: expected the shape of shifts {shifts.shape}, got {_describe(w)}")
    with np.errstate(over="ignore", invalid="ignore"):  # inf is reported by the C++ layer
        w = np.ascontiguousarray(w.astype(dt, copy=False))

    accumulate = False
    if result is not None:
        _check_result(result, dt, method, nshifts, lengthout)
        accumulate = method == 0

    kernel = _sciproxy.parstack_float32 if dt == np.float32 else _sciproxy.parstack_float64
    try:
        out, offset = kernel(
            traces, offsets, shifts, w, method, lengthout, offsetout, result, accumulate,
            bool(clamp_max_at_zero), threads, device,
        )
    except (ValueError, TypeError) as error:
        raise _rename_traces(error) from None
    if method == 0 and out.ndim == 1:
        out = out.reshape((nshifts, out.size // nshifts))
    return out, int(offset)


def _check_result(result, dt: np.dtype, method: int, nshifts: int, lengthout: int) -> None:
    if not isinstance(result, np.ndarray):
        raise TypeError(f"result: expected a numpy array of dtype {dt} or None, got {_describe(result)}")
    if result.dtype != dt:
        raise TypeError(
            f"result: expected dtype {dt} (the dtype argument, float64 by default like pyrocko), "
            f"got {_describe(result)}"
        )
    if not result.flags.c_contiguous:
        raise ValueError(
            f"result: expected a C-contiguous array (it is written in place), got {_describe(result)}"
        )
    if not result.flags.writeable:
        raise ValueError(f"result: expected a writable array, got {_describe(result)}")
    if method == 1:
        if result.shape != (nshifts,):
            raise ValueError(
                f"result: expected shape ({nshifts},) for method 1 (one maximum per shift set), "
                f"got {_describe(result)}"
            )
        return
    window = str(lengthout) if lengthout > 0 else "lengthout"
    expected = f"shape ({nshifts}, {window}) or ({nshifts} * {window},) for method 0"
    if result.ndim == 2:
        if result.shape[0] != nshifts or (lengthout > 0 and result.shape[1] != lengthout):
            raise ValueError(f"result: expected {expected}, got {_describe(result)}")
    elif result.ndim == 1:
        if lengthout > 0 and result.size != nshifts * lengthout:
            raise ValueError(f"result: expected {expected}, got {_describe(result)}")
    else:
        raise ValueError(f"result: expected {expected}, got {_describe(result)}")
    # With the default window the C++ layer checks the size against the window it computes.


def argmax(a, nparallel=None, pyrocko_compat=False):
    """Index of the maximum along axis 0 of a 2-D float32/float64 array, as uint32.

    Same as ``numpy.argmax(a, axis=0)`` (the first maximum wins). ``pyrocko_compat=True``
    reproduces ``pyrocko.parstack.argmax``, whose running maximum starts at DBL_MIN, so that a
    column whose values are all <= 0 gives 0.
    """
    x = _as_array("a", a)
    if x.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"a: expected a float32 or float64 array, got {_describe(x)}")
    if x.ndim != 2:
        raise ValueError(f"a: expected a 2-D array, got {_describe(x)}")
    if not isinstance(pyrocko_compat, (bool, np.bool_)):
        raise TypeError(f"pyrocko_compat: expected True or False, got {_describe(pyrocko_compat)}")
    threads = _nparallel(nparallel)
    x = np.ascontiguousarray(x)
    kernel = _sciproxy.argmax_float32 if x.dtype == np.float32 else _sciproxy.argmax_float64
    return kernel(x, threads, bool(pyrocko_compat))


def info() -> dict:
    """What this build contains and what this machine has.

    Keys: version, git_commit, compiler, build_type, build_flags, backends (built: 'reference',
    'cpu', and 'cuda' when compiled), cuda_compiled, cuda_device_count, cuda_devices (index, name,
    compute_capability, multiprocessors, memory_gib), cuda_unavailable_reason (when there is no
    device), threads (OpenMP default), cpu_model, auto_device (what impl='auto' runs on).
    """
    return dict(_sciproxy.info())


# The wave family: sciproxy.wave.scalar, scalar_gradient (Deepwave's scalar propagator).
from . import wave  # noqa: E402  so that `import sciproxy` reaches sciproxy.wave
