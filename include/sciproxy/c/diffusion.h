/* sciproxy C ABI, diffusion family: ICON's horizontal diffusion granule as ICON's Fortran model
 * calls it (docs/kernels/diffusion.md, "Interface that Fortran callers used"): a grid, then init
 * once, then run every dynamics step on the model's own arrays, in place. The C++ API is
 * include/sciproxy/diffusion.hpp; the calling convention (status codes, sciproxy_last_error(),
 * struct_size) is described at the top of c/core.h.
 *
 * Arrays are Fortran's (column-major, the first index fastest), shapes written (a, b) as Fortran
 * declares them, one block (nproma = the number of cells, edges or vertices), as ICON holds them
 * with nblks = 1:
 *   - init's inputs are read once and converted (the granule keeps its own copy): the caller may
 *     free them after init.
 *   - run's fields are updated in place, without copies: w(num_cells, nlev + 1) is the caller's
 *     memory throughout the run.
 * Handles (the grid and the granule) are opaque. A handle that was freed, or never returned by
 * this library, is refused (SCIPROXY_ERROR_INVALID_ARGUMENT naming it), never dereferenced
 * (unless a later init was given the same address: set freed handles to NULL, as the Fortran
 * module's free routines do).
 * A granule is not thread-safe: one run at a time per handle (different handles may run
 * concurrently). */
#ifndef SCIPROXY_C_DIFFUSION_H
#define SCIPROXY_C_DIFFUSION_H

#include "sciproxy/c/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The grid ---- */

typedef struct sciproxy_diffusion_grid sciproxy_diffusion_grid; /* opaque */

/* The generated global grid RnBk on the Earth's sphere (sciproxy's ICON-style generator:
 * 20 n^2 4^k cells, 30 n^2 4^k edges, 10 n^2 4^k + 2 vertices), with its geometry, so that
 * sciproxy_diffusion_init_computed can derive every coefficient from it. *grid is NULL on error. */
sciproxy_status sciproxy_diffusion_grid_icosahedral(int32_t n, int32_t k,
                                                    sciproxy_diffusion_grid** grid);

/* A grid from the connectivities as ICON holds them: Fortran arrays of 1-based indices,
 *   c2e(num_cells, 3), c2e2c(num_cells, 3), c2v(num_cells, 3),
 *   e2c(num_edges, 2), e2v(num_edges, 2), e2c2v(num_edges, 4),
 *   v2e(num_vertices, 6), v2c(num_vertices, 6),
 * (ICON's edge_idx, neighbor_idx, vertex_idx of cells; cell_idx, vertex_idx and the quad's vertex
 * indices of edges; edge_idx and cell_idx of vertices), and refin_ctrl per cell, edge and vertex
 * (ICON's refin_c_ctrl, refin_e_ctrl, refin_v_ctrl: the boundary row, 0 in the interior; NULL:
 * all 0, a global grid). A missing neighbour (at a limited-area boundary, a pentagon's sixth) is
 * any index <= 0 in c2e2c, e2c, e2c2v, v2e and v2c; c2e, c2v and e2v must be complete. Every index
 * is checked against its count (the error names the array and the Fortran position (i, j)), then
 * converted to sciproxy's zero-based tables; C2E2CO (the cell, then C2E2C) is derived, and the
 * zones' index ranges follow from refin_ctrl (ICON4Py's compute_domain_bounds), which must order
 * each dimension as ICON does (boundary rows first).
 * Such a grid has no geometry: its coefficients come through sciproxy_diffusion_init. */
sciproxy_status sciproxy_diffusion_grid_init(
    int32_t num_cells, int32_t num_edges, int32_t num_vertices, const int32_t* c2e,
    const int32_t* c2e2c, const int32_t* e2c, const int32_t* e2v, const int32_t* e2c2v,
    const int32_t* v2e, const int32_t* v2c, const int32_t* c2v, const int32_t* refin_c_ctrl,
    const int32_t* refin_e_ctrl, const int32_t* refin_v_ctrl, sciproxy_diffusion_grid** grid);

