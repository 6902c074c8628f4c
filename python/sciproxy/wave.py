"""sciproxy.wave: scalar wave propagation with exact adjoint gradients, Deepwave's way.

``scalar`` takes the arguments of ``deepwave.scalar`` (Deepwave 0.0.27's names, shapes, dtypes
and defaults) as numpy arrays and returns Deepwave's tuple in Deepwave's order::

    import sciproxy.wave as sw
    (wavefield_0, wavefield_m1, *psi, *zeta, receiver_amplitudes) = sw.scalar(
        v, grid_spacing=5.0, dt=0.004, source_amplitudes=amps, source_locations=src,
        receiver_locations=rec, accuracy=4, pml_freq=25.0, device="cpu")
    grad_v, grad_source_amplitudes = sw.scalar_gradient(
        v, 5.0, 0.004, source_amplitudes=amps, source_locations=src, receiver_locations=rec,
        pml_freq=25.0, grad_receiver_amplitudes=residual)

``psi`` and ``zeta`` are the C-PML auxiliary fields of each dimension, slowest first (1-D: x;
2-D: y, x; 3-D: z, y, x), so the tuple has 2 + 2 * ndim + 1 entries. The wavefields include the
PML and the stencil halo, so they can be passed back (``wavefield_0=..., wavefield_m1=...,
psiy_m1=...``) to continue a run. Every propagator returns a ``PropagatorOutput``: a tuple
whose entries also have Deepwave's names (``out.receiver_amplitudes``, ``out.wavefield_0``,
``out._asdict()``), so that both positional unpacking and names work. ``sciproxy.torch.scalar``
is the same propagator as a differentiable PyTorch function.

The TTI propagators are in ``sciproxy.tti`` (also reachable here: ``sciproxy.wave.tti``, ...).

Bad input raises ValueError (a value or shape), TypeError (a type or dtype) or RuntimeError (a
backend not built, a device absent), with a message naming the argument.
"""

from __future__ import annotations

import numbers
import os
import warnings

import numpy as np

from . import _args, _sciproxy
from ._args import as_array as _as_array
from ._args import boolean as _bool
from ._args import describe as _describe
from ._args import device as _device
from ._args import integer as _integer
from ._args import nparallel as _nparallel
from ._args import per_dimension as _per_dimension
from ._args import real as _real

__all__ = ["scalar", "scalar_gradient", "scalar_run", "cfl", "PropagatorOutput", "ScalarRun",
           "state_names", "born_names", "IGNORE_LOCATION"]

# A source or receiver whose coordinates are all this value is ignored: it injects nothing and
# records zeros, so shots may have different numbers of each (Deepwave's IGNORE_LOCATION).
IGNORE_LOCATION = -(1 << 31)

_DIM_NAMES = ("z", "y", "x")
_STORAGE_MODES = ("device", "cpu", "disk", "none")

#: The cpu backend's block sizes (ScalarCpuTuning in sciproxy/wave.hpp), for every later call:
#: they change its speed, never its results. Keys: sweep_steps, sweep_cache_bytes,
#: tiles_per_thread, rows_per_block, batch_bytes_per_thread, prefetch_rows; a missing key keeps
#: the library's default.
cpu_tuning: dict = {}


def state_names(ndim: int) -> list:
    """Names of the state entries of the returned tuple, in order (Deepwave's names)."""
    dims = _DIM_NAMES[3 - ndim:]
    return (["wavefield_0", "wavefield_m1"] + [f"psi{d}_m1" for d in dims]
            + [f"zeta{d}_m1" for d in dims])


def _ndim(v, source_locations, receiver_locations, state) -> int:
    """Deepwave's rule: the locations' last axis, else the wavefields, else v's own rank."""
    for name, loc in (("source_locations", source_locations),
                      ("receiver_locations", receiver_locations)):
        if loc is not None:
            if loc.ndim != 3:
                raise ValueError(
                    f"{name}: expected an array of shape [n_shots, n, ndim], got {_describe(loc)}")
            if not 1 <= loc.shape[-1] <= 3:
                raise ValueError(f"{name}: expected ndim (the last axis) 1, 2 or 3, "
                                 f"got {_describe(loc)}")
            return int(loc.shape[-1])
    for name, value in state.items():
        if value is not None:
            if name.startswith(("psiz", "zetaz")):
                return 3
    for name in ("wavefield_0", "wavefield_m1"):
        if state.get(name) is not None:
            nd = state[name].ndim - 1
            if not 1 <= nd <= 3:
                raise ValueError(f"{name}: expected an array of shape [n_shots, *padded_shape] "
                                 f"with 1 to 3 spatial dimensions, got {_describe(state[name])}")
            return nd
    for name, value in state.items():
        if value is not None:
            nd = value.ndim - 1
            if 1 <= nd <= 3:
                return nd
    if not 1 <= v.ndim <= 3:
        raise ValueError(f"v: expected a model of 1 to 3 dimensions (or give source or receiver "
                         f"locations, whose last axis says ndim), got {_describe(v)}")
    return v.ndim


