"""sciproxy.info(), __version__ and the names of the implementations."""

import numpy as np
import pytest
import sciproxy


def test_version():
    assert sciproxy.__version__ == "0.1.0"
    assert sciproxy.info()["version"] == sciproxy.__version__


def test_info():
    info = sciproxy.info()
    for key in ["version", "git_commit", "compiler", "build_type", "build_flags", "backends",
                "cuda_compiled", "cuda_device_count", "cuda_devices", "threads", "cpu_model",
                "auto_device"]:
        assert key in info, key
    assert info["backends"][:2] == ["reference", "cpu"]
    assert ("cuda" in info["backends"]) == info["cuda_compiled"]
    assert info["threads"] >= 1
    assert info["cuda_device_count"] == len(info["cuda_devices"])
    if info["cuda_device_count"] == 0:
        assert info["cuda_unavailable_reason"]
        assert info["auto_device"] == "cpu"
    else:
        assert info["auto_device"] == "cuda:0"


@pytest.mark.parametrize("impl, device", [("reference", "reference"), ("numpy", "reference"),
                                          ("cpu", "cpu"), ("openmp", "cpu")])
def test_impl_names(impl, device):
    assert sciproxy.resolve_impl(impl) == device


def test_auto_runs():
    out, off = sciproxy.parstack([np.ones(3)], np.zeros(1, dtype=np.int32), np.zeros((1, 1), dtype=np.int32),
                                 np.ones((1, 1)))
    np.testing.assert_array_equal(out, [[1.0, 1.0, 1.0]])
    assert off == 0
