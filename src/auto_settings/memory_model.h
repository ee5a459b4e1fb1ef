// The auto-settings memory model: what one rank of each pipeline stage allocates, by the
// allocator's categories (core/allocator.h), for a validated configuration and world size.
// - Parameters, gradients and optimizer state are exact: the stage's parameters are declared
//   by the engine's own model code (GPTModelChunks into a ParameterRegistry, nothing allocated)
//   and laid out by the engine's buffer layout (lay_out_buffer: buckets, padding, sharding),
//   then counted as pretrain allocates them (dtypes, distributed-optimizer shards, FSDP).
// - Activations: the bytes a transformer layer saves per micro-batch under each recompute mode
//   (the formulas bench/README.md measures to the byte: sbh(8/t'+24/t)+4asb/t+16sb/t' and its
//   variants), times the layers whose activations are alive at once (the pipeline schedule's
//   peak of live micro-batches x chunks, from simulate_plans), plus what lives outside the
//   layers (the gradient path, 16-bit widening), and the transient workspace (the loss's logits
//   chunk and its fp32 output weight, a layer's fp32 weights).
// - A profiled shape (auto_settings/profile.h) replaces the modelled per-layer, outside-layer
//   and workspace bytes with the measured ones.
// Port of the role of MindSpeed auto_settings' memory model (module/memory/); its numbers are
// this engine's own.
#pragma once

#include <cstdint>
#include <vector>

#include "config/configs.h"
#include "core/status.h"

namespace mindspeed {

/// Bytes that grow with the micro-batch size b as fixed + per_sample * b.
struct AffineBytes {
  double fixed = 0.0, per_sample = 0.0;
  double at(int64_t micro_batch_size) const {
    return fixed + per_sample * static_cast<double>(micro_batch_size);
  }
};

/// Measured bytes of a profiled layer shape (profile.h: scaled-down runs of 1 and 2 layers at
/// micro-batch sizes 1 and 2).
struct MeasuredActivations {
  double per_layer_per_sample = 0.0;  ///< activation bytes one layer adds per sample (no recompute)
  AffineBytes outside_layers;         ///< activation peak not in the layers
  AffineBytes workspace;              ///< workspace peak
  /// The allocator's total peak less the parameters, gradients and optimizer state, less the
  /// layer's activations: what lives at the peak outside the layers, workspace included (the
  /// activation and workspace peaks fall at different moments, so this is below their sum).
  AffineBytes transient_outside_layers;
};

struct StageMemory {
  int pp_rank = 0;
  int64_t num_params = 0;  ///< this rank's parameter elements (buffer padding excluded)
  int64_t params = 0, grads = 0, optimizer = 0;  ///< bytes held through the step
  int64_t activations = 0;                       ///< peak activation bytes
  int64_t workspace = 0;                         ///< peak workspace bytes
  int64_t live_microbatch_chunks = 0;            ///< most (micro-batch, chunk) pairs alive at once
  /// Activations and workspace at the moment of the rank's peak: measured (profiled shapes), or
  /// the sum of the two peaks (modelled: an upper bound).
  int64_t transient = 0;
  /// The rank's peak: params + grads + optimizer + transient.
  int64_t total() const { return params + grads + optimizer + transient; }
};

struct MemoryEstimate {
  std::vector<StageMemory> stages;  ///< one per pipeline rank
  const StageMemory& largest() const;
};

/// Bytes one transformer layer keeps for backward per micro-batch on one rank, under the
/// configuration's recompute granularity (full: the layer's input only).
double layer_activation_bytes(const Configs& c);

/// Every pipeline stage's memory. `measured` (may be null): the profiled bytes of this
/// configuration's layer shape, taken in place of the modelled ones.
StatusOr<MemoryEstimate> estimate_memory(const Configs& validated, int world_size,
                                         const MeasuredActivations* measured = nullptr);

}  // namespace mindspeed