/* The grid's sizes (each pointer may be NULL). */
sciproxy_status sciproxy_diffusion_grid_sizes(const sciproxy_diffusion_grid* grid,
                                              int32_t* num_cells, int32_t* num_edges,
                                              int32_t* num_vertices);

/* The positions and normals of a generated grid, to set up fields (each pointer may be NULL):
 * cell_lat, cell_lon (num_cells), edge_lat, edge_lon, primal_normal_x, primal_normal_y
 * (num_edges; the edge's primal normal, zonal and meridional components), radians. A grid from
 * tables has none: SCIPROXY_ERROR_INVALID_ARGUMENT. */
sciproxy_status sciproxy_diffusion_grid_geometry(const sciproxy_diffusion_grid* grid,
                                                 double* cell_lat, double* cell_lon,
                                                 double* edge_lat, double* edge_lon,
                                                 double* primal_normal_x, double* primal_normal_y);

void sciproxy_diffusion_grid_free(sciproxy_diffusion_grid* grid); /* NULL is allowed */

/* ---- Options and configuration ---- */

/* How run's fields lie in memory. */
typedef enum sciproxy_diffusion_layout {
  SCIPROXY_DIFFUSION_FORTRAN_ORDER = 0, /* w(num_cells, nlev + 1): the cell index fastest */
  SCIPROXY_DIFFUSION_C_ORDER = 1        /* w[num_cells][nlev + 1]: the level fastest (ICON4Py) */
} sciproxy_diffusion_layout;

/* ICON's own decomposition (options.local_decomposition; docs/kernels/diffusion.md, "Under
 * MPI"): the grid init takes is this rank's local patch, from ICON's local tables (1-based, its
 * own numbering, 0 for a neighbour outside the patch), each dimension's owned entities first,
 * then its halo levels in order, and every input of init is its rows. Per local entity, one
 * array each of the patch's num_cells, num_edges, num_vertices values: its index in the global
 * grid, 1-based (ICON's decomp_info%glb_index), the rank owning it (0-based), and its halo level
 * (0 owned, then 1, 2, and 3 for edges; ICON's decomp_info%halo_level). The ranks find their
 * exchanges at init by asking each halo entry's owner for it. */
typedef struct sciproxy_diffusion_local_decomposition {
  const int32_t *cell_global_index, *edge_global_index, *vertex_global_index;
  const int32_t *cell_owner, *edge_owner, *vertex_owner;
  const int32_t *cell_halo_level, *edge_halo_level, *vertex_halo_level;
} sciproxy_diffusion_local_decomposition;

typedef struct sciproxy_diffusion_options {
  size_t struct_size;       /* sizeof(sciproxy_diffusion_options), set by the defaults function */
  const char* device;       /* "auto" (default), "reference", "cpu", "cuda", "cuda:N" */
  int32_t nparallel;        /* OpenMP threads of the cpu backend; 0: all (0) */
  int32_t layout;           /* a sciproxy_diffusion_layout (SCIPROXY_DIFFUSION_FORTRAN_ORDER) */
  int32_t single_precision; /* non-zero: float32 fields, run with sciproxy_diffusion_run_f32 (0) */
  int32_t check_finite;     /* non-zero: each run first checks vn, w, theta_v, exner for NaN (1) */
  /* MPI (docs/kernels/diffusion.md, "Under MPI"; c/core.h): the ranks of comm share the grid.
   * Every rank passes the same grid and inputs; init and run are collective. */
  int64_t comm; /* the communicator's Fortran handle (SCIPROXY_NO_COMM: this process alone) */
  /* The caller's decomposition: the rank (0-based) of every cell of the grid, num_cells values,
   * read at init; NULL: METIS's partition (SCIPROXY_ERROR_NOT_COMPILED without METIS). */
  const int32_t* cell_owner;
  /* 0: run takes the whole grid's fields on every rank and returns the whole result on every
   * rank. Non-zero, as ICON passes them: each rank's own fields over its local entities
   * (sciproxy_diffusion_local_entities); afterwards vn, w, theta_v and exner hold the
   * one-process result on every local entry, halos included, the diagnostics on owned cells. */
  int32_t rank_local_fields;
  /* ICON's own form (above): NULL for a global grid given alike on every rank. With it,
   * rank_local_fields must be non-zero and cell_owner is not read. */
  const sciproxy_diffusion_local_decomposition* local_decomposition;
} sciproxy_diffusion_options;

