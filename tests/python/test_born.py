"""sciproxy.wave.scalar_born / scalar_born_gradient from Python: the image is the adjoint of the
Born operator (dot product, float64, relative 1e-10), the image equals scalar_gradient's grad_v,
the source gradient's dot product, the scattered data against central finite differences of
scalar(), cpu against reference, and bad input naming the argument.

Against Deepwave: test_born_matches_committed_deepwave_data always runs, on the data
tests/data/make_deepwave_reference.py wrote with deepwave.scalar_born
(tests/data/deepwave_scalar_born_reference.json); test_born_matches_live_deepwave runs
deepwave.scalar_born itself when torch and deepwave import (and skips, saying so, otherwise).
Tolerances are relative L2 norms, ||ours - deepwave|| / ||deepwave||: 1e-10 in float64 (the same
arithmetic in another order), 1e-5 in float32.

sciproxy.torch.scalar_born (skipped without torch): equal to the numpy interface, its gradients
with respect to the scatter and the source amplitudes equal scalar_born_gradient's, and
torch.autograd.gradcheck passes in float64.
"""

import json
import os
import warnings

import numpy as np
import pytest

import sciproxy
import sciproxy.wave as sw

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                    "deepwave_scalar_born_reference.json")
# Relative L2 against Deepwave, per dtype.
DEEPWAVE_TOL = {"float64": 1e-10, "float32": 1e-5}


def rel_l2(a, b):
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)


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


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cpu_matches_reference(dtype):
    v, scatter, kw = problem(3)
    kw["source_amplitudes"] = kw["source_amplitudes"].astype(dtype)
    a = sw.scalar_born(v.astype(dtype), scatter.astype(dtype), device="reference", **kw)
    b = sw.scalar_born(v.astype(dtype), scatter.astype(dtype), device="cpu", **kw)
    assert a[-1].dtype == dtype
    for name, x, y in zip(sw.born_names(3), a, b):
        # The library's tolerances (src/wave/case.hpp): the final states (background and
        # scattered) are held to the state bounds, the receivers to Born's.
        output = ("receiver_amplitudes" if name.endswith("receiver_amplitudes")
                  else "scattered_wavefield" if "_sc_" in name else "wavefield")
        tol = sciproxy.tolerance("scalar_born", dtype, output)
        assert np.linalg.norm(x - y) <= tol * max(np.linalg.norm(x), 1e-30), name


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


# --- against Deepwave --------------------------------------------------------------------------


def _committed_cases():
    with open(DATA, encoding="utf-8") as f:
        return json.load(f)["cases"]


def _case_arrays(c):
    dtype = np.dtype(c["dtype"])
    shape = tuple(c["shape"])
    ndim = len(shape)
    ns, nt = c["nshots"], c["nt"]

    def loc(name, count):
        return np.array(c[name], np.int64).reshape(ns, count, ndim)

    kw = dict(grid_spacing=c["spacing"], dt=c["dt"],
              source_amplitudes=np.array(c["source_amplitudes"], dtype).reshape(
                  ns, c["nsources"], nt),
              source_locations=loc("source_locations", c["nsources"]),
              receiver_locations=loc("receiver_locations", c["nreceivers"]),
              bg_receiver_locations=loc("bg_receiver_locations", c["nbg_receivers"]),
              accuracy=c["accuracy"], pml_width=c["pml_width"], pml_freq=c["pml_freq"],
              max_vel=c["max_vel"])
    v = np.array(c["v"], dtype).reshape(shape)
    scatter = np.array(c["scatter"], dtype).reshape(shape)
    return v, scatter, kw


@pytest.mark.parametrize("device", ["cpu", "reference"])
@pytest.mark.parametrize("name", [c["name"] for c in _committed_cases()])
def test_born_matches_committed_deepwave_data(name, device):
    c = next(c for c in _committed_cases() if c["name"] == name)
    v, scatter, kw = _case_arrays(c)
    tol = DEEPWAVE_TOL[c["dtype"]]
    ns, nt = c["nshots"], c["nt"]
    out = sw.scalar_born(v, scatter, device=device, **kw)
    assert out[-1].dtype == v.dtype and out[-1].shape == (ns, c["nreceivers"], nt)
    assert rel_l2(out[-1], c["receivers"]) < tol, "scattered receivers"
    assert rel_l2(out[-2], c["bg_receivers"]) < tol, "background receivers"
    if not c["compare_gradients"]:
        return
    w = np.array(c["receiver_weights"], v.dtype).reshape(ns, c["nreceivers"], nt)
    wbg = np.array(c["bg_receiver_weights"], v.dtype).reshape(ns, c["nbg_receivers"], nt)
    image, gsrc = sw.scalar_born_gradient(v, scatter, device=device, grad_receiver_amplitudes=w,
                                          grad_bg_receiver_amplitudes=wbg, **kw)
    assert rel_l2(image, c["grad_scatter"]) < tol, "migration image (grad scatter)"
    assert rel_l2(gsrc, c["grad_source_amplitudes"]) < tol, "source gradient"


