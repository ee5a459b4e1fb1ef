// Reference attention. Core attention (Megatron's unfused DotProductAttention): scores, the
// mask of AttentionMask (band by positions, documents), softmax in double, dropout on the
// probabilities, weighted sum of values; the saved probabilities [B, NQ, T, Tk] are those
// before dropout, the dropout mask is regenerated from its Philox stream in backward.
// Flash attention (npu_fusion_attention's contract): the same per row in double, saving the
// log-sum-exp instead of the probabilities; backward recomputes them from the given lse. The
// key/value-cache attention of inference (queries = the last Tq of Tk positions) follows the same
// arithmetic without dropout.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kernels.h"

namespace mindspeed::ref {
namespace {
inline double keep_scale(const DropoutSpec& dropout, uint64_t index) {
  if (!dropout.active()) return 1.0f;
  return dropout.rng.uniform(index) >= dropout.p ? 1.0f / (1.0f - dropout.p) : 0.0f;
}

// Scaled scores (plus the ALiBi bias of head h) of query row qrow against every key of kh;
// visible[j] says which count.
// Returns the maximum visible score (-inf when none is).
double row_scores(std::vector<double>& scores, std::vector<char>& visible, const float* qrow,
                  const float* kh, const AttentionMask& mask, const AttentionDims& d, int64_t b,
                  int64_t h, int64_t t) {
  const int64_t Tk = d.keys(), qp = mask.q_position(t);
  double maxv = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < Tk; ++j) {
    visible[j] = mask.visible(b, t, d.T, qp, mask.k_position(j));
    if (!visible[j]) continue;
    double s = 0.0;
    for (int64_t x = 0; x < d.D; ++x) s += static_cast<double>(qrow[x]) * kh[j * d.D + x];
    scores[j] = s * d.scale;
    if (mask.alibi_slopes)
      scores[j] += alibi_bias(mask.alibi, mask.alibi_slopes[h], qp, mask.k_position(j));
    maxv = std::max(maxv, scores[j]);
  }
  return maxv;
}
}  // namespace

void core_attention_forward(const KernelContext& kc, float* out, float* probs, const float* q,
                            const float* k, const float* v, const AttentionMask& mask,
                            const AttentionDims& d, const DropoutSpec& dropout,
                            float* /*workspace*/) {
  const int64_t T = d.T, Tk = d.keys(), D = d.D, G = d.NQ / d.NKV;
  const int64_t out_row = d.B * d.NQ * D;
  std::vector<double> scores(Tk);
  std::vector<char> visible(Tk);
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.NQ; ++h) {
      const float* qh = q + (b * d.NQ + h) * T * D;
      const float* kh = k + (b * d.NKV + h / G) * Tk * D;
      const float* vh = v + (b * d.NKV + h / G) * Tk * D;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t qp = mask.q_position(t);
        const double maxv = row_scores(scores, visible, qh + t * D, kh, mask, d, b, h, t);
        double sum = 0.0;
        for (int64_t j = 0; j < Tk; ++j) {
          if (!visible[j]) continue;
          scores[j] = std::exp(scores[j] - maxv);
          sum += scores[j];
        }
        float* prow = probs + ((b * d.NQ + h) * T + t) * Tk;
        for (int64_t j = 0; j < Tk; ++j)
          prow[j] = visible[j] ? static_cast<float>(scores[j] / sum) : 0.0f;
        float* o = out + t * out_row + (b * d.NQ + h) * D;
        for (int64_t x = 0; x < D; ++x) {
          double acc = 0.0;
          for (int64_t j = 0; j < Tk; ++j)
            if (visible[j])
              acc += static_cast<double>(prow[j]) *
                     keep_scale(dropout,
                                attention_dropout_index(dropout, d, b, h, qp, mask.k_position(j))) *
                     vh[j * D + x];
          o[x] = static_cast<float>(acc);
        }
      }
    }
  }
}

