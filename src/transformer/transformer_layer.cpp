// TransformerLayer (transformer_layer.h).
#include "transformer/transformer_layer.h"

#include "module/module_scope.h"

namespace mindspeed {
namespace {
std::string layer_prefix(int64_t index) { return "decoder.layers." + std::to_string(index); }
}  // namespace

TransformerLayer::TransformerLayer(ParameterRegistry& registry, const ModelConfig& config,
                                   const TransformerLayerSpec& spec, int64_t layer_index,
                                   int tp_size, int tp_rank, bool sequence_parallel,
                                   const ConstantTable* rope_cos, const ConstantTable* rope_sin,
                                   const ExpertPlacement& experts, const TensorParallelGrid& grid)
    : layer_index_(layer_index),
      hidden_(grid.on() ? config.hidden_size / grid.y : config.hidden_size),
      hidden_dropout_(config.hidden_dropout),
      grid_(grid) {
  if (spec.noop) return;
  const std::string prefix = layer_prefix(layer_index);
  input_layernorm_ =
      std::make_unique<Norm>(registry, prefix + ".input_layernorm", spec.input_layernorm, config,
                             sequence_parallel, tp_size, grid);
  switch (spec.self_attention) {
    case AttentionKind::kSelfAttention:
      self_attention_ = std::make_unique<SelfAttention>(
          registry, prefix + ".self_attention", config, layer_index, tp_size, tp_rank,
          sequence_parallel, rope_cos, rope_sin, grid);
      break;
  }
  pre_mlp_layernorm_ =
      std::make_unique<Norm>(registry, prefix + ".pre_mlp_layernorm", spec.pre_mlp_layernorm,
                             config, sequence_parallel, tp_size, grid);
  switch (spec.mlp) {
    case MlpKind::kDense:
      mlp_ = std::make_unique<MLP>(registry, prefix + ".mlp", config, tp_size, sequence_parallel, 0,
                                   tp_rank, grid);
      break;
    case MlpKind::kMoE:
      MS_CHECK(!grid.on(), "MoE layers with 2D tensor parallelism (validation refuses them)");
      moe_ = std::make_unique<MoELayer>(registry, prefix + ".mlp", config, layer_index, experts, tp_size,
                                        sequence_parallel);
      break;
  }
}

void TransformerLayer::set_recompute(const LayerRecompute& recompute,
                                     const RecomputeConfig::SwapModules& swap_modules) {
  recompute_ = recompute;
  swap_modules_ = swap_modules;
  if (is_noop()) return;
  self_attention_->set_recompute_core_attention(recompute.core_attention);
  if (mlp_) {
    mlp_->set_recompute(recompute.mlp          ? MLP::Recompute::kFc1AndActivation
                        : recompute.activation ? MLP::Recompute::kActivation
                                               : MLP::Recompute::kNone);
  }
  if (moe_) moe_->set_recompute_activation(recompute.moe_activation);
}

DropoutSpec TransformerLayer::residual_dropout(const ForwardContext& ctx, const MicroBatch& mb,
                                               DropoutSite site) const {
  DropoutSpec spec;
  if (!ctx.training) return spec;
  spec.p = hidden_dropout_;
  spec.rng = ctx.dropout_stream(layer_index_, site);
  spec.sbh_batch = mb.B;
  spec.first_sample = mb.first_sample;
  spec.seq_total = mb.sample_length();
  spec.t_offset = ctx.sequence_offset(mb.T);
  spec.seq_index = mb.kernel_seq_index();
  if (grid_.on()) {  // this rank's block of the hidden columns
    spec.col_offset = grid_.y_rank * hidden_;
    spec.row_width = hidden_ * grid_.y;
  }
  return spec;
}

std::array<Tensor*, 14> TransformerLayer::Saved::activations() {
  return {&input, &input_layernorm.out, &self_attention.q, &self_attention.k, &self_attention.v,
          &self_attention.context, &mid, &pre_mlp_layernorm.out, &mlp.fc1_out, &mlp.act_out,
          &self_attention.cp.q, &self_attention.cp.k, &self_attention.cp.v, &self_attention.cp.out};
}

std::vector<Tensor*> TransformerLayer::Saved::swappable(const RecomputeConfig::SwapModules& modules) {
  std::vector<Tensor*> out;
  auto norm = [&](Norm::Saved& n) {
    for (Tensor* t : {&n.out, &n.mean, &n.rstd}) out.push_back(t);
  };
  if (modules.input_norm) norm(input_layernorm);
  if (modules.self_attention) {
    SelfAttention::Saved& a = self_attention;
    for (Tensor* t : {&a.q, &a.k, &a.v, &a.lse, &a.context, &a.probs, &a.cp.q, &a.cp.k, &a.cp.v, &a.cp.out, &a.cp.lse}) {
      out.push_back(t);
    }
  }
  if (modules.post_attention_norm) norm(pre_mlp_layernorm);
  return out;
}

void TransformerLayer::swap_out(const ForwardContext& ctx, Saved& saved) const {
  if (!recompute_.swap || ctx.swap_tier == nullptr || is_noop()) return;
  for (Tensor* t : saved.swappable(swap_modules_)) saved.swapped.push_back(ctx.swap_tier->swap_out(std::move(*t)));
}

void TransformerLayer::prefetch(const ForwardContext& ctx, Saved& saved) const {
  for (SwappedTensor& s : saved.swapped) {
    if (!s.empty()) ctx.swap_tier->prefetch(s);
  }
}

void TransformerLayer::swap_in(const ForwardContext& ctx, Saved& saved) const {
  if (saved.swapped.empty()) return;
  const std::vector<Tensor*> targets = saved.swappable(swap_modules_);
  MS_CHECK(targets.size() == saved.swapped.size(), "swapped tensors do not match --swap-modules");
  for (size_t i = 0; i < targets.size(); ++i) *targets[i] = ctx.swap_tier->swap_in(std::move(saved.swapped[i]));
  saved.swapped.clear();
}

void TransformerLayer::Saved::compact(const ForwardContext& ctx) {
  for (Tensor* t : activations()) compact_to_half(ctx, *t);
}

void TransformerLayer::Saved::expand(const ForwardContext& ctx) {
  for (Tensor* t : activations()) expand_to_fp32(ctx, *t);
}

Tensor TransformerLayer::forward(const ForwardContext& ctx, const MicroBatch& mb, Tensor input_tensor,
                                 Saved& saved, const StaticInferenceContext* inference) const {
  if (is_noop()) return input_tensor;
  Allocator& a = *ctx.alloc;
  const int64_t N = mb.T * mb.B, n = ctx.local_rows(N);
  // bf16: what a bf16 kernel would have written (the values saved for backward are these).
  auto round = [&](Tensor& t) { round_if_half(ctx, t); };
  saved.input = std::move(input_tensor);
  const float* input = saved.input.f32();
  input_layernorm_->forward(ctx, input, n, saved.input_layernorm);
  round(saved.input_layernorm.out);
  Tensor branch(a, Shape{n, hidden_}, DType::kFloat32, MemoryCategory::kWorkspace);
  self_attention_->forward(ctx, mb, saved.input_layernorm.out.f32(), branch.f32(),
                          saved.self_attention, inference);
  const bool drop = ctx.training && inference == nullptr;  // there will be a backward
  if (drop && recompute_.norms) saved.input_layernorm = {};
  saved.mid = Tensor(a, Shape{n, hidden_}, DType::kFloat32, MemoryCategory::kActivations);
  Parameter* proj_bias = self_attention_->proj_bias();
  ctx.k().bias_dropout_add_forward(ctx.kc(), saved.mid.f32(), branch.f32(), proj_bias ? ctx.w(*proj_bias) : nullptr,
                                   input, n, hidden_,
                                   residual_dropout(ctx, mb, DropoutSite::kAttentionOutput));
  round(saved.mid);
  pre_mlp_layernorm_->forward(ctx, saved.mid.f32(), n, saved.pre_mlp_layernorm);
  round(saved.pre_mlp_layernorm.out);
  if (moe_) {
    moe_->forward(ctx, mb, saved.pre_mlp_layernorm.out.f32(), N, branch.f32(), saved.moe);
  } else {
    mlp_->forward(ctx, saved.pre_mlp_layernorm.out.f32(), N, branch.f32(), saved.mlp);
  }
  if (drop && recompute_.norms) saved.pre_mlp_layernorm = {};
  if (drop && recompute_.moe) saved.moe = {};
  Tensor output(a, Shape{n, hidden_}, DType::kFloat32, MemoryCategory::kActivations);
  Parameter* fc2_bias = moe_ ? nullptr : mlp_->fc2_bias();
  ctx.k().bias_dropout_add_forward(ctx.kc(), output.f32(), branch.f32(), fc2_bias ? ctx.w(*fc2_bias) : nullptr,
                                   saved.mid.f32(), n, hidden_,
                                   residual_dropout(ctx, mb, DropoutSite::kMlpOutput));
  round(output);
  if (ctx.half_precision()) saved.compact(ctx);
  return output;
}

void TransformerLayer::backward(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved,
                                float* dresid) const {
  if (is_noop()) return;  // the identity: dresid passes through
  Allocator& a = *ctx.alloc;
  saved.expand(ctx);
  const int64_t N = mb.T * mb.B, n = ctx.local_rows(N);
  Tensor dbranch(a, Shape{n, hidden_}, DType::kFloat32, MemoryCategory::kWorkspace);
  Tensor dnorm(a, Shape{n, hidden_}, DType::kFloat32, MemoryCategory::kWorkspace);
  // MLP half: dresid holds d(output) = d(mid) through the residual.
  Parameter* fc2_bias = moe_ ? nullptr : mlp_->fc2_bias();
  ctx.k().bias_dropout_add_backward(ctx.kc(), dbranch.f32(), fc2_bias ? fc2_bias->g() : nullptr, dresid, n,
                                    hidden_, residual_dropout(ctx, mb, DropoutSite::kMlpOutput));
  if (saved.pre_mlp_layernorm.out.empty()) {  // norm recompute
    pre_mlp_layernorm_->forward(ctx, saved.mid.f32(), n, saved.pre_mlp_layernorm);
    round_if_half(ctx, saved.pre_mlp_layernorm.out);
  }
  if (moe_) {
    if (recompute_.moe) {  // the whole MoE layer again (its dispatch too), recording nothing twice
      Tensor unused(a, Shape{n, hidden_}, DType::kFloat32, MemoryCategory::kWorkspace);
      moe_->forward(ctx.recompute_context(), mb, saved.pre_mlp_layernorm.out.f32(), N, unused.f32(), saved.moe);
    }
    moe_->backward(ctx, mb, saved.moe, saved.pre_mlp_layernorm.out.f32(), dbranch.f32(), dnorm.f32(), N);
  } else {
    mlp_->backward(ctx, saved.mlp, saved.pre_mlp_layernorm.out.f32(), dbranch.f32(), dnorm.f32(), N);
  }
  pre_mlp_layernorm_->backward(ctx, saved.pre_mlp_layernorm, saved.mid.f32(), dnorm.f32(), dresid, n);
  // Attention half: dresid now holds d(mid).
  Parameter* proj_bias = self_attention_->proj_bias();
  ctx.k().bias_dropout_add_backward(ctx.kc(), dbranch.f32(), proj_bias ? proj_bias->g() : nullptr, dresid,
                                    n, hidden_,
                                    residual_dropout(ctx, mb, DropoutSite::kAttentionOutput));
  if (saved.input_layernorm.out.empty()) {  // norm recompute
    input_layernorm_->forward(ctx, saved.input.f32(), n, saved.input_layernorm);
    round_if_half(ctx, saved.input_layernorm.out);
  }
  self_attention_->backward(ctx, mb, saved.self_attention, saved.input_layernorm.out.f32(),
                           dbranch.f32(), dnorm.f32());
  input_layernorm_->backward(ctx, saved.input_layernorm, saved.input.f32(), dnorm.f32(), dresid, n);
}

}  // namespace mindspeed
