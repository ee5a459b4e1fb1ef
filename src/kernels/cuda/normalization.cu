// CUDA LayerNorm and RMSNorm, forward and backward (kernel_signatures.inc; the specification
// is ref/normalization.cpp, llm.c's layernorm kernels and MindSpeed's rms_norm). One block per
// row (grid-strided), its statistics reduced with block_sum. The arithmetic is the
// reference's: row sums and the per-element math in double, each result rounded to float
// once (fp64 is half rate on Hopper and these kernels are memory bound), so the outputs are
// within an ulp or so of the reference; only the order of the row sums differs.
// The weight and bias gradients (+=) are a deterministic two-pass column reduction, no
// atomics: pass 1 runs a fixed number of blocks (a function of N only), block b taking rows
// b, b + R, ... in order and keeping its column sums in shared memory (in its own row of the
// partial buffer when they do not fit); pass 2 adds the R partial rows of each column in a
// fixed order and adds the total to the gradient. dinp accumulates (+=, residual stream).
#include <algorithm>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.cuh"

namespace mindspeed::cuda {
namespace {

/// Row blocks of a forward kernel's grid (rows beyond it are grid-strided).
constexpr int64_t kMaxRowBlocks = int64_t{1} << 20;
/// Blocks (row slices) of the gradient reduction's first pass.
constexpr int64_t kPartialBlocks = 512;
/// Partial sums per block that fit in shared memory (48 KiB, no opt-in).
constexpr int64_t kMaxSharedPartials = 12288;

/// Threads for a row of C elements: a multiple of 32, at most kThreads.
unsigned int row_threads(int64_t C) {
  return static_cast<unsigned int>(std::clamp<int64_t>((C + 31) / 32 * 32, 32, kThreads));
}

__global__ void layer_norm_forward_kernel(float* __restrict__ out, float* __restrict__ mean,
                                          float* __restrict__ rstd, const float* __restrict__ inp,
                                          const float* __restrict__ weight,
                                          const float* __restrict__ bias, int64_t N, int64_t C,
                                          float eps) {
  __shared__ double shared[32];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* x = inp + n * C;
    double sum = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) sum += x[c];
    const double m = block_sum(sum, shared) / static_cast<double>(C);
    double var = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const double d = x[c] - m;
      var += d * d;
    }
    var = block_sum(var, shared) / static_cast<double>(C);
    const double s = 1.0 / sqrt(var + eps);
    float* o = out + n * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const double norm = (x[c] - m) * s;
      o[c] = static_cast<float>(norm * weight[c] + (bias != nullptr ? bias[c] : 0.0f));
    }
    if (threadIdx.x == 0) {
      mean[n] = static_cast<float>(m);
      rstd[n] = static_cast<float>(s);
    }
  }
}

__global__ void rms_norm_forward_kernel(float* __restrict__ out, float* __restrict__ rstd,
                                        const float* __restrict__ inp,
                                        const float* __restrict__ weight, int64_t N, int64_t C,
                                        float eps) {
  __shared__ double shared[32];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* x = inp + n * C;
    double sq = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) sq += static_cast<double>(x[c]) * x[c];
    sq = block_sum(sq, shared);
    const double s = 1.0 / sqrt(sq / static_cast<double>(C) + eps);
    float* o = out + n * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      o[c] = static_cast<float>(x[c] * s * weight[c]);
    if (threadIdx.x == 0) rstd[n] = static_cast<float>(s);
  }
}

/// Pass 1's accumulators of block blockIdx.x: W floats in shared memory, or its partial row.
__device__ inline float* block_accumulators(float* shared_acc, bool in_shared, float* partial,
                                            int64_t W) {
  float* acc = in_shared ? shared_acc : partial + static_cast<int64_t>(blockIdx.x) * W;
  for (int64_t w = threadIdx.x; w < W; w += blockDim.x) acc[w] = 0.0f;
  __syncthreads();
  return acc;
}

