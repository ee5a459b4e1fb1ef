// Fast MoE token permutation and unpermutation (MindSpeed npu_moe_token_permute /
// npu_moe_token_unpermute; Megatron moe_utils.permute / unpermute) and row scaling: the
// loops of ref/moe_permute.cpp over the thread pool, bit-identical with them. Kernels that
// write each routed copy's row on its own run over the copies in parallel; the ones that sum
// copies into a token row give each thread a slice of the columns, and every thread walks
// all copies in increasing i (no atomics, no inverse map: each element sees the additions in
// the reference's order whatever the thread count). Built with -ffp-contract=off so a
// product is rounded before it is added, as in the reference.
#include <algorithm>
#include <cstring>

#include "kernels/kernels.h"

namespace mindspeed::cpu {
namespace {

// Columns per thread slice of an h-wide row: about one slice per thread, a multiple of 16
// floats (whole cache lines), at least 64.
int64_t column_slice(const KernelContext& kc, int64_t h) {
  const int64_t per_thread = (h + kc.num_threads - 1) / kc.num_threads;
  return std::max<int64_t>(64, (per_thread + 15) / 16 * 16);
}

// out[rows[i]] += (probs ? probs[i] : 1) * src[i] over i in increasing order, after
// zeroing out; the shared body of moe_permute_backward and moe_unpermute_forward.
void scatter_add_rows(const KernelContext& kc, float* out, const float* src, const float* probs,
                      const int32_t* rows, int64_t T, int64_t R, int64_t h) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t t = 0; t < T; ++t) std::memset(out + t * h, 0, sizeof(float) * h);
  const int64_t slice = column_slice(kc, h);
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t c0 = 0; c0 < h; c0 += slice) {
    const int64_t c1 = std::min(c0 + slice, h);
    for (int64_t i = 0; i < R; ++i) {
      if (rows[i] < 0) continue;
      float* o = out + static_cast<int64_t>(rows[i]) * h;
      const float* p = src + i * h;
      if (probs == nullptr) {
        for (int64_t c = c0; c < c1; ++c) o[c] += p[c];
      } else {
        const float s = probs[i];
        for (int64_t c = c0; c < c1; ++c) o[c] += s * p[c];
      }
    }
  }
}

// <a, b> accumulated in double over 8 lanes (vectorisable), the lanes summed in order.
double dot_double(const float* a, const float* b, int64_t n) {
  double lane[8] = {};
  int64_t c = 0;
  for (; c + 8 <= n; c += 8) {
    for (int j = 0; j < 8; ++j) lane[j] += static_cast<double>(a[c + j]) * b[c + j];
  }
  for (; c < n; ++c) lane[c & 7] += static_cast<double>(a[c]) * b[c];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

}  // namespace

void moe_permute_forward(const KernelContext& kc, float* out, const float* x, const int32_t* rows,
                         int64_t R, int64_t h) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
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
  scatter_add_rows(kc, dx, dout, nullptr, rows, T, R, h);
}

void moe_unpermute_forward(const KernelContext& kc, float* out, const float* permuted,
                           const float* probs, const int32_t* rows, int64_t T, int64_t R,
                           int64_t h) {
  scatter_add_rows(kc, out, permuted, probs, rows, T, R, h);
}

void moe_unpermute_backward(const KernelContext& kc, float* dpermuted, float* dprobs,
                            const float* dout, const float* permuted, const float* probs,
                            const int32_t* rows, int64_t T, int64_t R, int64_t h) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
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
    if (dprobs != nullptr) dprobs[i] = static_cast<float>(dot_double(g, permuted + i * h, h));
  }
}

void scale_rows(const KernelContext& kc, float* out, const float* x, const float* s, int64_t R,
                int64_t h) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < R; ++i) {
    const float a = s[i];
    for (int64_t c = 0; c < h; ++c) out[i * h + c] = a * x[i * h + c];
  }
}

}  // namespace mindspeed::cpu
