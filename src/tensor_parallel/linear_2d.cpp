// Linear2D (linear_2d.h).
#include "tensor_parallel/linear_2d.h"

#include "core/check.h"
#include "tensor_parallel/comm_gemm.h"

namespace mindspeed {
namespace {
Tensor workspace(const ForwardContext& ctx, int64_t rows, int64_t cols) {
  return Tensor(*ctx.alloc, Shape{rows, cols}, DType::kFloat32, MemoryCategory::kWorkspace);
}
}  // namespace

Linear2D::Linear2D(ParameterRegistry& registry, const std::string& prefix, int64_t in, int64_t out,
                   const LinearOptions& options, Linear2dRole role, const TensorParallelGrid& grid,
                   const Linear2dOverlapUse& overlap)
    : role_(role), overlap_(overlap) {
  MS_CHECK(grid.on(), prefix, ": a 2D linear layer without a 2D grid");
  MS_CHECK(options.split_units == 0 && !options.sequence_parallel, prefix,
           ": 2D layers take no unaligned split and no sequence parallelism");
  const bool first = role == Linear2dRole::kFirst;
  const int tp = grid.x * grid.y, tp_rank = grid.y_rank * grid.x + grid.x_rank;
  weight_ = registry.add({.name = prefix + ".weight",
                          .global_shape = Shape{out, in},
                          .split = first ? (options.glu ? TensorParallelSplit::k2dGluRowsXColumnsY
                                                        : TensorParallelSplit::k2dRowsXColumnsY)
                                         : TensorParallelSplit::k2dRowsYColumnsX,
                          .init = InitMethod::kNormal,
                          .init_std = options.init_std,
                          .tp_x = grid.x},
                         tp, tp_rank);
  out_local_ = weight_->local_shape[0];
  in_local_ = weight_->local_shape[1];
  if (options.bias) {
    // First: [out] over X, replicated along Y (its gradient whole from the gathered dy).
    // Second: [out] over Y, replicated along X, its gradient from this rank's rows: summed over X.
    ParameterSpec spec{
        .name = prefix + ".bias",
        .global_shape = Shape{out},
        .split = first && options.glu ? TensorParallelSplit::kGluRows : TensorParallelSplit::kRows,
        .init = InitMethod::kZeros,
        .weight_decay = false,
        .tp_x = grid.x,
        .tp_axis = first ? TensorParallelAxis::kX : TensorParallelAxis::kY,
        .grads_summed_over_tp_x = !first};
    bias_ =
        registry.add(std::move(spec), first ? grid.x : grid.y, first ? grid.x_rank : grid.y_rank);
  }
}

ProcessGroup& Linear2D::ag_group(const ForwardContext& ctx) const {
  return role_ == Linear2dRole::kFirst ? ctx.ps->tp_x() : ctx.ps->tp_y();
}
ProcessGroup& Linear2D::rs_group(const ForwardContext& ctx) const {
  return role_ == Linear2dRole::kFirst ? ctx.ps->tp_y() : ctx.ps->tp_x();
}

ForwardContext Linear2D::on_axis(const ForwardContext& ctx, const ProcessGroup& group) const {
  ForwardContext c = ctx;
  c.ps = &group == &ctx.ps->tp_x() ? &ctx.ps->tp_x_as_tp() : &ctx.ps->tp_y_as_tp();
  c.tp_2d = false;  // the view is a 1-D group
  return c;
}

void Linear2D::forward(const ForwardContext& ctx, const float* x, float* y, int64_t N) const {
  ProcessGroup& ag = ag_group(ctx);
  ProcessGroup& rs = rs_group(ctx);
  MS_CHECK(N % ag.size() == 0 && N % rs.size() == 0, "2D linear: ", N, " rows over a ", ag.size(),
           " x ", rs.size(), " grid");
  const bool first = role_ == Linear2dRole::kFirst;
  // The first linear's bias is added once: after the reduction (chunked op), or in one rank's
  // partial sum before it.
  LinearWeight w{ctx.w(*weight_), first && bias_ != nullptr ? ctx.w(*bias_) : nullptr, in_local_,
                 out_local_, WeightProduct::kTransposed};
  Tensor partial = workspace(ctx, N, out_local_);
  if (overlap_.forward_rs && ctx.tp_2d_overlap.matmul_with_rs) {
    Tensor gathered = workspace(ctx, N, in_local_);
    ag.all_gather(gathered.f32(), x, N / ag.size() * in_local_);
    matmul_reduce_scatter(on_axis(ctx, rs), w, y, gathered.f32(), N, mc2_chunks(N / rs.size()));
    return;
  }
  if (rs.rank() != 0) w.bias = nullptr;
  if (overlap_.forward_ag && ctx.tp_2d_overlap.ag_with_matmul) {
    all_gather_matmul(on_axis(ctx, ag), w, partial.f32(), /*gathered=*/nullptr, x, N / ag.size(),
                      mc2_chunks(N / ag.size()));
  } else {
    Tensor gathered = workspace(ctx, N, in_local_);
    ag.all_gather(gathered.f32(), x, N / ag.size() * in_local_);
    pure_matmul(ctx, w, partial.f32(), gathered.f32(), N);
  }
  rs.reduce_scatter(y, partial.f32(), N / rs.size() * out_local_);
}

void Linear2D::backward(const ForwardContext& ctx, const float* x, const float* dy, float* dx,
                        int64_t N) const {
  ProcessGroup& ag = ag_group(ctx);
  ProcessGroup& rs = rs_group(ctx);
  Tensor dy_full = workspace(ctx, N, out_local_);
  const LinearWeight w{ctx.w(*weight_), nullptr, in_local_, out_local_, WeightProduct::kPlain};
  Tensor partial = workspace(ctx, N, in_local_);
  if (overlap_.backward_ag && ctx.tp_2d_overlap.backward_ag_with_matmul) {
    // dy's all-gather in chunks under dx's GEMM, the gathered dy kept for dW.
    all_gather_matmul(on_axis(ctx, rs), w, partial.f32(), dy_full.f32(), dy, N / rs.size(),
                      mc2_chunks(N / rs.size()));
  } else {
    rs.all_gather(dy_full.f32(), dy, N / rs.size() * out_local_);
    pure_matmul(ctx, w, partial.f32(), dy_full.f32(), N);
  }
  ag.reduce_scatter(dx, partial.f32(), N / ag.size() * in_local_);
  partial.reset();
  Tensor gathered = workspace(ctx, N, in_local_);
  ag.all_gather(gathered.f32(), x, N / ag.size() * in_local_);
  const float* input = gathered.f32();
  accumulate_weight_grad(ctx, weight_, role_ == Linear2dRole::kFirst ? bias_ : nullptr,
                         dy_full.f32(), input, std::move(gathered), N, in_local_, out_local_);
}

void scatter_to_2d_layout(const ForwardContext& ctx, float* out, const float* in, int64_t N,
                          int64_t h) {
  const ParallelState& ps = *ctx.ps;
  const int64_t rows = N / ps.sizes.tp_x, cols = h / ps.sizes.tp_y;
  ctx.k().copy_2d(ctx.kc(), out, in + ps.tp_x_rank * rows * h + ps.tp_y_rank * cols, rows, cols,
                  cols, h);
}

void gather_from_2d_layout(const ForwardContext& ctx, float* out, const float* in, int64_t N,
                           int64_t h) {
  const ParallelState& ps = *ctx.ps;
  const int Y = ps.sizes.tp_y;
  const int64_t rows = N / ps.sizes.tp_x, cols = h / Y;
  Tensor blocks = workspace(ctx, Y * rows, cols);  // [Y, rows, cols]
  ps.tp_y().all_gather(blocks.f32(), in, rows * cols);
  Tensor mine = workspace(ctx, rows, h);
  ctx.k().transpose_01_f32(ctx.kc(), mine.f32(), blocks.f32(), Y, rows, cols);
  ps.tp_x().all_gather(out, mine.f32(), rows * h);
}

}  // namespace mindspeed
