// Fast fused QKV split + rotary embedding (MindSpeed's fused RoPE): one pass over the QKV
// projection output, rows (t, b) in parallel, Vec8 rotation. Same rotate-half convention as
// the reference kernel.
#include <cstring>

#include "kernels/cpu/vec.h"
#include "kernels/kernels.h"

namespace mindspeed::cpu {
namespace {
// out = rotate(x) with sign +1 (forward) or -1 (backward, the transpose).
inline void rotate(float* out, const float* x, const float* cos, const float* sin, int64_t D,
                   float sign) {
  const int64_t half = D / 2;
  const Vec8 vsign = Vec8::set1(sign);
  int64_t i = 0;
  for (; i + 8 <= half; i += 8) {
    const Vec8 x1 = Vec8::load(x + i), x2 = Vec8::load(x + i + half);
    const Vec8 c = Vec8::load(cos + i), s = Vec8::load(sin + i) * vsign;
    (x1 * c - x2 * s).store(out + i);
    Vec8::fma(x1, s, x2 * c).store(out + i + half);
  }
  for (; i < half; ++i) {
    const float x1 = x[i], x2 = x[i + half];
    out[i] = x1 * cos[i] - x2 * (sign * sin[i]);
    out[i + half] = x2 * cos[i] + x1 * (sign * sin[i]);
  }
}
inline void copy_or_rotate(float* dst, const float* src, const float* cos, const float* sin,
                           int64_t D, float sign) {
  if (cos) {
    rotate(dst, src, cos, sin, D, sign);
  } else {
    std::memcpy(dst, src, sizeof(float) * D);
  }
}
}  // namespace

void qkv_split_rope_forward(const KernelContext& kc, float* q, float* k, float* v, const float* qkv, const int32_t* pos,
                            const float* rope_cos, const float* rope_sin, int64_t T, int64_t B,
                            int64_t NQ, int64_t NKV, int64_t D) {
  const int64_t G = NQ / NKV;
  const int64_t row = NKV * (G + 2) * D;
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t tb = 0; tb < T * B; ++tb) {
    const int64_t t = tb / B, b = tb % B;
    const float* src = qkv + tb * row;
    const int64_t p = pos ? pos[b * T + t] : t;
    const float* cos = rope_cos ? rope_cos + p * (D / 2) : nullptr;
    const float* sin = rope_sin ? rope_sin + p * (D / 2) : nullptr;
    for (int64_t g = 0; g < NKV; ++g) {
      const float* group = src + g * (G + 2) * D;
      for (int64_t j = 0; j < G; ++j)
        copy_or_rotate(q + ((b * NQ + g * G + j) * T + t) * D, group + j * D, cos, sin, D, 1.0f);
      copy_or_rotate(k + ((b * NKV + g) * T + t) * D, group + G * D, cos, sin, D, 1.0f);
      std::memcpy(v + ((b * NKV + g) * T + t) * D, group + (G + 1) * D, sizeof(float) * D);
    }
  }
}

void qkv_split_rope_backward(const KernelContext& kc, float* dqkv, const float* dq, const float* dk, const float* dv,
                             const int32_t* pos, const float* rope_cos, const float* rope_sin,
                             int64_t T, int64_t B, int64_t NQ, int64_t NKV, int64_t D) {
  const int64_t G = NQ / NKV;
  const int64_t row = NKV * (G + 2) * D;
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t tb = 0; tb < T * B; ++tb) {
    const int64_t t = tb / B, b = tb % B;
    float* dst = dqkv + tb * row;
    const int64_t p = pos ? pos[b * T + t] : t;
    const float* cos = rope_cos ? rope_cos + p * (D / 2) : nullptr;
    const float* sin = rope_sin ? rope_sin + p * (D / 2) : nullptr;
    for (int64_t g = 0; g < NKV; ++g) {
      float* group = dst + g * (G + 2) * D;
      for (int64_t j = 0; j < G; ++j)
        copy_or_rotate(group + j * D, dq + ((b * NQ + g * G + j) * T + t) * D, cos, sin, D, -1.0f);
      copy_or_rotate(group + G * D, dk + ((b * NKV + g) * T + t) * D, cos, sin, D, -1.0f);
      std::memcpy(group + (G + 1) * D, dv + ((b * NKV + g) * T + t) * D, sizeof(float) * D);
    }
  }
}

}  // namespace mindspeed::cpu
