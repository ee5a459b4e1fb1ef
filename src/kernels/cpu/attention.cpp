// Fast attention kernels.
//  * core_attention_*: Megatron's unfused DotProductAttention with the GEMMs in BLAS and a
//    vectorised masked softmax; materialises probs [B, NQ, T, Tk] (O(T*Tk) memory).
//  * flash_attention_*: FlashAttention-2 (Dao, 2023) on the CPU: query blocks of kBlockQ rows
//    against key blocks of kBlockK columns, S = Q K^T and P V as BLAS GEMMs on the blocks,
//    online softmax in between; saves only lse = max + log(sum) per row. Backward recomputes
//    P from lse block by block (five GEMMs per block pair) and uses D = rowsum(dO * O).
//    A block pair is skipped when the positions of its keys (min/max, scanned) are outside
//    every row's visible band, and masked per element only when not inside every row's band.
//  * kv_cache_attention_forward: inference, Tq new queries against a key/value cache of Tk
//    positions; per (batch, head) S = Q K^T and P V as GEMMs on the cache rows, masked
//    softmax in between.
// Masks (AttentionMask): with contiguous key positions (k_pos null) a row's visible keys are
// an index range and the softmax runs on it; otherwise masked scores are set to -inf first.
// The ALiBi bias is added to a block's scores after the Q K^T GEMM (and again to the
// recomputed ones in backward).
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

// Visible key positions of query row t of sample b: [lo, hi] (band and document rules) and
// those below pend (prefix).
struct RowBand {
  int64_t lo, hi, pend;
};
inline RowBand row_band(const AttentionMask& mask, int64_t b, int64_t t, int64_t T) {
  const int64_t qp = mask.q_position(t);
  return {mask.first_key(b, t, T, qp), mask.last_key(qp), mask.prefix_end(b)};
}

// Sets the scores of key rows [j0, j0 + n) that the row does not see to -inf (k_pos given).
inline void mask_scores(float* row, const AttentionMask& mask, const RowBand& band, int64_t j0,
                        int64_t n) {
  for (int64_t c = 0; c < n; ++c) {
    const int64_t kp = mask.k_pos[j0 + c];
    if ((kp < band.lo || kp > band.hi) && kp >= band.pend) row[c] = kNegInf;
  }
}

// The columns [c0, c1) of key rows [j0, j0 + n) the row's softmax runs on (c0 >= c1: none);
// scores inside them that the row does not see are set to -inf. With contiguous key
// positions (k_pos null) the band is an index range, so only a gap between the prefix and
// the band needs -inf.
inline void row_columns(float* row, const AttentionMask& mask, const RowBand& band, int64_t j0,
                        int64_t n, int64_t& c0, int64_t& c1) {
  if (mask.k_pos) {
    c0 = 0;
    c1 = n;
    mask_scores(row, mask, band, j0, n);
    return;
  }
  c0 = std::clamp<int64_t>(band.lo - mask.k_offset - j0, 0, n);
  c1 = std::clamp<int64_t>(band.hi + 1 - mask.k_offset - j0, 0, n);
  const int64_t p1 = std::clamp<int64_t>(band.pend - mask.k_offset - j0, 0, n);  // [0, p1)
  if (p1 == 0) return;
  if (c0 >= c1) {
    c0 = 0;
    c1 = p1;
    return;
  }
  if (p1 < c0) std::fill(row + p1, row + c0, kNegInf);
  c0 = 0;
  c1 = std::max(c1, p1);
}

