"""sciproxy against pyrocko.parstack (the system it replaces) on the random problems of
test_backends.py: both of pyrocko's implementations, both dtypes, both methods."""

import numpy as np
import pytest
import sciproxy

from problems import NPROBLEMS_DEFAULT, random_problem, rel_l2, run, tolerance

pyrocko_parstack = pytest.importorskip(
    "pyrocko.parstack",
    reason="pyrocko is not installed (pip install sciproxy[compare]); side-by-side tests skipped",
)

DTYPES = [np.float32, np.float64]
NPROBLEMS = NPROBLEMS_DEFAULT


def pyrocko_run(p, method, dtype, impl):
    """pyrocko.parstack.parstack on problem p, accumulating like sciproxy does.

    pyrocko's numpy path ignores `result` (it always starts from zeros and returns float64), so
    accumulation is added here for it; its C path adds into `result` (which must be flat)."""
    result = p.result_for(method, dtype)
    if result is not None:
        result = result.reshape(-1).copy()
    out, offsetout = pyrocko_parstack.parstack(
        [a for a in p.arrays], p.offsets, p.shifts, p.weights, method,
        lengthout=p.lengthout, offsetout=p.offsetout, result=result, nparallel=2,
        dtype=dtype, impl=impl,
    )
    if impl == "numpy" and method == 0 and result is not None:
        out = out + result.reshape(out.shape)
    return out, offsetout


@pytest.mark.parametrize("method", [0, 1])
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("pyrocko_impl", ["openmp", "numpy"])
@pytest.mark.parametrize("ours", ["cpu", "reference"])
def test_parstack_matches_pyrocko(ours, pyrocko_impl, dtype, method):
    # pyrocko's C path clamps method 1's maximum at 0; its numpy path returns the true maximum.
    clamp = pyrocko_impl == "openmp"
    tol = tolerance(dtype)
    failures = []
    for seed in range(NPROBLEMS):
        p = random_problem(seed)
        expected, expected_off = pyrocko_run(p, method, dtype, pyrocko_impl)
        out, off, _ = run(p, method, dtype, ours, nparallel=2, clamp=clamp)
        if off != expected_off:
            failures.append(f"{p.describe()}: offsetout {off} != pyrocko's {expected_off}")
            continue
        expected = np.asarray(expected)
        if expected.size == out.size:
            expected = expected.reshape(out.shape)  # else rel_l2 reports the shape mismatch
        err = rel_l2(out, expected)
        if not err <= tol:
            failures.append(f"{p.describe()}: relative L2 error {err:.3g} > {tol:g}")
    assert not failures, f"{len(failures)} of {NPROBLEMS} problems failed:\n" + "\n".join(failures[:20])


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_argmax_matches_pyrocko_and_numpy(dtype):
    rng = np.random.default_rng(1)
    for seed in range(50):
        rows, cols = int(rng.integers(1, 200)), int(rng.integers(1, 300))
        a = rng.normal(size=(rows, cols)).astype(dtype)
        negative = rng.random(cols) < 0.2  # columns with values <= 0 only: pyrocko's quirk
        a[:, negative] = -np.abs(a[:, negative])
        if rows > 3:
            a[rows // 2, :] = a[rows // 3, :]  # ties: the first maximum wins
        np.testing.assert_array_equal(sciproxy.argmax(a, nparallel=2, pyrocko_compat=True),
                                      pyrocko_parstack.argmax(a, nparallel=2), err_msg=f"seed {seed}")
        ours = sciproxy.argmax(a, nparallel=2)
        assert ours.dtype == np.uint32
        np.testing.assert_array_equal(ours, np.argmax(a, axis=0), err_msg=f"seed {seed}")
