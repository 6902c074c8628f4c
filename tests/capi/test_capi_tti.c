/* The TTI propagator's C ABI from C: the dot-product test of forward and adjoint in float64
 * (1e-10 relative) on a tilted anisotropic variable-density model with sponge and free surface,
 * cpu against reference, float32 against float64 (1e-4: float32 rounding of the model and of
 * 40 steps), the default options and a wrong struct_size, the stability limit, error codes with
 * messages naming the argument; and the workshop demo operator (cpu against reference, constant
 * materials against the same values as fields, finite non-zero output, errors). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sciproxy/sciproxy.h"

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
                                                     1, 1, 1, 4, 8, 2, 8, 3,  9};

static double uniform(void) {
  return rand() / (double)RAND_MAX;
}

/* The workshop demo: a 16^3 grid, 30 steps at half the stability limit, a Ricker source. */
enum { D = 16, DCELLS = D * D * D, DNT = 30 };

static void test_demo(void) {
  static double u[DCELLS], u_prev[DCELLS], u_ref[DCELLS], u_fields[DCELLS], src[DNT];
  static double vp_field[DCELLS];
  static float u32[DCELLS], src32[DNT];
  const double pi = 3.14159265358979323846;
  sciproxy_tti_demo_options o;
  sciproxy_tti_demo_input_f64 in;
  double limit = 0, num = 0, den = 0;
  memset(&o, 0xff, sizeof o);
  sciproxy_tti_demo_options_default(&o);
  CHECK(o.struct_size == sizeof o && strcmp(o.device, "auto") == 0 && o.space_order == 8 &&
        o.form == SCIPROXY_TTI_DEMO_FUSED && o.nparallel == 0 && o.autotune == 0 &&
        o.comm == SCIPROXY_NO_COMM && o.process_grid[0] == 0 && o.process_grid[1] == 0 &&
        o.process_grid[2] == 0 && o.results == 0);
  memset(&in, 0, sizeof in);
  for (int d = 0; d < 3; ++d) {
    in.shape[d] = D;
    in.spacing[d] = 10;
    in.source_position[d] = 75;
  }
  in.nt = DNT;
  in.vp = 1500;
  in.b = 1;
  in.epsilon = 0.2;
  in.eta = 0.4;
  in.f = 0.85;
  in.theta = 0.5;
  in.phi = 0.3;
  in.damping = 0;
  CHECK(sciproxy_tti_demo_dt_limit_f64(&in, &o, &limit) == SCIPROXY_OK);
  CHECK(limit > 0 && limit < 1);
  in.dt = 0.5 * limit;
  for (int t = 0; t < DNT; ++t) { /* 30 Hz Ricker, peak at 1 / 30 s */
    const double a = pi * 30.0 * (t * in.dt - 1.0 / 30.0);
    src[t] = (1 - 2 * a * a) * exp(-a * a);
    src32[t] = (float)src[t];
  }
  in.source_amplitudes = src;
  o.device = "cpu";
  CHECK(sciproxy_tti_demo_f64(&in, &o, u, u_prev) == SCIPROXY_OK);
  o.device = "reference";
  CHECK(sciproxy_tti_demo_f64(&in, &o, u_ref, NULL) == SCIPROXY_OK);
  for (int i = 0; i < DCELLS; ++i) {
    CHECK(isfinite(u[i]));
    num += (u[i] - u_ref[i]) * (u[i] - u_ref[i]);
    den += u_ref[i] * u_ref[i];
  }
  CHECK(den > 0 && sqrt(num / den) <= 1e-10);
  /* A material given as a field of the same value gives the same run. */
  for (int i = 0; i < DCELLS; ++i) vp_field[i] = 1500;
  in.vp = -1; /* not read when the field is given */
  in.vp_field = vp_field;
  o.device = "cpu";
  CHECK(sciproxy_tti_demo_f64(&in, &o, u_fields, NULL) == SCIPROXY_OK);
  CHECK(memcmp(u_fields, u, sizeof u) == 0);
  /* autotune: the fused kernel's sizes chosen by timing (cached in a directory of the test's
   * own); the same bits. */
  CHECK(use_temporary_tuning_cache());
  o.autotune = 1;
  memset(u_fields, 0, sizeof u_fields);
  CHECK(sciproxy_tti_demo_f64(&in, &o, u_fields, NULL) == SCIPROXY_OK);
  CHECK(memcmp(u_fields, u, sizeof u) == 0);
  CHECK(tuning_cache_written());
  remove_tuning_cache();
  o.autotune = 0;
  in.vp_field = NULL;
  in.vp = 1500;
  /* float32 against float64. */
  {
    sciproxy_tti_demo_input_f32 in32;
    memset(&in32, 0, sizeof in32);
    memcpy(in32.shape, in.shape, sizeof in.shape);
    memcpy(in32.spacing, in.spacing, sizeof in.spacing);
    memcpy(in32.source_position, in.source_position, sizeof in.source_position);
    in32.dt = in.dt;
    in32.nt = in.nt;
    in32.vp = in.vp;
    in32.b = in.b;
    in32.epsilon = in.epsilon;
    in32.eta = in.eta;
    in32.f = in.f;
    in32.theta = in.theta;
    in32.phi = in.phi;
    in32.source_amplitudes = src32;
    CHECK(sciproxy_tti_demo_f32(&in32, NULL, u32, NULL) == SCIPROXY_OK);
    num = 0;
    for (int i = 0; i < DCELLS; ++i) num += (u32[i] - u_ref[i]) * (u32[i] - u_ref[i]);
    CHECK(sqrt(num / den) <= 1e-4);
  }
  /* Errors. */
  in.dt = 2 * limit;
  CHECK(sciproxy_tti_demo_f64(&in, &o, u, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(sciproxy_last_error(), "dt") != NULL);
  in.dt = 0.5 * limit;
  in.source_amplitudes = NULL;
  CHECK(sciproxy_tti_demo_f64(&in, &o, u, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(sciproxy_last_error(), "source_amplitudes") != NULL);
  in.source_amplitudes = src;
  o.form = 5;
  CHECK(sciproxy_tti_demo_f64(&in, &o, u, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "form", 4) == 0);
  sciproxy_tti_demo_options_default(&o);
  o.struct_size = 3;
  CHECK(sciproxy_tti_demo_f64(&in, &o, u, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "options.struct_size", 19) == 0);
  sciproxy_tti_demo_options_default(&o);
  o.results = 3;
  CHECK(sciproxy_tti_demo_f64(&in, &o, u, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "results", 7) == 0);
  o.results = 2;
  o.process_grid[0] = 2; /* one process: one rank per axis only */
  CHECK(sciproxy_tti_demo_f64(&in, &o, u, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "process_grid", 12) == 0);
  /* The block of one process: the whole grid, on every layout. */
  int64_t origin[3] = {-1, -1, -1}, shape[3] = {-1, -1, -1};
  int grid[3] = {-1, -1, -1};
  CHECK(sciproxy_tti_demo_block_f64(&in, &o, origin, shape, grid) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "process_grid", 12) == 0);
  o.process_grid[0] = 1;
  CHECK(sciproxy_tti_demo_block_f64(&in, &o, origin, shape, grid) == SCIPROXY_OK);
  CHECK(origin[0] == 0 && origin[1] == 0 && origin[2] == 0 && shape[0] == D && shape[1] == D &&
        shape[2] == D && grid[0] == 1 && grid[1] == 1 && grid[2] == 1);
  CHECK(sciproxy_tti_demo_block_f64(&in, &o, NULL, shape, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "origin", 6) == 0);
  in.shape[1] = 3; /* thinner than the order-8 stencil */
  CHECK(sciproxy_tti_demo_block_f64(&in, &o, origin, shape, NULL) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "shape[1]", 8) == 0);
  in.shape[1] = D;
}

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

  sciproxy_tti_options opt;
  memset(&opt, 0xff, sizeof opt);
  sciproxy_tti_options_default(&opt);
  CHECK(opt.struct_size == sizeof opt && strcmp(opt.device, "auto") == 0 && opt.space_order == 8 &&
        opt.sponge_width[0] == 60 && opt.q_min == 0.1 && opt.q_interior == 100 && opt.freq_q == 5 &&
        opt.default_f == 0.85 && !opt.free_surface && opt.nparallel == 0);
  for (int i = 0; i < 6; ++i) opt.sponge_width[i] = 3;
  opt.free_surface = 1;
  const double dt = 0.001;
  const sciproxy_tti_model_f64 model = {{N0, N1, N2}, {10, 10, 10}, vp,  b,   eps,
                                        delta,        theta,        phi, NULL};
  const sciproxy_tti_model_f32 model32 = {{N0, N1, N2}, {10, 10, 10}, vp32,  b32, eps32,
                                          delta32,      theta32,      phi32, NULL};
  const sciproxy_tti_input_f64 in = {model, dt,         NT,      NSHOTS,   NSRC,
                                     NREC,  amplitudes, sources, receivers};
  const sciproxy_tti_input_f32 in32 = {model32, dt,           NT,      NSHOTS,   NSRC,
                                       NREC,    amplitudes32, sources, receivers};
  sciproxy_tti_options cpu = opt, reference = opt;
  cpu.device = "cpu";
  reference.device = "reference";

  CHECK(sciproxy_tti_f64(&in, &cpu, receivers_out) == SCIPROXY_OK);
  CHECK(sciproxy_tti_adjoint_f64(&in, &cpu, data, sources_out) == SCIPROXY_OK);
  double lhs = 0, rhs = 0;
  for (int i = 0; i < NSHOTS * NREC * NT; ++i) lhs += receivers_out[i] * data[i];
  for (int i = 0; i < NSHOTS * NSRC * NT; ++i) rhs += amplitudes[i] * sources_out[i];
  CHECK(fabs(lhs) > 0);
  CHECK(fabs(lhs - rhs) <= 1e-10 * fabs(lhs));
  for (int t = 0; t < NT; ++t) CHECK(receivers_out[t] == 0); /* on the free surface */

  CHECK(sciproxy_tti_f64(&in, &reference, receivers_ref) == SCIPROXY_OK);
  CHECK(sciproxy_tti_f32(&in32, &cpu, receivers32) == SCIPROXY_OK);
  double num = 0, num32 = 0, den = 0;
  for (int i = 0; i < NSHOTS * NREC * NT; ++i) {
    num += (receivers_out[i] - receivers_ref[i]) * (receivers_out[i] - receivers_ref[i]);
    num32 += (receivers32[i] - receivers_ref[i]) * (receivers32[i] - receivers_ref[i]);
    den += receivers_ref[i] * receivers_ref[i];
  }
  CHECK(den > 0 && sqrt(num / den) <= 1e-12);
  CHECK(sqrt(num32 / den) <= 1e-4);

  /* The stability limit: dt is below it, and beyond it is an error. */
  {
    double max_dt = 0, max_dt32 = 0;
    CHECK(sciproxy_tti_max_dt_f64(&in, &cpu, &max_dt) == SCIPROXY_OK);
    CHECK(sciproxy_tti_max_dt_f32(&in32, &cpu, &max_dt32) == SCIPROXY_OK);
    CHECK(max_dt > dt && fabs(max_dt32 - max_dt) <= 1e-5 * max_dt);
    CHECK(sciproxy_tti_max_dt_f64(&in, &cpu, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  }

  /* Errors: the code and a message naming the argument. */
  {
    sciproxy_tti_input_f64 bad_in = in;
    bad_in.model.vp = NULL;
    CHECK(sciproxy_tti_f64(&bad_in, &cpu, receivers_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(sciproxy_last_error(), "model") != NULL);
    CHECK(sciproxy_tti_f64(NULL, &cpu, receivers_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "input", 5) == 0);
    bad_in = in;
    bad_in.dt = 1.0;
    CHECK(sciproxy_tti_f64(&bad_in, &cpu, receivers_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(sciproxy_last_error(), "stability limit") != NULL);
  }
  sciproxy_tti_options bad = cpu;
  bad.space_order = 6;
  CHECK(sciproxy_tti_f64(&in, &bad, receivers_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(sciproxy_last_error(), "space_order") != NULL);
  vp[5] = NAN;
  CHECK(sciproxy_tti_f64(&in, &cpu, receivers_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(sciproxy_last_error(), "vp") != NULL);
  vp[5] = 2000;
  bad = cpu;
  bad.device = "nonsense";
  CHECK(sciproxy_tti_f64(&in, &bad, receivers_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(sciproxy_tti_adjoint_f64(&in, &cpu, NULL, sources_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(sciproxy_last_error(), "receiver_data") != NULL);
  /* A struct_size this library does not know: refused, naming it. */
  bad = cpu;
  bad.struct_size = sizeof bad + 8;
  CHECK(sciproxy_tti_f64(&in, &bad, receivers_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "options.struct_size", 19) == 0);
  CHECK(sciproxy_tti_adjoint_f64(&in, &bad, data, sources_out) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "options.struct_size", 19) == 0);

  test_demo();

  if (failures)
    fprintf(stderr, "%d check(s) failed\n", failures);
  else
    printf("capi tti: all checks passed (dot product %.3g relative)\n",
           fabs(lhs - rhs) / fabs(lhs));
  return failures ? 1 : 0;
}