def _per_side(name: str, value, ndim: int, *, allow_none: bool, default: int) -> list:
    """An int for every side, or a sequence of 2*ndim (dim0 low, dim0 high, dim1 low, ...)."""
    if value is None:
        return [default] * (2 * ndim) + [default] * (6 - 2 * ndim)
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        sides = [_integer(name, value, -1 if allow_none else 0)] * (2 * ndim)
    else:
        try:
            items = list(value)
        except TypeError:
            raise TypeError(f"{name}: expected an integer or a sequence of {2 * ndim} "
                            f"(one per side), got {_describe(value)}") from None
        if len(items) != 2 * ndim:
            raise ValueError(f"{name}: expected an integer or {2 * ndim} values (one per side: "
                             f"dim0 low, dim0 high, ...), got {len(items)} values")
        sides = []
        for i, item in enumerate(items):
            if item is None and allow_none:
                sides.append(-1)
            else:
                sides.append(_integer(f"{name}[{i}]", item, 0))
    for i, s in enumerate(sides):
        if s < -1 or (s == -1 and not allow_none):
            raise ValueError(f"{name}: expected widths >= 0, got {s} at side {i}")
    return sides + [default] * (6 - 2 * ndim)


def _prepare(v, grid_spacing, dt, source_amplitudes, source_locations, receiver_locations,
             accuracy, pml_width, pml_freq, max_vel, survey_pad, state, origin, nt,
             model_gradient_sampling_interval, freq_taper_frac, time_pad_frac, time_taper,
             storage_mode, storage_path, storage_compression, device, nparallel, stacklevel,
             autotune=False, comm=None, shots="all", results="all"):
    """Checks and normalises the arguments; returns what the extension needs."""
    v = _as_array("v", v)
    if v.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"v: expected a float32 or float64 array, got {_describe(v)}")
    dtype = v.dtype

    def locations(name, value):
        return None if value is None else _args.location_array(name, value)

    source_locations = locations("source_locations", source_locations)
    receiver_locations = locations("receiver_locations", receiver_locations)
    state = {k: (None if a is None else _as_array(k, a)) for k, a in state.items()}
    ndim = _ndim(v, source_locations, receiver_locations, state)
    names = state_names(ndim)
    for k, a in state.items():
        if a is not None and k not in names:
            raise ValueError(f"{k}: not used by a {ndim}-D model (its state is {', '.join(names)})")

    if v.ndim == ndim:
        nmodels, shape = 1, v.shape
    elif v.ndim == ndim + 1:
        nmodels, shape = v.shape[0], v.shape[1:]
    else:
        raise ValueError(f"v: expected [*model_shape] or [n_shots, *model_shape] with {ndim} "
                         f"model dimensions, got {_describe(v)}")
    if min(shape) < 1 or nmodels < 1:
        raise ValueError(f"v: expected at least one cell in every dimension, got {_describe(v)}")

    spacing = _per_dimension("grid_spacing", grid_spacing, ndim)
    dt = _real("dt", dt, positive=True)

    if (source_amplitudes is None) != (source_locations is None):
        given = "source_amplitudes" if source_locations is None else "source_locations"
        missing = "source_locations" if source_locations is None else "source_amplitudes"
        raise ValueError(f"{missing}: expected an array when {given} is given, got None")
    amplitudes = None
    if source_amplitudes is not None:
        amplitudes = _as_array("source_amplitudes", source_amplitudes)
        if amplitudes.dtype.kind not in "biuf":
            raise TypeError(f"source_amplitudes: expected real numbers, got {_describe(amplitudes)}")
        if amplitudes.ndim != 3:
            raise ValueError(f"source_amplitudes: expected shape [n_shots, n_sources, nt], "
                             f"got {_describe(amplitudes)}")
        if amplitudes.shape[:2] != source_locations.shape[:2]:
            raise ValueError(f"source_amplitudes: expected [n_shots, n_sources] = "
                             f"{list(source_locations.shape[:2])} (those of source_locations), "
                             f"got {_describe(amplitudes)}")
    if receiver_locations is not None and receiver_locations.shape[-1] != ndim:
        raise ValueError(f"receiver_locations: expected {ndim} coordinates per receiver (as "
                         f"source_locations), got {_describe(receiver_locations)}")

    # Shots: every array that has a shot axis must agree.
    shot_counts = []
    if amplitudes is not None:
        shot_counts.append(("source_amplitudes", amplitudes.shape[0]))
    if receiver_locations is not None:
        shot_counts.append(("receiver_locations", receiver_locations.shape[0]))
    for k in names:
        if state.get(k) is not None:
            shot_counts.append((k, state[k].shape[0]))
    if nmodels > 1:
        shot_counts.append(("v", nmodels))
    nshots = shot_counts[0][1] if shot_counts else 1
    for name, n in shot_counts:
        if n != nshots:
            raise ValueError(f"{name}: expected {nshots} shots (as {shot_counts[0][0]}), got {n}")
    if nshots < 1:
        raise ValueError(f"{shot_counts[0][0]}: expected at least one shot, got 0")

    if amplitudes is not None:
        if nt is not None and _integer("nt", nt, 0) != amplitudes.shape[-1]:
            raise ValueError(f"nt: expected None or the length of source_amplitudes "
                             f"({amplitudes.shape[-1]}), got {nt}")
        nt = amplitudes.shape[-1]
    elif nt is None:
        raise ValueError("nt: expected the number of time steps when source_amplitudes is None, "
                         "got None")
    else:
        nt = _integer("nt", nt, 0)
    nsources = 0 if source_locations is None else source_locations.shape[1]
    nreceivers = 0 if receiver_locations is None else receiver_locations.shape[1]
    # The traces are [n_shots, n, nt] arrays: refuse an nt whose arrays no address can hold here,
    # by name, rather than as numpy's "array is too big" (or a wrapped size further down).
    traces = nshots * max(nsources, nreceivers, 1)
    if traces * nt * np.dtype(dtype).itemsize > _args.INT64_MAX:
        raise ValueError(f"nt: expected a number of samples whose traces ({traces} of nt "
                         f"{np.dtype(dtype).name} values) fit in int64 bytes, got {nt}")
    if amplitudes is None:
        amplitudes = np.zeros((nshots, 0, nt), dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        amplitudes = np.ascontiguousarray(amplitudes, dtype=dtype)
    if source_locations is None:
        source_locations = np.zeros((nshots, 0, ndim), np.int64)
    if receiver_locations is None:
        receiver_locations = np.zeros((nshots, 0, ndim), np.int64)

    accuracy = _integer("accuracy", accuracy, 2, 8, "2, 4, 6 or 8")
    if accuracy not in (2, 4, 6, 8):
        raise ValueError(f"accuracy: expected 2, 4, 6 or 8, got {accuracy}")
    pml = _per_side("pml_width", pml_width, ndim, allow_none=False, default=0)
    pad = _per_side("survey_pad", survey_pad, ndim, allow_none=True, default=-1)
    if pml_freq is None:
        warnings.warn("pml_freq was not set, so defaulting to 25 Hz (as Deepwave does); pass "
                      "pml_freq=<dominant frequency> to silence this", stacklevel=stacklevel)
        pml_freq = 25.0
    pml_freq = _real("pml_freq", pml_freq, nonnegative=True)
    max_vel = 0.0 if max_vel is None else abs(_real("max_vel", max_vel))
    if origin is not None:
        try:
            items = list(origin)
        except TypeError:
            raise TypeError(f"origin: expected one cell index per dimension, "
                            f"got {_describe(origin)}") from None
        if len(items) != ndim:
            raise ValueError(f"origin: expected {ndim} cell indices (one per dimension), "
                             f"got {len(items)}")
        origin = [_integer(f"origin[{i}]", x, 0) for i, x in enumerate(items)]
    if storage_mode not in _STORAGE_MODES:
        raise ValueError(f"storage_mode: expected one of {', '.join(map(repr, _STORAGE_MODES))}, "
                         f"got {storage_mode!r}")
    if storage_path is not None and not isinstance(storage_path, (str, os.PathLike)):
        raise TypeError(f"storage_path: expected a directory path or None (the system's temporary "
                        f"directory), got {_describe(storage_path)}")
    options = {
        "accuracy": accuracy,
        "pml_width": pml,
        "survey_pad": pad,
        "origin": origin,
        "pml_freq": pml_freq,
        "max_vel": max_vel,
        "model_gradient_sampling_interval": _integer(
            "model_gradient_sampling_interval", model_gradient_sampling_interval, 1),
        "freq_taper_frac": _real("freq_taper_frac", freq_taper_frac, nonnegative=True),
        "time_pad_frac": _real("time_pad_frac", time_pad_frac, nonnegative=True),
        "time_taper": _bool("time_taper", time_taper),
        "storage_mode": storage_mode,
        "storage_compression": _bool("storage_compression", storage_compression),
        "storage_path": "" if storage_path is None else os.fspath(storage_path),
        "nparallel": _nparallel(nparallel),
        "cpu_tuning": {str(k): int(v) for k, v in cpu_tuning.items()},
        "autotune": _bool("autotune", autotune),
    }
    if comm is not None:
        options.update(_ranks(comm, shots, results, nshots))
    if options["freq_taper_frac"] > 1:
        raise ValueError(f"freq_taper_frac: expected a fraction in [0, 1], "
                         f"got {options['freq_taper_frac']}")

    initial = _state_tuple(state, names, ndim, nshots, dtype)
    v = np.ascontiguousarray(v)
    args = (v, int(nmodels), ndim, [int(n) for n in shape], spacing, dt, int(nt), int(nshots),
            int(nsources), int(nreceivers), amplitudes, source_locations, receiver_locations,
            options)
    return args, initial, _device(device), dtype


_SHOTS = {"all": 0, "own": 1}
_RESULTS = {"all": 0, "root": 1, "own": 2}


def _ranks(comm, shots, results, nshots) -> dict:
    """The MPI options: the communicator's handle, how the shots are given and where the outputs
    go, and the shots whose outputs this rank receives (the outputs' first dimension)."""
    handle = _args.communicator("comm", comm)
    if not isinstance(shots, str) or shots not in _SHOTS:
        raise ValueError(f"shots: expected 'all' or 'own', got {_describe(shots)}")
    allowed = ("all", "root") if shots == "all" else ("own",)
    if not isinstance(results, str) or results not in allowed:
        raise ValueError(f"results: expected {' or '.join(repr(a) for a in allowed)} with "
                         f"shots={shots!r}, got {_describe(results)}")
    held = 0 if results == "root" and comm.Get_rank() != 0 else nshots
    return {"comm": handle, "shots": _SHOTS[shots], "results": _RESULTS[results],
            "held_shots": held}


def _state_tuple(state: dict, names: list, ndim: int, nshots: int, dtype, label=None):
    """(wavefield_0, wavefield_m1, [psi], [zeta]) with zeros for what was not given, or None.

    label(name): the caller's argument for the state field `name` (errors name it); default
    the name itself."""
    label = label or (lambda k: k)
    given = [k for k in names if state.get(k) is not None]
    if not given:
        return None
    shape = state[given[0]].shape
    if len(shape) != ndim + 1:
        raise ValueError(f"{label(given[0])}: expected shape [n_shots, *padded_shape] with {ndim} "
                         f"spatial dimensions, got {_describe(state[given[0]])}")
    arrays = {}
    for k in names:
        a = state.get(k)
        if a is None:
            arrays[k] = np.zeros(shape, dtype)
            continue
        if a.dtype.kind not in "biuf":
            raise TypeError(f"{label(k)}: expected real numbers, got {_describe(a)}")
        if a.shape != shape:
            raise ValueError(f"{label(k)}: expected shape {shape} (that of {label(given[0])}), "
                             f"got {_describe(a)}")
        arrays[k] = np.ascontiguousarray(a, dtype=dtype)
    return (arrays["wavefield_0"], arrays["wavefield_m1"],
            [arrays[k] for k in names[2:2 + ndim]], [arrays[k] for k in names[2 + ndim:]])


def _kernel(name: str, dtype, ndim: int):
    """The extension's function for this dtype; its errors name this API's arguments."""
    return getattr(_sciproxy, f"{name}_{'float32' if dtype == np.float32 else 'float64'}")


class PropagatorOutput(tuple):
    """What a propagator returns: a tuple whose entries also have names, as Deepwave's
    ``PropagatorOutput``: ``out.receiver_amplitudes``, ``out.wavefield_0``, ``out._fields``,
    ``out._asdict()``, and positional unpacking as before (``*state, receivers = out``).

    A forward run also carries what it measured: ``step_ratio``, ``inner_dt``, ``work`` (points,
    flops, bytes of the work model), ``timers`` ({region: {calls, total}}), ``device`` and
    ``storage_bytes`` (None where not measured).
    """

    step_ratio = None
    inner_dt = None
    work = None
    timers = None
    device = None
    storage_bytes = None

    def __new__(cls, fields, values, **measured):
        values = tuple(values)
        fields = tuple(fields)
        if len(fields) != len(values):
            raise ValueError(f"PropagatorOutput: {len(fields)} names for {len(values)} values")
        out = super().__new__(cls, values)
        out._fields = fields
        for key, value in measured.items():
            setattr(out, key, value)
        return out

    def __getattr__(self, name):
        fields = self.__dict__.get("_fields", ())
        if name in fields:
            return self[fields.index(name)]
        raise AttributeError(f"{type(self).__name__} has no field {name!r} (its fields: "
                             f"{', '.join(fields)})")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.__dict__.get("_fields", ())))

    def _asdict(self) -> dict:
        return dict(zip(self._fields, self))

    def __repr__(self):
        def short(x):
            if isinstance(x, np.ndarray):
                return f"<{x.dtype} array {x.shape}>"
            return repr(x)
        inner = ", ".join(f"{k}={short(x)}" for k, x in zip(self._fields, self))
        return f"{type(self).__name__}({inner})"

    def __reduce__(self):
        extra = {k: v for k, v in self.__dict__.items() if k != "_fields"}
        return (_rebuild_output, (type(self), self._fields, tuple(self), extra))


