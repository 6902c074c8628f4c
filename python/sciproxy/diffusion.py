"""ICON's horizontal diffusion granule on icosahedral grids, ICON4Py's way.

The job of ICON4Py's ``icon4py.model.atmosphere.diffusion.Diffusion``: constructed once with the
grid, the configuration, the vertical grid and the metric, interpolation and geometry fields,
then ``run`` every dynamics step, updating vn, w, theta_v and exner (and div_ic, hdef_ic, dwdx,
dwdy) in place. The names are ICON4Py's, so that its users can switch::

    import sciproxy.diffusion as dif
    grid = dif.icosahedral_grid(2, 4, num_levels=65)           # R2B4
    metric_state, interpolation_state, edge_params, cell_params = dif.coefficients(grid)
    granule = dif.Diffusion(grid, dif.DiffusionConfig(shear_type=2), dif.vertical_grid(grid),
                            metric_state, interpolation_state, edge_params, cell_params)
    state = dif.synthetic_state(grid)                          # or ICON's own fields
    granule.run(state, state, dtime=1400.0)                    # diagnostic, prognostic
    print(granule.timer_table())

Every state argument is a dict or an object with ICON4Py's attribute names (a gt4py field is
read through ``.ndarray`` or ``.asnumpy()``); keys sciproxy does not use are ignored. Fields are
(entity, level) arrays: C order (ICON4Py's numpy layout) with ``layout="levels"``, the default,
or Fortran order (ICON's own (nproma, nlev)) with ``layout="entities"``. The equations are in
docs/kernels/diffusion.md and src/diffusion/math.hpp.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _args, _sciproxy
from ._args import describe as _describe
from ._args import device as _device

__all__ = ["Grid", "icosahedral_grid", "read_grid", "write_grid", "limited_area_grid", "coefficients", "vertical_grid", "DiffusionConfig",
           "Diffusion", "synthetic_state", "smagorinsky_dtime", "EARTH_RADIUS"]

EARTH_RADIUS = 6371229.0

_DIMS = {"cell": "cell", "celldim": "cell", "c": "cell", "edge": "edge", "edgedim": "edge",
         "e": "edge", "vertex": "vertex", "vertexdim": "vertex", "v": "vertex"}


def _dim_name(dim) -> str:
    """'cell', 'edge' or 'vertex' from a string or ICON4Py's gt4py Dimension (CellDim, ...)."""
    text = getattr(dim, "value", dim)
    if isinstance(text, str) and text.lower() in _DIMS:
        return _DIMS[text.lower()]
    raise ValueError(f"dim: expected cell, edge or vertex (or ICON4Py's CellDim, EdgeDim, "
                     f"VertexDim), got {_describe(dim)}")


def _zone_name(zone) -> str:
    """ICON4Py's zone string ('lb_level_5', 'nudging_level_2', 'interior', ...) from a Zone or text."""
    text = getattr(zone, "value", zone)
    if isinstance(text, str):
        return text.lower()
    raise ValueError(f"zone: expected an ICON4Py Zone or its name, got {_describe(zone)}")


