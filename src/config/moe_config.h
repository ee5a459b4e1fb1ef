// MoeConfig: the mixture-of-experts part of Megatron's TransformerConfig (num_moe_experts,
// moe_router_*, moe_token_dispatcher_type, ...) and MindSpeed's MoE additions. Field names
// follow the flags (--moe-router-topk -> router_topk); defaults are Megatron core_v0.12's.
// num_experts == 0 means a dense model (every other field is then unused).
#pragma once

#include <cstdint>
#include <vector>

namespace mindspeed {

/// --moe-router-score-function.
enum class MoeScoreFunction { kSoftmax, kSigmoid };
/// --moe-router-load-balancing-type.
enum class MoeLoadBalancing { kAuxLoss, kSeqAuxLoss, kSinkhorn, kNone };
/// --moe-token-drop-policy.
enum class MoeDropPolicy { kProbs, kPosition };
/// --moe-token-dispatcher-type.
enum class MoeDispatcher { kAllGather, kAllToAll, kAllToAllSeq };

struct MoeConfig {
  int64_t num_experts = 0;            ///< --num-experts (0: dense)
  /// --moe-layer-freq: which layers are MoE, one flag per global layer (1 = MoE). Built by
  /// the CLI from an int N (every N-th layer, starting at layer 0) or a list "[1,0,1,...]".
  std::vector<int> layer_pattern;
  int64_t ffn_hidden_size = 0;        ///< --moe-ffn-hidden-size (0: --ffn-hidden-size)
  int64_t router_topk = 2;            ///< --moe-router-topk
  MoeScoreFunction score_function = MoeScoreFunction::kSoftmax;
  bool router_pre_softmax = false;    ///< --moe-router-pre-softmax
  float router_topk_scaling_factor = 0.0f;  ///< --moe-router-topk-scaling-factor (0: none)
  int64_t router_num_groups = 0;      ///< --moe-router-num-groups (0: no group-limited routing)
  int64_t router_group_topk = 0;      ///< --moe-router-group-topk
  bool router_enable_expert_bias = false;   ///< --moe-router-enable-expert-bias
  float router_bias_update_rate = 1e-3f;    ///< --moe-router-bias-update-rate
  MoeLoadBalancing load_balancing = MoeLoadBalancing::kAuxLoss;
  float aux_loss_coeff = 0.0f;        ///< --moe-aux-loss-coeff
  float z_loss_coeff = 0.0f;          ///< --moe-z-loss-coeff (0: no z-loss)
  float expert_capacity_factor = 0.0f;  ///< --moe-expert-capacity-factor (0: dropless)
  bool pad_expert_input_to_capacity = false;  ///< --moe-pad-expert-input-to-capacity
  MoeDropPolicy drop_policy = MoeDropPolicy::kProbs;
  float input_jitter_eps = 0.0f;      ///< --moe-input-jitter-eps (0: none)
  MoeDispatcher dispatcher = MoeDispatcher::kAllGather;
  bool grouped_gemm = false;          ///< --moe-grouped-gemm
  /// MindSpeed --gemm-gradient-accumulation-fusion: the grouped GEMM's weight gradient is
  /// accumulated straight into the fp32 gradient (npu_groupmatmul_add_fp32) instead of
  /// computed into a temporary and added.
  bool gemm_gradient_accumulation_fusion = false;
  bool permute_fusion = false;        ///< --moe-permute-fusion / --use-fused-moe-token-permute-and-unpermute
  /// --moe-shared-expert-intermediate-size (MindSpeed --n-shared-experts k gives
  /// k * moe ffn size); 0: no shared experts.
  int64_t shared_expert_intermediate_size = 0;
  bool shared_expert_gate = false;    ///< MindSpeed-LLM --shared-expert-gate
  bool shared_expert_overlap = false;  ///< --moe-shared-expert-overlap
  bool permutation_async_comm = false;  ///< MindSpeed --moe-permutation-async-comm
  bool alltoall_overlap_comm = false;   ///< MindSpeed --moe-alltoall-overlap-comm
  bool allgather_overlap_comm = false;  ///< MindSpeed --moe-allgather-overlap-comm

  bool enabled() const { return num_experts > 0; }
  /// Whether global layer `layer` (0-based) is an MoE layer.
  bool is_moe_layer(int64_t layer) const {
    if (!enabled()) return false;
    if (layer_pattern.empty()) return true;
    return layer >= 0 && layer < static_cast<int64_t>(layer_pattern.size()) && layer_pattern[layer] != 0;
  }
};

}  // namespace mindspeed
