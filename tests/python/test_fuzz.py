"""Fuzz tests of every public Python entry point (issue 14, "reliable under abuse"), with Hypothesis.

Covered: sciproxy.parstack / sciproxy.stack.parstack, sciproxy.argmax / sciproxy.stack.argmax,
sciproxy.stack.resolve_impl; sciproxy.wave.scalar, scalar_gradient, scalar_born,
scalar_born_gradient and cfl; sciproxy.tti.tti, tti_adjoint and tti_max_dt; and the workshop
demo sciproxy.tti.tti_demo, tti_demo_dt_limit, tti_demo_flops and ricker.

Each test draws a small valid call (sizes including 0 and 1, float32 or float64, C order,
Fortran order, negative strides, non-contiguous and read-only views), then breaks at most one
argument: None, a bool, a float where an integer belongs (16.9), negative, zero and huge
integers (2**31, 2**63, 2**64 - 1), NaN and inf, a string, an array of the wrong dtype or
number of dimensions, NaN or inf inside an array, and integer arrays with values int64 cannot
hold (a uint64 near 2**64, which a cast would wrap to the "ignore" location).

Every call must either return, or raise ValueError, TypeError or MemoryError whose message
names one of the function's own arguments (Python keyword names); any other exception type
fails the test, and so would a crash or a hang (the problems are tiny: a hang is a bug). Inputs
must come back unchanged: every array passed in is compared with a copy taken before the call.

Deterministic (derandomize=True) and small: the whole file runs in about a minute on 2 cores.
"""

from __future__ import annotations

import inspect
import math
import re
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import sciproxy  # noqa: E402
import sciproxy.stack as stack  # noqa: E402
import sciproxy.tti as tti  # noqa: E402
import sciproxy.wave as wave  # noqa: E402

ERRORS = (ValueError, TypeError, MemoryError)
DTYPES = (np.float32, np.float64)


def fuzz_settings(n):
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


# ---- what every call must satisfy --------------------------------------------------------------


def _arrays_in(value, found):
    if isinstance(value, np.ndarray):
        found.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _arrays_in(v, found)
    elif isinstance(value, dict):
        for v in value.values():
            _arrays_in(v, found)
    return found


def _named_argument(message: str, names: set) -> bool:
    """The message's subject (before the first ': ') starts with one of `names`: "weights",
    "arrays[3]", "grad_final_state['wavefield_0']", "offsets + shifts", "rows, cols"."""
    head = message.split(": ", 1)[0]
    first = re.split(r"[\[\], +(]", head.strip(), maxsplit=1)[0]
    return first in names


def check_call(fn, kwargs: dict, extra_names=()):
    """Calls fn(**kwargs): a result, or an error of an allowed type naming an argument; inputs
    unchanged. Returns the result or the exception."""
    names = set(inspect.signature(fn).parameters) | set(extra_names)
    arrays = _arrays_in(kwargs, [])
    copies = [(a, a.copy(), a.flags.writeable) for a in arrays]
    outcome = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outcome = fn(**kwargs)
    except ERRORS as error:
        message = str(error)
        assert message, f"{fn.__name__}: {type(error).__name__} without a message"
        if isinstance(error, MemoryError):
            assert any(n in message for n in names), \
                f"{fn.__name__}: MemoryError names no argument: {message}"
        else:
            assert _named_argument(message, names), \
                f"{fn.__name__}: {type(error).__name__} names no argument of {sorted(names)}: {message}"
        outcome = error
    for a, before, writeable in copies:
        assert a.flags.writeable == writeable
        assert a.dtype == before.dtype and a.shape == before.shape
        assert np.array_equal(a, before, equal_nan=a.dtype.kind in "fc"), \
            f"{fn.__name__} modified an input array"
    return outcome


# ---- generic breakage --------------------------------------------------------------------------

HUGE = [2**31, 2**32 + 1, 2**63, 2**64 - 1, -(2**63) - 1, 10**30]
# Sizes that fit in int64 but describe runs of hours or terabytes (2**31 time steps, a 2**32
# cell PML): valid requests that the resource layer, not argument checking, refuses. The
# arguments that size the work (SIZES) get only the values no int64 holds.
LONG_RUNS = (2**31, 2**32 + 1)
SIZES = ("nt", "lengthout", "pml_width", "survey_pad", "sponge_width", "shape", "nparallel",
         "model_gradient_sampling_interval")
