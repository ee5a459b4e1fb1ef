// Vocab-parallel cross entropy (cross_entropy.h).
#include "tensor_parallel/cross_entropy.h"

#include <cmath>
#include <limits>
#include <vector>

namespace mindspeed {

void vocab_parallel_cross_entropy(const ForwardContext& ctx, float* logits, float* losses,
                                  const int32_t* targets, const float* grad_scale, int64_t rows,
                                  int64_t V, int64_t vocab_start, bool compute_grad) {
  ProcessGroup& tp = ctx.ps->tp();
  if (tp.size() == 1) {
    ctx.k().softmax_cross_entropy(logits, losses, targets, grad_scale, rows, V, compute_grad);
    return;
  }
  // 1. Row maxima, all-reduced.
  std::vector<float> row_max(rows);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * V;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < V; ++j) m = x[j] > m ? x[j] : m;
    row_max[r] = m;
  }
  tp.all_reduce(row_max.data(), rows, ReduceOp::kMax);
  // 2. Sums of exp(x - max) and the target's shifted logit (0 off this rank's slice).
  std::vector<float> sums(2 * rows);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float* x = logits + r * V;
    const float m = row_max[r];
    const int64_t local = static_cast<int64_t>(targets[r]) - vocab_start;
    sums[rows + r] = (local >= 0 && local < V) ? x[local] - m : 0.0f;
    float s = 0.0f;
    for (int64_t j = 0; j < V; ++j) {
      const float e = std::exp(x[j] - m);
      if (compute_grad) x[j] = e;  // kept for the gradient
      s += e;
    }
    sums[r] = s;
  }
  tp.all_reduce(sums.data(), 2 * rows, ReduceOp::kSum);
  // 3. Loss and gradient.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float s = sums[r];
    losses[r] = std::log(s) - sums[rows + r];
    if (!compute_grad) continue;
    float* x = logits + r * V;
    const float scale = grad_scale ? grad_scale[r] : 1.0f;
    const float k = scale / s;
    for (int64_t j = 0; j < V; ++j) x[j] *= k;
    const int64_t local = static_cast<int64_t>(targets[r]) - vocab_start;
    if (local >= 0 && local < V) x[local] -= scale;
  }
}

}  // namespace mindspeed
