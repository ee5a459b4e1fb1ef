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

void ScatterToSequenceParallelRegion::forward(const ForwardContext& ctx, float* out, const float* in, int64_t N,
                                              int64_t C) {
  ProcessGroup& tp = tp_group(ctx);
  const int64_t n = N / tp.size() * C;
  ctx.k().copy(ctx.kc(), out, in + tp.rank() * n, n);
}
void ScatterToSequenceParallelRegion::backward(const ForwardContext& ctx, float* din, const float* dout, int64_t N,
                                               int64_t C) {
  ProcessGroup& tp = tp_group(ctx);
  tp.all_gather(din, dout, N / tp.size() * C);
}

void GatherFromSequenceParallelRegion::forward(const ForwardContext& ctx, float* out, const float* in, int64_t N,
                                               int64_t C) {
  ProcessGroup& tp = tp_group(ctx);
  tp.all_gather(out, in, N / tp.size() * C);
}
void GatherFromSequenceParallelRegion::backward(const ForwardContext& ctx, float* din, const float* dout, int64_t N,
                                                int64_t C) {
  ProcessGroup& tp = tp_group(ctx);
  tp.reduce_scatter(din, dout, N / tp.size() * C);
}

void ReduceScatterToSequenceParallelRegion::forward(const ForwardContext& ctx, float* out, const float* in,
                                                    int64_t N, int64_t C) {
  ProcessGroup& tp = tp_group(ctx);
  tp.reduce_scatter(out, in, N / tp.size() * C);
}
void ReduceScatterToSequenceParallelRegion::backward(const ForwardContext& ctx, float* din, const float* dout,
                                                     int64_t N, int64_t C) {
  ProcessGroup& tp = tp_group(ctx);
  tp.all_gather(din, dout, N / tp.size() * C);
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
