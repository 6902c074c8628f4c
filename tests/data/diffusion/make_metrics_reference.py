#!/usr/bin/env python3
"""Writes tests/data/diffusion/metrics_reference.json: the vertical grid and the metric fields of
the diffusion granule as ICON4Py 0.4.1 computes them, for tests/diffusion/test_diffusion_metrics.cpp
(test DiffusionMetricsReference.Icon4py).

The inputs (sciproxy's R1B1 grid tables and geometry, geofac_n2s, the Gaussian mountain and the
configuration) come from the C++ test itself, so that both sides start from the same numbers:

    SCIPROXY_WRITE_METRICS_INPUTS=/tmp/metrics_inputs.json \\
        build/cpu/tests/test_diffusion_metrics --gtest_filter='DiffusionMetricsReference.*'
    python tests/data/diffusion/make_metrics_reference.py /tmp/metrics_inputs.json [out.json]

(out.json defaults to the committed file; the test reads another one named by
SCIPROXY_METRICS_REFERENCE.)

Run it with a Python 3.12 environment that has icon4py-common 0.4.1 (and its gt4py 1.2.1). What
each field is computed with:
- vct_a, vct_b and the indices: vertical._compute_vct_a_and_vct_b and vertical.VerticalGrid,
  for the case's configuration and two more (stretched, and with the maximal-thickness cut);
- z_ifc and the smoothed topography: vertical.compute_vertical_coordinate and
  topography.smooth_topography;
- z_mc, theta/exner/rho_ref_mc, wgtfac_c, the slopes and their averages: the GT4Py programs the
  metrics factory runs (vertical_operations, reference_atmosphere, compute_weight_factors,
  metric_fields), on GT4Py's embedded backend (wgtfac_c on gtfn_cpu, compiled, which the
  embedded backend cannot run);
- c_bln_avg: interpolation_fields.compute_mass_conserving_bilinear_cell_average_weight;
- max_nbhgt, zd_diffcoef, zd_intcoef, zd_vertoffset and the level ranges (mask_hdiff):
  compute_diffusion_metrics.
"""

import json
import os
import pathlib
import sys
import tempfile


# GT4Py's compiled programs go to a cache outside the repository.
os.environ.setdefault("GT4PY_BUILD_CACHE_DIR", str(pathlib.Path(tempfile.gettempdir()) / "gt4py"))

import gt4py.next as gtx
import numpy as np

from icon4py.model.common import constants, dimension as dims
from icon4py.model.common.decomposition import definitions as decomposition
from icon4py.model.common.grid import vertical as v_grid
from icon4py.model.common.interpolation import interpolation_fields
from icon4py.model.common.math import vertical_operations as vertical_ops
from icon4py.model.common.metrics import (
    compute_diffusion_metrics,
    compute_weight_factors,
    metric_fields,
    reference_atmosphere,
)
from icon4py.model.common.topography import smoothing


OUT = pathlib.Path(__file__).resolve().parent / "metrics_reference.json"


def vertical_case(name, config):
    vct_a, vct_b = v_grid._compute_vct_a_and_vct_b(config, None)
    grid = v_grid.VerticalGrid(config=config, vct_a=vct_a, vct_b=vct_b)
    return {
        "name": name,
        "num_levels": config.num_levels,
        "maximal_layer_thickness": config.maximal_layer_thickness,
        "top_height_limit_for_maximal_layer_thickness": (
            config.top_height_limit_for_maximal_layer_thickness
        ),
        "lowest_layer_thickness": config.lowest_layer_thickness,
        "model_top_height": config.model_top_height,
        "flat_height": config.flat_height,
        "stretch_factor": config.stretch_factor,
        "rayleigh_damping_height": config.rayleigh_damping_height,
        "htop_moist_proc": config.htop_moist_proc,
        "vct_a": vct_a.asnumpy().tolist(),
        "vct_b": vct_b.asnumpy().tolist(),
        "end_index_of_damping_layer": int(grid.end_index_of_damping_layer),
        "nflatlev": int(grid.nflatlev),
        "kstart_moist": int(grid.kstart_moist),
    }


