// plan_recompute (recompute_plan.h).
#include "transformer/recompute_plan.h"

#include <algorithm>
#include <cstddef>

namespace mindspeed {
namespace {

// MindSpeed's should_recompute: after the first `full_layers` (by priority) come `count`
// layers of the lighter recompute (count < 0: every remaining layer).
bool lighter_recompute(int64_t priority, int64_t full_layers, int64_t count) {
  if (priority < full_layers) return false;  // already fully recomputed
  return count < 0 || priority < full_layers + count;
}

}  // namespace

BlockRecomputePlan plan_recompute(const RecomputeConfig& rc, int64_t num_layers, int virtual_rank,
                                  int virtual_size, bool last_stage) {
  BlockRecomputePlan plan;
  plan.layers.resize(static_cast<size_t>(num_layers));
  // MindSpeed's recompute priority: the local index, interleaved over the rank's model chunks
  // with --enable-recompute-layers-per-pp-rank (chunk 0's first layer, chunk 1's first, ...).
  const bool per_pp_rank = rc.layers_per_pp_rank && virtual_size > 1;
  auto priority = [&](int64_t l) { return per_pp_rank ? l * virtual_size + virtual_rank : l; };
  int64_t full_layers = 0;  // block recompute: layers (by priority) fully recomputed
  if (rc.full() && rc.num_layers > 0) {
    if (rc.method == RecomputeMethod::kUniform) {
      for (int64_t l = 0; l < num_layers; l += rc.num_layers) {
        plan.full_units.emplace_back(l, std::min(num_layers, l + rc.num_layers));
      }
      full_layers = num_layers;
    } else if (rc.method == RecomputeMethod::kBlock) {
      for (int64_t l = 0; l < num_layers; ++l) {
        // MindSpeed's ripipe: in advance, the model's last layer is not recomputed (its
        // backward follows its forward's loss at once, there is nothing to overlap).
        if (rc.in_advance && last_stage && l + 1 == num_layers) continue;
        if (priority(l) < rc.num_layers) plan.full_units.emplace_back(l, l + 1);
      }
      full_layers = rc.num_layers;
    }
  }
  for (const auto& [begin, end] : plan.full_units) {
    for (int64_t l = begin; l < end; ++l) plan.layers[static_cast<size_t>(l)].full = true;
  }
  for (int64_t l = 0; l < num_layers; ++l) {
    LayerRecompute& layer = plan.layers[static_cast<size_t>(l)];
    if (layer.full) continue;  // a layer never gets both full and a lighter recompute
    if (rc.selective()) {
      layer.core_attention = rc.modules.core_attn;
      layer.norms = rc.modules.layernorm;
      layer.mlp = rc.modules.mlp;
      layer.moe_activation = rc.modules.moe_act;
      layer.moe = rc.modules.moe;
    }
    const int64_t p = priority(l);
    if (rc.swap_attention) {
      layer.swap = true;
      // MindSpeed's swap_attention: --recompute-num-layers K also recomputes the MLP of the first
      // K.
      if (!rc.full() && rc.num_layers > 0 && p < rc.num_layers) layer.mlp = true;
    }
    if (rc.activation_function &&
        lighter_recompute(p, full_layers, rc.activation_function_num_layers)) {
      layer.activation = true;
    }
    if (rc.norm && lighter_recompute(p, full_layers, rc.norm_num_layers)) layer.norms = true;
  }
  return plan;
}

}  // namespace mindspeed
