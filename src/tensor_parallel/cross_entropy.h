// Port of megatron/core/tensor_parallel/cross_entropy.py (vocab-parallel cross entropy).
// Each tensor-parallel rank holds the logits of its vocabulary slice; the row max is
// all-reduced (MAX), then the sum of exponentials and the target's logit (SUM), and each
// rank writes the gradient (softmax - onehot) * grad_scale of its own slice. With one rank
// this is the fused softmax_cross_entropy kernel.
#pragma once

#include <cstdint>

#include "module/forward_context.h"

namespace mindspeed {

/// logits [rows, V] for vocab ids [vocab_start, vocab_start + V) (in: logits, out with
/// compute_grad: dlogits); targets [rows] (global ids); grad_scale [rows];
/// losses [rows] = logsumexp over the whole vocabulary - logit of the target.
void vocab_parallel_cross_entropy(const ForwardContext& ctx, float* logits, float* losses,
                                  const int32_t* targets, const float* grad_scale, int64_t rows,
                                  int64_t V, int64_t vocab_start, bool compute_grad);

}  // namespace mindspeed
