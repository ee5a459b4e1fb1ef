// Port of megatron/core/transformer/transformer_layer.py TransformerLayer (pre-norm):
//   mid = x + dropout(self_attention(input_layernorm(x)) + proj_bias)
//   out = mid + dropout(mlp(pre_mlp_layernorm(mid)) + fc2_bias)
// Backward runs the residual stream's gradient through one [n, h] buffer in place; n = N rows,
// or N/tp with sequence parallelism (norms, dropout and residuals then see [s/tp, b, h]).
// The layer owns its input (the previous layer's output, moved in) for backward. With --bf16
// every saved activation is rounded to bf16 when produced and kept in bf16 between forward
// and backward (Saved::compact / expand); statistics (mean, rstd, lse) stay fp32.
// Activation recompute (set_recompute, planned by recompute_plan.h): selective core
// attention, the norms' outputs (Megatron's "layernorm", MindSpeed's --recompute-norm), the
// MLP ("mlp", activation-function recompute), the experts' activation ("moe_act") and the
// whole MoE layer ("moe") are dropped after forward and rebuilt in backward right before use,
// bit-identical. Full recompute of whole layers is the block's (transformer_block.h).
// The layer is assembled from a TransformerLayerSpec (layer_spec.h); a no-op spec gives the
// identity layer of MindSpeed's --noop-layers.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "core/tensor.h"
#include "transformer/attention.h"
#include "transformer/layer_spec.h"
#include "module/forward_context.h"
#include "transformer/mlp.h"
#include "transformer/moe/moe_layer.h"
#include "transformer/norm.h"
#include "transformer/recompute_plan.h"

namespace mindspeed {

class TransformerLayer {
 public:
  struct Saved {
    Tensor input;                  ///< [n, h]
    Norm::Saved input_layernorm;
    SelfAttention::Saved self_attention;
    Tensor mid;                    ///< [n, h] residual after attention
    Norm::Saved pre_mlp_layernorm;
    MLP::Saved mlp;
    MoELayer::Saved moe;           ///< MoE layers
    /// --swap-attention: the swappable() tensors while they are in the swap tier, in order.
    std::vector<SwappedTensor> swapped;
    /// The activations kept in bf16 with --bf16 (statistics stay fp32).
    std::array<Tensor*, 14> activations();
    /// bf16 storage of the saved activations (forward end) and back to fp32 (backward start).
    void compact(const ForwardContext& ctx);
    void expand(const ForwardContext& ctx);
    /// The tensors --swap-modules moves, in a fixed order (empty ones are skipped).
    std::vector<Tensor*> swappable(const RecomputeConfig::SwapModules& modules);
  };

  /// layer_index: global 0-based index (Megatron's layer_number - 1).
  TransformerLayer(ParameterRegistry& registry, const ModelConfig& config,
                   const TransformerLayerSpec& spec, int64_t layer_index, int tp_size, int tp_rank,
                   bool sequence_parallel, const ConstantTable* rope_cos,
                   const ConstantTable* rope_sin, const ExpertPlacement& experts = {},
                   const TensorParallelGrid& grid = {});
  bool is_noop() const { return self_attention_ == nullptr; }
  /// What this layer drops after forward and rebuilds in backward (`full` is the block's).
  void set_recompute(const LayerRecompute& recompute, const RecomputeConfig::SwapModules& swap_modules = {});
  /// --swap-attention (when the plan says so and ctx.swap_tier is set): after forward, move
  /// the saved activations of --swap-modules to the tier; ahead of backward, start reading
  /// them back; at backward start, take them back (waiting for the read).
  void swap_out(const ForwardContext& ctx, Saved& saved) const;
  void prefetch(const ForwardContext& ctx, Saved& saved) const;
  void swap_in(const ForwardContext& ctx, Saved& saved) const;
  /// Takes the input [n, h] and returns the output [n, h]. With `inference` the attention
  /// runs over the key/value cache (SelfAttention::forward).
  Tensor forward(const ForwardContext& ctx, const MicroBatch& mb, Tensor input, Saved& saved,
                 const StaticInferenceContext* inference = nullptr) const;
  /// dresid [N, h]: in, the gradient of the layer's output; out, that of its input.
  void backward(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved, float* dresid) const;

 private:
  DropoutSpec residual_dropout(const ForwardContext& ctx, const MicroBatch& mb,
                               DropoutSite site) const;
  int64_t layer_index_, hidden_;  ///< hidden_: this rank's columns (h/Y with a 2D grid)
  float hidden_dropout_;
  TensorParallelGrid grid_;
  LayerRecompute recompute_;
  RecomputeConfig::SwapModules swap_modules_;
  // The spec's slots (all null for a no-op layer).
  std::unique_ptr<Norm> input_layernorm_;
  std::unique_ptr<SelfAttention> self_attention_;
  std::unique_ptr<Norm> pre_mlp_layernorm_;
  std::unique_ptr<MLP> mlp_;
  std::unique_ptr<MoELayer> moe_;
};

}  // namespace mindspeed
