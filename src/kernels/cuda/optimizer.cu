// CUDA optimizer kernels (kernel_signatures.inc; the specification is ref/adamw.cpp): fused
// AdamW (torch.optim.AdamW's operation order, apex FusedAdam's adam_w_mode), MindSpeed's EMA
// update, and the sum of squares of the gradient-norm clipping. AdamW and the EMA are
// elementwise and bit-identical with the reference: the step's constants are computed on the
// host by the reference's own expressions, and every float operation of an element is the
// reference's, in its order, with an explicitly rounded intrinsic (__fmul_rn, __fadd_rn,
// __fdiv_rn, __fsqrt_rn) so nvcc contracts nothing into a fused multiply-add. The sum of
// squares is a two-pass reduction in double (fixed shape: deterministic) handed to the host,
// which waits for the stream.
#include <cmath>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.cuh"

namespace mindspeed::cuda {
namespace {

/// The per-step scalars of ref::adamw_step, computed on the host as it computes them.
struct AdamWConstants {
  float decay, step_size, bc2_sqrt, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, grad_scale;
};

__global__ void adamw_kernel(float* param /*[n]*/, float* exp_avg /*[n]*/,
                             float* exp_avg_sq /*[n]*/, const float* grad /*[n]*/, int64_t n,
                             AdamWConstants c) {
  MS_GRID_STRIDE_LOOP(i, n) {
    const float g = __fmul_rn(grad[i], c.grad_scale);
    const float p = __fmul_rn(param[i], c.decay);
    const float m = __fadd_rn(__fmul_rn(exp_avg[i], c.beta1), __fmul_rn(g, c.one_minus_beta1));
    const float v =
        __fadd_rn(__fmul_rn(exp_avg_sq[i], c.beta2), __fmul_rn(__fmul_rn(g, g), c.one_minus_beta2));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), c.bc2_sqrt), c.eps);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = __fsub_rn(p, __fmul_rn(c.step_size, __fdiv_rn(m, denom)));
  }
}

__global__ void ema_kernel(float* ema /*[n]*/, const float* param /*[n]*/, int64_t n, float keep,
                           float take) {
  MS_GRID_STRIDE_LOOP(i, n) ema[i] = __fadd_rn(__fmul_rn(keep, ema[i]), __fmul_rn(take, param[i]));
}

// Per-block partial sums of x^2 in double (each square is exact in double).
__global__ void sum_of_squares_partial(double* partial, const float* x, int64_t n) {
  __shared__ double shared[32];
  double s = 0.0;
  MS_GRID_STRIDE_LOOP(i, n) {
    const double v = x[i];
    s += v * v;
  }
  s = block_sum(s, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// One block adds the partials (in a fixed order).
__global__ void sum_of_squares_total(double* total, const double* partial, int blocks) {
  __shared__ double shared[32];
  double s = 0.0;
  for (int b = threadIdx.x; b < blocks; b += blockDim.x) s += partial[b];
  s = block_sum(s, shared);
  if (threadIdx.x == 0) *total = s;
}

// Blocks of the two-pass reduction: enough to fill the GPU, few enough to add in one block.
constexpr unsigned int kReductionBlocks = 1024;

}  // namespace

void adamw_step(const KernelContext& kc, float* param, float* exp_avg, float* exp_avg_sq,
                const float* grad, int64_t n, float lr, float beta1, float beta2, float eps,
                float weight_decay, int64_t step, float grad_scale) {
  if (n <= 0) return;
  // ref::adamw_step's expressions, in double on the host, rounded to float as it rounds them.
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  AdamWConstants c;
  c.decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  c.step_size = static_cast<float>(static_cast<double>(lr) / bc1);
  c.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  c.beta1 = beta1;
  c.beta2 = beta2;
  c.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  c.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  c.eps = eps;
  c.grad_scale = grad_scale;
  adamw_kernel<<<blocks_for(n), kThreads, 0, stream_of(kc)>>>(param, exp_avg, exp_avg_sq, grad, n,
                                                              c);
  MS_CUDA_CHECK_LAUNCH();
}

void ema_update(const KernelContext& kc, float* ema, const float* param, int64_t n, float decay) {
  if (n <= 0) return;
  const float keep = decay, take = 1.0f - decay;
  ema_kernel<<<blocks_for(n), kThreads, 0, stream_of(kc)>>>(ema, param, n, keep, take);
  MS_CUDA_CHECK_LAUNCH();
}

double sum_of_squares(const KernelContext& kc, const float* x, int64_t n) {
  if (n <= 0) return 0.0;
  DeviceState& d = device_state(kc);
  auto* partial = static_cast<double*>(d.scratch);
  auto* total = partial + kReductionBlocks;
  const unsigned int blocks = std::min(kReductionBlocks, blocks_for(n));
  sum_of_squares_partial<<<blocks, kThreads, 0, d.stream>>>(partial, x, n);
  MS_CUDA_CHECK_LAUNCH();
  sum_of_squares_total<<<1, kThreads, 0, d.stream>>>(total, partial, static_cast<int>(blocks));
  MS_CUDA_CHECK_LAUNCH();
  MS_CUDA_CHECK(
      cudaMemcpyAsync(d.host_scratch, total, sizeof(double), cudaMemcpyDeviceToHost, d.stream));
  MS_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  return *static_cast<const double*>(d.host_scratch);
}

void fill_optimizer_kernels(KernelTable& t) {
  t.adamw_step = adamw_step;
  t.ema_update = ema_update;
  t.sum_of_squares = sum_of_squares;
}

}  // namespace mindspeed::cuda
