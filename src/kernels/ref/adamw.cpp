// Reference AdamW with decoupled weight decay, in the operation order of torch.optim.AdamW
// (single-tensor path), so the golden tests against PyTorch agree to rounding.
#include <cmath>

#include "kernels/kernels.h"

namespace mindspeed::ref {

void adamw_step(const KernelContext& kc, float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step,
                float grad_scale) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  const float step_size = static_cast<float>(static_cast<double>(lr) / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float one_minus_beta1 = static_cast<float>(1.0 - beta1);
  const float one_minus_beta2 = static_cast<float>(1.0 - beta2);
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * grad_scale;
    param[i] *= decay;
    exp_avg[i] = exp_avg[i] * beta1 + g * one_minus_beta1;
    exp_avg_sq[i] = exp_avg_sq[i] * beta2 + g * g * one_minus_beta2;
    const float denom = std::sqrt(exp_avg_sq[i]) / bc2_sqrt + eps;
    param[i] -= step_size * (exp_avg[i] / denom);
  }
}

void ema_update(const KernelContext& kc, float* ema, const float* param, int64_t n, float decay) {
  const float keep = decay, take = 1.0f - decay;
  for (int64_t i = 0; i < n; ++i) ema[i] = keep * ema[i] + take * param[i];
}

double sum_of_squares(const KernelContext& kc, const float* x, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * x[i];
  return acc;
}

}  // namespace mindspeed::ref
