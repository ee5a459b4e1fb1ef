// TransformerBlock (transformer_block.h).
#include "transformer/transformer_block.h"

#include <algorithm>
#include <cstring>

#include "core/profiler.h"
#include "module/module_scope.h"

namespace mindspeed {

std::vector<Parameter*> params_since(const ParameterRegistry& registry, size_t first) {
  std::vector<Parameter*> out;
  for (size_t i = first; i < registry.params().size(); ++i) out.push_back(registry.params()[i].get());
  return out;
}

TransformerBlock::TransformerBlock(ParameterRegistry& registry, const ModelConfig& config,
                                   const std::vector<TransformerLayerSpec>& specs,
                                   int64_t first_layer, bool post_process, int tp_size, int tp_rank,
                                   bool sequence_parallel, const ConstantTable* rope_cos,
                                   const ConstantTable* rope_sin, const ExpertPlacement& experts,
                                   int virtual_rank, int virtual_size,
                                   const TensorParallelGrid& grid)
    : hidden_(grid.on() ? config.hidden_size / grid.y : config.hidden_size),
      distribute_saved_activations_(config.recompute.distribute_saved_activations && tp_size > 1),
      recompute_(plan_recompute(config.recompute, static_cast<int64_t>(specs.size()), virtual_rank,
                                virtual_size, post_process)),
      unit_of_layer_(specs.size(), -1),
      post_process_(post_process) {
  for (size_t u = 0; u < recompute_.full_units.size(); ++u) {
    for (int64_t l = recompute_.full_units[u].first; l < recompute_.full_units[u].second; ++l) {
      unit_of_layer_[static_cast<size_t>(l)] = static_cast<int64_t>(u);
    }
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const size_t first = registry.params().size();
    layers_.push_back(std::make_unique<TransformerLayer>(
        registry, config, specs[i], first_layer + static_cast<int64_t>(i), tp_size, tp_rank,
        sequence_parallel, rope_cos, rope_sin, experts, grid));
    layers_.back()->set_recompute(recompute_.layers[i], config.recompute.swap_modules);
    layer_params_.push_back(params_since(registry, first));
    layer_names_.push_back("decoder.layers." + std::to_string(first_layer + static_cast<int64_t>(i)));
  }
  if (post_process) {
    const size_t first = registry.params().size();
    final_layernorm_ =
        std::make_unique<Norm>(registry, "decoder.final_layernorm", config.normalization, config,
                               sequence_parallel, tp_size, grid);
    final_norm_params_ = params_since(registry, first);
  }
}

Tensor TransformerBlock::forward(const ForwardContext& ctx, const MicroBatch& mb, Tensor hidden, Saved& saved,
                                 const StaticInferenceContext* inference) const {
  saved.layers.resize(layers_.size());
  const bool full_recompute = ctx.training && inference == nullptr && !recompute_.full_units.empty();
  if (full_recompute) saved.unit_inputs.resize(recompute_.full_units.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    profiler::Scope profile(profiler::category::kModule, profiler::Level::kLevel0,
                            [&] { return layer_names_[l] + " forward"; });
    ModuleScope scope(ctx, layer_params_[l], ModuleScope::Pass::kForward);
    hidden = layers_[l]->forward(scope.ctx(), mb, std::move(hidden), saved.layers[l], inference);
    if (inference != nullptr) saved.layers[l] = {};  // no backward in generation
    if (ctx.training && inference == nullptr) layers_[l]->swap_out(ctx, saved.layers[l]);
    const int64_t unit = full_recompute ? unit_of_layer_[l] : -1;
    if (unit >= 0) {
      // Keep only the unit's input (the first layer's, in bf16 with --bf16 as the layer left it).
      if (static_cast<int64_t>(l) == recompute_.full_units[static_cast<size_t>(unit)].first) {
        Tensor input = std::move(saved.layers[l].input);
        if (layers_[l]->is_noop()) {  // a no-op layer keeps nothing: its input is its output
          input = Tensor(*ctx.alloc, hidden.shape(), hidden.dtype(), MemoryCategory::kActivations);
          std::memcpy(input.data(), hidden.data(), static_cast<size_t>(hidden.nbytes()));
        }
        saved.unit_inputs[static_cast<size_t>(unit)] = keep_unit_input(ctx, std::move(input));
      }
      saved.layers[l] = {};
    }
  }
  if (!post_process_) return hidden;
  const int64_t n = ctx.local_rows(mb.B * mb.T);
  ModuleScope scope(ctx, final_norm_params_, ModuleScope::Pass::kForward);
  saved.final_input = std::move(hidden);
  final_layernorm_->forward(scope.ctx(), saved.final_input.f32(), n, saved.final_layernorm);
  round_if_half(ctx, saved.final_layernorm.out);
  if (ctx.half_precision()) compact_to_half(ctx, saved.final_input);
  return std::move(saved.final_layernorm.out);  // the norm's backward needs only its statistics
}

Tensor TransformerBlock::backward(const ForwardContext& ctx, const MicroBatch& mb, Tensor dout, Saved& saved) const {
  const int64_t n = ctx.local_rows(mb.B * mb.T);
  Tensor dresid;
  if (post_process_) {
    dresid = device_zeros(*ctx.backend, *ctx.alloc, Shape{n, hidden_}, DType::kFloat32, MemoryCategory::kWorkspace);
    {
      ModuleScope scope(ctx, final_norm_params_, ModuleScope::Pass::kBackward);
      expand_to_fp32(ctx, saved.final_input);
      final_layernorm_->backward(scope.ctx(), saved.final_layernorm, saved.final_input.f32(), dout.f32(),
                                 dresid.f32(), n);
      round_if_fp16(ctx, dresid.f32(), n * hidden_);
    }
    dout.reset();
    saved.final_input.reset();
    saved.final_layernorm = {};
    notify_grads_ready(ctx, final_norm_params_);
  } else {
    dresid = std::move(dout);
  }
  for (size_t l = layers_.size(); l-- > 0;) {
    const int64_t unit = saved.unit_inputs.empty() ? -1 : unit_of_layer_[l];
    if (unit >= 0 && static_cast<int64_t>(l) + 1 == recompute_.full_units[static_cast<size_t>(unit)].second &&
        !saved.unit_inputs[static_cast<size_t>(unit)].empty()) {
      recompute_unit(ctx, mb, static_cast<size_t>(unit), saved);
    }
    profiler::Scope profile(profiler::category::kModule, profiler::Level::kLevel0,
                            [&] { return layer_names_[l] + " backward"; });
    // --swap-attention: this layer's activations back (prefetched by the layer above), the next
    // layer's read started while this one computes.
    layers_[l]->swap_in(ctx, saved.layers[l]);
    if (l > 0) layers_[l - 1]->prefetch(ctx, saved.layers[l - 1]);
    {
      ModuleScope scope(ctx, layer_params_[l], ModuleScope::Pass::kBackward);
      layers_[l]->backward(scope.ctx(), mb, saved.layers[l], dresid.f32());
      round_if_fp16(ctx, dresid.f32(), n * hidden_);  // the gradient between layers (fp16 in an fp16 model)
    }
    saved.layers[l] = {};  // free this layer's activations as soon as they are used
    notify_grads_ready(ctx, layer_params_[l]);
  }
  saved.unit_inputs.clear();
  return dresid;
}

Tensor TransformerBlock::keep_unit_input(const ForwardContext& ctx, Tensor input) const {
  if (!distribute_saved_activations_) return input;
  // Megatron's split_tensor_into_1d_equal_chunks: this rank keeps elements
  // [rank * m, (rank + 1) * m) of the flattened input, m = ceil(numel / tp).
  const int tp = ctx.ps->sizes.tensor;
  const int64_t numel = input.numel(), m = (numel + tp - 1) / tp;
  const int64_t lo = std::min(numel, ctx.ps->tp_rank * m), hi = std::min(numel, lo + m);
  const int64_t bytes = dtype_size(input.dtype());
  Tensor part = device_zeros(*ctx.backend, *ctx.alloc, Shape{m}, input.dtype(), MemoryCategory::kActivations);
  if (hi > lo) {
    std::memcpy(part.data(), static_cast<const char*>(input.data()) + lo * bytes, static_cast<size_t>((hi - lo) * bytes));
  }
  return part;
}

Tensor TransformerBlock::restore_unit_input(const ForwardContext& ctx, Tensor kept, int64_t n) const {
  if (!distribute_saved_activations_) {
    expand_to_fp32(ctx, kept);
    return kept;
  }
  // Megatron's gather_split_1d_tensor over the tensor-parallel group.
  const int tp = ctx.ps->sizes.tensor;
  const int64_t m = kept.numel(), bytes = dtype_size(kept.dtype());
  Tensor gathered(*ctx.alloc, Shape{m * tp}, kept.dtype(), MemoryCategory::kActivations);
  ctx.ps->tp().all_gather_bytes_async(gathered.data(), kept.data(), m * bytes)->wait();
  Tensor full(*ctx.alloc, Shape{n, hidden_}, kept.dtype(), MemoryCategory::kActivations);
  std::memcpy(full.data(), gathered.data(), static_cast<size_t>(n * hidden_ * bytes));
  expand_to_fp32(ctx, full);
  return full;
}

void TransformerBlock::release_activations(const ForwardContext& ctx, Saved& saved) const {
  MS_CHECK(saved.unit_inputs.empty(), "release_activations with full-recompute units (validate refuses it)");
  // No-op layers keep nothing and pass their input on: the first real layer's input is the block's.
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (layers_[l]->is_noop()) continue;
    saved.released_input = std::move(saved.layers[l].input);
    break;
  }
  if (saved.released_input.empty()) return;  // only no-op layers: nothing saved
  for (TransformerLayer::Saved& layer : saved.layers) layer = {};
}

