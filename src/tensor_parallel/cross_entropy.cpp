// Vocab-parallel cross entropy (cross_entropy.h).
#include "tensor_parallel/cross_entropy.h"

namespace mindspeed {

void vocab_parallel_cross_entropy(const ForwardContext& ctx, float* logits, float* losses,
                                  const int32_t* targets, const float* grad_scale, int64_t rows,
                                  int64_t V, int64_t vocab_start, bool compute_grad) {
  ProcessGroup& tp = ctx.ps->tp();
  if (tp.size() == 1) {
    ctx.k().softmax_cross_entropy(ctx.kc(), logits, losses, targets, grad_scale, rows, V, compute_grad);
    return;
  }
  // 1. Row maxima, all-reduced (MAX). 2. Sums of exp(x - max) and the target's shifted
  // logit, all-reduced (SUM). 3. Loss and gradient.
  Tensor row_max(*ctx.alloc, Shape{rows}, DType::kFloat32, MemoryCategory::kWorkspace);
  Tensor sums(*ctx.alloc, Shape{2 * rows}, DType::kFloat32, MemoryCategory::kWorkspace);
  ctx.k().vocab_parallel_ce_row_max(ctx.kc(), row_max.f32(), logits, rows, V);
  tp.all_reduce(row_max.f32(), rows, ReduceOp::kMax);
  ctx.k().vocab_parallel_ce_sum_exp(ctx.kc(), sums.f32(), logits, row_max.f32(), targets, rows, V, vocab_start,
                                    compute_grad);
  tp.all_reduce(sums.f32(), 2 * rows, ReduceOp::kSum);
  ctx.k().vocab_parallel_ce_finish(ctx.kc(), logits, losses, sums.f32(), targets, grad_scale, rows, V, vocab_start,
                                   compute_grad);
}

}  // namespace mindspeed
