// CUDA MoE token permutation and unpermutation (kernel_signatures.inc; the specification is
// ref/moe_permute.cpp: MindSpeed npu_moe_token_permute / npu_moe_token_unpermute, Megatron
// moe_utils.permute / unpermute). scale_rows lives in elementwise.cu. Bit-identical with the
// reference:
//  * permute forward and unpermute backward write each routed copy's row on their own
//    (a copy, one product per element);
//  * the sums into a token row (permute backward, unpermute forward) run, for each element,
//    over the token's copies in increasing i, each product rounded before it is added
//    (__fmul_rn / __fadd_rn: no contraction), as the reference does. No atomics on floats:
//    an inverse index is built on the device first (integer counts, a scan into offsets, the
//    copies bucketed by token and each bucket sorted), then one thread per output element
//    walks its token's bucket.
//  * dprobs is a dot product in double, one block per copy (a fixed-shape reduction: the
//    same bits every run; the reference's sequential order only to double rounding).
// A negative row index is a padding slot, as in the reference; one at or past T is a
// caller's error (the reference writes out of bounds), which the kernels that know T treat
// as padding.
#include <algorithm>
#include <climits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.cuh"

namespace mindspeed::cuda {
namespace {

__device__ inline bool routed(int32_t row, int64_t T) { return row >= 0 && row < T; }

// ---- The inverse index: copies of token t = index[offsets[t] .. offsets[t + 1]), increasing ----

// counts[t] = copies of token t (integer atomics: the counts do not depend on the order).
__global__ void count_copies_kernel(int32_t* counts /*[T]*/, const int32_t* rows /*[R]*/, int64_t R,
                                    int64_t T) {
  MS_GRID_STRIDE_LOOP(i, R) {
    if (routed(rows[i], T)) atomicAdd(&counts[rows[i]], 1);
  }
}

// offsets[0] = 0, offsets[t + 1] = counts[0] + ... + counts[t]; counts is reset to 0 (the fill's
// cursors). One block: tiles of blockDim.x tokens, each scanned with warp shuffles, a carry
// between tiles.
__global__ void scan_counts_kernel(int32_t* offsets /*[T+1]*/, int32_t* counts /*[T]*/, int64_t T) {
  __shared__ int32_t warp_totals[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  int32_t carry = 0;
  for (int64_t base = 0; base < T; base += blockDim.x) {
    const int64_t t = base + threadIdx.x;
    int32_t x = 0;
    if (t < T) {
      x = counts[t];
      counts[t] = 0;
    }
    for (int o = 1; o < 32; o <<= 1) {  // inclusive scan within the warp
      const int32_t y = __shfl_up_sync(0xffffffffu, x, o);
      if (lane >= o) x += y;
    }
    if (lane == 31) warp_totals[warp] = x;
    __syncthreads();
    if (warp == 0) {  // inclusive scan of the warp totals
      int32_t w = lane < warps ? warp_totals[lane] : 0;
      for (int o = 1; o < 32; o <<= 1) {
        const int32_t y = __shfl_up_sync(0xffffffffu, w, o);
        if (lane >= o) w += y;
      }
      warp_totals[lane] = w;
    }
    __syncthreads();
    if (t < T) offsets[t + 1] = carry + x + (warp > 0 ? warp_totals[warp - 1] : 0);
    carry += warp_totals[warps - 1];
    __syncthreads();  // warp_totals is rewritten by the next tile
  }
  if (threadIdx.x == 0) offsets[0] = 0;
}

// Buckets each routed copy under its token (in an arbitrary order within the bucket).
__global__ void bucket_copies_kernel(int32_t* index /*[R]*/, int32_t* cursors /*[T]*/,
                                     const int32_t* offsets, const int32_t* rows /*[R]*/, int64_t R,
                                     int64_t T) {
  MS_GRID_STRIDE_LOOP(i, R) {
    const int32_t t = rows[i];
    if (routed(t, T)) index[offsets[t] + atomicAdd(&cursors[t], 1)] = static_cast<int32_t>(i);
  }
}

// Sorts each bucket into increasing i (insertion sort: a token has a few copies, its top-k).
__global__ void sort_buckets_kernel(int32_t* index, const int32_t* offsets /*[T+1]*/, int64_t T) {
  MS_GRID_STRIDE_LOOP(t, T) {
    const int32_t begin = offsets[t], end = offsets[t + 1];
    for (int32_t a = begin + 1; a < end; ++a) {
      const int32_t v = index[a];
      int32_t b = a;
      for (; b > begin && index[b - 1] > v; --b) index[b] = index[b - 1];
      index[b] = v;
    }
  }
}

// out[t] = sum over the copies i of token t, in increasing i, of (probs ? probs[i] * src[i] :
// src[i]), each product rounded before it is added; 0 for a token without copies.
__global__ void gather_sum_kernel(float* out /*[T,h] =*/, const float* src /*[R,h]*/,
                                  const float* probs /*[R] or null*/,
                                  const int32_t* offsets /*[T+1]*/, const int32_t* index, int64_t T,
                                  int64_t h) {
  MS_GRID_STRIDE_LOOP(e, T * h) {
    const int64_t t = e / h, c = e - t * h;
    const int32_t end = offsets[t + 1];
    float acc = 0.0f;
    for (int32_t k = offsets[t]; k < end; ++k) {
      const int64_t i = index[k];
      const float v = src[i * h + c];
      acc = __fadd_rn(acc, probs != nullptr ? __fmul_rn(probs[i], v) : v);
    }
    out[e] = acc;
  }
}

// out[rows[i]] summed over copies in increasing i (the shared body of moe_permute_backward
// and moe_unpermute_forward).
void scatter_add_rows(const KernelContext& kc, float* out, const float* src, const float* probs,
                      const int32_t* rows, int64_t T, int64_t R, int64_t h) {
  if (T <= 0 || h <= 0) return;
  DeviceState& d = device_state(kc);
  if (R <= 0) {
    MS_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<size_t>(T * h) * sizeof(float), d.stream));
    return;
  }
  MS_CHECK(R < INT32_MAX && T < INT32_MAX, "MoE routing of ", R, " copies of ", T,
           " tokens: 32-bit indices");
  ScratchBuffer workspace(kc, static_cast<size_t>(2 * T + 1 + R) * sizeof(int32_t));
  int32_t* counts = workspace.as<int32_t>();  // [T], then the bucket cursors
  int32_t* offsets = counts + T;              // [T + 1]
  int32_t* index = offsets + T + 1;           // [R]
  MS_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<size_t>(T) * sizeof(int32_t), d.stream));
  count_copies_kernel<<<blocks_for(R), kThreads, 0, d.stream>>>(counts, rows, R, T);
  MS_CUDA_CHECK_LAUNCH();
  scan_counts_kernel<<<1, 1024, 0, d.stream>>>(offsets, counts, T);
  MS_CUDA_CHECK_LAUNCH();
  bucket_copies_kernel<<<blocks_for(R), kThreads, 0, d.stream>>>(index, counts, offsets, rows, R,
                                                                 T);
  MS_CUDA_CHECK_LAUNCH();
  sort_buckets_kernel<<<blocks_for(T), kThreads, 0, d.stream>>>(index, offsets, T);
  MS_CUDA_CHECK_LAUNCH();
  gather_sum_kernel<<<blocks_for(T * h), kThreads, 0, d.stream>>>(out, src, probs, offsets, index,
                                                                  T, h);
  MS_CUDA_CHECK_LAUNCH();
}

