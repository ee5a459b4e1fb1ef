// One training iteration (port of megatron/training/training.py train_step) and the GPT
// forward step (pretrain_gpt.py forward_step): zero the gradient buffer, run the schedule
// of get_forward_backward_func() over the global batch's micro-batches (each micro-batch's
// loss divided by its own token count and by the number of micro-batches, Megatron's
// default without --calculate-per-token-loss), finalise the gradients (data-parallel
// reduction), then clip and step the optimizer. Evaluation runs the same schedule
// forward-only.
#pragma once

#include <span>

#include "distributed/param_and_grad_buffer.h"
#include "models/gpt/gpt_model.h"
#include "models/gpt/gpt_model_chunks.h"
#include "module/forward_context.h"
#include "optimizer/optimizer.h"
#include "parallel/parallel_state.h"
#include "pipeline_parallel/schedules.h"

namespace mindspeed {

class DistributedDataParallel;

struct TrainStepResult {
  double loss_sum = 0.0;    ///< sum of loss * mask over this rank's tokens
  double num_tokens = 0.0;  ///< sum of loss_mask over this rank's tokens
  Optimizer::StepResult optimizer;
};

/// Megatron's forward_step for GPT: the next micro-batch, its loss scale
/// 1 / (tokens * num_microbatches) (a micro-batch without counted tokens contributes
/// nothing), and the chunk's forward.
ForwardStep gpt_forward_step(const ForwardContext& ctx, DataIterator& data_iterator, const ModelChunk& model,
                             StageTensors inputs, int64_t num_microbatches);
/// The loss scale of one micro-batch: 1 / (tokens * num_microbatches); with context
/// parallelism cp / (the whole samples' tokens * num_microbatches).
float loss_scale(const ForwardContext& ctx, const MicroBatch& mb, int64_t num_microbatches);

struct TrainStepOptions {
  bool defer_weight_grad = false;  ///< see ForwardBackwardArgs::defer_weight_grad
  ScheduleTrace* trace = nullptr;  ///< see ForwardBackwardArgs::trace
  /// Called before each forward step with this rank's count of forward steps so far.
  std::function<void(int64_t forward_step)> on_forward_step;
};

/// One iteration over this rank's model chunks with their layout's schedule. `ddp` may be
/// null (one process, no data-parallel reduction).
TrainStepResult train_step(const GPTModelChunks& model, ParamAndGradBuffer& buffer, Optimizer& optimizer,
                           DistributedDataParallel* ddp, const ForwardContext& ctx,
                           std::span<const MicroBatch> microbatches, double lr, const TrainStepOptions& options = {});
/// The same with one chunk per rank (no pipelining, or 1F1B over ctx.ps's pipeline group).
TrainStepResult train_step(const GPTModel& model, ParamAndGradBuffer& buffer, Optimizer& optimizer,
                           DistributedDataParallel* ddp, const ForwardContext& ctx,
                           std::span<const MicroBatch> microbatches, double lr, const TrainStepOptions& options = {});

/// Forward only over micro-batches (evaluation): the summed loss and token count.
LossSums evaluate_step(const GPTModelChunks& model, const ForwardContext& ctx, std::span<const MicroBatch> microbatches);
LossSums evaluate_step(const GPTModel& model, const ForwardContext& ctx, std::span<const MicroBatch> microbatches);

/// The evaluation loss of Megatron's evaluate(): this rank's loss and token sums over its
/// evaluation micro-batches, summed over the data-parallel (with context-parallel) group,
/// as loss per token (0 when no token counts). Collective over ps.dp_cp().
double evaluation_loss(const ParallelState& ps, const LossSums& local);

}  // namespace mindspeed
