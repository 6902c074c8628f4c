"""pytest configuration of the Python tests: the helper module and a header with the build."""

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Idle OpenMP threads sleep instead of spinning (before any OpenMP runtime starts; the children
# the MPI and CLI tests start inherit it): several ranks of two threads each share the machine's
# cores, and spinning ones take them from the ranks that work. It changes no result.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

# The interruption tests need Python's SIGINT handler, in this process and in the children they
# start. Python keeps SIGINT ignored when it starts with it ignored, as a non-interactive shell
# starts its background jobs; the children would inherit that, though not a handler (exec resets
# handlers to the default, and Python then installs its own).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_report_header(config):
    try:
        import sciproxy
    except ImportError as error:  # the collection errors say more
        return f"sciproxy: not importable ({error})"
    info = sciproxy.info()
    gpus = ", ".join(d["name"] for d in info["cuda_devices"]) or info.get(
        "cuda_unavailable_reason", "none"
    )
    return (
        f"sciproxy {info['version']} ({info['git_commit']}), backends {info['backends']}, "
        f"threads {info['threads']}, GPUs: {gpus}"
    )
