// Which layers of one model chunk recompute what (Megatron's TransformerBlock
// _checkpointed_forward choice of layers for full recompute, uniform or block; MindSpeed's
// recompute_common.should_recompute for activation-function and norm recompute, with the
// --enable-recompute-layers-per-pp-rank priority that spreads block recompute over a
// pipeline rank's model chunks; swap_attention's MLP recompute of the first
// --recompute-num-layers layers). Pure function of the config and the chunk's place, so every
// rank of a stage decides the same and the plan can be tested on its own.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "config/recompute_config.h"

namespace mindspeed {

/// What one layer drops after its forward and rebuilds in its backward (none set: nothing).
struct LayerRecompute {
  bool full = false;            ///< part of a full-recompute unit (the block re-runs the unit)
  bool core_attention = false;  ///< selective core_attn
  bool norms = false;           ///< selective layernorm, or --recompute-norm
  bool mlp = false;             ///< selective mlp: fc1 and the activation re-run
  bool activation = false;      ///< --recompute-activation-function: the dense MLP's activation
  bool moe_activation = false;  ///< selective moe_act: the routed experts' activation
  bool moe = false;             ///< selective moe: the whole MoE layer re-run
  bool swap = false;  ///< --swap-attention: saved activations of --swap-modules to the swap tier
};

struct BlockRecomputePlan {
  std::vector<LayerRecompute> layers;  ///< one per layer of the chunk, local order
  /// Full-recompute units [begin, end) in local layer indices, in order; only each unit's input
  /// is kept between forward and backward.
  std::vector<std::pair<int64_t, int64_t>> full_units;
};

/// The plan of a chunk of `num_layers` layers that is model chunk `virtual_rank` of
/// `virtual_size` on its pipeline rank (0 of 1 without virtual stages); `last_stage`: the chunk
/// holds the model's last layer (--recompute-in-advance never recomputes it).
BlockRecomputePlan plan_recompute(const RecomputeConfig& config, int64_t num_layers,
                                  int virtual_rank = 0, int virtual_size = 1,
                                  bool last_stage = false);

}  // namespace mindspeed
