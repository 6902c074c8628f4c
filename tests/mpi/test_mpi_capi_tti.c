/* The tti family's C ABI under mpiexec: sciproxy_tti_f64, _f32 and sciproxy_tti_adjoint_f64 with
 * options.comm = MPI_Comm_c2f(world) give every rank one process's receiver (and adjoint source)
 * amplitudes bit for bit, with the process grid chosen and given along each axis; a process grid
 * that does not fit, a NULL output on one rank and ranks disagreeing on dt fail every rank, the
 * rank and the argument named. Exit status: the worst rank's. */
#include <math.h>

#include "capi_mpi_test.h"

/* A tilted, layered model of N0 x N1 x N2 cells; NSHOTS shots of one source and NREC receivers
 * on a diagonal line across the grid, so that the subdomains of every process grid hold some. */
enum { N0 = 12, N1 = 9, N2 = 14, CELLS = N0 * N1 * N2, NT = 40, NSHOTS = 2, NREC = 6 };

static double vp[CELLS], eps[CELLS], delta[CELLS], theta[CELLS], phi[CELLS], b[CELLS];
static float vp32[CELLS], eps32[CELLS], delta32[CELLS], theta32[CELLS];
static double amplitudes[NSHOTS * NT], data[NSHOTS * NREC * NT];
static float amplitudes32[NSHOTS * NT];
static int64_t sources[NSHOTS * 3], receivers[NSHOTS * NREC * 3];

static void make_problem(void) {
  for (int i0 = 0; i0 < N0; ++i0)
    for (int i1 = 0; i1 < N1; ++i1)
      for (int i2 = 0; i2 < N2; ++i2) {
        const int k = (i0 * N1 + i1) * N2 + i2;
        vp[k] = 1500 + 60 * i0 + 7 * ((i1 + 2 * i2) % 5);
        eps[k] = 0.1 + 0.01 * (i2 % 4);
        delta[k] = 0.05 + 0.005 * (i1 % 3);
        theta[k] = 0.4 + 0.02 * i0;
        phi[k] = 0.3 - 0.01 * i2;
        b[k] = 1.0 / (1000 + 20 * i0);
        vp32[k] = (float)vp[k];
        eps32[k] = (float)eps[k];
        delta32[k] = (float)delta[k];
        theta32[k] = (float)theta[k];
      }
  for (int s = 0; s < NSHOTS; ++s) {
    for (int t = 0; t < NT; ++t) {
      const double a = 3.14159265 * 0.08 * (t - 10 - 3 * s);
      amplitudes[s * NT + t] = (1 - 2 * a * a) * exp(-a * a);
      amplitudes32[s * NT + t] = (float)amplitudes[s * NT + t];
    }
    sources[3 * s] = 3 + 4 * s;
    sources[3 * s + 1] = 4;
    sources[3 * s + 2] = 2 + 9 * s;
    for (int r = 0; r < NREC; ++r) {
      int64_t* at = receivers + 3 * (s * NREC + r);
      at[0] = (2 * r + s) % N0;
      at[1] = (r + 3 * s) % N1;
      at[2] = (N2 - 1 - 2 * r) % N2;
    }
  }
  for (int i = 0; i < NSHOTS * NREC * NT; ++i) data[i] = sin(0.17 * i) * exp(-0.001 * (i % NT));
}

static sciproxy_tti_input_f64 input_f64(void) {
  sciproxy_tti_input_f64 in;
  memset(&in, 0, sizeof in);
  in.model.shape[0] = N0;
  in.model.shape[1] = N1;
  in.model.shape[2] = N2;
  in.model.spacing[0] = 10;
  in.model.spacing[1] = 12;
  in.model.spacing[2] = 10;
  in.model.vp = vp;
  in.model.buoyancy = b;
  in.model.epsilon = eps;
  in.model.delta = delta;
  in.model.theta = theta;
  in.model.phi = phi;
  in.nt = NT;
  in.nshots = NSHOTS;
  in.nsources = 1;
  in.nreceivers = NREC;
  in.source_amplitudes = amplitudes;
  in.source_locations = sources;
  in.receiver_locations = receivers;
  return in;
}

