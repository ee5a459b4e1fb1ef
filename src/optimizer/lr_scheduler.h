// Port of megatron/core/optimizer_param_scheduler.py (OptimizerParamScheduler) for the
// learning rate: linear warmup from --lr-warmup-init to --lr over the warmup steps, then
// constant, linear, cosine, inverse-square-root or WSD (warmup-stable-decay: --lr until the
// last --lr-wsd-decay-iters of the decay, then an exponential, linear, cosine or minus_sqrt
// anneal) decay to --min-lr at --lr-decay-iters, and --min-lr after it.
// Megatron counts steps in samples (iterations * global batch). Every style but
// inverse-square-root depends only on ratios of steps, so for --train-iters this class counts
// iterations; the inverse square root clamps its step counts at one sample, so it takes the
// global batch. For --train-samples (for_samples) it counts samples, as Megatron: decay over
// --lr-decay-samples (default --train-samples), warmup over --lr-warmup-samples or the
// fraction, the WSD anneal over --lr-wsd-decay-samples; the step is the consumed samples, which
// a batch-size ramp-up advances unevenly.
#pragma once

#include <cstdint>

#include "config/optimizer_config.h"

namespace mindspeed {

class LrScheduler {
 public:
  /// train_iters: the run's iterations (the default for --lr-decay-iters); global_batch_size:
  /// samples per iteration (Megatron's step unit; it matters to inverse-square-root only).
  LrScheduler(const OptimizerConfig& config, int64_t train_iters, int64_t global_batch_size = 1);
  /// Sample-based (--train-samples): lr(n) is the rate after n consumed samples.
  static LrScheduler for_samples(const OptimizerConfig& config, int64_t train_samples);
  /// Iteration-based flags counted in samples, as Megatron's scheduler counts them (every
  /// --lr-*-iters times the global batch): lr(n) is the rate after n consumed samples. For a
  /// batch-size ramp-up with --train-iters, whose iterations hold fewer samples at first.
  static LrScheduler for_iterations_in_samples(const OptimizerConfig& config, int64_t train_iters,
                                               int64_t global_batch_size);
  /// Learning rate after `num_steps` scheduler steps (iterations; samples with for_samples).
  /// Megatron's iteration i (1-based) uses the rate after i - 1 steps: lr(0) for the first.
  double lr(int64_t num_steps) const;
  double warmup_steps() const { return warmup_steps_; }
  int64_t decay_steps() const { return decay_steps_; }

 private:
  LrScheduler() = default;

  OptimizerConfig config_;
  int64_t global_batch_size_ = 1;
  double warmup_steps_ = 0.0;  ///< fractional with --lr-warmup-fraction, as in Megatron
  int64_t decay_steps_ = 0;
  int64_t wsd_decay_steps_ = -1;  ///< the WSD anneal (--lr-wsd-decay-iters or -samples)
};

}  // namespace mindspeed
