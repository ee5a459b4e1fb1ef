// CUDA elementwise, conversion, layout and check kernels (kernel_signatures.inc; the
// specification is ref/elementwise.cpp). The 16-bit conversions are core/dtype.h's own
// functions compiled for the device, so their bits equal the CPU's. masked_sums and the counts
// hand their result to the host: they wait for the stream.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.cuh"

namespace mindspeed::cuda {
namespace {

template <typename T>
__global__ void transpose_01_kernel(T* out, const T* in, int64_t D0, int64_t D1, int64_t C) {
  const int64_t n = D0 * D1 * C;
  MS_GRID_STRIDE_LOOP(e, n) {  // e indexes the output [D1, D0, C]
    const int64_t c = e % C, i = (e / C) % D0, j = e / (C * D0);
    out[e] = in[(i * D1 + j) * C + c];
  }
}

template <typename T>
void transpose_01(const KernelContext& kc, T* out, const T* in, int64_t D0, int64_t D1, int64_t C) {
  const int64_t n = D0 * D1 * C;
  if (n <= 0) return;
  transpose_01_kernel<<<blocks_for(n), kThreads, 0, stream_of(kc)>>>(out, in, D0, D1, C);
  MS_CUDA_CHECK_LAUNCH();
}

// Per-block partial sums of x*mask and mask (double), then one block adds the partials.
__global__ void masked_sums_partial(double* partial, const float* x, const float* mask, int64_t n) {
  __shared__ double shared[32];
  double s = 0.0, m = 0.0;
  MS_GRID_STRIDE_LOOP(i, n) {
    s += static_cast<double>(x[i]) * mask[i];
    m += mask[i];
  }
  s = block_sum(s, shared);
  m = block_sum(m, shared);
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = s;
    partial[2 * blockIdx.x + 1] = m;
  }
}

struct IsNonFinite {
  __device__ bool operator()(float v) const { return !isfinite(v); }
};
struct IsZero {
  __device__ bool operator()(float v) const { return v == 0.0f; }
};

template <typename Predicate>
__global__ void count_partial(unsigned long long* partial, const float* x, int64_t n) {
  __shared__ unsigned long long shared[32];
  unsigned long long hits = 0;
  MS_GRID_STRIDE_LOOP(i, n) hits += Predicate{}(x[i]) ? 1 : 0;
  hits = block_sum(hits, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = hits;
}

template <typename T>
__global__ void sum_partials(T* out, const T* partial, int blocks, int width) {
  __shared__ T shared[32];
  for (int k = 0; k < width; ++k) {
    T s = T(0);
    for (int b = threadIdx.x; b < blocks; b += blockDim.x) s += partial[b * width + k];
    s = block_sum(s, shared);
    if (threadIdx.x == 0) out[k] = s;
  }
}

// One thread per column, the rows in order: coalesced across the warp, the CPU's order per column.
__global__ void column_sums_kernel(float* sums, const float* x, int64_t R, int64_t C) {
  MS_GRID_STRIDE_LOOP(c, C) {
    float acc = 0.0f;
    for (int64_t r = 0; r < R; ++r) acc += x[r * C + c];
    sums[c] += acc;
  }
}

// Blocks of the two-pass reductions: enough to fill the GPU, few enough to add in one block.
constexpr unsigned int kReductionBlocks = 1024;

}  // namespace

void column_sums_accumulate(const KernelContext& kc, float* sums, const float* x, int64_t R,
                            int64_t C) {
  if (C <= 0) return;
  column_sums_kernel<<<blocks_for(C), kThreads, 0, stream_of(kc)>>>(sums, x, R, C);
  MS_CUDA_CHECK_LAUNCH();
}

void fill_zero(const KernelContext& kc, float* x, int64_t n) {
  if (n > 0)
    MS_CUDA_CHECK(cudaMemsetAsync(x, 0, static_cast<size_t>(n) * sizeof(float), stream_of(kc)));
}

void fill(const KernelContext& kc, float* x, float value, int64_t n) {
  launch_map(kc, n, [=] __device__(int64_t i) { x[i] = value; });
}

void copy_2d(const KernelContext& kc, float* out, const float* in, int64_t rows, int64_t width,
             int64_t out_stride, int64_t in_stride) {
  if (rows <= 0 || width <= 0) return;
  if (rows == 1) {  // any strides: one contiguous block
    copy(kc, out, in, width);
    return;
  }
  constexpr size_t f = sizeof(float);
  // cudaMemcpy2D takes pitches below cudaDevAttrMaxPitch (2^31 bytes on current GPUs); longer
  // rows (long-context re-layouts) are copied one row at a time.
  constexpr int64_t kMaxPitch = int64_t{1} << 31;
  if (std::max(out_stride, in_stride) * static_cast<int64_t>(f) >= kMaxPitch) {
    for (int64_t r = 0; r < rows; ++r) copy(kc, out + r * out_stride, in + r * in_stride, width);
    return;
  }
  MS_CUDA_CHECK(cudaMemcpy2DAsync(out, static_cast<size_t>(out_stride) * f, in,
                                  static_cast<size_t>(in_stride) * f,
                                  static_cast<size_t>(width) * f, static_cast<size_t>(rows),
                                  cudaMemcpyDeviceToDevice, stream_of(kc)));
}

void copy(const KernelContext& kc, float* out, const float* in, int64_t n) {
  if (n > 0 && out != in) {
    MS_CUDA_CHECK(cudaMemcpyAsync(out, in, static_cast<size_t>(n) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, stream_of(kc)));
  }
}

void add_inplace(const KernelContext& kc, float* y, const float* x, int64_t n) {
  launch_map(kc, n, [=] __device__(int64_t i) { y[i] += x[i]; });
}

void scale_inplace(const KernelContext& kc, float* x, float a, int64_t n) {
  launch_map(kc, n, [=] __device__(int64_t i) { x[i] *= a; });
}

void scale_copy(const KernelContext& kc, float* out, const float* x, float a, int64_t n) {
  launch_map(kc, n, [=] __device__(int64_t i) { out[i] = x[i] * a; });
}

void round_to_bf16(const KernelContext& kc, float* x, int64_t n) {
  launch_map(kc, n, [=] __device__(int64_t i) { x[i] = mindspeed::round_to_bf16(x[i]); });
}

void convert_to_bf16(const KernelContext& kc, bf16* out, const float* in, int64_t n) {
  launch_map(kc, n, [=] __device__(int64_t i) { out[i] = float_to_bf16(in[i]); });
}

void convert_to_fp32(const KernelContext& kc, float* out, const bf16* in, int64_t n) {
  launch_map(kc, n, [=] __device__(int64_t i) { out[i] = bf16_to_float(in[i]); });
}

void add_into_bf16(const KernelContext& kc, bf16* acc, const float* x, int64_t n) {
  launch_map(kc, n,
             [=] __device__(int64_t i) { acc[i] = float_to_bf16(bf16_to_float(acc[i]) + x[i]); });
}

void round_to_fp16(const KernelContext& kc, float* x, int64_t n) {
  launch_map(kc, n, [=] __device__(int64_t i) { x[i] = mindspeed::round_to_fp16(x[i]); });
}

void convert_to_fp16(const KernelContext& kc, fp16* out, const float* in, int64_t n) {
  launch_map(kc, n, [=] __device__(int64_t i) { out[i] = float_to_fp16(in[i]); });
}

void convert_fp16_to_fp32(const KernelContext& kc, float* out, const fp16* in, int64_t n) {
  launch_map(kc, n, [=] __device__(int64_t i) { out[i] = fp16_to_float(in[i]); });
}

void add_into_fp16(const KernelContext& kc, fp16* acc, const float* x, int64_t n) {
  launch_map(kc, n,
             [=] __device__(int64_t i) { acc[i] = float_to_fp16(fp16_to_float(acc[i]) + x[i]); });
}

void transpose_01_f32(const KernelContext& kc, float* out, const float* in, int64_t D0, int64_t D1,
                      int64_t C) {
  transpose_01(kc, out, in, D0, D1, C);
}

void transpose_01_i32(const KernelContext& kc, int32_t* out, const int32_t* in, int64_t D0,
                      int64_t D1, int64_t C) {
  transpose_01(kc, out, in, D0, D1, C);
}

void scale_rows(const KernelContext& kc, float* out, const float* x, const float* s, int64_t R,
                int64_t h) {
  launch_map(kc, R * h, [=] __device__(int64_t e) { out[e] = s[e / h] * x[e]; });
}

// `sums` is host memory (two doubles), as the caller's loss sums: the call waits for the stream.
void masked_sums(const KernelContext& kc, double* sums, const float* x, const float* mask,
                 int64_t n) {
  DeviceState& d = device_state(kc);
  auto* partial = static_cast<double*>(d.scratch);
  auto* total = partial + 2 * kReductionBlocks;
  const unsigned int blocks = std::min(kReductionBlocks, blocks_for(n));
  masked_sums_partial<<<blocks, kThreads, 0, d.stream>>>(partial, x, mask, n);
  MS_CUDA_CHECK_LAUNCH();
  sum_partials<<<1, kThreads, 0, d.stream>>>(total, partial, static_cast<int>(blocks), 2);
  MS_CUDA_CHECK_LAUNCH();
  MS_CUDA_CHECK(
      cudaMemcpyAsync(d.host_scratch, total, 2 * sizeof(double), cudaMemcpyDeviceToHost, d.stream));
  MS_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  sums[0] = static_cast<const double*>(d.host_scratch)[0];
  sums[1] = static_cast<const double*>(d.host_scratch)[1];
}

// The number of x[i] the predicate holds for, handed to the host.
template <typename Predicate>
int64_t count_where(const KernelContext& kc, const float* x, int64_t n) {
  if (n <= 0) return 0;
  DeviceState& d = device_state(kc);
  auto* partial = static_cast<unsigned long long*>(d.scratch);
  auto* total = partial + kReductionBlocks;
  const unsigned int blocks = std::min(kReductionBlocks, blocks_for(n));
  count_partial<Predicate><<<blocks, kThreads, 0, d.stream>>>(partial, x, n);
  MS_CUDA_CHECK_LAUNCH();
  sum_partials<<<1, kThreads, 0, d.stream>>>(total, partial, static_cast<int>(blocks), 1);
  MS_CUDA_CHECK_LAUNCH();
  MS_CUDA_CHECK(cudaMemcpyAsync(d.host_scratch, total, sizeof(unsigned long long),
                                cudaMemcpyDeviceToHost, d.stream));
  MS_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  return static_cast<int64_t>(*static_cast<const unsigned long long*>(d.host_scratch));
}

int64_t count_nonfinite(const KernelContext& kc, const float* x, int64_t n) {
  return count_where<IsNonFinite>(kc, x, n);
}

int64_t count_zeros(const KernelContext& kc, const float* x, int64_t n) {
  return count_where<IsZero>(kc, x, n);
}

void copy_to_device(const KernelContext& kc, void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0) return;
  MS_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_of(kc)));
  // From pageable memory the call returns once `src` was staged; from pinned memory the copy
  // reads `src` later, so wait for it (the contract lets the caller reuse `src` at once).
  cudaPointerAttributes attributes{};
  MS_CUDA_CHECK(cudaPointerGetAttributes(&attributes, src));
  if (attributes.type == cudaMemoryTypeHost) MS_CUDA_CHECK(cudaStreamSynchronize(stream_of(kc)));
}