def _rebuild_output(cls, fields, values, extra):
    return cls(fields, values, **extra)


# The name this class had before it was Deepwave's PropagatorOutput with names.
ScalarRun = PropagatorOutput


def born_names(ndim: int) -> list:
    """Names of the entries ``scalar_born`` returns, in order (Deepwave's names)."""
    dims = _DIM_NAMES[3 - ndim:]
    background = state_names(ndim)
    scattered = (["wavefield_sc_0", "wavefield_sc_m1"] + [f"psi{d}_sc_m1" for d in dims]
                 + [f"zeta{d}_sc_m1" for d in dims])
    return background + scattered + ["bg_receiver_amplitudes", "receiver_amplitudes"]


def _run(out: dict, ndim: int) -> PropagatorOutput:
    return PropagatorOutput(
        state_names(ndim) + ["receiver_amplitudes"],
        (out["wavefield_0"], out["wavefield_m1"], *out["psi"], *out["zeta"],
         out["receiver_amplitudes"]),
        step_ratio=int(out["step_ratio"]), inner_dt=float(out["inner_dt"]), work=dict(out["work"]),
        timers=dict(out.get("timers", {})), device=out.get("device", ""),
        storage_bytes=float(out.get("storage_bytes", 0.0)))


def scalar_run(v, grid_spacing, dt, source_amplitudes=None, source_locations=None,
               receiver_locations=None, accuracy=4, pml_width=20, pml_freq=None, max_vel=None,
               survey_pad=None, wavefield_0=None, wavefield_m1=None, psiz_m1=None, psiy_m1=None,
               psix_m1=None, zetaz_m1=None, zetay_m1=None, zetax_m1=None, origin=None, nt=None,
               model_gradient_sampling_interval=1, freq_taper_frac=0.0, time_pad_frac=0.0,
               time_taper=False, storage_mode="device", storage_path=None,
               storage_compression=False, device="auto", nparallel=None, autotune=False,
               _stacklevel=2, comm=None, shots="all", results="all"):
    """``scalar`` (kept for callers that used it: ``scalar`` returns the same object now)."""
    state = dict(wavefield_0=wavefield_0, wavefield_m1=wavefield_m1, psiz_m1=psiz_m1,
                 psiy_m1=psiy_m1, psix_m1=psix_m1, zetaz_m1=zetaz_m1, zetay_m1=zetay_m1,
                 zetax_m1=zetax_m1)
    args, initial, dev, dtype = _args.agree(comm, lambda: _prepare(
        v, grid_spacing, dt, source_amplitudes, source_locations, receiver_locations, accuracy,
        pml_width, pml_freq, max_vel, survey_pad, state, origin, nt,
        model_gradient_sampling_interval, freq_taper_frac, time_pad_frac, time_taper,
        storage_mode, storage_path, storage_compression, device, nparallel, _stacklevel + 3,
        autotune, comm, shots, results))
    return _run(_kernel("scalar", dtype, args[2])(*args, initial, dev), args[2])


