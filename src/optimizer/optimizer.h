// Port of megatron/core/optimizer/{optimizer.py, distrib_optimizer.py, clip_grads.py}:
// AdamW (decoupled weight decay on matrices only, Megatron's no_weight_decay rule for biases
// and norm weights) over the contiguous gradient buffer, with the global gradient-norm
// clipping of clip_grads.py, fp32 main parameters for bf16 models, and -- for
// --use-distributed-optimizer -- state and main parameters only for this rank's shard of
// every bucket (ZeRO-1). Data-parallel communication (reduce-scatter of gradients,
// all-gather of parameters) is the DDP's job (distributed/); this class only reads the
// gradients of the elements it owns and writes back the parameters it owns.
#pragma once

#include <cstdint>
#include <vector>

#include "config/optimizer_config.h"
#include "core/tensor.h"
#include "distributed/param_and_grad_buffer.h"
#include "kernels/backend.h"
#include "parallel/parallel_state.h"

namespace mindspeed {

class Optimizer {
 public:
  struct StepResult {
    double grad_norm = 0.0;    ///< global L2 norm before clipping
    double clip_coeff = 1.0;   ///< applied to the gradients (1 = none)
    int64_t num_zeros = 0;     ///< not computed (Megatron's --log-num-zeros-in-grad)
    /// The gradient norm was not finite: nothing was updated (as Megatron skips an
    /// iteration whose gradients overflowed).
    bool skipped = false;
  };

  Optimizer(const OptimizerConfig& config, ParamAndGradBuffer& buffer, const ParallelState& ps,
            Allocator& alloc, const Backend& backend, bool distributed);

  /// Clips and applies one AdamW step with learning rate `lr` to the owned elements; skips
  /// the update (and the step count) when the gradient norm is not finite.
  StepResult step(double lr);
  /// Global gradient L2 norm (Megatron's get_grad_norm_fp32 over the right group).
  double grad_norm() const;
  /// Owned [begin, end) ranges of the buffers, in shard order.
  struct Segment {
    int64_t begin = 0, end = 0;  ///< element range in the param/grad buffers
    int64_t shard_offset = 0;    ///< where it starts in the shard-local state arrays
    bool weight_decay = true;
    bool in_grad_norm = true;    ///< false for tensor-parallel duplicates and shared copies
    bool expert = false;         ///< an expert parameter's (MoE): norm over expert model parallel
  };
  const std::vector<Segment>& segments() const { return segments_; }
  int64_t shard_numel() const { return shard_numel_; }
  int64_t step_count() const { return step_; }
  void set_step_count(int64_t step) { step_ = step; }
  /// Optimizer state arrays (shard-local): exp_avg, exp_avg_sq and, for bf16 params, the
  /// fp32 main parameters (empty for fp32 params, whose main copy is the buffer itself).
  float* exp_avg() const { return exp_avg_.f32(); }
  float* exp_avg_sq() const { return exp_avg_sq_.f32(); }
  float* main_params() const { return main_params_.empty() ? nullptr : main_params_.f32(); }
  /// Copies the fp32 main parameters into the (bf16) parameter buffer for the owned range.
  void copy_main_to_model_params();

 private:
  /// The gradient of a segment's elements: in the gradient buffer, or in the buffer's
  /// gradient shards (FSDP optim_grads).
  float* grad_of(const Segment& s) const;
  /// The (model-dtype) parameters of a segment's elements: in the parameter buffer, or in its
  /// shards (FSDP optim_grads_params).
  void* param_of(const Segment& s) const;

  OptimizerConfig config_;
  ParamAndGradBuffer& buffer_;
  const ParallelState& ps_;
  const Backend& backend_;
  bool distributed_;
  std::vector<Segment> segments_;
  int64_t shard_numel_ = 0;
  int64_t step_ = 0;
  bool has_expert_params_ = false;
  Tensor exp_avg_, exp_avg_sq_, main_params_;
};

}  // namespace mindspeed
