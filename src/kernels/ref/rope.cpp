// Reference split of Megatron's fused QKV projection into head-major q/k/v, with rotary
// position embedding (rotate-half form: Hugging Face LLaMA, Megatron's RotaryEmbedding;
// MindSpeed npu_rotary_position_embedding mode 0). For x = [x1 | x2] (halves of D) at
// position p: out = [x1*cos - x2*sin | x2*cos + x1*sin], cos/sin = table[p][i], i < D/2.
#include "kernels/kernels.h"

namespace mindspeed::ref {
namespace {
// Rotates one head vector. `sign` = +1 forward, -1 backward (the transpose rotation).
void rotate(float* out, const float* x, const float* cos, const float* sin, int64_t D,
            float sign) {
  const int64_t half = D / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = x[i], x2 = x[i + half];
    out[i] = x1 * cos[i] - sign * x2 * sin[i];
    out[i + half] = x2 * cos[i] + sign * x1 * sin[i];
  }
}
}  // namespace

void qkv_split_rope_forward(const KernelContext& kc, float* q, float* k, float* v, const float* qkv, const int32_t* pos,
                            const float* rope_cos, const float* rope_sin, int64_t T, int64_t B,
                            int64_t NQ, int64_t NKV, int64_t D) {
  const int64_t G = NQ / NKV;
  const int64_t row = NKV * (G + 2) * D;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      const float* src = qkv + (t * B + b) * row;
      const int64_t p = pos ? pos[b * T + t] : t;
      const float* cos = rope_cos ? rope_cos + p * (D / 2) : nullptr;
      const float* sin = rope_sin ? rope_sin + p * (D / 2) : nullptr;
      for (int64_t g = 0; g < NKV; ++g) {
        const float* group = src + g * (G + 2) * D;
        for (int64_t j = 0; j < G; ++j) {
          float* dst = q + ((b * NQ + g * G + j) * T + t) * D;
          if (cos) {
            rotate(dst, group + j * D, cos, sin, D, 1.0f);
          } else {
            for (int64_t d = 0; d < D; ++d) dst[d] = group[j * D + d];
          }
        }
        float* kd = k + ((b * NKV + g) * T + t) * D;
        float* vd = v + ((b * NKV + g) * T + t) * D;
        if (cos) {
          rotate(kd, group + G * D, cos, sin, D, 1.0f);
        } else {
          for (int64_t d = 0; d < D; ++d) kd[d] = group[G * D + d];
        }
        for (int64_t d = 0; d < D; ++d) vd[d] = group[(G + 1) * D + d];
      }
    }
  }
}

void qkv_split_rope_backward(const KernelContext& kc, float* dqkv, const float* dq, const float* dk, const float* dv,
                             const int32_t* pos, const float* rope_cos, const float* rope_sin,
                             int64_t T, int64_t B, int64_t NQ, int64_t NKV, int64_t D) {
  const int64_t G = NQ / NKV;
  const int64_t row = NKV * (G + 2) * D;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      float* dst = dqkv + (t * B + b) * row;
      const int64_t p = pos ? pos[b * T + t] : t;
      const float* cos = rope_cos ? rope_cos + p * (D / 2) : nullptr;
      const float* sin = rope_sin ? rope_sin + p * (D / 2) : nullptr;
      for (int64_t g = 0; g < NKV; ++g) {
        float* group = dst + g * (G + 2) * D;
        for (int64_t j = 0; j < G; ++j) {
          const float* src = dq + ((b * NQ + g * G + j) * T + t) * D;
          if (cos) {
            rotate(group + j * D, src, cos, sin, D, -1.0f);
          } else {
            for (int64_t d = 0; d < D; ++d) group[j * D + d] = src[d];
          }
        }
        const float* ks = dk + ((b * NKV + g) * T + t) * D;
        const float* vs = dv + ((b * NKV + g) * T + t) * D;
        if (cos) {
          rotate(group + G * D, ks, cos, sin, D, -1.0f);
        } else {
          for (int64_t d = 0; d < D; ++d) group[G * D + d] = ks[d];
        }
        for (int64_t d = 0; d < D; ++d) group[(G + 1) * D + d] = vs[d];
      }
    }
  }
}

}  // namespace mindspeed::ref
