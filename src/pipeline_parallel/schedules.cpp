// Schedules (schedules.h).
#include "pipeline_parallel/schedules.h"

#include "core/check.h"
#include "module/weight_grad_queue.h"

namespace mindspeed {

ForwardBackwardResult forward_backward_no_pipelining(const ForwardContext& ctx_in, const ForwardBackwardArgs& args) {
  MS_CHECK(args.model.size() == 1, "no pipelining runs exactly one model chunk, got ", args.model.size());
  MS_CHECK(args.data_iterator != nullptr && args.forward_step_func, "no data iterator or forward_step_func");
  const ModelChunk& model = *args.model.front();
  ForwardContext ctx = ctx_in;
  ctx.training = ctx_in.training && !args.forward_only;
  WeightGradQueue queue;
  if (ctx.training && args.defer_weight_grad) ctx.wgrad_queue = &queue;
  ForwardBackwardResult out;
  for (int64_t i = 0; i < args.num_microbatches; ++i) {
    // Gradient reduction may overlap only the last micro-batch's backward (no_sync before).
    if (ctx.training && args.set_grad_sync) args.set_grad_sync(i + 1 == args.num_microbatches);
    ForwardStep step = args.forward_step_func(ctx, *args.data_iterator, model, Tensor{}, args.num_microbatches);
    MS_CHECK(step.microbatch != nullptr, "the data iterator ran out at micro-batch ", i, " of ",
             args.num_microbatches);
    out.losses.push_back(step.result.loss);
    out.total.loss_sum += step.result.loss.loss_sum;
    out.total.num_tokens += step.result.loss.num_tokens;
    if (!ctx.training) continue;
    model.backward(ctx, *step.microbatch, Tensor{}, *step.result.saved);
    if (ctx.wgrad_queue != nullptr) queue.flush(ctx);
  }
  return out;
}

StatusOr<ForwardBackwardFunc> get_forward_backward_func(int pipeline_model_parallel_size,
                                                        int virtual_pipeline_model_parallel_size) {
  if (pipeline_model_parallel_size == 1 && virtual_pipeline_model_parallel_size <= 1) {
    return ForwardBackwardFunc(forward_backward_no_pipelining);
  }
  return unimplemented("pipeline schedules (--pipeline-model-parallel-size ", pipeline_model_parallel_size,
                       ", virtual size ", virtual_pipeline_model_parallel_size,
                       ") are not implemented yet; use --pipeline-model-parallel-size 1");
}

}  // namespace mindspeed