class Grid:
    """An icosahedral grid with ICON4Py's zero-based neighbour tables and zones."""

    def __init__(self, native, num_levels: int):
        self._native = native
        self.num_levels = int(num_levels)
        self._inputs = None

    num_cells = property(lambda self: self._native.num_cells)
    num_edges = property(lambda self: self._native.num_edges)
    num_vertices = property(lambda self: self._native.num_vertices)
    limited_area = property(lambda self: self._native.limited_area)

    def connectivity(self, name: str) -> np.ndarray:
        """The table ``name`` (C2E, C2V, C2E2C, C2E2CO, E2C, E2V, E2C2V, V2E, V2C) as an (n, k)
        int32 array, -1 for a missing neighbour."""
        return self._native.connectivity(str(name).upper().removesuffix("DIM"))

    def field(self, name: str) -> np.ndarray:
        """A geometry field by name (cell_area, edge_length, dual_edge_length, ...)."""
        return self._native.field(name)

    def _index(self, which, domain_or_dim, zone):
        if zone is None:  # ICON4Py's Domain(dim, zone)
            dim, zone = getattr(domain_or_dim, "dim", None), getattr(domain_or_dim, "zone", None)
            if dim is None or zone is None:
                raise TypeError(f"domain: expected an ICON4Py Domain (with .dim and .zone) or "
                                f"(dim, zone), got {_describe(domain_or_dim)}")
        else:
            dim = domain_or_dim
        return getattr(self._native, which)(_dim_name(dim), _zone_name(zone))

    def start_index(self, domain_or_dim, zone=None) -> int:
        """ICON4Py's grid.start_index(Domain(dim, zone)), or start_index(dim, zone)."""
        return self._index("start_index", domain_or_dim, zone)

    def end_index(self, domain_or_dim, zone=None) -> int:
        """ICON4Py's grid.end_index(Domain(dim, zone)), or end_index(dim, zone)."""
        return self._index("end_index", domain_or_dim, zone)

    def _computed(self):
        if self._inputs is None:
            self._inputs = _sciproxy.diffusion_computed_inputs(self._native, self.num_levels)
        return self._inputs

    def __repr__(self) -> str:
        return (f"Grid({self.num_cells} cells, {self.num_edges} edges, {self.num_vertices} "
                f"vertices, {self.num_levels} levels{', limited area' if self.limited_area else ''})")


def _levels(num_levels) -> int:
    if isinstance(num_levels, bool) or not isinstance(num_levels, numbers.Integral) or num_levels < 2:
        raise ValueError(f"num_levels: expected an integer >= 2, got {_describe(num_levels)}")
    return int(num_levels)


def icosahedral_grid(n: int, k: int, num_levels: int = 65, radius: float = EARTH_RADIUS) -> Grid:
    """The global ICON-style grid RnBk (R2B4: 20480 cells, 30720 edges, 10242 vertices)."""
    for name, value, lo in (("n", n, 1), ("k", k, 0)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < lo:
            raise ValueError(f"{name}: expected an integer >= {lo}, got {_describe(value)}")
    return Grid(_sciproxy.diffusion_icosahedral_grid(int(n), int(k), float(radius)), _levels(num_levels))


def read_grid(path, num_levels: int = 65, radius: float | None = None) -> Grid:
    """An ICON grid file (as DWD's grid generator or icon-grid-generator write them), with
    ICON4Py GridManager's zero-based tables, order and zones for the same file. radius: the
    sphere's, default the file's sphere_radius attribute (else 6371229 m)."""
    import os

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path, got {_describe(path)}")
    return Grid(_sciproxy.diffusion_read_grid(os.fspath(path), 0.0 if radius is None else float(radius)),
                _levels(num_levels))


def write_grid(grid: Grid, path) -> None:
    """Writes ``grid`` as an ICON grid file (NetCDF-4, 1-based tables) that read_grid, ICON4Py's
    GridManager, xarray and uxarray read; atomically (a failed write leaves nothing behind)."""
    import os

    _sciproxy.diffusion_write_grid(_as_grid(grid)._native, os.fspath(path))


def limited_area_grid(grid: Grid, center_lat: float, center_lon: float, radius: float,
                      boundary_depth: int = 14) -> Grid:
    """A limited-area cut-out of ``grid``: the cells within ``radius`` (radians) of the centre
    (radians), with ICON's refin_ctrl boundary rows and order, so that the lateral boundary and
    nudging zones exist."""
    g = _as_grid(grid)
    return Grid(_sciproxy.diffusion_limited_area_grid(g._native, float(center_lat), float(center_lon),
                                                      float(radius), int(boundary_depth)), g.num_levels)


def _as_grid(grid) -> Grid:
    if not isinstance(grid, Grid):
        raise TypeError(f"grid: expected a sciproxy.diffusion.Grid (icosahedral_grid, read_grid), "
                        f"got {_describe(grid)}")
    return grid


def coefficients(grid: Grid):
    """(metric_state, interpolation_state, edge_params, cell_params), dicts of numpy arrays with
    ICON4Py's names, computed by sciproxy from the grid (ICON4Py's defaults: Gaussian RBF with
    scale 0.5, arc lengths on the grid's sphere; simple metric fields of a synthetic atmosphere
    with steep points so that every branch runs)."""
    d = _sciproxy.diffusion_inputs_dict(_as_grid(grid)._computed())
    return d["metric_state"], d["interpolation_state"], d["edge_params"], d["cell_params"]


def vertical_grid(grid: Grid) -> dict:
    """ICON4Py's vertical grid for ``grid.num_levels`` as sciproxy computes it (ICON4Py's
    VerticalGridConfig defaults, the damping layer from 12.5 km): vct_a and vct_b (num_levels + 1
    interface values from the top, metres), num_levels, end_index_of_damping_layer, nflatlev,
    lowest_layer_thickness, model_top_height, stretch_factor, rayleigh_damping_height,
    flat_height."""
    return _sciproxy.diffusion_inputs_dict(_as_grid(grid)._computed())["vertical_grid"]


def synthetic_state(grid: Grid, seed: int = 1) -> dict:
    """A state to diffuse (vn, w, theta_v, exner and zero diagnostics), float64, C order."""
    return _sciproxy.diffusion_synthetic_state(_as_grid(grid)._computed(), int(seed))


def smagorinsky_dtime(grid: Grid) -> float:
    """9 s per km of the grid's mean spacing: a time step where the Smagorinsky branch is on."""
    return _sciproxy.diffusion_smagorinsky_dtime(_as_grid(grid)._computed())


def DiffusionConfig(**options) -> dict:
    """ICON4Py's DiffusionConfig as a dict: its defaults, overridden by ``options`` (enums as
    integers or ICON4Py's enum members). An unknown option is refused."""
    config = _sciproxy.diffusion_default_config()
    unknown = sorted(set(options) - set(config))
    if unknown:
        raise ValueError(f"config: unknown option(s) {', '.join(unknown)}; expected some of "
                         f"{', '.join(sorted(config))}")
    for name, value in options.items():
        config[name] = _config_value(name, value, config[name])
    return config


def _config_value(name, value, default):
    value = getattr(value, "value", value)  # an enum member
    if isinstance(default, bool):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"config.{name}: expected True or False, got {_describe(value)}")
        return bool(value)
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"config.{name}: expected an integer, got {_describe(value)}")
        return int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"config.{name}: expected a number, got {_describe(value)}")
    return float(value)


