/* sciproxy C ABI, wave family: the constant-density scalar propagator (Deepwave's scalar and
 * scalar_born), its exact adjoint gradients, and states to continue a run. Equations and
 * semantics: docs/kernels/scalar-wave.md; the C++ API is include/sciproxy/wave.hpp. The calling
 * convention is described at the top of c/core.h. */
#ifndef SCIPROXY_C_WAVE_H
#define SCIPROXY_C_WAVE_H

#include "sciproxy/c/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ndim 1, 2 or 3; shape[ndim] cells and spacing[ndim] metres (entries past ndim unused);
 * v [nmodels, *shape] m/s, nmodels 1 (one model for every shot) or nshots; dt seconds and nt
 * samples of the sources and receivers (a dt above the CFL limit is resampled internally, as
 * Deepwave does); source_amplitudes [nshots, nsources, nt]; source_locations
 * [nshots, nsources, ndim] and receiver_locations [nshots, nreceivers, ndim], cell indices into
 * the model (NULL when the count is 0). */
typedef struct sciproxy_scalar_input_f32 {
  int ndim;
  int64_t shape[3];
  double spacing[3];
  const float* v;
  int64_t nmodels;
  double dt;
  int64_t nt, nshots, nsources, nreceivers;
  const float* source_amplitudes;
  const int64_t* source_locations;
  const int64_t* receiver_locations;
} sciproxy_scalar_input_f32;
typedef struct sciproxy_scalar_input_f64 {
  int ndim;
  int64_t shape[3];
  double spacing[3];
  const double* v;
  int64_t nmodels;
  double dt;
  int64_t nt, nshots, nsources, nreceivers;
  const double* source_amplitudes;
  const int64_t* source_locations;
  const int64_t* receiver_locations;
} sciproxy_scalar_input_f64;

/* Born: the background input, the scatter [nmodels, *shape] m/s (the velocity perturbation)
 * and nbg_receivers background receivers per shot at bg_receiver_locations
 * [nshots, nbg_receivers, ndim] (NULL when 0). */
typedef struct sciproxy_scalar_born_input_f32 {
  sciproxy_scalar_input_f32 background;
  const float* scatter;
  int64_t nbg_receivers;
  const int64_t* bg_receiver_locations;
} sciproxy_scalar_born_input_f32;
typedef struct sciproxy_scalar_born_input_f64 {
  sciproxy_scalar_input_f64 background;
  const double* scatter;
  int64_t nbg_receivers;
  const int64_t* bg_receiver_locations;
} sciproxy_scalar_born_input_f64;

typedef enum sciproxy_storage_mode {
  SCIPROXY_STORAGE_DEVICE = 0, /* meant: in the memory of the propagating device (default);
                                  the cuda backend keeps it in host memory between its passes
                                  for now, as SCIPROXY_STORAGE_HOST (sciproxy/wave.hpp) */
  SCIPROXY_STORAGE_HOST = 1,   /* in host memory (pageable) */
  SCIPROXY_STORAGE_DISK = 2,   /* one file per shot in storage_directory, removed afterwards */
  SCIPROXY_STORAGE_NONE = 3    /* nothing: no velocity gradient */
} sciproxy_storage_mode;

