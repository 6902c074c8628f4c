"""sciproxy.specex: spectroperfectionism extraction of DESI spectra (Bolton & Schlegel 2010), a
drop-in for specter's PSF and ex2d and for gpu_specter's extract_frame::

    import sciproxy.specex as sx
    psf = sx.load_psf("psf-r0-00067784.fits")          # DESI Gauss-Hermite PSF (PSFVER 2 or 3)
    x, y = psf.xy(0, 6000.0); xslice, yslice, pix = psf.xypix(0, 6000.0)
    wave = np.arange(6000.0, 6080.0, 0.8)
    image, ivar = sx.simulate_image(psf, wave, phot, specmin=0)
    flux, ivar, rdata = sx.ex2d(image, ivar, psf, 0, 10, wave, bundlesize=10)
    out = sx.ex2d(image, ivar, psf, 0, 10, wave, bundlesize=10, full_output=True)
    out["chi2pix"], out["modelimage"]

Shapes and conventions are specter's: images [ny, nx] (rows are y, the dispersion), spectra
[nspec, nwave], the resolution data [nspec, 2 ndiag + 1, nwave] with
Rdata[i, k, j] = R_i[j - ndiag + k, j] (desispec's Resolution), xyrange (xmin, xmax, ymin, ymax)
half-open pixel ranges, fluxes from ex2d in electrons per Angstrom. Everything is float64.

Bad input raises ValueError (a value or shape), TypeError (a type or dtype) or RuntimeError (a
backend not built, a device absent, a file that cannot be written), with a message naming the
argument as this module calls it.
"""

from __future__ import annotations

import numbers
import os
import re

import numpy as np

from . import _args, _sciproxy
from ._args import as_array as _as_array
from ._args import boolean as _bool
from ._args import describe as _describe
from ._args import device as _device
from ._args import integer as _integer
from ._args import nparallel as _nparallel
from ._args import real as _real

__all__ = ["Psf", "load_psf", "resolution_ndiag", "ex2d", "ex2d_patch", "ex2d_patches",
           "simulate_image", "read_preproc_image", "write_preproc_image", "extract_frame",
           "wavelength_grid"]


# ---- helpers ----

def _renamed(error: Exception, names: dict) -> Exception:
    """The library's error with its leading argument name replaced by this API's name."""
    message = str(error)
    for theirs, ours in names.items():
        if re.match(rf"{re.escape(theirs)}(\W|$)", message):
            message = ours + message[len(theirs):]
            break
    else:
        return error
    new = type(error)(message)
    new.__cause__ = None
    return new


def _call(names: dict, function, *args):
    """function(*args), with the library's argument names in errors changed to ours."""
    try:
        return function(*args)
    except (ValueError, TypeError, RuntimeError) as error:
        renamed = _renamed(error, names)
        if renamed is error:
            raise
        raise renamed from None


def _path(name: str, value) -> str:
    if isinstance(value, (str, os.PathLike)) and not isinstance(value, bytes):
        return os.fspath(value)
    raise TypeError(f"{name}: expected a path (str or os.PathLike), got {_describe(value)}")


def _int32(name: str, value, lo: int = 0) -> int:
    return _integer(name, value, lo, _args.INT32_MAX)


def _wavelengths(name: str, value, *, at_least: int = 1) -> np.ndarray:
    """A 1-D float64 C-contiguous array of finite wavelengths."""
    if value is None:
        raise TypeError(f"{name}: expected a 1-D array of wavelengths (Angstrom), got None")
    w = _args.real_array(name, value, np.float64)
    if w.ndim == 0:
        w = w.reshape(1)
    if w.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array of wavelengths, got {_describe(w)}")
    if w.size < at_least:
        raise ValueError(f"{name}: expected at least {at_least} wavelength"
                         f"{'s' if at_least > 1 else ''}, got {w.size}")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name}: expected finite wavelengths, got NaN or infinity at index "
                         f"{int(np.flatnonzero(~np.isfinite(w))[0])}")
    return w


