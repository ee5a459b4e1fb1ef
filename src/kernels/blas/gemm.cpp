// cblas wrappers (see gemm.h).
#include "kernels/blas/gemm.h"

#include <cblas.h>

#include <vector>

#include "core/check.h"
#include "kernels/kernels.h"

namespace mindspeed {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc) {
  if (M == 0 || N == 0) return;
  MS_CHECK(M < (int64_t{1} << 31) && N < (int64_t{1} << 31) && K < (int64_t{1} << 31),
           "GEMM dimension exceeds the 32-bit BLAS interface: ", M, "x", N, "x", K);
  if (K == 0) {
    // BLAS would skip the product but must still apply beta.
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
              static_cast<int>(K), alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb),
              beta, C, static_cast<int>(ldc));
}

void blas_linear_forward(const KernelContext& kc, float* out, const float* inp, const float* weight, const float* bias,
                    int64_t N, int64_t IN, int64_t OUT) {
  float beta = 0.0f;
  if (bias != nullptr) {
    // Pre-fill with the bias and let the GEMM accumulate (beta = 1): no extra pass later.
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      float* row = out + n * OUT;
      for (int64_t o = 0; o < OUT; ++o) row[o] = bias[o];
    }
    beta = 1.0f;
  }
  gemm(false, true, N, OUT, IN, 1.0f, inp, IN, weight, IN, beta, out, OUT);
}

void blas_linear_backward_input(const KernelContext& kc, float* dinp, const float* dout, const float* weight, int64_t N,
                           int64_t IN, int64_t OUT, bool accumulate) {
  gemm(false, false, N, IN, OUT, 1.0f, dout, OUT, weight, IN, accumulate ? 1.0f : 0.0f, dinp, IN);
}

void blas_linear_backward_weight(const KernelContext& kc, float* dweight, float* dbias, const float* dout, const float* inp,
                            int64_t N, int64_t IN, int64_t OUT) {
  gemm(true, false, OUT, IN, N, 1.0f, dout, OUT, inp, IN, 1.0f, dweight, IN);
  if (dbias != nullptr) {
    // Column sums: each thread owns a slice of columns and walks the rows in order, so the
    // result does not depend on the thread count.
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
    for (int64_t o0 = 0; o0 < OUT; o0 += 64) {
      const int64_t o1 = o0 + 64 < OUT ? o0 + 64 : OUT;
      float acc[64] = {};
      for (int64_t n = 0; n < N; ++n) {
        const float* row = dout + n * OUT;
        for (int64_t o = o0; o < o1; ++o) acc[o - o0] += row[o];
      }
      for (int64_t o = o0; o < o1; ++o) dbias[o] += acc[o - o0];
    }
  }
}

void blas_set_num_threads(int threads) { openblas_set_num_threads(threads); }

void gemm_reference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                    const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                    float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const float a = trans_a ? A[k * lda + i] : A[i * lda + k];
        const float b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        acc += static_cast<double>(a) * b;
      }
      const float prev = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
      C[i * ldc + j] = static_cast<float>(alpha * acc) + prev;
    }
  }
}

// The GEMM entries of both kernel tables are the BLAS wrappers above.
namespace ref {
void linear_forward(const KernelContext& kc, float* out, const float* inp, const float* weight, const float* bias,
                    int64_t N, int64_t IN, int64_t OUT) {
  blas_linear_forward(kc, out, inp, weight, bias, N, IN, OUT);
}
void linear_backward_input(const KernelContext& kc, float* dinp, const float* dout, const float* weight, int64_t N,
                           int64_t IN, int64_t OUT, bool accumulate) {
  blas_linear_backward_input(kc, dinp, dout, weight, N, IN, OUT, accumulate);
}
void linear_backward_weight(const KernelContext& kc, float* dweight, float* dbias, const float* dout,
                            const float* inp, int64_t N, int64_t IN, int64_t OUT) {
  blas_linear_backward_weight(kc, dweight, dbias, dout, inp, N, IN, OUT);
}
}  // namespace ref

namespace cpu {
void linear_forward(const KernelContext& kc, float* out, const float* inp, const float* weight, const float* bias,
                    int64_t N, int64_t IN, int64_t OUT) {
  blas_linear_forward(kc, out, inp, weight, bias, N, IN, OUT);
}
void linear_backward_input(const KernelContext& kc, float* dinp, const float* dout, const float* weight, int64_t N,
                           int64_t IN, int64_t OUT, bool accumulate) {
  blas_linear_backward_input(kc, dinp, dout, weight, N, IN, OUT, accumulate);
}
void linear_backward_weight(const KernelContext& kc, float* dweight, float* dbias, const float* dout,
                            const float* inp, int64_t N, int64_t IN, int64_t OUT) {
  blas_linear_backward_weight(kc, dweight, dbias, dout, inp, N, IN, OUT);
}
}  // namespace cpu

}  // namespace mindspeed
