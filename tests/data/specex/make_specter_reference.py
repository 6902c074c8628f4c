#!/usr/bin/env python3
"""Writes the specter reference data for tests/python/test_specex_specter.py (sciproxy.specex).

specter (DESI's spectroperfectionism extraction, github.com/desihub/specter, made at commit
b8490d38) is NOT on the package index: fetch its source yourself and put its py/ directory on
PYTHONPATH. It needs numpy, scipy, astropy and numba. Run from anywhere:

    PYTHONPATH=/path/to/specter/py python tests/data/specex/make_specter_reference.py

It reads the two PSFs in shared/data/desi/ (--psf-dir to change) and writes, next to this
script, deterministically (every random input comes from a fixed numpy seed):

  psf_r0.npz, psf_gausshermite.npz   (PSFVER 3 r0 PSF, 500 fibres; PSFVER 2 PSF, 25 fibres)
      npix_x, npix_y, nspec, psferr, wmin, wmax, wmin_all, wmax_all;
      pair_ispec, pair_wave: (fibre, wavelength) pairs (fibres at both ends and the middle;
          wavelengths across the range, within 0.2-4 A of each fibre's ends, and 1 A beyond
          them for the first and last fibre);
      pair_x, pair_y (psf.xy), pair_wdisp (psf.wdisp), spot_xstart, spot_ystart,
          spot_xstop, spot_ystop (psf.xypix slices), spot_shape [n, 2] and spot_pix [n, ny, nx]
          (the pixels, zero-padded to the largest spot);
      wave_ispec [k], wave_y [m], wave_of_y [k, m]: psf.wavelength(ispec, y);
      xyrange_spec [j, 2], xyrange_wave [j, 2], xyrange [j, 4]: psf.xyrange(spec, wave);
      project_<i>_{specmin, wavelength, phot, xyrange, image}: psf.project(...) of 3 spectra,
          and project_<i>_Aphot: psf.projection_matrix((specmin, specmin+3), wavelength,
          xyrange) @ phot.ravel() (which differs from project where project skips wavelengths
          between the fibre's wavelength at rows -0.5 and 0, or npix_y-0.5 and npix_y);
      ndiag_{specmin, nspec, dw, wavelengths_start, wavelengths_stop, value}: ex2d's ndiag
          rule (copied from ex2d) for wavelengths np.arange(start, stop, dw).
  patches.npz   ex2d_patch cases (see PATCH_CASES below), keys <case>_<name>:
      inputs image, ivar, specmin, nspec, wavelengths, xyrange, regularize, psf (file name);
      outputs for ndecorr False (<case>_sig_*) and True (<case>_noise_*): flux, ivar, xflux
      (float64) and R. R is (nspec*nwave)^2; it is stored as R_blocks [nspec, nwave, nwave], the
      per-spectrum diagonal blocks (in the default signal mode R is exactly block diagonal, which
      the script asserts), and for ndecorr True in the cases marked full_R also as R_full (all
      of it). Stored R is float32 with |R| < 1e-10 set to 0 (see compact()).
  frame_r0.npz  ex2d on a simulated 20-fibre frame (FRAME below): inputs image (float32 cut-out),
      ivar (float32; 0.3% of the pixels at random and rows 300-339 of column 70 masked, ivar 0), xyrange, wavelengths, phot (the simulated photons per bin), the ex2d
      arguments (as JSON in 'ex2d_args'); outputs flux, ivar (float64), resolution_data,
      chi2pix, pixmask_fraction (float32), and 'seconds' (specter's ex2d wall time).
      ex2d was given image.astype(float64) and ivar.astype(float64), exactly the stored values.

Simulated images: image = round_to_quarter(Poisson(A phot) + N(0, 3)), ivar = 1/(max(img, 0) + 9)
(the quarter-electron rounding keeps the files small and is far below the 3 e- read noise).
Every file carries 'meta', a JSON string with the specter commit and the numpy/scipy versions.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

try:
    import scipy
    import specter
    from specter.psf import load_psf
    from specter.extract.ex2d import ex2d, ex2d_patch
except ImportError as error:  # pragma: no cover
    sys.exit("make_specter_reference.py needs specter (not on the package index: fetch its "
             f"source and set PYTHONPATH=<specter>/py), numpy, scipy, astropy, numba: {error}")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
PSF_DIRS = [os.path.join(REPO, "shared", "data", "desi"),
            os.path.join(REPO, "..", "shared", "data", "desi"), "/work/shared/data/desi"]
DEFAULT_PSF_DIR = next((p for p in PSF_DIRS if os.path.isdir(p)), PSF_DIRS[0])
PSF_FILES = {"r0": "psf-r0-00067784.fits", "gausshermite": "psf-gausshermite.fits"}
SPECTER_COMMIT = "b8490d38"
READ_NOISE = 3.0
R_ZERO = 1e-10

# ex2d_patch cases: name -> psf, specmin, nspec, first wavelength, dw, nwave, extras.
# "edge" starts 8 A below fibre 0's first wavelength on the CCD: its first bins have no pixels
# (fluxweight 0, ivar 0) and the next ones have truncated spots.
PATCH_CASES = {
    "r0_fib0": dict(psf="r0", specmin=0, nspec=5, w0=6000.0, dw=0.8, nwave=50, full_R=True),
    "r0_mid": dict(psf="r0", specmin=248, nspec=5, w0=7000.0, dw=0.8, nwave=50),
    "r0_masked": dict(psf="r0", specmin=0, nspec=5, w0=6200.0, dw=0.8, nwave=50, masked=True),
    "r0_regularize": dict(psf="r0", specmin=248, nspec=5, w0=6600.0, dw=0.8, nwave=50,
                          regularize=0.05),
    "r0_edge": dict(psf="r0", specmin=0, nspec=5, w0=None, dw=0.8, nwave=50),
    "gh_mid": dict(psf="gausshermite", specmin=10, nspec=5, w0=6500.0, dw=0.8, nwave=50),
}

FRAME = dict(psf="r0", specmin=0, nspec=20, wstart=6000.0, wstop=6400.0, dw=0.8,
             bundlesize=10, nsubbundles=2, wavesize=50, regularize=0.0, ndecorr=False,
             psferr=None, pixpad_frac=0.8, wavepad_frac=0.2, ypad=30, seed=2024)


def meta(**extra):
    doc = dict(specter_commit=SPECTER_COMMIT, specter_version=getattr(specter, "__version__", "?"),
               numpy=np.__version__, scipy=scipy.__version__, made_by="make_specter_reference.py")
    doc.update(extra)
    return np.array(json.dumps(doc))


def ex2d_ndiag(psf, specmin, nspec, dw):
    """ndiag exactly as specter's ex2d computes it (copied from specter/extract/ex2d.py)."""
    ndiag = 0
    for ispec in [specmin, specmin + nspec // 2, specmin + nspec - 1]:
        for w in [psf.wmin, 0.5 * (psf.wmin + psf.wmax), psf.wmax]:
            ndiag = max(ndiag, int(round(9.0 * psf.wdisp(ispec, w) / dw)))
    wmid = (psf.wmin_all + psf.wmax_all) / 2.0
    spotsize = psf.pix(0, wmid).shape
    return min(ndiag, spotsize[0] // 2, spotsize[1] // 2)


def compact(R):
    """R for the files: float32 (relative rounding 6e-8, far inside allclose's rtol 1e-5) with
    |R| < 1e-10 set to 0 (far inside allclose's atol 1e-8); this keeps the files small."""
    R = np.asarray(R, dtype=np.float64)
    return np.where(np.abs(R) < R_ZERO, 0.0, R).astype(np.float32)


def simulate(psf, wavelengths, phot, specmin, xyrange, rng):
    """image = Poisson(A phot) + N(0, 3) rounded to 0.25 e-; ivar = 1/(max(img, 0) + 9)."""
    model = psf.project(wavelengths, phot, specmin=specmin, xyrange=xyrange)
    img = rng.poisson(np.clip(model, 0, None)).astype(np.float64)
    img += rng.normal(0.0, READ_NOISE, size=img.shape)
    img = np.round(img * 4.0) / 4.0
    ivar = 1.0 / (np.maximum(img, 0.0) + READ_NOISE**2)
    return img, ivar


def spectra(rng, nspec, wavelengths):
    """Smooth continua of 50-400 photons per bin plus a few emission lines."""
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
    return np.round(phot, 2)  # two decimals: the files compress better


# ---------------------------------------------------------------------------------------------
def psf_file(psf, name, out):
    nspec = psf.nspec
    mid = nspec // 2
    fibres = [0, 1, mid, nspec - 2, nspec - 1]
    pairs = []
    for i in fibres:
        lo, hi = psf._wmin_spec[i], psf._wmax_spec[i]
        for w in (lo + 0.2, lo + 1.5, lo + 4.0, 6000.0, 6543.21, 7000.5, 7500.25,
                  hi - 4.0, hi - 1.5, hi - 0.2):
            pairs.append((i, float(w)))
    for i in (0, nspec - 1):  # off the CCD: empty spots
        pairs.append((i, float(psf._wmin_spec[i] - 1.0)))
        pairs.append((i, float(psf._wmax_spec[i] + 1.0)))
    n = len(pairs)
    d = dict(npix_x=psf.npix_x, npix_y=psf.npix_y, nspec=psf.nspec, psferr=psf.psferr,
             wmin=psf.wmin, wmax=psf.wmax, wmin_all=psf.wmin_all, wmax_all=psf.wmax_all)
    d["pair_ispec"] = np.array([p[0] for p in pairs], dtype=np.int64)
    d["pair_wave"] = np.array([p[1] for p in pairs])
    xs, ys, wd, spots = [], [], [], []
    for i, w in pairs:
        x, y = psf.xy(i, w)
        xs.append(x)
        ys.append(y)
        wd.append(psf.wdisp(i, w))
        spots.append(psf.xypix(i, w))
    d["pair_x"], d["pair_y"], d["pair_wdisp"] = np.array(xs), np.array(ys), np.array(wd)
    d["spot_xstart"] = np.array([s[0].start for s in spots], dtype=np.int64)
    d["spot_xstop"] = np.array([s[0].stop for s in spots], dtype=np.int64)
    d["spot_ystart"] = np.array([s[1].start for s in spots], dtype=np.int64)
    d["spot_ystop"] = np.array([s[1].stop for s in spots], dtype=np.int64)
    shapes = np.array([s[2].shape for s in spots], dtype=np.int64)
    d["spot_shape"] = shapes
    pix = np.zeros((n, shapes[:, 0].max(), shapes[:, 1].max()))
    for k, s in enumerate(spots):
        pix[k, : s[2].shape[0], : s[2].shape[1]] = s[2]
    d["spot_pix"] = pix

    # wavelength(ispec, y)
    d["wave_ispec"] = np.array([0, mid, nspec - 1], dtype=np.int64)
    d["wave_y"] = np.array([-0.5, 0.0, 0.3, 1.0, 17.25, 1000.0, 2063.5, 3000.75,
                            psf.npix_y - 2.0, psf.npix_y - 1.0, psf.npix_y - 0.5])
    d["wave_of_y"] = np.array([psf.wavelength(int(i), d["wave_y"]) for i in d["wave_ispec"]])

    # xyrange
    if name == "r0":
        cases = [((0, 5), (6000.0, 6039.2)), ((0, 1), (psf.wmin, psf.wmax)),
                 ((248, 253), (7000.0, 7039.2)), ((495, 500), (7700.0, 7900.0)),
                 ((0, 25), (5500.0, 5700.0)), ((10, 20), (6000.0, 6399.2)),
                 ((0, 20), (6000.0, 6399.2)), ((499, 500), (6500.0, 6500.0))]
    else:
        cases = [((0, 5), (6000.0, 6039.2)), ((0, 1), (psf.wmin, psf.wmax)),
                 ((10, 15), (6500.0, 6539.2)), ((20, 25), (7700.0, 7900.0)),
                 ((0, 25), (5500.0, 5700.0)), ((24, 25), (6500.0, 6500.0))]
    d["xyrange_spec"] = np.array([c[0] for c in cases], dtype=np.int64)
    d["xyrange_wave"] = np.array([c[1] for c in cases])
    d["xyrange"] = np.array([[int(v) for v in psf.xyrange(c[0], c[1])] for c in cases],
                            dtype=np.int64)

    # project: a mid-CCD block cropped so that spots are cut at the edges; the bottom end of
    # the first fibres (wavelengths between wavelength(y=-0.5) and wavelength(y=0), which
    # project skips although xypix would place them); the top end of the last fibres.
    rng = np.random.default_rng(11 if name == "r0" else 12)
    w_lo = float(psf.wavelength(0, 0.0))
    projects = []
    w = np.arange(6000.0, 6040.0, 0.8)
    xr = psf.xyrange((mid, mid + 3), (w[0], w[-1]))
    projects.append((mid, w, (int(xr[0]) + 3, int(xr[1]) - 2, int(xr[2]) + 5, int(xr[3]) - 5)))
    w = np.arange(w_lo - 2.0, w_lo + 12.0, 0.25)
    xr = psf.xyrange((0, 3), (w[0], w[-1]))
    projects.append((0, w, (int(xr[0]), int(xr[1]), 0, 40)))
    whi = float(psf.wavelength(nspec - 1, psf.npix_y - 1.0))
    w = np.arange(whi - 12.0, whi + 2.0, 0.25)
    xr = psf.xyrange((nspec - 3, nspec), (w[0], w[-1]))
    projects.append((nspec - 3, w, (int(xr[0]), int(xr[1]), psf.npix_y - 40, psf.npix_y)))
    for k, (specmin, w, xr) in enumerate(projects):
        phot = rng.uniform(10.0, 1000.0, size=(3, len(w)))
        d[f"project_{k}_specmin"] = np.int64(specmin)
        d[f"project_{k}_wavelength"] = w
        d[f"project_{k}_phot"] = phot
        d[f"project_{k}_xyrange"] = np.array(xr, dtype=np.int64)
        d[f"project_{k}_image"] = psf.project(w, phot, specmin=specmin, xyrange=xr)
        A = psf.projection_matrix((specmin, specmin + 3), w, xr)
        d[f"project_{k}_Aphot"] = A.dot(phot.ravel()).reshape(xr[3] - xr[2], xr[1] - xr[0])
    d["project_count"] = np.int64(len(projects))

    # ex2d's ndiag
    if name == "r0":
        ncases = [(0, 20, dw) for dw in (0.5, 0.8, 1.0, 2.0)] + \
                 [(0, 500, 0.8), (250, 25, 0.8), (475, 25, 2.0)]
    else:
        ncases = [(0, 25, 1.0), (0, 25, 2.0), (10, 5, 1.0)]
    d["ndiag_specmin"] = np.array([c[0] for c in ncases], dtype=np.int64)
    d["ndiag_nspec"] = np.array([c[1] for c in ncases], dtype=np.int64)
    d["ndiag_dw"] = np.array([c[2] for c in ncases])
    d["ndiag_wavelengths_start"] = np.full(len(ncases), 6000.0)
    d["ndiag_wavelengths_stop"] = np.full(len(ncases), 6400.0)
    d["ndiag_value"] = np.array([ex2d_ndiag(psf, *c) for c in ncases], dtype=np.int64)
    d["meta"] = meta(psf_file=PSF_FILES[name])
    np.savez_compressed(out, **d)
    return d


# ---------------------------------------------------------------------------------------------
def patches_file(psfs, out):
    d = {}
    rng = np.random.default_rng(7)
    for name, c in PATCH_CASES.items():
        psf = psfs[c["psf"]]
        specmin, nspec, dw, nwave = c["specmin"], c["nspec"], c["dw"], c["nwave"]
        w0 = c["w0"] if c["w0"] is not None else round(float(psf._wmin_spec[specmin]) - 8.0, 1)
        wavelengths = w0 + dw * np.arange(nwave)
        xyrange = tuple(int(v) for v in psf.xyrange((specmin, specmin + nspec),
                                                     (wavelengths[0], wavelengths[-1])))
        # the scene: the patch's spectra 12 bins beyond each end and both neighbouring fibres
        sim_lo = max(specmin - 1, 0)
        sim_hi = min(specmin + nspec + 1, psf.nspec)
        wsim = w0 + dw * np.arange(-12, nwave + 12)
        phot = spectra(rng, sim_hi - sim_lo, wsim)
        image, ivar = simulate(psf, wsim, phot, sim_lo, xyrange, rng)
        if c.get("masked"):
            mask = rng.uniform(size=image.shape) < 0.03
            mask[20:24, 10:30] = True  # a bad patch of rows
            mask[:, 25] = True  # and a bad column
            ivar[mask] = 0.0
        regularize = c.get("regularize", 0.0)
        p = f"{name}_"
        d.update({p + "image": image, p + "ivar": ivar, p + "specmin": np.int64(specmin),
                  p + "nspec": np.int64(nspec), p + "wavelengths": wavelengths,
                  p + "xyrange": np.array(xyrange, dtype=np.int64),
                  p + "regularize": np.float64(regularize),
                  p + "psf": np.array(PSF_FILES[c["psf"]]),
                  p + "sim_specmin": np.int64(sim_lo), p + "sim_wavelengths": wsim,
                  p + "sim_phot": phot})
        for ndecorr, mode in ((False, "sig"), (True, "noise")):
            res = ex2d_patch(image, ivar, psf, specmin, nspec, wavelengths, xyrange=xyrange,
                             full_output=True, regularize=regularize, ndecorr=ndecorr)
            R = np.asarray(res["R"])
            blocks = np.array([R[i * nwave:(i + 1) * nwave, i * nwave:(i + 1) * nwave]
                               for i in range(nspec)])
            q = f"{name}_{mode}_"
            d.update({q + "flux": res["flux"], q + "ivar": res["ivar"], q + "xflux": res["xflux"],
                      q + "R_blocks": compact(blocks)})
            if ndecorr and c.get("full_R"):
                d[q + "R_full"] = compact(R)
            if not ndecorr:
                off = R.copy()
                for i in range(nspec):
                    off[i * nwave:(i + 1) * nwave, i * nwave:(i + 1) * nwave] = 0.0
                assert not off.any(), "signal-mode R is not block diagonal"
    d["cases"] = np.array(list(PATCH_CASES))
    d["meta"] = meta(cases=PATCH_CASES, noise="image = round(Poisson(A phot) + N(0,3), 0.25); "
                     "ivar = 1/(max(img,0)+9)")
    np.savez_compressed(out, **d)


# ---------------------------------------------------------------------------------------------
def frame_file(psfs, out):
    f = FRAME
    psf = psfs[f["psf"]]
    rng = np.random.default_rng(f["seed"])
    specmin, nspec = f["specmin"], f["nspec"]
    wavelengths = np.arange(f["wstart"], f["wstop"], f["dw"])
    xr = psf.xyrange((specmin, specmin + nspec), (wavelengths[0], wavelengths[-1]))
    xyrange = (int(xr[0]), int(xr[1]), max(int(xr[2]) - f["ypad"], 0),
               min(int(xr[3]) + f["ypad"], psf.npix_y))
    # the scene extends 40 bins beyond both ends of the extracted range
    wsim = wavelengths[0] + f["dw"] * np.arange(-40, len(wavelengths) + 40)
    phot = spectra(rng, nspec, wsim)
    image, ivar = simulate(psf, wsim, phot, specmin, xyrange, rng)
    # a few bad pixels (ivar 0): 0.3% at random and a 40-row stretch of one column
    mask = rng.uniform(size=image.shape) < 0.003
    mask[300:340, 70] = True
    ivar[mask] = 0.0
    image32, ivar32 = image.astype(np.float32), ivar.astype(np.float32)
    args = dict(specmin=specmin, nspec=nspec, xyrange=list(xyrange), regularize=f["regularize"],
                ndecorr=f["ndecorr"], bundlesize=f["bundlesize"], nsubbundles=f["nsubbundles"],
                wavesize=f["wavesize"], full_output=True, psferr=f["psferr"],
                pixpad_frac=f["pixpad_frac"], wavepad_frac=f["wavepad_frac"])
    t0 = time.perf_counter()
    res = ex2d(image32.astype(np.float64), ivar32.astype(np.float64), psf,
               wavelengths=wavelengths, **args)
    seconds = time.perf_counter() - t0
    d = dict(image=image32, ivar=ivar32, xyrange=np.array(xyrange, dtype=np.int64),
             wavelengths=wavelengths, sim_wavelengths=wsim, phot=phot,
             specmin=np.int64(specmin), nspec=np.int64(nspec),
             flux=res["flux"], ivar_out=res["ivar"],
             resolution_data=res["resolution_data"].astype(np.float32),
             chi2pix=res["chi2pix"].astype(np.float32),
             pixmask_fraction=res["pixmask_fraction"].astype(np.float32),
             seconds=np.float64(seconds), ex2d_args=np.array(json.dumps(args)),
             psf=np.array(PSF_FILES[f["psf"]]))
    d["meta"] = meta(frame=FRAME, wavelengths="np.arange(6000.0, 6400.0, 0.8): 500 values, "
                     "6000.0 ... 6399.2", ex2d_args=args,
                     ex2d_input="image.astype(float64), ivar.astype(float64)")
    np.savez_compressed(out, **d)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--psf-dir", default=DEFAULT_PSF_DIR)
    parser.add_argument("--out-dir", default=HERE)
    parser.add_argument("--only", choices=["psf", "patches", "frame"], action="append")
    args = parser.parse_args()
    only = set(args.only or ["psf", "patches", "frame"])
    t0 = time.perf_counter()
    psfs = {k: load_psf(os.path.join(args.psf_dir, v)) for k, v in PSF_FILES.items()}
    print(f"loaded PSFs in {time.perf_counter() - t0:.1f} s")
    if "psf" in only:
        for name, psf in psfs.items():
            t = time.perf_counter()
            d = psf_file(psf, name, os.path.join(args.out_dir, f"psf_{name}.npz"))
            print(f"psf_{name}.npz: {len(d['pair_wave'])} pairs, ndiag {d['ndiag_value'].tolist()}"
                  f" ({time.perf_counter() - t:.1f} s)")
    if "patches" in only:
        t = time.perf_counter()
        patches_file(psfs, os.path.join(args.out_dir, "patches.npz"))
        print(f"patches.npz: {len(PATCH_CASES)} cases ({time.perf_counter() - t:.1f} s)")
    if "frame" in only:
        seconds = frame_file(psfs, os.path.join(args.out_dir, "frame_r0.npz"))
        print(f"frame_r0.npz: specter ex2d took {seconds:.2f} s")
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
