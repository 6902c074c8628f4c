#!/usr/bin/env python3
"""Reference data for sciproxy's `diffusion` family, produced by ICON4Py's own granule.

Run with a Python 3.12 interpreter that has icon4py-atmosphere-diffusion==0.4.1,
icon4py-common==0.4.1, icon-grid-generator and netCDF4 installed (see README.md here):

    GT4PY_BUILD_CACHE_LIFETIME=persistent GT4PY_BUILD_CACHE_DIR=/work/gt4py-cache \
        python make_icon4py_reference.py [--case global_r2b1 --case lam_r2b5] [--out-dir DIR]

For every case it
  1. writes an ICON-style grid file with icon-grid-generator (`<case>_grid.nc`),
  2. reads it with ICON4Py's GridManager (zero-based indices),
  3. derives geometry, interpolation and metric fields with ICON4Py's factories
     (synthetic Gaussian mountain as topography),
  4. configures DiffusionConfig so that every branch of the granule is active,
  5. runs ICON4Py's Diffusion granule on gtfn_cpu three times (initial_run=True, then
     twice initial_run=False), and
  6. writes every granule input, the states before and after each call and the
     granule's intermediate fields into `<case>.nc` (NetCDF-4).

Arrays keep ICON4Py's layouts: (entity, level) and (entity, neighbour[, level]).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import math
import pathlib
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent

# Cases: grid specification for icon-grid-generator, levels, mountain, initial-state scales.
CASES = {
    # Global R2B1: 320 cells, 480 edges, 162 vertices (mean edge length about 1900 km).
    "global_r2b1": dict(
        grid="R2B1",
        num_levels=10,
        mountain=dict(lon=30.0, lat=20.0, height=5000.0, width_m=2.0e6),
        seed=1234,
    ),
    # Limited-area cut-out of R2B5 (circle of 8 degrees), with refin_ctrl boundary rows 1-8.
    "lam_r2b5": dict(
        grid=("R2B5", dict(lon=10.0, lat=45.0, radius_degrees=8.0)),
        num_levels=8,
        mountain=dict(lon=10.5, lat=45.3, height=3000.0, width_m=2.0e5),
        seed=4321,
    ),
}

# Seconds of time step per km of mean edge length: makes the Smagorinsky coefficient
# exceed its offset on many edges for the initial states below.
DTIME_PER_KM = 9.0
# The three calls: (initial_run, factor on dtime).
CALLS = ((True, 1.0), (False, 1.0), (False, 0.8))

PROGNOSTIC_FIELDS = ("vn", "w", "theta_v", "exner", "rho")
DIAGNOSTIC_FIELDS = ("div_ic", "hdef_ic", "dwdx", "dwdy")
INTERMEDIATE_FIELDS = ("kh_smag_e", "kh_smag_ec", "z_nabla2_e", "u_vert", "v_vert")
# granule fields over levels, set at init (the regular-step values)
K_FIELDS = ("diff_multfac_vn", "smag_limit", "enh_smag_fac", "diff_multfac_n2w")

CONNECTIVITY_DIMS = {
    "C2E": ("cell", "c2e"),
    "C2E2C": ("cell", "c2e2c"),
    "C2E2CO": ("cell", "c2e2co"),
    "E2C": ("edge", "e2c"),
    "E2V": ("edge", "e2v"),
    "E2C2V": ("edge", "e2c2v"),
    "V2E": ("vertex", "v2e"),
    "V2C": ("vertex", "v2c"),
    "C2V": ("cell", "c2v"),
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------------------
# grid file
# --------------------------------------------------------------------------------------
def write_grid_file(case: str, spec, path: pathlib.Path) -> pathlib.Path:
    import grid_generator as gg

    if isinstance(spec, tuple):
        parent, circle = spec
        spec = gg.LimitedAreaGridSpec(parent=parent, region=gg.Region.circle(**circle))
    return pathlib.Path(gg.generate_grid_to_netcdf(spec, path, fields="icon4py"))


# --------------------------------------------------------------------------------------
# ICON4Py set-up
# --------------------------------------------------------------------------------------
@dataclasses.dataclass
class Setup:
    grid_manager: object
    grid: object
    geometry: object
    interpolation: object
    metrics: object
    vertical_config: object
    vertical_grid: object
    topography: np.ndarray
    mean_edge_length: float


def vertical_config_for(num_levels: int):
    from icon4py.model.common.grid import vertical as v_grid

    # Model top 23.5 km, flat above 16 km; damping from 12.5 km on (top levels).
    return v_grid.VerticalGridConfig(
        num_levels,
        lowest_layer_thickness=50.0,
        model_top_height=23500.0,
        flat_height=16000.0,
        stretch_factor=1.0,
        rayleigh_damping_height=12500.0,
    )


def gaussian_mountain(lon: np.ndarray, lat: np.ndarray, radius: float, m: dict) -> np.ndarray:
    """Gaussian mountain of height m['height'] and e-folding width m['width_m'] on the sphere."""
    lon0, lat0 = math.radians(m["lon"]), math.radians(m["lat"])
    cosd = np.sin(lat) * math.sin(lat0) + np.cos(lat) * math.cos(lat0) * np.cos(lon - lon0)
    dist = radius * np.arccos(np.clip(cosd, -1.0, 1.0))
    return m["height"] * np.exp(-((dist / m["width_m"]) ** 2))


def build_setup(grid_file: pathlib.Path, num_levels: int, mountain: dict, backend,
                factory_backend_name: str = "embedded",
                metrics_backend_name: str = "gtfn_cpu") -> Setup:
    import gt4py.next as gtx

    from icon4py.model.common import dimension as dims, model_backends, model_options
    from icon4py.model.common.decomposition import definitions as decomposition
    from icon4py.model.common.grid import (
        geometry as grid_geometry,
        geometry_attributes as geometry_meta,
        geometry_config,
        grid_manager as gm,
        gridfile,
        vertical as v_grid,
    )
    from icon4py.model.common.interpolation import interpolation_attributes, interpolation_factory
    from icon4py.model.common.metrics import metrics_attributes, metrics_factory

    allocator = model_backends.get_allocator(backend)
    # Geometry and interpolation factories run on the embedded (numpy) backend (no
    # compilation); the metrics factory needs a compiled backend (some of its field
    # operators do not run embedded).
    factory_backend = model_options.customize_backend(
        None, model_backends.BACKENDS[factory_backend_name]
    )
    metrics_backend = model_options.customize_backend(
        None, model_backends.BACKENDS[metrics_backend_name]
    )

    manager = gm.GridManager(
        grid_file=grid_file,
        config=v_grid.VerticalGridConfig(num_levels=num_levels),
        offset_transformation=gridfile.ToZeroBasedIndexTransformation(),
    )
    manager(allocator=allocator, keep_skip_values=False)
    grid = manager.grid

    geometry = grid_geometry.GridGeometry(
        grid=grid,
        decomposition_info=manager.decomposition_info,
        backend=factory_backend,
        coordinates=manager.coordinates,
        extra_fields=manager.geometry_fields,
        metadata=geometry_meta.attrs,
        config=geometry_config.GeometryConfig(),
        process_props=decomposition.SingleNodeProcessProperties(),
        exchange=decomposition.single_node_exchange,
    )
    interpolation = interpolation_factory.InterpolationFieldsFactory(
        config=interpolation_factory.InterpolationConfig(),
        grid=grid,
        decomposition_info=manager.decomposition_info,
        exchange=decomposition.single_node_exchange,
        geometry_source=geometry,
        backend=factory_backend,
        metadata=interpolation_attributes.attrs,
    )
    vertical_config = vertical_config_for(num_levels)
    vct_a, vct_b = v_grid.get_vct_a_and_vct_b(vertical_config, allocator)
    vertical_grid = v_grid.VerticalGrid(config=vertical_config, vct_a=vct_a, vct_b=vct_b)

    radius = float(grid.grid_params.radius)
    lon = np.asarray(geometry.get(geometry_meta.CELL_LON).asnumpy())
    lat = np.asarray(geometry.get(geometry_meta.CELL_LAT).asnumpy())
    topo = gaussian_mountain(lon, lat, radius, mountain)

    metrics = metrics_factory.MetricsFieldsFactory(
        grid=grid,
        vertical_grid=vertical_grid,
        decomposition_info=manager.decomposition_info,
        exchange=decomposition.single_node_exchange,
        geometry_source=geometry,
        topography=gtx.as_field((dims.CellDim,), data=topo, allocator=allocator),
        interpolation_source=interpolation,
        config=metrics_factory.MetricsConfig(),
        backend=metrics_backend,
        metadata=metrics_attributes.attrs,
    )
    mean_edge_length = float(geometry.get(geometry_meta.MEAN_EDGE_LENGTH))
    return Setup(
        manager, grid, geometry, interpolation, metrics, vertical_config, vertical_grid, topo,
        mean_edge_length,
    )


def diffusion_config():
    from icon4py.model.atmosphere.diffusion import diffusion

    # ICON4Py's benchmark configuration, with the truly horizontal temperature diffusion on.
    return diffusion.DiffusionConfig(
        diffusion_type=diffusion.DiffusionType.SMAGORINSKY_4TH_ORDER,
        apply_to_vertical_wind=True,
        apply_to_horizontal_wind=True,
        apply_to_temperature=True,
        type_t_diffu=diffusion.TemperatureDiscretizationType.HETEROGENEOUS,
        type_vn_diffu=diffusion.SmagorinskyStencilType.DIAMOND_VERTICES,
        hdiff_efdt_ratio=24.0,
        hdiff_w_efdt_ratio=15.0,
        smagorinski_scaling_factor=0.025,
        apply_zdiffusion_t=True,
        velocity_boundary_diffusion_denominator=150.0,
        max_nudging_coefficient=0.375,
        ndyn_substeps=5,
        shear_type=diffusion.TurbulenceShearForcingType.VERTICAL_HORIZONTAL_OF_HORIZONTAL_VERTICAL_WIND,
    )


def granule_states(setup: Setup):
    """The state objects that the Diffusion granule takes, from ICON4Py's factories."""
    from icon4py.model.atmosphere.diffusion import diffusion_states
    from icon4py.model.common.grid import geometry_attributes as gmeta, states as grid_states
    from icon4py.model.common.interpolation import interpolation_attributes as iattrs
    from icon4py.model.common.metrics import metrics_attributes as mattrs

    g, ip, mf = setup.geometry, setup.interpolation, setup.metrics
    cell_params = grid_states.CellParams(
        cell_center_lat=g.get(gmeta.CELL_LAT),
        cell_center_lon=g.get(gmeta.CELL_LON),
        area=g.get(gmeta.CELL_AREA),
        mean_cell_area=float(g.get(gmeta.MEAN_CELL_AREA)),
    )
    edge_params = grid_states.EdgeParams(
        edge_center_lat=g.get(gmeta.EDGE_LAT),
        edge_center_lon=g.get(gmeta.EDGE_LON),
        tangent_orientation=g.get(gmeta.TANGENT_ORIENTATION),
        coriolis_frequency=g.get(gmeta.CORIOLIS_PARAMETER),
        edge_areas=g.get(gmeta.EDGE_AREA),
        primal_edge_lengths=g.get(gmeta.EDGE_LENGTH),
        inverse_primal_edge_lengths=g.get(f"inverse_of_{gmeta.EDGE_LENGTH}"),
        dual_edge_lengths=g.get(gmeta.DUAL_EDGE_LENGTH),
        inverse_dual_edge_lengths=g.get(f"inverse_of_{gmeta.DUAL_EDGE_LENGTH}"),
        inverse_vertex_vertex_lengths=g.get(f"inverse_of_{gmeta.VERTEX_VERTEX_LENGTH}"),
        primal_normal_x=g.get(gmeta.EDGE_NORMAL_U),
        primal_normal_y=g.get(gmeta.EDGE_NORMAL_V),
        primal_normal_cell_x=g.get(gmeta.EDGE_NORMAL_CELL_U),
        primal_normal_cell_y=g.get(gmeta.EDGE_NORMAL_CELL_V),
        primal_normal_vert_x=g.get(gmeta.EDGE_NORMAL_VERTEX_U),
        primal_normal_vert_y=g.get(gmeta.EDGE_NORMAL_VERTEX_V),
        dual_normal_cell_x=g.get(gmeta.EDGE_TANGENT_CELL_U),
        dual_normal_cell_y=g.get(gmeta.EDGE_TANGENT_CELL_V),
        dual_normal_vert_x=g.get(gmeta.EDGE_TANGENT_VERTEX_U),
        dual_normal_vert_y=g.get(gmeta.EDGE_TANGENT_VERTEX_V),
    )
    interpolation_state = diffusion_states.DiffusionInterpolationState(
        e_bln_c_s=ip.get(iattrs.E_BLN_C_S),
        rbf_coeff_1=ip.get(iattrs.RBF_VEC_COEFF_V1),
        rbf_coeff_2=ip.get(iattrs.RBF_VEC_COEFF_V2),
        geofac_div=ip.get(iattrs.GEOFAC_DIV),
        geofac_n2s=ip.get(iattrs.GEOFAC_N2S),
        geofac_grg_x=ip.get(iattrs.GEOFAC_GRG_X),
        geofac_grg_y=ip.get(iattrs.GEOFAC_GRG_Y),
        nudgecoeff_e=ip.get(iattrs.NUDGECOEFFS_E),
    )
    metric_state = diffusion_states.DiffusionMetricState(
        theta_ref_mc=mf.get(mattrs.THETA_REF_MC),
        wgtfac_c=mf.get(mattrs.WGTFAC_C),
        zd_intcoef=mf.get(mattrs.ZD_INTCOEF),
        zd_vertoffset=mf.get(mattrs.ZD_VERTOFFSET),
        zd_diffcoef=mf.get(mattrs.ZD_DIFFCOEF),
    )
    return cell_params, edge_params, interpolation_state, metric_state


