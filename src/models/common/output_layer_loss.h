// The post-process module of a GPT stage: the output layer (column-parallel over the
// vocabulary, Megatron's output_layer) fused with the vocab-parallel cross-entropy loss
// (Megatron's compute_language_model_loss). It runs in row chunks: logits of a chunk ->
// softmax cross-entropy -> the gradient of its input and of the output weight right away
// (the loss gradient is known in the forward pass), so the [tokens, vocab] logits are never
// materialised whole. With ForwardContext::wgrad_queue the weight-gradient GEMMs are queued
// instead (their dlogits chunks are then kept, [tokens, vocab/tp] floats).
// The weight is the word embedding when tied and this rank holds it; a last stage without
// the embedding declares output_layer.weight as its tied copy (ParameterSpec::tied_to).
#pragma once

#include <cstdint>
#include <vector>

#include "config/model_config.h"
#include "core/tensor.h"
#include "module/forward_context.h"
#include "module/parameter.h"

namespace mindspeed {

class OutputLayerLoss {
 public:
  OutputLayerLoss(ParameterRegistry& registry, const ModelConfig& config, int tp_size, int tp_rank);

  /// x [n, h]: the final layernorm's output. Returns this rank's loss sums (each token's
  /// loss counts with weight loss_mask * loss_scale in the objective, Megatron: loss_scale =
  /// 1 / (num_tokens * num_microbatches)). With ctx.training, dx [n, h] (=) is the gradient of
  /// x and the output weight's gradient is accumulated (or queued).
  LossSums forward(const ForwardContext& ctx, const MicroBatch& mb, const float* x, float loss_scale,
                   float* dx) const;
  /// Logits [B*T, Vp/tp] in sample-major order from x [n, h] (tests and evaluation tools).
  void compute_logits(const ForwardContext& ctx, const MicroBatch& mb, const float* x, float* logits) const;
  /// Rows per chunk of the fused output layer + loss.
  int64_t loss_chunk_rows(int64_t N) const;

  /// The parameters this module owns (empty when it uses the embedding's weight), for the
  /// data-parallel hooks; weight() is what it reads.
  const std::vector<Parameter*>& params() const { return params_; }
  Parameter* weight() const { return weight_; }

 private:
  /// x over all N rows: itself, or all-gathered along the sequence into `storage` under SP.
  const float* full_rows(const ForwardContext& ctx, const float* x, int64_t N, Tensor& storage) const;

  int64_t hidden_, vocab_local_, vocab_start_;
  Parameter* weight_ = nullptr;
  std::vector<Parameter*> params_;
};

}  // namespace mindspeed
