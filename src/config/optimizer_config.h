// OptimizerConfig: AdamW, gradient clipping and the learning-rate schedule (Megatron's
// OptimizerConfig plus the OptimizerParamScheduler flags).
#pragma once

#include <cstdint>

namespace mindspeed {

/// --optimizer-selection (MindSpeed): fused_adamw and fused_torch_adamw are both AdamW in
/// torch.optim.AdamW's operation order; fused_ema_adamw adds an EMA of the weights.
enum class OptimizerSelection { kFusedAdamw, kFusedTorchAdamw, kFusedEmaAdamw };

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
  int64_t lr_wsd_decay_iters = -1;
  // Their sample-based twins (with --train-samples; Megatron refuses mixing the two units).
  int64_t lr_decay_samples = 0;       ///< --lr-decay-samples; 0 = train samples
  int64_t lr_warmup_samples = 0;      ///< --lr-warmup-samples
  int64_t lr_wsd_decay_samples = -1;  ///< --lr-wsd-decay-samples; < 0 = unset

  // Memory features (MindSpeed §3.4, §3.8, §3.9, §8.1).
  OptimizerSelection optimizer_selection = OptimizerSelection::kFusedAdamw;  ///< --optimizer-selection
  float ema_decay = 0.9999f;       ///< --ema-decay (fused_ema_adamw)
  bool reuse_fp32_param = false;   ///< --reuse-fp32-param: fp32 master = bf16 weight + 16-bit residual
  bool o2_optimizer = false;       ///< --o2-optimizer: exp_avg and exp_avg_sq kept in bf16
  /// --o2-gradient: the main gradients and their accumulation buffer kept in bf16 (each
  /// module's backward writes a transient fp32 gradient, added into the bf16 buffer).
  bool o2_gradient = false;
  bool swap_optimizer = false;     ///< --swap-optimizer: master and moments live in the swap tier
  int64_t swap_optimizer_times = 16;  ///< --swap-optimizer-times: slices the step is done in
  bool ema() const { return optimizer_selection == OptimizerSelection::kFusedEmaAdamw; }
};

}  // namespace mindspeed
