// RotaryEmbedding (rotary_pos_embedding.h).
#include "models/common/rotary_pos_embedding.h"

#include <cmath>

namespace mindspeed {

namespace {

// Llama 3.1's frequency scaling (Megatron core rope_utils apply_scaling, transformers
// _compute_llama3_parameters): long wavelengths slowed by `factor`, short ones kept, the band
// between blended smoothly.
float llama3_scaled(float inv_freq, const ModelConfig& c) {
  const float pi = 3.14159265358979323846f;
  const float old_len = static_cast<float>(c.rope_original_max_position_embeddings);
  const float low_wavelen = old_len / c.rope_low_freq_factor, high_wavelen = old_len / c.rope_high_freq_factor;
  const float wavelen = 2.0f * pi / inv_freq;
  if (wavelen < high_wavelen) return inv_freq;
  if (wavelen > low_wavelen) return inv_freq / c.rope_scaling_factor;
  const float smooth = (old_len / wavelen - c.rope_low_freq_factor) / (c.rope_high_freq_factor - c.rope_low_freq_factor);
  return (1.0f - smooth) * inv_freq / c.rope_scaling_factor + smooth * inv_freq;
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(const ModelConfig& config) {
  if (config.position_embedding_type != PositionEmbeddingType::kRope) return;
  const int64_t half = config.kv_channels / 2;
  std::vector<float> cos(static_cast<size_t>(config.max_position_embeddings * half));
  std::vector<float> sin(cos.size());
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(config.kv_channels);
    float inv_freq = 1.0f / std::pow(config.rotary_base, exponent);
    if (config.rope_scaling == RopeScaling::kLlama3) inv_freq = llama3_scaled(inv_freq, config);
    for (int64_t p = 0; p < config.max_position_embeddings; ++p) {
      // Linear interpolation (--rotary-seq-len-interpolation-factor) divides the positions.
      const float position = static_cast<float>(p) / config.rotary_seq_len_interpolation_factor;
      const float angle = position * inv_freq;
      cos[p * half + i] = std::cos(angle);
      sin[p * half + i] = std::sin(angle);
    }
  }
  cos_ = ConstantTable(std::move(cos));
  sin_ = ConstantTable(std::move(sin));
}

}  // namespace mindspeed