/// Pass 1's end: shared accumulators to the block's partial row.
__device__ inline void store_accumulators(const float* acc, bool in_shared, float* partial,
                                          int64_t W) {
  if (!in_shared) return;
  __syncthreads();
  for (int64_t w = threadIdx.x; w < W; w += blockDim.x)
    partial[static_cast<int64_t>(blockIdx.x) * W + w] = acc[w];
}

// Pass 1 of layer_norm_backward: dinp rows, and the block's dweight (partial columns [0, C))
// and dbias ([C, 2C), with kBias) sums over its rows.
template <bool kBias>
__global__ void layer_norm_backward_kernel(float* __restrict__ dinp, float* __restrict__ partial,
                                           bool in_shared, const float* __restrict__ dout,
                                           const float* __restrict__ inp,
                                           const float* __restrict__ weight,
                                           const float* __restrict__ mean,
                                           const float* __restrict__ rstd, int64_t N, int64_t C) {
  extern __shared__ float shared_acc[];
  __shared__ double shared[32];
  const int64_t W = kBias ? 2 * C : C;
  float* acc = block_accumulators(shared_acc, in_shared, partial, W);
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* x = inp + n * C;
    const float* dy = dout + n * C;
    const double m = mean[n], s = rstd[n];
    double dnorm_mean = 0.0, dnorm_norm_mean = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const double norm = (x[c] - m) * s;
      const double dnorm = static_cast<double>(weight[c]) * dy[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean = block_sum(dnorm_mean, shared) / static_cast<double>(C);
    dnorm_norm_mean = block_sum(dnorm_norm_mean, shared) / static_cast<double>(C);
    float* dx = dinp + n * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const double norm = (x[c] - m) * s;
      const double dnorm = static_cast<double>(weight[c]) * dy[c];
      dx[c] += static_cast<float>((dnorm - dnorm_mean - norm * dnorm_norm_mean) * s);
      acc[c] += static_cast<float>(norm * dy[c]);
      if constexpr (kBias) acc[C + c] += dy[c];
    }
  }
  store_accumulators(acc, in_shared, partial, W);
}

// Pass 1 of rms_norm_backward: dinp rows and the block's dweight sums (partial columns [0, C)).
__global__ void rms_norm_backward_kernel(float* __restrict__ dinp, float* __restrict__ partial,
                                         bool in_shared, const float* __restrict__ dout,
                                         const float* __restrict__ inp,
                                         const float* __restrict__ weight,
                                         const float* __restrict__ rstd, int64_t N, int64_t C) {
  extern __shared__ float shared_acc[];
  __shared__ double shared[32];
  float* acc = block_accumulators(shared_acc, in_shared, partial, C);
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* x = inp + n * C;
    const float* dy = dout + n * C;
    const double s = rstd[n];
    // y = x*s*w, s = (mean(x^2)+eps)^-1/2: dx = s*(w*dy) - x * s^3 * mean(x*w*dy).
    double dot = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      dot += static_cast<double>(x[c]) * weight[c] * dy[c];
    dot = block_sum(dot, shared) / static_cast<double>(C);
    float* dx = dinp + n * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      dx[c] += static_cast<float>(s * weight[c] * dy[c] - x[c] * s * s * s * dot);
      acc[c] += static_cast<float>(x[c] * s * dy[c]);
    }
  }
  store_accumulators(acc, in_shared, partial, C);
}

// Pass 2: out0[w] (w < C) or out1[w - C] (w >= C) += sum over r < R of partial[r * W + w], in
// a fixed order: thread row ty of a (32, 8) block sums r = ty, ty + 8, ... in turn, then the 8
// sums are added in ty order.
__global__ void add_column_partials(float* __restrict__ out0, float* __restrict__ out1,
                                    const float* __restrict__ partial, int64_t R, int64_t C,
                                    int64_t W) {
  __shared__ float sums[8][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t w0 = static_cast<int64_t>(blockIdx.x) * 32; w0 < W;
       w0 += static_cast<int64_t>(gridDim.x) * 32) {
    const int64_t w = w0 + tx;
    float s = 0.0f;
    if (w < W) {
      for (int64_t r = ty; r < R; r += 8) s += partial[r * W + w];
    }
    sums[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && w < W) {
      float total = sums[0][tx];
      for (int k = 1; k < 8; ++k) total += sums[k][tx];
      float* dst = w < C ? out0 + w : out1 + (w - C);
      *dst += total;
    }
    __syncthreads();
  }
}

