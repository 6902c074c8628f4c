"""Ctrl-C stops every long call: scalar, scalar_gradient (disk storage, which leaves no file),
tti, tti_adjoint, tti_demo (both forms), specex's ex2d and parstack raise KeyboardInterrupt
within a second or two of SIGINT, in a subprocess (a real signal) and in this process
(_thread.interrupt_main from a timer thread); SIGTERM ends the process; and a call after an
interrupted one gives the same result as in a fresh process (nothing was corrupted). Prints the
measured times to stop."""

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import _thread

import numpy as np
import pytest

import sciproxy
import sciproxy.tti
import sciproxy.wave

# Seconds from the signal to the stop that the test accepts: measured far below, with slack for a
# loaded CI machine; scripts/test-sanitized.sh raises it for the sanitized (-O0) build.
LIMIT = float(os.environ.get("SCIPROXY_STOP_LIMIT", "3.0"))
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))

# Each snippet defines long() (many seconds of work) and short() (a quick call returning an array).
CALLS = {
    "scalar": """
        import sciproxy.wave
        v = np.full((40, 40), 2000.0)
        src = np.array([[[20, 20]]]); rec = np.array([[[10, 30]]])
        def run(nt):
            amps = np.zeros((1, 1, nt)); amps[..., :50] = 1.0
            return sciproxy.wave.scalar(v, 5.0, 0.0008, source_amplitudes=amps,
                                        source_locations=src, receiver_locations=rec,
                                        pml_freq=25.0, device="cpu").receiver_amplitudes
        long = lambda: run(2_000_000)
        short = lambda: run(50)
    """,
    "scalar_gradient_disk": """
        import sciproxy.wave
        v = np.full((40, 40), 2000.0)
        src = np.array([[[20, 20]]]); rec = np.array([[[10, 30]]])
        def run(nt):
            amps = np.zeros((1, 1, nt)); amps[..., :50] = 1.0
            out = sciproxy.wave.scalar_gradient(
                v, 5.0, 0.0008, source_amplitudes=amps, source_locations=src,
                receiver_locations=rec, pml_freq=25.0, grad_receiver_amplitudes=np.ones((1, 1, nt)),
                storage_mode="disk", storage_path=STORAGE, device="cpu")
            return out[0] if isinstance(out, tuple) else np.asarray(out["v"])
        long = lambda: run(1_000_000)
        short = lambda: run(50)
    """,
    "tti": """
        import sciproxy.tti
        vp = np.full((24, 24, 24), 2000.0)
        dt = 0.5 * sciproxy.tti.tti_max_dt(vp, 10.0, sponge_width=2)
        def run(nt):
            amps = np.zeros((1, 1, nt)); amps[..., :5] = 1.0
            return sciproxy.tti.tti(vp, 10.0, dt, amps, np.array([[[12, 12, 12]]]),
                                    np.array([[[3, 3, 3]]]), sponge_width=2, device="cpu")
        long = lambda: run(300_000)
        short = lambda: run(5)
    """,
    "tti_adjoint": """
        import sciproxy.tti
        vp = np.full((24, 24, 24), 2000.0)
        dt = 0.5 * sciproxy.tti.tti_max_dt(vp, 10.0, sponge_width=2)
        def run(nt):
            data = np.zeros((1, 1, nt)); data[..., -5:] = 1.0
            return sciproxy.tti.tti_adjoint(vp, 10.0, dt, data, np.array([[[12, 12, 12]]]),
                                            np.array([[[3, 3, 3]]]), sponge_width=2,
                                            device="cpu")
        long = lambda: run(300_000)
        short = lambda: run(5)
    """,
    "tti_demo_fused": """
        import sciproxy.tti
        shape = (32, 32, 32)
        materials = dict(vp=1500.0, b=1.0, epsilon=0.2, eta=0.4, f=0.85)
        dt = 0.5 * sciproxy.tti.tti_demo_dt_limit(shape, 10.0, **materials)
        def run(nt, form="fused"):
            return sciproxy.tti.tti_demo(shape, 10.0, dt, **materials, theta=0.5, phi=0.3,
                                         source_position=(160.0, 160.0, 160.0),
                                         source_amplitudes=sciproxy.tti.ricker(15.0, dt, nt),
                                         form=form, device="cpu").u
        long = lambda: run(200_000)
        short = lambda: run(5)
    """,
    "tti_demo_reference": """
        import sciproxy.tti
        shape = (32, 32, 32)
        materials = dict(vp=1500.0, b=1.0, epsilon=0.2, eta=0.4, f=0.85)
        dt = 0.5 * sciproxy.tti.tti_demo_dt_limit(shape, 10.0, **materials)
        def run(nt):
            return sciproxy.tti.tti_demo(shape, 10.0, dt, **materials, theta=0.5, phi=0.3,
                                         source_position=(160.0, 160.0, 160.0),
                                         source_amplitudes=sciproxy.tti.ricker(15.0, dt, nt),
                                         device="reference").u
        long = lambda: run(20_000)
        short = lambda: run(3)
    """,
    "specex_ex2d": """
        import pathlib
        import sciproxy.specex as sx
        data = pathlib.Path(sciproxy_tests_dir) / ".." / "data" / "specex"
        psf = sx.load_psf(data / "psf-r0-00067784.fits")
        w = 6000.0 + 0.8 * np.arange(1200)
        r = psf.xyrange((0, 200), (w[0] - 30, w[-1] + 30))
        image = np.zeros((r[3] - r[2], r[1] - r[0]))
        ivar = np.full(image.shape, 1.0 / 9.0)
        def run(nspec):
            return sx.ex2d(image, ivar, psf, 0, nspec, w, xyrange=r, bundlesize=5,
                           device="cpu")[1]
        long = lambda: run(200)
        short = lambda: run(5)
    """,
    "parstack_reference": """
        import sciproxy
        rng = np.random.default_rng(0)  # made before "started": the signal finds the call running
        arrays = [rng.standard_normal(20_000) for _ in range(100)]
        offsets = np.zeros(100, np.int32)
        shifts = rng.integers(-100, 100, (20_000, 100)).astype(np.int32)
        weights = np.ones((20_000, 100))
        def run(nshifts):
            return sciproxy.parstack(arrays, offsets, shifts[:nshifts], weights[:nshifts], 1,
                                     impl="reference")[0]
        long = lambda: run(20_000)
        short = lambda: run(3)
    """,
    "parstack_cpu": """
        import sciproxy
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal(100_000) for _ in range(200)]
        offsets = np.zeros(200, np.int32)
        shifts = rng.integers(-100, 100, (50_000, 200)).astype(np.int32)
        weights = np.ones((50_000, 200))
        def run(nshifts):
            return sciproxy.parstack(arrays, offsets, shifts[:nshifts], weights[:nshifts], 1,
                                     impl="cpu")[0]
        long = lambda: run(50_000)
        short = lambda: run(3)
    """,
}

