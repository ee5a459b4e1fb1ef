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

namespace mindspeed::ref {

void norm_partial_moments(const KernelContext& kc, float* out, const float* inp,
                          const float* center, int power, float scale, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const double m = center != nullptr ? center[n] : 0.0;
    double sum = 0.0;
    for (int64_t c = 0; c < C; ++c) sum += power == 1 ? x[c] - m : (x[c] - m) * (x[c] - m);
    out[n] = static_cast<float>(sum * scale);
  }
}

void norm_apply(const KernelContext& kc, float* out, float* rstd, const float* inp,
                const float* mean, const float* sq_sums, const float* weight, const float* bias,
                int64_t H, float eps, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const double m = mean != nullptr ? mean[n] : 0.0;
    const double s = 1.0 / std::sqrt(sq_sums[n] / static_cast<double>(H) + eps);
    for (int64_t c = 0; c < C; ++c) {
      const double norm = (inp[n * C + c] - m) * s;
      out[n * C + c] = static_cast<float>(norm * weight[c] + (bias != nullptr ? bias[c] : 0.0f));
    }
    rstd[n] = static_cast<float>(s);
  }
}

void norm_backward_partials(const KernelContext& kc, float* sums, const float* dout,
                            const float* inp, const float* weight, const float* mean,
                            const float* rstd, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const double m = mean != nullptr ? mean[n] : 0.0, s = rstd[n];
    double g_sum = 0.0, g_xhat = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      const double g = static_cast<double>(weight[c]) * dout[n * C + c];
      g_sum += g;
      g_xhat += g * (inp[n * C + c] - m) * s;
    }
    sums[2 * n] = static_cast<float>(g_sum);
    sums[2 * n + 1] = static_cast<float>(g_xhat);
  }
}

void norm_backward_apply(const KernelContext& kc, float* dinp, float* dweight, float* dbias,
                         const float* dout, const float* inp, const float* weight,
                         const float* mean, const float* rstd, const float* totals, int64_t H,
                         int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const double m = mean != nullptr ? mean[n] : 0.0, s = rstd[n];
    const double g_mean = mean != nullptr ? totals[2 * n] / static_cast<double>(H) : 0.0;
    const double g_xhat_mean = totals[2 * n + 1] / static_cast<double>(H);
    for (int64_t c = 0; c < C; ++c) {
      const double dy = dout[n * C + c];
      const double xhat = (inp[n * C + c] - m) * s;
      const double g = static_cast<double>(weight[c]) * dy;
      dinp[n * C + c] += static_cast<float>((g - g_mean - xhat * g_xhat_mean) * s);
      dweight[c] += static_cast<float>(xhat * dy);
      if (dbias != nullptr) dbias[c] += static_cast<float>(dy);
    }
  }
}

}  // namespace mindspeed::ref