BAD_SCALARS = [None, True, False, 16.9, -1, 0, 1.0, float("nan"), float("inf"), -float("inf"),
               "x", "", np.float64(3.0), np.int64(-5), np.uint64(2**64 - 1), object(), [], (1, 2),
               *HUGE]


def layouts(draw, a: np.ndarray) -> np.ndarray:
    """The same values in another memory layout: Fortran order, reversed, a strided view, or a
    read-only view (numpy semantics unchanged)."""
    kind = draw(st.sampled_from(["c", "f", "reversed", "strided", "readonly"]))
    if kind == "f":
        return np.asfortranarray(a)
    if kind == "reversed" and a.ndim:
        b = np.ascontiguousarray(a[tuple(slice(None, None, -1) for _ in range(a.ndim))])
        return b[tuple(slice(None, None, -1) for _ in range(a.ndim))]
    if kind == "strided" and a.ndim:
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        big[..., ::2] = a
        return big[..., ::2]
    if kind == "readonly":
        b = a.copy()
        b.flags.writeable = False
        return b
    return a


def break_array(draw, a) -> object:
    """An array argument broken in one way."""
    a = np.asarray(a)
    how = draw(st.sampled_from(["dtype", "ndim+", "ndim-", "empty", "nan", "inf", "huge_int",
                                "negative", "ignore", "scalar", "list", "complex", "object"]))
    if how == "dtype":
        dt = draw(st.sampled_from([np.int32, np.int64, np.uint64, np.float16, np.float32,
                                   np.float64, np.bool_]))
        with np.errstate(all="ignore"):
            return a.astype(dt)
    if how == "ndim+":
        return a[None]
    if how == "ndim-":
        return a.ravel() if a.ndim != 1 else a.reshape(1, -1)[0, :0]
    if how == "empty":
        return np.zeros((0,) * max(a.ndim, 1), a.dtype)
    if how in ("nan", "inf") and a.size:
        b = a.astype(np.float64 if a.dtype.kind not in "f" else a.dtype, copy=True)
        b.flat[draw(st.integers(0, b.size - 1))] = np.nan if how == "nan" else -np.inf
        return b
    if how == "huge_int" and a.size:
        b = a.astype(np.uint64) if a.dtype.kind in "iu" else np.zeros(a.shape, np.uint64)
        b.flat[draw(st.integers(0, b.size - 1))] = draw(st.sampled_from(
            [2**64 - 1, 2**64 - 2**31, 2**63, 2**63 - 1, 2**32]))
        return b
    if how == "negative" and a.size:
        b = a.astype(np.int64) if a.dtype.kind in "iub" else a.copy()
        b.flat[draw(st.integers(0, b.size - 1))] = -1
        return b
    if how == "ignore" and a.size:
        b = a.astype(np.int64, copy=True)
        b.flat[draw(st.integers(0, b.size - 1))] = -(2**31)
        return b
    if how == "scalar":
        return a.flat[0] if a.size else 0.0
    if how == "list":
        return a.tolist()
    if how == "complex":
        return a.astype(np.complex128)
    if how == "object":
        return a.astype(object)
    return None


def mutate(draw, kwargs: dict, arrays: tuple, skip=()) -> dict:
    """kwargs with at most one argument broken (None, a bad scalar, or a broken array)."""
    choice = draw(st.sampled_from(["none", "scalar", "array", "layout"]))
    names = [k for k in kwargs if k not in skip]
    if choice == "none" or not names:
        return kwargs
    out = dict(kwargs)
    if choice == "scalar":
        name = draw(st.sampled_from(names))
        values = [b for b in BAD_SCALARS if name not in SIZES or not any(
            b is x for x in LONG_RUNS)]
        out[name] = draw(st.sampled_from(values))
        return out
    present = [k for k in arrays if isinstance(kwargs.get(k), np.ndarray)]
    if not present:
        return out
    name = draw(st.sampled_from(present))
    out[name] = (break_array(draw, kwargs[name]) if choice == "array"
                 else layouts(draw, kwargs[name]))
    return out


