// Reference embedding lookup and its backward (port of the lookup in Megatron's
// VocabParallelEmbedding without the all-reduce; llm.c encoder_forward/backward).
#include <cstring>

#include "kernels/kernels.h"

namespace mindspeed::ref {

void embedding_forward(const KernelContext& kc, float* out, const int32_t* ids, const float* wte, int64_t vocab_start,
                       int64_t V, int64_t N, int64_t C) {
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
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = static_cast<int64_t>(ids[n]) - vocab_start;
    if (row < 0 || row >= V) continue;
    float* d = dwte + row * C;
    const float* g = dout + n * C;
    for (int64_t c = 0; c < C; ++c) d[c] += g[c];
  }
}

}  // namespace mindspeed::ref
