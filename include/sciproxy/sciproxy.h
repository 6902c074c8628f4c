/* sciproxy C ABI, for C and Fortran (iso_c_binding) callers.
 *
 * Every function returns a sciproxy_status: 0 on success, otherwise an error code; the message of
 * the last error on the calling thread is sciproxy_last_error(). No function throws or aborts. */
#ifndef SCIPROXY_H
#define SCIPROXY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sciproxy_status {
  SCIPROXY_OK = 0,
  SCIPROXY_ERROR_INVALID_ARGUMENT = 1,
  SCIPROXY_ERROR_TYPE = 2,
  SCIPROXY_ERROR_NOT_COMPILED = 3,
  SCIPROXY_ERROR_DEVICE_UNAVAILABLE = 4,
  SCIPROXY_ERROR_IO = 5,
  SCIPROXY_ERROR_RUNTIME = 6
} sciproxy_status;

/* Message of the last error on this thread ("" when the last call succeeded). */
const char* sciproxy_last_error(void);
const char* sciproxy_version(void);

/* parstack: see include/sciproxy/stack.hpp for the semantics.
 *   traces[i] points at lengths[i] samples; offsets (ntraces); shifts and weights (nshifts, ntraces)
 *   row-major; *lengthout < 0 asks for the default window, and then *offsetout and *lengthout
 *   receive it. result holds nshifts * *lengthout (method 0) or nshifts (method 1) values; with
 *   accumulate != 0 the stack is added to it (method 0). device: "auto", "reference", "cpu",
 *   "cuda", "cuda:N". clamp_max_at_zero: pyrocko's method-1 quirk. nparallel <= 0: all threads.
 * To learn the window before allocating result, call sciproxy_parstack_extent first. */
sciproxy_status sciproxy_parstack_extent_f64(const double* const* traces, const int64_t* lengths,
                                             int64_t ntraces, const int32_t* offsets,
                                             const int32_t* shifts, int64_t nshifts,
                                             int32_t* offsetout, int64_t* lengthout);
sciproxy_status sciproxy_parstack_extent_f32(const float* const* traces, const int64_t* lengths,
                                             int64_t ntraces, const int32_t* offsets,
                                             const int32_t* shifts, int64_t nshifts,
                                             int32_t* offsetout, int64_t* lengthout);

sciproxy_status sciproxy_parstack_f64(const double* const* traces, const int64_t* lengths,
                                      int64_t ntraces, const int32_t* offsets,
                                      const int32_t* shifts, const double* weights, int64_t nshifts,
                                      int method, int32_t* offsetout, int64_t* lengthout,
                                      double* result, int64_t result_size, int accumulate,
                                      int clamp_max_at_zero, int nparallel, const char* device);
sciproxy_status sciproxy_parstack_f32(const float* const* traces, const int64_t* lengths,
                                      int64_t ntraces, const int32_t* offsets,
                                      const int32_t* shifts, const float* weights, int64_t nshifts,
                                      int method, int32_t* offsetout, int64_t* lengthout,
                                      float* result, int64_t result_size, int accumulate,
                                      int clamp_max_at_zero, int nparallel, const char* device);

/* argmax along axis 0 of a (rows, cols) row-major array into out (cols). */
sciproxy_status sciproxy_argmax_f64(const double* a, int64_t rows, int64_t cols, uint32_t* out,
                                    int nparallel, int pyrocko_compat);
sciproxy_status sciproxy_argmax_f32(const float* a, int64_t rows, int64_t cols, uint32_t* out,
                                    int nparallel, int pyrocko_compat);

/* scalar: constant-density scalar wave propagation (Deepwave's scalar propagator); see
 * include/sciproxy/wave.hpp for the semantics. Arrays are row-major, the last dimension fastest.
 *   ndim 1, 2 or 3; shape[ndim] cells and spacing[ndim] metres of the model;
 *   v [nmodels, *shape] m/s, nmodels 1 (one model for every shot) or nshots;
 *   dt seconds and nt samples of the sources and receivers (a dt above the CFL limit is
 *   resampled internally, as Deepwave does);
 *   source_amplitudes [nshots, nsources, nt]; source_locations [nshots, nsources, ndim] and
 *   receiver_locations [nshots, nreceivers, ndim] are cell indices into the model (NULL when the
 *   count is 0);
 *   accuracy 2, 4, 6 or 8; pml_width[2*ndim] cells per side {dim0 low, dim0 high, dim1 low, ...}
 *   (NULL: 20 on every side); pml_freq Hz (Deepwave's default is 25); max_vel m/s for the PML
 *   and the CFL limit (0: max |v|); device "auto", "reference", "cpu", "cuda", "cuda:N".
 * Forward: receiver_amplitudes [nshots, nreceivers, nt] are written.
 * Gradient: given grad_receiver_amplitudes [nshots, nreceivers, nt] (the gradient of a loss with
 * respect to the receiver amplitudes), writes grad_v [nmodels, *shape] and, when not NULL,
 * grad_source_amplitudes [nshots, nsources, nt]. Runs the forward pass and its exact adjoint. */