def _xyrange(value, name: str = "xyrange"):
    """None, or (xmin, xmax, ymin, ymax) as Python ints."""
    if value is None:
        return None
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{name}: expected (xmin, xmax, ymin, ymax), got {_describe(value)}") \
            from None
    if len(items) != 4:
        raise ValueError(f"{name}: expected 4 integers (xmin, xmax, ymin, ymax), "
                         f"got {len(items)} values")
    xmin, xmax, ymin, ymax = (_integer(f"{name}[{i}]", v, _args.INT64_MIN)
                              for i, v in enumerate(items))
    if xmax < xmin or ymax < ymin:
        raise ValueError(f"{name}: expected xmin <= xmax and ymin <= ymax, "
                         f"got ({xmin}, {xmax}, {ymin}, {ymax})")
    return (xmin, xmax, ymin, ymax)


def _image(name: str, value) -> np.ndarray:
    """A 2-D float32 or float64 image, as a float64 C-contiguous array (one conversion)."""
    a = _as_array(name, value)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name}: expected a float32 or float64 array, got {_describe(a)}")
    if a.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D image [ny, nx], got {_describe(a)}")
    return np.ascontiguousarray(a, dtype=np.float64)


def _image_pair(image, ivar, image_name: str, ivar_name: str):
    image = _image(image_name, image)
    ivar = _image(ivar_name, ivar)
    if ivar.shape != image.shape:
        raise ValueError(f"{ivar_name}: expected the shape of {image_name} {image.shape}, "
                         f"got {ivar.shape}")
    return image, ivar


# ---- the PSF ----

