// CUDA softmax cross-entropy kernels (kernel_signatures.inc; the specification is
// ref/cross_entropy.cpp): the fused loss and gradient on a full vocab row (tensor-parallel
// size 1; llm.c's fused classifier) and the three phases of Megatron's vocab-parallel cross
// entropy around its two all-reduces. One block per row, the threads striding over the
// vocab (coalesced); the row's maximum and sum are fixed-shape block reductions, so a run
// is bit-reproducible. The fused kernel finds the maximum and the sum of exponentials in one
// pass (online softmax, Milakov & Gimelshein 2018) and computes the gradient in a second: the
// exponentials are fp32 (expf), their sum is accumulated in double as the reference's, so the
// target's p - 1 does not cancel to an fp32 sum's rounding when p is near 1 (agreement with
// the reference to a few fp32 ulps, relative to each gradient element). The
// vocab-parallel phases follow the reference's fp32 formulas: the row maximum and the
// target's shifted logit are exact, the exponentials are expf's, and the finish's gradient
// is the reference's two roundings (x * (scale / s), then - scale at the target) bit for bit.
#include <cfloat>
#include <cmath>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.cuh"

namespace mindspeed::cuda {
namespace {

/// Blocks of a one-block-per-row kernel (the kernels loop over rows, so any N fits).
unsigned int row_blocks(int64_t N) {
  return static_cast<unsigned int>(std::min<int64_t>(N, int64_t{1} << 30));
}

/// The row's target, or -1 when it lies outside [0, V) (the reference reads out of bounds
/// there: a caller's error; the loss comes out NaN and the gradient has no one-hot).
__device__ inline int64_t checked_target(const int32_t* targets, int64_t n, int64_t V) {
  const int64_t t = targets[n];
  return t >= 0 && t < V ? t : -1;
}

// Block n handles row n: logsumexp by online softmax, then the gradient in place.
__global__ void softmax_cross_entropy_kernel(float* logits /*[N,V]*/, float* losses /*[N]*/,
                                             const int32_t* targets /*[N]*/,
                                             const float* grad_scale /*[N] or null*/, int64_t N,
                                             int64_t V, bool compute_grad) {
  __shared__ float shared_max[32];
  __shared__ double shared_sum[32];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    float* row = logits + n * V;
    const int64_t target = checked_target(targets, n, V);
    // Read before the reductions below: after them other threads overwrite the row.
    const float target_logit = threadIdx.x == 0 && target >= 0 ? row[target] : NAN;
    // Per thread: running maximum m and sum s of exp(x - m) over its strided columns. m starts
    // at the lowest finite value so a -inf logit adds exp(-inf) = 0, not exp(-inf + inf).
    float m = -FLT_MAX;
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
      const float x = row[j];
      if (x > m) {
        s = s * static_cast<double>(expf(m - x)) + 1.0;
        m = x;
      } else {
        s += static_cast<double>(expf(x - m));
      }
    }
    const float row_max = block_max(m, shared_max, -FLT_MAX);
    const double sum = block_sum(s * static_cast<double>(expf(m - row_max)), shared_sum);
    if (threadIdx.x == 0) {
      losses[n] = static_cast<float>(log(sum) + static_cast<double>(row_max) -
                                     static_cast<double>(target_logit));
    }
    if (!compute_grad) continue;
    const double scale = grad_scale != nullptr ? grad_scale[n] : 1.0;
    const float k = static_cast<float>(scale / sum);
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
      const float p = expf(row[j] - row_max);
      row[j] =
          j == target ? static_cast<float>((static_cast<double>(p) / sum - 1.0) * scale) : p * k;
    }
  }
}

// 1. row_max[r] = max_j logits[r][j] (NaN ignored, as the reference's comparison does).
__global__ void ce_row_max_kernel(float* row_max /*[N]*/, const float* logits /*[N,V]*/, int64_t N,
                                  int64_t V) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const float* x = logits + r * V;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) m = x[j] > m ? x[j] : m;
    m = block_max(m, shared, -INFINITY);
    if (threadIdx.x == 0) row_max[r] = m;
  }
}

