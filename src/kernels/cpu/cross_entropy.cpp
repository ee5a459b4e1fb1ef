// Fast fused softmax + cross-entropy + gradient (llm.c's fused classifier, Liger's fused
// linear cross-entropy inner step): per row one max pass, one pass computing exp(x - max)
// in place while summing, one pass scaling to (softmax - onehot) * grad_scale. One exp per
// element; rows in parallel. PyTorch's CPU log_softmax backward is single-threaded here.
#include <cmath>
#include <limits>

#include "kernels/cpu/vec.h"
#include "kernels/kernels.h"

namespace mindspeed::cpu {

void softmax_cross_entropy(const KernelContext& kc, float* logits, float* losses, const int32_t* targets,
                           const float* grad_scale, int64_t N, int64_t V, bool compute_grad) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* row = logits + n * V;
    Vec8 vmax = Vec8::set1(-INFINITY);
    int64_t j = 0;
    for (; j + 8 <= V; j += 8) vmax = Vec8::max(vmax, Vec8::load(row + j));
    float maxv = vmax.reduce_max();
    for (; j < V; ++j) maxv = row[j] > maxv ? row[j] : maxv;
    const int64_t target = targets[n];
    const float target_logit = row[target];
    const Vec8 vm = Vec8::set1(maxv);
    Vec8 vsum = Vec8::zero();
    float sum = 0.0f;
    j = 0;
    if (compute_grad) {
      for (; j + 8 <= V; j += 8) {
        const Vec8 e = Vec8::exp(Vec8::load(row + j) - vm);
        e.store(row + j);
        vsum = vsum + e;
      }
      for (; j < V; ++j) {
        row[j] = exp_scalar(row[j] - maxv);
        sum += row[j];
      }
    } else {
      for (; j + 8 <= V; j += 8) vsum = vsum + Vec8::exp(Vec8::load(row + j) - vm);
      for (; j < V; ++j) sum += exp_scalar(row[j] - maxv);
    }
    sum += vsum.reduce_add();
    losses[n] = std::log(sum) + maxv - target_logit;
    if (!compute_grad) continue;
    const float scale = grad_scale ? grad_scale[n] : 1.0f;
    const Vec8 vs = Vec8::set1(scale / sum);
    j = 0;
    for (; j + 8 <= V; j += 8) (Vec8::load(row + j) * vs).store(row + j);
    for (; j < V; ++j) row[j] *= scale / sum;
    row[target] -= scale;
  }
}

void vocab_parallel_ce_row_max(const KernelContext& kc, float* row_max, const float* logits, int64_t N,
                               int64_t V) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t r = 0; r < N; ++r) {
    const float* x = logits + r * V;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < V; ++j) m = x[j] > m ? x[j] : m;
    row_max[r] = m;
  }
}

void vocab_parallel_ce_sum_exp(const KernelContext& kc, float* sums, float* logits, const float* row_max,
                               const int32_t* targets, int64_t N, int64_t V, int64_t vocab_start,
                               bool compute_grad) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t r = 0; r < N; ++r) {
    float* x = logits + r * V;
    const float m = row_max[r];
    const int64_t local = static_cast<int64_t>(targets[r]) - vocab_start;
    sums[N + r] = (local >= 0 && local < V) ? x[local] - m : 0.0f;
    float s = 0.0f;
    for (int64_t j = 0; j < V; ++j) {
      const float e = std::exp(x[j] - m);
      if (compute_grad) x[j] = e;  // kept for the gradient
      s += e;
    }
    sums[r] = s;
  }
}

void vocab_parallel_ce_finish(const KernelContext& kc, float* logits, float* losses, const float* sums,
                              const int32_t* targets, const float* grad_scale, int64_t N, int64_t V,
                              int64_t vocab_start, bool compute_grad) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t r = 0; r < N; ++r) {
    const float s = sums[r];
    losses[r] = std::log(s) - sums[N + r];
    if (!compute_grad) continue;
    float* x = logits + r * V;
    const float scale = grad_scale ? grad_scale[r] : 1.0f;
    const float k = scale / s;
    for (int64_t j = 0; j < V; ++j) x[j] *= k;
    const int64_t local = static_cast<int64_t>(targets[r]) - vocab_start;
    if (local >= 0 && local < V) x[local] -= scale;
  }
}

}  // namespace mindspeed::cpu
