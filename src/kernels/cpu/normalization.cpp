// Fast LayerNorm and RMSNorm (MindSpeed's fused rms_norm): one row per iteration, Vec8
// loops, rows in parallel. Weight and bias gradients are reduced per fixed chunk of rows and
// then added in chunk order (deterministic for any thread count).
#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vec.h"
#include "kernels/kernels.h"

namespace mindspeed::cpu {
namespace {
constexpr int64_t kRowGrain = 32;

float row_sum(const float* x, int64_t C) {
  Vec8 acc = Vec8::zero();
  int64_t c = 0;
  for (; c + 8 <= C; c += 8) acc = acc + Vec8::load(x + c);
  float s = acc.reduce_add();
  for (; c < C; ++c) s += x[c];
  return s;
}

// Adds the per-chunk partial sums partial[chunks][C] into out[C] in chunk order.
void add_partials(const KernelContext& kc, float* out, const std::vector<float>& partial, int64_t chunks, int64_t C) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    float s = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) s += partial[k * C + c];
    out[c] += s;
  }
}

// A row-wise backward whose rows also add into the weight (and bias) gradients: row_fn(n, dw, db)
// handles row n, adding its terms into dw[C] (db[C] when dbias is given), the partial sums of a
// fixed chunk of rows. The chunks run in parallel; their partials are then added into dweight /
// dbias in chunk order (deterministic for any thread count).
template <typename RowFn>
void rows_with_column_sums(const KernelContext& kc, int64_t N, int64_t C, float* dweight,
                           float* dbias, const RowFn& row_fn) {
  const int64_t chunks = reduction_chunks(N, kRowGrain);
  std::vector<float> dw_part(chunks * C, 0.0f), db_part(dbias ? chunks * C : 0, 0.0f);
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    int64_t n0, n1;
    chunk_range(N, chunks, k, n0, n1);
    float* dw = dw_part.data() + k * C;
    float* db = dbias ? db_part.data() + k * C : nullptr;
    for (int64_t n = n0; n < n1; ++n) row_fn(n, dw, db);
  }
  add_partials(kc, dweight, dw_part, chunks, C);
  if (dbias) add_partials(kc, dbias, db_part, chunks, C);
}
}  // namespace

void layer_norm_forward(const KernelContext& kc, float* out, float* mean, float* rstd, const float* inp,
                        const float* weight, const float* bias, int64_t N, int64_t C,
                        float eps) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const float m = row_sum(x, C) / static_cast<float>(C);
    const Vec8 vm = Vec8::set1(m);
    Vec8 acc = Vec8::zero();
    int64_t c = 0;
    for (; c + 8 <= C; c += 8) {
      const Vec8 d = Vec8::load(x + c) - vm;
      acc = Vec8::fma(d, d, acc);
    }
    float var = acc.reduce_add();
    for (; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    const float s = 1.0f / std::sqrt(var / static_cast<float>(C) + eps);
    const Vec8 vs = Vec8::set1(s);
    float* o = out + n * C;
    c = 0;
    for (; c + 8 <= C; c += 8) {
      const Vec8 norm = (Vec8::load(x + c) - vm) * vs;
      const Vec8 b = bias ? Vec8::load(bias + c) : Vec8::zero();
      Vec8::fma(norm, Vec8::load(weight + c), b).store(o + c);
    }
    for (; c < C; ++c) o[c] = (x[c] - m) * s * weight[c] + (bias ? bias[c] : 0.0f);
    mean[n] = m;
    rstd[n] = s;
  }
}

void layer_norm_backward(const KernelContext& kc, float* dinp, float* dweight, float* dbias, const float* dout,
                         const float* inp, const float* weight, const float* mean,
                         const float* rstd, int64_t N, int64_t C) {
  rows_with_column_sums(kc, N, C, dweight, dbias, [&](int64_t n, float* dw, float* db) {
    const float* x = inp + n * C;
    const float* dy = dout + n * C;
    const Vec8 vm = Vec8::set1(mean[n]), vs = Vec8::set1(rstd[n]);
    Vec8 a_mean = Vec8::zero(), a_norm = Vec8::zero();
    int64_t c = 0;
    for (; c + 8 <= C; c += 8) {
      const Vec8 norm = (Vec8::load(x + c) - vm) * vs;
      const Vec8 dnorm = Vec8::load(weight + c) * Vec8::load(dy + c);
      a_mean = a_mean + dnorm;
      a_norm = Vec8::fma(dnorm, norm, a_norm);
    }
    float dnorm_mean = a_mean.reduce_add(), dnorm_norm_mean = a_norm.reduce_add();
    for (; c < C; ++c) {
      const float norm = (x[c] - mean[n]) * rstd[n];
      const float dnorm = weight[c] * dy[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= static_cast<float>(C);
    dnorm_norm_mean /= static_cast<float>(C);
    const Vec8 vdm = Vec8::set1(dnorm_mean), vdnm = Vec8::set1(dnorm_norm_mean);
    float* dx = dinp + n * C;
    c = 0;
    for (; c + 8 <= C; c += 8) {
      const Vec8 norm = (Vec8::load(x + c) - vm) * vs;
      const Vec8 g = Vec8::load(dy + c);
      const Vec8 dnorm = Vec8::load(weight + c) * g;
      const Vec8 delta = (dnorm - vdm - norm * vdnm) * vs;
      (Vec8::load(dx + c) + delta).store(dx + c);
      Vec8::fma(norm, g, Vec8::load(dw + c)).store(dw + c);
      if (db) (Vec8::load(db + c) + g).store(db + c);
    }
    for (; c < C; ++c) {
      const float norm = (x[c] - mean[n]) * rstd[n];
      const float dnorm = weight[c] * dy[c];
      dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * rstd[n];
      dw[c] += norm * dy[c];
      if (db) db[c] += dy[c];
    }
  });
}

void rms_norm_forward(const KernelContext& kc, float* out, float* rstd, const float* inp, const float* weight, int64_t N,
                      int64_t C, float eps) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    Vec8 acc = Vec8::zero();
    int64_t c = 0;
    for (; c + 8 <= C; c += 8) {
      const Vec8 v = Vec8::load(x + c);
      acc = Vec8::fma(v, v, acc);
    }
    float sq = acc.reduce_add();
    for (; c < C; ++c) sq += x[c] * x[c];
    const float s = 1.0f / std::sqrt(sq / static_cast<float>(C) + eps);
    const Vec8 vs = Vec8::set1(s);
    float* o = out + n * C;
    c = 0;
    for (; c + 8 <= C; c += 8) (Vec8::load(x + c) * vs * Vec8::load(weight + c)).store(o + c);
    for (; c < C; ++c) o[c] = x[c] * s * weight[c];
    rstd[n] = s;
  }
}

