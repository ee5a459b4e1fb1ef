// Port of megatron/core/models/gpt/gpt_model.py GPTModel for the GPT-2 family (LayerNorm,
// learned positions, GELU, biases, tied embeddings) and the LLaMA family (RMSNorm, rotary,
// SwiGLU, GQA, untied, no biases), built from a ModelConfig and the layer specs.
// One GPTModel is one model chunk (pipeline stage): a contiguous range of global layers,
// with the embedding when pre_process (first stage) and the final layernorm, output layer
// and loss when post_process (last stage). Composition only: embedding -> TransformerBlock
// -> OutputLayerLoss; the modules own their math, ModuleScope the hooks. Several chunks of
// one rank register their parameters into the same ParameterRegistry, so they share the
// contiguous parameter/gradient buffers and the data-parallel machinery.
#pragma once

#include <memory>
#include <vector>

#include "config/model_config.h"
#include "core/tensor.h"
#include "inference/static_inference_context.h"
#include "models/common/language_model_embedding.h"
#include "models/common/output_layer_loss.h"
#include "models/common/rotary_pos_embedding.h"
#include "module/forward_context.h"
#include "module/model_chunk.h"
#include "module/parameter.h"
#include "transformer/transformer_block.h"

namespace mindspeed {

struct GPTModelOptions {
  int64_t first_layer = 0;   ///< global index of this chunk's first layer
  int64_t num_layers = -1;   ///< layers of this chunk; -1 = all from first_layer on
  bool pre_process = true;   ///< first stage: owns the embedding
  bool post_process = true;  ///< last stage: owns the final layernorm, output layer, loss
  /// Megatron SP (activations outside TP regions split along s); the forward context passed
  /// to forward/backward must say the same.
  bool sequence_parallel = false;
  /// Which of its pipeline rank's model chunks this is (recompute's per-rank layer priority).
  int virtual_rank = 0;
  int virtual_size = 1;
};

class GPTModel final : public ModelChunk {
 public:
  struct Saved final : ModelChunk::Saved {
    LanguageModelEmbedding::Saved embedding;
    TransformerBlock::Saved decoder;
    Tensor decoder_output_grad;  ///< [n, h]: d loss / d final layernorm output (last stage)
  };

  GPTModel(const ModelConfig& config, const ParallelState& ps, ParameterRegistry& registry,
           const GPTModelOptions& options = {});
  GPTModel(const GPTModel&) = delete;
  GPTModel& operator=(const GPTModel&) = delete;

  const ModelConfig& config() const { return config_; }
  ParameterRegistry& registry() const { return registry_; }
  const GPTModelOptions& options() const { return options_; }

  // ModelChunk
  bool pre_process() const override { return options_.pre_process; }
  bool post_process() const override { return options_.post_process; }
  /// GPT stages pass one tensor: the hidden states [n, h].
  /// The hidden states: h columns, h/Y with 2D tensor parallelism.
  std::vector<int64_t> stage_tensor_widths() const override {
    return {config_.hidden_size / hidden_divisor_};
  }
  ForwardResult forward(const ForwardContext& ctx, const MicroBatch& mb, StageTensors inputs,
                        float loss_scale) const override;
  StageTensors backward(const ForwardContext& ctx, const MicroBatch& mb, StageTensors output_grads,
                        ModelChunk::Saved& saved) const override;
  /// The decoder's layers (TransformerBlock::release_activations / recompute).
  void release_activations(const ForwardContext& ctx, ModelChunk::Saved& saved) const override;
  void recompute(const ForwardContext& ctx, const MicroBatch& mb, ModelChunk::Saved& saved) const override;

  /// A whole model (pre and post process) on one micro-batch: the loss sums; with
  /// ctx.training the loss gradient is folded in (see OutputLayerLoss) and backward() does
  /// the rest.
  LossSums forward(const ForwardContext& ctx, const MicroBatch& mb, float loss_scale, Saved& saved) const;
  void backward(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved) const;

  /// Logits [B*T, Vp/tp] in sample-major order (whole model; tests and evaluation tools).
  void compute_logits(const ForwardContext& ctx, const MicroBatch& mb, float* logits) const;

  /// Generation (whole model): runs mb's tokens [B, T] as the positions mb.position_ids
  /// (starting at inference.sequence_len_offset()) with the key/value cache, which gains
  /// their keys and values (the caller advances the offset). Writes logits [B*T, Vp/tp]
  /// (sample-major) or, with last_only, those of the last position [B, Vp/tp].
  void forward_inference(const ForwardContext& ctx, const MicroBatch& mb, const StaticInferenceContext& inference,
                         bool last_only, float* logits) const;

 private:
  /// Runs the stage up to the decoder's output (the final layernorm's on the last stage).
  Tensor run_decoder(const ForwardContext& ctx, const MicroBatch& mb, Tensor input, Saved& saved,
                     const StaticInferenceContext* inference = nullptr) const;
  LossSums forward_into(const ForwardContext& ctx, const MicroBatch& mb, Tensor input, float loss_scale,
                        Saved& saved, Tensor* output) const;
  Tensor backward_from(const ForwardContext& ctx, const MicroBatch& mb, Tensor output_grad, Saved& saved) const;
  /// ctx for the decoder: in 2D tensor parallelism's layout when the model is built for it.
  ForwardContext decoder_context(const ForwardContext& ctx) const;

  ModelConfig config_;
  bool tp_2d_ = false;          ///< 2D tensor parallelism (tensor_parallel/linear_2d.h)
  int64_t hidden_divisor_ = 1;  ///< Y with 2D tensor parallelism
  GPTModelOptions options_;
  ParameterRegistry& registry_;
  std::unique_ptr<RotaryEmbedding> rotary_;
  std::unique_ptr<LanguageModelEmbedding> embedding_;
  std::vector<Parameter*> embedding_params_;
  std::unique_ptr<TransformerBlock> decoder_;
  std::unique_ptr<OutputLayerLoss> output_layer_;
};

}  // namespace mindspeed
