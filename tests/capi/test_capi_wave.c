/* The scalar propagator's C ABI from C: a small 2-D forward run on cpu and reference, the
 * velocity gradient against a central finite difference in float64, float32 against float64,
 * and error codes with messages naming the argument. States in and out (test_state). Born
 * modelling: the image and the source gradient are the adjoint of the Born data (dot products in
 * float64, relative 1e-10), cpu against reference, float32 against float64, and its error codes.
 * The options struct: its defaults, and a wrong struct_size refused (test_options). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sciproxy/sciproxy.h"

enum { NZ = 24, NX = 30, NT = 60, NSHOTS = 2, NSRC = 1, NREC = 5 };

static const int64_t shape[2] = {NZ, NX};
static const double spacing[2] = {5.0, 5.0};
static const double dt = 0.001;
static const int64_t pml[4] = {6, 6, 6, 6};
static double v[NZ * NX];
static double amplitudes[NSHOTS * NSRC * NT];
static int64_t sources[NSHOTS * NSRC * 2];
static int64_t receivers[NSHOTS * NREC * 2];

/* The structs of the C ABI from the arguments this test varies, in the order of the earlier
 * positional forms. Each returns a pointer into a ring of slots, so that several can be live in
 * one call (a Born input holds a background input). */
enum { SLOTS = 16 };
#define TAKE_SLOT(type)      \
  static type ring[SLOTS];   \
  static int next = 0;       \
  type* s = &ring[next];     \
  next = (next + 1) % SLOTS; \
  memset(s, 0, sizeof *s)

#define FILL_INPUT()                                 \
  s->ndim = ndim;                                    \
  for (int d = 0; d < (ndim <= 3 ? ndim : 0); ++d) { \
    s->shape[d] = shape_[d];                         \
    s->spacing[d] = spacing_[d];                     \
  }                                                  \
  s->v = model;                                      \
  s->nmodels = nmodels;                              \
  s->dt = dt_;                                       \
  s->nt = nt;                                        \
  s->nshots = nshots;                                \
  s->nsources = nsources;                            \
  s->nreceivers = nreceivers;                        \
  s->source_amplitudes = amps;                       \
  s->source_locations = src;                         \
  s->receiver_locations = rec

static const sciproxy_scalar_input_f64* input_f64(int ndim, const int64_t* shape_,
                                                  const double* spacing_, const double* model,
                                                  int64_t nmodels, double dt_, int64_t nt,
                                                  int64_t nshots, int64_t nsources,
                                                  int64_t nreceivers, const double* amps,
                                                  const int64_t* src, const int64_t* rec) {
  TAKE_SLOT(sciproxy_scalar_input_f64);
  FILL_INPUT();
  return s;
}

static const sciproxy_scalar_input_f32* input_f32(int ndim, const int64_t* shape_,
                                                  const double* spacing_, const float* model,
                                                  int64_t nmodels, double dt_, int64_t nt,
                                                  int64_t nshots, int64_t nsources,
                                                  int64_t nreceivers, const float* amps,
                                                  const int64_t* src, const int64_t* rec) {
  TAKE_SLOT(sciproxy_scalar_input_f32);
  FILL_INPUT();
  return s;
}

static const sciproxy_scalar_born_input_f64* born_input_f64(
    const sciproxy_scalar_input_f64* background, const double* scatter_, int64_t nbg,
    const int64_t* bg) {
  TAKE_SLOT(sciproxy_scalar_born_input_f64);
  s->background = *background;
  s->scatter = scatter_;
  s->nbg_receivers = nbg;
  s->bg_receiver_locations = bg;
  return s;
}

static const sciproxy_scalar_born_input_f32* born_input_f32(
    const sciproxy_scalar_input_f32* background, const float* scatter_, int64_t nbg,
    const int64_t* bg) {
  TAKE_SLOT(sciproxy_scalar_born_input_f32);
  s->background = *background;
  s->scatter = scatter_;
  s->nbg_receivers = nbg;
  s->bg_receiver_locations = bg;
  return s;
}

/* The defaults, then what the test sets (NULL pml_width, survey_pad, origin: the defaults). */
static const sciproxy_scalar_options* options(int accuracy, const int64_t* pml_width,
                                              double pml_freq, double max_vel,
                                              const int64_t* survey_pad, const int64_t* origin,
                                              const char* device) {
  TAKE_SLOT(sciproxy_scalar_options);
  sciproxy_scalar_options_default(s);
  s->accuracy = accuracy;
  if (pml_width) memcpy(s->pml_width, pml_width, 4 * sizeof(int64_t));
  s->pml_freq = pml_freq;
  s->max_vel = max_vel;
  if (survey_pad) memcpy(s->survey_pad, survey_pad, 4 * sizeof(int64_t));
  if (origin) {
    s->has_origin = 1;
    s->origin[0] = origin[0];
    s->origin[1] = origin[1];
  }
  s->device = device;
  return s;
}

