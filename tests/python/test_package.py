"""The package's shape: one module per family without an import cycle, every name reachable where
it was, named propagator outputs, the type stubs, and sciproxy.record()'s reports."""

import ast
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import sciproxy
import sciproxy.stack
import sciproxy.tti
import sciproxy.wave as sw

PACKAGE = os.path.dirname(os.path.abspath(sciproxy.__file__))
SUBMODULES = ["sciproxy._args", "sciproxy.stack", "sciproxy.wave", "sciproxy.tti",
              "sciproxy.tti_demo", "sciproxy._recording", "sciproxy.torch"]


@pytest.mark.parametrize("module", SUBMODULES)
def test_each_module_imports_first_in_a_fresh_interpreter(module):
    """An import cycle shows as an ImportError (or a half-initialised module) when one of its
    modules is the first one imported."""
    code = f"import {module}, sciproxy; sciproxy.wave.scalar; sciproxy.tti.tti; sciproxy.parstack"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_no_family_module_imports_another_family_at_module_level():
    families = {"stack", "wave", "tti", "_tti_demo", "torch"}
    for name in ("stack", "wave", "tti", "_tti_demo", "_args", "_recording"):
        tree = ast.parse(open(os.path.join(PACKAGE, f"{name}.py"), encoding="utf-8").read())
        for node in tree.body:  # module level only: wave imports tti lazily, in __getattr__
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                imported = {node.module} if node.module else {a.name for a in node.names}
                allowed = {"_tti_demo"} if name == "tti" else set()
                assert not (imported & families) - allowed - {name}, (name, imported)


def test_names_stay_reachable():
    assert sciproxy.parstack is sciproxy.stack.parstack
    assert sciproxy.argmax is sciproxy.stack.argmax
    assert sciproxy.resolve_impl is sciproxy.stack.resolve_impl
    for name in ("tti", "tti_adjoint", "tti_max_dt", "tti_demo", "tti_demo_dt_limit",
                 "tti_demo_flops", "ricker"):
        assert getattr(sw, name) is getattr(sciproxy.tti, name), name
        assert name in dir(sw)
    import sciproxy.tti_demo as td
    assert td.tti_demo is sciproxy.tti.tti_demo and td.ricker is sciproxy.tti.ricker
    assert sw.ScalarRun is sw.PropagatorOutput
    with pytest.raises(AttributeError):
        sw.no_such_name


def wave_problem(ndim=2, nshots=2, nt=30):
    shape = {1: (30,), 2: (14, 16), 3: (8, 9, 10)}[ndim]
    rng = np.random.default_rng(ndim)
    v = rng.uniform(1500.0, 2500.0, shape)
    amps = rng.standard_normal((nshots, 1, nt))
    src = np.stack([rng.integers(0, n, (nshots, 1)) for n in shape], -1)
    rec = np.stack([rng.integers(0, n, (nshots, 3)) for n in shape], -1)
    return v, dict(grid_spacing=5.0, dt=0.001, source_amplitudes=amps, source_locations=src,
                   receiver_locations=rec, pml_width=3, pml_freq=25.0, device="cpu")


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_scalar_output_has_names_and_unpacks(ndim):
    v, kw = wave_problem(ndim)
    out = sw.scalar(v, **kw)
    assert isinstance(out, tuple) and len(out) == 2 + 2 * ndim + 1
    assert list(out._fields) == sw.state_names(ndim) + ["receiver_amplitudes"]
    *state, receivers = out
    assert receivers is out.receiver_amplitudes and receivers.shape == (2, 3, 30)
    assert state[0] is out.wavefield_0 and state[1] is out.wavefield_m1
    dims = "zyx"[3 - ndim:]
    assert state[2] is getattr(out, f"psi{dims[0]}_m1")
    assert state[-1] is getattr(out, f"zeta{dims[-1]}_m1")
    assert list(out._asdict()) == list(out._fields)
    assert out.step_ratio >= 1 and out.device == "cpu" and out.work["points"] > 0
    assert "receiver_amplitudes" in dir(out) and "receiver_amplitudes=" in repr(out)
    with pytest.raises(AttributeError, match="receiver_amplitudes"):
        out.receivers
    again = pickle.loads(pickle.dumps(out))
    assert type(again) is type(out) and again._fields == out._fields
    assert again.step_ratio == out.step_ratio
    np.testing.assert_array_equal(again.receiver_amplitudes, out.receiver_amplitudes)
    # The named state continues a run as Deepwave's keywords.
    kw2 = dict(kw, source_amplitudes=kw["source_amplitudes"][..., :10])
    first = sw.scalar(v, **kw2)
    state = {k: x for k, x in first._asdict().items() if k != "receiver_amplitudes"}
    second = sw.scalar(v, **kw2, **state)
    assert second.receiver_amplitudes.shape == (2, 3, 10)


