/* The C tests' one assertion: counts a failed check and prints it with the library's last
 * error message, so that one run reports every failure. main() returns failures != 0. */
#ifndef SCIPROXY_TESTS_CAPI_CHECK_H
#define SCIPROXY_TESTS_CAPI_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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

/* The autotuner's cache in a new temporary directory (SCIPROXY_CACHE_DIR), so that a test neither
 * reads nor leaves the user's; remove_tuning_cache deletes it again. */
static char tuning_cache[] = "/tmp/sciproxy_capi_cache_XXXXXX";
static inline int use_temporary_tuning_cache(void) {
  return mkdtemp(tuning_cache) != NULL && setenv("SCIPROXY_CACHE_DIR", tuning_cache, 1) == 0;
}
static inline int tuning_cache_written(void) {
  char path[sizeof tuning_cache + 16];
  snprintf(path, sizeof path, "%s/autotune.json", tuning_cache);
  return access(path, R_OK) == 0;
}
static inline void remove_tuning_cache(void) {
  char path[sizeof tuning_cache + 16];
  snprintf(path, sizeof path, "%s/autotune.json", tuning_cache);
  unlink(path);
  rmdir(tuning_cache);
}

#endif
