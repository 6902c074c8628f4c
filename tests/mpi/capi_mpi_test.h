/* What the C programs under mpiexec share: this rank and the ranks, a check that counts
 * failures, the message of an error every rank reports, and the exit status of the worst rank. */
#ifndef SCIPROXY_TESTS_MPI_CAPI_MPI_TEST_H
#define SCIPROXY_TESTS_MPI_CAPI_MPI_TEST_H

#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "sciproxy/sciproxy.h"

static int failures = 0;
static int rank = 0, size = 1;

static inline void check(int ok, const char* what) {
  if (!ok) {
    ++failures;
    fprintf(stderr, "rank %d: FAILED: %s (%s)\n", rank, what, sciproxy_last_error());
  }
}

/* The message of an error on every rank: "rank r of n: <argument>" on several ranks (r the
 * lowest failing rank), "<argument>" on one. */
static inline int names(int r, const char* argument) {
  char want[160];
  if (size > 1)
    snprintf(want, sizeof want, "rank %d of %d: %s", r, size, argument);
  else
    snprintf(want, sizeof want, "%s", argument);
  return strstr(sciproxy_last_error(), want) != NULL;
}

/* Rank 0 prints the verdict of all ranks; MPI is finalised; the exit status is the worst rank's. */
static inline int finish(const char* program) {
  int worst = 0;
  MPI_Allreduce(&failures, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0)
    printf("%s: %d ranks: %s\n", program, size, worst ? "FAILED" : "all checks passed");
  MPI_Finalize();
  return worst ? 1 : 0;
}

#endif
