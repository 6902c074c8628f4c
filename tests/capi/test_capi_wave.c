/* The scalar propagator's C ABI from C: a small 2-D forward run on cpu and reference, the
 * velocity gradient against a central finite difference in float64, float32 against float64,
 * and error codes with messages naming the argument. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sciproxy/sciproxy.h"

static int failures = 0;
#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              sciproxy_last_error());                                            \
      ++failures;                                                                \
    }                                                                            \
  } while (0)

enum { NZ = 24, NX = 30, NT = 60, NSHOTS = 2, NSRC = 1, NREC = 5 };

static const int64_t shape[2] = {NZ, NX};
static const double spacing[2] = {5.0, 5.0};
static const double dt = 0.001;
static const int64_t pml[4] = {6, 6, 6, 6};
static double v[NZ * NX];
static double amplitudes[NSHOTS * NSRC * NT];
static int64_t sources[NSHOTS * NSRC * 2];
static int64_t receivers[NSHOTS * NREC * 2];

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
  if (sciproxy_scalar_f64(2, shape, spacing, model, 1, dt, NT, NSHOTS, NSRC, NREC, amplitudes,
                          sources, receivers, 4, pml, 25.0, 2500.0, "cpu", r) != SCIPROXY_OK)
    return NAN;
  for (int i = 0; i < NSHOTS * NREC * NT; ++i) sum += weights[i] * r[i];
  return sum;
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
  CHECK(sciproxy_scalar_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC, amplitudes, sources,
                            receivers, 4, pml, 25.0, 0.0, "cpu", out_cpu) == SCIPROXY_OK);
  CHECK(strcmp(sciproxy_last_error(), "") == 0);
  CHECK(sciproxy_scalar_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC, amplitudes, sources,
                            receivers, 4, pml, 25.0, 0.0, "reference", out_ref) == SCIPROXY_OK);
  {
    double norm = 0;
    for (int i = 0; i < NSHOTS * NREC * NT; ++i) norm += out_ref[i] * out_ref[i];
    CHECK(norm > 0);
    CHECK(rel_l2(out_cpu, out_ref, NSHOTS * NREC * NT) < 1e-12);
  }
  {
    float vf[NZ * NX], af[NSHOTS * NSRC * NT], rf[NSHOTS * NREC * NT];
    double r64[NSHOTS * NREC * NT];
    for (int i = 0; i < NZ * NX; ++i) vf[i] = (float)v[i];
    for (int i = 0; i < NSHOTS * NSRC * NT; ++i) af[i] = (float)amplitudes[i];
    CHECK(sciproxy_scalar_f32(2, shape, spacing, vf, 1, dt, NT, NSHOTS, NSRC, NREC, af, sources,
                              receivers, 4, pml, 25.0, 0.0, "cpu", rf) == SCIPROXY_OK);
    for (int i = 0; i < NSHOTS * NREC * NT; ++i) r64[i] = rf[i];
    CHECK(rel_l2(r64, out_ref, NSHOTS * NREC * NT) < 1e-4);
  }

  /* Gradient of loss = sum w * receivers against central differences at a few cells. */
  {
    static double weights[NSHOTS * NREC * NT], grad_v[NZ * NX], grad_src[NSHOTS * NSRC * NT];
    static double model[NZ * NX];
    const int cells[3] = {5 * NX + 10, 14 * NX + 4, 20 * NX + 25};
    for (int i = 0; i < NSHOTS * NREC * NT; ++i) weights[i] = sin(0.37 * i) + 0.1;
    CHECK(sciproxy_scalar_gradient_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                       amplitudes, sources, receivers, 4, pml, 25.0, 2500.0, "cpu",
                                       weights, grad_v, grad_src) == SCIPROXY_OK);
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
    CHECK(sciproxy_scalar_gradient_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC,
                                       amplitudes, sources, receivers, 4, pml, 25.0, 2500.0, "cpu",
                                       weights, grad_v, NULL) == SCIPROXY_OK);
  }

  /* Errors: a code and a message naming the argument. */
  {
    double r[NSHOTS * NREC * NT];
    int64_t outside[NSHOTS * NSRC * 2];
    const double negative[2] = {-5.0, 5.0};
    memcpy(outside, sources, sizeof sources);
    outside[1] = NX + 3;
    CHECK(sciproxy_scalar_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC, amplitudes,
                              sources, receivers, 5, pml, 25.0, 0.0, "cpu", r) ==
          SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(sciproxy_last_error(), "accuracy") != NULL);
    CHECK(sciproxy_scalar_f64(4, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC, amplitudes,
                              sources, receivers, 4, pml, 25.0, 0.0, "cpu", r) ==
          SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "ndim", 4) == 0);
    CHECK(sciproxy_scalar_f64(2, shape, negative, v, 1, dt, NT, NSHOTS, NSRC, NREC, amplitudes,
                              sources, receivers, 4, pml, 25.0, 0.0, "cpu", r) ==
          SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(sciproxy_last_error(), "spacing") != NULL);
    CHECK(sciproxy_scalar_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC, amplitudes,
                              outside, receivers, 4, pml, 25.0, 0.0, "cpu", r) ==
          SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(sciproxy_last_error(), "source_locations") != NULL);
    CHECK(sciproxy_scalar_f64(2, shape, spacing, v, 3, dt, NT, NSHOTS, NSRC, NREC, amplitudes,
                              sources, receivers, 4, pml, 25.0, 0.0, "cpu", r) ==
          SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "nmodels", 7) == 0);
    CHECK(sciproxy_scalar_f64(2, shape, spacing, NULL, 1, dt, NT, NSHOTS, NSRC, NREC, amplitudes,
                              sources, receivers, 4, pml, 25.0, 0.0, "cpu", r) ==
          SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "v: expected", 11) == 0);
    CHECK(sciproxy_scalar_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC, amplitudes,
                              sources, receivers, 4, pml, 25.0, 0.0, "gpu", r) ==
          SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "device", 6) == 0);
    CHECK(sciproxy_scalar_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC, amplitudes,
                              sources, receivers, 4, pml, 25.0, 0.0, NULL, r) ==
          SCIPROXY_ERROR_INVALID_ARGUMENT);
    {
      const sciproxy_status s =
          sciproxy_scalar_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC, amplitudes,
                              sources, receivers, 4, pml, 25.0, 0.0, "cuda:99", r);
      CHECK(s == SCIPROXY_ERROR_NOT_COMPILED || s == SCIPROXY_ERROR_DEVICE_UNAVAILABLE);
    }
    /* A successful call clears the message. */
    CHECK(sciproxy_scalar_f64(2, shape, spacing, v, 1, dt, NT, NSHOTS, NSRC, NREC, amplitudes,
                              sources, receivers, 4, pml, 25.0, 0.0, "cpu", r) == SCIPROXY_OK);
    CHECK(strcmp(sciproxy_last_error(), "") == 0);
  }

  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("capi wave: all checks passed\n");
  return 0;
}
