// CUDA embedding lookup and its backward (kernel_signatures.inc; the specification is
// ref/embedding.cpp: Megatron's VocabParallelEmbedding lookup without the all-reduce, llm.c's
// encoder kernels). The forward copies rows (rows on gridDim.y, columns on gridDim.x).
// The backward is deterministic without atomics and bit for bit the reference's: the tokens
// are sorted by their row (CUB's stable radix sort of the keys (row << 32 | token) on the row
// bits, so the tokens of a row stay in increasing order), then the block of the first token of
// each row's run owns that row of dwte, its threads one column each, and adds the run's dout
// rows into it one token after the other: per element the reference's additions in the
// reference's order.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <limits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.cuh"

namespace mindspeed::cuda {
namespace {

/// Grid of a row kernel: columns on x (threads a multiple of 32, at most kThreads), rows on y.
struct RowGrid {
  dim3 blocks;
  unsigned int threads;
};

RowGrid row_grid(int64_t rows, int64_t C) {
  const auto threads =
      static_cast<unsigned int>(std::clamp<int64_t>((C + 31) / 32 * 32, 32, kThreads));
  const int64_t x = std::min<int64_t>((C + threads - 1) / threads, 1024);
  const int64_t y = std::min<int64_t>(rows, 65535);
  return {dim3(static_cast<unsigned int>(x), static_cast<unsigned int>(y)), threads};
}

/// for (c) over a row's columns, on the grid's x dimension.
#define MS_COLUMN_LOOP(c, C)                                                             \
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < (C); \
       c += static_cast<int64_t>(blockDim.x) * gridDim.x)

__global__ void embedding_forward_kernel(float* __restrict__ out, const int32_t* __restrict__ ids,
                                         const float* __restrict__ wte, int64_t vocab_start,
                                         int64_t V, int64_t N, int64_t C) {
  for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
    const int64_t row = static_cast<int64_t>(ids[n]) - vocab_start;
    float* o = out + n * C;
    if (row >= 0 && row < V) {
      const float* w = wte + row * C;
      MS_COLUMN_LOOP(c, C) o[c] = w[c];
    } else {
      MS_COLUMN_LOOP(c, C) o[c] = 0.0f;
    }
  }
}

/// keys[n] = (row << 32) | n, row = V for a token off this rank (sorted last, skipped).
__global__ void embedding_keys_kernel(uint64_t* __restrict__ keys, const int32_t* __restrict__ ids,
                                      int64_t vocab_start, int64_t V, int64_t N) {
  MS_GRID_STRIDE_LOOP(n, N) {
    int64_t row = static_cast<int64_t>(ids[n]) - vocab_start;
    if (row < 0 || row >= V) row = V;
    keys[n] = (static_cast<uint64_t>(row) << 32) | static_cast<uint64_t>(n);
  }
}

// Sorted position i starts a run when its row differs from position i - 1's; the block of a
// run's start adds the run's dout rows, in token order, into its dwte row.
__global__ void embedding_backward_kernel(float* __restrict__ dwte, const float* __restrict__ dout,
                                          const uint64_t* __restrict__ sorted, int64_t V, int64_t N,
                                          int64_t C) {
  for (int64_t i = blockIdx.y; i < N; i += gridDim.y) {
    const uint64_t row = sorted[i] >> 32;
    if (row >= static_cast<uint64_t>(V) || (i > 0 && (sorted[i - 1] >> 32) == row)) continue;
    float* d = dwte + static_cast<int64_t>(row) * C;
    MS_COLUMN_LOOP(c, C) {
      float acc = d[c];
      for (int64_t j = i; j < N && (sorted[j] >> 32) == row; ++j) {
        acc += dout[static_cast<int64_t>(sorted[j] & 0xffffffffu) * C + c];
      }
      d[c] = acc;
    }
  }
}

#undef MS_COLUMN_LOOP

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

void embedding_forward(const KernelContext& kc, float* out, const int32_t* ids, const float* wte,
                       int64_t vocab_start, int64_t V, int64_t N, int64_t C) {
  if (N <= 0 || C <= 0) return;
  const RowGrid g = row_grid(N, C);
  embedding_forward_kernel<<<g.blocks, g.threads, 0, stream_of(kc)>>>(out, ids, wte, vocab_start, V,
                                                                      N, C);
  MS_CUDA_CHECK_LAUNCH();
}

void embedding_backward(const KernelContext& kc, float* dwte, const float* dout, const int32_t* ids,
                        int64_t vocab_start, int64_t V, int64_t N, int64_t C) {
  if (N <= 0 || C <= 0 || V <= 0) return;
  MS_CHECK(N <= std::numeric_limits<int32_t>::max() && V < std::numeric_limits<int32_t>::max(),
           "embedding_backward: N = ", N, ", V = ", V, " beyond the sort's 32-bit fields");
  cudaStream_t stream = stream_of(kc);
  // Sort on the row bits only [32, 32 + bits of V): the token bits are already in order and the
  // sort is stable.
  const int end_bit = 32 + std::bit_width(static_cast<uint64_t>(V));
  const int items = static_cast<int>(N);
  size_t sort_bytes = 0;
  MS_CUDA_CHECK(
      cub::DeviceRadixSort::SortKeys(nullptr, sort_bytes, static_cast<const uint64_t*>(nullptr),
                                     static_cast<uint64_t*>(nullptr), items, 32, end_bit, stream));
  const size_t keys_bytes = align_up(static_cast<size_t>(N) * sizeof(uint64_t));
  ScratchBuffer buffer(kc, 2 * keys_bytes + sort_bytes);
  auto* keys = reinterpret_cast<uint64_t*>(buffer.as<char>());
  auto* sorted = reinterpret_cast<uint64_t*>(buffer.as<char>() + keys_bytes);
  void* sort_temp = buffer.as<char>() + 2 * keys_bytes;
  embedding_keys_kernel<<<blocks_for(N), kThreads, 0, stream>>>(keys, ids, vocab_start, V, N);
  MS_CUDA_CHECK_LAUNCH();
  MS_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(sort_temp, sort_bytes, keys, sorted, items, 32,
                                               end_bit, stream));
  const RowGrid g = row_grid(N, C);
  embedding_backward_kernel<<<g.blocks, g.threads, 0, stream>>>(dwte, dout, sorted, V, N, C);
  MS_CUDA_CHECK_LAUNCH();
}

void fill_embedding_kernels(KernelTable& t) {
  t.embedding_forward = embedding_forward;
  t.embedding_backward = embedding_backward;
}

}  // namespace mindspeed::cuda