sciproxy_status sciproxy_scalar_f32(int ndim, const int64_t* shape, const double* spacing,
                                    const float* v, int64_t nmodels, double dt, int64_t nt,
                                    int64_t nshots, int64_t nsources, int64_t nreceivers,
                                    const float* source_amplitudes, const int64_t* source_locations,
                                    const int64_t* receiver_locations, int accuracy,
                                    const int64_t* pml_width, double pml_freq, double max_vel,
                                    const char* device, float* receiver_amplitudes);
sciproxy_status sciproxy_scalar_f64(int ndim, const int64_t* shape, const double* spacing,
                                    const double* v, int64_t nmodels, double dt, int64_t nt,
                                    int64_t nshots, int64_t nsources, int64_t nreceivers,
                                    const double* source_amplitudes,
                                    const int64_t* source_locations,
                                    const int64_t* receiver_locations, int accuracy,
                                    const int64_t* pml_width, double pml_freq, double max_vel,
                                    const char* device, double* receiver_amplitudes);
sciproxy_status sciproxy_scalar_gradient_f32(
    int ndim, const int64_t* shape, const double* spacing, const float* v, int64_t nmodels,
    double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    const float* source_amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq,
    double max_vel, const char* device, const float* grad_receiver_amplitudes, float* grad_v,
    float* grad_source_amplitudes);
sciproxy_status sciproxy_scalar_gradient_f64(
    int ndim, const int64_t* shape, const double* spacing, const double* v, int64_t nmodels,
    double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    const double* source_amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq,
    double max_vel, const char* device, const double* grad_receiver_amplitudes, double* grad_v,
    double* grad_source_amplitudes);

/* The propagator's state on its padded grid, so that one call can continue another (Deepwave's
 * wavefield_0, wavefield_m1, psi_0 and zeta_0, and the final ones it returns). The padded grid is
 * the model window (the whole model, or the cells survey_pad keeps) plus pml_width and accuracy/2
 * halo cells per side. Each array is [nshots, padded_shape[0], ..., padded_shape[ndim - 1]],
 * row-major; psi and zeta per dimension, the first ndim used. As an input, any array may be NULL
 * (zero); as an output, padded_shape is written and each non-NULL array receives its field. */
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

/* scalar_ex: sciproxy_scalar with Deepwave's survey_pad[2 * ndim] (NULL: the whole model; -1 on a
 * side: to the edge of the model), origin[ndim] (NULL: none; with an initial state, the model cell
 * where the state's window starts), an initial state (NULL: zero) and the state after the last
 * step (final_state, NULL: not returned).
 * scalar_gradient_ex: sciproxy_scalar_gradient with the same additions, grad_final (NULL: zero;
 * the gradient of the loss with respect to the final state) and grad_initial (NULL: not
 * returned; the gradient with respect to the initial state).
 * scalar_state_shape: the padded_shape[ndim] of the states of a call with these arguments
 * (without running it), to size final_state and grad_initial. */
sciproxy_status sciproxy_scalar_state_shape_f32(
    int ndim, const int64_t* shape, const double* spacing, const float* v, int64_t nmodels,
    double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    const float* source_amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq,
    double max_vel, const int64_t* survey_pad, int64_t* padded_shape);
sciproxy_status sciproxy_scalar_state_shape_f64(
    int ndim, const int64_t* shape, const double* spacing, const double* v, int64_t nmodels,
    double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    const double* source_amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq,
    double max_vel, const int64_t* survey_pad, int64_t* padded_shape);
