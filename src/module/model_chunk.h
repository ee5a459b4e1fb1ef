// ModelChunk: what a pipeline schedule drives -- one pipeline stage of the model on this
// rank (Megatron's model chunk; a rank holds several under the virtual pipeline and
// DualPipeV). forward takes the stage's input (the token ids of the micro-batch on the first
// stage, the previous stage's hidden states otherwise) and returns its output (hidden states
// for the next stage, or the loss on the last stage) plus the saved state backward needs;
// backward takes the gradient of that output and returns the gradient of the input. The
// saved state is a value the schedule owns, so any number of micro-batches can be in flight.
#pragma once

#include <memory>

#include "core/tensor.h"
#include "module/forward_context.h"

namespace mindspeed {

class ModelChunk {
 public:
  struct Saved {
    virtual ~Saved() = default;
  };
  struct ForwardResult {
    std::unique_ptr<Saved> saved;
    Tensor output;  ///< [n, h] hidden states for the next stage; empty on the last stage
    LossSums loss;  ///< this rank's loss sums (last stage only)
  };

  virtual ~ModelChunk() = default;
  virtual bool pre_process() const = 0;   ///< holds the embedding (first stage)
  virtual bool post_process() const = 0;  ///< holds the output layer and loss (last stage)
  /// Columns of the hidden states passed between stages ([n, hidden]).
  virtual int64_t hidden_size() const = 0;
  /// input [n, h]: ignored with pre_process. loss_scale: see OutputLayerLoss::forward.
  virtual ForwardResult forward(const ForwardContext& ctx, const MicroBatch& mb, Tensor input,
                                float loss_scale) const = 0;
  /// output_grad [n, h]: the gradient of forward's output (ignored with post_process, whose
  /// loss gradient was folded into forward). Returns the gradient of the input [n, h]
  /// (empty with pre_process).
  virtual Tensor backward(const ForwardContext& ctx, const MicroBatch& mb, Tensor output_grad,
                          Saved& saved) const = 0;
};

}  // namespace mindspeed
