/* The stack family's C ABI from C: a hand-checked parstack, the window query, argmax, the
 * options' defaults and a wrong struct_size, and error codes with messages. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "sciproxy/sciproxy.h"

int main(void) {
  const double a0[] = {1, 2, 3}, a1[] = {-1, -2, -3};
  const double* traces[] = {a0, a1};
  const int64_t lengths[] = {3, 3};
  const int32_t offsets[] = {0, 1};
  const int32_t shifts[] = {0, 0, 1, -1};
  const double weights[] = {1, 1, 1, 1};
  const sciproxy_parstack_input_f64 in = {traces, lengths, 2, offsets, shifts, weights, 2};
  sciproxy_parstack_options o;
  int32_t offsetout = 0;
  int64_t lengthout = 0;

  /* The defaults. */
  memset(&o, 0xff, sizeof o);
  sciproxy_parstack_options_default(&o);
  CHECK(o.struct_size == sizeof o && strcmp(o.device, "auto") == 0 && o.method == 0 &&
        o.offsetout == 0 && o.lengthout == -1 && o.accumulate == 0 && o.clamp_max_at_zero == 0 &&
        o.nparallel == 0 && o.autotune == 0);

  CHECK(sciproxy_parstack_extent_f64(&in, &o, &offsetout, &lengthout) == SCIPROXY_OK);
  CHECK(offsetout == 0 && lengthout == 4);
  CHECK(sciproxy_parstack_extent_f64(&in, NULL, &offsetout, &lengthout) == SCIPROXY_OK);
  CHECK(offsetout == 0 && lengthout == 4);

  double result[8];
  const double expected[8] = {1, 1, 1, -3, -1, -1, -1, 3};
  o.device = "cpu";
  lengthout = 0;
  CHECK(sciproxy_parstack_f64(&in, &o, result, 8, &offsetout, &lengthout) == SCIPROXY_OK);
  CHECK(memcmp(result, expected, sizeof result) == 0);
  CHECK(offsetout == 0 && lengthout == 4);
  /* NULL options: the defaults ("auto"); NULL offsetout and lengthout: not returned. */
  memset(result, 0, sizeof result);
  CHECK(sciproxy_parstack_f64(&in, NULL, result, 8, NULL, NULL) == SCIPROXY_OK);
  CHECK(memcmp(result, expected, sizeof result) == 0);
  /* accumulate adds the stack into result. */
  o.accumulate = 1;
  CHECK(sciproxy_parstack_f64(&in, &o, result, 8, NULL, NULL) == SCIPROXY_OK);
  for (int i = 0; i < 8; ++i) CHECK(result[i] == 2 * expected[i]);
  o.accumulate = 0;
  /* autotune: the cpu chunk chosen by timing (cached in a directory of the test's own); the same
   * result. */
  CHECK(use_temporary_tuning_cache());
  o.autotune = 1;
  memset(result, 0, sizeof result);
  CHECK(sciproxy_parstack_f64(&in, &o, result, 8, NULL, NULL) == SCIPROXY_OK);
  CHECK(memcmp(result, expected, sizeof result) == 0);
  CHECK(tuning_cache_written());
  remove_tuning_cache();
  o.autotune = 0;

  const float f0[] = {-1, -2};
  const float* ftraces[] = {f0};
  const int64_t flength[] = {2};
  const int32_t zero[] = {0};
  const float one[] = {1};
  const sciproxy_parstack_input_f32 fin = {ftraces, flength, 1, zero, zero, one, 1};
  sciproxy_parstack_options fo;
  float m;
  sciproxy_parstack_options_default(&fo);
  fo.method = 1;
  fo.nparallel = 1;
  fo.device = "reference";
  CHECK(sciproxy_parstack_f32(&fin, &fo, &m, 1, NULL, NULL) == SCIPROXY_OK);
  CHECK(m == -1.0f);
  fo.clamp_max_at_zero = 1; /* pyrocko's quirk: max(0, max_t) */
  CHECK(sciproxy_parstack_f32(&fin, &fo, &m, 1, NULL, NULL) == SCIPROXY_OK);
  CHECK(m == 0.0f);

  /* Errors: a code and a message naming the argument. */
  CHECK(sciproxy_parstack_f64(&in, &o, result, 7, NULL, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "result: expected", 16) == 0);
  o.method = 2;
  CHECK(sciproxy_parstack_f64(&in, &o, result, 8, NULL, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "method: expected", 16) == 0);
  o.method = 0;
  o.device = "gpu";
  CHECK(sciproxy_parstack_f64(&in, &o, result, 8, NULL, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "device: expected", 16) == 0);
  o.device = NULL;
  CHECK(sciproxy_parstack_f64(&in, &o, result, 8, NULL, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "device: expected", 16) == 0);
  o.device = "cpu";
  {
    sciproxy_parstack_input_f64 no_weights = in;
    no_weights.weights = NULL;
    CHECK(sciproxy_parstack_f64(&no_weights, &o, result, 8, NULL, NULL) ==
          SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "weights: expected", 17) == 0);
    /* The window does not need the weights. */
    CHECK(sciproxy_parstack_extent_f64(&no_weights, &o, &offsetout, &lengthout) == SCIPROXY_OK);
  }
  o.lengthout = 0;
  CHECK(sciproxy_parstack_f64(&in, &o, result, 8, NULL, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "lengthout: expected", 19) == 0);
  o.lengthout = -1;
  CHECK(sciproxy_parstack_f64(NULL, &o, result, 8, NULL, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "input: expected", 15) == 0);
  CHECK(sciproxy_parstack_extent_f64(&in, &o, NULL, &lengthout) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "offsetout: expected", 19) == 0);
  {
    sciproxy_parstack_options cuda = o;
    cuda.device = "cuda";
    const sciproxy_status s = sciproxy_parstack_f64(&in, &cuda, result, 8, NULL, NULL);
    CHECK(s == SCIPROXY_ERROR_NOT_COMPILED || s == SCIPROXY_ERROR_DEVICE_UNAVAILABLE ||
          s == SCIPROXY_OK);
  }
  /* A struct_size this library does not know: refused, naming it. */
  {
    sciproxy_parstack_options old = o;
    old.struct_size = sizeof old - 4;
    CHECK(sciproxy_parstack_f64(&in, &old, result, 8, NULL, NULL) ==
          SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strncmp(sciproxy_last_error(), "options.struct_size: expected", 29) == 0);
    CHECK(sciproxy_parstack_extent_f64(&in, &old, &offsetout, &lengthout) ==
          SCIPROXY_ERROR_INVALID_ARGUMENT);
    old.struct_size = 0; /* never filled */
    CHECK(sciproxy_parstack_f64(&in, &old, result, 8, NULL, NULL) ==
          SCIPROXY_ERROR_INVALID_ARGUMENT);
  }
  /* A successful call clears the message. */
  CHECK(sciproxy_parstack_f64(&in, &o, result, 8, NULL, NULL) == SCIPROXY_OK);
  CHECK(strcmp(sciproxy_last_error(), "") == 0);

  /* argmax */
  const double grid[] = {-1, 2, -0.5, 3};
  const sciproxy_argmax_input_f64 ain = {grid, 2, 2};
  sciproxy_argmax_options ao;
  uint32_t where[2];
  memset(&ao, 0xff, sizeof ao);
  sciproxy_argmax_options_default(&ao);
  CHECK(ao.struct_size == sizeof ao && ao.nparallel == 0 && ao.pyrocko_compat == 0);
  CHECK(sciproxy_argmax_f64(&ain, &ao, where) == SCIPROXY_OK);
  CHECK(where[0] == 1 && where[1] == 1);
  CHECK(sciproxy_argmax_f64(&ain, NULL, where) == SCIPROXY_OK);
  CHECK(where[0] == 1 && where[1] == 1);
  ao.pyrocko_compat = 1;
  CHECK(sciproxy_argmax_f64(&ain, &ao, where) == SCIPROXY_OK);
  CHECK(where[0] == 0 && where[1] == 1);
  {
    /* NaN: numpy's first NaN; with pyrocko_compat skipped, as pyrocko's C code does. */
    const double nan_grid[] = {1, NAN, NAN, 2};
    const sciproxy_argmax_input_f64 nin = {nan_grid, 2, 2};
    CHECK(sciproxy_argmax_f64(&nin, NULL, where) == SCIPROXY_OK);
    CHECK(where[0] == 1 && where[1] == 0);
    CHECK(sciproxy_argmax_f64(&nin, &ao, where) == SCIPROXY_OK);
    CHECK(where[0] == 0 && where[1] == 1);
  }
  {
    const float fgrid[] = {1, -2, 3, -4, 0, 5};
    const sciproxy_argmax_input_f32 fain = {fgrid, 3, 2};
    uint32_t fw[2];
    CHECK(sciproxy_argmax_f32(&fain, NULL, fw) == SCIPROXY_OK);
    CHECK(fw[0] == 1 && fw[1] == 2);
  }
  {
    const sciproxy_argmax_input_f64 empty = {grid, 0, 2};
    CHECK(sciproxy_argmax_f64(&empty, &ao, where) == SCIPROXY_ERROR_INVALID_ARGUMENT);
    CHECK(strlen(sciproxy_last_error()) > 0);
  }
  ao.struct_size = 1;
  CHECK(sciproxy_argmax_f64(&ain, &ao, where) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "options.struct_size", 19) == 0);

  if (failures == 0) printf("capi stack: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
