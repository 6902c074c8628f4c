"""sciproxy.diffusion: the granule against an independent numpy implementation of ICON4Py's
stencils (written here from ICON4Py's stencil definitions, one numpy expression per stencil, as
ICON4Py's own stencil tests do), on random fields and across the configuration's branches; the
field layouts and dtypes; ICON4Py's interface (names, dicts or objects, pairs); bad input."""

import types

import numpy as np
import pytest

import sciproxy.diffusion as dif

RD, CPD = 287.04, 1004.64


def _nsum(table, terms, weighted=True):
    """Sum over the neighbour axis of terms (entity, neighbour, level), skipping table's -1."""
    return np.where((table < 0)[:, :, None], 0.0, terms).sum(axis=1)


def numpy_granule(grid, config, vg, ms, ins, eps, cps, state, dtime, initial_run):
    """One run of ICON4Py's Diffusion.run on a global grid, stencil by stencil, in numpy."""
    nlev = vg["num_levels"]
    c2e, c2e2c, c2e2co = (grid.connectivity(n) for n in ("C2E", "C2E2C", "C2E2CO"))
    e2c, e2c2v, v2e = (grid.connectivity(n) for n in ("E2C", "E2C2V", "V2E"))
    vct_a = vg["vct_a"]
    # Constants (diffusion.py, diffusion_utils.py, smagorinsky.py).
    K2 = 1.0 / (config["hdiff_efdt_ratio"] * 8.0)
    K4 = K2 / 8.0
    K4W = 1.0 / (config["hdiff_w_efdt_ratio"] * 36.0)
    nsub = float(config["ndyn_substeps"])
    if initial_run:
        diff_multfac_vn = np.full(nlev, K4 / 3.0 * config["hdiff_efdt_ratio"])
        smag_offset = 0.0
    else:
        diff_multfac_vn = np.full(nlev, min(1.0 / 128.0, K4 * nsub / 3.0))
        smag_offset = 0.25 * K4 * nsub
    smag_limit = 0.125 - 4.0 * diff_multfac_vn
    diff_multfac_w = min(1.0 / 48.0, K4W * nsub)
    f1, f2, f3, f4 = (config[f"smagorinski_scaling_factor{s}"] for s in ("", "2", "3", "4"))
    z1, z2, z3, z4 = (config[f"smagorinski_scaling_height{s}"] for s in ("", "2", "3", "4"))
    alin = (f2 - f1) / (z2 - z1)
    bqdr = ((f4 - f2) * (z3 - z2) - (f3 - f2) * (z4 - z2)) / ((z3 - z2) * (z4 - z2) * ((z4 - z2) - (z3 - z2)))
    aqdr = (f3 - f2) / (z3 - z2) - bqdr * (z3 - z2)
    zf = 0.5 * (vct_a[:-1] + vct_a[1:])
    dzlin = np.minimum(z2 - z1, np.maximum(0.0, zf - z1))
    dzqdr = np.minimum(z4 - z2, np.maximum(0.0, zf - z2))
    enh_smag_fac = f1 + dzlin * alin + dzqdr * (aqdr + dzqdr * bqdr)
    nrd = vg["end_index_of_damping_layer"]
    diff_multfac_n2w = np.zeros(nlev)
    k = np.arange(1, nrd + 1)
    diff_multfac_n2w[k] = (1.0 / 12.0) * ((vct_a[k] - vct_a[nrd + 1]) / (vct_a[1] - vct_a[nrd + 1])) ** 4
    diff_multfac_smag = enh_smag_fac * dtime

    vn, w, theta_v, exner = (state[n] for n in ("vn", "w", "theta_v", "exner"))

    def rbf(x):
        return (_nsum(v2e, ins["rbf_coeff_1"][:, :, None] * x[np.maximum(v2e, 0)], weighted=True),
                _nsum(v2e, ins["rbf_coeff_2"][:, :, None] * x[np.maximum(v2e, 0)], weighted=True))

    # mo_intp_rbf_rbf_vec_interpol_vertex, calculate_nabla2_and_smag_coefficients_for_vn
    u_vert, v_vert = rbf(vn)
    pnx, pny, dnx, dny = (eps[n][:, :, None] for n in ("primal_normal_vert_x", "primal_normal_vert_y",
                                                      "dual_normal_vert_x", "dual_normal_vert_y"))
    v_n = u_vert[e2c2v] * pnx + v_vert[e2c2v] * pny
    v_t = u_vert[e2c2v] * dnx + v_vert[e2c2v] * dny
    lp = eps["inverse_primal_edge_lengths"][:, None]
    lvv = eps["inverse_vertex_vertex_lengths"][:, None]
    z_nabla2_e = 4.0 * ((v_n[:, 0] + v_n[:, 1] - 2.0 * vn) * lp ** 2 + (v_n[:, 2] + v_n[:, 3] - 2.0 * vn) * lvv ** 2)
    l_p = eps["tangent_orientation"][:, None] * lp
    part1 = (v_n[:, 3] - v_n[:, 2]) * lvv - (v_t[:, 1] - v_t[:, 0]) * l_p
    part2 = (v_n[:, 1] - v_n[:, 0]) * l_p + (v_t[:, 3] - v_t[:, 2]) * lvv
    kh_smag_ec = diff_multfac_smag * np.sqrt(part1 ** 2 + part2 ** 2)
    kh_smag_e = np.minimum(np.maximum(0.0, kh_smag_ec - smag_offset), smag_limit)
    # calculate_diagnostic_quantities_for_turbulence
    if config["shear_type"] >= 1 or config["loutshs"] or config["a_hshr"] > 0:
        kh_c = (kh_smag_ec[c2e] * ins["e_bln_c_s"][:, :, None]).sum(1) / diff_multfac_smag
        div = (vn[c2e] * ins["geofac_div"][:, :, None]).sum(1)
        wgt = ms["wgtfac_c"][:, 1:nlev]
        state["div_ic"][:, 1:nlev] = wgt * div[:, 1:] + (1.0 - wgt) * div[:, :-1]
        state["hdef_ic"][:, 1:nlev] = (wgt * kh_c[:, 1:] + (1.0 - wgt) * kh_c[:, :-1]) ** 2
    # apply_diffusion_to_vn (global grid: the nabla2 + nabla4 update everywhere)
    u_vert, v_vert = rbf(z_nabla2_e)
    p = u_vert[e2c2v] * pnx + v_vert[e2c2v] * pny
    z_nabla4 = 4.0 * ((p[:, 2] + p[:, 3] - 2.0 * z_nabla2_e) * lvv ** 2 + (p[:, 0] + p[:, 1] - 2.0 * z_nabla2_e) * lp ** 2)
    area_e = eps["edge_areas"][:, None]
    if config["apply_to_horizontal_wind"]:
        vn[...] = vn + area_e * (kh_smag_e * z_nabla2_e - diff_multfac_vn * z_nabla4 * area_e)
    # apply_diffusion_to_w_and_compute_horizontal_gradients_for_turbulence
    w_old = w.copy()
    if config["shear_type"] == 2:
        state["dwdx"][:, 1:nlev] = (ins["geofac_grg_x"][:, :, None] * w_old[c2e2co][:, :, 1:nlev]).sum(1)
        state["dwdy"][:, 1:nlev] = (ins["geofac_grg_y"][:, :, None] * w_old[c2e2co][:, :, 1:nlev]).sum(1)
    if config["apply_to_vertical_wind"]:
        n2s = ins["geofac_n2s"][:, :, None]
        z_nabla2_c = (w_old[c2e2co][:, :, :nlev] * n2s).sum(1)
        area = cps["area"][:, None]
        w[:, :nlev] = w_old[:, :nlev] - diff_multfac_w * area ** 2 * (z_nabla2_c[c2e2co] * n2s).sum(1)
        kd = np.arange(1, nrd + 1)
        w[:, kd] = w[:, kd] + diff_multfac_n2w[kd] * area * z_nabla2_c[:, kd]
    if config["apply_to_temperature"]:
        # calculate_enhanced_diffusion_coefficients_for_grid_point_cold_pools (two lowest levels)
        low = slice(nlev - 2, nlev)
        tdiff = theta_v[:, low] - theta_v[c2e2c][:, :, low].sum(1) / 3.0
        trefdiff = ms["theta_ref_mc"][:, low] - ms["theta_ref_mc"][c2e2c][:, :, low].sum(1) / 3.0
        thresh = -5.0
        enh = np.where(((tdiff - trefdiff < thresh) & (trefdiff < 0)) | (tdiff - trefdiff < 1.5 * thresh),
                       (thresh - tdiff + trefdiff) * 5e-4, np.finfo(np.float64).eps)
        kh_smag_e[:, low] = np.maximum(kh_smag_e[:, low], enh[e2c].max(axis=1))
        # apply_diffusion_to_theta_and_exner
        z_nabla2 = kh_smag_e * eps["inverse_dual_edge_lengths"][:, None] * (theta_v[e2c[:, 1]] - theta_v[e2c[:, 0]])
        z_temp = (z_nabla2[c2e] * ins["geofac_div"][:, :, None]).sum(1)
        if config["apply_zdiffusion_t"]:
            kk = np.arange(nlev)[None, :]
            total = theta_v * ins["geofac_n2s"][:, :1]
            for j in range(3):
                nb = c2e2c[:, j][:, None]
                off = kk + ms["zd_vertoffset"][:, j, :]
                on = ms["zd_diffcoef"] != 0
                lo = np.where(on, off, 0)
                hi = np.where(on, off + 1, 0)
                coef = ms["zd_intcoef"][:, j, :]
                total = total + ins["geofac_n2s"][:, j + 1:j + 2] * (coef * theta_v[nb, lo] + (1 - coef) * theta_v[nb, hi])
            z_temp = np.where(ms["zd_diffcoef"] != 0, z_temp + ms["zd_diffcoef"] * total, z_temp)
        theta_new = theta_v + cps["area"][:, None] * z_temp
        exner[...] = exner * (1.0 + RD / (CPD - RD) * (theta_new / theta_v - 1.0))
        theta_v[...] = theta_new


