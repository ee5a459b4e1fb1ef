// CUDA ring-attention update (kernel_signatures.inc; the specification is
// ref/ring_attention.cpp: MindSpeed's npu_ring_attention_update in log-sum-exp form, the
// merge of two partial attentions after each key/value block of the ring). One warp per
// (t, b, head) row: the lanes read the row's two lse values, compute the merged lse and the
// two weights in double (the reference's formula and branches: a partial with lse = -inf
// weighs nothing and its output is not read), and write the head's D outputs, coalesced;
// lane 0 then writes the merged lse. Each output element is read and written by one lane and
// the lse by its warp after every lane has read it, so out may alias prev_out or cur_out and
// lse prev_lse or cur_lse (the ring accumulates in place). The weighted sum is the
// reference's double arithmetic, rounded explicitly (no contraction); the weights come from
// the device's double exp / log1p (within an ulp of double of the host's), so the results
// agree with the reference to the last float bit or one ulp.
#include <cmath>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.cuh"

namespace mindspeed::cuda {
namespace {

__global__ void ring_attention_update_kernel(float* out /*[T,B,NQ*D] =*/, float* lse /*[B,NQ,T] =*/,
                                             const float* prev_out /*[T,B,NQ*D]*/,
                                             const float* prev_lse /*[B,NQ,T]*/,
                                             const float* cur_out /*[T,B,NQ*D]*/,
                                             const float* cur_lse /*[B,NQ,T]*/, int64_t T,
                                             int64_t B, int64_t NQ, int64_t D) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = blockDim.x / 32;
  const int64_t rows = T * B * NQ;
  for (int64_t r = blockIdx.x * warps + threadIdx.x / 32; r < rows; r += gridDim.x * warps) {
    const int64_t h = r % NQ, b = (r / NQ) % B, t = r / (NQ * B);  // r = (t * B + b) * NQ + h
    const int64_t row = r * D;                                     // [T, B, NQ*D]
    const int64_t stat = (b * NQ + h) * T + t;                     // [B, NQ, T]
    const double lp = prev_lse[stat], lc = cur_lse[stat];
    __syncwarp();  // every lane has read the statistics before lane 0 overwrites them (aliasing)
    double wp = 0.0, wc = 0.0, merged = -INFINITY;
    if (lp != -INFINITY && lc != -INFINITY) {
      merged = (lp < lc ? lc : lp) + log1p(exp(-fabs(lp - lc)));
      wp = exp(lp - merged);
      wc = exp(lc - merged);
    } else if (lp != -INFINITY) {
      merged = lp;
      wp = 1.0;
    } else if (lc != -INFINITY) {
      merged = lc;
      wc = 1.0;
    }
    for (int64_t x = lane; x < D; x += 32) {
      double o = 0.0;
      if (wp != 0.0) o = __dadd_rn(o, __dmul_rn(wp, static_cast<double>(prev_out[row + x])));
      if (wc != 0.0) o = __dadd_rn(o, __dmul_rn(wc, static_cast<double>(cur_out[row + x])));
      out[row + x] = static_cast<float>(o);
    }
    if (lane == 0) lse[stat] = static_cast<float>(merged);
  }
}

}  // namespace

void ring_attention_update(const KernelContext& kc, float* out, float* lse, const float* prev_out,
                           const float* prev_lse, const float* cur_out, const float* cur_lse,
                           int64_t T, int64_t B, int64_t NQ, int64_t D) {
  const int64_t rows = T * B * NQ;
  if (rows <= 0) return;
  ring_attention_update_kernel<<<blocks_for(rows * 32), kThreads, 0, stream_of(kc)>>>(
      out, lse, prev_out, prev_lse, cur_out, cur_lse, T, B, NQ, D);
  MS_CUDA_CHECK_LAUNCH();
}

void fill_ring_attention_kernels(KernelTable& t) {
  t.ring_attention_update = ring_attention_update;
}

}  // namespace mindspeed::cuda
