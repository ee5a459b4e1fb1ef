// RotaryEmbedding (rotary_pos_embedding.h).
#include "models/common/rotary_pos_embedding.h"

#include <cmath>

namespace mindspeed {

RotaryEmbedding::RotaryEmbedding(const ModelConfig& config) {
  if (config.position_embedding_type != PositionEmbeddingType::kRope) return;
  const int64_t half = config.kv_channels / 2;
  cos_.resize(config.max_position_embeddings * half);
  sin_.resize(config.max_position_embeddings * half);
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(config.kv_channels);
    const float inv_freq = 1.0f / std::pow(config.rotary_base, exponent);
    for (int64_t p = 0; p < config.max_position_embeddings; ++p) {
      const float angle = static_cast<float>(p) * inv_freq;
      cos_[p * half + i] = std::cos(angle);
      sin_[p * half + i] = std::sin(angle);
    }
  }
}

}  // namespace mindspeed
