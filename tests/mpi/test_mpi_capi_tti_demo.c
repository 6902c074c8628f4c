/* The workshop operator's C ABI under mpiexec: sciproxy_tti_demo_f64 and _f32 with options.comm =
 * MPI_Comm_c2f(world) give one process's u and u_prev bit for bit, on every rank (results 0), on
 * rank 0 alone (results 1, the others passing NULL) and each rank its block (results 2, placed
 * with sciproxy_tti_demo_block), with the process grid chosen and given; a process grid that does
 * not fit, a NULL u on one rank and ranks disagreeing on dt fail every rank, the rank and the
 * argument named. Exit status: the worst rank's. */
#include <math.h>

#include "capi_mpi_test.h"

/* NX x NY x NZ points of 10 m, materials varying per point: at order 8 two steps per sweep, a
 * ghost ring of 14 points, which the blocks of 44 points along x split among 1 to 3 ranks hold
 * (15, 15, 14). The source lies between the blocks of two and of three ranks. */
enum { NX = 44, NY = 30, NZ = 27, POINTS = NX * NY * NZ, NT = 9 };

static double vp[POINTS], b[POINTS], eps[POINTS], eta[POINTS], theta[POINTS], phi[POINTS];
static float vp32[POINTS], b32[POINTS], eps32[POINTS], eta32[POINTS], theta32[POINTS],
    phi32[POINTS];
static double amplitudes[NT];
static float amplitudes32[NT];

static void make_problem(void) {
  for (int i = 0; i < NX; ++i)
    for (int j = 0; j < NY; ++j)
      for (int k = 0; k < NZ; ++k) {
        const int p = (i * NY + j) * NZ + k;
        vp[p] = 1500 + 20 * i + 9 * ((j + 2 * k) % 7);
        b[p] = 1.0 / (1.0 + 0.01 * ((i + k) % 11));
        eps[p] = 0.15 + 0.01 * (k % 5);
        eta[p] = 0.3 + 0.02 * (j % 6);
        theta[p] = 0.4 + 0.01 * i - 0.005 * k;
        phi[p] = 0.2 + 0.015 * j;
        vp32[p] = (float)vp[p];
        b32[p] = (float)b[p];
        eps32[p] = (float)eps[p];
        eta32[p] = (float)eta[p];
        theta32[p] = (float)theta[p];
        phi32[p] = (float)phi[p];
      }
  for (int t = 0; t < NT; ++t) {
    const double a = 3.14159265 * 0.3 * (t - 3);
    amplitudes[t] = (1 - 2 * a * a) * exp(-a * a);
    amplitudes32[t] = (float)amplitudes[t];
  }
}

static sciproxy_tti_demo_input_f64 input_f64(void) {
  sciproxy_tti_demo_input_f64 in;
  memset(&in, 0, sizeof in);
  in.shape[0] = NX;
  in.shape[1] = NY;
  in.shape[2] = NZ;
  for (int d = 0; d < 3; ++d) in.spacing[d] = 10;
  in.nt = NT;
  in.vp = 1500;
  in.b = 1;
  in.epsilon = 0.2;
  in.eta = 0.4;
  in.f = 0.85;
  in.theta = 0.5;
  in.phi = 0.3;
  in.damping = 0.002;
  in.vp_field = vp;
  in.b_field = b;
  in.epsilon_field = eps;
  in.eta_field = eta;
  in.theta_field = theta;
  in.phi_field = phi;
  in.source_position[0] = 145.4; /* x = 14.54 points */
  in.source_position[1] = 143.0;
  in.source_position[2] = 127.0;
  in.source_amplitudes = amplitudes;
  return in;
}

static double largest(const double* x, int n) {
  double m = 0;
  for (int i = 0; i < n; ++i) m = fabs(x[i]) > m ? fabs(x[i]) : m;
  return m;
}

