// Mixture-of-experts rules (validate_moe.h): Megatron core_v0.12's TransformerConfig
// __post_init__ and validate_args checks for MoE, and MindSpeed's constraints on its MoE
// features (mindspeed_features.md §6.1-6.6), each refused with the rule named.
#include "config/validate_moe.h"

namespace mindspeed {
namespace {

const char* dispatcher_name(MoeDispatcher d) {
  switch (d) {
    case MoeDispatcher::kAllGather:
      return "allgather";
    case MoeDispatcher::kAllToAll:
      return "alltoall";
    case MoeDispatcher::kAllToAllSeq:
      return "alltoall_seq";
  }
  return "?";
}

Status validate_moe_parallel(const MoeConfig& moe, const ParallelConfig& p) {
  const int tp = p.tensor_model_parallel_size, ep = p.expert_model_parallel_size;
  const int etp = p.expert_tensor_parallel_size > 0 ? p.expert_tensor_parallel_size : tp;
  if (moe.num_experts % ep != 0) {
    return invalid_argument("--num-experts (", moe.num_experts, ") must be a multiple of --expert-model-parallel-size (",
                            ep, ")");
  }
  if (tp > 1 && !p.sequence_parallel) {
    return invalid_argument("MoE with --tensor-model-parallel-size ", tp, " needs --sequence-parallel (Megatron's "
                            "MoELayer refuses tensor parallelism without sequence parallelism)");
  }
  if (moe.dispatcher == MoeDispatcher::kAllToAllSeq && etp != tp) {
    return invalid_argument("--moe-token-dispatcher-type alltoall_seq needs --expert-tensor-parallel-size equal to "
                            "--tensor-model-parallel-size (", tp, "), got ", etp);
  }
  if (p.moe_tp_extend_ep) {
    // MindSpeed §6.4.
    if (!moe.permutation_async_comm || !moe.grouped_gemm || moe.dispatcher != MoeDispatcher::kAllToAllSeq) {
      return invalid_argument("--moe-tp-extend-ep needs --moe-permutation-async-comm, --moe-grouped-gemm and "
                              "--moe-token-dispatcher-type alltoall_seq (MindSpeed's rule)");
    }
    if (moe.expert_capacity_factor > 0) {
      return invalid_argument("--moe-tp-extend-ep does not take --moe-expert-capacity-factor (MindSpeed's rule)");
    }
    if (moe.num_experts % (static_cast<int64_t>(tp) * ep) != 0) {
      return invalid_argument("--moe-tp-extend-ep needs --num-experts (", moe.num_experts,
                              ") divisible by tensor x expert parallel sizes (", tp * ep, ")");
    }
    if (p.expert_tensor_parallel_size > 1) {
      return invalid_argument("--moe-tp-extend-ep keeps experts whole: --expert-tensor-parallel-size must be 1 or "
                              "absent");
    }
  }
  if (moe.alltoall_overlap_comm) {
    // MindSpeed §6.6.
    if (ep < 2 || !moe.grouped_gemm) {
      return invalid_argument("--moe-alltoall-overlap-comm needs --expert-model-parallel-size > 1 and "
                              "--moe-grouped-gemm (MindSpeed's rule)");
    }
    if (moe.dispatcher == MoeDispatcher::kAllGather) {
      return invalid_argument("--moe-alltoall-overlap-comm needs --moe-token-dispatcher-type alltoall or alltoall_seq");
    }
    if (moe.dispatcher == MoeDispatcher::kAllToAll && p.moe_tp_extend_ep) {
      return invalid_argument("--moe-alltoall-overlap-comm with the alltoall dispatcher does not take "
                              "--moe-tp-extend-ep (MindSpeed's rule; use alltoall_seq)");
    }
    if (moe.dispatcher == MoeDispatcher::kAllToAllSeq &&
        (!moe.permutation_async_comm || (tp > 1 && !p.moe_tp_extend_ep))) {
      return invalid_argument("--moe-alltoall-overlap-comm with alltoall_seq needs --moe-permutation-async-comm, "
                              "and --moe-tp-extend-ep when --tensor-model-parallel-size > 1 (MindSpeed's rule)");
    }
  }
  if (moe.allgather_overlap_comm) {
    if (moe.dispatcher != MoeDispatcher::kAllGather) {
      return invalid_argument("--moe-allgather-overlap-comm needs --moe-token-dispatcher-type allgather");
    }
    if (ep < 2 || !moe.grouped_gemm) {
      return invalid_argument("--moe-allgather-overlap-comm needs --expert-model-parallel-size > 1 and "
                              "--moe-grouped-gemm (MindSpeed's rule)");
    }
  }
  if (moe.allgather_overlap_comm && moe.alltoall_overlap_comm) {
    return invalid_argument("--moe-allgather-overlap-comm and --moe-alltoall-overlap-comm exclude each other");
  }
  if (p.variable_seq_lengths && moe.dispatcher != MoeDispatcher::kAllToAll) {
    return invalid_argument("--variable-seq-lengths needs --moe-token-dispatcher-type alltoall (Megatron: the ",
                            dispatcher_name(moe.dispatcher), " dispatcher does not support variable lengths)");
  }
  return ok_status();
}

}  // namespace

Status validate_moe(ModelConfig& m, const ParallelConfig& p) {
  MoeConfig& moe = m.moe;
  if (!moe.enabled()) {
    if (p.expert_model_parallel_size > 1) {
      return invalid_argument("--expert-model-parallel-size ", p.expert_model_parallel_size,
                              " needs --num-experts (expert parallelism splits the experts of MoE layers)");
    }
    if (p.moe_tp_extend_ep || p.expert_tensor_parallel_size > 0) {
      return invalid_argument("--moe-tp-extend-ep and --expert-tensor-parallel-size need --num-experts");
    }
    return ok_status();
  }
  if (!moe.layer_pattern.empty() && static_cast<int64_t>(moe.layer_pattern.size()) != m.num_layers) {
    return invalid_argument("--moe-layer-freq lists ", moe.layer_pattern.size(), " layers but --num-layers is ",
                            m.num_layers);
  }
  if (moe.router_topk < 1 || moe.router_topk > moe.num_experts) {
    return invalid_argument("--moe-router-topk (", moe.router_topk, ") must be in [1, --num-experts (",
                            moe.num_experts, ")]");
  }
  if (m.add_bias_linear) {
    return invalid_argument("MoE layers have no linear biases (Megatron: \"Bias is not supported for MoE\"); add "
                            "--disable-bias-linear");
  }
  if (moe.router_topk == 1 && moe.score_function == MoeScoreFunction::kSoftmax && !moe.router_pre_softmax &&
      moe.load_balancing != MoeLoadBalancing::kSinkhorn) {
    return invalid_argument("--moe-router-topk 1 with softmax scoring needs --moe-router-pre-softmax (a softmax over "
                            "one logit has a zero gradient; Megatron's rule)");
  }
  if (moe.router_group_topk > 0 || moe.router_num_groups > 0) {
    if (moe.router_group_topk < 1 || moe.router_num_groups < 1) {
      return invalid_argument("group-limited routing needs both --moe-router-num-groups and --moe-router-group-topk");
    }
    if (moe.num_experts % moe.router_num_groups != 0) {
      return invalid_argument("--num-experts (", moe.num_experts, ") must be divisible by --moe-router-num-groups (",
                              moe.router_num_groups, ")");
    }
    if (moe.router_group_topk > moe.router_num_groups) {
      return invalid_argument("--moe-router-group-topk (", moe.router_group_topk,
                              ") must not exceed --moe-router-num-groups (", moe.router_num_groups, ")");
    }
    if (moe.router_topk % moe.router_group_topk != 0 ||
        moe.router_topk / moe.router_group_topk > moe.num_experts / moe.router_num_groups) {
      return invalid_argument("--moe-router-topk (", moe.router_topk, ") must be a multiple of --moe-router-group-topk (",
                              moe.router_group_topk, ") with at most the experts of a group per selected group");
    }
  }
  if (moe.router_enable_expert_bias && moe.load_balancing == MoeLoadBalancing::kSinkhorn) {
    return invalid_argument("--moe-router-enable-expert-bias with --moe-router-load-balancing-type sinkhorn: the "
                            "sinkhorn selection does not use the bias");
  }
  if (moe.router_enable_expert_bias && moe.score_function != MoeScoreFunction::kSigmoid) {
    return invalid_argument("--moe-router-enable-expert-bias needs --moe-router-score-function sigmoid (Megatron's "
                            "rule for aux-loss-free routing)");
  }
  if (moe.load_balancing == MoeLoadBalancing::kSinkhorn && moe.aux_loss_coeff != 0.0f) {
    return invalid_argument("--moe-router-load-balancing-type sinkhorn does not take --moe-aux-loss-coeff (Megatron: "
                            "\"Sinkhorn routing does not support aux loss\")");
  }
  if (moe.expert_capacity_factor > 0) {
    if (moe.load_balancing == MoeLoadBalancing::kSinkhorn) {
      return invalid_argument("--moe-expert-capacity-factor works with --moe-router-load-balancing-type aux_loss, "
                              "seq_aux_loss or none (Megatron's rule)");
    }
    if (moe.dispatcher == MoeDispatcher::kAllGather) {
      return invalid_argument("--moe-expert-capacity-factor needs --moe-token-dispatcher-type alltoall or "
                              "alltoall_seq (Megatron's allgather dispatcher drops no tokens)");
    }
  }
  if (moe.pad_expert_input_to_capacity && moe.expert_capacity_factor <= 0) {
    return invalid_argument("--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor");
  }
  if (moe.shared_expert_overlap) {
    if (moe.shared_expert_intermediate_size == 0) {
      return invalid_argument("--moe-shared-expert-overlap needs shared experts (--moe-shared-expert-intermediate-size "
                              "or --n-shared-experts)");
    }
    if (moe.dispatcher != MoeDispatcher::kAllToAll) {
      return invalid_argument("--moe-shared-expert-overlap only works with --moe-token-dispatcher-type alltoall "
                              "(Megatron's rule)");
    }
  }
  if (moe.shared_expert_gate && moe.shared_expert_intermediate_size == 0) {
    return invalid_argument("--shared-expert-gate needs shared experts");
  }
  if (moe.permute_fusion && moe.dispatcher == MoeDispatcher::kAllToAllSeq) {
    return invalid_argument("--moe-permute-fusion does not work with the alltoall_seq dispatcher (Megatron's rule)");
  }
  if (moe.permute_fusion && moe.dispatcher == MoeDispatcher::kAllGather) {
    return invalid_argument("--moe-permute-fusion is for the alltoall dispatchers (MindSpeed's rule)");
  }
  if (moe.input_jitter_eps < 0 || moe.input_jitter_eps >= 1) {
    return invalid_argument("--moe-input-jitter-eps (", moe.input_jitter_eps, ") must be in [0, 1)");
  }
  return validate_moe_parallel(moe, p);
}

}  // namespace mindspeed
