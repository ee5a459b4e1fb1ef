// Port of megatron/core/models/gpt/gpt_model.py GPTModel for the GPT-2 family
// (LayerNorm, learned positions, GELU, biases, tied embeddings) and the LLaMA family
// (RMSNorm, rotary, SwiGLU, GQA, untied, no biases), built from a ModelConfig.
// pre_process (embedding) and post_process (final norm, output layer, loss) mark the first
// and last pipeline stage. The output layer and the loss are fused and run in row chunks:
// logits of a chunk -> vocab-parallel softmax cross-entropy -> its input gradient and the
// output weight's gradient right away (the loss gradient is known in the forward pass), so
// the [tokens, vocab] logits are never materialised whole.
#pragma once

#include <memory>
#include <vector>

#include "config/model_config.h"
#include "core/tensor.h"
#include "models/common/language_model_embedding.h"
#include "transformer/forward_context.h"
#include "transformer/norm.h"
#include "transformer/parameter.h"
#include "transformer/transformer_layer.h"

namespace mindspeed {

class GPTModel {
 public:
  struct Saved {
    LanguageModelEmbedding::Saved embedding;
    std::vector<TransformerLayer::Saved> layers;
    Tensor final_input;      ///< [n, h]: the last layer's output (bf16 storage with --bf16)
    Norm::Saved final_layernorm;
    Tensor final_norm_grad;  ///< [n, h]: d loss / d final_layernorm output (training only)
    Tensor labels;           ///< [N] in [s, b] order
  };
  /// Per-micro-batch loss bookkeeping, as Megatron's loss_func returns it.
  struct LossSums {
    double loss_sum = 0.0;    ///< sum over tokens of loss * loss_mask
    double num_tokens = 0.0;  ///< sum of loss_mask
  };

  /// sequence_parallel: Megatron SP (activations outside TP regions split along s); the
  /// forward context passed to forward/backward must say the same.
  GPTModel(const ModelConfig& config, const ParallelState& ps, bool sequence_parallel = false);
  GPTModel(const GPTModel&) = delete;
  GPTModel& operator=(const GPTModel&) = delete;

  const ModelConfig& config() const { return config_; }
  ParameterRegistry& registry() { return registry_; }
  const ParameterRegistry& registry() const { return registry_; }

  /// Forward pass over one micro-batch. With ctx.training the loss gradient is folded in:
  /// each token's loss counts with weight loss_mask * loss_scale in the objective (Megatron:
  /// loss_scale = 1 / (num_tokens * num_microbatches)), and the output layer's gradients are
  /// accumulated now; backward() does the rest.
  LossSums forward(const ForwardContext& ctx, const MicroBatch& mb, float loss_scale,
                   Saved& saved) const;
  void backward(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved) const;

  /// Logits [B*T, Vp/tp] in sample-major order (tests and evaluation tools).
  void compute_logits(const ForwardContext& ctx, const MicroBatch& mb, float* logits) const;

  /// Rows per chunk of the fused output layer + loss.
  int64_t loss_chunk_rows(int64_t N) const;

 private:
  void run_decoder(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved) const;
  /// The final norm's output over all N rows: itself, or all-gathered along the sequence into
  /// `storage` with sequence parallelism (the output layer is column parallel).
  const float* full_final_hidden(const ForwardContext& ctx, const Saved& saved, int64_t N, Tensor& storage) const;
  const Parameter* output_weight() const;

  /// Parameters declared since `first` (registry index), for the hooks.
  std::vector<Parameter*> params_since(size_t first) const;

  ModelConfig config_;
  int tp_size_, tp_rank_;
  bool sequence_parallel_;
  ParameterRegistry registry_;
  // The parameters of each module, in forward order: embedding, layers..., final norm,
  // output layer (empty when tied).
  std::vector<Parameter*> embedding_params_, final_norm_params_, output_params_;
  std::vector<std::vector<Parameter*>> layer_params_;
  std::vector<float> rope_cos_, rope_sin_;  // [max_positions, D/2]
  std::unique_ptr<LanguageModelEmbedding> embedding_;
  std::vector<std::unique_ptr<TransformerLayer>> layers_;
  std::unique_ptr<Norm> final_layernorm_;
  Parameter* output_layer_ = nullptr;  // null when tied to the word embeddings
};

}  // namespace mindspeed