def scalar(v, grid_spacing, dt, source_amplitudes=None, source_locations=None,
           receiver_locations=None, accuracy=4, pml_width=20, pml_freq=None, max_vel=None,
           survey_pad=None, wavefield_0=None, wavefield_m1=None, psiz_m1=None, psiy_m1=None,
           psix_m1=None, zetaz_m1=None, zetay_m1=None, zetax_m1=None, origin=None, nt=None,
           model_gradient_sampling_interval=1, freq_taper_frac=0.0, time_pad_frac=0.0,
           time_taper=False, storage_mode="device", storage_path=None, storage_compression=False,
           device="auto", nparallel=None, *, autotune=False, comm=None, shots="all",
           results="all"):
    """Scalar wave propagation, like ``deepwave.scalar`` (numpy arrays in and out).

    Parameters
    ----------
    v : float32 or float64 array [*model_shape] or [n_shots, *model_shape], m/s. Its dtype is
        the dtype of the computation and of every output.
    grid_spacing : float, or one per dimension (metres).
    dt : seconds per sample of the source and receiver traces. A dt above the CFL limit is
        resampled: the propagator takes step_ratio inner steps per dt.
    source_amplitudes : [n_shots, n_sources, nt]; source_locations : int [n_shots, n_sources,
        ndim] cell indices; receiver_locations : int [n_shots, n_receivers, ndim]. A location
        whose coordinates are all IGNORE_LOCATION is ignored (injects nothing, records zeros).
    accuracy : 2, 4, 6 or 8 (spatial order of the stencils).
    pml_width : int or one per side (dim0 low, dim0 high, dim1 low, ...), cells.
    pml_freq : Hz; None: 25 Hz with a warning (as Deepwave).
    max_vel : m/s for the PML and the CFL limit; None: max |v|.
    survey_pad : None (the whole model), an int or one per side (None: to the edge): model
        only the cells spanned by the sources and receivers, widened by this many cells.
    wavefield_0, wavefield_m1, psi*_m1, zeta*_m1 : initial state, each [n_shots,
        *padded_shape] as a previous call returned it (the ones not given are zero).
    origin : with an initial state and no survey_pad, the model cell where the state's window
        begins (one index per dimension; None: the first cell). The window spans the state's
        padded shape less the PML and the halo (as Deepwave).
    nt : number of samples when there are no source amplitudes.
    model_gradient_sampling_interval, freq_taper_frac, time_pad_frac, time_taper,
    storage_mode ('device', 'cpu', 'disk', 'none'), storage_path, storage_compression :
        as Deepwave's (storage matters for scalar_gradient only). storage_path: the directory
        of the 'disk' storage, None (the default) for $TMPDIR, else /tmp; never the current
        directory. Its files have no name, so nothing is left behind however the process ends.
    device : 'auto', 'reference', 'cpu', 'cuda', 'cuda:N'.
    nparallel : threads of the cpu backend; None: all.
    autotune : cpu backend: choose the forward's steps per sweep and its tiles (3-D) or rows per
        block (2-D) by timing candidates on a few steps of this problem, cached per machine,
        shape, accuracy, dtype and thread count (later calls read the cache). The results are
        the same bits; ``cpu_tuning`` gives the sizes by hand instead.
    comm : an mpi4py intracommunicator (None: this process alone). The call is then collective:
        the shots are split across the ranks, each rank propagates its own, and every shot's
        outputs are the same bits as one process computes; a model shared by the shots gets its
        gradient summed over the ranks (scalar_gradient). An error on any rank is raised on
        every rank.
    shots : with `comm`: 'all' (every rank passes every shot, the same arrays) or 'own' (each
        rank passes its own shots; the model is shared).
    results : with shots='all': 'all' (every rank receives every shot's outputs) or 'root' (rank
        0 does; the others receive arrays of 0 shots). With shots='own': 'own'.

    Returns
    -------
    PropagatorOutput (wavefield_0, wavefield_m1, *psi_m1, *zeta_m1, receiver_amplitudes): the
    final state, each [n_shots, *padded_shape] (psi, zeta: one per dimension, slowest first), and
    the receiver amplitudes [n_shots, n_receivers, nt]; the entries also by name
    (``out.receiver_amplitudes``), and what the run measured (``out.step_ratio``, ``out.work``,
    ``out.timers``, ``out.device``).
    """
    return scalar_run(
        v, grid_spacing, dt, source_amplitudes, source_locations, receiver_locations, accuracy,
        pml_width, pml_freq, max_vel, survey_pad, wavefield_0, wavefield_m1, psiz_m1, psiy_m1,
        psix_m1, zetaz_m1, zetay_m1, zetax_m1, origin, nt, model_gradient_sampling_interval,
        freq_taper_frac, time_pad_frac, time_taper, storage_mode, storage_path,
        storage_compression, device, nparallel, autotune=autotune, _stacklevel=3, comm=comm,
        shots=shots, results=results)


