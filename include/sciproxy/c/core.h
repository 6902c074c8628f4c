/* sciproxy C ABI, part 1 of 4: what every family shares (status codes, the last error, the build
 * and the devices, recording reports). Include <sciproxy/sciproxy.h> for every family at once.
 *
 * The convention, the same for every kernel function of every family (stack.h, wave.h, tti.h):
 *
 *   sciproxy_status sciproxy_<kernel>_<dtype>(const sciproxy_<kernel>_input_<dtype>* input,
 *                                             const sciproxy_<kernel>_options* options,
 *                                             <further inputs...>, <outputs...>);
 *
 * - input: a struct of what the call computes on: the arrays (pointers, row-major, the last
 *   index fastest) and the sizes that shape them. It has no version field: it holds exactly
 *   the data the kernel's equations need, and a kernel that needs more gets a new function.
 * - options: how to compute (device, order, boundaries, threads, ...). Its first field is
 *   `size_t struct_size`; fill it with the family's defaults function, then change what you
 *   need:
 *       sciproxy_parstack_options o;
 *       sciproxy_parstack_options_default(&o);   // struct_size = sizeof o, every default
 *       o.device = "cpu";
 *   A struct_size this library does not know is refused (SCIPROXY_ERROR_INVALID_ARGUMENT,
 *   naming options.struct_size), so a caller built against another version of the header
 *   gets an error instead of garbage; later versions add fields at the end and keep accepting
 *   the sizes of earlier ones. options may be NULL: every default.
 * - further inputs (the gradient of a loss, an initial state) and outputs are explicit
 *   arguments after the two structs, outputs last. An optional one may be NULL, as each
 *   function's comment says.
 * - Every function returns a sciproxy_status: SCIPROXY_OK (0), or an error code; then
 *   sciproxy_last_error() gives the message on the calling thread, naming the argument, what
 *   was expected and what came. No function throws, aborts or exits, whatever it is given
 *   (an allocation that fails: SCIPROXY_ERROR_OUT_OF_MEMORY, "out of memory").
 * - Strings (device names) are NUL-terminated; the library copies what it keeps.
 * - Fortran: fortran/sciproxy.f90 mirrors every struct as a bind(c) derived type and binds
 *   every function (iso_c_binding). */
#ifndef SCIPROXY_C_CORE_H
#define SCIPROXY_C_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The values are those of sciproxy::ErrorCode (include/sciproxy/core/error.hpp); never
 * renumbered. */
typedef enum sciproxy_status {
  SCIPROXY_OK = 0,
  SCIPROXY_ERROR_INVALID_ARGUMENT = 1,   /* a value, shape or range is wrong */
  SCIPROXY_ERROR_TYPE = 2,               /* a dtype or kind is wrong */
  SCIPROXY_ERROR_NOT_COMPILED = 3,       /* the backend was not built */
  SCIPROXY_ERROR_DEVICE_UNAVAILABLE = 4, /* built, but the hardware is absent */
  SCIPROXY_ERROR_IO = 5,                 /* a file could not be read or written */
  SCIPROXY_ERROR_RUNTIME = 6,            /* anything else (a misuse of state, ...) */
  SCIPROXY_ERROR_CANCELLED = 7,          /* the caller's cancellation stopped the run */
  SCIPROXY_ERROR_OUT_OF_MEMORY = 8       /* more memory needed than the process may use */
} sciproxy_status;

/* Message of the last error on this thread ("" when the last call succeeded). Valid until the
 * next sciproxy call on this thread. */
const char* sciproxy_last_error(void);

/* The build and the machine. */
const char* sciproxy_version(void);
int sciproxy_cuda_compiled(void);     /* 1 when the cuda backend was built */
int sciproxy_cuda_device_count(void); /* 0 when not built or no GPU */
int sciproxy_max_threads(void);       /* OpenMP threads a parallel region gets by default */
int sciproxy_mpi_compiled(void);      /* 1 when MPI support was built */

