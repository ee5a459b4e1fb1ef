// gpt_forward_step / train_step / evaluate_step (train_step.h).
#include "training/train_step.h"

#include <algorithm>

#include "core/check.h"
#include "core/profiler.h"
#include "distributed/distributed_data_parallel.h"
#include "transformer/moe/router.h"

namespace mindspeed {

ForwardStep gpt_forward_step(const ForwardContext& ctx, DataIterator& data_iterator, const ModelChunk& model,
                             StageTensors inputs, int64_t num_microbatches) {
  ForwardStep step;
  step.microbatch = data_iterator.next();
  if (step.microbatch == nullptr) return step;
  const MicroBatch& mb = *step.microbatch;
  step.result = model.forward(ctx, mb, std::move(inputs), loss_scale(ctx, mb, num_microbatches));
  return step;
}

float loss_scale(const ForwardContext& ctx, const MicroBatch& mb, int64_t num_microbatches) {
  // --calculate-per-token-loss: the raw sum (Megatron's loss[0]; no cp factor: the gradients
  // are summed over dp x cp unscaled and divided by the tokens after the reduction).
  if (ctx.calculate_per_token_loss) return ctx.loss_scaler_scale;
  // Megatron: loss / num_tokens / num_microbatches. With context parallelism each rank
  // holds part of the samples: the tokens are the whole samples' and the loss is
  // multiplied by the CP size, since the gradient reduction averages over dp x cp
  // (pretrain_gpt.py loss_func: loss * cp_size).
  double tokens = 0.0;
  if (mb.seq_index.empty()) {
    for (float m : mb.loss_mask) tokens += m;
  } else {
    tokens = mb.sample_loss_tokens;
  }
  // --fp16: times the loss scaler's scale (Megatron's grad_scale_func on the output).
  const double cp = static_cast<double>(ctx.ps->sizes.context);
  return tokens > 0.0 ? static_cast<float>(cp / (tokens * static_cast<double>(num_microbatches)) *
                                           static_cast<double>(ctx.loss_scaler_scale))
                      : 0.0f;
}

namespace {
// One chunk per rank: no pipelining or 1F1B by the pipeline size.
PipelineLayout single_chunk_layout(const ParallelState& ps) {
  PipelineLayout layout;
  layout.pipeline_size = ps.sizes.pipeline;
  layout.schedule = ps.sizes.pipeline > 1 ? PipelineSchedule::k1F1B : PipelineSchedule::kNoPipelining;
  return layout;
}

ForwardBackwardResult run_schedule(std::vector<const ModelChunk*> model, const PipelineLayout& layout,
                                   const ForwardContext& ctx, std::span<const MicroBatch> microbatches,
                                   bool forward_only, DistributedDataParallel* ddp, const TrainStepOptions& options,
                                   const RecomputeConfig& recompute = {}) {
  const ForwardBackwardFunc schedule = get_forward_backward_func(layout);
  // Megatron sends a fixed tensor shape between stages; micro-batches of different shapes
  // need the shapes sent ahead (--variable-seq-lengths).
  if (layout.pipeline_size > 1 && !layout.variable_seq_lengths) {
    for (const MicroBatch& mb : microbatches) {
      MS_CHECK(mb.B == microbatches.front().B && mb.T == microbatches.front().T,
               "micro-batches of different shapes in one step ([", mb.B, ", ", mb.T, "] and [",
               microbatches.front().B, ", ", microbatches.front().T,
               "]) between pipeline stages need --variable-seq-lengths");
    }
  }
  SpanDataIterator data(microbatches);
  ForwardBackwardArgs args;
  args.forward_step_func = gpt_forward_step;
  if (options.on_forward_step) {
    args.forward_step_func = [&options, count = int64_t{0}](const ForwardContext& c, DataIterator& it,
                                                            const ModelChunk& chunk, StageTensors input,
                                                            int64_t num_microbatches) mutable {
      options.on_forward_step(count++);
      return gpt_forward_step(c, it, chunk, std::move(input), num_microbatches);
    };
  }
  args.data_iterator = &data;
  args.model = std::move(model);
  args.layout = &layout;
  args.trace = options.trace;
  args.variable_seq_lengths = layout.variable_seq_lengths;
  args.num_microbatches = static_cast<int64_t>(microbatches.size());
  args.forward_only = forward_only;
  args.defer_weight_grad = options.defer_weight_grad;
  args.recompute_in_advance = recompute.in_advance;
  args.recompute_in_bubble = recompute.in_bubble;
  if (ddp != nullptr) args.set_grad_sync = [ddp](bool enabled) { ddp->enable_grad_sync(enabled); };
  return schedule(ctx, args);
}

TrainStepResult run_train_step(std::vector<const ModelChunk*> model, const PipelineLayout& layout,
                               const GPTModel& first_chunk, ParamAndGradBuffer& buffer, Optimizer& optimizer,
                               DistributedDataParallel* ddp, const ForwardContext& ctx_in,
                               std::span<const MicroBatch> microbatches, double lr, const TrainStepOptions& options) {
  MS_CHECK(ctx_in.training, "train_step needs a training context");
  ForwardContext ctx = ctx_in;
  ctx.hooks = ddp;
  // --fp16: the loss scaler's scale multiplies the loss gradient.
  ctx.loss_scaler_scale = optimizer.loss_scale();
  // Megatron's MoEAuxLossAutoScaler.set_loss_scale(loss scale / num_microbatches): the routers'
  // aux and z losses enter each micro-batch's gradient with this scale.
  // With --calculate-per-token-loss the scale is not divided by the micro-batches: the
  // gradients are divided by the tokens afterwards (schedules.py forward_step).
  ctx.moe_aux_loss_scale = ctx.calculate_per_token_loss
                               ? ctx.loss_scaler_scale
                               : ctx.loss_scaler_scale / static_cast<float>(std::max<size_t>(microbatches.size(), 1));
  TrainStepResult result;
  buffer.zero_grad(*ctx.backend);
  const ForwardBackwardResult fb = run_schedule(std::move(model), layout, ctx, microbatches, false, ddp, options,
                                                first_chunk.config().recompute);
  result.loss_sum = fb.total.loss_sum;
  result.num_tokens = fb.total.num_tokens;
  {
    profiler::Scope profile(profiler::category::kOptimizer, "finish grad sync");
    if (ddp) ddp->finish_grad_sync();
    if (ctx.calculate_per_token_loss) {
      // Megatron's finalize_model_grads(num_tokens): the loss tokens live on the last stage
      // (the others count 0): summed over the pipeline and the data (x context) parallel ranks,
      // every reduced gradient is divided by them.
      const double tokens = ctx.ps->dp_cp().all_reduce_scalar(
          ctx.ps->pp().all_reduce_scalar(fb.total.num_tokens, ReduceOp::kSum), ReduceOp::kSum);
      MS_CHECK(ddp != nullptr, "--calculate-per-token-loss needs the data-parallel wrapper to scale the gradients");
      if (tokens > 0.0) ddp->scale_gradients(static_cast<float>(1.0 / tokens));
    }
    // MoE aux-loss-free balancing: the routers' expert biases from this iteration's counts
    // (Megatron's finalize_model_grads).
    update_expert_biases(first_chunk.registry(), *ctx.ps, first_chunk.config().moe.router_bias_update_rate);
  }
  {
    profiler::Scope profile(profiler::category::kOptimizer, "optimizer step");
    result.optimizer = optimizer.step(lr);
  }
  if (ddp) ddp->start_param_sync();
  return result;
}

}  // namespace

TrainStepResult train_step(const GPTModelChunks& model, ParamAndGradBuffer& buffer, Optimizer& optimizer,
                           DistributedDataParallel* ddp, const ForwardContext& ctx, std::span<const MicroBatch> microbatches,
                           double lr, const TrainStepOptions& options) {
  return run_train_step(model.model_chunks(), model.layout(), model[0], buffer, optimizer, ddp, ctx, microbatches, lr,
                        options);
}

TrainStepResult train_step(const GPTModel& model, ParamAndGradBuffer& buffer, Optimizer& optimizer,
                           DistributedDataParallel* ddp, const ForwardContext& ctx, std::span<const MicroBatch> microbatches,
                           double lr, const TrainStepOptions& options) {
  return run_train_step({&model}, single_chunk_layout(*ctx.ps), model, buffer, optimizer, ddp, ctx, microbatches, lr,
                        options);
}

// Hooks (parameter gathers) stay as the caller set them.
LossSums evaluate_step(const GPTModelChunks& model, const ForwardContext& ctx, std::span<const MicroBatch> microbatches) {
  return run_schedule(model.model_chunks(), model.layout(), ctx, microbatches, /*forward_only=*/true, nullptr, {}).total;
}

LossSums evaluate_step(const GPTModel& model, const ForwardContext& ctx, std::span<const MicroBatch> microbatches) {
  return run_schedule({&model}, single_chunk_layout(*ctx.ps), ctx, microbatches, /*forward_only=*/true, nullptr, {})
      .total;
}

double evaluation_loss(const ParallelState& ps, const LossSums& local) {
  // The loss lives on the last pipeline stage (the others add 0).
  const double loss_sum =
      ps.pp().all_reduce_scalar(ps.dp_cp().all_reduce_scalar(local.loss_sum, ReduceOp::kSum), ReduceOp::kSum);
  const double tokens =
      ps.pp().all_reduce_scalar(ps.dp_cp().all_reduce_scalar(local.num_tokens, ReduceOp::kSum), ReduceOp::kSum);
  return tokens > 0.0 ? loss_sum / tokens : 0.0;
}

}  // namespace mindspeed
