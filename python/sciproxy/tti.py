"""sciproxy.tti: the TTI family. The coupled P/M self-adjoint pseudo-acoustic TTI propagator with variable
density (Bube et al. 2016, as in ChevronETC/WaveFD.jl), its Q sponge and optional free surface,
and its exact adjoint, on numpy arrays::

    import sciproxy.tti as st
    receivers = st.tti(vp, grid_spacing=10.0, dt=0.001, source_amplitudes=amps,
                       source_locations=src, receiver_locations=rec, epsilon=eps, delta=delta,
                       theta=theta, phi=phi, buoyancy=b, free_surface=True)
    grad_amps = st.tti_adjoint(vp, 10.0, 0.001, receiver_amplitudes=residual,
                               source_locations=src, receiver_locations=rec, ...)

Models are 3-D arrays [z, y, x] (axis 0 is depth: the free surface is its first cell); angles in
radians (theta: tilt from axis 0, phi: azimuth from axis 2 towards axis 1); every model array but
vp is optional (buoyancy 1, epsilon = delta = theta = phi = 0, f = 0.85). source_amplitudes
[nshots, nsources, nt]; locations [nshots, n, 3] cell indices. ``tti`` returns the pressure at
the receivers [nshots, nreceivers, nt]; ``tti_adjoint`` takes data of that shape and returns
[nshots, nsources, nt], the exact adjoint (dot-product test to rounding), for RTM and FWI.
A dt beyond the stability limit (``tti_max_dt``) is an error: resample your traces.

Under MPI (``comm=``, an mpi4py intracommunicator): ``tti`` and ``tti_adjoint`` split the padded
grid (model and sponge) into a Cartesian grid of subdomains, one per rank (``process_grid``), and
each rank steps its own with halo exchanges; every rank passes the same arguments and receives
the whole result, one process's bits. The cpu backend only.

The one-field operator of Devito's workshop demo is here too: ``tti_demo`` (returns a
``TtiDemoRun``), ``tti_demo_dt_limit``, ``tti_demo_flops`` and ``ricker``. Every name is also
reachable from ``sciproxy.wave``, where it used to live.

Bad input raises ValueError (a value or shape), TypeError (a type or dtype) or RuntimeError (a
backend not built, a device absent), with a message naming the argument.
"""

from __future__ import annotations

import numpy as np

from . import _args, _sciproxy
from ._args import as_array as _as_array
from ._args import boolean as _bool
from ._args import describe as _describe
from ._args import device as _device
from ._args import float_array as _float_array
from ._args import integer as _integer
from ._args import nparallel as _nparallel
from ._args import real as _real
from ._tti_demo import TtiDemoRun, ricker, tti_demo, tti_demo_dt_limit, tti_demo_flops

__all__ = ["tti", "tti_adjoint", "tti_max_dt", "tti_demo", "tti_demo_dt_limit", "tti_demo_flops",
           "ricker", "TtiDemoRun"]

_MODEL_ARRAYS = ("buoyancy", "epsilon", "delta", "theta", "phi", "f")


def _model(vp, grid_spacing, model: dict):
    vp = _float_array("vp", vp)
    dtype = vp.dtype
    if vp.ndim != 3:
        raise ValueError(f"vp: expected a 3-D array [z, y, x], got shape {vp.shape}")
    vp = np.ascontiguousarray(vp)
    arrays = {}
    for name in _MODEL_ARRAYS:
        value = model.get(name)
        if value is None:
            arrays[name] = None
            continue
        if name == "f" and np.ndim(value) == 0:  # a number: f everywhere
            arrays[name] = None
            continue
        a = _as_array(name, value)
        if a.dtype != dtype:
            raise TypeError(f"{name}: expected a {dtype} array like vp, got {_describe(a)}")
        if a.shape != vp.shape:
            raise ValueError(f"{name}: expected the shape of vp {vp.shape}, got {a.shape}")
        arrays[name] = np.ascontiguousarray(a)
    spacing = _args.per_dimension("grid_spacing", grid_spacing, 3)
    return vp, dtype, arrays, spacing


def _locations(name, value, nshots):
    if value is None:
        return np.zeros((nshots, 0, 3), np.int64)
    a = _args.location_array(name, value, 3)
    if a.shape[0] != nshots:
        raise ValueError(f"{name}: expected {nshots} shots (as the traces), got {_describe(a)}")
    return a


