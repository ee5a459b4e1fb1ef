// The MoE router's math as plain functions, forward and backward: what Megatron core_v0.12.1's
// TopKRouter computes (megatron/core/transformer/moe/moe_utils.py: topk_softmax_with_capacity,
// group_limited_topk, get_capacity, switch_load_balancing_loss_func,
// sequence_load_balancing_loss_func, z_loss_func, sinkhorn, get_updated_expert_bias; router.py:
// compute_routing_scores_for_aux_loss, sinkhorn_load_balancing). The backward functions follow
// the path torch autograd takes through those functions: the expert selection and every mask
// are constants.
//
// No communication happens here: where Megatron all-reduces or all-gathers over the sequence
// partition (tensor x context parallel) group, the caller passes the reduced counts or the
// gathered scores, and reduce-scatters a gathered gradient.
//
// Layout: T token rows by E experts, fp32 (uint8 for maps), row-major. Where a sequence view
// matters the rows are s-major, row = s * B + b (Megatron's [S, B, E] viewed as [S * B, E]).
// Backward functions overwrite their output gradient (the module contract's rule for
// activation gradients); a caller summing the router's contributions adds them itself.
//
// Ties: every top-k here (the experts of a token, the groups of a token, the tokens an expert
// keeps under a capacity) orders by value, larger first, NaN largest, and equal values by the
// lower index first. That is torch.topk on CUDA, where Megatron runs (it keeps "the first seen
// set" of the values equal to the k-th); torch on the CPU leaves ties unordered. It makes drop
// policy "position" keep an expert's earliest tokens and pad_to_capacity pad with the earliest
// tokens the expert did not select.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "config/moe_config.h"
#include "core/status.h"

