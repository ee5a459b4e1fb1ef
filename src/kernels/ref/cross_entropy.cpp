// Reference softmax + cross-entropy with its gradient (Megatron's cross entropy on one
// tensor-parallel rank; llm.c crossentropy_softmax_backward). Double accumulation.
#include <cmath>
#include <limits>

#include "kernels/kernels.h"

namespace mindspeed::ref {

void softmax_cross_entropy(const KernelContext& kc, float* logits, float* losses, const int32_t* targets,
                           const float* grad_scale, int64_t N, int64_t V, bool compute_grad) {
  for (int64_t n = 0; n < N; ++n) {
    float* row = logits + n * V;
    double maxv = row[0];
    for (int64_t j = 1; j < V; ++j) maxv = std::max(maxv, static_cast<double>(row[j]));
    double sum = 0.0;
    for (int64_t j = 0; j < V; ++j) sum += std::exp(row[j] - maxv);
    const int64_t target = targets[n];
    losses[n] = static_cast<float>(std::log(sum) + maxv - row[target]);
    if (compute_grad) {
      const double scale = grad_scale ? grad_scale[n] : 1.0;
      for (int64_t j = 0; j < V; ++j) {
        const double p = std::exp(row[j] - maxv) / sum;
        row[j] = static_cast<float>((p - (j == target ? 1.0 : 0.0)) * scale);
      }
    }
  }
}

void vocab_parallel_ce_row_max(const KernelContext& kc, float* row_max, const float* logits, int64_t N,
                               int64_t V) {
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

}  // namespace mindspeed::ref