void sciproxy_diffusion_options_default(sciproxy_diffusion_options* options);

/* ICON4Py's DiffusionConfig, its names and defaults (diffusion.hpp's DiffusionConfig); flags are
 * int32 (non-zero: true), enums ICON's integers. What ICON4Py does not implement is refused at
 * init, naming the field (config.diffusion_type must be 5, type_vn_diffu 1, type_t_diffu 2,
 * shear_type 0-2, apply_smag_diff_to_vertical_wind and compute_3d_smag_coeff 0). */
typedef struct sciproxy_diffusion_config {
  size_t struct_size;     /* sizeof(sciproxy_diffusion_config), set by the defaults function */
  int32_t diffusion_type; /* hdiff_order (5) */
  int32_t apply_to_vertical_wind;           /* lhdiff_w (1) */
  int32_t apply_to_horizontal_wind;         /* lhdiff_vn (1) */
  int32_t apply_to_temperature;             /* lhdiff_temp (1) */
  int32_t apply_smag_diff_to_vertical_wind; /* (0) */
  int32_t compute_3d_smag_coeff;            /* (0) */
  int32_t type_vn_diffu;                    /* (1) */
  int32_t type_t_diffu;                     /* (2) */
  double hdiff_efdt_ratio;                  /* (36) */
  double hdiff_w_efdt_ratio;                /* (15) */
  double smagorinski_scaling_factor;        /* (0.015) */
  double smagorinski_scaling_factor2, smagorinski_scaling_factor3, smagorinski_scaling_factor4;
  double smagorinski_scaling_height, smagorinski_scaling_height2, smagorinski_scaling_height3,
      smagorinski_scaling_height4;                   /* metres */
  int32_t apply_zdiffusion_t;                        /* (1) */
  int32_t ndyn_substeps;                             /* (5) */
  double temperature_boundary_diffusion_denominator; /* (135) */
  double velocity_boundary_diffusion_denominator;    /* (200) */
  double max_nudging_coefficient;                    /* (0.1) */
  int32_t shear_type;                                /* itype_sher (0) */
  int32_t iforcing;                                  /* (0) */
  double a_hshr;                                     /* (1) */
  int32_t loutshs;                                   /* (0) */
} sciproxy_diffusion_config;

void sciproxy_diffusion_config_default(sciproxy_diffusion_config* config);

/* ---- The granule ---- */

typedef struct sciproxy_diffusion sciproxy_diffusion; /* opaque */

