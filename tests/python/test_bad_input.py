"""Bad input gives a clear exception naming the argument, never a crash or a silent guess."""

import re

import numpy as np
import pytest
import sciproxy


def good():
    arrays = [np.arange(1.0, 6.0), np.arange(1.0, 4.0)]
    offsets = np.array([0, 2], dtype=np.int32)
    shifts = np.array([[0, 0], [1, -1]], dtype=np.int32)
    weights = np.ones((2, 2))
    return dict(arrays=arrays, offsets=offsets, shifts=shifts, weights=weights)


def call(**changes):
    kwargs = dict(good(), method=0, impl="cpu")
    kwargs.update(changes)
    return sciproxy.parstack(**kwargs)


def raises(exception, argument):
    """pytest.raises for a message that starts by naming `argument` (or has it as a word)."""
    return pytest.raises(exception, match=rf"(^|\W){re.escape(argument)}(\W|$)")


def test_good_call_works():
    out, off = call()
    assert out.shape == (2, 6) and off == 0


@pytest.mark.parametrize(
    "arrays, exception, argument",
    [
        (5, TypeError, "arrays"),
        ("abc", TypeError, "arrays"),
        ({0: np.zeros(3)}, TypeError, "arrays"),
        (np.zeros(5), ValueError, "arrays"),  # one trace passed instead of a list of traces
        (np.zeros((2, 2, 2)), ValueError, "arrays"),
        ([np.zeros((2, 3)), np.zeros(3)], ValueError, "arrays[0]"),
        ([np.zeros(3), np.array(["a", "b"])], TypeError, "arrays[1]"),
        ([np.zeros(3), np.array([1 + 2j])], TypeError, "arrays[1]"),
        ([np.zeros(3), None], TypeError, "arrays[1]"),
        ([np.zeros(3), np.array([1.0, np.nan])], ValueError, "arrays[1]"),
        ([np.zeros(3), np.array([np.inf])], ValueError, "arrays[1]"),
    ],
)
def test_bad_arrays(arrays, exception, argument):
    with raises(exception, argument):
        call(arrays=arrays, offsets=np.zeros(2, dtype=np.int32),
             shifts=np.zeros((1, 2), dtype=np.int32), weights=np.ones((1, 2)))


def test_empty_arrays():
    with raises(ValueError, "arrays"):
        call(arrays=[], offsets=np.zeros(0, dtype=np.int32), shifts=np.zeros((1, 0), dtype=np.int32),
             weights=np.ones((1, 0)))


def test_only_empty_traces():
    with raises(ValueError, "arrays"):
        call(arrays=[np.zeros(0), np.zeros(0)], offsets=np.zeros(2, dtype=np.int32),
             shifts=np.zeros((2, 2), dtype=np.int32))


def test_traces_and_offsets_of_different_counts():
    with raises(ValueError, "offsets"):
        call(offsets=np.array([0, 1, 2], dtype=np.int32))
    with raises(ValueError, "offsets"):
        call(offsets=np.array([[0, 1]], dtype=np.int32))
    with raises(ValueError, "offsets"):
        call(offsets=np.int32(0))


@pytest.mark.parametrize(
    "offsets, exception",
    [
        (np.array([0.0, 1.0]), TypeError),  # floats are not indices
        (np.array([True, False]), TypeError),
        (np.array(["0", "1"]), TypeError),
        (np.array([0, 2**31], dtype=np.int64), ValueError),  # does not fit in int32
        (np.array([0, -(2**31) - 1], dtype=np.int64), ValueError),
        (np.array([0, 2**63], dtype=np.uint64), ValueError),
    ],
)
def test_bad_offsets(offsets, exception):
    with raises(exception, "offsets"):
        call(offsets=offsets)