def scalar_gradient(v, grid_spacing, dt, source_amplitudes=None, source_locations=None,
                    receiver_locations=None, accuracy=4, pml_width=20, pml_freq=None,
                    max_vel=None, survey_pad=None, wavefield_0=None, wavefield_m1=None,
                    psiz_m1=None, psiy_m1=None, psix_m1=None, zetaz_m1=None, zetay_m1=None,
                    zetax_m1=None, origin=None, nt=None, model_gradient_sampling_interval=1,
                    freq_taper_frac=0.0, time_pad_frac=0.0, time_taper=False,
                    storage_mode="device", storage_path=None, storage_compression=False,
                    device="auto", nparallel=None, *, grad_receiver_amplitudes=None,
                    grad_final_state=None, return_details=False, autotune=False, comm=None,
                    shots="all", results="all"):
    """Gradient of a loss with respect to v and the source amplitudes.

    Takes ``scalar``'s arguments and ``grad_receiver_amplitudes`` [n_shots, n_receivers, nt]:
    the gradient of the loss with respect to the receiver amplitudes (for the L2 misfit
    0.5 * ||d - d_obs||^2 it is the residual d - d_obs). ``grad_final_state`` (optional): a
    dict of the gradients with respect to the returned final state, by Deepwave's names
    ('wavefield_0', 'wavefield_m1', 'psiy_m1', ...). Runs the forward pass and its exact
    adjoint.

    Returns (grad_v, grad_source_amplitudes): grad_v of v's shape; grad_source_amplitudes of
    source_amplitudes' shape (None without sources). With ``return_details=True``: a dict with
    'grad_v', 'grad_source_amplitudes', 'grad_initial_state' (by Deepwave's names, or None),
    'forward' (the ScalarRun of the forward pass), 'timers' and 'device'.
    """
    state = dict(wavefield_0=wavefield_0, wavefield_m1=wavefield_m1, psiz_m1=psiz_m1,
                 psiy_m1=psiy_m1, psix_m1=psix_m1, zetaz_m1=zetaz_m1, zetay_m1=zetay_m1,
                 zetax_m1=zetax_m1)
    args, initial, dev, dtype = _args.agree(comm, lambda: _prepare(
        v, grid_spacing, dt, source_amplitudes, source_locations, receiver_locations, accuracy,
        pml_width, pml_freq, max_vel, survey_pad, state, origin, nt,
        model_gradient_sampling_interval, freq_taper_frac, time_pad_frac, time_taper,
        storage_mode, storage_path, storage_compression, device, nparallel, 4, autotune, comm,
        shots, results))
    v_shape = np.shape(v)
    grad_final, grad_r = _args.agree(comm, lambda: _gradient_inputs(
        args, dtype, grad_receiver_amplitudes, grad_final_state))
    ndim = args[2]
    names = state_names(ndim)
    out = _kernel("scalar_gradient", dtype, ndim)(*args, initial, grad_r, grad_final, dev)
    held = args[-1].get("held_shots", args[7])
    if len(v_shape) > ndim and held != v_shape[0]:  # a model per shot: this rank's models
        v_shape = (held,) + tuple(v_shape[1:])
    grad_v = out["grad_v"].reshape(v_shape)
    grad_src = out["grad_source_amplitudes"] if source_amplitudes is not None else None
    if not return_details:
        return PropagatorOutput(("grad_v", "grad_source_amplitudes"), (grad_v, grad_src))
    gi = out["grad_initial"]
    grad_initial = None
    if gi is not None:
        grad_initial = dict(zip(names, (gi["wavefield_0"], gi["wavefield_m1"], *gi["psi"],
                                        *gi["zeta"])))
    return {"grad_v": grad_v, "grad_source_amplitudes": grad_src,
            "grad_initial_state": grad_initial, "forward": _run(out["forward"], ndim),
            "timers": dict(out["timers"]), "device": out["device"]}


