// GEMMs fused with the tensor-parallel collective that feeds or drains them: the C++ forms of
// MindSpeed's MC2 ops (torch_npu.npu_all_gather_base_mm, npu_mm_reduce_scatter_base,
// npu_mm_all_reduce_add_rms_norm) and of lcal_coc's coc_ops (all_gather_matmul,
// all_gather_matmul_v2, matmul_reduce_scatter, matmul_all_reduce, pure_matmul). Each call runs
// a pipelined schedule over `chunks` token chunks (coc.h): on the CPU the collectives progress on
// the group's communication thread while the chunks' GEMMs run (on a device, the staged group's
// copies and the kernels on its stream), so one call overlaps its own communication. With one
// chunk it is the plain collective followed or preceded by the plain GEMM.
//
// The weight is a linear layer's [OUT, IN] matrix and the GEMM one of its two products:
//   kTransposed  rows [., IN]  -> x W^T + bias [., OUT]   (forward, linear_forward)
//   kPlain       rows [., OUT] -> x W          [., IN]    (input gradient, linear_backward_input)
// The bias of a reducing op is added once, after the reduction (coc_ops' semantics). The group is
// ctx's tensor-parallel group, tp its size; m is always the row count of x.
#pragma once

#include <cstdint>
#include <memory>

#include "module/forward_context.h"
#include "tensor_parallel/coc.h"

namespace mindspeed {

enum class WeightProduct { kTransposed, kPlain };

struct LinearWeight {
  const float* weight = nullptr;  ///< [OUT, IN]
  const float* bias = nullptr;    ///< [OUT] or null (kTransposed only)
  int64_t in = 0, out = 0;
  WeightProduct product = WeightProduct::kTransposed;
  int64_t cols_in() const { return product == WeightProduct::kTransposed ? in : out; }
  int64_t cols_out() const { return product == WeightProduct::kTransposed ? out : in; }
};

/// out [rows, cols_out] = x [rows, cols_in] . W (+ bias when `with_bias`): the GEMM itself
/// (coc_ops.pure_matmul).
void pure_matmul(const ForwardContext& ctx, const LinearWeight& w, float* out, const float* x,
                 int64_t rows, bool with_bias = true);

/// out [tp*m, cols_out] = all_gather(x [m, cols_in]) . W (+ bias): chunk i's all-gather under
/// chunk i-1's GEMM. gathered [tp*m, cols_in], when not null, receives the gathered input
/// (all_gather_matmul_v2's comm_output; npu_all_gather_base_mm's gather_output), in order.
/// m must divide into the chunks.
void all_gather_matmul(const ForwardContext& ctx, const LinearWeight& w, float* out,
                       float* gathered, const float* x, int64_t m, int chunks);

/// out [m/tp, cols_out] = reduce_scatter(x [m, cols_in] . W) (+ bias): chunk i's reduce-scatter
/// (rows [i*c, (i+1)*c) of every rank's block of m/tp rows) under chunk i+1's GEMM. The returned
/// reductions are still under way: wait() on them (or drop them) before reading out.
[[nodiscard]] std::unique_ptr<ReduceInChunks> matmul_reduce_scatter_async(const ForwardContext& ctx,
                                                                          const LinearWeight& w,
                                                                          float* out,
                                                                          const float* x, int64_t m,
                                                                          int chunks);
void matmul_reduce_scatter(const ForwardContext& ctx, const LinearWeight& w, float* out,
                           const float* x, int64_t m, int chunks);

/// out [m, cols_out] = all_reduce(x [m, cols_in] . W) (+ bias): chunk i's all-reduce under chunk
/// i+1's GEMM; wait() on the result as above.
[[nodiscard]] std::unique_ptr<ReduceInChunks> matmul_all_reduce_async(const ForwardContext& ctx,
                                                                      const LinearWeight& w,
                                                                      float* out, const float* x,
                                                                      int64_t m, int chunks);
void matmul_all_reduce(const ForwardContext& ctx, const LinearWeight& w, float* out, const float* x,
                       int64_t m, int chunks);

/// npu_mm_all_reduce_add_rms_norm: y [m, n] = all_reduce(x [m, k] W^T (+ bias)) + residual [m, n],
/// norm_out [m, n] = RMSNorm(y) * gamma [n] (rstd [m] its reciprocal root mean squares). W is
/// [n, k] (the op's x2 is W^T). y may alias residual (the op's trailing-underscore form).
void mm_all_reduce_add_rms_norm(const ForwardContext& ctx, float* y, float* norm_out, float* rstd,
                                const float* x, const float* weight, const float* bias,
                                const float* residual, const float* gamma, float eps, int64_t m,
                                int64_t k, int64_t n, int chunks);

/// The chunk count for MC2's fused calls on `rows` rows: kMc2Chunks (config/parallel_config.h),
/// halved until it divides them.
int mc2_chunks(int64_t rows);

}  // namespace mindspeed
