// ALiBi slopes and MindSpeed's ALiBi flags as the kernels' bias form (alibi.h).
#include "transformer/alibi.h"

#include <cmath>

#include "core/check.h"

namespace mindspeed {
namespace {

// The slopes of a power of 2 heads, in double: s^(i+1), s = 2^(-2^-(log2(n) - 3)) = 2^(-8/n).
std::vector<double> power_of_2_slopes(int64_t n) {
  const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(n)) - 3.0)));
  std::vector<double> s(n);
  for (int64_t i = 0; i < n; ++i) s[i] = start * std::pow(start, static_cast<double>(i));
  return s;
}

std::vector<double> slopes(int64_t n) {
  int64_t p = 1;  // the largest power of 2 <= n
  while (p * 2 <= n) p *= 2;
  if (p == n) return power_of_2_slopes(n);
  std::vector<double> s = power_of_2_slopes(p);
  const std::vector<double> twice = slopes(2 * p);
  for (int64_t i = 0; i < n - p; ++i) s.push_back(twice[2 * i]);
  return s;
}

}  // namespace

std::vector<float> alibi_slopes(int64_t num_heads) {
  MS_CHECK(num_heads > 0, "ALiBi needs at least one head, got ", num_heads);
  const std::vector<double> s = slopes(num_heads);
  return std::vector<float>(s.begin(), s.end());
}

std::vector<float> alibi_slopes_for_rank(int64_t num_heads, int64_t tp_size, int64_t tp_rank) {
  MS_CHECK(tp_size > 0 && num_heads % tp_size == 0 && tp_rank >= 0 && tp_rank < tp_size,
           "ALiBi: ", num_heads, " heads over tensor-parallel size ", tp_size, " (rank ", tp_rank,
           ")");
  const std::vector<float> all = alibi_slopes(num_heads);
  const int64_t local = num_heads / tp_size;
  return std::vector<float>(all.begin() + tp_rank * local, all.begin() + (tp_rank + 1) * local);
}

StatusOr<AlibiKernelForm> alibi_kernel_form(const AlibiOptions& o) {
  AlibiKernelForm f;
  switch (o.fusion_attn_type) {
    case -1:  // unfused: the bias tensor of _build_alibi_tensor
      f.bias = o.square_alibi_mask ? AlibiBias::kSigned : AlibiBias::kKeyPosition;
      f.causal = !(o.square_alibi_mask && !o.fill_neg_inf);
      return f;
    case 0:
      f.bias = o.diagonal_opposite ? AlibiBias::kSigned : AlibiBias::kSymmetric;
      return f;
    case 2:
      f.bias = AlibiBias::kSymmetric;
      return f;
    case 3:
      f.bias = AlibiBias::kSqrt;
      return f;
    default:
      return invalid_argument(
          "--alibi-fusion-attn-type must be 0, 2 or 3 (1 is not released), got ",
          o.fusion_attn_type);
  }
}

}  // namespace mindspeed
