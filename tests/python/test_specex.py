"""sciproxy.specex through Python: the PSF (shapes and values as specter's), projection, and the
extraction's properties on small simulated frames of the r0 PSF (10 spectra, 100 wavelengths):
resolution rows sum to 1, a noiseless frame extracts back its spectra, chi2pix is near 1 on a
noisy one, cpu agrees with the reference backend, results do not depend on nparallel, bad input
raises an error naming the argument, and Ctrl-C stops a long extraction.

The PSFs are tests/data/specex/*.fits (desihub gpu_specter's and specter's test data). The few
hard-coded numbers were computed with specter (desihub/specter b8490d38) on the same files.
Comparisons with specter's own extraction are in test_specex_specter.py.
"""

import os
import re
import threading
import time
import _thread
from pathlib import Path

import numpy as np
import pytest

import sciproxy
import sciproxy.specex as sx

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "specex"
R0 = DATA / "psf-r0-00067784.fits"
GH = DATA / "psf-gausshermite.fits"

DW = 0.8
WAVE = 6000.0 + DW * np.arange(100)  # 100 wavelengths, 6000 - 6079.2 A: what is extracted
WIDE = 6000.0 + DW * np.arange(-30, 130)  # the frames' light: 30 bins more on each side
NSPEC = 10


def raises(exception, argument):
    """pytest.raises for a message that names `argument` as a word."""
    return pytest.raises(exception, match=rf"(^|\W){re.escape(argument)}(\W|$)")


@pytest.fixture(scope="module")
def psf():
    return sx.load_psf(R0)


@pytest.fixture(scope="module")
def frame(psf):
    """A noiseless cut-out of the r0 PSF: 10 spectra of constant photons per bin (1000 to 1900)
    on WIDE, the extraction's grid extended by 30 bins each side (so that every patch's padding
    sees light, as in a real frame), with read-noise-like weights, and its pixel range."""
    phot = np.repeat((1000.0 + 100.0 * np.arange(NSPEC))[:, None], WIDE.size, axis=1)
    xmin, xmax, ymin, ymax = psf.xyrange((0, NSPEC), (WIDE[0], WIDE[-1]))
    xyrange = (max(xmin - 10, 0), xmax + 10, ymin, ymax)
    image = psf.project(WIDE, phot, specmin=0, xyrange=xyrange)
    ivar = 1.0 / (np.maximum(image, 0) + 9.0)
    return dict(image=image, ivar=ivar, phot=phot[:, 30:130], xyrange=xyrange)


@pytest.fixture(scope="module")
def noisy(psf, frame):
    """500 photons per bin on WIDE, Poisson and 3 e- read noise (simulate_image, seed 7)."""
    image, ivar = sx.simulate_image(psf, WIDE, np.full((NSPEC, WIDE.size), 500.0), specmin=0,
                                    xyrange=frame["xyrange"], read_noise=3.0, seed=7)
    return dict(image=image, ivar=ivar, phot=np.full((NSPEC, WAVE.size), 500.0),
                xyrange=frame["xyrange"])


# ---- the PSF ----

# specter's values on these files: wmin, wmax, wmin_all, wmax_all, then for fibre 3 at 6500 A:
# x, y, wavelength at row 2000, wdisp, xyrange((0, 5), (6000, 6079.2)), xypix slices' starts.
SPECTER = {
    "r0": dict(nspec=500, hsize=(8, 5),
               wrange=(5545.899846732088, 7801.142001646345, 5608.047804673133, 7735.614346468706),
               x=142.6389081064975, y=1713.6301607695455, wavelength=6653.304576706631,
               wdisp=0.593225733030185, xyrange=(113, 159, 794, 951), start=(135, 1709),
               shape=(11, 17)),
    "gh": dict(nspec=25, hsize=(14, 8),
               wrange=(5569.349786699444, 7756.151623008496, 5579.520730803732, 7745.847193673644),
               x=194.74591081985903, y=1680.4908022953935, wavelength=6670.287344787791,
               wdisp=0.6086718247093936, xyrange=(158, 217, 754, 918), start=(181, 1672),
               shape=(17, 29)),
}


