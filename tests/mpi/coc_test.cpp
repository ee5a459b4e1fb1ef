// tensor_parallel/coc.h on 2 and 4 ranks (the whole world as the tensor-parallel group): an MLP's
// ColumnParallelLinear -> RowParallelLinear pair with its tokens in 2, 4 and 8 chunks (MindSpeed's
// --use-ascend-coc --coc-parallel-num) against the unsplit layers on the same weights and data,
// forward and backward, with and without sequence parallelism; and the group's traffic counters,
// which show every collective issued once per chunk with the same bytes in all (so a silently
// unsplit path fails here even though its numbers would match).
#include "tensor_parallel/coc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "distributed/param_and_grad_buffer.h"
#include "kernels/backend.h"
#include "module/forward_context.h"
#include "tensor_parallel/layers.h"
#include "test_mpi.h"

namespace mindspeed::testing {
namespace {

constexpr int64_t kTokens = 32, kHidden = 16, kFfn = 32;

struct PairResult {
  std::vector<float> y, dx;                         ///< this rank's output and input gradient
  std::map<std::string, std::vector<float>> grads;  ///< this rank's weight gradients
  CommStats stats;  ///< the tensor-parallel group's, forward + backward
};

class Coc : public ::testing::TestWithParam<bool /*sequence parallel*/> {
 protected:
  void SetUp() override {
    const MpiWorld& world = mpi_world();
    if (world.size != 2 && world.size != 4) GTEST_SKIP() << "runs on 2 and 4 ranks";
    on_ = std::make_unique<ContextOnWorld>(tensor_parallel_over(world), world);
    tp_ = on_->ps->sizes.tensor;
    column_ = std::make_unique<ColumnParallelLinear>(registry_, "fc1", kHidden, kFfn,
                                                     LinearOptions{}, tp_);
    row_ = std::make_unique<RowParallelLinear>(registry_, "fc2", kFfn, kHidden,
                                               LinearOptions{.bias = false}, tp_);
    buffer_ = std::make_unique<ParamAndGradBuffer>(registry_, on_->alloc, BufferOptions{});
    initialize_parameters(registry_, 7, *on_->ps);
  }

  // Forward and backward of the pair on `chunks` token chunks.
  PairResult run(bool sp, int chunks) {
    ForwardContext ctx = on_->ctx;
    ctx.sequence_parallel = sp;
    ctx.coc_chunks = chunks;
    const int64_t rows = sp ? kTokens / tp_ : kTokens, first = sp ? on_->ps->tp_rank * rows : 0;
    std::vector<float> x(rows * kHidden), dy(rows * kHidden);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < kHidden; ++j) {
        x[i * kHidden + j] = std::sin(0.37f * static_cast<float>((first + i) * kHidden + j));
        dy[i * kHidden + j] = std::cos(0.11f * static_cast<float>((first + i) * kHidden + j));
      }
    for (const auto& p : registry_.params())
      std::fill(p->g(), p->g() + p->local_shape.numel(), 0.0f);
    ProcessGroup& tp = on_->ps->tp();
    tp.reset_stats();
    PairResult out;
    std::vector<float> h(kTokens * column_->out_local()), dh(h.size());
    out.y.resize(rows * kHidden);
    out.dx.resize(rows * kHidden);
    column_->forward(ctx, x.data(), h.data(), kTokens);
    row_->forward(ctx, h.data(), out.y.data(), kTokens);
    row_->backward(ctx, h.data(), dy.data(), dh.data(), kTokens);
    column_->backward(ctx, x.data(), dh.data(), out.dx.data(), kTokens);
    out.stats = tp.stats();
    for (const auto& p : registry_.params())
      out.grads[p->spec.name] = std::vector<float>(p->g(), p->g() + p->local_shape.numel());
    return out;
  }

  std::unique_ptr<ContextOnWorld> on_;
  int tp_ = 1;
  ParameterRegistry registry_;
  std::unique_ptr<ColumnParallelLinear> column_;
  std::unique_ptr<RowParallelLinear> row_;
  std::unique_ptr<ParamAndGradBuffer> buffer_;
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6 * (1.0 + std::fabs(want[i]))) << what << " element " << i;
  }
}

int64_t calls(const CommStats& s, CollectiveKind k) { return s.calls[static_cast<int>(k)]; }
int64_t bytes(const CommStats& s, CollectiveKind k) { return s.bytes[static_cast<int>(k)]; }

TEST_P(Coc, ChunkedLayersEqualTheUnsplitOnesAndIssueEachCollectivePerChunk) {
  const bool sp = GetParam();
  const PairResult want = run(sp, 1);
  for (const int p : {2, 4, 8}) {
    SCOPED_TRACE("chunks " + std::to_string(p));
    const PairResult got = run(sp, p);
    expect_close(got.y, want.y, "output");
    expect_close(got.dx, want.dx, "input gradient");
    for (const auto& [name, g] : want.grads)
      expect_close(got.grads.at(name), g, name + " gradient");
    using enum CollectiveKind;
    if (sp) {
      // Unsplit: all-gathers in the column forward, the row backward and the column backward's
      // re-gather; reduce-scatters in the row forward and the column backward. In chunks, each
      // but the re-gather (one whole collective under the input gradient's GEMMs) p times.
      EXPECT_EQ(calls(want.stats, kAllGather), 3);
      EXPECT_EQ(calls(want.stats, kReduceScatter), 2);
      EXPECT_EQ(calls(got.stats, kAllGather), 2 * p + 1);
      EXPECT_EQ(calls(got.stats, kReduceScatter), 2 * p);
    } else {
      // The row forward's all-reduce and the column backward's.
      EXPECT_EQ(calls(want.stats, kAllReduce), 2);
      EXPECT_EQ(calls(got.stats, kAllReduce), 2 * p);
    }
    for (const CollectiveKind k : {kAllGather, kReduceScatter, kAllReduce}) {
      EXPECT_EQ(bytes(got.stats, k), bytes(want.stats, k)) << collective_name(k);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SequenceParallel, Coc, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "WithSp" : "WithoutSp"; });

// The chunk row maps: gather_chunk_rows takes chunk i's rows of every rank's block, and
// scatter_chunk_rows puts them back.
TEST(CocChunkRows, GatherAndScatterAreInverseBlockCopies) {
  const MpiWorld& world = mpi_world();
  if (world.size != 2) GTEST_SKIP() << "runs on 2 ranks";
  ContextOnWorld on(tensor_parallel_over(world), world);
  const ForwardContext& ctx = on.ctx;
  const int64_t Nl = 6, c = 2, C = 3;  // 2 ranks' blocks of 6 rows, chunks of 2 rows
  std::vector<float> full(2 * Nl * C);
  for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>(i);
  std::vector<float> part(2 * c * C), back(full.size(), -1.0f);
  for (int64_t chunk = 0; chunk < Nl / c; ++chunk) {
    gather_chunk_rows(ctx, part.data(), full.data(), chunk, c, Nl, C);
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t i = 0; i < c; ++i)
        for (int64_t j = 0; j < C; ++j)
          EXPECT_EQ(part[(r * c + i) * C + j], full[(r * Nl + chunk * c + i) * C + j]);
    scatter_chunk_rows(ctx, back.data(), part.data(), chunk, c, Nl, C);
  }
  EXPECT_EQ(back, full);
}

}  // namespace
}  // namespace mindspeed::testing
