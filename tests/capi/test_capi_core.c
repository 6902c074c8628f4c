/* What every family shares, from C: the build and devices, and recording. Recording: begin and
 * end, the empty JSON "[]", snprintf's buffer-size protocol, the refusal of a second begin and of
 * an end without a begin, one recording per thread; then one small call per family inside a
 * recording (with verification), printing which families' calls produced a report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sciproxy/sciproxy.h"

static void test_info(void) {
  char name[32];
  CHECK(strlen(sciproxy_version()) > 0);
  CHECK(sciproxy_max_threads() >= 1);
  CHECK(sciproxy_cuda_device_count() >= 0);
  CHECK(sciproxy_cuda_compiled() || sciproxy_cuda_device_count() == 0);
  CHECK(sciproxy_select_device("cpu", name, sizeof name) == SCIPROXY_OK);
  CHECK(strcmp(name, "cpu") == 0);
  CHECK(sciproxy_select_device("auto", name, sizeof name) == SCIPROXY_OK);
  CHECK(strcmp(name, "cpu") == 0 || strncmp(name, "cuda:", 5) == 0);
  CHECK(sciproxy_select_device("reference", name, 4) == SCIPROXY_OK);
  CHECK(strcmp(name, "ref") == 0); /* truncated, NUL-terminated */
  CHECK(sciproxy_select_device("abacus", name, sizeof name) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "device", 6) == 0);
  CHECK(sciproxy_select_device(NULL, name, sizeof name) == SCIPROXY_ERROR_INVALID_ARGUMENT);
}

static void test_recording_protocol(void) {
  char small[2], buffer[16];
  size_t n;
  /* An end without a begin. */
  CHECK(sciproxy_recording_end() == SCIPROXY_ERROR_RUNTIME);
  CHECK(strstr(sciproxy_last_error(), "no recording is open") != NULL);
  CHECK(sciproxy_recording_begin(0) == SCIPROXY_OK);
  CHECK(strcmp(sciproxy_last_error(), "") == 0);
  /* A second begin on the same thread. */
  CHECK(sciproxy_recording_begin(1) == SCIPROXY_ERROR_RUNTIME);
  CHECK(strstr(sciproxy_last_error(), "already open") != NULL);
  CHECK(sciproxy_recording_count() == 0);
  CHECK(sciproxy_recording_passed() == 1);
  /* snprintf's protocol: the length needed, a truncated NUL-terminated copy. */
  CHECK(sciproxy_recording_json(NULL, 0) == 2);
  n = sciproxy_recording_json(buffer, sizeof buffer);
  CHECK(n == 2 && strcmp(buffer, "[]") == 0);
  n = sciproxy_recording_json(small, sizeof small);
  CHECK(n == 2 && strcmp(small, "[") == 0);
  CHECK(sciproxy_recording_text(NULL, 0) == 0);
  CHECK(sciproxy_recording_end() == SCIPROXY_OK);
  CHECK(sciproxy_recording_end() == SCIPROXY_ERROR_RUNTIME);
  /* The reports stay readable after end. */
  n = sciproxy_recording_json(buffer, sizeof buffer);
  CHECK(n == 2 && strcmp(buffer, "[]") == 0);
}

/* One small call per family; returns how many reports it added (-1 when it failed). */
static long parstack_call(void) {
  const double a0[] = {1, 2, 3}, a1[] = {-1, -2, -3};
  const double* traces[] = {a0, a1};
  const int64_t lengths[] = {3, 3};
  const int32_t offsets[] = {0, 1}, shifts[] = {0, 0, 1, -1};
  const double weights[] = {1, 1, 1, 1};
  const sciproxy_parstack_input_f64 in = {traces, lengths, 2, offsets, shifts, weights, 2};
  sciproxy_parstack_options o;
  double result[8];
  const int64_t before = sciproxy_recording_count();
  sciproxy_parstack_options_default(&o);
  o.device = "cpu";
  if (sciproxy_parstack_f64(&in, &o, result, 8, NULL, NULL) != SCIPROXY_OK) return -1;
  return (long)(sciproxy_recording_count() - before);
}