static double rel_l2(const double* a, const double* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* loss(v) = sum weights * receivers(v) */
static double loss(const double* model, const double* weights) {
  double r[NSHOTS * NREC * NT];
  double sum = 0;
  if (sciproxy_scalar_f64(input_f64(2, shape, spacing, model, 1, dt, NT, NSHOTS, NSRC, NREC,
                                    amplitudes, sources, receivers),
                          options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), NULL, r,
                          NULL) != SCIPROXY_OK)
    return NAN;
  for (int i = 0; i < NSHOTS * NREC * NT; ++i) sum += weights[i] * r[i];
  return sum;
}

/* Born: scatter in a box, background receivers beside the scattered ones. */
enum { NBG = 3 };
static double scatter[NZ * NX];
static int64_t bg_receivers[NSHOTS * NBG * 2];

static double dot(const double* a, const double* b, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

static void test_born(void) {
  static double sc[NSHOTS * NREC * NT], bg[NSHOTS * NBG * NT], sc_ref[NSHOTS * NREC * NT],
      bg_ref[NSHOTS * NBG * NT];
  static double w_sc[NSHOTS * NREC * NT], w_bg[NSHOTS * NBG * NT], image[NZ * NX],
      grad_src[NSHOTS * NSRC * NT];
  for (int i = 0; i < NZ * NX; ++i) scatter[i] = 0;
  for (int z = 14; z < 18; ++z)
    for (int x = 10; x < 20; ++x) scatter[z * NX + x] = 100.0 + 5.0 * (z + x);
  for (int s = 0; s < NSHOTS; ++s)
    for (int r = 0; r < NBG; ++r) {
      bg_receivers[(s * NBG + r) * 2] = 3 + r;
      bg_receivers[(s * NBG + r) * 2 + 1] = 5 + 7 * r + s;
    }
  for (int i = 0; i < NSHOTS * NREC * NT; ++i) w_sc[i] = cos(0.23 * i) - 0.2;
  for (int i = 0; i < NSHOTS * NBG * NT; ++i) w_bg[i] = sin(0.71 * i) + 0.3;

  CHECK(sciproxy_scalar_born_f64(
            born_input_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                     amplitudes, sources, receivers),
                           scatter, NBG, bg_receivers),
            options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), sc, bg) == SCIPROXY_OK);
  CHECK(strcmp(sciproxy_last_error(), "") == 0);
  CHECK(dot(sc, sc, NSHOTS * NREC * NT) > 0 && dot(bg, bg, NSHOTS * NBG * NT) > 0);
  /* cpu against reference. */
  CHECK(sciproxy_scalar_born_f64(
            born_input_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                     amplitudes, sources, receivers),
                           scatter, NBG, bg_receivers),
            options(4, pml, 25.0, 2500.0, NULL, NULL, "reference"), sc_ref, bg_ref) == SCIPROXY_OK);
  CHECK(rel_l2(sc, sc_ref, NSHOTS * NREC * NT) < 1e-12);
  CHECK(rel_l2(bg, bg_ref, NSHOTS * NBG * NT) < 1e-12);
  /* The background data are scalar's data at the background receivers. */
  {
    static double plain[NSHOTS * NBG * NT];
    CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NBG,
                                        amplitudes, sources, bg_receivers),
                              options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), NULL, plain,
                              NULL) == SCIPROXY_OK);
    CHECK(rel_l2(bg, plain, NSHOTS * NBG * NT) < 1e-13);
  }

  /* Dot products: <Born data, w_sc> = <scatter, image>, and, the data being linear in the
   * source amplitudes, <Born data, w_sc> + <background data, w_bg> = <amplitudes, grad_src>. */
  CHECK(sciproxy_scalar_born_gradient_f64(
            born_input_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                     amplitudes, sources, receivers),
                           scatter, NBG, bg_receivers),
            options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), w_sc, w_bg, image,
            grad_src) == SCIPROXY_OK);
  {
    const double lhs = dot(sc, w_sc, NSHOTS * NREC * NT);
    const double rhs = dot(scatter, image, NZ * NX);
    const double lhs2 = lhs + dot(bg, w_bg, NSHOTS * NBG * NT);
    const double rhs2 = dot(amplitudes, grad_src, NSHOTS * NSRC * NT);
    CHECK(fabs(lhs) > 0 && fabs(lhs2) > 0);
    CHECK(fabs(lhs - rhs) <= 1e-10 * fabs(lhs));
    CHECK(fabs(lhs2 - rhs2) <= 1e-10 * fabs(lhs2));
    if (fabs(lhs - rhs) > 1e-10 * fabs(lhs) || fabs(lhs2 - rhs2) > 1e-10 * fabs(lhs2))
      fprintf(stderr, "Born dot products: %.17g vs %.17g, %.17g vs %.17g\n", lhs, rhs, lhs2, rhs2);
  }
  /* The image does not depend on the scatter (NULL: zero) nor on the background gradient, and
   * grad_source_amplitudes may be NULL. */
  {
    static double image2[NZ * NX];
    CHECK(sciproxy_scalar_born_gradient_f64(
              born_input_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                       amplitudes, sources, receivers),
                             NULL, NBG, bg_receivers),
              options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), w_sc, NULL, image2,
              NULL) == SCIPROXY_OK);
    CHECK(rel_l2(image2, image, NZ * NX) < 1e-13);
  }

  /* float32 against float64. */
  {
    static float vf[NZ * NX], sf[NZ * NX], af[NSHOTS * NSRC * NT], scf[NSHOTS * NREC * NT],
        bgf[NSHOTS * NBG * NT], wf[NSHOTS * NREC * NT], imf[NZ * NX];
    static double sc64[NSHOTS * NREC * NT], bg64[NSHOTS * NBG * NT], im64[NZ * NX];
    for (int i = 0; i < NZ * NX; ++i) {
      vf[i] = (float)v[i];
      sf[i] = (float)scatter[i];
    }
    for (int i = 0; i < NSHOTS * NSRC * NT; ++i) af[i] = (float)amplitudes[i];
    for (int i = 0; i < NSHOTS * NREC * NT; ++i) wf[i] = (float)w_sc[i];
    CHECK(sciproxy_scalar_born_f32(
              born_input_f32(input_f32(2, shape, spacing, vf, 1, dt, NT, NSHOTS, NSRC, NREC, af,
                                       sources, receivers),
                             sf, NBG, bg_receivers),
              options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), scf, bgf) == SCIPROXY_OK);
    CHECK(sciproxy_scalar_born_gradient_f32(
              born_input_f32(input_f32(2, shape, spacing, vf, 1, dt, NT, NSHOTS, NSRC, NREC, af,
                                       sources, receivers),
                             sf, NBG, bg_receivers),
              options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), wf, NULL, imf,
              NULL) == SCIPROXY_OK);
    for (int i = 0; i < NSHOTS * NREC * NT; ++i) sc64[i] = scf[i];
    for (int i = 0; i < NSHOTS * NBG * NT; ++i) bg64[i] = bgf[i];
    for (int i = 0; i < NZ * NX; ++i) im64[i] = imf[i];
    CHECK(rel_l2(sc64, sc, NSHOTS * NREC * NT) < 1e-4);
    CHECK(rel_l2(bg64, bg, NSHOTS * NBG * NT) < 1e-4);
    CHECK(rel_l2(im64, image, NZ * NX) < 1e-4);
  }

  /* Errors: a code and a message naming the argument. */
  {
    static double r[NSHOTS * NREC * NT], rb[NSHOTS * NBG * NT], bad_scatter[NZ * NX];
    int64_t outside[NSHOTS * NBG * 2];
    memcpy(outside, bg_receivers, sizeof bg_receivers);
    outside[2 * NBG - 1] = NX;
    memcpy(bad_scatter, scatter, sizeof scatter);
    bad_scatter[7] = NAN;
    CHECK(sciproxy_scalar_born_f64(
              born_input_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                       amplitudes, sources, receivers),
                             NULL, NBG, bg_receivers),
              options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), r,
              rb) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "scatter", 7) == 0);
    CHECK(sciproxy_scalar_born_f64(
              born_input_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                       amplitudes, sources, receivers),
                             bad_scatter, NBG, bg_receivers),
              options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), r,
              rb) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "scatter", 7) == 0 &&
          strstr(sciproxy_last_error(), "finite") != NULL);
    CHECK(sciproxy_scalar_born_f64(
              born_input_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                       amplitudes, sources, receivers),
                             scatter, NBG, outside),
              options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), r,
              rb) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "bg_receiver_locations", 21) == 0);
    CHECK(sciproxy_scalar_born_f64(
              born_input_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                       amplitudes, sources, receivers),
                             scatter, -1, bg_receivers),
              options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), r,
              rb) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "nbg_receivers", 13) == 0);
    CHECK(sciproxy_scalar_born_f64(
              born_input_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                       amplitudes, sources, receivers),
                             scatter, NBG, NULL),
              options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), r,
              rb) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "bg_receiver_locations", 21) == 0);
    CHECK(sciproxy_scalar_born_f64(
              born_input_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                       amplitudes, sources, receivers),
                             scatter, NBG, bg_receivers),
              options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), r,
              NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "bg_receiver_amplitudes", 22) == 0);
    CHECK(sciproxy_scalar_born_gradient_f64(
              born_input_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                       amplitudes, sources, receivers),
                             scatter, NBG, bg_receivers),
              options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), w_sc, w_bg, NULL,
              grad_src) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "grad_scatter", 12) == 0);
    CHECK(sciproxy_scalar_born_gradient_f64(
              born_input_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                       amplitudes, sources, receivers),
                             scatter, NBG, bg_receivers),
              options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), NULL, w_bg, image,
              grad_src) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "grad_receiver_amplitudes", 24) == 0);
    CHECK(sciproxy_scalar_born_f64(
              born_input_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                       amplitudes, sources, receivers),
                             scatter, NBG, bg_receivers),
              options(4, pml, 25.0, 2500.0, NULL, NULL, "tpu"), r,
              rb) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "device", 6) == 0);
    /* A successful call clears the message. */
    CHECK(sciproxy_scalar_born_f64(
              born_input_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                       amplitudes, sources, receivers),
                             scatter, NBG, bg_receivers),
              options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), r, rb) == SCIPROXY_OK);
    CHECK(strcmp(sciproxy_last_error(), "") == 0);
  }
}