void core_attention_backward(const KernelContext& kc, float* dq, float* dk, float* dv,
                             const float* dout, const float* probs, const float* q, const float* k,
                             const float* v, const AttentionDims& d, const DropoutSpec& dropout,
                             float* /*workspace*/) {
  const int64_t T = d.T, Tk = d.keys(), D = d.D, G = d.NQ / d.NKV;
  const int64_t out_row = d.B * d.NQ * D;
  for (int64_t i = 0; i < d.B * d.NKV * Tk * D; ++i) {
    dk[i] = 0.0f;
    dv[i] = 0.0f;
  }
  std::vector<double> dp(Tk), dk_acc, dv_acc;
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t g = 0; g < d.NKV; ++g) {
      dk_acc.assign(Tk * D, 0.0);
      dv_acc.assign(Tk * D, 0.0);
      const float* kh = k + (b * d.NKV + g) * Tk * D;
      const float* vh = v + (b * d.NKV + g) * Tk * D;
      for (int64_t h = g * G; h < (g + 1) * G; ++h) {
        const float* qh = q + (b * d.NQ + h) * T * D;
        float* dqh = dq + (b * d.NQ + h) * T * D;
        for (int64_t t = 0; t < T; ++t) {
          const float* prow = probs + ((b * d.NQ + h) * T + t) * Tk;
          const float* go = dout + t * out_row + (b * d.NQ + h) * D;
          double dot = 0.0;  // sum_j P_j * dP_j
          for (int64_t j = 0; j < Tk; ++j) {
            if (prow[j] == 0.0f) {
              dp[j] = 0.0;
              continue;
            }
            // No mask here: identity positions (kernel_signatures.inc).
            const double keep =
                keep_scale(dropout, attention_dropout_index(dropout, d, b, h, t, j));
            double s = 0.0;
            for (int64_t x = 0; x < D; ++x) s += static_cast<double>(go[x]) * vh[j * D + x];
            dp[j] = s * keep;
            dot += prow[j] * dp[j];
            for (int64_t x = 0; x < D; ++x) dv_acc[j * D + x] += prow[j] * keep * go[x];
          }
          for (int64_t x = 0; x < D; ++x) dqh[t * D + x] = 0.0f;
          for (int64_t j = 0; j < Tk; ++j) {
            if (prow[j] == 0.0f) continue;
            const double ds = prow[j] * (dp[j] - dot) * d.scale;
            for (int64_t x = 0; x < D; ++x) {
              dqh[t * D + x] += static_cast<float>(ds * kh[j * D + x]);
              dk_acc[j * D + x] += ds * qh[t * D + x];
            }
          }
        }
      }
      float* dkh = dk + (b * d.NKV + g) * Tk * D;
      float* dvh = dv + (b * d.NKV + g) * Tk * D;
      for (int64_t i = 0; i < Tk * D; ++i) {
        dkh[i] = static_cast<float>(dk_acc[i]);
        dvh[i] = static_cast<float>(dv_acc[i]);
      }
    }
  }
}

void flash_attention_forward(const KernelContext& kc, float* out, float* lse, const float* q,
                             const float* k, const float* v, const AttentionMask& mask,
                             const AttentionDims& d, const DropoutSpec& dropout,
                             float* /*workspace*/) {
  const int64_t T = d.T, Tk = d.keys(), D = d.D, G = d.NQ / d.NKV;
  const int64_t out_row = d.B * d.NQ * D;
  std::vector<double> scores(Tk), acc(D);
  std::vector<char> visible(Tk);
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.NQ; ++h) {
      const float* qh = q + (b * d.NQ + h) * T * D;
      const float* kh = k + (b * d.NKV + h / G) * Tk * D;
      const float* vh = v + (b * d.NKV + h / G) * Tk * D;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t qp = mask.q_position(t);
        const double maxv = row_scores(scores, visible, qh + t * D, kh, mask, d, b, h, t);
        float* o = out + t * out_row + (b * d.NQ + h) * D;
        float& row_lse = lse[(b * d.NQ + h) * T + t];
        if (maxv == -std::numeric_limits<double>::infinity()) {  // no visible key
          for (int64_t x = 0; x < D; ++x) o[x] = 0.0f;
          row_lse = -std::numeric_limits<float>::infinity();
          continue;
        }
        double sum = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < Tk; ++j) {
          if (!visible[j]) continue;
          const double p = std::exp(scores[j] - maxv);
          sum += p;
          const double pd = p * keep_scale(dropout, attention_dropout_index(dropout, d, b, h, qp,
                                                                            mask.k_position(j)));
          for (int64_t x = 0; x < D; ++x) acc[x] += pd * vh[j * D + x];
        }
        for (int64_t x = 0; x < D; ++x) o[x] = static_cast<float>(acc[x] / sum);
        row_lse = static_cast<float>(maxv + std::log(sum));
      }
    }
  }
}

