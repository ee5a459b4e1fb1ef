// architecture_differences (model_config.h).
#include "config/model_config.h"

#include <algorithm>

#include "core/str_cat.h"

namespace mindspeed {

std::string architecture_differences(const ModelConfig& f, const ModelConfig& c, const std::string& source_says,
                                     bool compare_padded_vocab) {
  std::string problems;
  auto check = [&](const char* flag, auto ours, auto theirs) {
    if (ours != theirs) problems += str_cat("\n  ", flag, " is ", ours, " but ", source_says, " ", theirs);
  };
  check("--num-layers", f.num_layers, c.num_layers);
  check("--hidden-size", f.hidden_size, c.hidden_size);
  check("--num-attention-heads", f.num_attention_heads, c.num_attention_heads);
  check("--ffn-hidden-size", f.ffn_hidden_size, c.ffn_hidden_size);
  check("--kv-channels", f.kv_channels, c.kv_channels);
  check("--num-query-groups", f.query_groups(), c.query_groups());
  check("--max-position-embeddings", f.max_position_embeddings, c.max_position_embeddings);
  if (compare_padded_vocab) {
    check("padded vocabulary (tokenizer, --make-vocab-size-divisible-by)", f.padded_vocab_size, c.padded_vocab_size);
  } else {
    check("vocabulary size (tokenizer / --vocab-size)", f.vocab_size, c.vocab_size);
  }
  check("--normalization", f.normalization == Normalization::kLayerNorm ? "LayerNorm" : "RMSNorm",
        c.normalization == Normalization::kLayerNorm ? "LayerNorm" : "RMSNorm");
  check("--swiglu", f.swiglu, c.swiglu);
  if (!c.swiglu) check("--openai-gelu", f.openai_gelu, c.openai_gelu);
  check("--position-embedding-type", static_cast<int>(f.position_embedding_type),
        static_cast<int>(c.position_embedding_type));
  check("--untie-embeddings-and-output-weights", f.untie_embeddings_and_output_weights,
        c.untie_embeddings_and_output_weights);
  check("bias in linear layers (--disable-bias-linear)", f.add_bias_linear, c.add_bias_linear);
  check("--norm-epsilon", f.norm_epsilon, c.norm_epsilon);
  if (c.position_embedding_type == PositionEmbeddingType::kRope) check("--rotary-base", f.rotary_base, c.rotary_base);
  check("--use-rope-scaling", f.rope_scaling == RopeScaling::kLlama3, c.rope_scaling == RopeScaling::kLlama3);
  if (c.rope_scaling == RopeScaling::kLlama3) {
    check("--rope-scaling-factor", f.rope_scaling_factor, c.rope_scaling_factor);
    check("--low-freq-factor", f.rope_low_freq_factor, c.rope_low_freq_factor);
    check("--high-freq-factor", f.rope_high_freq_factor, c.rope_high_freq_factor);
    check("--original-max-position-embeddings", f.rope_original_max_position_embeddings,
          c.rope_original_max_position_embeddings);
  }
  check("--rotary-seq-len-interpolation-factor", f.rotary_seq_len_interpolation_factor,
        c.rotary_seq_len_interpolation_factor);
  check("--add-qkv-bias (with --disable-bias-linear)", f.qkv_bias(), c.qkv_bias());
  check("--num-experts", f.moe.num_experts, c.moe.num_experts);
  if (c.moe.enabled() && f.moe.enabled()) {
    check("--moe-router-topk", f.moe.router_topk, c.moe.router_topk);
    check("--moe-ffn-hidden-size", f.expert_ffn_hidden_size(), c.expert_ffn_hidden_size());
    for (int64_t l = 0; l < std::min(f.num_layers, c.num_layers); ++l) {
      check(str_cat("MoE layer ", l, " (--moe-layer-freq)").c_str(), f.moe.is_moe_layer(l), c.moe.is_moe_layer(l));
    }
    check("--moe-shared-expert-intermediate-size", f.moe.shared_expert_intermediate_size,
          c.moe.shared_expert_intermediate_size);
    check("--shared-expert-gate", f.moe.shared_expert_gate, c.moe.shared_expert_gate);
  }
  return problems;
}

}  // namespace mindspeed
