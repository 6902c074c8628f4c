#!/usr/bin/env python3
"""sciproxy.specex.ex2d against DESI's specter ex2d, side by side in one process.

specter is NOT on the package index: fetch its source yourself (github.com/desihub/specter; the
reference data were made at commit b8490d38) and give its py/ directory with --specter PATH or
the environment variable SPECTER_PATH. It needs numpy, scipy, astropy and numba.

A frame is simulated from the r0 PSF (psf-r0-00067784.fits, --psf): default 50 spectra from
fibre 0, bundles of 25 (two bundles) in 5 subbundles, wavelengths np.arange(5760, 6160, 0.8)
(500 bins), wavesize 50, so 2 x 5 x 10 = 100 patches. Image = Poisson(A phot) + N(0, 3 e-), ivar =
1/(max(img, 0) + 9), as a cut-out: xyrange is psf.xyrange of the spectra and wavelengths with 30
more rows on each side (sciproxy.specex.simulate_image when it exists, else psf.project and numpy).
Both extract it with full_output=True (what desispec asks for), the same arguments and the same
thread count: --threads N sets OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS and
NUMBA_NUM_THREADS for the whole process before numpy is imported (so specter's BLAS and numba use
N threads too), and sciproxy is given nparallel=N.

One untimed call of each first (numba compiles specter's kernels there; sciproxy's PSF caches
fill), whose outputs are compared: pull = (f1 - f2) / sqrt(s1^2 + s2^2), s = 1/sqrt(ivar), over
bins with ivar > 0 in both (the acceptance test is >= 99% |pull| < 0.01 and max < 0.05), and the
largest difference of resolution_data. Then --repeat rounds alternate the two (ABAB..., so that
drifts in machine load hit both). specter's PSF keeps a cache of 2500 spots between calls; it is
emptied before each specter call so that every call starts as a fresh frame does.

The table: median, min and max seconds, patches/s, the seconds extrapolated to a production
frame (500 fibres, 5760-7620 A at 0.8 A = np.arange(5760, 7620.4, 0.8): 2326 bins; 20 bundles x
5 subbundles x 47 wavelength blocks = 4700 patches) by the ratio of patch counts, and the speedup
(specter median / sciproxy median).

    python bench/specex_vs_specter.py --specter ~/src/specter/py --threads 2 --repeat 3
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import socket
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PSF_NAME = "psf-r0-00067784.fits"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "NUMBA_NUM_THREADS")
PRODUCTION = dict(nspec=500, bundlesize=25, nsubbundles=5, wmin=5760.0, wmax=7620.0, dw=0.8,
                  wavesize=50)
PULL_SMALL, PULL_FRACTION, PULL_MAX = 0.01, 0.99, 0.05


def default_psf():
    for path in (os.environ.get("SCIPROXY_DESI_DATA", ""), os.path.join(REPO, "shared", "data", "desi"),
                 os.path.join(REPO, "..", "shared", "data", "desi"), "/work/shared/data/desi"):
        if path and os.path.isfile(os.path.join(path, PSF_NAME)):
            return os.path.join(path, PSF_NAME)
    return None


def patch_count(nspec, bundlesize, nsubbundles, nwave, wavesize):
    """Patches ex2d extracts: per bundle min(size, nsubbundles) subbundles, per subbundle
    ceil(nwave / wavesize) wavelength blocks (a last short bundle counts too)."""
    count = 0
    for lo in range(0, nspec, bundlesize):
        size = min(bundlesize, nspec - lo)
        count += min(size, nsubbundles) * math.ceil(nwave / wavesize)
    return count


def production_patches():
    import numpy as np
    p = PRODUCTION
    nwave = len(np.arange(p["wmin"], p["wmax"] + p["dw"] / 2, p["dw"]))
    return nwave, patch_count(p["nspec"], p["bundlesize"], p["nsubbundles"], nwave, p["wavesize"])


def spectra(rng, nspec, wavelengths):
    """Smooth continua of 50-400 photons per bin plus a few emission lines (as the reference
    data's script makes them)."""
    import numpy as np
    w = np.asarray(wavelengths)
    t = (w - w[0]) / max(w[-1] - w[0], 1.0)
    phot = np.empty((nspec, len(w)))
    for i in range(nspec):
        cont = rng.uniform(50, 300) * (1 + 0.3 * np.sin(2 * np.pi * (rng.uniform(0.5, 2) * t
                                                                      + rng.uniform())))
        lines = np.zeros_like(w)
        for _ in range(max(1, len(w) // 100)):
            c, a = rng.uniform(w[0], w[-1]), rng.uniform(200, 2000)
            lines += a * np.exp(-0.5 * ((w - c) / 0.7) ** 2)
        phot[i] = cont + lines
    return phot


def simulate(specex, psf, wavelengths, phot, specmin, xyrange, seed):
    import numpy as np
    if hasattr(specex, "simulate_image"):
        image, ivar = specex.simulate_image(psf, wavelengths, phot, specmin=specmin,
                                            xyrange=xyrange, read_noise=3.0, seed=seed)
        return np.asarray(image, np.float64), np.asarray(ivar, np.float64), "simulate_image"
    rng = np.random.default_rng(seed)
    model = np.asarray(psf.project(wavelengths, phot, specmin=specmin, xyrange=xyrange))
    image = rng.poisson(np.clip(model, 0, None)).astype(np.float64)
    image += rng.normal(0.0, 3.0, size=image.shape)
    ivar = 1.0 / (np.maximum(image, 0.0) + 9.0)
    return image, ivar, "psf.project + numpy noise"


def pull_stats(f1, iv1, f2, iv2):
    import numpy as np
    both = (iv1 > 0) & (iv2 > 0)
    pull = np.abs(f1[both] - f2[both]) / np.sqrt(1.0 / iv1[both] + 1.0 / iv2[both])
    if pull.size == 0:
        return {"bins": 0, "fraction_below_0.01": float("nan"), "max": float("nan"),
                "pass": False}
    frac, mx = float(np.mean(pull < PULL_SMALL)), float(pull.max())
    return {"bins": int(pull.size), "ivar_zero_mismatch": int(np.sum((iv1 > 0) != (iv2 > 0))),
            "fraction_below_0.01": frac, "max": mx, "median": float(np.median(pull)),
            "pass": bool(frac >= PULL_FRACTION and mx < PULL_MAX)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--specter", default=os.environ.get("SPECTER_PATH"),
                        help="specter's py/ directory (default: $SPECTER_PATH); specter is not on "
                             "the package index, fetch it yourself")
    parser.add_argument("--psf", default=default_psf(), help=f"the r0 PSF ({PSF_NAME})")
    parser.add_argument("--specmin", type=int, default=0)
    parser.add_argument("--nspec", type=int, default=50)
    parser.add_argument("--bundlesize", type=int, default=25)
    parser.add_argument("--nsubbundles", type=int, default=5)
    parser.add_argument("--wavesize", type=int, default=50)
    parser.add_argument("--wavelengths", default="5760,6160,0.8", metavar="WMIN,WMAX,DW",
                        help="np.arange(WMIN, WMAX, DW) (default 5760,6160,0.8: 500 bins)")
    parser.add_argument("--ypad", type=int, default=30, help="rows of cut-out beyond the traces")
    parser.add_argument("--threads", type=int, default=2,
                        help="threads for both: sets %s; sciproxy nparallel (default 2)"
                             % ", ".join(THREAD_VARIABLES))
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (default 3)")
    parser.add_argument("--device", default="cpu", help="sciproxy device (default cpu)")
    parser.add_argument("--no-full-output", dest="full_output", action="store_false",
                        help="call both with full_output=False (desispec uses True)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="FILE", help="write the results and the environment")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.threads < 1:
        parser.error("--repeat and --threads must be at least 1")
    if not args.specter:
        parser.error("give specter's py/ directory with --specter PATH or SPECTER_PATH; specter is "
                     "not on the package index: fetch github.com/desihub/specter yourself")
    if not args.psf or not os.path.isfile(args.psf):
        parser.error(f"the r0 PSF was not found ({args.psf}); give --psf PATH/{PSF_NAME}")
    try:
        wmin, wmax, dw = (float(v) for v in args.wavelengths.split(","))
    except ValueError:
        parser.error("--wavelengths is WMIN,WMAX,DW")

    # The thread count must be in the environment before numpy (BLAS) and numba start.
    for name in THREAD_VARIABLES:
        os.environ[name] = str(args.threads)
    sys.path.insert(0, os.path.abspath(os.path.expanduser(args.specter)))

    import numpy as np

    sys.path.insert(0, HERE)
    from benchlib import cpu_model, git_commit, timed, write_json_atomically

    import sciproxy
    import sciproxy.specex as specex
    try:
        import specter
        import specter.psf as specter_psf
        from specter.extract.ex2d import ex2d as specter_ex2d
    except ImportError as error:
        print(f"specex_vs_specter: cannot import specter from {args.specter} ({error}); specter "
              "is not on the package index: fetch github.com/desihub/specter and give its py/ "
              "directory (it needs numpy, scipy, astropy, numba)", file=sys.stderr)
        return 2

    wavelengths = np.arange(wmin, wmax, dw)
    nwave = len(wavelengths)
    specmin, nspec = args.specmin, args.nspec
    npatches = patch_count(nspec, args.bundlesize, args.nsubbundles, nwave, args.wavesize)
    prod_nwave, prod_patches = production_patches()

    t_load_sp, psf = timed(lambda: specex.load_psf(args.psf))
    t_load_st, spsf = timed(lambda: specter_psf.load_psf(args.psf))
    xr = psf.xyrange((specmin, specmin + nspec), (wavelengths[0], wavelengths[-1]))
    xr_specter = spsf.xyrange((specmin, specmin + nspec), (wavelengths[0], wavelengths[-1]))
    if tuple(int(v) for v in xr) != tuple(int(v) for v in xr_specter):
        print(f"# note: xyrange differs: sciproxy {tuple(xr)} specter {tuple(xr_specter)}")
    xyrange = (int(xr[0]), int(xr[1]), max(int(xr[2]) - args.ypad, 0),
               min(int(xr[3]) + args.ypad, psf.npix_y))
    rng = np.random.default_rng(args.seed)
    # the scene reaches 40 bins beyond both ends of the extracted range
    wsim = wavelengths[0] + dw * np.arange(-40, nwave + 40)
    phot = spectra(rng, nspec, wsim)
    image, ivar, how = simulate(specex, psf, wsim, phot, specmin, xyrange, args.seed)

    common = dict(xyrange=xyrange, bundlesize=args.bundlesize, nsubbundles=args.nsubbundles,
                  wavesize=args.wavesize, full_output=args.full_output)

    def ours():
        return specex.ex2d(image, ivar, psf, specmin, nspec, wavelengths, device=args.device,
                           nparallel=args.threads, **common)

    def theirs():
        if hasattr(spsf, "_cache"):
            del spsf._cache  # specter re-creates it on the next spot: a fresh frame's state
        return specter_ex2d(image, ivar, spsf, specmin, nspec, wavelengths, **common)

    def unpack(out):
        if isinstance(out, dict):
            return out["flux"], out["ivar"], out["resolution_data"]
        return out

    info = sciproxy.info() if hasattr(sciproxy, "info") else {}
    env = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(), "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
        "threads": args.threads, "thread_env": {k: os.environ[k] for k in THREAD_VARIABLES},
        "load_average_at_start": list(os.getloadavg()), "python": platform.python_version(),
        "numpy": np.__version__, "sciproxy": getattr(sciproxy, "__version__", "unknown"),
        "sciproxy_build": {k: info.get(k) for k in ("git_commit", "compiler", "build_type",
                                                    "backends")},
        "specter": getattr(specter, "__version__", "unknown"), "specter_path": args.specter,
        "git_commit": git_commit(), "psf": args.psf, "simulated_with": how,
        "psf_load_seconds": {"sciproxy": t_load_sp, "specter": t_load_st},
    }
    print(f"# {env['cpu_model']}, {env['cpu_count']} CPUs, {args.threads} threads "
          f"({', '.join(THREAD_VARIABLES)} = {args.threads}; sciproxy nparallel={args.threads}), "
          f"load {env['load_average_at_start'][0]:.2f}; sciproxy {env['sciproxy']} on "
          f"{args.device}, specter {env['specter']}, numpy {env['numpy']}")
    print(f"# {nspec} spectra from {specmin}, bundlesize {args.bundlesize}, nsubbundles "
          f"{args.nsubbundles}, {nwave} wavelengths np.arange({wmin}, {wmax}, {dw}), wavesize "
          f"{args.wavesize}: {npatches} patches; image {image.shape[0]} x {image.shape[1]} "
          f"cut-out {xyrange} ({how}); full_output={args.full_output}; PSF load "
          f"{t_load_sp:.2f} s (sciproxy) {t_load_st:.2f} s (specter)")

    # warm-up and verification
    t_ours_warm, out_ours = timed(ours)
    t_theirs_warm, out_theirs = timed(theirs)
    f1, iv1, r1 = (np.asarray(a) for a in unpack(out_ours))
    f2, iv2, r2 = (np.asarray(a) for a in unpack(out_theirs))
    stats_pull = pull_stats(f1, iv1, f2, iv2)
    stats_pull["resolution_data_max_abs_diff"] = (float(np.abs(r1 - r2).max())
                                                  if r1.shape == r2.shape else float("inf"))
    stats_pull["resolution_data_shapes"] = [list(r1.shape), list(r2.shape)]
    del out_ours, out_theirs

    seconds = {"sciproxy": [], "specter": []}
    for rep in range(args.repeat):
        order = [("sciproxy", ours), ("specter", theirs)]
        for name, call in (order if rep % 2 == 0 else order[::-1]):
            t, out = timed(call)
            del out
            seconds[name].append(t)

    rows = {}
    for name in ("sciproxy", "specter"):
        s = seconds[name]
        median = statistics.median(s)
        rows[name] = {"seconds": s, "median": median, "min": min(s), "max": max(s),
                      "patches_per_s": npatches / median,
                      "production_frame_seconds": median * prod_patches / npatches,
                      "warmup_seconds": t_ours_warm if name == "sciproxy" else t_theirs_warm}
    speedup = rows["specter"]["median"] / rows["sciproxy"]["median"]

    print(f"{'system':<10} {'median_s':>9} {'min_s':>9} {'max_s':>9} {'patches/s':>10} "
          f"{'frame_s':>9} {'speedup':>8}")
    for name in ("sciproxy", "specter"):
        r = rows[name]
        print(f"{name:<10} {r['median']:>9.3f} {r['min']:>9.3f} {r['max']:>9.3f} "
              f"{r['patches_per_s']:>10.2f} {r['production_frame_seconds']:>9.1f} "
              f"{(speedup if name == 'sciproxy' else 1.0):>7.2f}x")
    print(f"# frame_s: extrapolated to a 500-fibre frame, {prod_nwave} wavelengths "
          f"{PRODUCTION['wmin']}-{PRODUCTION['wmax']} A at {PRODUCTION['dw']} A "
          f"({prod_patches} patches) by the patch count; speedup = specter median / sciproxy "
          "median; warm-up "
          f"{t_ours_warm:.2f} s (sciproxy) {t_theirs_warm:.2f} s (specter, numba compiles)")
    verdict = "pass" if stats_pull["pass"] else "FAIL"
    print(f"# pulls over {stats_pull['bins']} bins: {100 * stats_pull['fraction_below_0.01']:.3f}% "
          f"|pull| < {PULL_SMALL}, max |pull| {stats_pull['max']:.3g} (criterion >= "
          f"{100 * PULL_FRACTION:.0f}% and max < {PULL_MAX}: {verdict}); resolution_data max "
          f"|diff| {stats_pull['resolution_data_max_abs_diff']:.3g}")
    env["load_average_at_end"] = list(os.getloadavg())

    if args.json:
        config = {k: getattr(args, k) for k in ("specmin", "nspec", "bundlesize", "nsubbundles",
                                                "wavesize", "wavelengths", "ypad", "threads",
                                                "repeat", "device", "full_output", "seed")}
        config.update(nwave=nwave, patches=npatches, xyrange=list(xyrange),
                      production=dict(PRODUCTION, nwave=prod_nwave, patches=prod_patches))
        write_json_atomically(args.json, {"benchmark": "specex_vs_specter", "environment": env,
                                          "config": config, "results": rows,
                                          "speedup_specter_over_sciproxy": speedup,
                                          "verification": stats_pull})
        print(f"# wrote {args.json}")
    if not stats_pull["pass"]:
        print("specex_vs_specter: sciproxy's flux does not match specter's within the pull "
              "criterion", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
