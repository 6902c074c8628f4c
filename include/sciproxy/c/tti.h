/* sciproxy C ABI, tti family: the coupled P/M self-adjoint TTI propagator with variable
 * density, Q sponge and optional free surface (Bube et al. 2016) and its exact adjoint, and the
 * one-field operator of Devito's workshop demo. Equations: docs/kernels/tti.md; the C++ API is
 * include/sciproxy/tti.hpp and include/sciproxy/tti_demo.hpp. The calling convention is
 * described at the top of c/core.h. */
#ifndef SCIPROXY_C_TTI_H
#define SCIPROXY_C_TTI_H

#include "sciproxy/c/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The earth model: [shape[0] * shape[1] * shape[2]] cells, row-major, axis 2 fastest, axis 0
 * the depth. Every array but vp may be NULL (b = 1, epsilon = delta = theta = phi = 0,
 * f = options.default_f). Angles in radians. */
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

/* dt seconds (beyond the stability limit is an error, see sciproxy_tti_max_dt), nt steps;
 * source_locations [nshots, nsources, 3] and receiver_locations [nshots, nreceivers, 3] are cell
 * indices into the model; source_amplitudes [nshots, nsources, nt] (read by the forward only). */
typedef struct sciproxy_tti_input_f64 {
  sciproxy_tti_model_f64 model;
  double dt;
  int64_t nt, nshots, nsources, nreceivers;
  const double* source_amplitudes;
  const int64_t* source_locations;
  const int64_t* receiver_locations;
} sciproxy_tti_input_f64;
typedef struct sciproxy_tti_input_f32 {
  sciproxy_tti_model_f32 model;
  double dt;
  int64_t nt, nshots, nsources, nreceivers;
  const float* source_amplitudes;
  const int64_t* source_locations;
  const int64_t* receiver_locations;
} sciproxy_tti_input_f32;

typedef struct sciproxy_tti_options {
  size_t struct_size;      /* sizeof(sciproxy_tti_options), set by the defaults function */
  const char* device;      /* "auto" (default), "reference", "cpu", "cuda", "cuda:N" */
  int space_order;         /* 4, 8 (default), 12 or 16 */
  int64_t sponge_width[6]; /* cells per side {axis0 low, axis0 high, axis1 low, ...} (60) */
  double q_min;            /* Q at the outer edge of the sponge (0.1) */
  double q_interior;       /* Q in the model (100) */
  double freq_q;           /* Hz (5); 0: no attenuation */
  double default_f;        /* f where model.f is NULL (0.85) */
  int free_surface;        /* non-zero: free surface at the first cell of axis 0 (0) */
  int nparallel;           /* OpenMP threads of the cpu backend (per rank under MPI); <= 0: all
                            * (0) */
  /* MPI (c/core.h): the Fortran handle of the ranks the call runs on (SCIPROXY_NO_COMM: this
   * process alone). The padded grid (model and sponge) is split into a Cartesian grid of
   * subdomains, one per rank, each stepped by its rank with halo exchanges (docs/kernels/tti.md,
   * "Under MPI"); the cpu backend only (device "cpu", or "auto" where it resolves to the cpu).
   * Every rank passes the same input (model, dt, traces, locations) and options but nparallel,
   * and outputs of the one-process sizes: receiver_amplitudes [nshots, nreceivers, nt] (the
   * adjoint's source_amplitudes [nshots, nsources, nt]) are written whole on every rank, the
   * bits of one process. (These functions return no wavefield state, so no rank's subdomain
   * reaches C.) The wrapper's checks (pointers, sizes, struct_size, device) are agreed: a
   * failure on one rank is every rank's, the message naming that rank. */
  int64_t comm;
  /* Ranks per axis of that grid, 0 = chosen (as MPI_Dims_create) to exchange the fewest halo
   * cells ({0, 0, 0}). A grid whose product is not the ranks, or that leaves a rank fewer than
   * space_order/2 cells (of model and sponge) along a split axis, is an error naming
   * process_grid on every rank. Without comm only grids of one rank fit ({0, 0, 0}, {1, 1, 1}). */
  int process_grid[3];
} sciproxy_tti_options;

void sciproxy_tti_options_default(sciproxy_tti_options* options);

