// OutputLayerLoss (output_layer_loss.h).
#include "models/common/output_layer_loss.h"

#include <algorithm>
#include <memory>

#include "module/module_scope.h"
#include "module/weight_grad_queue.h"
#include "tensor_parallel/cross_entropy.h"
#include "tensor_parallel/mappings.h"

namespace mindspeed {
namespace {
constexpr const char* kWordEmbeddings = "embedding.word_embeddings.weight";
}  // namespace

OutputLayerLoss::OutputLayerLoss(ParameterRegistry& registry, const ModelConfig& config, int tp_size, int tp_rank)
    : hidden_(config.hidden_size),
      vocab_local_(config.padded_vocab_size / tp_size),
      vocab_start_(tp_rank * (config.padded_vocab_size / tp_size)) {
  ParameterSpec spec{.name = "output_layer.weight",
                     .global_shape = Shape{config.padded_vocab_size, config.hidden_size},
                     .split = TensorParallelSplit::kRows,
                     .init = InitMethod::kNormal,
                     .init_std = config.init_method_std};
  if (!config.untie_embeddings_and_output_weights) {
    weight_ = registry.find(kWordEmbeddings);
    if (weight_ != nullptr) return;  // one logical parameter on this rank: no copy
    spec.shared_embedding = true;
    spec.tied_to = kWordEmbeddings;
  }
  weight_ = registry.add(spec, tp_size);
  params_.push_back(weight_);
}

int64_t OutputLayerLoss::loss_chunk_rows(int64_t N) const {
  // About 256 MiB of logits per chunk (at least 64 rows): large enough that the output
  // layer's weight-gradient GEMM (K = rows) runs near the GEMM peak, still well below the
  // whole [tokens, vocab] logits other implementations keep.
  const int64_t rows = std::max<int64_t>(64, (int64_t{256} << 20) / (4 * vocab_local_));
  return std::min(N, rows);
}

const float* OutputLayerLoss::full_rows(const ForwardContext& ctx, const float* x, int64_t N, Tensor& storage) const {
  if (!ctx.sequence_parallel) return x;  // enters the region by CopyToTensorModelParallelRegion
  storage = Tensor(*ctx.alloc, Shape{N, hidden_}, DType::kFloat32, MemoryCategory::kWorkspace);
  GatherFromSequenceParallelRegion::forward(ctx, storage.f32(), x, N, hidden_);
  return storage.f32();
}

LossSums OutputLayerLoss::forward(const ForwardContext& outer, const MicroBatch& mb, const float* x_local,
                                  float loss_scale, float* dx_local) const {
  ModuleScope scope(outer, {weight_}, ModuleScope::Pass::kForward);
  const ForwardContext& ctx = scope.ctx();
  // The loss gradient is folded into forward: the weight gradient is written here.
  if (dx_local != nullptr && ctx.hooks != nullptr) ctx.hooks->prepare_grads({weight_});
  Allocator& a = *ctx.alloc;
  const int64_t B = mb.B, T = mb.T, N = B * T, H = hidden_, V = vocab_local_;
  // Labels, loss mask and per-token gradient scale in [s, b] row order.
  Tensor labels(a, Shape{N}, DType::kInt32, MemoryCategory::kWorkspace);
  Tensor mask(a, Shape{N}, DType::kFloat32, MemoryCategory::kWorkspace);
  Tensor grad_scale(a, Shape{N}, DType::kFloat32, MemoryCategory::kWorkspace);
  ctx.k().transpose_01_i32(ctx.kc(), labels.i32(), mb.kernel_labels(), B, T, 1);
  ctx.k().transpose_01_f32(ctx.kc(), mask.f32(), mb.kernel_loss_mask(), B, T, 1);
  ctx.k().scale_copy(ctx.kc(), grad_scale.f32(), mask.f32(), loss_scale, N);

  const float* w = ctx.w(*weight_);
  Tensor x_full, dx_full;
  const float* x = full_rows(ctx, x_local, N, x_full);
  float* dx_all = nullptr;
  if (ctx.training) {
    if (ctx.sequence_parallel) {  // the input gradient is reduce-scattered back
      dx_full = Tensor(a, Shape{N, H}, DType::kFloat32, MemoryCategory::kWorkspace);
      dx_all = dx_full.f32();
    } else {
      dx_all = dx_local;
    }
  }
  const bool defer = ctx.training && ctx.wgrad_queue != nullptr;
  Tensor dlogits_kept;
  if (defer) dlogits_kept = Tensor(a, Shape{N, V}, DType::kFloat32, MemoryCategory::kActivations);
  const int64_t chunk = loss_chunk_rows(N);
  Tensor logits(a, Shape{chunk, V}, DType::kFloat32, MemoryCategory::kWorkspace);
  Tensor losses(a, Shape{N}, DType::kFloat32, MemoryCategory::kWorkspace);
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t rows = std::min(chunk, N - r0);
    ctx.k().linear_forward(ctx.kc(), logits.f32(), x + r0 * H, w, nullptr, rows, H, V);
    round_if_fp16(ctx, logits.f32(), rows * V);  // an fp16 GEMM's logits, upcast for the loss
    vocab_parallel_cross_entropy(ctx, logits.f32(), losses.f32() + r0, labels.i32() + r0, grad_scale.f32() + r0, rows,
                                 V, vocab_start_, ctx.training);
    if (!ctx.training) continue;
    round_if_fp16(ctx, logits.f32(), rows * V);  // the logits' (loss-scaled) gradient, cast to fp16
    float* dx = dx_all + r0 * H;
    ctx.k().linear_backward_input(ctx.kc(), dx, logits.f32(), w, rows, H, V, /*accumulate=*/false);
    if (!ctx.sequence_parallel) CopyToTensorModelParallelRegion::backward(ctx, dx, rows * H);
    if (defer) {
      ctx.k().copy(ctx.kc(), dlogits_kept.f32() + r0 * V, logits.f32(), rows * V);
    } else {
      ctx.k().linear_backward_weight(ctx.kc(), weight_->g(), nullptr, logits.f32(), x + r0 * H, rows, H, V);
    }
  }
  if (ctx.training && ctx.sequence_parallel) {
    GatherFromSequenceParallelRegion::backward(ctx, dx_local, dx_all, N, H);
  }
  if (ctx.training) round_if_fp16(ctx, dx_local, ctx.local_rows(N) * H);
  if (defer) {
    // The same chunks, in the same order, later: bit-identical gradients.
    Tensor x_kept = std::move(x_full);
    if (x_kept.empty()) {
      x_kept = Tensor(a, Shape{N, H}, DType::kFloat32, MemoryCategory::kActivations);
      ctx.k().copy(ctx.kc(), x_kept.f32(), x, N * H);
    }
    auto job = [this, N, H, V, chunk, dl = std::make_shared<Tensor>(std::move(dlogits_kept)),
                xk = std::make_shared<Tensor>(std::move(x_kept))](const ForwardContext& run) {
      for (int64_t r0 = 0; r0 < N; r0 += chunk) {
        const int64_t rows = std::min(chunk, N - r0);
        run.k().linear_backward_weight(run.kc(), weight_->g(), nullptr, dl->f32() + r0 * V, xk->f32() + r0 * H, rows,
                                       H, V);
      }
    };
    ctx.wgrad_queue->push(std::move(job));
  }
  double sums[2] = {0.0, 0.0};
  ctx.k().masked_sums(ctx.kc(), sums, losses.f32(), mask.f32(), N);
  return LossSums{sums[0], sums[1]};
}

void OutputLayerLoss::compute_logits(const ForwardContext& outer, const MicroBatch& mb, const float* x_local,
                                     float* logits) const {
  ModuleScope scope(outer, {weight_}, ModuleScope::Pass::kForward);
  const ForwardContext& ctx = scope.ctx();
  const int64_t B = mb.B, T = mb.T, V = vocab_local_;
  Tensor x_full;
  const float* x = full_rows(ctx, x_local, B * T, x_full);
  Tensor sb(*ctx.alloc, Shape{B * T, V}, DType::kFloat32, MemoryCategory::kWorkspace);
  ctx.k().linear_forward(ctx.kc(), sb.f32(), x, ctx.w(*weight_), nullptr, B * T, hidden_, V);
  ctx.k().transpose_01_f32(ctx.kc(), logits, sb.f32(), T, B, V);  // [s, b, V] -> [b, s, V]
}

}  // namespace mindspeed
