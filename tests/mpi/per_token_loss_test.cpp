// Megatron's --calculate-per-token-loss: the gradient of the global batch's summed token losses
// divided by its loss tokens (pretrain_gpt.py's loss_func sum, gradient_scaling_factor 1.0,
// finalize_model_grads' 1/num_tokens). The harness masks about 10 % of the labels at random, so
// micro-batches hold different numbers of loss tokens and the per-token gradient differs from
// the default mean of per-micro-batch means:
//  * every layout (data parallel with and without the distributed optimizer and overlap,
//    tensor + sequence parallel, 1F1B pipeline, ring context parallel) equals the single-process
//    per-token run within the parallel-equivalence tolerance (1e-5);
//  * with one micro-batch per step the two normalisations are the same objective (losses and
//    norms within 1e-6); with eight they differ.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "parallel_harness.h"
#include "test_mpi.h"

namespace mindspeed::testing {
namespace {

constexpr double kTolerance = 1e-5;

struct PerTokenCase {
  const char* name;
  int world;
  LayoutOptions layout{};
};

// Eight single-sample micro-batches per step (four per rank at dp 2).
RunOptions eight_micro_batches() {
  RunOptions run;
  run.model = tiny_gpt_config();
  run.model.num_layers = 2;
  run.steps = 5;
  run.eval_interval = 0;
  run.micro_batch = 1;
  run.global_batch = 8;
  return run;
}

class PerTokenLoss : public ::testing::TestWithParam<PerTokenCase> {};

TEST_P(PerTokenLoss, EveryLayoutMatchesTheSingleProcessRun) {
  const PerTokenCase& c = GetParam();
  const MpiWorld& world = mpi_world();
  if (world.size != c.world) GTEST_SKIP() << c.name << " runs on another world size";
  const RunOptions run = eight_micro_batches();
  LayoutOptions layout = c.layout;
  layout.per_token_loss = true;
  const RunResult want = train(run, {.per_token_loss = true}, world, /*single=*/true);
  const RunResult got = train(run, layout, world, /*single=*/false);
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t s = 0; s < want.losses.size(); ++s) {
    EXPECT_NEAR(got.losses[s], want.losses[s], kTolerance * want.losses[s]) << "step " << s + 1;
    EXPECT_NEAR(got.grad_norms[s], want.grad_norms[s], kTolerance * want.grad_norms[s]) << "step " << s + 1;
  }
  ASSERT_FALSE(got.weights.empty());
  for (const auto& [name, g] : got.weights) {  // this rank's stage
    if (!want.weights.count(name)) continue;     // the last stage's tied copy of the embedding
    const std::vector<float>& w = want.weights.at(name);
    for (size_t i = 0; i < w.size(); ++i) {
      ASSERT_NEAR(g[i], w[i], 1e-5 + kTolerance * std::fabs(w[i])) << name << "[" << i << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PerTokenLoss,
    ::testing::Values(PerTokenCase{"dp2_ddp", 2, {}},
                      PerTokenCase{"dp2_distopt_overlap", 2, {.distributed_optimizer = true, .overlap_grad_reduce = true}},
                      PerTokenCase{"pp2_1f1b", 2, {.pp = 2}},
                      PerTokenCase{"cp2_ring", 2, {.cp = 2}},
                      PerTokenCase{"tp2_sp_dp2_distopt", 4,
                                   {.tp = 2, .sequence_parallel = true, .distributed_optimizer = true}}),
    [](const ::testing::TestParamInfo<PerTokenCase>& info) { return std::string(info.param.name); });

TEST(PerTokenLoss, IsTheMicroBatchMeanOnlyForOneMicroBatch) {
  const MpiWorld& world = mpi_world();
  if (world.size != 2) GTEST_SKIP();
  RunOptions one = eight_micro_batches();
  one.micro_batch = one.global_batch = 2;
  const RunResult mean_one = train(one, {}, world, true);
  const RunResult token_one = train(one, {.per_token_loss = true}, world, true);
  for (size_t s = 0; s < mean_one.losses.size(); ++s) {
    EXPECT_NEAR(token_one.losses[s], mean_one.losses[s], 1e-6 * mean_one.losses[s]) << "step " << s + 1;
    EXPECT_NEAR(token_one.grad_norms[s], mean_one.grad_norms[s], 1e-6 * mean_one.grad_norms[s]) << "step " << s + 1;
  }
  const RunOptions eight = eight_micro_batches();
  const RunResult mean = train(eight, {}, world, true);
  const RunResult token = train(eight, {.per_token_loss = true}, world, true);
  EXPECT_EQ(token.losses[0], mean.losses[0]) << "the first step's loss is logged the same way";
  const double gap = std::fabs(token.grad_norms[0] / mean.grad_norms[0] - 1.0);
  EXPECT_GT(gap, 1e-4) << "per-token and per-micro-batch normalisation weigh micro-batches of different token "
                          "counts differently";
}

}  // namespace
}  // namespace mindspeed::testing