// row[c] += the ALiBi bias (head slope m) of key row j0 + c for a query at position qp.
void add_alibi(float* row, const AttentionMask& mask, float m, int64_t qp, int64_t j0, int64_t n) {
  const double dm = m;
  auto d = [&](int64_t c) { return static_cast<double>(mask.k_position(j0 + c) - qp); };
  switch (mask.alibi) {
    case AlibiBias::kSymmetric:
      for (int64_t c = 0; c < n; ++c) row[c] += static_cast<float>(-dm * std::fabs(d(c)));
      break;
    case AlibiBias::kSqrt:
      for (int64_t c = 0; c < n; ++c)
        row[c] += static_cast<float>(-dm * std::sqrt(std::fabs(d(c))));
      break;
    case AlibiBias::kSigned:
      for (int64_t c = 0; c < n; ++c) row[c] += static_cast<float>(dm * d(c));
      break;
    case AlibiBias::kKeyPosition:
      for (int64_t c = 0; c < n; ++c)
        row[c] += static_cast<float>(dm * static_cast<double>(mask.k_position(j0 + c)));
      break;
  }
}

// Smallest and largest position of key rows [j0, j0 + n).
inline void key_positions(const AttentionMask& mask, int64_t j0, int64_t n, int64_t& kmin,
                          int64_t& kmax) {
  if (!mask.k_pos) {
    kmin = mask.k_offset + j0;
    kmax = kmin + n - 1;
    return;
  }
  kmin = kmax = mask.k_pos[j0];
  for (int64_t c = 1; c < n; ++c) {
    kmin = std::min<int64_t>(kmin, mask.k_pos[j0 + c]);
    kmax = std::max<int64_t>(kmax, mask.k_pos[j0 + c]);
  }
}

// The bands of a query block (one sample): their union [lo_min, hi_max], their intersection
// [lo_max, hi_min], the prefix end, and the key rows [ja, jb) that can be visible at all.
struct BlockBands {
  int64_t lo_min, lo_max, hi_min, hi_max, pend, ja, jb;
  // Key rows at positions within [kmin, kmax]: visible to no row / to every row.
  bool none_visible(int64_t kmin, int64_t kmax) const {
    return (kmax < lo_min || kmin > hi_max) && kmin >= pend;
  }
  bool all_visible(int64_t kmin, int64_t kmax) const {
    return (kmin >= lo_max && kmax <= hi_min) || kmax < pend;
  }
};
BlockBands block_bands(const AttentionMask& mask, const RowBand* bands, int64_t bq, int64_t Tk) {
  BlockBands r{bands[0].lo, bands[0].lo, bands[0].hi, bands[0].hi, bands[0].pend, 0, Tk};
  for (int64_t i = 1; i < bq; ++i) {
    r.lo_min = std::min(r.lo_min, bands[i].lo);
    r.lo_max = std::max(r.lo_max, bands[i].lo);
    r.hi_min = std::min(r.hi_min, bands[i].hi);
    r.hi_max = std::max(r.hi_max, bands[i].hi);
  }
  if (!mask.k_pos) {  // contiguous key positions: only rows [ja, jb) can be visible
    r.ja = std::clamp<int64_t>(r.lo_min - mask.k_offset, 0, Tk);
    r.jb = std::clamp<int64_t>(r.hi_max + 1 - mask.k_offset, 0, Tk);
    const int64_t prefix_rows = std::clamp<int64_t>(r.pend - mask.k_offset, 0, Tk);
    if (prefix_rows > 0) {
      r.ja = 0;
      r.jb = std::max(r.jb, prefix_rows);
    }
  }
  return r;
}

// Calls tile(j0, bk, all) for every key tile [j0, j0 + bk) of the query rows [i0, i0 + bq)
// in which some row sees some key (all: every row sees every key of the tile); bands[r]
// holds row i0 + r's band afterwards, for the per-row masking.
template <typename Tile>
inline void for_each_visible_tile(const AttentionMask& mask, int64_t b, int64_t i0, int64_t bq,
                                  int64_t T, int64_t Tk, RowBand* bands, Tile&& tile) {
  for (int64_t r = 0; r < bq; ++r) bands[r] = row_band(mask, b, i0 + r, T);
  const BlockBands blk = block_bands(mask, bands, bq, Tk);
  for (int64_t j0 = blk.ja / kBlockK * kBlockK; j0 < blk.jb; j0 += kBlockK) {
    const int64_t bk = std::min(kBlockK, blk.jb - j0);
    int64_t kmin, kmax;
    key_positions(mask, j0, bk, kmin, kmax);
    if (blk.none_visible(kmin, kmax)) continue;
    tile(j0, bk, blk.all_visible(kmin, kmax));
  }
}

