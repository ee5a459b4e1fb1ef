// Schedules (schedules.h).
#include "pipeline_parallel/schedules.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <utility>

#include "core/check.h"
#include "core/profiler.h"
#include "module/weight_grad_queue.h"

namespace mindspeed {
namespace {

// Rows of the hidden states a stage passes on: this rank's share of the sequence (sequence
// parallelism), or its X block of it (2D tensor parallelism's [s/X, b, h/Y] layout).
int64_t boundary_rows(const ForwardContext& ctx, int64_t full_rows) {
  return ctx.ps->tp_2d() ? full_rows / ctx.ps->sizes.tp_x : ctx.local_rows(full_rows);
}

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

// Records the steps of a schedule into args.trace (when given) and counts the micro-batches
// whose activations are alive.
class TraceRecorder {
 public:
  /// `training`: forwards keep their activations until their backward.
  TraceRecorder(ScheduleTrace* trace, bool training) : trace_(trace), training_(training), start_(Clock::now()) {
    if (trace_ != nullptr) *trace_ = {};
  }
  ~TraceRecorder() {
    if (trace_ != nullptr) trace_->elapsed = seconds();
  }
  /// Runs `step` and records it; a forward adds an alive micro-batch, a backward frees one.
  /// Without a trace it only runs the step (no clock reads on the schedule's path).
  /// `keeps`: a forward keeps its activations (false: it releases them, --recompute-in-bubble);
  /// a recompute makes a released micro-batch's activations alive again.
  template <typename Step>
  auto run(PipelineOpKind kind, int chunk, int64_t microbatch, Step&& step, bool keeps = true) {
    // The profiler's slice of this step (one atomic load when it is off).
    profiler::Scope scope(profiler::category::kSchedule, profiler::Level::kLevel0, [&] {
      std::string name = kind == PipelineOpKind::kForward    ? "forward"
                         : kind == PipelineOpKind::kBackward ? "backward"
                         : kind == PipelineOpKind::kWeight   ? "weight grad"
                                                             : "recompute";
      if (microbatch >= 0) name += " mb " + std::to_string(microbatch);
      if (chunk > 0) name += " chunk " + std::to_string(chunk);
      return name;
    });
    if (trace_ == nullptr) return step();
    const bool revives = kind == PipelineOpKind::kForward || kind == PipelineOpKind::kRecompute;
    if (training_ && revives && keeps) peak_ = std::max(peak_, ++alive_);
    if (kind == PipelineOpKind::kBackward) --alive_;
    trace_->peak_in_flight = peak_;
    struct Record {  // appended when the step returns, whatever it returns
      TraceRecorder* self;
      ScheduleEvent event;
      ~Record() {
        event.end = self->seconds();
        self->trace_->events.push_back(event);
      }
    } record{this, {kind, chunk, microbatch, seconds(), 0.0}};
    return step();
  }
 private:
  using Clock = std::chrono::steady_clock;
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  ScheduleTrace* trace_;
  bool training_;
  Clock::time_point start_;
  int64_t alive_ = 0, peak_ = 0;
};

}  // namespace

ForwardBackwardResult forward_backward_no_pipelining(const ForwardContext& ctx_in, const ForwardBackwardArgs& args) {
  WeightGradQueue queue;
  const ForwardContext ctx = schedule_context("no pipelining", ctx_in, args, &queue);
  const ModelChunk& model = *args.model.front();
  TraceRecorder trace(args.trace, ctx.training);
  ForwardBackwardResult out;
  for (int64_t i = 0; i < args.num_microbatches; ++i) {
    // Gradient reduction may overlap only the last micro-batch's backward (no_sync before).
    if (ctx.training && args.set_grad_sync) args.set_grad_sync(i + 1 == args.num_microbatches);
    ForwardStep step = trace.run(PipelineOpKind::kForward, 0, i, [&] {
      return args.forward_step_func(ctx, *args.data_iterator, model, StageTensors{}, args.num_microbatches);
    });
    MS_CHECK(step.microbatch != nullptr, "the data iterator ran out at micro-batch ", i, " of ",
             args.num_microbatches);
    out.losses.push_back(step.result.loss);
    out.total.loss_sum += step.result.loss.loss_sum;
    out.total.num_tokens += step.result.loss.num_tokens;
    if (!ctx.training) continue;
    trace.run(PipelineOpKind::kBackward, 0, i, [&] {
      model.backward(ctx, *step.microbatch, StageTensors{}, *step.result.saved);
      if (ctx.wgrad_queue != nullptr) queue.flush(ctx);
    });
  }
  return out;
}

namespace {

// With --variable-seq-lengths every tensor is preceded by its shape (MindSpeed's "PP
// dynamic shapes", Megatron's _communicate_shapes): three int64 [s, b, h] on this tag
// offset; the receiver sizes its buffer from it, not from what it expects.
constexpr int kShapeTagOffset = 1 << 20;

// The wire shape [s (local rows per sample), b, h] of a stage tensor [n, h].
std::array<int64_t, 3> wire_shape(const Tensor& t, const MicroBatch& mb) {
  return {t.shape()[0] / mb.B, mb.B, t.shape()[1]};
}

// A received shape must be the one the micro-batch implies: a mismatch means the stages
// disagree on the data (or on --variable-seq-lengths) and is not survivable.
void check_received_shape(const std::array<int64_t, 3>& shape, int64_t rows, int64_t hidden, int src) {
  MS_CHECK(shape[0] * shape[1] == rows && shape[2] == hidden, "pipeline rank ", src, " sent a tensor of shape [",
           shape[0], ", ", shape[1], ", ", shape[2], "], this stage expects ", rows, " rows of ", hidden,
           " (do all ranks run with the same --variable-seq-lengths and data?)");
}

// Point-to-point of one stage with its neighbours on the pipeline group (Megatron's
// p2p_communication): activations travel with tag kForward, gradients with kBackward; MPI
// keeps messages of one (source, tag) in order, so micro-batches need no tag of their own.
class PipelineP2P {
 public:
  static constexpr int kForward = 0, kBackward = 1;
  PipelineP2P(const ForwardContext& ctx, std::vector<int64_t> widths, bool variable_shapes)
      : ctx_(ctx), pipe_(ctx.ps->pp()), widths_(std::move(widths)), variable_shapes_(variable_shapes) {}
  bool first() const { return pipe_.rank() == 0; }
  bool last() const { return pipe_.rank() == pipe_.size() - 1; }

