"""The frame files sciproxy writes, read by the FITS libraries DESI's tools use (astropy.io.fits
and fitsio): HDU names, types, shapes, units, the values extract_frame returned, the mask bits,
and the preprocessed image read back."""

import os

import numpy as np
import pytest

from sciproxy import specex

astropy_fits = pytest.importorskip("astropy.io.fits", reason="scripts/setup.sh installs astropy")
fitsio = pytest.importorskip("fitsio", reason="scripts/setup.sh installs fitsio")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PSF = os.path.join(REPO, "tests", "data", "specex", "psf-r0-00067784.fits")
NSPEC, W = 10, (6000.0, 6039.2, 0.8)


@pytest.fixture(scope="module")
def frame(tmp_path_factory):
    """A preprocessed CCD image with 10 simulated spectra (the rest of the CCD blank, read noise
    only), its extraction written by extract_frame."""
    folder = tmp_path_factory.mktemp("specex_files")
    psf = specex.load_psf(PSF)
    wide = specex.wavelength_grid(W[0] - 20, W[1] + 20, W[2])
    phot = np.full((NSPEC, wide.size), 400.0)
    xyrange = psf.xyrange((0, NSPEC), (wide[0], wide[-1]))
    cut, cut_ivar = specex.simulate_image(psf, wide, phot, 0, xyrange, seed=3)
    image = np.zeros((psf.npix_y, psf.npix_x), dtype=np.float32)
    ivar = np.full(image.shape, 1 / 9.0, dtype=np.float32)
    xmin, xmax, ymin, ymax = xyrange
    image[ymin:ymax, xmin:xmax] = cut
    ivar[ymin:ymax, xmin:xmax] = cut_ivar
    mask = np.zeros(image.shape, dtype=np.int16)
    mask[ymin + 5, xmin:xmax] = 1  # a bad row: ivar 0 on reading
    preproc = str(folder / "preproc.fits")
    specex.write_preproc_image(preproc, image, ivar, mask, camera="r0")
    out_path = str(folder / "frame.fits")
    out = specex.extract_frame(preproc, PSF, out_path, wavelength=W, specmin=0, nspec=NSPEC,
                               bundlesize=5, nsubbundles=1, device="cpu")
    return dict(preproc=preproc, path=out_path, out=out, folder=folder)


def test_astropy_reads_the_frame(frame):
    out = frame["out"]
    with astropy_fits.open(frame["path"]) as f:
        names = [h.name for h in f]
        for name in ("FLUX", "IVAR", "MASK", "WAVELENGTH", "RESOLUTION", "CHI2PIX"):
            assert name in names, names
        assert f["FLUX"].header["BUNIT"].lower().startswith("electron/angstrom")
        assert f["FLUX"].data.dtype.kind == "f" and f["FLUX"].data.shape == out["flux"].shape
        np.testing.assert_allclose(f["FLUX"].data, out["flux"], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(f["IVAR"].data, out["ivar"], rtol=1e-6)
        np.testing.assert_array_equal(f["WAVELENGTH"].data, out["wavelength"])
        assert f["WAVELENGTH"].data.dtype == np.dtype(">f8")
        assert f["RESOLUTION"].data.shape == out["resolution_data"].shape
        np.testing.assert_allclose(f["RESOLUTION"].data, out["resolution_data"], rtol=1e-6,
                                   atol=1e-7)
        np.testing.assert_allclose(f["CHI2PIX"].data, out["chi2pix"], rtol=1e-6, atol=1e-7)
        mask = f["MASK"].data
        assert mask.shape == out["flux"].shape and mask.dtype.kind in "iu"
        # desispec's specmask: bits set where ivar is 0 (SOMEBADPIX/ALLBADPIX), 0 elsewhere
        assert np.all(mask[out["ivar"] > 0] & 0b11 == 0) or np.any(mask != 0)


def test_fitsio_reads_the_frame(frame):
    out = frame["out"]
    with fitsio.FITS(frame["path"]) as f:
        flux = f["FLUX"].read()
        np.testing.assert_allclose(flux, out["flux"], rtol=1e-6, atol=1e-6)
        assert f["RESOLUTION"].read().shape == out["resolution_data"].shape
        np.testing.assert_array_equal(f["WAVELENGTH"].read(), out["wavelength"])


def test_preprocessed_image_round_trip(frame):
    back = specex.read_preproc_image(frame["preproc"])
    assert back["camera"] == "r0"
    # ivar is 0 where the mask is set, as DESI's readers do
    masked = back["mask"] != 0
    assert masked.any() and np.all(back["ivar"][masked] == 0)
    with astropy_fits.open(frame["preproc"]) as f:
        assert f["IMAGE"].data.shape == back["image"].shape
        np.testing.assert_array_equal(f["IMAGE"].data.astype(np.float64), back["image"])


def test_no_temporary_files_left(frame):
    leftovers = [p for p in os.listdir(frame["folder"]) if ".tmp" in p]
    assert not leftovers, leftovers


def _broken_psf(tmp_path, name, edit):
    """A copy of the r0 PSF changed by edit(hdul), written to tmp_path / name."""
    path = str(tmp_path / name)
    with astropy_fits.open(PSF) as f:
        hdul = astropy_fits.HDUList([h.copy() for h in f])
    edit(hdul)
    hdul.writeto(path)
    return path


def _drop_ytrace(hdul):
    del hdul["YTRACE"]


def _nan_coefficient(hdul):
    hdul["PSF"].data["COEFF"][3][0, 1] = np.nan


def _wrong_degree(hdul):
    hdul["PSF"].header["GHDEGX"] = 9  # the table has GH-i-j up to 6


def _wrong_type(hdul):
    hdul[0].header["PSFTYPE"] = "SPOTGRID"


@pytest.mark.parametrize("edit, words", [
    (_drop_ytrace, ["YTRACE"]),
    (_nan_coefficient, ["non-finite", "parameter"]),
    (_wrong_degree, ["GH-7-0", "GHDEGX"]),
    (_wrong_type, ["PSFTYPE", "SPOTGRID"]),
], ids=["missing HDU", "NaN coefficient", "wrong degree", "wrong type"])
def test_a_broken_psf_file_is_refused_naming_file_and_fault(tmp_path, edit, words):
    path = _broken_psf(tmp_path, "broken.fits", edit)
    with pytest.raises(ValueError) as info:
        specex.load_psf(path)
    message = str(info.value)
    assert "broken.fits" in message, message
    for word in words:
        assert word in message, message
