"""Small parstack cases computed by hand (not by any implementation), on every host backend."""

import numpy as np
import pytest
import sciproxy

IMPLS = ["reference", "cpu", "openmp", "numpy", "auto"]
DTYPES = [np.float32, np.float64]


def case_a():
    # a0 = 1..5 at 0, a1 = 1..3 at 2; shift set 1 moves a0 by +1 and a1 by -1; window [0, 6).
    arrays = [np.arange(1.0, 6.0), np.arange(1.0, 4.0)]
    offsets = np.array([0, 2], dtype=np.int32)
    shifts = np.array([[0, 0], [1, -1]], dtype=np.int32)
    weights = np.ones((2, 2))
    expected = np.array([[1, 2, 4, 6, 8, 0], [0, 2, 4, 6, 4, 5]], dtype=float)
    return arrays, offsets, shifts, weights, expected, 0


def case_b():
    # Negative offsets and shifts, weights, and a zero weight (trace skipped, window unchanged).
    # Set 0: a0 = [1,2,3] (w 2) on samples -5..-3; a1 = [10,20] (w 0.5) on 1..2.
    # Set 1: a0 (w 0) on -2..0; a1 (w 1) on -3..-2. Window: [-5, 3), 8 samples.
    arrays = [np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0])]
    offsets = np.array([-3, 1], dtype=np.int32)
    shifts = np.array([[-2, 0], [1, -4]], dtype=np.int32)
    weights = np.array([[2.0, 0.5], [0.0, 1.0]])
    expected = np.array([[2, 4, 6, 0, 0, 0, 5, 10], [0, 0, 10, 20, 0, 0, 0, 0]], dtype=float)
    return arrays, offsets, shifts, weights, expected, -5


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", [case_a, case_b])
def test_default_window(case, impl, dtype):
    arrays, offsets, shifts, weights, expected, first = case()
    out, offsetout = sciproxy.parstack(arrays, offsets, shifts, weights, 0, dtype=dtype, impl=impl)
    assert offsetout == first
    assert out.dtype == np.dtype(dtype) and out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)

    maxima, offsetout = sciproxy.parstack(arrays, offsets, shifts, weights, 1, dtype=dtype, impl=impl)
    assert offsetout == first
    assert maxima.shape == (2,)
    np.testing.assert_array_equal(maxima, expected.max(axis=1))


@pytest.mark.parametrize("impl", ["reference", "cpu"])
@pytest.mark.parametrize(
    "offsetout, lengthout, expected",
    [
        (-1, 3, [[0, 0, 5], [0, 0, 0]]),  # inside the full window
        (-7, 4, [[0, 0, 2, 4], [0, 0, 0, 0]]),  # starts before every trace
        (10, 4, [[0, 0, 0, 0], [0, 0, 0, 0]]),  # after every trace: nothing to stack
        (-100, 2, [[0, 0], [0, 0]]),  # before every trace
        (-3, 1, [[6], [10]]),  # one sample
        (-6, 10, [[0, 2, 4, 6, 0, 0, 0, 5, 10, 0], [0, 0, 0, 10, 20, 0, 0, 0, 0, 0]]),  # wider
    ],
)
def test_given_window(impl, offsetout, lengthout, expected):
    arrays, offsets, shifts, weights, _, _ = case_b()
    out, off = sciproxy.parstack(arrays, offsets, shifts, weights, 0, lengthout=lengthout,
                                 offsetout=offsetout, impl=impl)
    assert off == offsetout
    np.testing.assert_array_equal(out, np.array(expected, dtype=float))
    maxima, off = sciproxy.parstack(arrays, offsets, shifts, weights, 1, lengthout=lengthout,
                                    offsetout=offsetout, impl=impl)
    assert off == offsetout
    np.testing.assert_array_equal(maxima, np.array(expected, dtype=float).max(axis=1))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("impl", ["reference", "cpu"])
def test_accumulation(impl, dtype):
    arrays, offsets, shifts, weights, expected, _ = case_a()
    result = np.full(expected.shape, 0.5, dtype=dtype)
    for k in range(1, 4):
        out, off = sciproxy.parstack(arrays, offsets, shifts, weights, 0, result=result, dtype=dtype, impl=impl)
        assert out is result and off == 0
        np.testing.assert_array_equal(result, 0.5 + k * expected)

    # A flat result, as pyrocko accepts: added into and returned as a 2-D view of it.
    flat = np.zeros(expected.size, dtype=dtype)
    out, _ = sciproxy.parstack(arrays, offsets, shifts, weights, 0, result=flat, dtype=dtype, impl=impl)
    assert out.shape == expected.shape and np.shares_memory(out, flat)
    np.testing.assert_array_equal(flat, expected.ravel())

    # With a given window too.
    window = np.ones((2, 3), dtype=dtype)
    out, off = sciproxy.parstack(arrays, offsets, shifts, weights, 0, lengthout=3, offsetout=2,
                                 result=window, dtype=dtype, impl=impl)
    assert out is window and off == 2
    np.testing.assert_array_equal(window, 1 + expected[:, 2:5])