  /// Receives what the previous stage sent forward (none on the first stage).
  StageTensors recv_forward(const MicroBatch& mb) {
    if (first()) return {};
    return exchange(nullptr, nullptr, 0, 0, &mb, pipe_.rank() - 1, kForward);
  }
  /// Receives the gradients of this stage's outputs for `mb` (none on the last stage).
  StageTensors recv_backward(const MicroBatch& mb) {
    if (last()) return {};
    return exchange(nullptr, nullptr, 0, 0, &mb, pipe_.rank() + 1, kBackward);
  }
  void send_forward(const StageTensors& outputs, const MicroBatch& mb) {
    if (!last()) exchange(&outputs, &mb, pipe_.rank() + 1, kForward, nullptr, 0, 0);
  }
  void send_backward(const StageTensors& input_grads, const MicroBatch& mb) {
    if (!first()) exchange(&input_grads, &mb, pipe_.rank() - 1, kBackward, nullptr, 0, 0);
  }
  /// Sends `outputs` forward and receives the gradients of `grad_mb`'s outputs, both posted
  /// before either is waited for (no deadlock with the neighbour doing the mirror image).
  StageTensors send_forward_recv_backward(const StageTensors& outputs, const MicroBatch& mb,
                                          const MicroBatch& grad_mb) {
    if (last()) return {};
    return exchange(&outputs, &mb, pipe_.rank() + 1, kForward, &grad_mb, pipe_.rank() + 1, kBackward);
  }
  /// Sends `input_grads` back and receives the next micro-batch's inputs, posted together.
  StageTensors send_backward_recv_forward(const StageTensors& input_grads, const MicroBatch& mb,
                                          const MicroBatch& next_mb) {
    if (first()) return {};
    return exchange(&input_grads, &mb, pipe_.rank() - 1, kBackward, &next_mb, pipe_.rank() - 1, kForward);
  }

