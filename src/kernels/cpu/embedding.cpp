// Fast embedding lookup and backward: rows in parallel for the lookup; for the gradient each
// thread owns a slice of the channels and walks the tokens in order (no atomics, and the
// result does not depend on the thread count).
#include <cstring>

#include "kernels/kernels.h"

namespace mindspeed::cpu {

void embedding_forward(const KernelContext& kc, float* out, const int32_t* ids, const float* wte, int64_t vocab_start,
                       int64_t V, int64_t N, int64_t C) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = static_cast<int64_t>(ids[n]) - vocab_start;
    float* o = out + n * C;
    if (row >= 0 && row < V) {
      std::memcpy(o, wte + row * C, sizeof(float) * C);
    } else {
      std::memset(o, 0, sizeof(float) * C);
    }
  }
}

void embedding_backward(const KernelContext& kc, float* dwte, const float* dout, const int32_t* ids, int64_t vocab_start,
                        int64_t V, int64_t N, int64_t C) {
  constexpr int64_t kSlice = 64;
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t c0 = 0; c0 < C; c0 += kSlice) {
    const int64_t c1 = c0 + kSlice < C ? c0 + kSlice : C;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t row = static_cast<int64_t>(ids[n]) - vocab_start;
      if (row < 0 || row >= V) continue;
      float* d = dwte + row * C;
      const float* g = dout + n * C;
      for (int64_t c = c0; c < c1; ++c) d[c] += g[c];
    }
  }
}

}  // namespace mindspeed::cpu
