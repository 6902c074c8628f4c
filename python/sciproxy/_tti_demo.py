"""The one-field TTI operator of Devito's 2022 workshop demo (public as sciproxy.tti.tti_demo).

The operator ``TTISelfAdjointForward`` of ``python run.py -d 412 423 476 -nt 200`` (a
simplification of the self-adjoint TTI system of Bube et al. 2016; docs/kernels/tti.md)::

    import numpy as np, sciproxy.tti as td
    shape = (64, 64, 64)
    dt = 0.9 * td.tti_demo_dt_limit(shape, 10.0, vp=1500, b=1, epsilon=0.2, eta=0.4, f=0.85)
    amps = td.ricker(15.0, dt, 100)
    run = td.tti_demo(shape, 10.0, dt, vp=1500, b=1, epsilon=0.2, eta=0.4, f=0.85, theta=0.5,
                      phi=0.3, damping=0.001, source_position=(320.0, 321.0, 322.0),
                      source_amplitudes=amps, device="cpu")
    run.u, run.u_prev, run.gpts, run.sections

Per step, g = (D+x u, D+y u, D+z u) (staggered first derivatives of ``space_order``):
F = b(1+2eps)[e1(e1.g) + e2(e2.g)] + n[b(1-f eta^2)(n.g) + b f eta sqrt(1-eta^2)],
u+ = (2-d) u + (d-1) u- + dt^2 vp^2/b (D-.F), then u+ += dt^2 vp^2/b s(t) at the 8 trilinear
corners of the source. Arrays are (NX, NY, NZ), z vertical and fastest (Devito's layout).
Materials are numbers (constant) or arrays of the grid's shape.

Under MPI (``comm=``, an mpi4py intracommunicator): the grid is split into a Cartesian grid of
blocks, one per rank (``process_grid``, axes (x, y, z) as the arrays'), each stepped by its rank
with a ghost ring refreshed from the neighbours after each sweep; every rank passes the same
arguments and receives one process's bits: the whole grid (``results='all'``), on rank 0 alone
(``'root'``: the others' u and u_prev are None) or its own block (``'own'``: the run's
``block_origin`` and ``block_shape`` place it). The cpu backend only.

Bad input raises ValueError (a value or shape), TypeError (a type or dtype) or RuntimeError (a
backend not built, a device absent), naming the argument.
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from . import _args, _sciproxy

__all__ = ["tti_demo", "tti_demo_dt_limit", "tti_demo_flops", "ricker", "TtiDemoRun"]

_MATERIALS = ("vp", "b", "epsilon", "eta", "f", "theta", "phi", "damping")


@dataclasses.dataclass
class TtiDemoRun:
    """What one call returns: the final fields and what the run measured."""

    u: np.ndarray | None   # u^nt, (NX, NY, NZ) (see block_shape); None off rank 0 with 'root'
    u_prev: np.ndarray | None  # u^{nt-1}
    seconds: float         # the time steps (flux, divergence, injection), without setup
    points: float          # grid points x steps
    flops: float           # of the implemented expressions
    bytes: float           # compulsory
    dt_limit: float
    device: str
    form: str
    sections: list         # [{'name', 'seconds', 'work': {'points', 'flops', 'bytes'}}]
    # The part of the grid u and u_prev hold: u[i, j, k] is the grid's point block_origin +
    # (i, j, k). The whole grid ((0, 0, 0), (NX, NY, NZ)) but under MPI with results='own' (this
    # rank's block) or 'root' ((0, 0, 0) off rank 0).
    block_origin: tuple = (0, 0, 0)
    block_shape: tuple = (0, 0, 0)
    process_grid: tuple = (1, 1, 1)  # the ranks per axis (x, y, z) the call ran on

    @property
    def gpts(self) -> float:
        return self.points / self.seconds * 1e-9 if self.seconds > 0 else 0.0

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds * 1e-9 if self.seconds > 0 else 0.0

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes > 0 else 0.0


_describe = _args.describe


def _shape(shape) -> tuple:
    """Three grid sizes, each an integer >= 1 (a float or a bool is a TypeError, never truncated)."""
    if isinstance(shape, (str, bytes)) or is_scalar(shape):
        raise TypeError(f"shape: expected three grid sizes (NX, NY, NZ), got {_describe(shape)}")
    try:
        items = list(shape)
    except TypeError:
        raise TypeError(f"shape: expected three grid sizes (NX, NY, NZ), got {_describe(shape)}") from None
    if len(items) != 3:
        raise ValueError(f"shape: expected three grid sizes (NX, NY, NZ), got {len(items)} values")
    return tuple(_args.integer(f"shape[{i}]", n, 1, _args.INT64_MAX, "a grid size >= 1")
                 for i, n in enumerate(items))


def is_scalar(value) -> bool:
    return isinstance(value, numbers.Number) or (isinstance(value, np.ndarray) and value.ndim == 0)


def _spacing(spacing) -> tuple:
    return tuple(_args.per_dimension("spacing", spacing, 3))


def _space_order(value) -> int:
    # The library lists the allowed orders (4, 8, 12 or 16); here only the type and int range.
    return _args.integer("space_order", value, _args.INT32_MIN, _args.INT32_MAX,
                         "a space order (4, 8, 12 or 16)")


def _field(name: str, value, shape: tuple, dtype: np.dtype, allow_none: bool = False) -> np.ndarray:
    """A flat C-contiguous array of `dtype`: one value (constant) or one per grid point."""
    if value is None:
        if allow_none:
            return np.zeros(0, dtype)
        raise TypeError(f"{name}: expected a number or an array of shape {shape}, got None")
    a = _args.as_array(name, value)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name}: expected real numbers, got {_describe(value)}")
    if a.ndim == 0:
        a = a.reshape(1)
    elif a.shape != shape and not (allow_none and a.shape == (0,)):  # empty: no initial field
        raise ValueError(f"{name}: expected a number or an array of shape {shape}, got {_describe(a)}")
    with np.errstate(over="ignore", invalid="ignore"):  # inf is reported by the library
        return np.ascontiguousarray(a.astype(dtype, copy=False).reshape(-1))


def ricker(f0: float, dt: float, nt: int, t0: float = 0.0, dtype=np.float32) -> np.ndarray:
    """Ricker wavelet of peak frequency f0 at t = 0, dt, ..., (nt-1) dt, delayed by t0
    (Devito's RickerSource: t0 = 1 / f0 when t0 <= 0)."""
    f0 = _args.real("f0", f0, positive=True)
    dt = _args.real("dt", dt, positive=True)
    nt = _args.integer("nt", nt, 0, _args.INT32_MAX, "a number of samples >= 0")
    t0 = _args.real("t0", t0)
    dtype = _args.dtype(dtype)
    t0 = t0 if t0 > 0 else 1.0 / f0
    a = np.pi * f0 * (np.arange(nt) * dt - t0)
    return ((1 - 2 * a * a) * np.exp(-a * a)).astype(dtype)


def tti_demo_dt_limit(shape, spacing, vp, b, epsilon, eta, f, damping=0.0, space_order=8,
                      dtype=np.float32) -> float:
    """The largest stable time step for these materials (see include/sciproxy/tti_demo.hpp)."""
    dt = _args.dtype(dtype)
    shape = _shape(shape)
    fields = [_field(n, v, shape, dt) for n, v in
              (("vp", vp), ("b", b), ("epsilon", epsilon), ("eta", eta), ("f", f), ("damping", damping))]
    kernel = getattr(_sciproxy, f"tti_demo_dt_limit_{dt.name}")
    return kernel(shape, _spacing(spacing), *fields, _space_order(space_order))


def tti_demo_flops(space_order: int = 8) -> dict:
    """Flops per grid point per step of the implemented expressions: flux, divergence, total."""
    return dict(_sciproxy.tti_demo_flops(_space_order(space_order)))


def _flag(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {_describe(value)}")
    return bool(value)


def _tuning(cpu_tuning) -> dict:
    if cpu_tuning is None:
        return {}
    if not isinstance(cpu_tuning, dict):
        raise TypeError(f"cpu_tuning: expected a dict of block sizes, got {_describe(cpu_tuning)}")
    return {str(k): _args.integer(f"cpu_tuning[{k!r}]", v, 0) for k, v in cpu_tuning.items()}


_RESULTS = {"all": 0, "root": 1, "own": 2}


def _results(results) -> int:
    if not isinstance(results, str) or results not in _RESULTS:
        raise ValueError(f"results: expected {' or '.join(repr(r) for r in _RESULTS)}, "
                         f"got {_describe(results)}")
    return _RESULTS[results]


def tti_demo(shape, spacing, dt, *, vp, b, epsilon, eta, f, theta, phi, damping=0.0,
             source_position, source_amplitudes, space_order=8, form="fused", initial_u=None,
             initial_u_prev=None, device="auto", nparallel=None, dtype=np.float32,
             cpu_tuning=None, autotune=False, comm=None, process_grid=None,
             results="all") -> TtiDemoRun:
    """Runs len(source_amplitudes) steps of the demo operator; returns a TtiDemoRun.

    shape: (NX, NY, NZ) grid points; spacing: metres (one number or three); dt: seconds.
    Materials: numbers or arrays of `shape`. source_position: metres, (x, y, z), inside the
    grid's box. form: 'two-pass' or 'fused' (cpu and cuda; the reference runs two passes).
    device: 'auto', 'reference', 'cpu', 'cuda', 'cuda:N'. nparallel: cpu threads (None: all).
    cpu_tuning: the cpu backend's block sizes (TtiDemoCpuTuning in include/sciproxy/tti_demo.hpp),
    a dict of some of tile_rows, tile_kib, block_rows, sweep_steps; never changes the results.
    autotune: cpu, fused form: choose tile_kib and sweep_steps by timing candidates on a few
    steps of this problem, the first time its shape is seen (cached per machine, shape,
    materials, dtype and thread count); never changes the results.
    comm: an mpi4py intracommunicator (None: this process alone). The call is then collective:
    every rank passes the same arguments (``nparallel``, the threads per rank, may differ), the
    grid is split among the ranks, and the fields are one process's bits. The cpu backend only.
    An error on any rank is raised on every rank, naming the lowest failing rank.
    process_grid: with `comm`: ranks per axis (x, y, z) of the grid of blocks, 0 = chosen to
    exchange the fewest points (None: [0, 0, 0]). Along a split axis every block must hold
    (space_order - 1) points times the steps per sweep (1, or 2 where cpu_tuning asks for two or
    autotune may choose them; the autotuner's two that do not fit fall back to one); a
    grid whose product is not the ranks, or that leaves a block thinner, is a ValueError naming
    process_grid.
    results: with `comm`: 'all' (every rank receives the whole grid), 'root' (rank 0 does; the
    others' u and u_prev are None) or 'own' (each rank its own block, placed by the run's
    block_origin and block_shape).
    """
    handle = _args.communicator("comm", comm)
    return _run(*_args.agree(comm, lambda: _prepare(
        shape, spacing, dt, vp, b, epsilon, eta, f, theta, phi, damping, source_position,
        source_amplitudes, space_order, form, initial_u, initial_u_prev, device, nparallel, dtype,
        cpu_tuning, autotune, handle, process_grid, results)))


def _prepare(shape, spacing, dt, vp, b, epsilon, eta, f, theta, phi, damping, source_position,
             source_amplitudes, space_order, form, initial_u, initial_u_prev, device, nparallel,
             dtype, cpu_tuning, autotune, handle, process_grid, results):
    """tti_demo's argument checks (agreed across the ranks): the kernel and its arguments."""
    dt_type = _args.dtype(dtype)
    shape = _shape(shape)
    spacing = _spacing(spacing)
    dt = _args.real("dt", dt)
    if not isinstance(form, str):
        raise TypeError(f"form: expected 'two-pass' or 'fused', got {_describe(form)}")
    device = _args.device(device)
    threads = _args.nparallel(nparallel)
    order = _space_order(space_order)
    materials = dict(vp=vp, b=b, epsilon=epsilon, eta=eta, f=f, theta=theta, phi=phi, damping=damping)
    fields = [_field(name, materials[name], shape, dt_type) for name in _MATERIALS]
    if source_amplitudes is None:
        raise TypeError("source_amplitudes: expected a 1-D array of nt amplitudes, got None")
    amps = _args.real_array("source_amplitudes", source_amplitudes)
    if amps.ndim != 1:
        raise ValueError(f"source_amplitudes: expected a 1-D array of nt amplitudes (one per step), "
                         f"got {_describe(amps)}")
    if amps.size == 0:  # the library's nt, which this function takes from the amplitudes
        raise ValueError("source_amplitudes: expected at least one amplitude (one per step), "
                         f"got {_describe(amps)}")
    amps = _args.real_array("source_amplitudes", amps, dt_type)
    if source_position is None or isinstance(source_position, (str, bytes)) or is_scalar(source_position):
        raise TypeError(f"source_position: expected (x, y, z) in metres, got {_describe(source_position)}")
    try:
        items = list(source_position)
    except TypeError:
        raise TypeError(f"source_position: expected (x, y, z) in metres, "
                        f"got {_describe(source_position)}") from None
    if len(items) != 3:
        raise ValueError(f"source_position: expected (x, y, z) in metres, got {len(items)} values")
    position = tuple(_args.real(f"source_position[{i}]", p) for i, p in enumerate(items))
    u0 = _field("initial_u", initial_u, shape, dt_type, allow_none=True)
    um = _field("initial_u_prev", initial_u_prev, shape, dt_type, allow_none=True)
    kernel = getattr(_sciproxy, f"tti_demo_{dt_type.name}")
    layout = _results(results)
    return kernel, (shape, spacing, dt, int(amps.size), *fields, position, amps, u0, um, order,
                    form, threads, device, _tuning(cpu_tuning), _flag("autotune", autotune),
                    handle, _args.process_grid(process_grid), layout)


def _run(kernel, args) -> TtiDemoRun:
    u, u_prev, info = kernel(*args)
    work = info["work"]
    if args[-1] == _RESULTS["root"] and tuple(info["block_shape"]) == (0, 0, 0):
        u = u_prev = None  # off rank 0
    return TtiDemoRun(u=u, u_prev=u_prev, seconds=info["seconds"], points=work["points"],
                      flops=work["flops"], bytes=work["bytes"], dt_limit=info["dt_limit"],
                      device=info["device"], form=info["form"], sections=list(info["sections"]),
                      block_origin=tuple(info["block_origin"]),
                      block_shape=tuple(info["block_shape"]),
                      process_grid=tuple(info["process_grid"]))
