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
 * The per-family drivers are written once for both precisions in fuzz_capi_family.h. */
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
  printf("fuzz_capi: %ld calls, %ld returned SCIPROXY_OK, %d failures\n", calls, ok_calls,
         failures);
  if (ok_calls == 0 || ok_calls == calls) {
    fprintf(stderr, "fuzz_capi: expected both successful and refused calls\n");
    ++failures;
  }
  return failures != 0;
}
