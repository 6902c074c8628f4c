"""Every backend against the reference on random problems, and the reference against an
independent numpy evaluation of the definition (the Ginkgo model: the reference is the
definition of correct, every other backend is tested against it)."""

import numpy as np
import pytest
import sciproxy

from problems import NPROBLEMS_DEFAULT, oracle, random_problem, rel_l2, run, tolerance

NPROBLEMS = NPROBLEMS_DEFAULT
INFO = sciproxy.info()
DTYPES = [np.float32, np.float64]


def available(backend):
    """Skips, with the reason, when `backend` cannot run here."""
    if backend not in INFO["backends"]:
        pytest.skip(f"backend {backend!r} was not compiled into this build (built: {INFO['backends']})")
    if backend == "cuda" and INFO["cuda_device_count"] == 0:
        pytest.skip(f"no CUDA device: {INFO.get('cuda_unavailable_reason', 'none found')}")


# Every backend that was built, and cuda always (reported as skipped when absent).
BACKENDS = sorted((set(INFO["backends"]) | {"cuda"}) - {"reference"})


def check_all(check):
    """Runs check(problem) on NPROBLEMS problems and reports every failure at once."""
    failures = []
    for seed in range(NPROBLEMS):
        p = random_problem(seed)
        message = check(p)
        if message:
            failures.append(f"{p.describe()}: {message}")
    assert not failures, f"{len(failures)} of {NPROBLEMS} problems failed:\n" + "\n".join(failures[:20])


@pytest.mark.parametrize("method", [0, 1])
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_matches_reference(backend, dtype, method):
    available(backend)
    tol = tolerance(dtype)

    def check(p):
        ref, ref_off, _ = run(p, method, dtype, "reference")
        out, off, passed = run(p, method, dtype, backend, nparallel=2)
        if off != ref_off:
            return f"offsetout {off} != reference {ref_off}"
        if out.dtype != np.dtype(dtype) or out.shape != ref.shape:
            return f"got {out.dtype} {out.shape}, reference {ref.dtype} {ref.shape}"
        err = rel_l2(out, ref)
        if not err <= tol:
            return f"relative L2 error {err:.3g} > {tol:g}"
        if passed is not None and not np.shares_memory(out, passed):
            return "the result passed in was not the one returned"
        return None

    check_all(check)


@pytest.mark.parametrize("method", [0, 1])
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_reference_matches_numpy_oracle(dtype, method):
    tol = tolerance(dtype)

    def check(p):
        # The oracle works on the data as sciproxy sees it: cast to dtype.
        cast = random_problem(p.seed)
        cast.arrays = [a.astype(dtype).astype(np.float64) for a in p.arrays]
        cast.weights = p.weights.astype(dtype).astype(np.float64)
        expected, expected_off = oracle(cast, method, clamp=p.clamp)
        if method == 0:
            initial = p.result_for(0, dtype)
            if initial is not None:
                expected = initial.reshape(expected.shape).astype(np.float64) + expected
        out, off, _ = run(p, method, dtype, "reference")
        if off != expected_off:
            return f"offsetout {off} != {expected_off}"
        err = rel_l2(out, expected)
        return None if err <= tol else f"relative L2 error {err:.3g} > {tol:g}"

    check_all(check)


@pytest.mark.parametrize("backend", BACKENDS)
def test_accumulation_adds_k_stacks(backend):
    available(backend)
    p = random_problem(7)
    stack, _ = oracle(p, 0)
    result = np.zeros_like(stack)
    for _ in range(3):
        out, _ = sciproxy.parstack(p.arrays, p.offsets, p.shifts, p.weights, 0, result=result,
                                   impl=backend, **p.kwargs())
        assert out is result
    assert rel_l2(result, 3 * stack) <= 1e-12


def test_impl_auto_matches_cpu():
    p = random_problem(3)
    auto, off_auto = sciproxy.parstack(p.arrays, p.offsets, p.shifts, p.weights, 0, impl="auto")
    ref, off_ref = sciproxy.parstack(p.arrays, p.offsets, p.shifts, p.weights, 0, impl="reference")
    assert off_auto == off_ref
    assert rel_l2(auto, ref) <= 1e-12


@pytest.mark.parametrize("method", [0, 1])
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_nparallel_one_and_two_threads_agree(dtype, method):
    """The cpu backend gives the same numbers at 1 and 2 threads (each output sample is summed by
    one thread in trace order), on a problem big enough to be split between threads."""
    rng = np.random.default_rng(11)
    ntraces, nshifts = 20, 300
    arrays = [rng.normal(size=int(n)) for n in rng.integers(1000, 3000, size=ntraces)]
    offsets = rng.integers(-200, 200, size=ntraces).astype(np.int32)
    shifts = rng.integers(-300, 300, size=(nshifts, ntraces)).astype(np.int32)
    weights = rng.uniform(0.1, 1.0, size=(nshifts, ntraces))
    one, off1 = sciproxy.parstack(arrays, offsets, shifts, weights, method, nparallel=1, dtype=dtype, impl="cpu")
    two, off2 = sciproxy.parstack(arrays, offsets, shifts, weights, method, nparallel=2, dtype=dtype, impl="cpu")
    assert off1 == off2
    np.testing.assert_array_equal(one, two)
    a = rng.normal(size=(500, 700)).astype(dtype)
    np.testing.assert_array_equal(sciproxy.argmax(a, nparallel=1), sciproxy.argmax(a, nparallel=2))


def test_cuda_plan_allocates_once():
    """Repeated GPU calls on same-sized problems reuse the persistent plan's device buffers."""
    available("cuda")
    from sciproxy import _sciproxy

    p = random_problem(5)
    sciproxy.parstack(p.arrays, p.offsets, p.shifts, p.weights, 0, impl="cuda:0")
    before = _sciproxy.plan_counters(0)["device_allocations"]
    for _ in range(3):
        sciproxy.parstack(p.arrays, p.offsets, p.shifts, p.weights, 0, impl="cuda:0")
    assert _sciproxy.plan_counters(0)["device_allocations"] == before
