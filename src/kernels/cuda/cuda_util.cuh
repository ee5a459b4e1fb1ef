// Launch helpers for the CUDA backend's kernels: grid sizes for elementwise kernels (a
// grid-stride loop, so any n fits), launch_map for one-line elementwise kernels, ScratchBuffer
// for a call's intermediate results, and warp / block sums and maxima for row reductions.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"

namespace mindspeed::cuda {

constexpr int kThreads = 256;  ///< threads per block of the elementwise and row kernels

/// Blocks for a grid-stride loop over n elements (at most enough for one element per thread).
inline unsigned int blocks_for(int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned int>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 20));
}

/// for (i = first; i < n; i += stride) over the whole grid.
#define MS_GRID_STRIDE_LOOP(i, n)                                                        \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

/// Runs op(i) for i in [0, n) on the context's stream (op: a __device__ lambda).
template <typename Op>
__global__ void map_kernel(int64_t n, Op op) {
  MS_GRID_STRIDE_LOOP(i, n) op(i);
}

template <typename Op>
void launch_map(const KernelContext& kc, int64_t n, Op op) {
  if (n <= 0) return;
  map_kernel<<<blocks_for(n), kThreads, 0, stream_of(kc)>>>(n, op);
  MS_CUDA_CHECK_LAUNCH();
}

/// Device memory for one kernel call's intermediate results (partial sums, an index): the
/// backend's scratch when they fit, else stream-ordered memory (cudaMallocAsync) freed on the
/// stream when the object goes, after the call's kernels are queued. Never a host
/// synchronisation; calls on the one stream take turns with the scratch in stream order, so
/// a call holds one ScratchBuffer at a time.
class ScratchBuffer {
 public:
  ScratchBuffer(const KernelContext& kc, size_t bytes) : stream_(stream_of(kc)) {
    const DeviceState& d = device_state(kc);
    if (bytes <= d.scratch_bytes) {
      ptr_ = d.scratch;
    } else {
      MS_CUDA_CHECK(cudaMallocAsync(&ptr_, bytes, stream_));
      owned_ = true;
    }
  }
  ~ScratchBuffer() {
    if (owned_) MS_CUDA_CHECK(cudaFreeAsync(ptr_, stream_));
  }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  cudaStream_t stream_;
  void* ptr_ = nullptr;
  bool owned_ = false;
};

template <typename T>
__device__ inline T warp_sum(T x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

template <typename T>
__device__ inline T warp_max(T x) {
  for (int offset = 16; offset > 0; offset >>= 1)
    x = max(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

/// Sum over the block (every thread gets it). `shared` holds 32 values; blockDim.x is a
/// multiple of 32. The same order for the same launch shape: deterministic.
template <typename T>
__device__ inline T block_sum(T x, T* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  x = warp_sum(x);
  __syncthreads();  // shared may still be read by a previous reduction
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  x = lane < warps ? shared[lane] : T(0);
  return warp_sum(x);
}

template <typename T>
__device__ inline T block_max(T x, T* shared, T lowest) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  x = warp_max(x);
  __syncthreads();
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  x = lane < warps ? shared[lane] : lowest;
  return warp_max(x);
}

}  // namespace mindspeed::cuda