# ---- stack -------------------------------------------------------------------------------------


@st.composite
def parstack_call(draw):
    dt = draw(st.sampled_from(DTYPES))
    ntraces = draw(st.integers(1, 3))
    nshifts = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    arrays = [layouts(draw, rng.standard_normal(draw(st.integers(0, 6))).astype(dt))
              for _ in range(ntraces)]
    kwargs = dict(
        arrays=arrays,
        offsets=layouts(draw, rng.integers(-3, 4, ntraces).astype(
            draw(st.sampled_from([np.int32, np.int64, np.uint8])))),
        shifts=layouts(draw, rng.integers(-3, 4, (nshifts, ntraces)).astype(np.int32)),
        weights=layouts(draw, rng.standard_normal((nshifts, ntraces)).astype(dt)),
        method=draw(st.sampled_from([0, 1])),
        lengthout=draw(st.sampled_from([-1, 1, 5])),
        offsetout=draw(st.integers(-3, 3)),
        nparallel=draw(st.sampled_from([None, 1, 2])),
        dtype=dt,
        impl=draw(st.sampled_from(["reference", "cpu", "openmp", "numpy", "auto"])),
        clamp_max_at_zero=draw(st.booleans()),
    )
    if draw(st.booleans()) and kwargs["lengthout"] > 0:
        shape = (nshifts,) if kwargs["method"] == 1 else (nshifts, kwargs["lengthout"])
        kwargs["result"] = np.zeros(shape, dt)
    if draw(st.booleans()):  # the traces as one 2-D array (pyrocko accepts it)
        n = draw(st.integers(0, 4))
        kwargs["arrays"] = layouts(draw, rng.standard_normal((ntraces, n)).astype(dt))
    if draw(st.booleans()) and isinstance(kwargs["arrays"], list):
        i = draw(st.integers(0, ntraces - 1))
        kwargs["arrays"][i] = break_array(draw, kwargs["arrays"][i])
        return kwargs
    # The result is written in place: it is not an input to keep unchanged.
    return mutate(draw, kwargs, ("offsets", "shifts", "weights", "arrays"), skip=("result",))


@fuzz_settings(300)
@given(parstack_call())
def test_fuzz_parstack(kwargs):
    result = kwargs.pop("result", None)
    if result is not None:  # written in place: give a fresh one, not counted as an input
        kwargs["result"] = result
    fn = stack.parstack

    def call(**kw):
        r = kw.pop("result", None)
        return fn(**kw, result=None if r is None else r.copy())

    call.__signature__ = inspect.signature(fn)
    call.__name__ = "parstack"
    out = check_call(call, kwargs)
    if not isinstance(out, Exception):
        stacked, offset = out
        assert isinstance(offset, int)
        assert stacked.dtype == np.dtype(kwargs["dtype"])


@st.composite
def argmax_call(draw):
    dt = draw(st.sampled_from(DTYPES))
    rows, cols = draw(st.integers(0, 5)), draw(st.integers(0, 5))
    values = draw(st.lists(st.sampled_from([0.0, 1.0, -1.0, 2.0, np.nan, np.inf, -np.inf]),
                           min_size=rows * cols, max_size=rows * cols))
    a = layouts(draw, np.array(values, dt).reshape(rows, cols))
    kwargs = dict(a=a, nparallel=draw(st.sampled_from([None, 1, 2])),
                  pyrocko_compat=draw(st.booleans()))
    return mutate(draw, kwargs, ("a",))


@fuzz_settings(300)
@given(argmax_call())
def test_fuzz_argmax(kwargs):
    out = check_call(stack.argmax, kwargs)
    if isinstance(out, Exception):
        return
    a = np.asarray(kwargs["a"])
    assert out.dtype == np.uint32 and out.shape == (a.shape[1],)
    if not kwargs["pyrocko_compat"]:
        np.testing.assert_array_equal(out, np.argmax(a, axis=0))  # NaN: the first one wins


