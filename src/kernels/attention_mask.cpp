// attention_visible_pairs(): how many (query, key) pairs an AttentionMask lets see each other,
// for the FLOP counts of the profiler and the benchmarks (kernels.h).
#include <algorithm>
#include <vector>

#include "kernels/kernels.h"

namespace mindspeed {

double attention_visible_pairs(const AttentionMask& mask, const AttentionDims& d) {
  const int64_t Tk = d.keys();
  std::vector<int64_t> kp(Tk);
  for (int64_t j = 0; j < Tk; ++j) kp[j] = mask.k_position(j);
  std::sort(kp.begin(), kp.end());
  double pairs = 0.0;
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t t = 0; t < d.T; ++t) {
      const int64_t qp = mask.q_position(t);
      const auto lo = std::lower_bound(kp.begin(), kp.end(), mask.first_key(b, t, d.T, qp));
      const auto hi = std::upper_bound(kp.begin(), kp.end(), mask.last_key(qp));
      if (hi > lo) pairs += static_cast<double>(hi - lo);
    }
  }
  return pairs;
}

}  // namespace mindspeed
