"""sciproxy.wave.scalar / scalar_gradient: Deepwave's interface, continuation, exact gradients,
bad input, and (when installed) equality with deepwave.scalar and the torch wrapper."""

import re
import warnings

import numpy as np
import pytest
import sciproxy.wave as sw

PML = 5


def problem(ndim=2, dtype=np.float64, nshots=2, nt=40, shape=None, dt=0.0008):
    """A small layered model, one Ricker source and 4 receivers per shot."""
    shape = shape or {1: (40,), 2: (20, 30), 3: (10, 11, 12)}[ndim]
    v = np.empty(shape, dtype)
    for z in range(shape[0]):
        v[z] = 1500.0 + 800.0 * (z >= shape[0] // 2)
    t = np.arange(nt) * dt
    a = np.pi * 25.0 * (t - 0.03)
    wavelet = (1 - 2 * a * a) * np.exp(-a * a)
    amps = np.tile(wavelet, (nshots, 1, 1)).astype(dtype)
    src = np.zeros((nshots, 1, ndim), np.int64)
    rec = np.zeros((nshots, 4, ndim), np.int64)
    for s in range(nshots):
        src[s, 0] = [2] * (ndim - 1) + [4 + 6 * s] if ndim > 1 else [4 + 6 * s]
        for r in range(4):
            rec[s, r] = [1] * (ndim - 1) + [2 + 3 * r] if ndim > 1 else [20 + 3 * r]
    return dict(v=v, grid_spacing=5.0, dt=dt, source_amplitudes=amps, source_locations=src,
                receiver_locations=rec, accuracy=4, pml_width=PML, pml_freq=25.0)


def rel_l2(a, b):
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)


def raises(exception, argument):
    return pytest.raises(exception, match=rf"(^|\W){re.escape(argument)}(\W|$)")


# --- shapes and order of the returned tuple -------------------------------------------------