@fuzz_settings(30)
@given(st.sampled_from(BAD_SCALARS + ["cpu", "reference", "openmp", "numpy", "cuda:x"]))
def test_fuzz_resolve_impl(impl):
    fn = stack.resolve_impl
    try:
        fn(impl)
    except RuntimeError as error:  # a backend not built or absent: named, not a crash
        assert "cuda" in str(error)
    except ERRORS as error:
        assert _named_argument(str(error), {"impl"}), str(error)


# ---- wave --------------------------------------------------------------------------------------


@st.composite
def wave_problem(draw, born=False):
    dt_type = draw(st.sampled_from(DTYPES))
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.sampled_from([3, 4, 5, 2, 1])) for _ in range(ndim))  # 1: one cell
    nshots = draw(st.integers(1, 2))
    nsrc, nrec = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    nt = draw(st.integers(0, 4))
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    v = (1500 + 500 * rng.random(shape)).astype(dt_type)

    def locations(n):
        loc = np.stack([rng.integers(0, s, (nshots, n)) for s in shape], -1)
        return layouts(draw, loc.astype(draw(st.sampled_from([np.int64, np.int32, np.uint16]))))

    kwargs = dict(v=layouts(draw, v), grid_spacing=draw(st.sampled_from([5.0, 4, [5.0] * ndim])),
                  dt=draw(st.sampled_from([0.001, 0.002])), accuracy=draw(st.sampled_from([2, 4])),
                  pml_width=draw(st.sampled_from([0, 1, [1] * (2 * ndim)])), pml_freq=25.0,
                  nparallel=draw(st.sampled_from([None, 1])),
                  device=draw(st.sampled_from(["cpu", "reference"])))
    if nsrc or draw(st.booleans()):
        kwargs["source_amplitudes"] = layouts(draw, rng.standard_normal((nshots, nsrc, nt))
                                              .astype(dt_type))
        kwargs["source_locations"] = locations(nsrc)
    else:
        kwargs["nt"] = nt
    if nrec or draw(st.booleans()):
        kwargs["receiver_locations"] = locations(nrec)
    if born:
        kwargs["scatter"] = layouts(draw, (10 * rng.standard_normal(shape)).astype(dt_type))
    return kwargs, (nshots, nrec, nt, dt_type, ndim, rng, locations)


WAVE_ARRAYS = ("v", "source_amplitudes", "source_locations", "receiver_locations", "scatter",
               "bg_receiver_locations", "grad_receiver_amplitudes", "grad_bg_receiver_amplitudes")


@fuzz_settings(400)
@given(st.data())
def test_fuzz_wave_scalar(data):
    kwargs, _ = data.draw(wave_problem())
    kwargs = mutate(data.draw, kwargs, WAVE_ARRAYS)
    out = check_call(wave.scalar, kwargs)
    if not isinstance(out, Exception):
        assert all(np.all(np.isfinite(x)) for x in out)


@fuzz_settings(250)
@given(st.data())
def test_fuzz_wave_scalar_gradient(data):
    kwargs, (nshots, nrec, nt, dt_type, *_ ) = data.draw(wave_problem())
    kwargs["grad_receiver_amplitudes"] = np.ones((nshots, nrec, kwargs.get("nt", nt)), dt_type)
    kwargs["storage_mode"] = data.draw(st.sampled_from(["device", "cpu", "none"]))
    kwargs = mutate(data.draw, kwargs, WAVE_ARRAYS)
    check_call(wave.scalar_gradient, kwargs)


@fuzz_settings(250)
@given(st.data())
def test_fuzz_wave_scalar_born(data):
    kwargs, (nshots, nrec, nt, dt_type, ndim, rng, locations) = data.draw(wave_problem(born=True))
    if data.draw(st.booleans()):
        kwargs["bg_receiver_locations"] = locations(data.draw(st.integers(0, 2)))
    kwargs = mutate(data.draw, kwargs, WAVE_ARRAYS)
    check_call(wave.scalar_born, kwargs)


