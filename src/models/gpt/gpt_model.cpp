// GPTModel (gpt_model.h).
#include "models/gpt/gpt_model.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/precision.h"
#include "kernels/blas/gemm.h"
#include "tensor_parallel/cross_entropy.h"

namespace mindspeed {

GPTModel::GPTModel(const ModelConfig& config, const ParallelState& ps, bool sequence_parallel)
    : config_(config), tp_size_(ps.sizes.tensor), tp_rank_(ps.tp_rank), sequence_parallel_(sequence_parallel) {
  if (config.position_embedding_type == PositionEmbeddingType::kRope) {
    // Rotary tables in fp32 exactly as Megatron's RotaryEmbedding and Hugging Face compute
    // them: inv_freq = 1 / base^(2i/D), angle = position * inv_freq.
    const int64_t half = config.kv_channels / 2;
    rope_cos_.resize(config.max_position_embeddings * half);
    rope_sin_.resize(config.max_position_embeddings * half);
    for (int64_t i = 0; i < half; ++i) {
      const float exponent = static_cast<float>(2 * i) / static_cast<float>(config.kv_channels);
      const float inv_freq = 1.0f / std::pow(config.rotary_base, exponent);
      for (int64_t p = 0; p < config.max_position_embeddings; ++p) {
        const float angle = static_cast<float>(p) * inv_freq;
        rope_cos_[p * half + i] = std::cos(angle);
        rope_sin_[p * half + i] = std::sin(angle);
      }
    }
  }
  const float* cos = rope_cos_.empty() ? nullptr : rope_cos_.data();
  const float* sin = rope_sin_.empty() ? nullptr : rope_sin_.data();
  embedding_ = std::make_unique<LanguageModelEmbedding>(registry_, config, tp_size_, tp_rank_, sequence_parallel);
  embedding_params_ = params_since(0);
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const size_t first = registry_.params().size();
    layers_.push_back(
        std::make_unique<TransformerLayer>(registry_, config, l, tp_size_, tp_rank_, sequence_parallel, cos, sin));
    layer_params_.push_back(params_since(first));
  }
  size_t first = registry_.params().size();
  final_layernorm_ = std::make_unique<Norm>(registry_, "decoder.final_layernorm", config,
                                            sequence_parallel, tp_size_);
  final_norm_params_ = params_since(first);
  first = registry_.params().size();
  if (config.untie_embeddings_and_output_weights) {
    output_layer_ = registry_.add({.name = "output_layer.weight",
                                   .global_shape = Shape{config.padded_vocab_size, config.hidden_size},
                                   .split = TensorParallelSplit::kRows,
                                   .init = InitMethod::kNormal,
                                   .init_std = config.init_method_std},
                                  tp_size_);
  }
  output_params_ = params_since(first);
}

std::vector<Parameter*> GPTModel::params_since(size_t first) const {
  std::vector<Parameter*> out;
  for (size_t i = first; i < registry_.params().size(); ++i) out.push_back(registry_.params()[i].get());
  return out;
}

const Parameter* GPTModel::output_weight() const {
  return output_layer_ != nullptr ? output_layer_ : embedding_->word_embeddings();
}

int64_t GPTModel::loss_chunk_rows(int64_t N) const {
  // About 256 MiB of logits per chunk (at least 64 rows): large enough that the output
  // layer's weight-gradient GEMM (K = rows) runs near the GEMM peak, still well below the
  // whole [tokens, vocab] logits other implementations keep.
  const int64_t v = config_.padded_vocab_size / tp_size_;
  const int64_t rows = std::max<int64_t>(64, (int64_t{256} << 20) / (4 * v));
  return std::min(N, rows);
}

void GPTModel::run_decoder(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved) const {
  MS_CHECK(ctx.sequence_parallel == sequence_parallel_, "forward context and model disagree on sequence parallelism");
  const int64_t N = ctx.local_rows(mb.B * mb.T);
  if (ctx.hooks) ctx.hooks->before_forward(embedding_params_);
  Tensor hidden;
  {
    ComputeWeights w(*ctx.alloc, embedding_params_);
    embedding_->forward(ctx, mb, saved.embedding);
    hidden = std::move(saved.embedding.output);
    if (ctx.bf16) round_to_bf16_inplace(hidden.f32(), hidden.numel());
  }
  saved.layers.resize(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (ctx.hooks) ctx.hooks->before_forward(layer_params_[l]);
    ComputeWeights w(*ctx.alloc, layer_params_[l]);
    hidden = layers_[l]->forward(ctx, mb, std::move(hidden), saved.layers[l]);
  }
  if (ctx.hooks) {
    ctx.hooks->before_forward(final_norm_params_);
    ctx.hooks->before_forward(output_params_);
  }
  ComputeWeights w(*ctx.alloc, final_norm_params_);
  saved.final_input = std::move(hidden);
  final_layernorm_->forward(ctx, saved.final_input.f32(), N, saved.final_layernorm);
  if (ctx.bf16) {
    round_to_bf16_inplace(saved.final_layernorm.out.f32(), saved.final_layernorm.out.numel());
    compact_to_bf16(*ctx.alloc, saved.final_input, MemoryCategory::kActivations);
  }
}

const float* GPTModel::full_final_hidden(const ForwardContext& ctx, const Saved& saved, int64_t N,
                                        Tensor& storage) const {
  const float* x = saved.final_layernorm.out.f32();
  if (!ctx.sequence_parallel) return x;
  const int64_t H = config_.hidden_size;
  storage = Tensor(*ctx.alloc, Shape{N, H}, DType::kFloat32, MemoryCategory::kWorkspace);
  ctx.ps->tp().all_gather(storage.f32(), x, N / tp_size_ * H);
  return storage.f32();
}

