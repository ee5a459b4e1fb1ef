// CUDA split of Megatron's fused QKV projection into head-major q/k/v with rotary position
// embedding, forward and backward (kernel_signatures.inc; the specification is ref/rope.cpp:
// rotate-half form of Hugging Face LLaMA and Megatron's RotaryEmbedding, MindSpeed's
// npu_rotary_position_embedding mode 0). qkv row (t, b) holds, for each of the NKV groups, its
// G = NQ/NKV query heads, its key head and its value head, D floats each; q/k/v are
// [B, heads, T, D]. For x = [x1 | x2] (halves of D) at position p = pos[b*T + t] (or t):
// forward out = [x1*cos - x2*sin | x2*cos + x1*sin], backward the transpose rotation, with
// cos/sin = table[p][i]. One thread per element of a qkv row (rows on gridDim.y, the row's
// elements on gridDim.x): reads and writes are contiguous along each head. Each rotated value
// is the reference's two rounded products and one rounded sum (no fused multiply-add), so the
// results are bit for bit the reference's on a host that does not contract them either.
// Without rope_cos the heads are copied. With an odd D and rope, the last element of each q/k
// head is left as the reference leaves it (not written).
#include <algorithm>
#include <limits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.cuh"

namespace mindspeed::cuda {
namespace {

/// Where element w of a qkv row belongs: head slot j of group g (j < G a query head, G the
/// key, G + 1 the value), element d of the head.
struct HeadElement {
  int g, j, d;
};

__device__ inline HeadElement head_element(int w, int D, int G) {
  const int slot = w / D;
  const int g = slot / (G + 2);
  return {g, slot - g * (G + 2), w - slot * D};
}

/// Element d of the rotation of head x (x points at the head's first element) by the table row
/// cos/sin, sign +1 forward and -1 backward (ref/rope.cpp's rotate, term by term).
__device__ inline float rotate_element(const float* x, const float* cos, const float* sin, int d,
                                       int half, float sign) {
  if (d < half) {
    const float x1 = x[d], x2 = x[d + half];
    return __fsub_rn(__fmul_rn(x1, cos[d]), __fmul_rn(sign * x2, sin[d]));
  }
  const int i = d - half;
  const float x1 = x[i], x2 = x[d];
  return __fadd_rn(__fmul_rn(x2, cos[i]), __fmul_rn(sign * x1, sin[i]));
}

/// for (w) over a qkv row's elements, on the grid's x dimension.
#define MS_ROW_ELEMENT_LOOP(w, L)                                                        \
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < (L); \
       w += static_cast<int64_t>(blockDim.x) * gridDim.x)

__global__ void qkv_split_rope_forward_kernel(float* __restrict__ q, float* __restrict__ k,
                                              float* __restrict__ v, const float* __restrict__ qkv,
                                              const int32_t* __restrict__ pos,
                                              const float* __restrict__ rope_cos,
                                              const float* __restrict__ rope_sin, int64_t T,
                                              int64_t B, int64_t NQ, int64_t NKV, int D, int G) {
  const int64_t L = NKV * (G + 2) * D;
  const int half = D / 2;
  for (int64_t r = blockIdx.y; r < T * B; r += gridDim.y) {
    const int64_t t = r / B, b = r % B;
    const float* src = qkv + r * L;
    const int64_t p = pos != nullptr ? pos[b * T + t] : t;
    const float* cos = rope_cos != nullptr ? rope_cos + p * half : nullptr;
    const float* sin = rope_sin != nullptr ? rope_sin + p * half : nullptr;
    MS_ROW_ELEMENT_LOOP(w, L) {
      const HeadElement e = head_element(static_cast<int>(w), D, G);
      if (e.j == G + 1) {
        v[((b * NKV + e.g) * T + t) * D + e.d] = src[w];
        continue;
      }
      float* dst = e.j < G ? q + ((b * NQ + static_cast<int64_t>(e.g) * G + e.j) * T + t) * D
                           : k + ((b * NKV + e.g) * T + t) * D;
      if (cos == nullptr) {
        dst[e.d] = src[w];
      } else if (e.d < 2 * half) {
        dst[e.d] = rotate_element(src + (w - e.d), cos, sin, e.d, half, 1.0f);
      }
    }
  }
}

__global__ void qkv_split_rope_backward_kernel(
    float* __restrict__ dqkv, const float* __restrict__ dq, const float* __restrict__ dk,
    const float* __restrict__ dv, const int32_t* __restrict__ pos,
    const float* __restrict__ rope_cos, const float* __restrict__ rope_sin, int64_t T, int64_t B,
    int64_t NQ, int64_t NKV, int D, int G) {
  const int64_t L = NKV * (G + 2) * D;
  const int half = D / 2;
  for (int64_t r = blockIdx.y; r < T * B; r += gridDim.y) {
    const int64_t t = r / B, b = r % B;
    float* dst = dqkv + r * L;
    const int64_t p = pos != nullptr ? pos[b * T + t] : t;
    const float* cos = rope_cos != nullptr ? rope_cos + p * half : nullptr;
    const float* sin = rope_sin != nullptr ? rope_sin + p * half : nullptr;
    MS_ROW_ELEMENT_LOOP(w, L) {
      const HeadElement e = head_element(static_cast<int>(w), D, G);
      if (e.j == G + 1) {
        dst[w] = dv[((b * NKV + e.g) * T + t) * D + e.d];
        continue;
      }
      const float* src = e.j < G ? dq + ((b * NQ + static_cast<int64_t>(e.g) * G + e.j) * T + t) * D
                                 : dk + ((b * NKV + e.g) * T + t) * D;
      if (cos == nullptr) {
        dst[w] = src[e.d];
      } else if (e.d < 2 * half) {
        dst[w] = rotate_element(src, cos, sin, e.d, half, -1.0f);
      }
    }
  }
}

#undef MS_ROW_ELEMENT_LOOP

struct RowGrid {
  dim3 blocks;
  unsigned int threads;
};

/// Grid over T*B rows of L elements: the row's elements on x, rows on y; checks that a row's
/// element index fits the kernels' 32-bit head arithmetic.
RowGrid qkv_grid(int64_t T, int64_t B, int64_t NQ, int64_t NKV, int64_t D) {
  MS_CHECK(NKV > 0 && NQ % NKV == 0, "qkv_split_rope: NQ = ", NQ,
           " is not a multiple of NKV = ", NKV);
  const int64_t L = NKV * (NQ / NKV + 2) * D;
  MS_CHECK(L <= std::numeric_limits<int32_t>::max(), "qkv_split_rope: a qkv row of ", L,
           " elements");
  const auto threads =
      static_cast<unsigned int>(std::clamp<int64_t>((L + 31) / 32 * 32, 32, kThreads));
  const int64_t x = std::min<int64_t>((L + threads - 1) / threads, 1024);
  const int64_t y = std::min<int64_t>(T * B, 65535);
  return {dim3(static_cast<unsigned int>(x), static_cast<unsigned int>(y)), threads};
}

}  // namespace