@pytest.mark.parametrize("name, path", [("r0", R0), ("gh", GH)])
def test_psf_basics_as_specter(name, path):
    expected = SPECTER[name]
    p = sx.load_psf(path)
    assert p.path == str(path)
    assert (p.npix_x, p.npix_y, p.nspec) == (4114, 4128, expected["nspec"])
    assert (p.hsizex, p.hsizey) == expected["hsize"]
    assert p.psferr == 0.01  # no PSFERR card: specter's default
    # Trace positions to 1e-9 px; wavelengths (the fitted inverse) to 1e-6 A.
    np.testing.assert_allclose((p.wmin, p.wmax, p.wmin_all, p.wmax_all), expected["wrange"],
                               rtol=0, atol=1e-6)
    assert p.x(3, 6500.0) == pytest.approx(expected["x"], abs=1e-9)
    assert p.y(3, 6500.0) == pytest.approx(expected["y"], abs=1e-9)
    assert p.wavelength(3, 2000.0) == pytest.approx(expected["wavelength"], abs=1e-6)
    assert p.wdisp(3, 6500.0) == pytest.approx(expected["wdisp"], rel=1e-6)
    r = p.xyrange((0, 5), (6000.0, 6079.2))
    assert r == expected["xyrange"] and all(type(v) is int for v in r)
    xs, ys, pix = p.xypix(3, 6500.0)
    assert (xs.start, ys.start) == expected["start"]
    assert pix.shape == expected["shape"] == (ys.stop - ys.start, xs.stop - xs.start)
    assert pix.sum() == pytest.approx(1.0, abs=1e-12)  # inside the CCD: normalised to 1
    assert np.all(pix >= 0)


def test_psf_shapes_as_specter(psf):
    w = np.array([6000.0, 6500.0, 7000.0])
    assert isinstance(psf.x(0, 6000.0), float) and isinstance(psf.y(0, 6000.0), float)
    assert psf.x(0, w).shape == psf.y(0, w).shape == (3,)
    assert psf.x(None, 6000.0).shape == psf.y(None, 6000.0).shape == (500,)
    assert psf.x(None, w).shape == psf.y(None, w).shape == (500, 3)
    assert psf.x([1, 4], w).shape == (2, 3)
    assert psf.x(2).shape == (4128,)
    assert psf.x().shape == (500, 4128)
    assert psf.wavelength(2).shape == (4128,)
    assert psf.wavelength().shape == (500, 4128)
    assert psf.wavelength(None, 100.0).shape == (500,)
    assert isinstance(psf.wavelength(2, 100.0), float)
    x, y = psf.xy(5, w)
    np.testing.assert_array_equal(x, psf.x(5, w))
    np.testing.assert_array_equal(y, psf.y(5, w))
    np.testing.assert_array_equal(psf.x(None, w)[7], psf.x(7, w))
    # x along the rows is x at each row's wavelength.
    np.testing.assert_array_equal(psf.x(2), psf.x(2, psf.wavelength(2)))
    assert psf.wdisp(0, w).shape == (3,)
    with raises(ValueError, "wavelength"):
        psf.y(0)


def test_wavelength_inverts_y(psf):
    # specter's inverse is a Legendre fit; on these files it holds y to 2e-4 px.
    rows = np.arange(0.0, 4128.0, 7.0)
    for ispec in (0, 250, 499):
        assert np.max(np.abs(psf.y(ispec, psf.wavelength(ispec, rows)) - rows)) < 1e-3


def test_xypix_edges_as_specter(psf):
    empty = (0, 0)
    xs, ys, pix = psf.xypix(3, psf.wmin - 10)
    assert (xs, ys, pix.shape) == (slice(0, 0), slice(0, 0), empty)
    xs, ys, pix = psf.xypix(3, psf.wmax + 10)
    assert (xs, ys, pix.shape) == (slice(0, 0), slice(4128, 4128), empty)
    # A sub-image: slices relative to (xmin, ymin), the spot cut (not renormalised).
    xs0, ys0, full = psf.xypix(3, 6500.0)
    xs, ys, part = psf.xypix(3, 6500.0, xmin=xs0.start + 3, ymin=ys0.start + 2)
    assert (xs, ys, part.shape) == (slice(0, 14), slice(0, 9), (9, 14))
    np.testing.assert_array_equal(part, full[2:, 3:])
    # Entirely outside the sub-image: specter's empty slices.
    xs, ys, pix = psf.xypix(3, 6500.0, xmin=0, xmax=10)
    assert (xs, ys, pix.shape) == (slice(10, 10), slice(0, 0), empty)
    xs, ys, pix = psf.xypix(3, 6500.0, ymin=3000, ymax=3100)
    assert (xs, ys, pix.shape) == (slice(0, 0), slice(3000, 3000), empty)
    np.testing.assert_array_equal(psf.pix(3, 6500.0), full)