class Psf:
    """A DESI Gauss-Hermite PSF (specter's GaussHermitePSF): traces, wavelengths and spots.

    Load with ``load_psf(path)``. Methods and properties are specter's, evaluated by the C++
    library (float64); the object is immutable and cheap to share between threads."""

    def __init__(self, handle):
        if not isinstance(handle, _sciproxy.SpecexPsf):
            raise TypeError(f"handle: expected a loaded PSF (use sciproxy.specex.load_psf(path)), "
                            f"got {_describe(handle)}")
        self._psf = handle
        m = handle.model()
        self._model = m
        self._wmin_spec = np.asarray(m["wmin_spec"], dtype=np.float64)
        self._wmax_spec = np.asarray(m["wmax_spec"], dtype=np.float64)
        self._wmin_spec.flags.writeable = False
        self._wmax_spec.flags.writeable = False

    # Plain properties (specter's attributes).
    path = property(lambda self: self._model["path"], doc="the file it was read from")
    version = property(lambda self: self._model["version"], doc="PSFVER: 2 or 3")
    npix_x = property(lambda self: int(self._model["npix_x"]), doc="CCD columns")
    npix_y = property(lambda self: int(self._model["npix_y"]), doc="CCD rows")
    nspec = property(lambda self: int(self._model["nspec"]), doc="fibres (FIBERMAX-FIBERMIN+1)")
    hsizex = property(lambda self: int(self._model["hsizex"]), doc="spot half width (columns)")
    hsizey = property(lambda self: int(self._model["hsizey"]), doc="spot half height (rows)")
    ghdegx = property(lambda self: int(self._model["ghdegx"]))
    ghdegy = property(lambda self: int(self._model["ghdegy"]))
    psferr = property(lambda self: float(self._model["psferr"]),
                      doc="header PSFERR, else 0.01 (as specter)")
    wmin = property(lambda self: float(self._model["wmin"]),
                    doc="minimum wavelength seen by any spectrum")
    wmax = property(lambda self: float(self._model["wmax"]),
                    doc="maximum wavelength seen by any spectrum")
    wmin_all = property(lambda self: float(self._model["wmin_all"]),
                        doc="minimum wavelength seen by all spectra")
    wmax_all = property(lambda self: float(self._model["wmax_all"]),
                        doc="maximum wavelength seen by all spectra")
    wmin_spec = property(lambda self: self._wmin_spec,
                         doc="per fibre: the wavelength at row -0.5 (read-only)")
    wmax_spec = property(lambda self: self._wmax_spec,
                         doc="per fibre: the wavelength at row npix_y - 0.5 (read-only)")

    def __repr__(self):
        return (f"<sciproxy.specex.Psf {self.path!r}: {self.nspec} fibres, "
                f"{self.npix_y} x {self.npix_x} pixels, {self.wmin:.2f}-{self.wmax:.2f} A>")

    # -- arguments --

    def _ispec(self, value, name: str = "ispec") -> int:
        return _integer(name, value, 0, self.nspec - 1,
                        f"a fibre index in [0, {self.nspec - 1}]")

    def _ispecs(self, value, name: str = "ispec"):
        """(int32 array of fibres, scalar?) from None (every fibre), an int or a sequence."""
        if value is None:
            return np.arange(self.nspec, dtype=np.int32), False
        if isinstance(value, numbers.Integral) and not _args.is_bool(value):
            return np.array([self._ispec(value, name)], dtype=np.int32), True
        a = _as_array(name, value)
        if a.ndim == 0:
            return np.array([self._ispec(a.item(), name)], dtype=np.int32), True
        if a.dtype.kind not in "iu" or a.ndim != 1:
            raise TypeError(f"{name}: expected None, a fibre index or a 1-D array of them, "
                            f"got {_describe(a)}")
        if a.size and (a.min() < 0 or a.max() >= self.nspec):
            raise ValueError(f"{name}: expected fibre indices in [0, {self.nspec - 1}], "
                             f"got values in [{int(a.min())}, {int(a.max())}]")
        return np.ascontiguousarray(a, dtype=np.int32), False

    @staticmethod
    def _values(name: str, value):
        """(1-D float64 array, scalar?) from a number or a 1-D array."""
        if value is None:
            raise TypeError(f"{name}: expected a number or a 1-D array, got None")
        scalar = np.ndim(value) == 0
        a = _args.real_array(name, value, np.float64)  # (at least 1-D)
        if a.ndim > 1:
            raise ValueError(f"{name}: expected a number or a 1-D array, got {_describe(a)}")
        return np.ascontiguousarray(a.reshape(1, -1)), scalar

    def _eval(self, what: str, ispec, values, values_name: str):
        specs, scalar_spec = self._ispecs(ispec)
        vals, scalar_val = self._values(values_name, values)
        out = self._psf.eval(what, specs, vals)
        if scalar_spec and scalar_val:
            return float(out[0, 0])
        if scalar_spec:
            return out[0]
        if scalar_val:
            return out[:, 0]
        return out

    # -- traces and wavelengths --

    def wavelength(self, ispec=None, y=None):
        """The wavelength of fibre(s) ``ispec`` at row(s) ``y`` (specter's approximate inverse of
        y(lambda)). ispec None: every fibre; y None: every row 0 .. npix_y - 1."""
        if y is None:
            y = np.arange(self.npix_y, dtype=np.float64)
        return self._eval("wavelength", ispec, y, "y")

    def _along_rows(self, what: str, ispec):
        """x or y of fibre(s) at the wavelength of every row (specter's wavelength=None)."""
        specs, scalar_spec = self._ispecs(ispec)
        rows = np.arange(self.npix_y, dtype=np.float64).reshape(1, -1)
        w = np.ascontiguousarray(self._psf.eval("wavelength", specs, rows))
        out = self._psf.eval(what, specs, w)
        return out[0] if scalar_spec else out

    def x(self, ispec=None, wavelength=None):
        """CCD column of the trace centre. Shapes as specter: ispec None (every fibre), an int or
        an array; wavelength None (each fibre's wavelength at every row), a number or an array."""
        if wavelength is None:
            return self._along_rows("x", ispec)
        return self._eval("x", ispec, wavelength, "wavelength")

    def y(self, ispec=None, wavelength=None):
        """CCD row of the trace centre; ``wavelength`` is required (as specter)."""
        if wavelength is None:
            raise ValueError("wavelength: expected a number or a 1-D array (PSF.y needs the "
                             "wavelengths), got None")
        return self._eval("y", ispec, wavelength, "wavelength")

    def xy(self, ispec=None, wavelength=None):
        """(x, y) in one call."""
        return self.x(ispec, wavelength), self.y(ispec, wavelength)

    def wdisp(self, ispec, wavelength):
        """Gaussian sigma of the spot along the dispersion, in Angstroms (specter's wdisp)."""
        return self._eval("wdisp", self._ispec(ispec), wavelength, "wavelength")

    def param(self, name, ispec, wavelength):
        """Any spot parameter by its name in the PSF file (GHSIGX, GHSIGY, GH-i-j, TAILAMP,
        TAILCORE, TAILXSCA, TAILYSCA, TAILINDE) of fibre(s) ``ispec`` at ``wavelength``: specter's
        ``psf.coeff[name].eval(ispec, wavelength)``. TAIL* are 0 for a PSF without a tail."""
        if not isinstance(name, str):
            raise TypeError(f"name: expected a parameter name such as 'GHSIGX', got "
                            f"{_describe(name)}")
        return self._eval("param:" + name, ispec, wavelength, "wavelength")

    # -- spots --

    def xypix(self, ispec, wavelength, xmin=0, xmax=None, ymin=0, ymax=None):
        """(xslice, yslice, pix[ny, nx]) such that image[yslice, xslice] += phot * pix adds the
        spot of fibre ``ispec`` at ``wavelength`` to an image covering columns [xmin, xmax) and
        rows [ymin, ymax) (default: the CCD); slices relative to (xmin, ymin). Off the image:
        specter's empty (0, 0) array and its slices."""
        ispec = self._ispec(ispec)
        w = _real("wavelength", wavelength)
        xmin = _integer("xmin", xmin, _args.INT64_MIN)
        ymin = _integer("ymin", ymin, _args.INT64_MIN)
        xmax = self.npix_x if xmax is None else _integer("xmax", xmax, _args.INT64_MIN)
        ymax = self.npix_y if ymax is None else _integer("ymax", ymax, _args.INT64_MIN)
        # The library clips as specter's xypix and keeps its slices' positions when the spot is
        # off the image (absolute, as specter's: slice(ymax, ymax) past the last row).
        xstart, ystart, nx, ny, pix = self._psf.spot(ispec, w, (xmin, xmax, ymin, ymax))
        xslice = slice(int(xstart), int(xstart) + int(nx))
        yslice = slice(int(ystart), int(ystart) + int(ny))
        if nx == 0 or ny == 0:
            return xslice, yslice, np.zeros((0, 0))
        return xslice, yslice, pix

    def pix(self, ispec, wavelength):
        """The spot's pixels, pix[ny, nx] (xypix's third value)."""
        return self.xypix(ispec, wavelength)[2]

    # -- ranges and projection --

    def _spec_range(self, value, name: str = "spec_range"):
        if isinstance(value, numbers.Integral) and not _args.is_bool(value):
            lo = self._ispec(value, name)
            return lo, lo + 1
        try:
            items = list(value)
        except TypeError:
            raise TypeError(f"{name}: expected a fibre index or (specmin, specmax), "
                            f"got {_describe(value)}") from None
        if len(items) != 2:
            raise ValueError(f"{name}: expected a fibre index or (specmin, specmax), "
                             f"got {len(items)} values")
        lo = _integer(f"{name}[0]", items[0], 0, self.nspec - 1,
                      f"a fibre index in [0, {self.nspec - 1}]")
        hi = _integer(f"{name}[1]", items[1], lo + 1, self.nspec,
                      f"an end in [{lo + 1}, {self.nspec}] (specmin < specmax <= nspec)")
        return lo, hi

    def xyrange(self, spec_range, wavelengths):
        """(xmin, xmax, ymin, ymax): the pixels covering fibres ``spec_range`` (an index or
        (specmin, specmax)) between the first and last of ``wavelengths`` (a number, a pair or a
        sorted array), as specter's xyrange."""
        lo, hi = self._spec_range(spec_range)
        if isinstance(wavelengths, numbers.Real) and not _args.is_bool(wavelengths):
            wavemin = wavemax = _real("wavelengths", wavelengths)
        else:
            w = _wavelengths("wavelengths", wavelengths)
            wavemin, wavemax = float(w[0]), float(w[-1])
        r = _call({}, self._psf.xyrange, lo, hi, wavemin, wavemax)
        return tuple(int(v) for v in r)

    def projection_matrix(self, spec_range, wavelengths, xyrange):
        """Dense A [npix, nspec * nwave] (pixels of xyrange row-major; columns fibre-major):
        image = (A @ phot.ravel()).reshape(ny, nx). specter returns the same matrix as a scipy
        CSR matrix: scipy.sparse.csr_matrix(A) gives that."""
        lo, hi = self._spec_range(spec_range)
        w = _wavelengths("wavelengths", wavelengths)
        r = _xyrange(xyrange)
        if r is None:
            raise TypeError("xyrange: expected (xmin, xmax, ymin, ymax), got None")
        return _call({}, self._psf.projection_matrix, lo, hi, w, r)

    def project(self, wavelength, phot, specmin=0, xyrange=None, nparallel=None):
        """Spectra on the CCD (specter's PSF.project): phot[nwave], phot[nspec, nwave] or
        phot[nimage, nspec, nwave] photons per bin; wavelength[nwave] shared by every spectrum,
        or wavelength[nspec, nwave]. Returns image[ny, nx] (or [nimage, ny, nx] for 3-D phot)
        covering xyrange (default: the CCD)."""
        specmin = _integer("specmin", specmin, _args.INT32_MIN, _args.INT32_MAX)
        r = _xyrange(xyrange)
        threads = _nparallel(nparallel)
        w = _args.real_array("wavelength", wavelength, np.float64)
        p = _args.real_array("phot", phot, np.float64)
        if w.ndim not in (1, 2):
            raise ValueError(f"wavelength: expected wavelength[nwave] or wavelength[nspec, nwave]"
                             f", got {_describe(w)}")
        if p.ndim not in (1, 2, 3):
            raise ValueError(f"phot: expected phot[nwave], phot[nspec, nwave] or "
                             f"phot[nimage, nspec, nwave], got {_describe(p)}")
        if p.shape[-1] != w.shape[-1]:
            raise ValueError(f"phot: expected {w.shape[-1]} values along the last axis (one per "
                             f"wavelength), got {_describe(p)}")
        single = p.ndim < 3
        p3 = p.reshape((1,) * (3 - p.ndim) + p.shape)
        nspec = p3.shape[1]
        if w.ndim == 2 and w.shape[0] != nspec:
            raise ValueError(f"wavelength: expected one row per spectrum of phot ({nspec}), "
                             f"got {_describe(w)}")
        images = []
        for k in range(p3.shape[0]):
            if w.ndim == 1:
                images.append(_call({"wavelengths": "wavelength"}, _sciproxy.specex_project,
                                    self._psf, np.ascontiguousarray(w),
                                    np.ascontiguousarray(p3[k]), specmin, r, threads))
            else:  # a wavelength grid per spectrum: one spectrum at a time
                total = None
                for i in range(nspec):
                    one = _call({"wavelengths": f"wavelength[{i}]", "phot": f"phot[{i}]"},
                                _sciproxy.specex_project, self._psf,
                                np.ascontiguousarray(w[i]),
                                np.ascontiguousarray(p3[k, i:i + 1]), specmin + i, r, threads)
                    total = one if total is None else total + one
                images.append(total)
        return images[0] if single else np.stack(images)


