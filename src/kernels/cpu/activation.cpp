// Fast GELU (exact and tanh forms) and SwiGLU (MindSpeed's fused swiglu), vectorised.
// Exact GELU uses erfc from Numerical Recipes' erfcc (Chebyshev fit, relative error below
// 1.2e-7 for every argument) so 0.5*x*erfc(-x/sqrt 2) has no cancellation for x << 0; the
// tanh form is written x * sigmoid(2u), which has none either.
#include <cmath>

#include "kernels/cpu/vec.h"
#include "kernels/kernels.h"

namespace mindspeed::cpu {
namespace {
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluCoeff = 0.044715f;
constexpr float kErfc[10] = {-1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f,
                             -0.18628806f, 0.27886807f, -1.13520398f, 1.48851587f,
                             -0.82215223f, 0.17087277f};

// erfc(a) for a >= 0.
inline Vec8 erfc_pos(Vec8 a) {
  const Vec8 t = Vec8::set1(1.0f) / Vec8::fma(Vec8::set1(0.5f), a, Vec8::set1(1.0f));
  Vec8 p = Vec8::set1(kErfc[9]);
  for (int i = 8; i >= 0; --i) p = Vec8::fma(p, t, Vec8::set1(kErfc[i]));
  return t * Vec8::exp(p - a * a);
}
inline float erfc_pos(float a) {
  const float t = 1.0f / std::fma(0.5f, a, 1.0f);
  float p = kErfc[9];
  for (int i = 8; i >= 0; --i) p = std::fma(p, t, kErfc[i]);
  return t * exp_scalar(p - a * a);
}

// 2*Phi(x) = erfc(-x/sqrt 2): erfc(|x|/sqrt2) for x <= 0, else 2 - that.
inline Vec8 two_phi(Vec8 x) {
  const Vec8 e = erfc_pos(Vec8::max(x, Vec8::zero() - x) * Vec8::set1(kInvSqrt2));
  return Vec8::select_lt(Vec8::zero(), x, Vec8::set1(2.0f) - e, e);
}
inline float two_phi(float x) {
  const float e = erfc_pos(std::fabs(x) * kInvSqrt2);
  return x > 0.0f ? 2.0f - e : e;
}

// sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
inline Vec8 tanh_gate(Vec8 x, Vec8& du) {
  const Vec8 x2 = x * x;
  const Vec8 u = Vec8::set1(kSqrt2OverPi) * Vec8::fma(Vec8::set1(kGeluCoeff) * x2, x, x);
  du = Vec8::set1(kSqrt2OverPi) * Vec8::fma(Vec8::set1(3.0f * kGeluCoeff), x2, Vec8::set1(1.0f));
  return Vec8::set1(1.0f) / (Vec8::set1(1.0f) + Vec8::exp(Vec8::set1(-2.0f) * u));
}
inline float tanh_gate(float x, float& du) {
  const float x2 = x * x;
  const float u = kSqrt2OverPi * std::fma(kGeluCoeff * x2, x, x);
  du = kSqrt2OverPi * std::fma(3.0f * kGeluCoeff, x2, 1.0f);
  return 1.0f / (1.0f + exp_scalar(-2.0f * u));
}
inline Vec8 sigmoid(Vec8 x) { return Vec8::set1(1.0f) / (Vec8::set1(1.0f) + Vec8::exp(Vec8::zero() - x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + exp_scalar(-x)); }
}  // namespace

void gelu_forward(const KernelContext& kc, float* out, const float* inp, int64_t n, GeluApproximation approx) {
  const int64_t nv = n / 8 * 8;
  const bool exact = approx == GeluApproximation::kErf;
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < nv; i += 8) {
    const Vec8 x = Vec8::load(inp + i);
    Vec8 du;
    const Vec8 y = exact ? Vec8::set1(0.5f) * x * two_phi(x) : x * tanh_gate(x, du);
    y.store(out + i);
  }
  for (int64_t i = nv; i < n; ++i) {
    const float x = inp[i];
    float du;
    out[i] = exact ? 0.5f * x * two_phi(x) : x * tanh_gate(x, du);
  }
}

void gelu_backward(const KernelContext& kc, float* dinp, const float* dout, const float* inp, int64_t n,
                   GeluApproximation approx) {
  const int64_t nv = n / 8 * 8;
  const bool exact = approx == GeluApproximation::kErf;
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t i = 0; i < nv; i += 8) {
    const Vec8 x = Vec8::load(inp + i);
    Vec8 grad;
    if (exact) {
      const Vec8 pdf = Vec8::set1(kInvSqrt2Pi) * Vec8::exp(Vec8::set1(-0.5f) * x * x);
      grad = Vec8::fma(x, pdf, Vec8::set1(0.5f) * two_phi(x));
    } else {
      Vec8 du;
      const Vec8 s = tanh_gate(x, du);
      grad = Vec8::fma(Vec8::set1(2.0f) * x * s * (Vec8::set1(1.0f) - s), du, s);
    }
    (grad * Vec8::load(dout + i)).store(dinp + i);
  }
  for (int64_t i = nv; i < n; ++i) {
    const float x = inp[i];
    float grad;
    if (exact) {
      grad = std::fma(x, kInvSqrt2Pi * exp_scalar(-0.5f * x * x), 0.5f * two_phi(x));
    } else {
      float du;
      const float s = tanh_gate(x, du);
      grad = std::fma(2.0f * x * s * (1.0f - s), du, s);
    }
    dinp[i] = grad * dout[i];
  }
}

void swiglu_forward(const KernelContext& kc, float* out, const float* inp, int64_t N, int64_t F) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* gate = inp + n * 2 * F;
    const float* up = gate + F;
    float* o = out + n * F;
    int64_t f = 0;
    for (; f + 8 <= F; f += 8) {
      const Vec8 g = Vec8::load(gate + f);
      (g * sigmoid(g) * Vec8::load(up + f)).store(o + f);
    }
    for (; f < F; ++f) o[f] = gate[f] * sigmoid(gate[f]) * up[f];
  }
}

void swiglu_backward(const KernelContext& kc, float* dinp, const float* dout, const float* inp, int64_t N, int64_t F) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* gate = inp + n * 2 * F;
    const float* up = gate + F;
    const float* dy = dout + n * F;
    float* dgate = dinp + n * 2 * F;
    float* dup = dgate + F;
    int64_t f = 0;
    const Vec8 one = Vec8::set1(1.0f);
    for (; f + 8 <= F; f += 8) {
      const Vec8 g = Vec8::load(gate + f), u = Vec8::load(up + f), d = Vec8::load(dy + f);
      const Vec8 s = sigmoid(g);
      (d * g * s).store(dup + f);
      (d * u * s * Vec8::fma(g, one - s, one)).store(dgate + f);
    }
    for (; f < F; ++f) {
      const float g = gate[f], s = sigmoid(g);
      dup[f] = dy[f] * g * s;
      dgate[f] = dy[f] * up[f] * s * (1.0f + g * (1.0f - s));
    }
  }
}

}  // namespace mindspeed::cpu
