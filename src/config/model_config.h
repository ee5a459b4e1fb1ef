// ModelConfig: the shape and kind of the GPT/LLaMA model (the model part of Megatron's
// TransformerConfig, split out as Megatron's distributed/optimizer configs are). Field names
// and defaults follow Megatron's flags (--num-layers -> num_layers).
#pragma once

#include <cstdint>
#include <vector>
#include <string>

#include "config/moe_config.h"
#include "config/recompute_config.h"

namespace mindspeed {

enum class Normalization { kLayerNorm, kRMSNorm };
/// --position-embedding-type; kAlibi is MindSpeed's (a per-head bias on the attention scores,
/// transformer/alibi.h, no position embedding).
enum class PositionEmbeddingType { kLearnedAbsolute, kRope, kNone, kAlibi };
/// Rotary frequency scaling: none, or Llama 3.1's (Megatron --use-rope-scaling, MindSpeed-LLM
/// --rope-scaling-type llama3, Hugging Face rope_scaling {"rope_type": "llama3"}).
enum class RopeScaling { kNone, kLlama3 };

struct ModelConfig {
  int64_t num_layers = 0;            ///< --num-layers (required)
  int64_t hidden_size = 0;           ///< --hidden-size (required)
  int64_t ffn_hidden_size = 0;       ///< --ffn-hidden-size; 0 = 4h, or int(8h/3/64)*64 with SwiGLU
  int64_t num_attention_heads = 0;   ///< --num-attention-heads (required)
  int64_t kv_channels = 0;           ///< --kv-channels; 0 = hidden / heads
  bool group_query_attention = false;  ///< --group-query-attention
  int64_t num_query_groups = 1;      ///< --num-query-groups (used with GQA; else = heads)
  int64_t seq_length = 0;            ///< --seq-length (tokens per sample)
  int64_t max_position_embeddings = 0;  ///< --max-position-embeddings (required)
  Normalization normalization = Normalization::kLayerNorm;  ///< --normalization
  /// MindSpeed --noop-layers "i,j,...": 0-based global indices of identity layers (layer
  /// specs build them without parameters; FLOPs count only the other layers).
  std::vector<int64_t> noop_layers;
  float norm_epsilon = 1e-5f;        ///< --norm-epsilon
  bool swiglu = false;               ///< --swiglu (gated SiLU MLP)
  bool openai_gelu = false;          ///< --openai-gelu: tanh GELU (GPT-2); default exact erf GELU
  PositionEmbeddingType position_embedding_type = PositionEmbeddingType::kLearnedAbsolute;
  float rotary_base = 10000.0f;      ///< --rotary-base
  /// --rotary-seq-len-interpolation-factor: positions divided by it (Hugging Face rope_scaling
  /// {"type": "linear", "factor": f}); 1 = none.
  float rotary_seq_len_interpolation_factor = 1.0f;
  RopeScaling rope_scaling = RopeScaling::kNone;
  float rope_scaling_factor = 8.0f;        ///< --rope-scaling-factor (Llama 3.1: 8)
  float rope_low_freq_factor = 1.0f;       ///< --low-freq-factor
  float rope_high_freq_factor = 4.0f;      ///< --high-freq-factor
  int64_t rope_original_max_position_embeddings = 8192;  ///< --original-max-position-embeddings
  bool untie_embeddings_and_output_weights = false;  ///< --untie-embeddings-and-output-weights
  bool add_bias_linear = true;       ///< false with --disable-bias-linear
  /// --unaligned-linear (MindSpeed): query groups (with their heads) and FFN channels need not
  /// divide the tensor-parallel size; ranks below n % tp hold one more (module/parameter.h).
  bool unaligned_linear = false;
  bool add_qkv_bias = false;         ///< --add-qkv-bias (QKV bias even with --disable-bias-linear)
  /// ALiBi (--position-embedding-type alibi): MindSpeed's --alibi-fusion-attn-type (0, 2 or 3;
  /// -1 = not given: the unfused attention's form), --alibi-diagonal-opposite,
  /// --square-alibi-mask, --fill-neg-inf; transformer/alibi.h turns them into the bias form.
  int alibi_fusion_attn_type = -1;
  bool alibi_diagonal_opposite = false;
  bool square_alibi_mask = false;
  bool fill_neg_inf = false;
  /// Sliding-window attention: a query sees keys at most this many positions before it
  /// (Megatron's --window-size L, MindSpeed's --sparse-mode 0 --pre-tockens L, Mistral's
  /// sliding_window - 1); 0 = every earlier position (plain causal).
  int64_t attention_window = 0;
  float attention_dropout = 0.1f;    ///< --attention-dropout
  float hidden_dropout = 0.1f;       ///< --hidden-dropout
  float init_method_std = 0.02f;     ///< --init-method-std
  int64_t make_vocab_size_divisible_by = 128;  ///< --make-vocab-size-divisible-by
  /// Tokenizer vocabulary (before padding) and the padded size the model uses: a multiple of
  /// make_vocab_size_divisible_by * tensor-parallel size (Megatron's _vocab_size_with_padding).
  int64_t vocab_size = 0;
  int64_t padded_vocab_size = 0;
  /// MindSpeed-LLM's --padded-vocab-size: the padded size given outright (0 = derived).
  int64_t padded_vocab_size_override = 0;
  /// Mixture of experts (--num-experts and the --moe-* flags); num_experts == 0: dense.
  MoeConfig moe;
  /// Activation recompute (--recompute-* flags); lossless, so not part of the architecture.
  RecomputeConfig recompute;

  int64_t head_dim() const { return kv_channels; }
  int64_t query_groups() const { return group_query_attention ? num_query_groups : num_attention_heads; }
  bool qkv_bias() const { return add_bias_linear || add_qkv_bias; }
  /// Rows of the fused QKV projection: (heads + 2 * groups) * head_dim.
  /// The FFN size of one routed expert (--moe-ffn-hidden-size, else --ffn-hidden-size).
  int64_t expert_ffn_hidden_size() const { return moe.ffn_hidden_size > 0 ? moe.ffn_hidden_size : ffn_hidden_size; }
  int64_t qkv_size() const { return (num_attention_heads + 2 * query_groups()) * kv_channels; }
};

/// Every architecture field where the model flags `flags` and a checkpoint's `other` differ,
/// one "\n  <flag> is <ours> but <source_says> <theirs>" line each (empty: they agree). The
/// vocabulary is compared padded (a Megatron checkpoint stores the padded table) or as the
/// tokenizer's size (a Hugging Face config.json).
std::string architecture_differences(const ModelConfig& flags, const ModelConfig& other, const std::string& source_says,
                                     bool compare_padded_vocab = false);

/// Megatron's _vocab_size_with_padding.
inline int64_t padded_vocab(int64_t vocab_size, int64_t divisible_by, int64_t tensor_parallel) {
  const int64_t multiple = divisible_by * tensor_parallel;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

}  // namespace mindspeed