// factor[c] = keep factor of probability (b, h, query at qp, key row j0 + c), c in [0, n).
void keep_factors_at(float* factor, const DropoutSpec& dropout, const AttentionDims& d,
                     const AttentionMask& mask, int64_t b, int64_t h, int64_t qp, int64_t j0,
                     int64_t n) {
  if (!mask.k_pos) {
    keep_factors(factor, attention_dropout_index(dropout, d, b, h, qp, mask.k_offset + j0), n,
                 dropout);
    return;
  }
  for (int64_t c = 0; c < n;) {  // a run of consecutive positions draws consecutive elements
    int64_t e = c + 1;
    while (e < n && mask.k_pos[j0 + e] == mask.k_pos[j0 + e - 1] + 1) ++e;
    keep_factors(factor + c, attention_dropout_index(dropout, d, b, h, qp, mask.k_pos[j0 + c]),
                 e - c, dropout);
    c = e;
  }
}

int64_t per_thread_floats(const AttentionDims& d, AttentionKernel kernel, bool backward) {
  if (kernel == AttentionKernel::kCore) return (backward ? 2 : 1) * d.T * d.keys();
  if (!backward) return kBlockQ * kBlockK + kBlockQ * d.D + 2 * kBlockQ + kBlockK;
  return 2 * kBlockQ * kBlockK + d.T + kBlockK;
}
}  // namespace

int64_t attention_workspace_floats(const KernelContext& kc, const AttentionDims& dims,
                                   AttentionKernel kernel, bool backward) {
  return per_thread_floats(dims, kernel, backward) * kc.num_threads;
}

// ---------------------------------------------------------------------------------------
void core_attention_forward(const KernelContext& kc, float* out, float* probs, const float* q,
                            const float* k, const float* v, const AttentionMask& mask,
                            const AttentionDims& d, const DropoutSpec& dropout, float* workspace) {
  const int64_t T = d.T, Tk = d.keys(), D = d.D, G = d.NQ / d.NKV, ldo = d.B * d.NQ * D;
  const int64_t per_thread = per_thread_floats(d, AttentionKernel::kCore, false);
#pragma omp parallel for num_threads(kc.num_threads) schedule(dynamic, 1)
  for (int64_t task = 0; task < d.B * d.NQ; ++task) {
    const int64_t b = task / d.NQ, h = task % d.NQ;
    const float* qh = q + task * T * D;
    const float* kh = k + (b * d.NKV + h / G) * Tk * D;
    const float* vh = v + (b * d.NKV + h / G) * Tk * D;
    float* P = probs + task * T * Tk;
    gemm(false, true, T, Tk, D, d.scale, qh, D, kh, D, 0.0f, P, Tk);
    for (int64_t t = 0; t < T; ++t) {
      float* row = P + t * Tk;
      if (mask.alibi_slopes) add_alibi(row, mask, mask.alibi_slopes[h], mask.q_position(t), 0, Tk);
      int64_t c0, c1;
      row_columns(row, mask, row_band(mask, b, t, T), 0, Tk, c0, c1);
      const float m = c0 < c1 ? max_of(row + c0, c1 - c0) : kNegInf;
      if (m == kNegInf) {  // no visible key
        std::fill(row, row + Tk, 0.0f);
        continue;
      }
      const float s = exp_sub_sum(row + c0, c1 - c0, m);
      scale_inplace(row + c0, c1 - c0, 1.0f / s);
      std::fill(row, row + c0, 0.0f);
      std::fill(row + c1, row + Tk, 0.0f);
    }
    const float* Pd = P;
    if (dropout.active()) {
      float* W = workspace + omp_get_thread_num() * per_thread;
      for (int64_t t = 0; t < T; ++t) {
        keep_factors_at(W + t * Tk, dropout, d, mask, b, h, mask.q_position(t), 0, Tk);
        for (int64_t j = 0; j < Tk; ++j) W[t * Tk + j] *= P[t * Tk + j];
      }
      Pd = W;
    }
    gemm(false, false, T, D, Tk, 1.0f, Pd, Tk, vh, D, 0.0f, out + b * d.NQ * D + h * D, ldo);
  }
}

