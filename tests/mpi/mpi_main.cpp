// The main of the MPI tests (tests/mpi/CMakeLists.txt runs each binary at 1, 2 and 3 ranks):
// every rank runs every test; rank 0 alone prints gtest's report, and a test failing on any
// rank fails the run (the exit status is the worst rank's).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>

#include "mpi_test.hpp"

namespace sciproxy::test {

namespace {
Communicator& world_storage() {
  static Communicator comm = Communicator::world();
  return comm;
}
}  // namespace

const Communicator& world() {
  return world_storage();
}
void release_world() {
  world_storage() = Communicator();
}

}  // namespace sciproxy::test

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // SCIPROXY_MPI_TEST_ALL_RANKS=1 keeps every rank's report (to see another rank's failures).
  if (rank != 0 && !std::getenv("SCIPROXY_MPI_TEST_ALL_RANKS")) {
    // their failures still count, through the exit status below
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  // A rank whose own checks failed says which test, on stderr, so rank 0's report is not alone.
  if (failed && rank != 0) {
    const auto* unit = ::testing::UnitTest::GetInstance();
    for (int i = 0; i < unit->total_test_suite_count(); ++i) {
      const auto* suite = unit->GetTestSuite(i);
      for (int j = 0; j < suite->total_test_count(); ++j)
        if (suite->GetTestInfo(j)->result()->Failed())
          fprintf(stderr, "rank %d: FAILED %s.%s\n", rank, suite->name(),
                  suite->GetTestInfo(j)->name());
    }
  }
  int worst = 0;
  MPI_Allreduce(&failed, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  sciproxy::test::release_world();  // the library's duplicate of the world goes before MPI
  MPI_Finalize();
  return worst;
}
