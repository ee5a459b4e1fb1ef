// The communication of Ulysses context parallelism (port of MindSpeed's
// ulysses_context_parallel.py _SeqAllToAll / UlyssesContextAttention, with the uneven split
// sizes of unaligned Ulysses), as named forward/backward pairs like tensor_parallel/mappings.h.
// `group` is the Ulysses group of u ranks; rank k holds lengths[k] consecutive positions of
// the group's sequence (Tu = their sum) before the exchange, and heads block k
// ([k*N/u, (k+1)*N/u)) after it. Head-major tensors are [B, N, T, D]; the attention
// output is Megatron's [T, B, N*D].
//
//   mapping             forward (all-to-all)             backward (the inverse all-to-all)
//   SequenceToHeads     [B,N,T_k,D] -> [B,N/u,Tu,D]      [B,N/u,Tu,D] -> [B,N,T_k,D]
//   ContextToSequence   [Tu,B,(N/u)*D] -> [T_k,B,N*D]    [T_k,B,N*D] -> [Tu,B,(N/u)*D]
// Buffers come from ctx.alloc (workspace); the re-layouts are the backend's kernels.
// Grouped-query attention with fewer key/value heads than u: RepeatKeyValueHeads repeats
// each head r times first (backward: the r gradients summed), MindSpeed's repeat_interleave.
// --use-ulysses-allgather-kv: AllGatherKeyValues all-gathers whole key/value heads along
// the sequence instead (backward: reduce-scatter).
#pragma once

#include <cstdint>
#include <vector>

#include "module/forward_context.h"

namespace mindspeed {

struct UlyssesShape {
  int64_t B = 0, N = 0, D = 0;   ///< N: heads on this rank before the exchange
  std::vector<int64_t> lengths;  ///< positions of each Ulysses rank (their sum is Tu)
  int64_t total() const;
  int64_t offset(int k) const;  ///< first position of rank k in the group's sequence
};

struct SequenceToHeads {
  /// out [B, N/u, Tu, D] = heads block r of every rank's in [B, N, lengths[k], D].
  static void forward(const ForwardContext& ctx, ProcessGroup& group, const UlyssesShape& s,
                      float* out, const float* in);
  /// din [B, N, lengths[r], D] = this rank's positions of every rank's dout [B, N/u, Tu, D].
  static void backward(const ForwardContext& ctx, ProcessGroup& group, const UlyssesShape& s,
                       float* din, const float* dout);
};

struct ContextToSequence {
  /// out [lengths[r], B, N*D] = this rank's rows of every rank's in [Tu, B, (N/u)*D].
  static void forward(const ForwardContext& ctx, ProcessGroup& group, const UlyssesShape& s,
                      float* out, const float* in);
  /// din [Tu, B, (N/u)*D] = heads block r of every rank's dout [lengths[k], B, N*D].
  static void backward(const ForwardContext& ctx, ProcessGroup& group, const UlyssesShape& s,
                       float* din, const float* dout);
};

/// out [B, N*r, T, D]: head j of out is head j / r of in [B, N, T, D].
struct RepeatKeyValueHeads {
  static void forward(const ForwardContext& ctx, int64_t repeats, int64_t B, int64_t N, int64_t T,
                      int64_t D, float* out, const float* in);
  /// din [B, N, T, D] = the sum of the r gradients of each head in dout [B, N*r, T, D].
  static void backward(const ForwardContext& ctx, int64_t repeats, int64_t B, int64_t N, int64_t T,
                       int64_t D, float* din, const float* dout);
};

/// --use-ulysses-allgather-kv: out [B, N, Tu, D] = every rank's in [B, N, T, D] (equal
/// lengths T) along the sequence; backward sums the gradients of all ranks and keeps this
/// rank's positions (reduce-scatter).
struct AllGatherKeyValues {
  static void forward(const ForwardContext& ctx, ProcessGroup& group, int64_t B, int64_t N,
                      int64_t T, int64_t D, float* out, const float* in);
  static void backward(const ForwardContext& ctx, ProcessGroup& group, int64_t B, int64_t N,
                       int64_t T, int64_t D, float* din, const float* dout);
};

}  // namespace mindspeed
