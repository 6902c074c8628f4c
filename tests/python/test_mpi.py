"""The Python functions under MPI: each family's check script (tests/python/mpi/) run by
mpiexec at 1, 2 and 3 ranks (oversubscribed, shared memory and loopback only) against one
process. Skipped, saying why, where mpiexec, mpi4py or the build's MPI support is absent."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import sciproxy

HERE = pathlib.Path(__file__).parent / "mpi"
MPIEXEC = shutil.which("mpiexec") or shutil.which("mpirun")


def _why_not():
    if MPIEXEC is None:
        return "mpiexec not found (Debian: openmpi-bin)"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py not installed"
    if not sciproxy.info()["mpi_compiled"]:
        return "sciproxy was built without MPI"
    return None


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))


def run_under_mpi(script: str, ranks: int, *args: str) -> subprocess.CompletedProcess:
    flags = []
    env = dict(os.environ)
    version = subprocess.run([MPIEXEC, "--version"], capture_output=True, text=True).stdout
    if "Open MPI" in version or "OpenRTE" in version:
        flags = ["--oversubscribe", "--mca", "btl", "self,vader", "--mca", "oob_tcp_if_include", "lo"]
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.run([MPIEXEC, "-n", str(ranks), *flags, sys.executable, str(HERE / script),
                           *args], capture_output=True, text=True, env=env, timeout=600)


# One check script per family (tests/python/mpi/check_<family>.py).
@pytest.mark.parametrize("ranks", [1, 2, 3])
@pytest.mark.parametrize("family", ["stack", "wave", "tti", "tti_demo", "diffusion"])
def test_family_on_ranks_is_one_process(family, ranks):
    done = run_under_mpi(f"check_{family}.py", ranks)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"check_{family}: {ranks} ranks: all checks passed" in done.stdout