namespace mindspeed {

/// The arguments of Megatron's topk_softmax_with_capacity (TopKRouter passes them from the
/// config).
struct RouterOptions {
  int64_t topk = 2;  ///< --moe-router-topk
  MoeScoreFunction score_function = MoeScoreFunction::kSoftmax;
  bool pre_softmax = false;     ///< softmax over all experts, then top-k (else top-k, then softmax)
  int64_t num_groups = 0;       ///< expert groups of group-limited routing
  int64_t group_topk = 0;       ///< groups chosen per token; 0: plain top-k
  float scaling_factor = 0.0f;  ///< multiplies the probabilities; 0: none
  double capacity_factor = 0.0;  ///< expert capacity factor; <= 0: dropless (Megatron's None)
  bool pad_to_capacity = false;  ///< every expert gets exactly its capacity of slots
  MoeDropPolicy drop_policy = MoeDropPolicy::kProbs;
};

/// The options from the config. The capacity factor, a float there and a Python float
/// (double) in Megatron, is taken as the shortest decimal that reads back as the float
/// (1.1f -> 1.1, not 1.10000002384), so the capacity's ceil() sees the value the user typed.
RouterOptions router_options(const MoeConfig& config);

/// Megatron's get_capacity: ceil(num_tokens / num_experts * capacity_factor), computed in
/// double, at least min_capacity. The router passes num_tokens = T * topk.
int64_t expert_capacity(int64_t num_tokens, int64_t num_experts, double capacity_factor,
                        int64_t min_capacity = 0);

/// Column sums of a [T, E] map: tokens per expert.
std::vector<int64_t> count_tokens_per_expert(std::span<const uint8_t> routing_map,
                                             int64_t num_tokens, int64_t num_experts);

/// What topk_routing_backward needs.
struct RoutingSaved {
  RouterOptions options;
  int64_t num_tokens = 0, num_experts = 0;
  std::vector<int32_t> top_indices;  ///< [T, topk] the selected experts, best first
  /// [T, topk] the selected experts' probabilities before the scaling factor: softmax over
  /// the selected logits, the selected full-softmax scores (pre-softmax), or the selected
  /// sigmoid scores divided by their sum + 1e-20 (as is when topk == 1).
  std::vector<float> topk_probs;
  /// [T, E] softmax (pre-softmax) or sigmoid of the logits; empty for softmax after top-k.
  std::vector<float> scores;
  /// [T, E] the final map when a capacity applies (probabilities outside it are zeroed);
  /// empty when dropless.
  std::vector<uint8_t> capacity_map;
};

struct RoutingOutput {
  std::vector<float> probs;                ///< [T, E] zero outside the map
  std::vector<uint8_t> routing_map;        ///< [T, E] 1 where a token goes to an expert
  std::vector<int64_t> tokens_per_expert;  ///< [E] local selections before capacity drops
  RoutingSaved saved;
};

/// Megatron's topk_softmax_with_capacity. logits [T, E]; expert_bias [E] or empty (sigmoid
/// only: added to the scores for the selection, not to the probabilities).
///   softmax: top-k of the logits, softmax over the k (pre_softmax: softmax over E, top-k);
///   sigmoid: sigmoid scores, top-k, divided by their sum + 1e-20 when topk > 1;
///   group-limited (group_topk > 0): a group's score is the sum of its top (topk /
///     group_topk) scores, the group_topk best groups stay, the top-k is taken over them;
///   then * scaling_factor. With a capacity C = expert_capacity(T * topk, E, factor) each
///   expert keeps the C tokens of highest probability (drop policy probs) or the first C
///   it selected (position); pad_to_capacity makes the map exactly those C tokens per expert
///   (probabilities of the padding are 0).
/// InvalidArgument for options Megatron refuses or cannot run (topk outside [1, E], groups
/// that do not divide E or leave fewer than topk experts, a bias with softmax, a capacity
/// above T) or inputs of the wrong size.
StatusOr<RoutingOutput> topk_routing_forward(std::span<const float> logits, int64_t num_tokens,
                                             int64_t num_experts, const RouterOptions& options,
                                             std::span<const float> expert_bias = {});

/// dprobs [T, E] -> dlogits [T, E] (overwritten).
void topk_routing_backward(const RoutingSaved& saved, std::span<const float> dprobs,
                           std::span<float> dlogits);

/// What aux_loss_scores_backward needs.
struct AuxScoresSaved {
  MoeScoreFunction score_function = MoeScoreFunction::kSoftmax;
  int64_t topk = 1, num_tokens = 0, num_experts = 0;
  std::vector<float> activation;    ///< [T, E] softmax or sigmoid of the logits
  std::vector<float> denominators;  ///< [T] sigmoid with topk > 1: row sum + 1e-20
};

struct AuxScores {
  std::vector<float> scores;  ///< [T, E]
  AuxScoresSaved saved;
};

/// TopKRouter.compute_routing_scores_for_aux_loss: softmax over E, or sigmoid divided by its
/// row sum + 1e-20 when topk > 1 (as is when topk == 1).
AuxScores aux_loss_scores_forward(std::span<const float> logits, int64_t num_tokens,
                                  int64_t num_experts, MoeScoreFunction score_function,
                                  int64_t topk);

/// dscores [T, E] -> dlogits [T, E] (overwritten).
void aux_loss_scores_backward(const AuxScoresSaved& saved, std::span<const float> dscores,
                              std::span<float> dlogits);

/// switch_load_balancing_loss_func: sum_e(sum_t scores[t, e] * tokens_per_expert[e]) *
/// E * coeff / (N * N * topk) with N = T * num_sub_sequence. scores [T, E] are this rank's;
/// tokens_per_expert [E] are already summed over the sequence-partition group (of
/// num_sub_sequence ranks).
float switch_load_balancing_loss(std::span<const float> scores, int64_t num_tokens,
                                 int64_t num_experts, std::span<const int64_t> tokens_per_expert,
                                 int64_t num_sub_sequence, int64_t topk, float coeff);

/// d(dloss * loss)/dscores [T, E] (overwritten); the same for every token.
void switch_load_balancing_loss_backward(int64_t num_tokens, int64_t num_experts,
                                         std::span<const int64_t> tokens_per_expert,
                                         int64_t num_sub_sequence, int64_t topk, float coeff,
                                         float dloss, std::span<float> dscores);

/// sequence_load_balancing_loss_func (DeepSeek's per-sample balance loss):
///   coeff * mean_b sum_e cost[b, e] * mean_s scores[s, b, e],
///   cost[b, e] = (sum over the LOCAL positions s of routing_map[s, b, e]) / (S * topk / E),
/// S = seq_length_local * num_sub_sequence. scores_full are the whole sequence's scores
/// [S * B, E] (gathered over the sequence-partition group, rank order); routing_map_local is
/// this rank's map [seq_length_local * B, E]: Megatron gathers the scores, not the map.
float sequence_load_balancing_loss(std::span<const float> scores_full,
                                   std::span<const uint8_t> routing_map_local,
                                   int64_t seq_length_local, int64_t batch_size,
                                   int64_t num_sub_sequence, int64_t num_experts, int64_t topk,
                                   float coeff);

/// d(dloss * loss)/dscores_full [S * B, E] (overwritten): the gradient of this rank's loss
/// with respect to the gathered scores; the caller reduce-scatters it (the gather's backward)
/// and keeps its slice.
void sequence_load_balancing_loss_backward(std::span<const uint8_t> routing_map_local,
                                           int64_t seq_length_local, int64_t batch_size,
                                           int64_t num_sub_sequence, int64_t num_experts,
                                           int64_t topk, float coeff, float dloss,
                                           std::span<float> dscores_full);

/// z_loss_func: coeff * mean_t(logsumexp_e(logits[t, e])^2). (TopKRouter passes
/// coeff / (tensor x context parallel size).)
float z_loss(std::span<const float> logits, int64_t num_tokens, int64_t num_experts, float coeff);

/// d(dloss * z)/dlogits [T, E] (overwritten) = dloss * coeff * 2 / T * lse_t * softmax[t, e].
void z_loss_backward(std::span<const float> logits, int64_t num_tokens, int64_t num_experts,
                     float coeff, float dloss, std::span<float> dlogits);

/// Megatron's sinkhorn(): exp(cost) balanced by alternating row and column scalings
/// (d0 = 1/T / (sum_e d1 * cost + 1e-8), d1 = 1/E / (sum_t d0 * cost + 1e-8)) until the mean
/// change of d1 is at most tol; returns d1 * exp(cost) * d0 [T, E]. No gradient (Megatron runs
/// it under no_grad).
std::vector<float> sinkhorn(std::span<const float> cost, int64_t num_tokens, int64_t num_experts,
                            float tol = 1e-4f);

struct SinkhornSaved {
  int64_t topk = 1, num_tokens = 0, num_experts = 0;
  std::vector<float> activation;     ///< [T, E] sigmoid (topk 1) or softmax of the logits
  std::vector<uint8_t> routing_map;  ///< [T, E]
};

struct SinkhornRouting {
  std::vector<float> probs;          ///< [T, E] activation * map
  std::vector<uint8_t> routing_map;  ///< [T, E]
  SinkhornSaved saved;
};

/// TopKRouter.sinkhorn_load_balancing: in training the top-k of sinkhorn(logits) chooses the
/// experts, otherwise the top-k of the activation; probs = the activation (sigmoid for
/// topk == 1, softmax over E for topk > 1) where the map is set. The caller counts the map.
SinkhornRouting sinkhorn_routing_forward(std::span<const float> logits, int64_t num_tokens,
                                         int64_t num_experts, int64_t topk, bool training = true);

/// dprobs [T, E] -> dlogits [T, E] (overwritten).
void sinkhorn_routing_backward(const SinkhornSaved& saved, std::span<const float> dprobs,
                               std::span<float> dlogits);

/// get_updated_expert_bias: bias[e] + rate * sign(mean(counts) - counts[e]), in fp32 as
/// Megatron (its counts buffer is fp32). tokens_per_expert are the global counts (the caller
/// all-reduces over tensor x data x context parallel).
std::vector<float> updated_expert_bias(std::span<const float> tokens_per_expert,
                                       std::span<const float> expert_bias, float update_rate);

}  // namespace mindspeed