def test_committed_deepwave_born_data_is_not_trivial():
    # A case whose data were all zero would pass the comparison above whatever sciproxy did.
    for c in _committed_cases():
        for key in ("receivers", "bg_receivers"):
            assert np.linalg.norm(c[key]) > 1e-3, (c["name"], key)
        assert c["step_ratio"] >= 1
    assert any(c["step_ratio"] > 1 for c in _committed_cases())
    assert any(c["compare_gradients"] for c in _committed_cases())


@pytest.mark.parametrize("dtype,dt", [(np.float64, 0.0008), (np.float32, 0.0008),
                                      (np.float64, 0.003)])
def test_born_matches_live_deepwave(dtype, dt):
    torch = pytest.importorskip("torch", reason="torch is not installed (deepwave needs it)")
    deepwave = pytest.importorskip("deepwave",
                                   reason="deepwave is not installed (pip install deepwave)")
    import inspect

    rng = np.random.default_rng(5)
    shape = (18, 20)
    v = rng.uniform(1600, 2400, shape).astype(dtype)
    scatter = (80 * rng.standard_normal(shape)).astype(dtype)
    nt = 40
    t = np.arange(nt) * dt
    a = np.pi * 20.0 * (t - 0.03)
    amps = np.tile((1 - 2 * a * a) * np.exp(-a * a), (2, 1, 1)).astype(dtype)
    src = np.array([[[3, 4]], [[5, 14]]], np.int64)
    rec = np.array([[[1, 2 + 3 * r] for r in range(5)]] * 2, np.int64)
    bg = np.array([[[16, 3], [10, 10]], [[2, 18], [12, 5]]], np.int64)
    common = dict(accuracy=4, pml_width=[4, 5, 3, 6], pml_freq=20.0, max_vel=2600.0)
    ours = sw.scalar_born(v, scatter, 5.0, dt, source_amplitudes=amps, source_locations=src,
                          receiver_locations=rec, bg_receiver_locations=bg, device="cpu", **common)
    params = inspect.signature(deepwave.scalar_born).parameters
    kw = dict(source_amplitudes=torch.from_numpy(amps), source_locations=torch.from_numpy(src),
              bg_receiver_locations=torch.from_numpy(bg), **common)
    kw["sc_receiver_locations" if "sc_receiver_locations" in params
       else "receiver_locations"] = torch.from_numpy(rec)
    if "location_interpolation" in params:
        kw["location_interpolation"] = "none"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if "dv" in params:  # deepwave >= 0.1: the scatter is the keyword dv
            theirs = deepwave.scalar_born(torch.from_numpy(v), 5.0, dt,
                                          dv=torch.from_numpy(scatter), **kw)
        else:
            theirs = deepwave.scalar_born(torch.from_numpy(v), torch.from_numpy(scatter), 5.0,
                                          dt, **kw)
    tol = DEEPWAVE_TOL[np.dtype(dtype).name]
    assert np.linalg.norm(theirs[-1].numpy()) > 0 and np.linalg.norm(theirs[-2].numpy()) > 0
    assert rel_l2(ours[-1], theirs[-1].numpy()) < tol, "scattered receivers"
    assert rel_l2(ours[-2], theirs[-2].numpy()) < tol, "background receivers"


# --- torch wrapper ------------------------------------------------------------------------------


def _torch_problem(torch, dtype=np.float64, nshots=2, shape=(16, 18), nt=40):
    v, scatter, kw = problem(7, nshots, shape, nt)
    t = {k: torch.from_numpy(np.asarray(x)) for k, x in kw.items()
         if k.endswith("locations")}
    return v.astype(dtype), scatter.astype(dtype), kw, t


def test_torch_born_imports_without_torch():
    import sciproxy.torch as st

    if st.available:
        pytest.skip("torch is installed")
    with pytest.raises(ImportError, match="PyTorch"):
        st.scalar_born(None, None, 5.0, 0.001)


