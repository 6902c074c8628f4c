/* The specex family's C ABI from C: the PSF handle and its accessors, spectra projected onto
 * the CCD and extracted back, the options' defaults, and bad input (NULL pointers, a wrong
 * struct_size, bad options, nspec not a multiple of bundlesize, missing files), each an error
 * code with a message. The PSF is SCIPROXY_SPECEX_PSF_R0 (tests/CMakeLists.txt). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sciproxy/sciproxy.h"

#ifndef SCIPROXY_SPECEX_PSF_R0
#define SCIPROXY_SPECEX_PSF_R0 "psf-r0-00067784.fits"
#endif

static int mentions(const char* text) {
  return strstr(sciproxy_last_error(), text) != NULL;
}

int main(void) {
  sciproxy_specex_options o;
  sciproxy_specex_psf* psf = NULL;
  sciproxy_specex_psf_info info;

  /* The defaults. */
  memset(&o, 0xff, sizeof o);
  sciproxy_specex_options_default(&o);
  CHECK(o.struct_size == sizeof o && strcmp(o.device, "auto") == 0 && o.bundlesize == 25 &&
        o.nsubbundles == 1 && o.wavesize == 50 && o.regularize == 0 && o.ndecorr == 0 &&
        o.pixpad_frac == 0.8 && o.wavepad_frac == 0.2 && o.psferr < 0 && o.full_output == 1 &&
        o.nparallel == 0 && o.comm == SCIPROXY_NO_COMM && o.result_layout == 1);
  sciproxy_specex_options_default(NULL); /* ignored */

  /* The wavelength grid: numpy's arange(wmin, wmax + dw/2, dw). */
  int64_t n = 0;
  double grid[4];
  CHECK(sciproxy_specex_wavelength_grid(5760, 5761, 0.5, NULL, 0, &n) == SCIPROXY_OK && n == 3);
  CHECK(sciproxy_specex_wavelength_grid(5760, 5761, 0.5, grid, 4, &n) == SCIPROXY_OK);
  CHECK(grid[0] == 5760 && grid[1] == 5760.5 && grid[2] == 5761);
  CHECK(sciproxy_specex_wavelength_grid(5760, 5761, 0.5, grid, 2, &n) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(sciproxy_specex_wavelength_grid(5760, 5761, 0, grid, 4, &n) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("dw"));

  /* Loading: bad arguments, a missing file, then the r0 PSF. */
  CHECK(sciproxy_specex_psf_load(NULL, &psf) == SCIPROXY_ERROR_INVALID_ARGUMENT && psf == NULL);
  CHECK(mentions("path"));
  CHECK(sciproxy_specex_psf_load(SCIPROXY_SPECEX_PSF_R0, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(sciproxy_specex_psf_load("/no/such/psf.fits", &psf) != SCIPROXY_OK && psf == NULL);
  CHECK(mentions("/no/such/psf.fits"));
  sciproxy_specex_psf_free(NULL); /* allowed */
  CHECK(sciproxy_specex_psf_get_info(NULL, &info) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("psf"));

  if (sciproxy_specex_psf_load(SCIPROXY_SPECEX_PSF_R0, &psf) != SCIPROXY_OK) {
    fprintf(stderr, "cannot load %s: %s\n", SCIPROXY_SPECEX_PSF_R0, sciproxy_last_error());
    return 1;
  }
  CHECK(sciproxy_specex_psf_get_info(psf, &info) == SCIPROXY_OK);
  CHECK(info.nspec == 500 && info.version == 3 && info.npix_x == 4114 && info.npix_y == 4128);
  CHECK(info.hsizex == 8 && info.hsizey == 5 && info.psferr == 0.01);
  CHECK(info.wmin > 5500 && info.wmin < info.wmax && info.wmax < 7900);
  CHECK(sciproxy_specex_psf_get_info(psf, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);

  /* Trace and its inverse. */
  const double w6000[2] = {6000, 6500};
  double x[2], y[2], back[2];
  CHECK(sciproxy_specex_psf_xy(psf, 0, w6000, 2, x, y) == SCIPROXY_OK);
  CHECK(x[0] > 0 && x[0] < 4114 && y[0] > 0 && y[1] > y[0] && y[1] < 4128);
  CHECK(sciproxy_specex_psf_wavelength(psf, 0, y, 2, back) == SCIPROXY_OK);
  CHECK(fabs(back[0] - 6000) < 0.05 && fabs(back[1] - 6500) < 0.05);
  CHECK(sciproxy_specex_psf_xy(psf, 500, w6000, 2, x, y) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("ispec"));
  CHECK(sciproxy_specex_psf_xy(psf, 0, NULL, 2, x, y) == SCIPROXY_ERROR_INVALID_ARGUMENT);

  /* Five spectra of 100 photons per bin at 6000-6030 A (1 A bins), projected without noise onto
   * the pixels they cover, then extracted: 100 electrons per Angstrom. */
  enum { NSPEC = 5, NWAVE = 31 };
  double wave[NWAVE], phot[NSPEC * NWAVE];
  int64_t nwave = 0;
  CHECK(sciproxy_specex_wavelength_grid(6000, 6030, 1, wave, NWAVE, &nwave) == SCIPROXY_OK);
  CHECK(nwave == NWAVE);
  for (int i = 0; i < NSPEC * NWAVE; ++i) phot[i] = 100;
  int64_t range[4];
  CHECK(sciproxy_specex_psf_xyrange(psf, 0, NSPEC + 1, 5980, 6050, range) == SCIPROXY_OK);
  CHECK(range[0] >= 0 && range[1] > range[0] && range[2] >= 0 && range[3] > range[2]);
  const int64_t ny = range[3] - range[2], nx = range[1] - range[0];
  double* image = calloc((size_t)(ny * nx), sizeof(double));
  double* ivar = calloc((size_t)(ny * nx), sizeof(double));
  double* model = calloc((size_t)(ny * nx), sizeof(double));
  CHECK(sciproxy_specex_project(psf, wave, NWAVE, phot, 0, NSPEC, range, 0, image, ny * nx) ==
        SCIPROXY_OK);
  CHECK(sciproxy_specex_project(psf, wave, NWAVE, phot, 0, NSPEC, range, 0, image, 7) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("image_size"));
  double total = 0;
  for (int64_t i = 0; i < ny * nx; ++i) {
    total += image[i];
    ivar[i] = 1;
  }
  CHECK(total > 0.9 * 100 * NSPEC * NWAVE && total < 1.0001 * 100 * NSPEC * NWAVE);

  sciproxy_specex_input in;
  memset(&in, 0, sizeof in);
  in.psf = psf;
  in.image = image;
  in.ivar = ivar;
  in.ny = ny;
  in.nx = nx;
  in.has_range = 1;
  in.xmin = range[0];
  in.xmax = range[1];
  in.ymin = range[2];
  in.ymax = range[3];
  in.specmin = 0;
  in.nspec = NSPEC;
  in.wavelengths = wave;
  in.nwave = NWAVE;
  sciproxy_specex_options_default(&o);
  o.device = "cpu";
  o.bundlesize = 5;
  o.nsubbundles = 1;
  o.wavesize = 10;

  int32_t ndiag = -1;
  int64_t npatches = 0;
  CHECK(sciproxy_specex_ex2d_shape(&in, &o, &ndiag, &npatches) == SCIPROXY_OK);
  CHECK(ndiag >= 1 && ndiag <= 8 && npatches == 4); /* 31 bins in steps of 10 */
  const int64_t nres = (int64_t)NSPEC * (2 * ndiag + 1) * NWAVE;
  double flux[NSPEC * NWAVE], fivar[NSPEC * NWAVE], chi2[NSPEC * NWAVE], pixmask[NSPEC * NWAVE];
  double* res = calloc((size_t)nres, sizeof(double));
  int32_t ndiag_out = -1;
  CHECK(sciproxy_specex_ex2d(&in, &o, flux, fivar, res, nres, chi2, pixmask, model, &ndiag_out) ==
        SCIPROXY_OK);
  CHECK(ndiag_out == ndiag);
  /* Beyond the grid the truth is 0, so the first and last bins (where R reaches past the
   * grid) are lower; inside, the noise-free solution is the truth. */
  double worst = 0;
  for (int s = 0; s < NSPEC; ++s)
    for (int j = 0; j < NWAVE; ++j) {
      const int i = s * NWAVE + j;
      if (j >= 2 && j < NWAVE - 2) worst = fmax(worst, fabs(flux[i] - 100));
      CHECK(flux[i] > 50 && fivar[i] > 0 && fabs(pixmask[i]) < 1e-12 && chi2[i] < 1);
    }
  CHECK(worst < 0.5);
  if (worst >= 0.5) fprintf(stderr, "largest |flux - 100| = %g\n", worst);
  /* R's rows sum to 1 (to the band's truncation): row j of spectrum s is resolution[s, k, j + ndiag
   * - k], k < 2 ndiag + 1. */
  for (int s = 0; s < NSPEC; ++s) {
    double sum = 0;
    for (int k = 0; k < 2 * ndiag + 1; ++k)
      sum += res[((int64_t)s * (2 * ndiag + 1) + k) * NWAVE + 15 + ndiag - k];
    CHECK(fabs(sum - 1) < 1e-3); /* the band holds R up to ndiag off the diagonal */
  }
  /* NULL options: the defaults (bundles of 25: refused for 5 spectra). */
  CHECK(sciproxy_specex_ex2d(&in, NULL, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("bundlesize"));
  /* Only flux and ivar. */
  CHECK(sciproxy_specex_ex2d(&in, &o, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) == SCIPROXY_OK);

  /* Bad input: each refused with a message naming it. */
  CHECK(sciproxy_specex_ex2d(NULL, &o, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("input"));
  CHECK(sciproxy_specex_ex2d(&in, &o, NULL, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("flux"));
  CHECK(sciproxy_specex_ex2d(&in, &o, flux, NULL, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(sciproxy_specex_ex2d(&in, &o, flux, fivar, res, nres - 1, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("resolution_size"));
  sciproxy_specex_input bad = in;
  bad.psf = NULL;
  CHECK(sciproxy_specex_ex2d(&bad, &o, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("psf"));
  bad = in;
  bad.image = NULL;
  CHECK(sciproxy_specex_ex2d(&bad, &o, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("image"));
  bad = in;
  bad.wavelengths = NULL;
  CHECK(sciproxy_specex_ex2d(&bad, &o, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  bad = in;
  bad.nspec = 7; /* not a multiple of bundlesize 5 */
  CHECK(sciproxy_specex_ex2d_shape(&bad, &o, &ndiag, &npatches) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("bundlesize"));
  CHECK(sciproxy_specex_ex2d(&bad, &o, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  bad = in;
  bad.ny = 0;
  CHECK(sciproxy_specex_ex2d(&bad, &o, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  sciproxy_specex_options bo = o;
  bo.struct_size = sizeof bo - 8;
  CHECK(sciproxy_specex_ex2d(&in, &bo, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("struct_size"));
  bo = o;
  bo.nsubbundles = 2; /* does not divide 5 */
  CHECK(sciproxy_specex_ex2d(&in, &bo, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("nsubbundles"));
  bo = o;
  bo.psferr = NAN;
  CHECK(sciproxy_specex_ex2d(&in, &bo, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("psferr"));
  bo = o;
  bo.regularize = -1;
  CHECK(sciproxy_specex_ex2d(&in, &bo, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("regularize"));
  bo = o;
  bo.device = "gpu7";
  CHECK(sciproxy_specex_ex2d(&in, &bo, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  bo = o;
  bo.device = NULL;
  CHECK(sciproxy_specex_ex2d(&in, &bo, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  bo = o;
  bo.result_layout = 2;
  CHECK(sciproxy_specex_ex2d(&in, &bo, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("result_layout"));
  bo = o;
  bo.comm = 12345; /* MPI is not running here (or not compiled) */
  CHECK(sciproxy_specex_ex2d(&in, &bo, flux, fivar, NULL, 0, NULL, NULL, NULL, NULL) !=
        SCIPROXY_OK);
  CHECK(mentions("options.comm"));
  bo = o;
  bo.full_output = 0; /* chi2pix asked for without full_output */
  CHECK(sciproxy_specex_ex2d(&in, &bo, flux, fivar, NULL, 0, chi2, NULL, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("full_output"));

  /* extract_frame: bad paths and sizes, refused before anything is written. */
  sciproxy_specex_frame_input fin;
  memset(&fin, 0, sizeof fin);
  fin.image_path = "/no/such/preproc.fits";
  fin.psf_path = SCIPROXY_SPECEX_PSF_R0;
  fin.frame_path = "frame-capi-never-written.fits";
  fin.wmin = 6000;
  fin.wmax = 6030;
  fin.dw = 1;
  fin.specmin = 0;
  fin.nspec = 5;
  CHECK(sciproxy_specex_extract_frame(&fin, &o, NULL, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("/no/such/preproc.fits"));
  CHECK(sciproxy_specex_extract_frame(NULL, &o, NULL, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  sciproxy_specex_frame_input bf = fin;
  bf.frame_path = NULL;
  CHECK(sciproxy_specex_extract_frame(&bf, &o, NULL, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(mentions("frame_path"));
  bf = fin;
  bf.dw = -1;
  CHECK(sciproxy_specex_extract_frame(&bf, &o, NULL, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  bf = fin;
  bf.frame_path = "/no/such/dir/frame.fits";
  CHECK(sciproxy_specex_extract_frame(&bf, &o, NULL, NULL) == SCIPROXY_ERROR_IO);
  CHECK(mentions("/no/such/dir"));
  FILE* left = fopen("frame-capi-never-written.fits", "rb");
  CHECK(left == NULL);
  if (left) fclose(left);

  free(res);
  free(image);
  free(ivar);
  free(model);
  sciproxy_specex_psf_free(psf);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures != 0;
}
