// Port of megatron/core/optimizer/grad_scaler.py: the loss scale of --fp16 training.
// ConstantGradScaler (--loss-scale S): the scale never changes. DynamicGradScaler (the
// default with --fp16): an iteration whose gradients hold an inf or NaN is skipped; after
// `hysteresis` such iterations in a row (the count is only restored by growth) the scale is
// multiplied by backoff_factor (0.5), never below min_scale; after growth_interval
// (--loss-scale-window) good iterations in a row it is multiplied by growth_factor (2).
// The scale is an fp32 value, as Megatron's CUDA tensor is.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace mindspeed {

/// Megatron's DynamicGradScaler state_dict (the constant scaler has none).
struct GradScalerState {
  float scale = 1.0f;
  int64_t growth_tracker = 0;
  int64_t hysteresis_tracker = 0;
};

class GradScaler {
 public:
  /// ConstantGradScaler(scale).
  static StatusOr<GradScaler> constant(float scale);
  /// DynamicGradScaler: Megatron's asserts become errors naming the flag.
  static StatusOr<GradScaler> dynamic(float initial_scale, float min_scale, float growth_factor, float backoff_factor,
                                      int64_t growth_interval, int64_t hysteresis);

  float scale() const { return state_.scale; }
  /// 1/scale, computed in double and rounded to fp32 (Megatron: scale.double().reciprocal().float()).
  float inv_scale() const { return static_cast<float>(1.0 / static_cast<double>(state_.scale)); }
  bool is_dynamic() const { return dynamic_; }
  /// After the gradients of an iteration were checked (found_inf: any inf or NaN on any rank).
  void update(bool found_inf);

  const GradScalerState& state() const { return state_; }
  void load_state(const GradScalerState& state) { state_ = state; }

 private:
  GradScaler() = default;
  bool dynamic_ = false;
  float min_scale_ = 1.0f, growth_factor_ = 2.0f, backoff_factor_ = 0.5f;
  int64_t growth_interval_ = 1000, hysteresis_ = 2;
  GradScalerState state_;
};

}  // namespace mindspeed