def test_projection_matrix_and_project_agree(psf):
    w = np.array([6000.0, 6000.8, 6001.6])
    r = psf.xyrange((0, 3), (w[0], w[-1]))
    nx, ny = r[1] - r[0], r[3] - r[2]
    A = psf.projection_matrix((0, 3), w, r)
    assert A.shape == (ny * nx, 9) and A.dtype == np.float64
    # Each column is one spot inside the range: it sums to 1.
    np.testing.assert_allclose(A.sum(axis=0), 1.0, atol=1e-12)
    phot = np.arange(1.0, 10.0).reshape(3, 3)
    image = psf.project(w, phot, specmin=0, xyrange=r)
    assert image.shape == (ny, nx)
    np.testing.assert_allclose(image, (A @ phot.ravel()).reshape(ny, nx), rtol=1e-12,
                               atol=1e-12)
    # One spectrum as a 1-D array; several images as 3-D phot; a grid per spectrum.
    np.testing.assert_array_equal(psf.project(w, phot[0], xyrange=r),
                                  psf.project(w, phot[:1], xyrange=r))
    stack = psf.project(w, np.stack([phot, 2 * phot]), xyrange=r)
    assert stack.shape == (2, ny, nx)
    np.testing.assert_array_equal(stack[0], image)
    np.testing.assert_allclose(stack[1], 2 * image, rtol=1e-12)
    np.testing.assert_allclose(psf.project(np.tile(w, (3, 1)), phot, xyrange=r), image,
                               rtol=1e-12, atol=1e-12)


# ---- extraction ----

def test_resolution_ndiag(psf):
    # specter's values for the r0 PSF (docs/kernels/specex.md): 5 at 0.8 A, 3 at 2.0 A.
    assert sx.resolution_ndiag(psf, 0, NSPEC, WAVE) == 5
    assert sx.resolution_ndiag(psf, 0, NSPEC, 6000.0 + 2.0 * np.arange(10)) == 3


def test_ex2d_shapes_and_full_output(psf, frame):
    flux, ivar, rdata = sx.ex2d(frame["image"], frame["ivar"], psf, 0, NSPEC, WAVE,
                                xyrange=frame["xyrange"], bundlesize=NSPEC)
    assert flux.shape == ivar.shape == (NSPEC, WAVE.size)
    assert rdata.shape == (NSPEC, 11, WAVE.size)
    assert flux.dtype == ivar.dtype == rdata.dtype == np.float64
    out = sx.ex2d(frame["image"].astype(np.float32), frame["ivar"].astype(np.float32), str(R0),
                  0, NSPEC, WAVE, xyrange=frame["xyrange"], bundlesize=NSPEC, full_output=True)
    for key in ("flux", "ivar", "resolution_data", "modelimage", "pixmask_fraction", "chi2pix"):
        assert key in out
    assert out["modelimage"].shape == frame["image"].shape
    assert out["chi2pix"].shape == out["pixmask_fraction"].shape == (NSPEC, WAVE.size)
    # Nothing masked: 1 - A^T [ivar > 0] is 0 to rounding.
    np.testing.assert_allclose(out["pixmask_fraction"], 0.0, atol=1e-12)
    # float32 input is converted once to float64: near the float64 result, not equal.
    np.testing.assert_allclose(out["flux"], flux, rtol=1e-4)


def test_patch_resolution_rows_sum_to_one(psf, frame):
    """R = diag(s)^-1 Q with s the row sums of Q: every row of the patch's dense R sums to 1
    (to rounding); in signal mode R is block diagonal (no terms between spectra)."""
    r = psf.xyrange((2, 5), (WAVE[0], WAVE[29]))
    xmin, xmax, ymin, ymax = r
    x0, _, y0, _ = frame["xyrange"]
    image = frame["image"][ymin - y0:ymax - y0, xmin - x0:xmax - x0]
    ivar = frame["ivar"][ymin - y0:ymax - y0, xmin - x0:xmax - x0]
    flux, fivar, R = sx.ex2d_patch(image, ivar, psf, 2, 3, WAVE[:30], xyrange=r)
    assert R.shape == (90, 90) and flux.shape == fivar.shape == (3, 30)
    np.testing.assert_allclose(R.sum(axis=1), 1.0, rtol=0, atol=1e-10)
    for i in range(3):
        for j in range(3):
            if i != j:
                assert np.all(R[30 * i:30 * (i + 1), 30 * j:30 * (j + 1)] == 0)
    out = sx.ex2d_patch(image, ivar, psf, 2, 3, WAVE[:30], xyrange=r, full_output=True,
                        ndecorr=True)
    np.testing.assert_allclose(out["R"].sum(axis=1), 1.0, rtol=0, atol=1e-10)
    assert out["A"].shape == (image.size, 90) and out["iCov"].shape == (90, 90)
    assert out["xflux"].shape == (3, 30)


