/* The C ABI from C: a hand-checked parstack, the window query, and error codes with messages. */
#include <stdio.h>
#include <string.h>

#include "sciproxy/sciproxy.h"

static int failures = 0;
#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

int main(void) {
  const double a0[] = {1, 2, 3}, a1[] = {-1, -2, -3};
  const double* traces[] = {a0, a1};
  const int64_t lengths[] = {3, 3};
  const int32_t offsets[] = {0, 1};
  const int32_t shifts[] = {0, 0, 1, -1};
  const double weights[] = {1, 1, 1, 1};
  int32_t offsetout = 0;
  int64_t lengthout = -1;

  CHECK(sciproxy_parstack_extent_f64(traces, lengths, 2, offsets, shifts, 2, &offsetout, &lengthout) == SCIPROXY_OK);
  CHECK(offsetout == 0 && lengthout == 4);

  double result[8];
  const double expected[8] = {1, 1, 1, -3, -1, -1, -1, 3};
  lengthout = -1;
  CHECK(sciproxy_parstack_f64(traces, lengths, 2, offsets, shifts, weights, 2, 0, &offsetout, &lengthout,
                              result, 8, 0, 0, 0, "cpu") == SCIPROXY_OK);
  CHECK(memcmp(result, expected, sizeof result) == 0);

  const float f0[] = {-1, -2};
  const float* ftraces[] = {f0};
  const int64_t flength[] = {2};
  const int32_t zero[] = {0};
  const float one[] = {1};
  float m;
  lengthout = -1;
  CHECK(sciproxy_parstack_f32(ftraces, flength, 1, zero, zero, one, 1, 1, &offsetout, &lengthout, &m, 1,
                              0, 0, 1, "reference") == SCIPROXY_OK);
  CHECK(m == -1.0f);

  /* Errors: a code and a message naming the argument. */
  lengthout = -1;
  CHECK(sciproxy_parstack_f64(traces, lengths, 2, offsets, shifts, weights, 2, 0, &offsetout, &lengthout,
                              result, 7, 0, 0, 0, "cpu") == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "result: expected", 16) == 0);
  lengthout = -1;
  CHECK(sciproxy_parstack_f64(traces, lengths, 2, offsets, shifts, weights, 2, 2, &offsetout, &lengthout,
                              result, 8, 0, 0, 0, "cpu") == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "method: expected", 16) == 0);
  lengthout = -1;
  CHECK(sciproxy_parstack_f64(traces, lengths, 2, offsets, shifts, weights, 2, 0, &offsetout, &lengthout,
                              result, 8, 0, 0, 0, "gpu") == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "device: expected", 16) == 0);
  lengthout = -1;
  CHECK(sciproxy_parstack_f64(traces, lengths, 2, offsets, shifts, NULL, 2, 0, &offsetout, &lengthout,
                              result, 8, 0, 0, 0, "cpu") == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "weights: expected", 17) == 0);
  lengthout = 0;
  CHECK(sciproxy_parstack_f64(traces, lengths, 2, offsets, shifts, weights, 2, 0, &offsetout, &lengthout,
                              result, 8, 0, 0, 0, "cpu") == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strncmp(sciproxy_last_error(), "lengthout: expected", 19) == 0);
  {
    const sciproxy_status s = sciproxy_parstack_f64(traces, lengths, 2, offsets, shifts, weights, 2, 0,
                                                    &offsetout, &lengthout, result, 8, 0, 0, 0, "cuda");
    CHECK(s == SCIPROXY_ERROR_NOT_COMPILED || s == SCIPROXY_ERROR_DEVICE_UNAVAILABLE || s == SCIPROXY_OK);
  }

  const double grid[] = {-1, 2, -0.5, 3};
  uint32_t where[2];
  CHECK(sciproxy_argmax_f64(grid, 2, 2, where, 0, 0) == SCIPROXY_OK);
  CHECK(where[0] == 1 && where[1] == 1);
  CHECK(sciproxy_argmax_f64(grid, 2, 2, where, 0, 1) == SCIPROXY_OK);
  CHECK(where[0] == 0 && where[1] == 1);
  CHECK(sciproxy_argmax_f64(grid, 0, 2, where, 0, 0) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(strlen(sciproxy_last_error()) > 0);

  if (failures == 0) printf("capi: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