def _config_from(config) -> dict:
    if config is None:
        return DiffusionConfig()
    if isinstance(config, dict):
        return DiffusionConfig(**config)
    defaults = _sciproxy.diffusion_default_config()
    values = {name: getattr(config, name) for name in defaults if hasattr(config, name)}
    return DiffusionConfig(**values)


def _get(source, name, where):
    """source[name] or source.name, as numpy (gt4py fields through .ndarray / .asnumpy())."""
    if isinstance(source, dict):
        if name not in source:
            raise ValueError(f"{where}: expected a field '{name}', got none (keys: "
                             f"{', '.join(sorted(map(str, source)))})")
        value = source[name]
    elif hasattr(source, name):
        value = getattr(source, name)
    else:
        raise ValueError(f"{where}: expected an attribute '{name}', got none on {_describe(source)}")
    return _numpy(value)


def _numpy(value):
    if hasattr(value, "ndarray") and not isinstance(value, np.ndarray):
        value = value.ndarray
    elif hasattr(value, "asnumpy"):
        value = value.asnumpy()
    return value


def _pair(source, name, where):
    """ICON4Py's (x, y) pair fields (primal_normal_vert), or their *_x / *_y keys."""
    try:
        x, y = _get(source, name + "_x", where), _get(source, name + "_y", where)
    except ValueError:
        pair = _get(source, name, where)
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"{where}.{name}: expected an (x, y) pair of arrays, got "
                             f"{_describe(pair)}") from None
        x, y = (_numpy(v) for v in pair)
    return x, y


