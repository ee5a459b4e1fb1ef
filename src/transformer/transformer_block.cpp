// TransformerBlock (transformer_block.h).
#include "transformer/transformer_block.h"

#include "core/profiler.h"
#include "module/module_scope.h"

namespace mindspeed {

std::vector<Parameter*> params_since(const ParameterRegistry& registry, size_t first) {
  std::vector<Parameter*> out;
  for (size_t i = first; i < registry.params().size(); ++i) out.push_back(registry.params()[i].get());
  return out;
}

TransformerBlock::TransformerBlock(ParameterRegistry& registry, const ModelConfig& config,
                                   const std::vector<TransformerLayerSpec>& specs, int64_t first_layer,
                                   bool post_process, int tp_size, int tp_rank, bool sequence_parallel,
                                   const float* rope_cos, const float* rope_sin, const ExpertPlacement& experts)
    : hidden_(config.hidden_size), post_process_(post_process) {
  for (size_t i = 0; i < specs.size(); ++i) {
    const size_t first = registry.params().size();
    layers_.push_back(std::make_unique<TransformerLayer>(registry, config, specs[i],
                                                         first_layer + static_cast<int64_t>(i), tp_size, tp_rank,
                                                         sequence_parallel, rope_cos, rope_sin, experts));
    layer_params_.push_back(params_since(registry, first));
    layer_names_.push_back("decoder.layers." + std::to_string(first_layer + static_cast<int64_t>(i)));
  }
  if (post_process) {
    const size_t first = registry.params().size();
    final_layernorm_ = std::make_unique<Norm>(registry, "decoder.final_layernorm", config.normalization, config,
                                              sequence_parallel, tp_size);
    final_norm_params_ = params_since(registry, first);
  }
}

Tensor TransformerBlock::forward(const ForwardContext& ctx, const MicroBatch& mb, Tensor hidden, Saved& saved,
                                 const StaticInferenceContext* inference) const {
  saved.layers.resize(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    profiler::Scope profile(profiler::category::kModule, profiler::Level::kLevel0,
                            [&] { return layer_names_[l] + " forward"; });
    ModuleScope scope(ctx, layer_params_[l], ModuleScope::Pass::kForward);
    hidden = layers_[l]->forward(scope.ctx(), mb, std::move(hidden), saved.layers[l], inference);
    if (inference != nullptr) saved.layers[l] = {};  // no backward in generation
  }
  if (!post_process_) return hidden;
  const int64_t n = ctx.local_rows(mb.B * mb.T);
  ModuleScope scope(ctx, final_norm_params_, ModuleScope::Pass::kForward);
  saved.final_input = std::move(hidden);
  final_layernorm_->forward(scope.ctx(), saved.final_input.f32(), n, saved.final_layernorm);
  round_if_bf16(ctx, saved.final_layernorm.out);
  if (ctx.bf16) compact_to_bf16(ctx, saved.final_input);
  return std::move(saved.final_layernorm.out);  // the norm's backward needs only its statistics
}

Tensor TransformerBlock::backward(const ForwardContext& ctx, const MicroBatch& mb, Tensor dout, Saved& saved) const {
  const int64_t n = ctx.local_rows(mb.B * mb.T);
  Tensor dresid;
  if (post_process_) {
    dresid = Tensor::zeros(*ctx.alloc, Shape{n, hidden_}, DType::kFloat32, MemoryCategory::kWorkspace);
    {
      ModuleScope scope(ctx, final_norm_params_, ModuleScope::Pass::kBackward);
      expand_to_fp32(ctx, saved.final_input);
      final_layernorm_->backward(scope.ctx(), saved.final_layernorm, saved.final_input.f32(), dout.f32(),
                                 dresid.f32(), n);
    }
    dout.reset();
    saved.final_input.reset();
    saved.final_layernorm = {};
    notify_grads_ready(ctx, final_norm_params_);
  } else {
    dresid = std::move(dout);
  }
  for (size_t l = layers_.size(); l-- > 0;) {
    profiler::Scope profile(profiler::category::kModule, profiler::Level::kLevel0,
                            [&] { return layer_names_[l] + " backward"; });
    {
      ModuleScope scope(ctx, layer_params_[l], ModuleScope::Pass::kBackward);
      layers_[l]->backward(scope.ctx(), mb, saved.layers[l], dresid.f32());
    }
    saved.layers[l] = {};  // free this layer's activations as soon as they are used
    notify_grads_ready(ctx, layer_params_[l]);
  }
  return dresid;
}

}  // namespace mindspeed