void core_attention_backward(const KernelContext& kc, float* dq, float* dk, float* dv,
                             const float* dout, const float* probs, const float* q, const float* k,
                             const float* v, const AttentionDims& d, const DropoutSpec& dropout,
                             float* workspace) {
  const int64_t T = d.T, Tk = d.keys(), D = d.D, G = d.NQ / d.NKV, ldo = d.B * d.NQ * D;
  const int64_t per_thread = per_thread_floats(d, AttentionKernel::kCore, true);
  const AttentionMask identity{};  // no mask here: dropout at identity positions
#pragma omp parallel for num_threads(kc.num_threads) schedule(dynamic, 1)
  for (int64_t task = 0; task < d.B * d.NKV; ++task) {
    const int64_t b = task / d.NKV;
    const float* kg = k + task * Tk * D;
    const float* vg = v + task * Tk * D;
    float* dkg = dk + task * Tk * D;
    float* dvg = dv + task * Tk * D;
    std::fill(dkg, dkg + Tk * D, 0.0f);
    std::fill(dvg, dvg + Tk * D, 0.0f);
    float* W1 = workspace + omp_get_thread_num() * per_thread;  // dropped probs, then factors
    float* W2 = W1 + T * Tk;                                    // dP, then dS
    for (int64_t h = (task % d.NKV) * G; h < (task % d.NKV + 1) * G; ++h) {
      const float* P = probs + (b * d.NQ + h) * T * Tk;
      const float* qh = q + (b * d.NQ + h) * T * D;
      const float* doh = dout + b * d.NQ * D + h * D;
      float* dqh = dq + (b * d.NQ + h) * T * D;
      const float* Pd = P;
      if (dropout.active()) {
        for (int64_t t = 0; t < T; ++t) {
          keep_factors_at(W1 + t * Tk, dropout, d, identity, b, h, t, 0, Tk);
          for (int64_t j = 0; j < Tk; ++j) W1[t * Tk + j] *= P[t * Tk + j];
        }
        Pd = W1;
      }
      gemm(true, false, Tk, D, T, 1.0f, Pd, Tk, doh, ldo, 1.0f, dvg, D);
      gemm(false, true, T, Tk, D, 1.0f, doh, ldo, vg, D, 0.0f, W2, Tk);
      for (int64_t t = 0; t < T; ++t) {
        const float* prow = P + t * Tk;
        float* row = W2 + t * Tk;
        if (dropout.active()) {
          keep_factors_at(W1 + t * Tk, dropout, d, identity, b, h, t, 0, Tk);
          for (int64_t j = 0; j < Tk; ++j) row[j] *= W1[t * Tk + j];
        }
        const float pd = dot(prow, row, Tk);
        for (int64_t j = 0; j < Tk; ++j) row[j] = prow[j] * (row[j] - pd) * d.scale;
      }
      gemm(false, false, T, D, Tk, 1.0f, W2, Tk, kg, D, 0.0f, dqh, D);
      gemm(true, false, Tk, D, T, 1.0f, W2, Tk, qh, D, 1.0f, dkg, D);
    }
  }
}

