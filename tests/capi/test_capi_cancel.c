/* Cancellation from C (sciproxy_set_cancellation, c/core.h): a flag a signal handler sets during
 * a long scalar run (SIGALRM from setitimer) stops it with SCIPROXY_ERROR_CANCELLED and a message
 * within a second; a callback polled at most every 50 ms stops it too; NULLs clear the
 * installation and the same call then completes; the process-wide request stops every call until
 * cleared. Prints the measured times to stop. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "check.h"
#include "sciproxy/sciproxy.h"

enum { N = 40, NT_LONG = 1000000, NT_SHORT = 20 };

static double v[N * N];
static double amplitudes[NT_LONG];
static double receiver_out[NT_LONG];
static const int64_t source[2] = {20, 20}, receiver[2] = {10, 30};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static sciproxy_scalar_input_f64 input(int64_t nt) {
  sciproxy_scalar_input_f64 in;
  memset(&in, 0, sizeof in);
  in.ndim = 2;
  in.shape[0] = in.shape[1] = N;
  in.spacing[0] = in.spacing[1] = 5.0;
  in.v = v;
  in.nmodels = 1;
  in.dt = 0.0008; /* below the CFL limit of 2000 m/s at 5 m: one inner step per sample */
  in.nt = nt;
  in.nshots = in.nsources = in.nreceivers = 1;
  in.source_amplitudes = amplitudes;
  in.source_locations = source;
  in.receiver_locations = receiver;
  return in;
}

static sciproxy_status run(int64_t nt) {
  const sciproxy_scalar_input_f64 in = input(nt);
  sciproxy_scalar_options o;
  sciproxy_scalar_options_default(&o);
  o.device = "cpu";
  return sciproxy_scalar_f64(&in, &o, NULL, receiver_out, NULL);
}

static volatile sig_atomic_t stop_flag = 0;
static volatile double flag_set_at = 0;
static void on_alarm(int signal) {
  (void)signal;
  stop_flag = 1; /* all a handler may do: the library reads the flag at its next step */
}

static void test_flag_from_a_signal_handler(void) {
  struct sigaction action;
  struct itimerval timer;
  double stopped;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_alarm;
  sigaction(SIGALRM, &action, NULL);
  memset(&timer, 0, sizeof timer);
  timer.it_value.tv_usec = 300000;
  CHECK(sciproxy_set_cancellation((const volatile int*)&stop_flag, NULL, NULL) == SCIPROXY_OK);
  flag_set_at = now() + 0.3;
  setitimer(ITIMER_REAL, &timer, NULL);
  CHECK(run(NT_LONG) == SCIPROXY_ERROR_CANCELLED);
  stopped = now();
  CHECK(strstr(sciproxy_last_error(), "cancelled at step") != NULL);
  CHECK(stop_flag == 1);
  CHECK(stopped - flag_set_at < 1.0);
  printf("flag set by SIGALRM: stopped %.3f s after the signal (%s)\n", stopped - flag_set_at,
         sciproxy_last_error());
  /* The library never resets the flag: still set, the next call stops at once. */
  CHECK(run(NT_SHORT) == SCIPROXY_ERROR_CANCELLED);
  stop_flag = 0;
  CHECK(run(NT_SHORT) == SCIPROXY_OK);
  CHECK(sciproxy_set_cancellation(NULL, NULL, NULL) == SCIPROXY_OK);
}

static int callback_calls = 0;
static double callback_start = 0;
static int stop_after_300ms(void* user_data) {
  ++callback_calls;
  *(double*)user_data = now();
  return now() - callback_start > 0.3;
}

static void test_callback(void) {
  double last_call = 0, stopped;
  callback_calls = 0;
  callback_start = now();
  CHECK(sciproxy_set_cancellation(NULL, stop_after_300ms, &last_call) == SCIPROXY_OK);
  CHECK(run(NT_LONG) == SCIPROXY_ERROR_CANCELLED);
  stopped = now();
  /* About 6 calls in 300 ms at one per 50 ms, never one per step. */
  CHECK(callback_calls >= 3 && callback_calls <= 12);
  CHECK(stopped - callback_start < 1.3);
  printf(
      "callback: %d calls, stopped %.3f s after the start (%.3f s after the call that said "
      "stop)\n",
      callback_calls, stopped - callback_start, stopped - last_call);
  /* Cleared: the same long problem, shortened, runs to the end. */
  CHECK(sciproxy_set_cancellation(NULL, NULL, NULL) == SCIPROXY_OK);
  CHECK(run(NT_SHORT) == SCIPROXY_OK);
}

static void test_process_wide_request(void) {
  CHECK(sciproxy_cancellation_requested() == 0);
  sciproxy_request_cancellation();
  CHECK(sciproxy_cancellation_requested() == 1);
  CHECK(run(NT_SHORT) == SCIPROXY_ERROR_CANCELLED);
  CHECK(strstr(sciproxy_last_error(), "scalar") != NULL);
  sciproxy_clear_cancellation_request();
  CHECK(run(NT_SHORT) == SCIPROXY_OK);
}

int main(void) {
  for (int i = 0; i < N * N; ++i) v[i] = 2000.0;
  for (int t = 0; t < NT_LONG; ++t) amplitudes[t] = t < 100 ? sin(0.1 * t) : 0.0;
  test_flag_from_a_signal_handler();
  test_callback();
  test_process_wide_request();
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures != 0;
}
