// ModelChunk: what a pipeline schedule drives -- one pipeline stage of the model on this
// rank (Megatron's model chunk; a rank holds several under the virtual pipeline and
// DualPipeV). forward takes the stage's input (the token ids of the micro-batch on the first
// stage, the previous stage's tensors otherwise) and returns its output (the tensors for
// the next stage, or the loss on the last stage) plus the saved state backward needs;
// backward takes the gradients of those outputs and returns the gradients of the inputs.
// The saved state is a value the schedule owns, so any number of micro-batches can be in
// flight. Stages pass a list of tensors (MindSpeed's multi-parameter pipeline): GPT passes
// one, its hidden states; every tensor has one row per local token.
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"
#include "module/forward_context.h"

namespace mindspeed {

/// The tensors one stage passes to the next, each [n, width_i] (n = local tokens).
using StageTensors = std::vector<Tensor>;

class ModelChunk {
 public:
  struct Saved {
    virtual ~Saved() = default;
  };
  struct ForwardResult {
    std::unique_ptr<Saved> saved;
    StageTensors outputs;  ///< for the next stage (widths stage_tensor_widths()); none on the last stage
    LossSums loss;         ///< this rank's loss sums (last stage only)
  };

  virtual ~ModelChunk() = default;
  virtual bool pre_process() const = 0;   ///< holds the embedding (first stage)
  virtual bool post_process() const = 0;  ///< holds the output layer and loss (last stage)
  /// Columns of each tensor passed between stages (GPT: {hidden}); the same on every stage.
  virtual std::vector<int64_t> stage_tensor_widths() const = 0;
  /// inputs: one [n, width_i] per stage tensor; empty with pre_process. loss_scale: see
  /// OutputLayerLoss::forward.
  virtual ForwardResult forward(const ForwardContext& ctx, const MicroBatch& mb, StageTensors inputs,
                                float loss_scale) const = 0;
  /// output_grads: the gradients of forward's outputs (empty with post_process, whose loss
  /// gradient was folded into forward). Returns the gradients of the inputs (empty with
  /// pre_process).
  virtual StageTensors backward(const ForwardContext& ctx, const MicroBatch& mb, StageTensors output_grads,
                                Saved& saved) const = 0;
  /// Recompute as a schedule unit (MindSpeed's ripipe): drop after forward what the chunk can
  /// rebuild from what it keeps, and rebuild it before backward (the schedule calls
  /// recompute() ahead of waiting for the output gradients). Defaults: nothing to drop.
  virtual void release_activations(const ForwardContext& ctx, Saved& saved) const {}
  virtual void recompute(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved) const {}
};

}  // namespace mindspeed
