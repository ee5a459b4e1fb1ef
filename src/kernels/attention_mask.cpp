// attention_visible_pairs(): how many (query, key) pairs an AttentionMask lets see each other,
// for the FLOP counts of the profiler and the benchmarks (kernels.h).
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/kernels.h"

namespace mindspeed {

double attention_visible_pairs(const AttentionMask& mask, const AttentionDims& d) {
  const int64_t Tk = d.keys();
  std::vector<int64_t> kp(Tk);
  for (int64_t j = 0; j < Tk; ++j) kp[j] = mask.k_position(j);
  std::sort(kp.begin(), kp.end());
  // Keys at positions in [lo, hi].
  auto count = [&](int64_t lo, int64_t hi) {
    if (hi < lo) return 0.0;
    return static_cast<double>(std::upper_bound(kp.begin(), kp.end(), hi) -
                               std::lower_bound(kp.begin(), kp.end(), lo));
  };
  double pairs = 0.0;
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t t = 0; t < d.T; ++t) {
      const int64_t qp = mask.q_position(t);
      // Keys in [lo, hi] plus keys below the prefix end, less those counted twice.
      const int64_t lo = mask.first_key(b, t, d.T, qp), hi = mask.last_key(qp);
      const int64_t pend = mask.prefix_end(b);
      pairs += count(lo, hi) + count(std::numeric_limits<int64_t>::min(), pend - 1) -
               count(lo, std::min(hi, pend - 1));
    }
  }
  return pairs;
}

}  // namespace mindspeed
