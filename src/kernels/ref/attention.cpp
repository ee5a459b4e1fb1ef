// Reference core attention (Megatron's unfused DotProductAttention): scores, causal (and
// document) mask, softmax in double, dropout on the probabilities, weighted sum of values.
// The saved probabilities [B, NQ, T, T] are those before dropout; the dropout mask is
// regenerated from its Philox stream in backward. The key/value-cache attention of inference
// (queries = the last Tq of Tk positions) follows the same arithmetic without dropout.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kernels.h"

namespace mindspeed::ref {
namespace {
inline int64_t first_visible_key(const AttentionMask& mask, int64_t b, int64_t t, int64_t T) {
  return mask.doc_start ? mask.doc_start[b * T + t] : 0;
}
// Global Philox index of probs[b, head, t, j] (independent of the parallel layout).
inline uint64_t dropout_index(const AttentionDims& d, const DropoutSpec& dropout, int64_t b,
                              int64_t h, int64_t t, int64_t j) {
  return static_cast<uint64_t>(
      (((dropout.first_sample + b) * d.num_heads_total + d.head_offset + h) * d.T + t) * d.T + j);
}
inline float keep_scale(const DropoutSpec& dropout, uint64_t index) {
  if (!dropout.active()) return 1.0f;
  return dropout.rng.uniform(dropout.index_offset + index) >= dropout.p ? 1.0f / (1.0f - dropout.p)
                                                                        : 0.0f;
}
}  // namespace

void core_attention_forward(const KernelContext& kc, float* out, float* probs, const float* q, const float* k,
                            const float* v, const AttentionMask& mask, const AttentionDims& d,
                            const DropoutSpec& dropout, float* /*workspace*/) {
  const int64_t T = d.T, D = d.D, G = d.NQ / d.NKV;
  const int64_t out_row = d.B * d.NQ * D;
  std::vector<double> scores(T);
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.NQ; ++h) {
      const float* qh = q + (b * d.NQ + h) * T * D;
      const float* kh = k + (b * d.NKV + h / G) * T * D;
      const float* vh = v + (b * d.NKV + h / G) * T * D;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t lo = first_visible_key(mask, b, t, T);
        double maxv = -std::numeric_limits<double>::infinity();
        for (int64_t j = lo; j <= t; ++j) {
          double s = 0.0;
          for (int64_t x = 0; x < D; ++x) s += static_cast<double>(qh[t * D + x]) * kh[j * D + x];
          scores[j] = s * d.scale;
          maxv = std::max(maxv, scores[j]);
        }
        double sum = 0.0;
        for (int64_t j = lo; j <= t; ++j) {
          scores[j] = std::exp(scores[j] - maxv);
          sum += scores[j];
        }
        float* prow = probs + ((b * d.NQ + h) * T + t) * T;
        for (int64_t j = 0; j < T; ++j) prow[j] = (j >= lo && j <= t) ? static_cast<float>(scores[j] / sum) : 0.0f;
        float* o = out + t * out_row + (b * d.NQ + h) * D;
        for (int64_t x = 0; x < D; ++x) {
          double acc = 0.0;
          for (int64_t j = lo; j <= t; ++j)
            acc += static_cast<double>(prow[j]) * keep_scale(dropout, dropout_index(d, dropout, b, h, t, j)) *
                   vh[j * D + x];
          o[x] = static_cast<float>(acc);
        }
      }
    }
  }
}

