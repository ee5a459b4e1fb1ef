// ColumnParallelLinear and RowParallelLinear (layers.h).
#include "tensor_parallel/layers.h"

#include <algorithm>
#include <optional>

#include "module/module_scope.h"
#include "module/weight_grad_queue.h"
#include "tensor_parallel/comm_gemm.h"

namespace mindspeed {

ColumnParallelLinear::ColumnParallelLinear(ParameterRegistry& registry, const std::string& prefix,
                                           int64_t in, int64_t out, const LinearOptions& options,
                                           int tp_size)
    : in_(in) {
  const auto split = options.glu ? TensorParallelSplit::kGluRows : TensorParallelSplit::kRows;
  weight_ = registry.add({.name = prefix + ".weight",
                          .global_shape = Shape{out, in},
                          .split = split,
                          .init = InitMethod::kNormal,
                          .init_std = options.init_std,
                          .split_units = options.split_units},
                         tp_size, options.tp_rank);
  out_local_ = weight_->local_shape[0];
  if (options.bias) {
    bias_ = registry.add({.name = prefix + ".bias",
                          .global_shape = Shape{out},
                          .split = split,
                          .init = InitMethod::kZeros,
                          .weight_decay = false,
                          .split_units = options.split_units},
                         tp_size, options.tp_rank);
  }
}

namespace {
// The chunks of the fused GEMM + collective forms on `local_rows` rows: CoC's --coc-parallel-num,
// or MC2's (--use-ascend-mc2, sequence parallel); 1 = the plain layers.
int fused_chunks(const ForwardContext& ctx, int64_t local_rows) {
  if (ctx.mc2 && ctx.sequence_parallel && ctx.ps->sizes.tensor > 1) return mc2_chunks(local_rows);
  return coc_chunks(ctx, local_rows);
}

// Runs dW += dy^T x (+ db), fused into the gradient buffer or through a temporary.
void compute_weight_grad(const ForwardContext& ctx, Parameter* w, Parameter* b, const float* dy, const float* x,
                         int64_t N, int64_t in, int64_t out) {
  if (ctx.gradient_accumulation_fusion) {
    ctx.k().linear_backward_weight(ctx.kc(), w->g(), b ? b->g() : nullptr, dy, x, N, in, out);
    return;
  }
  Tensor tmp = device_zeros(*ctx.backend, *ctx.alloc, Shape{out, in}, DType::kFloat32, MemoryCategory::kWorkspace);
  Tensor tmp_b = device_zeros(*ctx.backend, *ctx.alloc, Shape{b ? out : 1}, DType::kFloat32, MemoryCategory::kWorkspace);
  ctx.k().linear_backward_weight(ctx.kc(), tmp.f32(), b ? tmp_b.f32() : nullptr, dy, x, N, in, out);
  // The unfused path of a bf16 model produces the weight gradient in bf16 before adding it
  // to the fp32 main gradient (MindSpeed npu_matmul_add_fp32's note).
  round_if_half(ctx, tmp);
  ctx.k().add_inplace(ctx.kc(), w->g(), tmp.f32(), out * in);
  if (b) ctx.k().add_inplace(ctx.kc(), b->g(), tmp_b.f32(), out);
}

Tensor copy_of(const ForwardContext& ctx, const float* x, int64_t rows, int64_t cols) {
  Tensor t(*ctx.alloc, Shape{rows, cols}, DType::kFloat32, MemoryCategory::kActivations);
  ctx.k().copy(ctx.kc(), t.f32(), x, rows * cols);
  return t;
}
}  // namespace

void accumulate_weight_grad(const ForwardContext& ctx, Parameter* w, Parameter* b, const float* dy, const float* x,
                            Tensor x_owned, int64_t N, int64_t in, int64_t out) {
  if (ctx.wgrad_queue == nullptr) {
    compute_weight_grad(ctx, w, b, dy, x, N, in, out);
    return;
  }
  if (x_owned.empty()) x_owned = copy_of(ctx, x, N, in);
  auto job = [w, b, N, in, out, dy_saved = std::make_shared<Tensor>(copy_of(ctx, dy, N, out)),
              x_saved = std::make_shared<Tensor>(std::move(x_owned))](const ForwardContext& run) {
    compute_weight_grad(run, w, b, dy_saved->f32(), x_saved->f32(), N, in, out);
  };
  ctx.wgrad_queue->push(std::move(job));
}

void ColumnParallelLinear::forward(const ForwardContext& ctx, const float* x, float* y,
                                   int64_t N) const {
  if (const int p = fused_chunks(ctx, ctx.local_rows(N)); p > 1 && ctx.sequence_parallel) {
    forward_sequence_parallel_in_chunks(ctx, x, y, N, p);
    return;
  }
  Tensor gathered;
  if (ctx.sequence_parallel) {
    gathered = Tensor(*ctx.alloc, Shape{N, in_}, DType::kFloat32, MemoryCategory::kWorkspace);
    GatherFromSequenceParallelRegion::forward(ctx, gathered.f32(), x, N, in_);
    x = gathered.f32();
  }
  // Without sequence parallelism the input enters the region by CopyToTensorModelParallelRegion
  // (identity forward).
  ctx.k().linear_forward(ctx.kc(), y, x, ctx.w(*weight_), bias_ ? ctx.w(*bias_) : nullptr, N, in_, out_local_);
}

void ColumnParallelLinear::backward(const ForwardContext& ctx, const float* x, const float* dy,
                                    float* dx, int64_t N) const {
  if (const int p = fused_chunks(ctx, ctx.local_rows(N)); p > 1) {
    backward_in_chunks(ctx, x, dy, dx, N, p);
    return;
  }
  Tensor gathered;
  if (ctx.sequence_parallel) {  // gathered again rather than kept from forward (Megatron)
    gathered = Tensor(*ctx.alloc, Shape{N, in_}, DType::kFloat32, MemoryCategory::kWorkspace);
    GatherFromSequenceParallelRegion::forward(ctx, gathered.f32(), x, N, in_);
    x = gathered.f32();
  }
  if (dx != nullptr) {
    if (ctx.sequence_parallel) {
      Tensor full(*ctx.alloc, Shape{N, in_}, DType::kFloat32, MemoryCategory::kWorkspace);
      ctx.k().linear_backward_input(ctx.kc(), full.f32(), dy, ctx.w(*weight_), N, in_, out_local_,
                                    /*accumulate=*/false);
      GatherFromSequenceParallelRegion::backward(ctx, dx, full.f32(), N, in_);
    } else {
      ctx.k().linear_backward_input(ctx.kc(), dx, dy, ctx.w(*weight_), N, in_, out_local_, /*accumulate=*/false);
      CopyToTensorModelParallelRegion::backward(ctx, dx, N * in_);
    }
  }
  accumulate_weight_grad(ctx, weight_, bias_, dy, x, std::move(gathered), N, in_, out_local_);
}

// The fused form: chunk i's all-gather under chunk i-1's GEMM (comm_gemm.h).
void ColumnParallelLinear::forward_sequence_parallel_in_chunks(const ForwardContext& ctx,
                                                               const float* x, float* y, int64_t N,
                                                               int p) const {
  const LinearWeight w{.weight = ctx.w(*weight_),
                       .bias = bias_ ? ctx.w(*bias_) : nullptr,
                       .in = in_,
                       .out = out_local_};
  all_gather_matmul(ctx, w, y, /*gathered=*/nullptr, x, ctx.local_rows(N), p);
}

// The input gradient's GEMM fused with its reduce-scatter (sequence parallel) or all-reduce, each
// chunk's reduction under the next chunk's GEMM; under sequence parallelism the input is
// all-gathered again first, under those GEMMs (MindSpeed's recompute_all_gather); the weight
// gradient's GEMM runs under the last reductions.
void ColumnParallelLinear::backward_in_chunks(const ForwardContext& ctx, const float* x,
                                              const float* dy, float* dx, int64_t N, int p) const {
  Tensor gathered;
  std::unique_ptr<Work> gather;
  if (ctx.sequence_parallel) {
    gathered = Tensor(*ctx.alloc, Shape{N, in_}, DType::kFloat32, MemoryCategory::kWorkspace);
    gather = ctx.ps->tp().all_gather_async(gathered.f32(), x, ctx.local_rows(N) * in_);
  }
  std::unique_ptr<ReduceInChunks> reduce;
  if (dx != nullptr) {
    const LinearWeight w{
        .weight = ctx.w(*weight_), .in = in_, .out = out_local_, .product = WeightProduct::kPlain};
    reduce = ctx.sequence_parallel ? matmul_reduce_scatter_async(ctx, w, dx, dy, N, p)
                                   : matmul_all_reduce_async(ctx, w, dx, dy, N, p);
  }
  if (gather) {
    gather->wait();
    x = gathered.f32();
  }
  accumulate_weight_grad(ctx, weight_, bias_, dy, x, std::move(gathered), N, in_, out_local_);
  if (reduce) reduce->wait();
}

RowParallelLinear::RowParallelLinear(ParameterRegistry& registry, const std::string& prefix,
                                     int64_t in, int64_t out, const LinearOptions& options,
                                     int tp_size)
    : out_(out) {
  weight_ = registry.add({.name = prefix + ".weight",
                          .global_shape = Shape{out, in},
                          .split = TensorParallelSplit::kColumns,
                          .init = InitMethod::kNormal,
                          .init_std = options.init_std,
                          .split_units = options.split_units},
                         tp_size, options.tp_rank);
  in_local_ = weight_->local_shape[1];
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
  if (const int p = fused_chunks(ctx, ctx.local_rows(N)); p > 1) {
    forward_in_chunks(ctx, x, y, N, p);
    return;
  }
  if (ctx.sequence_parallel) {
    Tensor full(*ctx.alloc, Shape{N, out_}, DType::kFloat32, MemoryCategory::kWorkspace);
    ctx.k().linear_forward(ctx.kc(), full.f32(), x, ctx.w(*weight_), nullptr, N, in_local_, out_);
    ReduceScatterToSequenceParallelRegion::forward(ctx, y, full.f32(), N, out_);
  } else {
    ctx.k().linear_forward(ctx.kc(), y, x, ctx.w(*weight_), nullptr, N, in_local_, out_);
    ReduceFromTensorModelParallelRegion::forward(ctx, y, N * out_);
  }
}

void RowParallelLinear::backward(const ForwardContext& ctx, const float* x, const float* dy,
                                 float* dx, int64_t N) const {
  if (const int p = fused_chunks(ctx, ctx.local_rows(N)); p > 1 && ctx.sequence_parallel) {
    backward_sequence_parallel_in_chunks(ctx, x, dy, dx, N, p);
    return;
  }
  Tensor gathered;
  if (ctx.sequence_parallel) {
    gathered = Tensor(*ctx.alloc, Shape{N, out_}, DType::kFloat32, MemoryCategory::kWorkspace);
    ReduceScatterToSequenceParallelRegion::backward(ctx, gathered.f32(), dy, N, out_);
    dy = gathered.f32();
  }
  ctx.k().linear_backward_input(ctx.kc(), dx, dy, ctx.w(*weight_), N, in_local_, out_, /*accumulate=*/false);
  accumulate_weight_grad(ctx, weight_, nullptr, dy, x, Tensor{}, N, in_local_, out_);
}

// The fused form: chunk i's GEMM, then its reduce-scatter (sequence parallel) or all-reduce under
// chunk i+1's GEMM (comm_gemm.h).
void RowParallelLinear::forward_in_chunks(const ForwardContext& ctx, const float* x, float* y,
                                          int64_t N, int p) const {
  const LinearWeight w{.weight = ctx.w(*weight_), .in = in_local_, .out = out_};
  if (ctx.sequence_parallel) {
    matmul_reduce_scatter(ctx, w, y, x, N, p);
  } else {
    matmul_all_reduce(ctx, w, y, x, N, p);
  }
}

// The output gradient's all-gather fused with the input gradient's GEMM; the gathered gradient
// (the fused op's second output) feeds the weight gradient.
void RowParallelLinear::backward_sequence_parallel_in_chunks(const ForwardContext& ctx,
                                                             const float* x, const float* dy,
                                                             float* dx, int64_t N, int p) const {
  Tensor dy_full(*ctx.alloc, Shape{N, out_}, DType::kFloat32, MemoryCategory::kWorkspace);
  const LinearWeight w{
      .weight = ctx.w(*weight_), .in = in_local_, .out = out_, .product = WeightProduct::kPlain};
  all_gather_matmul(ctx, w, dx, dy_full.f32(), dy, ctx.local_rows(N), p);
  accumulate_weight_grad(ctx, weight_, nullptr, dy_full.f32(), x, Tensor{}, N, in_local_, out_);
}

}  // namespace mindspeed
