/* sciproxy C ABI, specex family: spectroperfectionism extraction of spectra from DESI CCD
 * frames (specter's ex2d, gpu_specter). Semantics: docs/kernels/specex.md; the C++ API is
 * include/sciproxy/specex.hpp. The calling convention is described at the top of c/core.h.
 *
 * A PSF is loaded once into a handle (sciproxy_specex_psf_load), used by any number of calls
 * from any thread (it is immutable), and freed with sciproxy_specex_psf_free. */
#ifndef SCIPROXY_C_SPECEX_H
#define SCIPROXY_C_SPECEX_H

#include "sciproxy/c/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The PSF ---- */

typedef struct sciproxy_specex_psf sciproxy_specex_psf; /* opaque */

/* Reads a DESI Gauss-Hermite PSF FITS file (PSFVER 2 or 3) into *psf (set to NULL on error). */
sciproxy_status sciproxy_specex_psf_load(const char* path, sciproxy_specex_psf** psf);
void sciproxy_specex_psf_free(sciproxy_specex_psf* psf); /* NULL is allowed */

typedef struct sciproxy_specex_psf_info {
  int32_t nspec;          /* fibres: FIBERMAX - FIBERMIN + 1 */
  int32_t version;        /* PSFVER: 2 or 3 */
  int64_t npix_x, npix_y; /* the CCD: columns, rows */
  int32_t hsizex, hsizey; /* half sizes of a spot */
  int32_t ghdegx, ghdegy; /* Gauss-Hermite degrees */
  double psferr;          /* header PSFERR, else 0.01 */
  double wmin, wmax;      /* specter's wmin, wmax: the wavelengths on the CCD's rows */
  double wmin_all, wmax_all;
} sciproxy_specex_psf_info;

sciproxy_status sciproxy_specex_psf_get_info(const sciproxy_specex_psf* psf,
                                             sciproxy_specex_psf_info* info);

/* Trace centres of fibre ispec at n wavelengths: x[n], y[n] (either may be NULL). */
sciproxy_status sciproxy_specex_psf_xy(const sciproxy_specex_psf* psf, int32_t ispec,
                                       const double* wavelengths, int64_t n, double* x, double* y);
/* The wavelengths at n CCD rows y of fibre ispec (specter's approximate inverse). */
sciproxy_status sciproxy_specex_psf_wavelength(const sciproxy_specex_psf* psf, int32_t ispec,
                                               const double* y, int64_t n, double* wavelengths);

/* The pixels that cover fibres specmin .. specmax - 1 between two wavelengths (specter's
 * xyrange): range = {xmin, xmax, ymin, ymax}, columns xmin <= x < xmax, rows ymin <= y < ymax. */
sciproxy_status sciproxy_specex_psf_xyrange(const sciproxy_specex_psf* psf, int32_t specmin,
                                            int32_t specmax, double wavemin, double wavemax,
                                            int64_t range[4]);

/* Spectra on the CCD (specter's PSF.project): image[ny, nx] (row-major, image_size = ny * nx
 * values) = sum over fibres i < nspec and wavelengths j < nwave of phot[i, j] times the spot of
 * fibre specmin + i at wavelengths[j], over the whole CCD (range NULL: ny = npix_y, nx = npix_x)
 * or the pixels of range = {xmin, xmax, ymin, ymax}. nparallel: OpenMP threads; <= 0: all. */
sciproxy_status sciproxy_specex_project(const sciproxy_specex_psf* psf, const double* wavelengths,
                                        int64_t nwave, const double* phot, int32_t specmin,
                                        int32_t nspec, const int64_t* range, int nparallel,
                                        double* image, int64_t image_size);

/* ---- Extraction ---- */

/* The image (ny x nx, row-major) and its inverse variance (0 marks a masked pixel): the whole CCD
 * (has_range 0: ny = npix_y, nx = npix_x) or the pixels xmin <= x < xmax, ymin <= y < ymax of
 * it (has_range non-zero: ny = ymax - ymin, nx = xmax - xmin). Spectra specmin .. specmin +
 * nspec - 1 are extracted at nwave wavelengths (a linear grid, Angstroms). */
typedef struct sciproxy_specex_input {
  const sciproxy_specex_psf* psf;
  const double* image;
  const double* ivar;
  int64_t ny, nx;
  int has_range;
  int64_t xmin, xmax, ymin, ymax;
  int32_t specmin, nspec;
  const double* wavelengths;
  int64_t nwave;
} sciproxy_specex_input;