// 2. sums[r] = sum_j exp(x[j] - m); sums[N + r] = x[target] - m on this rank's slice, else 0.
__global__ void ce_sum_exp_kernel(float* sums /*[2N]*/, float* logits /*[N,V]*/,
                                  const float* row_max /*[N]*/, const int32_t* targets /*[N]*/,
                                  int64_t N, int64_t V, int64_t vocab_start, bool compute_grad) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    float* x = logits + r * V;
    const float m = row_max[r];
    const int64_t local = static_cast<int64_t>(targets[r]) - vocab_start;
    if (threadIdx.x == 0 && !(local >= 0 && local < V)) sums[N + r] = 0.0f;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
      const float v = x[j];
      if (j == local)
        sums[N + r] = v - m;  // the thread that owns the target, before it overwrites it
      const float e = expf(v - m);
      if (compute_grad) x[j] = e;  // kept for the gradient
      s += e;
    }
    s = block_sum(s, shared);
    if (threadIdx.x == 0) sums[r] = s;
  }
}

// 3. Loss only: one thread per row.
__global__ void ce_finish_loss_kernel(float* losses /*[N]*/, const float* sums /*[2N]*/,
                                      int64_t N) {
  MS_GRID_STRIDE_LOOP(r, N) losses[r] = logf(sums[r]) - sums[N + r];
}

// 3. Loss and gradient: block r scales row r's exponentials by scale / s (the reference's
// rounding: one product, then one subtraction at the target; no contraction).
__global__ void ce_finish_grad_kernel(float* logits /*[N,V]*/, float* losses /*[N]*/,
                                      const float* sums /*[2N]*/, const int32_t* targets /*[N]*/,
                                      const float* grad_scale /*[N] or null*/, int64_t N, int64_t V,
                                      int64_t vocab_start) {
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const float s = sums[r];
    if (threadIdx.x == 0) losses[r] = logf(s) - sums[N + r];
    float* x = logits + r * V;
    const float scale = grad_scale != nullptr ? grad_scale[r] : 1.0f;
    const float k = __fdiv_rn(scale, s);
    const int64_t local = static_cast<int64_t>(targets[r]) - vocab_start;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
      float v = __fmul_rn(x[j], k);
      if (j == local) v = __fsub_rn(v, scale);
      x[j] = v;
    }
  }
}

}  // namespace

void softmax_cross_entropy(const KernelContext& kc, float* logits, float* losses,
                           const int32_t* targets, const float* grad_scale, int64_t N, int64_t V,
                           bool compute_grad) {
  if (N <= 0 || V <= 0) return;
  softmax_cross_entropy_kernel<<<row_blocks(N), kThreads, 0, stream_of(kc)>>>(
      logits, losses, targets, grad_scale, N, V, compute_grad);
  MS_CUDA_CHECK_LAUNCH();
}

void vocab_parallel_ce_row_max(const KernelContext& kc, float* row_max, const float* logits,
                               int64_t N, int64_t V) {
  if (N <= 0) return;
  ce_row_max_kernel<<<row_blocks(N), kThreads, 0, stream_of(kc)>>>(row_max, logits, N, V);
  MS_CUDA_CHECK_LAUNCH();
}

void vocab_parallel_ce_sum_exp(const KernelContext& kc, float* sums, float* logits,
                               const float* row_max, const int32_t* targets, int64_t N, int64_t V,
                               int64_t vocab_start, bool compute_grad) {
  if (N <= 0) return;
  ce_sum_exp_kernel<<<row_blocks(N), kThreads, 0, stream_of(kc)>>>(sums, logits, row_max, targets,
                                                                   N, V, vocab_start, compute_grad);
  MS_CUDA_CHECK_LAUNCH();
}

void vocab_parallel_ce_finish(const KernelContext& kc, float* logits, float* losses,
                              const float* sums, const int32_t* targets, const float* grad_scale,
                              int64_t N, int64_t V, int64_t vocab_start, bool compute_grad) {
  if (N <= 0) return;
  if (compute_grad) {
    ce_finish_grad_kernel<<<row_blocks(N), kThreads, 0, stream_of(kc)>>>(
        logits, losses, sums, targets, grad_scale, N, V, vocab_start);
  } else {
    ce_finish_loss_kernel<<<blocks_for(N), kThreads, 0, stream_of(kc)>>>(losses, sums, N);
  }
  MS_CUDA_CHECK_LAUNCH();
}

void fill_cross_entropy_kernels(KernelTable& t) {
  t.softmax_cross_entropy = softmax_cross_entropy;
  t.vocab_parallel_ce_row_max = vocab_parallel_ce_row_max;
  t.vocab_parallel_ce_sum_exp = vocab_parallel_ce_sum_exp;
  t.vocab_parallel_ce_finish = vocab_parallel_ce_finish;
}

}  // namespace mindspeed::cuda
