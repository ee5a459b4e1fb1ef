// tensor_parallel/mappings.h on 2 and 4 ranks (the whole world as the tensor-parallel
// group): every named mapping's forward and backward against the math, on values that
// identify their rank, row and column (exact in fp32, so the checks are equalities).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "module/forward_context.h"
#include "tensor_parallel/mappings.h"
#include "test_mpi.h"

namespace mindspeed::testing {
namespace {

// Value of element (row, col) of rank r's tensor.
float value(int r, int64_t row, int64_t col) { return static_cast<float>(r * 10000 + row * 100 + col); }

class Mappings : public ::testing::Test {
 protected:
  void SetUp() override {
    const MpiWorld& world = mpi_world();
    if (world.size != 2 && world.size != 4) GTEST_SKIP() << "runs on 2 and 4 ranks";
    on_ = std::make_unique<ContextOnWorld>(tensor_parallel_over(world), world);
    on_->ctx.sequence_parallel = true;  // the sequence mappings split the first dim over tp
    tp_ = on_->ps->sizes.tensor;
    r_ = on_->ps->tp_rank;
  }
  // This rank's [rows, cols] tensor.
  std::vector<float> local(int64_t rows, int64_t cols) const {
    std::vector<float> x(rows * cols);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) x[i * cols + j] = value(r_, i, j);
    return x;
  }
  float sum_over_ranks(int64_t row, int64_t col) const {
    float s = 0.0f;
    for (int k = 0; k < tp_; ++k) s += value(k, row, col);
    return s;
  }

  std::unique_ptr<ContextOnWorld> on_;
  int tp_ = 1, r_ = 0;
  static constexpr int64_t kRows = 8, kCols = 12;  // divisible by 2 and 4
};

TEST_F(Mappings, CopyToAndReduceFromTheTensorParallelRegion) {
  std::vector<float> x = local(kRows, kCols);
  CopyToTensorModelParallelRegion::backward(on_->ctx, x.data(), kRows * kCols);
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < kCols; ++j) EXPECT_EQ(x[i * kCols + j], sum_over_ranks(i, j));
  std::vector<float> y = local(kRows, kCols);
  ReduceFromTensorModelParallelRegion::forward(on_->ctx, y.data(), kRows * kCols);
  EXPECT_EQ(y, x);
}

TEST_F(Mappings, ScatterToAndGatherFromTheTensorParallelRegionAlongTheLastDim) {
  const int64_t w = kCols / tp_;
  // Every rank holds the same full tensor (rank 0's values); scatter keeps its columns.
  std::vector<float> full(kRows * kCols);
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < kCols; ++j) full[i * kCols + j] = value(0, i, j);
  std::vector<float> part(kRows * w);
  ScatterToTensorModelParallelRegion::forward(on_->ctx, part.data(), full.data(), kRows, kCols);
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < w; ++j) EXPECT_EQ(part[i * w + j], value(0, i, r_ * w + j));
  // Its backward gathers the column blocks of every rank: block k of row i is rank k's.
  const std::vector<float> dpart = local(kRows, w);
  std::vector<float> dfull(kRows * kCols);
  ScatterToTensorModelParallelRegion::backward(on_->ctx, dfull.data(), dpart.data(), kRows, kCols);
  for (int64_t i = 0; i < kRows; ++i)
    for (int k = 0; k < tp_; ++k)
      for (int64_t j = 0; j < w; ++j) EXPECT_EQ(dfull[i * kCols + k * w + j], value(k, i, j));
  // Gather is the pair the other way round.
  std::vector<float> gathered(kRows * kCols);
  GatherFromTensorModelParallelRegion::forward(on_->ctx, gathered.data(), dpart.data(), kRows,
                                               kCols);
  EXPECT_EQ(gathered, dfull);
  std::vector<float> back(kRows * w);
  GatherFromTensorModelParallelRegion::backward(on_->ctx, back.data(), full.data(), kRows, kCols);
  EXPECT_EQ(back, part);
}

TEST_F(Mappings, SequenceParallelRegionAlongTheFirstDim) {
  const int64_t n = kRows / tp_;
  std::vector<float> full(kRows * kCols);
  for (int64_t i = 0; i < kRows; ++i)
    for (int64_t j = 0; j < kCols; ++j) full[i * kCols + j] = value(0, i, j);
  // Scatter: this rank's block of rows; backward: all-gather of every rank's block.
  std::vector<float> rows(n * kCols);
  ScatterToSequenceParallelRegion::forward(on_->ctx, rows.data(), full.data(), kRows, kCols);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < kCols; ++j) EXPECT_EQ(rows[i * kCols + j], value(0, r_ * n + i, j));
  const std::vector<float> mine = local(n, kCols);
  std::vector<float> all(kRows * kCols);
  ScatterToSequenceParallelRegion::backward(on_->ctx, all.data(), mine.data(), kRows, kCols);
  for (int k = 0; k < tp_; ++k)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < kCols; ++j) EXPECT_EQ(all[(k * n + i) * kCols + j], value(k, i, j));
  // Gather: all-gather forward, reduce-scatter backward (partial gradients summed).
  std::vector<float> gathered(kRows * kCols);
  GatherFromSequenceParallelRegion::forward(on_->ctx, gathered.data(), mine.data(), kRows, kCols);
  EXPECT_EQ(gathered, all);
  const std::vector<float> dfull = local(kRows, kCols);
  std::vector<float> dmine(n * kCols);
  GatherFromSequenceParallelRegion::backward(on_->ctx, dmine.data(), dfull.data(), kRows, kCols);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < kCols; ++j) EXPECT_EQ(dmine[i * kCols + j], sum_over_ranks(r_ * n + i, j));
  // Reduce-scatter: the same reduction forward, all-gather backward.
  std::vector<float> reduced(n * kCols);
  ReduceScatterToSequenceParallelRegion::forward(on_->ctx, reduced.data(), dfull.data(), kRows,
                                                 kCols);
  EXPECT_EQ(reduced, dmine);
  std::vector<float> regathered(kRows * kCols);
  ReduceScatterToSequenceParallelRegion::backward(on_->ctx, regathered.data(), mine.data(), kRows,
                                                  kCols);
  EXPECT_EQ(regathered, all);
}

TEST_F(Mappings, AllToAllAndItsBackward) {
  // Rank r sends (k + 1) * (r + 1) floats to rank k (uneven splits, as a token dispatch).
  std::vector<int64_t> send(tp_), recv(tp_);
  int64_t send_total = 0, recv_total = 0;
  for (int k = 0; k < tp_; ++k) {
    send[k] = (k + 1) * (r_ + 1);
    recv[k] = (r_ + 1) * (k + 1);
    send_total += send[k];
    recv_total += recv[k];
  }
  std::vector<float> in(send_total);
  for (int64_t i = 0, k = 0, off = 0; k < tp_; off += send[k], ++k)
    for (i = 0; i < send[k]; ++i) in[off + i] = value(r_, k, i);  // (sender, receiver, index)
  std::vector<float> out(recv_total);
  AllToAll::forward(on_->ps->tp(), out.data(), recv, in.data(), send);
  for (int64_t k = 0, off = 0; k < tp_; off += recv[k], ++k)
    for (int64_t i = 0; i < recv[k]; ++i) EXPECT_EQ(out[off + i], value(static_cast<int>(k), r_, i));
  // The gradient travels back to where each value came from.
  std::vector<float> back(send_total);
  AllToAll::backward(on_->ps->tp(), back.data(), send, out.data(), recv);
  EXPECT_EQ(back, in);
}

}  // namespace
}  // namespace mindspeed::testing