void copy_to_host(const KernelContext& kc, void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0) return;
  MS_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_of(kc)));
  MS_CUDA_CHECK(cudaStreamSynchronize(stream_of(kc)));
}

void copy_bytes(const KernelContext& kc, void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0 || dst == src) return;
  MS_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                                stream_of(kc)));
}

void zero_bytes(const KernelContext& kc, void* x, int64_t bytes) {
  if (bytes > 0) MS_CUDA_CHECK(cudaMemsetAsync(x, 0, static_cast<size_t>(bytes), stream_of(kc)));
}

void synchronize(const KernelContext& kc) { MS_CUDA_CHECK(cudaStreamSynchronize(stream_of(kc))); }

void fill_elementwise_kernels(KernelTable& t) {
  t.copy_to_device = copy_to_device;
  t.copy_to_host = copy_to_host;
  t.copy_bytes = copy_bytes;
  t.zero_bytes = zero_bytes;
  t.synchronize = synchronize;
  t.fill_zero = fill_zero;
  t.fill = fill;
  t.copy = copy;
  t.copy_2d = copy_2d;
  t.add_inplace = add_inplace;
  t.scale_inplace = scale_inplace;
  t.scale_copy = scale_copy;
  t.round_to_bf16 = round_to_bf16;
  t.convert_to_bf16 = convert_to_bf16;
  t.convert_to_fp32 = convert_to_fp32;
  t.add_into_bf16 = add_into_bf16;
  t.round_to_fp16 = round_to_fp16;
  t.convert_to_fp16 = convert_to_fp16;
  t.convert_fp16_to_fp32 = convert_fp16_to_fp32;
  t.add_into_fp16 = add_into_fp16;
  t.transpose_01_f32 = transpose_01_f32;
  t.transpose_01_i32 = transpose_01_i32;
  t.scale_rows = scale_rows;
  t.masked_sums = masked_sums;
  t.count_nonfinite = count_nonfinite;
  t.count_zeros = count_zeros;
}

}  // namespace mindspeed::cuda
