// Ring attention (port of MindSpeed's ring_context_parallel.py AttentionWithCp, Megatron's
// megatron_cp_algo, with LoongTrain's double ring, MindSpeed double-ring.md): every rank of
// the ring group holds its queries, keys and values for a share of the sequence; the
// key/value blocks travel around the ring, each rank computes the flash attention of its
// queries against the block it holds and merges the partial result into its output with
// the ring-attention update (by log-sum-exp). Backward sends the blocks around again,
// with a key/value gradient accumulator travelling with each block; the query gradient
// stays local. Masks are by position in the sample (the kernels' AttentionMask), so
// fully masked blocks and tiles (the causal upper triangle of the load-balanced split) are
// skipped by the kernels, and dropout masks are those of the single-process run.
//
// Double ring (--cp-window-size w > 1): the ring ranks form windows of w consecutive ranks.
// Inside an outer step a block visits the w ranks of a window (the inner ring); between
// outer steps each window's blocks move to the next window (the outer ring, issued at the
// start of the outer step so it overlaps the whole inner ring). w = 1 is the single ring.
// Step (o, t) on ring rank W*w + i holds the block of rank ((W - o) mod R/w)*w + (i - t) mod w.
// With overlap (--use-cp-send-recv-overlap) every transfer is started before the attention
// of the block it follows and waited for after it; without, each transfer completes before
// the next block's attention starts.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "module/forward_context.h"

namespace mindspeed {

struct RingAttentionSpec {
  ProcessGroup* ring = nullptr;  ///< the ring group (cp, or cp-ring with hybrid CP)
  int window = 1;                ///< --cp-window-size
  bool overlap = false;          ///< --use-cp-send-recv-overlap
  /// Positions in the sample held by ring rank j (queries and keys), in local order.
  std::vector<std::vector<int32_t>> positions;
  /// The same arrays where the kernels read them (the backend's memory), one per ring rank.
  std::vector<const int32_t*> kernel_positions;
  /// The mask rule: causal or a band, doc_start [B, T] (each local query's first visible key
  /// position, EOD reset) or null; q_pos/k_pos are set per block from `positions`.
  AttentionMask mask;
  AttentionDims dims;   ///< T = Tk = local length, seq_total = sample length, heads on this rank
  DropoutSpec dropout;  ///< attention-probability dropout (keyed by position)
};

/// out [T, B, NQ*D] and lse [B, NQ, T]: attention of q [B, NQ, T, D] over every ring
/// rank's k, v [B, NKV, T, D].
void ring_attention_forward(const ForwardContext& ctx, const RingAttentionSpec& spec, float* out,
                            float* lse, const float* q, const float* k, const float* v);
/// dq [B, NQ, T, D], dk, dv [B, NKV, T, D] (=) from dout [T, B, NQ*D] and the forward's out, lse.
void ring_attention_backward(const ForwardContext& ctx, const RingAttentionSpec& spec, float* dq,
                             float* dk, float* dv, const float* dout, const float* out,
                             const float* lse, const float* q, const float* k, const float* v);

}  // namespace mindspeed
