// Norm module (norm.h).
#include "transformer/norm.h"

namespace mindspeed {

Norm::Norm(ParameterRegistry& registry, const std::string& prefix, Normalization kind,
           const ModelConfig& config, bool sequence_parallel, int tp_size,
           const TensorParallelGrid& grid)
    : kind_(kind),
      eps_(config.norm_epsilon),
      hidden_(config.hidden_size),
      hidden_local_(grid.on() ? config.hidden_size / grid.y : config.hidden_size),
      two_d_(grid.on()) {
  for (const bool is_bias : {false, true}) {
    if (is_bias && kind_ != Normalization::kLayerNorm) break;
    ParameterSpec spec{.name = prefix + (is_bias ? ".bias" : ".weight"),
                       .global_shape = Shape{hidden_},
                       .init = is_bias ? InitMethod::kZeros : InitMethod::kOnes,
                       .weight_decay = false,
                       .sequence_parallel = sequence_parallel};
    Parameter* p = nullptr;
    if (two_d_) {  // [h/Y] blocks over the Y axis, replicated along X
      spec.split = TensorParallelSplit::kRows;
      spec.tp_x = grid.x;
      spec.tp_axis = TensorParallelAxis::kY;
      spec.grads_summed_over_tp_x = true;
      p = registry.add(std::move(spec), grid.y, grid.y_rank);
    } else {
      p = registry.add(std::move(spec), tp_size);
    }
    (is_bias ? bias_ : weight_) = p;
  }
}

void Norm::forward(const ForwardContext& ctx, const float* x, int64_t N, Saved& saved) const {
  if (two_d_) return forward_2d(ctx, x, N, saved);
  Allocator& a = *ctx.alloc;
  saved.out = Tensor(a, Shape{N, hidden_}, DType::kFloat32, MemoryCategory::kActivations);
  saved.rstd = Tensor(a, Shape{N}, DType::kFloat32, MemoryCategory::kActivations);
  if (kind_ == Normalization::kLayerNorm) {
    saved.mean = Tensor(a, Shape{N}, DType::kFloat32, MemoryCategory::kActivations);
    ctx.k().layer_norm_forward(ctx.kc(), saved.out.f32(), saved.mean.f32(), saved.rstd.f32(), x,
                               ctx.w(*weight_), ctx.w(*bias_), N, hidden_, eps_);
  } else {
    ctx.k().rms_norm_forward(ctx.kc(), saved.out.f32(), saved.rstd.f32(), x, ctx.w(*weight_), N, hidden_, eps_);
  }
}

void Norm::backward(const ForwardContext& ctx, const Saved& saved, const float* x,
                    const float* dout, float* dx, int64_t N) const {
  if (two_d_) return backward_2d(ctx, saved, x, dout, dx, N);
  if (kind_ == Normalization::kLayerNorm) {
    ctx.k().layer_norm_backward(ctx.kc(), dx, weight_->g(), bias_->g(), dout, x, ctx.w(*weight_),
                                saved.mean.f32(), saved.rstd.f32(), N, hidden_);
  } else {
    ctx.k().rms_norm_backward(ctx.kc(), dx, weight_->g(), dout, x, ctx.w(*weight_), saved.rstd.f32(), N, hidden_);
  }
}

void Norm::forward_2d(const ForwardContext& ctx, const float* x, int64_t N, Saved& saved) const {
  Allocator& a = *ctx.alloc;
  ProcessGroup& y_group = ctx.ps->tp_y();
  const int64_t C = hidden_local_;
  saved.out = Tensor(a, Shape{N, C}, DType::kFloat32, MemoryCategory::kActivations);
  saved.rstd = Tensor(a, Shape{N}, DType::kFloat32, MemoryCategory::kActivations);
  Tensor sq(a, Shape{N}, DType::kFloat32, MemoryCategory::kWorkspace);
  const float* mean = nullptr;
  if (kind_ == Normalization::kLayerNorm) {
    // The mean: each block's sum / h, summed over Y; then the squares about it, summed over Y.
    saved.mean = Tensor(a, Shape{N}, DType::kFloat32, MemoryCategory::kActivations);
    ctx.k().norm_partial_moments(ctx.kc(), saved.mean.f32(), x, nullptr, 1,
                                 1.0f / static_cast<float>(hidden_), N, C);
    y_group.all_reduce(saved.mean.f32(), N);
    mean = saved.mean.f32();
  }
  ctx.k().norm_partial_moments(ctx.kc(), sq.f32(), x, mean, 2, 1.0f, N, C);
  y_group.all_reduce(sq.f32(), N);
  ctx.k().norm_apply(ctx.kc(), saved.out.f32(), saved.rstd.f32(), x, mean, sq.f32(),
                     ctx.w(*weight_), bias_ != nullptr ? ctx.w(*bias_) : nullptr, hidden_, eps_, N,
                     C);
}

void Norm::backward_2d(const ForwardContext& ctx, const Saved& saved, const float* x,
                       const float* dout, float* dx, int64_t N) const {
  Tensor sums(*ctx.alloc, Shape{N, 2}, DType::kFloat32, MemoryCategory::kWorkspace);
  const float* mean = kind_ == Normalization::kLayerNorm ? saved.mean.f32() : nullptr;
  ctx.k().norm_backward_partials(ctx.kc(), sums.f32(), dout, x, ctx.w(*weight_), mean,
                                 saved.rstd.f32(), N, hidden_local_);
  ctx.ps->tp_y().all_reduce(sums.f32(), 2 * N);
  ctx.k().norm_backward_apply(ctx.kc(), dx, weight_->g(), bias_ != nullptr ? bias_->g() : nullptr,
                              dout, x, ctx.w(*weight_), mean, saved.rstd.f32(), sums.f32(), hidden_,
                              N, hidden_local_);
}

}  // namespace mindspeed
