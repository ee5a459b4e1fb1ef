// RecomputeConfig: activation recompute (Megatron's TransformerConfig recompute_granularity,
// recompute_method, recompute_num_layers, recompute_modules, distribute_saved_activations) and
// MindSpeed's memory additions (--recompute-activation-function, --recompute-norm,
// --enable-recompute-layers-per-pp-rank, --swap-attention). Which layer gets what is decided by
// transformer/recompute_plan.h; how each saved activation is dropped and rebuilt is in the
// modules (transformer_layer.cpp, transformer_block.cpp). Every mode is lossless: the rebuilt
// activations are bit-identical to the ones a run without recompute keeps.
#pragma once

#include <cstdint>

namespace mindspeed {

/// --recompute-granularity (--recompute-activations = selective).
enum class RecomputeGranularity { kNone, kFull, kSelective };
/// --recompute-method.
enum class RecomputeMethod { kNone, kUniform, kBlock };

/// --recompute-modules (selective granularity), one flag each.
struct RecomputeModules {
  bool core_attn = false;  ///< core attention (flash: its output and log-sum-exp; unfused: the
                           ///< probabilities too)
  bool layernorm = false;  ///< input_layernorm and pre_mlp_layernorm outputs
  bool mlp = false;        ///< the dense MLP's fc1 output and activation
  bool moe_act = false;    ///< the routed experts' activation output
  bool moe = false;        ///< the whole MoE layer (router, dispatch, experts)
  bool any() const { return core_attn || layernorm || mlp || moe_act || moe; }
};

struct RecomputeConfig {
  RecomputeGranularity granularity = RecomputeGranularity::kNone;
  RecomputeMethod method = RecomputeMethod::kNone;
  /// --recompute-num-layers: layers per recompute unit (uniform) or layers recomputed per
  /// stage / model chunk (block); -1 = not given (Megatron's None).
  int64_t num_layers = -1;
  RecomputeModules modules;  ///< used with selective granularity (default: core_attn)
  /// --distribute-saved-activations: a full-recompute unit's input is kept split over the
  /// tensor-parallel ranks and all-gathered before the unit is recomputed.
  bool distribute_saved_activations = false;
  /// MindSpeed --enable-recompute-layers-per-pp-rank: with virtual stages, block recompute
  /// counts --recompute-num-layers over all model chunks of a pipeline rank.
  bool layers_per_pp_rank = false;
  /// MindSpeed --recompute-activation-function (+ -num-layers; -1 = every layer not fully
  /// recomputed): the MLP activation's output is dropped after fc2 used it.
  bool activation_function = false;
  int64_t activation_function_num_layers = -1;
  /// MindSpeed --recompute-norm (+ -num-layers; -1 = every layer not fully recomputed).
  bool norm = false;
  int64_t norm_num_layers = -1;

  /// MindSpeed's recompute as a pipeline-schedule unit (ripipe; virtual stages only):
  /// --recompute-in-advance runs a chunk's full recompute before waiting for its backward's
  /// gradient (and never recomputes the model's last layer); --recompute-in-bubble (without
  /// other recompute) drops the activations of the forwards that would keep more than
  /// PP * VPP chunks alive and recomputes them ahead of their backward, in the bubble.
  bool in_advance = false;
  bool in_bubble = false;
  /// MindSpeed --swap-attention: the saved activations of --swap-modules are moved to the swap
  /// tier (core/swap_tier.h: a file on local disk here, host memory on an accelerator) after
  /// each layer's forward and prefetched one layer ahead in backward. With it,
  /// --recompute-num-layers K means "the first K layers also recompute their MLP".
  bool swap_attention = false;
  struct SwapModules {
    bool input_norm = true, self_attention = true, post_attention_norm = true;
  } swap_modules;  ///< --swap-modules (MindSpeed's default: all three)

  bool full() const { return granularity == RecomputeGranularity::kFull; }
  bool selective() const { return granularity == RecomputeGranularity::kSelective; }
};

}  // namespace mindspeed
