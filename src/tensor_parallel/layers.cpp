// ColumnParallelLinear and RowParallelLinear (layers.h).
#include "tensor_parallel/layers.h"

#include "kernels/blas/gemm.h"

namespace mindspeed {

ColumnParallelLinear::ColumnParallelLinear(ParameterRegistry& registry, const std::string& prefix,
                                           int64_t in, int64_t out, const LinearOptions& options,
                                           int tp_size)
    : in_(in), out_local_(out / tp_size) {
  const auto split = options.glu ? TensorParallelSplit::kGluRows : TensorParallelSplit::kRows;
  weight_ = registry.add({.name = prefix + ".weight",
                          .global_shape = Shape{out, in},
                          .split = split,
                          .init = InitMethod::kNormal,
                          .init_std = options.init_std},
                         tp_size);
  if (options.bias) {
    bias_ = registry.add({.name = prefix + ".bias",
                          .global_shape = Shape{out},
                          .split = split,
                          .init = InitMethod::kZeros,
                          .weight_decay = false},
                         tp_size);
  }
}

void ColumnParallelLinear::forward(const ForwardContext& ctx, const float* x, float* y,
                                   int64_t N) const {
  linear_forward(y, x, weight_->w(), bias_ ? bias_->w() : nullptr, N, in_, out_local_);
}

void ColumnParallelLinear::backward(const ForwardContext& ctx, const float* x, const float* dy,
                                    float* dx, int64_t N) const {
  if (dx != nullptr) {
    linear_backward_input(dx, dy, weight_->w(), N, in_, out_local_, /*accumulate=*/false);
    ctx.ps->tp().all_reduce(dx, N * in_);
  }
  linear_backward_weight(weight_->g(), bias_ ? bias_->g() : nullptr, dy, x, N, in_, out_local_);
}

RowParallelLinear::RowParallelLinear(ParameterRegistry& registry, const std::string& prefix,
                                     int64_t in, int64_t out, const LinearOptions& options,
                                     int tp_size)
    : in_local_(in / tp_size), out_(out) {
  weight_ = registry.add({.name = prefix + ".weight",
                          .global_shape = Shape{out, in},
                          .split = TensorParallelSplit::kColumns,
                          .init = InitMethod::kNormal,
                          .init_std = options.init_std},
                         tp_size);
  if (options.bias) {
    bias_ = registry.add({.name = prefix + ".bias",
                          .global_shape = Shape{out},
                          .init = InitMethod::kZeros,
                          .weight_decay = false},
                         tp_size);
  }
}

void RowParallelLinear::forward(const ForwardContext& ctx, const float* x, float* y,
                                int64_t N) const {
  linear_forward(y, x, weight_->w(), nullptr, N, in_local_, out_);
  ctx.ps->tp().all_reduce(y, N * out_);
}

void RowParallelLinear::backward(const ForwardContext& ctx, const float* x, const float* dy,
                                 float* dx, int64_t N) const {
  linear_backward_input(dx, dy, weight_->w(), N, in_local_, out_, /*accumulate=*/false);
  linear_backward_weight(weight_->g(), nullptr, dy, x, N, in_local_, out_);
}

}  // namespace mindspeed
