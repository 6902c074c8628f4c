"""What the side-by-side benchmarks share: error norm, environment facts, timing, atomic JSON."""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import time

import numpy as np


def rel_l2(out, ref) -> float:
    """||out - ref|| / ||ref|| in float64 (||out - ref|| when ref is 0); inf on a shape mismatch or
    a non-finite value, so that NaN never passes."""
    out = np.asarray(out, dtype=np.float64).ravel()
    ref = np.asarray(ref, dtype=np.float64).ravel()
    if out.shape != ref.shape or not np.isfinite(out).all():
        return float("inf")
    norm = np.linalg.norm(ref)
    diff = np.linalg.norm(out - ref)
    return float(diff / norm) if norm > 0 else float(diff)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_commit() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def timed(call):
    """(seconds, result) of one call."""
    t0 = time.perf_counter()
    out = call()
    return time.perf_counter() - t0, out


def timed_with_usage(call):
    """(seconds, result, usage) of one call; usage is what the process (all its threads) spent in
    the kernel and the page faults it took meanwhile: a call that runs twice as long as its
    neighbours with system time and no faults shared its cores with something, one with faults
    touched fresh pages."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    seconds, out = timed(call)
    after = resource.getrusage(resource.RUSAGE_SELF)
    usage = {"system_seconds": after.ru_stime - before.ru_stime,
             "user_seconds": after.ru_utime - before.ru_utime,
             "minor_faults": after.ru_minflt - before.ru_minflt}
    return seconds, out, usage


def write_json_atomically(path, data):
    """Through a temporary file and a rename: never a half-written file."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