void qkv_split_rope_forward(const KernelContext& kc, float* q, float* k, float* v, const float* qkv,
                            const int32_t* pos, const float* rope_cos, const float* rope_sin,
                            int64_t T, int64_t B, int64_t NQ, int64_t NKV, int64_t D) {
  if (T <= 0 || B <= 0 || NQ <= 0 || D <= 0) return;
  const RowGrid g = qkv_grid(T, B, NQ, NKV, D);
  qkv_split_rope_forward_kernel<<<g.blocks, g.threads, 0, stream_of(kc)>>>(
      q, k, v, qkv, pos, rope_cos, rope_sin, T, B, NQ, NKV, static_cast<int>(D),
      static_cast<int>(NQ / NKV));
  MS_CUDA_CHECK_LAUNCH();
}

void qkv_split_rope_backward(const KernelContext& kc, float* dqkv, const float* dq, const float* dk,
                             const float* dv, const int32_t* pos, const float* rope_cos,
                             const float* rope_sin, int64_t T, int64_t B, int64_t NQ, int64_t NKV,
                             int64_t D) {
  if (T <= 0 || B <= 0 || NQ <= 0 || D <= 0) return;
  const RowGrid g = qkv_grid(T, B, NQ, NKV, D);
  qkv_split_rope_backward_kernel<<<g.blocks, g.threads, 0, stream_of(kc)>>>(
      dqkv, dq, dk, dv, pos, rope_cos, rope_sin, T, B, NQ, NKV, static_cast<int>(D),
      static_cast<int>(NQ / NKV));
  MS_CUDA_CHECK_LAUNCH();
}

void fill_rope_kernels(KernelTable& t) {
  t.qkv_split_rope_forward = qkv_split_rope_forward;
  t.qkv_split_rope_backward = qkv_split_rope_backward;
}

}  // namespace mindspeed::cuda
