// MLP (mlp.h).
#include "transformer/mlp.h"

#include "module/module_scope.h"

#include <cmath>

namespace mindspeed {
namespace {
// --unaligned-linear: the FFN channels as the units of an uneven split (0: an even one).
int64_t ffn_units(const ModelConfig& config, int64_t ffn_hidden_size) {
  return config.unaligned_linear ? (ffn_hidden_size > 0 ? ffn_hidden_size : config.ffn_hidden_size)
                                 : 0;
}
}  // namespace

MLP::MLP(ParameterRegistry& registry, const std::string& prefix, const ModelConfig& config,
         int tp_size, bool sequence_parallel, int64_t ffn_hidden_size, int tp_rank,
         const TensorParallelGrid& grid)
    : swiglu_(config.swiglu),
      gelu_(config.openai_gelu ? GeluApproximation::kTanh : GeluApproximation::kErf),
      mid_rows_divisor_(grid.on() ? grid.y : 1) {
  const int64_t ffn = ffn_hidden_size > 0 ? ffn_hidden_size : config.ffn_hidden_size;
  const LinearOptions fc1{.bias = config.add_bias_linear,
                          .init_std = config.init_method_std,
                          .glu = config.swiglu,
                          .split_units = ffn_units(config, ffn_hidden_size),
                          .tp_rank = tp_rank};
  const LinearOptions fc2{
      .bias = config.add_bias_linear,
      .sequence_parallel = sequence_parallel,
      .init_std = config.init_method_std / std::sqrt(2.0f * static_cast<float>(config.num_layers)),
      .split_units = ffn_units(config, ffn_hidden_size),
      .tp_rank = tp_rank};
  const int64_t fc1_out = ffn * (config.swiglu ? 2 : 1);
  if (grid.on()) {
    linear_fc1_ = std::make_unique<Linear2D>(
        registry, prefix + ".linear_fc1", config.hidden_size, fc1_out, fc1, Linear2dRole::kFirst,
        grid, Linear2dOverlapUse{.forward_rs = true, .backward_ag = true});
    linear_fc2_ = std::make_unique<Linear2D>(
        registry, prefix + ".linear_fc2", ffn, config.hidden_size, fc2, Linear2dRole::kSecond, grid,
        Linear2dOverlapUse{.forward_ag = true, .backward_ag = true});
  } else {
    linear_fc1_ = std::make_unique<ColumnParallelLinear>(registry, prefix + ".linear_fc1",
                                                         config.hidden_size, fc1_out, fc1, tp_size);
    linear_fc2_ = std::make_unique<RowParallelLinear>(registry, prefix + ".linear_fc2", ffn,
                                                      config.hidden_size, fc2, tp_size);
  }
  ffn_local_ = linear_fc2_->in_cols();
}

void MLP::activation_forward(const ForwardContext& ctx, Saved& saved, int64_t N) const {
  saved.act_out = Tensor(*ctx.alloc, Shape{N, ffn_local_}, DType::kFloat32, MemoryCategory::kActivations);
  if (swiglu_) {
    ctx.k().swiglu_forward(ctx.kc(), saved.act_out.f32(), saved.fc1_out.f32(), N, ffn_local_);
  } else {
    ctx.k().gelu_forward(ctx.kc(), saved.act_out.f32(), saved.fc1_out.f32(), N * ffn_local_, gelu_);
  }
  round_if_half(ctx, saved.act_out);
}

void MLP::forward(const ForwardContext& ctx, const float* x, int64_t N, float* out,
                  Saved& saved) const {
  Allocator& a = *ctx.alloc;
  const int64_t M = N / mid_rows_divisor_;
  saved.fc1_out =
      Tensor(a, Shape{M, linear_fc1_->out_cols()}, DType::kFloat32, MemoryCategory::kActivations);
  linear_fc1_->forward(ctx, x, saved.fc1_out.f32(), N);
  round_if_half(ctx, saved.fc1_out);
  activation_forward(ctx, saved, M);
  linear_fc2_->forward(ctx, saved.act_out.f32(), out, N);
  if (!ctx.training) return;
  if (recompute_ != Recompute::kNone) saved.act_out.reset();
  if (recompute_ == Recompute::kFc1AndActivation) saved.fc1_out.reset();
}

void MLP::backward(const ForwardContext& ctx, Saved& saved, const float* x,
                   const float* dout, float* dx, int64_t N) const {
  Allocator& a = *ctx.alloc;
  const int64_t M = N / mid_rows_divisor_;
  if (saved.fc1_out.empty()) {  // selective "mlp" recompute: fc1 again (with its all-gather under SP)
    saved.fc1_out =
        Tensor(a, Shape{M, linear_fc1_->out_cols()}, DType::kFloat32, MemoryCategory::kActivations);
    linear_fc1_->forward(ctx, x, saved.fc1_out.f32(), N);
    round_if_half(ctx, saved.fc1_out);
  }
  if (saved.act_out.empty()) activation_forward(ctx, saved, M);
  Tensor dact(a, Shape{M, ffn_local_}, DType::kFloat32, MemoryCategory::kWorkspace);
  linear_fc2_->backward(ctx, saved.act_out.f32(), dout, dact.f32(), N);
  Tensor dfc1(a, saved.fc1_out.shape(), DType::kFloat32, MemoryCategory::kWorkspace);
  if (swiglu_) {
    ctx.k().swiglu_backward(ctx.kc(), dfc1.f32(), dact.f32(), saved.fc1_out.f32(), M, ffn_local_);
  } else {
    ctx.k().gelu_backward(ctx.kc(), dfc1.f32(), dact.f32(), saved.fc1_out.f32(), M * ffn_local_,
                          gelu_);
  }
  dact.reset();
  linear_fc1_->backward(ctx, x, dfc1.f32(), dx, N);
}

}  // namespace mindspeed