def test_ex2d_resolution_rows_sum_to_one(psf, frame):
    """Rdata[i, k, j] = R_i[j - ndiag + k, j]: row m of fibre i's R is the band entries
    Rdata[i, k, m + ndiag - k]. Checked for every row whose band lies inside the output
    (ndiag <= m < nwave - ndiag): the sum is 1 within 1e-3, what the entries of R beyond the
    band (dropped, as specter does) and the stitching of patches leave (9e-5 measured)."""
    _, _, rdata = sx.ex2d(frame["image"], frame["ivar"], psf, 0, NSPEC, WAVE,
                          xyrange=frame["xyrange"], bundlesize=NSPEC, nsubbundles=2,
                          wavesize=50)
    ndiag = (rdata.shape[1] - 1) // 2
    nwave = rdata.shape[2]
    k = np.arange(2 * ndiag + 1)
    for m in range(ndiag, nwave - ndiag):
        rows = rdata[:, k, m + ndiag - k].sum(axis=1)
        np.testing.assert_allclose(rows, 1.0, rtol=0, atol=1e-3, err_msg=f"row {m}")


def test_noiseless_patch_extracts_back_its_spectra(psf):
    """One patch of 10 spectra x 100 wavelengths on a frame projected from this PSF at exactly
    these wavelengths: the model is exact, so the deconvolved x is the input, and, the input
    being constant per fibre and R's rows summing to 1, so is flux = R x. Only rounding in the
    solve remains, amplified by iCov's condition number: 1e-10 relative (5e-14 measured)."""
    phot = np.repeat((1000.0 + 100.0 * np.arange(NSPEC))[:, None], WAVE.size, axis=1)
    r = psf.xyrange((0, NSPEC), (WAVE[0], WAVE[-1]))
    image = psf.project(WAVE, phot, xyrange=r)
    ivar = 1.0 / (np.maximum(image, 0) + 9.0)
    out = sx.ex2d_patch(image, ivar, psf, 0, NSPEC, WAVE, xyrange=r, full_output=True)
    np.testing.assert_allclose(out["xflux"], phot, rtol=1e-10)
    np.testing.assert_allclose(out["flux"], phot, rtol=1e-10)
    assert np.all(out["ivar"] > 0)


@pytest.mark.parametrize("nsubbundles, wavesize", [(1, 100), (2, 50), (5, 25)])
def test_noiseless_frame_extracts_back_its_spectra(psf, frame, nsubbundles, wavesize):
    """ex2d on the noiseless frame: each patch models its spectra and its padding bins, but the
    light of wavelengths past the padding (and of fibres past a subbundle's neighbours) that
    reaches its pixels is not modelled, which moves the kept core by up to 5e-4 relative (a
    pull of 0.02 at these weights, as specter's patching). flux (per Angstrom) x dw within 1e-3
    of the input photons per bin."""
    flux, ivar, _ = sx.ex2d(frame["image"], frame["ivar"], psf, 0, NSPEC, WAVE,
                            xyrange=frame["xyrange"], bundlesize=NSPEC, nsubbundles=nsubbundles,
                            wavesize=wavesize)
    np.testing.assert_allclose(flux * DW, frame["phot"], rtol=1e-3)
    assert np.all(ivar > 0)


def test_chi2pix_near_one_on_a_noisy_frame(psf, noisy):
    """chi2pix, the pixels' chi^2 per flux bin, averages 0.83 here, not 1: each patch fits about
    one flux bin per fibre per row to the ~9 pixels of that fibre's row (1 - 1/9 = 0.89), and the
    1% PSF error term (psferr) adds to each pixel's variance. Checked: mean in [0.75, 1.05]; the
    pulls of the extracted flux against the input have unit spread; the model image reproduces
    the frame within its noise on the rows of the core wavelengths."""
    out = sx.ex2d(noisy["image"], noisy["ivar"], psf, 0, NSPEC, WAVE, xyrange=noisy["xyrange"],
                  bundlesize=NSPEC, nsubbundles=2, full_output=True)
    good = out["ivar"] > 0
    assert good.all()
    mean = float(np.mean(out["chi2pix"]))
    assert 0.75 < mean < 1.05, mean
    pull = (out["flux"] * DW - noisy["phot"]) * np.sqrt(out["ivar"]) / DW
    assert 0.9 < float(np.std(pull)) < 1.2
    # The weights come from the noisy pixels (ivar = 1 / (image + 9), as DESI's preprocessed
    # images): downward fluctuations weigh more, which biases the fit low by a fraction of a
    # sigma (-0.37 here), as in specter.
    assert -0.6 < float(np.mean(pull)) < 0.1
    # Rows whose light all comes from extracted bins (the model covers only those).
    y0 = int(np.max(psf.y(None, WAVE[15])[:NSPEC])) - noisy["xyrange"][2]
    y1 = int(np.min(psf.y(None, WAVE[85])[:NSPEC])) - noisy["xyrange"][2]
    chi2 = (noisy["image"] - out["modelimage"])[y0:y1] ** 2 * noisy["ivar"][y0:y1]
    assert 0.7 < float(np.mean(chi2)) < 1.1