@pytest.fixture(scope="module")
def setup():
    grid = dif.icosahedral_grid(2, 3, num_levels=14)
    metric, interp, edge, cell = dif.coefficients(grid)
    return grid, dif.vertical_grid(grid), metric, interp, edge, cell


def _random_state(grid, seed):
    """Random fields: the synthetic state plus uniform noise everywhere (diagnostics too)."""
    rng = np.random.default_rng(seed)
    s = dif.synthetic_state(grid, seed)
    s["vn"] += rng.uniform(-3, 3, s["vn"].shape)
    s["w"] += rng.uniform(-0.5, 0.5, s["w"].shape)
    s["theta_v"] += rng.uniform(-2, 2, s["theta_v"].shape)
    for name in ("hdef_ic", "div_ic", "dwdx", "dwdy"):
        s[name] = rng.uniform(-1, 1, s[name].shape)
    return s


def _rel(a, b):
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)


CONFIGS = [
    dict(shear_type=2),
    dict(shear_type=0, a_hshr=0.0),                      # no turbulence diagnostics
    dict(shear_type=1),                                  # div_ic, hdef_ic but no dwdx, dwdy
    dict(shear_type=2, apply_zdiffusion_t=False),
    dict(shear_type=2, apply_to_temperature=False),
    dict(shear_type=2, apply_to_vertical_wind=False, apply_to_horizontal_wind=False),
    dict(shear_type=2, hdiff_efdt_ratio=24.0, ndyn_substeps=2, smagorinski_scaling_factor=0.025),
]