// ---------------------------------------------------------------------------------------
void flash_attention_forward(const KernelContext& kc, float* out, float* lse, const float* q,
                             const float* k, const float* v, const AttentionMask& mask,
                             const AttentionDims& d, const DropoutSpec& dropout, float* workspace) {
  const int64_t T = d.T, Tk = d.keys(), D = d.D, G = d.NQ / d.NKV, ldo = d.B * d.NQ * D;
  const int64_t nqb = (T + kBlockQ - 1) / kBlockQ;
  const int64_t per_thread = per_thread_floats(d, AttentionKernel::kFlash, false);
#pragma omp parallel for num_threads(kc.num_threads) schedule(dynamic, 1)
  for (int64_t task = 0; task < d.B * d.NQ * nqb; ++task) {
    // Longest blocks (last query rows, most keys) first for load balance.
    const int64_t qb = nqb - 1 - task % nqb;
    const int64_t bh = task / nqb, b = bh / d.NQ, h = bh % d.NQ;
    const float* qh = q + bh * T * D;
    const float* kh = k + (b * d.NKV + h / G) * Tk * D;
    const float* vh = v + (b * d.NKV + h / G) * Tk * D;
    float* S = workspace + omp_get_thread_num() * per_thread;
    float* acc = S + kBlockQ * kBlockK;
    float* m = acc + kBlockQ * D;
    float* l = m + kBlockQ;
    float* factor = l + kBlockQ;
    const int64_t i0 = qb * kBlockQ, bq = std::min(kBlockQ, T - i0);
    std::fill(acc, acc + bq * D, 0.0f);
    std::fill(m, m + bq, kNegInf);
    std::fill(l, l + bq, 0.0f);
    RowBand bands[kBlockQ];
    for_each_visible_tile(mask, b, i0, bq, T, Tk, bands, [&](int64_t j0, int64_t bk, bool all) {
      gemm(false, true, bq, bk, D, d.scale, qh + i0 * D, D, kh + j0 * D, D, 0.0f, S, kBlockK);
      for (int64_t r = 0; r < bq; ++r) {
        const int64_t t = i0 + r;
        float* row = S + r * kBlockK;
        if (mask.alibi_slopes)
          add_alibi(row, mask, mask.alibi_slopes[h], mask.q_position(t), j0, bk);
        int64_t c0 = 0, c1 = bk;
        if (!all) row_columns(row, mask, bands[r], j0, bk, c0, c1);
        const float tile_max = c0 < c1 ? max_of(row + c0, c1 - c0) : kNegInf;
        if (tile_max == kNegInf) {  // no visible key in this block
          std::fill(row, row + bk, 0.0f);
          continue;
        }
        const float m_new = std::max(m[r], tile_max);
        const float corr = m[r] == kNegInf ? 0.0f : exp_scalar(m[r] - m_new);
        const float rs = exp_sub_sum(row + c0, c1 - c0, m_new);
        std::fill(row, row + c0, 0.0f);
        std::fill(row + c1, row + bk, 0.0f);
        l[r] = l[r] * corr + rs;
        m[r] = m_new;
        if (corr != 1.0f) scale_inplace(acc + r * D, D, corr);
        if (dropout.active()) {
          keep_factors_at(factor, dropout, d, mask, b, h, mask.q_position(t), j0, bk);
          for (int64_t c = c0; c < c1; ++c) row[c] *= factor[c];
        }
      }
      gemm(false, false, bq, D, bk, 1.0f, S, kBlockK, vh + j0 * D, D, 1.0f, acc, D);
    });
    for (int64_t r = 0; r < bq; ++r) {
      const int64_t t = i0 + r;
      float* o = out + t * ldo + b * d.NQ * D + h * D;
      if (l[r] == 0.0f) {  // no visible key
        std::fill(o, o + D, 0.0f);
        lse[bh * T + t] = kNegInf;
        continue;
      }
      const float inv = 1.0f / l[r];
      for (int64_t x = 0; x < D; ++x) o[x] = acc[r * D + x] * inv;
      lse[bh * T + t] = m[r] + std::log(l[r]);
    }
  }
}

