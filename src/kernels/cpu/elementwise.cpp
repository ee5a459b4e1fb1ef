// Fast elementwise, conversion and layout kernels (kernel_signatures.inc): the reference
// loops of ref/elementwise.cpp over the backend's thread pool (each element is computed by
// one formula, so the result does not depend on the thread count).
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"

namespace mindspeed::cpu {

void fill_zero(const KernelContext& kc, float* x, int64_t n) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
}

void fill(const KernelContext& kc, float* x, float value, int64_t n) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}

void copy(const KernelContext& kc, float* out, const float* in, int64_t n) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = in[i];
}

void copy_2d(const KernelContext& kc, float* out, const float* in, int64_t rows, int64_t width,
             int64_t out_stride, int64_t in_stride) {
  if (rows <= 0 || width <= 0) return;
#pragma omp parallel for num_threads(kc.num_threads) schedule(static) if (rows * width > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out + r * out_stride, in + r * in_stride,
                static_cast<size_t>(width) * sizeof(float));
  }
}

void add_inplace(const KernelContext& kc, float* y, const float* x, int64_t n) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void scale_inplace(const KernelContext& kc, float* x, float a, int64_t n) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

void scale_copy(const KernelContext& kc, float* out, const float* x, float a, int64_t n) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * a;
}

void round_to_bf16(const KernelContext& kc, float* x, int64_t n) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] = mindspeed::round_to_bf16(x[i]);
}

void convert_to_bf16(const KernelContext& kc, bf16* out, const float* in, int64_t n) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(in[i]);
}

void convert_to_fp32(const KernelContext& kc, float* out, const bf16* in, int64_t n) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(in[i]);
}

void add_into_bf16(const KernelContext& kc, bf16* acc, const float* x, int64_t n) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) acc[i] = float_to_bf16(bf16_to_float(acc[i]) + x[i]);
}

void round_to_fp16(const KernelContext& kc, float* x, int64_t n) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] = mindspeed::round_to_fp16(x[i]);
}

void convert_to_fp16(const KernelContext& kc, fp16* out, const float* in, int64_t n) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_fp16(in[i]);
}

void convert_fp16_to_fp32(const KernelContext& kc, float* out, const fp16* in, int64_t n) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_float(in[i]);
}

void add_into_fp16(const KernelContext& kc, fp16* acc, const float* x, int64_t n) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) acc[i] = float_to_fp16(fp16_to_float(acc[i]) + x[i]);
}

namespace {
template <typename T>
void transpose_01(const KernelContext& kc, T* out, const T* in, int64_t D0, int64_t D1, int64_t C) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t j = 0; j < D1; ++j) {
    for (int64_t i = 0; i < D0; ++i) {
      const T* src = in + (i * D1 + j) * C;
      T* dst = out + (j * D0 + i) * C;
      for (int64_t c = 0; c < C; ++c) dst[c] = src[c];
    }
  }
}
}  // namespace

void transpose_01_f32(const KernelContext& kc, float* out, const float* in, int64_t D0, int64_t D1, int64_t C) {
  transpose_01(kc, out, in, D0, D1, C);
}

void transpose_01_i32(const KernelContext& kc, int32_t* out, const int32_t* in, int64_t D0, int64_t D1,
                      int64_t C) {
  transpose_01(kc, out, in, D0, D1, C);
}

void masked_sums(const KernelContext& kc, double* sums, const float* x, const float* mask, int64_t n) {
  // Sequential on purpose: the order of the double sums is part of the recorded numbers.
  double s = 0.0, m = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    s += static_cast<double>(x[i]) * mask[i];
    m += mask[i];
  }
  sums[0] = s;
  sums[1] = m;
}

int64_t count_nonfinite(const KernelContext& kc, const float* x, int64_t n) {
  int64_t bad = 0;
#pragma omp parallel for num_threads(kc.num_threads) schedule(static) reduction(+ : bad)
  for (int64_t i = 0; i < n; ++i) bad += std::isfinite(x[i]) ? 0 : 1;
  return bad;
}

int64_t count_zeros(const KernelContext& kc, const float* x, int64_t n) {
  int64_t zeros = 0;
#pragma omp parallel for num_threads(kc.num_threads) schedule(static) reduction(+ : zeros)
  for (int64_t i = 0; i < n; ++i) zeros += x[i] == 0.0f ? 1 : 0;
  return zeros;
}

}  // namespace mindspeed::cpu
