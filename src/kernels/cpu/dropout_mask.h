// The keep factors of a run of consecutive Philox elements (cpu/ kernels): one Philox block
// gives the uniforms of four elements, and an element is kept when its uniform is >= p, so
// the mask equals the reference kernels' element by element.
#pragma once

#include <cstdint>

#include "kernels/kernel_types.h"

namespace mindspeed::cpu {

/// factor[i] = keep(first + i) ? 1/(1-p) : 0 for i in [0, len).
inline void keep_factors(float* factor, uint64_t first, int64_t len, const DropoutSpec& d) {
  const float scale = 1.0f / (1.0f - d.p);
  int64_t i = 0;
  while (i < len) {
    const uint64_t element = first + static_cast<uint64_t>(i);
    const auto words = d.rng.block(element / 4);
    for (uint64_t lane = element % 4; lane < 4 && i < len; ++lane, ++i)
      factor[i] = uint_to_uniform(words[lane]) >= d.p ? scale : 0.0f;
  }
}

}  // namespace mindspeed::cpu