@pytest.mark.parametrize(
    "shifts, exception",
    [
        (np.array([0, 0], dtype=np.int32), ValueError),  # 1-D: not (nshifts, ntraces)
        (np.zeros((2, 3), dtype=np.int32), ValueError),  # a column too many
        (np.zeros((2, 1), dtype=np.int32), ValueError),
        (np.zeros((0, 2), dtype=np.int32), ValueError),  # no shift set
        (np.zeros((1, 2, 1), dtype=np.int32), ValueError),
        (np.array([[0.0, 0.0], [1.0, -1.0]]), TypeError),  # floats: never truncated silently
        (np.array([[0.5, 0.0], [1.0, -1.0]], dtype=np.float32), TypeError),
        (np.array([[0, 0], [1, 2**31]], dtype=np.int64), ValueError),
    ],
)
def test_bad_shifts(shifts, exception):
    weights = np.ones(shifts.shape) if shifts.ndim == 2 and shifts.shape[1] == 2 else np.ones((2, 2))
    with raises(exception, "shifts"):
        call(shifts=shifts, weights=weights)


def test_float_shifts_message_says_how_to_convert():
    with pytest.raises(TypeError, match=r"shifts: expected integers.*float64.*astype\(numpy\.int32\)"):
        call(shifts=np.array([[0.0, 0.0], [1.0, -1.0]]))


@pytest.mark.parametrize(
    "weights, exception",
    [
        (np.ones((2, 3)), ValueError),
        (np.ones(4), ValueError),
        (np.ones((1, 2)), ValueError),
        (np.ones((2, 2), dtype=complex), TypeError),
        (np.array([["a", "b"], ["c", "d"]]), TypeError),
        (np.array([[1.0, np.nan], [1.0, 1.0]]), ValueError),
        (np.array([[1.0, 1.0], [np.inf, 1.0]]), ValueError),
        (np.array([[1.0, 1.0], [1.0, -np.inf]]), ValueError),
    ],
)
def test_bad_weights(weights, exception):
    with raises(exception, "weights"):
        call(weights=weights)


def test_weights_that_overflow_float32_are_not_finite():
    with raises(ValueError, "weights"):
        call(weights=np.full((2, 2), 1e300), dtype=np.float32)


@pytest.mark.parametrize(
    "result, exception",
    [
        (np.zeros((2, 6), dtype=np.float32), TypeError),  # dtype is float64 by default
        (np.zeros((2, 6), dtype=np.int64), TypeError),
        ([[0.0] * 6] * 2, TypeError),  # not an array: cannot be written in place
        (np.zeros((6, 2)).T, ValueError),  # not C-contiguous
        (np.zeros((2, 12))[:, ::2], ValueError),
        (np.zeros((2, 5)), ValueError),  # wrong shape
        (np.zeros((3, 6)), ValueError),
        (np.zeros(11), ValueError),  # flat, wrong size
        (np.zeros((1, 2, 6)), ValueError),
    ],
)
def test_bad_result_method0(result, exception):
    with raises(exception, "result"):
        call(result=result)


def test_result_size_message_says_what_came():
    with pytest.raises(ValueError, match=r"^result: expected .*12 elements, got float64 array of shape \(11,\)"):
        call(result=np.zeros(11))


def test_bad_result_with_given_window():
    with raises(ValueError, "result"):
        call(result=np.zeros((2, 6)), lengthout=5)
    with raises(ValueError, "result"):
        call(result=np.zeros(12), lengthout=5)


def test_read_only_result():
    result = np.zeros((2, 6))
    result.flags.writeable = False
    with raises(ValueError, "result"):
        call(result=result)


def test_mixed_dtype_result_float32():
    with raises(TypeError, "result"):
        call(result=np.zeros((2, 6), dtype=np.float64), dtype=np.float32)


@pytest.mark.parametrize("result", [np.zeros(3), np.zeros((2, 1)), np.zeros(2, dtype=np.float32)])
def test_bad_result_method1(result):
    with pytest.raises((ValueError, TypeError), match=r"^result"):
        call(result=result, method=1)


def test_lengthout():
    with raises(ValueError, "lengthout"):
        call(lengthout=0)
    with raises(TypeError, "lengthout"):
        call(lengthout=1.5)
    with raises(TypeError, "lengthout"):
        call(lengthout="5")
    out, off = call(lengthout=-7)  # any negative length: the default window
    assert out.shape == (2, 6) and off == 0