 private:
  // Posts the sends (if any) and the receives (if any), then waits for all: one message per
  // stage tensor, in list order on one tag. Shapes go first and the shape sends are posted
  // before any wait, so two neighbours exchanging in opposite directions cannot block each
  // other.
  StageTensors exchange(const StageTensors* send, const MicroBatch* send_mb, int dst, int send_tag,
                        const MicroBatch* recv_mb, int src, int recv_tag) {
    std::vector<std::array<int64_t, 3>> send_shapes;
    std::vector<std::unique_ptr<Work>> sends, recvs;
    if (send != nullptr) {
      MS_CHECK(send->size() == widths_.size(), "a stage sends ", send->size(), " tensors, the pipeline passes ",
               widths_.size());
      if (variable_shapes_) {
        send_shapes.reserve(send->size());  // no reallocation while MPI reads them
        for (const Tensor& t : *send) {
          send_shapes.push_back(wire_shape(t, *send_mb));
          sends.push_back(pipe_.send_i64_async(send_shapes.back().data(), 3, dst, send_tag + kShapeTagOffset));
        }
      }
    }
    StageTensors received;
    if (recv_mb != nullptr) {
      const int64_t rows = boundary_rows(ctx_, recv_mb->B * recv_mb->T);
      for (int64_t width : widths_) {
        Shape shape{rows, width};
        if (variable_shapes_) {
          std::array<int64_t, 3> recv_shape{};
          pipe_.recv_i64_async(recv_shape.data(), 3, src, recv_tag + kShapeTagOffset)->wait();
          check_received_shape(recv_shape, rows, width, src);
          shape = Shape{recv_shape[0] * recv_shape[1], recv_shape[2]};  // sized by what was sent
        }
        received.emplace_back(*ctx_.alloc, shape, DType::kFloat32, MemoryCategory::kActivations);
        recvs.push_back(pipe_.recv_async(received.back().f32(), received.back().numel(), src, recv_tag));
      }
    }
    if (send != nullptr) {
      for (const Tensor& t : *send) sends.push_back(pipe_.send_async(t.f32(), t.numel(), dst, send_tag));
    }
    for (auto& w : sends) w->wait();
    for (auto& w : recvs) w->wait();
    return received;
  }

  const ForwardContext& ctx_;
  ProcessGroup& pipe_;
  std::vector<int64_t> widths_;
  bool variable_shapes_;
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
  PipelineP2P p2p(ctx, model.stage_tensor_widths(), args.variable_seq_lengths);
  const int64_t P = ctx.ps->pp().size(), r = ctx.ps->pp().rank(), m = args.num_microbatches;
  const int64_t num_warmup = ctx.training ? std::min(P - r - 1, m) : m;
  const int64_t num_steady = m - num_warmup;
  ForwardBackwardResult out;
  std::deque<InFlight> in_flight;
  int64_t backwards_done = 0;
  TraceRecorder trace(args.trace, ctx.training);

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
  auto forward_step = [&](StageTensors input) {
    ForwardStep step = trace.run(PipelineOpKind::kForward, 0, static_cast<int64_t>(out.losses.size()), [&] {
      return args.forward_step_func(ctx, data, model, std::move(input), args.num_microbatches);
    });
    MS_CHECK(step.microbatch != nullptr, "the data iterator ran out at micro-batch ", out.losses.size(), " of ", m);
    out.losses.push_back(step.result.loss);
    out.total.loss_sum += step.result.loss.loss_sum;
    out.total.num_tokens += step.result.loss.num_tokens;
    if (ctx.training) in_flight.push_back({step.microbatch, std::move(step.result.saved)});
    return std::make_pair(std::move(step.result.outputs), step.microbatch);
  };
  auto backward = [&](StageTensors output_grad) {
    InFlight f = std::move(in_flight.front());
    in_flight.pop_front();
    // Gradient reduction may overlap only the last micro-batch's backward (no_sync before).
    if (args.set_grad_sync) args.set_grad_sync(backwards_done + 1 == m);
    StageTensors input_grad = trace.run(PipelineOpKind::kBackward, 0, backwards_done++, [&] {
      StageTensors g = model.backward(ctx, *f.microbatch, std::move(output_grad), *f.saved);
      if (ctx.wgrad_queue != nullptr) queue.flush(ctx);
      return g;
    });
    return std::make_pair(std::move(input_grad), f.microbatch);
  };

