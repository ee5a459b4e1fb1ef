// DistributedDataParallel (distributed_data_parallel.h).
#include "distributed/distributed_data_parallel.h"

#include <algorithm>

#include "kernels/half_precision.h"
#include "core/check.h"
#include "kernels/half_precision.h"

namespace mindspeed {

DistributedDataParallel::DistributedDataParallel(ParamAndGradBuffer& buffer, const ParallelState& ps,
                                                 const DdpConfig& config, const Backend& backend)
    : buffer_(buffer), ps_(ps), config_(config), backend_(backend) {
  MS_CHECK(!config.shard_grads || (config.use_distributed_optimizer && buffer.shard_grads() != nullptr),
           "sharded gradients need the distributed optimizer and a buffer with shard_grads");
  const auto& buckets = buffer.buckets();
  ready_.assign(buckets.size(), 0);
  launched_.assign(buckets.size(), false);
  grad_work_.resize(buckets.size());
  param_work_.resize(buckets.size());
  for (size_t b = 0; b < buckets.size(); ++b) {
    for (Parameter* p : buckets[b].params) bucket_of_[p] = b;
    if (config.use_distributed_optimizer) {
      const int dp = group_of(buckets[b]).size();
      MS_CHECK(buckets[b].numel % dp == 0, "bucket ", b, " is not padded to the data-parallel size");
    }
  }
  MS_CHECK(!config.shard_params || config.shard_grads, "sharded parameters need sharded gradients");
  MS_CHECK(config.half_grads == is_half_precision(buffer.grad_dtype()) && !(config.half_grads && config.shard_grads),
           "16-bit gradients need a buffer with 16-bit gradients, and unsharded gradients");
  if (config.shard_params) {
    std::vector<int> ranks;
    for (const Bucket& b : buckets) ranks.push_back(group_of(b).rank());
    buffer.shard_params(ranks);
  }
  for (Parameter* p : buffer.params()) {
    if (p->spec.sequence_parallel && ps_.tp().size() > 1)
      tp_summed_params_.push_back({p, &ps_.tp()});
    if (p->spec.grads_summed_over_tp_x && ps_.tp_x().size() > 1)
      tp_summed_params_.push_back({p, &ps_.tp_x()});
    if (p->spec.shared_embedding) embedding_group_params_.push_back(p);
  }
}

size_t DistributedDataParallel::bucket_of(const Parameter* p) const {
  const auto it = bucket_of_.find(p);
  MS_CHECK(it != bucket_of_.end(), "parameter ", p->spec.name, " is not in the gradient buffer of this DDP");
  return it->second;
}

DistributedDataParallel::~DistributedDataParallel() {
  // Outstanding work is completed (not abandoned) so its buffers stay valid; no new
  // collective is started here.
  for (auto& w : grad_work_)
    if (w) w->wait();
  for (auto& w : param_work_)
    if (w) w->wait();
}

ProcessGroup& DistributedDataParallel::group_of(const Bucket& bucket) const {
  return bucket.expert ? ps_.expert_dp() : ps_.dp_cp();
}

void DistributedDataParallel::launch_grad_sync(size_t b) {
  const Bucket& bucket = buffer_.buckets()[b];
  ProcessGroup& group = group_of(bucket);
  if (config_.half_grads) {
    // The bucket's 16-bit gradient widened into an fp32 transient, reduced there.
    MS_CHECK(buffer_.bucket_grad(b) == nullptr, "bucket ", b, " still has an unfolded gradient");
    launched_[b] = true;
    buffer_.allocate_bucket_grad(b, backend_);
    widen_to_fp32(backend_, buffer_.grad_dtype(), buffer_.bucket_grad(b), half_grad_at(bucket.offset), bucket.numel);
  }
  float* grad = config_.shard_grads || config_.half_grads ? buffer_.bucket_grad(b) : buffer_.grad_data() + bucket.offset;
  MS_CHECK(grad != nullptr, "bucket ", b, " has no gradient to reduce");
  const int64_t n = bucket.numel;
  // Megatron's gradient_scaling_factor: 1/(dp*cp) for every bucket, the expert ones too
  // (each expert already summed the gradients of the tokens every data-parallel rank sent it);
  // 1 with --calculate-per-token-loss (the sum is divided by the tokens afterwards).
  const int dp_cp = ps_.dp_cp().size();
  const float scale = 1.0f / static_cast<float>(dp_cp);
  if (dp_cp > 1 && !config_.calculate_per_token_loss) backend_.kernels.scale_inplace(backend_.context, grad, scale, n);
  if (config_.use_distributed_optimizer) {
    // In place, as Megatron's reduce_scatter_tensor into the buffer's own shard view: the
    // reduced shard lands on this rank's block and the other blocks are left undefined.
    const int64_t shard = n / group.size();
    grad_work_[b] = group.reduce_scatter_async(grad + group.rank() * shard, grad, shard, ReduceOp::kSum);
  } else {
    grad_work_[b] = group.all_reduce_async(grad, n, ReduceOp::kSum);
  }
}

void DistributedDataParallel::scale_gradients(float factor) {
  // Every gradient this rank holds: the fp32 buffer, its FSDP shards, or the 16-bit buffer
  // (widened, scaled and rounded back piece by piece).
  if (float* shards = buffer_.shard_grads()) {
    backend_.kernels.scale_inplace(backend_.context, shards, factor, buffer_.shard_grads_numel());
  } else if (float* grads = buffer_.grad_data()) {
    backend_.kernels.scale_inplace(backend_.context, grads, factor, buffer_.numel());
  } else if (buffer_.grad_data_half() != nullptr) {
    constexpr int64_t kPiece = int64_t{1} << 16;
    std::vector<float> wide(static_cast<size_t>(std::min(kPiece, buffer_.numel())));
    for (int64_t at = 0; at < buffer_.numel(); at += kPiece) {
      const int64_t n = std::min(kPiece, buffer_.numel() - at);
      widen_to_fp32(backend_, buffer_.grad_dtype(), wide.data(), half_grad_at(at), n);
      backend_.kernels.scale_inplace(backend_.context, wide.data(), factor, n);
      narrow_from_fp32(backend_, buffer_.grad_dtype(), half_grad_at(at), wide.data(), n);
    }
  }
}

void DistributedDataParallel::prepare_grads(const std::vector<Parameter*>& params) {
  if (config_.half_grads) {
    for (Parameter* p : params) {
      const size_t b = bucket_of(p);
      if (grad_work_[b]) reap_half(/*wait=*/true);  // its transient is a reduction's buffer
      buffer_.allocate_bucket_grad(b, backend_);
    }
    return;
  }
  if (!config_.shard_grads) return;
  reap_sharded(/*wait=*/false);
  for (Parameter* p : params) {
    const size_t b = bucket_of(p);
    // A unit whose previous micro-batch's reduction is still in flight: finish it first.
    if (grad_work_[b]) reap_sharded(/*wait=*/true);
    buffer_.allocate_bucket_grad(b, backend_);
  }
}

void DistributedDataParallel::reap_sharded(bool wait) {
  const auto& buckets = buffer_.buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (!grad_work_[b] || (!wait && !grad_work_[b]->is_completed())) continue;
    grad_work_[b]->wait();
    grad_work_[b].reset();
    const ProcessGroup& group = group_of(buckets[b]);
    const int64_t shard = buckets[b].numel / group.size();
    backend_.kernels.add_inplace(backend_.context, buffer_.bucket_grad_shard(b),
                                 buffer_.bucket_grad(b) + group.rank() * shard, shard);
    buffer_.release_bucket_grad(b);
  }
}

