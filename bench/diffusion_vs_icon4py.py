#!/usr/bin/env python3
"""ICON's horizontal diffusion granule: ICON4Py's own granule timed, and (later) sciproxy's
Python granule (--with-sciproxy) in the same run on the same grid, configuration and states.

ICON4Py's side: icon4py-atmosphere-diffusion 0.4.1 / icon4py-common 0.4.1 (gt4py 1.2.1),
backend gtfn_cpu (compiled C++, one thread per program), float64. The grid comes from
icon-grid-generator (--grid R2B4 writes a global R02B04 file, 20480 cells) or from a file
(--grid-file). Geometry, interpolation and metric fields come from ICON4Py's factories; the
configuration, synthetic mountain and initial states are those of the reference-data script
tests/data/diffusion/icon4py/make_icon4py_reference.py (shear_type 2, truly horizontal
temperature diffusion on, dtime 9 s per km of mean edge length).

Timed: the factories (not part of the granule), Diffusion.__init__ (compiles about 14 programs
unless the gt4py build cache already has them: --cache-dir, --cold-cache), the first run call
(initial_run=True), then --steps later calls (initial_run=False): median, min, mean. With
--with-sciproxy the two granules' later calls alternate, call by call, so that both see the
same load of a shared machine.

ICON4Py needs Python >= 3.12. Run with any Python: unless the current interpreter already has
icon4py, the script creates (once) a virtual environment with a Python 3.12 interpreter
(--python, `pyenv which python3.12`, or python3.12 on PATH), installs the pinned packages from
the package index and re-runs itself there.

    python3 bench/diffusion_vs_icon4py.py --grid R2B4 --levels 65 --steps 10 --json out.json

Prints one JSON object (and writes it to --json).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
REFERENCE_SCRIPT = REPO / "tests" / "data" / "diffusion" / "icon4py" / "make_icon4py_reference.py"
DEFAULT_VENV = pathlib.Path(os.environ.get("SCIPROXY_ICON4PY_VENV", "~/.cache/sciproxy/icon4py-venv")).expanduser()
PACKAGES = [
    "icon4py-atmosphere-diffusion==0.4.1",
    "icon4py-common==0.4.1",
    "icon-grid-generator",
    "netCDF4",
    "xarray",
]


# ------------------------------------------------------------------------------------------
# environment
# ------------------------------------------------------------------------------------------
def have_icon4py() -> bool:
    return (
        sys.version_info >= (3, 12)
        and importlib.util.find_spec("icon4py") is not None
        and importlib.util.find_spec("grid_generator") is not None
    )


def find_python312(explicit: str | None) -> str:
    if explicit:
        return explicit
    try:
        out = subprocess.run(["pyenv", "which", "python3.12"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except OSError:
        pass
    for cand in sorted(pathlib.Path("~/.pyenv/versions").expanduser().glob("3.12*/bin/python3.12")):
        return str(cand)
    found = shutil.which("python3.12")
    if found:
        return found
    sys.exit("no Python 3.12 interpreter found (ICON4Py needs >= 3.12): pass --python")


def ensure_venv(venv: pathlib.Path, python: str) -> pathlib.Path:
    py = venv / "bin" / "python"
    if not py.exists():
        print(f"creating {venv} with {python}", file=sys.stderr)
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    probe = subprocess.run([str(py), "-c", "import icon4py.model.atmosphere.diffusion, grid_generator, netCDF4, xarray"],
                           capture_output=True)
    if probe.returncode != 0:
        print(f"installing {' '.join(PACKAGES)} (dace builds from source: minutes)", file=sys.stderr)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *PACKAGES], check=True)
    return py


# ------------------------------------------------------------------------------------------
# ICON4Py side
# ------------------------------------------------------------------------------------------
def load_reference_module():
    spec = importlib.util.spec_from_file_location("make_icon4py_reference", REFERENCE_SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def grid_file_for(args) -> pathlib.Path:
    if args.grid_file:
        return pathlib.Path(args.grid_file)
    import grid_generator as gg

    path = pathlib.Path(args.work_dir) / f"{args.grid}_generated.nc"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        gg.generate_grid_to_netcdf(args.grid, path, fields="icon4py")
    return path


def set_up(args, ref):
    """Grid, factories, granule states and initial states (not timed as granule work)."""
    grid_file = grid_file_for(args)
    t0 = time.perf_counter()
    setup = ref.build_setup(grid_file, args.levels, dict(ref.CASES["global_r2b1"]["mountain"],
                                                         width_m=args.mountain_width_km * 1e3),
                            ref_backend(args))
    cell_params, edge_params, interp_state, metric_state = ref.granule_states(setup)
    # materialise every factory field before the granule's timer starts
    for state in (interp_state, metric_state):
        for value in vars(state).values():
            getattr(value, "ndarray", None)
    t_factories = time.perf_counter() - t0
    prog, diag, _ = ref.initial_states(setup, 2024, 8.0 * setup.mean_edge_length)
    dtime = ref.DTIME_PER_KM * setup.mean_edge_length / 1000.0
    return dict(setup=setup, grid_file=grid_file, cell_params=cell_params, edge_params=edge_params,
                interp_state=interp_state, metric_state=metric_state, prog=prog, diag=diag,
                dtime=dtime, t_factories=t_factories)


def ref_backend(args):
    from icon4py.model.common import model_backends

    return model_backends.BACKENDS[args.backend]


def make_icon4py(args, ref, s):
    """ICON4Py's granule, timed init; returns (figures, call(initial_run), finish())."""
    import gt4py.next as gtx

    from icon4py.model.atmosphere.diffusion import diffusion, diffusion_states
    from icon4py.model.common import dimension as dims, model_backends
    from icon4py.model.common.decomposition import definitions as decomp_defs
    from icon4py.model.common.states import prognostic_state as prognostics

    backend = ref_backend(args)
    allocator = model_backends.get_allocator(backend)
    setup = s["setup"]
    config = ref.diffusion_config()

    t0 = time.perf_counter()
    granule = diffusion.Diffusion(
        grid=setup.grid, config=config, params=diffusion.DiffusionParams(config),
        vertical_grid=setup.vertical_grid, metric_state=s["metric_state"],
        interpolation_state=s["interp_state"], edge_params=s["edge_params"],
        cell_params=s["cell_params"], backend=backend, exchange=decomp_defs.single_node_exchange,
    )
    t_init = time.perf_counter() - t0

    def field(arr, *d):
        return gtx.as_field(d, arr.copy(), allocator=allocator)

    prog = prognostics.PrognosticState(
        vn=field(s["prog"]["vn"], dims.EdgeDim, dims.KDim),
        w=field(s["prog"]["w"], dims.CellDim, dims.KDim),
        theta_v=field(s["prog"]["theta_v"], dims.CellDim, dims.KDim),
        exner=field(s["prog"]["exner"], dims.CellDim, dims.KDim),
        rho=field(s["prog"]["rho"], dims.CellDim, dims.KDim),
    )
    diag = diffusion_states.DiffusionDiagnosticState(
        **{n: field(s["diag"][n], dims.CellDim, dims.KDim) for n in ref.DIAGNOSTIC_FIELDS}
    )
    def call(initial_run):
        granule.run(diag, prog, s["dtime"], initial_run=initial_run)

    def finish():
        kh = granule.kh_smag_e.asnumpy()
        return {"kh_smag_e_nonzero_fraction": float((kh != 0).mean()),
                "final_state": {n: getattr(prog, n).asnumpy() for n in ("vn", "w", "theta_v", "exner")}}

    return {"init_s": t_init}, call, finish