@pytest.mark.parametrize("bundlesize", [5, 10])
def test_cpu_equals_reference(psf, noisy, bundlesize):
    """The reference backend (LU, full eigendecomposition) and the cpu backend (banded Cholesky,
    per-spectrum blocks) solve the same patches differently: within the library's own bound
    ||cpu - ref|| / ||ref|| <= sciproxy.tolerance('ex2d', float64) (1e-6) for flux, ivar, the
    resolution data, chi2pix and the model image (1e-12 to 3e-11 measured on 5-fibre patches,
    2e-8 on 10-fibre patches, whose conditioning amplifies rounding; src/specex/case.hpp)."""
    kw = dict(xyrange=noisy["xyrange"], bundlesize=bundlesize, nsubbundles=1, wavesize=50,
              full_output=True)
    ref = sx.ex2d(noisy["image"], noisy["ivar"], psf, 0, NSPEC, WAVE, device="reference", **kw)
    cpu = sx.ex2d(noisy["image"], noisy["ivar"], psf, 0, NSPEC, WAVE, device="cpu", **kw)
    bound = sciproxy.tolerance("ex2d", np.float64)
    for key in ("flux", "ivar", "resolution_data", "chi2pix", "modelimage"):
        rel = np.linalg.norm(cpu[key] - ref[key]) / np.linalg.norm(ref[key])
        assert rel <= bound, (key, rel, bound)


def test_record_verifies_against_the_reference(psf, noisy):
    """sciproxy.record(verify=True) reports each ex2d call and checks it against the reference
    backend with the library's tolerance."""
    with sciproxy.record(verify=True) as rec:
        sx.ex2d(noisy["image"], noisy["ivar"], psf, 0, 5, WAVE[:40], xyrange=noisy["xyrange"],
                bundlesize=5, device="cpu")
    assert rec.passed, rec.text()
    assert "ex2d" in rec.text()


@pytest.mark.skipif("cuda" in sciproxy.info()["backends"], reason="a CUDA build")
def test_cuda_absent_is_a_runtime_error_naming_the_device(psf, noisy):
    with raises(RuntimeError, "device"):
        sx.ex2d(noisy["image"], noisy["ivar"], psf, 0, 5, WAVE, xyrange=noisy["xyrange"],
                bundlesize=5, device="cuda")


def test_results_do_not_depend_on_nparallel(psf, noisy):
    """Each patch is solved by one thread into its own buffers and the model image is summed in
    patch order (src/specex/cpu.cpp): every output is bit-identical for 1 and 2 threads."""
    kw = dict(xyrange=noisy["xyrange"], bundlesize=NSPEC, nsubbundles=5, device="cpu",
              full_output=True)
    one = sx.ex2d(noisy["image"], noisy["ivar"], psf, 0, NSPEC, WAVE, nparallel=1, **kw)
    two = sx.ex2d(noisy["image"], noisy["ivar"], psf, 0, NSPEC, WAVE, nparallel=2, **kw)
    for key in ("flux", "ivar", "resolution_data", "chi2pix", "pixmask_fraction", "modelimage"):
        np.testing.assert_array_equal(one[key], two[key], err_msg=key)
    a = psf.project(WIDE, np.full((NSPEC, WIDE.size), 5.0), xyrange=noisy["xyrange"], nparallel=1)
    b = psf.project(WIDE, np.full((NSPEC, WIDE.size), 5.0), xyrange=noisy["xyrange"], nparallel=2)
    np.testing.assert_array_equal(a, b)


def test_simulate_image_is_deterministic(psf, frame):
    phot = np.full((2, 20), 300.0)
    w = WAVE[:20]
    r = psf.xyrange((0, 2), (w[0], w[-1]))
    a = sx.simulate_image(psf, w, phot, xyrange=r, seed=3)
    b = sx.simulate_image(psf, w, phot, xyrange=r, seed=3)
    c = sx.simulate_image(psf, w, phot, xyrange=r, seed=4)
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[0], c[0])
    np.testing.assert_allclose(a[1], 1.0 / (np.maximum(a[0], 0) + 9.0), rtol=1e-12)


