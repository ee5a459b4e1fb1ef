// Fast ring-attention update (MindSpeed's npu_ring_attention_update, in log-sum-exp form;
// kernel_signatures.inc states the formula). OpenMP over the [s, b] rows of the output;
// per head the two weights are computed once in double (as the reference), then the
// head's D values are one Vec8 FMA loop with a scalar tail computing the same formula.
// Each element is written by one formula, so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/vec.h"
#include "kernels/kernels.h"

namespace mindspeed::cpu {
namespace {
// o = wp * p + wc * c over n values (o may alias p or c).
void weighted_sum(float* o, const float* p, float wp, const float* c, float wc, int64_t n) {
  const Vec8 vp = Vec8::set1(wp), vc = Vec8::set1(wc);
  int64_t x = 0;
  for (; x + 8 <= n; x += 8) Vec8::fma(vp, Vec8::load(p + x), vc * Vec8::load(c + x)).store(o + x);
  for (; x < n; ++x) o[x] = std::fma(wp, p[x], wc * c[x]);
}
}  // namespace

void ring_attention_update(const KernelContext& kc, float* out, float* lse, const float* prev_out,
                           const float* prev_lse, const float* cur_out, const float* cur_lse,
                           int64_t T, int64_t B, int64_t NQ, int64_t D) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
#pragma omp parallel for num_threads(kc.num_threads) schedule(static)
  for (int64_t n = 0; n < T * B; ++n) {  // row n = t * B + b of [T, B, NQ*D]
    const int64_t t = n / B, b = n % B;
    for (int64_t h = 0; h < NQ; ++h) {
      const int64_t row = (n * NQ + h) * D;
      const int64_t stat = (b * NQ + h) * T + t;
      const float lpf = prev_lse[stat], lcf = cur_lse[stat];
      float* o = out + row;
      if (lpf == kNegInf || lcf == kNegInf) {  // one partial (or both) saw no key
        const float* src = lpf != kNegInf ? prev_out + row : cur_out + row;
        if (lpf == kNegInf && lcf == kNegInf) {
          std::fill(o, o + D, 0.0f);
        } else if (o != src) {
          std::copy(src, src + D, o);
        }
        lse[stat] = lpf == kNegInf ? lcf : lpf;
        continue;
      }
      const double lp = lpf, lc = lcf;
      const double merged = std::max(lp, lc) + std::log1p(std::exp(-std::fabs(lp - lc)));
      weighted_sum(o, prev_out + row, static_cast<float>(std::exp(lp - merged)), cur_out + row,
                   static_cast<float>(std::exp(lc - merged)), D);
      lse[stat] = static_cast<float>(merged);
    }
  }
}

}  // namespace mindspeed::cpu
