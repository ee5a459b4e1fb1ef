// LrScheduler (lr_scheduler.h).
#include "optimizer/lr_scheduler.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace mindspeed {

LrScheduler::LrScheduler(const OptimizerConfig& config, int64_t train_iters, int64_t global_batch_size)
    : config_(config), global_batch_size_(global_batch_size) {
  MS_CHECK(global_batch_size > 0, "global batch size ", global_batch_size);
  decay_steps_ = config.lr_decay_iters > 0 ? config.lr_decay_iters : train_iters;
  if (config.lr_warmup_fraction >= 0.0f) {
    warmup_steps_ = static_cast<double>(config.lr_warmup_fraction) * static_cast<double>(decay_steps_);
  } else {
    warmup_steps_ = static_cast<double>(config.lr_warmup_iters);
  }
  wsd_decay_steps_ = config.lr_wsd_decay_iters;
  MS_CHECK(config.lr_decay_style != LrDecayStyle::kWSD || wsd_decay_steps_ >= 0,
           "--lr-decay-style WSD needs --lr-wsd-decay-iters");
}

LrScheduler LrScheduler::for_samples(const OptimizerConfig& config, int64_t train_samples) {
  LrScheduler s;
  s.config_ = config;
  s.global_batch_size_ = 1;  // steps are samples: a "batch" of one
  s.decay_steps_ = config.lr_decay_samples > 0 ? config.lr_decay_samples : train_samples;
  s.warmup_steps_ = config.lr_warmup_fraction >= 0.0f
                        ? static_cast<double>(config.lr_warmup_fraction) * static_cast<double>(s.decay_steps_)
                        : static_cast<double>(config.lr_warmup_samples);
  s.wsd_decay_steps_ = config.lr_wsd_decay_samples;
  MS_CHECK(config.lr_decay_style != LrDecayStyle::kWSD || s.wsd_decay_steps_ >= 0,
           "--lr-decay-style WSD with --train-samples needs --lr-wsd-decay-samples");
  return s;
}

LrScheduler LrScheduler::for_iterations_in_samples(const OptimizerConfig& config, int64_t train_iters,
                                                   int64_t global_batch_size) {
  MS_CHECK(global_batch_size > 0, "global batch size ", global_batch_size);
  OptimizerConfig in_samples = config;
  in_samples.lr_decay_samples = (config.lr_decay_iters > 0 ? config.lr_decay_iters : train_iters) * global_batch_size;
  in_samples.lr_warmup_samples = config.lr_warmup_iters * global_batch_size;
  in_samples.lr_wsd_decay_samples = config.lr_wsd_decay_iters >= 0 ? config.lr_wsd_decay_iters * global_batch_size : -1;
  return for_samples(in_samples, train_iters * global_batch_size);
}

double LrScheduler::lr(int64_t num_steps) const {
  const double max_lr = config_.lr, min_lr = config_.min_lr;
  const double steps = static_cast<double>(num_steps);
  if (warmup_steps_ > 0.0 && steps <= warmup_steps_) {
    return config_.lr_warmup_init + (max_lr - config_.lr_warmup_init) * steps / warmup_steps_;
  }
  if (config_.lr_decay_style == LrDecayStyle::kConstant) return max_lr;
  if (num_steps > decay_steps_) return min_lr;
  if (config_.lr_decay_style == LrDecayStyle::kInverseSquareRoot) {
    // In samples, as Megatron: both counts are clamped at one sample, not one iteration.
    const double batch = static_cast<double>(global_batch_size_);
    const double warmup = std::max(warmup_steps_ * batch, 1.0);
    const double lr = max_lr * std::sqrt(warmup) / std::sqrt(std::max(steps * batch, 1.0));
    return std::max(min_lr, lr);
  }
  const double decay_ratio =
      (steps - warmup_steps_) / (static_cast<double>(decay_steps_) - warmup_steps_);
  MS_CHECK(decay_ratio >= 0.0 && decay_ratio <= 1.0, "decay ratio ", decay_ratio);
  const double delta = max_lr - min_lr;
  double coeff = 0.0;
  switch (config_.lr_decay_style) {
    case LrDecayStyle::kLinear:
      coeff = 1.0 - decay_ratio;
      break;
    case LrDecayStyle::kCosine:
      coeff = 0.5 * (std::cos(M_PI * decay_ratio) + 1.0);
      break;
    case LrDecayStyle::kWSD: {
      // Stable at --lr until the annealing phase, the last --lr-wsd-decay-iters (or -samples) of the decay.
      const int64_t anneal_start = decay_steps_ - wsd_decay_steps_;
      if (num_steps <= anneal_start) {
        coeff = 1.0;
        break;
      }
      const double wsd_ratio =
          static_cast<double>(num_steps - anneal_start) / static_cast<double>(wsd_decay_steps_);
      switch (config_.lr_wsd_decay_style) {
        case LrWsdDecayStyle::kLinear:
          coeff = 1.0 - wsd_ratio;
          break;
        case LrWsdDecayStyle::kCosine:
          coeff = 0.5 * (std::cos(M_PI * wsd_ratio) + 1.0);
          break;
        case LrWsdDecayStyle::kExponential:
          coeff = 2.0 * std::pow(0.5, wsd_ratio) - 1.0;
          break;
        case LrWsdDecayStyle::kMinusSqrt:
          coeff = 1.0 - std::sqrt(wsd_ratio);
          break;
      }
      break;
    }
    case LrDecayStyle::kConstant:
    case LrDecayStyle::kInverseSquareRoot:
      MS_CHECK(false, "handled above");
  }
  return min_lr + coeff * delta;
}

}  // namespace mindspeed
