/* The diffusion family's C ABI from C: the defaults, a generated grid, init with sciproxy's own
 * coefficients, runs on Fortran-order fields against the same runs on C-order fields (the C++
 * API's LevelsContiguous layout) and in float32, a physical property (diffusion damps the
 * noise of vn), the timer table, and bad input (NULL pointers, sizes, dtime, NaN in a
 * prognostic field, unknown enum values, wrong struct_size, run before init and after free),
 * each an error code with a message naming the argument. The comparison of init from ICON's
 * own arrays with the C++ API is tests/diffusion/test_diffusion_capi.cpp. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sciproxy/sciproxy.h"

enum { N = 2, K = 1, NLEV = 6 };

static int mentions(const char* text) {
  return strstr(sciproxy_last_error(), text) != NULL;
}

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static double noise(void) { /* uniform in [-1, 1), fixed seed */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (double)((rng * 2685821657736338717ULL) >> 11) / 4503599627370496.0 - 1.0;
}

/* The fields of one run in Fortran order: vn(ne, nlev), w and diagnostics (nc, nlev + 1),
 * theta_v and exner (nc, nlev). */
typedef struct Fields {
  double *vn, *w, *theta_v, *exner, *hdef_ic, *div_ic, *dwdx, *dwdy;
} Fields;

static void fields_alloc(Fields* f, int64_t nc, int64_t ne) {
  f->vn = calloc(ne * NLEV, sizeof(double));
  f->w = calloc(nc * (NLEV + 1), sizeof(double));
  f->theta_v = calloc(nc * NLEV, sizeof(double));
  f->exner = calloc(nc * NLEV, sizeof(double));
  f->hdef_ic = calloc(nc * (NLEV + 1), sizeof(double));
  f->div_ic = calloc(nc * (NLEV + 1), sizeof(double));
  f->dwdx = calloc(nc * (NLEV + 1), sizeof(double));
  f->dwdy = calloc(nc * (NLEV + 1), sizeof(double));
}

static void fields_free(Fields* f) {
  free(f->vn), free(f->w), free(f->theta_v), free(f->exner);
  free(f->hdef_ic), free(f->div_ic), free(f->dwdx), free(f->dwdy);
}

/* a(n, m) in Fortran order as row-major [n][m], and back. */
static void to_c_order(const double* a, double* out, int64_t n, int64_t m) {
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < n; ++i) out[i * m + j] = a[j * n + i];
}
static void to_fortran_order(const double* a, double* out, int64_t n, int64_t m) {
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < n; ++i) out[j * n + i] = a[i * m + j];
}

static double max_rel_diff(const double* a, const double* b, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = fabs(a[i] - b[i]) / (fabs(b[i]) + 1e-300);
    if (fabs(a[i] - b[i]) > 1e-14 && d > worst) worst = d;
  }
  return worst;
}

static sciproxy_status run(sciproxy_diffusion* h, Fields* f, double dtime, int linit) {
  return sciproxy_diffusion_run(h, f->w, f->vn, f->exner, f->theta_v, NULL, f->hdef_ic, f->div_ic,
                                f->dwdx, f->dwdy, dtime, linit);
}