  // Warm-up: forwards only.
  for (int64_t i = 0; i < num_warmup; ++i) {
    auto [output, mb] = forward_step(p2p.recv_forward(next_microbatch(i)));
    p2p.send_forward(output, *mb);
  }
  // Steady state: one forward, one backward.
  StageTensors input;
  if (num_steady > 0) input = p2p.recv_forward(next_microbatch(num_warmup));
  for (int64_t i = 0; i < num_steady; ++i) {
    const bool last_iteration = i + 1 == num_steady;
    auto [output, mb] = forward_step(std::move(input));
    const MicroBatch* oldest = in_flight.front().microbatch;
    StageTensors output_grad = p2p.send_forward_recv_backward(output, *mb, *oldest);
    output.clear();
    auto [input_grad, grad_mb] = backward(std::move(output_grad));
    if (last_iteration) {
      p2p.send_backward(input_grad, *grad_mb);
    } else {
      input = p2p.send_backward_recv_forward(input_grad, *grad_mb, next_microbatch(num_warmup + i + 1));
    }
  }
  // Cool-down: the remaining backwards.
  if (ctx.training) {
    while (!in_flight.empty()) {
      StageTensors output_grad = p2p.recv_backward(*in_flight.front().microbatch);
      auto [input_grad, mb] = backward(std::move(output_grad));
      p2p.send_backward(input_grad, *mb);
    }
  }
  return out;
}

namespace {

// A single-micro-batch data iterator (the executor hands each forward step its micro-batch).
class OneMicroBatch final : public DataIterator {
 public:
  explicit OneMicroBatch(const MicroBatch* mb) : mb_(mb) {}
  const MicroBatch* next() override { return std::exchange(mb_, nullptr); }

 private:
  const MicroBatch* mb_;
};

// Runs this rank's schedule_plan() over its model chunks. A stage's output goes to the next
// stage and its input gradient to the previous one: a local hand-over when that stage is
// another chunk of this rank (the V's turn in DualPipeV), else a non-blocking send over the
// pipeline group that is completed at the end of the schedule (its buffer kept alive until
// then); receives wait where the step needs them. Since no send ever blocks, a rank waits
// only for an input its plan needs next, and simulate_plans() shows that no plan has a
// waiting cycle. Each (stage boundary, direction) has its own tag and both ends take the
// micro-batches in order, so MPI's ordering matches every message to its micro-batch.
class PlanExecutor {
 public:
  PlanExecutor(const ForwardContext& ctx, const ForwardBackwardArgs& args, const PipelineLayout& layout)
      : ctx_(ctx), args_(args), layout_(layout), pipe_(ctx.ps->pp()), rank_(pipe_.rank()),
        M_(args.num_microbatches), trace_(args.trace, ctx.training),
        chunks_(static_cast<size_t>(layout.chunks_per_rank)) {
    MS_CHECK(layout.pipeline_size == pipe_.size(), "the pipeline layout has ", layout.pipeline_size,
             " ranks, the pipeline group ", pipe_.size());
    MS_CHECK(static_cast<int>(args.model.size()) == layout.chunks_per_rank, pipeline_schedule_name(layout.schedule),
             " runs ", layout.chunks_per_rank, " model chunks per rank, got ", args.model.size());
    MS_CHECK(args.data_iterator != nullptr && args.forward_step_func, "no data iterator or forward_step_func");
    for (int64_t i = 0; i < M_; ++i) {
      const MicroBatch* mb = args.data_iterator->next();
      MS_CHECK(mb != nullptr, "the data iterator ran out at micro-batch ", i, " of ", M_);
      microbatches_.push_back(mb);
    }
    for (int c = 0; c < layout.chunks_per_rank; ++c) chunks_[c].stage = layout.stage_of(rank_, c);
    widths_ = args.model.front()->stage_tensor_widths();
    for (const ModelChunk* chunk : args.model) {
      MS_CHECK(chunk->stage_tensor_widths() == widths_, "the model chunks of one pipeline pass different tensors");
    }
    out_.losses.resize(static_cast<size_t>(M_));
  }

