/* The TTI propagator's C ABI from C: the dot-product test of forward and adjoint in float64
 * (1e-10 relative) on a tilted anisotropic variable-density model with sponge and free surface,
 * cpu against reference, float32 against float64 (1e-4: float32 rounding of the model and of
 * 40 steps), the default options, and error codes with messages naming the argument. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sciproxy/sciproxy.h"

static int failures = 0;
#define CHECK(cond)                                                                         \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              sciproxy_last_error());                                                       \
      ++failures;                                                                           \
    }                                                                                       \
  } while (0)

enum { N0 = 10, N1 = 11, N2 = 12, CELLS = N0 * N1 * N2, NT = 40, NSHOTS = 2, NSRC = 1, NREC = 3 };

static double vp[CELLS], b[CELLS], eps[CELLS], delta[CELLS], theta[CELLS], phi[CELLS];
static float vp32[CELLS], b32[CELLS], eps32[CELLS], delta32[CELLS], theta32[CELLS], phi32[CELLS];
static double amplitudes[NSHOTS * NSRC * NT], data[NSHOTS * NREC * NT];
static float amplitudes32[NSHOTS * NSRC * NT];
static double receivers_out[NSHOTS * NREC * NT], receivers_ref[NSHOTS * NREC * NT];
static float receivers32[NSHOTS * NREC * NT];
static double sources_out[NSHOTS * NSRC * NT];
static const int64_t sources[NSHOTS * NSRC * 3] = {3, 4, 5, 6, 5, 4};
static const int64_t receivers[NSHOTS * NREC * 3] = {0, 2, 2, 5, 6, 7, 9, 10, 11,
                                                     1, 1, 1, 4, 8, 2, 8, 3, 9};

static double uniform(void) { return rand() / (double)RAND_MAX; }

int main(void) {
  srand(3);
  for (int i = 0; i < CELLS; ++i) {
    vp[i] = 1500 + 1000 * uniform();
    b[i] = 0.4 + 0.6 * uniform();
    eps[i] = 0.25 * uniform();
    delta[i] = eps[i] - 0.2 * uniform();
    theta[i] = 3.14159 * uniform();
    phi[i] = 6.28318 * uniform();
    vp32[i] = (float)vp[i];
    b32[i] = (float)b[i];
    eps32[i] = (float)eps[i];
    delta32[i] = (float)delta[i];
    theta32[i] = (float)theta[i];
    phi32[i] = (float)phi[i];
  }
  for (int i = 0; i < NSHOTS * NSRC * NT; ++i) {
    amplitudes[i] = uniform() - 0.5;
    amplitudes32[i] = (float)amplitudes[i];
  }
  for (int i = 0; i < NSHOTS * NREC * NT; ++i) data[i] = uniform() - 0.5;

  sciproxy_tti_options opt = sciproxy_tti_default_options();
  CHECK(opt.space_order == 8 && opt.sponge_width[0] == 60 && opt.q_min == 0.1 &&
        opt.q_interior == 100 && opt.freq_q == 5 && opt.default_f == 0.85 && !opt.free_surface);
  for (int i = 0; i < 6; ++i) opt.sponge_width[i] = 3;
  opt.free_surface = 1;
  const sciproxy_tti_model_f64 model = {{N0, N1, N2}, {10, 10, 10}, vp, b, eps, delta, theta,
                                        phi, NULL};
  const sciproxy_tti_model_f32 model32 = {{N0, N1, N2}, {10, 10, 10}, vp32, b32, eps32, delta32,
                                          theta32, phi32, NULL};
  const double dt = 0.001;

  CHECK(sciproxy_tti_f64(&model, &opt, dt, NT, NSHOTS, NSRC, NREC, amplitudes, sources, receivers,
                         "cpu", receivers_out) == SCIPROXY_OK);
  CHECK(sciproxy_tti_adjoint_f64(&model, &opt, dt, NT, NSHOTS, NSRC, NREC, data, sources,
                                 receivers, "cpu", sources_out) == SCIPROXY_OK);
  double lhs = 0, rhs = 0;
  for (int i = 0; i < NSHOTS * NREC * NT; ++i) lhs += receivers_out[i] * data[i];
  for (int i = 0; i < NSHOTS * NSRC * NT; ++i) rhs += amplitudes[i] * sources_out[i];
  CHECK(fabs(lhs) > 0);
  CHECK(fabs(lhs - rhs) <= 1e-10 * fabs(lhs));
  for (int t = 0; t < NT; ++t) CHECK(receivers_out[t] == 0); /* on the free surface */

  CHECK(sciproxy_tti_f64(&model, &opt, dt, NT, NSHOTS, NSRC, NREC, amplitudes, sources, receivers,
                         "reference", receivers_ref) == SCIPROXY_OK);
  CHECK(sciproxy_tti_f32(&model32, &opt, dt, NT, NSHOTS, NSRC, NREC, amplitudes32, sources,
                         receivers, "cpu", receivers32) == SCIPROXY_OK);
  double num = 0, num32 = 0, den = 0;
  for (int i = 0; i < NSHOTS * NREC * NT; ++i) {
    num += (receivers_out[i] - receivers_ref[i]) * (receivers_out[i] - receivers_ref[i]);
    num32 += (receivers32[i] - receivers_ref[i]) * (receivers32[i] - receivers_ref[i]);
    den += receivers_ref[i] * receivers_ref[i];
  }
  CHECK(den > 0 && sqrt(num / den) <= 1e-12);
  CHECK(sqrt(num32 / den) <= 1e-4);

  /* Errors: the code and a message naming the argument. */
  CHECK(sciproxy_tti_f64(NULL, &opt, dt, NT, NSHOTS, NSRC, NREC, amplitudes, sources, receivers,
                         "cpu", receivers_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(sciproxy_last_error(), "model") != NULL);
  CHECK(sciproxy_tti_f64(&model, &opt, 1.0, NT, NSHOTS, NSRC, NREC, amplitudes, sources,
                         receivers, "cpu", receivers_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(sciproxy_last_error(), "stability limit") != NULL);
  sciproxy_tti_options bad = opt;
  bad.space_order = 6;
  CHECK(sciproxy_tti_f64(&model, &bad, dt, NT, NSHOTS, NSRC, NREC, amplitudes, sources, receivers,
                         "cpu", receivers_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(sciproxy_last_error(), "space_order") != NULL);
  vp[5] = NAN;
  CHECK(sciproxy_tti_f64(&model, &opt, dt, NT, NSHOTS, NSRC, NREC, amplitudes, sources, receivers,
                         "cpu", receivers_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(sciproxy_last_error(), "vp") != NULL);
  vp[5] = 2000;
  CHECK(sciproxy_tti_f64(&model, &opt, dt, NT, NSHOTS, NSRC, NREC, amplitudes, sources, receivers,
                         "nonsense", receivers_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(sciproxy_tti_adjoint_f64(&model, &opt, dt, NT, NSHOTS, NSRC, NREC, NULL, sources,
                                 receivers, "cpu", sources_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(sciproxy_last_error(), "receiver_data") != NULL);

  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  else printf("capi tti: all checks passed (dot product %.3g relative)\n", fabs(lhs - rhs) / fabs(lhs));
  return failures ? 1 : 0;
}
