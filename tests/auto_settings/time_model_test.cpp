// The time model's pieces without runs: the step composition a + bL + m(c + dL) at one stage;
// the micro-batch scaling of c and d; recompute's extra forward; the 1F1B bubble (P-1)/m from
// the schedule's plan, less when ranks outnumber cores (an idle rank lends its core), and the
// last stage's loss on the critical path; the communication volumes in the engine's own
// counting.
#include "auto_settings/time_model.h"

#include <gtest/gtest.h>

#include "auto_settings/profile.h"
#include "auto_settings_test_util.h"

namespace mindspeed {
namespace {

Configs gpt(int world, const std::vector<std::string>& extra) {
  std::vector<std::string> args = testing::words(
      "--mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --num-layers 8 --hidden-size "
      "256 "
      "--num-attention-heads 8 --seq-length 512 --max-position-embeddings 512 --global-batch-size "
      "16 "
      "--train-iters 2 --lr 1e-3 --bf16 --use-flash-attn");
  args.insert(args.end(), extra.begin(), extra.end());
  return testing::validated(args, world);
}

LayerTimes times() {
  LayerTimes t;
  t.per_step = 0.5;
  t.per_layer_step = 0.1;
  t.per_microbatch = 0.2;
  t.per_layer_microbatch = 1.0;
  return t;
}

TEST(AutoSettingsTimeModel, OneStageIsTheFittedComposition) {
  const Configs c = gpt(1, {"--micro-batch-size", "1"});  // 16 micro-batches, 8 layers
  auto st = predict_step_time(c, 1, times());
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_NEAR(st->compute, 16 * (0.2 + 8 * 1.0), 1e-9);
  EXPECT_DOUBLE_EQ(st->per_step, 0.5 + 8 * 0.1);
  EXPECT_NEAR(st->bubble, 0.0, 1e-9);
  EXPECT_DOUBLE_EQ(st->total, st->compute + st->bubble + st->per_step);
  // Micro-batches of 4: four times the arithmetic, the fixed part once.
  LayerTimes t = times();
  t.fixed_fraction = 0.25;
  const Configs c4 = gpt(1, {"--micro-batch-size", "4"});
  auto st4 = predict_step_time(c4, 1, t);
  ASSERT_TRUE(st4.ok());
  EXPECT_NEAR(st4->compute, 4 * (0.2 + 8 * 1.0) * (0.25 + 0.75 * 4), 1e-9);
  // Ranks sharing cores: one stage keeps them all busy, the measured costs hold as they are.
  auto shared = predict_step_time(gpt(4, {"--micro-batch-size", "1"}), 4, times(), {2.0, 0.0});
  ASSERT_TRUE(shared.ok());
  EXPECT_NEAR(shared->compute, 4 * (0.2 + 8 * 1.0), 1e-9);
}

TEST(AutoSettingsTimeModel, RecomputeAddsItsForward) {
  const Configs full = gpt(1, {"--micro-batch-size", "1", "--recompute-granularity", "full",
                               "--recompute-method", "uniform", "--recompute-num-layers", "1"});
  auto st = predict_step_time(full, 1, times());
  ASSERT_TRUE(st.ok());
  EXPECT_NEAR(st->recompute, 16 * 8 * 1.0 / 3.0, 1e-9);
  EXPECT_NEAR(st->compute, 16 * (0.2 + 8 * 1.0 * 4.0 / 3.0), 1e-9);
  const Configs selective =
      gpt(1, {"--micro-batch-size", "1", "--recompute-granularity", "selective"});
  // Block: the first 2 of each stage's 8 layers recomputed.
  const Configs block = gpt(1, {"--micro-batch-size", "1", "--recompute-granularity", "full",
                                "--recompute-method", "block", "--recompute-num-layers", "2"});
  auto blk = predict_step_time(block, 1, times());
  ASSERT_TRUE(blk.ok());
  EXPECT_NEAR(blk->recompute, 16 * 8 * 1.0 / 3.0 * 2.0 / 8.0, 1e-9);
  // Selective: the core attention's forward again, as timed (d = 1.0 here), at most a forward.
  LayerTimes t = times();
  t.attention_forward = 0.2;
  EXPECT_DOUBLE_EQ(recompute_fraction(selective, t), 0.2);
  auto sel = predict_step_time(selective, 1, t);
  ASSERT_TRUE(sel.ok());
  EXPECT_NEAR(sel->recompute, 16 * 8 * 0.2, 1e-9);
  t.attention_forward = 0.9;
  EXPECT_DOUBLE_EQ(recompute_fraction(selective, t), 1.0 / 3.0);
  // Analytic: the core attention's FLOPs at the GEMM rate, a part of the layer's forward.
  ClusterRates rates;
  rates.flops_per_second = 1e12;
  rates.intra_node_bytes_per_second = rates.inter_node_bytes_per_second = 1e10;
  const LayerTimes analytic = analytic_layer_times(selective, 1, rates);
  EXPECT_DOUBLE_EQ(analytic.attention_forward, attention_forward_flops(selective, 1) / 1e12);
  const double f = recompute_fraction(selective, analytic);
  EXPECT_GT(f, 0.0);
  EXPECT_LT(f, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(recompute_fraction(gpt(1, {"--micro-batch-size", "1"}), t), 0.0);
}

TEST(AutoSettingsTimeModel, PipelineBubbleFollowsThePlanAndTheCores) {
  // 1F1B over 4 stages, 16 micro-batches, no per-micro-batch cost outside the layers.
  LayerTimes t = times();
  t.per_microbatch = 0.0;
  const Configs c = gpt(4, {"--micro-batch-size", "1", "--pipeline-model-parallel-size", "4"});
  auto st = predict_step_time(c, 4, t);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_NEAR(st->compute, 16 * 2 * 1.0, 1e-9);
  EXPECT_NEAR(st->bubble / st->compute, 3.0 / 16.0, 1e-9);  // (P - 1) / m
  // Four ranks on two cores: the measured costs are at half speed; the warm-up and cool-down
  // ramps run fewer ranks than cores at full speed, the steady state all four at half.
  auto shared = predict_step_time(c, 4, t, {2.0, 0.0});
  ASSERT_TRUE(shared.ok());
  EXPECT_LT(shared->total - shared->per_step, st->total - st->per_step);
  EXPECT_GE(shared->total - shared->per_step, 16 * 2 * 1.0 * 0.5 * 4 / 2 - 1e-9);  // work / cores
  // The last stage holding the loss (c = 2 layers' worth) is the busiest; on dedicated cores the
  // others wait for it, on shared ones they lend it their core.
  t.per_microbatch = 2.0;
  auto heavy = predict_step_time(c, 4, t);
  ASSERT_TRUE(heavy.ok());
  EXPECT_NEAR(heavy->compute, 16 * (2.0 + 2.0), 1e-9);
  auto heavy_shared = predict_step_time(c, 4, t, {2.0, 0.0});
  ASSERT_TRUE(heavy_shared.ok());
  // At least the last stage's work at a core of its own, less than the busiest at half speed.
  EXPECT_GE(heavy_shared->total - heavy_shared->per_step, 16 * (2.0 + 2.0) * 0.5 - 1e-9);
  EXPECT_LT(heavy_shared->total - heavy_shared->per_step, 16 * (2.0 + 2.0) * 0.9);
}

TEST(AutoSettingsTimeModel, TheWaitingShareIsReadBackFromAStepRatio) {
  // The profile's measurement: a 4-stage pipeline over the same model as one stage; the share
  // whose predicted ratio is the measured one, 0 or 1 outside their range.
  LayerTimes t = times();
  t.per_microbatch = 3.0;  // the loss stage waits for nobody, the others wait for it
  const Configs one = gpt(4, {"--micro-batch-size", "1"});
  const Configs four = gpt(4, {"--micro-batch-size", "1", "--pipeline-model-parallel-size", "4"});
  const auto ratio = [&](double share) {
    return predict_step_time(four, 4, t, {2.0, share})->total /
           predict_step_time(one, 4, t, {2.0, 0.0})->total;
  };
  EXPECT_LT(ratio(0.0), ratio(0.3));
  auto share = waiting_share_of_ratio(one, four, t, 2.0, 4, ratio(0.3));
  ASSERT_TRUE(share.ok()) << share.status().to_string();
  EXPECT_NEAR(*share, 0.3, 1e-6);
  EXPECT_EQ(*waiting_share_of_ratio(one, four, t, 2.0, 4, 0.5 * ratio(0.0)), 0.0);
  EXPECT_EQ(*waiting_share_of_ratio(one, four, t, 2.0, 4, 2.0 * ratio(1.0)), 1.0);
}

TEST(AutoSettingsTimeModel, CommunicationVolumesInTheEnginesCounting) {
  const double row = 4.0 * 512 * 256;  // one [s, h] fp32 activation of a micro-batch of 1
  const Configs tp = gpt(2, {"--micro-batch-size", "1", "--tensor-model-parallel-size", "2"});
  auto m = estimate_memory(tp, 2);
  ASSERT_TRUE(m.ok());
  CommVolumes v = comm_volumes(tp, 2, *m);
  // 16 micro-batches x (8 layers x 4 all-reduces + embedding + output layer) + 3 [N] all-reduces.
  EXPECT_DOUBLE_EQ(v.at("tp"), 16 * (8 * 4 * row + 2 * row + 3 * 4.0 * 512));
  EXPECT_FALSE(v.contains("dp_cp"));
  const Configs sp = gpt(
      2, {"--micro-batch-size", "1", "--tensor-model-parallel-size", "2", "--sequence-parallel"});
  m = estimate_memory(sp, 2);
  ASSERT_TRUE(m.ok());
  v = comm_volumes(sp, 2, *m);
  // Plus once per step the sequence-parallel gradients: 8 layers x (2 LayerNorms + 2 row-parallel
  // biases), the final norm, the learned positions.
  EXPECT_DOUBLE_EQ(v.at("tp"), 16 * (8 * 10 * row + 4 * row + 3 * 4.0 * 512) +
                                   4.0 * (8 * (2 * 512 + 2 * 256) + 512 + 512 * 256));
  // Data parallel: the fp32 gradient buffer all-reduced; with the distributed optimizer
  // reduce-scattered and the bf16 parameters all-gathered.
  const Configs dp = gpt(2, {"--micro-batch-size", "1"});
  m = estimate_memory(dp, 2);
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(comm_volumes(dp, 2, *m).at("dp_cp"),
                   4.0 * static_cast<double>(m->stages[0].num_params));
  const Configs distopt = gpt(2, {"--micro-batch-size", "1", "--use-distributed-optimizer"});
  m = estimate_memory(distopt, 2);
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(comm_volumes(distopt, 2, *m).at("dp_cp"),
                   6.0 * static_cast<double>(m->stages[0].num_params));
  // Pipeline: a middle stage sends each micro-batch's output forward and its input gradient back.
  const Configs pp = gpt(4, {"--micro-batch-size", "1", "--pipeline-model-parallel-size", "4"});
  m = estimate_memory(pp, 4);
  ASSERT_TRUE(m.ok());
  v = comm_volumes(pp, 4, *m);
  EXPECT_DOUBLE_EQ(v.at("pp"), 2 * 16 * row);
  EXPECT_DOUBLE_EQ(v.at("embedding"), 4.0 * 4096 * 256);
}

}  // namespace
}  // namespace mindspeed