def _check_counts(traces, traces_name, src, source_locations, rec, receiver_locations, adjoint):
    """The traces' second axis counts the sources (forward) or the receivers (adjoint): a
    mismatch is the locations' fault when they are missing, the traces' otherwise."""
    name, locations, given = (("receiver_locations", rec, receiver_locations) if adjoint
                              else ("source_locations", src, source_locations))
    if traces.shape[1] == locations.shape[1]:
        return
    if given is None:
        raise ValueError(f"{name}: expected an array of shape [nshots, {traces.shape[1]}, 3] "
                         f"(one location per trace of {traces_name}), got None")
    raise ValueError(f"{traces_name}: expected shape [nshots, {locations.shape[1]}, nt] (one "
                     f"trace per location of {name}), got {_describe(traces)}")


def _options(model: dict, space_order, sponge_width, q_min, q_interior, freq_q, free_surface,
             nparallel) -> dict:
    if np.ndim(sponge_width) == 0:
        width = [_integer("sponge_width", sponge_width, 0, _args.INT32_MAX)] * 6
    else:
        try:
            items = list(sponge_width)
        except TypeError:
            raise TypeError(f"sponge_width: expected an integer or 6 integers, "
                            f"got {_describe(sponge_width)}") from None
        width = [_integer(f"sponge_width[{i}]", w, 0, _args.INT32_MAX) for i, w in enumerate(items)]
        if len(width) != 6:
            raise ValueError(f"sponge_width: expected an integer or 6 integers, got {len(width)}")
    f = model.get("f")
    default_f = 0.85 if f is None or np.ndim(f) != 0 else _real("f", f)
    return {
        "space_order": _integer("space_order", space_order, 1, _args.INT32_MAX,
                                "a space order (4, 8, 12 or 16)"),
        "sponge_width": width,
        "q_min": _real("q_min", q_min),
        "q_interior": _real("q_interior", q_interior),
        "freq_q": _real("freq_q", freq_q),
        "default_f": default_f,
        "free_surface": _bool("free_surface", free_surface),
        "nparallel": _nparallel(nparallel),
    }


def _call(comm, prepare):
    """``tti`` or ``tti_adjoint``: the argument checks (``prepare()``, which returns the kernel
    and its arguments) agreed across the ranks of `comm`, so that an error on one rank is raised
    on every rank instead of leaving the others waiting in the call, then the call."""
    kernel, args = _args.agree(comm, prepare)
    return kernel(*args)


def _mpi_options(options: dict, handle: int, process_grid) -> dict:
    options.update(comm=handle, process_grid=_args.process_grid(process_grid))
    return options


def _prepare(vp, grid_spacing, dt, traces, traces_name, source_locations,
             receiver_locations, nt, model, options, adjoint, device):
    vp, dtype, arrays, spacing = _model(vp, grid_spacing, model)
    if traces is None:
        raise TypeError(f"{traces_name}: expected a {dtype} array [nshots, n, nt], got None")
    traces = _as_array(traces_name, traces)
    if traces.dtype != dtype:
        raise TypeError(f"{traces_name}: expected a {dtype} array like vp, got {_describe(traces)}")
    if traces.ndim != 3:
        raise ValueError(f"{traces_name}: expected shape [nshots, n, nt], got {traces.shape}")
    nshots = traces.shape[0]
    src = _locations("source_locations", source_locations, nshots)
    rec = _locations("receiver_locations", receiver_locations, nshots)
    _check_counts(traces, traces_name, src, source_locations, rec, receiver_locations, adjoint)
    if nt is None:
        nt = traces.shape[2]
    else:
        # Without traces (shape [nshots, 0, k]) nt says how long to run; with traces it is theirs.
        nt = _integer("nt", nt, 0)
        if traces.shape[1] > 0 and nt != traces.shape[2]:
            raise ValueError(f"nt: expected None or the length of {traces_name} "
                             f"({traces.shape[2]}), got {nt}")
        per_shot = max(src.shape[1], rec.shape[1], 1)
        if nshots * per_shot * nt * dtype.itemsize > _args.INT64_MAX:
            raise ValueError(f"nt: expected a number of samples whose traces ({nshots * per_shot} "
                             f"of nt {dtype.name} values) fit in int64 bytes, got {nt}")
    kernel = getattr(_sciproxy, f"tti_{dtype.name}")
    return kernel, (vp, arrays["buoyancy"], arrays["epsilon"], arrays["delta"], arrays["theta"],
                    arrays["phi"], arrays["f"], spacing, _real("dt", dt), nt, max(nshots, 1),
                    src.shape[1], rec.shape[1], np.ascontiguousarray(traces), src, rec, options,
                    adjoint, _device(device))