def _gradient_inputs(args, dtype, grad_receiver_amplitudes, grad_final_state):
    """The receiver and final-state gradients, checked against the call's shapes."""
    ndim, nt_, nshots, nreceivers = args[2], args[6], args[7], args[9]
    names = state_names(ndim)

    grad_final = None
    if grad_final_state is not None:
        if not isinstance(grad_final_state, dict):
            raise TypeError(f"grad_final_state: expected a dict by state name ({', '.join(names)})"
                            f", got {_describe(grad_final_state)}")
        unknown = set(grad_final_state) - set(names)
        if unknown:
            raise ValueError(f"grad_final_state: unknown names {sorted(unknown)}; expected some "
                             f"of {', '.join(names)}")
        grad_final = _state_tuple(
            {k: (None if a is None else _as_array(f"grad_final_state[{k!r}]", a))
             for k, a in grad_final_state.items()}, names, ndim, nshots, dtype,
            lambda k: f"grad_final_state[{k!r}]")
    if grad_receiver_amplitudes is None:
        if grad_final is None:
            raise ValueError("grad_receiver_amplitudes: expected an array [n_shots, n_receivers, "
                             "nt] (the gradient of the loss with respect to the receiver "
                             "amplitudes), got None")
        grad_r = np.zeros((nshots, nreceivers, nt_), dtype)
    else:
        grad_r = _as_array("grad_receiver_amplitudes", grad_receiver_amplitudes)
        if grad_r.dtype.kind not in "biuf":
            raise TypeError(f"grad_receiver_amplitudes: expected real numbers, got {_describe(grad_r)}")
        if grad_r.shape != (nshots, nreceivers, nt_):
            raise ValueError(f"grad_receiver_amplitudes: expected shape ({nshots}, {nreceivers}, "
                             f"{nt_}) (that of the receiver amplitudes), got {_describe(grad_r)}")
        grad_r = np.ascontiguousarray(grad_r, dtype=dtype)
    return grad_final, grad_r