@fuzz_settings(250)
@given(st.data())
def test_fuzz_wave_scalar_born_gradient(data):
    kwargs, (nshots, nrec, nt, dt_type, ndim, rng, locations) = data.draw(wave_problem(born=True))
    kwargs["grad_receiver_amplitudes"] = np.ones((nshots, nrec, kwargs.get("nt", nt)), dt_type)
    kwargs["source_gradient"] = data.draw(st.booleans())
    kwargs = mutate(data.draw, kwargs, WAVE_ARRAYS)
    check_call(wave.scalar_born_gradient, kwargs)


@fuzz_settings(150)
@given(st.data())
def test_fuzz_wave_cfl(data):
    kwargs = dict(grid_spacing=data.draw(st.sampled_from([5.0, [5.0, 4.0], [1.0] * 3])),
                  dt=data.draw(st.sampled_from([0.001, 0.1])), max_vel=2000.0)
    kwargs = mutate(data.draw, kwargs, ())
    out = check_call(wave.cfl, kwargs)
    if not isinstance(out, Exception):
        inner_dt, ratio = out
        assert ratio >= 1 and math.isfinite(inner_dt)


# ---- tti ---------------------------------------------------------------------------------------


@st.composite
def tti_problem(draw):
    dt_type = draw(st.sampled_from(DTYPES))
    order = draw(st.sampled_from([4, 8]))
    radius = order // 2  # the fewest cells per axis; 1 cell: refused
    shape = tuple(draw(st.sampled_from([radius, radius + 1])) for _ in range(3))
    if draw(st.integers(0, 9)) == 9:
        shape = (1,) + shape[1:]
    nshots, nsrc, nrec = draw(st.integers(1, 2)), draw(st.integers(0, 2)), draw(st.integers(0, 2))
    nt = draw(st.integers(0, 3))
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    vp = np.full(shape, 2000.0, dt_type)

    def locations(n):
        return np.stack([rng.integers(0, s, (nshots, n)) for s in shape], -1).astype(np.int64)

    kwargs = dict(vp=layouts(draw, vp), grid_spacing=10.0, dt=0.0005,
                  source_locations=locations(nsrc), receiver_locations=locations(nrec),
                  space_order=order, sponge_width=draw(st.integers(0, 2)),
                  free_surface=draw(st.booleans()), device=draw(st.sampled_from(["cpu", "reference"])),
                  nparallel=draw(st.sampled_from([None, 1])))
    if draw(st.booleans()):
        kwargs["epsilon"] = np.full(shape, 0.1, dt_type)
    return kwargs, (nshots, nsrc, nrec, nt, dt_type, rng)


TTI_ARRAYS = ("vp", "source_amplitudes", "receiver_amplitudes", "source_locations",
              "receiver_locations", "epsilon", "buoyancy")


@fuzz_settings(300)
@given(st.data())
def test_fuzz_tti(data):
    kwargs, (nshots, nsrc, nrec, nt, dt_type, rng) = data.draw(tti_problem())
    kwargs["source_amplitudes"] = layouts(data.draw, rng.standard_normal((nshots, nsrc, nt))
                                          .astype(dt_type))
    kwargs = mutate(data.draw, kwargs, TTI_ARRAYS)
    check_call(tti.tti, kwargs)


@fuzz_settings(200)
@given(st.data())
def test_fuzz_tti_adjoint(data):
    kwargs, (nshots, nsrc, nrec, nt, dt_type, rng) = data.draw(tti_problem())
    kwargs["receiver_amplitudes"] = rng.standard_normal((nshots, nrec, nt)).astype(dt_type)
    kwargs = mutate(data.draw, kwargs, TTI_ARRAYS)
    check_call(tti.tti_adjoint, kwargs)


@fuzz_settings(150)
@given(st.data())
def test_fuzz_tti_max_dt(data):
    kwargs, _ = data.draw(tti_problem())
    kwargs = {k: kwargs[k] for k in ("vp", "grid_spacing", "space_order", "sponge_width",
                                     "free_surface") if k in kwargs}
    kwargs = mutate(data.draw, kwargs, ("vp",))
    out = check_call(tti.tti_max_dt, kwargs)
    if not isinstance(out, Exception):
        assert out > 0 and math.isfinite(out)


