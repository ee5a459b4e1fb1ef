// ColumnParallelLinear and RowParallelLinear (layers.h).
#include "tensor_parallel/layers.h"

#include <algorithm>
#include <optional>

#include "module/module_scope.h"
#include "module/weight_grad_queue.h"
#include "tensor_parallel/coc.h"

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
  if (const int p = coc_chunks(ctx, ctx.local_rows(N)); p > 1 && ctx.sequence_parallel) {
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
  if (const int p = coc_chunks(ctx, ctx.local_rows(N)); p > 1) {
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

// Chunk i's all-gather overlaps chunk i-1's GEMM; each GEMM covers chunk i's rows of every rank
// ([tp*c, in] -> [tp*c, out/tp]), written back to those rows of y.
void ColumnParallelLinear::forward_sequence_parallel_in_chunks(const ForwardContext& ctx,
                                                               const float* x, float* y, int64_t N,
                                                               int p) const {
  const int64_t Nl = ctx.local_rows(N), c = Nl / p, rows = N / Nl * c;
  Tensor part(*ctx.alloc, Shape{rows, out_local_}, DType::kFloat32, MemoryCategory::kWorkspace);
  all_gather_in_chunks(ctx, x, Nl, in_, p, [&](int64_t i, const float* gathered) {
    ctx.k().linear_forward(ctx.kc(), part.f32(), gathered, ctx.w(*weight_),
                           bias_ ? ctx.w(*bias_) : nullptr, rows, in_, out_local_);
    scatter_chunk_rows(ctx, y, part.f32(), i, c, Nl, out_local_);
  });
}

// The input gradient's GEMM in chunks, each chunk's reduce-scatter (sequence parallel) or
// all-reduce under the next chunk's GEMM; under sequence parallelism the input is all-gathered
// again first, under those GEMMs; the weight gradient's GEMM runs under the last reductions.
void ColumnParallelLinear::backward_in_chunks(const ForwardContext& ctx, const float* x,
                                              const float* dy, float* dx, int64_t N, int p) const {
  ProcessGroup& tp = ctx.ps->tp();
  const int64_t Nl = ctx.local_rows(N), c = Nl / p;
  Tensor gathered;
  std::unique_ptr<Work> gather;
  if (ctx.sequence_parallel) {
    gathered = Tensor(*ctx.alloc, Shape{N, in_}, DType::kFloat32, MemoryCategory::kWorkspace);
    gather = tp.all_gather_async(gathered.f32(), x, Nl * in_);
  }
  std::optional<ReduceInChunks> reduce;
  if (dx != nullptr) {
    using Kind = ReduceInChunks::Kind;
    reduce.emplace(ctx, ctx.sequence_parallel ? Kind::kReduceScatter : Kind::kAllReduce, dx, Nl,
                   in_, p);
    const int64_t rows = N / Nl * c;  // tp*c rows of dy under sequence parallelism, c without
    Tensor dy_rows;
    if (ctx.sequence_parallel) {
      dy_rows =
          Tensor(*ctx.alloc, Shape{rows, out_local_}, DType::kFloat32, MemoryCategory::kWorkspace);
    }
    for (int64_t i = 0; i < p; ++i) {
      const float* dy_chunk = dy + i * c * out_local_;
      if (ctx.sequence_parallel) {
        gather_chunk_rows(ctx, dy_rows.f32(), dy, i, c, Nl, out_local_);
        dy_chunk = dy_rows.f32();
      }
      ctx.k().linear_backward_input(ctx.kc(), reduce->chunk_buffer(i), dy_chunk, ctx.w(*weight_),
                                    rows, in_, out_local_, /*accumulate=*/false);
      reduce->reduce(i);
    }
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
  if (const int p = coc_chunks(ctx, ctx.local_rows(N)); p > 1) {
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
  if (const int p = coc_chunks(ctx, ctx.local_rows(N)); p > 1 && ctx.sequence_parallel) {
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

// Chunk i's GEMM, then its reduce-scatter (sequence parallel: chunk i's rows of every rank's
// block, [tp*c, out]) or all-reduce (rows [i*c, (i+1)*c)) under chunk i+1's GEMM.
void RowParallelLinear::forward_in_chunks(const ForwardContext& ctx, const float* x, float* y,
                                          int64_t N, int p) const {
  const int64_t Nl = ctx.local_rows(N), c = Nl / p, rows = N / Nl * c;
  using Kind = ReduceInChunks::Kind;
  ReduceInChunks reduce(ctx, ctx.sequence_parallel ? Kind::kReduceScatter : Kind::kAllReduce, y, Nl,
                        out_, p);
  Tensor x_rows;
  if (ctx.sequence_parallel) {
    x_rows =
        Tensor(*ctx.alloc, Shape{rows, in_local_}, DType::kFloat32, MemoryCategory::kWorkspace);
  }
  for (int64_t i = 0; i < p; ++i) {
    const float* x_chunk = x + i * c * in_local_;
    if (ctx.sequence_parallel) {
      gather_chunk_rows(ctx, x_rows.f32(), x, i, c, Nl, in_local_);
      x_chunk = x_rows.f32();
    }
    ctx.k().linear_forward(ctx.kc(), reduce.chunk_buffer(i), x_chunk, ctx.w(*weight_), nullptr,
                           rows, in_local_, out_);
    reduce.reduce(i);
  }
  reduce.wait();
}

// The output gradient all-gathered in chunks, chunk i's input-gradient GEMM under chunk i+1's
// all-gather; the gathered chunks also fill the whole gradient for the weight gradient.
void RowParallelLinear::backward_sequence_parallel_in_chunks(const ForwardContext& ctx,
                                                             const float* x, const float* dy,
                                                             float* dx, int64_t N, int p) const {
  const int64_t Nl = ctx.local_rows(N), c = Nl / p, rows = N / Nl * c;
  Tensor dy_full(*ctx.alloc, Shape{N, out_}, DType::kFloat32, MemoryCategory::kWorkspace);
  Tensor part(*ctx.alloc, Shape{rows, in_local_}, DType::kFloat32, MemoryCategory::kWorkspace);
  all_gather_in_chunks(ctx, dy, Nl, out_, p, [&](int64_t i, const float* gathered) {
    scatter_chunk_rows(ctx, dy_full.f32(), gathered, i, c, Nl, out_);
    ctx.k().linear_backward_input(ctx.kc(), part.f32(), gathered, ctx.w(*weight_), rows, in_local_,
                                  out_,
                                  /*accumulate=*/false);
    scatter_chunk_rows(ctx, dx, part.f32(), i, c, Nl, in_local_);
  });
  accumulate_weight_grad(ctx, weight_, nullptr, dy_full.f32(), x, Tensor{}, N, in_local_, out_);
}

}  // namespace mindspeed
