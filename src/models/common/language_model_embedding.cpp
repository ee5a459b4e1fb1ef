// LanguageModelEmbedding (language_model_embedding.h).
#include "models/common/language_model_embedding.h"

#include "core/check.h"
#include "tensor_parallel/mappings.h"

namespace mindspeed {

LanguageModelEmbedding::LanguageModelEmbedding(ParameterRegistry& registry,
                                               const ModelConfig& config, int tp_size, int tp_rank,
                                               bool sequence_parallel)
    : hidden_(config.hidden_size),
      vocab_local_(config.padded_vocab_size / tp_size),
      vocab_start_(tp_rank * (config.padded_vocab_size / tp_size)),
      max_positions_(config.max_position_embeddings),
      dropout_p_(config.hidden_dropout) {
  word_ = registry.add({.name = "embedding.word_embeddings.weight",
                        .global_shape = Shape{config.padded_vocab_size, hidden_},
                        .split = TensorParallelSplit::kRows,
                        .init = InitMethod::kNormal,
                        .init_std = config.init_method_std,
                        .shared_embedding = !config.untie_embeddings_and_output_weights},
                       tp_size);
  if (config.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute) {
    position_ = registry.add({.name = "embedding.position_embeddings.weight",
                              .global_shape = Shape{max_positions_, hidden_},
                              .init = InitMethod::kNormal,
                              .init_std = config.init_method_std,
                              .sequence_parallel = sequence_parallel},
                             tp_size);
  }
}

DropoutSpec LanguageModelEmbedding::dropout(const ForwardContext& ctx, const MicroBatch& mb) const {
  DropoutSpec spec;
  if (!ctx.training) return spec;
  spec.p = dropout_p_;
  spec.rng = ctx.dropout_stream(-1, DropoutSite::kEmbedding);
  spec.sbh_batch = mb.B;
  spec.first_sample = mb.first_sample;
  spec.seq_total = mb.sample_length();
  spec.t_offset = ctx.sequence_offset(mb.T);
  spec.seq_index = mb.kernel_seq_index();
  return spec;
}

void LanguageModelEmbedding::forward(const ForwardContext& ctx, const MicroBatch& mb,
                                     Saved& saved) const {
  Allocator& a = *ctx.alloc;
  const int64_t B = mb.B, T = mb.T, N = B * T;
  // [b, s] -> Megatron's [s, b] order. Token and position ids were checked against the
  // vocabulary and --max-position-embeddings when the batch was made (training/).
  saved.ids = Tensor(a, Shape{N}, DType::kInt32, MemoryCategory::kActivations);
  saved.positions = Tensor(a, Shape{N}, DType::kInt32, MemoryCategory::kActivations);
  ctx.k().transpose_01_i32(ctx.kc(), saved.ids.i32(), mb.kernel_tokens(), B, T, 1);
  ctx.k().transpose_01_i32(ctx.kc(), saved.positions.i32(), mb.kernel_position_ids(), B, T, 1);
  // Vocab-parallel lookup: rows off this rank's shard are 0, the partial rows are summed over
  // tp (all-reduce; reduce-scatter along s with sequence parallelism).
  const int64_t n = ctx.local_rows(N), row0 = ctx.first_row_of_rank(N, ctx.ps->tp_rank);
  saved.output = Tensor(a, Shape{n, hidden_}, DType::kFloat32, MemoryCategory::kActivations);
  float* out = saved.output.f32();
  if (ctx.sequence_parallel) {
    Tensor partial(a, Shape{N, hidden_}, DType::kFloat32, MemoryCategory::kWorkspace);
    ctx.k().embedding_forward(ctx.kc(), partial.f32(), saved.ids.i32(), ctx.w(*word_), vocab_start_, vocab_local_, N,
                              hidden_);
    ReduceScatterToSequenceParallelRegion::forward(ctx, out, partial.f32(), N, hidden_);
  } else {
    ctx.k().embedding_forward(ctx.kc(), out, saved.ids.i32(), ctx.w(*word_), vocab_start_, vocab_local_, N, hidden_);
    ReduceFromTensorModelParallelRegion::forward(ctx, out, N * hidden_);
  }
  if (position_ != nullptr) {
    Tensor pos(a, Shape{n, hidden_}, DType::kFloat32, MemoryCategory::kWorkspace);
    ctx.k().embedding_forward(ctx.kc(), pos.f32(), saved.positions.i32() + row0, ctx.w(*position_), 0, max_positions_,
                              n, hidden_);
    ctx.k().add_inplace(ctx.kc(), out, pos.f32(), n * hidden_);
  }
  const DropoutSpec drop = dropout(ctx, mb);
  if (drop.active()) {
    Tensor zeros = device_zeros(*ctx.backend, a, Shape{n, hidden_}, DType::kFloat32, MemoryCategory::kWorkspace);
    // bias_dropout_add with a zero residual applies the [s, b, h]-indexed mask in place.
    ctx.k().bias_dropout_add_forward(ctx.kc(), out, out, nullptr, zeros.f32(), n, hidden_, drop);
  }
}

void LanguageModelEmbedding::backward(const ForwardContext& ctx, const MicroBatch& mb,
                                      const Saved& saved, float* dout) const {
  const int64_t N = mb.B * mb.T, n = ctx.local_rows(N),
                row0 = ctx.first_row_of_rank(N, ctx.ps->tp_rank);
  const DropoutSpec drop = dropout(ctx, mb);
  if (drop.active()) ctx.k().bias_dropout_add_backward(ctx.kc(), dout, nullptr, dout, n, hidden_, drop);
  if (position_ != nullptr) {
    ctx.k().embedding_backward(ctx.kc(), position_->g(), dout, saved.positions.i32() + row0, 0, max_positions_, n,
                               hidden_);
  }
  Tensor full;
  const float* dword = dout;
  if (ctx.sequence_parallel) {  // every rank needs the gradient of all rows for its vocab shard
    full = Tensor(*ctx.alloc, Shape{N, hidden_}, DType::kFloat32, MemoryCategory::kWorkspace);
    ReduceScatterToSequenceParallelRegion::backward(ctx, full.f32(), dout, N, hidden_);
    dword = full.f32();
  }
  ctx.k().embedding_backward(ctx.kc(), word_->g(), dword, saved.ids.i32(), vocab_start_, vocab_local_, N, hidden_);
}

}  // namespace mindspeed
