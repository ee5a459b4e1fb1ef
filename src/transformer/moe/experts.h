// Port of megatron/core/transformer/moe/experts.py: the routed experts this rank holds
// (GroupedMLP with --moe-grouped-gemm, SequentialMLP without). Each local expert is an MLP
// (linear_fc1 -> GELU or SwiGLU -> linear_fc2, no biases) split over the expert-tensor-
// parallel group like a column/row pair, stored as one parameter per expert under the
// SequentialMLP names with the GLOBAL expert index
//   decoder.layers.L.mlp.experts.local_experts.E.linear_fc1.weight  [2F or F, h] (GLU rows)
//   decoder.layers.L.mlp.experts.local_experts.E.linear_fc2.weight  [h, F]       (columns)
// so checkpoints reshard over any expert-parallel size. The input rows come grouped by local
// expert (counts[e] rows each, empty groups allowed); the output rows are the partial sums of
// the expert-tensor-parallel ranks (the dispatcher reduces them).
//  * grouped: all local experts as one grouped GEMM per linear (MindSpeed npu_gmm), weight
//    gradients by the grouped dW kernel (npu_groupmatmul_add_fp32 with
//    --gemm-gradient-accumulation-fusion, otherwise into a temporary and added).
//  * sequential: a loop of one plain linear per expert (the reference).
#pragma once

#include <string>
#include <vector>

#include "config/model_config.h"
#include "core/tensor.h"
#include "module/forward_context.h"

namespace mindspeed {

class Experts {
 public:
  struct Saved {
    Tensor fc1_out;  ///< [R, 2F/etp] (GLU) or [R, F/etp]: the activation's input
    Tensor act_out;  ///< [R, F/etp]: linear_fc2's input
  };

  /// first_expert: global index of this rank's first expert; num_local experts from there.
  Experts(ParameterRegistry& registry, const std::string& prefix, const ModelConfig& config, int64_t first_expert,
          int64_t num_local, int etp_size);
  /// y [R, h] (=) from x [R, h]; counts [num_local] rows per expert, in order.
  void forward(const ForwardContext& ctx, const float* x, const std::vector<int64_t>& counts, float* y,
               Saved& saved) const;
  /// dx [R, h] (=) from dy [R, h]; weight gradients +=.
  /// With activation recompute the activation's output is rebuilt from fc1's first.
  void backward(const ForwardContext& ctx, Saved& saved, const float* x, const float* dy,
                const std::vector<int64_t>& counts, float* dx) const;
  /// Megatron's selective "moe_act" recompute: forward drops the activation's output once
  /// linear_fc2 has used it; backward rebuilds it (bit-identical).
  void set_recompute_activation(bool on) { recompute_activation_ = on; }
  int64_t num_local() const { return static_cast<int64_t>(fc1_.size()); }
  const std::vector<Parameter*>& fc1() const { return fc1_; }
  const std::vector<Parameter*>& fc2() const { return fc2_; }

 private:
  /// saved.act_out [R, F/etp] = act(saved.fc1_out), bf16-rounded.
  void activation_forward(const ForwardContext& ctx, Saved& saved, int64_t R) const;
  bool recompute_activation_ = false;
  /// out [R, N] (=) = x [R, K] W_eᵀ per row group.
  void linear_forward(const ForwardContext& ctx, float* out, const float* x, const std::vector<Parameter*>& w,
                      const std::vector<int64_t>& counts, int64_t N, int64_t K) const;
  /// dx [R, K] (=) = dy W_e per group; dW_e += dy_eᵀ x_e.
  void linear_backward(const ForwardContext& ctx, float* dx, const float* dy, const float* x,
                       const std::vector<Parameter*>& w, const std::vector<int64_t>& counts, int64_t N,
                       int64_t K) const;

  bool swiglu_, grouped_, gemm_grad_fusion_;
  GeluApproximation gelu_;
  int64_t hidden_, ffn_local_, fc1_local_;
  std::vector<Parameter*> fc1_, fc2_;
};

}  // namespace mindspeed
