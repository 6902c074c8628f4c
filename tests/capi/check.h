/* The C tests' one assertion: counts a failed check and prints it with the library's last
 * error message, so that one run reports every failure. main() returns failures != 0. */
#ifndef SCIPROXY_TESTS_CAPI_CHECK_H
#define SCIPROXY_TESTS_CAPI_CHECK_H

#include <stdio.h>

#include "sciproxy/sciproxy.h"

static int failures = 0;
#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              sciproxy_last_error());                                                          \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

#endif