void flash_attention_backward(const KernelContext& kc, float* dq, float* dk, float* dv,
                              const float* dout, const float* out, const float* lse, const float* q,
                              const float* k, const float* v, const AttentionMask& mask,
                              const AttentionDims& d, const DropoutSpec& dropout,
                              float* /*workspace*/) {
  const int64_t T = d.T, Tk = d.keys(), D = d.D, G = d.NQ / d.NKV;
  const int64_t out_row = d.B * d.NQ * D;
  std::vector<double> scores(Tk), dk_acc, dv_acc, dq_acc(D);
  std::vector<char> visible(Tk);
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t g = 0; g < d.NKV; ++g) {
      dk_acc.assign(Tk * D, 0.0);
      dv_acc.assign(Tk * D, 0.0);
      const float* kh = k + (b * d.NKV + g) * Tk * D;
      const float* vh = v + (b * d.NKV + g) * Tk * D;
      for (int64_t h = g * G; h < (g + 1) * G; ++h) {
        const float* qh = q + (b * d.NQ + h) * T * D;
        float* dqh = dq + (b * d.NQ + h) * T * D;
        for (int64_t t = 0; t < T; ++t) {
          const int64_t qp = mask.q_position(t);
          const float* go = dout + t * out_row + (b * d.NQ + h) * D;
          const float* o = out + t * out_row + (b * d.NQ + h) * D;
          const double row_lse = lse[(b * d.NQ + h) * T + t];
          std::fill(dq_acc.begin(), dq_acc.end(), 0.0);
          if (row_lse != -std::numeric_limits<double>::infinity()) {
            row_scores(scores, visible, qh + t * D, kh, mask, d, b, h, t);
            double drow = 0.0;  // rowsum(dout * out)
            for (int64_t x = 0; x < D; ++x) drow += static_cast<double>(go[x]) * o[x];
            for (int64_t j = 0; j < Tk; ++j) {
              if (!visible[j]) continue;
              const double p = std::exp(scores[j] - row_lse);
              const double keep = keep_scale(
                  dropout, attention_dropout_index(dropout, d, b, h, qp, mask.k_position(j)));
              double dp = 0.0;
              for (int64_t x = 0; x < D; ++x) dp += static_cast<double>(go[x]) * vh[j * D + x];
              const double ds = p * (dp * keep - drow) * d.scale;
              for (int64_t x = 0; x < D; ++x) {
                dv_acc[j * D + x] += p * keep * go[x];
                dk_acc[j * D + x] += ds * qh[t * D + x];
                dq_acc[x] += ds * kh[j * D + x];
              }
            }
          }
          for (int64_t x = 0; x < D; ++x) dqh[t * D + x] = static_cast<float>(dq_acc[x]);
        }
      }
      float* dkh = dk + (b * d.NKV + g) * Tk * D;
      float* dvh = dv + (b * d.NKV + g) * Tk * D;
      for (int64_t i = 0; i < Tk * D; ++i) {
        dkh[i] = static_cast<float>(dk_acc[i]);
        dvh[i] = static_cast<float>(dv_acc[i]);
      }
    }
  }
}

int64_t attention_workspace_floats(const KernelContext& kc, const AttentionDims& dims,
                                   AttentionKernel kernel, bool backward) {
  return 0;  // the reference kernels allocate what they need
}

void kv_cache_attention_forward(const KernelContext& kc, float* out, const float* q,
                                const float* k_cache, const float* v_cache, int64_t B, int64_t NQ,
                                int64_t NKV, int64_t Tq, int64_t Tk, int64_t S, int64_t D,
                                float scale, float* /*workspace*/) {
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

int64_t kv_cache_attention_workspace_floats(const KernelContext& kc, int64_t Tq, int64_t Tk) {
  return 0;
}

}  // namespace mindspeed::ref