GPTModel::LossSums GPTModel::forward(const ForwardContext& ctx, const MicroBatch& mb,
                                     float loss_scale, Saved& saved) const {
  Allocator& a = *ctx.alloc;
  const int64_t B = mb.B, T = mb.T, N = B * T, H = config_.hidden_size;
  run_decoder(ctx, mb, saved);

  // Labels, loss mask and per-token gradient scale in [s, b] row order.
  saved.labels = Tensor(a, Shape{N}, DType::kInt32, MemoryCategory::kActivations);
  std::vector<float> mask(N), grad_scale(N);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      saved.labels.i32()[t * B + b] = mb.labels[b * T + t];
      mask[t * B + b] = mb.loss_mask[b * T + t];
      grad_scale[t * B + b] = mb.loss_mask[b * T + t] * loss_scale;
    }
  }

  const Parameter* w_out = output_weight();
  ComputeWeights w(a, {const_cast<Parameter*>(w_out)});
  const int64_t V = config_.padded_vocab_size / tp_size_;
  const int64_t vocab_start = tp_rank_ * V;
  ProcessGroup& tp = ctx.ps->tp();
  // With sequence parallelism the output layer's input gradient is reduce-scattered back.
  Tensor x_full, dx_full;
  const float* x = full_final_hidden(ctx, saved, N, x_full);
  float* dx_all = nullptr;
  if (ctx.training) {
    saved.final_norm_grad = Tensor(a, Shape{ctx.local_rows(N), H}, DType::kFloat32, MemoryCategory::kActivations);
    if (ctx.sequence_parallel) {
      dx_full = Tensor(a, Shape{N, H}, DType::kFloat32, MemoryCategory::kWorkspace);
      dx_all = dx_full.f32();
    } else {
      dx_all = saved.final_norm_grad.f32();
    }
  }
  const int64_t chunk = loss_chunk_rows(N);
  Tensor logits(a, Shape{chunk, V}, DType::kFloat32, MemoryCategory::kWorkspace);
  std::vector<float> losses(N);
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t rows = std::min(chunk, N - r0);
    linear_forward(logits.f32(), x + r0 * H, w_out->w(), nullptr, rows, H, V);
    vocab_parallel_cross_entropy(ctx, logits.f32(), losses.data() + r0, saved.labels.i32() + r0,
                                 grad_scale.data() + r0, rows, V, vocab_start, ctx.training);
    if (ctx.training) {
      float* dx = dx_all + r0 * H;
      linear_backward_input(dx, logits.f32(), w_out->w(), rows, H, V, /*accumulate=*/false);
      if (!ctx.sequence_parallel) tp.all_reduce(dx, rows * H);
      linear_backward_weight(w_out->g(), nullptr, logits.f32(), x + r0 * H, rows, H, V);
    }
  }
  if (ctx.training && ctx.sequence_parallel) {
    tp.reduce_scatter(saved.final_norm_grad.f32(), dx_all, N / tp.size() * H);
  }
  saved.final_layernorm.out.reset();  // only the loss needed it
  LossSums sums;
  for (int64_t n = 0; n < N; ++n) {
    sums.loss_sum += static_cast<double>(losses[n]) * mask[n];
    sums.num_tokens += mask[n];
  }
  return sums;
}

void GPTModel::backward(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved) const {
  const int64_t N = ctx.local_rows(mb.B * mb.T), H = config_.hidden_size;
  // The output layer's gradient was completed in forward (fused loss).
  if (ctx.hooks) ctx.hooks->grads_ready(output_params_);
  Tensor dresid = Tensor::zeros(*ctx.alloc, Shape{N, H}, DType::kFloat32, MemoryCategory::kWorkspace);
  {
    ComputeWeights w(*ctx.alloc, final_norm_params_);
    expand_to_fp32(*ctx.alloc, saved.final_input, MemoryCategory::kActivations);
    final_layernorm_->backward(ctx, saved.final_layernorm, saved.final_input.f32(), saved.final_norm_grad.f32(),
                               dresid.f32(), N);
  }
  saved.final_norm_grad.reset();
  saved.final_input.reset();
  saved.final_layernorm = {};
  if (ctx.hooks) ctx.hooks->grads_ready(final_norm_params_);
  for (size_t l = layers_.size(); l-- > 0;) {
    {
      ComputeWeights w(*ctx.alloc, layer_params_[l]);
      layers_[l]->backward(ctx, mb, saved.layers[l], dresid.f32());
    }
    saved.layers[l] = {};  // free this layer's activations as soon as they are used
    if (ctx.hooks) ctx.hooks->grads_ready(layer_params_[l]);
  }
  embedding_->backward(ctx, mb, saved.embedding, dresid.f32());
  saved.embedding = {};
  if (ctx.hooks) ctx.hooks->grads_ready(embedding_params_);
}

void GPTModel::compute_logits(const ForwardContext& ctx, const MicroBatch& mb,
                              float* logits) const {
  Saved saved;
  ForwardContext eval = ctx;
  eval.training = false;
  run_decoder(eval, mb, saved);
  const int64_t B = mb.B, T = mb.T, H = config_.hidden_size;
  const int64_t V = config_.padded_vocab_size / tp_size_;
  Tensor x_full;
  const float* x = full_final_hidden(ctx, saved, B * T, x_full);
  Tensor sb(*ctx.alloc, Shape{B * T, V}, DType::kFloat32, MemoryCategory::kWorkspace);
  ComputeWeights w(*ctx.alloc, {const_cast<Parameter*>(output_weight())});
  linear_forward(sb.f32(), x, output_weight()->w(), nullptr, B * T, H, V);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      std::copy(sb.f32() + (t * B + b) * V, sb.f32() + (t * B + b + 1) * V, logits + (b * T + t) * V);
}

}  // namespace mindspeed