def test_gradient_and_born_outputs_have_names():
    v, kw = wave_problem(2)
    out = sw.scalar(v, **kw)
    grad = sw.scalar_gradient(v, **kw, grad_receiver_amplitudes=out.receiver_amplitudes)
    grad_v, grad_src = grad
    assert grad._fields == ("grad_v", "grad_source_amplitudes")
    assert grad.grad_v is grad_v and grad_v.shape == v.shape
    assert grad.grad_source_amplitudes.shape == kw["source_amplitudes"].shape

    scatter = np.ones_like(v)
    born = sw.scalar_born(v, scatter, **kw)
    assert list(born._fields) == sw.born_names(2)
    assert born._fields[-2:] == ("bg_receiver_amplitudes", "receiver_amplitudes")
    assert born.wavefield_sc_0 is born[6] and born.psiy_sc_m1 is born[8]
    *_, bg_receivers, receivers = born
    assert receivers is born.receiver_amplitudes and bg_receivers is born.bg_receiver_amplitudes
    image = sw.scalar_born_gradient(v, scatter, **kw, grad_receiver_amplitudes=receivers)
    assert image._fields == ("grad_scatter", "grad_source_amplitudes")
    assert image.grad_scatter.shape == v.shape


def test_type_stubs_are_installed():
    module_dir = os.path.dirname(os.path.abspath(sciproxy._sciproxy.__file__))
    stub = os.path.join(module_dir, "_sciproxy.pyi")
    if not os.path.exists(stub):
        pytest.skip("sciproxy/_sciproxy.pyi is absent: this build was configured with "
                    "SCIPROXY_PYTHON_STUBS=OFF or the package is not installed from a wheel")
    assert os.path.exists(os.path.join(module_dir, "py.typed"))
    text = open(stub, encoding="utf-8").read()
    for name in ("def parstack_float32", "def scalar_float64", "def tti_float32", "class Recording"):
        assert name in text, name


# ---------------------------------------------------------------------------------------------
# sciproxy.record()


def test_record_without_calls_is_empty():
    with sciproxy.record() as rec:
        pass
    assert rec.reports == [] and len(rec) == 0 and rec.passed and rec.text() == ""
    assert sciproxy.record(verify=True).reports == []  # never entered: nothing either
    with pytest.raises(TypeError, match="verify"):
        sciproxy.record(verify="yes")


def stack_call():
    arrays = [np.arange(1.0, 60.0), np.arange(1.0, 40.0)]
    sciproxy.parstack(arrays, np.array([0, 2], np.int32), np.array([[0, 0], [1, -1]], np.int32),
                      np.ones((2, 2)), impl="cpu")


def wave_call():
    v, kw = wave_problem(2)
    sw.scalar(v, **kw)


def tti_call():
    vp = np.full((10, 10, 10), 2000.0)
    dt = 0.5 * sciproxy.tti.tti_max_dt(vp, 10.0, sponge_width=2)
    sciproxy.tti.tti(vp, 10.0, dt, np.ones((1, 1, 4)), np.array([[[5, 5, 5]]]),
                     np.array([[[1, 1, 1]]]), sponge_width=2, device="cpu")


def tti_demo_call():
    shape = (12, 12, 12)
    materials = dict(vp=1500.0, b=1.0, epsilon=0.2, eta=0.4, f=0.85)
    dt = 0.5 * sciproxy.tti.tti_demo_dt_limit(shape, 10.0, **materials)
    sciproxy.tti.tti_demo(shape, 10.0, dt, **materials, theta=0.5, phi=0.3,
                          source_position=(60.0, 60.0, 60.0),
                          source_amplitudes=sciproxy.tti.ricker(15.0, dt, 5), device="cpu")


FAMILY_CALLS = {"stack": stack_call, "wave": wave_call, "tti": tti_call, "tti_demo": tti_demo_call}


@pytest.mark.parametrize("family", list(FAMILY_CALLS))
@pytest.mark.parametrize("verify", [False, True])
def test_a_call_produces_a_report(family, verify):
    with sciproxy.record(verify=verify) as rec:
        FAMILY_CALLS[family]()
    reports = rec.reports
    if not reports:
        pytest.skip(f"the {family} family does not report to sciproxy.record() yet")
    assert len(rec) == len(reports) >= 1
    report = reports[0]
    for key in ("kernel", "device", "performance", "timers", "verification"):
        assert key in report, key
    assert report["device"] == "cpu"
    assert isinstance(report["performance"], dict) and report["kernel"] in rec.text()
    if verify:
        assert report["verification"] is not None, report["kernel"]
        assert report["verification"].get("pass", True) and rec.passed
    else:
        assert report["verification"] is None and rec.passed
    # Closed: later calls are not recorded, and what was recorded stays.
    FAMILY_CALLS[family]()
    assert len(rec.reports) == len(reports)


def test_recordings_nest():
    with sciproxy.record() as outer:
        with sciproxy.record() as inner:
            stack_call()
        stack_call()
    if not outer.reports and not inner.reports:
        pytest.skip("the stack family does not report to sciproxy.record() yet")
    assert len(inner.reports) == 1 and len(outer.reports) == 1
