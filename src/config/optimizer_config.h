// OptimizerConfig: AdamW, gradient clipping and the learning-rate schedule (Megatron's
// OptimizerConfig plus the OptimizerParamScheduler flags).
#pragma once

#include <cstdint>

namespace mindspeed {

enum class LrDecayStyle { kConstant, kLinear, kCosine, kInverseSquareRoot };

struct OptimizerConfig {
  float lr = 0.0f;             ///< --lr (required)
  float min_lr = 0.0f;         ///< --min-lr
  float weight_decay = 0.01f;  ///< --weight-decay (matrices only, as Megatron)
  float adam_beta1 = 0.9f;     ///< --adam-beta1
  float adam_beta2 = 0.999f;   ///< --adam-beta2
  float adam_eps = 1e-8f;      ///< --adam-eps
  float clip_grad = 1.0f;      ///< --clip-grad (global L2 norm; 0 disables)
  LrDecayStyle lr_decay_style = LrDecayStyle::kLinear;  ///< --lr-decay-style
  int64_t lr_decay_iters = 0;      ///< --lr-decay-iters; 0 = train iters
  int64_t lr_warmup_iters = 0;     ///< --lr-warmup-iters
  float lr_warmup_fraction = -1.0f;  ///< --lr-warmup-fraction (of the decay steps); < 0 = unset
  float lr_warmup_init = 0.0f;     ///< --lr-warmup-init
};

}  // namespace mindspeed