/* MPI: the options of a call that can run on several ranks have an `int64_t comm` field, the
 * communicator's Fortran handle: MPI_Comm_c2f(comm) from C, the integer handle (or
 * comm%MPI_VAL) from Fortran. The call is then collective over its ranks, and an error on any
 * rank is every rank's (the message names the rank). SCIPROXY_NO_COMM (the default) runs the
 * call on this process alone. */
#define SCIPROXY_NO_COMM ((int64_t)-1)

/* For wrappers that check arguments themselves before a collective call (the Fortran module's
 * shape checks): collective over comm. When any rank's `local` status is not SCIPROXY_OK, every
 * rank returns the lowest failing rank's status, its message (sciproxy_last_error on that rank
 * when it passed `local`) prefixed "rank r of n: "; else SCIPROXY_OK. With SCIPROXY_NO_COMM it
 * returns `local` and keeps its message. */
sciproxy_status sciproxy_agree_status(int64_t comm, sciproxy_status local);

/* Resolves a device string ("auto", "reference", "cpu", "cuda", "cuda:N") as the kernels do,
 * checking that it can run here, and writes its name ("cpu", "cuda:0") into name[size]
 * (truncated, always NUL-terminated when size > 0; name may be NULL when size is 0). */
sciproxy_status sciproxy_select_device(const char* device, char* name, size_t size);

/* Recording: while a recording is open on a thread, every kernel call made on that thread
 * appends its report (the backend that ran, the work model, time, rates, roofline fraction
 * when the machine's ceilings are cached, the timer table). With verify != 0, each call also
 * reruns on the reference backend and compares its outputs with the family's tolerance.
 * One recording per thread: a second begin before end, or an end without a begin, is refused
 * (SCIPROXY_ERROR_RUNTIME). The reports stay readable after end, until the next begin. */
sciproxy_status sciproxy_recording_begin(int verify);
sciproxy_status sciproxy_recording_end(void);
/* The reports as a JSON array ("[]" when there are none) or as text, the way the command line
 * prints them. snprintf's protocol: writes at most size - 1 characters and a NUL into buffer
 * (buffer may be NULL when size is 0) and returns the length of the whole text, so a return
 * value >= size means the buffer was too small: call again with return value + 1. */
size_t sciproxy_recording_json(char* buffer, size_t size);
size_t sciproxy_recording_text(char* buffer, size_t size);
int64_t sciproxy_recording_count(void); /* reports so far (0 when none) */
int sciproxy_recording_passed(void);    /* 1 when every verified call passed (or none was) */

/* Cancellation: stopping a long call (a time loop of wave or tti, parstack) between steps.
 * A cancelled call returns SCIPROXY_ERROR_CANCELLED, with sciproxy_last_error() saying what
 * stopped where ("scalar: cancelled at step 1234 of 100000"); it has freed what it allocated,
 * temporary files included, and its outputs are unspecified (do not use them).
 *
 * sciproxy_set_cancellation installs, for the calling thread's later calls until it is called
 * again, two optional ways to ask (NULL for either leaves it out; both NULL clears it):
 * - flag: a stop is asked as soon as *flag != 0. It is read at every step, from the thread that
 *   made the call; set it from any thread or a signal handler (declare it volatile
 *   sig_atomic_t or an atomic int where the compiler needs it). It must stay valid while
 *   installed. The library never writes it: reset it before the next call.
 * - callback(user_data): called on the calling thread at most every 50 ms during a long call;
 *   non-zero asks the stop. It may be costly, and must not call the library.
 * The installation belongs to the thread: another thread's calls are not affected. */
sciproxy_status sciproxy_set_cancellation(const volatile int* flag,
                                          int (*callback)(void* user_data), void* user_data);
/* The process-wide request, for a signal handler (async-signal-safe): every call on every
 * thread stops at its next step until sciproxy_clear_cancellation_request(). */
void sciproxy_request_cancellation(void);
void sciproxy_clear_cancellation_request(void);
int sciproxy_cancellation_requested(void); /* 1 while the process-wide request is set */

#ifdef __cplusplus
}
#endif

#endif /* SCIPROXY_C_CORE_H */
