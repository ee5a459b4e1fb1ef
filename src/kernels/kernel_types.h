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

#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/host_device.h"
#include "core/rng.h"

namespace mindspeed {

/// What every kernel call carries: where and with what it runs. On the CPU backend, the
/// thread pool a kernel may use (its OpenMP team size; BLAS is set to the same count). On the
/// CUDA backend (kernels/cuda/), its stream and its libraries' state; every pointer a kernel
/// then takes, those inside DropoutSpec and AttentionMask included, is device memory. Built
/// once, by the backend (kernels/backend.h).
struct KernelContext {
  int num_threads = 1;
  /// CUDA backend: its cudaStream_t, and its state (cuBLASLt handle, workspace, scratch:
  /// kernels/cuda/cuda_context.h). Null on the CPU.
  void* stream = nullptr;
  void* device = nullptr;
};

/// Which attention kernel a workspace is for.
enum class AttentionKernel { kCore, kFlash };

enum class GeluApproximation { kErf, kTanh };

/// Dropout site: drop probability and the Philox stream. Each element draws the stream's
/// uniform at a *global* index, so a sharded or re-batched activation gets the same mask as
/// the whole one (any TP/SP/DP layout, and recompute, reproduce it bit for bit):
///  * flat kernels: element i uses index_offset + i;
///  * row kernels on Megatron's [s, b, C] activations (sbh_batch > 0): row n = t*B + b is
///    local position t_offset + t of global sample first_sample + b, at sample position
///    p = seq_index[t_offset + t] (or t_offset + t), so element (n, c) uses
///    index_offset + ((first_sample + b) * seq_total + p) * C + c;
///  * attention probabilities [b, head, t, j] (attention_dropout_index below): index_offset +
///    (((first_sample + b) * heads_total + head) * S + qp) * S + kp, with qp, kp the
///    positions of query row t and key row j in the sample (AttentionMask) and
///    S = AttentionDims::sequence(); for self-attention qp = t, kp = j and S = T.
struct DropoutSpec {
  float p = 0.0f;
  RngStream rng;
  uint64_t index_offset = 0;
  int64_t sbh_batch = 0;     ///< B of the [s, b, C] layout; 0 = flat indexing
  int64_t first_sample = 0;  ///< global index of sample b = 0
  int64_t seq_total = 0;     ///< positions in a whole sample
  int64_t t_offset = 0;      ///< local position of row block t = 0 (sequence parallel shard)
  /// [local positions] position in the sample of each local position (context parallelism
  /// holds a subset of the sample's positions); null = the local position itself.
  const int32_t* seq_index = nullptr;
  /// 2D tensor parallelism: the rows hold columns [col_offset, col_offset + C) of rows of
  /// row_width (0: the rows are whole, row_width = C).
  int64_t col_offset = 0, row_width = 0;
  MS_HOST_DEVICE bool active() const { return p > 0.0f; }
  /// Global index of element (n, c) of an [N, C] row kernel.
  MS_HOST_DEVICE uint64_t row_index(int64_t n, int64_t c, int64_t C) const {
    if (sbh_batch == 0) return index_offset + static_cast<uint64_t>(n * C + c);
    const int64_t t = t_offset + n / sbh_batch, b = n % sbh_batch;
    const int64_t position = seq_index != nullptr ? seq_index[t] : t;
    const int64_t width = row_width > 0 ? row_width : C;
    return index_offset + static_cast<uint64_t>(
                              ((first_sample + b) * seq_total + position) * width + col_offset + c);
  }
};

/// Sentinel for AttentionMask::pre_tokens / next_tokens: no limit on that side.
inline constexpr int64_t kAllTokens = int64_t{1} << 40;

/// Attention problem on this rank: T query rows against Tk key/value rows per (sample,
/// group). q: [B, NQ, T, D]; k, v: [B, NKV, Tk, D]; out: [T, B, NQ*D] (Megatron's [s, b, h]
/// layout, ready for linear_proj); lse: [B, NQ, T]; core attention's probs: [B, NQ, T, Tk].
/// Tk = 0 is self-attention (Tk = T). Context parallelism computes one block of queries
/// against one block of keys: the rows' positions in the sample come from AttentionMask.
struct AttentionDims {
  int64_t B = 0, T = 0, NQ = 0, NKV = 0, D = 0;
  float scale = 0.0f;           ///< softmax scale, 1/sqrt(D) by default
  int64_t head_offset = 0;      ///< global index of local query head 0 (tensor parallel)
  int64_t num_heads_total = 0;  ///< query heads of the whole model (dropout indexing)
  int64_t Tk = 0;               ///< key/value rows per (sample, group); 0 = T (self-attention)
  int64_t seq_total = 0;        ///< positions in a whole sample (dropout indexing); 0 = T
  MS_HOST_DEVICE int64_t keys() const { return Tk > 0 ? Tk : T; }
  MS_HOST_DEVICE int64_t sequence() const { return seq_total > 0 ? seq_total : T; }
};

/// The ALiBi bias (Press et al., 2022) added to the scaled score of query position qp and key
/// position kp, d = kp - qp, for a head of slope m (MindSpeed's variants, transformer/alibi.h):
enum class AlibiBias : int8_t {
  kSymmetric,    ///< -m |d|: npu_fusion_attention pse_type 2 (and type 0's default tensor)
  kSqrt,         ///< -m sqrt(|d|): pse_type 3 (sqrt-ALiBi)
  kSigned,       ///< m d: --alibi-diagonal-opposite (type 0), --square-alibi-mask (unfused)
  kKeyPosition,  ///< m kp: the unfused default, BLOOM's build_alibi_tensor (a per-row shift of m d)
};

/// The bias of `form` with slope m for query position qp and key position kp.
MS_HOST_DEVICE inline double alibi_bias(AlibiBias form, double m, int64_t qp, int64_t kp) {
  const double d = static_cast<double>(kp - qp);
  switch (form) {
    case AlibiBias::kSymmetric:
      return -m * std::fabs(d);
    case AlibiBias::kSqrt:
      return -m * std::sqrt(std::fabs(d));
    case AlibiBias::kSigned:
      return m * d;
    case AlibiBias::kKeyPosition:
      return m * static_cast<double>(kp);
  }
  return 0.0;
}

/// Which keys a query may see. Query row t is at position qp = q_pos[t] (or q_offset + t) of
/// its sample, key row j at kp = k_pos[j] (or k_offset + j). Key j is visible to query t of
/// sample b iff
///   qp - pre_tokens <= kp <= qp + next_tokens  (the band; the defaults are causal), and
///   doc_start == null or kp >= doc_start[b*T + t]  (EOD reset: no attention across a
///   document boundary, the TND/varlen rule of flash attention),
/// or kp < prefix[b] (the prefix keys of sparse modes 5 and 6, visible to every query).
/// With alibi_slopes, the visible scores also get alibi_bias(alibi, slope of the head, qp, kp)
/// after the softmax scale (no gradient flows into the bias).
/// kernels/sparse_mode.h builds the masks of npu_fusion_attention's sparse modes.
/// Positions need not be monotone (context parallelism's load balancing concatenates two
/// runs, e.g. 0..3 then 12..15). A query row that sees no key has out = 0, lse = -inf and
/// zero gradient. The defaults are causal self-attention.
struct AttentionMask {
  const int32_t* doc_start = nullptr;  ///< [B, T]: first key position query row t sees, or null
  const int32_t* q_pos = nullptr;      ///< [T]: position of query row t; null = q_offset + t
  const int32_t* k_pos = nullptr;      ///< [Tk]: position of key row j; null = k_offset + j
  int64_t q_offset = 0, k_offset = 0;
  int64_t pre_tokens = kAllTokens;  ///< key visible only if kp >= qp - pre_tokens
  int64_t next_tokens = 0;          ///< and kp <= qp + next_tokens (0 = causal, kAllTokens = none)
  const int32_t* prefix = nullptr;  ///< [B]: keys at positions < prefix[b] always visible, or null
  const float* alibi_slopes = nullptr;      ///< [NQ]: ALiBi slope of each local query head, or null
  AlibiBias alibi = AlibiBias::kSymmetric;  ///< the bias form (with alibi_slopes)

