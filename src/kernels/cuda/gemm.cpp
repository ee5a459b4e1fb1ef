// CUDA GEMMs through cuBLASLt (kernel_signatures.inc: linear_forward / _backward_input /
// _backward_weight, the grouped GEMMs of the MoE experts). The CPU backend's BLAS wrappers
// (blas/gemm.cpp) are the specification. Row-major [rows, cols] arrays are column-major
// [cols, rows] to cuBLAS, so each product is written transposed: out = inp W^T is
// out^T (OUT x N) = W (OUT x IN, i.e. the column-major IN x OUT transposed) . inp^T (IN x N).
// fp32 in, fp32 accumulation and out; CUBLAS_COMPUTE_32F (no TF32) unless the backend allows
// TF32 (--allow-tf32, CudaOptions::allow_tf32). With --bf16 (CudaOptions::bf16_gemm_inputs) both
// inputs are rounded to bf16 first (convert_to_bf16 into a scratch area) and multiplied on the
// tensor cores with fp32 accumulation and an fp32 result, as Megatron's bf16 GEMMs do. The bias of
// linear_forward rides cuBLASLt's bias epilogue; the bias gradient is column_sums_accumulate (the
// CPU's order).
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"

namespace mindspeed::cuda {
namespace {

// One column-major matrix layout (rows x cols, leading dimension ld), destroyed with it.
class Layout {
 public:
  Layout(int64_t rows, int64_t cols, int64_t ld, cudaDataType_t type = CUDA_R_32F) {
    MS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_, type, static_cast<uint64_t>(rows),
                                               static_cast<uint64_t>(cols), ld));
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(layout_); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
  cublasLtMatrixLayout_t get() const { return layout_; }

 private:
  cublasLtMatrixLayout_t layout_ = nullptr;
};

/// The bf16 scratch area of at least `elems` elements (grown with cudaFree/cudaMalloc, which wait
/// for the device: the GEMMs queued before still read the old one).
bf16* bf16_scratch(DeviceState& s, int64_t elems) {
  const size_t bytes = static_cast<size_t>(elems) * sizeof(bf16);
  if (bytes > s.bf16_gemm_scratch_bytes) {
    if (s.bf16_gemm_scratch != nullptr) MS_CUDA_CHECK(cudaFree(s.bf16_gemm_scratch));
    s.bf16_gemm_scratch = nullptr;
    const size_t grown = std::max(bytes, s.bf16_gemm_scratch_bytes * 2);
    MS_CUDA_CHECK(cudaMalloc(&s.bf16_gemm_scratch, grown));
    s.bf16_gemm_scratch_bytes = grown;
  }
  return static_cast<bf16*>(s.bf16_gemm_scratch);
}

/// C (m x n, ldc) = alpha op(A) op(B) + beta C (+ bias[m] per row with a bias), column-major:
/// op(A) is m x k, op(B) is k x n. A is stored (trans_a ? k x m : m x k) with lda, B likewise.
void matmul(const KernelContext& kc, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
            const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
            int64_t ldc, const float* bias = nullptr) {
  if (m <= 0 || n <= 0) return;
  DeviceState& s = device_state(kc);
  if (k <= 0) {  // an empty product: C = beta C (+ bias), which cuBLASLt does not take
    MS_CHECK(bias == nullptr && (beta == 0.0f || beta == 1.0f), "empty GEMM with a bias or beta ",
             beta);
    if (beta == 0.0f) {
      for (int64_t j = 0; j < n; ++j) fill_zero(kc, C + j * ldc, m);
    }
    return;
  }
  // The stored extents: A's (trans_a ? m : k) columns of lda elements, the last one ending at its
  // row count; B's likewise. The rounded copies keep the leading dimensions.
  const void* a_data = A;
  const void* b_data = B;
  cudaDataType_t input_type = CUDA_R_32F;
  if (s.bf16_gemm_inputs) {
    const int64_t a_elems = ((trans_a ? m : k) - 1) * lda + (trans_a ? k : m),
                  b_elems = ((trans_b ? k : n) - 1) * ldb + (trans_b ? n : k);
    const int64_t b_offset = (a_elems + 127) / 128 * 128;  // 256-byte aligned
    bf16* scratch = bf16_scratch(s, b_offset + b_elems);
    convert_to_bf16(kc, scratch, A, a_elems);
    convert_to_bf16(kc, scratch + b_offset, B, b_elems);
    a_data = scratch;
    b_data = scratch + b_offset;
    input_type = CUDA_R_16BF;
  }
  const cublasComputeType_t compute =
      s.allow_tf32 && !s.bf16_gemm_inputs ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasLtMatmulDesc_t desc = nullptr;
  MS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                          op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  MS_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  MS_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  if (bias != nullptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    MS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                   sizeof(epilogue)));
    MS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                   sizeof(bias)));
  }
  const Layout a(trans_a ? k : m, trans_a ? m : k, lda, input_type),
      b(trans_b ? n : k, trans_b ? k : n, ldb, input_type), c(m, n, ldc);
  cublasLtMatmulPreference_t preference = nullptr;
  MS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const uint64_t workspace = s.gemm_workspace_bytes;
  MS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  MS_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(s.cublaslt, desc, a.get(), b.get(), c.get(),
                                                 c.get(), preference, 1, &heuristic, &found));
  MS_CHECK(found > 0, "cuBLASLt has no algorithm for a ", m, " x ", n, " x ", k,
           s.bf16_gemm_inputs ? " bf16-input GEMM" : " fp32 GEMM");
  const float alpha = 1.0f;
  MS_CUBLAS_CHECK(cublasLtMatmul(s.cublaslt, desc, &alpha, a_data, a.get(), b_data, b.get(), &beta,
                                 C, c.get(), C, c.get(), &heuristic.algo, s.gemm_workspace,
                                 s.gemm_workspace_bytes, s.stream));
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatmulDescDestroy(desc);
}

}  // namespace