CHILD = """
import os, sys, time
import numpy as np
STORAGE = sys.argv[1]
sciproxy_tests_dir = {tests_dir!r}
{setup}
print("started", flush=True)
t0 = time.monotonic()
try:
    long()
    print("finished", flush=True)
except KeyboardInterrupt:
    print(f"interrupted {{time.monotonic():.6f}}", flush=True)
    print("after", float(np.sum(np.abs(short()))), flush=True)
"""


def _child(name, storage):
    code = CHILD.format(setup=textwrap.dedent(CALLS[name]), tests_dir=TESTS_DIR)
    return subprocess.Popen([sys.executable, "-c", code, storage], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_started(proc):
    line = proc.stdout.readline()
    assert line.strip() == "started", (line, proc.stderr.read() if proc.poll() is not None else "")
    time.sleep(0.7)  # into the call's steps
    assert proc.poll() is None


@pytest.mark.parametrize("name", list(CALLS))
def test_sigint_raises_keyboardinterrupt_in_a_subprocess(name, tmp_path):
    storage = str(tmp_path)
    proc = _child(name, storage)
    _wait_started(proc)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"{name}: still running 60 s after SIGINT")
    lines = out.split()
    assert "interrupted" in lines, (out, err)
    stopped = float(lines[lines.index("interrupted") + 1])
    print(f"\n{name}: KeyboardInterrupt {stopped - sent:.3f} s after SIGINT")
    assert stopped - sent < LIMIT
    assert proc.returncode == 0, err
    # A later call in the same process worked and gives what a fresh process gives.
    after = float(lines[lines.index("after") + 1])
    fresh = subprocess.run(
        [sys.executable, "-c",
         "import sys\nimport numpy as np\nSTORAGE = sys.argv[1]\n"
         f"sciproxy_tests_dir = {TESTS_DIR!r}\n" + textwrap.dedent(CALLS[name])
         + "\nprint(float(np.sum(np.abs(short()))))", storage],
        capture_output=True, text=True, check=True)
    assert after == float(fresh.stdout.split()[-1])
    assert os.listdir(storage) == []


@pytest.mark.parametrize("name", ["scalar", "scalar_gradient_disk", "tti_demo_fused"])
def test_sigterm_and_sigkill_end_the_process(name, tmp_path):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        proc = _child(name, str(tmp_path))
        _wait_started(proc)
        sent = time.monotonic()
        proc.send_signal(sig)
        proc.communicate(timeout=60)
        took = time.monotonic() - sent
        print(f"\n{name}: {signal.Signals(sig).name} ended the process in {took:.3f} s")
        assert proc.returncode == -sig
        assert took < LIMIT
        assert os.listdir(tmp_path) == []  # the storage files have no name: nothing left


def _long_scalar(nt):
    v = np.full((40, 40), 2000.0)
    amps = np.zeros((1, 1, nt))
    amps[..., :50] = 1.0
    return sciproxy.wave.scalar(v, 5.0, 0.0008, source_amplitudes=amps,
                                source_locations=np.array([[[20, 20]]]),
                                receiver_locations=np.array([[[10, 30]]]), pml_freq=25.0,
                                device="cpu").receiver_amplitudes


def test_interrupt_main_in_process_then_a_call_still_works():
    expected = _long_scalar(200)
    for _ in range(2):  # twice: the first interruption left nothing behind that stops the second
        timer = threading.Timer(0.5, _thread.interrupt_main)
        fired = []
        timer.start()
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            try:
                _long_scalar(2_000_000)
            finally:
                fired.append(time.monotonic())
        timer.join()
        took = fired[0] - start - 0.5
        print(f"\nin process: KeyboardInterrupt {took:.3f} s after interrupt_main")
        assert took < LIMIT
    np.testing.assert_array_equal(_long_scalar(200), expected)