sciproxy_status sciproxy_scalar_ex_f32(
    int ndim, const int64_t* shape, const double* spacing, const float* v, int64_t nmodels,
    double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    const float* source_amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq,
    double max_vel, const int64_t* survey_pad, const int64_t* origin,
    const sciproxy_scalar_state_f32* initial, const char* device, float* receiver_amplitudes,
    sciproxy_scalar_state_f32* final_state);
sciproxy_status sciproxy_scalar_ex_f64(
    int ndim, const int64_t* shape, const double* spacing, const double* v, int64_t nmodels,
    double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    const double* source_amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq,
    double max_vel, const int64_t* survey_pad, const int64_t* origin,
    const sciproxy_scalar_state_f64* initial, const char* device, double* receiver_amplitudes,
    sciproxy_scalar_state_f64* final_state);
sciproxy_status sciproxy_scalar_gradient_ex_f32(
    int ndim, const int64_t* shape, const double* spacing, const float* v, int64_t nmodels,
    double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    const float* source_amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq,
    double max_vel, const int64_t* survey_pad, const int64_t* origin,
    const sciproxy_scalar_state_f32* initial, const char* device,
    const float* grad_receiver_amplitudes, const sciproxy_scalar_state_f32* grad_final,
    float* grad_v, float* grad_source_amplitudes, sciproxy_scalar_state_f32* grad_initial);
sciproxy_status sciproxy_scalar_gradient_ex_f64(
    int ndim, const int64_t* shape, const double* spacing, const double* v, int64_t nmodels,
    double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    const double* source_amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, int accuracy, const int64_t* pml_width, double pml_freq,
    double max_vel, const int64_t* survey_pad, const int64_t* origin,
    const sciproxy_scalar_state_f64* initial, const char* device,
    const double* grad_receiver_amplitudes, const sciproxy_scalar_state_f64* grad_final,
    double* grad_v, double* grad_source_amplitudes, sciproxy_scalar_state_f64* grad_initial);

/* scalar_born: Born (linearised) modelling, Deepwave's scalar_born; arguments as for scalar, plus
 * scatter [nmodels, *shape] m/s (the velocity perturbation) and nbg_receivers background receivers
 * at bg_receiver_locations [nshots, nbg_receivers, ndim] (NULL when 0). Writes the scattered data
 * receiver_amplitudes [nshots, nreceivers, nt] (the derivative of scalar's data in the direction
 * scatter) and bg_receiver_amplitudes [nshots, nbg_receivers, nt] (the background field).
 * scalar_born_gradient: given grad_receiver_amplitudes (and optionally, else NULL,
 * grad_bg_receiver_amplitudes), writes grad_scatter [nmodels, *shape] (the migration image; the
 * scatter may be NULL: it does not enter it) and, when not NULL, grad_source_amplitudes
 * [nshots, nsources, nt]. */
sciproxy_status sciproxy_scalar_born_f32(
    int ndim, const int64_t* shape, const double* spacing, const float* v, const float* scatter,
    int64_t nmodels, double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    int64_t nbg_receivers, const float* source_amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, const int64_t* bg_receiver_locations, int accuracy,
    const int64_t* pml_width, double pml_freq, double max_vel, const char* device,
    float* receiver_amplitudes, float* bg_receiver_amplitudes);
sciproxy_status sciproxy_scalar_born_gradient_f32(
    int ndim, const int64_t* shape, const double* spacing, const float* v, const float* scatter,
    int64_t nmodels, double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    int64_t nbg_receivers, const float* source_amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, const int64_t* bg_receiver_locations, int accuracy,
    const int64_t* pml_width, double pml_freq, double max_vel, const char* device,
    const float* grad_receiver_amplitudes, const float* grad_bg_receiver_amplitudes, float* grad_scatter,
    float* grad_source_amplitudes);
sciproxy_status sciproxy_scalar_born_f64(
    int ndim, const int64_t* shape, const double* spacing, const double* v, const double* scatter,
    int64_t nmodels, double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    int64_t nbg_receivers, const double* source_amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, const int64_t* bg_receiver_locations, int accuracy,
    const int64_t* pml_width, double pml_freq, double max_vel, const char* device,
    double* receiver_amplitudes, double* bg_receiver_amplitudes);