/* init with ICON's own fields, every array a Fortran array read once and converted (nc =
 * num_cells, ne = num_edges, nv = num_vertices of the grid, nlev = num_levels >= 2):
 *   vct_a(nlev + 1)            interface heights from the model top down, metres, decreasing
 *   end_index_of_damping_layer ICON4Py's zero-based index of the last damping-layer level
 *                              (ICON's nrdmax - 1), in [0, nlev)
 *   theta_ref_mc(nc, nlev), wgtfac_c(nc, nlev + 1), zd_diffcoef(nc, nlev)
 *   zd_intcoef(nc, 3, nlev), zd_vertoffset(nc, 3, nlev)  the truly horizontal temperature
 *                              diffusion's weights and level offsets over C2E2C (dense, as
 *                              ICON4Py holds them; 0 where zd_diffcoef is 0)
 *   e_bln_c_s(nc, 3), geofac_div(nc, 3)                 over C2E
 *   geofac_grg_x(nc, 4), geofac_grg_y(nc, 4), geofac_n2s(nc, 4)  over C2E2CO
 *   nudgecoeff_e(ne)
 *   rbf_coeff_1(nv, 6), rbf_coeff_2(nv, 6)              over V2E (ICON's rbf_vec_coeff_v)
 *   tangent_orientation(ne), inverse_primal_edge_lengths(ne), inverse_dual_edge_lengths(ne),
 *   inverse_vertex_vertex_lengths(ne), edge_areas(ne)
 *   primal_normal_vert_x(ne, 4), primal_normal_vert_y(ne, 4), dual_normal_vert_x(ne, 4),
 *   dual_normal_vert_y(ne, 4)                           over E2C2V
 *   cell_area(nc), mean_cell_area (positive)
 * options and config may be NULL (every default). Every array is required (none may be NULL);
 * every value must be finite. *handle is NULL on error. The grid may be freed after init. */
sciproxy_status sciproxy_diffusion_init(
    const sciproxy_diffusion_grid* grid, const sciproxy_diffusion_options* options,
    const sciproxy_diffusion_config* config, int32_t num_levels, const double* vct_a,
    int32_t end_index_of_damping_layer, const double* theta_ref_mc, const double* wgtfac_c,
    const double* zd_intcoef, const int32_t* zd_vertoffset, const double* zd_diffcoef,
    const double* e_bln_c_s, const double* geofac_div, const double* geofac_grg_x,
    const double* geofac_grg_y, const double* geofac_n2s, const double* nudgecoeff_e,
    const double* rbf_coeff_1, const double* rbf_coeff_2, const double* tangent_orientation,
    const double* inverse_primal_edge_lengths, const double* inverse_dual_edge_lengths,
    const double* inverse_vertex_vertex_lengths, const double* edge_areas,
    const double* primal_normal_vert_x, const double* primal_normal_vert_y,
    const double* dual_normal_vert_x, const double* dual_normal_vert_y, const double* cell_area,
    double mean_cell_area, sciproxy_diffusion** handle);

/* init with every input computed by sciproxy from a generated grid (computed_inputs in
 * sciproxy/diffusion.hpp): the interpolation coefficients (ICON4Py's RBF and nudging defaults),
 * ICON4Py's vertical grid for nlev levels (23.5 km top, damping layer from 12.5 km) and the
 * metric fields over a Gaussian mountain (truly horizontal temperature diffusion where it is
 * steep). A grid from tables (no geometry) is refused. */
sciproxy_status sciproxy_diffusion_init_computed(const sciproxy_diffusion_grid* grid,
                                                 const sciproxy_diffusion_options* options,
                                                 const sciproxy_diffusion_config* config,
                                                 int32_t num_levels, sciproxy_diffusion** handle);

/* One diffusion step of dtime seconds (> 0), in place, on the caller's arrays without copies
 * (options.layout; SCIPROXY_DIFFUSION_FORTRAN_ORDER shapes):
 *   w(nc, nlev + 1), vn(ne, nlev), exner(nc, nlev), theta_v(nc, nlev)   prognostic, updated
 *   rho(nc, nlev)                                        accepted and unused (as in ICON4Py;
 *                                                        may be NULL)
 *   hdef_ic, div_ic, dwdx, dwdy (nc, nlev + 1)           diagnostic, written (as shear_type asks)
 * linit non-zero: ICON's initial call before the first step. The float64 function needs a
 * granule initialised in double precision, the float32 one options.single_precision (else
 * SCIPROXY_ERROR_TYPE). Every argument is checked before any field is written: on an error
 * (a NULL field, dtime <= 0 or not finite, NaN or infinity in vn, w, theta_v or exner when
 * options.check_finite, a freed handle) the fields are unchanged. */
