// MpiProcessGroup's asynchronous Work handles: destroying a handle without wait() completes
// the collective first (as the point-to-point MPI_Request handles do), so the worker thread
// never writes into a buffer that its owner has already freed or reused. Runs at every world
// size of mpi_parallel_test.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "parallel/mpi_process_group.h"
#include "test_mpi.h"

namespace mindspeed::testing {
namespace {

std::unique_ptr<ProcessGroup> world_group() {
  const MpiWorld& world = mpi_world();
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  std::vector<int> ranks(world.size);
  std::iota(ranks.begin(), ranks.end(), 0);
  return make_mpi_process_group(comm, "world", ranks);
}

TEST(MpiProcessGroup, DroppedAsyncWorkCompletesBeforeTheBufferIsReused) {
  const MpiWorld& world = mpi_world();
  std::unique_ptr<ProcessGroup> group = world_group();
  constexpr int64_t n = 1 << 16;
  auto buffer = std::make_unique<std::vector<float>>(n, static_cast<float>(world.rank + 1));
  const float sum = static_cast<float>(world.size * (world.size + 1) / 2);
  // The other ranks join late, so rank 0's all-reduce is still running on its worker thread
  // when rank 0 destroys the handle.
  if (world.rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  {
    std::unique_ptr<Work> work = group->all_reduce_async(buffer->data(), n, ReduceOp::kSum);
  }  // destroyed without wait()
  // The result is complete as soon as the handle is gone...
  EXPECT_EQ(std::count(buffer->begin(), buffer->end(), sum), n) << "rank " << world.rank;
  // ...and nothing writes into the buffer afterwards: reuse it, then run a second collective,
  // which the group's worker starts only after the first one finished (FIFO), so a late
  // write of the first would have landed by the time it completes.
  std::fill(buffer->begin(), buffer->end(), -7.0f);
  float one = 1.0f;
  group->all_reduce_async(&one, 1, ReduceOp::kSum)->wait();
  EXPECT_EQ(one, static_cast<float>(world.size));
  EXPECT_EQ(std::count(buffer->begin(), buffer->end(), -7.0f), n) << "rank " << world.rank;
  buffer.reset();  // freed while no collective refers to it
}

}  // namespace
}  // namespace mindspeed::testing
