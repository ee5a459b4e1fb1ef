// Port of megatron/core/models/common/embeddings/rotary_pos_embedding.py RotaryEmbedding:
// the cos/sin tables of rotary position embedding, in fp32 exactly as Megatron and Hugging
// Face compute them: inv_freq = 1 / base^(2i/D), angle = position * inv_freq. Built once per
// model chunk on the host (like parameter initialisation); the layers read the tables (on a
// device, the tables' copies there: module/constant_table.h).
#pragma once

#include <cstdint>
#include <vector>

#include "config/model_config.h"
#include "module/constant_table.h"

namespace mindspeed {

class RotaryEmbedding {
 public:
  /// Empty tables unless the config uses rotary position embedding.
  explicit RotaryEmbedding(const ModelConfig& config);
  /// [P, D/2] each; null without rotary embedding. The layers read them on their device.
  const ConstantTable* cos() const { return cos_.empty() ? nullptr : &cos_; }
  const ConstantTable* sin() const { return sin_.empty() ? nullptr : &sin_; }

 private:
  ConstantTable cos_, sin_;
};

}  // namespace mindspeed