@st.composite
def tti_demo_call(draw):
    dt_type = draw(st.sampled_from(DTYPES))
    order = draw(st.sampled_from([4, 8]))
    shape = tuple(draw(st.integers(order, order + 2)) for _ in range(3))
    nt = draw(st.integers(1, 3))  # 0 steps: the "empty" breakage of source_amplitudes
    materials = dict(vp=1500.0, b=1.0, epsilon=0.2, eta=0.4, f=0.85, theta=0.5, phi=0.3,
                     damping=0.0)
    if draw(st.booleans()):
        materials["vp"] = layouts(draw, np.full(shape, 1500.0, dt_type))
    kwargs = dict(shape=shape, spacing=draw(st.sampled_from([10.0, (10.0, 10.0, 10.0), 10])),
                  dt=1e-4, **materials,
                  source_position=(20.0, 20.0, 20.0),
                  source_amplitudes=layouts(draw, np.ones(nt, dt_type)),
                  space_order=order,
                  form=draw(st.sampled_from(["fused", "two-pass"])),
                  device=draw(st.sampled_from(["cpu", "reference"])),
                  nparallel=draw(st.sampled_from([None, 1])), dtype=dt_type)
    return mutate(draw, kwargs, ("vp", "source_amplitudes"))


@fuzz_settings(250)
@given(tti_demo_call())
def test_fuzz_tti_demo(kwargs):
    out = check_call(tti.tti_demo, kwargs)
    if not isinstance(out, Exception):
        assert out.u.shape == tuple(kwargs["shape"])


@fuzz_settings(200)
@given(st.data())
def test_fuzz_tti_demo_helpers(data):
    shape = (5, 5, 5)
    which = data.draw(st.sampled_from(["dt_limit", "flops", "ricker"]))
    if which == "dt_limit":
        fn = tti.tti_demo_dt_limit
        kwargs = dict(shape=shape, spacing=10.0, vp=1500.0, b=1.0, epsilon=0.2, eta=0.4, f=0.85,
                      space_order=8)
    elif which == "flops":
        fn, kwargs = tti.tti_demo_flops, dict(space_order=data.draw(st.sampled_from([4, 8, 16])))
    else:
        fn, kwargs = tti.ricker, dict(f0=15.0, dt=0.001, nt=data.draw(st.integers(0, 5)))
    kwargs = mutate(data.draw, kwargs, ())
    check_call(fn, kwargs)


# ---- regressions the fuzzers and the tester found ----------------------------------------------


@pytest.mark.parametrize("nt", [-1, 16.9, True, None, 2**63, 2**64 - 1, np.float64(3.0)])
def test_wave_bad_nt_is_named(nt):
    v = np.full((5, 5), 2000.0)
    with pytest.raises((ValueError, TypeError), match="^nt"):
        wave.scalar(v, 5.0, 0.001, nt=nt, receiver_locations=np.array([[[1, 1]]]),
                    pml_freq=25.0, device="cpu")


def test_wave_nt_whose_traces_cannot_be_addressed_is_named():
    v = np.full((5, 5), 2000.0)
    with pytest.raises(ValueError, match="^nt"):
        wave.scalar(v, 5.0, 0.001, nt=2**62, receiver_locations=np.array([[[1, 1]]]),
                    pml_freq=25.0, device="cpu")


@pytest.mark.parametrize("width", [2**62, 2**63, -1, 2.5])
def test_wave_pml_width_out_of_range_is_named(width):
    v = np.full((5, 5), 2000.0)
    with pytest.raises((ValueError, TypeError), match="^pml_width"):
        wave.scalar(v, 5.0, 0.001, nt=2, pml_width=width, pml_freq=25.0, device="cpu")


def test_parstack_lengthout_whose_result_cannot_be_addressed_is_named():
    with pytest.raises(ValueError, match="^lengthout"):
        sciproxy.parstack([np.ones(3)], np.zeros(1, np.int32), np.zeros((1, 1), np.int32),
                          np.ones((1, 1)), lengthout=2**62)


