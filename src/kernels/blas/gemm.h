// GEMM through the tuned BLAS library (OpenBLAS), with the row-major convention written
// down once: every matrix is row-major, weights are stored [out, in] like nn.Linear and
// Megatron, and a linear layer computes y = x W^T + b.
#pragma once

#include <cstdint>

#include "kernels/kernel_types.h"

namespace mindspeed {

/// C[M,N] = alpha * op(A) op(B) + beta * C, row-major; op(A) is [M,K], op(B) is [K,N].
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc);

/// out = inp W^T (+ bias). out [N,OUT] =, inp [N,IN], weight [OUT,IN], bias [OUT] or null.
void blas_linear_forward(const KernelContext& kc, float* out, const float* inp, const float* weight, const float* bias,
                    int64_t N, int64_t IN, int64_t OUT);
/// dinp = dout W (accumulate: dinp += dout W). dinp [N,IN], dout [N,OUT], weight [OUT,IN].
void blas_linear_backward_input(const KernelContext& kc, float* dinp, const float* dout, const float* weight, int64_t N,
                           int64_t IN, int64_t OUT, bool accumulate);
/// dweight += dout^T inp straight into the fp32 gradient buffer (beta = 1, no temporary:
/// the matmul_add_fp32 idea); dbias += column sums of dout when dbias is not null.
void blas_linear_backward_weight(const KernelContext& kc, float* dweight, float* dbias, const float* dout, const float* inp,
                            int64_t N, int64_t IN, int64_t OUT);

/// The kernel-table entries linear_forward / linear_backward_input / linear_backward_weight
/// of both tables (ref:: and cpu::) are these BLAS wrappers: GEMM never runs as a hand loop.

/// Threads BLAS uses outside our own parallel regions.
void blas_set_num_threads(int threads);

/// Naive triple loop with double accumulation: the specification the BLAS wrapper is
/// tested against (never used on a hot path).
void gemm_reference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                    const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                    float* C, int64_t ldc);

}  // namespace mindspeed
