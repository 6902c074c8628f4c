"""sciproxy.wave.scalar_born / scalar_born_gradient from Python: the image is the adjoint of the
Born operator (dot product, float64, relative 1e-10), the image equals scalar_gradient's grad_v,
the source gradient's dot product, the scattered data against central finite differences of
scalar(), cpu against reference, and bad input naming the argument."""

import numpy as np
import pytest

import sciproxy.wave as sw


def problem(seed=0, nshots=2, shape=(16, 18), nt=40):
    rng = np.random.default_rng(seed)
    v = rng.uniform(1500, 2500, shape)
    scatter = 100 * rng.standard_normal(shape)
    amps = rng.standard_normal((nshots, 1, nt))
    src = np.stack([rng.integers(0, n, (nshots, 1)) for n in shape], -1)
    rec = np.stack([rng.integers(0, n, (nshots, 4)) for n in shape], -1)
    bg = np.stack([rng.integers(0, n, (nshots, 3)) for n in shape], -1)
    kw = dict(grid_spacing=5.0, dt=0.002, source_amplitudes=amps, source_locations=src,
              receiver_locations=rec, bg_receiver_locations=bg, pml_width=4, pml_freq=25.0,
              max_vel=2800.0)
    return v, scatter, kw


@pytest.mark.parametrize("device", ["reference", "cpu"])
def test_dot_products_and_image_is_scalar_gradient(device):
    v, scatter, kw = problem()
    out = sw.scalar_born(v, scatter, device=device, **kw)
    sc, bgdata = out[-1], out[-2]
    rng = np.random.default_rng(1)
    d, dbg = rng.standard_normal(sc.shape), rng.standard_normal(bgdata.shape)
    img, gsrc = sw.scalar_born_gradient(v, scatter, device=device, grad_receiver_amplitudes=d,
                                        grad_bg_receiver_amplitudes=dbg, **kw)
    lhs, rhs = np.vdot(sc, d), np.vdot(scatter, img)
    assert abs(lhs - rhs) <= 1e-10 * max(abs(lhs), abs(rhs))
    lhs = np.vdot(sc, d) + np.vdot(bgdata, dbg)
    rhs = np.vdot(kw["source_amplitudes"], gsrc)
    assert abs(lhs - rhs) <= 1e-10 * max(abs(lhs), abs(rhs))
    kw2 = {k: x for k, x in kw.items() if k != "bg_receiver_locations"}
    gv, _ = sw.scalar_gradient(v, device=device, grad_receiver_amplitudes=d, **kw2)
    assert np.linalg.norm(img - gv) <= 1e-12 * np.linalg.norm(gv)


def test_born_is_the_derivative_of_scalar():
    v, scatter, kw = problem(2)
    kw2 = {k: x for k, x in kw.items() if k != "bg_receiver_locations"}
    born = sw.scalar_born(v, scatter, device="cpu", **kw)[-1]
    eps = 1e-6 * 2000 / 100
    plus = sw.scalar(v + eps * scatter, device="cpu", **kw2)[-1]
    minus = sw.scalar(v - eps * scatter, device="cpu", **kw2)[-1]
    fd = (plus - minus) / (2 * eps)
    assert np.linalg.norm(born - fd) <= 1e-7 * np.linalg.norm(fd)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-11), (np.float32, 2e-4)])
def test_cpu_matches_reference(dtype, tol):
    v, scatter, kw = problem(3)
    kw["source_amplitudes"] = kw["source_amplitudes"].astype(dtype)
    a = sw.scalar_born(v.astype(dtype), scatter.astype(dtype), device="reference", **kw)
    b = sw.scalar_born(v.astype(dtype), scatter.astype(dtype), device="cpu", **kw)
    assert a[-1].dtype == dtype
    for x, y in zip(a, b):
        assert np.linalg.norm(x - y) <= tol * max(np.linalg.norm(x), 1e-30)


def test_bad_input_names_the_argument():
    v, scatter, kw = problem()
    with pytest.raises(ValueError, match="^scatter"):
        sw.scalar_born(v, scatter[:-1], **kw)
    bad = scatter.copy()
    bad[3, 4] = np.nan
    with pytest.raises(ValueError, match="^scatter.*finite"):
        sw.scalar_born(v, bad, **kw)
    with pytest.raises(ValueError, match="^scatter"):
        sw.scalar_born(v, None, **kw)
    kw_bad = dict(kw, bg_receiver_locations=kw["bg_receiver_locations"] + 100)
    with pytest.raises(ValueError, match="^bg_receiver_locations"):
        sw.scalar_born(v, scatter, **kw_bad)
    with pytest.raises(TypeError, match="^bg_receiver_locations"):
        sw.scalar_born(v, scatter, **dict(kw, bg_receiver_locations=np.zeros((2, 3, 2))))
    with pytest.raises(ValueError, match="^grad_receiver_amplitudes"):
        sw.scalar_born_gradient(v, scatter, grad_receiver_amplitudes=np.zeros((2, 3, 40)), **kw)
