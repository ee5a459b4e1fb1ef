// SelfAttention (attention.h).
#include "transformer/attention.h"

#include "module/module_scope.h"
#include "transformer/alibi.h"

#include <algorithm>
#include <cmath>

namespace mindspeed {
namespace {
// A RoPE table where the context's kernels read it, or null without rotary embedding.
const float* rope_table(const ForwardContext& ctx, const ConstantTable* table) {
  return table != nullptr ? table->on(*ctx.backend, *ctx.alloc) : nullptr;
}

// The query groups (each with its heads) this rank holds: an even share, or with
// --unaligned-linear MindSpeed's uneven one (ranks below groups % tp hold one more).
UnitShare group_share(const ModelConfig& c, int tp_size, int tp_rank) {
  const int64_t groups = c.query_groups();
  if (c.unaligned_linear) return unaligned_share(groups, tp_size, tp_rank);
  return {tp_rank * (groups / tp_size), groups / tp_size};
}
// ParameterSpec::split_units of the QKV rows and the projection columns: one unit per group.
int64_t group_units(const ModelConfig& c) { return c.unaligned_linear ? c.query_groups() : 0; }
}  // namespace

SelfAttention::SelfAttention(ParameterRegistry& registry, const std::string& prefix,
                             const ModelConfig& config, int64_t layer_index, int tp_size,
                             int tp_rank, bool sequence_parallel, const ConstantTable* rope_cos,
                             const ConstantTable* rope_sin, const TensorParallelGrid& grid)
    : grid_(grid),
      layer_index_(layer_index),
      // With a 2D grid the heads are split over X.
      heads_local_(
          group_share(config, grid.on() ? grid.x : tp_size, grid.on() ? grid.x_rank : tp_rank)
              .count *
          (config.num_attention_heads / config.query_groups())),
      groups_local_(
          group_share(config, grid.on() ? grid.x : tp_size, grid.on() ? grid.x_rank : tp_rank)
              .count),
      head_dim_(config.kv_channels),
      heads_total_(config.num_attention_heads),
      head_offset_(
          group_share(config, grid.on() ? grid.x : tp_size, grid.on() ? grid.x_rank : tp_rank)
              .first *
          (config.num_attention_heads / config.query_groups())),
      attention_dropout_(config.attention_dropout),
      attention_window_(config.attention_window),
      rope_cos_(rope_cos),
      rope_sin_(rope_sin) {
  const LinearOptions qkv{.bias = config.qkv_bias(),
                          .init_std = config.init_method_std,
                          .split_units = group_units(config),
                          .tp_rank = tp_rank};
  const LinearOptions proj{
      .bias = config.add_bias_linear,
      .sequence_parallel = sequence_parallel,
      .init_std = config.init_method_std / std::sqrt(2.0f * static_cast<float>(config.num_layers)),
      .split_units = group_units(config),
      .tp_rank = tp_rank};
  const int64_t context_width = config.num_attention_heads * config.kv_channels;
  if (grid.on()) {
    linear_qkv_ = std::make_unique<Linear2D>(registry, prefix + ".linear_qkv", config.hidden_size,
                                             config.qkv_size(), qkv, Linear2dRole::kFirst, grid);
    linear_proj_ = std::make_unique<Linear2D>(registry, prefix + ".linear_proj", context_width,
                                              config.hidden_size, proj, Linear2dRole::kSecond, grid,
                                              Linear2dOverlapUse{.backward_ag = true});
  } else {
    linear_qkv_ = std::make_unique<ColumnParallelLinear>(
        registry, prefix + ".linear_qkv", config.hidden_size, config.qkv_size(), qkv, tp_size);
    linear_proj_ = std::make_unique<RowParallelLinear>(
        registry, prefix + ".linear_proj", context_width, config.hidden_size, proj, tp_size);
  }
  if (config.position_embedding_type == PositionEmbeddingType::kAlibi) {
    const std::vector<float> all =
        alibi_slopes(config.num_attention_heads);  // this rank's heads' slopes
    alibi_slopes_ = ConstantTable(
        std::vector<float>(all.begin() + head_offset_, all.begin() + head_offset_ + heads_local_));
    const StatusOr<AlibiKernelForm> form =
        alibi_kernel_form({.fusion_attn_type = config.alibi_fusion_attn_type,
                           .diagonal_opposite = config.alibi_diagonal_opposite,
                           .square_alibi_mask = config.square_alibi_mask,
                           .fill_neg_inf = config.fill_neg_inf});
    MS_CHECK_OK(form.status());  // the flags were validated
    // The form's `causal` describes MindSpeed's bias tensor alone; the model applies the
    // causal attention mask as well (Megatron's core attention always does).
    alibi_form_ = form->bias;
  }
}

AttentionDims SelfAttention::dims(const MicroBatch& mb) const {
  AttentionDims d;
  d.B = mb.B;
  d.T = mb.T;
  d.NQ = heads_local_;
  d.NKV = groups_local_;
  d.D = head_dim_;
  d.scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
  d.head_offset = head_offset_;
  d.num_heads_total = heads_total_;
  return d;
}

AttentionMask SelfAttention::mask(const ForwardContext& ctx, const MicroBatch& mb) const {
  AttentionMask m;
  m.doc_start = mb.kernel_doc_start();
  if (attention_window_ > 0) m.pre_tokens = attention_window_;
  if (!alibi_slopes_.empty()) {
    m.alibi_slopes = alibi_slopes_.on(*ctx.backend, *ctx.alloc);
    m.alibi = alibi_form_;
  }
  return m;
}

DropoutSpec SelfAttention::dropout(const ForwardContext& ctx, const MicroBatch& mb) const {
  DropoutSpec spec;
  if (!ctx.training) return spec;
  spec.p = attention_dropout_;
  spec.rng = ctx.dropout_stream(layer_index_, DropoutSite::kAttentionProbs);
  spec.first_sample = mb.first_sample;
  return spec;
}

void SelfAttention::attend_with_cache(const ForwardContext& ctx, const AttentionDims& d,
                                      const StaticInferenceContext& inference, Saved& saved) const {
  MS_CHECK(!ctx.training && !ctx.sequence_parallel, "the key/value cache is for inference without sequence parallelism");
  MS_CHECK(attention_window_ == 0 && alibi_slopes_.empty(),
           "generation with sliding-window or ALiBi attention is not implemented yet");
  MS_CHECK(inference.kv_heads() == d.NKV && inference.head_dim() == d.D && inference.batch_size() == d.B,
           "key/value cache built for another model or batch");
  const int64_t S = inference.max_sequence_length(), past = inference.sequence_len_offset();
  MS_CHECK(past + d.T <= S, "key/value cache full");
  float* k_cache = inference.key_cache(layer_index_);
  float* v_cache = inference.value_cache(layer_index_);
  // Append the new keys and values: rows [past, past + T) of each (sample, group).
  ctx.k().copy_2d(ctx.kc(), k_cache + past * d.D, saved.k.f32(), d.B * d.NKV, d.T * d.D, S * d.D,
                  d.T * d.D);
  ctx.k().copy_2d(ctx.kc(), v_cache + past * d.D, saved.v.f32(), d.B * d.NKV, d.T * d.D, S * d.D,
                  d.T * d.D);
  const int64_t Tk = past + d.T;
  Tensor ws(*ctx.alloc, Shape{std::max<int64_t>(1, ctx.k().kv_cache_attention_workspace_floats(ctx.kc(), d.T, Tk))},
            DType::kFloat32, MemoryCategory::kWorkspace);
  ctx.k().kv_cache_attention_forward(ctx.kc(), saved.context.f32(), saved.q.f32(), k_cache, v_cache, d.B, d.NQ, d.NKV,
                                     d.T, Tk, S, d.D, d.scale, ws.f32());
}

const MicroBatch& SelfAttention::attention_batch(const ForwardContext& ctx, const MicroBatch& mb,
                                                 MicroBatch& block, ForwardContext& actx) const {
  actx = ctx;
  if (!grid_.on()) return mb;
  const ParallelState& view = ctx.ps->attention_2d();
  actx.ps = &view;
  actx.tp_2d = false;  // the attention's rows are its own block, not the decoder's layout
  actx.cp.algo = CpAlgo::kUlysses;
  actx.cp.ulysses_degree = view.sizes.context;
  // Block y of Y of mb's positions (after the first linear's reduce-scatter over Y).
  const int64_t T = mb.T / grid_.y, t0 = grid_.y_rank * T;
  block.B = mb.B;
  block.T = T;
  block.first_sample = mb.first_sample;
  block.seq_total = mb.sample_length();
  block.sample_loss_tokens = mb.sample_loss_tokens;
  auto rows_of = [&](const std::vector<int32_t>& v) {
    std::vector<int32_t> out;
    if (v.empty()) return out;
    for (int64_t b = 0; b < mb.B; ++b)
      out.insert(out.end(), v.begin() + b * mb.T + t0, v.begin() + b * mb.T + t0 + T);
    return out;
  };
  block.position_ids = rows_of(mb.position_ids);
  block.doc_start = rows_of(mb.doc_start);
  for (int64_t t = 0; t < T; ++t) {
    block.seq_index.push_back(mb.seq_index.empty() ? static_cast<int32_t>(t0 + t)
                                                   : mb.seq_index[t0 + t]);
  }
  // Without context parallelism mb's rows are whole samples: their document starts are the
  // sample's.
  block.sample_doc_start = !mb.sample_doc_start.empty() ? mb.sample_doc_start
                           : mb.seq_total == 0          ? mb.doc_start
                                                        : std::vector<int32_t>{};
  if (mb.device) upload_micro_batch(block, *ctx.backend, *ctx.alloc);
  return block;
}

void SelfAttention::forward(const ForwardContext& ctx, const MicroBatch& mb_in, const float* x,
                            float* out, Saved& saved,
                            const StaticInferenceContext* inference) const {
  Allocator& a = *ctx.alloc;
  MicroBatch block;
  ForwardContext actx;
  const MicroBatch& mb = attention_batch(ctx, mb_in, block, actx);
  const AttentionDims d = dims(mb);
  const int64_t N = mb_in.T * mb_in.B;  // the linears' rows; the attention's are d.T * d.B
  const int64_t Na = d.T * d.B;
  const AttentionMask mask = this->mask(actx, mb);
  {
    Tensor qkv(a, Shape{Na, linear_qkv_->out_cols()}, DType::kFloat32, MemoryCategory::kWorkspace);
    linear_qkv_->forward(ctx, x, qkv.f32(), N);
    saved.q = Tensor(a, Shape{d.B, d.NQ, d.T, d.D}, DType::kFloat32, MemoryCategory::kActivations);
    saved.k = Tensor(a, Shape{d.B, d.NKV, d.T, d.D}, DType::kFloat32, MemoryCategory::kActivations);
    saved.v = Tensor(a, Shape{d.B, d.NKV, d.T, d.D}, DType::kFloat32, MemoryCategory::kActivations);
    ctx.k().qkv_split_rope_forward(ctx.kc(), saved.q.f32(), saved.k.f32(), saved.v.f32(), qkv.f32(),
                                   mb.kernel_position_ids(), rope_table(ctx, rope_cos_), rope_table(ctx, rope_sin_), d.T, d.B, d.NQ,
                                   d.NKV, d.D);
    for (Tensor* t : {&saved.q, &saved.k, &saved.v}) round_if_half(ctx, *t);
  }
  saved.context = Tensor(a, Shape{Na, d.NQ * d.D}, DType::kFloat32, MemoryCategory::kActivations);
  const DropoutSpec drop = dropout(actx, mb);
  if (inference != nullptr) {
    MS_CHECK(!grid_.on(), "generation with 2D tensor parallelism is not implemented");
    attend_with_cache(ctx, d, *inference, saved);
  } else if (context_parallel(actx)) {
    ContextParallelAttention::forward(actx, mb, d, mask, drop, std::move(saved.q),
                                      std::move(saved.k), std::move(saved.v), saved.context.f32(),
                                      saved.cp);
  } else {
    core_attention_forward(actx, d, mask, drop, saved);
  }
  round_if_half(ctx, saved.context);
  linear_proj_->forward(ctx, saved.context.f32(), out, N);
  if (recompute_core_attention_ && ctx.training && inference == nullptr &&
      !context_parallel(actx)) {
    // Selective recompute: keep q, k, v; backward rebuilds the output and its statistics.
    saved.context.reset();
    saved.lse.reset();
    saved.probs.reset();
  }
}

void SelfAttention::core_attention_forward(const ForwardContext& ctx, const AttentionDims& d,
                                           const AttentionMask& mask, const DropoutSpec& drop, Saved& saved) const {
  Allocator& a = *ctx.alloc;
  if (use_flash(ctx)) {
    saved.lse = Tensor(a, Shape{d.B, d.NQ, d.T}, DType::kFloat32, MemoryCategory::kActivations);
    Tensor ws(a, Shape{ctx.k().attention_workspace_floats(ctx.kc(), d, AttentionKernel::kFlash, false)},
              DType::kFloat32, MemoryCategory::kWorkspace);
    ctx.k().flash_attention_forward(ctx.kc(), saved.context.f32(), saved.lse.f32(), saved.q.f32(),
                                    saved.k.f32(), saved.v.f32(), mask, d, drop, ws.f32());
  } else {
    saved.probs = Tensor(a, Shape{d.B, d.NQ, d.T, d.T}, DType::kFloat32, MemoryCategory::kActivations);
    Tensor ws(a, Shape{ctx.k().attention_workspace_floats(ctx.kc(), d, AttentionKernel::kCore, false)},
              DType::kFloat32, MemoryCategory::kWorkspace);
    ctx.k().core_attention_forward(ctx.kc(), saved.context.f32(), saved.probs.f32(), saved.q.f32(),
                                   saved.k.f32(), saved.v.f32(), mask, d, drop, ws.f32());
  }
}

void SelfAttention::backward(const ForwardContext& ctx, const MicroBatch& mb_in, Saved& saved,
                             const float* x, const float* dout, float* dx) const {
  Allocator& a = *ctx.alloc;
  MicroBatch block;
  ForwardContext actx;
  const MicroBatch& mb = attention_batch(ctx, mb_in, block, actx);
  const AttentionDims d = dims(mb);
  const int64_t N = mb_in.T * mb_in.B, Na = d.T * d.B;
  const AttentionMask mask = this->mask(actx, mb);
  if (saved.context.empty()) {  // selective core_attn recompute (same kernels, same dropout masks)
    saved.context = Tensor(a, Shape{Na, d.NQ * d.D}, DType::kFloat32, MemoryCategory::kActivations);
    core_attention_forward(actx, d, mask, dropout(actx, mb), saved);
    round_if_half(ctx, saved.context);
  }
  Tensor dqkv(a, Shape{Na, linear_qkv_->out_cols()}, DType::kFloat32, MemoryCategory::kWorkspace);
  {
    Tensor dcontext(a, Shape{Na, d.NQ * d.D}, DType::kFloat32, MemoryCategory::kWorkspace);
    linear_proj_->backward(ctx, saved.context.f32(), dout, dcontext.f32(), N);
    Tensor dq(a, Shape{d.B, d.NQ, d.T, d.D}, DType::kFloat32, MemoryCategory::kWorkspace);
    Tensor dk(a, Shape{d.B, d.NKV, d.T, d.D}, DType::kFloat32, MemoryCategory::kWorkspace);
    Tensor dv(a, Shape{d.B, d.NKV, d.T, d.D}, DType::kFloat32, MemoryCategory::kWorkspace);
    const DropoutSpec drop = dropout(actx, mb);
    if (context_parallel(actx)) {
      ContextParallelAttention::backward(actx, mb, d, mask, drop, saved.cp, saved.context.f32(),
                                         dcontext.f32(), dq.f32(), dk.f32(), dv.f32());
    } else if (use_flash(ctx)) {
      Tensor ws(a, Shape{ctx.k().attention_workspace_floats(ctx.kc(), d, AttentionKernel::kFlash, true)},
                DType::kFloat32, MemoryCategory::kWorkspace);
      ctx.k().flash_attention_backward(ctx.kc(), dq.f32(), dk.f32(), dv.f32(), dcontext.f32(),
                                       saved.context.f32(), saved.lse.f32(), saved.q.f32(),
                                       saved.k.f32(), saved.v.f32(), mask, d, drop, ws.f32());
    } else {
      Tensor ws(a, Shape{ctx.k().attention_workspace_floats(ctx.kc(), d, AttentionKernel::kCore, true)},
                DType::kFloat32, MemoryCategory::kWorkspace);
      ctx.k().core_attention_backward(ctx.kc(), dq.f32(), dk.f32(), dv.f32(), dcontext.f32(),
                                      saved.probs.f32(), saved.q.f32(), saved.k.f32(),
                                      saved.v.f32(), d, drop, ws.f32());
    }
    ctx.k().qkv_split_rope_backward(ctx.kc(), dqkv.f32(), dq.f32(), dk.f32(), dv.f32(),
                                    mb.kernel_position_ids(), rope_table(ctx, rope_cos_), rope_table(ctx, rope_sin_), d.T, d.B, d.NQ,
                                    d.NKV, d.D);
  }
  linear_qkv_->backward(ctx, x, dqkv.f32(), dx, N);
}

}  // namespace mindspeed
