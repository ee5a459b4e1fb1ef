// Port of megatron/core/pipeline_parallel/schedules.py: get_forward_backward_func() and the
// schedules behind it. A schedule runs forward and backward of num_microbatches micro-batches
// over this rank's model chunks; what one forward step does is the caller's
// forward_step_func (Megatron's contract: it takes the next micro-batch from the data
// iterator, runs the chunk, and says how the loss is scaled), so the schedules know nothing
// of GPT. Training and evaluation both go through here (forward_only for evaluation).
// forward_backward_no_pipelining (pipeline size 1), forward_backward_pipelining_without_
// interleaving (1F1B, written as Megatron's with its paired p2p calls), and the multi-chunk
// schedules forward_backward_pipelining_with_interleaving and forward_backward_dualpipev,
// which run a schedule_plan() through one executor.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/status.h"
#include "module/forward_context.h"
#include "module/model_chunk.h"
#include "config/pipeline_layout.h"
#include "pipeline_parallel/schedule_plan.h"

namespace mindspeed {

/// Megatron's data_iterator: hands out the step's micro-batches in order.
class DataIterator {
 public:
  virtual ~DataIterator() = default;
  /// The next micro-batch (valid until the step ends), or null when there is none.
  virtual const MicroBatch* next() = 0;
};

/// A data iterator over micro-batches already in memory.
class SpanDataIterator final : public DataIterator {
 public:
  explicit SpanDataIterator(std::span<const MicroBatch> microbatches) : microbatches_(microbatches) {}
  const MicroBatch* next() override { return next_ < microbatches_.size() ? &microbatches_[next_++] : nullptr; }

 private:
  std::span<const MicroBatch> microbatches_;
  size_t next_ = 0;
};

/// What forward_step_func returns: the micro-batch it consumed and the chunk's result.
struct ForwardStep {
  const MicroBatch* microbatch = nullptr;
  ModelChunk::ForwardResult result;
};

/// Megatron's forward_step_func(data_iterator, model): inputs are the previous stage's
/// outputs (none on the first stage).
using ForwardStepFunc = std::function<ForwardStep(const ForwardContext& ctx, DataIterator& data_iterator,
                                                  const ModelChunk& model, StageTensors inputs,
                                                  int64_t num_microbatches)>;

/// One F, B or W step as it ran: times in seconds since the schedule started (bench/).
struct ScheduleEvent {
  PipelineOpKind kind = PipelineOpKind::kForward;
  int chunk = 0;
  int64_t microbatch = 0;
  double start = 0.0, end = 0.0;
};

/// Filled when passed in ForwardBackwardArgs::trace: every step of this rank, the schedule's
/// wall time, and the most micro-batches whose activations were alive at once (released ones,
/// --recompute-in-bubble, count from their recompute).
struct ScheduleTrace {
  std::vector<ScheduleEvent> events;
  double elapsed = 0.0;
  int64_t peak_in_flight = 0;
};

struct ForwardBackwardArgs {
  ForwardStepFunc forward_step_func;
  DataIterator* data_iterator = nullptr;
  std::vector<const ModelChunk*> model;  ///< this rank's chunks, in chunk order (PipelineLayout)
  /// Where every stage lives (needed by the interleaved and DualPipeV schedules).
  const PipelineLayout* layout = nullptr;
  int64_t num_microbatches = 1;
  bool forward_only = false;
  /// Megatron's no_sync_func: enables (true) or suppresses (false) the data-parallel
  /// gradient reduction during backward; the schedule enables it for the last micro-batch.
  std::function<void(bool enabled)> set_grad_sync;
  /// Queue weight gradients in backward and run them where the schedule says (the B/W split
  /// of zero-bubble schedules and --dualpipev-dw-detach). No pipelining flushes after each
  /// micro-batch's backward, so the gradients equal the undeferred ones bit for bit.
  bool defer_weight_grad = false;
  ScheduleTrace* trace = nullptr;  ///< optional timing record
  /// --variable-seq-lengths: micro-batches may differ in shape; every tensor between stages
  /// is preceded by its shape [s, b, h] and the receiver sizes its buffer from it.
  bool variable_seq_lengths = false;
  /// MindSpeed's ripipe (the plan executor: interleaved and DualPipeV schedules):
  /// in advance, each backward first runs its chunk's recompute (ModelChunk::recompute) and
  /// only then waits for the output gradient; in the bubble, a forward that would make more
  /// than pipeline size x chunks per rank micro-batches keep activations releases its own
  /// (ModelChunk::release_activations), rebuilt the same way ahead of its backward.
  bool recompute_in_advance = false;
  bool recompute_in_bubble = false;
};

struct ForwardBackwardResult {
  std::vector<LossSums> losses;  ///< per micro-batch (last stage; zeros elsewhere)
  LossSums total;                ///< summed over micro-batches
};

using ForwardBackwardFunc = std::function<ForwardBackwardResult(const ForwardContext& ctx,
                                                                const ForwardBackwardArgs& args)>;

/// The schedule of the layout (PipelineLayout::schedule).
ForwardBackwardFunc get_forward_backward_func(const PipelineLayout& layout);

/// Runs every micro-batch forward then backward on the one model chunk.
ForwardBackwardResult forward_backward_no_pipelining(const ForwardContext& ctx, const ForwardBackwardArgs& args);

/// Megatron's 1F1B on the pipeline group ctx.ps->pp(): stage r runs min(P - r - 1, m)
/// warm-up forwards, then alternates one forward and one backward, then the cool-down
/// backwards. Hidden states [n, h] go to the next stage and their gradients come back with
/// non-blocking send/recv posted in pairs (Megatron's p2p_communication), so no order of
/// stages and no number of micro-batches >= 1 can deadlock. At most P - r micro-batches keep
/// their activations alive on stage r. The loss lives on the last stage.
ForwardBackwardResult forward_backward_pipelining_without_interleaving(const ForwardContext& ctx,
                                                                       const ForwardBackwardArgs& args);

/// Megatron's interleaved 1F1B over args.layout (v chunks per rank, chunk c = stage c*P + r):
/// micro-batches in groups of G per chunk (get_schedule_table), (P - r - 1)*2 + (v - 1)*G
/// warm-up forwards, then one forward and one backward, then the cool-down.
ForwardBackwardResult forward_backward_pipelining_with_interleaving(const ForwardContext& ctx,
                                                                    const ForwardBackwardArgs& args);

/// DeepSeek's DualPipeV over args.layout (chunk 0 = stage r, chunk 1 = stage 2P-1-r, the loss
/// on rank 0); with layout.dw_detach the zero-bubble steps defer their weight gradients into
/// later W steps (WeightGradQueue), else every backward computes them at once.
ForwardBackwardResult forward_backward_dualpipev(const ForwardContext& ctx, const ForwardBackwardArgs& args);

}  // namespace mindspeed