/* States (scalar_ex, scalar_gradient_ex, scalar_state_shape): a run of NT2 samples against two
 * runs of HALF samples, the second started from the first's final state (step ratio 1, so that
 * the split does not change the resampling), on the whole model and on a survey_pad window
 * (relative 1e-12 in float64); the gradient with respect to the initial state against the loss,
 * which is linear in the state without sources, and with grad_final against <grad_final, final
 * state> (relative 1e-10); and errors naming the argument. */
enum { NT2 = 80, HALF = NT2 / 2, NFIELDS = 6 };

typedef struct {
  double* memory;
  sciproxy_scalar_state_f64 state;
} owned_state;

/* <a, b> over the wavefields and previous wavefields of two states of `size` cells. */
static double state_dot(const sciproxy_scalar_state_f64* a, const sciproxy_scalar_state_f64* b,
                        size_t size) {
  return dot(a->wavefield, b->wavefield, size) +
         dot(a->previous_wavefield, b->previous_wavefield, size);
}

/* got against a nonzero want, to relative tol; the two values are printed under label if not. */
static void check_relative(const char* label, double want, double got, double tol) {
  CHECK(fabs(want) > 0);
  CHECK(fabs(got - want) <= tol * fabs(want));
  if (fabs(got - want) > tol * fabs(want))
    fprintf(stderr, "%s: expected %.15g, got %.15g\n", label, want, got);
}

