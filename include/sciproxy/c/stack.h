/* sciproxy C ABI, stack family: parstack (delay-and-sum stacking, pyrocko's parstack) and
 * argmax. Semantics and equations: docs/kernels/parstack.md; the C++ API is
 * include/sciproxy/stack.hpp. The calling convention is described at the top of c/core.h. */
#ifndef SCIPROXY_C_STACK_H
#define SCIPROXY_C_STACK_H

#include "sciproxy/c/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* traces[i] points at lengths[i] samples (lengths may differ); offsets [ntraces] the absolute
 * start index of each trace; shifts and weights [nshifts, ntraces] row-major. */
typedef struct sciproxy_parstack_input_f64 {
  const double* const* traces;
  const int64_t* lengths;
  int64_t ntraces;
  const int32_t* offsets;
  const int32_t* shifts;
  const double* weights; /* not read by sciproxy_parstack_extent (may be NULL there) */
  int64_t nshifts;
} sciproxy_parstack_input_f64;
typedef struct sciproxy_parstack_input_f32 {
  const float* const* traces;
  const int64_t* lengths;
  int64_t ntraces;
  const int32_t* offsets;
  const int32_t* shifts;
  const float* weights;
  int64_t nshifts;
} sciproxy_parstack_input_f32;

typedef struct sciproxy_parstack_options {
  size_t struct_size;    /* sizeof(sciproxy_parstack_options), set by the defaults function */
  const char* device;    /* "auto" (default), "reference", "cpu", "cuda", "cuda:N" */
  int method;            /* 0: the stack (default); 1: the maximum of each stack */
  int32_t offsetout;     /* the window's first sample, used when lengthout >= 0 (0) */
  int64_t lengthout;     /* < 0: the window that holds every shifted trace (-1) */
  int accumulate;        /* method 0, non-zero: add the stack into result (0) */
  int clamp_max_at_zero; /* method 1, non-zero: pyrocko's max(0, max_t), its C code's quirk (0) */
  int nparallel;         /* OpenMP threads of the cpu backend; <= 0: all (0) */
  /* cpu, non-zero: choose the chunk of output samples per job by timing candidates on this
   * problem, cached per machine, shape, dtype and threads (the same bits; 0) */
  int autotune;
  /* MPI (c/core.h): the Fortran handle of the ranks the call runs on (SCIPROXY_NO_COMM: this
   * process alone). The shift sets are split across the ranks; every rank passes the same
   * traces, offsets and options. */
  int64_t comm;
  int shift_sets;    /* 0: every rank passes all shift sets (default); 1: each rank its own block,
                      * the whole being the blocks in rank order */
  int result_layout; /* 0: every rank receives the whole result (default); 1: rank 0 only (the
                      * others pass result_size 0); 2: each rank its own shift sets' rows */
} sciproxy_parstack_options;

/* The shift sets [*first, *first + *count) of the whole (*total) this rank stacks, for
 * options->result_layout 2 (collective when options->shift_sets is 1). */
sciproxy_status sciproxy_parstack_shift_block(int64_t nshifts,
                                              const sciproxy_parstack_options* options,
                                              int64_t* first, int64_t* count, int64_t* total);

void sciproxy_parstack_options_default(sciproxy_parstack_options* options);

/* The output window (the given one, or pyrocko's default) without stacking, to size result:
 * writes *offsetout and *lengthout (neither may be NULL). */
sciproxy_status sciproxy_parstack_extent_f64(const sciproxy_parstack_input_f64* input,
                                             const sciproxy_parstack_options* options,
                                             int32_t* offsetout, int64_t* lengthout);
sciproxy_status sciproxy_parstack_extent_f32(const sciproxy_parstack_input_f32* input,
                                             const sciproxy_parstack_options* options,
                                             int32_t* offsetout, int64_t* lengthout);

/* Stacks into result[result_size], which must hold nshifts * lengthout (method 0) or nshifts
 * (method 1) values. offsetout and lengthout (each may be NULL) receive the window used. */
sciproxy_status sciproxy_parstack_f64(const sciproxy_parstack_input_f64* input,
                                      const sciproxy_parstack_options* options, double* result,
                                      int64_t result_size, int32_t* offsetout, int64_t* lengthout);
sciproxy_status sciproxy_parstack_f32(const sciproxy_parstack_input_f32* input,
                                      const sciproxy_parstack_options* options, float* result,
                                      int64_t result_size, int32_t* offsetout, int64_t* lengthout);

/* argmax along axis 0 of a [rows, cols] row-major array: out[c] = argmax_r a[r, c], the first
 * maximum (numpy's; a column holding NaN gives its first NaN, as numpy's does); out holds cols
 * values. */
typedef struct sciproxy_argmax_input_f64 {
  const double* a;
  int64_t rows, cols;
} sciproxy_argmax_input_f64;
typedef struct sciproxy_argmax_input_f32 {
  const float* a;
  int64_t rows, cols;
} sciproxy_argmax_input_f32;

typedef struct sciproxy_argmax_options {
  size_t struct_size; /* sizeof(sciproxy_argmax_options), set by the defaults function */
  int nparallel;      /* OpenMP threads; <= 0: all (0) */
  int pyrocko_compat; /* non-zero: pyrocko's running maximum from DBL_MIN (a column <= 0 gives 0)
                       * and NaN never wins (pyrocko skips it) */
} sciproxy_argmax_options;

void sciproxy_argmax_options_default(sciproxy_argmax_options* options);

sciproxy_status sciproxy_argmax_f64(const sciproxy_argmax_input_f64* input,
                                    const sciproxy_argmax_options* options, uint32_t* out);
sciproxy_status sciproxy_argmax_f32(const sciproxy_argmax_input_f32* input,
                                    const sciproxy_argmax_options* options, uint32_t* out);

#ifdef __cplusplus
}
#endif

#endif /* SCIPROXY_C_STACK_H */