def tti(vp, grid_spacing, dt, source_amplitudes, source_locations, receiver_locations=None, *,
        buoyancy=None, epsilon=None, delta=None, theta=None, phi=None, f=None, space_order=8,
        sponge_width=60, q_min=0.1, q_interior=100.0, freq_q=5.0, free_surface=False, nt=None,
        device="auto", nparallel=None, comm=None, process_grid=None):
    """Forward modelling: P at the receivers [nshots, nreceivers, nt] (before each step).

    Sources inject into P and M; ``f`` is an array or a number (default 0.85).

    comm : an mpi4py intracommunicator (None: this process alone). The call is then collective:
        every rank passes the same arguments (``nparallel``, the threads per rank, may differ),
        the padded grid is split among the ranks, and every rank returns the whole receiver
        amplitudes, one process's bits. The cpu backend only. An error on any rank is raised on
        every rank, naming the lowest failing rank.
    process_grid : with `comm`: ranks per axis (z, y, x) of the grid of subdomains, 0 = chosen to
        exchange the fewest halo cells (None: [0, 0, 0]). A grid whose product is not the ranks,
        or that leaves a rank fewer than space_order/2 cells of model and sponge along a split
        axis, is a ValueError naming process_grid."""
    handle = _args.communicator("comm", comm)
    model = dict(buoyancy=buoyancy, epsilon=epsilon, delta=delta, theta=theta, phi=phi, f=f)
    return _call(comm, lambda: _prepare(
        vp, grid_spacing, dt, source_amplitudes, "source_amplitudes", source_locations,
        receiver_locations, nt, model,
        _mpi_options(_options(model, space_order, sponge_width, q_min, q_interior, freq_q,
                              free_surface, nparallel), handle, process_grid),
        False, device))


def tti_adjoint(vp, grid_spacing, dt, receiver_amplitudes, source_locations, receiver_locations,
                *, buoyancy=None, epsilon=None, delta=None, theta=None, phi=None, f=None,
                space_order=8, sponge_width=60, q_min=0.1, q_interior=100.0, freq_q=5.0,
                free_surface=False, nt=None, device="auto", nparallel=None, comm=None,
                process_grid=None):
    """The exact adjoint of ``tti`` with respect to the source amplitudes: receiver data
    [nshots, nreceivers, nt] in, [nshots, nsources, nt] out (sources at the receivers,
    backward in time). ``comm`` and ``process_grid`` as ``tti``'s: every rank returns the whole
    result."""
    handle = _args.communicator("comm", comm)
    model = dict(buoyancy=buoyancy, epsilon=epsilon, delta=delta, theta=theta, phi=phi, f=f)
    return _call(comm, lambda: _prepare(
        vp, grid_spacing, dt, receiver_amplitudes, "receiver_amplitudes", source_locations,
        receiver_locations, nt, model,
        _mpi_options(_options(model, space_order, sponge_width, q_min, q_interior, freq_q,
                              free_surface, nparallel), handle, process_grid),
        True, device))


def tti_max_dt(vp, grid_spacing, *, epsilon=None, space_order=8, sponge_width=60, q_min=0.1,
               q_interior=100.0, freq_q=5.0, free_surface=False) -> float:
    """The largest stable dt for this model and these options (seconds)."""
    model = dict(epsilon=epsilon)
    vp, dtype, arrays, spacing = _model(vp, grid_spacing, model)
    options = _options(model, space_order, sponge_width, q_min, q_interior, freq_q, free_surface,
                       None)
    return getattr(_sciproxy, f"tti_max_dt_{dtype.name}")(vp, arrays["epsilon"], spacing, options)