@pytest.mark.parametrize("options", CONFIGS, ids=[",".join(f"{k}={v}" for k, v in c.items()) for c in CONFIGS])
@pytest.mark.parametrize("initial_run", [False, True])
@pytest.mark.parametrize("device", ["reference", "cpu"])
def test_granule_matches_independent_numpy(setup, options, initial_run, device):
    grid, vg, metric, interp, edge, cell = setup
    config = dif.DiffusionConfig(**options)
    dtime = dif.smagorinsky_dtime(grid)
    ours, theirs = _random_state(grid, 5), _random_state(grid, 5)
    granule = dif.Diffusion(grid, config, vg, metric, interp, edge, cell, device=device)
    granule.run(ours, ours, dtime, initial_run=initial_run)
    numpy_granule(grid, config, vg, metric, interp, edge, cell, theirs, dtime, initial_run)
    for name in ("vn", "w", "theta_v", "exner", "div_ic", "hdef_ic", "dwdx", "dwdy"):
        # The same expressions in another order: rounding only (ICON4Py's savepoint rtol 1e-12).
        assert _rel(ours[name], theirs[name]) <= 1e-12, name
    # The branches the configuration switches off leave their outputs untouched.
    start = _random_state(grid, 5)
    if not config["apply_to_temperature"]:
        assert np.array_equal(ours["theta_v"], start["theta_v"])
    if config["shear_type"] < 2:
        assert np.array_equal(ours["dwdx"], start["dwdx"])
    else:
        assert not np.array_equal(ours["dwdx"], start["dwdx"])