static owned_state new_state(const int64_t* n) {
  owned_state o;
  const size_t size = (size_t)NSHOTS * (size_t)(n[0] * n[1]);
  o.memory = calloc(NFIELDS * size, sizeof(double));
  memset(&o.state, 0, sizeof o.state);
  o.state.padded_shape[0] = n[0];
  o.state.padded_shape[1] = n[1];
  o.state.padded_shape[2] = 1;
  o.state.wavefield = o.memory;
  o.state.previous_wavefield = o.memory + size;
  for (int d = 0; d < 2; ++d) {
    o.state.psi[d] = o.memory + (2 + d) * size;
    o.state.zeta[d] = o.memory + (4 + d) * size;
  }
  return o;
}

static void test_state(void) {
  const double pi = 3.14159265358979323846, dt2 = 0.0004;
  static double amp[NSHOTS * NSRC * NT2], first[NSHOTS * NSRC * HALF], second[NSHOTS * NSRC * HALF];
  static double full[NSHOTS * NREC * NT2], r1[NSHOTS * NREC * HALF], r2[NSHOTS * NREC * HALF],
      joined[NSHOTS * NREC * NT2];
  static double weights[NSHOTS * NREC * NT2], grad_v[NZ * NX];
  const int64_t pad[4] = {3, 3, 4, 4};
  for (int tr = 0; tr < NSHOTS * NSRC; ++tr)
    for (int t = 0; t < NT2; ++t) {
      const double a = pi * 25.0 * (t * dt2 - 0.012 - 0.002 * tr);
      amp[tr * NT2 + t] = (1 - 2 * a * a) * exp(-a * a);
      if (t < HALF)
        first[tr * HALF + t] = amp[tr * NT2 + t];
      else
        second[tr * HALF + t - HALF] = amp[tr * NT2 + t];
    }
  for (int window = 0; window < 2; ++window) {
    const int64_t* survey_pad = window ? pad : NULL;
    int64_t n[2] = {0, 0};
    owned_state mid;
    CHECK(sciproxy_scalar_state_shape_f64(input_f64(2, shape, spacing, v, 1, dt2, NT2, NSHOTS, NSRC,
                                                    NREC, amp, sources, receivers),
                                          options(4, pml, 25.0, 2500.0, survey_pad, NULL, "auto"),
                                          n) == SCIPROXY_OK);
    /* The window + 6 PML + 2 halo cells per side. Locations span depths 1-2 and columns 3-27:
     * survey_pad {3, 3, 4, 4} keeps depths [0, 6) and every column. */
    CHECK(n[0] == (window ? 6 : NZ) + 16 && n[1] == NX + 16);
    {
      static float vf[NZ * NX], af[NSHOTS * NSRC * NT2];
      int64_t nf[2] = {0, 0};
      for (int i = 0; i < NZ * NX; ++i) vf[i] = (float)v[i];
      for (int i = 0; i < NSHOTS * NSRC * NT2; ++i) af[i] = (float)amp[i];
      CHECK(sciproxy_scalar_state_shape_f32(input_f32(2, shape, spacing, vf, 1, dt2, NT2, NSHOTS,
                                                      NSRC, NREC, af, sources, receivers),
                                            options(4, pml, 25.0, 2500.0, survey_pad, NULL, "auto"),
                                            nf) == SCIPROXY_OK);
      CHECK(nf[0] == n[0] && nf[1] == n[1]);
    }
    mid = new_state(n);
    CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt2, NT2, NSHOTS, NSRC, NREC, amp,
                                        sources, receivers),
                              options(4, pml, 25.0, 2500.0, survey_pad, NULL, "cpu"), NULL, full,
                              NULL) == SCIPROXY_OK);
    CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt2, HALF, NSHOTS, NSRC, NREC,
                                        first, sources, receivers),
                              options(4, pml, 25.0, 2500.0, survey_pad, NULL, "cpu"), NULL, r1,
                              &mid.state) == SCIPROXY_OK);
    CHECK(mid.state.padded_shape[0] == n[0] && mid.state.padded_shape[1] == n[1]);
    CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt2, HALF, NSHOTS, NSRC, NREC,
                                        second, sources, receivers),
                              options(4, pml, 25.0, 2500.0, survey_pad, NULL, "cpu"), &mid.state,
                              r2, NULL) == SCIPROXY_OK);
    for (int tr = 0; tr < NSHOTS * NREC; ++tr)
      for (int t = 0; t < NT2; ++t)
        joined[tr * NT2 + t] = t < HALF ? r1[tr * HALF + t] : r2[tr * HALF + t - HALF];
    CHECK(dot(full, full, NSHOTS * NREC * NT2) > 0);
    CHECK(rel_l2(joined, full, NSHOTS * NREC * NT2) < 1e-12);

    /* d loss / d initial state: without sources the loss is linear in the initial state,
     * loss(initial) = <grad_initial, initial> (with them, the difference of two losses lost
     * digits: 3e-10 relative on the reference backend). */
    if (window == 0) {
      static double silent[NSHOTS * NSRC * NT2];
      owned_state grad = new_state(n), start = new_state(n);
      const size_t size = (size_t)NSHOTS * (size_t)(n[0] * n[1]);
      double changed = 0, predicted = 0;
      for (int i = 0; i < NSHOTS * NREC * NT2; ++i) weights[i] = cos(0.11 * i) + 0.2;
      CHECK(sciproxy_scalar_gradient_f64(input_f64(2, shape, spacing, v, 1, dt2, NT2, NSHOTS, NSRC,
                                                   NREC, silent, sources, receivers),
                                         options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), NULL,
                                         weights, NULL, grad_v, NULL, &grad.state) == SCIPROXY_OK);
      for (size_t i = 0; i < size; ++i) {
        start.state.wavefield[i] = 1e-3 * sin(0.05 * (double)i);
        start.state.previous_wavefield[i] = 1e-3 * cos(0.07 * (double)i);
      }
      start.state.psi[0] = start.state.psi[1] = NULL; /* NULL arrays: zero */
      start.state.zeta[0] = start.state.zeta[1] = NULL;
      CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt2, NT2, NSHOTS, NSRC, NREC,
                                          silent, sources, receivers),
                                options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), &start.state,
                                joined, NULL) == SCIPROXY_OK);
      changed = dot(weights, joined, NSHOTS * NREC * NT2);
      predicted = state_dot(&grad.state, &start.state, size);
      check_relative("initial state: the loss the gradient predicts, and the loss", predicted,
                     changed, 1e-10);

      /* grad_final: d <G, final state> / d initial state, with no loss on the receivers:
       * <G, final(initial)> = <grad_initial, initial>. */
      {
        static double nothing[NSHOTS * NREC * NT2];
        owned_state g_final = new_state(n), end = new_state(n), grad2 = new_state(n);
        for (size_t i = 0; i < size; ++i) {
          g_final.state.wavefield[i] = sin(0.03 * (double)i);
          g_final.state.previous_wavefield[i] = cos(0.02 * (double)i);
        }
        CHECK(sciproxy_scalar_gradient_f64(input_f64(2, shape, spacing, v, 1, dt2, NT2, NSHOTS,
                                                     NSRC, NREC, silent, sources, receivers),
                                           options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), NULL,
                                           nothing, &g_final.state, grad_v, NULL,
                                           &grad2.state) == SCIPROXY_OK);
        CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt2, NT2, NSHOTS, NSRC, NREC,
                                            silent, sources, receivers),
                                  options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), &start.state,
                                  joined, &end.state) == SCIPROXY_OK);
        check_relative("grad_final: <G, final>, and <grad_initial, initial>",
                       state_dot(&g_final.state, &end.state, size),
                       state_dot(&grad2.state, &start.state, size), 1e-10);
        free(g_final.memory);
        free(end.memory);
        free(grad2.memory);
      }

      /* Errors: a state of another shape, an origin without a state. */
      start.state.padded_shape[0] = n[0] + 1;
      CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt2, NT2, NSHOTS, NSRC, NREC,
                                          amp, sources, receivers),
                                options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), &start.state,
                                joined, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
      CHECK(strstr(sciproxy_last_error(), "wavefield_0 (and every initial wavefield") != NULL);
      {
        const int64_t origin[2] = {0, 0};
        CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt2, NT2, NSHOTS, NSRC, NREC,
                                            amp, sources, receivers),
                                  options(4, pml, 25.0, 2500.0, NULL, origin, "cpu"), NULL, joined,
                                  NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
        CHECK(strstr(sciproxy_last_error(), "origin") != NULL);
      }
      CHECK(sciproxy_scalar_state_shape_f64(input_f64(2, shape, spacing, v, 1, dt2, NT2, NSHOTS,
                                                      NSRC, NREC, amp, sources, receivers),
                                            options(4, pml, 25.0, 2500.0, NULL, NULL, "auto"),
                                            NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
      CHECK(strstr(sciproxy_last_error(), "padded_shape") != NULL);
      free(grad.memory);
      free(start.memory);
    }
    free(mid.memory);
  }
}

