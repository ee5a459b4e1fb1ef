// The memory model without runs: a layer's saved bytes equal the formulas bench/README.md
// measures to the byte; parameters, gradients and optimizer state equal the closed forms (2N,
// 4N, 12N, divided by dp where sharded) for the README's GPT; the pipeline stages split them
// and hold the schedule's live micro-batches.
#include "auto_settings/memory_model.h"

#include <gtest/gtest.h>

#include "auto_settings_test_util.h"

namespace mindspeed {
namespace {

// bench/README.md's memory model: s=1024 b=1 h=512 a=8 ffn=2048, bf16, flash attention,
// LayerNorm, GELU, learned positions, tied embeddings, vocabulary 4096, 4 layers.
Configs readme_gpt(int world, const std::vector<std::string>& extra) {
  std::vector<std::string> args = testing::words(
      "--mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --num-layers 4 --hidden-size "
      "512 "
      "--num-attention-heads 8 --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size "
      "1 "
      "--global-batch-size 8 --train-iters 2 --lr 1e-3 --bf16 --use-flash-attn");
  args.insert(args.end(), extra.begin(), extra.end());
  return testing::validated(args, world);
}

constexpr double s = 1024, b = 1, h = 512, a = 8;

TEST(AutoSettingsMemoryModel, LayerActivationsEqualTheMeasuredFormulas) {
  // sbh(8/t' + 24/t) + 4asb/t + 16sb/t', selective sbh(8/t' + 22/t) + 16sb/t', full 2sbh/t'.
  struct Case {
    int tp;
    bool sp;
    const char* recompute;
    double bytes;
  };
  const Case cases[] = {
      {1, false, "none", s * b * h * 32 + 4 * a * s * b + 16 * s * b},
      {1, false, "selective", s * b * h * 30 + 16 * s * b},
      {1, false, "full", 2 * s * b * h},
      {2, false, "none", s * b * h * 20 + 4 * a * s * b / 2 + 16 * s * b},
      {2, false, "selective", s * b * h * 19 + 16 * s * b},
      {2, true, "none", s * b * h * 16 + 4 * a * s * b / 2 + 8 * s * b},
      {2, true, "full", s * b * h},
  };
  for (const Case& k : cases) {
    std::vector<std::string> extra = {"--tensor-model-parallel-size", std::to_string(k.tp)};
    if (k.sp) extra.push_back("--sequence-parallel");
    if (std::string(k.recompute) != "none")
      extra.insert(extra.end(), {"--recompute-granularity", k.recompute});
    if (std::string(k.recompute) == "full") {
      extra.insert(extra.end(), {"--recompute-method", "uniform", "--recompute-num-layers", "1"});
    }
    const Configs c = readme_gpt(k.tp, extra);
    EXPECT_DOUBLE_EQ(layer_activation_bytes(c), k.bytes)
        << "TP" << k.tp << (k.sp ? "+SP " : " ") << k.recompute;
  }
}

TEST(AutoSettingsMemoryModel, BlockRecomputeKeepsTheInputOfItsFirstLayersOnly) {
  // 4 layers on one stage: block k recomputes the first k (their input kept), the other 4 - k
  // keep everything; k = 4 is uniform full recompute. The first k's backward comes last, after
  // the others' activations are freed.
  auto activations = [](const std::vector<std::string>& extra) {
    auto m = estimate_memory(readme_gpt(1, extra), 1);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.ok() ? static_cast<double>(m->stages[0].activations) : 0.0;
  };
  auto block = [&](int k) {
    return activations({"--recompute-granularity", "full", "--recompute-method", "block",
                        "--recompute-num-layers", std::to_string(k)});
  };
  const double none = activations({});
  const double full = activations({"--recompute-granularity", "full", "--recompute-method",
                                   "uniform", "--recompute-num-layers", "1"});
  const double none_layer = s * b * h * 32 + 4 * a * s * b + 16 * s * b, full_layer = 2 * s * b * h;
  EXPECT_NEAR(block(4), full, 1.0);
  // k = 1, 2: the peak is the forward's end, one more recomputed layer saves its difference.
  EXPECT_NEAR(block(1) - block(2), none_layer - full_layer, 2.0);
  // k = 3: the peak is the first layer's rebuild (the fourth layer's activations freed by then):
  // uniform's less one layer's input.
  EXPECT_NEAR(block(3), full - full_layer, 2.0);
  EXPECT_LT(block(1), none);
}

TEST(AutoSettingsMemoryModel, ParametersGradientsOptimizerEqualTheClosedForms) {
  // N = V h + s h + L (12 h^2 + 13 h) + 2 h = 15232000 (pretrain_gpt reports it).
  const int64_t N = 4096 * 512 + 1024 * 512 + 4 * (12 * 512 * 512 + 13 * 512) + 2 * 512;
  ASSERT_EQ(N, 15232000);
  struct Case {
    int dp;
    std::vector<std::string> flags;
    int64_t params, grads, optimizer;
  };
  const Case cases[] = {
      {2, {}, 2 * N, 4 * N, 12 * N},
      {2, {"--use-distributed-optimizer"}, 2 * N, 4 * N, 12 * N / 2},
      {4, {"--use-distributed-optimizer"}, 2 * N, 4 * N, 12 * N / 4},
      {2,
       {"--use-distributed-optimizer", "--use-custom-fsdp", "--data-parallel-sharding-strategy",
        "optim_grads", "--no-gradient-accumulation-fusion"},
       2 * N,
       4 * N / 2,
       12 * N / 2},
      {4,
       {"--use-distributed-optimizer", "--use-custom-fsdp", "--data-parallel-sharding-strategy",
        "optim_grads_params", "--no-gradient-accumulation-fusion"},
       2 * N / 4,
       4 * N / 4,
       12 * N / 4},
  };
  for (const Case& k : cases) {
    const Configs c = readme_gpt(k.dp, k.flags);
    auto m = estimate_memory(c, k.dp);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    ASSERT_EQ(m->stages.size(), 1u);
    const StageMemory& st = m->stages[0];
    EXPECT_EQ(st.num_params, N);
    EXPECT_EQ(st.params, k.params)
        << "dp " << k.dp << " " << (k.flags.empty() ? "DDP" : k.flags.back());
    EXPECT_EQ(st.grads, k.grads) << "dp " << k.dp;
    EXPECT_EQ(st.optimizer, k.optimizer) << "dp " << k.dp;
  }
}

TEST(AutoSettingsMemoryModel, PipelineStagesSplitTheModelAndHoldTheLiveMicroBatches) {
  const Configs c = readme_gpt(2, {"--pipeline-model-parallel-size", "2"});
  auto m = estimate_memory(c, 2);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ(m->stages.size(), 2u);
  const int64_t layer = 12 * 512 * 512 + 13 * 512, words = 4096 * 512, positions = 1024 * 512;
  // Stage 0: embeddings and two layers; stage 1: two layers, the final norm and the tied copy
  // of the word embeddings (the output layer).
  EXPECT_EQ(m->stages[0].num_params, words + positions + 2 * layer);
  EXPECT_EQ(m->stages[1].num_params, 2 * layer + 2 * 512 + words);
  // 1F1B with 8 micro-batches: stage 0 holds 2 in flight, the last stage 1.
  EXPECT_EQ(m->stages[0].live_microbatch_chunks, 2);
  EXPECT_EQ(m->stages[1].live_microbatch_chunks, 1);
  EXPECT_GT(m->stages[0].activations - m->stages[1].activations,
            static_cast<int64_t>(layer_activation_bytes(c)));
  // With a profile's measured bytes, the same counts multiply the measured layer.
  MeasuredActivations measured;
  measured.per_layer_per_sample = 1000.0;
  measured.outside_layers = {100.0, 10.0};
  measured.transient_outside_layers = {300.0, 30.0};
  measured.workspace = {200.0, 20.0};
  auto p = estimate_memory(c, 2, &measured);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->stages[0].activations, 2 * 2 * 1000 + 110);
  EXPECT_EQ(p->stages[1].activations, 1 * 2 * 1000 + 110);
  // The profile's workspace and peak outside the layers are the loss's: the last stage's. The
  // first stage has its layers' (and embedding's) modelled workspace on top of its activations.
  EXPECT_EQ(p->stages[1].workspace, 220);
  EXPECT_EQ(p->stages[1].transient, 1 * 2 * 1000 + 330);
  EXPECT_EQ(p->stages[1].total(),
            p->stages[1].params + p->stages[1].grads + p->stages[1].optimizer + 2330);
  EXPECT_EQ(p->stages[0].workspace, m->stages[0].workspace);
  EXPECT_EQ(p->stages[0].transient, 2 * 2 * 1000 + 110 + p->stages[0].workspace);
}

}  // namespace
}  // namespace mindspeed
