// GoogleTest main for tests run under mpirun: MPI is initialised once, only rank 0 prints
// the test log, and the process exit code is non-zero on any rank whose tests failed (mpirun
// then fails the job).
#include <gtest/gtest.h>

#include <cstdlib>

#include "parallel/initialize.h"
#include "test_mpi.h"

namespace mindspeed::testing {
MpiWorld& mpi_world() {
  static MpiWorld world;
  return world;
}
}  // namespace mindspeed::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  mindspeed::testing::mpi_world() = mindspeed::initialize_mpi(&argc, &argv);
  // MS_TEST_ALL_RANKS=1 (passed with mpirun -x): every rank prints (to see a failure on rank > 0).
  if (mindspeed::testing::mpi_world().rank != 0 && std::getenv("MS_TEST_ALL_RANKS") == nullptr) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  mindspeed::finalize_mpi();
  return rc;
}
