// Core attention across the context-parallel group: MindSpeed's UlyssesContextAttention
// (ulysses_cp_algo), AttentionWithCp (megatron_cp_algo, the ring) and their composition
// (hybrid_cp_algo: the Ulysses all-to-all inside groups of u ranks, then the ring across
// the R = CP/u groups on the resulting heads). Flash attention runs inside (MindSpeed forces
// it with context parallelism); dropout masks and masks are keyed by position in the sample,
// so every layout computes the single-process attention.
#pragma once

#include "core/tensor.h"
#include "module/forward_context.h"

namespace mindspeed {

class ContextParallelAttention {
 public:
  /// What backward needs, after the Ulysses exchange (u = 1: the tensors given).
  struct Saved {
    Tensor q, k,
        v;  ///< [B, NQ/u, Tu, D], [B, NKV'/u, Tu, D] x2 (NKV' = NKV repeated to a multiple of u)
    Tensor out;  ///< [Tu, B, (NQ/u)*D] attention output before the exchange back (u > 1 only)
    Tensor lse;  ///< [B, NQ/u, Tu]
  };

  /// context [T, B, NQ*D] = attention of this rank's queries q [B, NQ, T, D] (this rank's T
  /// positions of each sample, mb.seq_index) over the whole sample's keys; k, v [B, NKV, T, D].
  /// `local` holds the heads of this tensor-parallel rank (head_offset, num_heads_total)
  /// and T; `rule` the model's mask (band, ALiBi; its positions and document starts are
  /// set here from mb); q, k, v are moved into `saved`.
  static void forward(const ForwardContext& ctx, const MicroBatch& mb, const AttentionDims& local,
                      const AttentionMask& rule, const DropoutSpec& dropout, Tensor q, Tensor k,
                      Tensor v, float* context, Saved& saved);
  /// dq [B, NQ, T, D], dk, dv [B, NKV, T, D] (=) from dcontext [T, B, NQ*D]; context is the
  /// forward's output.
  static void backward(const ForwardContext& ctx, const MicroBatch& mb, const AttentionDims& local,
                       const AttentionMask& rule, const DropoutSpec& dropout, const Saved& saved,
                       const float* context, const float* dcontext, float* dq, float* dk,
                       float* dv);
};

}  // namespace mindspeed
