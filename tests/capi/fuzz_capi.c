/* Fuzz test of the C ABI (issue 14, "reliable under abuse"): every entry point of
 * include/sciproxy/c/*.h driven with a fixed-seed random sequence of calls. Each call starts
 * from a small valid problem of random size and breaks at most one thing: a NULL pointer in
 * each pointer argument and field in turn, zero, negative and huge counts, odd struct_size
 * values, out-of-range enum values, NaN and infinite data and parameters, out-of-range
 * locations, unknown devices. Every call must return SCIPROXY_OK with an empty
 * sciproxy_last_error(), or a known error code with a non-empty message; it must not crash, and
 * the input arrays must be unchanged (a checksum before and after).
 *
 * What a C caller can get wrong without the library being able to tell (a count larger than
 * the array it passes) is not tried: huge counts are only combined with a partner count of at
 * least 2, so that their product overflows int64 and must be refused, or with NULL arrays.
 * Thread counts stay small (huge ones are the resource layer's to refuse).
 *
 * The per-family drivers are written once for both precisions in fuzz_capi_family.h. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sciproxy/sciproxy.h"

static int failures = 0;
static long calls = 0, ok_calls = 0;
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL; /* fixed seed: the same calls every run */

static uint64_t next_random(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ULL;
}
static int64_t pick(int64_t n) {
  return (int64_t)(next_random() % (uint64_t)n);
}

static uint64_t checksum(const void* data, size_t bytes) { /* FNV-1a */
  const unsigned char* p = (const unsigned char*)data;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

/* One call's outcome: OK with no message, or a known error code with a message. */
static void check_status(sciproxy_status status, const char* what, long iteration,
                         const char* mutation) {
  const char* message = sciproxy_last_error();
  ++calls;
  if (status == SCIPROXY_OK) {
    ++ok_calls;
    if (!message || message[0] != '\0') {
      fprintf(stderr, "%s (iteration %ld, %s): OK but a message: %s\n", what, iteration, mutation,
              message ? message : "(null)");
      ++failures;
    }
    return;
  }
  if ((int)status < SCIPROXY_ERROR_INVALID_ARGUMENT || (int)status > SCIPROXY_ERROR_OUT_OF_MEMORY) {
    fprintf(stderr, "%s (iteration %ld, %s): unknown status %d\n", what, iteration, mutation,
            (int)status);
    ++failures;
  }
  if (!message || message[0] == '\0') {
    fprintf(stderr, "%s (iteration %ld, %s): status %d without a message\n", what, iteration,
            mutation, (int)status);
    ++failures;
  }
}

static void check_unchanged(uint64_t before, uint64_t after, const char* what, long iteration,
                            const char* mutation) {
  if (before != after) {
    fprintf(stderr, "%s (iteration %ld, %s): an input array was modified\n", what, iteration,
            mutation);
    ++failures;
  }
}

static const int64_t kHugeCounts[] = {0, -1, INT64_MIN, INT64_MAX};
static const char* const kDevices[] = {NULL,   "",          "bogus", "cuda:99",
                                       "cuda", "reference", "cpu",   "auto"};
static double bad_real(void) {
  const double values[] = {NAN, INFINITY, -INFINITY, 0.0, -1.0, 1e300, -1e300, 5e-324};
  return values[pick(8)];
}
static size_t bad_struct_size(size_t good) {
  const size_t values[] = {0, good - 1, good + 8, SIZE_MAX, 1};
  return values[pick(5)];
}

/* The drivers, once per precision. */
#define T double
#define SFX(name) name##_f64
#define NAME "f64"
#include "fuzz_capi_family.h"
#undef T
#undef SFX
#undef NAME

#define T float
#define SFX(name) name##_f32
#define NAME "f32"
#include "fuzz_capi_family.h"
#undef T
#undef SFX
#undef NAME

static void fuzz_core(void) {
  char name[16];
  for (long it = 0; it < 40; ++it) {
    const char* device = kDevices[pick(8)];
    const size_t sizes[] = {0, 1, 2, sizeof name};
    const size_t size = sizes[pick(4)];
    char* buffer = pick(4) == 0 ? NULL : name;
    const sciproxy_status status = sciproxy_select_device(device, buffer, size);
    check_status(status, "sciproxy_select_device", it, device ? device : "device NULL");
    if (status == SCIPROXY_OK && buffer && size > 0 && memchr(buffer, '\0', size) == NULL) {
      fprintf(stderr, "sciproxy_select_device: name not NUL-terminated\n");
      ++failures;
    }
  }
  /* Recordings: an end without a begin and a second begin are refused with a message. */
  check_status(sciproxy_recording_end(), "sciproxy_recording_end without begin", 0, "");
  check_status(sciproxy_recording_begin(1), "sciproxy_recording_begin", 0, "");
  check_status(sciproxy_recording_begin(0), "sciproxy_recording_begin twice", 0, "");
  if (sciproxy_recording_json(NULL, 0) < 2 || sciproxy_recording_text(NULL, 0) > (size_t)1 << 40) {
    fprintf(stderr, "sciproxy_recording_json/text: bad lengths\n");
    ++failures;
  }
  char one[1];
  sciproxy_recording_json(one, 1);
  if (one[0] != '\0') {
    fprintf(stderr, "sciproxy_recording_json: a 1-byte buffer must hold the NUL only\n");
    ++failures;
  }
  (void)sciproxy_recording_count();
  (void)sciproxy_recording_passed();
  check_status(sciproxy_recording_end(), "sciproxy_recording_end", 0, "");
  if (!sciproxy_version() || !sciproxy_version()[0] || sciproxy_max_threads() < 1 ||
      sciproxy_cuda_device_count() < 0 || (sciproxy_cuda_compiled() & ~1) != 0) {
    fprintf(stderr, "core: version, threads or CUDA queries out of range\n");
    ++failures;
  }
}

int main(void) {
  fuzz_core();
  fuzz_stack_f64(400);
  fuzz_stack_f32(200);
  fuzz_scalar_f64(250);
  fuzz_scalar_f32(120);
  fuzz_tti_f64(150);
  fuzz_tti_f32(80);
  fuzz_tti_demo_f64(120);
  fuzz_tti_demo_f32(60);
  printf("fuzz_capi: %ld calls, %ld returned SCIPROXY_OK, %d failures\n", calls, ok_calls,
         failures);
  if (ok_calls == 0 || ok_calls == calls) {
    fprintf(stderr, "fuzz_capi: expected both successful and refused calls\n");
    ++failures;
  }
  return failures != 0;
}