  MS_HOST_DEVICE int64_t q_position(int64_t t) const { return q_pos ? q_pos[t] : q_offset + t; }
  MS_HOST_DEVICE int64_t k_position(int64_t j) const { return k_pos ? k_pos[j] : k_offset + j; }
  /// Lowest visible key position of query row t (position qp) of sample b; T = query rows.
  MS_HOST_DEVICE int64_t first_key(int64_t b, int64_t t, int64_t T, int64_t qp) const {
    const int64_t lo = qp - pre_tokens;
    return doc_start && doc_start[b * T + t] > lo ? doc_start[b * T + t] : lo;
  }
  /// Highest visible key position of a query at position qp.
  MS_HOST_DEVICE int64_t last_key(int64_t qp) const { return qp + next_tokens; }
  /// Keys of sample b at positions below this are visible to every query (prefix).
  MS_HOST_DEVICE int64_t prefix_end(int64_t b) const { return prefix ? prefix[b] : -kAllTokens; }
  MS_HOST_DEVICE bool visible(int64_t b, int64_t t, int64_t T, int64_t qp, int64_t kp) const {
    return (kp >= first_key(b, t, T, qp) && kp <= last_key(qp)) || kp < prefix_end(b);
  }
};

/// Global Philox index (index_offset included) of attention probability (b, h, t, j) for a
/// query at position qp and a key at position kp (DropoutSpec's attention rule).
MS_HOST_DEVICE inline uint64_t attention_dropout_index(const DropoutSpec& dropout,
                                                       const AttentionDims& d, int64_t b, int64_t h,
                                                       int64_t qp, int64_t kp) {
  const int64_t S = d.sequence();
  return dropout.index_offset +
         static_cast<uint64_t>(
             (((dropout.first_sample + b) * d.num_heads_total + d.head_offset + h) * S + qp) * S +
             kp);
}

}  // namespace mindspeed
