"""SIGINT and SIGTERM stop a long `sciproxy scalar` run between steps: one line on stderr
("sciproxy: interrupted by SIGINT ..."), exit status 130 (SIGINT) or 143 (SIGTERM), no half-written
--json file, and no gradient storage file left in --storage-dir; nor after SIGKILL (the files have
no name). Prints the measured times from the signal to the exit.

usage: check_interrupt.py SCIPROXY WORKDIR
"""
import os
import signal
import subprocess
import sys
import time

EXE, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
STORAGE = os.path.join(WORK, "storage")
os.makedirs(STORAGE, exist_ok=True)
JSON = os.path.join(WORK, "interrupted.json")
# Minutes of steps (160000 inner steps on a 240 x 240 padded grid), after a short setup.
LONG = ["scalar", "--shape", "200", "200", "--nt", "20000", "--shots", "1", "--receivers", "1",
        "--device", "cpu", "--reps", "1"]
LIMIT = 3.0  # seconds from the signal to the exit, with slack for a loaded machine


def run(extra, sig, delay=1.5):
    for name in os.listdir(STORAGE):
        os.remove(os.path.join(STORAGE, name))
    if os.path.exists(JSON):
        os.remove(JSON)
    proc = subprocess.Popen([EXE] + LONG + extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    time.sleep(delay)
    assert proc.poll() is None, f"the run ended before the signal: {proc.communicate()}"
    sent = time.monotonic()
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"{signal.Signals(sig).name}: still running 30 s after the signal")
    took = time.monotonic() - sent
    name = signal.Signals(sig).name
    print(f"{name} {' '.join(extra) or '(forward)'}: exit {proc.returncode} "
          f"{took:.3f} s after the signal")
    left = os.listdir(STORAGE)
    assert not left, f"{name}: storage files left behind: {left}"
    assert not os.path.exists(JSON), f"{name}: a --json file was written by an interrupted run"
    partial = [n for n in os.listdir(WORK) if n.startswith(".interrupted.json")]
    assert not partial, f"{name}: a partial --json file was left: {partial}"
    return proc.returncode, err, took


for sig, status in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
    for extra in ([], ["--gradient", "--gradient-sampling", "1", "--storage", "disk",
                       "--storage-dir", STORAGE]):
        rc, err, took = run(extra + ["--json", JSON], sig)
        name = signal.Signals(sig).name
        assert rc == status, f"{name}: exit status {rc}, expected {status}; stderr: {err}"
        lines = [l for l in err.splitlines() if l.strip()]
        assert lines and lines[-1].startswith(f"sciproxy: interrupted by {name}"), err
        assert "cancelled at step" in lines[-1], err
        assert took < LIMIT, f"{name}: {took:.2f} s from the signal to the exit"

# SIGKILL cannot be caught: the storage files must vanish with the process anyway.
rc, err, took = run(["--gradient", "--gradient-sampling", "1", "--storage", "disk",
                     "--storage-dir", STORAGE], signal.SIGKILL)
assert rc == -signal.SIGKILL, rc
print("PASS")
