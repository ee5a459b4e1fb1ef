// OptimizerConfig: AdamW, gradient clipping and the learning-rate schedule (Megatron's
// OptimizerConfig plus the OptimizerParamScheduler flags).
#pragma once

#include <cstdint>

namespace mindspeed {

/// --lr-decay-style: constant, linear, cosine, inverse-square-root or WSD (warmup-stable-decay).
enum class LrDecayStyle { kConstant, kLinear, kCosine, kInverseSquareRoot, kWSD };

/// --lr-wsd-decay-style: the annealing phase of WSD (Megatron's default: exponential;
/// minus_sqrt is core_v0.13's addition).
enum class LrWsdDecayStyle { kExponential, kLinear, kCosine, kMinusSqrt };

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
  /// --lr-wsd-decay-style (Megatron's default exponential); used with --lr-decay-style WSD.
  LrWsdDecayStyle lr_wsd_decay_style = LrWsdDecayStyle::kExponential;
  /// --lr-wsd-decay-iters: iterations of WSD's annealing phase, which ends at the decay end
  /// (--lr-decay-iters); < 0 = unset (Megatron's None), required with WSD; 0 is valid (no annealing).
  /// (--lr-wsd-decay-samples is its sample-based twin, for --train-samples runs.)
  int64_t lr_wsd_decay_iters = -1;
};

}  // namespace mindspeed