def _array(name, value, shape, dtype=np.float64):
    if not isinstance(value, np.ndarray):
        try:
            value = np.asarray(value)
        except Exception:
            raise TypeError(f"{name}: expected an array of shape {shape}, got {_describe(value)}") from None
    if value.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {value.shape}")
    if value.dtype.kind not in "fiub":
        raise TypeError(f"{name}: expected numbers, got {value.dtype}")
    return np.ascontiguousarray(value, dtype=dtype)


def _agreeing(comm):
    """The communicator whose ranks agree on the argument checks: comm when it is an mpi4py
    communicator (else each rank raises alone, as each gets the same bad comm). None: no
    mpi4py import (which would start MPI)."""
    if comm is None:
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    if isinstance(comm, MPI.Intracomm) and comm != MPI.COMM_NULL:
        return comm
    return None


def _mpi_options(grid, comm, cell_owner, rank_local_fields) -> dict:
    """The MPI options of init: the communicator's handle, the owner rank of every global cell
    (int32, or absent for METIS) and whether run() takes each rank's own fields."""
    handle = _args.communicator("comm", comm)
    ranks = 1 if comm is None else comm.Get_size()
    mpi = {"comm": handle, "rank_local_fields": _args.boolean("rank_local_fields", rank_local_fields)}
    if cell_owner is not None:
        nc = _as_grid(grid).num_cells
        owner = _args.index_array("cell_owner", cell_owner, np.int32)
        if owner.shape != (nc,):
            raise ValueError(f"cell_owner: expected the rank of every cell, shape ({nc},), got "
                             f"{_describe(owner)}")
        if nc and (int(owner.min()) < 0 or int(owner.max()) >= ranks):
            raise ValueError(f"cell_owner: expected ranks in [0, {ranks - 1}] (the communicator's), "
                             f"got values in [{int(owner.min())}, {int(owner.max())}]")
        mpi["cell_owner"] = np.ascontiguousarray(owner, dtype=np.int32)
    return mpi


