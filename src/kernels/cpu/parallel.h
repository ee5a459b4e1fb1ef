// Helpers for deterministic OpenMP reductions: work is cut into a fixed number of chunks
// that does not depend on the thread count, each chunk reduced in order, then the chunk
// results combined in chunk order. Same inputs, same bits, whatever OMP_NUM_THREADS is.
#pragma once

#include <algorithm>
#include <cstdint>

namespace mindspeed::cpu {

/// Number of chunks for a reduction over n items of `grain` each (at least 1, at most 64).
inline int64_t reduction_chunks(int64_t n, int64_t grain) {
  return std::clamp<int64_t>((n + grain - 1) / grain, 1, 64);
}
/// [begin, end) of chunk `c` of `chunks` over n items.
inline void chunk_range(int64_t n, int64_t chunks, int64_t c, int64_t& begin, int64_t& end) {
  begin = n * c / chunks;
  end = n * (c + 1) / chunks;
}

}  // namespace mindspeed::cpu