def main(inputs_path, out_path=OUT):
    inputs = json.loads(pathlib.Path(inputs_path).read_text())
    nc, ne = inputs["num_cells"], inputs["num_edges"]
    vc = inputs["vertical_config"]
    nlev = vc["num_levels"]
    options = inputs["options"]
    config = v_grid.VerticalGridConfig(**vc)

    def table(name, width):
        return np.asarray(inputs[name], dtype=np.int32).reshape(-1, width)

    def values(name, width=None):
        a = np.asarray(inputs[name], dtype=np.float64)
        return a if width is None else a.reshape(-1, width)

    c2e, c2e2c = table("c2e", 3), table("c2e2c", 3)
    c2e2co, e2c = table("c2e2co", 4), table("e2c", 2)
    cell_area, topography = values("cell_area"), values("topography")
    geofac_n2s = values("geofac_n2s", 4)

    # The vertical grids: the case's, a stretched one, and one with the maximal-thickness cut.
    vertical_grids = [
        vertical_case("case", config),
        vertical_case(
            "stretched 65 levels, damping from 12.5 km",
            v_grid.VerticalGridConfig(
                num_levels=65, stretch_factor=0.9, rayleigh_damping_height=12500.0
            ),
        ),
        vertical_case(
            "30 levels, no layer thicker than 1 km below 15 km",
            v_grid.VerticalGridConfig(num_levels=30, maximal_layer_thickness=1000.0),
        ),
        vertical_case(
            "uniform 20 levels",
            v_grid.VerticalGridConfig(num_levels=20, lowest_layer_thickness=0.0),
        ),
    ]
    vct_a_field, vct_b_field = v_grid._compute_vct_a_and_vct_b(config, None)
    vertical = v_grid.VerticalGrid(config=config, vct_a=vct_a_field, vct_b=vct_b_field)
    vct_a = vct_a_field.asnumpy()

    exchange = decomposition.single_node_exchange
    smoothed = smoothing.smooth_topography(
        topography=topography,
        cell_areas=cell_area,
        geofac_n2s=geofac_n2s,
        c2e2co=c2e2co,
        exchange=exchange,
    )
    z_ifc = v_grid.compute_vertical_coordinate(
        vct_a=vct_a,
        topography=topography,
        cell_areas=cell_area,
        geofac_n2s=geofac_n2s,
        c2e2co=c2e2co,
        nflatlev=int(vertical.nflatlev),
        model_top_height=config.model_top_height,
        SLEVE_decay_scale_1=config.SLEVE_decay_scale_1,
        SLEVE_decay_exponent=config.SLEVE_decay_exponent,
        SLEVE_decay_scale_2=config.SLEVE_decay_scale_2,
        SLEVE_minimum_layer_thickness_1=config._SLEVE_minimum_layer_thickness_1,
        SLEVE_minimum_relative_layer_thickness_1=config._SLEVE_minimum_relative_layer_thickness_1,
        SLEVE_minimum_layer_thickness_2=config._SLEVE_minimum_layer_thickness_2,
        SLEVE_minimum_relative_layer_thickness_2=config._SLEVE_minimum_relative_layer_thickness_2,
        lowest_layer_thickness=config.lowest_layer_thickness,
        exchange=exchange,
    )

    # GT4Py fields and connectivities for the embedded backend (interfaces are KDim of nlev + 1).
    def cell_k(a):
        return gtx.as_field((dims.CellDim, dims.KDim), np.ascontiguousarray(a))

    def edge_k(a):
        return gtx.as_field((dims.EdgeDim, dims.KDim), np.ascontiguousarray(a))

    offsets = {
        "Koff": dims.KDim,
        "E2C": gtx.as_connectivity((dims.EdgeDim, dims.E2CDim), dims.CellDim, e2c),
        "C2E": gtx.as_connectivity((dims.CellDim, dims.C2EDim), dims.EdgeDim, c2e),
        "C2E2CO": gtx.as_connectivity((dims.CellDim, dims.C2E2CODim), dims.CellDim, c2e2co),
    }
    z_ifc_f = cell_k(z_ifc)
    z_mc_f = cell_k(np.zeros((nc, nlev)))
    vertical_ops.average_two_vertical_levels_downwards_on_cells.with_backend(None)(
        input_field=z_ifc_f,
        average=z_mc_f,
        horizontal_start=0,
        horizontal_end=nc,
        vertical_start=0,
        vertical_end=nlev,
        offset_provider=offsets,
    )
    z_mc = z_mc_f.asnumpy()

    theta_f, exner_f, rho_f = (cell_k(np.zeros((nc, nlev))) for _ in range(3))
    reference_atmosphere.compute_reference_atmosphere_cell_fields.with_backend(None)(
        z_height=z_mc_f,
        exner_ref_mc=exner_f,
        rho_ref_mc=rho_f,
        theta_ref_mc=theta_f,
        p0ref=constants.REFERENCE_PRESSURE,
        p0sl_bg=constants.SEA_LEVEL_PRESSURE,
        grav=constants.GRAV,
        cpd=constants.CPD,
        rd=constants.RD,
        h_scal_bg=constants.HEIGHT_SCALE_FOR_REFERENCE_ATMOSPHERE,
        t0sl_bg=constants.SEA_LEVEL_TEMPERATURE,
        del_t_bg=constants.DELTA_TEMPERATURE,
        horizontal_start=0,
        horizontal_end=nc,
        vertical_start=0,
        vertical_end=nlev,
        offset_provider=offsets,
    )

    wgtfac_f = cell_k(np.zeros((nc, nlev + 1)))
    # On gtfn_cpu: the embedded backend cannot evaluate its concat_where with a scalar branch.
    compute_weight_factors.compute_wgtfac_c.with_backend(gtx.gtfn_cpu)(
        wgtfac_c=wgtfac_f,
        z_ifc=z_ifc_f,
        nlev=nlev,
        horizontal_start=0,
        horizontal_end=nc,
        vertical_start=0,
        vertical_end=nlev + 1,
        offset_provider={},
    )

    ddxn_half_f = edge_k(np.zeros((ne, nlev + 1)))
    metric_fields.compute_ddxn_z_half_e.with_backend(None)(
        z_ifc=z_ifc_f,
        inv_dual_edge_length=gtx.as_field((dims.EdgeDim,), values("inverse_dual_edge_lengths")),
        ddxn_z_half_e=ddxn_half_f,
        horizontal_start=0,
        horizontal_end=ne,
        vertical_start=0,
        vertical_end=nlev + 1,
        offset_provider=offsets,
    )
    ddxn_full_f = edge_k(np.zeros((ne, nlev)))
    vertical_ops.average_two_vertical_levels_downwards_on_edges.with_backend(None)(
        input_field=ddxn_half_f,
        average=ddxn_full_f,
        horizontal_start=0,
        horizontal_end=ne,
        vertical_start=0,
        vertical_end=nlev,
        offset_provider=offsets,
    )
    maxslp_f, maxhgtd_f = cell_k(np.zeros((nc, nlev))), cell_k(np.zeros((nc, nlev)))
    metric_fields.compute_maxslp_maxhgtd.with_backend(None)(
        ddxn_z_full=ddxn_full_f,
        dual_edge_length=gtx.as_field((dims.EdgeDim,), values("dual_edge_length")),
        maxslp=maxslp_f,
        maxhgtd=maxhgtd_f,
        horizontal_start=0,
        horizontal_end=nc,
        vertical_start=0,
        vertical_end=nlev,
        offset_provider=offsets,
    )

    c_bln_avg = interpolation_fields.compute_mass_conserving_bilinear_cell_average_weight(
        c2e2c0=c2e2co,
        lat=values("cell_lat"),
        lon=values("cell_lon"),
        cell_areas=cell_area,
        cell_owner_mask=np.ones(nc, dtype=bool),
        divergence_averaging_central_cell_weight=options[
            "divergence_averaging_central_cell_weight"
        ],
        horizontal_start=0,
        horizontal_start_level_3=0,
        exchange=exchange,
    )
    maxslp_avg_f, maxhgtd_avg_f = cell_k(np.zeros((nc, nlev))), cell_k(np.zeros((nc, nlev)))
    metric_fields.compute_weighted_cell_neighbor_sum.with_backend(None)(
        maxslp=maxslp_f,
        maxhgtd=maxhgtd_f,
        c_bln_avg=gtx.as_field((dims.CellDim, dims.C2E2CODim), c_bln_avg),
        maxslp_avg=maxslp_avg_f,
        maxhgtd_avg=maxhgtd_avg_f,
        horizontal_start=0,
        horizontal_end=nc,
        vertical_start=0,
        vertical_end=nlev,
        offset_provider=offsets,
    )
    maxslp_avg, maxhgtd_avg = maxslp_avg_f.asnumpy(), maxhgtd_avg_f.asnumpy()

    max_nbhgt = compute_diffusion_metrics.compute_max_nbhgt_array_ns(c2e2c, z_mc, nlev)
    zd_args = dict(
        c2e2c=c2e2c,
        z_mc=z_mc,
        max_nbhgt=max_nbhgt,
        c_owner_mask=np.ones(nc, dtype=bool),
        maxslp_avg=maxslp_avg,
        maxhgtd_avg=maxhgtd_avg,
        thslp_zdiffu=options["thslp_zdiffu"],
        thhgtd_zdiffu=options["thhgtd_zdiffu"],
        cell_nudging=0,
        nlev=nlev,
    )
    zd_diffcoef = compute_diffusion_metrics.compute_diffusion_mask_and_coef(**zd_args)
    zd_intcoef, zd_vertoffset = compute_diffusion_metrics.compute_diffusion_intcoef_and_vertoffset(
        **zd_args
    )
    kstart, kend, in_range = compute_diffusion_metrics._compute_k_start_end(
        z_mc=z_mc,
        max_nbhgt=max_nbhgt,
        maxslp_avg=maxslp_avg,
        maxhgtd_avg=maxhgtd_avg,
        c_owner_mask=np.ones(nc, dtype=bool),
        thslp_zdiffu=options["thslp_zdiffu"],
        thhgtd_zdiffu=options["thhgtd_zdiffu"],
        nlev=nlev,
    )
    level = np.arange(nlev)[np.newaxis, :]
    mask_hdiff = in_range[:, np.newaxis] & (level >= kstart[:, np.newaxis]) & (
        level < kend[:, np.newaxis]
    )
    print(f"{int(mask_hdiff.sum())} points with truly horizontal diffusion", file=sys.stderr)

    def flat(a):
        return np.asarray(a).ravel().tolist()

    reference = {
        "source": "icon4py-common 0.4.1 (make_metrics_reference.py)",
        "inputs": inputs,
        "vertical_grids": vertical_grids,
        "outputs": {
            "smoothed_topography": flat(smoothed),
            "z_ifc": flat(z_ifc),
            "z_mc": flat(z_mc),
            "theta_ref_mc": flat(theta_f.asnumpy()),
            "exner_ref_mc": flat(exner_f.asnumpy()),
            "rho_ref_mc": flat(rho_f.asnumpy()),
            "wgtfac_c": flat(wgtfac_f.asnumpy()),
            "c_bln_avg": flat(c_bln_avg),
            "maxslp_avg": flat(maxslp_avg),
            "maxhgtd_avg": flat(maxhgtd_avg),
            "max_nbhgt": flat(max_nbhgt),
            "zd_diffcoef": flat(zd_diffcoef),
            "zd_intcoef": flat(zd_intcoef),
            "zd_vertoffset": [int(v) for v in np.asarray(zd_vertoffset).ravel()],
            "mask_hdiff": [int(v) for v in mask_hdiff.ravel()],
        },
    }
    pathlib.Path(out_path).write_text(json.dumps(reference) + "\n")
    print(f"wrote {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:3])