void rms_norm_backward(const KernelContext& kc, float* dinp, float* dweight, const float* dout, const float* inp,
                       const float* weight, const float* rstd, int64_t N, int64_t C) {
  rows_with_column_sums(kc, N, C, dweight, nullptr, [&](int64_t n, float* dw, float* /*no bias*/) {
    const float* x = inp + n * C;
    const float* dy = dout + n * C;
    const float s = rstd[n];
    Vec8 acc = Vec8::zero();
    int64_t c = 0;
    for (; c + 8 <= C; c += 8)
      acc = Vec8::fma(Vec8::load(x + c) * Vec8::load(weight + c), Vec8::load(dy + c), acc);
    float dot = acc.reduce_add();
    for (; c < C; ++c) dot += x[c] * weight[c] * dy[c];
    dot /= static_cast<float>(C);
    const float k3 = s * s * s * dot;
    const Vec8 vs = Vec8::set1(s), vk3 = Vec8::set1(k3);
    float* dx = dinp + n * C;
    c = 0;
    for (; c + 8 <= C; c += 8) {
      const Vec8 xv = Vec8::load(x + c), g = Vec8::load(dy + c);
      const Vec8 delta = vs * Vec8::load(weight + c) * g - xv * vk3;
      (Vec8::load(dx + c) + delta).store(dx + c);
      Vec8::fma(xv * vs, g, Vec8::load(dw + c)).store(dw + c);
    }
    for (; c < C; ++c) {
      dx[c] += s * weight[c] * dy[c] - x[c] * k3;
      dw[c] += x[c] * s * dy[c];
    }
  });
}

// The 2D tensor-parallel norm's pieces (kernel_signatures.inc): rows in parallel, float
// arithmetic; weight and bias gradients per fixed row chunk, added in chunk order.
void norm_partial_moments(const KernelContext& kc, float* out, const float* inp,
                          const float* center, int power, float scale, int64_t N, int64_t C) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const float m = center != nullptr ? center[n] : 0.0f;
    float sum = 0.0f;
    for (int64_t c = 0; c < C; ++c) sum += power == 1 ? x[c] - m : (x[c] - m) * (x[c] - m);
    out[n] = sum * scale;
  }
}

void norm_apply(const KernelContext& kc, float* out, float* rstd, const float* inp,
                const float* mean, const float* sq_sums, const float* weight, const float* bias,
                int64_t H, float eps, int64_t N, int64_t C) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float m = mean != nullptr ? mean[n] : 0.0f;
    const float s = 1.0f / std::sqrt(sq_sums[n] / static_cast<float>(H) + eps);
    for (int64_t c = 0; c < C; ++c) {
      out[n * C + c] = (inp[n * C + c] - m) * s * weight[c] + (bias != nullptr ? bias[c] : 0.0f);
    }
    rstd[n] = s;
  }
}

void norm_backward_partials(const KernelContext& kc, float* sums, const float* dout,
                            const float* inp, const float* weight, const float* mean,
                            const float* rstd, int64_t N, int64_t C) {
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float m = mean != nullptr ? mean[n] : 0.0f, s = rstd[n];
    float g_sum = 0.0f, g_xhat = 0.0f;
    for (int64_t c = 0; c < C; ++c) {
      const float g = weight[c] * dout[n * C + c];
      g_sum += g;
      g_xhat += g * (inp[n * C + c] - m) * s;
    }
    sums[2 * n] = g_sum;
    sums[2 * n + 1] = g_xhat;
  }
}

void norm_backward_apply(const KernelContext& kc, float* dinp, float* dweight, float* dbias,
                         const float* dout, const float* inp, const float* weight,
                         const float* mean, const float* rstd, const float* totals, int64_t H,
                         int64_t N, int64_t C) {
  const float inv_h = 1.0f / static_cast<float>(H);
  rows_with_column_sums(kc, N, C, dweight, dbias, [&](int64_t n, float* dw, float* db) {
    const float m = mean != nullptr ? mean[n] : 0.0f, s = rstd[n];
    const float g_mean = mean != nullptr ? totals[2 * n] * inv_h : 0.0f;
    const float g_xhat_mean = totals[2 * n + 1] * inv_h;
    for (int64_t c = 0; c < C; ++c) {
      const float dy = dout[n * C + c];
      const float xhat = (inp[n * C + c] - m) * s;
      dinp[n * C + c] += (weight[c] * dy - g_mean - xhat * g_xhat_mean) * s;
      dw[c] += xhat * dy;
      if (db) db[c] += dy;
    }
  });
}

}  // namespace mindspeed::cpu
