// train_step / evaluate_step (train_step.h).
#include "training/train_step.h"

#include "core/check.h"
#include "distributed/distributed_data_parallel.h"

namespace mindspeed {

TrainStepResult train_step(const GPTModel& model, ParamAndGradBuffer& buffer, Optimizer& optimizer,
                           DistributedDataParallel* ddp, const ForwardContext& ctx_in,
                           std::span<const MicroBatch> microbatches, double lr) {
  MS_CHECK(ctx_in.training, "train_step needs a training context");
  ForwardContext ctx = ctx_in;
  ctx.hooks = ddp;
  TrainStepResult result;
  buffer.zero_grad();
  const double num_micro = static_cast<double>(microbatches.size());
  for (size_t i = 0; i < microbatches.size(); ++i) {
    const MicroBatch& mb = microbatches[i];
    // Gradient reduction may overlap only the last micro-batch's backward (no_sync before).
    if (ddp) ddp->enable_grad_sync(i + 1 == microbatches.size());
    double tokens = 0.0;
    for (float m : mb.loss_mask) tokens += m;
    // Megatron: loss / num_tokens / num_microbatches (a micro-batch without any counted token
    // contributes nothing).
    const float scale = tokens > 0.0 ? static_cast<float>(1.0 / (tokens * num_micro)) : 0.0f;
    GPTModel::Saved saved;
    const GPTModel::LossSums sums = model.forward(ctx, mb, scale, saved);
    model.backward(ctx, mb, saved);
    result.loss_sum += sums.loss_sum;
    result.num_tokens += sums.num_tokens;
  }
  if (ddp) ddp->finish_grad_sync();
  result.optimizer = optimizer.step(lr);
  if (ddp) ddp->start_param_sync();
  return result;
}

GPTModel::LossSums evaluate_step(const GPTModel& model, const ForwardContext& ctx,
                                 std::span<const MicroBatch> microbatches) {
  ForwardContext eval = ctx;
  eval.training = false;  // hooks (parameter gathers) stay as the caller set them
  GPTModel::LossSums total;
  for (const MicroBatch& mb : microbatches) {
    GPTModel::Saved saved;
    const GPTModel::LossSums sums = model.forward(eval, mb, 0.0f, saved);
    total.loss_sum += sums.loss_sum;
    total.num_tokens += sums.num_tokens;
  }
  return total;
}

}  // namespace mindspeed
