// Port of megatron/core/models/gpt/gpt_layer_specs.py get_gpt_layer_local_spec: the spec of
// every decoder layer from the config (norm kind, attention, dense MLP; MindSpeed's
// --noop-layers give identity layers).
#pragma once

#include <cstdint>
#include <vector>

#include "config/model_config.h"
#include "transformer/layer_spec.h"

namespace mindspeed {

/// The local (non-Transformer-Engine) spec of global layer `layer_index`.
TransformerLayerSpec get_gpt_layer_local_spec(const ModelConfig& config, int64_t layer_index);

/// Specs of global layers [first_layer, first_layer + num_layers).
std::vector<TransformerLayerSpec> get_gpt_decoder_layer_specs(const ModelConfig& config, int64_t first_layer,
                                                              int64_t num_layers);

}  // namespace mindspeed