def mask_hdiff(setup: Setup) -> np.ndarray:
    """ICON's mask_hdiff (cells x levels), as ICON4Py's metric code selects the zd points.

    ICON4Py 0.4.1 has no mask_hdiff field; its compute_diffusion_mask_and_coef masks
    zd_diffcoef with exactly this selection, which is reproduced from its helper here.
    """
    from icon4py.model.common import dimension as dims
    from icon4py.model.common.grid import horizontal as h_grid
    from icon4py.model.common.metrics import compute_diffusion_metrics as cdm, metrics_attributes as ma

    mf, grid = setup.metrics, setup.grid
    nlev = grid.num_levels
    kstart, kend, cell_mask = cdm._compute_k_start_end(
        z_mc=mf.get(ma.Z_MC).asnumpy(),
        max_nbhgt=mf.get(ma.MAX_NBHGT).asnumpy(),
        maxslp_avg=mf.get(ma.MAXSLP_AVG).asnumpy(),
        maxhgtd_avg=mf.get(ma.MAXHGTD_AVG).asnumpy(),
        c_owner_mask=mf.get("c_owner_mask").asnumpy(),
        thslp_zdiffu=mf._config.thslp_zdiffu,
        thhgtd_zdiffu=mf._config.thhgtd_zdiffu,
        nlev=nlev,
    )
    ncell = kstart.shape[0]
    nudging = grid.start_index(h_grid.domain(dims.CellDim)(h_grid.Zone.NUDGING))
    valid = cell_mask & (np.arange(ncell) >= nudging)
    k = np.arange(nlev)[None, :]
    return valid[:, None] & (k >= kstart[:, None]) & (k < kend[:, None])