def cfl(grid_spacing, dt, max_vel):
    """(inner_dt, step_ratio): Deepwave's CFL rule (``deepwave.common.cfl_condition_n``).

    max_dt = 0.6 / sqrt(sum 1 / dx_i^2) / max_vel; step_ratio = ceil(dt / max_dt);
    inner_dt = dt / step_ratio.
    """
    if isinstance(grid_spacing, numbers.Real) and not isinstance(grid_spacing, (bool, np.bool_)):
        spacing = [_real("grid_spacing", grid_spacing, positive=True)]
    else:
        if isinstance(grid_spacing, (str, bytes)):
            raise TypeError(f"grid_spacing: expected a number or one per dimension, "
                            f"got {_describe(grid_spacing)}")
        try:
            items = list(grid_spacing)
        except TypeError:
            raise TypeError(f"grid_spacing: expected a number or one per dimension, "
                            f"got {_describe(grid_spacing)}") from None
        spacing = [_real(f"grid_spacing[{i}]", x, positive=True) for i, x in enumerate(items)]
        if not 1 <= len(spacing) <= 3:
            raise ValueError(f"grid_spacing: expected 1 to 3 values, got {len(spacing)}")
    inner_dt, step_ratio = _sciproxy.scalar_cfl(len(spacing), spacing, _real("dt", dt, positive=True),
                                                abs(_real("max_vel", max_vel)))
    return float(inner_dt), int(step_ratio)


# ---------------------------------------------------------------------------------------------
# Born (linearised) modelling, deepwave.scalar_born


def _born_arrays(v, scatter, bg_receiver_locations, args, dtype, required):
    """scatter of v's shape (None: zeros when not required) and int64 background receivers."""
    ndim, nshots = args[2], args[7]
    v_arr = args[0]
    if scatter is None:
        if required:
            raise ValueError(f"scatter: expected an array of v's shape {v_arr.shape}, got None")
        scatter = np.zeros(v_arr.shape, dtype)
    else:
        scatter = _as_array("scatter", scatter)
        if scatter.dtype.kind not in "biuf":
            raise TypeError(f"scatter: expected real numbers, got {_describe(scatter)}")
        if scatter.size != v_arr.size or (scatter.shape != np.shape(v) and
                                          scatter.shape != v_arr.shape):
            raise ValueError(f"scatter: expected v's shape {np.shape(v)}, got {_describe(scatter)}")
        with np.errstate(over="ignore", invalid="ignore"):
            scatter = np.ascontiguousarray(scatter, dtype=dtype).reshape(v_arr.shape)
    if bg_receiver_locations is None:
        bg = np.zeros((nshots, 0, ndim), np.int64)
    else:
        bg = _args.location_array("bg_receiver_locations", bg_receiver_locations)
        if bg.shape[0] != nshots or bg.shape[2] != ndim:
            raise ValueError(f"bg_receiver_locations: expected shape [n_shots={nshots}, "
                             f"n_receivers, ndim={ndim}], got {_describe(bg)}")
    return scatter, bg


def scalar_born(v, scatter, grid_spacing, dt, source_amplitudes=None, source_locations=None,
                receiver_locations=None, bg_receiver_locations=None, accuracy=4, pml_width=20,
                pml_freq=None, max_vel=None, survey_pad=None, wavefield_0=None, wavefield_m1=None,
                wavefield_sc_0=None, wavefield_sc_m1=None, origin=None, nt=None,
                model_gradient_sampling_interval=1, freq_taper_frac=0.0, time_pad_frac=0.0,
                time_taper=False, device="auto", nparallel=None, *, autotune=False, comm=None,
                shots="all", results="all"):
    """Born modelling, like ``deepwave.scalar_born`` (numpy arrays in and out).

    ``scatter`` (v's shape, m/s) is the velocity perturbation; the scattered field is the exact
    derivative of ``scalar``'s wavefield in that direction (PML profiles, max_vel and the step
    ratio held at their values for v). ``receiver_locations`` record the scattered field,
    ``bg_receiver_locations`` (optional) the background. Other arguments as ``scalar``
    (``comm``, ``shots`` and ``results`` included).

    Returns (wavefield_0, wavefield_m1, *psi_m1, *zeta_m1, wavefield_sc_0, wavefield_sc_m1,
    *psi_sc_m1, *zeta_sc_m1, bg_receiver_amplitudes, receiver_amplitudes): Deepwave 0.0.27's
    order (0.1's PropagatorOutput groups the PML fields into one auxiliary_state); the data are
    [n_shots, n_receivers, nt] (background data empty without bg_receiver_locations).
    """
    state = dict(wavefield_0=wavefield_0, wavefield_m1=wavefield_m1)

    def prepare():
        args, initial, dev, dtype = _prepare(
            v, grid_spacing, dt, source_amplitudes, source_locations, receiver_locations,
            accuracy, pml_width, pml_freq, max_vel, survey_pad, state, origin, nt,
            model_gradient_sampling_interval, freq_taper_frac, time_pad_frac, time_taper,
            "device", ".", False, device, nparallel, 5, autotune, comm, shots, results)
        ndim, nshots = args[2], args[7]
        scatter_, bg = _born_arrays(v, scatter, bg_receiver_locations, args, dtype, True)
        sc_state = {"wavefield_0": None if wavefield_sc_0 is None else _as_array(
                        "wavefield_sc_0", wavefield_sc_0),
                    "wavefield_m1": None if wavefield_sc_m1 is None else _as_array(
                        "wavefield_sc_m1", wavefield_sc_m1)}
        initial_sc = _state_tuple(sc_state, state_names(ndim), ndim, nshots, dtype,
                                  lambda k: k.replace("wavefield_", "wavefield_sc_"))
        return args, initial, dev, dtype, scatter_, bg, initial_sc

    args, initial, dev, dtype, scatter, bg, initial_sc = _args.agree(comm, prepare)
    ndim = args[2]
    out = _kernel("scalar_born", dtype, ndim)(*args, scatter, bg, int(bg.shape[1]), initial,
                                               initial_sc, dev)
    b, s = out["background"], out["scattered"]
    return PropagatorOutput(born_names(ndim), (
            b["wavefield_0"], b["wavefield_m1"], *b["psi"], *b["zeta"], s["wavefield_0"],
            s["wavefield_m1"], *s["psi"], *s["zeta"], out["bg_receiver_amplitudes"],
            out["receiver_amplitudes"]))


