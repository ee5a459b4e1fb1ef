// plan_recompute: which layers of a model chunk get full, selective, activation-function and
// norm recompute, against Megatron's _checkpointed_forward unit rules and MindSpeed's
// should_recompute priorities (including the --enable-recompute-layers-per-pp-rank example
// of MindSpeed's transformer_block: 8 layers, 2 stages, 2 virtual stages).
#include "transformer/recompute_plan.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace mindspeed {
namespace {

using Units = std::vector<std::pair<int64_t, int64_t>>;

RecomputeConfig full(RecomputeMethod method, int64_t layers) {
  RecomputeConfig r;
  r.granularity = RecomputeGranularity::kFull;
  r.method = method;
  r.num_layers = layers;
  return r;
}

std::vector<int64_t> layers_with(const BlockRecomputePlan& plan, bool LayerRecompute::*field) {
  std::vector<int64_t> out;
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    if (plan.layers[l].*field) out.push_back(static_cast<int64_t>(l));
  }
  return out;
}

TEST(RecomputePlan, NothingByDefault) {
  const BlockRecomputePlan plan = plan_recompute(RecomputeConfig{}, 3);
  EXPECT_TRUE(plan.full_units.empty());
  for (const LayerRecompute& l : plan.layers) {
    EXPECT_FALSE(l.full || l.core_attention || l.norms || l.mlp || l.activation ||
                 l.moe_activation || l.moe);
  }
}

TEST(RecomputePlan, UniformCutsTheChunkIntoUnitsOfK) {
  EXPECT_EQ(plan_recompute(full(RecomputeMethod::kUniform, 2), 5).full_units,
            (Units{{0, 2}, {2, 4}, {4, 5}}));
  EXPECT_EQ(plan_recompute(full(RecomputeMethod::kUniform, 8), 3).full_units, (Units{{0, 3}}));
  EXPECT_EQ(
      layers_with(plan_recompute(full(RecomputeMethod::kUniform, 1), 2), &LayerRecompute::full),
      (std::vector<int64_t>{0, 1}));
}

TEST(RecomputePlan, BlockRecomputesTheFirstKLayersOneByOne) {
  EXPECT_EQ(plan_recompute(full(RecomputeMethod::kBlock, 2), 4).full_units,
            (Units{{0, 1}, {1, 2}}));
  EXPECT_TRUE(plan_recompute(full(RecomputeMethod::kBlock, 0), 4).full_units.empty());
  // Without the per-rank flag every chunk recomputes its own first K layers.
  EXPECT_EQ(
      plan_recompute(full(RecomputeMethod::kBlock, 1), 2, /*virtual_rank=*/1, /*virtual_size=*/2)
          .full_units,
      (Units{{0, 1}}));
}

TEST(RecomputePlan, PerPipelineRankSpreadsBlockRecomputeOverTheChunks) {
  // MindSpeed's example: stage 0 holds [0, 1] and [4, 5]. K = 2 recomputes layers 0 and 4;
  // K = 3 recomputes 0, 1 and 4.
  RecomputeConfig r = full(RecomputeMethod::kBlock, 2);
  r.layers_per_pp_rank = true;
  EXPECT_EQ(plan_recompute(r, 2, 0, 2).full_units, (Units{{0, 1}}));
  EXPECT_EQ(plan_recompute(r, 2, 1, 2).full_units, (Units{{0, 1}}));
  r.num_layers = 3;
  EXPECT_EQ(plan_recompute(r, 2, 0, 2).full_units, (Units{{0, 1}, {1, 2}}));
  EXPECT_EQ(plan_recompute(r, 2, 1, 2).full_units, (Units{{0, 1}}));
}

TEST(RecomputePlan, ActivationAndNormRecomputeFollowTheFullLayers) {
  RecomputeConfig r = full(RecomputeMethod::kBlock, 1);
  r.activation_function = true;
  r.activation_function_num_layers = 1;
  r.norm = true;  // every remaining layer
  const BlockRecomputePlan plan = plan_recompute(r, 4);
  EXPECT_EQ(layers_with(plan, &LayerRecompute::full), (std::vector<int64_t>{0}));
  EXPECT_EQ(layers_with(plan, &LayerRecompute::activation), (std::vector<int64_t>{1}));
  EXPECT_EQ(layers_with(plan, &LayerRecompute::norms), (std::vector<int64_t>{1, 2, 3}));
  // Without full recompute the count starts at layer 0.
  RecomputeConfig light;
  light.activation_function = true;
  light.activation_function_num_layers = 2;
  EXPECT_EQ(layers_with(plan_recompute(light, 3), &LayerRecompute::activation),
            (std::vector<int64_t>{0, 1}));
}

TEST(RecomputePlan, SelectiveModulesApplyToEveryLayer) {
  RecomputeConfig r;
  r.granularity = RecomputeGranularity::kSelective;
  r.modules.core_attn = true;
  r.modules.moe_act = true;
  const BlockRecomputePlan plan = plan_recompute(r, 2);
  EXPECT_EQ(layers_with(plan, &LayerRecompute::core_attention), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(layers_with(plan, &LayerRecompute::moe_activation), (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(
      layers_with(plan, &LayerRecompute::activation).empty());  // moe_act is the experts' only
  EXPECT_TRUE(layers_with(plan, &LayerRecompute::norms).empty());
}

TEST(RecomputePlan, InAdvanceNeverRecomputesTheModelsLastLayer) {
  RecomputeConfig r = full(RecomputeMethod::kBlock, 2);
  r.in_advance = true;
  EXPECT_EQ(plan_recompute(r, 2, 0, 2, /*last_stage=*/true).full_units, (Units{{0, 1}}));
  EXPECT_EQ(plan_recompute(r, 2, 0, 2, /*last_stage=*/false).full_units, (Units{{0, 1}, {1, 2}}));
}

TEST(RecomputePlan, SwapAttentionSwapsEveryLayerAndRecomputesTheFirstKMlps) {
  RecomputeConfig r;
  r.swap_attention = true;
  r.num_layers = 1;
  const BlockRecomputePlan plan = plan_recompute(r, 3);
  EXPECT_EQ(layers_with(plan, &LayerRecompute::swap), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(layers_with(plan, &LayerRecompute::mlp), (std::vector<int64_t>{0}));
  EXPECT_TRUE(plan.full_units.empty());
}

}  // namespace
}  // namespace mindspeed