void* DistributedDataParallel::half_grad_at(int64_t offset) const {
  return static_cast<char*>(buffer_.grad_data_half()) + offset * dtype_size(buffer_.grad_dtype());
}

void DistributedDataParallel::fold_into_half(size_t b) {
  const float* grad = buffer_.bucket_grad(b);
  // Nothing new: folded already (a unit that reported twice), or the transient is a reduction's.
  if (grad == nullptr || grad_work_[b]) return;
  const Bucket& bucket = buffer_.buckets()[b];
  add_into_half(backend_, buffer_.grad_dtype(), half_grad_at(bucket.offset), grad, bucket.numel);
  buffer_.release_bucket_grad(b);
}

void DistributedDataParallel::reap_half(bool wait) {
  const auto& buckets = buffer_.buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (!grad_work_[b] || (!wait && !grad_work_[b]->is_completed())) continue;
    grad_work_[b]->wait();
    grad_work_[b].reset();
    // The reduced values (this rank's shard with the distributed optimizer) back into 16 bits.
    const Bucket& bucket = buckets[b];
    int64_t lo = 0, n = bucket.numel;
    if (config_.use_distributed_optimizer) {
      const ProcessGroup& group = group_of(bucket);
      n = bucket.numel / group.size();
      lo = group.rank() * n;
    }
    narrow_from_fp32(backend_, buffer_.grad_dtype(), half_grad_at(bucket.offset + lo), buffer_.bucket_grad(b) + lo, n);
    buffer_.release_bucket_grad(b);
  }
}

