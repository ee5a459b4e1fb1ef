// GEMMs fused with their tensor-parallel collective (comm_gemm.h).
#include "tensor_parallel/comm_gemm.h"

#include "core/check.h"

namespace mindspeed {
namespace {

// x [rows, cols_in] . W into out; the bias only where `bias` says (a reduction's bias is added
// by one rank's partial sum, so the reduced result holds it once).
void gemm(const ForwardContext& ctx, const LinearWeight& w, float* out, const float* x,
          int64_t rows, bool bias) {
  if (w.product == WeightProduct::kTransposed) {
    ctx.k().linear_forward(ctx.kc(), out, x, w.weight, bias ? w.bias : nullptr, rows, w.in, w.out);
  } else {
    MS_CHECK(w.bias == nullptr, "the input-gradient product takes no bias");
    ctx.k().linear_backward_input(ctx.kc(), out, x, w.weight, rows, w.in, w.out,
                                  /*accumulate=*/false);
  }
}

void check_chunks(int64_t rows, int chunks, const char* op) {
  MS_CHECK(chunks >= 1 && rows % chunks == 0, op, ": ", rows, " rows do not divide into ", chunks,
           " chunks");
}

}  // namespace

void pure_matmul(const ForwardContext& ctx, const LinearWeight& w, float* out, const float* x,
                 int64_t rows, bool with_bias) {
  gemm(ctx, w, out, x, rows, with_bias);
}

void all_gather_matmul(const ForwardContext& ctx, const LinearWeight& w, float* out,
                       float* gathered, const float* x, int64_t m, int chunks) {
  check_chunks(m, chunks, "all_gather_matmul");
  const int64_t tp = ctx.ps->sizes.tensor, c = m / chunks;
  Tensor part(*ctx.alloc, Shape{tp * c, w.cols_out()}, DType::kFloat32, MemoryCategory::kWorkspace);
  all_gather_in_chunks(ctx, x, m, w.cols_in(), chunks, [&](int64_t i, const float* rows) {
    if (gathered != nullptr) scatter_chunk_rows(ctx, gathered, rows, i, c, m, w.cols_in());
    gemm(ctx, w, part.f32(), rows, tp * c, /*bias=*/true);
    scatter_chunk_rows(ctx, out, part.f32(), i, c, m, w.cols_out());
  });
}

std::unique_ptr<ReduceInChunks> matmul_reduce_scatter_async(const ForwardContext& ctx,
                                                            const LinearWeight& w, float* out,
                                                            const float* x, int64_t m, int chunks) {
  const int64_t tp = ctx.ps->sizes.tensor;
  MS_CHECK(m % tp == 0, "matmul_reduce_scatter: ", m, " rows do not split over ", tp, " ranks");
  const int64_t m_local = m / tp;
  check_chunks(m_local, chunks, "matmul_reduce_scatter");
  const int64_t c = m_local / chunks;
  auto reduce = std::make_unique<ReduceInChunks>(ctx, ReduceInChunks::Kind::kReduceScatter, out,
                                                 m_local, w.cols_out(), chunks);
  Tensor rows(*ctx.alloc, Shape{tp * c, w.cols_in()}, DType::kFloat32, MemoryCategory::kWorkspace);
  const bool bias = ctx.ps->tp_rank == 0;
  for (int64_t i = 0; i < chunks; ++i) {
    gather_chunk_rows(ctx, rows.f32(), x, i, c, m_local, w.cols_in());
    gemm(ctx, w, reduce->chunk_buffer(i), rows.f32(), tp * c, bias);
    reduce->reduce(i);
  }
  return reduce;
}

void matmul_reduce_scatter(const ForwardContext& ctx, const LinearWeight& w, float* out,
                           const float* x, int64_t m, int chunks) {
  matmul_reduce_scatter_async(ctx, w, out, x, m, chunks)->wait();
}

std::unique_ptr<ReduceInChunks> matmul_all_reduce_async(const ForwardContext& ctx,
                                                        const LinearWeight& w, float* out,
                                                        const float* x, int64_t m, int chunks) {
  check_chunks(m, chunks, "matmul_all_reduce");
  const int64_t c = m / chunks;
  auto reduce = std::make_unique<ReduceInChunks>(ctx, ReduceInChunks::Kind::kAllReduce, out, m,
                                                 w.cols_out(), chunks);
  const bool bias = ctx.ps->tp_rank == 0;
  for (int64_t i = 0; i < chunks; ++i) {
    gemm(ctx, w, reduce->chunk_buffer(i), x + i * c * w.cols_in(), c, bias);
    reduce->reduce(i);
  }
  return reduce;
}

void matmul_all_reduce(const ForwardContext& ctx, const LinearWeight& w, float* out, const float* x,
                       int64_t m, int chunks) {
  matmul_all_reduce_async(ctx, w, out, x, m, chunks)->wait();
}

void mm_all_reduce_add_rms_norm(const ForwardContext& ctx, float* y, float* norm_out, float* rstd,
                                const float* x, const float* weight, const float* bias,
                                const float* residual, const float* gamma, float eps, int64_t m,
                                int64_t k, int64_t n, int chunks) {
  Tensor reduced(*ctx.alloc, Shape{m, n}, DType::kFloat32, MemoryCategory::kWorkspace);
  matmul_all_reduce(ctx, {.weight = weight, .bias = bias, .in = k, .out = n}, reduced.f32(), x, m,
                    chunks);
  if (y != residual) ctx.k().copy(ctx.kc(), y, residual, m * n);
  ctx.k().add_inplace(ctx.kc(), y, reduced.f32(), m * n);
  ctx.k().rms_norm_forward(ctx.kc(), norm_out, rstd, y, gamma, m, n, eps);
}

int mc2_chunks(int64_t rows) {
  int chunks = kMc2Chunks;
  while (chunks > 1 && rows % chunks != 0) chunks /= 2;
  return chunks;
}

}  // namespace mindspeed
