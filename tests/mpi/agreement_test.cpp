// agree_on_failure (parallel/agreement.h) on 2 and 4 ranks: nothing failed -> OK everywhere;
// one rank failed -> every rank stops (kAborted) and only that rank carries the message; a
// rank that merely echoes another's failure (kAborted) never reports it.
#include <gtest/gtest.h>

#include <memory>

#include "parallel/agreement.h"
#include "test_mpi.h"

namespace mindspeed::testing {
namespace {

TEST(Agreement, OneRanksFailureStopsEveryRankAndIsReportedOnce) {
  const MpiWorld& world = mpi_world();
  if (world.size != 2 && world.size != 4) GTEST_SKIP();
  auto ps = initialize_model_parallel(ParallelConfig{}, world);
  ASSERT_TRUE(ps.ok());
  ProcessGroup& group = (*ps)->world();
  EXPECT_TRUE(agree_on_failure(group, ok_status()).ok());

  const int failing = world.size - 1;
  Status s = agree_on_failure(group, world.rank == failing ? not_found("shard 3 missing") : ok_status());
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_EQ(s.message().empty(), world.rank != failing) << s.message();
  if (world.rank == failing) {
    EXPECT_NE(s.message().find("shard 3 missing"), std::string::npos);
  }

  // Rank 0 only echoes ("another rank failed"); the last rank has the real failure.
  const Status local = world.rank == 0        ? aborted("another rank failed")
                       : world.rank == failing ? invalid_argument("bad index")
                                               : ok_status();
  s = agree_on_failure(group, local);
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_EQ(s.message().empty(), world.rank != failing) << s.message();
}

}  // namespace
}  // namespace mindspeed::testing