def load_psf(path) -> Psf:
    """Reads a DESI Gauss-Hermite PSF FITS file (PSFVER 2 or 3). ValueError naming the file and
    what is wrong when it is not one."""
    handle = _call({}, _sciproxy.SpecexPsf.load, _path("path", path))
    return Psf(handle)


def _as_psf(value, name: str = "psf") -> Psf:
    if isinstance(value, Psf):
        return value
    if isinstance(value, (str, os.PathLike)) and not isinstance(value, bytes):
        return load_psf(value)
    raise TypeError(f"{name}: expected a sciproxy.specex.Psf or the path of a PSF file, "
                    f"got {_describe(value)}")


# ---- extraction ----

def _fibres(specmin, nspec):
    """Python integers for the library, which checks them against the PSF and the bundles."""
    return (_integer("specmin", specmin, _args.INT32_MIN, _args.INT32_MAX),
            _integer("nspec", nspec, _args.INT32_MIN, _args.INT32_MAX))


def resolution_ndiag(psf, specmin, nspec, wavelengths) -> int:
    """specter's ndiag for these fibres and this wavelength step: the resolution data of ex2d
    has 2 ndiag + 1 diagonals."""
    psf = _as_psf(psf)
    specmin, nspec = _fibres(specmin, nspec)
    w = _wavelengths("wavelengths", wavelengths, at_least=2)
    return int(_call({"dw": "wavelengths"}, _sciproxy.specex_resolution_ndiag, psf._psf,
                     specmin, nspec, float(w[1] - w[0])))


