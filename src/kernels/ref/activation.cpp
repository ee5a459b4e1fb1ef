// Reference GELU (exact erf form and the tanh form of --openai-gelu) and SwiGLU
// (MindSpeed swiglu op: y = silu(x[:F]) * x[F:]).
#include <cmath>

#include "kernels/kernels.h"

namespace mindspeed::ref {
namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

double gelu(double x, GeluApproximation approx) {
  if (approx == GeluApproximation::kTanh) {
    const double u = kSqrt2OverPi * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + std::tanh(u));
  }
  return 0.5 * x * std::erfc(-x * kInvSqrt2);
}

double gelu_grad(double x, GeluApproximation approx) {
  if (approx == GeluApproximation::kTanh) {
    const double u = kSqrt2OverPi * (x + 0.044715 * x * x * x);
    const double t = std::tanh(u);
    const double du = kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * x * x);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du;
  }
  return 0.5 * std::erfc(-x * kInvSqrt2) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
}
}  // namespace

void gelu_forward(const KernelContext& kc, float* out, const float* inp, int64_t n, GeluApproximation approx) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(gelu(inp[i], approx));
}

void gelu_backward(const KernelContext& kc, float* dinp, const float* dout, const float* inp, int64_t n,
                   GeluApproximation approx) {
  for (int64_t i = 0; i < n; ++i) dinp[i] = static_cast<float>(gelu_grad(inp[i], approx) * dout[i]);
}

void swiglu_forward(const KernelContext& kc, float* out, const float* inp, int64_t N, int64_t F) {
  for (int64_t n = 0; n < N; ++n) {
    const float* gate = inp + n * 2 * F;
    const float* up = gate + F;
    for (int64_t f = 0; f < F; ++f) {
      const double g = gate[f];
      out[n * F + f] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[f]);
    }
  }
}

void swiglu_backward(const KernelContext& kc, float* dinp, const float* dout, const float* inp, int64_t N, int64_t F) {
  for (int64_t n = 0; n < N; ++n) {
    const float* gate = inp + n * 2 * F;
    const float* up = gate + F;
    float* dgate = dinp + n * 2 * F;
    float* dup = dgate + F;
    for (int64_t f = 0; f < F; ++f) {
      const double g = gate[f];
      const double sig = 1.0 / (1.0 + std::exp(-g));
      const double dy = dout[n * F + f];
      dup[f] = static_cast<float>(dy * g * sig);
      dgate[f] = static_cast<float>(dy * up[f] * sig * (1.0 + g * (1.0 - sig)));
    }
  }
}

}  // namespace mindspeed::ref
