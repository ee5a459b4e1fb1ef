// Port of megatron/core/transformer/transformer_block.py TransformerBlock: the decoder
// layers of one pipeline stage (a contiguous range of global layer numbers, each built from
// its spec) and, on the last stage (post_process), the final layernorm. Each layer runs
// inside a ModuleScope (data-parallel hooks, bf16 weight views); activations are [n, h]
// ([s, b, h] flattened, n = s*b or s*b/tp with sequence parallelism).
// Full recompute (Megatron's _checkpointed_forward, recompute_plan.h): the layers of a
// full-recompute unit keep nothing from forward but the unit's input (in bf16 with --bf16,
// split over tensor parallelism with --distribute-saved-activations); backward runs the unit's
// forward again from it (same dropout masks: they are keyed by position, not drawn in order)
// and then its layers' backward.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "core/tensor.h"
#include "module/forward_context.h"
#include "transformer/layer_spec.h"
#include "transformer/norm.h"
#include "transformer/recompute_plan.h"
#include "transformer/transformer_layer.h"

namespace mindspeed {

class TransformerBlock {
 public:
  struct Saved {
    std::vector<TransformerLayer::Saved> layers;
    Tensor final_input;  ///< [n, h]: the last layer's output (bf16 storage with --bf16)
    /// Full recompute: each unit's input [n, h] (or this rank's 1/tp of it, distributed);
    /// empty once the unit was recomputed.
    std::vector<Tensor> unit_inputs;
    /// release_activations(): the block's input [n, h]; every layer's Saved is then empty.
    Tensor released_input;
    Norm::Saved final_layernorm;
  };

  /// specs[i] builds global layer first_layer + i. With post_process the block also owns
  /// decoder.final_layernorm.
  TransformerBlock(ParameterRegistry& registry, const ModelConfig& config,
                   const std::vector<TransformerLayerSpec>& specs, int64_t first_layer,
                   bool post_process, int tp_size, int tp_rank, bool sequence_parallel,
                   const ConstantTable* rope_cos, const ConstantTable* rope_sin,
                   const ExpertPlacement& experts = {}, int virtual_rank = 0, int virtual_size = 1,
                   const TensorParallelGrid& grid = {});

  /// hidden [n, h] -> the last layer's output [n, h], or with post_process the final
  /// layernorm's output [n, h]. With `inference` (generation) the attention runs over its
  /// key/value cache and each layer's saved state is dropped as soon as the layer is done.
  Tensor forward(const ForwardContext& ctx, const MicroBatch& mb, Tensor hidden, Saved& saved,
                 const StaticInferenceContext* inference = nullptr) const;
  /// dout [n, h]: the gradient of forward's output; returns that of its input [n, h].
  Tensor backward(const ForwardContext& ctx, const MicroBatch& mb, Tensor dout, Saved& saved) const;

  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }

  /// Recompute as a schedule unit (MindSpeed's ripipe, pipeline_parallel/schedules.cpp):
  /// release_activations drops every layer's saved activations after forward, keeping only the
  /// block's input; recompute rebuilds what was dropped (a released block, or the full-recompute
  /// units not yet rebuilt) before the backward, which then finds them in place.
  void release_activations(const ForwardContext& ctx, Saved& saved) const;
  void recompute(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved) const;

 private:
  /// Backward of full-recompute unit u: its forward again from the kept input, each layer in
  /// its own scope, leaving every layer's Saved filled.
  void recompute_unit(const ForwardContext& ctx, const MicroBatch& mb, size_t unit, Saved& saved) const;
  /// The unit input as kept between forward and backward, and back.
  Tensor keep_unit_input(const ForwardContext& ctx, Tensor input) const;
  Tensor restore_unit_input(const ForwardContext& ctx, Tensor kept, int64_t n) const;

  int64_t hidden_;
  bool distribute_saved_activations_ = false;
  BlockRecomputePlan recompute_;
  std::vector<int64_t> unit_of_layer_;  ///< full-recompute unit of each layer, -1 = none
  bool post_process_;
  std::vector<std::unique_ptr<TransformerLayer>> layers_;
  std::vector<std::string> layer_names_;  ///< "decoder.layers.N" (global N), for the profiler
  std::vector<std::vector<Parameter*>> layer_params_;
  std::unique_ptr<Norm> final_layernorm_;
  std::vector<Parameter*> final_norm_params_;
};

/// The parameters registry declared since index `first` (one module's, for its scope).
std::vector<Parameter*> params_since(const ParameterRegistry& registry, size_t first);

}  // namespace mindspeed
