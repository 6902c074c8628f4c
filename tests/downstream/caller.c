/* The C ABI of an installed sciproxy: a hand-checked parstack and an error with its message. */
#include <sciproxy/sciproxy.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  const double a0[] = {1, 2, 3}, a1[] = {-1, -2, -3};
  const double* traces[] = {a0, a1};
  const int64_t lengths[] = {3, 3};
  const int32_t offsets[] = {0, 1};
  const int32_t shifts[] = {0, 0, 1, -1};
  const double weights[] = {1, 1, 1, 1};
  const double expected[8] = {1, 1, 1, -3, -1, -1, -1, 3};
  const sciproxy_parstack_input_f64 in = {traces, lengths, 2, offsets, shifts, weights, 2};
  sciproxy_parstack_options options;
  double result[8];
  int32_t offsetout = 0;
  int64_t lengthout = -1;

  sciproxy_parstack_options_default(&options);
  options.device = "cpu";
  if (sciproxy_parstack_f64(&in, &options, result, 8, &offsetout, &lengthout) != SCIPROXY_OK ||
      lengthout != 4 || memcmp(result, expected, sizeof result) != 0) {
    fprintf(stderr, "downstream_c: wrong stack: %s\n", sciproxy_last_error());
    return 1;
  }
  if (sciproxy_parstack_f64(&in, &options, result, 7, NULL, NULL) !=
          SCIPROXY_ERROR_INVALID_ARGUMENT ||
      strncmp(sciproxy_last_error(), "result:", 7) != 0) {
    fprintf(stderr, "downstream_c: expected an error naming result, got: %s\n",
            sciproxy_last_error());
    return 1;
  }
  printf("downstream_c: parstack OK (sciproxy %s)\n", sciproxy_version());
  return 0;
}
