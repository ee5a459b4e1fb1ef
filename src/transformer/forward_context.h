// ForwardContext and MicroBatch: what every module's forward/backward receives for one
// micro-batch. Modules never own a step's state; the per-micro-batch Saved structs do.
#pragma once

#include <cstdint>
#include <vector>

#include "core/allocator.h"
#include "core/rng.h"
#include "kernels/kernels.h"
#include "parallel/parallel_state.h"

namespace mindspeed {

/// One micro-batch as the data pipeline gives it: [B, T] row-major per sample.
struct MicroBatch {
  int64_t B = 0, T = 0;
  std::vector<int32_t> tokens;        ///< [B, T]
  std::vector<int32_t> labels;        ///< [B, T]
  std::vector<float> loss_mask;       ///< [B, T], 1 = counted
  std::vector<int32_t> position_ids;  ///< [B, T]
  std::vector<int32_t> doc_start;     ///< [B, T] first position of each token's document, or empty
  int64_t first_sample = 0;           ///< global index of sample 0 (keys the dropout masks)
};

/// Where the dropout masks of one call come from (see DropoutSpec).
enum class DropoutSite : uint64_t { kEmbedding = 1, kAttentionProbs = 2, kAttentionOutput = 3, kMlpOutput = 4 };

struct ForwardContext {
  const KernelTable* kernels = nullptr;
  Allocator* alloc = nullptr;
  const ParallelState* ps = nullptr;
  bool training = true;           ///< dropout on, gradients wanted
  bool sequence_parallel = false;
  uint64_t seed = 1234;
  int64_t iteration = 0;          ///< keys the dropout masks with the micro-batch's samples

  const KernelTable& k() const { return *kernels; }
  /// Philox stream of a dropout site; element indices inside it are global (sample, position,
  /// channel) coordinates, so masks do not depend on the parallel layout.
  RngStream dropout_stream(int64_t layer, DropoutSite site) const {
    return RngStream{seed, stream_id(0x64726f70ull /*"drop"*/, static_cast<uint64_t>(iteration),
                                     static_cast<uint64_t>(layer), static_cast<uint64_t>(site))};
  }
};

}  // namespace mindspeed