typedef struct sciproxy_specex_options {
  size_t struct_size;  /* sizeof(sciproxy_specex_options), set by the defaults function */
  const char* device;  /* "auto" (default), "reference", "cpu", "cuda", "cuda:N" */
  int32_t bundlesize;  /* spectra per bundle; nspec must be a multiple of it (25) */
  int32_t nsubbundles; /* subbundles per bundle; divides bundlesize (1) */
  int32_t wavesize;    /* core wavelength bins per patch, gpu_specter's nwavestep (50) */
  double regularize;   /* added to the diagonal of iCov, squared (0) */
  int ndecorr;         /* non-zero: "noise" decorrelation; 0: "signal" (0) */
  double pixpad_frac;  /* pixel padding, a fraction of a spot's rows (0.8) */
  double wavepad_frac; /* wavelength padding, a fraction of a spot's rows (0.2) */
  double psferr;       /* chi2pix's PSF error; < 0: the PSF's (PSFERR, else 0.01) (-1) */
  int full_output;     /* non-zero: chi2pix, pixmask_fraction and the model are computed (1) */
  int nparallel;       /* OpenMP threads of the cpu backend; <= 0: all (0) */
  /* The ranks the call runs on (core.h, MPI): the communicator's Fortran handle, or
   * SCIPROXY_NO_COMM (default). The bundles are split across the ranks; every rank passes the
   * same PSF, image, ivar, wavelengths and options (checked). */
  int64_t comm;
  /* Where the results go on several ranks: 1 (default): rank 0 alone, the other ranks' output
   * arrays are not written and may be NULL; 0: every rank. The frame file is written by rank 0
   * either way. */
  int32_t result_layout;
} sciproxy_specex_options;

void sciproxy_specex_options_default(sciproxy_specex_options* options);

/* What an extraction produces, to size the outputs: ndiag (the resolution has 2 ndiag + 1
 * diagonals) and the number of patches. Either pointer may be NULL. Checks the input as
 * sciproxy_specex_ex2d does (nspec a multiple of bundlesize, ...). */
sciproxy_status sciproxy_specex_ex2d_shape(const sciproxy_specex_input* input,
                                           const sciproxy_specex_options* options, int32_t* ndiag,
                                           int64_t* npatches);

/* Extracts into the caller's arrays, row-major: flux and ivar [nspec, nwave] (electrons per
 * Angstrom; required), resolution [nspec, 2 ndiag + 1, nwave] holding resolution_size values
 * (NULL: not returned), chi2pix and pixmask_fraction [nspec, nwave] and model [ny, nx] (each
 * NULL: not returned; need full_output). ndiag (may be NULL) receives ndiag. */
sciproxy_status sciproxy_specex_ex2d(const sciproxy_specex_input* input,
                                     const sciproxy_specex_options* options, double* flux,
                                     double* ivar, double* resolution, int64_t resolution_size,
                                     double* chi2pix, double* pixmask_fraction, double* model,
                                     int32_t* ndiag);

/* ---- Files ---- */

/* gpu_specter's extract_frame: reads the preprocessed image (FITS: IMAGE, IVAR, MASK) and the
 * PSF, extracts spectra specmin .. specmin + nspec - 1 on the grid wmin, wmin + dw, ... <= wmax,
 * and writes the frame (FLUX, IVAR, MASK, WAVELENGTH, RESOLUTION, FIBERMAP, CHI2PIX) and, when
 * model_path is not NULL or empty, the model image. Files are written whole or not at all. */
typedef struct sciproxy_specex_frame_input {
  const char* image_path;
  const char* psf_path;
  const char* frame_path;
  const char* model_path; /* NULL or "": none */
  double wmin, wmax, dw;
  int32_t specmin, nspec;
} sciproxy_specex_frame_input;

/* nwave and npatches (each may be NULL) receive the extraction's sizes. */
sciproxy_status sciproxy_specex_extract_frame(const sciproxy_specex_frame_input* input,
                                              const sciproxy_specex_options* options,
                                              int64_t* nwave, int64_t* npatches);

/* The grid wmin, wmin + dw, ... <= wmax + dw/2 (numpy's arange(wmin, wmax + dw/2, dw)) into
 * wavelengths[size] (NULL when size is 0); *n receives its length (call with size 0 first). */
sciproxy_status sciproxy_specex_wavelength_grid(double wmin, double wmax, double dw,
                                                double* wavelengths, int64_t size, int64_t* n);

#ifdef __cplusplus
}
#endif

#endif /* SCIPROXY_C_SPECEX_H */
