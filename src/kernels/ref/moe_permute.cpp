// Reference MoE token permutation and unpermutation (MindSpeed npu_moe_token_permute /
// npu_moe_token_unpermute; Megatron moe_utils.permute / unpermute) and the row scaling of
// the unfused path: plain sequential loops over the routed copies, the specification of
// cpu/moe_permute.cpp. Every sum into a token row runs over the copies in increasing i, and
// each product is rounded to float before it is added (built with -ffp-contract=off), so
// the fast kernels reproduce these bits.
#include <cstring>

#include "kernels/kernels.h"

namespace mindspeed::ref {

void moe_permute_forward(const KernelContext& kc, float* out, const float* x, const int32_t* rows,
                         int64_t R, int64_t h) {
  for (int64_t i = 0; i < R; ++i) {
    float* o = out + i * h;
    if (rows[i] < 0) {
      std::memset(o, 0, sizeof(float) * h);
    } else {
      std::memcpy(o, x + static_cast<int64_t>(rows[i]) * h, sizeof(float) * h);
    }
  }
}

void moe_permute_backward(const KernelContext& kc, float* dx, const float* dout,
                          const int32_t* rows, int64_t T, int64_t R, int64_t h) {
  std::memset(dx, 0, sizeof(float) * T * h);
  for (int64_t i = 0; i < R; ++i) {
    if (rows[i] < 0) continue;
    float* d = dx + static_cast<int64_t>(rows[i]) * h;
    const float* g = dout + i * h;
    for (int64_t c = 0; c < h; ++c) d[c] += g[c];
  }
}

void moe_unpermute_forward(const KernelContext& kc, float* out, const float* permuted,
                           const float* probs, const int32_t* rows, int64_t T, int64_t R,
                           int64_t h) {
  std::memset(out, 0, sizeof(float) * T * h);
  for (int64_t i = 0; i < R; ++i) {
    if (rows[i] < 0) continue;
    float* o = out + static_cast<int64_t>(rows[i]) * h;
    const float* p = permuted + i * h;
    if (probs == nullptr) {
      for (int64_t c = 0; c < h; ++c) o[c] += p[c];
    } else {
      const float s = probs[i];
      for (int64_t c = 0; c < h; ++c) o[c] += s * p[c];
    }
  }
}

void moe_unpermute_backward(const KernelContext& kc, float* dpermuted, float* dprobs,
                            const float* dout, const float* permuted, const float* probs,
                            const int32_t* rows, int64_t T, int64_t R, int64_t h) {
  for (int64_t i = 0; i < R; ++i) {
    float* dp = dpermuted + i * h;
    if (rows[i] < 0) {
      std::memset(dp, 0, sizeof(float) * h);
      if (dprobs != nullptr) dprobs[i] = 0.0f;
      continue;
    }
    const float* g = dout + static_cast<int64_t>(rows[i]) * h;
    const float s = probs != nullptr ? probs[i] : 1.0f;
    for (int64_t c = 0; c < h; ++c) dp[c] = s * g[c];
    if (dprobs != nullptr) {
      const float* p = permuted + i * h;
      double acc = 0.0;
      for (int64_t c = 0; c < h; ++c) acc += static_cast<double>(g[c]) * p[c];
      dprobs[i] = static_cast<float>(acc);
    }
  }
}

void scale_rows(const KernelContext& kc, float* out, const float* x, const float* s, int64_t R,
                int64_t h) {
  for (int64_t i = 0; i < R; ++i) {
    const float a = s[i];
    for (int64_t c = 0; c < h; ++c) out[i * h + c] = a * x[i * h + c];
  }
}

}  // namespace mindspeed::ref
