// ColumnParallelLinear and RowParallelLinear (layers.h).
#include "tensor_parallel/layers.h"

#include "core/precision.h"
#include "kernels/blas/gemm.h"

#include <algorithm>

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

namespace {
// Sequence parallelism: the full [N, C] rows from this rank's [N/tp, C] (all-gather along s).
Tensor gather_sequence(const ForwardContext& ctx, const float* local, int64_t N, int64_t C) {
  Tensor full(*ctx.alloc, Shape{N, C}, DType::kFloat32, MemoryCategory::kWorkspace);
  ProcessGroup& tp = ctx.ps->tp();
  tp.all_gather(full.f32(), local, N / tp.size() * C);
  return full;
}

// dW += dy^T x, directly into the gradient buffer (fused) or through a temporary.
void accumulate_weight_grad(const ForwardContext& ctx, Parameter* w, Parameter* b, const float* dy,
                            const float* x, int64_t N, int64_t in, int64_t out) {
  if (ctx.gradient_accumulation_fusion) {
    linear_backward_weight(w->g(), b ? b->g() : nullptr, dy, x, N, in, out);
    return;
  }
  Tensor tmp = Tensor::zeros(*ctx.alloc, Shape{out, in}, DType::kFloat32, MemoryCategory::kWorkspace);
  Tensor tmp_b = Tensor::zeros(*ctx.alloc, Shape{b ? out : 1}, DType::kFloat32, MemoryCategory::kWorkspace);
  linear_backward_weight(tmp.f32(), b ? tmp_b.f32() : nullptr, dy, x, N, in, out);
  // The unfused path of a bf16 model produces the weight gradient in bf16 before adding it
  // to the fp32 main gradient (MindSpeed npu_matmul_add_fp32's note).
  if (ctx.bf16) round_to_bf16_inplace(tmp.f32(), tmp.numel());
  float* g = w->g();
  const float* t = tmp.f32();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < out * in; ++i) g[i] += t[i];
  if (b) {
    for (int64_t i = 0; i < out; ++i) b->g()[i] += tmp_b.f32()[i];
  }
}
}  // namespace

void ColumnParallelLinear::forward(const ForwardContext& ctx, const float* x, float* y,
                                   int64_t N) const {
  Tensor gathered;
  if (ctx.sequence_parallel) {
    gathered = gather_sequence(ctx, x, N, in_);
    x = gathered.f32();
  }
  linear_forward(y, x, weight_->w(), bias_ ? bias_->w() : nullptr, N, in_, out_local_);
}

void ColumnParallelLinear::backward(const ForwardContext& ctx, const float* x, const float* dy,
                                    float* dx, int64_t N) const {
  ProcessGroup& tp = ctx.ps->tp();
  Tensor gathered;
  if (ctx.sequence_parallel) {  // gathered again rather than kept from forward (Megatron)
    gathered = gather_sequence(ctx, x, N, in_);
    x = gathered.f32();
  }
  if (dx != nullptr) {
    if (ctx.sequence_parallel) {
      Tensor full(*ctx.alloc, Shape{N, in_}, DType::kFloat32, MemoryCategory::kWorkspace);
      linear_backward_input(full.f32(), dy, weight_->w(), N, in_, out_local_, /*accumulate=*/false);
      tp.reduce_scatter(dx, full.f32(), N / tp.size() * in_);
    } else {
      linear_backward_input(dx, dy, weight_->w(), N, in_, out_local_, /*accumulate=*/false);
      tp.all_reduce(dx, N * in_);
    }
  }
  accumulate_weight_grad(ctx, weight_, bias_, dy, x, N, in_, out_local_);
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
                          .weight_decay = false,
                          .sequence_parallel = options.sequence_parallel},
                         tp_size);
  }
}

void RowParallelLinear::forward(const ForwardContext& ctx, const float* x, float* y,
                                int64_t N) const {
  ProcessGroup& tp = ctx.ps->tp();
  if (ctx.sequence_parallel) {
    Tensor full(*ctx.alloc, Shape{N, out_}, DType::kFloat32, MemoryCategory::kWorkspace);
    linear_forward(full.f32(), x, weight_->w(), nullptr, N, in_local_, out_);
    tp.reduce_scatter(y, full.f32(), N / tp.size() * out_);
  } else {
    linear_forward(y, x, weight_->w(), nullptr, N, in_local_, out_);
    tp.all_reduce(y, N * out_);
  }
}

void RowParallelLinear::backward(const ForwardContext& ctx, const float* x, const float* dy,
                                 float* dx, int64_t N) const {
  Tensor gathered;
  if (ctx.sequence_parallel) {
    gathered = gather_sequence(ctx, dy, N, out_);
    dy = gathered.f32();
  }
  linear_backward_input(dx, dy, weight_->w(), N, in_local_, out_, /*accumulate=*/false);
  accumulate_weight_grad(ctx, weight_, nullptr, dy, x, N, in_local_, out_);
}

}  // namespace mindspeed
