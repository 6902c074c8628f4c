"""Bounded resources from Python: thread counts above the stated maximum are a ValueError, counts
above the cores are capped (and give the same numbers), and calls that would need more memory
than the process may allocate are a MemoryError before anything is allocated, in every family."""

import re

import numpy as np
import pytest
import sciproxy
import sciproxy.tti as tti
import sciproxy.tti_demo as td
import sciproxy.wave as sw

MAX_THREADS = sciproxy._sciproxy.MAX_THREADS  # sciproxy::kMaxThreads


def parstack_args(nshifts=3):
    arrays = [np.linspace(0.0, 1.0, 50), np.linspace(1.0, 0.0, 40)]
    offsets = np.array([0, 3], dtype=np.int32)
    shifts = np.arange(2 * nshifts, dtype=np.int32).reshape(nshifts, 2)
    weights = np.ones((nshifts, 2))
    return arrays, offsets, shifts, weights


def wave_problem(nt=30):
    v = np.full((16, 18), 1500.0)
    amps = np.zeros((1, 1, nt))
    amps[0, 0, 2] = 1.0
    return dict(v=v, grid_spacing=5.0, dt=0.001, source_amplitudes=amps,
                source_locations=np.array([[[8, 9]]]), receiver_locations=np.array([[[4, 4]]]),
                pml_width=4, pml_freq=25.0, device="cpu")


@pytest.mark.parametrize("nparallel", [-1, MAX_THREADS + 1, 100000, 2**31 - 1])
def test_thread_counts_above_the_maximum_are_refused_everywhere(nparallel):
    expected = re.escape(f"nparallel: expected a thread count from 1 to {MAX_THREADS}")
    arrays, offsets, shifts, weights = parstack_args()
    with pytest.raises(ValueError, match=expected):
        sciproxy.parstack(arrays, offsets, shifts, weights, 0, impl="cpu", nparallel=nparallel)
    with pytest.raises(ValueError, match=expected):
        sw.scalar(**wave_problem(), nparallel=nparallel)


def test_thread_counts_above_the_cores_are_capped_not_fatal():
    # 1000 threads once ended the process inside the OpenMP runtime.
    arrays, offsets, shifts, weights = parstack_args()
    one, _ = sciproxy.parstack(arrays, offsets, shifts, weights, 0, impl="cpu", nparallel=1)
    many, _ = sciproxy.parstack(arrays, offsets, shifts, weights, 0, impl="cpu", nparallel=1000)
    np.testing.assert_array_equal(one, many)
    a = sw.scalar(**wave_problem(), nparallel=1)
    b = sw.scalar(**wave_problem(), nparallel=MAX_THREADS)
    np.testing.assert_allclose(a[-1], b[-1], rtol=0, atol=1e-12 * np.abs(a[-1]).max())


def test_parstack_result_beyond_memory_is_a_memory_error():
    arrays, offsets, shifts, weights = parstack_args(nshifts=1000)
    with pytest.raises(MemoryError, match=r"lengthout, shifts: .* needs about .* of host memory"):
        sciproxy.parstack(arrays, offsets, shifts, weights, 0, lengthout=2**40, impl="cpu")


def test_gradient_storage_beyond_memory_is_a_memory_error_with_a_hint():
    # A tiny model and a very long run: every stored step of the gradient would not fit.
    p = wave_problem(nt=20_000_000)
    del p["source_amplitudes"]
    p["source_locations"] = None
    with pytest.raises(MemoryError, match=r"v, pml_width, nt, nshots, storage_mode: .*storage_mode 'disk'"):
        sw.scalar_gradient(**p, nt=20_000_000, grad_receiver_amplitudes=np.zeros((1, 1, 20_000_000)))


def test_tti_demo_beyond_memory_is_a_memory_error():
    with pytest.raises(MemoryError, match=r"shape: the TTI demo on 20000 x 20000 x 20000"):
        td.tti_demo((20000, 20000, 20000), 10.0, 1e-4, vp=1500.0, b=1.0, epsilon=0.2, eta=0.4,
                    f=0.85, theta=0.5, phi=0.3, source_position=(10.0, 10.0, 10.0),
                    source_amplitudes=np.zeros(1, np.float32), device="cpu")


def test_library_and_python_agree_on_the_thread_maximum():
    from sciproxy import _args
    assert _args.MAX_THREADS == MAX_THREADS


def test_tti_beyond_memory_is_a_memory_error():
    # A million shots without sources or receivers: empty arrays, but a state per shot.
    nshots = 1_000_000
    vp = np.full((10, 10, 10), 1500.0, np.float32)
    with pytest.raises(MemoryError, match=r"vp, nt, nshots: a TTI run on a model"):
        tti.tti(vp, 10.0, 1e-3, source_amplitudes=np.zeros((nshots, 0, 5), np.float32),
                source_locations=np.zeros((nshots, 0, 3), np.int64),
                receiver_locations=np.zeros((nshots, 0, 3), np.int64), device="cpu")


def test_a_pml_wider_than_memory_is_a_memory_error_naming_it():
    with pytest.raises(MemoryError, match=r"^v, pml_width, nt, nshots: .*\(padded to 2000020 x"):
        sw.scalar(**dict(wave_problem(), pml_width=10**6))