def _int(name: str, value) -> int:
    return _integer(name, value, _args.INT32_MIN, _args.INT32_MAX)


_RESULT_LAYOUTS = {"all_ranks": 0, "root": 1}  # the library's ResultLayout


def _result_layout(value) -> int:
    if not isinstance(value, str) or value not in _RESULT_LAYOUTS:
        raise ValueError(f"result_layout: expected 'root' or 'all_ranks', got {value!r}")
    return _RESULT_LAYOUTS[value]


def _ex2d_options(regularize, ndecorr, bundlesize, nsubbundles, wavesize, full_output, psferr,
                  pixpad_frac, wavepad_frac, nparallel, verbose, wavesize_name="wavesize",
                  comm=None, result_layout="root"):
    """Plain Python values for the library, which checks their ranges and names them."""
    return {
        "comm": _args.communicator("comm", comm),
        "result_layout": _result_layout(result_layout),
        "regularize": _real("regularize", regularize),
        "ndecorr": _bool("ndecorr", ndecorr),
        "bundlesize": _int("bundlesize", bundlesize),
        "nsubbundles": _int("nsubbundles", nsubbundles),
        "wavesize": _int(wavesize_name, wavesize),
        "full_output": _bool("full_output", full_output),
        "psferr": None if psferr is None else _real("psferr", psferr),
        "pixpad_frac": _real("pixpad_frac", pixpad_frac),
        "wavepad_frac": _real("wavepad_frac", wavepad_frac),
        "nparallel": _nparallel(nparallel),
        "verbose": _bool("verbose", verbose),
    }