void launch_add_column_partials(cudaStream_t stream, float* out0, float* out1, const float* partial,
                                int64_t R, int64_t C, int64_t W) {
  const auto blocks = static_cast<unsigned int>(std::min<int64_t>((W + 31) / 32, 4096));
  add_column_partials<<<blocks, dim3(32, 8), 0, stream>>>(out0, out1, partial, R, C, W);
  MS_CUDA_CHECK_LAUNCH();
}

/// What pass 1 of a backward with weight (and bias) sums is launched with.
struct ColumnPass {
  unsigned int blocks;  ///< R row slices
  size_t shared_bytes;  ///< the block's W accumulators in shared memory, or 0
  float* partial;       ///< [R, W]: the blocks' sums
  bool in_shared;
};

/// A backward with column sums: pass1(ColumnPass) launches the row kernel over R row slices with W
/// = C accumulators per block (out1 null: weights only) or 2C (weights, then biases); pass 2 adds
/// the R partial rows into out0 [C] and out1 [C].
template <typename Pass1>
void backward_with_column_sums(const KernelContext& kc, int64_t N, int64_t C, float* out0,
                               float* out1, const Pass1& pass1) {
  const int64_t R = std::min(N, kPartialBlocks);
  const int64_t W = out1 != nullptr ? 2 * C : C;
  ScratchBuffer partial(kc, static_cast<size_t>(R * W) * sizeof(float));
  const bool in_shared = W <= kMaxSharedPartials;
  pass1(ColumnPass{static_cast<unsigned int>(R),
                   in_shared ? static_cast<size_t>(W) * sizeof(float) : 0, partial.as<float>(),
                   in_shared});
  MS_CUDA_CHECK_LAUNCH();
  launch_add_column_partials(stream_of(kc), out0, out1, partial.as<float>(), R, C, W);
}

// The 2D tensor-parallel norm's pieces (kernel_signatures.inc), one block per row like the
// whole-row kernels above; the backward's weight and bias sums use the same two passes.
__global__ void norm_partial_moments_kernel(float* __restrict__ out, const float* __restrict__ inp,
                                            const float* __restrict__ center, int power,
                                            float scale, int64_t N, int64_t C) {
  __shared__ double shared[32];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* x = inp + n * C;
    const double m = center != nullptr ? center[n] : 0.0;
    double sum = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const double d = x[c] - m;
      sum += power == 1 ? d : d * d;
    }
    sum = block_sum(sum, shared);
    if (threadIdx.x == 0) out[n] = static_cast<float>(sum * scale);
  }
}

__global__ void norm_apply_kernel(float* __restrict__ out, float* __restrict__ rstd,
                                  const float* __restrict__ inp, const float* __restrict__ mean,
                                  const float* __restrict__ sq_sums,
                                  const float* __restrict__ weight, const float* __restrict__ bias,
                                  int64_t H, float eps, int64_t N, int64_t C) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const double m = mean != nullptr ? mean[n] : 0.0;
    const double s = 1.0 / sqrt(sq_sums[n] / static_cast<double>(H) + eps);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const double norm = (inp[n * C + c] - m) * s;
      out[n * C + c] = static_cast<float>(norm * weight[c] + (bias != nullptr ? bias[c] : 0.0f));
    }
    if (threadIdx.x == 0) rstd[n] = static_cast<float>(s);
  }
}