def test_torch_born_forward_and_backward_equal_numpy():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    import sciproxy.torch as st

    v, scatter, kw, t = _torch_problem(torch)
    sc_t = torch.from_numpy(scatter).requires_grad_()
    amps_t = torch.from_numpy(kw["source_amplitudes"]).requires_grad_()
    out = st.scalar_born(torch.from_numpy(v), sc_t, 5.0, kw["dt"], source_amplitudes=amps_t,
                         pml_width=kw["pml_width"], pml_freq=25.0, max_vel=kw["max_vel"],
                         device="cpu", **t)
    ref = sw.scalar_born(v, scatter, device="cpu", **kw)
    assert len(out) == len(ref)
    for a, b in zip(out, ref):
        assert isinstance(a, torch.Tensor) and np.array_equal(a.detach().numpy(), b)
    rng = np.random.default_rng(3)
    w = torch.from_numpy(rng.normal(size=ref[-1].shape))
    wbg = torch.from_numpy(rng.normal(size=ref[-2].shape))
    ((out[-1] * w).sum() + (out[-2] * wbg).sum()).backward()
    image, gsrc = sw.scalar_born_gradient(v, scatter, device="cpu",
                                          grad_receiver_amplitudes=w.numpy(),
                                          grad_bg_receiver_amplitudes=wbg.numpy(), **kw)
    assert np.linalg.norm(image) > 0 and np.linalg.norm(gsrc) > 0
    assert rel_l2(sc_t.grad.numpy(), image) < 1e-13
    assert rel_l2(amps_t.grad.numpy(), gsrc) < 1e-13


def test_torch_born_gradcheck():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    import sciproxy.torch as st

    rng = np.random.default_rng(11)
    shape = (6, 7)
    v = torch.from_numpy(rng.uniform(1500, 2500, shape))
    scatter = torch.from_numpy(50 * rng.standard_normal(shape)).requires_grad_()
    amps = torch.from_numpy(rng.standard_normal((1, 1, 8))).requires_grad_()
    src = torch.tensor([[[2, 3]]])
    rec = torch.tensor([[[1, 1], [4, 5]]])
    bg = torch.tensor([[[0, 6], [3, 2]]])

    def f(scatter, amps):
        out = st.scalar_born(v, scatter, 5.0, 0.001, source_amplitudes=amps,
                             source_locations=src, receiver_locations=rec,
                             bg_receiver_locations=bg, pml_width=2, pml_freq=25.0,
                             max_vel=2500.0, device="cpu")
        return torch.cat([out[-1], out[-2]], dim=-1)

    assert float(f(scatter, amps).detach().abs().max()) > 0
    assert torch.autograd.gradcheck(f, (scatter, amps), eps=1e-6, atol=1e-8, rtol=1e-5)


def test_torch_born_refuses_unavailable_gradients():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    import sciproxy.torch as st

    v, scatter, kw, t = _torch_problem(torch, nt=10)
    args = dict(source_amplitudes=torch.from_numpy(kw["source_amplitudes"]),
                pml_width=kw["pml_width"], pml_freq=25.0, device="cpu", **t)
    with pytest.raises(ValueError, match="^v: .*v.detach"):
        st.scalar_born(torch.from_numpy(v).requires_grad_(), torch.from_numpy(scatter), 5.0,
                       kw["dt"], **args)
    with pytest.raises(ValueError, match="^scatter"):
        st.scalar_born(torch.from_numpy(v), None, 5.0, kw["dt"], **args)
    first = st.scalar_born(torch.from_numpy(v), torch.from_numpy(scatter), 5.0, kw["dt"], **args)
    with pytest.raises(ValueError, match="^wavefield_0"):
        st.scalar_born(torch.from_numpy(v), torch.from_numpy(scatter).requires_grad_(), 5.0,
                       kw["dt"], wavefield_0=first[0], **args)
    # Without gradients a run continues from the state of another one.
    with torch.no_grad():
        st.scalar_born(torch.from_numpy(v), torch.from_numpy(scatter), 5.0, kw["dt"],
                       wavefield_0=first[0], wavefield_m1=first[1], **args)
    sc = torch.from_numpy(scatter).requires_grad_()
    out = st.scalar_born(torch.from_numpy(v), sc, 5.0, kw["dt"], **args)
    with pytest.raises(RuntimeError, match="final wavefield"):
        (out[-1].sum() + out[0].sum()).backward()
