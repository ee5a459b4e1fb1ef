// Fast attention kernels.
//  * core_attention_*: Megatron's unfused DotProductAttention with the GEMMs in BLAS and a
//    vectorised masked softmax; materialises probs [B, NQ, T, T] (O(T^2) memory).
//  * flash_attention_*: FlashAttention-2 (Dao, 2023) on the CPU: query blocks of kBlockQ rows
//    against key blocks of kBlockK columns, S = Q K^T and P V as BLAS GEMMs on the blocks,
//    online softmax in between; saves only lse = max + log(sum) per row. Backward recomputes
//    P from lse block by block (five GEMMs per block pair) and uses D = rowsum(dO * O).
//  * kv_cache_attention_forward: inference, Tq new queries against a key/value cache of Tk
//    positions; per (batch, head) S = Q K^T and P V as GEMMs on the cache rows, masked
//    softmax in between.
// Work is split over (batch, head[, query block]) tasks; each task calls single-threaded
// BLAS (OpenBLAS runs one thread inside an OpenMP region). Backward tasks own one key/value
// group, so the GQA gradients of dk/dv need no atomics and the result does not depend on
// the thread count.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/blas/gemm.h"
#include "kernels/cpu/dropout_mask.h"
#include "kernels/cpu/vec.h"
#include "kernels/kernels.h"