__global__ void norm_backward_partials_kernel(
    float* __restrict__ sums, const float* __restrict__ dout, const float* __restrict__ inp,
    const float* __restrict__ weight, const float* __restrict__ mean,
    const float* __restrict__ rstd, int64_t N, int64_t C) {
  __shared__ double shared[32];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const double m = mean != nullptr ? mean[n] : 0.0, s = rstd[n];
    double g_sum = 0.0, g_xhat = 0.0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const double g = static_cast<double>(weight[c]) * dout[n * C + c];
      g_sum += g;
      g_xhat += g * (inp[n * C + c] - m) * s;
    }
    g_sum = block_sum(g_sum, shared);
    g_xhat = block_sum(g_xhat, shared);
    if (threadIdx.x == 0) {
      sums[2 * n] = static_cast<float>(g_sum);
      sums[2 * n + 1] = static_cast<float>(g_xhat);
    }
  }
}

// Pass 1 of norm_backward_apply: dinp rows and the block's dweight ([0, C)) and dbias ([C, 2C),
// with kBias) sums over its rows.
template <bool kBias>
__global__ void norm_backward_apply_kernel(
    float* __restrict__ dinp, float* __restrict__ partial, bool in_shared,
    const float* __restrict__ dout, const float* __restrict__ inp, const float* __restrict__ weight,
    const float* __restrict__ mean, const float* __restrict__ rstd,
    const float* __restrict__ totals, int64_t H, int64_t N, int64_t C) {
  extern __shared__ float shared_acc[];
  const int64_t W = kBias ? 2 * C : C;
  float* acc = block_accumulators(shared_acc, in_shared, partial, W);
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const double m = mean != nullptr ? mean[n] : 0.0, s = rstd[n];
    const double g_mean = mean != nullptr ? totals[2 * n] / static_cast<double>(H) : 0.0;
    const double g_xhat_mean = totals[2 * n + 1] / static_cast<double>(H);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const double dy = dout[n * C + c];
      const double xhat = (inp[n * C + c] - m) * s;
      dinp[n * C + c] += static_cast<float>(
          (static_cast<double>(weight[c]) * dy - g_mean - xhat * g_xhat_mean) * s);
      acc[c] += static_cast<float>(xhat * dy);
      if constexpr (kBias) acc[C + c] += static_cast<float>(dy);
    }
  }
  store_accumulators(acc, in_shared, partial, W);
}

}  // namespace

void layer_norm_forward(const KernelContext& kc, float* out, float* mean, float* rstd,
                        const float* inp, const float* weight, const float* bias, int64_t N,
                        int64_t C, float eps) {
  if (N <= 0) return;
  const auto blocks = static_cast<unsigned int>(std::min(N, kMaxRowBlocks));
  layer_norm_forward_kernel<<<blocks, row_threads(C), 0, stream_of(kc)>>>(out, mean, rstd, inp,
                                                                          weight, bias, N, C, eps);
  MS_CUDA_CHECK_LAUNCH();
}

void layer_norm_backward(const KernelContext& kc, float* dinp, float* dweight, float* dbias,
                         const float* dout, const float* inp, const float* weight,
                         const float* mean, const float* rstd, int64_t N, int64_t C) {
  if (N <= 0 || C <= 0) return;
  backward_with_column_sums(kc, N, C, dweight, dbias, [&](const ColumnPass& p) {
    if (dbias != nullptr) {
      layer_norm_backward_kernel<true><<<p.blocks, row_threads(C), p.shared_bytes, stream_of(kc)>>>(
          dinp, p.partial, p.in_shared, dout, inp, weight, mean, rstd, N, C);
    } else {
      layer_norm_backward_kernel<false>
          <<<p.blocks, row_threads(C), p.shared_bytes, stream_of(kc)>>>(
              dinp, p.partial, p.in_shared, dout, inp, weight, mean, rstd, N, C);
    }
  });
}

void rms_norm_forward(const KernelContext& kc, float* out, float* rstd, const float* inp,
                      const float* weight, int64_t N, int64_t C, float eps) {
  if (N <= 0) return;
  const auto blocks = static_cast<unsigned int>(std::min(N, kMaxRowBlocks));
  rms_norm_forward_kernel<<<blocks, row_threads(C), 0, stream_of(kc)>>>(out, rstd, inp, weight, N,
                                                                        C, eps);
  MS_CUDA_CHECK_LAUNCH();
}