def ex2d(image, imageivar, psf, specmin, nspec, wavelengths, xyrange=None, regularize=0.0,
         ndecorr=False, bundlesize=25, nsubbundles=1, wavesize=50, full_output=False,
         psferr=None, pixpad_frac=0.8, wavepad_frac=0.2, device="auto", nparallel=None,
         verbose=False, comm=None, result_layout="root"):
    """Extracts spectra [specmin, specmin + nspec) at ``wavelengths`` (a linear grid) from
    ``image`` (the whole CCD, or the cut-out ``xyrange`` = (xmin, xmax, ymin, ymax)), as specter's
    ex2d: patches of nsubbundles subbundles per bundle of ``bundlesize`` fibres and ``wavesize``
    wavelengths, each solved whole and its core kept.

    Returns (flux[nspec, nwave], ivar[nspec, nwave], Rdata[nspec, 2 ndiag + 1, nwave]), flux in
    electrons per Angstrom; with full_output a dict with specter's keys flux, ivar,
    resolution_data, modelimage (the image's shape), pixmask_fraction, chi2pix (and ndiag,
    npatches, retried_patches, timers, device). ``psf`` is a Psf or the path of a PSF file;
    image and imageivar float32 or float64 [ny, nx] (converted once to float64).

    ``comm`` (an mpi4py communicator; collective): the bundles are split across its ranks, as
    gpu_specter's --mpi splits them, every rank passing the same arguments (checked). The result,
    the same bits as one process, is rank 0's with result_layout "root" (the other ranks get
    None, as gpu_specter's) or every rank's with "all_ranks"."""
    psf = _as_psf(psf)
    image, ivar = _image_pair(image, imageivar, "image", "imageivar")
    specmin, nspec = _fibres(specmin, nspec)
    w = _wavelengths("wavelengths", wavelengths, at_least=2)
    r = _xyrange(xyrange)
    options = _ex2d_options(regularize, ndecorr, bundlesize, nsubbundles, wavesize, full_output,
                            psferr, pixpad_frac, wavepad_frac, nparallel, verbose, comm=comm,
                            result_layout=result_layout)
    out = _call({"ivar": "imageivar", "range": "xyrange"}, _sciproxy.specex_ex2d, psf._psf,
                image, ivar, r, specmin, nspec, w, options, _device(device))
    if out is None:  # a rank other than 0, the result gathered on rank 0
        return None
    if options["full_output"]:
        return dict(out)
    return out["flux"], out["ivar"], out["resolution_data"]


def ex2d_patches(image, imageivar, psf, specmin, nspec, wavelengths, xyrange=None,
                 bundlesize=25, nsubbundles=1, wavesize=50, pixpad_frac=0.8, wavepad_frac=0.2):
    """The patches ex2d solves, in its order: a list of dicts (speclo, nspec, keeplo, nkeep,
    iwave, ncore, nlo, nhi, wfirst, xyrange)."""
    psf = _as_psf(psf)
    image, ivar = _image_pair(image, imageivar, "image", "imageivar")
    specmin, nspec = _fibres(specmin, nspec)
    w = _wavelengths("wavelengths", wavelengths, at_least=2)
    r = _xyrange(xyrange)
    options = _ex2d_options(0.0, False, bundlesize, nsubbundles, wavesize, False, None,
                            pixpad_frac, wavepad_frac, None, False)
    return [dict(p) for p in _call({"ivar": "imageivar", "range": "xyrange"},
                                   _sciproxy.specex_ex2d_patches, psf._psf, image, ivar, r,
                                   specmin, nspec, w, options)]


