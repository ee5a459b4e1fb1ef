// Fast dropout and bias-dropout-add, tile by tile with the mask of dropout_mask.h (the
// reference's bit for bit).
#include "kernels/cpu/dropout_mask.h"
#include "kernels/cpu/vec.h"
#include "kernels/kernels.h"

namespace mindspeed::cpu {
namespace {
constexpr int64_t kTile = 1024;
}  // namespace

void dropout_forward(const KernelContext& kc, float* out, const float* inp, int64_t n, const DropoutSpec& dropout) {
  if (!dropout.active()) {
    if (out != inp) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
      for (int64_t i = 0; i < n; ++i) out[i] = inp[i];
    }
    return;
  }
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t t0 = 0; t0 < n; t0 += kTile) {
    const int64_t len = t0 + kTile < n ? kTile : n - t0;
    float factor[kTile];
    keep_factors(factor, dropout.index_offset + static_cast<uint64_t>(t0), len, dropout);
    for (int64_t i = 0; i < len; ++i) out[t0 + i] = inp[t0 + i] * factor[i];
  }
}

void dropout_backward(const KernelContext& kc, float* dinp, const float* dout, int64_t n, const DropoutSpec& dropout) {
  dropout_forward(kc, dinp, dout, n, dropout);
}

void bias_dropout_add_forward(const KernelContext& kc, float* out, const float* inp, const float* bias,
                              const float* residual, int64_t N, int64_t C,
                              const DropoutSpec& dropout) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const float* r = residual + n * C;
    float* o = out + n * C;
    if (!dropout.active()) {
      int64_t c = 0;
      for (; c + 8 <= C; c += 8) {
        const Vec8 b = bias ? Vec8::load(bias + c) : Vec8::zero();
        (Vec8::load(r + c) + (Vec8::load(x + c) + b)).store(o + c);
      }
      for (; c < C; ++c) o[c] = r[c] + (x[c] + (bias ? bias[c] : 0.0f));
      continue;
    }
    for (int64_t c0 = 0; c0 < C; c0 += kTile) {
      const int64_t len = c0 + kTile < C ? kTile : C - c0;
      float factor[kTile];
      keep_factors(factor, dropout.row_index(n, c0, C), len, dropout);
      for (int64_t i = 0; i < len; ++i) {
        const int64_t c = c0 + i;
        o[c] = r[c] + (x[c] + (bias ? bias[c] : 0.0f)) * factor[i];
      }
    }
  }
}

void bias_dropout_add_backward(const KernelContext& kc, float* dinp, float* dbias, const float* dout, int64_t N,
                               int64_t C, const DropoutSpec& dropout) {
  if (dropout.active()) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t c0 = 0; c0 < C; c0 += kTile) {
        const int64_t len = c0 + kTile < C ? kTile : C - c0;
        float factor[kTile];
        keep_factors(factor, dropout.row_index(n, c0, C), len, dropout);
        for (int64_t i = 0; i < len; ++i) dinp[n * C + c0 + i] = dout[n * C + c0 + i] * factor[i];
      }
    }
  } else {
    dropout_forward(kc, dinp, dout, N * C, dropout);
  }
  if (dbias == nullptr) return;
  constexpr int64_t kSlice = 64;
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t c0 = 0; c0 < C; c0 += kSlice) {
    const int64_t c1 = c0 + kSlice < C ? c0 + kSlice : C;
    float acc[kSlice] = {};
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = c0; c < c1; ++c) acc[c - c0] += dinp[n * C + c];
    for (int64_t c = c0; c < c1; ++c) dbias[c] += acc[c - c0];
  }
}

}  // namespace mindspeed::cpu