@pytest.mark.parametrize("impl", ["reference", "cpu"])
def test_method1_true_maximum_and_clamp(impl):
    # One trace, fully covering the window in both shift sets: every stacked value is negative.
    arrays = [np.array([-3.0, -1.0, -2.0])]
    offsets = np.array([4], dtype=np.int32)
    shifts = np.array([[0], [0]], dtype=np.int32)
    weights = np.array([[1.0], [2.0]])
    maxima, off = sciproxy.parstack(arrays, offsets, shifts, weights, 1, impl=impl)
    assert off == 4
    np.testing.assert_array_equal(maxima, [-1.0, -2.0])  # the true maximum (pyrocko's numpy path)
    clamped, _ = sciproxy.parstack(arrays, offsets, shifts, weights, 1, impl=impl, clamp_max_at_zero=True)
    np.testing.assert_array_equal(clamped, [0.0, 0.0])  # pyrocko's C path
    # Positive maxima are unaffected by the clamp.
    positive, _ = sciproxy.parstack([-arrays[0]], offsets, shifts, weights, 1, impl=impl, clamp_max_at_zero=True)
    np.testing.assert_array_equal(positive, [3.0, 6.0])

    # A given result is overwritten, not added to.
    result = np.full(2, 100.0)
    out, _ = sciproxy.parstack(arrays, offsets, shifts, weights, 1, result=result, impl=impl)
    assert out is result
    np.testing.assert_array_equal(result, [-1.0, -2.0])


@pytest.mark.parametrize("impl", ["reference", "cpu"])
def test_zero_weights(impl):
    arrays, offsets, shifts, _, _, first = case_b()
    weights = np.zeros((2, 2))
    out, off = sciproxy.parstack(arrays, offsets, shifts, weights, 0, impl=impl)
    assert off == first and out.shape == (2, 8)  # the window still covers every trace
    assert not out.any()
    # A huge trace with weight 0 contributes nothing, not even rounding.
    arrays = [np.array([1.0, 2.0]), np.array([1e300, -1e300])]
    out, _ = sciproxy.parstack(arrays, np.array([0, 0], dtype=np.int32), np.zeros((1, 2), dtype=np.int32),
                               np.array([[1.0, 0.0]]), 0, impl=impl)
    np.testing.assert_array_equal(out, [[1.0, 2.0]])


@pytest.mark.parametrize("impl", ["reference", "cpu"])
def test_inputs_cast_like_pyrocko(impl):
    """Integer traces, traces of mixed dtypes, lists, a 2-D array of traces, any integer index
    dtype whose values fit in int32, non-contiguous traces: all give the same stack."""
    arrays, offsets, shifts, weights, expected, first = case_a()
    variants = [
        ([a.astype(np.int64) for a in arrays], offsets, shifts, weights),
        ([arrays[0].astype(np.float32), arrays[1]], offsets, shifts, weights),
        ([list(a) for a in arrays], list(offsets), shifts.tolist(), weights.tolist()),
        ([np.stack([arrays[0], arrays[0]], axis=1)[:, 0], arrays[1]], offsets.astype(np.int64),
         shifts.astype(np.int16), weights.astype(np.float32)),
        ([np.repeat(arrays[0], 2)[::2], arrays[1]], offsets.astype(np.uint8), shifts.astype(np.int64), weights),
    ]
    for a, o, s, w in variants:
        out, off = sciproxy.parstack(a, o, s, w, 0, impl=impl)
        assert off == first and out.dtype == np.float64
        np.testing.assert_array_equal(out, expected)

    two_d = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    out, off = sciproxy.parstack(two_d, np.array([0, 1], dtype=np.int32), np.zeros((1, 2), dtype=np.int32),
                                 np.ones((1, 2)), 0, impl=impl)
    assert off == 0
    np.testing.assert_array_equal(out, [[1.0, 6.0, 8.0, 6.0]])


