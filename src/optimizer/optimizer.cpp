// Optimizer (optimizer.h).
#include "optimizer/optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace mindspeed {

Optimizer::Optimizer(const OptimizerConfig& config, ParamAndGradBuffer& buffer,
                     const ParallelState& ps, Allocator& alloc, const Backend& backend,
                     bool distributed)
    : config_(config), buffer_(buffer), ps_(ps), backend_(backend), distributed_(distributed) {
  MS_CHECK(distributed || buffer.shard_grads() == nullptr, "sharded gradients need the distributed optimizer");
  // The owned ranges: the whole buffer, or this rank's 1/dp of every bucket (dp of the
  // bucket's group: dp-cp, or expert-dp for expert buckets).
  std::vector<std::pair<int64_t, int64_t>> owned;
  for (const Bucket& b : buffer.buckets()) {
    if (!distributed) {
      owned.emplace_back(b.offset, b.offset + b.numel);
      continue;
    }
    const ProcessGroup& group = b.expert ? ps.expert_dp() : ps.dp_cp();
    const int dp = group.size(), dp_rank = group.rank();
    MS_CHECK(b.numel % dp == 0, "bucket of ", b.numel, " elements does not split over ", dp, " ranks");
    const int64_t shard = b.numel / dp;
    owned.emplace_back(b.offset + dp_rank * shard, b.offset + (dp_rank + 1) * shard);
  }
  // Intersect with every parameter: one segment per (owned range, parameter) overlap.
  for (const auto& [lo, hi] : owned) {
    for (Parameter* p : buffer.params()) {
      const int64_t p_lo = p->buffer_offset, p_hi = p->buffer_offset + p->local_shape.numel();
      const int64_t s_lo = std::max(lo, p_lo), s_hi = std::min(hi, p_hi);
      if (s_lo >= s_hi) continue;
      Segment seg;
      seg.begin = s_lo;
      seg.end = s_hi;
      seg.shard_offset = shard_numel_ + (s_lo - lo);
      seg.weight_decay = p->spec.weight_decay;
      // Megatron's clip_grads rule: skip shared duplicates (a tied copy counts on the stage
      // that owns the original); replicated (non tensor-parallel) params count once, on
      // tensor-parallel rank 0.
      seg.in_grad_norm = !p->is_tied_copy() && (p->is_tensor_parallel() || ps.tp_rank == 0);
      seg.expert = p->spec.expert_parallel;
      segments_.push_back(seg);
    }
    shard_numel_ += hi - lo;
  }
  for (const Bucket& b : buffer.buckets()) has_expert_params_ = has_expert_params_ || b.expert;
  std::sort(segments_.begin(), segments_.end(),
            [](const Segment& a, const Segment& b) { return a.begin < b.begin; });
  exp_avg_ = Tensor::zeros(alloc, Shape{shard_numel_}, DType::kFloat32, MemoryCategory::kOptimizerState);
  exp_avg_sq_ = Tensor::zeros(alloc, Shape{shard_numel_}, DType::kFloat32, MemoryCategory::kOptimizerState);
  if (buffer.param_dtype() == DType::kBFloat16) {
    // bf16 params: fp32 main copies of the owned elements. fp32 params are their own main
    // copy (Megatron's FP32Optimizer / the distributed optimizer's view of an fp32 param).
    main_params_ = Tensor::zeros(alloc, Shape{shard_numel_}, DType::kFloat32, MemoryCategory::kOptimizerState);
    for (const Segment& s : segments_) {
      backend.kernels.convert_to_fp32(backend.context, main_params_.f32() + s.shard_offset,
                                      static_cast<const bf16*>(param_of(s)), s.end - s.begin);
    }
  }
}

float* Optimizer::grad_of(const Segment& s) const {
  // FSDP optim_grads: only this rank's shards exist, laid out as the shard-local state.
  if (float* shards = buffer_.shard_grads()) return shards + s.shard_offset;
  return buffer_.grad_data() + s.begin;
}

void* Optimizer::param_of(const Segment& s) const {
  // FSDP optim_grads_params: the parameters too exist only as this rank's shards.
  const int64_t width = dtype_size(buffer_.param_dtype());
  if (void* shards = buffer_.param_shards()) return static_cast<char*>(shards) + s.shard_offset * width;
  return static_cast<char*>(buffer_.param_data()) + s.begin * width;
}

double Optimizer::grad_norm() const {
  double dense = 0.0, expert = 0.0;
  for (const Segment& s : segments_) {
    if (!s.in_grad_norm) continue;
    (s.expert ? expert : dense) += backend_.kernels.sum_of_squares(backend_.context, grad_of(s), s.end - s.begin);
  }
  // Distributed: each rank holds its own shard (of the dense and the expert buckets); sum
  // over all ranks. Non-distributed: every data-parallel rank holds the same full gradient;
  // sum the dense part over the model-parallel group and the expert part over the
  // expert-model-parallel group (Megatron's separate norms of the two kinds, combined).
  if (distributed_) return std::sqrt(ps_.world().all_reduce_scalar(dense + expert, ReduceOp::kSum));
  double total = ps_.mp().all_reduce_scalar(dense, ReduceOp::kSum);
  if (has_expert_params_) total += ps_.tp_ep_pp().all_reduce_scalar(expert, ReduceOp::kSum);
  return std::sqrt(total);
}

Optimizer::StepResult Optimizer::step(double lr) {
  StepResult result;
  result.grad_norm = grad_norm();
  if (!std::isfinite(result.grad_norm)) {  // every rank sees the same (all-reduced) norm
    result.skipped = true;
    return result;
  }
  float scale = 1.0f;
  if (config_.clip_grad > 0.0f) {
    const double coeff = config_.clip_grad / (result.grad_norm + 1e-6);
    if (coeff < 1.0) scale = static_cast<float>(coeff);
  }
  result.clip_coeff = scale;
  ++step_;
  const bool bf16_params = buffer_.param_dtype() == DType::kBFloat16;
  for (const Segment& s : segments_) {
    const int64_t n = s.end - s.begin;
    float* param = bf16_params ? main_params_.f32() + s.shard_offset : static_cast<float*>(param_of(s));
    backend_.kernels.adamw_step(backend_.context, param, exp_avg_.f32() + s.shard_offset, exp_avg_sq_.f32() + s.shard_offset,
                        grad_of(s), n, static_cast<float>(lr), config_.adam_beta1,
                        config_.adam_beta2, config_.adam_eps,
                        s.weight_decay ? config_.weight_decay : 0.0f, step_, scale);
  }
  if (bf16_params) copy_main_to_model_params();
  return result;
}

void Optimizer::copy_main_to_model_params() {
  if (main_params_.empty()) return;
  const float* src = main_params_.f32();
  for (const Segment& s : segments_) {
    backend_.kernels.convert_to_bf16(backend_.context, static_cast<bf16*>(param_of(s)), src + s.shard_offset,
                                     s.end - s.begin);
  }
}

}  // namespace mindspeed