// One block per routed copy i: dpermuted[i] = probs[i] * dout[rows[i]], and
// dprobs[i] = <dout[rows[i]], permuted[i]> in double (block reduction).
__global__ void unpermute_backward_kernel(
    float* dpermuted /*[R,h] =*/, float* dprobs /*[R] = or null*/, const float* dout /*[T,h]*/,
    const float* permuted /*[R,h]*/, const float* probs /*[R] or null*/,
    const int32_t* rows /*[R]*/, int64_t T, int64_t R, int64_t h) {
  __shared__ double shared[32];
  for (int64_t i = blockIdx.x; i < R; i += gridDim.x) {
    float* dp = dpermuted + i * h;
    const int32_t t = rows[i];
    if (!routed(t, T)) {  // a padding slot
      for (int64_t c = threadIdx.x; c < h; c += blockDim.x) dp[c] = 0.0f;
      if (dprobs != nullptr && threadIdx.x == 0) dprobs[i] = 0.0f;
      continue;
    }
    const float* g = dout + static_cast<int64_t>(t) * h;
    const float* p = permuted + i * h;
    const float s = probs != nullptr ? probs[i] : 1.0f;
    double acc = 0.0;
    for (int64_t c = threadIdx.x; c < h; c += blockDim.x) {
      const float gc = g[c];
      dp[c] = __fmul_rn(s, gc);
      if (dprobs != nullptr) acc += static_cast<double>(gc) * p[c];  // exact product
    }
    if (dprobs != nullptr) {
      acc = block_sum(acc, shared);
      if (threadIdx.x == 0) dprobs[i] = static_cast<float>(acc);
    }
  }
}

}  // namespace

void moe_permute_forward(const KernelContext& kc, float* out, const float* x, const int32_t* rows,
                         int64_t R, int64_t h) {
  if (h <= 0) return;
  launch_map(kc, R * h, [=] __device__(int64_t e) {
    const int64_t i = e / h, c = e - i * h;
    const int32_t t = rows[i];
    out[e] = t >= 0 ? x[static_cast<int64_t>(t) * h + c] : 0.0f;
  });
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
  if (R <= 0) return;
  // Threads per block: h rounded up to whole warps, at most kThreads (narrow rows waste none).
  const int threads = static_cast<int>(std::clamp<int64_t>((h + 31) / 32 * 32, 32, kThreads));
  const unsigned int blocks = static_cast<unsigned int>(std::min<int64_t>(R, int64_t{1} << 30));
  unpermute_backward_kernel<<<blocks, threads, 0, stream_of(kc)>>>(dpermuted, dprobs, dout,
                                                                   permuted, probs, rows, T, R, h);
  MS_CUDA_CHECK_LAUNCH();
}

void fill_moe_kernels(KernelTable& t) {
  t.moe_permute_forward = moe_permute_forward;
  t.moe_permute_backward = moe_permute_backward;
  t.moe_unpermute_forward = moe_unpermute_forward;
  t.moe_unpermute_backward = moe_unpermute_backward;
}

}  // namespace mindspeed::cuda
