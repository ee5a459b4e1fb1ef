// Port of megatron/core/transformer/moe/token_dispatcher.py: moving each token's routed
// copies to the ranks holding their experts and the experts' outputs back, with explicit
// backward passes (each collective's backward is its partner's collective).
//  * allgather (MoEAllGatherTokenDispatcher): the tokens, probabilities and routing map are
//    all-gathered over the expert tensor x expert (tp_ep) group; each rank permutes the rows
//    routed to its local experts; the weighted expert outputs are reduce-scattered back.
//  * alltoall (MoEAlltoAllTokenDispatcher): the token counts are all-gathered over tp_ep,
//    the routed copies permuted expert-major, all-to-all-v over EP, all-gathered-v over
//    expert-TP, sorted by local expert ("sort_chunks_by_idxs"); the combine reverses every
//    step (unsort, reduce-scatter-v over expert-TP, all-to-all-v, unpermute).
//  * alltoall_seq with --moe-tp-extend-ep runs the alltoall steps over the tp x ep expert
//    group (whole experts, expert-TP 1), as MindSpeed's tp-extend-ep does.
// Probabilities are applied in the unpermute on the token's own rank (MindSpeed's
// npu_moe_token_unpermute with probs): out[t] = sum over its copies of prob * expert output.
// Rows are [n, h] local tokens (n = s*b/tp with sequence parallelism).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "config/model_config.h"
#include "core/tensor.h"
#include "module/forward_context.h"

namespace mindspeed {

class TokenDispatcher {
 public:
  struct Saved {
    int64_t n = 0;                    ///< local tokens
    std::vector<int32_t> rows;        ///< [R_src] token (in the gathered rows for allgather) of each copy
    std::vector<int32_t> experts;     ///< [R_src] expert (global index) of each copy
    std::vector<float> probs;         ///< [R_src] routing probability of each copy
    std::vector<int64_t> tokens_per_expert;  ///< [E_loc] rows each local expert computes
    // alltoall: split sizes in rows.
    std::vector<int64_t> input_splits, output_splits;  ///< [ep]
    std::vector<int64_t> output_splits_tp;             ///< [etp]
    std::vector<int64_t> chunk_sizes;  ///< [(etp*ep) * E_loc]: rows per (source, local expert)
    Tensor combined;                   ///< [R_src, h]: the expert outputs back on this rank (for dprobs)
  };

  /// first_expert, num_local: this rank's experts (a contiguous range of global indices).
  TokenDispatcher(const ModelConfig& config, int64_t first_expert, int64_t num_local);
  /// The local experts' input rows [R, h] (grouped by local expert; saved.tokens_per_expert)
  /// from x [n, h], probs [n, E] and the routing map [n, E] (1 = routed).
  Tensor dispatch(const ForwardContext& ctx, const float* x, int64_t n, const float* probs,
                  const uint8_t* routing_map, Saved& saved) const;
  /// out [n, h] (=) from the experts' output rows y [R, h] (partial sums over expert-TP).
  void combine(const ForwardContext& ctx, Tensor y, float* out, Saved& saved) const;
  /// Backward of combine: dy [R, h] (returned) from dout [n, h]; dprobs [n, E] (=).
  Tensor combine_backward(const ForwardContext& ctx, const float* dout, float* dprobs, Saved& saved) const;
  /// Backward of dispatch: dx [n, h] (=) from the gradient of the experts' input rows [R, h].
  void dispatch_backward(const ForwardContext& ctx, const float* dinput, float* dx, Saved& saved) const;

 private:
  bool all_to_all() const { return config_.moe.dispatcher != MoeDispatcher::kAllGather; }
  /// The copies of the routed tokens of `map` [T, E] for experts [e0, e1), expert-major,
  /// token order within an expert.
  void collect_copies(const float* probs, const uint8_t* map, int64_t T, int64_t e0, int64_t e1, Saved& saved) const;
  /// alltoall: the split sizes from this rank's per-expert counts, via the tp_ep all-gather.
  void exchange_counts(const ForwardContext& ctx, const std::vector<int64_t>& local_counts, Saved& saved) const;
  /// alltoall: rows [(src, e_loc)] -> [(e_loc, src)] (forward) or back (inverse).
  void sort_chunks(const ForwardContext& ctx, float* out, const float* in, const Saved& saved, bool inverse) const;
  /// alltoall, expert-TP > 1: all-gather-v of [R_ep, h] into [R_tot, h] over expert-TP, and
  /// its partner reduce-scatter-v (sum of the expert-TP ranks' partial rows).
  Tensor gather_expert_tp(const ForwardContext& ctx, const float* in, const Saved& saved) const;
  Tensor reduce_scatter_expert_tp(const ForwardContext& ctx, const float* in, const Saved& saved) const;

  ModelConfig config_;
  int64_t hidden_, num_experts_, first_expert_, num_local_;
};

}  // namespace mindspeed