  ForwardBackwardResult run() {
    for (const PipelineOp& op : schedule_plan(layout_, rank_, M_, !ctx_.training)) {
      switch (op.kind) {
        case PipelineOpKind::kForward: forward(op); break;
        case PipelineOpKind::kBackward: backward(op); break;
        case PipelineOpKind::kWeight: weight(); break;
        case PipelineOpKind::kRecompute: MS_CHECK(false, "recompute steps are not planned"); break;
      }
      reap_sends();
    }
    for (PendingSend& s : sends_) s.work->wait();
    sends_.clear();
    MS_CHECK(deferred_.empty(), "deferred weight gradients left after the schedule");
    for (const LossSums& l : out_.losses) {
      out_.total.loss_sum += l.loss_sum;
      out_.total.num_tokens += l.num_tokens;
    }
    return std::move(out_);
  }

 private:
  struct InFlight {
    int64_t microbatch = 0;
    std::unique_ptr<ModelChunk::Saved> saved;
    bool released = false;  ///< --recompute-in-bubble: activations dropped after forward
  };
  struct Chunk {
    int stage = 0;
    std::deque<InFlight> in_flight;  ///< forwards awaiting their backward, oldest first
    int64_t backwards_done = 0;
  };
  struct PendingSend {
    std::unique_ptr<Work> work;
    Tensor buffer;
    std::unique_ptr<std::array<int64_t, 3>> shape;
  };
  struct Deferred {
    std::unique_ptr<WeightGradQueue> queue;
    bool last_of_chunk = false;
  };
  static int tag(int boundary, bool gradient) { return 2 * boundary + (gradient ? 1 : 0); }