class Diffusion:
    """ICON4Py's Diffusion: ``Diffusion(grid, config, vertical_grid, metric_state,
    interpolation_state, edge_params, cell_params, device="auto", nparallel=None)`` then
    ``run(diagnostic_state, prognostic_state, dtime, initial_run=False)`` in place.

    check_finite: every run first scans vn, w, theta_v and exner for NaN and infinity and
    refuses them naming the field (about a tenth of a run's time at R2B4; ICON4Py does not
    check). layout, dtype: see the module's docstring.

    Under MPI (docs/kernels/diffusion.md, "Under MPI"): comm, an mpi4py intracommunicator (None:
    this process alone), makes init and every run collective over its ranks, which all pass the
    same global grid and inputs; each computes on its part of the grid with ICON's two halo
    lines. cell_owner: the rank of every cell (num_cells integers in [0, comm size)), as ICON
    gives its own decomposition; None: METIS's partition. Fields: the same global fields on
    every rank, every rank getting the whole result (equal bit for bit to one process's); or,
    with rank_local_fields=True, each rank's own fields, (n_local, levels) with the rows of
    ``global_index(dim)`` (owned, then halos; ``halo_level(dim)``): afterwards vn, w, theta_v
    and exner are one process's on every local row, the diagnostics on the owned cells. The
    Python checks are agreed: a bad argument on one rank raises on every rank, naming it."""

    def __init__(self, grid, config, vertical_grid, metric_state, interpolation_state, edge_params,
                 cell_params, device="auto", nparallel=None, layout="levels", dtype=np.float64,
                 check_finite=True, comm=None, cell_owner=None, rank_local_fields=False):
        self.comm = comm
        mpi = {}
        if comm is not None or cell_owner is not None or rank_local_fields is not False:
            mpi = _args.agree(_agreeing(comm), lambda: _mpi_options(grid, comm, cell_owner,
                                                                   rank_local_fields))
        args = _args.agree(_agreeing(comm), lambda: self._prepare(
            grid, config, vertical_grid, metric_state, interpolation_state, edge_params,
            cell_params, device, nparallel, layout, dtype, check_finite))
        self._granule = _sciproxy.DiffusionGranule(*args, mpi)
        self.rank_local_fields = bool(mpi.get("rank_local_fields", False))
        g = self.grid
        if self.rank_local_fields:  # this rank's entities, owned then halos
            self._sizes = {d: len(self._granule.global_index(d)) for d in ("cell", "edge")}
        else:
            self._sizes = {"cell": g.num_cells, "edge": g.num_edges}

    def _prepare(self, grid, config, vertical_grid, metric_state, interpolation_state, edge_params,
                 cell_params, device, nparallel, layout, dtype, check_finite):
        """Checks and normalises init's arguments (on every rank under MPI, agreed): the
        native granule's arguments but the MPI options."""
        self.grid = g = _as_grid(grid)
        if layout not in ("levels", "entities"):
            raise ValueError(f"layout: expected 'levels' (C order (entity, level), ICON4Py's) or "
                             f"'entities' (Fortran order, ICON's), got {_describe(layout)}")
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.dtype(np.float64), np.dtype(np.float32)):
            raise TypeError(f"dtype: expected float64 or float32, got {_describe(dtype)}")
        if nparallel is not None and (isinstance(nparallel, bool) or not isinstance(nparallel, numbers.Integral)
                                      or nparallel < 1):
            raise ValueError(f"nparallel: expected None or a positive thread count, got {_describe(nparallel)}")
        self.layout = layout
        nc, ne, nv = g.num_cells, g.num_edges, g.num_vertices
        nlev = self._num_levels(vertical_grid)
        if nlev != g.num_levels:
            raise ValueError(f"vertical_grid.num_levels: expected the grid's {g.num_levels}, got {nlev}")
        vg = {"num_levels": nlev,
              "vct_a": _array("vertical_grid.vct_a", _get(vertical_grid, "vct_a", "vertical_grid"), (nlev + 1,)),
              "end_index_of_damping_layer": int(_get(vertical_grid, "end_index_of_damping_layer",
                                                      "vertical_grid"))}
        ms = {}
        for name, shape in (("theta_ref_mc", (nc, nlev)), ("wgtfac_c", (nc, nlev + 1)),
                            ("zd_intcoef", (nc, 3, nlev)), ("zd_diffcoef", (nc, nlev))):
            ms[name] = _array(f"metric_state.{name}", _get(metric_state, name, "metric_state"), shape)
        ms["zd_vertoffset"] = _array("metric_state.zd_vertoffset",
                                     _get(metric_state, "zd_vertoffset", "metric_state"), (nc, 3, nlev), np.int32)
        ins = {}
        for name, shape in (("e_bln_c_s", (nc, 3)), ("rbf_coeff_1", (nv, 6)), ("rbf_coeff_2", (nv, 6)),
                            ("geofac_div", (nc, 3)), ("geofac_n2s", (nc, 4)), ("geofac_grg_x", (nc, 4)),
                            ("geofac_grg_y", (nc, 4)), ("nudgecoeff_e", (ne,))):
            ins[name] = _array(f"interpolation_state.{name}", _get(interpolation_state, name,
                                                                   "interpolation_state"), shape)
        eps = {}
        for name in ("tangent_orientation", "inverse_primal_edge_lengths", "inverse_vertex_vertex_lengths",
                     "inverse_dual_edge_lengths", "edge_areas"):
            eps[name] = _array(f"edge_params.{name}", _get(edge_params, name, "edge_params"), (ne,))
        for name in ("primal_normal_vert", "dual_normal_vert"):
            x, y = _pair(edge_params, name, "edge_params")
            eps[name + "_x"] = _array(f"edge_params.{name}_x", x, (ne, 4))
            eps[name + "_y"] = _array(f"edge_params.{name}_y", y, (ne, 4))
        area = _array("cell_params.area", _get(cell_params, "area", "cell_params"), (nc,))
        mean = _get(cell_params, "mean_cell_area", "cell_params")
        cps = {"area": area, "mean_cell_area": float(np.asarray(mean))}
        return (g._native, _config_from(config), vg, ms, ins, eps, cps, _device(device),
                0 if nparallel is None else int(nparallel), layout, self.dtype == np.float32,
                bool(check_finite))

    @staticmethod
    def _num_levels(vertical_grid) -> int:
        for source in (vertical_grid, getattr(vertical_grid, "config", None)):
            if source is None:
                continue
            if isinstance(source, dict) and "num_levels" in source:
                return _levels(int(source["num_levels"]))
            if not isinstance(source, dict) and hasattr(source, "num_levels"):
                return _levels(int(source.num_levels))
        raise ValueError("vertical_grid: expected num_levels (a key, an attribute or config.num_levels), got none")

    def _field(self, source, name, where, nk, n):
        a = _get(source, name, where)
        label = f"{where}.{name}"
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{label}: expected a numpy array (or a gt4py field on the CPU), got {_describe(a)}")
        if a.shape != (n, nk):
            raise ValueError(f"{label}: expected shape ({n}, {nk}), got {a.shape}")
        if a.dtype != self.dtype:
            raise TypeError(f"{label}: expected {self.dtype} (the granule's dtype), got {a.dtype}")
        contiguous = a.flags.c_contiguous if self.layout == "levels" else a.flags.f_contiguous
        if not contiguous:
            raise ValueError(f"{label}: expected a {'C' if self.layout == 'levels' else 'Fortran'}-ordered "
                             f"array (layout='{self.layout}'), got {_describe(a)}")
        if not a.flags.writeable:
            raise ValueError(f"{label}: expected a writeable array (updated in place), got a read-only one")
        return a

    def global_index(self, dim) -> np.ndarray:
        """This rank's local entities of ``dim`` (cell, edge, vertex or ICON4Py's CellDim, ...):
        the global index (zero-based) of each, the owned ones first, then halo levels 1, 2 (and 3
        for edges), each ascending: the rows of the fields with ``rank_local_fields``. Without a
        communicator of several ranks: 0 .. n - 1."""
        return np.asarray(self._granule.global_index(_dim_name(dim)), dtype=np.int32)

    def halo_level(self, dim) -> np.ndarray:
        """The halo level of each of this rank's local entities of ``dim`` (0: owned), in the
        order of global_index(dim)."""
        return np.asarray(self._granule.halo_level(_dim_name(dim)), dtype=np.int8)

    def run(self, diagnostic_state, prognostic_state, dtime: float, initial_run: bool = False) -> None:
        """One diffusion step of ``dtime`` seconds, in place; ``initial_run`` is ICON's linit.

        Under MPI (``comm``), collective: with global fields each rank passes the whole grid's
        and every rank gets the whole result; with ``rank_local_fields`` each rank passes its
        own (rows in the order of global_index). A bad argument on one rank raises on all."""
        fields = _args.agree(_agreeing(self.comm), lambda: self._run_fields(
            diagnostic_state, prognostic_state, dtime, initial_run))
        self._granule.run(*fields, float(dtime), bool(initial_run))

    def _run_fields(self, diagnostic_state, prognostic_state, dtime, initial_run):
        nc, ne, nlev = self._sizes["cell"], self._sizes["edge"], self.grid.num_levels
        if isinstance(dtime, bool) or not isinstance(dtime, numbers.Real):
            raise TypeError(f"dtime: expected a number of seconds, got {_describe(dtime)}")
        if not isinstance(initial_run, (bool, np.bool_)):
            raise TypeError(f"initial_run: expected True or False, got {_describe(initial_run)}")
        p = [self._field(prognostic_state, "vn", "prognostic_state", nlev, ne),
             self._field(prognostic_state, "w", "prognostic_state", nlev + 1, nc),
             self._field(prognostic_state, "theta_v", "prognostic_state", nlev, nc),
             self._field(prognostic_state, "exner", "prognostic_state", nlev, nc)]
        d = [self._field(diagnostic_state, name, "diagnostic_state", nlev + 1, nc)
             for name in ("hdef_ic", "div_ic", "dwdx", "dwdy")]
        return (*p, *d)

    def timer_table(self) -> str:
        """ICON's timer table of every call so far (name, # calls, t_min, t_avg, t_max, total)."""
        return self._granule.timer_table()

    device = property(lambda self: self._granule.device)
    init_seconds = property(lambda self: self._granule.init_seconds)
    bytes_per_run = property(lambda self: self._granule.bytes_per_run)