def test_every_branch_has_work_at_the_default_setup(setup):
    grid, vg, metric, interp, edge, cell = setup
    assert vg["end_index_of_damping_layer"] > 0
    # ICON4Py's VerticalGrid's fields: heights from the 23.5 km top down to 0, nflatlev below
    # the flat height.
    assert vg["vct_a"][0] == vg["model_top_height"] == 23500.0 and vg["vct_a"][-1] == 0.0
    assert vg["vct_b"].shape == vg["vct_a"].shape
    assert 0 < vg["nflatlev"] < vg["num_levels"]
    assert vg["vct_a"][vg["nflatlev"]] >= vg["flat_height"]
    # Cold pools: the synthetic state has 8 K colder cells on the two lowest levels.
    s = dif.synthetic_state(grid)
    nb = grid.connectivity("C2E2C")
    low = s["theta_v"][:, -2:]
    tdiff = low - low[nb].mean(axis=1)
    assert (tdiff < -5).sum() > 10


def test_fortran_order_and_float32(setup):
    grid, vg, metric, interp, edge, cell = setup
    config = dif.DiffusionConfig(shear_type=2)
    dtime = dif.smagorinsky_dtime(grid)
    base = _random_state(grid, 9)
    c_order = {k: v.copy() for k, v in base.items()}
    dif.Diffusion(grid, config, vg, metric, interp, edge, cell, device="cpu").run(c_order, c_order, dtime)
    f_order = {k: np.asfortranarray(v) for k, v in base.items()}
    dif.Diffusion(grid, config, vg, metric, interp, edge, cell, device="cpu", layout="entities").run(
        f_order, f_order, dtime)
    for name in base:
        # The cpu backend's level-contiguous passes run over rows, Fortran's over blocks of
        # entities: the same expressions, contracted differently by the compiler.
        assert _rel(f_order[name], c_order[name]) <= 1e-13, name
    single = {k: v.astype(np.float32) for k, v in base.items()}
    dif.Diffusion(grid, config, vg, metric, interp, edge, cell, device="cpu", dtype=np.float32).run(
        single, single, dtime)
    for name in ("vn", "theta_v", "exner"):
        assert _rel(single[name].astype(np.float64), c_order[name]) < 1e-5, name