/* Whether block [origin, origin + shape) of the whole grid `whole` has the bits of `block`. */
static int block_matches(const double* whole, const double* block, const int64_t origin[3],
                         const int64_t shape[3]) {
  for (int64_t i = 0; i < shape[0]; ++i)
    for (int64_t j = 0; j < shape[1]; ++j) {
      const double* from = whole + ((origin[0] + i) * NY + origin[1] + j) * NZ + origin[2];
      if (memcmp(block + (i * shape[1] + j) * shape[2], from, (size_t)shape[2] * sizeof *from))
        return 0;
    }
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int64_t world = MPI_Comm_c2f(MPI_COMM_WORLD);
  make_problem();

  sciproxy_tti_demo_options options;
  sciproxy_tti_demo_options_default(&options);
  check(options.comm == SCIPROXY_NO_COMM && options.process_grid[0] == 0 &&
            options.process_grid[1] == 0 && options.process_grid[2] == 0 && options.results == 0,
        "defaults");
  options.device = "cpu";
  options.nparallel = 1; /* the ranks share the machine's cores */

  sciproxy_tti_demo_input_f64 in = input_f64();
  double limit = 0;
  check(sciproxy_tti_demo_dt_limit_f64(&in, &options, &limit) == SCIPROXY_OK && limit > 0,
        "dt_limit");
  in.dt = 0.9 * limit;

  /* One process. */
  static double expected[POINTS], expected_prev[POINTS], got[POINTS], got_prev[POINTS];
  check(sciproxy_tti_demo_f64(&in, &options, expected, expected_prev) == SCIPROXY_OK, "alone");
  check(largest(expected, POINTS) > 0, "alone: the wave moved");
  int64_t origin[3], shape[3];
  int grid[3];
  check(sciproxy_tti_demo_block_f64(&in, &options, origin, shape, grid) == SCIPROXY_OK &&
            origin[0] == 0 && origin[1] == 0 && origin[2] == 0 && shape[0] == NX &&
            shape[1] == NY && shape[2] == NZ && grid[0] == 1 && grid[1] == 1 && grid[2] == 1,
        "block alone: the whole grid");

  /* On the ranks: the process grid chosen, then given along x; every layout. */
  options.comm = world;
  const int grids[2][3] = {{0, 0, 0}, {size, 1, 1}};
  for (int g = 0; g < 2; ++g) {
    char what[128];
    memcpy(options.process_grid, grids[g], sizeof options.process_grid);
    /* results 0: the whole grid on every rank. */
    options.results = 0;
    memset(got, 0, sizeof got);
    memset(got_prev, 0, sizeof got_prev);
    snprintf(what, sizeof what, "results 0, grid {%d, %d, %d}", grids[g][0], grids[g][1],
             grids[g][2]);
    check(sciproxy_tti_demo_f64(&in, &options, got, got_prev) == SCIPROXY_OK, what);
    check(memcmp(got, expected, sizeof got) == 0, "results 0: u, the same bits");
    check(memcmp(got_prev, expected_prev, sizeof got_prev) == 0,
          "results 0: u_prev, the same bits");
    check(sciproxy_tti_demo_block_f64(&in, &options, origin, shape, grid) == SCIPROXY_OK &&
              shape[0] == NX && shape[1] == NY && shape[2] == NZ &&
              grid[0] * grid[1] * grid[2] == size && (grids[g][0] == 0 || grid[0] == size),
          "results 0: block is the whole grid");

    /* results 1: rank 0 alone; the others pass NULL. */
    options.results = 1;
    memset(got, 0, sizeof got);
    memset(got_prev, 0, sizeof got_prev);
    snprintf(what, sizeof what, "results 1, grid {%d, %d, %d}", grids[g][0], grids[g][1],
             grids[g][2]);
    check(sciproxy_tti_demo_f64(&in, &options, rank == 0 ? got : NULL,
                                rank == 0 ? got_prev : NULL) == SCIPROXY_OK,
          what);
    check(sciproxy_tti_demo_block_f64(&in, &options, origin, shape, NULL) == SCIPROXY_OK, what);
    if (rank == 0) {
      check(memcmp(got, expected, sizeof got) == 0 &&
                memcmp(got_prev, expected_prev, sizeof got_prev) == 0,
            "results 1: rank 0 has the same bits");
      check(shape[0] == NX && shape[1] == NY && shape[2] == NZ, "results 1: rank 0's block");
    } else {
      check(shape[0] == 0 && shape[1] == 0 && shape[2] == 0, "results 1: no block off rank 0");
    }

    /* results 2: each rank its block, placed with sciproxy_tti_demo_block. */
    options.results = 2;
    snprintf(what, sizeof what, "results 2, grid {%d, %d, %d}", grids[g][0], grids[g][1],
             grids[g][2]);
    check(sciproxy_tti_demo_block_f64(&in, &options, origin, shape, grid) == SCIPROXY_OK, what);
    int64_t points = shape[0] * shape[1] * shape[2], covered = 0;
    MPI_Allreduce(&points, &covered, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    check(covered == POINTS, "results 2: the blocks cover the grid once");
    check(size == 1 || points < POINTS, "results 2: a block smaller than the grid");
    memset(got, 0, sizeof got);
    memset(got_prev, 0, sizeof got_prev);
    check(sciproxy_tti_demo_f64(&in, &options, got, got_prev) == SCIPROXY_OK, what);
    check(block_matches(expected, got, origin, shape) &&
              block_matches(expected_prev, got_prev, origin, shape),
          "results 2: the block has one process's bits");
    check(largest(got + points, POINTS - (int)points) == 0, "results 2: nothing past the block");
  }
  memset(options.process_grid, 0, sizeof options.process_grid);
  options.results = 0;

  /* u alone (u_prev NULL on every rank: not returned). */
  memset(got, 0, sizeof got);
  check(sciproxy_tti_demo_f64(&in, &options, got, NULL) == SCIPROXY_OK &&
            memcmp(got, expected, sizeof got) == 0,
        "u_prev NULL on every rank");

  /* float, the process grid given along x. */
  {
    sciproxy_tti_demo_input_f32 in32;
    memset(&in32, 0, sizeof in32);
    memcpy(in32.shape, in.shape, sizeof in32.shape);
    memcpy(in32.spacing, in.spacing, sizeof in32.spacing);
    memcpy(in32.source_position, in.source_position, sizeof in32.source_position);
    in32.nt = NT;
    in32.vp = in.vp;
    in32.b = in.b;
    in32.epsilon = in.epsilon;
    in32.eta = in.eta;
    in32.f = in.f;
    in32.theta = in.theta;
    in32.phi = in.phi;
    in32.damping = in.damping;
    in32.vp_field = vp32;
    in32.b_field = b32;
    in32.epsilon_field = eps32;
    in32.eta_field = eta32;
    in32.theta_field = theta32;
    in32.phi_field = phi32;
    in32.source_amplitudes = amplitudes32;
    sciproxy_tti_demo_options o32 = options;
    o32.comm = SCIPROXY_NO_COMM;
    double limit32 = 0;
    check(sciproxy_tti_demo_dt_limit_f32(&in32, &o32, &limit32) == SCIPROXY_OK, "dt_limit f32");
    in32.dt = 0.9 * limit32;
    static float expected32[POINTS], got32[POINTS], block32[POINTS];
    check(sciproxy_tti_demo_f32(&in32, &o32, expected32, NULL) == SCIPROXY_OK, "f32 alone");
    o32.comm = world;
    o32.process_grid[0] = size;
    o32.process_grid[1] = 1;
    o32.process_grid[2] = 1;
    memset(got32, 0, sizeof got32);
    check(sciproxy_tti_demo_f32(&in32, &o32, got32, NULL) == SCIPROXY_OK, "f32 on the ranks");
    check(memcmp(got32, expected32, sizeof got32) == 0, "f32 on the ranks: the same bits");
    o32.results = 2;
    check(sciproxy_tti_demo_block_f32(&in32, &o32, origin, shape, grid) == SCIPROXY_OK &&
              grid[0] == size && grid[1] == 1 && grid[2] == 1 && origin[1] == 0 && origin[2] == 0 &&
              shape[1] == NY && shape[2] == NZ,
          "f32 block along x");
    check(sciproxy_tti_demo_f32(&in32, &o32, block32, NULL) == SCIPROXY_OK, "f32, results 2");
    int same = 1;
    for (int64_t i = 0; i < shape[0]; ++i)
      same = same && memcmp(block32 + i * NY * NZ, expected32 + (origin[0] + i) * NY * NZ,
                            NY * NZ * sizeof(float)) == 0;
    check(same, "f32, results 2: the block has one process's bits");
  }

  /* A process grid of the wrong ranks: refused on every rank, naming process_grid; the block
   * function refuses it too. */
  options.process_grid[0] = 1;
  options.process_grid[1] = size + 1;
  options.process_grid[2] = 1;
  check(sciproxy_tti_demo_f64(&in, &options, got, got_prev) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
            names(0, "process_grid"),
        "process grid of the wrong ranks refused");
  check(sciproxy_tti_demo_block_f64(&in, &options, origin, shape, grid) ==
                SCIPROXY_ERROR_INVALID_ARGUMENT &&
            strstr(sciproxy_last_error(), "process_grid") != NULL,
        "block: process grid of the wrong ranks refused");
  if (size > 1) {
    /* At order 16 one step's ring is 15 points: blocks of NZ / size <= 13 along z are too thin. */
    sciproxy_tti_demo_input_f64 thin = in;
    options.space_order = 16;
    double limit16 = 0;
    check(sciproxy_tti_demo_dt_limit_f64(&thin, &options, &limit16) == SCIPROXY_OK,
          "dt_limit, order 16");
    thin.dt = 0.9 * limit16;
    options.process_grid[1] = 1;
    options.process_grid[2] = size;
    check(
        sciproxy_tti_demo_f64(&thin, &options, got, got_prev) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
            names(0, "process_grid"),
        "too thin a block refused");
    check(sciproxy_tti_demo_block_f64(&thin, &options, origin, shape, grid) ==
                  SCIPROXY_ERROR_INVALID_ARGUMENT &&
              strstr(sciproxy_last_error(), "process_grid") != NULL,
          "block: too thin a block refused");
    options.space_order = 8;
  }
  memset(options.process_grid, 0, sizeof options.process_grid);
  /* Without a communicator only one rank fits. */
  options.comm = SCIPROXY_NO_COMM;
  options.process_grid[0] = 2;
  check(sciproxy_tti_demo_f64(&in, &options, got, got_prev) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
            strstr(sciproxy_last_error(), "process_grid") != NULL,
        "one process: two ranks refused");
  options.process_grid[0] = 0;
  options.comm = world;

  /* A result layout that does not exist. */
  options.results = 3;
  check(sciproxy_tti_demo_f64(&in, &options, got, got_prev) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
            names(0, "results"),
        "results 3 refused");
  options.results = 0;

  /* A NULL u (or u_prev, or material field) on the last rank only: every rank fails, naming it
   * (no rank waits). */
  const int bad = size - 1;
  if (size > 1) { /* one process alone: NULL is "not returned" */
    check(sciproxy_tti_demo_f64(&in, &options, rank == bad ? NULL : got, got_prev) ==
                  SCIPROXY_ERROR_INVALID_ARGUMENT &&
              names(bad, "u"),
          "NULL u on one rank");
    options.results = 2;
    check(sciproxy_tti_demo_f64(&in, &options, got, rank == bad ? NULL : got_prev) ==
                  SCIPROXY_ERROR_INVALID_ARGUMENT &&
              names(bad, "u_prev"),
          "results 2: NULL u_prev on one rank");
    options.results = 0;
  }
  {
    sciproxy_tti_demo_input_f64 no_source = in;
    if (rank == bad) no_source.source_amplitudes = NULL;
    check(sciproxy_tti_demo_f64(&no_source, &options, got, got_prev) ==
                  SCIPROXY_ERROR_INVALID_ARGUMENT &&
              names(bad, "source_amplitudes"),
          "NULL source_amplitudes on one rank");
  }
  {
    sciproxy_tti_demo_options no_device = options;
    if (rank == bad) no_device.device = NULL;
    check(
        sciproxy_tti_demo_f64(&in, &no_device, got, got_prev) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
            names(bad, "device"),
        "NULL device on one rank");
  }

  /* Ranks that disagree on dt: every rank fails, naming it. */
  if (size > 1) {
    sciproxy_tti_demo_input_f64 other = in;
    if (rank == bad) other.dt = 0.8 * limit;
    check(
        sciproxy_tti_demo_f64(&other, &options, got, got_prev) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
            strstr(sciproxy_last_error(), "the ranks disagree on dt") != NULL,
        "ranks disagreeing on dt");
  }

  /* MPI_COMM_NULL's handle. */
  options.comm = MPI_Comm_c2f(MPI_COMM_NULL);
  check(sciproxy_tti_demo_f64(&in, &options, got, got_prev) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
            strstr(sciproxy_last_error(), "options.comm") != NULL,
        "MPI_COMM_NULL refused");

  return finish("test_mpi_capi_tti_demo");
}
