// Reference dropout and bias-dropout-add (Megatron's bias_dropout_add). Element i is kept
// when the Philox uniform of element index_offset + i is >= p, and scaled by 1/(1-p).
#include "kernels/kernels.h"

namespace mindspeed::ref {
namespace {
inline float factor_at(const DropoutSpec& d, uint64_t index) {
  if (!d.active()) return 1.0f;
  return d.rng.uniform(index) >= d.p ? 1.0f / (1.0f - d.p) : 0.0f;
}
inline float dropout_factor(const DropoutSpec& d, int64_t i) {
  return factor_at(d, d.index_offset + static_cast<uint64_t>(i));
}
}  // namespace

void dropout_forward(const KernelContext& kc, float* out, const float* inp, int64_t n, const DropoutSpec& dropout) {
  for (int64_t i = 0; i < n; ++i) out[i] = inp[i] * dropout_factor(dropout, i);
}

void dropout_backward(const KernelContext& kc, float* dinp, const float* dout, int64_t n, const DropoutSpec& dropout) {
  for (int64_t i = 0; i < n; ++i) dinp[i] = dout[i] * dropout_factor(dropout, i);
}

void bias_dropout_add_forward(const KernelContext& kc, float* out, const float* inp, const float* bias,
                              const float* residual, int64_t N, int64_t C,
                              const DropoutSpec& dropout) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = n * C + c;
      const float x = inp[i] + (bias ? bias[c] : 0.0f);
      out[i] = residual[i] + x * factor_at(dropout, dropout.row_index(n, c, C));
    }
  }
}

void bias_dropout_add_backward(const KernelContext& kc, float* dinp, float* dbias, const float* dout, int64_t N,
                               int64_t C, const DropoutSpec& dropout) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = n * C + c;
      dinp[i] = dout[i] * factor_at(dropout, dropout.row_index(n, c, C));
      if (dbias) dbias[c] += dinp[i];
    }
  }
}

}  // namespace mindspeed::ref