  // Activations from stage s to s+1 cross boundary s; their gradients come back across it.
  // One message per stage tensor, in list order, each preceded by its shape with
  // --variable-seq-lengths.
  StageTensors receive(int from_stage, int boundary, bool gradient, int64_t microbatch) {
    const int from = layout_.stages[from_stage].rank;
    if (from == rank_) {
      auto& q = local_[{boundary, gradient}];
      MS_CHECK(!q.empty(), "local pipeline hand-over missing at boundary ", boundary);
      StageTensors t = std::move(q.front());
      q.pop_front();
      return t;
    }
    const MicroBatch& mb = *microbatches_[static_cast<size_t>(microbatch)];
    const int64_t rows = boundary_rows(ctx_, mb.B * mb.T);
    StageTensors out;
    for (int64_t width : widths_) {
      Shape shape{rows, width};
      if (args_.variable_seq_lengths) {
        std::array<int64_t, 3> wire{};
        pipe_.recv_i64_async(wire.data(), 3, from, tag(boundary, gradient) + kShapeTagOffset)->wait();
        check_received_shape(wire, rows, width, from);
        shape = Shape{wire[0] * wire[1], wire[2]};  // sized by what was sent
      }
      out.emplace_back(*ctx_.alloc, shape, DType::kFloat32, MemoryCategory::kActivations);
      pipe_.recv_async(out.back().f32(), out.back().numel(), from, tag(boundary, gradient))->wait();
    }
    return out;
  }
  void send(int to_stage, int boundary, bool gradient, StageTensors tensors, int64_t microbatch) {
    const int to = layout_.stages[to_stage].rank;
    MS_CHECK(tensors.size() == widths_.size(), "a stage sends ", tensors.size(), " tensors, the pipeline passes ",
             widths_.size());
    if (to == rank_) {
      local_[{boundary, gradient}].push_back(std::move(tensors));
      return;
    }
    for (Tensor& t : tensors) {
      if (args_.variable_seq_lengths) {
        auto shape = std::make_unique<std::array<int64_t, 3>>(
            wire_shape(t, *microbatches_[static_cast<size_t>(microbatch)]));
        auto work = pipe_.send_i64_async(shape->data(), 3, to, tag(boundary, gradient) + kShapeTagOffset);
        sends_.push_back({std::move(work), Tensor{}, std::move(shape)});
      }
      auto work = pipe_.send_async(t.f32(), t.numel(), to, tag(boundary, gradient));
      sends_.push_back({std::move(work), std::move(t), nullptr});
    }
  }
  void reap_sends() {
    std::erase_if(sends_, [](PendingSend& s) { return s.work->is_completed(); });
  }

  void forward(const PipelineOp& op) {
    Chunk& chunk = chunks_[op.chunk];
    const int s = chunk.stage;
    StageTensors input;
    if (s > 0) input = receive(s - 1, s - 1, false, op.microbatch);
    OneMicroBatch data(microbatches_[static_cast<size_t>(op.microbatch)]);
    // --recompute-in-bubble: at most pipeline size x chunks per rank micro-batches keep theirs.
    const bool release = ctx_.training && args_.recompute_in_bubble &&
                         kept_ >= static_cast<int64_t>(layout_.pipeline_size) * layout_.chunks_per_rank;
    ForwardStep step = trace_.run(
        PipelineOpKind::kForward, op.chunk, op.microbatch,
        [&] {
          ForwardStep result = args_.forward_step_func(ctx_, data, *args_.model[op.chunk], std::move(input), M_);
          if (release && result.result.saved) args_.model[op.chunk]->release_activations(ctx_, *result.result.saved);
          return result;
        },
        /*keeps=*/!release);
    MS_CHECK(step.microbatch != nullptr, "forward_step_func took no micro-batch");
    if (layout_.stages[s].post_process) out_.losses[static_cast<size_t>(op.microbatch)] = step.result.loss;
    if (ctx_.training) {
      chunk.in_flight.push_back({op.microbatch, std::move(step.result.saved), release});
      if (!release) ++kept_;
    }
    if (s + 1 < layout_.num_stages()) send(s + 1, s, false, std::move(step.result.outputs), op.microbatch);
  }

