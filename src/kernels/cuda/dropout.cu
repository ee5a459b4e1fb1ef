// CUDA dropout and bias-dropout-add (kernel_signatures.inc; the specification is
// ref/dropout.cpp, Megatron's bias_dropout_add). Element i is kept when the Philox uniform of
// its global index (DropoutSpec: index_offset + i for the flat kernels, row_index(n, c, C) for
// the [N, C] row kernels, the [s, b, C] mapping with seq_index included) is >= p, and scaled
// by 1/(1-p). The uniforms come from kernels/cuda/philox.cuh, a port of core/rng.cpp, so the
// masks are bit for bit the reference's; the scale is computed on the host with the
// reference's own expression, and each kept value is one rounded product (and, for
// bias-dropout-add, one rounded sum: no fused multiply-add), as on the CPU.
// Each thread draws one Philox block (4 words, 4 consecutive global indices) at a time.
// bias_dropout_add_backward's dbias is a two-pass column reduction: per-block partial sums of
// a fixed slice of rows, then the partials added in block order (deterministic, no atomics).
#include <algorithm>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.cuh"
#include "kernels/cuda/philox.cuh"

namespace mindspeed::cuda {
namespace {

/// The Philox block of global index g is g / 4: (first block + j) wraps like the index does.
constexpr uint64_t kBlockMask = (uint64_t{1} << 62) - 1;
/// Row blocks of a row kernel's grid (rows beyond it are grid-strided).
constexpr int64_t kMaxRowBlocks = int64_t{1} << 20;
/// Blocks (row slices) of the dbias reduction's first pass.
constexpr int64_t kPartialBlocks = 512;
/// Columns whose per-block dbias accumulators fit in shared memory (48 KiB, no opt-in).
constexpr int64_t kMaxSharedColumns = 12288;

struct DropoutArgs {
  DropoutSpec spec;
  float scale;  ///< 1/(1-p), the reference's expression evaluated on the host
  bool active;
};

DropoutArgs dropout_args(const DropoutSpec& d) { return {d, 1.0f / (1.0f - d.p), d.active()}; }

/// The factor of the element whose Philox word is `word`: scale if kept, 0 if dropped.
__device__ inline float keep_factor(const DropoutArgs& a, uint32_t word) {
  return philox_word_to_uniform(word) >= a.spec.p ? a.scale : 0.0f;
}

/// Threads for a row of `slots` Philox blocks: a multiple of 32, at most kThreads.
unsigned int row_threads(int64_t slots) {
  return static_cast<unsigned int>(std::clamp<int64_t>((slots + 31) / 32 * 32, 32, kThreads));
}

// out[i] = in[i] * factor(index_offset + i). Slot j is Philox block index_offset / 4 + j, which
// covers the local elements [4j - off, 4j - off + 4), off = index_offset % 4. out may be in.
__global__ void dropout_flat_kernel(float* out, const float* in, int64_t n, DropoutArgs a) {
  const int64_t off = static_cast<int64_t>(a.spec.index_offset % 4);
  const int64_t slots = (off + n + 3) / 4;
  const uint64_t first = a.spec.index_offset / 4;
  MS_GRID_STRIDE_LOOP(j, slots) {
    const uint4 words =
        a.active ? philox_block(a.spec.rng, (first + static_cast<uint64_t>(j)) & kBlockMask)
                 : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const int64_t i = 4 * j + lane - off;
      if (i >= 0 && i < n)
        out[i] = in[i] * (a.active ? keep_factor(a, philox_word(words, lane)) : 1.0f);
    }
  }
}

// out = residual + (inp + bias) * factor, one block per row (grid-strided). Row n's element c
// has global index row_index(n, 0, C) + c; the row's slots are Philox blocks as above.
// out may alias inp or residual (each element is read and written by one thread).
__global__ void bias_dropout_add_forward_kernel(float* out, const float* inp,
                                                const float* __restrict__ bias,
                                                const float* residual, int64_t N, int64_t C,
                                                DropoutArgs a) {
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const uint64_t base = a.spec.row_index(n, 0, C);
    const int64_t off = static_cast<int64_t>(base % 4);
    const int64_t slots = (off + C + 3) / 4;
    for (int64_t j = threadIdx.x; j < slots; j += blockDim.x) {
      const uint4 words =
          a.active ? philox_block(a.spec.rng, ((base >> 2) + static_cast<uint64_t>(j)) & kBlockMask)
                   : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int lane = 0; lane < 4; ++lane) {
        const int64_t c = 4 * j + lane - off;
        if (c < 0 || c >= C) continue;
        const int64_t i = n * C + c;
        const float x = inp[i] + (bias != nullptr ? bias[c] : 0.0f);
        const float factor = a.active ? keep_factor(a, philox_word(words, lane)) : 1.0f;
        out[i] = __fadd_rn(residual[i], __fmul_rn(x, factor));
      }
    }
  }
}

