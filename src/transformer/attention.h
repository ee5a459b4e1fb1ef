// Port of megatron/core/transformer/attention.py SelfAttention with the local spec:
// linear_qkv (column parallel, Megatron's grouped [groups, heads/group + 2, head_dim] row
// layout) -> split + rotary embedding -> core attention (unfused DotProductAttention, or
// flash attention with --use-flash-attn at optimization level 2) -> linear_proj (row
// parallel). Heads and query groups are split over tensor parallelism.
// ALiBi (--position-embedding-type alibi): the kernels add this rank's heads' slopes times
// the position distance to the scores (transformer/alibi.h); the mask stays causal.
// Context parallelism (--context-parallel-size > 1): core attention runs across the
// context-parallel group (context_parallel/context_parallel_attention.h) on this rank's share
// of the sequence; everything else is per token and unchanged.
// Selective recompute of core attention (set_recompute_core_attention, Megatron's
// --recompute-modules core_attn): forward keeps q, k, v and drops the attention output (and
// the log-sum-exp or the probabilities); backward runs the same kernel again first.
// Inference (Megatron's inference_context argument): with a StaticInferenceContext the new
// tokens' keys and values (after rotary embedding, at their absolute positions) are appended
// to the layer's key/value cache and the queries attend over every cached position
// (kv_cache_attention_forward); the same weights and projection kernels as training.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "context_parallel/context_parallel_attention.h"
#include "core/tensor.h"
#include "inference/static_inference_context.h"
#include "module/constant_table.h"
#include "module/forward_context.h"
#include "tensor_parallel/layers.h"
#include "tensor_parallel/linear_2d.h"

namespace mindspeed {

class SelfAttention {
 public:
  struct Saved {
    Tensor q, k, v;  ///< [B, heads/tp, T, D], [B, groups/tp, T, D] x2 (after rotary); empty with CP
    Tensor probs;    ///< [B, heads/tp, T, T] (core attention)
    Tensor lse;      ///< [B, heads/tp, T] (flash attention)
    Tensor context;  ///< [N, heads/tp * D]: attention output, input of linear_proj
    ContextParallelAttention::Saved cp;  ///< context parallelism: q, k, v, lse after the exchange
  };

  /// rope_cos/rope_sin: [max_positions, D/2] tables, or null without rotary embedding.
  SelfAttention(ParameterRegistry& registry, const std::string& prefix, const ModelConfig& config,
                int64_t layer_index, int tp_size, int tp_rank, bool sequence_parallel,
                const ConstantTable* rope_cos, const ConstantTable* rope_sin,
                const TensorParallelGrid& grid = {});
  /// out = linear_proj(attention(linear_qkv(x))), reduced over tp, without proj bias; x and
  /// out are [N, h], or [N/tp, h] with sequence parallelism. With `inference` (no sequence
  /// parallelism, no training) the mb.T new positions start at its sequence_len_offset() and
  /// mb.position_ids hold their absolute positions; only saved.context is meaningful then.
  void forward(const ForwardContext& ctx, const MicroBatch& mb, const float* x, float* out,
               Saved& saved, const StaticInferenceContext* inference = nullptr) const;
  /// dx [N, h] = gradient for the input x given dout [N, h]; weight gradients +=.
  void backward(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved,
                const float* x, const float* dout, float* dx) const;
  Parameter* proj_bias() const { return linear_proj_->bias(); }
  /// Not with context parallelism (validate_recompute refuses it).
  void set_recompute_core_attention(bool on) { recompute_core_attention_ = on; }

 private:
  /// saved.context [N, heads/tp * D] and saved.lse or saved.probs from saved.q, k, v (no
  /// context parallelism, no key/value cache).
  void core_attention_forward(const ForwardContext& ctx, const AttentionDims& d, const AttentionMask& mask,
                              const DropoutSpec& drop, Saved& saved) const;
  bool recompute_core_attention_ = false;
  AttentionDims dims(const MicroBatch& mb) const;
  /// The attention of the new positions over the key/value cache: saved.context [N, NQ*D].
  void attend_with_cache(const ForwardContext& ctx, const AttentionDims& d,
                         const StaticInferenceContext& inference, Saved& saved) const;
  DropoutSpec dropout(const ForwardContext& ctx, const MicroBatch& mb) const;
  /// Causal (or a sliding window), cut at document starts with EOD reset.
  AttentionMask mask(const ForwardContext& ctx, const MicroBatch& mb) const;
  bool use_flash(const ForwardContext& ctx) const { return ctx.k().flash_attention_forward != nullptr; }
  /// The micro-batch and context the attention itself runs with: mb and ctx, or with a 2D grid
  /// block y of mb's positions (`block`) and a context whose context-parallel group is the Y x CP
  /// union (Ulysses over it; ParallelState::attention_2d).
  const MicroBatch& attention_batch(const ForwardContext& ctx, const MicroBatch& mb,
                                    MicroBatch& block, ForwardContext& actx) const;
  static bool context_parallel(const ForwardContext& ctx) { return ctx.ps->sizes.context > 1; }

  TensorParallelGrid grid_;
  std::unique_ptr<ParallelLinear> linear_qkv_;
  std::unique_ptr<ParallelLinear> linear_proj_;
  int64_t layer_index_;
  int64_t heads_local_, groups_local_, head_dim_, heads_total_, head_offset_;
  float attention_dropout_;
  int64_t attention_window_;  ///< ModelConfig::attention_window (0: plain causal)
  ConstantTable alibi_slopes_;  ///< [heads/tp] this rank's ALiBi slopes, empty without ALiBi
  AlibiBias alibi_form_ = AlibiBias::kSymmetric;
  const ConstantTable* rope_cos_;
  const ConstantTable* rope_sin_;
};

}  // namespace mindspeed
