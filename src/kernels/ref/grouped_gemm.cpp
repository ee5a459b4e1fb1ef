// Reference grouped GEMM (MindSpeed npu_gmm / gmm_v2 group_type 0 and
// npu_groupmatmul_add_fp32; Megatron GroupedMLP's gg.ops.gmm): one GEMM per group, in group
// order, each through the BLAS wrapper like the reference linear layer (GEMM never runs as a
// hand loop). The specification of cpu/grouped_gemm.cpp.
#include "kernels/blas/gemm.h"
#include "kernels/kernels.h"

namespace mindspeed::ref {

void grouped_gemm_forward(const KernelContext& kc, float* out, const float* x,
                          const float* const* w, const int64_t* counts, int64_t G, int64_t N,
                          int64_t K) {
  int64_t row = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t m = counts[g];
    if (m > 0) gemm(false, true, m, N, K, 1.0f, x + row * K, K, w[g], K, 0.0f, out + row * N, N);
    row += m;
  }
}

void grouped_gemm_backward_input(const KernelContext& kc, float* dx, const float* dout,
                                 const float* const* w, const int64_t* counts, int64_t G, int64_t N,
                                 int64_t K) {
  int64_t row = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t m = counts[g];
    if (m > 0) gemm(false, false, m, K, N, 1.0f, dout + row * N, N, w[g], K, 0.0f, dx + row * K, K);
    row += m;
  }
}

void grouped_gemm_backward_weight(const KernelContext& kc, float* const* dw, const float* dout,
                                  const float* x, const int64_t* counts, int64_t G, int64_t N,
                                  int64_t K) {
  int64_t row = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t m = counts[g];
    if (m > 0) gemm(true, false, N, K, m, 1.0f, dout + row * N, N, x + row * K, K, 1.0f, dw[g], K);
    row += m;
  }
}

}  // namespace mindspeed::ref