void flash_attention_backward(const KernelContext& kc, float* dq, float* dk, float* dv,
                              const float* dout, const float* out, const float* lse, const float* q,
                              const float* k, const float* v, const AttentionMask& mask,
                              const AttentionDims& d, const DropoutSpec& dropout,
                              float* workspace) {
  const int64_t T = d.T, Tk = d.keys(), D = d.D, G = d.NQ / d.NKV, ldo = d.B * d.NQ * D;
  const int64_t per_thread = per_thread_floats(d, AttentionKernel::kFlash, true);
#pragma omp parallel for num_threads(kc.num_threads) schedule(dynamic, 1)
  for (int64_t task = 0; task < d.B * d.NKV; ++task) {
    const int64_t b = task / d.NKV;
    const float* kg = k + task * Tk * D;
    const float* vg = v + task * Tk * D;
    float* dkg = dk + task * Tk * D;
    float* dvg = dv + task * Tk * D;
    std::fill(dkg, dkg + Tk * D, 0.0f);
    std::fill(dvg, dvg + Tk * D, 0.0f);
    float* P = workspace + omp_get_thread_num() * per_thread;  // P, then dropped P
    float* dS = P + kBlockQ * kBlockK;                         // dP, then dS * scale
    float* Dvec = dS + kBlockQ * kBlockK;
    float* factor = Dvec + T;
    RowBand bands[kBlockQ];
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
        for_each_visible_tile(mask, b, i0, bq, T, Tk, bands, [&](int64_t j0, int64_t bk, bool all) {
          gemm(false, true, bq, bk, D, d.scale, qh + i0 * D, D, kg + j0 * D, D, 0.0f, P, kBlockK);
          gemm(false, true, bq, bk, D, 1.0f, doh + i0 * ldo, ldo, vg + j0 * D, D, 0.0f, dS,
               kBlockK);
          for (int64_t r = 0; r < bq; ++r) {
            const int64_t t = i0 + r;
            float* prow = P + r * kBlockK;
            float* srow = dS + r * kBlockK;
            int64_t c0 = 0, c1 = bk;
            if (lseh[t] == kNegInf) {  // the row sees no key at all
              c1 = 0;
            } else {
              if (mask.alibi_slopes)
                add_alibi(prow, mask, mask.alibi_slopes[h], mask.q_position(t), j0, bk);
              if (!all) row_columns(prow, mask, bands[r], j0, bk, c0, c1);
            }
            if (c0 >= c1) {
              std::fill(prow, prow + bk, 0.0f);
              std::fill(srow, srow + bk, 0.0f);
              continue;
            }
            exp_sub_sum(prow + c0, c1 - c0, lseh[t]);  // masked scores (-inf) give 0
            std::fill(prow, prow + c0, 0.0f);
            std::fill(prow + c1, prow + bk, 0.0f);
            std::fill(srow, srow + c0, 0.0f);
            std::fill(srow + c1, srow + bk, 0.0f);
            const float Dt = Dvec[t];
            if (dropout.active()) {
              keep_factors_at(factor, dropout, d, mask, b, h, mask.q_position(t), j0, bk);
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
          gemm(true, false, bk, D, bq, 1.0f, P, kBlockK, doh + i0 * ldo, ldo, 1.0f, dvg + j0 * D,
               D);
          gemm(false, false, bq, D, bk, 1.0f, dS, kBlockK, kg + j0 * D, D, 1.0f, dqh + i0 * D, D);
          gemm(true, false, bk, D, bq, 1.0f, dS, kBlockK, qh + i0 * D, D, 1.0f, dkg + j0 * D, D);
        });
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
int64_t kv_cache_attention_workspace_floats(const KernelContext& kc, int64_t Tq, int64_t Tk) {
  return Tq * Tk * kc.num_threads;
}

void kv_cache_attention_forward(const KernelContext& kc, float* out, const float* q,
                                const float* k_cache, const float* v_cache, int64_t B, int64_t NQ,
                                int64_t NKV, int64_t Tq, int64_t Tk, int64_t S, int64_t D,
                                float scale, float* workspace) {
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
