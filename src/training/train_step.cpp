// train_step / evaluate_step (train_step.h).
#include "training/train_step.h"

#include "core/check.h"

namespace mindspeed {

TrainStepResult train_step(const GPTModel& model, ParamAndGradBuffer& buffer, Optimizer& optimizer,
                           DataParallelGradSync* grad_sync, const ForwardContext& ctx,
                           std::span<const MicroBatch> microbatches, double lr) {
  MS_CHECK(ctx.training, "train_step needs a training context");
  MS_CHECK(grad_sync == nullptr, "data-parallel gradient sync is not wired in yet");
  TrainStepResult result;
  buffer.zero_grad();
  const double num_micro = static_cast<double>(microbatches.size());
  for (const MicroBatch& mb : microbatches) {
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
  result.optimizer = optimizer.step(lr);
  return result;
}

GPTModel::LossSums evaluate_step(const GPTModel& model, const ForwardContext& ctx,
                                 std::span<const MicroBatch> microbatches) {
  ForwardContext eval = ctx;
  eval.training = false;
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
