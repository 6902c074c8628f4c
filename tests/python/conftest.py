"""pytest configuration of the Python tests: the helper module and a header with the build."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


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
