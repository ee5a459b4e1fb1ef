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
  /// A collective in flight between a start_* and its finish_* (the buffers it reads and
  /// writes live here until then).
  struct Pending {
    std::unique_ptr<Work> work, work2, work3;
    Tensor send, recv, recv2;
    std::vector<float>
        recv_probs;  ///< allgather: the gathered probabilities (host, as the router's)
    std::vector<uint8_t> recv_map;
  };
  struct Saved {
    int64_t n = 0;                    ///< local tokens
    std::vector<int32_t> rows;        ///< [R_src] token (in the gathered rows for allgather) of each copy
    std::vector<int32_t> experts;     ///< [R_src] expert (global index) of each copy
    std::vector<float> probs;         ///< [R_src] routing probability of each copy
    Tensor kernel_rows,
        kernel_probs;  ///< rows and probs where the kernels read them (the backend's memory)
    std::vector<int64_t> tokens_per_expert;  ///< [E_loc] rows each local expert computes
    // alltoall: split sizes in rows.
    std::vector<int64_t> input_splits, output_splits;  ///< [ep]
    std::vector<int64_t> output_splits_tp;             ///< [etp]
    std::vector<int64_t> chunk_sizes;  ///< [(etp*ep) * E_loc]: rows per (source, local expert)
    Tensor combined;                   ///< [R_src, h]: the expert outputs back on this rank (for dprobs)
    Pending pending;
  };

  /// first_expert, num_local: this rank's experts (a contiguous range of global indices).
  TokenDispatcher(const ModelConfig& config, int64_t first_expert, int64_t num_local);
  // Each step is a start (local work, then its collective left in flight) and a finish (the
  // wait, then what depends on it); what runs in between overlaps the communication
  // (MindSpeed's --moe-alltoall-overlap-comm / --moe-allgather-overlap-comm,
  // --moe-shared-expert-overlap). Without overlap a finish follows its start at once.
  /// Dispatch: from x [n, h], probs [n, E] and the routing map [n, E] (1 = routed) ...
  void start_dispatch(const ForwardContext& ctx, const float* x, int64_t n, const float* probs,
                      const uint8_t* routing_map, Saved& saved) const;
  /// ... the local experts' input rows [R, h] (grouped by local expert; saved.tokens_per_expert).
  Tensor finish_dispatch(const ForwardContext& ctx, Saved& saved) const;
  /// Combine: from the experts' output rows y [R, h] (partial sums over expert-TP) ...
  void start_combine(const ForwardContext& ctx, Tensor y, Saved& saved) const;
  /// ... out [n, h] (=).
  void finish_combine(const ForwardContext& ctx, float* out, Saved& saved) const;
  /// Backward of combine: from dout [n, h] ...
  void start_combine_backward(const ForwardContext& ctx, const float* dout, Saved& saved) const;
  /// ... dy [R, h] (returned) and dprobs [n, E] (=).
  Tensor finish_combine_backward(const ForwardContext& ctx, float* dprobs, Saved& saved) const;
  /// Backward of dispatch: from the gradient of the experts' input rows [R, h] ...
  void start_dispatch_backward(const ForwardContext& ctx, const float* dinput, Saved& saved) const;
  /// ... dx [n, h] (=).
  void finish_dispatch_backward(const ForwardContext& ctx, float* dx, Saved& saved) const;

 private:
  bool all_to_all() const { return config_.moe.dispatcher != MoeDispatcher::kAllGather; }
  /// The copies of the routed tokens of `map` [T, E] for experts [e0, e1), expert-major,
  /// token order within an expert.
  void collect_copies(const ForwardContext& ctx, const float* probs, const uint8_t* map, int64_t T,
                      int64_t e0, int64_t e1, Saved& saved) const;
  /// alltoall: the split sizes from the per-expert counts of every tp_ep rank ([ep*etp][E]).
  void plan_splits(const ForwardContext& ctx, const std::vector<int64_t>& local_counts,
                   const std::vector<int64_t>& all_counts, Saved& saved) const;
  /// alltoall: rows [(src, e_loc)] -> [(e_loc, src)] (forward) or back (inverse).
  void sort_chunks(const ForwardContext& ctx, float* out, const float* in, const Saved& saved, bool inverse) const;
  /// alltoall, expert-TP > 1: all-gather-v of [R_ep, h] into [R_tot, h] over expert-TP, and
  /// its partner reduce-scatter-v (sum of the expert-TP ranks' partial rows).
  Tensor gather_expert_tp(const ForwardContext& ctx, const float* in, const Saved& saved) const;
  Tensor reduce_scatter_expert_tp(const ForwardContext& ctx, const float* in, const Saved& saved) const;
  /// alltoall, toward the experts: what the EP all-to-all brought ([R_ep, h]) all-gathered
  /// over expert-TP and sorted by local expert -> [R, h].
  Tensor arrive_at_experts(const ForwardContext& ctx, Tensor received, const Saved& saved,
                           MemoryCategory category) const;
  /// alltoall, toward the tokens' ranks: rows in local-expert order [R, h] unsorted,
  /// reduce-scattered over expert-TP and sent back over EP into out [R_src, h] (left in flight
  /// in saved.pending).
  void start_return_home(const ForwardContext& ctx, const float* rows, float* out, Saved& saved) const;
  /// The probabilities applied in the unpermute: fused (--moe-permute-fusion) or Megatron's
  /// scale-then-scatter-add.
  void unpermute(const ForwardContext& ctx, float* out, const float* rows_in, int64_t T, const Saved& saved) const;

  ModelConfig config_;
  int64_t hidden_, num_experts_, first_expert_, num_local_;
};

}  // namespace mindspeed