@pytest.mark.parametrize("ndim", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tuple_shapes_and_order(ndim, dtype):
    p = problem(ndim, dtype, nt=12)
    out = sw.scalar(**p, device="cpu")
    assert isinstance(out, tuple) and len(out) == 2 + 2 * ndim + 1
    padded = tuple(n + 2 * PML + 4 for n in p["v"].shape)  # model + PML + halo of accuracy 4
    for field in out[:-1]:
        assert field.shape == (2, *padded) and field.dtype == dtype
    receivers = out[-1]
    assert receivers.shape == (2, 4, 12) and receivers.dtype == dtype
    assert np.isfinite(receivers).all() and np.abs(receivers).max() > 0
    assert sw.state_names(ndim)[:2] == ["wavefield_0", "wavefield_m1"]
    assert sw.state_names(2) == ["wavefield_0", "wavefield_m1", "psiy_m1", "psix_m1", "zetay_m1",
                                 "zetax_m1"]


def test_receivers_are_the_wavefield_at_the_receivers():
    p = problem(2, nt=30)
    nt = 30
    full = sw.scalar(**p, device="cpu")
    # u^t is recorded before the step: the last sample of a run of nt + 1 steps is the final
    # wavefield of the run of nt steps, at the receiver cells.
    longer = dict(p, source_amplitudes=np.concatenate(
        [p["source_amplitudes"], np.zeros((2, 1, 1))], axis=2))
    after = sw.scalar(**longer, device="cpu")
    h = PML + 2
    for s in range(2):
        for r in range(4):
            z, x = p["receiver_locations"][s, r]
            assert after[-1][s, r, nt] == pytest.approx(full[0][s, z + h, x + h], rel=1e-12, abs=1e-30)


def test_batched_model_equals_one_model_per_call():
    p = problem(2, nt=25)
    v2 = np.stack([p["v"], p["v"] * 1.1])
    batched = sw.scalar(**dict(p, v=v2, max_vel=3000.0), device="cpu")
    for s in range(2):
        single = sw.scalar(**dict(p, v=v2[s], source_amplitudes=p["source_amplitudes"][s:s + 1],
                                  source_locations=p["source_locations"][s:s + 1],
                                  receiver_locations=p["receiver_locations"][s:s + 1],
                                  max_vel=3000.0), device="cpu")
        assert rel_l2(batched[-1][s], single[-1][0]) < 1e-12


def test_cpu_equals_reference():
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        p = problem(2, dtype, nt=30)
        cpu = sw.scalar(**p, device="cpu")
        ref = sw.scalar(**p, device="reference")
        for a, b in zip(cpu, ref):
            if np.abs(b).max() > 0:
                assert rel_l2(a, b) < tol


def test_cpu_tuning_changes_no_bit():
    p = problem(3, np.float32, nshots=1, nt=30)
    want = sw.scalar(**p, device="cpu")
    try:
        for tuning in ({"sweep_steps": 1}, {"sweep_steps": 3, "tiles_per_thread": 2},
                       {"sweep_cache_bytes": 1, "prefetch_rows": 0}):
            sw.cpu_tuning.clear()
            sw.cpu_tuning.update(tuning)
            for a, b in zip(sw.scalar(**p, device="cpu"), want):
                np.testing.assert_array_equal(a, b)
        sw.cpu_tuning.clear()
        sw.cpu_tuning["sweep_depth"] = 2
        with raises(ValueError, "cpu_tuning"):
            sw.scalar(**p, device="cpu")
    finally:
        sw.cpu_tuning.clear()


@pytest.mark.parametrize("ndim", [2, 3])
def test_autotune_changes_no_bit(ndim, tmp_path, monkeypatch):
    # The autotuner times the cpu forward's sweep and block sizes on this problem and caches its
    # choice (in SCIPROXY_CACHE_DIR); every setting gives the same bits, for the forward, the
    # gradient and Born modelling.
    monkeypatch.setenv("SCIPROXY_CACHE_DIR", str(tmp_path))
    p = problem(ndim, np.float32, nshots=2, nt=30)
    want = sw.scalar(**p, device="cpu")
    for _ in range(2):  # the search, then the cached choice
        for a, b in zip(sw.scalar(**p, device="cpu", autotune=True), want):
            np.testing.assert_array_equal(a, b)
    assert (tmp_path / "autotune.json").is_file()
    residual = want.receiver_amplitudes
    plain = sw.scalar_gradient(**p, device="cpu", grad_receiver_amplitudes=residual)
    tuned = sw.scalar_gradient(**p, device="cpu", grad_receiver_amplitudes=residual,
                               autotune=True)
    for a, b in zip(tuned, plain):
        np.testing.assert_array_equal(a, b)
    scatter = np.full_like(p["v"], 20.0)
    born = sw.scalar_born(p["v"], scatter, p["grid_spacing"], p["dt"], p["source_amplitudes"],
                          p["source_locations"], p["receiver_locations"], pml_width=PML,
                          pml_freq=25.0, device="cpu")
    born_tuned = sw.scalar_born(p["v"], scatter, p["grid_spacing"], p["dt"],
                                p["source_amplitudes"], p["source_locations"],
                                p["receiver_locations"], pml_width=PML, pml_freq=25.0,
                                device="cpu", autotune=True)
    for a, b in zip(born_tuned, born):
        np.testing.assert_array_equal(a, b)
    with raises(TypeError, "autotune: expected True or False"):
        sw.scalar(**p, device="cpu", autotune="yes")


# --- continuation -----------------------------------------------------------------------------


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_continuing_from_the_returned_state_equals_one_longer_run(ndim):
    nt = 40 if ndim < 3 else 16
    p = problem(ndim, nt=nt, dt=0.0006)  # dt below the CFL limit: step ratio 1, no resampling
    assert sw.cfl([p["grid_spacing"]] * ndim, p["dt"], 2300.0)[1] == 1
    whole = sw.scalar(**p, device="cpu")
    half = nt // 2
    first = sw.scalar(**dict(p, source_amplitudes=p["source_amplitudes"][..., :half]), device="cpu")
    state = dict(zip(sw.state_names(ndim), first[:-1]))
    second = sw.scalar(**dict(p, source_amplitudes=p["source_amplitudes"][..., half:]), **state,
                       device="cpu")
    assert rel_l2(np.concatenate([first[-1], second[-1]], axis=-1), whole[-1]) < 1e-12
    for a, b in zip(second[:-1], whole[:-1]):
        assert rel_l2(a, b) < 1e-12


def test_nt_without_sources_propagates_the_initial_state():
    p = problem(2, nt=20)
    out = sw.scalar(**p, device="cpu")
    state = dict(zip(sw.state_names(2), out[:-1]))
    more = sw.scalar(p["v"], 5.0, p["dt"], receiver_locations=p["receiver_locations"], nt=10,
                     pml_width=PML, pml_freq=25.0, **state, device="cpu")
    assert more[-1].shape == (2, 4, 10) and np.abs(more[0]).max() > 0


# --- gradients --------------------------------------------------------------------------------


def test_gradient_against_central_finite_differences():
    p = problem(2, np.float64, nshots=2, nt=50, shape=(12, 16))
    p["max_vel"] = 2500.0  # fixed, so the PML and the time step do not depend on v
    rng = np.random.default_rng(3)
    weights = rng.normal(size=(2, 4, 50))

    def loss(v, amps):
        return float(np.sum(weights * sw.scalar(**dict(p, v=v, source_amplitudes=amps),
                                                 device="cpu")[-1]))

    grad_v, grad_src = sw.scalar_gradient(**p, device="cpu", grad_receiver_amplitudes=weights)
    assert grad_v.shape == p["v"].shape and grad_src.shape == p["source_amplitudes"].shape
    v0, a0 = p["v"], p["source_amplitudes"]
    for cell in [(3, 5), (6, 8), (9, 12), (0, 0)]:
        h = 1e-4 * v0[cell]
        vp, vm = v0.copy(), v0.copy()
        vp[cell] += h
        vm[cell] -= h
        fd = (loss(vp, a0) - loss(vm, a0)) / (2 * h)
        assert grad_v[cell] == pytest.approx(fd, rel=1e-5, abs=1e-9 * np.abs(grad_v).max())
    for index in [(0, 0, 10), (1, 0, 25), (1, 0, 49)]:
        ap, am = a0.copy(), a0.copy()
        ap[index] += 1e-3
        am[index] -= 1e-3
        fd = (loss(v0, ap) - loss(v0, am)) / 2e-3
        assert grad_src[index] == pytest.approx(fd, rel=1e-6, abs=1e-12)


def test_gradient_with_resampling_matches_adjoint_identity():
    """Receivers are linear in the sources: sum(w * receivers) = <grad_sources, amplitudes>."""
    p = problem(2, np.float64, nt=30, dt=0.004)  # step ratio > 1: resampled
    run = sw.scalar_run(**p, device="cpu")
    assert run.step_ratio > 1
    w = np.random.default_rng(0).normal(size=run[-1].shape)
    _, grad_src = sw.scalar_gradient(**p, device="cpu", grad_receiver_amplitudes=w)
    assert np.sum(grad_src * p["source_amplitudes"]) == pytest.approx(np.sum(w * run[-1]), rel=1e-9)


def test_gradient_details_and_reference_agree():
    p = problem(2, np.float64, nt=30)
    w = np.ones((2, 4, 30))
    d = sw.scalar_gradient(**p, device="cpu", grad_receiver_amplitudes=w, return_details=True)
    r = sw.scalar_gradient(**p, device="reference", grad_receiver_amplitudes=w)
    assert rel_l2(d["grad_v"], r[0]) < 1e-10 and rel_l2(d["grad_source_amplitudes"], r[1]) < 1e-10
    assert d["forward"][-1].shape == (2, 4, 30) and d["forward"].work["points"] > 0


# --- bad input --------------------------------------------------------------------------------


def call(**changes):
    device = changes.pop("device", "cpu")
    p = problem(2, nt=10)
    p.update(changes)
    return sw.scalar(**p, device=device)


@pytest.mark.parametrize(
    "changes, exception, argument",
    [
        (dict(grid_spacing=-5.0), ValueError, "grid_spacing"),
        (dict(grid_spacing=[5.0, 0.0]), ValueError, "grid_spacing[1]"),
        (dict(grid_spacing=[5.0, 5.0, 5.0]), ValueError, "grid_spacing"),
        (dict(grid_spacing="5"), TypeError, "grid_spacing"),
        (dict(dt=0.0), ValueError, "dt"),
        (dict(accuracy=5), ValueError, "accuracy"),
        (dict(accuracy=10), ValueError, "accuracy"),
        (dict(accuracy=4.0), TypeError, "accuracy"),
        (dict(v=np.ones((20, 30), np.int64)), TypeError, "v"),
        (dict(v=np.ones((20, 30, 4, 5))), ValueError, "v"),
        (dict(source_locations=np.array([[[2, 40]], [[2, 4]]])), ValueError, "source_locations"),
        (dict(source_locations=np.array([[[-1, 4]], [[2, 4]]])), ValueError, "source_locations"),
        (dict(receiver_locations=np.full((2, 4, 2), 99)), ValueError, "receiver_locations"),
        (dict(source_locations=np.zeros((2, 1, 2))), TypeError, "source_locations"),
        (dict(source_locations=None), ValueError, "source_locations"),
        (dict(source_amplitudes=np.zeros((3, 1, 10))), ValueError, "source_amplitudes"),
        (dict(receiver_locations=np.zeros((3, 4, 2), np.int64)), ValueError, "receiver_locations"),
        (dict(pml_width=[1, 2, 3]), ValueError, "pml_width"),
        (dict(pml_width=-1), ValueError, "pml_width"),
        (dict(pml_freq=-25.0), ValueError, "pml_freq"),
        (dict(survey_pad=[1, 2]), ValueError, "survey_pad"),
        (dict(nt=7), ValueError, "nt"),
        (dict(origin=[0, 0]), ValueError, "origin"),  # no initial state to place
        (dict(storage_mode="tape"), ValueError, "storage_mode"),
        (dict(time_taper="yes"), TypeError, "time_taper"),
        (dict(model_gradient_sampling_interval=0), ValueError, "model_gradient_sampling_interval"),
        (dict(psiz_m1=np.zeros((2, 34, 44))), ValueError, "psiz_m1"),
        (dict(wavefield_0=np.zeros((2, 5, 5))), ValueError, "wavefield"),
        (dict(device="gpu7"), ValueError, "device"),
        (dict(device=3), TypeError, "device"),
        (dict(nparallel=0), ValueError, "nparallel"),
    ],
)
def test_bad_input(changes, exception, argument):
    with raises(exception, argument):
        call(**changes)


def test_nonfinite_velocity_and_duplicate_sources():
    p = problem(2, nt=10)
    v = p["v"].copy()
    v[3, 3] = np.nan
    with raises(ValueError, "v"):
        sw.scalar(**dict(p, v=v), device="cpu")
    src = np.array([[[2, 4], [2, 4]], [[2, 4], [3, 4]]])
    amps = np.zeros((2, 2, 10))
    with raises(ValueError, "source_locations"):
        sw.scalar(**dict(p, source_locations=src, source_amplitudes=amps), device="cpu")


def test_missing_nt_and_missing_gradient():
    p = problem(2, nt=10)
    with raises(ValueError, "nt"):
        sw.scalar(p["v"], 5.0, 0.001, receiver_locations=p["receiver_locations"], pml_freq=25.0)
    with raises(ValueError, "grad_receiver_amplitudes"):
        sw.scalar_gradient(**p, device="cpu")
    with raises(ValueError, "grad_receiver_amplitudes"):
        sw.scalar_gradient(**p, device="cpu", grad_receiver_amplitudes=np.zeros((2, 4, 9)))


def test_cuda_absent_is_a_runtime_error():
    import sciproxy

    if sciproxy.info()["cuda_device_count"] > 0:
        pytest.skip("a CUDA device is present")
    with pytest.raises(RuntimeError, match="cuda|CUDA"):
        call(device="cuda:0")


def test_pml_freq_default_warns_like_deepwave():
    p = problem(2, nt=5)
    del p["pml_freq"]
    with pytest.warns(UserWarning, match="pml_freq"):
        sw.scalar(**p, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sw.scalar(**dict(p, pml_freq=25.0), device="cpu")


def test_cfl_matches_deepwave_rule():
    inner_dt, ratio = sw.cfl([5.0, 5.0], 0.004, 4000.0)
    max_dt = 0.6 / np.sqrt(2 / 25.0) / 4000.0
    assert ratio == int(np.ceil(0.004 / max_dt)) and inner_dt == pytest.approx(0.004 / ratio)


# --- against Deepwave ---------------------------------------------------------------------------


@pytest.mark.parametrize("dt", [0.0008, 0.002])  # step ratio 1, and resampled
@pytest.mark.parametrize("accuracy", [4, 8])
def test_receivers_equal_deepwave(dt, accuracy):
    deepwave = pytest.importorskip("deepwave", reason="deepwave is not installed (pip install deepwave)")
    torch = pytest.importorskip("torch", reason="deepwave needs torch")
    p = problem(2, np.float32, nt=80, shape=(30, 40), dt=dt)
    p["accuracy"] = accuracy
    ours = sw.scalar(**p, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = deepwave.scalar(
            torch.from_numpy(p["v"]), p["grid_spacing"], dt,
            source_amplitudes=torch.from_numpy(p["source_amplitudes"]),
            source_locations=torch.from_numpy(p["source_locations"]),
            receiver_locations=torch.from_numpy(p["receiver_locations"]),
            accuracy=accuracy, pml_width=PML, pml_freq=25.0)
    assert rel_l2(ours[-1], theirs[-1].numpy()) < 1e-5
    # The final wavefield: Deepwave's includes the PML; ours also the stencil halo (zero).
    h = accuracy // 2
    theirs_u = theirs[0].numpy()
    if theirs_u.shape != ours[0].shape:
        assert np.abs(ours[0][:, :h]).max() == 0 and np.abs(ours[0][:, :, -h:]).max() == 0
        ours_u = ours[0][:, h:-h, h:-h]
    else:
        ours_u = ours[0]
    assert rel_l2(ours_u, theirs_u) < 5e-5  # float32 rounding over the whole field


# --- torch wrapper --------------------------------------------------------------------------------


def test_torch_wrapper_imports_without_torch():
    import sciproxy.torch as st

    if st.available:
        pytest.skip("torch is installed")
    with pytest.raises(ImportError, match="PyTorch"):
        st.scalar(None, 5.0, 0.001)


def test_torch_wrapper_forward_and_backward():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    import sciproxy.torch as st

    p = problem(2, np.float64, nt=30)
    v = torch.from_numpy(p["v"]).requires_grad_()
    amps = torch.from_numpy(p["source_amplitudes"]).requires_grad_()
    out = st.scalar(v, 5.0, p["dt"], source_amplitudes=amps,
                    source_locations=torch.from_numpy(p["source_locations"]),
                    receiver_locations=torch.from_numpy(p["receiver_locations"]),
                    accuracy=4, pml_width=PML, pml_freq=25.0, device="cpu")
    ref = sw.scalar(**p, device="cpu")
    assert len(out) == len(ref)
    for a, b in zip(out, ref):
        assert isinstance(a, torch.Tensor) and np.array_equal(a.detach().numpy(), b)
    w = torch.from_numpy(np.random.default_rng(1).normal(size=ref[-1].shape))
    (out[-1] * w).sum().backward()
    grad_v, grad_src = sw.scalar_gradient(**p, device="cpu", grad_receiver_amplitudes=w.numpy())
    assert rel_l2(v.grad.numpy(), grad_v) < 1e-12
    assert rel_l2(amps.grad.numpy(), grad_src) < 1e-12


def test_torch_wrapper_gradcheck_through_state():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    import sciproxy.torch as st

    p = problem(2, np.float64, nshots=1, nt=6, shape=(6, 7))
    src = torch.from_numpy(np.array([[[2, 3]]]))
    rec = torch.from_numpy(np.array([[[1, 1], [4, 5]]]))
    v = torch.from_numpy(p["v"]).requires_grad_()
    amps = torch.from_numpy(p["source_amplitudes"][:1]).requires_grad_()

    def f(v, amps):
        first = st.scalar(v, 5.0, p["dt"], source_amplitudes=amps[..., :3], source_locations=src,
                          receiver_locations=rec, pml_width=2, pml_freq=25.0, max_vel=2500.0,
                          device="cpu")
        state = dict(zip(sw.state_names(2), first[:-1]))
        second = st.scalar(v, 5.0, p["dt"], source_amplitudes=amps[..., 3:], source_locations=src,
                           receiver_locations=rec, pml_width=2, pml_freq=25.0, max_vel=2500.0,
                           device="cpu", **state)
        return torch.cat([first[-1], second[-1]], dim=-1)

    assert torch.autograd.gradcheck(f, (v, amps), eps=1e-6, atol=1e-8, rtol=1e-5)


# --- windows: origin, and ignored locations ----------------------------------------------------


def test_origin_places_a_continued_window_like_deepwave():
    p = problem(2, nshots=1, nt=40, dt=0.0006)
    p["source_locations"] = np.array([[[10, 12]]])
    p["receiver_locations"] = np.array([[[12, 15], [14, 20]]])
    whole = sw.scalar(**p, survey_pad=3, device="cpu")
    half = 20
    first = sw.scalar(**dict(p, source_amplitudes=p["source_amplitudes"][..., :half]), survey_pad=3,
                      device="cpu")
    # The window of survey_pad=3 starts at cell (10 - 3, 12 - 3); a state from it needs that origin.
    state = dict(zip(sw.state_names(2), first[:-1]))
    second = sw.scalar(**dict(p, source_amplitudes=p["source_amplitudes"][..., half:]), **state,
                       origin=[7, 9], device="cpu")
    assert rel_l2(np.concatenate([first[-1], second[-1]], axis=-1), whole[-1]) < 1e-12
    # Without origin the window would start at cell 0 and miss the receivers.
    with raises(ValueError, "receiver_locations"):
        sw.scalar(**dict(p, source_amplitudes=p["source_amplitudes"][..., half:]), **state,
                  device="cpu")
    with raises(ValueError, "origin"):  # with survey_pad: one or the other
        sw.scalar(**p, **state, origin=[7, 9], survey_pad=3, device="cpu")
    with raises(ValueError, "origin[1]"):
        sw.scalar(**p, **state, origin=[7, 99], device="cpu")
    with raises(ValueError, "origin"):
        sw.scalar(**p, **state, origin=[7], device="cpu")
    with raises(ValueError, "wavefield_0"):  # the window would run past the model
        sw.scalar(**p, **state, origin=[15, 9], device="cpu")


def test_ignored_locations_inject_nothing_and_record_zeros():
    ignore = sw.IGNORE_LOCATION
    p = problem(2, nshots=2, nt=30)
    p["source_locations"] = np.array([[[2, 4], [ignore, ignore]], [[2, 10], [5, 7]]])
    p["source_amplitudes"] = np.random.default_rng(1).standard_normal((2, 2, 30))
    p["receiver_locations"][0, 3] = ignore
    out = sw.scalar(**p, device="cpu")
    assert np.all(out[-1][0, 3] == 0)
    alone = sw.scalar(**dict(p, source_amplitudes=p["source_amplitudes"][:1, :1],
                             source_locations=p["source_locations"][:1, :1],
                             receiver_locations=p["receiver_locations"][:1, :3]), device="cpu")
    assert rel_l2(out[-1][0, :3], alone[-1][0]) < 1e-13
    grad_v, grad_sources = sw.scalar_gradient(
        **p, grad_receiver_amplitudes=np.ones((2, 4, 30)), device="cpu")
    assert np.all(grad_sources[0, 1] == 0) and np.any(grad_sources[0, 0] != 0)
    ref_v, _ = sw.scalar_gradient(**p, grad_receiver_amplitudes=np.ones((2, 4, 30)),
                                  device="reference")
    assert rel_l2(grad_v, ref_v) < 1e-12
    with raises(ValueError, "source_locations"):  # all coordinates or none
        sw.scalar(**dict(p, source_locations=np.array([[[2, 4], [ignore, 3]], [[2, 10], [5, 7]]])),
                  device="cpu")
