// ConstantGradScaler and DynamicGradScaler (grad_scaler.h).
#include "optimizer/grad_scaler.h"

#include <algorithm>
#include <cmath>

namespace mindspeed {

StatusOr<GradScaler> GradScaler::constant(float scale) {
  if (!(scale > 0.0f) || !std::isfinite(scale)) {
    return invalid_argument("--loss-scale (", scale, ") must be a finite number > 0");
  }
  GradScaler s;
  s.state_.scale = scale;
  return s;
}

StatusOr<GradScaler> GradScaler::dynamic(float initial_scale, float min_scale, float growth_factor,
                                         float backoff_factor, int64_t growth_interval, int64_t hysteresis) {
  if (!(initial_scale > 0.0f) || !std::isfinite(initial_scale)) {
    return invalid_argument("--initial-loss-scale (", initial_scale, ") must be a finite number > 0");
  }
  if (!(min_scale > 0.0f) || min_scale > initial_scale) {
    return invalid_argument("--min-loss-scale (", min_scale, ") must be > 0 and at most --initial-loss-scale (",
                            initial_scale, ")");
  }
  if (!(growth_factor > 1.0f)) return invalid_argument("the loss scale's growth factor (", growth_factor, ") must be > 1");
  if (!(backoff_factor > 0.0f && backoff_factor < 1.0f)) {
    return invalid_argument("the loss scale's backoff factor (", backoff_factor, ") must be in (0, 1)");
  }
  if (growth_interval <= 0) return invalid_argument("--loss-scale-window (", growth_interval, ") must be > 0");
  if (hysteresis <= 0) return invalid_argument("--hysteresis (", hysteresis, ") must be > 0");
  GradScaler s;
  s.dynamic_ = true;
  s.min_scale_ = min_scale;
  s.growth_factor_ = growth_factor;
  s.backoff_factor_ = backoff_factor;
  s.growth_interval_ = growth_interval;
  s.hysteresis_ = hysteresis;
  s.state_ = {initial_scale, 0, hysteresis};
  return s;
}

void GradScaler::update(bool found_inf) {
  if (!dynamic_) return;
  if (found_inf) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker -= 1;
    if (state_.hysteresis_tracker <= 0) state_.scale = std::max(state_.scale * backoff_factor_, min_scale_);
  } else {
    state_.growth_tracker += 1;
    if (state_.growth_tracker == growth_interval_) {
      state_.growth_tracker = 0;
      state_.hysteresis_tracker = hysteresis_;
      state_.scale = state_.scale * growth_factor_;
    }
  }
}

}  // namespace mindspeed
