// fp32 master in the bf16 weight plus a residual (fp32_param_reuse.h).
#include "optimizer/fp32_param_reuse.h"

#include <algorithm>
#include <bit>

namespace mindspeed {
namespace {

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
float float_of(uint32_t b) { return std::bit_cast<float>(b); }

}  // namespace

// Serial loops: the optimizer calls these on pieces of at most 64 Ki elements, and only the
// kernel table may start OpenMP teams (tests/layering: backend boundary).
void split_fp32(const float* x, int64_t n, bf16* high, int16_t* low, int64_t base,
                std::vector<ReuseException>* exceptions) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = bits_of(x[i]);
    const bf16 h = float_to_bf16(x[i]);
    const int64_t diff = static_cast<int64_t>(b) - (static_cast<int64_t>(h.bits) << 16);
    high[i] = h;
    if (diff >= INT16_MIN && diff <= INT16_MAX) {
      low[i] = static_cast<int16_t>(diff);
    } else {  // a tie rounded down (diff = 0x8000) or a NaN (quieted by the rounding)
      low[i] = 0;
      exceptions->push_back({base + i, b});
    }
  }
}

void restore_fp32(const bf16* high, const int16_t* low, int64_t n, int64_t base,
                  const std::vector<ReuseException>& exceptions, float* x) {
  for (int64_t i = 0; i < n; ++i) {
    x[i] = float_of(static_cast<uint32_t>((static_cast<int64_t>(high[i].bits) << 16) + low[i]));
  }
  auto it = std::lower_bound(exceptions.begin(), exceptions.end(), ReuseException{base, 0});
  for (; it != exceptions.end() && it->index < base + n; ++it) x[it->index - base] = float_of(it->bits);
}

}  // namespace mindspeed