def test_float32_weights_decide_nothing_dtype_does():
    arrays, offsets, shifts, weights, expected, _ = case_a()
    out, _ = sciproxy.parstack(arrays, offsets, shifts, weights.astype(np.float32), 0)
    assert out.dtype == np.float64  # like pyrocko: dtype (default float64) decides
    out, _ = sciproxy.parstack(arrays, offsets, shifts, weights, 0, dtype=np.float32)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_argmax_by_hand(dtype):
    a = np.array([[1, 5, -3], [3, 2, -1], [3, -1, -2]], dtype=dtype)
    np.testing.assert_array_equal(sciproxy.argmax(a), [1, 0, 1])  # first maximum wins
    assert sciproxy.argmax(a).dtype == np.uint32
    # pyrocko's quirk: a column of values <= 0 gives 0.
    np.testing.assert_array_equal(sciproxy.argmax(a, pyrocko_compat=True), [1, 0, 0])
    # Non-contiguous input is copied, not rejected.
    np.testing.assert_array_equal(sciproxy.argmax(np.asfortranarray(a)), [1, 0, 1])
    np.testing.assert_array_equal(sciproxy.argmax(a[:, ::2]), [1, 1])


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_argmax_nan_and_inf_like_numpy(dtype):
    nan, inf = np.nan, np.inf
    # Columns: NaN last, NaN first, all NaN, inf then NaN, -inf only, NaN between equal maxima,
    # inf, -inf below numbers.
    a = np.array([[1, nan, nan, inf, -inf, 2, 1, -inf],
                  [2, 3, nan, nan, -inf, nan, inf, -1],
                  [nan, 5, nan, 1, -inf, 2, inf, -2]], dtype=dtype)
    for nparallel in (None, 1, 2):
        got = sciproxy.argmax(a, nparallel=nparallel)
        np.testing.assert_array_equal(got, np.argmax(a, axis=0))
        np.testing.assert_array_equal(sciproxy.argmax(a[:, ::-1], nparallel=nparallel),
                                      np.argmax(a[:, ::-1], axis=0))
    # pyrocko_compat: pyrocko's C code compares with '>' from DBL_MIN, so NaN never wins.
    np.testing.assert_array_equal(sciproxy.argmax(a, pyrocko_compat=True), [1, 2, 0, 0, 0, 0, 1, 0])
    # Wide arrays cross the cpu backend's blocks of columns; random NaN against numpy.
    rng = np.random.default_rng(3)
    b = rng.normal(size=(5, 700)).astype(dtype)
    b[rng.random(b.shape) < 0.1] = nan
    b[rng.random(b.shape) < 0.05] = inf
    b[:, 10] = nan
    np.testing.assert_array_equal(sciproxy.argmax(b, nparallel=2), np.argmax(b, axis=0))


@pytest.mark.parametrize("method", [0, 1])
def test_autotune_changes_no_bit(method, tmp_path, monkeypatch):
    # The autotuner times the cpu backend's chunk sizes on this problem and caches its choice
    # (in SCIPROXY_CACHE_DIR); the sum's order does not depend on the chunk, so neither does
    # the result. Shifts spread like moveouts: traces start and stop inside the window.
    monkeypatch.setenv("SCIPROXY_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(5)
    arrays = [rng.normal(size=int(n)).astype(np.float32) for n in rng.integers(500, 3000, size=12)]
    offsets = np.zeros(12, dtype=np.int32)
    shifts = rng.integers(-2000, 2000, size=(40, 12)).astype(np.int32)
    weights = rng.uniform(0.5, 1.0, size=(40, 12))
    plain, _ = sciproxy.parstack(arrays, offsets, shifts, weights, method, dtype=np.float32, impl="cpu")
    tuned, _ = sciproxy.parstack(arrays, offsets, shifts, weights, method, dtype=np.float32, impl="cpu",
                                 autotune=True)
    np.testing.assert_array_equal(tuned, plain)
    assert (tmp_path / "autotune.json").is_file()
    again, _ = sciproxy.parstack(arrays, offsets, shifts, weights, method, dtype=np.float32, impl="cpu",
                                 autotune=True)  # the cached choice
    np.testing.assert_array_equal(again, plain)
    reference, _ = sciproxy.parstack(arrays, offsets, shifts, weights, method, dtype=np.float32,
                                     impl="reference")
    np.testing.assert_allclose(tuned, reference, rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="^autotune: expected True or False, got"):
        sciproxy.parstack(arrays, offsets, shifts, weights, method, autotune="yes")
