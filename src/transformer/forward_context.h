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

struct Parameter;

/// Called by the model around each module's use of its parameters, so the data-parallel
/// layer can overlap communication with compute (Megatron's forward pre-hooks and
/// gradient-ready backward hooks): before_forward waits for a pending parameter all-gather,
/// grads_ready starts a bucket's gradient reduction once all its gradients are final.
class ParameterHooks {
 public:
  virtual ~ParameterHooks() = default;
  virtual void before_forward(const std::vector<Parameter*>& params) = 0;
  virtual void grads_ready(const std::vector<Parameter*>& params) = 0;
};

/// Where the dropout masks of one call come from (see DropoutSpec).
enum class DropoutSite : uint64_t { kEmbedding = 1, kAttentionProbs = 2, kAttentionOutput = 3, kMlpOutput = 4 };

struct ForwardContext {
  const KernelTable* kernels = nullptr;
  Allocator* alloc = nullptr;
  const ParallelState* ps = nullptr;
  bool training = true;           ///< dropout on, gradients wanted
  bool sequence_parallel = false;  ///< activations outside TP regions are [s/tp, b, h]
  bool gradient_accumulation_fusion = true;  ///< false: --no-gradient-accumulation-fusion
  /// --bf16: activations are rounded to bf16 where written and saved for backward in bf16.
  bool bf16 = false;
  uint64_t seed = 1234;
  int64_t iteration = 0;          ///< keys the dropout masks with the micro-batch's samples
  ParameterHooks* hooks = nullptr;  ///< data-parallel overlap; null = none

  const KernelTable& k() const { return *kernels; }
  /// Rows of a [s, b, h] activation outside the tensor-parallel regions on this rank.
  int64_t local_rows(int64_t full_rows) const {
    return sequence_parallel ? full_rows / ps->sizes.tensor : full_rows;
  }
  /// Position of this rank's first row block along the sequence (sequence parallelism).
  int64_t sequence_offset(int64_t T) const {
    return sequence_parallel ? ps->tp_rank * (T / ps->sizes.tensor) : 0;
  }
  /// Philox stream of a dropout site; element indices inside it are global (sample, position,
  /// channel) coordinates, so masks do not depend on the parallel layout.
  RngStream dropout_stream(int64_t layer, DropoutSite site) const {
    return RngStream{seed, stream_id(0x64726f70ull /*"drop"*/, static_cast<uint64_t>(iteration),
                                     static_cast<uint64_t>(layer), static_cast<uint64_t>(site))};
  }
};

}  // namespace mindspeed
