/* The C ABI under mpiexec: sciproxy_parstack_f64 with options.comm = MPI_Comm_c2f(world) gives
 * every rank the one-process result bit for bit (every layout); a bad handle and bad input on
 * one rank fail every rank with the rank named; sciproxy_scalar_f64 and _gradient_f64 on the
 * ranks against one process. Exit status: the worst rank's. */
#include <math.h>

#include "capi_mpi_test.h"

enum { NTRACES = 4, NSHIFTS = 11, LENGTH = 64, MAXOUT = NSHIFTS * 256 };

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  check(sciproxy_mpi_compiled() == 1, "sciproxy_mpi_compiled");

  double data[NTRACES][LENGTH], weights[NSHIFTS * NTRACES];
  const double* traces[NTRACES];
  int64_t lengths[NTRACES];
  int32_t offsets[NTRACES], shifts[NSHIFTS * NTRACES];
  for (int i = 0; i < NTRACES; ++i) {
    for (int k = 0; k < LENGTH; ++k) data[i][k] = sin(0.3 * k + i) + 0.01 * k;
    traces[i] = data[i];
    lengths[i] = LENGTH - 5 * i;
    offsets[i] = 2 * i;
  }
  for (int j = 0; j < NSHIFTS * NTRACES; ++j) {
    shifts[j] = (j * 37) % 41 - 20;
    weights[j] = 0.5 + 0.05 * (j % 7);
  }
  sciproxy_parstack_input_f64 input = {traces, lengths, NTRACES, offsets, shifts, weights, NSHIFTS};

  /* One process. */
  sciproxy_parstack_options options;
  sciproxy_parstack_options_default(&options);
  check(options.comm == SCIPROXY_NO_COMM && options.shift_sets == 0 && options.result_layout == 0,
        "defaults");
  options.device = "cpu";
  static double expected[MAXOUT], result[MAXOUT];
  int32_t offsetout = 0;
  int64_t lengthout = 0;
  check(sciproxy_parstack_extent_f64(&input, &options, &offsetout, &lengthout) == SCIPROXY_OK,
        "extent");
  const int64_t whole = NSHIFTS * lengthout;
  check(sciproxy_parstack_f64(&input, &options, expected, whole, NULL, NULL) == SCIPROXY_OK,
        "one process");

  /* On the ranks: every rank the whole; rank 0 only; each its own rows. */
  options.comm = MPI_Comm_c2f(MPI_COMM_WORLD);
  memset(result, 0, sizeof result);
  check(sciproxy_parstack_f64(&input, &options, result, whole, NULL, NULL) == SCIPROXY_OK, "all");
  check(memcmp(result, expected, (size_t)whole * sizeof(double)) == 0, "all: the same bits");
  options.result_layout = 1;
  memset(result, 0, sizeof result);
  check(sciproxy_parstack_f64(&input, &options, rank == 0 ? result : NULL, rank == 0 ? whole : 0,
                              NULL, NULL) == SCIPROXY_OK,
        "root");
  if (rank == 0) check(memcmp(result, expected, (size_t)whole * sizeof(double)) == 0, "root bits");
  options.result_layout = 2;
  int64_t first = -1, count = -1, total = -1;
  check(sciproxy_parstack_shift_block(NSHIFTS, &options, &first, &count, &total) == SCIPROXY_OK &&
            total == NSHIFTS,
        "shift block");
  memset(result, 0, sizeof result);
  check(
      sciproxy_parstack_f64(&input, &options, result, count * lengthout, NULL, NULL) == SCIPROXY_OK,
      "own");
  check(memcmp(result, expected + first * lengthout,
               (size_t)(count * lengthout) * sizeof(double)) == 0,
        "own: the same bits");

  /* A null result pointer on the last rank only: every rank fails, naming it. */
  options.result_layout = 0;
  const int bad = size - 1;
  const sciproxy_status status =
      sciproxy_parstack_f64(&input, &options, rank == bad ? NULL : result, whole, NULL, NULL);
  check(status == SCIPROXY_ERROR_INVALID_ARGUMENT, "null result on one rank: status");
  char want[128];
  snprintf(want, sizeof want, size > 1 ? "rank %d of %d: result" : "result", bad, size);
  check(strstr(sciproxy_last_error(), want) != NULL, "null result on one rank: message");

  /* MPI_COMM_NULL's handle. */
  options.comm = MPI_Comm_c2f(MPI_COMM_NULL);
  check(sciproxy_parstack_f64(&input, &options, result, whole, NULL, NULL) ==
                SCIPROXY_ERROR_INVALID_ARGUMENT &&
            strstr(sciproxy_last_error(), "options.comm: expected the handle of a communicator"),
        "MPI_COMM_NULL refused");

  /* scalar_gradient on the ranks: receiver data and source gradients bit for bit, on rank 0
   * only with results 1; the model gradient (summed over the ranks) to 1e-13 relative. */
  {
    enum { NZ = 20, NX = 24, NT = 50, NSHOTS = 5, NREC = 4 };
    static double v[NZ * NX], amplitudes[NSHOTS * NT], residual[NSHOTS * NREC * NT];
    static double grad_v[NZ * NX], grad_v_ranks[NZ * NX], grad_src[NSHOTS * NT],
        grad_src_ranks[NSHOTS * NT], receivers[NSHOTS * NREC * NT],
        receivers_ranks[NSHOTS * NREC * NT];
    int64_t sources[NSHOTS * 2], receiver_cells[NSHOTS * NREC * 2];
    for (int i = 0; i < NZ * NX; ++i) v[i] = i < NZ * NX / 2 ? 1500 : 2000;
    for (int s = 0; s < NSHOTS; ++s) {
      for (int t = 0; t < NT; ++t) {
        const double a = 3.14159 * 25 * (t * 0.002 - 0.04);
        amplitudes[s * NT + t] = (1 - 2 * a * a) * exp(-a * a);
      }
      sources[2 * s] = 1;
      sources[2 * s + 1] = 2 + 4 * s;
      for (int r = 0; r < NREC; ++r) {
        receiver_cells[(s * NREC + r) * 2] = 2;
        receiver_cells[(s * NREC + r) * 2 + 1] = 1 + 5 * r;
      }
    }
    for (int i = 0; i < NSHOTS * NREC * NT; ++i) residual[i] = sin(0.1 * i);
    sciproxy_scalar_input_f64 in = {2,          {NZ, NX, 1}, {5, 5, 1},     v, 1,
                                    0.002,      NT,          NSHOTS,        1, NREC,
                                    amplitudes, sources,     receiver_cells};
    sciproxy_scalar_options so;
    sciproxy_scalar_options_default(&so);
    check(so.comm == SCIPROXY_NO_COMM && so.shots == 0 && so.results == 0, "scalar defaults");
    so.device = "cpu";
    for (int d = 0; d < 6; ++d) so.pml_width[d] = 5;
    check(sciproxy_scalar_f64(&in, &so, NULL, receivers, NULL) == SCIPROXY_OK, "scalar alone");
    check(sciproxy_scalar_gradient_f64(&in, &so, NULL, residual, NULL, grad_v, grad_src, NULL) ==
              SCIPROXY_OK,
          "gradient alone");
    so.comm = MPI_Comm_c2f(MPI_COMM_WORLD);
    so.results = 1;
    check(sciproxy_scalar_f64(&in, &so, NULL, rank == 0 ? receivers_ranks : NULL, NULL) ==
              SCIPROXY_OK,
          "scalar on the ranks");
    if (rank == 0)
      check(memcmp(receivers, receivers_ranks, sizeof receivers) == 0, "scalar: the same bits");
    check(sciproxy_scalar_gradient_f64(&in, &so, NULL, residual, NULL, grad_v_ranks,
                                       rank == 0 ? grad_src_ranks : NULL, NULL) == SCIPROXY_OK,
          "gradient on the ranks");
    if (rank == 0)
      check(memcmp(grad_src, grad_src_ranks, sizeof grad_src) == 0,
            "source gradient: the same bits");
    double diff = 0, norm = 0;
    for (int i = 0; i < NZ * NX; ++i) {
      diff += (grad_v[i] - grad_v_ranks[i]) * (grad_v[i] - grad_v_ranks[i]);
      norm += grad_v[i] * grad_v[i];
    }
    check(norm > 0 && sqrt(diff / norm) <= 1e-13, "model gradient summed over the ranks");
    so.results = 2; /* own results need own shots */
    check(sciproxy_scalar_f64(&in, &so, NULL, receivers_ranks, NULL) ==
                  SCIPROXY_ERROR_INVALID_ARGUMENT &&
              strstr(sciproxy_last_error(), "options.results: expected 0 (every rank) or 1"),
          "results 2 with shots 0 refused");
  }

  return finish("test_mpi_capi");
}
