// Port of megatron/core/transformer/transformer_layer.py TransformerLayer (pre-norm):
//   mid = x + dropout(self_attention(input_layernorm(x)) + proj_bias)
//   out = mid + dropout(mlp(pre_mlp_layernorm(mid)) + fc2_bias)
// Backward runs the residual stream's gradient through one [n, h] buffer in place; n = N rows,
// or N/tp with sequence parallelism (norms, dropout and residuals then see [s/tp, b, h]).
#pragma once

#include <string>

#include "config/model_config.h"
#include "core/tensor.h"
#include "transformer/attention.h"
#include "transformer/forward_context.h"
#include "transformer/mlp.h"
#include "transformer/norm.h"

namespace mindspeed {

class TransformerLayer {
 public:
  struct Saved {
    const float* input = nullptr;  ///< [n, h], owned by the previous layer or the embedding
    Norm::Saved input_layernorm;
    SelfAttention::Saved self_attention;
    Tensor mid;                    ///< [N, h] residual after attention
    Norm::Saved pre_mlp_layernorm;
    MLP::Saved mlp;
    Tensor output;                 ///< [N, h]
  };

  /// layer_index: global 0-based index (Megatron's layer_number - 1).
  TransformerLayer(ParameterRegistry& registry, const ModelConfig& config, int64_t layer_index,
                   int tp_size, int tp_rank, bool sequence_parallel, const float* rope_cos,
                   const float* rope_sin);
  void forward(const ForwardContext& ctx, const MicroBatch& mb, const float* input,
               Saved& saved) const;
  /// dresid [N, h]: in, the gradient of the layer's output; out, that of its input.
  void backward(const ForwardContext& ctx, const MicroBatch& mb, const Saved& saved,
                float* dresid) const;

 private:
  DropoutSpec residual_dropout(const ForwardContext& ctx, const MicroBatch& mb,
                               DropoutSite site) const;
  int64_t layer_index_, hidden_;
  float hidden_dropout_;
  Norm input_layernorm_;
  SelfAttention self_attention_;
  Norm pre_mlp_layernorm_;
  MLP mlp_;
};

}  // namespace mindspeed