static double energy(const double* x, int n) {
  double e = 0;
  for (int i = 0; i < n; ++i) e += x[i] * x[i];
  return e;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int64_t world = MPI_Comm_c2f(MPI_COMM_WORLD);
  make_problem();

  sciproxy_tti_options options;
  sciproxy_tti_options_default(&options);
  check(options.comm == SCIPROXY_NO_COMM && options.process_grid[0] == 0 &&
            options.process_grid[1] == 0 && options.process_grid[2] == 0,
        "defaults");
  options.device = "cpu";
  options.nparallel = 1; /* the ranks share the machine's cores */
  options.space_order = 4;
  const int64_t sponge[6] = {2, 3, 1, 2, 3, 1}; /* uneven: the blocks differ in size */
  memcpy(options.sponge_width, sponge, sizeof sponge);

  sciproxy_tti_input_f64 in = input_f64();
  double max_dt = 0;
  check(sciproxy_tti_max_dt_f64(&in, &options, &max_dt) == SCIPROXY_OK && max_dt > 0, "max_dt");
  in.dt = 0.9 * max_dt;

  /* One process: the forward and the adjoint. */
  static double expected[NSHOTS * NREC * NT], got[NSHOTS * NREC * NT];
  static double expected_back[NSHOTS * NT], got_back[NSHOTS * NT];
  check(sciproxy_tti_f64(&in, &options, expected) == SCIPROXY_OK, "forward alone");
  check(energy(expected, NSHOTS * NREC * NT) > 0, "forward alone: the receivers recorded");
  check(sciproxy_tti_adjoint_f64(&in, &options, data, expected_back) == SCIPROXY_OK,
        "adjoint alone");
  check(energy(expected_back, NSHOTS * NT) > 0, "adjoint alone: non-zero");

  /* On the ranks: the process grid chosen, then the ranks along each axis in turn. */
  options.comm = world;
  const int grids[4][3] = {{0, 0, 0}, {size, 1, 1}, {1, size, 1}, {1, 1, 0}};
  for (int g = 0; g < 4; ++g) {
    char what[96];
    memcpy(options.process_grid, grids[g], sizeof options.process_grid);
    memset(got, 0, sizeof got);
    snprintf(what, sizeof what, "forward, grid {%d, %d, %d}", grids[g][0], grids[g][1],
             grids[g][2]);
    check(sciproxy_tti_f64(&in, &options, got) == SCIPROXY_OK, what);
    check(memcmp(got, expected, sizeof got) == 0, "forward on the ranks: the same bits");
    memset(got_back, 0, sizeof got_back);
    snprintf(what, sizeof what, "adjoint, grid {%d, %d, %d}", grids[g][0], grids[g][1],
             grids[g][2]);
    check(sciproxy_tti_adjoint_f64(&in, &options, data, got_back) == SCIPROXY_OK, what);
    check(memcmp(got_back, expected_back, sizeof got_back) == 0,
          "adjoint on the ranks: the same bits");
  }
  memset(options.process_grid, 0, sizeof options.process_grid);

  /* float, with the free surface and order 8. */
  {
    sciproxy_tti_input_f32 in32;
    memset(&in32, 0, sizeof in32);
    memcpy(in32.model.shape, in.model.shape, sizeof in32.model.shape);
    memcpy(in32.model.spacing, in.model.spacing, sizeof in32.model.spacing);
    in32.model.vp = vp32;
    in32.model.epsilon = eps32;
    in32.model.delta = delta32;
    in32.model.theta = theta32;
    in32.nt = NT;
    in32.nshots = NSHOTS;
    in32.nsources = 1;
    in32.nreceivers = NREC;
    in32.source_amplitudes = amplitudes32;
    in32.source_locations = sources;
    in32.receiver_locations = receivers;
    sciproxy_tti_options o32 = options;
    o32.comm = SCIPROXY_NO_COMM;
    o32.space_order = 8;
    o32.free_surface = 1;
    double dt32 = 0;
    check(sciproxy_tti_max_dt_f32(&in32, &o32, &dt32) == SCIPROXY_OK, "max_dt f32");
    in32.dt = 0.9 * dt32;
    static float expected32[NSHOTS * NREC * NT], got32[NSHOTS * NREC * NT];
    check(sciproxy_tti_f32(&in32, &o32, expected32) == SCIPROXY_OK, "f32 alone");
    o32.comm = world;
    memset(got32, 0, sizeof got32);
    check(sciproxy_tti_f32(&in32, &o32, got32) == SCIPROXY_OK, "f32 on the ranks");
    check(memcmp(got32, expected32, sizeof got32) == 0, "f32 on the ranks: the same bits");
  }

  /* A fixed process grid that does not fit: refused on every rank, naming process_grid. */
  options.process_grid[0] = 1;
  options.process_grid[1] = size + 1; /* not the ranks */
  options.process_grid[2] = 1;
  check(sciproxy_tti_f64(&in, &options, got) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
            names(0, "process_grid"),
        "process grid of the wrong ranks refused");
  check(
      sciproxy_tti_adjoint_f64(&in, &options, data, got_back) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
          names(0, "process_grid"),
      "adjoint: process grid of the wrong ranks refused");
  if (size > 1) {
    /* Axis 1 holds N1 + 3 = 12 cells of model and sponge: fewer than space_order/2 = 8 per rank
     * when split. */
    options.space_order = 16;
    options.process_grid[1] = size;
    sciproxy_tti_input_f64 thin = in; /* a dt stable at order 16 */
    double dt16 = 0;
    check(sciproxy_tti_max_dt_f64(&thin, &options, &dt16) == SCIPROXY_OK, "max_dt, order 16");
    thin.dt = 0.9 * dt16;
    check(sciproxy_tti_f64(&thin, &options, got) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
              names(0, "process_grid"),
          "too thin a subdomain refused");
    options.space_order = 4;
  }
  memset(options.process_grid, 0, sizeof options.process_grid);
  /* Without a communicator only one rank fits. */
  options.comm = SCIPROXY_NO_COMM;
  options.process_grid[2] = 2;
  check(sciproxy_tti_f64(&in, &options, got) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
            strstr(sciproxy_last_error(), "process_grid") != NULL,
        "one process: two ranks refused");
  options.process_grid[2] = 1;
  check(sciproxy_tti_f64(&in, &options, got) == SCIPROXY_OK, "one process: {0, 0, 1}");
  options.process_grid[2] = 0;
  options.comm = world;

  /* A NULL output on the last rank only: every rank fails, naming it (no rank waits). */
  const int bad = size - 1;
  check(sciproxy_tti_f64(&in, &options, rank == bad ? NULL : got) ==
                SCIPROXY_ERROR_INVALID_ARGUMENT &&
            names(bad, "receiver_amplitudes"),
        "NULL receiver_amplitudes on one rank");
  check(sciproxy_tti_adjoint_f64(&in, &options, data, rank == bad ? NULL : got_back) ==
                SCIPROXY_ERROR_INVALID_ARGUMENT &&
            names(bad, "source_amplitudes"),
        "NULL source_amplitudes on one rank");
  check(sciproxy_tti_adjoint_f64(&in, &options, rank == bad ? NULL : data, got_back) ==
                SCIPROXY_ERROR_INVALID_ARGUMENT &&
            names(bad, "receiver_data"),
        "NULL receiver_data on one rank");
  {
    sciproxy_tti_input_f64 no_vp = in;
    if (rank == bad) no_vp.model.vp = NULL;
    check(sciproxy_tti_f64(&no_vp, &options, got) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
              names(bad, "model.vp"),
          "NULL model.vp on one rank");
  }
  {
    sciproxy_tti_options no_device = options;
    if (rank == bad) no_device.device = NULL;
    check(sciproxy_tti_f64(&in, &no_device, got) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
              names(bad, "device"),
          "NULL device on one rank");
  }

  /* Ranks that disagree on dt: every rank fails, naming it. */
  if (size > 1) {
    sciproxy_tti_input_f64 other = in;
    if (rank == bad) other.dt = 0.8 * max_dt;
    check(sciproxy_tti_f64(&other, &options, got) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
              strstr(sciproxy_last_error(), "dt") != NULL,
          "ranks disagreeing on dt");
  }

  /* MPI_COMM_NULL's handle. */
  options.comm = MPI_Comm_c2f(MPI_COMM_NULL);
  check(sciproxy_tti_f64(&in, &options, got) == SCIPROXY_ERROR_INVALID_ARGUMENT &&
            strstr(sciproxy_last_error(), "options.comm") != NULL,
        "MPI_COMM_NULL refused");

  return finish("test_mpi_capi_tti");
}
