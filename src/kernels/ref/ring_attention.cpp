// Reference ring-attention update (MindSpeed's npu_ring_attention_update, in log-sum-exp
// form; kernel_signatures.inc states the formula): one row at a time, weights and the
// merged output in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/kernels.h"

namespace mindspeed::ref {

void ring_attention_update(const KernelContext& kc, float* out, float* lse, const float* prev_out,
                           const float* prev_lse, const float* cur_out, const float* cur_lse,
                           int64_t T, int64_t B, int64_t NQ, int64_t D) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < NQ; ++h) {
        const int64_t row = ((t * B + b) * NQ + h) * D;  // [T, B, NQ*D]
        const int64_t stat = (b * NQ + h) * T + t;       // [B, NQ, T]
        const double lp = prev_lse[stat], lc = cur_lse[stat];
        // A partial over no visible key has lse = -inf and weight 0; its output is not read.
        double wp = 0.0, wc = 0.0, merged = kNegInf;
        if (lp != kNegInf && lc != kNegInf) {
          merged = std::max(lp, lc) + std::log1p(std::exp(-std::fabs(lp - lc)));
          wp = std::exp(lp - merged);
          wc = std::exp(lc - merged);
        } else if (lp != kNegInf) {
          merged = lp;
          wp = 1.0;
        } else if (lc != kNegInf) {
          merged = lc;
          wc = 1.0;
        }
        for (int64_t x = 0; x < D; ++x) {
          double o = 0.0;
          if (wp != 0.0) o += wp * prev_out[row + x];
          if (wc != 0.0) o += wc * cur_out[row + x];
          out[row + x] = static_cast<float>(o);
        }
        lse[stat] = static_cast<float>(merged);
      }
    }
  }
}

}  // namespace mindspeed::ref