def test_objects_pairs_and_extra_keys_are_accepted(setup):
    """ICON4Py's states are objects; primal_normal_vert comes as an (x, y) pair; keys sciproxy
    does not use are ignored."""
    grid, vg, metric, interp, edge, cell = setup
    edge_pairs = {k: v for k, v in edge.items() if not k.endswith(("_vert_x", "_vert_y"))}
    edge_pairs["primal_normal_vert"] = (edge["primal_normal_vert_x"], edge["primal_normal_vert_y"])
    edge_pairs["dual_normal_vert"] = (edge["dual_normal_vert_x"], edge["dual_normal_vert_y"])
    edge_pairs["edge_center_lat"] = np.zeros(grid.num_edges)  # unused: ignored
    metric_obj = types.SimpleNamespace(**metric, ddqz_z_half=np.zeros(3))
    vg_obj = types.SimpleNamespace(vct_a=vg["vct_a"], end_index_of_damping_layer=vg["end_index_of_damping_layer"],
                                   config=types.SimpleNamespace(num_levels=grid.num_levels))
    config_obj = types.SimpleNamespace(shear_type=types.SimpleNamespace(value=2), ndyn_substeps=5)
    g1 = dif.Diffusion(grid, config_obj, vg_obj, metric_obj, interp, edge_pairs, cell, device="cpu")
    g2 = dif.Diffusion(grid, dif.DiffusionConfig(shear_type=2), vg, metric, interp, edge, cell, device="cpu")
    a, b = _random_state(grid, 3), _random_state(grid, 3)
    g1.run(a, types.SimpleNamespace(**a), 600.0)
    g2.run(b, b, 600.0)
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    assert "diffusion_run" in g1.timer_table()


def test_grid_interface(setup):
    grid = setup[0]
    assert (grid.num_cells, grid.num_edges, grid.num_vertices) == (5120, 7680, 2562)
    assert dif.icosahedral_grid(2, 4, 10).num_cells == 20480
    c2e2co, c2e2c = grid.connectivity("C2E2CO"), grid.connectivity("C2E2C")
    assert np.array_equal(c2e2co[:, 0], np.arange(grid.num_cells))
    assert np.array_equal(c2e2co[:, 1:], c2e2c)
    e2c2v, e2v = grid.connectivity("E2C2V"), grid.connectivity("E2V")
    assert np.array_equal(e2c2v[:, :2], e2v)
    v2e = grid.connectivity("V2E")
    assert (v2e == -1).sum() == 12  # the 12 pentagons' missing 6th edge
    assert grid.start_index("edge", "lb_level_5") == 0
    assert grid.end_index("CellDim", "local") == grid.num_cells
    zone = types.SimpleNamespace(value="interior")
    domain = types.SimpleNamespace(dim=types.SimpleNamespace(value="Edge"), zone=zone)
    assert grid.end_index(domain) == grid.num_edges
    with pytest.raises(ValueError, match="zone"):
        grid.start_index("cell", "lb_level_5")
    with pytest.raises(ValueError, match="name"):
        grid.connectivity("C2X")


