// The benchmark model configurations (issue: tiny, small LLaMA, GPT-2 124M; issue 13: a small
// Mixtral-style MoE model and its dense twin of the same active parameters), shared by the
// C++ benchmarks; bench/pytorch_train.py builds the dense models in PyTorch.
#pragma once

#include <string>
#include <vector>

#include "config/model_config.h"

namespace mindspeed::bench {

struct BenchConfig {
  std::string name;
  ModelConfig model;
  int64_t micro_batch = 1;
};

inline std::vector<BenchConfig> bench_configs() {
  std::vector<BenchConfig> out;
  {
    BenchConfig b{"tiny", {}, 8};  // 4 layers, h256, 4 heads, s256, mbs8, vocab 50304
    ModelConfig& m = b.model;
    m.num_layers = 4;
    m.hidden_size = 256;
    m.num_attention_heads = 4;
    m.kv_channels = 64;
    m.num_query_groups = 4;
    m.ffn_hidden_size = 1024;
    m.seq_length = m.max_position_embeddings = 256;
    m.vocab_size = m.padded_vocab_size = 50304;
    m.openai_gelu = true;
    out.push_back(b);
  }
  {
    BenchConfig b{"llama-small", {}, 4};  // 8 layers, h512, 8 heads, ffn 1408, s512, mbs4, vocab 32000
    ModelConfig& m = b.model;
    m.num_layers = 8;
    m.hidden_size = 512;
    m.num_attention_heads = 8;
    m.kv_channels = 64;
    m.num_query_groups = 8;
    m.ffn_hidden_size = 1408;
    m.seq_length = m.max_position_embeddings = 512;
    m.vocab_size = m.padded_vocab_size = 32000;
    m.normalization = Normalization::kRMSNorm;
    m.norm_epsilon = 1e-6f;
    m.swiglu = true;
    m.position_embedding_type = PositionEmbeddingType::kRope;
    m.untie_embeddings_and_output_weights = true;
    m.add_bias_linear = false;
    out.push_back(b);
  }
  {
    BenchConfig b{"gpt2-124m", {}, 4};  // 12 layers, h768, s1024, mbs4, vocab 50257 (padded 50304)
    ModelConfig& m = b.model;
    m.num_layers = 12;
    m.hidden_size = 768;
    m.num_attention_heads = 12;
    m.kv_channels = 64;
    m.num_query_groups = 12;
    m.ffn_hidden_size = 3072;
    m.seq_length = m.max_position_embeddings = 1024;
    m.vocab_size = 50257;
    m.padded_vocab_size = 50304;
    m.openai_gelu = true;
    out.push_back(b);
  }
  const ModelConfig llama_small = out[1].model;
  {
    // llama-small with every MLP an MoE layer: 8 experts of ffn 1408, top-2 (Mixtral's
    // routing), grouped GEMM, fused permutation (alltoall dispatcher, one process), aux loss.
    BenchConfig b{"mixtral-small", {}, 4};
    ModelConfig& m = b.model;
    m = llama_small;
    m.moe.num_experts = 8;
    m.moe.router_topk = 2;
    m.moe.ffn_hidden_size = 1408;
    m.moe.dispatcher = MoeDispatcher::kAllToAll;
    m.moe.grouped_gemm = true;
    m.moe.permute_fusion = true;
    m.moe.load_balancing = MoeLoadBalancing::kAuxLoss;
    m.moe.aux_loss_coeff = 0.01f;
    out.push_back(b);
  }
  {
    // mixtral-small's dense twin: the same active parameters per token (ffn = top-k x 1408).
    BenchConfig b{"mixtral-small-dense", {}, 4};
    ModelConfig& m = b.model;
    m = llama_small;
    m.ffn_hidden_size = 2 * 1408;
    out.push_back(b);
  }
  for (auto& b : out) b.model.attention_dropout = b.model.hidden_dropout = 0.0f;
  return out;
}

}  // namespace mindspeed::bench