/* Forward: writes receiver_amplitudes [nshots, nreceivers, nt] (P at the receivers). */
sciproxy_status sciproxy_tti_f64(const sciproxy_tti_input_f64* input,
                                 const sciproxy_tti_options* options, double* receiver_amplitudes);
sciproxy_status sciproxy_tti_f32(const sciproxy_tti_input_f32* input,
                                 const sciproxy_tti_options* options, float* receiver_amplitudes);

/* Adjoint: receiver_data [nshots, nreceivers, nt] in, source_amplitudes [nshots, nsources, nt]
 * out: the exact adjoint of the forward map from source amplitudes to receiver amplitudes
 * (RTM, FWI). input.source_amplitudes is not read. */
sciproxy_status sciproxy_tti_adjoint_f64(const sciproxy_tti_input_f64* input,
                                         const sciproxy_tti_options* options,
                                         const double* receiver_data, double* source_amplitudes);
sciproxy_status sciproxy_tti_adjoint_f32(const sciproxy_tti_input_f32* input,
                                         const sciproxy_tti_options* options,
                                         const float* receiver_data, float* source_amplitudes);

/* The largest stable dt for input.model with these options (input.dt and the sizes not read). */
sciproxy_status sciproxy_tti_max_dt_f64(const sciproxy_tti_input_f64* input,
                                        const sciproxy_tti_options* options, double* max_dt);
sciproxy_status sciproxy_tti_max_dt_f32(const sciproxy_tti_input_f32* input,
                                        const sciproxy_tti_options* options, double* max_dt);

/* The workshop demo (Devito's TTISelfAdjointForward): one field u on an [NX, NY, NZ] grid, z
 * fastest (Devito's layout). Each material is a constant (the value) or, when its field pointer
 * is not NULL, one value per grid point (the field; the value is then not read). Defaults are
 * not implied: set every value (or field). The source sits at source_position metres (grid
 * point (i, j, k) at (i, j, k) * spacing) and injects source_amplitudes [nt]; initial_u and
 * initial_u_prev [NX, NY, NZ] are the state to start from (NULL: zero). */
typedef struct sciproxy_tti_demo_input_f64 {
  int64_t shape[3];
  double spacing[3];
  double dt;
  int64_t nt;
  double vp, b, epsilon, eta, f, theta, phi, damping;
  const double *vp_field, *b_field, *epsilon_field, *eta_field, *f_field, *theta_field, *phi_field,
      *damping_field;
  double source_position[3];
  const double* source_amplitudes;
  const double *initial_u, *initial_u_prev;
} sciproxy_tti_demo_input_f64;
typedef struct sciproxy_tti_demo_input_f32 {
  int64_t shape[3];
  double spacing[3];
  double dt;
  int64_t nt;
  double vp, b, epsilon, eta, f, theta, phi, damping;
  const float *vp_field, *b_field, *epsilon_field, *eta_field, *f_field, *theta_field, *phi_field,
      *damping_field;
  double source_position[3];
  const float* source_amplitudes;
  const float *initial_u, *initial_u_prev;
} sciproxy_tti_demo_input_f32;

typedef enum sciproxy_tti_demo_form {
  SCIPROXY_TTI_DEMO_TWO_PASS = 0, /* the demo's form: a flux pass, then a divergence pass */
  SCIPROXY_TTI_DEMO_FUSED = 1     /* one pass per step, the fluxes kept on chip (default) */
} sciproxy_tti_demo_form;