def test_state_errors_name_the_callers_arguments():
    v = np.full((6, 6), 2000.0)
    kw = dict(source_amplitudes=np.ones((1, 1, 3)), source_locations=np.array([[[2, 2]]]),
              receiver_locations=np.array([[[1, 1]]]), pml_freq=25.0, device="cpu")
    with pytest.raises(ValueError, match="^wavefield_sc_0"):
        wave.scalar_born(v, v * 0, 5.0, 0.001, wavefield_sc_0=np.ones((1, 2, 2, 2)), **kw)
    with pytest.raises(ValueError, match=r"^grad_final_state\['wavefield_0'\]"):
        wave.scalar_gradient(v, 5.0, 0.001, grad_final_state={"wavefield_0": np.ones((1, 2))},
                             **kw)


def test_tti_max_dt_of_a_coarse_grid_is_not_zero():
    vp = np.full((5, 5, 5), 2000.0)
    fine = tti.tti_max_dt(vp, 10.0, space_order=4, sponge_width=0)
    coarse = tti.tti_max_dt(vp, 1e19, space_order=4, sponge_width=0)
    assert 0 < fine < coarse and math.isfinite(coarse)


@pytest.mark.parametrize("value", [16.9, 16.0, True, np.float64(8.0)])
def test_tti_demo_refuses_floats_and_bools_for_integers(value):
    args = dict(vp=1500.0, b=1.0, epsilon=0.2, eta=0.4, f=0.85, theta=0.5, phi=0.3,
                source_position=(20.0, 20.0, 20.0), source_amplitudes=np.ones(2, np.float32))
    with pytest.raises(TypeError, match="shape"):
        tti.tti_demo((value, 8, 8), 10.0, 1e-4, **args)
    with pytest.raises(TypeError, match="space_order"):
        tti.tti_demo((8, 8, 8), 10.0, 1e-4, space_order=value, **args)
    with pytest.raises(TypeError, match="nparallel"):
        tti.tti_demo((8, 8, 8), 10.0, 1e-4, nparallel=value, **args)
    with pytest.raises(TypeError, match="space_order"):
        tti.tti_demo_flops(value)
    with pytest.raises(TypeError, match="nt"):
        tti.ricker(15.0, 0.001, value)


def test_tti_demo_refuses_2d_source_amplitudes():
    args = dict(vp=1500.0, b=1.0, epsilon=0.2, eta=0.4, f=0.85, theta=0.5, phi=0.3,
                source_position=(20.0, 20.0, 20.0))
    with pytest.raises(ValueError, match="source_amplitudes: expected a 1-D array"):
        tti.tti_demo((8, 8, 8), 10.0, 1e-4, source_amplitudes=np.ones((2, 3)), **args)


@pytest.mark.parametrize("value", [2**64 - 2**31, 2**64 - 1, 2**63])
def test_uint64_locations_near_2_64_are_refused_not_wrapped(value):
    v = np.full((6, 6), 2000.0)
    rec = np.array([[[1, 1], [value, value]]], np.uint64)
    with pytest.raises(ValueError, match="receiver_locations"):
        wave.scalar(v, 5.0, 0.001, source_amplitudes=np.ones((1, 1, 3)),
                    source_locations=np.array([[[2, 2]]]), receiver_locations=rec,
                    pml_freq=25.0, device="cpu")
    vp = np.full((5, 5, 5), 2000.0)
    with pytest.raises(ValueError, match="receiver_locations"):
        tti.tti(vp, 10.0, 0.0005, np.ones((1, 1, 3)), np.array([[[2, 2, 2]]]),
                np.array([[[1, 1, 1], [value, value, value]]], np.uint64), sponge_width=0,
                space_order=4, device="cpu")


def test_tti_without_source_locations_blames_source_locations():
    vp = np.full((5, 5, 5), 2000.0)
    with pytest.raises(ValueError, match="^source_locations"):
        tti.tti(vp, 10.0, 0.0005, np.ones((1, 1, 3)), None, np.array([[[1, 1, 1]]]),
                sponge_width=0, space_order=4, device="cpu")