void rms_norm_backward(const KernelContext& kc, float* dinp, float* dweight, const float* dout,
                       const float* inp, const float* weight, const float* rstd, int64_t N,
                       int64_t C) {
  if (N <= 0 || C <= 0) return;
  backward_with_column_sums(kc, N, C, dweight, nullptr, [&](const ColumnPass& p) {
    rms_norm_backward_kernel<<<p.blocks, row_threads(C), p.shared_bytes, stream_of(kc)>>>(
        dinp, p.partial, p.in_shared, dout, inp, weight, rstd, N, C);
  });
}

void norm_partial_moments(const KernelContext& kc, float* out, const float* inp,
                          const float* center, int power, float scale, int64_t N, int64_t C) {
  if (N <= 0) return;
  const auto blocks = static_cast<unsigned int>(std::min(N, kMaxRowBlocks));
  norm_partial_moments_kernel<<<blocks, row_threads(C), 0, stream_of(kc)>>>(out, inp, center, power,
                                                                            scale, N, C);
  MS_CUDA_CHECK_LAUNCH();
}

void norm_apply(const KernelContext& kc, float* out, float* rstd, const float* inp,
                const float* mean, const float* sq_sums, const float* weight, const float* bias,
                int64_t H, float eps, int64_t N, int64_t C) {
  if (N <= 0) return;
  const auto blocks = static_cast<unsigned int>(std::min(N, kMaxRowBlocks));
  norm_apply_kernel<<<blocks, row_threads(C), 0, stream_of(kc)>>>(out, rstd, inp, mean, sq_sums,
                                                                  weight, bias, H, eps, N, C);
  MS_CUDA_CHECK_LAUNCH();
}

void norm_backward_partials(const KernelContext& kc, float* sums, const float* dout,
                            const float* inp, const float* weight, const float* mean,
                            const float* rstd, int64_t N, int64_t C) {
  if (N <= 0) return;
  const auto blocks = static_cast<unsigned int>(std::min(N, kMaxRowBlocks));
  norm_backward_partials_kernel<<<blocks, row_threads(C), 0, stream_of(kc)>>>(
      sums, dout, inp, weight, mean, rstd, N, C);
  MS_CUDA_CHECK_LAUNCH();
}

void norm_backward_apply(const KernelContext& kc, float* dinp, float* dweight, float* dbias,
                         const float* dout, const float* inp, const float* weight,
                         const float* mean, const float* rstd, const float* totals, int64_t H,
                         int64_t N, int64_t C) {
  if (N <= 0 || C <= 0) return;
  backward_with_column_sums(kc, N, C, dweight, dbias, [&](const ColumnPass& p) {
    if (dbias != nullptr) {
      norm_backward_apply_kernel<true><<<p.blocks, row_threads(C), p.shared_bytes, stream_of(kc)>>>(
          dinp, p.partial, p.in_shared, dout, inp, weight, mean, rstd, totals, H, N, C);
    } else {
      norm_backward_apply_kernel<false>
          <<<p.blocks, row_threads(C), p.shared_bytes, stream_of(kc)>>>(
              dinp, p.partial, p.in_shared, dout, inp, weight, mean, rstd, totals, H, N, C);
    }
  });
}

void fill_normalization_kernels(KernelTable& t) {
  t.layer_norm_forward = layer_norm_forward;
  t.layer_norm_backward = layer_norm_backward;
  t.rms_norm_forward = rms_norm_forward;
  t.rms_norm_backward = rms_norm_backward;
  t.norm_partial_moments = norm_partial_moments;
  t.norm_apply = norm_apply;
  t.norm_backward_partials = norm_backward_partials;
  t.norm_backward_apply = norm_backward_apply;
}

}  // namespace mindspeed::cuda