  void backward(const PipelineOp& op) {
    Chunk& chunk = chunks_[op.chunk];
    const int s = chunk.stage;
    MS_CHECK(!chunk.in_flight.empty() && chunk.in_flight.front().microbatch == op.microbatch,
             "backward of micro-batch ", op.microbatch, " on chunk ", op.chunk, " out of order");
    InFlight f = std::move(chunk.in_flight.front());
    chunk.in_flight.pop_front();
    const MicroBatch& mb = *microbatches_[static_cast<size_t>(op.microbatch)];
    if (f.released || args_.recompute_in_advance) {
      // Ripipe: the recompute before the wait for the gradient (in a bubble, when it is late).
      trace_.run(
          PipelineOpKind::kRecompute, op.chunk, op.microbatch,
          [&] { args_.model[op.chunk]->recompute(ctx_, mb, *f.saved); }, /*keeps=*/f.released);
      if (f.released) ++kept_;
    }
    StageTensors output_grad;
    if (s + 1 < layout_.num_stages()) output_grad = receive(s + 1, s, true, op.microbatch);
    const bool last_of_chunk = ++chunk.backwards_done == M_;
    ForwardContext ctx = ctx_;
    auto queue = std::make_unique<WeightGradQueue>();
    if (op.defer_weight_grad || args_.defer_weight_grad) ctx.wgrad_queue = queue.get();
    // Megatron enables the gradient reduction for each chunk's last backward (its
    // gradients are final then); a deferred backward notifies in its W step.
    if (args_.set_grad_sync && !op.defer_weight_grad) args_.set_grad_sync(last_of_chunk);
    StageTensors input_grad = trace_.run(PipelineOpKind::kBackward, op.chunk, op.microbatch, [&] {
      StageTensors g = args_.model[op.chunk]->backward(ctx, mb, std::move(output_grad), *f.saved);
      if (!op.defer_weight_grad && ctx.wgrad_queue != nullptr) queue->flush(ctx_);
      return g;
    });
    f.saved.reset();
    --kept_;
    if (op.defer_weight_grad) deferred_.push_back({std::move(queue), last_of_chunk});
    if (s > 0) send(s - 1, s - 1, true, std::move(input_grad), op.microbatch);
  }

  void weight() {
    MS_CHECK(!deferred_.empty(), "W step with no deferred weight gradient");
    Deferred d = std::move(deferred_.front());
    deferred_.pop_front();
    if (args_.set_grad_sync) args_.set_grad_sync(d.last_of_chunk);
    trace_.run(PipelineOpKind::kWeight, -1, -1, [&] { d.queue->flush(ctx_); });
  }

  const ForwardContext& ctx_;
  const ForwardBackwardArgs& args_;
  const PipelineLayout& layout_;
  ProcessGroup& pipe_;
  const int rank_;
  const int64_t M_;
  TraceRecorder trace_;
  std::vector<Chunk> chunks_;
  std::vector<const MicroBatch*> microbatches_;
  std::map<std::pair<int, bool>, std::deque<StageTensors>> local_;
  std::vector<int64_t> widths_;
  std::vector<PendingSend> sends_;
  std::deque<Deferred> deferred_;
  int64_t kept_ = 0;  ///< micro-batches (all chunks) whose activations are alive
  ForwardBackwardResult out_;
};

ForwardBackwardResult run_plan(const char* schedule, const ForwardContext& ctx_in, const ForwardBackwardArgs& args,
                               PipelineSchedule expected) {
  MS_CHECK(args.layout != nullptr && args.layout->schedule == expected, schedule,
           " needs ForwardBackwardArgs::layout with that schedule");
  ForwardContext ctx = ctx_in;
  ctx.training = ctx_in.training && !args.forward_only;
  ctx.wgrad_queue = nullptr;
  return PlanExecutor(ctx, args, *args.layout).run();
}

}  // namespace

ForwardBackwardResult forward_backward_pipelining_with_interleaving(const ForwardContext& ctx,
                                                                    const ForwardBackwardArgs& args) {
  return run_plan("the interleaved schedule", ctx, args, PipelineSchedule::kInterleaved);
}

ForwardBackwardResult forward_backward_dualpipev(const ForwardContext& ctx, const ForwardBackwardArgs& args) {
  return run_plan("DualPipeV", ctx, args, PipelineSchedule::kDualPipeV);
}

ForwardBackwardFunc get_forward_backward_func(const PipelineLayout& layout) {
  switch (layout.schedule) {
    case PipelineSchedule::kNoPipelining: return forward_backward_no_pipelining;
    case PipelineSchedule::k1F1B: return forward_backward_pipelining_without_interleaving;
    case PipelineSchedule::kInterleaved: return forward_backward_pipelining_with_interleaving;
    case PipelineSchedule::kDualPipeV: return forward_backward_dualpipev;
  }
  return forward_backward_no_pipelining;
}

}  // namespace mindspeed
