// Script-mode compute-communication overlap (coc.h).
#include "tensor_parallel/coc.h"

#include "core/check.h"

namespace mindspeed {

int coc_chunks(const ForwardContext& ctx, int64_t local_rows) {
  const int p = ctx.coc_chunks;
  if (p <= 1 || ctx.ps->sizes.tensor == 1) return 1;
  MS_CHECK(local_rows % p == 0, "--coc-parallel-num ", p, " needs the tokens of a linear layer (",
           local_rows, " rows on this rank) to divide into ", p, " chunks");
  return p;
}

void gather_chunk_rows(const ForwardContext& ctx, float* dst, const float* src, int64_t chunk,
                       int64_t c, int64_t Nl, int64_t C) {
  ctx.k().copy_2d(ctx.kc(), dst, src + chunk * c * C, ctx.ps->sizes.tensor, c * C, c * C, Nl * C);
}

void scatter_chunk_rows(const ForwardContext& ctx, float* dst, const float* src, int64_t chunk,
                        int64_t c, int64_t Nl, int64_t C) {
  ctx.k().copy_2d(ctx.kc(), dst + chunk * c * C, src, ctx.ps->sizes.tensor, c * C, Nl * C, c * C);
}

void all_gather_in_chunks(
    const ForwardContext& ctx, const float* local, int64_t Nl, int64_t C, int p,
    const std::function<void(int64_t chunk, const float* gathered)>& consume) {
  ProcessGroup& tp = ctx.ps->tp();
  const int64_t c = Nl / p, block = tp.size() * c * C;
  // One slice per chunk: a slice is never rewritten while a GEMM that reads it may still run.
  Tensor gathered(*ctx.alloc, Shape{p, tp.size() * c, C}, DType::kFloat32,
                  MemoryCategory::kWorkspace);
  std::unique_ptr<Work> next = tp.all_gather_async(gathered.f32(), local, c * C);
  for (int64_t i = 0; i < p; ++i) {
    std::unique_ptr<Work> current = std::move(next);
    if (i + 1 < p)
      next = tp.all_gather_async(gathered.f32() + (i + 1) * block, local + (i + 1) * c * C, c * C);
    current->wait();
    consume(i, gathered.f32() + i * block);
  }
}

ReduceInChunks::ReduceInChunks(const ForwardContext& ctx, Kind kind, float* out, int64_t rows,
                               int64_t C, int p)
    : ctx_(ctx), kind_(kind), out_(out), C_(C), c_(rows / p), tp_(ctx.ps->sizes.tensor) {
  if (kind_ == Kind::kReduceScatter) {
    staging_ =
        Tensor(*ctx.alloc, Shape{p, tp_ * c_, C}, DType::kFloat32, MemoryCategory::kWorkspace);
  }
}

ReduceInChunks::~ReduceInChunks() { wait(); }

float* ReduceInChunks::chunk_buffer(int64_t chunk) {
  return kind_ == Kind::kReduceScatter ? staging_.f32() + chunk * tp_ * c_ * C_
                                       : out_ + chunk * c_ * C_;
}

void ReduceInChunks::reduce(int64_t chunk) {
  ProcessGroup& tp = ctx_.ps->tp();
  if (kind_ == Kind::kReduceScatter) {
    pending_.push_back(tp.reduce_scatter_async(out_ + chunk * c_ * C_, chunk_buffer(chunk), c_ * C_,
                                               ReduceOp::kSum));
  } else {
    pending_.push_back(tp.all_reduce_async(chunk_buffer(chunk), c_ * C_, ReduceOp::kSum));
  }
}

void ReduceInChunks::wait() {
  for (std::unique_ptr<Work>& w : pending_) w->wait();
  pending_.clear();
}

}  // namespace mindspeed
