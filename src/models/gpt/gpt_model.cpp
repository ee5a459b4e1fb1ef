// GPTModel (gpt_model.h).
#include "models/gpt/gpt_model.h"

#include <memory>

#include "core/check.h"
#include "models/gpt/gpt_layer_specs.h"
#include "module/module_scope.h"
#include "module/weight_grad_queue.h"

namespace mindspeed {

GPTModel::GPTModel(const ModelConfig& config, const ParallelState& ps, ParameterRegistry& registry,
                   const GPTModelOptions& options)
    : config_(config), options_(options), registry_(registry) {
  if (options_.num_layers < 0) options_.num_layers = config.num_layers - options_.first_layer;
  MS_CHECK(options_.first_layer >= 0 && options_.num_layers >= 0 &&
               options_.first_layer + options_.num_layers <= config.num_layers,
           "model chunk layers [", options_.first_layer, ", ", options_.first_layer + options_.num_layers,
           ") outside the model's ", config.num_layers, " layers");
  const int tp_size = ps.sizes.tensor, tp_rank = ps.tp_rank;
  rotary_ = std::make_unique<RotaryEmbedding>(config);
  if (options_.pre_process) {
    const size_t first = registry.params().size();
    embedding_ = std::make_unique<LanguageModelEmbedding>(registry, config, tp_size, tp_rank, options_.sequence_parallel);
    embedding_params_ = params_since(registry, first);
  }
  decoder_ = std::make_unique<TransformerBlock>(
      registry, config,
      get_gpt_decoder_layer_specs(config, options_.first_layer, options_.num_layers),
      options_.first_layer, options_.post_process, tp_size, tp_rank, options_.sequence_parallel,
      rotary_->cos(), rotary_->sin(),
      ExpertPlacement{ps.sizes.expert, ps.ep_rank, ps.sizes.expert_tensor}, options_.virtual_rank,
      options_.virtual_size, TensorParallelGrid::of(ps));
  tp_2d_ = ps.tp_2d();
  hidden_divisor_ = tp_2d_ ? ps.sizes.tp_y : 1;
  if (options_.post_process) output_layer_ = std::make_unique<OutputLayerLoss>(registry, config, tp_size, tp_rank);
}

ForwardContext GPTModel::decoder_context(const ForwardContext& ctx) const {
  ForwardContext c = ctx;
  c.tp_2d = tp_2d_;
  return c;
}

Tensor GPTModel::run_decoder(const ForwardContext& ctx, const MicroBatch& mb, Tensor input, Saved& saved,
                             const StaticInferenceContext* inference) const {
  MS_CHECK(ctx.sequence_parallel == options_.sequence_parallel,
           "forward context and model disagree on sequence parallelism");
  Tensor hidden;
  if (options_.pre_process) {
    ModuleScope scope(ctx, embedding_params_, ModuleScope::Pass::kForward);
    embedding_->forward(scope.ctx(), mb, saved.embedding);
    hidden = std::move(saved.embedding.output);
    if (tp_2d_) {  // whole rows -> this rank's [N/X, h/Y] block
      const int64_t N = mb.B * mb.T, h = config_.hidden_size;
      Tensor block(*ctx.alloc, Shape{N / ctx.ps->sizes.tp_x, h / ctx.ps->sizes.tp_y},
                   DType::kFloat32, MemoryCategory::kActivations);
      scatter_to_2d_layout(ctx, block.f32(), hidden.f32(), N, h);
      hidden = std::move(block);
    }
    round_if_half(ctx, hidden);
  } else {
    hidden = std::move(input);
  }
  return decoder_->forward(decoder_context(ctx), mb, std::move(hidden), saved.decoder, inference);
}

LossSums GPTModel::forward_into(const ForwardContext& ctx, const MicroBatch& mb, Tensor input, float loss_scale,
                                Saved& saved, Tensor* output) const {
  Tensor hidden = run_decoder(ctx, mb, std::move(input), saved);
  if (!options_.post_process) {
    *output = std::move(hidden);
    return {};
  }
  const int64_t n = ctx.local_rows(mb.B * mb.T);
  if (tp_2d_) {
    // The output layer takes whole rows (MindSpeed gathers over X, then Y, after the block); the
    // gradient it returns is whole on every tensor-parallel rank, of which the decoder takes its
    // block.
    const int64_t N = mb.B * mb.T, h = config_.hidden_size;
    Tensor whole(*ctx.alloc, Shape{N, h}, DType::kFloat32, MemoryCategory::kActivations);
    gather_from_2d_layout(ctx, whole.f32(), hidden.f32(), N, h);
    Tensor whole_grad;
    if (ctx.training)
      whole_grad = Tensor(*ctx.alloc, Shape{N, h}, DType::kFloat32, MemoryCategory::kWorkspace);
    const LossSums loss = output_layer_->forward(ctx, mb, whole.f32(), loss_scale,
                                                 ctx.training ? whole_grad.f32() : nullptr);
    if (ctx.training) {
      saved.decoder_output_grad =
          Tensor(*ctx.alloc, Shape{N / ctx.ps->sizes.tp_x, h / ctx.ps->sizes.tp_y}, DType::kFloat32,
                 MemoryCategory::kActivations);
      scatter_to_2d_layout(ctx, saved.decoder_output_grad.f32(), whole_grad.f32(), N, h);
    }
    return loss;
  }
  if (ctx.training) {
    saved.decoder_output_grad =
        Tensor(*ctx.alloc, Shape{n, config_.hidden_size}, DType::kFloat32, MemoryCategory::kActivations);
  }
  return output_layer_->forward(ctx, mb, hidden.f32(), loss_scale,
                                ctx.training ? saved.decoder_output_grad.f32() : nullptr);
}

Tensor GPTModel::backward_from(const ForwardContext& ctx, const MicroBatch& mb, Tensor output_grad,
                               Saved& saved) const {
  if (options_.post_process) {
    // The output layer's gradient was completed (or queued) in forward (fused loss).
    notify_grads_ready(ctx, output_layer_->params());
    output_grad = std::move(saved.decoder_output_grad);
  }
  Tensor dinput =
      decoder_->backward(decoder_context(ctx), mb, std::move(output_grad), saved.decoder);
  if (!options_.pre_process) return dinput;
  if (tp_2d_) {  // the embedding's gradient in whole rows
    const int64_t N = mb.B * mb.T, h = config_.hidden_size;
    Tensor whole(*ctx.alloc, Shape{N, h}, DType::kFloat32, MemoryCategory::kActivations);
    gather_from_2d_layout(ctx, whole.f32(), dinput.f32(), N, h);
    dinput = std::move(whole);
  }
  if (ctx.hooks != nullptr) ctx.hooks->prepare_grads(embedding_params_);
  if (ctx.wgrad_queue != nullptr) {
    // The embedding's whole backward is its weight gradient: queued, in backward order.
    auto job = [this, batch = std::make_shared<MicroBatch>(mb), dout = std::make_shared<Tensor>(std::move(dinput)),
                emb = std::make_shared<LanguageModelEmbedding::Saved>(std::move(saved.embedding))](
                   const ForwardContext& run) { embedding_->backward(run, *batch, *emb, dout->f32()); };
    ctx.wgrad_queue->push(std::move(job));
  } else {
    embedding_->backward(ctx, mb, saved.embedding, dinput.f32());
  }
  saved.embedding = {};
  notify_grads_ready(ctx, embedding_params_);
  return {};
}

ModelChunk::ForwardResult GPTModel::forward(const ForwardContext& ctx, const MicroBatch& mb, StageTensors inputs,
                                            float loss_scale) const {
  MS_CHECK(inputs.size() == (options_.pre_process ? 0u : 1u), "a GPT stage takes ", options_.pre_process ? 0 : 1,
           " input tensor(s), got ", inputs.size());
  auto saved = std::make_unique<Saved>();
  ForwardResult result;
  Tensor output;
  result.loss = forward_into(ctx, mb, inputs.empty() ? Tensor{} : std::move(inputs.front()), loss_scale, *saved,
                             &output);
  if (!options_.post_process) result.outputs.push_back(std::move(output));
  result.saved = std::move(saved);
  return result;
}

StageTensors GPTModel::backward(const ForwardContext& ctx, const MicroBatch& mb, StageTensors output_grads,
                                ModelChunk::Saved& saved) const {
  MS_CHECK(output_grads.size() == (options_.post_process ? 0u : 1u), "a GPT stage takes ",
           options_.post_process ? 0 : 1, " output gradient(s), got ", output_grads.size());
  Tensor dinput = backward_from(ctx, mb, output_grads.empty() ? Tensor{} : std::move(output_grads.front()),
                                static_cast<Saved&>(saved));
  StageTensors out;
  if (!options_.pre_process) out.push_back(std::move(dinput));
  return out;
}

void GPTModel::release_activations(const ForwardContext& ctx, ModelChunk::Saved& saved) const {
  decoder_->release_activations(decoder_context(ctx), static_cast<Saved&>(saved).decoder);
}

void GPTModel::recompute(const ForwardContext& ctx, const MicroBatch& mb, ModelChunk::Saved& saved) const {
  decoder_->recompute(decoder_context(ctx), mb, static_cast<Saved&>(saved).decoder);
}

LossSums GPTModel::forward(const ForwardContext& ctx, const MicroBatch& mb, float loss_scale, Saved& saved) const {
  MS_CHECK(options_.pre_process && options_.post_process, "a whole-model forward needs pre- and post-process");
  return forward_into(ctx, mb, Tensor{}, loss_scale, saved, nullptr);
}

void GPTModel::backward(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved) const {
  backward_from(ctx, mb, Tensor{}, saved);
}

void GPTModel::compute_logits(const ForwardContext& ctx, const MicroBatch& mb, float* logits) const {
  MS_CHECK(options_.pre_process && options_.post_process, "compute_logits needs the whole model");
  Saved saved;
  ForwardContext eval = ctx;
  eval.training = false;
  Tensor hidden = run_decoder(eval, mb, Tensor{}, saved);
  output_layer_->compute_logits(eval, mb, hidden.f32(), logits);
}

void GPTModel::forward_inference(const ForwardContext& ctx, const MicroBatch& mb, const StaticInferenceContext& inference,
                                 bool last_only, float* logits) const {
  MS_CHECK(options_.pre_process && options_.post_process, "generation needs the whole model on one stage");
  Saved saved;
  ForwardContext eval = ctx;
  eval.training = false;
  Tensor hidden = run_decoder(eval, mb, Tensor{}, saved, &inference);
  if (!last_only) {
    output_layer_->compute_logits(eval, mb, hidden.f32(), logits);
    return;
  }
  // Rows are [s, b, h]: the last position's B rows are the last block.
  MicroBatch last;
  last.B = mb.B;
  last.T = 1;
  output_layer_->compute_logits(eval, last, hidden.f32() + (mb.T - 1) * mb.B * config_.hidden_size, logits);
}

}  // namespace mindspeed
