// Loading a Hugging Face checkpoint under tensor parallelism: each rank reads only the rows
// (or, for GPT-2's transposed Conv1D weights, the columns) of its own shard from the
// memory-mapped file (load_hf_checkpoint). Every rank's shard must equal, bit for bit, its
// slice of the tensors one process loads whole, for every layout the importer knows: GPT-2's
// fused QKV (transposed, regrouped per head) and bias, row- and column-parallel Conv1D, the
// vocabulary padded per tensor-parallel size, LLaMA's grouped q/k/v and SwiGLU [gate; up],
// Qwen2's q/k/v biases.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "config/model_config.h"
#include "core/allocator.h"
#include "distributed/param_and_grad_buffer.h"
#include "models/gpt/gpt_model.h"
#include "models/gpt/hf_checkpoint.h"
#include "test_mpi.h"

namespace mindspeed::testing {
namespace {

class HfSliceLoad : public ::testing::TestWithParam<std::string> {};

TEST_P(HfSliceLoad, EveryTensorParallelShardEqualsItsSliceOfTheWholeLoad) {
  const MpiWorld& world = mpi_world();
  if (world.size != 2 && world.size != 4) GTEST_SKIP();
  const std::string dir = std::string(MS_SOURCE_DIR) + "/tests/golden/" + GetParam();
  const FixtureLayout layout = fixture_layout(GetParam(), world);
  const int tp = layout.tp;
  const std::unique_ptr<ParallelState>& ps = layout.ps;
  const auto sharded = load_fixture_model(dir, *ps, tp);
  // The whole model at this tensor-parallel size's padded vocabulary, loaded by one process.
  const auto single_ps = ParallelState::single_process();
  const auto whole = load_fixture_model(dir, *single_ps, tp);

  int compared = 0, mismatched = 0;
  for (const auto& p : sharded->model->registry().params()) {
    const Parameter* full = whole->model->registry().find(p->spec.name);
    ASSERT_NE(full, nullptr) << p->spec.name;
    std::vector<float> expected(static_cast<size_t>(p->local_shape.numel()));
    slice_for_rank(expected.data(), full->data.f32(), p->spec, ps->tp_rank, tp);
    const std::vector<float> got(p->data.f32(), p->data.f32() + p->local_shape.numel());
    EXPECT_TRUE(got == expected) << GetParam() << ": " << p->spec.name << " on tensor-parallel rank "
                                 << ps->tp_rank << " of " << tp;
    mismatched += got == expected ? 0 : 1;
    compared += p->is_tensor_parallel() ? 1 : 0;
  }
  EXPECT_GE(compared, 5) << "too few tensor-parallel parameters compared";
  // Rank 0 prints the log: it reports the other ranks' mismatches too.
  EXPECT_EQ(ps->world().all_reduce_scalar(mismatched, ReduceOp::kSum), 0.0)
      << GetParam() << ": shards differ on some rank";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfSliceLoad, ::testing::Values("gpt2_tiny", "llama_tiny", "qwen2_scaled"));

}  // namespace
}  // namespace mindspeed::testing