def ex2d_patch(image, ivar, psf, specmin, nspec, wavelengths, xyrange=None, full_output=False,
               regularize=0.0, ndecorr=False, device="auto"):
    """One patch solved whole, as specter's ex2d_patch: every wavelength bin kept, no unit
    conversion. ``image`` is the whole CCD (xyrange None: the patch is the spectra's
    psf.xyrange, cut out of it) or the cut-out ``xyrange``.

    Returns (flux[nspec, nwave], ivar[nspec, nwave], R[nflux, nflux]) with R dense (specter's is
    sparse); with full_output a dict: flux, ivar, R, xflux[nspec, nwave] (the deconvolved
    solution), A (psf.projection_matrix, dense), iCov (dense), options, xyrange."""
    psf = _as_psf(psf)
    image, ivar = _image_pair(image, ivar, "image", "ivar")
    specmin, nspec = _fibres(specmin, nspec)
    w = _wavelengths("wavelengths", wavelengths)
    full_output = _bool("full_output", full_output)
    regularize = _real("regularize", regularize)
    ndecorr = _bool("ndecorr", ndecorr)
    device = _device(device)
    # xyrange None: the image is the whole CCD and the patch the spectra's psf.xyrange (specter).
    out = _call({"imageivar": "ivar", "range": "xyrange"}, _sciproxy.specex_ex2d_patch, psf._psf,
                image, ivar, _xyrange(xyrange), specmin, nspec, w, regularize, ndecorr, device)
    if not full_output:
        return out["flux"], out["ivar"], out["R"]
    result = dict(out)
    r = tuple(int(v) for v in out["xyrange"])
    result["xyrange"] = r
    result["A"] = psf.projection_matrix((specmin, specmin + nspec), w, r)
    result["options"] = dict(specmin=specmin, nspec=nspec, wavelengths=w, xyrange=r,
                             regularize=regularize, ndecorr=ndecorr)
    return result


# ---- simulation and files ----

def _phot(phot, nwave: int):
    p = _args.real_array("phot", phot, np.float64)
    if p.ndim == 1:
        p = p.reshape(1, -1)
    if p.ndim != 2:
        raise ValueError(f"phot: expected phot[nwave] or phot[nspec, nwave], got {_describe(p)}")
    if p.shape[1] != nwave:
        raise ValueError(f"phot: expected {nwave} values per spectrum (one per wavelength), "
                         f"got {_describe(p)}")
    return np.ascontiguousarray(p)


def simulate_image(psf, wavelengths, phot, specmin=0, xyrange=None, read_noise=3.0, seed=0,
                   nparallel=None):
    """A DESI-like preprocessed image of spectra phot[nspec, nwave] (photons per bin) at
    ``wavelengths``: image = Poisson(A phot) + N(0, read_noise^2), ivar = 1 / (max(image, 0) +
    read_noise^2), on xyrange (default: the CCD). Deterministic for a seed. Returns (image,
    ivar), each [ny, nx] float64."""
    psf = _as_psf(psf)
    w = _wavelengths("wavelengths", wavelengths)
    p = _phot(phot, w.size)
    specmin = _integer("specmin", specmin, _args.INT32_MIN, _args.INT32_MAX)
    out = _call({"wavelength": "wavelengths"}, _sciproxy.specex_simulate_image, psf._psf, w, p,
                specmin, _xyrange(xyrange), _real("read_noise", read_noise),
                _integer("seed", seed, 0, 2**64 - 1), _nparallel(nparallel))
    return out["image"], out["ivar"]


def read_preproc_image(path) -> dict:
    """A DESI preprocessed image: dict(image, ivar (0 where mask != 0), mask (int16), camera,
    has_fibermap, path), images [ny, nx] float64."""
    return dict(_call({"image": "path"}, _sciproxy.specex_read_preproc_image,
                      _path("path", path)))


