// CUDA GELU (exact erf form and the tanh form of --openai-gelu) and SwiGLU (MindSpeed's
// swiglu: y = silu(x[:F]) * x[F:]), forward and backward (kernel_signatures.inc; the
// specification is ref/activation.cpp). The math is the reference's, in double with the
// device's erfc / tanh / exp (a few ulps of double from glibc's), each result rounded to float
// once: within an ulp of the reference. fp64 is half rate on Hopper and these kernels are
// memory bound, so double costs no time there. GELU is a grid-stride map over the elements;
// SwiGLU runs rows on gridDim.y and columns on gridDim.x (no 64-bit division per element).
#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.cuh"

namespace mindspeed::cuda {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

template <GeluApproximation kApprox>
__device__ inline double gelu(double x) {
  if constexpr (kApprox == GeluApproximation::kTanh) {
    const double u = kSqrt2OverPi * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + tanh(u));
  } else {
    return 0.5 * x * erfc(-x * kInvSqrt2);
  }
}

template <GeluApproximation kApprox>
__device__ inline double gelu_grad(double x) {
  if constexpr (kApprox == GeluApproximation::kTanh) {
    const double u = kSqrt2OverPi * (x + 0.044715 * x * x * x);
    const double t = tanh(u);
    const double du = kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * x * x);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
  } else {
    return 0.5 * erfc(-x * kInvSqrt2) + x * kInvSqrt2Pi * exp(-0.5 * x * x);
  }
}

template <GeluApproximation kApprox>
__global__ void gelu_forward_kernel(float* __restrict__ out, const float* __restrict__ inp,
                                    int64_t n) {
  MS_GRID_STRIDE_LOOP(i, n) out[i] = static_cast<float>(gelu<kApprox>(inp[i]));
}

template <GeluApproximation kApprox>
__global__ void gelu_backward_kernel(float* __restrict__ dinp, const float* __restrict__ dout,
                                     const float* __restrict__ inp, int64_t n) {
  MS_GRID_STRIDE_LOOP(i, n) dinp[i] = static_cast<float>(gelu_grad<kApprox>(inp[i]) * dout[i]);
}

/// for (f) over the row's columns, on the grid's x dimension.
#define MS_COLUMN_LOOP(f, F)                                                             \
  for (int64_t f = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; f < (F); \
       f += static_cast<int64_t>(blockDim.x) * gridDim.x)

__global__ void swiglu_forward_kernel(float* __restrict__ out, const float* __restrict__ inp,
                                      int64_t N, int64_t F) {
  for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
    const float* gate = inp + n * 2 * F;
    const float* up = gate + F;
    MS_COLUMN_LOOP(f, F) {
      const double g = gate[f];
      out[n * F + f] = static_cast<float>(g / (1.0 + exp(-g)) * up[f]);
    }
  }
}

__global__ void swiglu_backward_kernel(float* __restrict__ dinp, const float* __restrict__ dout,
                                       const float* __restrict__ inp, int64_t N, int64_t F) {
  for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
    const float* gate = inp + n * 2 * F;
    const float* up = gate + F;
    float* dgate = dinp + n * 2 * F;
    float* dup = dgate + F;
    MS_COLUMN_LOOP(f, F) {
      const double g = gate[f];
      const double sig = 1.0 / (1.0 + exp(-g));
      const double dy = dout[n * F + f];
      dup[f] = static_cast<float>(dy * g * sig);
      dgate[f] = static_cast<float>(dy * up[f] * sig * (1.0 + g * (1.0 - sig)));
    }
  }
}

#undef MS_COLUMN_LOOP

/// Grid of a row kernel: columns on x (threads a multiple of 32, at most kThreads), rows on y.
struct RowGrid {
  dim3 blocks;
  unsigned int threads;
};

RowGrid row_grid(int64_t N, int64_t F) {
  const auto threads =
      static_cast<unsigned int>(std::clamp<int64_t>((F + 31) / 32 * 32, 32, kThreads));
  const int64_t x = std::min<int64_t>((F + threads - 1) / threads, 1024);
  const int64_t y = std::min<int64_t>(N, 65535);
  return {dim3(static_cast<unsigned int>(x), static_cast<unsigned int>(y)), threads};
}

}  // namespace

void gelu_forward(const KernelContext& kc, float* out, const float* inp, int64_t n,
                  GeluApproximation approx) {
  if (n <= 0) return;
  if (approx == GeluApproximation::kTanh) {
    gelu_forward_kernel<GeluApproximation::kTanh>
        <<<blocks_for(n), kThreads, 0, stream_of(kc)>>>(out, inp, n);
  } else {
    gelu_forward_kernel<GeluApproximation::kErf>
        <<<blocks_for(n), kThreads, 0, stream_of(kc)>>>(out, inp, n);
  }
  MS_CUDA_CHECK_LAUNCH();
}

void gelu_backward(const KernelContext& kc, float* dinp, const float* dout, const float* inp,
                   int64_t n, GeluApproximation approx) {
  if (n <= 0) return;
  if (approx == GeluApproximation::kTanh) {
    gelu_backward_kernel<GeluApproximation::kTanh>
        <<<blocks_for(n), kThreads, 0, stream_of(kc)>>>(dinp, dout, inp, n);
  } else {
    gelu_backward_kernel<GeluApproximation::kErf>
        <<<blocks_for(n), kThreads, 0, stream_of(kc)>>>(dinp, dout, inp, n);
  }
  MS_CUDA_CHECK_LAUNCH();
}

void swiglu_forward(const KernelContext& kc, float* out, const float* inp, int64_t N, int64_t F) {
  if (N <= 0 || F <= 0) return;
  const RowGrid g = row_grid(N, F);
  swiglu_forward_kernel<<<g.blocks, g.threads, 0, stream_of(kc)>>>(out, inp, N, F);
  MS_CUDA_CHECK_LAUNCH();
}

void swiglu_backward(const KernelContext& kc, float* dinp, const float* dout, const float* inp,
                     int64_t N, int64_t F) {
  if (N <= 0 || F <= 0) return;
  const RowGrid g = row_grid(N, F);
  swiglu_backward_kernel<<<g.blocks, g.threads, 0, stream_of(kc)>>>(dinp, dout, inp, N, F);
  MS_CUDA_CHECK_LAUNCH();
}

void fill_activation_kernels(KernelTable& t) {
  t.gelu_forward = gelu_forward;
  t.gelu_backward = gelu_backward;
  t.swiglu_forward = swiglu_forward;
  t.swiglu_backward = swiglu_backward;
}

}  // namespace mindspeed::cuda
