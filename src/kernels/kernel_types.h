// Argument structs shared by the reference (ref/) and fast (cpu/) kernels.
//
// Dimension letters, used in every kernel header's shape comments:
//   N  rows (tokens of a micro-batch, s*b flattened sequence-major), C channels (hidden),
//   T  sequence length, B micro-batch size, NQ query heads, NKV key/value heads (query groups),
//   D  head dim (kv_channels), G = NQ/NKV query heads per group, V vocab columns on this rank,
//   F  ffn hidden size on this rank.
// Accumulation rule (llm.c's, stated per kernel too): parameter gradients always accumulate
// (+=) so micro-batches add up in the gradient buffer; activation gradients overwrite (=),
// except where the kernel's input is the residual stream, where they accumulate (+=).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/rng.h"

namespace mindspeed {

/// What every kernel call carries: where and with what it runs. On the CPU backend, the
/// thread pool a kernel may use (its OpenMP team size; BLAS is set to the same count); a
/// CUDA backend adds its stream here. Built once, by the backend (kernels/backend.h).
struct KernelContext {
  int num_threads = 1;
};

/// Which attention kernel a workspace is for.
enum class AttentionKernel { kCore, kFlash };

enum class GeluApproximation { kErf, kTanh };

/// Dropout site: drop probability and the Philox stream. Each element draws the stream's
/// uniform at a *global* index, so a sharded or re-batched activation gets the same mask as
/// the whole one (any TP/SP/DP layout, and recompute, reproduce it bit for bit):
///  * flat kernels: element i uses index_offset + i;
///  * row kernels on Megatron's [s, b, C] activations (sbh_batch > 0): row n = t*B + b is
///    position t_offset + t of global sample first_sample + b, so element (n, c) uses
///    index_offset + ((first_sample + b) * seq_total + t_offset + t) * C + c;
///  * attention probabilities [b, head, t, j]: index_offset +
///    (((first_sample + b) * heads_total + head) * T + t) * T + j.
struct DropoutSpec {
  float p = 0.0f;
  RngStream rng;
  uint64_t index_offset = 0;
  int64_t sbh_batch = 0;     ///< B of the [s, b, C] layout; 0 = flat indexing
  int64_t first_sample = 0;  ///< global index of sample b = 0
  int64_t seq_total = 0;     ///< positions in a whole sample
  int64_t t_offset = 0;      ///< position of row block t = 0 (sequence parallel shard)
  bool active() const { return p > 0.0f; }
  /// Global index of element (n, c) of an [N, C] row kernel.
  uint64_t row_index(int64_t n, int64_t c, int64_t C) const {
    if (sbh_batch == 0) return index_offset + static_cast<uint64_t>(n * C + c);
    const int64_t t = n / sbh_batch, b = n % sbh_batch;
    return index_offset +
           static_cast<uint64_t>(((first_sample + b) * seq_total + t_offset + t) * C + c);
  }
};

/// Self-attention problem on this rank. q: [B, NQ, T, D]; k, v: [B, NKV, T, D];
/// out: [T, B, NQ*D] (Megatron's [s, b, h] layout, ready for linear_proj).
struct AttentionDims {
  int64_t B = 0, T = 0, NQ = 0, NKV = 0, D = 0;
  float scale = 0.0f;         ///< softmax scale, 1/sqrt(D) by default
  int64_t head_offset = 0;    ///< global index of local query head 0 (tensor parallel)
  int64_t num_heads_total = 0;  ///< query heads of the whole model (dropout indexing)
};

/// Which keys a query may see. Always causal; with `doc_start` (EOD reset) a query at
/// position t of sample b also needs key j >= doc_start[b*T + t] (no attention across a
/// document boundary, the TND/varlen rule of flash attention).
struct AttentionMask {
  const int32_t* doc_start = nullptr;  ///< [B, T] or null
};

}  // namespace mindspeed
