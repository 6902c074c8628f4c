/* Fuzz test of the C ABI (issue 14, "reliable under abuse"): every entry point of
 * include/sciproxy/c/*.h driven with a fixed-seed random sequence of calls. Each call starts
 * from a small valid problem of random size and breaks at most one thing: a NULL pointer in
 * each pointer argument and field in turn, zero, negative and huge counts, odd struct_size
 * values, out-of-range enum values, NaN and infinite data and parameters, out-of-range
 * locations, unknown devices. Every call must return SCIPROXY_OK with an empty
 * sciproxy_last_error(), or a known error code with a non-empty message; it must not crash, and
 * the input arrays must be unchanged (a checksum before and after).
 *
 * What a C caller can get wrong without the library being able to tell (a count larger than
 * the array it passes) is not tried: huge counts are only combined with a partner count of at
 * least 2, so that their product overflows int64 and must be refused, or with NULL arrays.
 * Thread counts stay small (huge ones are the resource layer's to refuse).
 *
 * The per-family drivers are written once for both precisions in fuzz_capi_family.h (the
 * diffusion family's, a granule with state, is in this file). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sciproxy/sciproxy.h"

static int failures = 0;
static long calls = 0, ok_calls = 0;
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL; /* fixed seed: the same calls every run */

static uint64_t next_random(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ULL;
}
static int64_t pick(int64_t n) {
  return (int64_t)(next_random() % (uint64_t)n);
}

