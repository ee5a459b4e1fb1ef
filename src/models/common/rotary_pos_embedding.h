// Port of megatron/core/models/common/embeddings/rotary_pos_embedding.py RotaryEmbedding:
// the cos/sin tables of rotary position embedding, in fp32 exactly as Megatron and Hugging
// Face compute them: inv_freq = 1 / base^(2i/D), angle = position * inv_freq. Built once per
// model chunk on the host (like parameter initialisation); the layers read the tables.
#pragma once

#include <cstdint>
#include <vector>

#include "config/model_config.h"

namespace mindspeed {

class RotaryEmbedding {
 public:
  /// Empty tables unless the config uses rotary position embedding.
  explicit RotaryEmbedding(const ModelConfig& config);
  const float* cos() const { return cos_.empty() ? nullptr : cos_.data(); }  ///< [P, D/2]
  const float* sin() const { return sin_.empty() ? nullptr : sin_.data(); }  ///< [P, D/2]

 private:
  std::vector<float> cos_, sin_;
};

}  // namespace mindspeed