# --------------------------------------------------------------------------------------
# initial states
# --------------------------------------------------------------------------------------
def _unit_vectors(lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=-1)


class SmoothField:
    """Sum of a few plane waves in 3-d on the unit sphere, with level-dependent phases."""

    def __init__(self, rng: np.random.Generator, wavenumber: float, nwaves: int = 6):
        d = rng.normal(size=(nwaves, 3))
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        self.k = d * wavenumber * rng.uniform(0.5, 1.5, size=(nwaves, 1))
        self.amp = rng.normal(size=nwaves) / math.sqrt(nwaves)
        self.phase = rng.uniform(0.0, 2.0 * math.pi, size=nwaves)
        self.kphase = rng.uniform(0.2, 0.8, size=nwaves)

    def __call__(self, xyz: np.ndarray, nk: int) -> np.ndarray:
        arg = xyz @ self.k.T  # (n, nwaves)
        out = np.zeros((xyz.shape[0], nk))
        for k in range(nk):
            out[:, k] = np.sin(arg + self.phase + self.kphase * k) @ self.amp
        return out


def initial_states(setup: Setup, seed: int, rng_wavelength: float):
    """Smooth random states plus a little noise; cold pools on the two lowest levels."""
    from icon4py.model.common import dimension as dims
    from icon4py.model.common.grid import geometry_attributes as gmeta, horizontal as h_grid
    from icon4py.model.common.metrics import metrics_attributes as mattrs

    rng = np.random.default_rng(seed)
    g, grid = setup.geometry, setup.grid
    nlev = grid.num_levels
    radius = float(grid.grid_params.radius)
    wavenumber = 2.0 * math.pi * radius / rng_wavelength

    xyz_c = _unit_vectors(g.get(gmeta.CELL_LON).asnumpy(), g.get(gmeta.CELL_LAT).asnumpy())
    xyz_e = _unit_vectors(g.get(gmeta.EDGE_LON).asnumpy(), g.get(gmeta.EDGE_LAT).asnumpy())
    nc, ne = xyz_c.shape[0], xyz_e.shape[0]

    def noise(shape, scale):
        return scale * rng.standard_normal(shape)

    # vn: normal component of a smooth (u, v) wind of about 20 m/s, plus noise.
    u = 15.0 + 20.0 * SmoothField(rng, wavenumber)(xyz_e, nlev)
    v = 20.0 * SmoothField(rng, wavenumber)(xyz_e, nlev)
    nx = g.get(gmeta.EDGE_NORMAL_U).asnumpy()[:, None]
    ny = g.get(gmeta.EDGE_NORMAL_V).asnumpy()[:, None]
    vn = u * nx + v * ny + noise((ne, nlev), 0.5)
    # a few strong jets (about 1 % of the edges, all levels, none in boundary rows 1-4)
    # so that the Smagorinsky coefficient reaches its upper limit smag_limit near them
    first_e = grid.start_index(h_grid.domain(dims.EdgeDim)(h_grid.Zone.LATERAL_BOUNDARY_LEVEL_5))
    jets = rng.choice(np.arange(first_e, ne), size=max(2, ne // 100), replace=False)
    vn[jets, :] += rng.choice([-1.0, 1.0], size=(jets.size, 1)) * 2500.0

    w = 0.5 * SmoothField(rng, wavenumber)(xyz_c, nlev + 1) + noise((nc, nlev + 1), 0.02)
    w[:, nlev] = 0.0  # w vanishes at the ground for flat ICON set-ups; keep it simple

    theta_ref = setup.metrics.get(mattrs.THETA_REF_MC).asnumpy()
    z_mc = setup.metrics.get(mattrs.Z_MC).asnumpy()
    theta_v = theta_ref + 2.0 * SmoothField(rng, wavenumber)(xyz_c, nlev) + noise((nc, nlev), 0.05)

    # cold pools: about 8 % of the cells (not in the boundary rows) 8 K colder on the
    # two lowest levels than the smooth field around them.
    first = grid.start_index(h_grid.domain(dims.CellDim)(h_grid.Zone.NUDGING))
    candidates = np.arange(first, nc)
    cold = rng.choice(candidates, size=max(4, int(0.08 * candidates.size)), replace=False)
    theta_v[cold, nlev - 2 :] -= 8.0

    exner = (1.0 - 9.80665 * z_mc / (1004.64 * 290.0)) * (1.0 + noise((nc, nlev), 1.0e-4))
    rho = 1.2 * np.exp(-z_mc / 8000.0) * (1.0 + noise((nc, nlev), 1.0e-3))

    diag = {
        "div_ic": 1.0e-5 * SmoothField(rng, wavenumber)(xyz_c, nlev + 1) + noise((nc, nlev + 1), 1.0e-6),
        "hdef_ic": 1.0e-9 * np.abs(SmoothField(rng, wavenumber)(xyz_c, nlev + 1)),
        "dwdx": 1.0e-6 * SmoothField(rng, wavenumber)(xyz_c, nlev + 1),
        "dwdy": 1.0e-6 * SmoothField(rng, wavenumber)(xyz_c, nlev + 1),
    }
    prog = {"vn": vn, "w": w, "theta_v": theta_v, "exner": exner, "rho": rho}
    return prog, diag, np.sort(cold)


# --------------------------------------------------------------------------------------
# NetCDF output
# --------------------------------------------------------------------------------------
class Writer:
    def __init__(self, path: pathlib.Path):
        import netCDF4

        self.ds = netCDF4.Dataset(path, "w", format="NETCDF4")

    def dim(self, name: str, size: int) -> None:
        if name not in self.ds.dimensions:
            self.ds.createDimension(name, size)

    def var(self, name: str, data: np.ndarray, dims: tuple[str, ...], **attrs) -> None:
        data = np.asarray(data)
        if data.dtype == np.bool_:
            data = data.astype(np.int8)
        elif np.issubdtype(data.dtype, np.integer):
            data = data.astype(np.int32)
        else:
            data = data.astype(np.float64)
        for d, n in zip(dims, data.shape):
            self.dim(d, n)
        v = self.ds.createVariable(name, data.dtype, dims, zlib=True, complevel=9, shuffle=True)
        v[...] = data
        for k, val in attrs.items():
            v.setncattr(k, val)

    def close(self) -> None:
        self.ds.close()


def _attr_value(value):
    if isinstance(value, enum.Enum):
        return int(value.value)
    if isinstance(value, bool):
        return np.int8(value)
    return value


def horizontal_zones(grid) -> dict[str, tuple[int, int]]:
    from icon4py.model.common import dimension as dims
    from icon4py.model.common.grid import horizontal as h_grid

    out = {}
    for dim, tag in ((dims.CellDim, "cell"), (dims.EdgeDim, "edge"), (dims.VertexDim, "vertex")):
        for zone in h_grid.Zone:
            try:
                dom = h_grid.domain(dim)(zone)
                out[f"{tag}:{zone.name}"] = (int(grid.start_index(dom)), int(grid.end_index(dom)))
            except Exception:  # zone not defined for this dimension
                continue
    return out


# --------------------------------------------------------------------------------------
# one case
# --------------------------------------------------------------------------------------
def run_case(case: str, out_dir: pathlib.Path, backend_name: str) -> dict:
    import gt4py.next as gtx

    from icon4py.model.atmosphere.diffusion import diffusion, diffusion_states
    from icon4py.model.common import dimension as dims, model_backends
    from icon4py.model.common.decomposition import definitions as decomp_defs
    from icon4py.model.common.states import prognostic_state as prognostics

    spec = CASES[case]
    backend = model_backends.BACKENDS[backend_name]
    allocator = model_backends.get_allocator(backend)

    grid_file = out_dir / f"{case}_grid.nc"
    log(f"{case}: grid file {grid_file.name}")
    write_grid_file(case, spec["grid"], grid_file)

    log(f"{case}: grid manager and factories")
    setup = build_setup(grid_file, spec["num_levels"], spec["mountain"], backend)
    grid, nlev = setup.grid, spec["num_levels"]
    cell_params, edge_params, interp_state, metric_state = granule_states(setup)
    config = diffusion_config()
    params = diffusion.DiffusionParams(config)

    dtime0 = DTIME_PER_KM * setup.mean_edge_length / 1000.0
    prog0, diag0, cold_cells = initial_states(setup, spec["seed"], 8.0 * setup.mean_edge_length)

    log(f"{case}: Diffusion.__init__ ({grid.num_cells} cells, {nlev} levels)")
    t0 = time.perf_counter()
    granule = diffusion.Diffusion(
        grid=grid,
        config=config,
        params=params,
        vertical_grid=setup.vertical_grid,
        metric_state=metric_state,
        interpolation_state=interp_state,
        edge_params=edge_params,
        cell_params=cell_params,
        backend=backend,
        exchange=decomp_defs.single_node_exchange,
    )
    t_init = time.perf_counter() - t0
    log(f"{case}: init {t_init:.1f} s")

    def as_field(arr, *d):
        return gtx.as_field(d, arr.copy(), allocator=allocator)

    prognostic = prognostics.PrognosticState(
        vn=as_field(prog0["vn"], dims.EdgeDim, dims.KDim),
        w=as_field(prog0["w"], dims.CellDim, dims.KDim),
        theta_v=as_field(prog0["theta_v"], dims.CellDim, dims.KDim),
        exner=as_field(prog0["exner"], dims.CellDim, dims.KDim),
        rho=as_field(prog0["rho"], dims.CellDim, dims.KDim),
    )
    diagnostic = diffusion_states.DiffusionDiagnosticState(
        **{n: as_field(diag0[n], dims.CellDim, dims.KDim) for n in DIAGNOSTIC_FIELDS}
    )

    def snapshot():
        s = {n: getattr(prognostic, n).asnumpy().copy() for n in PROGNOSTIC_FIELDS}
        s.update({n: getattr(diagnostic, n).asnumpy().copy() for n in DIAGNOSTIC_FIELDS})
        return s

    calls = []
    for i, (initial_run, fac) in enumerate(CALLS):
        dtime = dtime0 * fac
        before = snapshot()
        t0 = time.perf_counter()
        granule.run(diagnostic, prognostic, dtime, initial_run=initial_run)
        dt_run = time.perf_counter() - t0
        after = snapshot()
        inter = {n: getattr(granule, n).asnumpy().copy() for n in INTERMEDIATE_FIELDS}
        kf = {"diff_multfac_smag": granule.diff_multfac_smag.asnumpy().copy()}
        kf.update(used_factors(granule, grid, allocator, initial_run))
        calls.append(dict(initial_run=initial_run, dtime=dtime, before=before, after=after,
                          inter=inter, kfields=kf, seconds=dt_run))
        log(f"{case}: call {i} (initial_run={initial_run}, dtime={dtime:.3f}) {dt_run:.2f} s")

    stats = write_reference(case, out_dir / f"{case}.nc", setup, config, params, granule,
                            cell_params, edge_params, interp_state, metric_state, calls,
                            cold_cells, spec, grid_file.name)
    stats["init_seconds"] = t_init
    stats["dtime"] = [c["dtime"] for c in calls]
    return stats


def used_factors(granule, grid, allocator, initial_run: bool) -> dict:
    """diff_multfac_vn, smag_limit and smag_offset as the call used them.

    A call with initial_run=True uses fields made by the granule's own
    setup_fields_for_initial_step (and offset 0); later calls use the granule's fields."""
    from icon4py.model.common import dimension as dims
    from icon4py.model.common.utils import data_allocation as data_alloc

    if not initial_run:
        return {"diff_multfac_vn_used": granule.diff_multfac_vn.asnumpy().copy(),
                "smag_limit_used": granule.smag_limit.asnumpy().copy(),
                "smag_offset_used": float(granule.smag_offset)}
    dmv = data_alloc.zero_field(grid, dims.KDim, allocator=allocator)
    lim = data_alloc.zero_field(grid, dims.KDim, allocator=allocator)
    granule.setup_fields_for_initial_step(granule._params.K4, granule.config.hdiff_efdt_ratio, dmv, lim)
    return {"diff_multfac_vn_used": dmv.asnumpy().copy(), "smag_limit_used": lim.asnumpy().copy(),
            "smag_offset_used": 0.0}


def write_reference(case, path, setup, config, params, granule, cell_params, edge_params,
                    interp_state, metric_state, calls, cold_cells, spec, grid_file_name) -> dict:
    from importlib import metadata

    from icon4py.model.common import dimension as dims

    grid, vg, vc = setup.grid, setup.vertical_grid, setup.vertical_config
    nlev = grid.num_levels
    w = Writer(path)
    ds = w.ds

    # ---- global attributes: provenance, config, derived parameters, vertical grid
    ds.setncattr("title", f"ICON4Py diffusion granule reference data, case {case}")
    ds.setncattr("grid_file", grid_file_name)
    for pkg in ("icon4py-atmosphere-diffusion", "icon4py-common", "gt4py", "icon-grid-generator"):
        ds.setncattr(f"version_{pkg.replace('-', '_')}", metadata.version(pkg))
    ds.setncattr("backend", "gtfn_cpu")
    ds.setncattr("limited_area", np.int8(grid.limited_area))
    ds.setncattr("num_cells", grid.num_cells)
    ds.setncattr("num_edges", grid.num_edges)
    ds.setncattr("num_vertices", grid.num_vertices)
    ds.setncattr("num_calls", len(calls))
    for f in dataclasses.fields(config):
        ds.setncattr(f"config_{f.name}", _attr_value(getattr(config, f.name)))
    for name in ("K2", "K4", "K6", "K4W"):
        ds.setncattr(f"params_{name}", getattr(params, name))
    for name in ("rd_o_cvd", "thresh_tdiff", "nudgezone_diff", "bdy_diff", "fac_bdydiff_v",
                 "smag_offset", "diff_multfac_w"):
        ds.setncattr(f"granule_{name}", float(getattr(granule, name)))
    from icon4py.model.common import constants

    ds.setncattr("granule_smallest_vpfloat", float(constants.DBL_EPS))
    for f in dataclasses.fields(vc):
        val = getattr(vc, f.name)
        if val is None or isinstance(val, pathlib.Path):
            continue
        ds.setncattr(f"vertical_{f.name.lstrip('_')}", val)
    ds.setncattr("num_levels", nlev)
    ds.setncattr("end_index_of_damping_layer", int(vg.end_index_of_damping_layer))
    ds.setncattr("nflatlev", int(vg.nflatlev))
    ds.setncattr("mean_cell_area", float(cell_params.mean_cell_area))
    ds.setncattr("mean_edge_length", setup.mean_edge_length)
    ds.setncattr("sphere_radius", float(grid.grid_params.radius))
    ds.setncattr("mountain", str(spec["mountain"]))
    metrics_cfg = setup.metrics._config
    ds.setncattr("metrics_thslp_zdiffu", metrics_cfg.thslp_zdiffu)
    ds.setncattr("metrics_thhgtd_zdiffu", metrics_cfg.thhgtd_zdiffu)

    # ---- zones
    zones = horizontal_zones(grid)
    names = sorted(zones)
    w.var("zone_start_index", np.array([zones[n][0] for n in names]), ("zone",))
    w.var("zone_end_index", np.array([zones[n][1] for n in names]), ("zone",))
    zn = ds.createVariable("zone_name", str, ("zone",))
    for i, n in enumerate(names):
        zn[i] = n
    for n in names:  # also as attributes, for convenience
        ds.setncattr(f"zone_{n.replace(':', '_')}", np.array(zones[n], dtype=np.int32))
    # the ranges that the granule itself used
    for name in sorted(vars(granule)):
        value = getattr(granule, name)
        if name.startswith(("_cell_", "_edge_", "_vertex_", "_horizontal_start")) and isinstance(
            value, (int, np.integer)
        ):
            ds.setncattr(f"granule{name}", int(value))

    # ---- connectivities (zero-based, as ICON4Py used them)
    for name, d in CONNECTIVITY_DIMS.items():
        conn = grid.get_connectivity(name).asnumpy()
        w.var(name, conn, d)

    # ---- vertical grid
    w.var("vct_a", vg.vct_a.asnumpy(), ("khalf",))
    w.var("vct_b", vg.vct_b.asnumpy(), ("khalf",))
    w.var("interface_physical_height", vg.interface_physical_height.asnumpy(), ("khalf",))

    # ---- metric state
    w.var("theta_ref_mc", metric_state.theta_ref_mc.asnumpy(), ("cell", "k"))
    w.var("wgtfac_c", metric_state.wgtfac_c.asnumpy(), ("cell", "khalf"))
    w.var("zd_intcoef", metric_state.zd_intcoef.asnumpy(), ("cell", "c2e2c", "k"))
    w.var("zd_vertoffset", metric_state.zd_vertoffset.asnumpy(), ("cell", "c2e2c", "k"))
    w.var("zd_diffcoef", metric_state.zd_diffcoef.asnumpy(), ("cell", "k"))
    mh = mask_hdiff(setup)
    w.var("mask_hdiff", mh, ("cell", "k"),
          comment="not an ICON4Py 0.4.1 field: the selection with which ICON4Py masks zd_diffcoef")
    w.var("topography", setup.topography, ("cell",))

    # ---- interpolation state
    for name in ("e_bln_c_s", "geofac_div"):
        w.var(name, getattr(interp_state, name).asnumpy(), ("cell", "c2e"))
    for name in ("rbf_coeff_1", "rbf_coeff_2"):
        w.var(name, getattr(interp_state, name).asnumpy(), ("vertex", "v2e"))
    for name in ("geofac_n2s", "geofac_grg_x", "geofac_grg_y"):
        w.var(name, getattr(interp_state, name).asnumpy(), ("cell", "c2e2co"))
    w.var("nudgecoeff_e", interp_state.nudgecoeff_e.asnumpy(), ("edge",))

    # ---- edge and cell params
    for name in ("tangent_orientation", "inverse_primal_edge_lengths",
                 "inverse_vertex_vertex_lengths", "inverse_dual_edge_lengths", "edge_areas",
                 "primal_edge_lengths", "dual_edge_lengths"):
        w.var(name, getattr(edge_params, name).asnumpy(), ("edge",))
    for name in ("primal_normal_vert", "dual_normal_vert"):
        comps = getattr(edge_params, name)
        w.var(f"{name}_x", comps[0].asnumpy(), ("edge", "e2c2v"))
        w.var(f"{name}_y", comps[1].asnumpy(), ("edge", "e2c2v"))
    w.var("area", cell_params.area.asnumpy(), ("cell",))
    w.var("refin_c_ctrl", grid.refinement_control[dims.CellDim].asnumpy(), ("cell",))
    w.var("refin_e_ctrl", grid.refinement_control[dims.EdgeDim].asnumpy(), ("edge",))
    w.var("refin_v_ctrl", grid.refinement_control[dims.VertexDim].asnumpy(), ("vertex",))

    # ---- states and intermediates per call
    fdims = {"vn": ("edge", "k"), "w": ("cell", "khalf"), "theta_v": ("cell", "k"),
             "exner": ("cell", "k"), "rho": ("cell", "k")}
    for n in DIAGNOSTIC_FIELDS:
        fdims[n] = ("cell", "khalf")
    idims = {"kh_smag_e": ("edge", "k"), "kh_smag_ec": ("edge", "k"), "z_nabla2_e": ("edge", "k"),
             "u_vert": ("vertex", "k"), "v_vert": ("vertex", "k")}
    w.var("dtime", np.array([c["dtime"] for c in calls]), ("call",))
    w.var("initial_run", np.array([c["initial_run"] for c in calls]), ("call",))
    for i, c in enumerate(calls):
        for n, d in fdims.items():
            w.var(f"{n}_in_{i}", c["before"][n], d)
            w.var(f"{n}_out_{i}", c["after"][n], d)
        for n, d in idims.items():
            w.var(f"{n}_out_{i}", c["inter"][n], d)
        for n in ("diff_multfac_smag", "diff_multfac_vn_used", "smag_limit_used"):
            w.var(f"{n}_{i}", c["kfields"][n], ("k",))
    w.var("smag_offset_used", np.array([c["kfields"]["smag_offset_used"] for c in calls]), ("call",))
    for n in K_FIELDS:
        w.var(n, getattr(granule, n).asnumpy(), ("k",))
    w.var("cold_pool_cells", cold_cells, ("cold_pool",))
    w.close()

    # ---- statistics: which branches were active
    stats = {}
    zd = metric_state.zd_diffcoef.asnumpy()
    stats["zd_points"] = int(np.count_nonzero(zd))
    stats["zd_cells"] = int(np.count_nonzero(np.any(zd != 0.0, axis=1)))
    stats["mask_hdiff_true"] = int(mh.sum())
    for i, c in enumerate(calls):
        kh = c["inter"]["kh_smag_e"]
        stats[f"call{i}_kh_smag_e_nonzero"] = int(np.count_nonzero(kh))
        stats[f"call{i}_kh_smag_e_size"] = int(kh.size)
        stats[f"call{i}_kh_smag_e_edges_nonzero"] = int(np.count_nonzero(np.any(kh != 0, axis=1)))
        stats[f"call{i}_kh_smag_ec_positive_after_offset"] = int(
            np.count_nonzero(c["inter"]["kh_smag_ec"] > granule.smag_offset))
        lim = c["kfields"]["smag_limit_used"][None, :]
        kh_pre = np.clip(c["inter"]["kh_smag_ec"] - c["kfields"]["smag_offset_used"], 0.0, lim)
        stats[f"call{i}_kh_smag_e_at_limit"] = int(np.count_nonzero(kh_pre == lim))
        stats[f"call{i}_kh_smag_e_zero_before_cold_pools"] = int(np.count_nonzero(kh_pre == 0.0))
        stats[f"call{i}_kh_smag_e_between"] = int(np.count_nonzero((kh_pre > 0.0) & (kh_pre < lim)))
        nlev_ = kh.shape[1]
        stats[f"call{i}_edges_enhanced_by_cold_pools"] = int(
            np.count_nonzero(kh[:, nlev_ - 2:] > kh_pre[:, nlev_ - 2:]))
        stats[f"call{i}_cold_pool_cells"] = int(cold_pool_count(grid, c["before"]["theta_v"],
                                                                 metric_state.theta_ref_mc.asnumpy()))
        for n in ("div_ic", "hdef_ic", "dwdx", "dwdy", "vn", "w", "theta_v", "exner"):
            stats[f"call{i}_{n}_changed"] = int(np.count_nonzero(c["before"][n] != c["after"][n]))
    stats["file_bytes"] = path.stat().st_size
    return stats


def cold_pool_count(grid, theta_v: np.ndarray, theta_ref: np.ndarray) -> int:
    """Cells (two lowest levels) where ICON4Py's cold-pool criterion holds, via numpy."""
    c2e2c = grid.get_connectivity("C2E2C").asnumpy()
    nlev = theta_v.shape[1]
    ks = slice(nlev - 2, nlev)
    tdiff = theta_v[:, ks] - theta_v[c2e2c][:, :, ks].sum(axis=1) / 3.0
    trefdiff = theta_ref[:, ks] - theta_ref[c2e2c][:, :, ks].sum(axis=1) / 3.0
    cond = ((tdiff - trefdiff < -5.0) & (trefdiff < 0.0)) | (tdiff - trefdiff < -7.5)
    return int(np.count_nonzero(cond))


def check_reference(path: pathlib.Path) -> dict:
    """Self-consistency of a written file, numpy only (no ICON4Py): the second RBF
    reconstruction, the vn update (levels above the cold-pool levels, edges from the second
    nudging row on), the exner update, and in_<i> == out_<i-1>. Returns the largest relative
    differences per call."""
    import netCDF4

    ds = netCDF4.Dataset(path)

    def g(n):
        return np.asarray(ds[n][:])

    nlev = int(ds.num_levels)
    v2e, e2c2v = g("V2E"), g("E2C2V")
    rbf1 = np.where(v2e < 0, 0.0, g("rbf_coeff_1"))  # -1: pentagon vertices (global grids)
    vs, ve = ds.granule_vertex_start_lateral_boundary_level_2, ds.granule_vertex_end_local
    es, ee = ds.granule_edge_start_nudging_level_2, ds.granule_edge_end_local
    cs, ce = ds.granule_cell_start_nudging, ds.granule_cell_end_local
    pnx, pny = g("primal_normal_vert_x")[:, :, None], g("primal_normal_vert_y")[:, :, None]
    ivv = g("inverse_vertex_vertex_lengths")[:, None]
    ipe = g("inverse_primal_edge_lengths")[:, None]
    area_e = g("edge_areas")[:, None]
    out = {}
    for i in range(int(ds.num_calls)):
        zn2, uv, vv = g(f"z_nabla2_e_out_{i}"), g(f"u_vert_out_{i}"), g(f"v_vert_out_{i}")
        u_ref = np.einsum("vj,vjk->vk", rbf1, zn2[np.maximum(v2e, 0)])
        p = uv[e2c2v] * pnx + vv[e2c2v] * pny
        nabla4 = 4.0 * ((p[:, 2] + p[:, 3] - 2.0 * zn2) * ivv**2
                        + (p[:, 0] + p[:, 1] - 2.0 * zn2) * ipe**2)
        kh = g(f"kh_smag_e_out_{i}")
        if ds.limited_area:
            kh = np.maximum(ds.granule_nudgezone_diff * g("nudgecoeff_e")[:, None], kh)
        vn_in, vn_out = g(f"vn_in_{i}"), g(f"vn_out_{i}")
        vn_ref = vn_in + area_e * (kh * zn2 - g(f"diff_multfac_vn_used_{i}")[None, :] * nabla4 * area_e)
        th_in, th_out = g(f"theta_v_in_{i}"), g(f"theta_v_out_{i}")
        ex_ref = g(f"exner_in_{i}") * (1.0 + ds.granule_rd_o_cvd * (th_out / th_in - 1.0))
        ex_out = g(f"exner_out_{i}")

        def rel(a, b):
            return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))

        out[f"call{i}"] = {
            "rbf": float(np.max(np.abs(u_ref[vs:ve] - uv[vs:ve])) / np.max(np.abs(uv[vs:ve]))),
            "vn": rel(vn_ref[es:ee, : nlev - 2], vn_out[es:ee, : nlev - 2]),
            "exner": rel(ex_ref[cs:ce], ex_out[cs:ce]),
            "chained": i == 0 or all(
                np.array_equal(g(f"{n}_in_{i}"), g(f"{n}_out_{i - 1}"))
                for n in PROGNOSTIC_FIELDS + DIAGNOSTIC_FIELDS
            ),
        }
    ds.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    ap.add_argument("--out-dir", type=pathlib.Path, default=HERE)
    ap.add_argument("--backend", default="gtfn_cpu")
    ap.add_argument("--check", nargs="+", type=pathlib.Path, metavar="FILE",
                    help="only check written files for self-consistency (numpy, netCDF4)")
    args = ap.parse_args(argv)
    import json

    if args.check:
        for path in args.check:
            print(json.dumps({path.name: check_reference(path)}, indent=1))
        return 0
    args.out_dir.mkdir(parents=True, exist_ok=True)

    for case in args.case or sorted(CASES):
        stats = run_case(case, args.out_dir, args.backend)
        print(json.dumps({case: stats}, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
