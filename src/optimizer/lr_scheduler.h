// Port of megatron/core/optimizer_param_scheduler.py (OptimizerParamScheduler) for the
// learning rate: linear warmup from --lr-warmup-init to --lr over the warmup steps, then
// constant, linear, cosine or inverse-square-root decay to --min-lr at --lr-decay-iters.
// Megatron counts steps in samples (iterations * global batch); with a fixed global batch
// that is the iteration count, which is what this class uses.
#pragma once

#include <cstdint>

#include "config/optimizer_config.h"

namespace mindspeed {

class LrScheduler {
 public:
  /// train_iters: the run's iterations (the default for --lr-decay-iters).
  LrScheduler(const OptimizerConfig& config, int64_t train_iters);
  /// Learning rate after `num_steps` scheduler steps. Megatron's iteration i (1-based) uses
  /// the rate after i - 1 steps: lr(0) for the first iteration.
  double lr(int64_t num_steps) const;
  double warmup_steps() const { return warmup_steps_; }
  int64_t decay_steps() const { return decay_steps_; }

 private:
  OptimizerConfig config_;
  double warmup_steps_ = 0.0;  ///< fractional with --lr-warmup-fraction, as in Megatron
  int64_t decay_steps_ = 0;
};

}  // namespace mindspeed