typedef struct sciproxy_scalar_options {
  size_t struct_size;   /* sizeof(sciproxy_scalar_options), set by the defaults function */
  const char* device;   /* "auto" (default), "reference", "cpu", "cuda", "cuda:N" */
  int accuracy;         /* 2, 4 (default), 6 or 8 */
  int64_t pml_width[6]; /* cells per side {dim0 low, dim0 high, dim1 low, ...} (20) */
  double pml_freq;      /* Hz (25, Deepwave's default) */
  double max_vel;       /* m/s for the PML and the CFL limit; 0: max |v| (0) */
  /* Deepwave's survey_pad: cells kept around the sources and receivers per side; -1: to the
   * edge of the model (-1 everywhere: the whole model, the default). */
  int64_t survey_pad[6];
  /* has_origin != 0: origin[ndim] is the model cell where an initial state's window starts
   * (Deepwave's origin; only with an initial state). 0 (default): none. */
  int has_origin;
  int64_t origin[3];
  /* Gradients: store the forward field every this many inner steps (1, default: the exact
   * gradient of the discrete forward; Deepwave stores every step ratio). */
  int64_t model_gradient_sampling_interval;
  double freq_taper_frac;  /* resampling: cosine taper of this fraction of the spectrum (0) */
  double time_pad_frac;    /* resampling: zero padding of this fraction of nt (0) */
  int time_taper;          /* resampling: non-zero for a Hann taper in time (0) */
  int storage;             /* a sciproxy_storage_mode (SCIPROXY_STORAGE_DEVICE) */
  int storage_compression; /* non-zero: 8 bits per stored value (0) */
  /* For SCIPROXY_STORAGE_DISK: NULL (the default) or "": $TMPDIR, else /tmp, never the current
   * directory. The files have no name: nothing is left behind, however the process ends. */
  const char* storage_directory;
  int nparallel; /* OpenMP threads of the cpu backend; <= 0: all (0) */
  /* cpu, non-zero: choose the forward's steps per sweep and block sizes by timing candidates on
   * a few steps of this problem, cached per machine, shape, accuracy, dtype and threads (the
   * same bits; 0) */
  int autotune;
  /* MPI (c/core.h): the Fortran handle of the ranks the call runs on (SCIPROXY_NO_COMM: this
   * process alone). The shots are split across the ranks; the model (and scatter) gradients are
   * summed over them and written on every rank. */
  int64_t comm;
  int shots;   /* 0: every rank passes every shot, the same arrays (default); 1: each rank its
                * own shots (one model shared by all) */
  int results; /* with shots 0: 0, every rank receives every shot's outputs (default); 1, rank 0
                * does (the others' output pointers are not used and may be NULL). With shots 1:
                * 2, each rank its own shots' outputs */
} sciproxy_scalar_options;

void sciproxy_scalar_options_default(sciproxy_scalar_options* options);

/* The propagator's state on its padded grid, so that one call can continue another
 * (Deepwave's wavefield_0, wavefield_m1, psi_0 and zeta_0, and the final ones it returns). The
 * padded grid is the model window (the whole model, or the cells survey_pad keeps) plus
 * pml_width and accuracy/2 halo cells per side. Each array is
 * [nshots, padded_shape[0], ..., padded_shape[ndim - 1]], row-major; psi and zeta per
 * dimension, the first ndim used. As an input, any array may be NULL (zero); as an output,
 * padded_shape is written and each non-NULL array receives its field. */
typedef struct sciproxy_scalar_state_f32 {
  int64_t padded_shape[3];
  float* wavefield;
  float* previous_wavefield;
  float* psi[3];
  float* zeta[3];
} sciproxy_scalar_state_f32;
typedef struct sciproxy_scalar_state_f64 {
  int64_t padded_shape[3];
  double* wavefield;
  double* previous_wavefield;
  double* psi[3];
  double* zeta[3];
} sciproxy_scalar_state_f64;

/* Forward: writes receiver_amplitudes [nshots, nreceivers, nt] (NULL only when nreceivers is
 * 0). initial: the state to start from (NULL: at rest); final_state: receives the state after
 * the last step (NULL: not returned). */
sciproxy_status sciproxy_scalar_f32(const sciproxy_scalar_input_f32* input,
                                    const sciproxy_scalar_options* options,
                                    const sciproxy_scalar_state_f32* initial,
                                    float* receiver_amplitudes,
                                    sciproxy_scalar_state_f32* final_state);
sciproxy_status sciproxy_scalar_f64(const sciproxy_scalar_input_f64* input,
                                    const sciproxy_scalar_options* options,
                                    const sciproxy_scalar_state_f64* initial,
                                    double* receiver_amplitudes,
                                    sciproxy_scalar_state_f64* final_state);