static uint64_t checksum(const void* data, size_t bytes) { /* FNV-1a */
  const unsigned char* p = (const unsigned char*)data;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

/* One call's outcome: OK with no message, or a known error code with a message. */
static void check_status(sciproxy_status status, const char* what, long iteration,
                         const char* mutation) {
  const char* message = sciproxy_last_error();
  ++calls;
  if (status == SCIPROXY_OK) {
    ++ok_calls;
    if (!message || message[0] != '\0') {
      fprintf(stderr, "%s (iteration %ld, %s): OK but a message: %s\n", what, iteration, mutation,
              message ? message : "(null)");
      ++failures;
    }
    return;
  }
  if ((int)status < SCIPROXY_ERROR_INVALID_ARGUMENT || (int)status > SCIPROXY_ERROR_OUT_OF_MEMORY) {
    fprintf(stderr, "%s (iteration %ld, %s): unknown status %d\n", what, iteration, mutation,
            (int)status);
    ++failures;
  }
  if (!message || message[0] == '\0') {
    fprintf(stderr, "%s (iteration %ld, %s): status %d without a message\n", what, iteration,
            mutation, (int)status);
    ++failures;
  }
}

static void check_unchanged(uint64_t before, uint64_t after, const char* what, long iteration,
                            const char* mutation) {
  if (before != after) {
    fprintf(stderr, "%s (iteration %ld, %s): an input array was modified\n", what, iteration,
            mutation);
    ++failures;
  }
}

static const int64_t kHugeCounts[] = {0, -1, INT64_MIN, INT64_MAX};
static const char* const kDevices[] = {NULL,   "",          "bogus", "cuda:99",
                                       "cuda", "reference", "cpu",   "auto"};
static double bad_real(void) {
  const double values[] = {NAN, INFINITY, -INFINITY, 0.0, -1.0, 1e300, -1e300, 5e-324};
  return values[pick(8)];
}
static size_t bad_struct_size(size_t good) {
  const size_t values[] = {0, good - 1, good + 8, SIZE_MAX, 1};
  return values[pick(5)];
}

/* The drivers, once per precision. */
#define T double
#define SFX(name) name##_f64
#define NAME "f64"
#include "fuzz_capi_family.h"
#undef T
#undef SFX
#undef NAME

#define T float
#define SFX(name) name##_f32
#define NAME "f32"
#include "fuzz_capi_family.h"
#undef T
#undef SFX
#undef NAME

/* ---- specex: the PSF handle, projection, ex2d, extract_frame, the wavelength grid ---------- */

#ifndef SCIPROXY_SPECEX_PSF_R0
#define SCIPROXY_SPECEX_PSF_R0 "psf-r0-00067784.fits"
#endif

static void fuzz_specex(long iterations) {
  sciproxy_specex_psf* psf = NULL;
  if (sciproxy_specex_psf_load(SCIPROXY_SPECEX_PSF_R0, &psf) != SCIPROXY_OK) {
    fprintf(stderr, "specex: cannot load %s: %s\n", SCIPROXY_SPECEX_PSF_R0, sciproxy_last_error());
    ++failures;
    return;
  }
  sciproxy_specex_psf* other = psf;
  check_status(sciproxy_specex_psf_load(NULL, &other), "sciproxy_specex_psf_load", 0, "path NULL");
  if (other != NULL) {
    fprintf(stderr, "sciproxy_specex_psf_load: a failed load must set the handle to NULL\n");
    ++failures;
  }
  check_status(sciproxy_specex_psf_load("/no/such.fits", NULL), "sciproxy_specex_psf_load", 0,
               "psf NULL");
  /* Two spectra over 6000-6011 A on the pixels they cover: solved in milliseconds. */
  enum { NSPEC = 2, NWAVE = 12, MAXPIX = 40000 };
  static double image[MAXPIX], ivar[MAXPIX], model[MAXPIX];
  double wave[NWAVE], phot[NSPEC * NWAVE], flux[NSPEC * NWAVE], fivar[NSPEC * NWAVE];
  double chi2[NSPEC * NWAVE], pixmask[NSPEC * NWAVE], res[NSPEC * 21 * NWAVE];
  int64_t range[4] = {0, 0, 0, 0}, n = 0;
  for (int j = 0; j < NWAVE; ++j) wave[j] = 6000 + j;
  for (int i = 0; i < NSPEC * NWAVE; ++i) phot[i] = 50;
  check_status(sciproxy_specex_psf_xyrange(psf, 0, NSPEC, 5995, 6016, range),
               "sciproxy_specex_psf_xyrange", 0, "none");
  const int64_t ny = range[3] - range[2], nx = range[1] - range[0];
  if (ny < 1 || nx < 1 || ny * nx > MAXPIX) {
    fprintf(stderr, "specex: the fuzz problem's range is too large (%lld pixels)\n",
            (long long)(ny * nx));
    ++failures;
    sciproxy_specex_psf_free(psf);
    return;
  }
  check_status(sciproxy_specex_project(psf, wave, NWAVE, phot, 0, NSPEC, range, 1, image, ny * nx),
               "sciproxy_specex_project", 0, "none");
  for (int64_t i = 0; i < ny * nx; ++i) ivar[i] = 1.0 / (9 + fabs(image[i]));
  for (long it = 0; it < iterations; ++it) {
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
    sciproxy_specex_options o;
    sciproxy_specex_options_default(&o);
    o.device = pick(2) ? "cpu" : "reference";
    o.bundlesize = 2;
    o.nsubbundles = pick(2) ? 1 : 2;
    o.wavesize = (int32_t)(4 + pick(9));
    o.nparallel = (int)pick(3);
    o.ndecorr = (int)pick(2);
    double* out_flux = flux;
    double* out_ivar = fivar;
    double* out_res = pick(2) ? res : NULL;
    int64_t res_size = -2; /* -2: the size ex2d_shape gives */
    const sciproxy_specex_input* input = &in;
    const sciproxy_specex_options* options = &o;
    const char* mutation = "none";
    double saved = 0;
    switch (pick(30)) {
      case 0:
        input = NULL;
        mutation = "input NULL";
        break;
      case 1:
        in.psf = NULL;
        mutation = "psf NULL";
        break;
      case 2:
        in.image = NULL;
        mutation = "image NULL";
        break;
      case 3:
        in.ivar = NULL;
        mutation = "ivar NULL";
        break;
      case 4:
        in.wavelengths = NULL;
        mutation = "wavelengths NULL";
        break;
      case 5:
        out_flux = NULL;
        mutation = "flux NULL";
        break;
      case 6:
        out_ivar = NULL;
        mutation = "ivar out NULL";
        break;
      case 7:
        in.ny = kHugeCounts[pick(4)];
        mutation = "ny 0, negative or huge";
        break;
      case 8:
        in.nwave = kHugeCounts[pick(4)];
        mutation = "nwave 0, negative or huge";
        break;
      case 9:
        in.nspec = (int32_t)(pick(2) ? -1 : 3);
        mutation = "nspec negative or odd";
        break;
      case 10:
        in.specmin = (int32_t)(pick(2) ? -1 : 499);
        mutation = "specmin out of range";
        break;
      case 11:
        in.xmax = in.xmin - 1;
        mutation = "range xmax < xmin";
        break;
      case 12:
        in.ymin = -5;
        mutation = "range ymin negative";
        break;
      case 13:
        in.has_range = 0;
        mutation = "no range (the whole CCD expected)";
        break;
      case 14:
        o.struct_size = bad_struct_size(sizeof o);
        mutation = "struct_size";
        break;
      case 15:
        o.device = kDevices[pick(4)];
        mutation = "device";
        break;
      case 16:
        o.bundlesize = (int32_t)(pick(2) ? 0 : -3);
        mutation = "bundlesize";
        break;
      case 17:
        o.nsubbundles = (int32_t)(pick(2) ? 0 : 3);
        mutation = "nsubbundles";
        break;
      case 18:
        o.wavesize = (int32_t)(pick(2) ? 0 : -1);
        mutation = "wavesize";
        break;
      case 19:
        o.regularize = bad_real();
        mutation = "regularize";
        break;
      case 20:
        o.pixpad_frac = bad_real();
        mutation = "pixpad_frac";
        break;
      case 21:
        o.wavepad_frac = bad_real();
        mutation = "wavepad_frac";
        break;
      case 22:
        o.psferr = bad_real();
        mutation = "psferr";
        break;
      case 23:
        o.nparallel = -7;
        mutation = "nparallel negative";
        break;
      case 24:
        res_size = kHugeCounts[pick(4)];
        out_res = res;
        mutation = "resolution_size";
        break;
      case 25:
        wave[pick(NWAVE)] = bad_real();
        mutation = "a bad wavelength";
        break;
      case 26:
        wave[5] = wave[4];
        mutation = "wavelengths not increasing";
        break;
      case 27:
        saved = 1;
        image[pick(ny * nx)] = bad_real();
        mutation = "a bad pixel";
        break;
      case 28:
        saved = 2;
        ivar[pick(ny * nx)] = -1;
        mutation = "a negative ivar";
        break;
      default:
        break;
    }
    int32_t ndiag = 0;
    int64_t npatches = 0;
    const uint64_t before =
        checksum(image, sizeof image) ^ checksum(ivar, sizeof ivar) ^ checksum(wave, sizeof wave);
    check_status(sciproxy_specex_ex2d_shape(input, options, &ndiag, &npatches),
                 "sciproxy_specex_ex2d_shape", it, mutation);
    if (res_size == -2) res_size = (int64_t)NSPEC * (2 * ndiag + 1) * NWAVE;
    if (res_size > (int64_t)(sizeof res / sizeof res[0])) out_res = NULL;
    const int full = o.full_output != 0;
    check_status(sciproxy_specex_ex2d(input, options, out_flux, out_ivar, out_res, res_size,
                                      full && pick(2) ? chi2 : NULL, full ? pixmask : NULL,
                                      full && pick(2) ? model : NULL, &ndiag),
                 "sciproxy_specex_ex2d", it, mutation);
    const uint64_t after =
        checksum(image, sizeof image) ^ checksum(ivar, sizeof ivar) ^ checksum(wave, sizeof wave);
    check_unchanged(before, after, "sciproxy_specex_ex2d", it, mutation);
    /* Repair what the mutation broke. */
    for (int j = 0; j < NWAVE; ++j) wave[j] = 6000 + j;
    if (saved != 0) {
      check_status(
          sciproxy_specex_project(psf, wave, NWAVE, phot, 0, NSPEC, range, 1, image, ny * nx),
          "sciproxy_specex_project", it, "repair");
      for (int64_t i = 0; i < ny * nx; ++i) ivar[i] = 1.0 / (9 + fabs(image[i]));
    }
  }
  /* The PSF's accessors, the projection, the grid and extract_frame with bad arguments. */
  for (long it = 0; it < iterations / 4; ++it) {
    double w[3] = {6000, 6500, bad_real()}, x[3], y[3];
    const int32_t ispec = (int32_t)(pick(3) ? pick(500) : (pick(2) ? -1 : 500));
    const int64_t count = pick(3) ? 3 : kHugeCounts[pick(4)];
    const double* wp = count > 3 ? NULL : w;
    check_status(
        sciproxy_specex_psf_xy(pick(8) ? psf : NULL, ispec, wp, count, pick(2) ? x : NULL, y),
        "sciproxy_specex_psf_xy", it, "random");
    check_status(sciproxy_specex_psf_wavelength(psf, ispec, pick(4) ? y : NULL,
                                                count > 3 ? 0 : count, pick(4) ? x : NULL),
                 "sciproxy_specex_psf_wavelength", it, "random");
    int64_t r[4];
    check_status(sciproxy_specex_psf_xyrange(psf, (int32_t)pick(600) - 50, (int32_t)pick(600) - 50,
                                             pick(2) ? 6000 : bad_real(), 6100, pick(8) ? r : NULL),
                 "sciproxy_specex_psf_xyrange", it, "random");
    int64_t bad_range[4] = {range[0], range[1], range[2], range[3]};
    bad_range[pick(4)] += pick(2) ? -100000 : 100000;
    check_status(
        sciproxy_specex_project(psf, wave, NWAVE, phot, 0, NSPEC, bad_range, 1, image, ny * nx),
        "sciproxy_specex_project", it, "range out of the CCD");
    check_status(sciproxy_specex_project(psf, wave, NWAVE, phot, 0, NSPEC, range, 1, image,
                                         kHugeCounts[pick(4)]),
                 "sciproxy_specex_project", it, "image_size");
    double g[8];
    const int with_buffer = (int)pick(2); /* huge sizes only with no buffer */
    check_status(sciproxy_specex_wavelength_grid(pick(2) ? 6000 : bad_real(), 6003,
                                                 pick(2) ? 1 : bad_real(), with_buffer ? g : NULL,
                                                 with_buffer ? 8 : kHugeCounts[pick(4)], &n),
                 "sciproxy_specex_wavelength_grid", it, "random");
    sciproxy_specex_frame_input f;
    memset(&f, 0, sizeof f);
    f.image_path = pick(2) ? "/no/such/preproc.fits" : NULL;
    f.psf_path = pick(2) ? SCIPROXY_SPECEX_PSF_R0 : NULL;
    f.frame_path = pick(2) ? "/no/such/dir/frame.fits" : NULL;
    f.wmin = pick(2) ? 6000 : bad_real();
    f.wmax = 6010;
    f.dw = pick(2) ? 1 : bad_real();
    f.nspec = (int32_t)pick(30) - 2;
    check_status(sciproxy_specex_extract_frame(pick(8) ? &f : NULL, NULL, NULL, NULL),
                 "sciproxy_specex_extract_frame", it, "random");
  }
  sciproxy_specex_psf_free(psf);
}

/* ---- diffusion: grids, init, run, the timer table, handles ---------------------------------- */

static void fuzz_diffusion(long iterations) {
  /* Generated grids: tiny, refused (sizes that do not fit int32, negative), never large. */
  const int32_t ns[] = {-1, 0, 1, 2, INT32_MAX}, ks[] = {INT32_MIN, -1, 0, 1, 40};
  for (long it = 0; it < 25; ++it) {
    sciproxy_diffusion_grid* g = NULL;
    check_status(sciproxy_diffusion_grid_icosahedral(ns[pick(5)], ks[pick(5)], pick(8) ? &g : NULL),
                 "sciproxy_diffusion_grid_icosahedral", it, "random");
    sciproxy_diffusion_grid_free(g);
  }
  /* Grids from tables: random 1-based indices, some out of range or missing. */
  enum { TC = 20, TE = 30, TV = 12 };
  int32_t tables[TC * 3 * 3 + TE * 2 * 2 + TE * 4 + TV * 6 * 2];
  for (long it = 0; it < 60; ++it) {
    const int32_t nc = pick(4) ? TC : (int32_t)kHugeCounts[pick(4)] % 100;
    for (size_t i = 0; i < sizeof tables / sizeof *tables; ++i)
      tables[i] = (int32_t)pick(pick(8) ? 13 : 40) - (int32_t)pick(3);
    int32_t* t = tables;
    sciproxy_diffusion_grid* g = NULL;
    const uint64_t before = checksum(tables, sizeof tables);
    check_status(sciproxy_diffusion_grid_init(nc, TE, TV, t, t + 60, t + 120, t + 180,
                                              pick(8) ? t + 240 : NULL, t + 360, t + 432, t + 504,
                                              NULL, NULL, NULL, &g),
                 "sciproxy_diffusion_grid_init", it, "random tables");
    check_unchanged(before, checksum(tables, sizeof tables), "sciproxy_diffusion_grid_init", it,
                    "random tables");
    if (g) {
      sciproxy_diffusion* h = NULL;
      check_status(sciproxy_diffusion_init_computed(g, NULL, NULL, 3, &h),
                   "sciproxy_diffusion_init_computed", it, "a grid from tables");
      sciproxy_diffusion_free(h);
    }
    sciproxy_diffusion_grid_free(g);
  }

  /* The bindings' shape check: random ranks and shapes, NULL arrays and names. */
  for (long it = 0; it < 40; ++it) {
    const int64_t shape[3] = {pick(3), pick(3), kHugeCounts[pick(4)]}, expected[3] = {1, 2, 0};
    check_status(
        sciproxy_diffusion_check_array(pick(8) ? "w" : NULL, (int32_t)pick(3), (int32_t)pick(6) - 1,
                                       pick(8) ? shape : NULL, pick(8) ? expected : NULL),
        "sciproxy_diffusion_check_array", it, "random");
  }

  /* One valid problem: R1B0 x 3 levels, Fortran order, both precisions. */
  enum { NC = 20, NE = 30, NLEV = 3 };
  sciproxy_diffusion_grid* grid = NULL;
  if (sciproxy_diffusion_grid_icosahedral(1, 0, &grid) != SCIPROXY_OK) {
    fprintf(stderr, "diffusion: cannot build R1B0: %s\n", sciproxy_last_error());
    ++failures;
    return;
  }
  double cells[8][NC * (NLEV + 1)], vn[NE * NLEV];
  float cells4[8][NC * (NLEV + 1)], vn4[NE * NLEV];
  for (long it = 0; it < iterations; ++it) {
    /* The options and config, at most one thing broken. */
    sciproxy_diffusion_options o;
    sciproxy_diffusion_config c;
    sciproxy_diffusion_options_default(&o);
    sciproxy_diffusion_config_default(&c);
    o.device = "cpu";
    o.nparallel = 1;
    o.single_precision = (int32_t)pick(2);
    c.shear_type = (int32_t)pick(3);
    int32_t nlev = NLEV;
    const char* mutation = "none";
    switch (pick(14)) {
      case 0:
        o.struct_size = bad_struct_size(sizeof o), mutation = "options.struct_size";
        break;
      case 1:
        c.struct_size = bad_struct_size(sizeof c), mutation = "config.struct_size";
        break;
      case 2:
        o.layout = (int32_t)pick(6) - 2, mutation = "options.layout";
        break;
      case 3:
        o.device = kDevices[pick(8)], mutation = "options.device";
        break;
      case 4:
        o.nparallel = (int32_t)pick(5) - 2, mutation = "options.nparallel";
        break;
      case 5:
        c.diffusion_type = (int32_t)pick(8) - 1, mutation = "config.diffusion_type";
        break;
      case 6:
        c.shear_type = (int32_t)pick(6) - 2, mutation = "config.shear_type";
        break;
      case 7:
        c.type_t_diffu = (int32_t)pick(5) - 1, mutation = "config.type_t_diffu";
        break;
      case 8:
        c.ndyn_substeps = (int32_t)pick(4) - 2, mutation = "config.ndyn_substeps";
        break;
      case 9:
        c.hdiff_efdt_ratio = bad_real(), mutation = "config.hdiff_efdt_ratio";
        break;
      case 10:
        c.smagorinski_scaling_height3 = pick(2) ? bad_real() : c.smagorinski_scaling_height2,
        mutation = "config.smagorinski_scaling_height3";
        break;
      case 11:
        c.velocity_boundary_diffusion_denominator = bad_real(),
        mutation = "config.velocity_boundary_diffusion_denominator";
        break;
      case 12:
        nlev = (int32_t)(pick(2) ? pick(4) - 1 : INT32_MAX), mutation = "num_levels";
        break;
      default:
        break;
    }
    if (nlev != NLEV && nlev >= 2 && nlev <= 3) nlev = NLEV; /* the arrays hold 3 levels */
    sciproxy_diffusion* h = NULL;
    const sciproxy_status made =
        sciproxy_diffusion_init_computed(pick(20) ? grid : NULL, pick(20) ? &o : NULL,
                                         pick(20) ? &c : NULL, nlev, pick(20) ? &h : NULL);
    check_status(made, "sciproxy_diffusion_init_computed", it, mutation);
    if (made != SCIPROXY_OK) continue;

    /* The fields, then a run with at most one thing broken. */
    for (int f = 0; f < 8; ++f)
      for (int i = 0; i < NC * (NLEV + 1); ++i) {
        cells[f][i] = f == 2 ? 0.8 : f == 3 ? 300 - i % 7 : 0.01 * (double)(pick(200) - 100);
        cells4[f][i] = (float)cells[f][i];
      }
    for (int i = 0; i < NE * NLEV; ++i) vn4[i] = (float)(vn[i] = 0.1 * (double)(pick(200) - 100));
    double* p[8] = {cells[0], vn, cells[2], cells[3], cells[4], cells[5], cells[6], cells[7]};
    float* p4[8] = {cells4[0], vn4,       cells4[2], cells4[3],
                    cells4[4], cells4[5], cells4[6], cells4[7]};
    double dtime = 100.0;
    sciproxy_diffusion* target = h;
    mutation = "none";
    switch (pick(8)) {
      case 0: {
        const int f = (int)pick(8);
        p[f] = NULL, p4[f] = NULL, mutation = "a NULL field";
        break;
      }
      case 1:
        dtime = bad_real(), mutation = "dtime";
        break;
      case 2: {
        const int f = (int)pick(4);
        const double bad = pick(2) ? NAN : INFINITY;
        p[f][pick(NC * NLEV)] = bad, p4[f][pick(NC * NLEV)] = (float)bad;
        mutation = "NaN in a prognostic field";
        break;
      }
      case 3:
        target = pick(2) ? NULL : (sciproxy_diffusion*)&o, mutation = "a foreign handle";
        break;
      default:
        break;
    }
    const uint64_t before = checksum(cells, sizeof cells) ^ checksum(vn, sizeof vn) ^
                            checksum(cells4, sizeof cells4) ^ checksum(vn4, sizeof vn4);
    const int linit = (int)pick(2);
    sciproxy_status status;
    /* Sometimes the precision that does not match the granule's. */
    const int use_f32 = pick(10) ? o.single_precision : !o.single_precision;
    if (use_f32)
      status = sciproxy_diffusion_run_f32(target, p4[0], p4[1], p4[2], p4[3], NULL, p4[4], p4[5],
                                          p4[6], p4[7], dtime, linit);
    else
      status = sciproxy_diffusion_run(target, p[0], p[1], p[2], p[3], NULL, p[4], p[5], p[6], p[7],
                                      dtime, linit);
    check_status(status, use_f32 ? "sciproxy_diffusion_run_f32" : "sciproxy_diffusion_run", it,
                 mutation);
    if (status != SCIPROXY_OK)
      check_unchanged(before,
                      checksum(cells, sizeof cells) ^ checksum(vn, sizeof vn) ^
                          checksum(cells4, sizeof cells4) ^ checksum(vn4, sizeof vn4),
                      "sciproxy_diffusion_run", it, mutation);

    /* The timer table and the info into odd buffers. */
    char buffer[16];
    size_t length = 0;
    const size_t sizes[] = {0, 1, sizeof buffer};
    const size_t size = sizes[pick(3)];
    status = sciproxy_diffusion_timer_table(pick(8) ? h : NULL, pick(8) ? buffer : NULL, size,
                                            pick(2) ? &length : NULL);
    check_status(status, "sciproxy_diffusion_timer_table", it, "random buffer");
    if (status == SCIPROXY_OK && size > 0 && memchr(buffer, '\0', size) == NULL) {
      fprintf(stderr, "sciproxy_diffusion_timer_table: not NUL-terminated\n");
      ++failures;
    }
    sciproxy_diffusion_info info;
    check_status(sciproxy_diffusion_get_info(h, pick(8) ? &info : NULL),
                 "sciproxy_diffusion_get_info", it, "random");
    sciproxy_diffusion_free(h);
    /* A freed handle is refused, never dereferenced. */
    if (pick(4) == 0)
      check_status(sciproxy_diffusion_run(h, p[0], p[1], p[2], p[3], NULL, p[4], p[5], p[6], p[7],
                                          dtime, linit),
                   "sciproxy_diffusion_run", it, "a freed handle");
  }
  sciproxy_diffusion_grid_free(grid);
}

static void fuzz_core(void) {
  char name[16];
  for (long it = 0; it < 40; ++it) {
    const char* device = kDevices[pick(8)];
    const size_t sizes[] = {0, 1, 2, sizeof name};
    const size_t size = sizes[pick(4)];
    char* buffer = pick(4) == 0 ? NULL : name;
    const sciproxy_status status = sciproxy_select_device(device, buffer, size);
    check_status(status, "sciproxy_select_device", it, device ? device : "device NULL");
    if (status == SCIPROXY_OK && buffer && size > 0 && memchr(buffer, '\0', size) == NULL) {
      fprintf(stderr, "sciproxy_select_device: name not NUL-terminated\n");
      ++failures;
    }
  }
  /* Recordings: an end without a begin and a second begin are refused with a message. */
  check_status(sciproxy_recording_end(), "sciproxy_recording_end without begin", 0, "");
  check_status(sciproxy_recording_begin(1), "sciproxy_recording_begin", 0, "");
  check_status(sciproxy_recording_begin(0), "sciproxy_recording_begin twice", 0, "");
  if (sciproxy_recording_json(NULL, 0) < 2 || sciproxy_recording_text(NULL, 0) > (size_t)1 << 40) {
    fprintf(stderr, "sciproxy_recording_json/text: bad lengths\n");
    ++failures;
  }
  char one[1];
  sciproxy_recording_json(one, 1);
  if (one[0] != '\0') {
    fprintf(stderr, "sciproxy_recording_json: a 1-byte buffer must hold the NUL only\n");
    ++failures;
  }
  (void)sciproxy_recording_count();
  (void)sciproxy_recording_passed();
  check_status(sciproxy_recording_end(), "sciproxy_recording_end", 0, "");
  if (!sciproxy_version() || !sciproxy_version()[0] || sciproxy_max_threads() < 1 ||
      sciproxy_cuda_device_count() < 0 || (sciproxy_cuda_compiled() & ~1) != 0) {
    fprintf(stderr, "core: version, threads or CUDA queries out of range\n");
    ++failures;
  }
}

int main(void) {
  fuzz_core();
  fuzz_stack_f64(400);
  fuzz_stack_f32(200);
  fuzz_scalar_f64(250);
  fuzz_scalar_f32(120);
  fuzz_tti_f64(150);
  fuzz_tti_f32(80);
  fuzz_tti_demo_f64(120);
  fuzz_tti_demo_f32(60);
  fuzz_specex(300);
  fuzz_diffusion(300);
  printf("fuzz_capi: %ld calls, %ld returned SCIPROXY_OK, %d failures\n", calls, ok_calls,
         failures);
  if (ok_calls == 0 || ok_calls == calls) {
    fprintf(stderr, "fuzz_capi: expected both successful and refused calls\n");
    ++failures;
  }
  return failures != 0;
}