void core_attention_backward(const KernelContext& kc, float* dq, float* dk, float* dv, const float* dout,
                             const float* probs, const float* q, const float* k, const float* v,
                             const AttentionDims& d, const DropoutSpec& dropout,
                             float* /*workspace*/) {
  const int64_t T = d.T, D = d.D, G = d.NQ / d.NKV;
  const int64_t out_row = d.B * d.NQ * D;
  for (int64_t i = 0; i < d.B * d.NKV * T * D; ++i) {
    dk[i] = 0.0f;
    dv[i] = 0.0f;
  }
  std::vector<double> dp(T), dk_acc, dv_acc;
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t g = 0; g < d.NKV; ++g) {
      dk_acc.assign(T * D, 0.0);
      dv_acc.assign(T * D, 0.0);
      const float* kh = k + (b * d.NKV + g) * T * D;
      const float* vh = v + (b * d.NKV + g) * T * D;
      for (int64_t h = g * G; h < (g + 1) * G; ++h) {
        const float* qh = q + (b * d.NQ + h) * T * D;
        float* dqh = dq + (b * d.NQ + h) * T * D;
        for (int64_t t = 0; t < T; ++t) {
          const float* prow = probs + ((b * d.NQ + h) * T + t) * T;
          const float* go = dout + t * out_row + (b * d.NQ + h) * D;
          double dot = 0.0;  // sum_j P_j * dP_j
          for (int64_t j = 0; j <= t; ++j) {
            if (prow[j] == 0.0f) {
              dp[j] = 0.0;
              continue;
            }
            const double keep = keep_scale(dropout, dropout_index(d, dropout, b, h, t, j));
            double s = 0.0;
            for (int64_t x = 0; x < D; ++x) s += static_cast<double>(go[x]) * vh[j * D + x];
            dp[j] = s * keep;
            dot += prow[j] * dp[j];
            for (int64_t x = 0; x < D; ++x) dv_acc[j * D + x] += prow[j] * keep * go[x];
          }
          for (int64_t x = 0; x < D; ++x) dqh[t * D + x] = 0.0f;
          for (int64_t j = 0; j <= t; ++j) {
            if (prow[j] == 0.0f) continue;
            const double ds = prow[j] * (dp[j] - dot) * d.scale;
            for (int64_t x = 0; x < D; ++x) {
              dqh[t * D + x] += static_cast<float>(ds * kh[j * D + x]);
              dk_acc[j * D + x] += ds * qh[t * D + x];
            }
          }
        }
      }
      float* dkh = dk + (b * d.NKV + g) * T * D;
      float* dvh = dv + (b * d.NKV + g) * T * D;
      for (int64_t i = 0; i < T * D; ++i) {
        dkh[i] = static_cast<float>(dk_acc[i]);
        dvh[i] = static_cast<float>(dv_acc[i]);
      }
    }
  }
}

int64_t attention_workspace_floats(const KernelContext& kc, const AttentionDims& dims, AttentionKernel kernel,
                                   bool backward) {
  return 0;  // the reference kernels allocate what they need
}

void kv_cache_attention_forward(const KernelContext& kc, float* out, const float* q, const float* k_cache,
                                const float* v_cache, int64_t B, int64_t NQ, int64_t NKV, int64_t Tq, int64_t Tk,
                                int64_t S, int64_t D, float scale, float* /*workspace*/) {
  const int64_t G = NQ / NKV, out_row = B * NQ * D, past = Tk - Tq;
  std::vector<double> scores(Tk);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NQ; ++h) {
      const float* qh = q + (b * NQ + h) * Tq * D;
      const float* kh = k_cache + (b * NKV + h / G) * S * D;
      const float* vh = v_cache + (b * NKV + h / G) * S * D;
      for (int64_t t = 0; t < Tq; ++t) {
        const int64_t last = past + t;  // the query's own position
        double maxv = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= last; ++j) {
          double s = 0.0;
          for (int64_t x = 0; x < D; ++x) s += static_cast<double>(qh[t * D + x]) * kh[j * D + x];
          scores[j] = s * scale;
          maxv = std::max(maxv, scores[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= last; ++j) {
          scores[j] = std::exp(scores[j] - maxv);
          sum += scores[j];
        }
        float* o = out + t * out_row + (b * NQ + h) * D;
        for (int64_t x = 0; x < D; ++x) {
          double acc = 0.0;
          for (int64_t j = 0; j <= last; ++j) acc += scores[j] / sum * vh[j * D + x];
          o[x] = static_cast<float>(acc);
        }
      }
    }
  }
}

int64_t kv_cache_attention_workspace_floats(const KernelContext& kc, int64_t Tq, int64_t Tk) { return 0; }

}  // namespace mindspeed::ref
