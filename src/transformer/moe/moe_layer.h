// Port of megatron/core/transformer/moe/moe_layer.py MoELayer (and shared_experts.py): the MLP
// slot of an MoE transformer layer.
//   probs, map = router(x);  y = combine(experts(dispatch(x, probs, map)))
//   out = y + shared_experts(x) [* sigmoid(x · gate_weight) with --shared-expert-gate]
// x and out are [n, h], this rank's rows ([s/tp, b, h] with sequence parallelism). The shared
// experts are a dense MLP (moe_shared_expert_intermediate_size, normal tensor parallelism);
// with --moe-shared-expert-overlap (and MindSpeed's overlap flags) they compute while the
// dispatcher's communication is in flight.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "core/tensor.h"
#include "module/forward_context.h"
#include "transformer/mlp.h"
#include "transformer/moe/experts.h"
#include "transformer/moe/router.h"
#include "transformer/moe/token_dispatcher.h"

namespace mindspeed {

/// Where this rank's experts are: Megatron's expert rank generator coordinates.
struct ExpertPlacement {
  int ep_size = 1, ep_rank = 0;  ///< expert parallel (tp * ep with --moe-tp-extend-ep)
  int etp_size = 1;              ///< expert tensor parallel
};

class MoELayer {
 public:
  struct Saved {
    TopKRouter::Saved router;
    TokenDispatcher::Saved dispatch;
    Tensor expert_input;  ///< [R, h] the local experts' rows
    Experts::Saved experts;
    MLP::Saved shared;
    Tensor shared_out;    ///< [n, h] the shared experts' output before the gate
    Tensor gate_score;    ///< [n] sigmoid(x · gate_weight)
  };

  MoELayer(ParameterRegistry& registry, const std::string& prefix, const ModelConfig& config, int64_t layer_index,
           const ExpertPlacement& placement, int tp_size, bool sequence_parallel);
  /// out [n, h] (=) from x [n, h]; N = s*b full rows.
  void forward(const ForwardContext& ctx, const MicroBatch& mb, const float* x, int64_t N, float* out,
               Saved& saved) const;
  /// Selective "moe_act" recompute of the routed experts' activation.
  void set_recompute_activation(bool on) { experts_.set_recompute_activation(on); }
  /// dx [n, h] (=) from dout [n, h]; parameter gradients +=.
  void backward(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved, const float* x, const float* dout,
                float* dx, int64_t N) const;

 private:
  /// saved.shared_out [n, h] (and the gate's scores) from x [n, h].
  void shared_forward(const ForwardContext& ctx, const float* x, int64_t N, Saved& saved) const;
  /// dx_shared [n, h] (=) through the gate and the shared MLP; their weight gradients +=.
  void shared_backward(const ForwardContext& ctx, Saved& saved, const float* x, const float* dout, float* dx_shared,
                       int64_t N) const;

  int64_t hidden_;
  TopKRouter router_;
  TokenDispatcher dispatcher_;
  Experts experts_;
  std::unique_ptr<MLP> shared_experts_;
  Parameter* shared_gate_ = nullptr;  ///< [1, h]
  bool overlap_;  ///< shared experts and router backward run while the dispatcher communicates
};

}  // namespace mindspeed