sciproxy_status sciproxy_scalar_born_gradient_f64(
    int ndim, const int64_t* shape, const double* spacing, const double* v, const double* scatter,
    int64_t nmodels, double dt, int64_t nt, int64_t nshots, int64_t nsources, int64_t nreceivers,
    int64_t nbg_receivers, const double* source_amplitudes, const int64_t* source_locations,
    const int64_t* receiver_locations, const int64_t* bg_receiver_locations, int accuracy,
    const int64_t* pml_width, double pml_freq, double max_vel, const char* device,
    const double* grad_receiver_amplitudes, const double* grad_bg_receiver_amplitudes, double* grad_scatter,
    double* grad_source_amplitudes);

/* tti: the coupled P/M self-adjoint TTI propagator with variable density, Q sponge and optional
 * free surface (Bube et al. 2016); see include/sciproxy/tti.hpp for the equations. Arrays are
 * row-major, axis 2 fastest; the model arrays are [shape[0] * shape[1] * shape[2]] cells, and
 * every one but vp may be NULL (b = 1, epsilon = delta = theta = phi = 0, f = default_f).
 * Angles in radians. Locations are cell indices into the model: source_locations
 * [nshots, nsources, 3], receiver_locations [nshots, nreceivers, 3]. options: NULL for
 * sciproxy_tti_default_options(). A dt beyond the stability limit is an error.
 * Forward: source_amplitudes [nshots, nsources, nt] in, receiver_amplitudes
 * [nshots, nreceivers, nt] out (P at the receivers). Adjoint: receiver_data
 * [nshots, nreceivers, nt] in, source_amplitudes [nshots, nsources, nt] out: the exact adjoint of
 * the forward map from source amplitudes to receiver amplitudes (RTM / FWI). */
typedef struct sciproxy_tti_options {
  int space_order;          /* 4, 8, 12 or 16 (default 8) */
  int64_t sponge_width[6];  /* cells per side {axis0 low, axis0 high, axis1 low, ...} (60) */
  double q_min;             /* Q at the outer edge of the sponge (0.1) */
  double q_interior;        /* Q in the model (100) */
  double freq_q;            /* Hz (5); 0: no attenuation */
  double default_f;         /* f where the f array is NULL (0.85) */
  int free_surface;         /* non-zero: free surface at the first cell of axis 0 (0) */
  int nparallel;            /* OpenMP threads for the cpu backend; <= 0: all */
} sciproxy_tti_options;

typedef struct sciproxy_tti_model_f64 {
  int64_t shape[3];
  double spacing[3]; /* metres */
  const double *vp, *buoyancy, *epsilon, *delta, *theta, *phi, *f;
} sciproxy_tti_model_f64;

typedef struct sciproxy_tti_model_f32 {
  int64_t shape[3];
  double spacing[3]; /* metres */
  const float *vp, *buoyancy, *epsilon, *delta, *theta, *phi, *f;
} sciproxy_tti_model_f32;

sciproxy_tti_options sciproxy_tti_default_options(void);

sciproxy_status sciproxy_tti_f64(const sciproxy_tti_model_f64* model,
                                 const sciproxy_tti_options* options, double dt, int64_t nt,
                                 int64_t nshots, int64_t nsources, int64_t nreceivers,
                                 const double* source_amplitudes, const int64_t* source_locations,
                                 const int64_t* receiver_locations, const char* device,
                                 double* receiver_amplitudes);
sciproxy_status sciproxy_tti_f32(const sciproxy_tti_model_f32* model,
                                 const sciproxy_tti_options* options, double dt, int64_t nt,
                                 int64_t nshots, int64_t nsources, int64_t nreceivers,
                                 const float* source_amplitudes, const int64_t* source_locations,
                                 const int64_t* receiver_locations, const char* device,
                                 float* receiver_amplitudes);
sciproxy_status sciproxy_tti_adjoint_f64(const sciproxy_tti_model_f64* model,
                                         const sciproxy_tti_options* options, double dt,
                                         int64_t nt, int64_t nshots, int64_t nsources,
                                         int64_t nreceivers, const double* receiver_data,
                                         const int64_t* source_locations,
                                         const int64_t* receiver_locations, const char* device,
                                         double* source_amplitudes);
sciproxy_status sciproxy_tti_adjoint_f32(const sciproxy_tti_model_f32* model,
                                         const sciproxy_tti_options* options, double dt,
                                         int64_t nt, int64_t nshots, int64_t nsources,
                                         int64_t nreceivers, const float* receiver_data,
                                         const int64_t* source_locations,
                                         const int64_t* receiver_locations, const char* device,
                                         float* source_amplitudes);

#ifdef __cplusplus
}
#endif

#endif /* SCIPROXY_H */
