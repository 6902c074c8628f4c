"""sciproxy: GPU-ready scientific kernels with built-in verification and performance reports.

The Python face of the C++ library, one module per kernel family:

- ``sciproxy.stack``: ``parstack`` and ``argmax``, drop-in replacements for pyrocko's (also
  reachable as ``sciproxy.parstack`` and ``sciproxy.argmax``);
- ``sciproxy.wave``: the scalar propagators, Deepwave's way (``scalar``, ``scalar_born``, ...);
- ``sciproxy.tti``: the coupled P/M TTI propagator and the workshop's one-field operator;
- ``sciproxy.specex``: spectroperfectionism extraction of DESI spectra, specter's PSF and ex2d;
- ``sciproxy.diffusion``: ICON's horizontal diffusion granule, ICON4Py's names;
- ``sciproxy.torch``: the scalar propagators as differentiable PyTorch functions.

::

    import sciproxy
    result, offsetout = sciproxy.parstack(arrays, offsets, shifts, weights, method=0, impl="cpu")
    with sciproxy.record(verify=True) as rec:     # the report of every call, checked against
        out = sciproxy.wave.scalar(...)           # the reference backend
    print(rec.text()); rec.passed
    sciproxy.info()    # version, backends built, CUDA devices, threads

Bad input raises ValueError (a value or shape is wrong), TypeError (a type or dtype is wrong) or
RuntimeError (a backend that was not built or a device that is absent); every message names the
argument, what was expected and what came: ``"shifts: expected integers (int32), got float64 ..."``.
"""

from __future__ import annotations

import atexit

from . import _sciproxy
from . import diffusion, specex, stack, tti, wave
from ._recording import Record, record
from .stack import argmax, parstack, resolve_impl

__version__ = _sciproxy.__version__
__all__ = ["parstack", "argmax", "info", "resolve_impl", "record", "Record", "tolerance", "stack",
           "wave", "tti", "specex", "diffusion", "__version__"]

# The C++ buffers of the CUDA backend persist between calls; free them while CUDA is still alive.
atexit.register(_sciproxy.release_plans)


def tolerance(kernel: str, dtype, output: str = "", **settings) -> float:
    """The relative L2 bound ||out - ref|| / ||ref|| within which the library holds ``output``
    of ``kernel`` ('parstack', 'scalar', 'scalar_gradient', 'scalar_born', 'tti_forward', ...)
    to its reference backend in ``dtype``; ``settings`` as ``sciproxy run --set`` takes them
    (``storage_compression=1``). The same numbers the library's verification uses."""
    import numpy as np

    values = {k: str(v) for k, v in settings.items()}
    values["dtype"] = np.dtype(dtype).name
    return _sciproxy.case_tolerance(kernel, values, output)["rel_l2"]


def info() -> dict:
    """What this build contains and what this machine has.

    Keys: version, git_commit, compiler, build_type, build_flags, backends (built: 'reference',
    'cpu', and 'cuda' when compiled), cuda_compiled, cuda_device_count, cuda_devices (index, name,
    compute_capability, multiprocessors, memory_gib), cuda_unavailable_reason (when there is no
    device), threads (OpenMP default), cpu_model, auto_device (what impl='auto' runs on).
    """
    return dict(_sciproxy.info())
