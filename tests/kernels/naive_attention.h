// Naive dense attention for the attention kernel tests: an explicit boolean mask, an optional
// additive score bias (ALiBi) and dropout keep factors given per element, everything in
// double; forward (out, lse) and the analytic backward (dq, dk, dv) from dout.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "kernels/kernel_types.h"

namespace mindspeed::testing {

struct NaiveAttention {
  std::vector<float> out, lse, dq, dk, dv;
};

/// allowed(b, t, j): key row j visible to query row t of sample b. keep(b, h, t, j): the
/// dropout factor (0 or 1/(1-p)), null = 1. bias(b, h, t, j): added to the scaled score, null
/// = 0. q [B,NQ,T,D], k/v [B,NKV,Tk,D], dout/out [T,B,NQ*D], lse [B,NQ,T].
inline NaiveAttention naive_attention(
    const AttentionDims& d, const std::vector<float>& q, const std::vector<float>& k,
    const std::vector<float>& v, const std::vector<float>& dout,
    const std::function<bool(int64_t, int64_t, int64_t)>& allowed,
    const std::function<double(int64_t, int64_t, int64_t, int64_t)>& keep = nullptr,
    const std::function<double(int64_t, int64_t, int64_t, int64_t)>& bias = nullptr) {
  const int64_t T = d.T, Tk = d.keys(), D = d.D, G = d.NQ / d.NKV;
  const double kInf = std::numeric_limits<double>::infinity();
  NaiveAttention r{std::vector<float>(T * d.B * d.NQ * D), std::vector<float>(d.B * d.NQ * T),
                   std::vector<float>(q.size()), std::vector<float>(k.size()),
                   std::vector<float>(v.size())};
  std::vector<double> dk(k.size(), 0.0), dv(v.size(), 0.0);
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.NQ; ++h) {
      const int64_t g = h / G;
      const float* qh = q.data() + (b * d.NQ + h) * T * D;
      const float* kh = k.data() + (b * d.NKV + g) * Tk * D;
      const float* vh = v.data() + (b * d.NKV + g) * Tk * D;
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(Tk, -kInf), z(Tk, 1.0);
        double mx = -kInf;
        for (int64_t j = 0; j < Tk; ++j) {
          if (!allowed(b, t, j)) continue;
          double acc = 0.0;
          for (int64_t x = 0; x < D; ++x) acc += static_cast<double>(qh[t * D + x]) * kh[j * D + x];
          s[j] = acc * d.scale + (bias ? bias(b, h, t, j) : 0.0);
          mx = std::max(mx, s[j]);
          if (keep) z[j] = keep(b, h, t, j);
        }
        float* o = r.out.data() + (t * d.B + b) * d.NQ * D + h * D;
        const float* go = dout.data() + (t * d.B + b) * d.NQ * D + h * D;
        float& lse = r.lse[(b * d.NQ + h) * T + t];
        float* dqr = r.dq.data() + ((b * d.NQ + h) * T + t) * D;
        if (mx == -kInf) {  // no visible key: out 0, lse -inf, no gradient
          std::fill(o, o + D, 0.0f);
          lse = -std::numeric_limits<float>::infinity();
          std::fill(dqr, dqr + D, 0.0f);
          continue;
        }
        double sum = 0.0;
        for (int64_t j = 0; j < Tk; ++j) sum += std::exp(s[j] - mx);
        lse = static_cast<float>(mx + std::log(sum));
        std::vector<double> P(Tk), out(D, 0.0);
        for (int64_t j = 0; j < Tk; ++j) {
          P[j] = std::exp(s[j] - mx) / sum;
          for (int64_t x = 0; x < D; ++x) out[x] += P[j] * z[j] * vh[j * D + x];
        }
        double drow = 0.0;  // rowsum(dout * out)
        for (int64_t x = 0; x < D; ++x) {
          o[x] = static_cast<float>(out[x]);
          drow += out[x] * go[x];
        }
        std::vector<double> dq(D, 0.0);
        for (int64_t j = 0; j < Tk; ++j) {
          if (P[j] == 0.0) continue;
          double gv = 0.0;
          for (int64_t x = 0; x < D; ++x) gv += static_cast<double>(go[x]) * vh[j * D + x];
          const double ds = P[j] * (gv * z[j] - drow) * d.scale;
          for (int64_t x = 0; x < D; ++x) {
            dv[((b * d.NKV + g) * Tk + j) * D + x] += P[j] * z[j] * go[x];
            dk[((b * d.NKV + g) * Tk + j) * D + x] += ds * qh[t * D + x];
            dq[x] += ds * kh[j * D + x];
          }
        }
        for (int64_t x = 0; x < D; ++x) dqr[x] = static_cast<float>(dq[x]);
      }
    }
  }
  for (size_t i = 0; i < k.size(); ++i) {
    r.dk[i] = static_cast<float>(dk[i]);
    r.dv[i] = static_cast<float>(dv[i]);
  }
  return r;
}

}  // namespace mindspeed::testing