def test_preproc_image_round_trip(tmp_path):
    image = np.arange(12.0).reshape(3, 4)
    ivar = np.full((3, 4), 0.5)
    mask = np.zeros((3, 4), np.int16)
    mask[1, 2] = 1
    path = tmp_path / "preproc.fits"
    sx.write_preproc_image(path, image, ivar, mask, camera="r0")
    back = sx.read_preproc_image(path)
    np.testing.assert_array_equal(back["image"], image)
    np.testing.assert_array_equal(back["mask"], mask)
    assert back["ivar"][1, 2] == 0 and back["ivar"][0, 0] == 0.5  # ivar 0 where masked
    assert back["camera"] == "r0"


def test_extract_frame_as_ex2d(psf, tmp_path):
    """gpu_specter's extract_frame on a whole-CCD preprocessed image written to disk: the frame
    and the model image are written, and the extraction is ex2d's on the image read back."""
    image, ivar = sx.simulate_image(psf, WIDE, np.full((NSPEC, WIDE.size), 500.0), seed=1)
    pre = tmp_path / "preproc.fits"
    sx.write_preproc_image(pre, image, ivar, camera="r0")
    back = sx.read_preproc_image(pre)
    assert back["image"].shape == (psf.npix_y, psf.npix_x)
    out = sx.extract_frame(pre, R0, tmp_path / "frame.fits", tmp_path / "model.fits",
                           wavelength=(WAVE[0], WAVE[-1], DW), specmin=0, nspec=NSPEC,
                           bundlesize=NSPEC, nsubbundles=2)
    assert (tmp_path / "frame.fits").exists() and (tmp_path / "model.fits").exists()
    np.testing.assert_allclose(out["wavelength"], WAVE, rtol=0, atol=1e-9)
    assert out["modelimage"].shape == (psf.npix_y, psf.npix_x)
    ref = sx.ex2d(back["image"], back["ivar"], psf, 0, NSPEC, out["wavelength"],
                  bundlesize=NSPEC, nsubbundles=2, full_output=True)
    for key in ("flux", "ivar", "resolution_data", "chi2pix"):
        np.testing.assert_allclose(out[key], ref[key], rtol=1e-12, atol=1e-12, err_msg=key)
    with raises(ValueError, "image_path"):
        sx.extract_frame(tmp_path / "none.fits", R0, tmp_path / "f.fits",
                         wavelength=(WAVE[0], WAVE[-1], DW), nspec=NSPEC, bundlesize=NSPEC)
    with raises(ValueError, "wavelength"):
        sx.extract_frame(pre, R0, tmp_path / "f.fits", wavelength=(6000.0, 5000.0, DW),
                         nspec=NSPEC, bundlesize=NSPEC)
    with raises(ValueError, "nwavestep"):
        sx.extract_frame(pre, R0, tmp_path / "f.fits", wavelength=(WAVE[0], WAVE[-1], DW),
                         nspec=NSPEC, bundlesize=NSPEC, nsubbundles=2, nwavestep=0)
    with raises(TypeError, "wavelength"):
        sx.extract_frame(pre, R0, tmp_path / "f.fits")


# ---- bad input ----

def _ex2d(psf, frame, **changes):
    kw = dict(image=frame["image"], imageivar=frame["ivar"], psf=psf, specmin=0, nspec=NSPEC,
              wavelengths=WAVE, xyrange=frame["xyrange"], bundlesize=NSPEC)
    kw.update(changes)
    return sx.ex2d(**kw)