void TransformerBlock::recompute(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved) const {
  if (!saved.released_input.empty()) {
    const ForwardContext recompute_ctx = ctx.recompute_context();
    Tensor hidden = std::move(saved.released_input);
    expand_to_fp32(ctx, hidden);
    for (size_t l = 0; l < layers_.size(); ++l) {
      profiler::Scope profile(profiler::category::kModule, profiler::Level::kLevel0,
                              [&] { return layer_names_[l] + " recompute"; });
      ModuleScope scope(recompute_ctx, layer_params_[l], ModuleScope::Pass::kBackward);
      hidden = layers_[l]->forward(scope.ctx(), mb, std::move(hidden), saved.layers[l]);
    }
    return;
  }
  for (size_t u = 0; u < saved.unit_inputs.size(); ++u) {
    if (!saved.unit_inputs[u].empty()) recompute_unit(ctx, mb, u, saved);
  }
}

void TransformerBlock::recompute_unit(const ForwardContext& ctx, const MicroBatch& mb, size_t unit,
                                      Saved& saved) const {
  const auto [begin, end] = recompute_.full_units[unit];
  const ForwardContext recompute_ctx = ctx.recompute_context();
  const int64_t n = ctx.local_rows(mb.B * mb.T);
  Tensor hidden = restore_unit_input(ctx, std::move(saved.unit_inputs[unit]), n);
  for (int64_t l = begin; l < end; ++l) {
    profiler::Scope profile(profiler::category::kModule, profiler::Level::kLevel0,
                            [&] { return layer_names_[static_cast<size_t>(l)] + " recompute"; });
    // Backward pass: the parameters are already there (no data-parallel pre-hook).
    ModuleScope scope(recompute_ctx, layer_params_[static_cast<size_t>(l)], ModuleScope::Pass::kBackward);
    hidden = layers_[static_cast<size_t>(l)]->forward(scope.ctx(), mb, std::move(hidden),
                                                      saved.layers[static_cast<size_t>(l)]);
  }
}

}  // namespace mindspeed
