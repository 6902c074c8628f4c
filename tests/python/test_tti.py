"""sciproxy.tti from Python: the exact adjoint (dot-product test in float64, 1e-10 relative;
measured about 1e-15), float32 against float64, the backends against each other, and the
checks of bad input (ValueError for values and shapes, TypeError for types and dtypes)."""

import numpy as np
import pytest
import sciproxy

from sciproxy.tti import tti, tti_adjoint, tti_max_dt


def _problem(dtype=np.float64, seed=0, shape=(11, 12, 13)):
    rng = np.random.default_rng(seed)
    eps = 0.25 * rng.random(shape)
    model = dict(
        buoyancy=(0.4 + 0.6 * rng.random(shape)).astype(dtype),
        epsilon=eps.astype(dtype),
        delta=(eps - 0.2 * rng.random(shape)).astype(dtype),
        theta=(np.pi * rng.random(shape)).astype(dtype),
        phi=(2 * np.pi * rng.random(shape)).astype(dtype),
        f=(0.6 + 0.35 * rng.random(shape)).astype(dtype),
    )
    vp = (1500 + 1000 * rng.random(shape)).astype(dtype)
    src = np.array([[[0, 5, 6], [4, 4, 4]], [[7, 8, 9], [3, 10, 2]]], np.int64)
    rec = np.array([[[0, 1, 1], [6, 7, 8], [10, 11, 12]], [[2, 2, 2], [9, 3, 11], [5, 5, 0]]],
                   np.int64)
    options = dict(sponge_width=[3, 4, 2, 3, 4, 2], free_surface=True, q_min=0.5, freq_q=20.0)
    dt = 0.9 * tti_max_dt(vp, [10.0, 12.0, 11.0], epsilon=model["epsilon"],
                          sponge_width=options["sponge_width"], q_min=0.5, freq_q=20.0,
                          free_surface=True)
    return vp, dt, src, rec, model, options


def test_dot_product_float64():
    vp, dt, src, rec, model, options = _problem()
    nt = 33
    rng = np.random.default_rng(1)
    amps = rng.standard_normal((2, 2, nt))
    data = rng.standard_normal((2, 3, nt))
    forward = tti(vp, [10.0, 12.0, 11.0], dt, amps, src, rec, device="cpu", **model, **options)
    adjoint = tti_adjoint(vp, [10.0, 12.0, 11.0], dt, data, src, rec, device="cpu", **model,
                          **options)
    assert forward.shape == (2, 3, nt) and adjoint.shape == (2, 2, nt)
    lhs, rhs = np.vdot(forward, data), np.vdot(amps, adjoint)
    assert abs(lhs) > 0
    assert abs(lhs - rhs) <= 1e-10 * abs(lhs), (lhs, rhs)
    # Receivers on the free surface record zero pressure.
    assert np.all(forward[0, 0] == 0) and np.any(forward[0, 1] != 0)


def test_float32_and_backends_agree():
    vp, dt, src, rec, model, options = _problem()
    amps = np.random.default_rng(2).standard_normal((2, 2, 25))
    ref = tti(vp, [10.0, 12.0, 11.0], dt, amps, src, rec, device="reference", **model, **options)
    cpu = tti(vp, [10.0, 12.0, 11.0], dt, amps, src, rec, device="cpu", **model, **options)
    tol = sciproxy.tolerance("tti_forward", np.float64, "receiver_amplitudes")
    assert np.linalg.norm(cpu - ref) <= tol * np.linalg.norm(ref)
    model32 = {k: v.astype(np.float32) for k, v in model.items()}
    out32 = tti(vp.astype(np.float32), [10.0, 12.0, 11.0], dt, amps.astype(np.float32), src, rec,
                device="cpu", **model32, **options)
    assert out32.dtype == np.float32
    # Float32 rounding of the model and of 25 steps: 1e-4.
    assert np.linalg.norm(out32 - ref) <= 1e-4 * np.linalg.norm(ref)


def test_scalar_f_and_defaults():
    vp = np.full((10, 10, 10), 2000.0)
    amps = np.ones((1, 1, 5))
    loc = np.array([[[5, 5, 5]]])
    dt = 0.5 * tti_max_dt(vp, 10.0, sponge_width=2)
    a = tti(vp, 10.0, dt, amps, loc, loc, f=0.85, sponge_width=2, device="cpu")
    b = tti(vp, 10.0, dt, amps, loc, loc, sponge_width=2, device="cpu")
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "change, error, needle",
    [
        (dict(vp=lambda p: np.full((3, 10, 10), 2000.0)), ValueError, "vp: expected at least space_order/2 = 4 cells along axis 0"),
        (dict(vp=lambda p: np.full((10, 10), 2000.0)), ValueError, "vp"),
        (dict(vp=lambda p: np.where(np.arange(1000).reshape(10, 10, 10) == 7, -1.0, p)),
         ValueError, "vp"),
        (dict(vp=lambda p: np.where(np.arange(1000).reshape(10, 10, 10) == 7, np.nan, p)),
         ValueError, "vp"),
        (dict(vp=lambda p: p.astype(np.int64)), TypeError, "vp"),
        (dict(grid_spacing=0.0), ValueError, "grid_spacing"),
        (dict(dt=1.0), ValueError, "stability limit"),
        (dict(epsilon=np.full((10, 10, 10), 0.0), delta=np.full((10, 10, 10), 0.1)), ValueError,
         "eta^2"),
        (dict(epsilon=np.full((10, 10, 10), np.nan)), ValueError, "epsilon"),
        (dict(epsilon=np.zeros((10, 10, 10), np.float32)), TypeError, "epsilon"),
        (dict(source_locations=np.array([[[5, 5, 10]]])), ValueError, "source_locations"),
        (dict(source_locations=np.array([[[5.0, 5.0, 5.0]]])), TypeError, "source_locations"),
        (dict(space_order=6), ValueError, "space_order"),
        (dict(q_min=0.0), ValueError, "q_min"),
        (dict(sponge_width=-1), ValueError, "sponge_width"),
        (dict(device="gpu"), ValueError, "device"),
    ],
)
def test_bad_input(change, error, needle):
    vp = np.full((10, 10, 10), 2000.0)
    args = dict(vp=vp, grid_spacing=10.0, dt=0.5 * tti_max_dt(vp, 10.0, sponge_width=2),
                source_amplitudes=np.ones((1, 1, 4)), source_locations=np.array([[[5, 5, 5]]]),
                receiver_locations=np.array([[[1, 1, 1]]]), sponge_width=2, device="cpu")
    for key, value in change.items():
        args[key] = value(vp) if callable(value) else value
    with pytest.raises(error) as info:
        tti(**args)
    assert needle in str(info.value)