/* The options' defaults are the library's, and a struct_size this library does not know (a
 * caller built against another layout) is refused, naming it; NULL options are the defaults. */
static void test_options(void) {
  sciproxy_scalar_options o;
  double r[NSHOTS * NREC * NT], r_default[NSHOTS * NREC * NT];
  const sciproxy_scalar_input_f64* in = input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC,
                                                  NREC, amplitudes, sources, receivers);
  memset(&o, 0xff, sizeof o);
  sciproxy_scalar_options_default(&o);
  CHECK(o.struct_size == sizeof(sciproxy_scalar_options));
  CHECK(strcmp(o.device, "auto") == 0 && o.accuracy == 4 && o.pml_freq == 25.0 &&
        o.max_vel == 0.0 && !o.has_origin && o.model_gradient_sampling_interval == 1 &&
        o.storage == SCIPROXY_STORAGE_DEVICE && !o.storage_compression &&
        o.storage_directory == NULL && o.nparallel == 0 && !o.time_taper);
  for (int i = 0; i < 6; ++i) CHECK(o.pml_width[i] == 20 && o.survey_pad[i] == -1);
  CHECK(sciproxy_scalar_f64(in, &o, NULL, r_default, NULL) == SCIPROXY_OK);
  CHECK(sciproxy_scalar_f64(in, NULL, NULL, r, NULL) == SCIPROXY_OK);
  CHECK(memcmp(r, r_default, sizeof r) == 0);
  o.struct_size = sizeof o - 8;
  CHECK(sciproxy_scalar_f64(in, &o, NULL, r, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "options.struct_size", 19) == 0);
  CHECK(sciproxy_scalar_gradient_f64(in, &o, NULL, r, NULL, r, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "options.struct_size", 19) == 0);
  o.struct_size = 0;
  CHECK(sciproxy_scalar_f64(in, &o, NULL, r, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  sciproxy_scalar_options_default(&o);
  o.storage = 7;
  CHECK(sciproxy_scalar_f64(in, &o, NULL, r, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "storage", 7) == 0);
  /* Disk storage: a missing directory is refused by C's name for it; NULL (the default) is the
   * system's temporary directory, where the files leave nothing behind. */
  sciproxy_scalar_options_default(&o);
  o.storage = SCIPROXY_STORAGE_DISK;
  o.storage_directory = "/nonexistent/sciproxy/directory";
  CHECK(sciproxy_scalar_gradient_f64(in, &o, NULL, r, NULL, r, NULL, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "options.storage_directory", 25) == 0);
  o.storage_directory = NULL;
  {
    double grad_v[NZ * NX];
    CHECK(sciproxy_scalar_gradient_f64(in, &o, NULL, r_default, NULL, grad_v, NULL, NULL) ==
          SCIPROXY_OK);
  }
  CHECK(sciproxy_scalar_f64(NULL, NULL, NULL, r, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "input", 5) == 0);
}

int main(void) {
  const double pi = 3.14159265358979323846;
  for (int z = 0; z < NZ; ++z)
    for (int x = 0; x < NX; ++x) v[z * NX + x] = z < NZ / 2 ? 1500.0 : 2000.0 + 10.0 * x;
  for (int s = 0; s < NSHOTS; ++s) {
    for (int t = 0; t < NT; ++t) { /* 25 Hz Ricker, peak at 0.04 s */
      const double a = pi * 25.0 * (t * dt - 0.04);
      amplitudes[s * NT + t] = (1 - 2 * a * a) * exp(-a * a);
    }
    sources[2 * s] = 2;
    sources[2 * s + 1] = 8 + 10 * s;
    for (int r = 0; r < NREC; ++r) {
      receivers[(s * NREC + r) * 2] = 1;
      receivers[(s * NREC + r) * 2 + 1] = 3 + 6 * r;
    }
  }

  /* Forward: cpu against reference, and float32 against float64. */
  double out_cpu[NSHOTS * NREC * NT], out_ref[NSHOTS * NREC * NT];
  CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                      amplitudes, sources, receivers),
                            options(4, pml, 25.0, 0.0, NULL, NULL, "cpu"), NULL, out_cpu,
                            NULL) == SCIPROXY_OK);
  CHECK(strcmp(sciproxy_last_error(), "") == 0);
  CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                      amplitudes, sources, receivers),
                            options(4, pml, 25.0, 0.0, NULL, NULL, "reference"), NULL, out_ref,
                            NULL) == SCIPROXY_OK);
  {
    double norm = 0;
    for (int i = 0; i < NSHOTS * NREC * NT; ++i) norm += out_ref[i] * out_ref[i];
    CHECK(norm > 0);
    CHECK(rel_l2(out_cpu, out_ref, NSHOTS * NREC * NT) < 1e-12);
  }
  {
    /* autotune: the cpu forward's sizes chosen by timing (cached in a directory of the test's
     * own); the same bits. */
    double out_tuned[NSHOTS * NREC * NT];
    sciproxy_scalar_options o = *options(4, pml, 25.0, 0.0, NULL, NULL, "cpu");
    CHECK(o.autotune == 0);
    o.autotune = 1;
    CHECK(use_temporary_tuning_cache());
    CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                        amplitudes, sources, receivers),
                              &o, NULL, out_tuned, NULL) == SCIPROXY_OK);
    CHECK(memcmp(out_tuned, out_cpu, sizeof out_cpu) == 0);
    CHECK(tuning_cache_written());
    remove_tuning_cache();
  }
  {
    float vf[NZ * NX], af[NSHOTS * NSRC * NT], rf[NSHOTS * NREC * NT];
    double r64[NSHOTS * NREC * NT];
    for (int i = 0; i < NZ * NX; ++i) vf[i] = (float)v[i];
    for (int i = 0; i < NSHOTS * NSRC * NT; ++i) af[i] = (float)amplitudes[i];
    CHECK(
        sciproxy_scalar_f32(
            input_f32(2, shape, spacing, vf, 1, dt, NT, NSHOTS, NSRC, NREC, af, sources, receivers),
            options(4, pml, 25.0, 0.0, NULL, NULL, "cpu"), NULL, rf, NULL) == SCIPROXY_OK);
    for (int i = 0; i < NSHOTS * NREC * NT; ++i) r64[i] = rf[i];
    CHECK(rel_l2(r64, out_ref, NSHOTS * NREC * NT) < 1e-4);
  }

  /* Gradient of loss = sum w * receivers against central differences at a few cells. */
  {
    static double weights[NSHOTS * NREC * NT], grad_v[NZ * NX], grad_src[NSHOTS * NSRC * NT];
    static double model[NZ * NX];
    const int cells[3] = {5 * NX + 10, 14 * NX + 4, 20 * NX + 25};
    for (int i = 0; i < NSHOTS * NREC * NT; ++i) weights[i] = sin(0.37 * i) + 0.1;
    CHECK(sciproxy_scalar_gradient_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC,
                                                 NREC, amplitudes, sources, receivers),
                                       options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), NULL,
                                       weights, NULL, grad_v, grad_src, NULL) == SCIPROXY_OK);
    for (int k = 0; k < 3; ++k) {
      const double h = 1e-3 * v[cells[k]];
      double fd;
      memcpy(model, v, sizeof v);
      model[cells[k]] += h;
      fd = loss(model, weights);
      model[cells[k]] -= 2 * h;
      fd = (fd - loss(model, weights)) / (2 * h);
      CHECK(fabs(fd - grad_v[cells[k]]) <= 1e-4 * fabs(fd) + 1e-12);
      if (fabs(fd - grad_v[cells[k]]) > 1e-4 * fabs(fd) + 1e-12)
        fprintf(stderr, "cell %d: gradient %.10g, finite difference %.10g\n", cells[k],
                grad_v[cells[k]], fd);
    }
    /* The receivers are linear in the source amplitudes: loss = <grad_src, amplitudes>. */
    {
      double dot = 0;
      const double l = loss(v, weights);
      for (int i = 0; i < NSHOTS * NSRC * NT; ++i) dot += grad_src[i] * amplitudes[i];
      CHECK(fabs(dot - l) <= 1e-8 * fabs(l));
    }
    /* grad_source_amplitudes may be NULL. */
    CHECK(sciproxy_scalar_gradient_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC,
                                                 NREC, amplitudes, sources, receivers),
                                       options(4, pml, 25.0, 2500.0, NULL, NULL, "cpu"), NULL,
                                       weights, NULL, grad_v, NULL, NULL) == SCIPROXY_OK);
  }

  /* Errors: a code and a message naming the argument. */
  {
    double r[NSHOTS * NREC * NT];
    int64_t outside[NSHOTS * NSRC * 2];
    const double negative[2] = {-5.0, 5.0};
    memcpy(outside, sources, sizeof sources);
    outside[1] = NX + 3;
    CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                        amplitudes, sources, receivers),
                              options(5, pml, 25.0, 0.0, NULL, NULL, "cpu"), NULL, r,
                              NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(sciproxy_last_error(), "accuracy") != NULL);
    CHECK(sciproxy_scalar_f64(input_f64(4, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                        amplitudes, sources, receivers),
                              options(4, pml, 25.0, 0.0, NULL, NULL, "cpu"), NULL, r,
                              NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "ndim", 4) == 0);
    CHECK(sciproxy_scalar_f64(input_f64(2, shape, negative, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                        amplitudes, sources, receivers),
                              options(4, pml, 25.0, 0.0, NULL, NULL, "cpu"), NULL, r,
                              NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(sciproxy_last_error(), "spacing") != NULL);
    CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                        amplitudes, outside, receivers),
                              options(4, pml, 25.0, 0.0, NULL, NULL, "cpu"), NULL, r,
                              NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(sciproxy_last_error(), "source_locations") != NULL);
    CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 3, dt, NT, NSHOTS, NSRC, NREC,
                                        amplitudes, sources, receivers),
                              options(4, pml, 25.0, 0.0, NULL, NULL, "cpu"), NULL, r,
                              NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "nmodels", 7) == 0);
    CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, NULL, 1, dt, NT, NSHOTS, NSRC, NREC,
                                        amplitudes, sources, receivers),
                              options(4, pml, 25.0, 0.0, NULL, NULL, "cpu"), NULL, r,
                              NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "v: expected", 11) == 0);
    CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                        amplitudes, sources, receivers),
                              options(4, pml, 25.0, 0.0, NULL, NULL, "gpu"), NULL, r,
                              NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "device", 6) == 0);
    CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                        amplitudes, sources, receivers),
                              options(4, pml, 25.0, 0.0, NULL, NULL, NULL), NULL, r,
                              NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    {
      const sciproxy_status s =
          sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                        amplitudes, sources, receivers),
                              options(4, pml, 25.0, 0.0, NULL, NULL, "cuda:99"), NULL, r, NULL);
      CHECK(s == SCIPROXY_ERROR_NOT_COMPILED || s == SCIPROXY_ERROR_DEVICE_UNAVAILABLE);
    }
    /* A successful call clears the message. */
    CHECK(sciproxy_scalar_f64(input_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                        amplitudes, sources, receivers),
                              options(4, pml, 25.0, 0.0, NULL, NULL, "cpu"), NULL, r,
                              NULL) == SCIPROXY_OK);
    CHECK(strcmp(sciproxy_last_error(), "") == 0);
  }

  test_born();
  test_state();
  test_options();

  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("capi wave: all checks passed\n");
  return 0;
}