/* The padded_shape[ndim] of the states of a call with this input and these options, without
 * running it (to size final_state and grad_initial). */
sciproxy_status sciproxy_scalar_state_shape_f32(const sciproxy_scalar_input_f32* input,
                                                const sciproxy_scalar_options* options,
                                                int64_t* padded_shape);
sciproxy_status sciproxy_scalar_state_shape_f64(const sciproxy_scalar_input_f64* input,
                                                const sciproxy_scalar_options* options,
                                                int64_t* padded_shape);

/* Gradient: given grad_receiver_amplitudes [nshots, nreceivers, nt] (the gradient of a loss
 * with respect to the receiver amplitudes) and optionally grad_final (NULL: zero; the gradient
 * with respect to the final state), runs the forward pass and its exact adjoint and writes
 * grad_v [nmodels, *shape], grad_source_amplitudes [nshots, nsources, nt] (NULL: not returned)
 * and grad_initial (NULL: not returned; the gradient with respect to the initial state). */
sciproxy_status sciproxy_scalar_gradient_f32(const sciproxy_scalar_input_f32* input,
                                             const sciproxy_scalar_options* options,
                                             const sciproxy_scalar_state_f32* initial,
                                             const float* grad_receiver_amplitudes,
                                             const sciproxy_scalar_state_f32* grad_final,
                                             float* grad_v, float* grad_source_amplitudes,
                                             sciproxy_scalar_state_f32* grad_initial);
sciproxy_status sciproxy_scalar_gradient_f64(const sciproxy_scalar_input_f64* input,
                                             const sciproxy_scalar_options* options,
                                             const sciproxy_scalar_state_f64* initial,
                                             const double* grad_receiver_amplitudes,
                                             const sciproxy_scalar_state_f64* grad_final,
                                             double* grad_v, double* grad_source_amplitudes,
                                             sciproxy_scalar_state_f64* grad_initial);

/* Born modelling: writes the scattered data receiver_amplitudes [nshots, nreceivers, nt] (the
 * derivative of scalar's data in the direction scatter) and bg_receiver_amplitudes
 * [nshots, nbg_receivers, nt] (the background field); the scatter is required. */
sciproxy_status sciproxy_scalar_born_f32(const sciproxy_scalar_born_input_f32* input,
                                         const sciproxy_scalar_options* options,
                                         float* receiver_amplitudes, float* bg_receiver_amplitudes);
sciproxy_status sciproxy_scalar_born_f64(const sciproxy_scalar_born_input_f64* input,
                                         const sciproxy_scalar_options* options,
                                         double* receiver_amplitudes,
                                         double* bg_receiver_amplitudes);

/* Born gradient: given grad_receiver_amplitudes (and optionally, else NULL,
 * grad_bg_receiver_amplitudes), writes grad_scatter [nmodels, *shape] (the migration image; the
 * scatter may be NULL: it does not enter it) and, when not NULL, grad_source_amplitudes
 * [nshots, nsources, nt]. */
sciproxy_status sciproxy_scalar_born_gradient_f32(const sciproxy_scalar_born_input_f32* input,
                                                  const sciproxy_scalar_options* options,
                                                  const float* grad_receiver_amplitudes,
                                                  const float* grad_bg_receiver_amplitudes,
                                                  float* grad_scatter,
                                                  float* grad_source_amplitudes);
sciproxy_status sciproxy_scalar_born_gradient_f64(const sciproxy_scalar_born_input_f64* input,
                                                  const sciproxy_scalar_options* options,
                                                  const double* grad_receiver_amplitudes,
                                                  const double* grad_bg_receiver_amplitudes,
                                                  double* grad_scatter,
                                                  double* grad_source_amplitudes);

#ifdef __cplusplus
}
#endif

#endif /* SCIPROXY_C_WAVE_H */
