// Schedules (schedules.h).
#include "pipeline_parallel/schedules.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <utility>

#include "core/check.h"
#include "module/weight_grad_queue.h"

namespace mindspeed {
namespace {

// What every single-chunk schedule starts with: the arguments checked, and the context of
// its steps (training off for forward_only; the weight-gradient queue when deferring).
ForwardContext schedule_context(const char* schedule, const ForwardContext& ctx_in, const ForwardBackwardArgs& args,
                                WeightGradQueue* queue) {
  MS_CHECK(args.model.size() == 1, schedule, " runs exactly one model chunk per rank, got ", args.model.size());
  MS_CHECK(args.data_iterator != nullptr && args.forward_step_func, "no data iterator or forward_step_func");
  ForwardContext ctx = ctx_in;
  ctx.training = ctx_in.training && !args.forward_only;
  if (ctx.training && args.defer_weight_grad) ctx.wgrad_queue = queue;
  return ctx;
}

}  // namespace

ForwardBackwardResult forward_backward_no_pipelining(const ForwardContext& ctx_in, const ForwardBackwardArgs& args) {
  WeightGradQueue queue;
  const ForwardContext ctx = schedule_context("no pipelining", ctx_in, args, &queue);
  const ModelChunk& model = *args.model.front();
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

namespace {

// Point-to-point of one stage with its neighbours on the pipeline group (Megatron's
// p2p_communication): activations travel with tag kForward, gradients with kBackward; MPI
// keeps messages of one (source, tag) in order, so micro-batches need no tag of their own.
class PipelineP2P {
 public:
  static constexpr int kForward = 0, kBackward = 1;
  PipelineP2P(const ForwardContext& ctx, int64_t hidden) : ctx_(ctx), pipe_(ctx.ps->pp()), hidden_(hidden) {}
  bool first() const { return pipe_.rank() == 0; }
  bool last() const { return pipe_.rank() == pipe_.size() - 1; }

  /// Receives what the previous stage sent forward (empty on the first stage).
  Tensor recv_forward(const MicroBatch& mb) {
    if (first()) return {};
    Tensor t = buffer(mb);
    pipe_.recv_async(t.f32(), t.numel(), pipe_.rank() - 1, kForward)->wait();
    return t;
  }
  /// Receives the gradient of this stage's output for `mb` (empty on the last stage).
  Tensor recv_backward(const MicroBatch& mb) {
    if (last()) return {};
    Tensor t = buffer(mb);
    pipe_.recv_async(t.f32(), t.numel(), pipe_.rank() + 1, kBackward)->wait();
    return t;
  }
  void send_forward(const Tensor& output) {
    if (!last()) pipe_.send_async(output.f32(), output.numel(), pipe_.rank() + 1, kForward)->wait();
  }
  void send_backward(const Tensor& input_grad) {
    if (!first()) pipe_.send_async(input_grad.f32(), input_grad.numel(), pipe_.rank() - 1, kBackward)->wait();
  }
  /// Sends `output` forward and receives the gradient of `grad_mb`'s output, both posted
  /// before either is waited for (no deadlock with the neighbour doing the mirror image).
  Tensor send_forward_recv_backward(const Tensor& output, const MicroBatch& grad_mb) {
    if (last()) return {};
    Tensor grad = buffer(grad_mb);
    auto recv = pipe_.recv_async(grad.f32(), grad.numel(), pipe_.rank() + 1, kBackward);
    auto send = pipe_.send_async(output.f32(), output.numel(), pipe_.rank() + 1, kForward);
    send->wait();
    recv->wait();
    return grad;
  }
  /// Sends `input_grad` back and receives the next micro-batch's input, posted together.
  Tensor send_backward_recv_forward(const Tensor& input_grad, const MicroBatch& next_mb) {
    if (first()) return {};
    Tensor input = buffer(next_mb);
    auto recv = pipe_.recv_async(input.f32(), input.numel(), pipe_.rank() - 1, kForward);
    auto send = pipe_.send_async(input_grad.f32(), input_grad.numel(), pipe_.rank() - 1, kBackward);
    send->wait();
    recv->wait();
    return input;
  }

 private:
  Tensor buffer(const MicroBatch& mb) const {
    return Tensor(*ctx_.alloc, Shape{ctx_.local_rows(mb.B * mb.T), hidden_}, DType::kFloat32,
                  MemoryCategory::kActivations);
  }
  const ForwardContext& ctx_;
  ProcessGroup& pipe_;
  int64_t hidden_;
};

// One micro-batch in flight on this stage: its data and the chunk's saved state.
struct InFlight {
  const MicroBatch* microbatch = nullptr;
  std::unique_ptr<ModelChunk::Saved> saved;
};

}  // namespace

ForwardBackwardResult forward_backward_pipelining_without_interleaving(const ForwardContext& ctx_in,
                                                                       const ForwardBackwardArgs& args) {
  WeightGradQueue queue;
  const ForwardContext ctx = schedule_context("1F1B", ctx_in, args, &queue);
  const ModelChunk& model = *args.model.front();
  PipelineP2P p2p(ctx, model.hidden_size());
  const int64_t P = ctx.ps->pp().size(), r = ctx.ps->pp().rank(), m = args.num_microbatches;
  const int64_t num_warmup = ctx.training ? std::min(P - r - 1, m) : m;
  const int64_t num_steady = m - num_warmup;
  ForwardBackwardResult out;
  std::deque<InFlight> in_flight;
  int64_t backwards_done = 0;

  // Every stage reads the micro-batches (the first for its tokens, the last for labels and
  // the loss mask, all for shapes and dropout keys). A stage must size its receive buffer
  // before the forward step takes the micro-batch from the iterator, so the next one is
  // peeked and handed back through this one-slot lookahead.
  struct LookaheadIterator final : DataIterator {
    DataIterator* inner = nullptr;
    const MicroBatch* peeked = nullptr;
    const MicroBatch* peek() {
      if (peeked == nullptr) peeked = inner->next();
      return peeked;
    }
    const MicroBatch* next() override {
      const MicroBatch* mb = peeked != nullptr ? peeked : inner->next();
      peeked = nullptr;
      return mb;
    }
  } data;
  data.inner = args.data_iterator;
  auto next_microbatch = [&](int64_t index) -> const MicroBatch& {
    const MicroBatch* mb = data.peek();
    MS_CHECK(mb != nullptr, "the data iterator ran out at micro-batch ", index, " of ", m);
    return *mb;
  };
  auto forward_step = [&](Tensor input) {
    ForwardStep step = args.forward_step_func(ctx, data, model, std::move(input), args.num_microbatches);
    MS_CHECK(step.microbatch != nullptr, "the data iterator ran out at micro-batch ", out.losses.size(), " of ", m);
    out.losses.push_back(step.result.loss);
    out.total.loss_sum += step.result.loss.loss_sum;
    out.total.num_tokens += step.result.loss.num_tokens;
    if (ctx.training) in_flight.push_back({step.microbatch, std::move(step.result.saved)});
    return std::move(step.result.output);
  };
  auto backward = [&](Tensor output_grad) {
    InFlight f = std::move(in_flight.front());
    in_flight.pop_front();
    // Gradient reduction may overlap only the last micro-batch's backward (no_sync before).
    if (args.set_grad_sync) args.set_grad_sync(++backwards_done == m);
    Tensor input_grad = model.backward(ctx, *f.microbatch, std::move(output_grad), *f.saved);
    if (ctx.wgrad_queue != nullptr) queue.flush(ctx);
    return input_grad;
  };

  // Warm-up: forwards only.
  for (int64_t i = 0; i < num_warmup; ++i) {
    Tensor output = forward_step(p2p.recv_forward(next_microbatch(i)));
    p2p.send_forward(output);
  }
  // Steady state: one forward, one backward.
  Tensor input;
  if (num_steady > 0) input = p2p.recv_forward(next_microbatch(num_warmup));
  for (int64_t i = 0; i < num_steady; ++i) {
    const bool last_iteration = i + 1 == num_steady;
    Tensor output = forward_step(std::move(input));
    const MicroBatch* oldest = in_flight.front().microbatch;
    Tensor output_grad = p2p.send_forward_recv_backward(output, *oldest);
    output.reset();
    Tensor input_grad = backward(std::move(output_grad));
    if (last_iteration) {
      p2p.send_backward(input_grad);
    } else {
      input = p2p.send_backward_recv_forward(input_grad, next_microbatch(num_warmup + i + 1));
    }
  }
  // Cool-down: the remaining backwards.
  if (ctx.training) {
    while (!in_flight.empty()) {
      Tensor output_grad = p2p.recv_backward(*in_flight.front().microbatch);
      p2p.send_backward(backward(std::move(output_grad)));
    }
  }
  return out;
}

StatusOr<ForwardBackwardFunc> get_forward_backward_func(int pipeline_model_parallel_size,
                                                        int virtual_pipeline_model_parallel_size) {
  if (pipeline_model_parallel_size == 1 && virtual_pipeline_model_parallel_size <= 1) {
    return ForwardBackwardFunc(forward_backward_no_pipelining);
  }
  if (pipeline_model_parallel_size > 1 && virtual_pipeline_model_parallel_size <= 1) {
    return ForwardBackwardFunc(forward_backward_pipelining_without_interleaving);
  }
  return unimplemented("the interleaved pipeline schedule (--pipeline-model-parallel-size ",
                       pipeline_model_parallel_size, " with ", virtual_pipeline_model_parallel_size,
                       " virtual stages per rank) is not implemented yet; leave out the virtual-pipeline flags");
}

}  // namespace mindspeed