@pytest.mark.parametrize("changes, exception, argument", [
    (dict(nspec=7), ValueError, "nspec"),                      # not a multiple of bundlesize
    (dict(bundlesize=NSPEC, nsubbundles=3), ValueError, "bundlesize"),  # not a multiple of it
    (dict(specmin=495), ValueError, "specmin"),                # beyond the PSF's 500 fibres
    (dict(specmin=-1), ValueError, "specmin"),
    (dict(nspec=0), ValueError, "nspec"),
    (dict(nspec=2.0), TypeError, "nspec"),
    (dict(wavelengths=WAVE - 1000), ValueError, "wavelengths"),  # outside the PSF
    (dict(wavelengths=WAVE[::-1]), ValueError, "wavelengths"),   # decreasing
    (dict(wavelengths=np.r_[WAVE[:50], WAVE[50:] + 0.3]), ValueError, "wavelengths"),  # not linear
    (dict(wavelengths=WAVE[:1]), ValueError, "wavelengths"),
    (dict(wavelengths=np.r_[WAVE[:-1], np.nan]), ValueError, "wavelengths"),
    (dict(wavelengths=np.zeros((2, 3))), ValueError, "wavelengths"),
    (dict(wavelengths=None), TypeError, "wavelengths"),
    (dict(regularize=-1.0), ValueError, "regularize"),
    (dict(regularize="a"), TypeError, "regularize"),
    (dict(psferr=np.nan), ValueError, "psferr"),
    (dict(wavesize=0), ValueError, "wavesize"),
    (dict(nparallel=0), ValueError, "nparallel"),
    (dict(device="gpu"), ValueError, "device"),
    (dict(ndecorr=1), TypeError, "ndecorr"),
    (dict(xyrange=(0, 10, 0, 10)), ValueError, "xyrange"),     # not the image's shape
    (dict(xyrange=(0, 10, 0)), ValueError, "xyrange"),
    (dict(xyrange=None), ValueError, "image"),                 # a cut-out is not the whole CCD
    (dict(psf=42), TypeError, "psf"),
    (dict(comm=3), TypeError, "comm"),                         # not an mpi4py communicator
    (dict(result_layout="everywhere"), ValueError, "result_layout"),
])
def test_ex2d_bad_input(psf, frame, changes, exception, argument):
    with raises(exception, argument):
        _ex2d(psf, frame, **changes)


def test_ex2d_bad_images(psf, frame):
    image, ivar = frame["image"], frame["ivar"]
    with raises(ValueError, "imageivar"):  # shapes differ
        _ex2d(psf, frame, imageivar=ivar[:-1])
    with raises(ValueError, "image"):  # not 2-D
        _ex2d(psf, frame, image=image.ravel(), imageivar=ivar.ravel())
    with raises(TypeError, "image"):
        _ex2d(psf, frame, image=image.astype(complex))
    bad = image.copy()
    bad[3, 4] = np.nan
    with raises(ValueError, "image"):
        _ex2d(psf, frame, image=bad)
    bad = ivar.copy()
    bad[5, 6] = -1.0
    with raises(ValueError, "imageivar"):
        _ex2d(psf, frame, imageivar=bad)
    bad = ivar.copy()
    bad[5, 6] = -1.0
    with raises(ValueError, "ivar"):  # ex2d_patch calls it ivar, as specter
        sx.ex2d_patch(image, bad, psf, 0, 2, WAVE[:10], xyrange=frame["xyrange"])


def test_psf_bad_input(psf, tmp_path):
    not_fits = tmp_path / "psf.fits"
    not_fits.write_text("not a FITS file")
    with pytest.raises(ValueError, match=re.escape(str(not_fits))):
        sx.load_psf(not_fits)
    with pytest.raises((ValueError, RuntimeError), match=re.escape(str(tmp_path / "none.fits"))):
        sx.load_psf(tmp_path / "none.fits")
    with raises(TypeError, "path"):
        sx.load_psf(3)
    with raises(ValueError, "ispec"):
        psf.x(500, 6000.0)
    with raises(ValueError, "ispec"):
        psf.x([0, 600], 6000.0)
    with raises(TypeError, "ispec"):
        psf.xypix(1.5, 6000.0)
    with raises(ValueError, "wavelength"):
        psf.x(0, np.zeros((2, 2)))
    with raises(ValueError, "spec_range"):
        psf.xyrange((3, 600), (6000.0, 6010.0))
    with raises(ValueError, "phot"):
        psf.project(WAVE, np.ones((2, 5)))
    with raises(ValueError, "phot"):
        psf.project(WAVE, np.ones((1, 1, 2, WAVE.size)))
    with raises(ValueError, "specmin"):
        psf.project(WAVE, np.ones((2, WAVE.size)), specmin=500)
    with raises(ValueError, "wavelengths"):  # decreasing: a negative step
        sx.resolution_ndiag(psf, 0, NSPEC, WAVE[::-1])
    with raises(ValueError, "path"):  # a PSF is not a preprocessed image
        sx.read_preproc_image(R0)
    with raises(ValueError, "read_noise"):
        sx.simulate_image(psf, WAVE, np.ones((1, WAVE.size)), read_noise=-1.0)
    with raises(ValueError, "phot"):
        sx.simulate_image(psf, WAVE, -np.ones((1, WAVE.size)))


# ---- Ctrl-C ----

