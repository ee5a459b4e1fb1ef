// Reference softmax + cross-entropy with its gradient (Megatron's cross entropy on one
// tensor-parallel rank; llm.c crossentropy_softmax_backward). Double accumulation.
#include <cmath>

#include "kernels/kernels.h"

namespace mindspeed::ref {

void softmax_cross_entropy(float* logits, float* losses, const int32_t* targets,
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

}  // namespace mindspeed::ref
