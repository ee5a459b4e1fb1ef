// Fast fused AdamW (MindSpeed's fused_adamw): one vectorised pass over param, grad and both
// moments, same operation order as the reference, chunks in parallel.
#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vec.h"
#include "kernels/kernels.h"

namespace mindspeed::cpu {

void adamw_step(const KernelContext& kc, float* param, float* exp_avg, float* exp_avg_sq, const float* grad, int64_t n,
                float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step,
                float grad_scale) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  const float step_size = static_cast<float>(static_cast<double>(lr) / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float omb1 = static_cast<float>(1.0 - beta1);
  const float omb2 = static_cast<float>(1.0 - beta2);
  const Vec8 vdecay = Vec8::set1(decay), vstep = Vec8::set1(step_size), vbc2 = Vec8::set1(bc2_sqrt);
  const Vec8 vb1 = Vec8::set1(beta1), vb2 = Vec8::set1(beta2), vomb1 = Vec8::set1(omb1),
             vomb2 = Vec8::set1(omb2), veps = Vec8::set1(eps), vgs = Vec8::set1(grad_scale);
  const int64_t nv = n / 8 * 8;
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < nv; i += 8) {
    const Vec8 g = Vec8::load(grad + i) * vgs;
    const Vec8 p = Vec8::load(param + i) * vdecay;
    const Vec8 m = Vec8::load(exp_avg + i) * vb1 + g * vomb1;
    const Vec8 v = Vec8::load(exp_avg_sq + i) * vb2 + g * g * vomb2;
    const Vec8 denom = Vec8::sqrt(v) / vbc2 + veps;
    m.store(exp_avg + i);
    v.store(exp_avg_sq + i);
    (p - vstep * (m / denom)).store(param + i);
  }
  for (int64_t i = nv; i < n; ++i) {
    const float g = grad[i] * grad_scale;
    param[i] *= decay;
    exp_avg[i] = exp_avg[i] * beta1 + g * omb1;
    exp_avg_sq[i] = exp_avg_sq[i] * beta2 + g * g * omb2;
    const float denom = std::sqrt(exp_avg_sq[i]) / bc2_sqrt + eps;
    param[i] -= step_size * (exp_avg[i] / denom);
  }
}

void ema_update(const KernelContext& kc, float* ema, const float* param, int64_t n, float decay) {
  const float keep = decay, take = 1.0f - decay;
  const Vec8 vkeep = Vec8::set1(keep), vtake = Vec8::set1(take);
  const int64_t nv = n / 8 * 8;
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < nv; i += 8) (vkeep * Vec8::load(ema + i) + vtake * Vec8::load(param + i)).store(ema + i);
  for (int64_t i = nv; i < n; ++i) ema[i] = keep * ema[i] + take * param[i];
}

double sum_of_squares(const KernelContext& kc, const float* x, int64_t n) {
  const int64_t chunks = reduction_chunks(n, 1 << 16);
  double partial[64] = {};
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    int64_t i0, i1;
    chunk_range(n, chunks, k, i0, i1);
    double acc = 0.0;
    for (int64_t b = i0; b < i1; b += 1024) {
      const int64_t e = b + 1024 < i1 ? b + 1024 : i1;
      Vec8 v = Vec8::zero();
      int64_t i = b;
      for (; i + 8 <= e; i += 8) {
        const Vec8 xv = Vec8::load(x + i);
        v = Vec8::fma(xv, xv, v);
      }
      double block = v.reduce_add();
      for (; i < e; ++i) block += static_cast<double>(x[i]) * x[i];
      acc += block;
    }
    partial[k] = acc;
  }
  double total = 0.0;
  for (int64_t k = 0; k < chunks; ++k) total += partial[k];
  return total;
}

}  // namespace mindspeed::cpu