void DistributedDataParallel::all_reduce_half_grad(ProcessGroup& group, Parameter* p) {
  const int64_t n = p->local_shape.numel();
  std::vector<float> wide(static_cast<size_t>(n));
  widen_to_fp32(backend_, p->main_grad.dtype, wide.data(), p->main_grad.data, n);
  group.all_reduce(wide.data(), n);
  narrow_from_fp32(backend_, p->main_grad.dtype, p->main_grad.data, wide.data(), n);
}

void DistributedDataParallel::grads_ready(const std::vector<Parameter*>& params) {
  if (config_.half_grads) {
    // Every micro-batch: a unit's fp32 gradient is added into the 16-bit buffer once complete;
    // in the last micro-batch, with overlap, its reduction starts then.
    for (Parameter* p : params) {
      const size_t b = bucket_of(p);
      if (++ready_[b] == static_cast<int>(buffer_.buckets()[b].params.size())) {
        ready_[b] = 0;
        fold_into_half(b);
        if (sync_enabled_ && config_.overlap_grad_reduce && !launched_[b]) launch_grad_sync(b);
      }
    }
    reap_half(/*wait=*/false);
    return;
  }
  if (config_.shard_grads) {
    // Every micro-batch: a unit's gradient leaves as soon as it is complete.
    for (Parameter* p : params) {
      const size_t b = bucket_of(p);
      if (++ready_[b] == static_cast<int>(buffer_.buckets()[b].params.size())) {
        ready_[b] = 0;
        launch_grad_sync(b);
      }
    }
    reap_sharded(/*wait=*/false);
    return;
  }
  if (!sync_enabled_ || !config_.overlap_grad_reduce) return;
  for (Parameter* p : params) {
    const size_t b = bucket_of(p);
    if (++ready_[b] == static_cast<int>(buffer_.buckets()[b].params.size())) launch_grad_sync(b);
  }
}

void DistributedDataParallel::finish_grad_sync() {
  const auto& buckets = buffer_.buckets();
  if (config_.half_grads) {
    // One bucket at a time (its fp32 transient is the only one alive), after those in flight.
    reap_half(/*wait=*/true);
    for (size_t b = 0; b < buckets.size(); ++b) {
      ready_[b] = 0;
      if (grad_work_[b]) continue;
      fold_into_half(b);  // a unit whose parameters did not all report (none expected)
      if (!launched_[b]) {
        launch_grad_sync(b);
        reap_half(/*wait=*/true);
      }
    }
    std::fill(launched_.begin(), launched_.end(), false);
    sync_enabled_ = false;
    for (auto [p, group] : tp_summed_params_) all_reduce_half_grad(*group, p);
    if (ps_.embedding().size() > 1) {
      for (Parameter* p : embedding_group_params_) all_reduce_half_grad(ps_.embedding(), p);
    }
    return;
  }
  if (config_.shard_grads) {
    // Units whose parameters did not all report (none expected) are reduced now.
    for (size_t b = 0; b < buckets.size(); ++b) {
      if (!grad_work_[b] && buffer_.bucket_grad(b) != nullptr) launch_grad_sync(b);
      ready_[b] = 0;
    }
    reap_sharded(/*wait=*/true);
    sync_enabled_ = false;
    // Sequence parallelism: the norm weights' gradient shards summed over tp (every tp rank
    // has the same layout and data-parallel rank, so the same shard ranges).
    {
      for (auto [p, tp_group] : tp_summed_params_) {
        const size_t b = bucket_of(p);
        const Bucket& bucket = buckets[b];
        const ProcessGroup& group = group_of(bucket);
        const int64_t shard = bucket.numel / group.size();
        const int64_t lo = std::max(p->buffer_offset, bucket.offset + group.rank() * shard);
        const int64_t hi = std::min(p->buffer_offset + p->local_shape.numel(), bucket.offset + (group.rank() + 1) * shard);
        if (hi <= lo) continue;
        float* at = buffer_.bucket_grad_shard(b) + (lo - bucket.offset - group.rank() * shard);
        tp_group->all_reduce(at, hi - lo);
      }
    }
    MS_CHECK(ps_.embedding().size() <= 1, "FSDP with tied embeddings across pipeline stages (validate refuses it)");
    return;
  }
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (!grad_work_[b]) launch_grad_sync(b);
    grad_work_[b]->wait();
    grad_work_[b].reset();
    ready_[b] = 0;
  }
  sync_enabled_ = false;
  // Sequence parallelism: each tensor-parallel rank saw its own part of the sequence, so the
  // replicated norm weights' gradients are summed over tp (finalize_model_grads).
  for (auto [p, group] : tp_summed_params_) group->all_reduce(p->g(), p->local_shape.numel());
  // Pipeline parallelism with tied embeddings: the first stage's word embedding and the last
  // stage's copy receive the sum of both gradients, so the copies stay equal.
  if (ps_.embedding().size() > 1) {
    for (Parameter* p : embedding_group_params_) ps_.embedding().all_reduce(p->g(), p->local_shape.numel());
  }
}