# ------------------------------------------------------------------------------------------
# sciproxy side
# ------------------------------------------------------------------------------------------
def ensure_sciproxy() -> None:
    """sciproxy in this (Python 3.12) environment: built from this checkout with pip once."""
    if importlib.util.find_spec("sciproxy") is not None:
        return
    print("bench: installing sciproxy into this environment (pip install of the checkout, minutes)",
          file=sys.stderr)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", str(REPO)], check=True)
    importlib.invalidate_caches()


def make_sciproxy(args, ref, s, check_finite=True):
    """sciproxy's Python granule on the same set-up as make_icon4py: the same grid file (read by
    sciproxy.diffusion.read_grid), ICON4Py's own configuration, vertical grid and metric,
    interpolation and geometry states passed in as ICON4Py's objects (the drop-in interface),
    and the same initial states as numpy arrays. Returns (figures, call(initial_run), finish())."""
    ensure_sciproxy()
    import numpy as np

    import sciproxy.diffusion as dif

    setup = s["setup"]
    grid = dif.read_grid(s["grid_file"], num_levels=args.levels)
    t0 = time.perf_counter()
    granule = dif.Diffusion(grid, ref.diffusion_config(), setup.vertical_grid, s["metric_state"],
                            s["interp_state"], s["edge_params"], s["cell_params"],
                            device="cpu", nparallel=args.threads or None, check_finite=check_finite)
    t_init = time.perf_counter() - t0
    # Copies: every granule of the run diffuses its own state.
    state = {n: np.array(s["prog"][n], dtype=np.float64, order="C") for n in ("vn", "w", "theta_v", "exner")}
    state.update({n: np.array(s["diag"][n], dtype=np.float64, order="C") for n in ref.DIAGNOSTIC_FIELDS})

    def call(initial_run):
        granule.run(state, state, s["dtime"], initial_run=initial_run)

    def finish():
        return {"threads": args.threads or os.cpu_count(), "timer_table": granule.timer_table(),
                "final_state": {n: state[n] for n in ("vn", "w", "theta_v", "exner")}}

    return {"init_s": t_init}, call, finish