def write_preproc_image(path, image, ivar, mask=None, camera="r0") -> None:
    """Writes IMAGE (float32, header CAMERA), IVAR (float32) and MASK (int16; zeros when None)
    as DESI's preprocessed images, atomically (a temporary name, renamed)."""
    path = _path("path", path)
    image, ivar = _image_pair(image, ivar, "image", "ivar")
    if mask is None:
        m = np.zeros(image.shape, dtype=np.int16)
    else:
        m = _as_array("mask", mask)
        if m.dtype.kind not in "biu":
            raise TypeError(f"mask: expected integers (int16), got {_describe(m)}")
        if m.shape != image.shape:
            raise ValueError(f"mask: expected the shape of image {image.shape}, got {m.shape}")
        if m.size and (m.min() < -(2**15) or m.max() > 2**15 - 1):
            raise ValueError(f"mask: expected int16 values, got values in "
                             f"[{int(m.min())}, {int(m.max())}]")
        m = np.ascontiguousarray(m, dtype=np.int16)
    if not isinstance(camera, str):
        raise TypeError(f"camera: expected a string such as 'r0', got {_describe(camera)}")
    _call({}, _sciproxy.specex_write_preproc_image, path, image, ivar, m, camera)


def wavelength_grid(wmin, wmax, dw) -> np.ndarray:
    """desispec's np.arange(wmin, wmax + dw/2, dw), checked: the linear grid wmin, wmin + dw, ...
    up to wmax."""
    return _call({}, _sciproxy.specex_wavelength_grid, _real("wmin", wmin), _real("wmax", wmax),
                  _real("dw", dw, positive=True))


def extract_frame(image_path, psf_path, frame_path, model_path=None, wavelength=None,
                  specmin=0, nspec=500, bundlesize=25, nsubbundles=5, nwavestep=50, psferr=None,
                  pixpad_frac=0.8, wavepad_frac=0.2, device="auto", nparallel=None, comm=None,
                  result_layout="root"):
    """gpu_specter's extract_frame (its spex command): reads the preprocessed image and the PSF,
    extracts, writes the frame (and the model image when model_path is given). ``wavelength`` is
    (wmin, wmax, dw) (the grid np.arange(wmin, wmax + dw/2, dw)) or an array; None: desispec's
    grid of the camera is not known here, so it is required.

    Returns a dict of the extraction: wavelength, flux, ivar, resolution_data, chi2pix,
    pixmask_fraction, modelimage, ndiag, npatches, retried_patches, timers, device.

    ``comm`` (an mpi4py communicator; collective): every rank reads the files and extracts its
    bundles, rank 0 alone writes the frame once; with result_layout "root" ranks other than 0
    return None. An error on any rank is raised on every rank and leaves no file."""
    image_path = _path("image_path", image_path)
    psf_path = _path("psf_path", psf_path)
    frame_path = _path("frame_path", frame_path)
    model_path = "" if model_path is None else _path("model_path", model_path)
    if wavelength is None:
        raise TypeError("wavelength: expected (wmin, wmax, dw) or an array of wavelengths, "
                        "got None")
    if isinstance(wavelength, (tuple, list)) and len(wavelength) == 3 and not any(
            isinstance(v, (list, tuple, np.ndarray)) for v in wavelength):
        w = wavelength_grid(*wavelength)
    else:
        w = _wavelengths("wavelength", wavelength, at_least=2)
    specmin = _int32("specmin", specmin)
    nspec = _int32("nspec", nspec, 1)
    options = _ex2d_options(0.0, False, bundlesize, nsubbundles, nwavestep, True, psferr,
                            pixpad_frac, wavepad_frac, nparallel, False,
                            wavesize_name="nwavestep", comm=comm, result_layout=result_layout)
    out = _call({"wavelengths": "wavelength", "wavesize": "nwavestep", "image": "image_path",
                      "psf": "psf_path"},
                     _sciproxy.specex_extract_frame, image_path, psf_path, frame_path, model_path,
                     w, specmin, nspec, options, _device(device))
    if out is None:  # a rank other than 0: rank 0 holds the result and wrote the frame
        return None
    out = dict(out)
    out["wavelength"] = w
    model = out.get("modelimage")
    if model is not None and model.ndim == 1 and model.size:
        # The image extract_frame reads is the whole CCD: the PSF's npix_y x npix_x.
        psf = load_psf(psf_path)
        if psf.npix_y * psf.npix_x == model.size:
            out["modelimage"] = model.reshape(psf.npix_y, psf.npix_x)
    return out