// dinp = dout * factor, one block per row. With kDbias, block b also adds the dinp of its rows
// (b, b + gridDim.x, ...), in row order, into acc[c]: shared memory when `shared_acc`, else
// its own row of `partial`; at the end the block's sums are in partial[b * C + c]. Which thread
// holds column c changes with the row's Philox alignment, hence a barrier between rows.
template <bool kDbias>
__global__ void bias_dropout_add_backward_kernel(float* dinp, const float* dout,
                                                 float* __restrict__ partial, bool shared_acc,
                                                 int64_t N, int64_t C, DropoutArgs a) {
  extern __shared__ float shared[];
  [[maybe_unused]] float* acc = nullptr;
  if constexpr (kDbias) {
    acc = shared_acc ? shared : partial + static_cast<int64_t>(blockIdx.x) * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) acc[c] = 0.0f;
  }
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    if constexpr (kDbias) __syncthreads();
    const uint64_t base = a.spec.row_index(n, 0, C);
    const int64_t off = static_cast<int64_t>(base % 4);
    const int64_t slots = (off + C + 3) / 4;
    for (int64_t j = threadIdx.x; j < slots; j += blockDim.x) {
      const uint4 words =
          a.active ? philox_block(a.spec.rng, ((base >> 2) + static_cast<uint64_t>(j)) & kBlockMask)
                   : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int lane = 0; lane < 4; ++lane) {
        const int64_t c = 4 * j + lane - off;
        if (c < 0 || c >= C) continue;
        const int64_t i = n * C + c;
        const float g =
            __fmul_rn(dout[i], a.active ? keep_factor(a, philox_word(words, lane)) : 1.0f);
        dinp[i] = g;
        if constexpr (kDbias) acc[c] += g;
      }
    }
  }
  if constexpr (kDbias) {
    if (shared_acc) {
      __syncthreads();
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        partial[static_cast<int64_t>(blockIdx.x) * C + c] = acc[c];
    }
  }
}

// out[c] += sum over r < R of partial[r * C + c], in a fixed order: thread row ty of a (32, 8)
// block sums r = ty, ty + 8, ... in turn, then the 8 sums are added in ty order.
__global__ void add_column_partials(float* __restrict__ out, const float* __restrict__ partial,
                                    int64_t R, int64_t C) {
  __shared__ float sums[8][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t c0 = static_cast<int64_t>(blockIdx.x) * 32; c0 < C;
       c0 += static_cast<int64_t>(gridDim.x) * 32) {
    const int64_t c = c0 + tx;
    float s = 0.0f;
    if (c < C) {
      for (int64_t r = ty; r < R; r += 8) s += partial[r * C + c];
    }
    sums[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && c < C) {
      float total = sums[0][tx];
      for (int k = 1; k < 8; ++k) total += sums[k][tx];
      out[c] += total;
    }
    __syncthreads();
  }
}

}  // namespace

void dropout_forward(const KernelContext& kc, float* out, const float* inp, int64_t n,
                     const DropoutSpec& dropout) {
  if (n <= 0) return;
  const int64_t slots =
      (static_cast<int64_t>(dropout.index_offset % 4) + n + 3) / 4;  // as the kernel's
  dropout_flat_kernel<<<blocks_for(slots), kThreads, 0, stream_of(kc)>>>(out, inp, n,
                                                                         dropout_args(dropout));
  MS_CUDA_CHECK_LAUNCH();
}

void dropout_backward(const KernelContext& kc, float* dinp, const float* dout, int64_t n,
                      const DropoutSpec& dropout) {
  dropout_forward(kc, dinp, dout, n, dropout);  // the same mask and scale
}

void bias_dropout_add_forward(const KernelContext& kc, float* out, const float* inp,
                              const float* bias, const float* residual, int64_t N, int64_t C,
                              const DropoutSpec& dropout) {
  if (N <= 0 || C <= 0) return;
  const auto blocks = static_cast<unsigned int>(std::min(N, kMaxRowBlocks));
  bias_dropout_add_forward_kernel<<<blocks, row_threads((C + 3) / 4 + 1), 0, stream_of(kc)>>>(
      out, inp, bias, residual, N, C, dropout_args(dropout));
  MS_CUDA_CHECK_LAUNCH();
}

void bias_dropout_add_backward(const KernelContext& kc, float* dinp, float* dbias,
                               const float* dout, int64_t N, int64_t C,
                               const DropoutSpec& dropout) {
  if (N <= 0 || C <= 0) return;
  const unsigned int threads = row_threads((C + 3) / 4 + 1);
  const DropoutArgs args = dropout_args(dropout);
  cudaStream_t stream = stream_of(kc);
  if (dbias == nullptr) {
    const auto blocks = static_cast<unsigned int>(std::min(N, kMaxRowBlocks));
    bias_dropout_add_backward_kernel<false>
        <<<blocks, threads, 0, stream>>>(dinp, dout, nullptr, false, N, C, args);
    MS_CUDA_CHECK_LAUNCH();
    return;
  }
  // Pass 1: R blocks, each the partial column sums of its rows; pass 2 adds them in order.
  const int64_t R = std::min(N, kPartialBlocks);
  ScratchBuffer partial(kc, static_cast<size_t>(R * C) * sizeof(float));
  const bool shared_acc = C <= kMaxSharedColumns;
  const size_t shared_bytes = shared_acc ? static_cast<size_t>(C) * sizeof(float) : 0;
  bias_dropout_add_backward_kernel<true>
      <<<static_cast<unsigned int>(R), threads, shared_bytes, stream>>>(
          dinp, dout, partial.as<float>(), shared_acc, N, C, args);
  MS_CUDA_CHECK_LAUNCH();
  const auto column_blocks = static_cast<unsigned int>(std::min<int64_t>((C + 31) / 32, 4096));
  add_column_partials<<<column_blocks, dim3(32, 8), 0, stream>>>(dbias, partial.as<float>(), R, C);
  MS_CUDA_CHECK_LAUNCH();
}

void fill_dropout_kernels(KernelTable& t) {
  t.bias_dropout_add_forward = bias_dropout_add_forward;
  t.bias_dropout_add_backward = bias_dropout_add_backward;
  t.dropout_forward = dropout_forward;
  t.dropout_backward = dropout_backward;
}

}  // namespace mindspeed::cuda
