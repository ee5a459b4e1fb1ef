// One training iteration (port of megatron/training/training.py train_step with
// pipeline_parallel/schedules.py forward_backward_no_pipelining): zero the gradient buffer,
// run forward and backward over the global batch's micro-batches (each micro-batch's loss
// divided by its own token count and by the number of micro-batches, Megatron's default
// without --calculate-per-token-loss), finalise the gradients (data-parallel reduction), then
// clip and step the optimizer.
#pragma once

#include <span>

#include "distributed/param_and_grad_buffer.h"
#include "models/gpt/gpt_model.h"
#include "optimizer/optimizer.h"
#include "transformer/forward_context.h"

namespace mindspeed {

class DistributedDataParallel;

struct TrainStepResult {
  double loss_sum = 0.0;    ///< sum of loss * mask over this rank's tokens
  double num_tokens = 0.0;  ///< sum of loss_mask over this rank's tokens
  Optimizer::StepResult optimizer;
};

/// `ddp` may be null (one process, no data-parallel reduction).
TrainStepResult train_step(const GPTModel& model, ParamAndGradBuffer& buffer, Optimizer& optimizer,
                           DistributedDataParallel* ddp, const ForwardContext& ctx,
                           std::span<const MicroBatch> microbatches, double lr);

/// Forward only over micro-batches (evaluation): the summed loss and token count.
GPTModel::LossSums evaluate_step(const GPTModel& model, const ForwardContext& ctx,
                                 std::span<const MicroBatch> microbatches);

}  // namespace mindspeed