def test_offsetout():
    with raises(ValueError, "offsetout"):
        call(offsetout=2**31, lengthout=3)
    with raises(TypeError, "offsetout"):
        call(offsetout=0.5, lengthout=3)


def test_window_start_overflow():
    with raises(ValueError, "offsets + shifts"):
        call(arrays=[np.ones(3)], offsets=np.array([2**31 - 1], dtype=np.int32),
             shifts=np.array([[5]], dtype=np.int32), weights=np.ones((1, 1)))


@pytest.mark.parametrize("method", [2, -1, True, 0.0, "0", None])
def test_bad_method(method):
    exception = ValueError if isinstance(method, int) and not isinstance(method, bool) else TypeError
    with raises(exception, "method"):
        call(method=method)


@pytest.mark.parametrize("impl", ["gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", "", "openmp "])
def test_unknown_impl(impl):
    with pytest.raises(ValueError, match=r"impl.*'auto', 'reference', 'cpu', 'cuda', 'cuda:N'") as error:
        call(impl=impl)
    assert repr(impl) in str(error.value)


@pytest.mark.parametrize("impl", [None, 0, np.float64])
def test_impl_not_a_string(impl):
    with raises(TypeError, "impl"):
        call(impl=impl)


def test_cuda_unavailable_is_an_error_not_a_fallback():
    info = sciproxy.info()
    if info["cuda_device_count"] > 0:
        pytest.skip("a CUDA device is present")
    with pytest.raises(RuntimeError, match=r"cuda"):
        call(impl="cuda")
    with pytest.raises(RuntimeError, match=r"cuda"):
        call(impl="cuda:3")
    with pytest.raises(RuntimeError, match=r"cuda"):
        sciproxy.resolve_impl("cuda")
    assert sciproxy.resolve_impl("auto") == "cpu"


@pytest.mark.parametrize("nparallel, exception", [(0, ValueError), (-1, ValueError), (1.5, TypeError),
                                                  (True, TypeError), ("2", TypeError)])
def test_bad_nparallel(nparallel, exception):
    with raises(exception, "nparallel"):
        call(nparallel=nparallel)
    with raises(exception, "nparallel"):
        sciproxy.argmax(np.ones((2, 2)), nparallel=nparallel)


@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.complex128, "float", "nonsense"])
def test_bad_dtype(dtype):
    if dtype == "float":  # numpy's name for float64: accepted
        call(dtype=dtype)
        return
    with raises(TypeError, "dtype"):
        call(dtype=dtype)


def test_bad_clamp():
    with raises(TypeError, "clamp_max_at_zero"):
        call(method=1, clamp_max_at_zero="yes")


@pytest.mark.parametrize(
    "a, exception",
    [
        (np.ones(3), ValueError),
        (np.ones((2, 2, 2)), ValueError),
        (np.ones((2, 2), dtype=np.int32), TypeError),
        (np.ones((2, 2), dtype=np.float16), TypeError),
        (np.ones((0, 3)), ValueError),
        (np.ones((3, 0)), ValueError),
        ("abc", TypeError),
    ],
)
def test_bad_argmax(a, exception):
    with raises(exception, "a"):
        sciproxy.argmax(a)


def test_non_contiguous_inputs_are_copied_not_rejected():
    """pyrocko rejects non-contiguous traces; sciproxy copies its inputs (never `result`)."""
    ref, off = call()
    g = good()
    arrays = [np.repeat(a, 3)[::3] for a in g["arrays"]]
    offsets = np.repeat(g["offsets"], 2)[::2]
    shifts = np.asfortranarray(g["shifts"])
    weights = np.asfortranarray(g["weights"])
    assert not arrays[0].flags.c_contiguous and not shifts.flags.c_contiguous
    out, off2 = call(arrays=arrays, offsets=offsets, shifts=shifts, weights=weights)
    assert off2 == off
    np.testing.assert_array_equal(out, ref)
