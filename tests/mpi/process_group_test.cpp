// MpiProcessGroup's asynchronous Work handles: destroying a handle without wait() completes
// the collective first (as the point-to-point MPI_Request handles do), so the worker thread
// never writes into a buffer that its owner has already freed or reused. Runs at every world
// size of mpi_parallel_test. Collectives beyond MPI's int count run in pieces and give the
// results of one call.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
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

// Collectives beyond MPI's int count, or beyond the group's communication buffer
// (set_buffer_bytes: MindSpeed's --hccl-group-buffer), run in pieces; with the piece size lowered
// to 5 elements (either way) every collective of 13 (and 16) elements per rank takes that path and
// must give the bits of the single-call path, in place and out of place (reductions: the same sums,
// possibly added in another order by MPI's algorithm for the smaller messages).
TEST(MpiProcessGroup, CollectivesLargerThanOneMpiCallRunInPieces) {
  const MpiWorld& world = mpi_world();
  std::unique_ptr<ProcessGroup> group = world_group();
  const int P = world.size;
  auto input = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n * P));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * static_cast<float>(i) + 0.37f * static_cast<float>(world.rank);
    return v;
  };
  struct Results {
    std::vector<float> reduced, scattered, scattered_in_place, gathered, gathered_in_place, bytes, broadcast;
  };
  auto run_all = [&](int64_t n) {
    Results r;
    r.reduced = input(n);
    group->all_reduce_async(r.reduced.data(), n * P, ReduceOp::kSum)->wait();
    const std::vector<float> in = input(n);
    r.scattered.assign(static_cast<size_t>(n), 0.0f);
    group->reduce_scatter_async(r.scattered.data(), in.data(), n, ReduceOp::kSum)->wait();
    std::vector<float> buffer = input(n);  // in place: the result lands on this rank's block
    float* own = buffer.data() + static_cast<int64_t>(world.rank) * n;
    group->reduce_scatter_async(own, buffer.data(), n, ReduceOp::kSum)->wait();
    r.scattered_in_place.assign(own, own + n);
    r.gathered.assign(static_cast<size_t>(n * P), 0.0f);
    group->all_gather_async(r.gathered.data(), in.data(), n)->wait();
    r.gathered_in_place = input(n);
    float* mine = r.gathered_in_place.data() + static_cast<int64_t>(world.rank) * n;
    group->all_gather_async(r.gathered_in_place.data(), mine, n)->wait();
    r.bytes.assign(static_cast<size_t>(n * P), 0.0f);
    group->all_gather_bytes_async(r.bytes.data(), in.data(), 4 * n)->wait();
    r.broadcast = input(n);
    group->broadcast_async(r.broadcast.data(), 4 * n * P, P - 1)->wait();
    return r;
  };
  for (int64_t n : {13, 16}) {
    const Results whole = run_all(n);
    set_mpi_max_count_for_testing(5);
    const Results pieces = run_all(n);
    set_mpi_max_count_for_testing(INT_MAX);
    group->set_buffer_bytes(20);  // the group's own buffer (--hccl-group-buffer): 5 floats per call
    EXPECT_EQ(group->buffer_bytes(), 20);
    const Results buffered = run_all(n);
    group->set_buffer_bytes(0);
    auto expect_same_sums = [&](const std::vector<float>& got, const std::vector<float>& want) {
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f * std::fabs(want[i])) << n << " " << i;
    };
    for (const Results* r : {&pieces, &buffered}) {
      expect_same_sums(r->reduced, whole.reduced);
      expect_same_sums(r->scattered, whole.scattered);
      expect_same_sums(r->scattered_in_place, whole.scattered);
      EXPECT_EQ(r->gathered, whole.gathered) << n;
      EXPECT_EQ(r->gathered_in_place, whole.gathered_in_place) << n;
      EXPECT_EQ(r->bytes, whole.bytes) << n;
      EXPECT_EQ(r->broadcast, whole.broadcast) << n;
    }
    expect_same_sums(pieces.reduced, whole.reduced);
    expect_same_sums(pieces.scattered, whole.scattered);
    expect_same_sums(pieces.scattered_in_place, whole.scattered);
    expect_same_sums(whole.scattered_in_place, whole.scattered);
    EXPECT_EQ(pieces.gathered, whole.gathered) << n;
    EXPECT_EQ(pieces.gathered_in_place, whole.gathered_in_place) << n;
    EXPECT_EQ(pieces.bytes, whole.bytes) << n;
    EXPECT_EQ(pieces.broadcast, whole.broadcast) << n;
    // The single-call results themselves are right.
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (int r = 0; r < P; ++r) sum += 0.1f * static_cast<float>(world.rank * n + i) + 0.37f * static_cast<float>(r);
      EXPECT_NEAR(whole.scattered[static_cast<size_t>(i)], sum, 1e-4f * std::fabs(sum) + 1e-5f) << i;
    }
    for (int r = 0; r < P; ++r) {  // block r of the gather is rank r's first n inputs
      EXPECT_EQ(whole.gathered[static_cast<size_t>(r * n)], 0.37f * static_cast<float>(r)) << r;
    }
  }
}

}  // namespace
}  // namespace mindspeed::testing