def scalar_born_gradient(v, scatter, grid_spacing, dt, source_amplitudes=None,
                         source_locations=None, receiver_locations=None,
                         bg_receiver_locations=None, accuracy=4, pml_width=20, pml_freq=None,
                         max_vel=None, survey_pad=None, nt=None,
                         model_gradient_sampling_interval=1, freq_taper_frac=0.0,
                         time_pad_frac=0.0, time_taper=False, storage_mode="device",
                         storage_path=None, storage_compression=False, device="auto",
                         nparallel=None, *, grad_receiver_amplitudes,
                         grad_bg_receiver_amplitudes=None, source_gradient=True, autotune=False,
                         comm=None, shots="all", results="all"):
    """The adjoint of ``scalar_born``: returns (grad_scatter, grad_source_amplitudes).

    grad_scatter (v's shape) is the migration image J^T grad_receiver_amplitudes, exactly
    ``scalar_gradient``'s grad_v for that data gradient (``scatter`` does not enter it and may be
    None). grad_source_amplitudes: the gradient of <grad_receiver_amplitudes, Born data> +
    <grad_bg_receiver_amplitudes, background data> with respect to the source amplitudes (one
    more adjoint pass of the coupled fields; None with ``source_gradient=False`` or no sources).
    ``comm``, ``shots`` and ``results`` as ``scalar``'s: the image is summed over the ranks.
    """
    return _args.agree(comm, lambda: _born_gradient_inputs(
        v, scatter, grid_spacing, dt, source_amplitudes, source_locations, receiver_locations,
        bg_receiver_locations, accuracy, pml_width, pml_freq, max_vel, survey_pad, nt,
        model_gradient_sampling_interval, freq_taper_frac, time_pad_frac, time_taper,
        storage_mode, storage_path, storage_compression, device, nparallel,
        grad_receiver_amplitudes, grad_bg_receiver_amplitudes, source_gradient, autotune, comm,
        shots, results))()


def _born_gradient_inputs(v, scatter, grid_spacing, dt, source_amplitudes, source_locations,
                          receiver_locations, bg_receiver_locations, accuracy, pml_width,
                          pml_freq, max_vel, survey_pad, nt, model_gradient_sampling_interval,
                          freq_taper_frac, time_pad_frac, time_taper, storage_mode, storage_path,
                          storage_compression, device, nparallel, grad_receiver_amplitudes,
                          grad_bg_receiver_amplitudes, source_gradient, autotune, comm, shots,
                          results):
    """scalar_born_gradient's arguments checked; returns the call to make (every rank makes it
    once every rank's checks have passed)."""
    args, initial, dev, dtype = _prepare(
        v, grid_spacing, dt, source_amplitudes, source_locations, receiver_locations, accuracy,
        pml_width, pml_freq, max_vel, survey_pad, {}, None, nt, model_gradient_sampling_interval,
        freq_taper_frac, time_pad_frac, time_taper, storage_mode, storage_path,
        storage_compression, device, nparallel, 5, autotune, comm, shots, results)
    ndim, nt_, nshots, nreceivers = args[2], args[6], args[7], args[9]
    scatter, bg = _born_arrays(v, scatter, bg_receiver_locations, args, dtype, False)

    def trace_gradient(name, value, count):
        g = _as_array(name, value)
        if g.dtype.kind not in "biuf":
            raise TypeError(f"{name}: expected real numbers, got {_describe(g)}")
        if g.shape != (nshots, count, nt_):
            raise ValueError(f"{name}: expected shape ({nshots}, {count}, {nt_}), "
                             f"got {_describe(g)}")
        return np.ascontiguousarray(g, dtype=dtype)

    grad_r = trace_gradient("grad_receiver_amplitudes", grad_receiver_amplitudes, nreceivers)
    grad_bg = None
    if grad_bg_receiver_amplitudes is not None:
        grad_bg = trace_gradient("grad_bg_receiver_amplitudes", grad_bg_receiver_amplitudes,
                                 int(bg.shape[1]))
    want_source = _bool("source_gradient", source_gradient) and source_amplitudes is not None
    v_shape = np.shape(v)
    held = args[-1].get("held_shots", nshots)
    if len(v_shape) > ndim and held != v_shape[0]:  # a model per shot: this rank's models
        v_shape = (held,) + tuple(v_shape[1:])

    def call():
        out = _kernel("scalar_born_gradient", dtype, ndim)(
            *args, scatter, bg, int(bg.shape[1]), initial, grad_r, grad_bg, want_source, dev)
        return PropagatorOutput(("grad_scatter", "grad_source_amplitudes"),
                                (out["grad_scatter"].reshape(v_shape),
                                 out["grad_source_amplitudes"]))
    return call


__all__ += ["scalar_born", "scalar_born_gradient"]


# The TTI propagators live in sciproxy.tti; they are reachable here too, where users of the
# wave family have found them, without an import cycle: sciproxy.tti imports this module, so this
# module imports it only when one of these names is asked for.
_TTI_NAMES = ("tti", "tti_adjoint", "tti_max_dt", "tti_demo", "tti_demo_dt_limit", "tti_demo_flops",
              "ricker")


def __getattr__(name):
    if name in _TTI_NAMES:
        from . import tti as _tti
        return getattr(_tti, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_TTI_NAMES))
