// Layer specs (port of megatron/core/transformer/spec_utils.py ModuleSpec and the
// TransformerLayerSubmodules slots): what a transformer layer is assembled from, chosen per
// layer from the config (models/gpt/gpt_layer_specs.h fills them), never hard-coded in the
// layer. A slot is an enum rather than an import string (style_anchors 9.5).
#pragma once

#include "config/model_config.h"

namespace mindspeed {

/// The self-attention slot.
enum class AttentionKind {
  kSelfAttention,  ///< SelfAttention: linear_qkv, rotary, core/flash attention, linear_proj
};

/// The MLP slot.
enum class MlpKind {
  kDense,  ///< MLP: linear_fc1, GELU or SwiGLU, linear_fc2
  kMoE,    ///< MoELayer: router, token dispatcher, routed experts, optional shared experts
};

struct TransformerLayerSpec {
  /// MindSpeed --noop-layers: the layer is the identity (no parameters, no compute), as
  /// MindSpeed's NoopTransformerLayer; it keeps its place in the layer numbering.
  bool noop = false;
  Normalization input_layernorm = Normalization::kLayerNorm;
  AttentionKind self_attention = AttentionKind::kSelfAttention;
  Normalization pre_mlp_layernorm = Normalization::kLayerNorm;
  MlpKind mlp = MlpKind::kDense;
};

}  // namespace mindspeed
