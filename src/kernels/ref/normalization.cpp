// Reference LayerNorm and RMSNorm, forward and backward (llm.c layernorm_forward/backward;
// MindSpeed rms_norm op: out = x * rstd * gamma, backward (dy, x, rstd, gamma) -> dx, dgamma).
// Reductions accumulate in double: this is the specification the fast kernels are held to.
#include <cmath>

#include "kernels/kernels.h"

namespace mindspeed::ref {

void layer_norm_forward(const KernelContext& kc, float* out, float* mean, float* rstd, const float* inp,
                        const float* weight, const float* bias, int64_t N, int64_t C,
                        float eps) {
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    double sum = 0.0;
    for (int64_t c = 0; c < C; ++c) sum += x[c];
    const double m = sum / static_cast<double>(C);
    double var = 0.0;
    for (int64_t c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    var /= static_cast<double>(C);
    const double s = 1.0 / std::sqrt(var + eps);
    float* o = out + n * C;
    for (int64_t c = 0; c < C; ++c) {
      const double norm = (x[c] - m) * s;
      o[c] = static_cast<float>(norm * weight[c] + (bias ? bias[c] : 0.0f));
    }
    mean[n] = static_cast<float>(m);
    rstd[n] = static_cast<float>(s);
  }
}

void layer_norm_backward(const KernelContext& kc, float* dinp, float* dweight, float* dbias, const float* dout,
                         const float* inp, const float* weight, const float* mean,
                         const float* rstd, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const float* dy = dout + n * C;
    const double m = mean[n], s = rstd[n];
    double dnorm_mean = 0.0, dnorm_norm_mean = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      const double norm = (x[c] - m) * s;
      const double dnorm = static_cast<double>(weight[c]) * dy[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= static_cast<double>(C);
    dnorm_norm_mean /= static_cast<double>(C);
    float* dx = dinp + n * C;
    for (int64_t c = 0; c < C; ++c) {
      const double norm = (x[c] - m) * s;
      const double dnorm = static_cast<double>(weight[c]) * dy[c];
      dx[c] += static_cast<float>((dnorm - dnorm_mean - norm * dnorm_norm_mean) * s);
      dweight[c] += static_cast<float>(norm * dy[c]);
      if (dbias) dbias[c] += dy[c];
    }
  }
}

void rms_norm_forward(const KernelContext& kc, float* out, float* rstd, const float* inp, const float* weight, int64_t N,
                      int64_t C, float eps) {
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    double sq = 0.0;
    for (int64_t c = 0; c < C; ++c) sq += static_cast<double>(x[c]) * x[c];
    const double s = 1.0 / std::sqrt(sq / static_cast<double>(C) + eps);
    float* o = out + n * C;
    for (int64_t c = 0; c < C; ++c) o[c] = static_cast<float>(x[c] * s * weight[c]);
    rstd[n] = static_cast<float>(s);
  }
}

void rms_norm_backward(const KernelContext& kc, float* dinp, float* dweight, const float* dout, const float* inp,
                       const float* weight, const float* rstd, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const float* dy = dout + n * C;
    const double s = rstd[n];
    // y = x*s*w, s = (mean(x^2)+eps)^-1/2: dx = s*(w*dy) - x * s^3 * mean(x*w*dy).
    double dot = 0.0;
    for (int64_t c = 0; c < C; ++c) dot += static_cast<double>(x[c]) * weight[c] * dy[c];
    dot /= static_cast<double>(C);
    float* dx = dinp + n * C;
    for (int64_t c = 0; c < C; ++c) {
      dx[c] += static_cast<float>(s * weight[c] * dy[c] - x[c] * s * s * s * dot);
      dweight[c] += static_cast<float>(x[c] * s * dy[c]);
    }
  }
}

}  // namespace mindspeed::ref