typedef struct sciproxy_tti_demo_options {
  size_t struct_size; /* sizeof(sciproxy_tti_demo_options), set by the defaults function */
  const char* device; /* "auto" (default), "reference", "cpu", "cuda", "cuda:N" */
  int space_order;    /* 4, 8 (default), 12 or 16 */
  int form;           /* a sciproxy_tti_demo_form; the reference always runs two passes */
  int nparallel;      /* OpenMP threads of the cpu backend; <= 0: all (0) */
  /* cpu, fused form, non-zero: choose the tile budget and steps per sweep by timing candidates
   * on a few steps of this problem, cached per machine, shape, dtype and threads (the same
   * bits; 0) */
  int autotune;
  /* MPI (c/core.h): the Fortran handle of the ranks the call runs on (SCIPROXY_NO_COMM: this
   * process alone). The grid is split into a Cartesian grid of blocks, one per rank, each
   * stepped by its rank with a ghost ring computed again and refreshed from the neighbours after
   * each sweep (docs/kernels/tti.md, "The workshop operator under MPI"); the cpu backend only
   * (device "cpu", or "auto" where it resolves to the cpu), the bits of one process. Every rank
   * passes the same input (sizes, materials, source, initial state) and options but nparallel;
   * ranks that disagree fail every rank. The wrapper's checks (pointers, sizes, struct_size,
   * device) are agreed: a failure on one rank is every rank's, the message naming that rank; u
   * (u_prev) is an array on every rank that receives fields or NULL on all of them (not
   * returned). */
  int64_t comm;
  /* Ranks per axis (x, y, z) of that grid, 0 = chosen (as MPI_Dims_create) to exchange the
   * fewest points ({0, 0, 0}). Along a split axis every block must hold the ghost ring's width,
   * (space_order - 1) points times the steps per sweep (1, or 2 where autotune may choose two;
   * where they do not fit, one is taken: the same bits); a grid whose product is not the ranks, or
   * that leaves a block thinner, is an error naming process_grid on every rank. Without comm only
   * grids of one rank fit ({0, 0, 0}, {1, 1, 1}). */
  int process_grid[3];
  /* Where u and u_prev go: 0: every rank receives the whole grid [NX, NY, NZ] (default); 1: rank
   * 0 only (the others' u and u_prev are not written and may be NULL); 2: each rank its own
   * block [shape[0], shape[1], shape[2]] of sciproxy_tti_demo_block, row-major, whose point
   * (0, 0, 0) is the grid's point origin. On one process every layout is the whole grid. */
  int results;
} sciproxy_tti_demo_options;

void sciproxy_tti_demo_options_default(sciproxy_tti_demo_options* options);

/* Runs nt steps; u and u_prev (each may be NULL: not returned) receive u^nt and u^(nt-1), of
 * the whole grid [NX, NY, NZ] or, under MPI with options.results 2, of this rank's block (see
 * options.comm and results). */
sciproxy_status sciproxy_tti_demo_f64(const sciproxy_tti_demo_input_f64* input,
                                      const sciproxy_tti_demo_options* options, double* u,
                                      double* u_prev);
sciproxy_status sciproxy_tti_demo_f32(const sciproxy_tti_demo_input_f32* input,
                                      const sciproxy_tti_demo_options* options, float* u,
                                      float* u_prev);

/* The part of the grid a run with these input and options writes to u and u_prev on this rank,
 * without running it: origin and shape (neither may be NULL) receive the grid point of the
 * part's point (0, 0, 0) and its points per axis: the whole grid ({0, 0, 0}, {NX, NY, NZ}) on one
 * process or with options.results 0, on rank 0 alone with results 1 ({0, 0, 0} elsewhere), this
 * rank's block with results 2. process_grid (may be NULL) receives the ranks per axis the run
 * takes. Reads input.shape and which material fields are not NULL (they size the ghost ring),
 * not the values, dt, nt, the source or the initial state. Not collective: each rank may call it
 * alone, and it checks nothing against the other ranks; a shape or process grid the run would
 * refuse is the same error. */
sciproxy_status sciproxy_tti_demo_block_f64(const sciproxy_tti_demo_input_f64* input,
                                            const sciproxy_tti_demo_options* options,
                                            int64_t origin[3], int64_t shape[3],
                                            int process_grid[3]);
sciproxy_status sciproxy_tti_demo_block_f32(const sciproxy_tti_demo_input_f32* input,
                                            const sciproxy_tti_demo_options* options,
                                            int64_t origin[3], int64_t shape[3],
                                            int process_grid[3]);

/* The stability limit a run's dt is checked against, for these materials and spacing. */
sciproxy_status sciproxy_tti_demo_dt_limit_f64(const sciproxy_tti_demo_input_f64* input,
                                               const sciproxy_tti_demo_options* options,
                                               double* dt_limit);
sciproxy_status sciproxy_tti_demo_dt_limit_f32(const sciproxy_tti_demo_input_f32* input,
                                               const sciproxy_tti_demo_options* options,
                                               double* dt_limit);

#ifdef __cplusplus
}
#endif

#endif /* SCIPROXY_C_TTI_H */
