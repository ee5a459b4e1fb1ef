// ModuleScope: what happens around each use of a module's parameters, in one place instead
// of in every model: before a forward, the data-parallel layer's pre-hook (wait for that
// module's parameter all-gather, Megatron's forward pre-hook); during forward or backward,
// fp32 views of bf16 weights (ComputeWeights); after a backward, the "gradients ready"
// notification (Megatron's backward hook), which starts bucket reductions -- at once, or
// queued behind the module's deferred weight-gradient jobs. When the scope ends, the
// after_use hook (FSDP with sharded parameters frees the gathered ones).
#pragma once

#include <vector>

#include "module/compute_weights.h"
#include "module/forward_context.h"

namespace mindspeed {

class ModuleScope {
 public:
  enum class Pass { kForward, kBackward };
  ModuleScope(const ForwardContext& outer, const std::vector<Parameter*>& params, Pass pass);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;
  /// The context for the module's kernels (outer context + these weights).
  const ForwardContext& ctx() const { return ctx_; }

 private:
  std::vector<Parameter*> params_;  ///< a copy: callers may pass a temporary list
  ComputeWeights weights_;
  ForwardContext ctx_;
};

/// After a module's backward: its parameters' gradients are final (or will be once the
/// queued weight-gradient jobs before this notification ran).
void notify_grads_ready(const ForwardContext& ctx, const std::vector<Parameter*>& params);

/// 16-bit storage of saved activations (--bf16 / --fp16): replaces an fp32 tensor by its
/// bf16 or fp16 copy (forward end) and back (backward start); tensors already in the target
/// dtype stay as they are.
void compact_to_half(const ForwardContext& ctx, Tensor& t);
void expand_to_fp32(const ForwardContext& ctx, Tensor& t);
/// x = bf16- or fp16-rounded x in a --bf16 / --fp16 run (what a 16-bit kernel would have
/// written); nothing in an fp32 run.
void round_if_half(const ForwardContext& ctx, Tensor& t);
/// --fp16 only: x rounded to fp16 where an fp16 model holds fp16 values that the bf16
/// emulation keeps in fp32: the logits, and the gradients between layers in backward (a loss
/// scale too large overflows there to infinity, as in Megatron). Nothing in fp32 and bf16 runs.
void round_if_fp16(const ForwardContext& ctx, float* x /*[n]*/, int64_t n);

}  // namespace mindspeed
