// Port of megatron/core/transformer/moe/router.py TopKRouter as a module with an explicit
// backward: the gate logits = x · Wᵀ (W [E, h], replicated over tp, a sequence-parallel
// parameter), the optional input jitter, the z-loss on the logits, the routing of the
// load-balancing type (aux_loss, seq_aux_loss, sinkhorn, none; moe_utils.h) and the aux loss
// on the scores. Megatron attaches the aux and z losses through MoEAuxLossAutoScaler: they
// add nothing to the forward values, and their gradients enter backward scaled by
// ctx.moe_aux_loss_scale (1 / micro-batches); we add them in backward the same way.
// The sequence-partition group of the losses is tensor x context parallel (with sequence
// parallelism each tp rank routes its own tokens): the aux loss uses the token counts summed
// over it, so the ranks' losses add up to the whole sequence's. With
// --moe-router-enable-expert-bias the sigmoid scores get a per-expert bias for the selection
// only (aux-loss-free balancing), a model buffer updated after every iteration.
#pragma once

#include <string>
#include <vector>

#include "config/model_config.h"
#include "core/tensor.h"
#include "module/forward_context.h"
#include "transformer/moe/moe_utils.h"

namespace mindspeed {

class TopKRouter {
 public:
  struct Saved {
    std::vector<float> logits;         ///< [n, E]
    std::vector<float> probs;          ///< [n, E] zero outside the map
    std::vector<uint8_t> routing_map;  ///< [n, E]
    RoutingSaved routing;
    SinkhornSaved sinkhorn;
    bool aux = false, z = false;
    AuxScoresSaved aux_scores;
    std::vector<int64_t> global_tokens_per_expert;  ///< aux_loss: counts over the partition group
    Tensor jittered;                   ///< [n, h] the gate's input with --moe-input-jitter-eps
    Tensor jitter;                     ///< [n, h] the noise factors
  };

  TopKRouter(ParameterRegistry& registry, const std::string& prefix, const ModelConfig& config, int64_t layer_index,
             bool sequence_parallel);
  /// probs and routing map of x [n, h] (n local rows of [s, b], s-major) into saved.
  void forward(const ForwardContext& ctx, const MicroBatch& mb, const float* x, int64_t n, Saved& saved) const;
  /// dx [n, h] (+=) and the gate's weight gradient from dprobs [n, E].
  void backward(const ForwardContext& ctx, const MicroBatch& mb, const Saved& saved, const float* x,
                const float* dprobs, float* dx, int64_t n) const;
  Parameter* weight() const { return weight_; }

 private:
  MoeConfig moe_;
  int64_t layer_index_, hidden_;
  Parameter* weight_ = nullptr;
  // Aux-loss-free balancing (--moe-router-enable-expert-bias): the bias added to the scores
  // for the selection (saved in checkpoints) and the tokens each expert got since the last
  // update (update_expert_biases).
  ModelBuffer* expert_bias_ = nullptr;              ///< [E] "<prefix>.expert_bias"
  ModelBuffer* local_tokens_per_expert_ = nullptr;  ///< [E] "<prefix>.local_tokens_per_expert"
};

/// Megatron's _update_router_expert_bias (finalize_model_grads, once per iteration): every
/// router's token counts since the last update summed over tensor x data x context parallel,
/// its bias moved by rate * sign(mean count - count), the counts cleared. No-op without
/// expert-bias routers.
void update_expert_biases(const ParameterRegistry& registry, const ParallelState& ps, float update_rate);

}  // namespace mindspeed
