// Port of megatron/core/distributed/distributed_data_parallel.py and the bucket
// synchronisation of param_and_grad_buffer.py: data-parallel gradient reduction over the
// dp-cp group (expert buckets: the expert-data-parallel group), bucket by bucket.
//  * Gradients are pre-scaled by 1/(dp*cp) and summed: all-reduce per bucket, or
//    reduce-scatter per bucket with the distributed optimizer (each rank keeps its 1/dp
//    shard of every bucket).
//  * --overlap-grad-reduce: during the last micro-batch's backward, a bucket's reduction
//    starts (asynchronously) as soon as every parameter in it reported its gradient final;
//    finish_grad_sync() waits. Without overlap everything is reduced in finish_grad_sync().
//  * Tied copies (ParameterSpec::tied_to, the last stage's output_layer.weight): their
//    gradients are all-reduced over the embedding group with the original's (Megatron's
//    _allreduce_word_embedding_grads in finalize_model_grads).
//  * Distributed optimizer: after the step the updated shards are all-gathered
//    (start_param_sync); with --overlap-param-gather the gathers run in the background and
//    the next forward waits for each module's bucket right before using it.
//  * 16-bit gradients (DdpConfig::half_grads): bf16 with MindSpeed-LLM's --o2-gradient, fp16
//    with Megatron's --fp16 unless --accumulate-allreduce-grads-in-fp32. A unit's backward
//    writes a transient fp32 gradient (prepare_grads); when every parameter in it reported
//    (grads_ready, in every micro-batch) it is added into the 16-bit buffer with one rounding
//    and freed. The reduction widens a bucket's 16-bit gradient into an fp32 transient, scales
//    and reduces it in fp32, and rounds the result (this rank's shard with the distributed
//    optimizer) back into the 16-bit buffer: one rounding after the sum, where a 16-bit
//    collective rounds at every hop.
//  * FSDP optim_grads (DdpConfig::shard_grads, ZeRO-2): a unit's full gradient exists only from
//    its module's backward (prepare_grads) until every parameter in it reported (grads_ready, in
//    every micro-batch): then it is scaled, reduce-scattered in the background, and the shard is
//    added to this rank's gradient shard; the full gradient is freed when that completes.
//  * FSDP optim_grads_params (DdpConfig::shard_params, ZeRO-3): each rank keeps its shard of
//    every unit's parameters; a module's scope all-gathers its units before use (waiting for
//    the prefetch when one was started), starts the next unit's gather (forward order going
//    down the buffer, backward order up), and frees them when the scope ends. The optimizer
//    updates the shards in place; nothing is gathered after the step.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "distributed/param_and_grad_buffer.h"
#include "parallel/parallel_state.h"
#include "module/forward_context.h"

namespace mindspeed {

struct DdpConfig {
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  bool use_distributed_optimizer = false;
  bool shard_grads = false;  ///< FSDP optim_grads (needs the buffer's shard_grads)
  bool shard_params = false;  ///< FSDP optim_grads_params (with shard_grads)
  /// --o2-gradient (bf16) or --fp16 without --accumulate-allreduce-grads-in-fp32 (fp16): the
  /// buffer's gradients are 16-bit.
  bool half_grads = false;
  /// --calculate-per-token-loss: the gradients are summed without the 1/(dp*cp) pre-scale
  /// (Megatron's gradient_scaling_factor 1.0); the trainer divides them by the global batch's
  /// loss tokens after the reduction (scale_gradients).
  bool calculate_per_token_loss = false;
};

class DistributedDataParallel final : public ParameterHooks {
 public:
  DistributedDataParallel(ParamAndGradBuffer& buffer, const ParallelState& ps, const DdpConfig& config,
                          const Backend& backend);
  ~DistributedDataParallel() override;

  /// Gradient reductions may start during backward only after this (Megatron's no_sync off
  /// for the last micro-batch).
  void enable_grad_sync(bool enabled) { sync_enabled_ = enabled; }
  /// Starts what has not started, waits for every bucket, and (distributed optimizer)
  /// places each reduced shard; then all-reduces sequence-parallel norm gradients over tp.
  void finish_grad_sync();
  /// Multiplies every reduced gradient this rank holds by `factor` (Megatron's
  /// model_chunk.scale_gradients in finalize_model_grads, --calculate-per-token-loss).
  void scale_gradients(float factor);
  /// After the optimizer step (distributed optimizer): all-gather the updated parameters,
  /// in the background with --overlap-param-gather.
  void start_param_sync();
  /// Waits for every pending parameter gather.
  void finish_param_sync();

  // ParameterHooks
  void before_forward(const std::vector<Parameter*>& params) override;
  void prepare_grads(const std::vector<Parameter*>& params) override;
  void before_backward(const std::vector<Parameter*>& params) override;
  void after_use(const std::vector<Parameter*>& params) override;
  /// ZeRO-3: every unit's parameters gathered (checkpoint inspection, tests), and freed again.
  void gather_all_params();
  void release_all_params();
  void grads_ready(const std::vector<Parameter*>& params) override;

  const DdpConfig& config() const { return config_; }

 private:
  size_t bucket_of(const Parameter* p) const;
  /// The group a bucket is reduced over: dp-cp, or expert-dp for expert buckets.
  ProcessGroup& group_of(const Bucket& bucket) const;

 public:

 private:
  void launch_grad_sync(size_t bucket);
  void launch_param_sync(size_t bucket);
  /// shard_grads: adds each finished reduce-scatter into the gradient shard and frees the
  /// bucket's full gradient (all of them when `wait`, else the completed ones).
  void reap_sharded(bool wait);
  /// 16-bit gradients: element `offset` of the buffer's 16-bit gradients.
  void* half_grad_at(int64_t offset) const;
  /// 16-bit gradients: adds bucket b's transient fp32 gradient into the 16-bit buffer and frees it.
  void fold_into_half(size_t b);
  /// 16-bit gradients: rounds each finished reduction back into the 16-bit buffer and frees its
  /// transient (all of them when `wait`, else the completed ones).
  void reap_half(bool wait);
  /// 16-bit gradients: all-reduces a parameter's 16-bit gradient over `group` through fp32.
  void all_reduce_half_grad(ProcessGroup& group, Parameter* p);
  /// ZeRO-3: bucket b's parameters resident (waiting for its prefetch, or gathering now), and
  /// a background gather of bucket b started (no-op if resident or in flight, or b out of range).
  void gather_params(size_t b);
  void prefetch_params(int64_t b);

  ParamAndGradBuffer& buffer_;
  const ParallelState& ps_;
  DdpConfig config_;
  std::unordered_map<const Parameter*, size_t> bucket_of_;
  std::vector<int> ready_;
  std::vector<bool> launched_;  ///< 16-bit gradients: reduced in this step already
  std::vector<std::unique_ptr<Work>> grad_work_;
  std::vector<std::unique_ptr<Work>> param_work_;
  /// Gradients computed from a share of the tokens and summed over a tensor-parallel group
  /// after the data-parallel reduction: sequence parallelism's norm weights over tp, 2D tensor
  /// parallelism's norm weights and second-linear biases over tp-x.
  std::vector<std::pair<Parameter*, ProcessGroup*>> tp_summed_params_;
  std::vector<Parameter*> embedding_group_params_;  // the word embedding and its tied copies
  const Backend& backend_;
  bool sync_enabled_ = false;
};

}  // namespace mindspeed