sciproxy_status sciproxy_diffusion_run(sciproxy_diffusion* handle, double* w, double* vn,
                                       double* exner, double* theta_v, const double* rho,
                                       double* hdef_ic, double* div_ic, double* dwdx, double* dwdy,
                                       double dtime, int32_t linit);
sciproxy_status sciproxy_diffusion_run_f32(sciproxy_diffusion* handle, float* w, float* vn,
                                           float* exner, float* theta_v, const float* rho,
                                           float* hdef_ic, float* div_ic, float* dwdx, float* dwdy,
                                           double dtime, int32_t linit);

/* What a granule runs on and how long its init took. device: the backend's name, NUL-terminated.
 * num_cells, num_edges, num_vertices: those of run's fields (under MPI: the grid's with the global
 * fields, this rank's local entities with rank_local_fields). */
typedef struct sciproxy_diffusion_info {
  int32_t num_cells, num_edges, num_vertices, num_levels;
  int32_t single_precision;
  double init_seconds;  /* init's wall time */
  double bytes_per_run; /* bytes one run moves at least (each field read or written once) */
  char device[32];      /* "cpu", "reference", "cuda:0" */
} sciproxy_diffusion_info;

sciproxy_status sciproxy_diffusion_get_info(const sciproxy_diffusion* handle,
                                            sciproxy_diffusion_info* info);

/* sciproxy_agree_status (c/core.h) over the granule's ranks (init's comm): for wrappers that
 * check run's arguments themselves (the Fortran module), so that a failure on one rank is every
 * rank's instead of leaving the others waiting in run. Collective; a NULL handle is refused on
 * this rank alone (it has no ranks to ask). */
sciproxy_status sciproxy_diffusion_agree_status(const sciproxy_diffusion* handle,
                                                sciproxy_status local);

/* This rank's local entities of a dimension (0 cells, 1 edges, 2 vertices), in the order of
 * rank-local fields (owned first, then halo levels 1, 2, and 3 for edges): each one's index in
 * the grid, 1-based as the grid's tables, into global_index[size], and its halo level (0:
 * owned) into halo_level[size] (either may be NULL). *count (may be NULL) receives their number;
 * size below it is SCIPROXY_ERROR_INVALID_ARGUMENT (call with size 0 and NULL arrays first). On
 * one process: 1 .. n, all owned. sciproxy_diffusion_get_info's counts are this rank's with
 * rank_local_fields (the grid's with the global fields). */
sciproxy_status sciproxy_diffusion_local_entities(const sciproxy_diffusion* handle,
                                                  int32_t dimension, int32_t* global_index,
                                                  int32_t* halo_level, int32_t size,
                                                  int32_t* count);

/* ICON's timer table of the granule (name, # calls, t_min, t_avg, t_max, total, seconds; init
 * and every run so far) into buffer[size]: at most size - 1 characters and a NUL (buffer may be
 * NULL when size is 0). *length (may be NULL) receives the whole table's length: a value >= size
 * means it was cut; call again with *length + 1. */
sciproxy_status sciproxy_diffusion_timer_table(const sciproxy_diffusion* handle, char* buffer,
                                               size_t size, size_t* length);

void sciproxy_diffusion_free(sciproxy_diffusion* handle); /* NULL is allowed */

/* For language bindings that know their arrays' shapes (fortran/sciproxy_diffusion.f90), so that
 * a wrong shape is reported as every other error: SCIPROXY_OK when the array named argument is
 * contiguous (contiguous non-zero) and shape[0..rank) equals expected[0..rank) (rank 1 to 3),
 * else SCIPROXY_ERROR_INVALID_ARGUMENT with "argument: expected shape (..), got (..)". */
sciproxy_status sciproxy_diffusion_check_array(const char* argument, int32_t contiguous,
                                               int32_t rank, const int64_t* shape,
                                               const int64_t* expected);

#ifdef __cplusplus
}
#endif

#endif /* SCIPROXY_C_DIFFUSION_H */