def time_calls(granules: dict, steps: int) -> dict:
    """The first call (initial_run) of each granule, then `steps` later calls, alternating
    between the granules call by call, so that both see the same machine load."""
    out = {}
    for name, (figures, call, _) in granules.items():
        t0 = time.perf_counter()
        call(True)
        figures["first_run_s"] = time.perf_counter() - t0
        figures["run_times_s"] = []
    for _ in range(steps):
        for name, (figures, call, _) in granules.items():
            t0 = time.perf_counter()
            call(False)
            figures["run_times_s"].append(time.perf_counter() - t0)
    for name, (figures, _, finish) in granules.items():
        times = figures["run_times_s"]
        figures.update(run_median_s=statistics.median(times), run_min_s=min(times),
                       run_mean_s=statistics.fmean(times))
        figures.update(finish())
        out[name] = figures
    return out


# ------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--grid", default="R2B4", help="icon-grid-generator global grid name (R2B4)")
    g.add_argument("--grid-file", help="an ICON grid file instead of a generated one")
    ap.add_argument("--levels", type=int, default=65)
    ap.add_argument("--steps", type=int, default=10, help="later run calls timed (>= 1)")
    ap.add_argument("--backend", default="gtfn_cpu")
    ap.add_argument("--mountain-width-km", type=float, default=500.0)
    ap.add_argument("--cache-dir", default=os.environ.get("GT4PY_BUILD_CACHE_DIR", "~/.cache/sciproxy/gt4py"),
                    help="gt4py build cache (persistent)")
    ap.add_argument("--cold-cache", action="store_true", help="empty the build cache first")
    ap.add_argument("--work-dir", default="~/.cache/sciproxy/icon4py-grids")
    ap.add_argument("--with-sciproxy", action="store_true", help="also time sciproxy's granule")
    ap.add_argument("--threads", type=int, default=0, help="sciproxy's OpenMP threads (0: all)")
    ap.add_argument("--python", help="Python 3.12 interpreter for the virtual environment")
    ap.add_argument("--venv", default=str(DEFAULT_VENV))
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args()
    args.work_dir = str(pathlib.Path(args.work_dir).expanduser())
    args.steps = max(1, args.steps)

    if not have_icon4py():
        py = ensure_venv(pathlib.Path(args.venv).expanduser(), find_python312(args.python))
        os.execv(str(py), [str(py), *sys.argv])

    cache = pathlib.Path(args.cache_dir).expanduser()
    if args.cold_cache and cache.exists():
        shutil.rmtree(cache)
    cache.mkdir(parents=True, exist_ok=True)
    # before gt4py is imported
    os.environ["GT4PY_BUILD_CACHE_LIFETIME"] = "persistent"
    os.environ["GT4PY_BUILD_CACHE_DIR"] = str(cache)

    from importlib import metadata

    ref = load_reference_module()
    s = set_up(args, ref)
    grid = s["setup"].grid
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores",
        "command": " ".join([pathlib.Path(sys.argv[0]).name, *sys.argv[1:]]),
        "grid_file": str(s["grid_file"]),
        "cells": grid.num_cells, "edges": grid.num_edges, "vertices": grid.num_vertices,
        "levels": args.levels, "dtype": "float64", "dtime_s": s["dtime"],
        "mean_edge_length_m": s["setup"].mean_edge_length,
        "versions": {p: metadata.version(p) for p in ("icon4py-atmosphere-diffusion", "icon4py-common", "gt4py")},
        "cold_cache": args.cold_cache,
        "factories_s": s["t_factories"],
    }
    result["loadavg_before"] = list(os.getloadavg())
    granules = {"icon4py": make_icon4py(args, ref, s)}
    if args.with_sciproxy:
        # As users run it (scanning the prognostic fields for NaN first), and as ICON4Py does
        # (no scan).
        granules["sciproxy"] = make_sciproxy(args, ref, s)
        granules["sciproxy_no_finite_check"] = make_sciproxy(args, ref, s, check_finite=False)
    timed = time_calls(granules, args.steps)
    result["loadavg_after"] = list(os.getloadavg())
    finals = {name: figures.pop("final_state") for name, figures in timed.items()}
    result.update(timed)
    if args.with_sciproxy:
        import numpy as np

        result["speedup_median"] = timed["icon4py"]["run_median_s"] / timed["sciproxy"]["run_median_s"]
        result["speedup_min"] = timed["icon4py"]["run_min_s"] / timed["sciproxy"]["run_min_s"]
        result["speedup_median_no_finite_check"] = (
            timed["icon4py"]["run_median_s"] / timed["sciproxy_no_finite_check"]["run_median_s"])
        # relative L2 of each sciproxy granule's final state against ICON4Py's, after all the calls
        icon_final = finals["icon4py"]
        result["rel_l2_after_all_calls"] = {
            name: {n: float(np.linalg.norm(finals[name][n] - icon_final[n]) / np.linalg.norm(icon_final[n]))
                   for n in icon_final}
            for name in finals if name != "icon4py"
        }
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        pathlib.Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
