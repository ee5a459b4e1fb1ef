// LrScheduler (lr_scheduler.h).
#include "optimizer/lr_scheduler.h"

#include <cmath>

#include "core/check.h"

namespace mindspeed {

LrScheduler::LrScheduler(const OptimizerConfig& config, int64_t train_iters) : config_(config) {
  decay_steps_ = config.lr_decay_iters > 0 ? config.lr_decay_iters : train_iters;
  if (config.lr_warmup_fraction >= 0.0f) {
    warmup_steps_ = static_cast<double>(config.lr_warmup_fraction) * static_cast<double>(decay_steps_);
  } else {
    warmup_steps_ = static_cast<double>(config.lr_warmup_iters);
  }
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
    const double warmup = std::max(warmup_steps_, 1.0);
    const double lr = max_lr * std::sqrt(warmup) / std::sqrt(std::max<double>(num_steps, 1.0));
    return std::max(min_lr, lr);
  }
  const double decay_ratio =
      (steps - warmup_steps_) / (static_cast<double>(decay_steps_) - warmup_steps_);
  MS_CHECK(decay_ratio >= 0.0 && decay_ratio <= 1.0, "decay ratio ", decay_ratio);
  const double delta = max_lr - min_lr;
  double coeff = 0.0;
  if (config_.lr_decay_style == LrDecayStyle::kLinear) {
    coeff = 1.0 - decay_ratio;
  } else {
    coeff = 0.5 * (std::cos(M_PI * decay_ratio) + 1.0);
  }
  return min_lr + coeff * delta;
}

}  // namespace mindspeed
