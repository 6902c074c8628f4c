"""parstack's large results in kept memory (python/src/result_pool.hpp): a dropped stack's memory
serves the next call, every element of the reused memory is written, and memory still in use
(the array, or a view of it) is never handed out again."""

import os
import subprocess
import sys

import numpy as np
import pytest
import sciproxy

# 100 shift sets x 6000 samples of float64: 4.8 MB, above the 4 MB from which results are pooled.
NSHIFTS, NSAMPLES = 100, 6000


def problem(seed):
    rng = np.random.default_rng(seed)
    arrays = [rng.normal(size=NSAMPLES) for _ in range(3)]
    offsets = np.zeros(3, dtype=np.int32)
    shifts = rng.integers(-20, 21, size=(NSHIFTS, 3)).astype(np.int32)
    shifts[:, 0] = 0  # the window: [min shift, NSAMPLES + max shift) over all sets
    weights = rng.uniform(0.5, 1.5, size=(NSHIFTS, 3))
    weights[7] = 0.0  # a set without traces: its row is all zeros
    return arrays, offsets, shifts, weights


def stack(impl, seed):
    return sciproxy.parstack(*problem(seed), method=0, impl=impl)[0]


@pytest.fixture(autouse=True)
def empty_pool():
    sciproxy.stack.release_cached_results()
    yield
    sciproxy.stack.release_cached_results()


@pytest.mark.parametrize("impl", ["reference", "cpu"])
def test_a_dropped_result_is_reused_and_fully_written(impl):
    first = stack(impl, 1)
    assert first.nbytes >= 4 << 20
    address = first.ctypes.data
    first[...] = np.nan  # what the next call must overwrite, zeros included
    del first
    assert sciproxy._sciproxy.cached_result_bytes() >= NSHIFTS * (NSAMPLES + 40) * 8
    second = stack(impl, 2)
    assert second.ctypes.data == address
    assert sciproxy._sciproxy.cached_result_bytes() == 0
    expected = stack("reference", 2).copy()
    np.testing.assert_array_equal(second, expected)
    assert not second[7].any()


def test_memory_in_use_is_not_handed_out():
    first = stack("cpu", 1)
    kept = first.copy()
    view = first[10:20]
    address = first.ctypes.data
    del first  # the view still holds the block
    assert sciproxy._sciproxy.cached_result_bytes() == 0
    second = stack("cpu", 2)
    assert second.ctypes.data != address
    np.testing.assert_array_equal(view, kept[10:20])
    del view
    assert sciproxy._sciproxy.cached_result_bytes() > 0
    third = stack("cpu", 3)
    assert third.ctypes.data == address
    assert second.ctypes.data != third.ctypes.data


def test_release_frees_the_kept_memory():
    del_me = stack("cpu", 1)
    size = del_me.nbytes
    del del_me
    assert sciproxy.stack.release_cached_results() >= size
    assert sciproxy._sciproxy.cached_result_bytes() == 0
    assert sciproxy.stack.release_cached_results() == 0


def test_small_results_and_maxima_are_numpy_arrays():
    arrays, offsets, shifts, weights = problem(1)
    maxima = sciproxy.parstack(arrays, offsets, shifts, weights, method=1, impl="cpu")[0]
    assert maxima.flags.owndata
    small = sciproxy.parstack(arrays, offsets, shifts[:10], weights[:10], method=0, impl="cpu")[0]
    assert small.flags.owndata  # 10 x 6040 doubles: below the pooled size
    assert sciproxy._sciproxy.cached_result_bytes() == 0


def test_a_cap_of_zero_keeps_nothing():
    code = (
        "import numpy as np, sciproxy\n"
        "r = sciproxy.parstack([np.ones(6000)], np.zeros(1, np.int32), np.zeros((100, 1), np.int32),"
        " np.ones((100, 1)), impl='cpu')[0]\n"
        "assert r.nbytes >= 4 << 20\n"
        "del r\n"
        "print(sciproxy._sciproxy.cached_result_bytes())\n"
    )
    env = dict(os.environ, SCIPROXY_RESULT_CACHE_BYTES="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "0"