static long scalar_call(void) {
  enum { N = 40, NT = 30 };
  static double v[N], amps[NT], out[NT];
  const int64_t src[1] = {10}, rec[1] = {30};
  sciproxy_scalar_input_f64 in;
  sciproxy_scalar_options o;
  const int64_t before = sciproxy_recording_count();
  for (int i = 0; i < N; ++i) v[i] = 1500;
  for (int t = 0; t < NT; ++t) amps[t] = t == 3 ? 1.0 : 0.0;
  memset(&in, 0, sizeof in);
  in.ndim = 1;
  in.shape[0] = N;
  in.spacing[0] = 5;
  in.v = v;
  in.nmodels = 1;
  in.dt = 0.001;
  in.nt = NT;
  in.nshots = in.nsources = in.nreceivers = 1;
  in.source_amplitudes = amps;
  in.source_locations = src;
  in.receiver_locations = rec;
  sciproxy_scalar_options_default(&o);
  o.device = "cpu";
  o.pml_width[0] = o.pml_width[1] = 5;
  if (sciproxy_scalar_f64(&in, &o, NULL, out, NULL) != SCIPROXY_OK) return -1;
  return (long)(sciproxy_recording_count() - before);
}

static long tti_call(void) {
  enum { N = 8, CELLS = N * N * N, NT = 10 };
  static double vp[CELLS], amps[NT], out[NT];
  const int64_t src[3] = {4, 4, 4}, rec[3] = {2, 5, 5};
  sciproxy_tti_input_f64 in;
  sciproxy_tti_options o;
  const int64_t before = sciproxy_recording_count();
  for (int i = 0; i < CELLS; ++i) vp[i] = 1500;
  for (int t = 0; t < NT; ++t) amps[t] = t == 1 ? 1.0 : 0.0;
  memset(&in, 0, sizeof in);
  for (int d = 0; d < 3; ++d) {
    in.model.shape[d] = N;
    in.model.spacing[d] = 10;
  }
  in.model.vp = vp;
  in.dt = 0.001;
  in.nt = NT;
  in.nshots = in.nsources = in.nreceivers = 1;
  in.source_amplitudes = amps;
  in.source_locations = src;
  in.receiver_locations = rec;
  sciproxy_tti_options_default(&o);
  o.device = "cpu";
  for (int i = 0; i < 6; ++i) o.sponge_width[i] = 2;
  if (sciproxy_tti_f64(&in, &o, out) != SCIPROXY_OK) return -1;
  return (long)(sciproxy_recording_count() - before);
}

static void test_recording_families(void) {
  long stack, wave, tti;
  size_t n;
  char* json;
  CHECK(sciproxy_recording_begin(1) == SCIPROXY_OK);
  stack = parstack_call();
  wave = scalar_call();
  tti = tti_call();
  CHECK(stack >= 0 && wave >= 0 && tti >= 0);
  CHECK(sciproxy_recording_end() == SCIPROXY_OK);
  n = sciproxy_recording_json(NULL, 0);
  json = malloc(n + 1);
  CHECK(json != NULL && sciproxy_recording_json(json, n + 1) == n && strlen(json) == n);
  CHECK(json[0] == '[' && json[n - 1] == ']');
  /* Every family reports its call once (the reference reruns are not calls of their own), and
   * each verification passes. */
  CHECK(sciproxy_recording_count() == 3);
  CHECK(strstr(json, "\"kernel\": \"parstack\"") != NULL);
  CHECK(strstr(json, "\"kernel\": \"scalar\"") != NULL);
  CHECK(strstr(json, "\"kernel\": \"tti_forward\"") != NULL);
  CHECK(strstr(json, "\"verification\": null") == NULL);
  CHECK(sciproxy_recording_text(NULL, 0) > 0);
  CHECK(sciproxy_recording_passed() == 1);
  free(json);
  CHECK(stack == 1 && wave == 1 && tti == 1);
}

int main(void) {
  test_info();
  test_recording_protocol();
  test_recording_families();
  if (failures == 0) printf("capi core: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