void DistributedDataParallel::launch_param_sync(size_t b) {
  const Bucket& bucket = buffer_.buckets()[b];
  ProcessGroup& group = group_of(bucket);
  if (group.size() == 1) return;
  const int64_t width = dtype_size(buffer_.param_dtype());
  char* params = static_cast<char*>(buffer_.param_data()) + bucket.offset * width;
  const int64_t shard_bytes = bucket.numel / group.size() * width;
  param_work_[b] = group.all_gather_bytes_async(params, params + group.rank() * shard_bytes, shard_bytes);
}

void DistributedDataParallel::start_param_sync() {
  // ZeRO-3: the updated shards stay sharded; each unit is gathered when next used (a unit
  // still resident from before the step would be stale).
  if (config_.shard_params) {
    release_all_params();
    return;
  }
  if (!config_.use_distributed_optimizer) return;
  // Forward order is the reverse of the buffer order.
  for (size_t b = buffer_.buckets().size(); b-- > 0;) launch_param_sync(b);
  if (!config_.overlap_param_gather) finish_param_sync();
}

void DistributedDataParallel::finish_param_sync() {
  for (auto& w : param_work_) {
    if (w) {
      w->wait();
      w.reset();
    }
  }
}

void DistributedDataParallel::gather_params(size_t b) {
  if (param_work_[b]) {  // prefetched
    param_work_[b]->wait();
    param_work_[b].reset();
    return;
  }
  if (buffer_.bucket_params_resident(b)) return;
  prefetch_params(static_cast<int64_t>(b));
  param_work_[b]->wait();
  param_work_[b].reset();
}

void DistributedDataParallel::prefetch_params(int64_t b) {
  if (b < 0 || b >= static_cast<int64_t>(buffer_.buckets().size())) return;
  const size_t u = static_cast<size_t>(b);
  if (param_work_[u] || buffer_.bucket_params_resident(u)) return;
  const Bucket& bucket = buffer_.buckets()[u];
  ProcessGroup& group = group_of(bucket);
  void* full = buffer_.allocate_bucket_params(u);
  const int64_t shard_bytes = bucket.numel / group.size() * dtype_size(buffer_.param_dtype());
  param_work_[u] = group.all_gather_bytes_async(full, buffer_.bucket_param_shard(u), shard_bytes);
}

void DistributedDataParallel::before_backward(const std::vector<Parameter*>& params) {
  prepare_grads(params);
  if (!config_.shard_params || params.empty()) return;
  size_t last = 0;
  for (Parameter* p : params) {
    const size_t b = bucket_of(p);
    gather_params(b);
    last = std::max(last, b);
  }
  prefetch_params(static_cast<int64_t>(last) + 1);  // backward runs up the buffer
}

void DistributedDataParallel::after_use(const std::vector<Parameter*>& params) {
  if (!config_.shard_params) return;
  for (Parameter* p : params) {
    const size_t b = bucket_of(p);
    if (param_work_[b]) continue;  // a prefetch of this unit is in flight (used again next)
    buffer_.release_bucket_params(b);
  }
}

void DistributedDataParallel::gather_all_params() {
  if (!config_.shard_params) return;
  for (size_t b = 0; b < buffer_.buckets().size(); ++b) gather_params(b);
}

void DistributedDataParallel::release_all_params() {
  if (!config_.shard_params) return;
  for (size_t b = 0; b < buffer_.buckets().size(); ++b) {
    if (param_work_[b]) {
      param_work_[b]->wait();
      param_work_[b].reset();
    }
    buffer_.release_bucket_params(b);
  }
}

void DistributedDataParallel::before_forward(const std::vector<Parameter*>& params) {
  if (config_.shard_params) {
    if (params.empty()) return;
    size_t first = buffer_.buckets().size();
    for (Parameter* p : params) {
      const size_t b = bucket_of(p);
      gather_params(b);
      first = std::min(first, b);
    }
    prefetch_params(static_cast<int64_t>(first) - 1);  // forward runs down the buffer
    return;
  }
  for (Parameter* p : params) {
    auto& w = param_work_[bucket_of(p)];
    if (w) {
      w->wait();
      w.reset();
    }
  }
}

}  // namespace mindspeed