def test_bad_input_names_the_argument(setup):
    grid, vg, metric, interp, edge, cell = setup
    config = dif.DiffusionConfig(shear_type=2)
    with pytest.raises(ValueError, match="unknown option.*shear"):
        dif.DiffusionConfig(shear=2)
    with pytest.raises(TypeError, match="config.ndyn_substeps"):
        dif.DiffusionConfig(ndyn_substeps=2.5)
    with pytest.raises(ValueError, match="config.diffusion_type"):
        dif.Diffusion(grid, dif.DiffusionConfig(diffusion_type=4), vg, metric, interp, edge, cell)
    with pytest.raises(ValueError, match="metric_state.theta_ref_mc: expected shape"):
        dif.Diffusion(grid, config, vg, dict(metric, theta_ref_mc=metric["theta_ref_mc"][:-1]), interp, edge, cell)
    with pytest.raises(ValueError, match="interpolation_state: expected a field 'geofac_div'"):
        dif.Diffusion(grid, config, vg, metric, {k: v for k, v in interp.items() if k != "geofac_div"}, edge, cell)
    bad = dict(metric, wgtfac_c=metric["wgtfac_c"].copy())
    bad["wgtfac_c"][4, 2] = np.nan
    with pytest.raises(ValueError, match="metric_state.wgtfac_c"):
        dif.Diffusion(grid, config, vg, bad, interp, edge, cell)
    with pytest.raises(ValueError, match="vertical_grid.num_levels"):
        dif.Diffusion(grid, config, dict(vg, num_levels=5), metric, interp, edge, cell)
    with pytest.raises(ValueError, match="device"):
        dif.Diffusion(grid, config, vg, metric, interp, edge, cell, device="gpu7")
    granule = dif.Diffusion(grid, config, vg, metric, interp, edge, cell, device="cpu")
    s = _random_state(grid, 1)
    with pytest.raises(ValueError, match="dtime"):
        granule.run(s, s, 0.0)
    with pytest.raises(ValueError, match="dtime"):
        granule.run(s, s, -3.0)
    s["theta_v"][7, 3] = np.nan
    with pytest.raises(ValueError, match="prognostic.theta_v"):
        granule.run(s, s, 60.0)
    s = _random_state(grid, 1)
    with pytest.raises(ValueError, match="prognostic_state.vn: expected shape"):
        granule.run(s, dict(s, vn=s["vn"][:, :-1]), 60.0)
    with pytest.raises(TypeError, match="prognostic_state.w: expected float64"):
        granule.run(s, dict(s, w=s["w"].astype(np.float32)), 60.0)
    with pytest.raises(ValueError, match="prognostic_state.exner: expected a C-ordered"):
        granule.run(s, dict(s, exner=np.asfortranarray(s["exner"])), 60.0)
    with pytest.raises(ValueError, match="diagnostic_state: expected a field 'dwdx'"):
        granule.run({k: v for k, v in s.items() if k != "dwdx"}, s, 60.0)
    ro = s["theta_v"].copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        granule.run(s, dict(s, theta_v=ro), 60.0)
    with pytest.raises(TypeError, match="grid"):
        dif.coefficients("R2B4")
    with pytest.raises(ValueError, match="n: expected"):
        dif.icosahedral_grid(0, 2)


def test_one_process_mpi_options(setup):
    """comm, cell_owner and rank_local_fields checked in one process (tests/python/mpi/
    check_diffusion.py runs them on several ranks): a process alone owns every entity."""
    grid, vg, metric, interp, edge, cell = setup
    config = dif.DiffusionConfig(shear_type=2)
    with pytest.raises(TypeError, match="^comm: expected an mpi4py communicator"):
        dif.Diffusion(grid, config, vg, metric, interp, edge, cell, comm="x")
    with pytest.raises(ValueError, match=r"^cell_owner: expected ranks in \[0, 0\]"):
        dif.Diffusion(grid, config, vg, metric, interp, edge, cell, cell_owner=np.ones(grid.num_cells, int))
    with pytest.raises(ValueError, match="^cell_owner: expected the rank of every cell"):
        dif.Diffusion(grid, config, vg, metric, interp, edge, cell, cell_owner=np.zeros(3, int))
    with pytest.raises(TypeError, match="^cell_owner: expected integers"):
        dif.Diffusion(grid, config, vg, metric, interp, edge, cell, cell_owner=np.zeros(grid.num_cells))
    with pytest.raises(TypeError, match="^rank_local_fields: expected True or False"):
        dif.Diffusion(grid, config, vg, metric, interp, edge, cell, rank_local_fields=1)
    plain = dif.Diffusion(grid, config, vg, metric, interp, edge, cell, device="cpu")
    local = dif.Diffusion(grid, config, vg, metric, interp, edge, cell, device="cpu",
                          cell_owner=np.zeros(grid.num_cells, np.int64), rank_local_fields=True)
    for dim, n in (("cell", grid.num_cells), ("EdgeDim", grid.num_edges), ("v", grid.num_vertices)):
        assert np.array_equal(local.global_index(dim), np.arange(n))
        assert not local.halo_level(dim).any()
    a, b = _random_state(grid, 3), _random_state(grid, 3)
    plain.run(a, a, 60.0, initial_run=True)
    local.run(b, b, 60.0, initial_run=True)
    for name in a:
        assert np.array_equal(a[name], b[name]), name