namespace mindspeed::cpu {
namespace {
constexpr int64_t kBlockQ = 64;
constexpr int64_t kBlockK = 256;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline int64_t first_key(const AttentionMask& mask, int64_t b, int64_t t, int64_t T) {
  return mask.doc_start ? mask.doc_start[b * T + t] : 0;
}

// Philox index of probs[b, h, t, j0] (the global layout of the reference kernel).
inline uint64_t dropout_row_index(const AttentionDims& d, const DropoutSpec& dropout, int64_t b,
                                  int64_t h, int64_t t, int64_t j0) {
  return dropout.index_offset +
         static_cast<uint64_t>(
             (((dropout.first_sample + b) * d.num_heads_total + d.head_offset + h) * d.T + t) * d.T +
             j0);
}

float max_of(const float* x, int64_t n) {
  Vec8 vm = Vec8::set1(kNegInf);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vm = Vec8::max(vm, Vec8::load(x + i));
  float m = vm.reduce_max();
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// x[i] = exp(x[i] - m) for i in [0, n); returns the sum.
float exp_sub_sum(float* x, int64_t n, float m) {
  const Vec8 vm = Vec8::set1(m);
  Vec8 vs = Vec8::zero();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const Vec8 e = Vec8::exp(Vec8::load(x + i) - vm);
    e.store(x + i);
    vs = vs + e;
  }
  float s = vs.reduce_add();
  for (; i < n; ++i) {
    x[i] = exp_scalar(x[i] - m);
    s += x[i];
  }
  return s;
}

void scale_inplace(float* x, int64_t n, float s) {
  const Vec8 vs = Vec8::set1(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) (Vec8::load(x + i) * vs).store(x + i);
  for (; i < n; ++i) x[i] *= s;
}

float dot(const float* a, const float* b, int64_t n) {
  Vec8 acc = Vec8::zero();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = Vec8::fma(Vec8::load(a + i), Vec8::load(b + i), acc);
  float s = acc.reduce_add();
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

int64_t per_thread_floats(const AttentionDims& d, AttentionKernel kernel, bool backward) {
  if (kernel == AttentionKernel::kCore) return (backward ? 2 : 1) * d.T * d.T;
  if (!backward) return kBlockQ * kBlockK + kBlockQ * d.D + 2 * kBlockQ + kBlockK;
  return 2 * kBlockQ * kBlockK + d.T + kBlockK;
}
}  // namespace

int64_t attention_workspace_floats(const KernelContext& kc, const AttentionDims& dims, AttentionKernel kernel,
                                   bool backward) {
  return per_thread_floats(dims, kernel, backward) * kc.num_threads;
}

// ---------------------------------------------------------------------------------------
void core_attention_forward(const KernelContext& kc, float* out, float* probs, const float* q, const float* k,
                            const float* v, const AttentionMask& mask, const AttentionDims& d,
                            const DropoutSpec& dropout, float* workspace) {
  const int64_t T = d.T, D = d.D, G = d.NQ / d.NKV, ldo = d.B * d.NQ * D;
  const int64_t per_thread = per_thread_floats(d, AttentionKernel::kCore, false);
#pragma omp parallel for num_threads(kc.num_threads) schedule(dynamic, 1)
  for (int64_t task = 0; task < d.B * d.NQ; ++task) {
    const int64_t b = task / d.NQ, h = task % d.NQ;
    const float* qh = q + task * T * D;
    const float* kh = k + (b * d.NKV + h / G) * T * D;
    const float* vh = v + (b * d.NKV + h / G) * T * D;
    float* P = probs + task * T * T;
    gemm(false, true, T, T, D, d.scale, qh, D, kh, D, 0.0f, P, T);
    for (int64_t t = 0; t < T; ++t) {
      float* row = P + t * T;
      const int64_t lo = first_key(mask, b, t, T);
      const float m = max_of(row + lo, t + 1 - lo);
      const float s = exp_sub_sum(row + lo, t + 1 - lo, m);
      scale_inplace(row + lo, t + 1 - lo, 1.0f / s);
      std::fill(row, row + lo, 0.0f);
      std::fill(row + t + 1, row + T, 0.0f);
    }
    const float* Pd = P;
    if (dropout.active()) {
      float* W = workspace + omp_get_thread_num() * per_thread;
      for (int64_t t = 0; t < T; ++t) {
        keep_factors(W + t * T, dropout_row_index(d, dropout, b, h, t, 0), T, dropout);
        for (int64_t j = 0; j < T; ++j) W[t * T + j] *= P[t * T + j];
      }
      Pd = W;
    }
    gemm(false, false, T, D, T, 1.0f, Pd, T, vh, D, 0.0f, out + b * d.NQ * D + h * D, ldo);
  }
}

void core_attention_backward(const KernelContext& kc, float* dq, float* dk, float* dv, const float* dout,
                             const float* probs, const float* q, const float* k, const float* v,
                             const AttentionDims& d, const DropoutSpec& dropout,
                             float* workspace) {
  const int64_t T = d.T, D = d.D, G = d.NQ / d.NKV, ldo = d.B * d.NQ * D;
  const int64_t per_thread = per_thread_floats(d, AttentionKernel::kCore, true);
#pragma omp parallel for num_threads(kc.num_threads) schedule(dynamic, 1)
  for (int64_t task = 0; task < d.B * d.NKV; ++task) {
    const int64_t b = task / d.NKV;
    const float* kg = k + task * T * D;
    const float* vg = v + task * T * D;
    float* dkg = dk + task * T * D;
    float* dvg = dv + task * T * D;
    std::fill(dkg, dkg + T * D, 0.0f);
    std::fill(dvg, dvg + T * D, 0.0f);
    float* W1 = workspace + omp_get_thread_num() * per_thread;  // dropped probs, then factors
    float* W2 = W1 + T * T;                                      // dP, then dS
    for (int64_t h = (task % d.NKV) * G; h < (task % d.NKV + 1) * G; ++h) {
      const float* P = probs + (b * d.NQ + h) * T * T;
      const float* qh = q + (b * d.NQ + h) * T * D;
      const float* doh = dout + b * d.NQ * D + h * D;
      float* dqh = dq + (b * d.NQ + h) * T * D;
      const float* Pd = P;
      if (dropout.active()) {
        for (int64_t t = 0; t < T; ++t) {
          keep_factors(W1 + t * T, dropout_row_index(d, dropout, b, h, t, 0), T, dropout);
          for (int64_t j = 0; j < T; ++j) W1[t * T + j] *= P[t * T + j];
        }
        Pd = W1;
      }
      gemm(true, false, T, D, T, 1.0f, Pd, T, doh, ldo, 1.0f, dvg, D);
      gemm(false, true, T, T, D, 1.0f, doh, ldo, vg, D, 0.0f, W2, T);
      for (int64_t t = 0; t < T; ++t) {
        const float* prow = P + t * T;
        float* row = W2 + t * T;
        if (dropout.active()) {
          keep_factors(W1 + t * T, dropout_row_index(d, dropout, b, h, t, 0), T, dropout);
          for (int64_t j = 0; j < T; ++j) row[j] *= W1[t * T + j];
        }
        const float pd = dot(prow, row, T);
        for (int64_t j = 0; j < T; ++j) row[j] = prow[j] * (row[j] - pd) * d.scale;
      }
      gemm(false, false, T, D, T, 1.0f, W2, T, kg, D, 0.0f, dqh, D);
      gemm(true, false, T, D, T, 1.0f, W2, T, qh, D, 1.0f, dkg, D);
    }
  }
}

// ---------------------------------------------------------------------------------------
void flash_attention_forward(const KernelContext& kc, float* out, float* lse, const float* q, const float* k,
                             const float* v, const AttentionMask& mask, const AttentionDims& d,
                             const DropoutSpec& dropout, float* workspace) {
  const int64_t T = d.T, D = d.D, G = d.NQ / d.NKV, ldo = d.B * d.NQ * D;
  const int64_t nqb = (T + kBlockQ - 1) / kBlockQ;
  const int64_t per_thread = per_thread_floats(d, AttentionKernel::kFlash, false);
#pragma omp parallel for num_threads(kc.num_threads) schedule(dynamic, 1)
  for (int64_t task = 0; task < d.B * d.NQ * nqb; ++task) {
    // Longest blocks (last query rows, most keys) first for load balance.
    const int64_t qb = nqb - 1 - task % nqb;
    const int64_t bh = task / nqb, b = bh / d.NQ, h = bh % d.NQ;
    const float* qh = q + bh * T * D;
    const float* kh = k + (b * d.NKV + h / G) * T * D;
    const float* vh = v + (b * d.NKV + h / G) * T * D;
    float* S = workspace + omp_get_thread_num() * per_thread;
    float* acc = S + kBlockQ * kBlockK;
    float* m = acc + kBlockQ * D;
    float* l = m + kBlockQ;
    float* factor = l + kBlockQ;
    const int64_t i0 = qb * kBlockQ, bq = std::min(kBlockQ, T - i0);
    std::fill(acc, acc + bq * D, 0.0f);
    std::fill(m, m + bq, kNegInf);
    std::fill(l, l + bq, 0.0f);
    int64_t lo_min = T;
    for (int64_t r = 0; r < bq; ++r) lo_min = std::min(lo_min, first_key(mask, b, i0 + r, T));
    const int64_t kend = i0 + bq;
    for (int64_t j0 = lo_min / kBlockK * kBlockK; j0 < kend; j0 += kBlockK) {
      const int64_t bk = std::min(kBlockK, kend - j0);
      gemm(false, true, bq, bk, D, d.scale, qh + i0 * D, D, kh + j0 * D, D, 0.0f, S, kBlockK);
      for (int64_t r = 0; r < bq; ++r) {
        const int64_t t = i0 + r;
        float* row = S + r * kBlockK;
        const int64_t c0 = std::max<int64_t>(first_key(mask, b, t, T) - j0, 0);
        const int64_t c1 = std::min<int64_t>(t + 1 - j0, bk);
        if (c0 >= c1) {
          std::fill(row, row + bk, 0.0f);
          continue;
        }
        const float m_new = std::max(m[r], max_of(row + c0, c1 - c0));
        const float corr = m[r] == kNegInf ? 0.0f : exp_scalar(m[r] - m_new);
        const float rs = exp_sub_sum(row + c0, c1 - c0, m_new);
        std::fill(row, row + c0, 0.0f);
        std::fill(row + c1, row + bk, 0.0f);
        l[r] = l[r] * corr + rs;
        m[r] = m_new;
        if (corr != 1.0f) scale_inplace(acc + r * D, D, corr);
        if (dropout.active()) {
          keep_factors(factor, dropout_row_index(d, dropout, b, h, t, j0), bk, dropout);
          for (int64_t c = c0; c < c1; ++c) row[c] *= factor[c];
        }
      }
      gemm(false, false, bq, D, bk, 1.0f, S, kBlockK, vh + j0 * D, D, 1.0f, acc, D);
    }
    for (int64_t r = 0; r < bq; ++r) {
      const int64_t t = i0 + r;
      float* o = out + t * ldo + b * d.NQ * D + h * D;
      const float inv = 1.0f / l[r];
      for (int64_t x = 0; x < D; ++x) o[x] = acc[r * D + x] * inv;
      lse[bh * T + t] = m[r] + std::log(l[r]);
    }
  }
}

void flash_attention_backward(const KernelContext& kc, float* dq, float* dk, float* dv, const float* dout,
                              const float* out, const float* lse, const float* q, const float* k,
                              const float* v, const AttentionMask& mask, const AttentionDims& d,
                              const DropoutSpec& dropout, float* workspace) {
  const int64_t T = d.T, D = d.D, G = d.NQ / d.NKV, ldo = d.B * d.NQ * D;
  const int64_t per_thread = per_thread_floats(d, AttentionKernel::kFlash, true);
#pragma omp parallel for num_threads(kc.num_threads) schedule(dynamic, 1)
  for (int64_t task = 0; task < d.B * d.NKV; ++task) {
    const int64_t b = task / d.NKV;
    const float* kg = k + task * T * D;
    const float* vg = v + task * T * D;
    float* dkg = dk + task * T * D;
    float* dvg = dv + task * T * D;
    std::fill(dkg, dkg + T * D, 0.0f);
    std::fill(dvg, dvg + T * D, 0.0f);
    float* P = workspace + omp_get_thread_num() * per_thread;  // P, then dropped P
    float* dS = P + kBlockQ * kBlockK;                          // dP, then dS * scale
    float* Dvec = dS + kBlockQ * kBlockK;
    float* factor = Dvec + T;
    for (int64_t h = (task % d.NKV) * G; h < (task % d.NKV + 1) * G; ++h) {
      const int64_t bh = b * d.NQ + h;
      const float* qh = q + bh * T * D;
      const float* doh = dout + b * d.NQ * D + h * D;
      const float* oh = out + b * d.NQ * D + h * D;
      const float* lseh = lse + bh * T;
      float* dqh = dq + bh * T * D;
      std::fill(dqh, dqh + T * D, 0.0f);
      for (int64_t t = 0; t < T; ++t) Dvec[t] = dot(doh + t * ldo, oh + t * ldo, D);
      for (int64_t i0 = 0; i0 < T; i0 += kBlockQ) {
        const int64_t bq = std::min(kBlockQ, T - i0);
        int64_t lo_min = T;
        for (int64_t r = 0; r < bq; ++r) lo_min = std::min(lo_min, first_key(mask, b, i0 + r, T));
        const int64_t kend = i0 + bq;
        for (int64_t j0 = lo_min / kBlockK * kBlockK; j0 < kend; j0 += kBlockK) {
          const int64_t bk = std::min(kBlockK, kend - j0);
          gemm(false, true, bq, bk, D, d.scale, qh + i0 * D, D, kg + j0 * D, D, 0.0f, P, kBlockK);
          gemm(false, true, bq, bk, D, 1.0f, doh + i0 * ldo, ldo, vg + j0 * D, D, 0.0f, dS, kBlockK);
          for (int64_t r = 0; r < bq; ++r) {
            const int64_t t = i0 + r;
            float* prow = P + r * kBlockK;
            float* srow = dS + r * kBlockK;
            const int64_t c0 = std::max<int64_t>(first_key(mask, b, t, T) - j0, 0);
            const int64_t c1 = std::min<int64_t>(t + 1 - j0, bk);
            if (c0 >= c1) {
              std::fill(prow, prow + bk, 0.0f);
              std::fill(srow, srow + bk, 0.0f);
              continue;
            }
            exp_sub_sum(prow + c0, c1 - c0, lseh[t]);
            std::fill(prow, prow + c0, 0.0f);
            std::fill(prow + c1, prow + bk, 0.0f);
            std::fill(srow, srow + c0, 0.0f);
            std::fill(srow + c1, srow + bk, 0.0f);
            const float Dt = Dvec[t];
            if (dropout.active()) {
              keep_factors(factor, dropout_row_index(d, dropout, b, h, t, j0), bk, dropout);
              for (int64_t c = c0; c < c1; ++c) {
                const float p = prow[c];
                srow[c] = p * (srow[c] * factor[c] - Dt) * d.scale;
                prow[c] = p * factor[c];
              }
            } else {
              const Vec8 vD = Vec8::set1(Dt), vsc = Vec8::set1(d.scale);
              int64_t c = c0;
              for (; c + 8 <= c1; c += 8) {
                const Vec8 p = Vec8::load(prow + c);
                (p * (Vec8::load(srow + c) - vD) * vsc).store(srow + c);
              }
              for (; c < c1; ++c) srow[c] = prow[c] * (srow[c] - Dt) * d.scale;
            }
          }
          gemm(true, false, bk, D, bq, 1.0f, P, kBlockK, doh + i0 * ldo, ldo, 1.0f, dvg + j0 * D, D);
          gemm(false, false, bq, D, bk, 1.0f, dS, kBlockK, kg + j0 * D, D, 1.0f, dqh + i0 * D, D);
          gemm(true, false, bk, D, bq, 1.0f, dS, kBlockK, qh + i0 * D, D, 1.0f, dkg + j0 * D, D);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
int64_t kv_cache_attention_workspace_floats(const KernelContext& kc, int64_t Tq, int64_t Tk) {
  return Tq * Tk * kc.num_threads;
}

void kv_cache_attention_forward(const KernelContext& kc, float* out, const float* q, const float* k_cache,
                                const float* v_cache, int64_t B, int64_t NQ, int64_t NKV, int64_t Tq, int64_t Tk,
                                int64_t S, int64_t D, float scale, float* workspace) {
  const int64_t G = NQ / NKV, ldo = B * NQ * D, past = Tk - Tq;
#pragma omp parallel for num_threads(kc.num_threads) schedule(dynamic, 1)
  for (int64_t task = 0; task < B * NQ; ++task) {
    const int64_t b = task / NQ, h = task % NQ;
    const float* qh = q + task * Tq * D;
    const float* kh = k_cache + (b * NKV + h / G) * S * D;
    const float* vh = v_cache + (b * NKV + h / G) * S * D;
    float* P = workspace + omp_get_thread_num() * Tq * Tk;
    gemm(false, true, Tq, Tk, D, scale, qh, D, kh, D, 0.0f, P, Tk);
    for (int64_t t = 0; t < Tq; ++t) {
      float* row = P + t * Tk;
      const int64_t n = past + t + 1;  // keys this query sees
      const float m = max_of(row, n);
      const float s = exp_sub_sum(row, n, m);
      scale_inplace(row, n, 1.0f / s);
      std::fill(row + n, row + Tk, 0.0f);
    }
    gemm(false, false, Tq, D, Tk, 1.0f, P, Tk, vh, D, 0.0f, out + b * NQ * D + h * D, ldo);
  }
}

}  // namespace mindspeed::cpu
