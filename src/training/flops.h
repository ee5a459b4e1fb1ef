// Port of megatron/training/training.py num_floating_point_operations (core_v0.12) for
// dense GPT/LLaMA models: model FLOPs of one iteration (forward + backward, no recompute),
//   12 B s L h^2 [ (1 + g/n + s/(2h)) q + (F/h) gamma + V / (2 L h) ]
// with q = kv_channels * n / h, gamma = 3/2 with SwiGLU, V the padded vocabulary; s/(2h)
// counts the causal half of the score and value GEMMs. TFLOP/s per rank divides by
// (seconds * 1e12 * world size), as Megatron's "throughput per GPU".
#pragma once

#include <cstdint>

#include "config/model_config.h"

namespace mindspeed {

/// FLOPs of one iteration over `batch_size` samples (the global batch).
double num_floating_point_operations(const ModelConfig& config, int64_t batch_size);

}  // namespace mindspeed
