// fp32 master parameters stored in the bf16 model weights plus a 16-bit residual: the memory
// sharing of MindSpeed's --reuse-fp32-param (mindspeed/core/memory/reuse_param), done so that
// the bf16 weight stays exactly what a run without the flag computes (round to nearest even).
//
// split(x):   high = bf16_rne(x) (the model weight), low = bits(x) - (bits(high) << 16) as a
//             signed 16-bit residual. That difference lies in [-0x8000, 0x8000]; the one value
//             that does not fit (+0x8000: a tie rounded down) and any NaN are kept whole in a
//             short exception list (about 2^-17 of the elements, for random low halves).
// restore():  bits(x) = (bits(high) << 16) + low, then the exceptions: bitwise the original.
// MindSpeed adds 0x8000 to the bits and truncates instead (round half up on the magnitude,
// exactly 2^16 values per bf16, no exceptions), which makes the bf16 weights differ from the
// run without the flag at ties; issue 14 asks for bit-identical training, hence this variant.
// Memory: 2 bytes per element instead of the fp32 master's 4.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace mindspeed {

/// An element whose residual does not fit 16 bits: its index and its full fp32 bits.
struct ReuseException {
  int64_t index = 0;
  uint32_t bits = 0;
  bool operator<(const ReuseException& other) const { return index < other.index; }
};

/// Splits x[0, n) into high[i] (bf16, round to nearest even) and low[i]; appends the elements
/// that need their full bits to *exceptions with index base + i (unsorted across calls).
void split_fp32(const float* x /*[n]*/, int64_t n, bf16* high /*[n]*/, int16_t* low /*[n]*/, int64_t base,
                std::vector<ReuseException>* exceptions);

/// x[i] = the fp32 value split into (high[i], low[i]); `exceptions` (sorted by index) are the
/// list split produced, indexed from `base` (those outside [base, base + n) are ignored).
void restore_fp32(const bf16* high /*[n]*/, const int16_t* low /*[n]*/, int64_t n, int64_t base,
                  const std::vector<ReuseException>& exceptions, float* x /*[n]*/);

}  // namespace mindspeed