// out^T (OUT x N) = W (op T of the stored IN x OUT) . inp^T (IN x N), + bias per output row.
void linear_forward(const KernelContext& kc, float* out, const float* inp, const float* weight,
                    const float* bias, int64_t N, int64_t IN, int64_t OUT) {
  matmul(kc, true, false, OUT, N, IN, weight, IN, inp, IN, 0.0f, out, OUT, bias);
}

// dinp^T (IN x N) (+)= W^T (the stored IN x OUT) . dout^T (OUT x N).
void linear_backward_input(const KernelContext& kc, float* dinp, const float* dout,
                           const float* weight, int64_t N, int64_t IN, int64_t OUT,
                           bool accumulate) {
  matmul(kc, false, false, IN, N, OUT, weight, IN, dout, OUT, accumulate ? 1.0f : 0.0f, dinp, IN);
}

// dweight^T (IN x OUT) += inp^T (IN x N) . dout (op T of the stored OUT x N).
void linear_backward_weight(const KernelContext& kc, float* dweight, float* dbias,
                            const float* dout, const float* inp, int64_t N, int64_t IN,
                            int64_t OUT) {
  matmul(kc, false, true, IN, OUT, N, inp, IN, dout, OUT, 1.0f, dweight, IN);
  if (dbias != nullptr) column_sums_accumulate(kc, dbias, dout, N, OUT);
}

// Group g's rows [row, row + counts[g]) against w[g]: one cuBLASLt GEMM per non-empty group, in
// group order (counts and the pointer array are host memory, the pointers device ones).
void grouped_gemm_forward(const KernelContext& kc, float* out, const float* x,
                          const float* const* w, const int64_t* counts, int64_t G, int64_t N,
                          int64_t K) {
  int64_t row = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t m = counts[g];
    if (m > 0) matmul(kc, true, false, N, m, K, w[g], K, x + row * K, K, 0.0f, out + row * N, N);
    row += m;
  }
}

void grouped_gemm_backward_input(const KernelContext& kc, float* dx, const float* dout,
                                 const float* const* w, const int64_t* counts, int64_t G, int64_t N,
                                 int64_t K) {
  int64_t row = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t m = counts[g];
    if (m > 0) matmul(kc, false, false, K, m, N, w[g], K, dout + row * N, N, 0.0f, dx + row * K, K);
    row += m;
  }
}

void grouped_gemm_backward_weight(const KernelContext& kc, float* const* dw, const float* dout,
                                  const float* x, const int64_t* counts, int64_t G, int64_t N,
                                  int64_t K) {
  int64_t row = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t m = counts[g];
    if (m > 0) matmul(kc, false, true, K, N, m, x + row * K, K, dout + row * N, N, 1.0f, dw[g], K);
    row += m;
  }
}

void fill_gemm_kernels(KernelTable& t) {
  t.linear_forward = linear_forward;
  t.linear_backward_input = linear_backward_input;
  t.linear_backward_weight = linear_backward_weight;
  t.grouped_gemm_forward = grouped_gemm_forward;
  t.grouped_gemm_backward_input = grouped_gemm_backward_input;
  t.grouped_gemm_backward_weight = grouped_gemm_backward_weight;
}

}  // namespace mindspeed::cuda
