// Norm module (norm.h).
#include "transformer/norm.h"

namespace mindspeed {

Norm::Norm(ParameterRegistry& registry, const std::string& prefix, Normalization kind, const ModelConfig& config,
           bool sequence_parallel, int tp_size)
    : kind_(kind), eps_(config.norm_epsilon), hidden_(config.hidden_size) {
  weight_ = registry.add({.name = prefix + ".weight",
                          .global_shape = Shape{hidden_},
                          .init = InitMethod::kOnes,
                          .weight_decay = false,
                          .sequence_parallel = sequence_parallel},
                         tp_size);
  if (kind_ == Normalization::kLayerNorm) {
    bias_ = registry.add({.name = prefix + ".bias",
                          .global_shape = Shape{hidden_},
                          .init = InitMethod::kZeros,
                          .weight_decay = false,
                          .sequence_parallel = sequence_parallel},
                         tp_size);
  }
}

void Norm::forward(const ForwardContext& ctx, const float* x, int64_t N, Saved& saved) const {
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
  if (kind_ == Normalization::kLayerNorm) {
    ctx.k().layer_norm_backward(ctx.kc(), dx, weight_->g(), bias_->g(), dout, x, ctx.w(*weight_),
                                saved.mean.f32(), saved.rstd.f32(), N, hidden_);
  } else {
    ctx.k().rms_norm_backward(ctx.kc(), dx, weight_->g(), dout, x, ctx.w(*weight_), saved.rstd.f32(), N, hidden_);
  }
}

}  // namespace mindspeed
