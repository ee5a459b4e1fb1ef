// GPT layer specs (gpt_layer_specs.h).
#include "models/gpt/gpt_layer_specs.h"

#include <algorithm>

namespace mindspeed {

TransformerLayerSpec get_gpt_layer_local_spec(const ModelConfig& config, int64_t layer_index) {
  TransformerLayerSpec spec;
  spec.noop = std::find(config.noop_layers.begin(), config.noop_layers.end(), layer_index) != config.noop_layers.end();
  spec.input_layernorm = config.normalization;
  spec.pre_mlp_layernorm = config.normalization;
  spec.self_attention = AttentionKind::kSelfAttention;
  spec.mlp = config.moe.is_moe_layer(layer_index) ? MlpKind::kMoE : MlpKind::kDense;
  return spec;
}

std::vector<TransformerLayerSpec> get_gpt_decoder_layer_specs(const ModelConfig& config, int64_t first_layer,
                                                              int64_t num_layers) {
  std::vector<TransformerLayerSpec> specs;
  for (int64_t l = first_layer; l < first_layer + num_layers; ++l) specs.push_back(get_gpt_layer_local_spec(config, l));
  return specs;
}

}  // namespace mindspeed