int main(void) {
  /* The defaults. */
  sciproxy_diffusion_options o;
  sciproxy_diffusion_config c;
  memset(&o, 0xff, sizeof o);
  memset(&c, 0xff, sizeof c);
  sciproxy_diffusion_options_default(&o);
  sciproxy_diffusion_config_default(&c);
  CHECK(o.struct_size == sizeof o && strcmp(o.device, "auto") == 0 && o.nparallel == 0 &&
        o.layout == SCIPROXY_DIFFUSION_FORTRAN_ORDER && o.single_precision == 0 &&
        o.check_finite == 1);
  CHECK(c.struct_size == sizeof c && c.diffusion_type == 5 && c.type_vn_diffu == 1 &&
        c.type_t_diffu == 2 && c.hdiff_efdt_ratio == 36 && c.hdiff_w_efdt_ratio == 15 &&
        c.smagorinski_scaling_factor == 0.015 && c.ndyn_substeps == 5 && c.shear_type == 0 &&
        c.apply_to_vertical_wind == 1 && c.apply_zdiffusion_t == 1 &&
        c.max_nudging_coefficient == 0.1 && c.velocity_boundary_diffusion_denominator == 200);
  sciproxy_diffusion_options_default(NULL); /* ignored */
  sciproxy_diffusion_config_default(NULL);

  /* The grid. */
  sciproxy_diffusion_grid* grid = NULL;
  CHECK(sciproxy_diffusion_grid_icosahedral(0, 1, &grid) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
        grid == NULL && mentions("n"));
  CHECK(sciproxy_diffusion_grid_icosahedral(N, K, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(sciproxy_diffusion_grid_icosahedral(N, K, &grid) == SCIPROXY_OK && grid != NULL);
  int32_t nc = 0, ne = 0, nv = 0;
  CHECK(sciproxy_diffusion_grid_sizes(grid, &nc, &ne, &nv) == SCIPROXY_OK);
  CHECK(nc == 20 * N * N * 4 && ne == 30 * N * N * 4 && nv == 10 * N * N * 4 + 2);
  CHECK(sciproxy_diffusion_grid_sizes(NULL, &nc, NULL, NULL) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("grid"));
  double* edge_lat = malloc(ne * sizeof(double));
  double* pnx = malloc(ne * sizeof(double));
  double* cell_lat = malloc(nc * sizeof(double));
  CHECK(sciproxy_diffusion_grid_geometry(grid, cell_lat, NULL, edge_lat, NULL, pnx, NULL) ==
        SCIPROXY_OK);

  /* Fields: a zonal wind plus noise, a stratified theta_v with cold pools, small w. */
  Fields f, g, smooth;
  fields_alloc(&f, nc, ne);
  fields_alloc(&g, nc, ne);
  fields_alloc(&smooth, nc, ne);
  for (int k = 0; k < NLEV; ++k)
    for (int64_t e = 0; e < ne; ++e) {
      smooth.vn[k * ne + e] = 10 * cos(edge_lat[e]) * pnx[e];
      f.vn[k * ne + e] = smooth.vn[k * ne + e] + noise();
    }
  for (int k = 0; k <= NLEV; ++k)
    for (int64_t i = 0; i < nc; ++i) f.w[k * nc + i] = 0.1 * noise();
  for (int k = 0; k < NLEV; ++k)
    for (int64_t i = 0; i < nc; ++i) {
      const double cold = (i % 13 == 0 && k >= NLEV - 2) ? -8.0 : 0.0;
      f.theta_v[k * nc + i] = 300 + 30.0 * (NLEV - k) / NLEV + cold + noise();
      f.exner[k * nc + i] = 0.7 + 0.2 * k / NLEV + 0.001 * noise();
    }

  /* init, Fortran order; the same granule with C-order fields. */
  sciproxy_diffusion *fortran = NULL, *c_order = NULL, *single = NULL;
  c.shear_type = 2; /* every branch, every output */
  o.device = "cpu";
  CHECK(sciproxy_diffusion_init_computed(grid, &o, &c, NLEV, &fortran) == SCIPROXY_OK &&
        fortran != NULL);
  o.layout = SCIPROXY_DIFFUSION_C_ORDER;
  CHECK(sciproxy_diffusion_init_computed(grid, &o, &c, NLEV, &c_order) == SCIPROXY_OK);
  o.layout = SCIPROXY_DIFFUSION_FORTRAN_ORDER;
  o.single_precision = 1;
  CHECK(sciproxy_diffusion_init_computed(grid, &o, &c, NLEV, &single) == SCIPROXY_OK);
  o.single_precision = 0;

  sciproxy_diffusion_info info;
  CHECK(sciproxy_diffusion_get_info(fortran, &info) == SCIPROXY_OK);
  CHECK(info.num_cells == nc && info.num_edges == ne && info.num_vertices == nv &&
        info.num_levels == NLEV && info.single_precision == 0 && info.init_seconds > 0 &&
        info.bytes_per_run > 0 && strcmp(info.device, "cpu") == 0);

  /* g: f in C order. */
  to_c_order(f.vn, g.vn, ne, NLEV);
  to_c_order(f.w, g.w, nc, NLEV + 1);
  to_c_order(f.theta_v, g.theta_v, nc, NLEV);
  to_c_order(f.exner, g.exner, nc, NLEV);
  double before = 0;
  for (int64_t i = 0; i < ne * NLEV; ++i)
    before += (f.vn[i] - smooth.vn[i]) * (f.vn[i] - smooth.vn[i]);

  /* Two steps each: the initial call, then a normal step (dtime of ICON4Py's benchmark scale). */
  const double dtime = 9.0 * 450.0;
  CHECK(run(fortran, &f, dtime, 1) == SCIPROXY_OK && sciproxy_last_error()[0] == '\0');
  CHECK(run(fortran, &f, dtime, 0) == SCIPROXY_OK);
  CHECK(run(c_order, &g, dtime, 1) == SCIPROXY_OK);
  CHECK(run(c_order, &g, dtime, 0) == SCIPROXY_OK);
  {
    Fields back;
    fields_alloc(&back, nc, ne);
    to_fortran_order(g.vn, back.vn, ne, NLEV);
    to_fortran_order(g.w, back.w, nc, NLEV + 1);
    to_fortran_order(g.theta_v, back.theta_v, nc, NLEV);
    to_fortran_order(g.exner, back.exner, nc, NLEV);
    to_fortran_order(g.hdef_ic, back.hdef_ic, nc, NLEV + 1);
    to_fortran_order(g.div_ic, back.div_ic, nc, NLEV + 1);
    to_fortran_order(g.dwdx, back.dwdx, nc, NLEV + 1);
    to_fortran_order(g.dwdy, back.dwdy, nc, NLEV + 1);
    const double tol = 1e-12;
    CHECK(max_rel_diff(f.vn, back.vn, ne * NLEV) <= tol);
    CHECK(max_rel_diff(f.w, back.w, nc * (NLEV + 1)) <= tol);
    CHECK(max_rel_diff(f.theta_v, back.theta_v, nc * NLEV) <= tol);
    CHECK(max_rel_diff(f.exner, back.exner, nc * NLEV) <= tol);
    CHECK(max_rel_diff(f.hdef_ic, back.hdef_ic, nc * (NLEV + 1)) <= tol);
    CHECK(max_rel_diff(f.div_ic, back.div_ic, nc * (NLEV + 1)) <= tol);
    CHECK(max_rel_diff(f.dwdx, back.dwdx, nc * (NLEV + 1)) <= tol);
    CHECK(max_rel_diff(f.dwdy, back.dwdy, nc * (NLEV + 1)) <= tol);
    fields_free(&back);
  }
  /* Diffusion damps the noise on top of the smooth wind, and writes the diagnostics. */
  double after = 0, hdef = 0;
  for (int64_t i = 0; i < ne * NLEV; ++i)
    after += (f.vn[i] - smooth.vn[i]) * (f.vn[i] - smooth.vn[i]);
  for (int64_t i = 0; i < nc * (NLEV + 1); ++i) hdef += fabs(f.hdef_ic[i]);
  CHECK(after < 0.9 * before);
  CHECK(hdef > 0);
  printf("diffusion capi: vn noise energy %.4g -> %.4g after 2 runs\n", before, after);

  /* float32: the same two steps in single precision, close to float64. */
  {
    float *vn = malloc(ne * NLEV * sizeof(float)), *w = malloc(nc * (NLEV + 1) * sizeof(float)),
          *th = malloc(nc * NLEV * sizeof(float)), *ex = malloc(nc * NLEV * sizeof(float)), *d[4];
    for (int i = 0; i < 4; ++i) d[i] = calloc(nc * (NLEV + 1), sizeof(float));
    rng = 0x2545f4914f6cdd1dULL; /* the same noise as f */
    for (int k = 0; k < NLEV; ++k)
      for (int64_t e = 0; e < ne; ++e) vn[k * ne + e] = (float)(smooth.vn[k * ne + e] + noise());
    for (int64_t i = 0; i < nc * (NLEV + 1); ++i) w[i] = (float)(0.1 * noise());
    for (int k = 0; k < NLEV; ++k)
      for (int64_t i = 0; i < nc; ++i) {
        const double cold = (i % 13 == 0 && k >= NLEV - 2) ? -8.0 : 0.0;
        th[k * nc + i] = (float)(300 + 30.0 * (NLEV - k) / NLEV + cold + noise());
        ex[k * nc + i] = (float)(0.7 + 0.2 * k / NLEV + 0.001 * noise());
      }
    CHECK(sciproxy_diffusion_run_f32(single, w, vn, ex, th, NULL, d[0], d[1], d[2], d[3], dtime,
                                     1) == SCIPROXY_OK);
    CHECK(sciproxy_diffusion_run_f32(single, w, vn, ex, th, NULL, d[0], d[1], d[2], d[3], dtime,
                                     0) == SCIPROXY_OK);
    double worst = 0;
    for (int64_t i = 0; i < ne * NLEV; ++i) worst = fmax(worst, fabs(vn[i] - f.vn[i]));
    CHECK(worst < 1e-3);
    /* theta: relative L2, not the largest difference: the cold-pool switch (a threshold on
     * differences of neighbouring thetas) may flip in float32 at a borderline cell, and there the
     * two precisions differ by the enhancement's effect (measured 0.1 K at single points, a
     * relative L2 of 2.6e-5 over this test's fields; float32 rounding alone is 5e-8). */
    double num = 0, den = 0;
    for (int64_t i = 0; i < nc * NLEV; ++i) {
      num += (th[i] - f.theta_v[i]) * (th[i] - f.theta_v[i]);
      den += f.theta_v[i] * f.theta_v[i];
    }
    CHECK(sqrt(num / den) < 1e-4);
    printf(
        "diffusion capi: float32 against float64, vn largest difference %.3g, theta_v rel L2 "
        "%.3g\n",
        worst, sqrt(num / den));
    /* The precision of a granule is its init's: float64 fields on a float32 granule, and back. */
    CHECK(run(single, &f, dtime, 0) == SCIPROXY_ERROR_TYPE && mentions("float32"));
    CHECK(sciproxy_diffusion_run_f32(fortran, w, vn, ex, th, NULL, d[0], d[1], d[2], d[3], dtime,
                                     0) == SCIPROXY_ERROR_TYPE &&
          mentions("fields"));
    free(vn), free(w), free(th), free(ex);
    for (int i = 0; i < 4; ++i) free(d[i]);
  }

  /* The timer table: init and the runs, ICON's columns. */
  size_t length = 0;
  CHECK(sciproxy_diffusion_timer_table(fortran, NULL, 0, &length) == SCIPROXY_OK && length > 0);
  char* table = malloc(length + 1);
  CHECK(sciproxy_diffusion_timer_table(fortran, table, length + 1, NULL) == SCIPROXY_OK);
  CHECK(strstr(table, "# calls") && strstr(table, "t_avg") && strstr(table, "init") &&
        strstr(table, "diffusion_run"));
  char small[8];
  CHECK(sciproxy_diffusion_timer_table(fortran, small, sizeof small, &length) == SCIPROXY_OK &&
        strlen(small) == 7 && length > 7);
  CHECK(sciproxy_diffusion_timer_table(fortran, NULL, 8, &length) ==
            SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("buffer"));
  printf("%s", table);
  free(table);

  /* Bad input to run: each argument in turn, the fields unchanged. */
  const double w0 = f.w[5];
  CHECK(run(NULL, &f, dtime, 0) == SCIPROXY_ERROR_INVALID_ARGUMENT && mentions("handle") &&
        mentions("sciproxy_diffusion_init"));
  CHECK(sciproxy_diffusion_run(fortran, NULL, f.vn, f.exner, f.theta_v, NULL, f.hdef_ic, f.div_ic,
                               f.dwdx, f.dwdy, dtime, 0) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("w:"));
  CHECK(sciproxy_diffusion_run(fortran, f.w, NULL, f.exner, f.theta_v, NULL, f.hdef_ic, f.div_ic,
                               f.dwdx, f.dwdy, dtime, 0) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("vn"));
  CHECK(sciproxy_diffusion_run(fortran, f.w, f.vn, f.exner, f.theta_v, NULL, f.hdef_ic, f.div_ic,
                               f.dwdx, NULL, dtime, 0) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("dwdy"));
  CHECK(run(fortran, &f, 0.0, 0) == SCIPROXY_ERROR_INVALID_ARGUMENT && mentions("dtime"));
  CHECK(run(fortran, &f, -1.0, 0) == SCIPROXY_ERROR_INVALID_ARGUMENT && mentions("dtime"));
  CHECK(run(fortran, &f, NAN, 0) == SCIPROXY_ERROR_INVALID_ARGUMENT && mentions("dtime"));
  const double t0 = f.theta_v[17];
  f.theta_v[17] = NAN;
  CHECK(run(fortran, &f, dtime, 0) == SCIPROXY_ERROR_INVALID_ARGUMENT && mentions("theta_v") &&
        mentions("17"));
  f.theta_v[17] = t0;
  f.vn[3] = INFINITY;
  CHECK(run(fortran, &f, dtime, 0) == SCIPROXY_ERROR_INVALID_ARGUMENT && mentions("vn"));
  f.vn[3] = 0;
  CHECK(f.w[5] == w0);

  /* Bad input to init. */
  sciproxy_diffusion* h = (sciproxy_diffusion*)&o; /* overwritten with NULL on error */
  CHECK(sciproxy_diffusion_init_computed(NULL, NULL, NULL, NLEV, &h) ==
            SCIPROXY_ERROR_INVALID_ARGUMENT &&
        h == NULL && mentions("grid"));
  CHECK(sciproxy_diffusion_init_computed(grid, NULL, NULL, NLEV, NULL) ==
            SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("handle"));
  CHECK(sciproxy_diffusion_init_computed(grid, NULL, NULL, 1, &h) ==
            SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("num_levels"));
  o.layout = 7;
  CHECK(sciproxy_diffusion_init_computed(grid, &o, NULL, NLEV, &h) ==
            SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("options.layout"));
  o.layout = SCIPROXY_DIFFUSION_FORTRAN_ORDER;
  o.device = "abacus";
  CHECK(sciproxy_diffusion_init_computed(grid, &o, NULL, NLEV, &h) != SCIPROXY_OK &&
        mentions("abacus"));
  o.device = NULL;
  CHECK(sciproxy_diffusion_init_computed(grid, &o, NULL, NLEV, &h) ==
            SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("options.device"));
  o.device = "cpu";
  o.struct_size = 3;
  CHECK(sciproxy_diffusion_init_computed(grid, &o, NULL, NLEV, &h) ==
            SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("options.struct_size"));
  sciproxy_diffusion_options_default(&o);
  c.struct_size = 3;
  CHECK(sciproxy_diffusion_init_computed(grid, NULL, &c, NLEV, &h) ==
            SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("config.struct_size"));
  sciproxy_diffusion_config_default(&c);
  c.diffusion_type = 4;
  CHECK(sciproxy_diffusion_init_computed(grid, NULL, &c, NLEV, &h) ==
            SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("config.diffusion_type"));
  c.diffusion_type = 5;
  c.shear_type = 3;
  CHECK(sciproxy_diffusion_init_computed(grid, NULL, &c, NLEV, &h) ==
            SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("config.shear_type"));
  c.shear_type = 0;
  c.hdiff_efdt_ratio = NAN;
  CHECK(sciproxy_diffusion_init_computed(grid, NULL, &c, NLEV, &h) ==
            SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("config.hdiff_efdt_ratio"));
  sciproxy_diffusion_config_default(&c);
  CHECK(h == NULL);

  /* A grid from tables: an index out of range, named with its Fortran position; such a grid
   * has no geometry to compute coefficients from. One triangle's worth of tables. */
  {
    int32_t c2e[3] = {1, 2, 3}, c2e2c[3] = {0, 0, 0}, c2v[3] = {1, 2, 3};
    int32_t e2c[6] = {1, 1, 1, 0, 0, 0}, e2v[6] = {2, 1, 1, 3, 3, 2};
    int32_t e2c2v[12] = {2, 1, 1, 3, 3, 2, 1, 2, 3, 0, 0, 0};
    int32_t v2e[18] = {0}, v2c[18] = {0};
    sciproxy_diffusion_grid* t = NULL;
    CHECK(sciproxy_diffusion_grid_init(1, 3, 3, c2e, c2e2c, e2c, e2v, e2c2v, v2e, v2c, c2v, NULL,
                                       NULL, NULL, &t) == SCIPROXY_OK);
    CHECK(sciproxy_diffusion_grid_geometry(t, cell_lat, NULL, NULL, NULL, NULL, NULL) ==
              SCIPROXY_ERROR_INVALID_ARGUMENT &&
          mentions("no geometry"));
    CHECK(sciproxy_diffusion_init_computed(t, NULL, NULL, NLEV, &h) ==
              SCIPROXY_ERROR_INVALID_ARGUMENT &&
          mentions("sciproxy_diffusion_init"));
    sciproxy_diffusion_grid_free(t);
    c2e[2] = 4;
    CHECK(sciproxy_diffusion_grid_init(1, 3, 3, c2e, c2e2c, e2c, e2v, e2c2v, v2e, v2c, c2v, NULL,
                                       NULL, NULL, &t) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
          t == NULL && mentions("c2e") && mentions("4 at (1, 3)"));
    c2e[2] = 3;
    e2v[1] = 0;
    CHECK(sciproxy_diffusion_grid_init(1, 3, 3, c2e, c2e2c, e2c, e2v, e2c2v, v2e, v2c, c2v, NULL,
                                       NULL, NULL, &t) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
          mentions("e2v") && mentions("(2, 1)"));
    e2v[1] = 1;
    CHECK(sciproxy_diffusion_grid_init(1, 3, 3, c2e, c2e2c, e2c, e2v, NULL, v2e, v2c, c2v, NULL,
                                       NULL, NULL, &t) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
          mentions("e2c2v"));
    CHECK(sciproxy_diffusion_grid_init(0, 3, 3, c2e, c2e2c, e2c, e2v, e2c2v, v2e, v2c, c2v, NULL,
                                       NULL, NULL, &t) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
          mentions("num_cells"));
  }

  /* init with ICON's arrays: a NULL array is named. */
  {
    double* z =
        calloc((size_t)nc * (NLEV + 1) * 6 + (size_t)ne * 4 + (size_t)nv * 6, sizeof(double));
    int32_t* zi = calloc((size_t)nc * 3 * NLEV, sizeof(int32_t));
    CHECK(sciproxy_diffusion_init(grid, NULL, NULL, NLEV, z, 0, z, z, z, zi, z, z, z, z, z, z, z, z,
                                  z, z, z, z, z, z, z, NULL, z, z, z, 1.0,
                                  &h) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
          mentions("primal_normal_vert_y"));
    CHECK(sciproxy_diffusion_init(grid, NULL, NULL, NLEV, z, 0, z, z, z, zi, z, z, z, z, z, z, z, z,
                                  z, z, z, z, z, z, z, z, z, z, z, 0.0,
                                  &h) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
          mentions("mean_cell_area"));
    /* vct_a of zeros: not decreasing. */
    CHECK(sciproxy_diffusion_init(grid, NULL, NULL, NLEV, z, 0, z, z, z, zi, z, z, z, z, z, z, z, z,
                                  z, z, z, z, z, z, z, z, z, z, z, 1.0,
                                  &h) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
          mentions("vct_a"));
    free(z);
    free(zi);
  }

  /* Free, then use: refused by name, never dereferenced; a second free is harmless. */
  sciproxy_diffusion_free(fortran);
  CHECK(run(fortran, &f, dtime, 0) == SCIPROXY_ERROR_INVALID_ARGUMENT && mentions("freed"));
  CHECK(sciproxy_diffusion_get_info(fortran, &info) == SCIPROXY_ERROR_INVALID_ARGUMENT);
  CHECK(sciproxy_diffusion_timer_table(fortran, NULL, 0, &length) ==
        SCIPROXY_ERROR_INVALID_ARGUMENT);
  sciproxy_diffusion_free(fortran);
  sciproxy_diffusion_free(NULL);
  sciproxy_diffusion_free(c_order);
  sciproxy_diffusion_free(single);
  sciproxy_diffusion_grid_free(grid);
  CHECK(sciproxy_diffusion_init_computed(grid, NULL, NULL, NLEV, &h) ==
            SCIPROXY_ERROR_INVALID_ARGUMENT &&
        mentions("freed"));
  sciproxy_diffusion_grid_free(grid);
  sciproxy_diffusion_grid_free(NULL);

  fields_free(&f);
  fields_free(&g);
  fields_free(&smooth);
  free(edge_lat), free(pnx), free(cell_lat);
  if (failures)
    fprintf(stderr, "%d checks failed\n", failures);
  else
    printf("diffusion capi: all checks passed\n");
  return failures != 0;
}
