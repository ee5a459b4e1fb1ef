// Tensor/sequence-parallel mappings (mappings.h).
#include "tensor_parallel/mappings.h"

namespace mindspeed {
namespace {

ProcessGroup& tp_group(const ForwardContext& ctx) { return ctx.ps->tp(); }

// out [rows, C] from the gathered blocks [tp, rows, C/tp].
void gather_last_dim(const ForwardContext& ctx, float* out, const float* in, int64_t rows, int64_t C) {
  ProcessGroup& tp = tp_group(ctx);
  const int64_t width = C / tp.size();
  if (tp.size() == 1) {
    ctx.k().copy(ctx.kc(), out, in, rows * C);
    return;
  }
  Tensor blocks(*ctx.alloc, Shape{tp.size(), rows, width}, DType::kFloat32, MemoryCategory::kWorkspace);
  tp.all_gather(blocks.f32(), in, rows * width);
  ctx.k().transpose_01_f32(ctx.kc(), out, blocks.f32(), tp.size(), rows, width);
}

// out [rows, C/tp]: this rank's columns of in [rows, C].
void split_last_dim(const ForwardContext& ctx, float* out, const float* in, int64_t rows, int64_t C) {
  ProcessGroup& tp = tp_group(ctx);
  const int64_t width = C / tp.size();
  if (tp.size() == 1) {
    ctx.k().copy(ctx.kc(), out, in, rows * C);
    return;
  }
  Tensor blocks(*ctx.alloc, Shape{tp.size(), rows, width}, DType::kFloat32, MemoryCategory::kWorkspace);
  ctx.k().transpose_01_f32(ctx.kc(), blocks.f32(), in, rows, tp.size(), width);
  ctx.k().copy(ctx.kc(), out, blocks.f32() + tp.rank() * rows * width, rows * width);
}

}  // namespace

void CopyToTensorModelParallelRegion::backward(const ForwardContext& ctx, float* dx, int64_t n) {
  tp_group(ctx).all_reduce(dx, n);
}

void ReduceFromTensorModelParallelRegion::forward(const ForwardContext& ctx, float* x, int64_t n) {
  tp_group(ctx).all_reduce(x, n);
}

void ScatterToTensorModelParallelRegion::forward(const ForwardContext& ctx, float* out, const float* in,
                                                 int64_t rows, int64_t C) {
  split_last_dim(ctx, out, in, rows, C);
}
void ScatterToTensorModelParallelRegion::backward(const ForwardContext& ctx, float* din, const float* dout,
                                                  int64_t rows, int64_t C) {
  gather_last_dim(ctx, din, dout, rows, C);
}

void GatherFromTensorModelParallelRegion::forward(const ForwardContext& ctx, float* out, const float* in,
                                                  int64_t rows, int64_t C) {
  gather_last_dim(ctx, out, in, rows, C);
}
void GatherFromTensorModelParallelRegion::backward(const ForwardContext& ctx, float* din, const float* dout,
                                                   int64_t rows, int64_t C) {
  split_last_dim(ctx, din, dout, rows, C);
}

namespace {

// Whether rank blocks along the sequence differ in size (--unaligned-linear's uneven split).
bool uneven(const ForwardContext& ctx, int64_t N) {
  const int tp = ctx.ps->sizes.tensor;
  return ctx.rows_of_rank(N, 0) != ctx.rows_of_rank(N, tp - 1);
}

// out [N, C] = the ranks' blocks along the first dim (rank k's rows_of_rank(N, k) rows), from
// in (this rank's block). Uneven blocks travel padded to the largest (rank 0's).
void all_gather_first_dim(const ForwardContext& ctx, float* out, const float* in, int64_t N,
                          int64_t C) {
  ProcessGroup& tp = tp_group(ctx);
  if (!uneven(ctx, N)) {
    tp.all_gather(out, in, ctx.local_rows(N) * C);
    return;
  }
  const int64_t most = ctx.rows_of_rank(N, 0);
  Tensor send = device_zeros(*ctx.backend, *ctx.alloc, Shape{most, C}, DType::kFloat32,
                             MemoryCategory::kWorkspace);
  Tensor padded(*ctx.alloc, Shape{tp.size(), most, C}, DType::kFloat32, MemoryCategory::kWorkspace);
  ctx.k().copy(ctx.kc(), send.f32(), in, ctx.local_rows(N) * C);
  tp.all_gather(padded.f32(), send.f32(), most * C);
  for (int k = 0; k < tp.size(); ++k) {
    ctx.k().copy(ctx.kc(), out + ctx.first_row_of_rank(N, k) * C, padded.f32() + k * most * C,
                 ctx.rows_of_rank(N, k) * C);
  }
}

// out [rows of this rank, C] = the sum over ranks of this rank's block of in [N, C].
void reduce_scatter_first_dim(const ForwardContext& ctx, float* out, const float* in, int64_t N,
                              int64_t C) {
  ProcessGroup& tp = tp_group(ctx);
  if (!uneven(ctx, N)) {
    tp.reduce_scatter(out, in, ctx.local_rows(N) * C);
    return;
  }
  const int64_t most = ctx.rows_of_rank(N, 0);
  Tensor padded = device_zeros(*ctx.backend, *ctx.alloc, Shape{tp.size(), most, C}, DType::kFloat32,
                               MemoryCategory::kWorkspace);
  Tensor mine(*ctx.alloc, Shape{most, C}, DType::kFloat32, MemoryCategory::kWorkspace);
  for (int k = 0; k < tp.size(); ++k) {
    ctx.k().copy(ctx.kc(), padded.f32() + k * most * C, in + ctx.first_row_of_rank(N, k) * C,
                 ctx.rows_of_rank(N, k) * C);
  }
  tp.reduce_scatter(mine.f32(), padded.f32(), most * C);
  ctx.k().copy(ctx.kc(), out, mine.f32(), ctx.local_rows(N) * C);
}

}  // namespace

void ScatterToSequenceParallelRegion::forward(const ForwardContext& ctx, float* out, const float* in, int64_t N,
                                              int64_t C) {
  ctx.k().copy(ctx.kc(), out, in + ctx.first_row_of_rank(N, ctx.ps->tp_rank) * C,
               ctx.local_rows(N) * C);
}
void ScatterToSequenceParallelRegion::backward(const ForwardContext& ctx, float* din, const float* dout, int64_t N,
                                               int64_t C) {
  all_gather_first_dim(ctx, din, dout, N, C);
}

void GatherFromSequenceParallelRegion::forward(const ForwardContext& ctx, float* out, const float* in, int64_t N,
                                               int64_t C) {
  all_gather_first_dim(ctx, out, in, N, C);
}
void GatherFromSequenceParallelRegion::backward(const ForwardContext& ctx, float* din, const float* dout, int64_t N,
                                                int64_t C) {
  reduce_scatter_first_dim(ctx, din, dout, N, C);
}

void ReduceScatterToSequenceParallelRegion::forward(const ForwardContext& ctx, float* out, const float* in,
                                                    int64_t N, int64_t C) {
  reduce_scatter_first_dim(ctx, out, in, N, C);
}
void ReduceScatterToSequenceParallelRegion::backward(const ForwardContext& ctx, float* din, const float* dout,
                                                     int64_t N, int64_t C) {
  all_gather_first_dim(ctx, din, dout, N, C);
}

void AllToAll::forward(ProcessGroup& group, float* out, const std::vector<int64_t>& recv_counts, const float* in,
                       const std::vector<int64_t>& send_counts) {
  group.all_to_all_async(out, recv_counts, in, send_counts)->wait();
}
void AllToAll::backward(ProcessGroup& group, float* din, const std::vector<int64_t>& send_counts, const float* dout,
                        const std::vector<int64_t>& recv_counts) {
  group.all_to_all_async(din, send_counts, dout, recv_counts)->wait();
}

}  // namespace mindspeed