def test_interrupt_stops_a_long_extraction(psf):
    """ex2d stops between bundles: 200 fibres in bundles of 5 over 1200 wavelengths take seconds
    (40 bundles, one timed first); interrupt_main from a timer 0.3 s into the call raises
    KeyboardInterrupt well before the end, and a call afterwards still works."""
    nspec = 200
    w = 6000.0 + DW * np.arange(1200)
    r = psf.xyrange((0, nspec), (w[0] - 30, w[-1] + 30))
    ny, nx = r[3] - r[2], r[1] - r[0]
    image = np.zeros((ny, nx))
    ivar = np.full((ny, nx), 1.0 / 9.0)
    start = time.monotonic()
    first = sx.ex2d(image, ivar, psf, 0, 5, w, xyrange=r, bundlesize=5, device="cpu")
    whole = (time.monotonic() - start) * nspec / 5
    assert whole > 1.0, whole  # the interrupt lands inside the call
    timer = threading.Timer(0.3, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        try:
            sx.ex2d(image, ivar, psf, 0, nspec, w, xyrange=r, bundlesize=5, device="cpu")
        finally:
            took = time.monotonic() - start - 0.3
            timer.join()
    print(f"\nspecex ex2d: KeyboardInterrupt {took:.3f} s after interrupt_main "
          f"(the whole call: about {whole:.1f} s)")
    assert took < min(3.0, whole / 2)
    again = sx.ex2d(image, ivar, psf, 0, 5, w, xyrange=r, bundlesize=5, device="cpu")
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


def test_psf_parameters_by_name(psf):
    """psf.param(name, ispec, wavelength): specter's psf.coeff[name].eval(ispec, wavelength); the
    spot's sigma along x is GHSIGX (the r0 spots are close to Gaussian)."""
    sig = psf.param("GHSIGX", 7, 6500.0)
    assert 0.5 < sig < 2.0
    many = psf.param("GH-0-0", 3, np.array([6000.0, 7000.0]))
    assert many.shape == (2,)
    xs, ys, pix = psf.xypix(7, 6500.0)
    col = pix.sum(axis=0)
    x = np.arange(xs.start, xs.stop)
    mean = (col * x).sum() / col.sum()
    width = np.sqrt((col * (x - mean) ** 2).sum() / col.sum())
    assert abs(width - np.sqrt(sig**2 + 1 / 12)) < 0.3  # pixel integration adds 1/12
    with pytest.raises(ValueError, match="name"):
        psf.param("SIGMA", 0, 6500.0)
    with pytest.raises(TypeError, match="name"):
        psf.param(3, 0, 6500.0)


# ---- MPI ----

def test_ex2d_on_a_communicator_of_one_rank_is_the_one_process_result(psf, noisy, tmp_path):
    """comm= takes an mpi4py communicator (its Fortran handle goes to the library): on this one
    process the result is the same bits in both layouts; tests/mpi runs 2 and 3 ranks."""
    MPI = pytest.importorskip("mpi4py.MPI")
    if not sciproxy.info().get("mpi_compiled", True):
        pytest.skip("sciproxy built without MPI")
    kw = dict(image=noisy["image"], imageivar=noisy["ivar"], psf=psf, specmin=0, nspec=NSPEC,
              wavelengths=WAVE, xyrange=noisy["xyrange"], bundlesize=5, full_output=True)
    one = sx.ex2d(**kw)
    for layout in ("root", "all_ranks"):
        got = sx.ex2d(comm=MPI.COMM_WORLD, result_layout=layout, **kw)
        for key in ("flux", "ivar", "resolution_data", "chi2pix", "pixmask_fraction",
                    "modelimage"):
            assert np.array_equal(got[key], one[key]), (layout, key)


def test_ex2d_on_two_ranks_under_mpirun():
    """Two ranks under Open MPI's mpirun (specex_on_ranks.py): the one-process bits in both
    layouts, None on rank 1 with the result on rank 0, a differing image failing on both."""
    pytest.importorskip("mpi4py.MPI")
    import shutil
    import subprocess
    import sys
    if not sciproxy.info().get("mpi_compiled", True):
        pytest.skip("sciproxy built without MPI")
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("no mpirun")
    version = subprocess.run([mpirun, "--version"], capture_output=True, text=True).stdout
    if "Open MPI" not in version and "OpenRTE" not in version:
        pytest.skip("the flags below are Open MPI's")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    script = Path(__file__).with_name("specex_on_ranks.py")
    run = subprocess.run([mpirun, "-n", "2", "--oversubscribe", "--mca", "btl", "self,vader",
                          sys.executable, str(script), str(R0)],
                         capture_output=True, text=True, env=env, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = sorted(line for line in run.stdout.splitlines() if line.strip())
    assert lines == ["0 OK", "1 OK"], run.stdout + run.stderr
