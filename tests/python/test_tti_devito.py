"""sciproxy's TTI workshop demo operator against the same equations written in Devito.

- test_matches_committed_devito_data: always runs; compares with the wavefield Devito computed
  (tests/data/devito_tti_demo_reference.json, made by tests/data/make_devito_tti_reference.py)
  on a 20 x 22 x 24 grid, smooth materials varying along every axis, 40 steps.
- test_matches_live_devito: when devito is importable, runs Devito here on other problems
  (space orders 4 and 16, float32, a different grid) and compares.
Tolerance: relative L2 1e-5 in float32: both evaluate the same expressions in float32 in other
orders (Devito factorises and hoists; sciproxy precomputes the trig and eta terms); measured
2e-7 (cpu) and 1e-6 (reference, which rounds only u).
"""

import json
import os
import sys

import numpy as np
import pytest

import sciproxy.tti_demo as td

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
sys.path.insert(0, DATA)
import make_devito_tti_reference as devito_demo  # noqa: E402  (the Devito equations and materials)

TOLERANCE = 1e-5


def rel_l2(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


def run_sciproxy(p, materials, amplitudes, device, form="fused"):
    return td.tti_demo(p["shape"], p["spacing"], p["dt"], **materials,
                       source_position=p["source_position"], source_amplitudes=amplitudes,
                       space_order=p["space_order"], form=form, device=device)


@pytest.mark.parametrize("device,form", [("reference", "two-pass"), ("cpu", "two-pass"), ("cpu", "fused")])
def test_matches_committed_devito_data(device, form):
    with open(os.path.join(DATA, "devito_tti_demo_reference.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    shape = tuple(doc["shape"])
    materials = devito_demo.demo_materials(shape)
    amplitudes = devito_demo.ricker(doc["f0"], doc["dt"], doc["nt"]).astype(np.float32)
    expected = np.array(doc["u"], np.float64).reshape(shape)
    run = run_sciproxy(doc, materials, amplitudes, device, form)
    assert run.u.shape == shape and np.isfinite(run.u).all()
    assert doc["dt"] < run.dt_limit
    error = rel_l2(run.u, expected)
    assert error < TOLERANCE, f"{device} {form}: rel L2 {error:.3e} against Devito {doc['devito_version']}"
    # The comparison can fail: without the source the field differs by far more than the tolerance.
    silent = run_sciproxy(doc, materials, np.zeros_like(amplitudes), "cpu")
    assert rel_l2(silent.u, expected) > 100 * TOLERANCE


@pytest.mark.parametrize("space_order", [4, 16])
def test_matches_live_devito(space_order):
    pytest.importorskip("devito", reason="devito is not installed (pip install devito)")
    os.environ.setdefault("DEVITO_LOGGING", "WARNING")
    shape, spacing, nt = (18, 21, 34), (9.0, 11.0, 10.0), 25
    p = dict(shape=shape, spacing=spacing, space_order=space_order,
             source_position=(71.3, 102.9, 170.4))
    materials = devito_demo.demo_materials(shape)
    limit = td.tti_demo_dt_limit(shape, spacing, materials["vp"], materials["b"],
                                 materials["epsilon"], materials["eta"], materials["f"],
                                 materials["damping"], space_order)
    p["dt"] = 0.8 * limit
    amplitudes = devito_demo.ricker(30.0, p["dt"], nt).astype(np.float32)
    u, u_prev, _ = devito_demo.run_devito(shape, spacing, space_order, nt, p["source_position"],
                                          p["dt"], amplitudes, materials)
    for form in ("two-pass", "fused"):
        run = run_sciproxy(p, materials, amplitudes, "cpu", form)
        assert rel_l2(run.u, u) < TOLERANCE, (form, rel_l2(run.u, u))
        assert rel_l2(run.u_prev, u_prev) < TOLERANCE, (form, rel_l2(run.u_prev, u_prev))


def test_cpu_tuning_changes_no_result(tmp_path, monkeypatch):
    """The cpu backend's block sizes (TtiDemoCpuTuning) and steps per sweep, given or chosen by
    the autotuner (cached in a directory of the test's own): the same bits."""
    monkeypatch.setenv("SCIPROXY_CACHE_DIR", str(tmp_path))
    with open(os.path.join(DATA, "devito_tti_demo_reference.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    materials = devito_demo.demo_materials(tuple(doc["shape"]))
    amplitudes = devito_demo.ricker(doc["f0"], doc["dt"], doc["nt"]).astype(np.float32)

    def run(tuning, autotune=False):
        return td.tti_demo(doc["shape"], doc["spacing"], doc["dt"], **materials,
                           source_position=doc["source_position"], source_amplitudes=amplitudes,
                           device="cpu", cpu_tuning=tuning, autotune=autotune).u

    want = run({"sweep_steps": 1})
    np.testing.assert_array_equal(run({}, autotune=True), want)
    assert (tmp_path / "autotune.json").is_file()
    with pytest.raises(TypeError, match="^autotune: expected True or False"):
        run({}, autotune=1)
    for tuning in ({}, {"sweep_steps": 2, "tile_rows": 3}, {"tile_kib": 1}, {"tile_rows": 1000}):
        np.testing.assert_array_equal(run(tuning), want, err_msg=str(tuning))
    with pytest.raises(ValueError, match="cpu_tuning"):
        run({"tile_cols": 4})
    with pytest.raises(ValueError, match="sweep_steps"):
        run({"sweep_steps": 3})


def test_bad_input_is_refused_by_name():
    shape = (12, 12, 12)
    args = dict(vp=1500, b=1, epsilon=0.2, eta=0.4, f=0.85, theta=0.5, phi=0.3, damping=0.0,
                source_position=(50.0, 50.0, 50.0), source_amplitudes=np.ones(3, np.float32))
    with pytest.raises(ValueError, match="stability limit"):
        td.tti_demo(shape, 10.0, 1.0, **args)
    with pytest.raises(ValueError, match="space_order"):
        td.tti_demo(shape, 10.0, 1e-4, space_order=6, **args)
    with pytest.raises(ValueError, match="spacing"):
        td.tti_demo(shape, -10.0, 1e-4, **args)
    with pytest.raises(ValueError, match="vp"):
        td.tti_demo(shape, 10.0, 1e-4, **{**args, "vp": np.full(shape, np.nan)})
    with pytest.raises(ValueError, match="theta"):
        td.tti_demo(shape, 10.0, 1e-4, **{**args, "theta": np.zeros((3, 3))})
    with pytest.raises(ValueError, match="form"):
        td.tti_demo(shape, 10.0, 1e-4, form="triple", **args)
    with pytest.raises(TypeError, match="dtype"):
        td.tti_demo(shape, 10.0, 1e-4, dtype=np.int32, **args)
