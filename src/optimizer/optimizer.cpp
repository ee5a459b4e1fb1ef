// Optimizer (optimizer.h).
#include "optimizer/optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/check.h"
#include "kernels/half_precision.h"

namespace mindspeed {

Optimizer::Optimizer(const OptimizerConfig& config, ParamAndGradBuffer& buffer,
                     const ParallelState& ps, Allocator& alloc, const Backend& backend,
                     bool distributed, SwapTier* swap_tier)
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
      // tensor-parallel rank 0 (2D tensor parallelism: a tensor split over one axis counts on
      // the first rank of the other).
      seg.in_grad_norm = !p->is_tied_copy() && holds_main_tp_copy(p->spec, ps);
      seg.expert = p->spec.expert_parallel;
      segments_.push_back(seg);
    }
    shard_numel_ += hi - lo;
  }
  for (const Bucket& b : buffer.buckets()) has_expert_params_ = has_expert_params_ || b.expert;
  std::sort(segments_.begin(), segments_.end(),
            [](const Segment& a, const Segment& b) { return a.begin < b.begin; });

  const DType param_dtype = buffer.param_dtype();
  const bool half_params = is_half_precision(param_dtype);  // bf16 or fp16: fp32 main copies
  MS_CHECK(!config.reuse_fp32_param || param_dtype == DType::kBFloat16, "--reuse-fp32-param needs bf16 parameters");
  MS_CHECK(!config.o2_optimizer || param_dtype == DType::kBFloat16, "--o2-optimizer needs bf16 parameters");
  MS_CHECK(!config.swap_optimizer || swap_tier != nullptr, "--swap-optimizer needs a swap tier");
  MS_CHECK(!(config.swap_optimizer && (config.reuse_fp32_param || config.o2_optimizer || config.ema())),
           "--swap-optimizer keeps fp32 master and moments: not with reuse-fp32-param, O2 or EMA");
  swap_tier_ = config.swap_optimizer ? swap_tier : nullptr;

  // Pieces: each segment cut at the swap slices' edges and, where the fp32 workspace is used,
  // into kWorkspaceElements pieces; listed slice by slice.
  // A cut inside a segment lands a multiple of 8 elements from its start: the vectorised
  // kernels treat the last n % 8 elements of a call apart, so with aligned cuts every element
  // gets the arithmetic it gets in one call over the whole segment (bitwise the plain step).
  const int64_t slices = swap_tier_ ? std::max<int64_t>(1, std::min(config.swap_optimizer_times, shard_numel_)) : 1;
  const int64_t slice_len = (shard_numel_ + slices - 1) / std::max<int64_t>(slices, 1);
  auto aligned_cut = [&](int64_t at) {
    for (const Segment& s : segments_) {
      if (at > s.shard_offset && at < s.shard_offset + (s.end - s.begin)) return s.shard_offset + (at - s.shard_offset) / 8 * 8;
    }
    return at;
  };
  std::vector<int64_t> cuts = {0};
  for (int64_t k = 1; k < slices; ++k) cuts.push_back(std::max(cuts.back(), aligned_cut(std::min(shard_numel_, k * slice_len))));
  cuts.push_back(shard_numel_);
  // 16-bit gradients (--o2-gradient; --fp16 without --accumulate-allreduce-grads-in-fp32) are
  // widened piece by piece into the workspace's last row.
  const bool half_grads = is_half_precision(buffer.grad_dtype());
  const bool workspace = config.reuse_fp32_param || config.o2_optimizer || half_grads;
  static_assert(kWorkspaceElements % 8 == 0);
  for (int64_t k = 0; k < slices; ++k) {
    const int64_t lo = cuts[static_cast<size_t>(k)], hi = cuts[static_cast<size_t>(k) + 1];
    SwapSlice slice{lo, hi, pieces_.size(), 0, {}};
    for (size_t i = 0; i < segments_.size(); ++i) {
      const Segment& s = segments_[i];
      const int64_t a = std::max(lo, s.shard_offset), b = std::min(hi, s.shard_offset + (s.end - s.begin));
      for (int64_t p = a; p < b; p = workspace ? std::min(b, p + kWorkspaceElements) : b) {
        pieces_.push_back({static_cast<int>(i), p, workspace ? std::min(b, p + kWorkspaceElements) : b});
      }
    }
    slice.end_piece = pieces_.size();
    if (swap_tier_ && hi > lo) swap_slices_.push_back(std::move(slice));
  }

  const DType moment_dtype = config.o2_optimizer ? DType::kBFloat16 : DType::kFloat32;
  if (workspace) {
    const int64_t rows = half_grads ? kWorkspaceRows : kGradRow;  // the gradient row only when used
    workspace_ = device_zeros(backend, alloc, Shape{rows * kWorkspaceElements}, DType::kFloat32, MemoryCategory::kWorkspace);
  }
  if (config.ema()) ema_ = device_zeros(backend, alloc, Shape{shard_numel_}, DType::kFloat32, MemoryCategory::kOptimizerState);
  if (swap_tier_) {
    // Each slice is made resident, filled (master from the 16-bit weights, zero moments) and
    // written out before the next is made, so the state is never all resident at once.
    const int rows = half_params ? 3 : 2;
    for (SwapSlice& slice : swap_slices_) {
      const int64_t len = slice.hi - slice.lo;
      Tensor t = device_zeros(backend, alloc, Shape{rows * len}, DType::kFloat32,
                              MemoryCategory::kOptimizerState);
      if (half_params) {
        for (size_t k = slice.first_piece; k < slice.end_piece; ++k) {
          const Piece& pc = pieces_[k];
          const Segment& s = segments_[static_cast<size_t>(pc.segment)];
          widen_to_fp32(backend, param_dtype, t.f32() + (pc.lo - slice.lo), param_at(s, pc.lo - s.shard_offset),
                        pc.hi - pc.lo);
        }
      }
      slice.state = swap_tier_->swap_out(std::move(t));
      swap_tier_->synchronize();
    }
    return;
  }
  exp_avg_ = device_zeros(backend, alloc, Shape{shard_numel_}, moment_dtype, MemoryCategory::kOptimizerState);
  exp_avg_sq_ = device_zeros(backend, alloc, Shape{shard_numel_}, moment_dtype, MemoryCategory::kOptimizerState);
  if (config.reuse_fp32_param) {
    // The master starts as the bf16 weights exactly: residual zero, no exceptions.
    reuse_residual_ = device_zeros(backend, alloc, Shape{shard_numel_}, DType::kBFloat16, MemoryCategory::kOptimizerState);
  } else if (half_params) {
    // bf16 / fp16 params: fp32 main copies of the owned elements. fp32 params are their own
    // main copy (Megatron's FP32Optimizer / the distributed optimizer's view of an fp32 param).
    main_params_ = device_zeros(backend, alloc, Shape{shard_numel_}, DType::kFloat32, MemoryCategory::kOptimizerState);
    for (const Segment& s : segments_) {
      widen_to_fp32(backend, param_dtype, main_params_.f32() + s.shard_offset, param_of(s), s.end - s.begin);
    }
  }
  if (config.ema()) {
    // The EMA starts at the initial (master) weights.
    for (const Segment& s : segments_) {
      if (half_params) {
        widen_to_fp32(backend, param_dtype, ema_.f32() + s.shard_offset, param_of(s), s.end - s.begin);
      } else {
        const float* w = static_cast<const float*>(param_of(s));
        std::copy(w, w + (s.end - s.begin), ema_.f32() + s.shard_offset);
      }
    }
  }
}

Optimizer::~Optimizer() = default;

float* Optimizer::grad_of(const Segment& s) const {
  // FSDP optim_grads: only this rank's shards exist, laid out as the shard-local state.
  if (float* shards = buffer_.shard_grads()) return shards + s.shard_offset;
  MS_CHECK(buffer_.grad_data() != nullptr, "optimizer: the gradients are not fp32 (grad_of)");
  return buffer_.grad_data() + s.begin;
}

const float* Optimizer::fp32_grads(const Segment& s, int64_t offset, int64_t n) const {
  const void* narrow = buffer_.grad_data_half();
  if (narrow == nullptr) return grad_at(s, offset);
  MS_CHECK(n <= kWorkspaceElements, "optimizer: a 16-bit gradient piece longer than the workspace");
  float* wide = workspace_.f32() + kGradRow * kWorkspaceElements;
  const DType dtype = buffer_.grad_dtype();
  widen_to_fp32(backend_, dtype, wide, static_cast<const char*>(narrow) + (s.begin + offset) * dtype_size(dtype), n);
  if (half_grad_unscale_ != 1.0f) backend_.kernels.scale_inplace(backend_.context, wide, half_grad_unscale_, n);
  return wide;
}

void* Optimizer::param_of(const Segment& s) const {
  // FSDP optim_grads_params: the parameters too exist only as this rank's shards.
  const int64_t width = dtype_size(buffer_.param_dtype());
  if (void* shards = buffer_.param_shards()) return static_cast<char*>(shards) + s.shard_offset * width;
  return static_cast<char*>(buffer_.param_data()) + s.begin * width;
}

void* Optimizer::param_at(const Segment& s, int64_t offset) const {
  return static_cast<char*>(param_of(s)) + offset * dtype_size(buffer_.param_dtype());
}

const Optimizer::Segment& Optimizer::segment_at(int64_t shard_index) const {
  for (const Segment& s : segments_) {
    if (shard_index >= s.shard_offset && shard_index < s.shard_offset + (s.end - s.begin)) return s;
  }
  fatal("optimizer: shard element " + std::to_string(shard_index) + " is in no segment");
}

double Optimizer::grad_norm() const {
  double dense = 0.0, expert = 0.0;
  for (const Segment& s : segments_) {
    if (!s.in_grad_norm) continue;
    double& sum = s.expert ? expert : dense;
    if (buffer_.grad_dtype() == DType::kFloat32) {
      sum += backend_.kernels.sum_of_squares(backend_.context, grad_of(s), s.end - s.begin);
      continue;
    }
    for (int64_t at = 0; at < s.end - s.begin; at += kWorkspaceElements) {
      const int64_t n = std::min(kWorkspaceElements, s.end - s.begin - at);
      sum += backend_.kernels.sum_of_squares(backend_.context, fp32_grads(s, at, n), n);
    }
  }
  return std::sqrt(sum_over_model(dense, expert));
}

double Optimizer::sum_over_model(double dense, double expert) const {
  // Distributed: each rank holds its own shard (of the dense and the expert buckets); sum
  // over all ranks. Non-distributed: every data-parallel rank holds the same full gradient;
  // sum the dense part over the model-parallel group and the expert part over the
  // expert-model-parallel group (Megatron's separate norms of the two kinds, combined).
  if (distributed_) return ps_.world().all_reduce_scalar(dense + expert, ReduceOp::kSum);
  double total = ps_.mp().all_reduce_scalar(dense, ReduceOp::kSum);
  if (has_expert_params_) total += ps_.tp_ep_pp().all_reduce_scalar(expert, ReduceOp::kSum);
  return total;
}

double Optimizer::count_zero_grads() const {
  double dense = 0.0, expert = 0.0;
  for (const Segment& s : segments_) {
    if (!s.in_grad_norm) continue;
    int64_t zeros = 0;
    for (int64_t at = 0; at < s.end - s.begin; at += kWorkspaceElements) {
      const int64_t n = std::min(kWorkspaceElements, s.end - s.begin - at);
      const float* g = fp32_grads(s, at, n);
      zeros += backend_.kernels.count_zeros(backend_.context, g, n);
    }
    (s.expert ? expert : dense) += static_cast<double>(zeros);
  }
  return sum_over_model(dense, expert);
}

double Optimizer::params_norm() {
  // The fp32 main parameters (the weights themselves when fp32), piece by piece as the step
  // reads them: swapped slices are read back once each.
  double dense = 0.0, expert = 0.0;
  auto add = [&](const Piece& pc, float* slice, const SwapSlice* swap_slice) {
    const Segment& s = segments_[static_cast<size_t>(pc.segment)];
    if (!s.in_grad_norm) return;
    const PieceState st = load_piece(pc, slice, swap_slice);
    (s.expert ? expert : dense) += backend_.kernels.sum_of_squares(backend_.context, st.param, pc.hi - pc.lo);
  };
  if (swap_tier_ == nullptr) {
    for (const Piece& pc : pieces_) add(pc, nullptr, nullptr);
  } else {
    for (SwapSlice& slice : swap_slices_) {
      Tensor t = swap_tier_->swap_in(std::move(slice.state));
      for (size_t k = slice.first_piece; k < slice.end_piece; ++k) add(pieces_[k], t.f32(), &slice);
      slice.state = swap_tier_->swap_out(std::move(t));
    }
  }
  return std::sqrt(sum_over_model(dense, expert));
}

bool Optimizer::unscale_grads_and_check_for_nan() {
  const float inv_scale = grad_scaler_->inv_scale();
  const bool half_grads = buffer_.grad_data_half() != nullptr;
  half_grad_unscale_ = inv_scale;
  int64_t nonfinite = 0;
  for (const Segment& s : segments_) {
    const int64_t n = s.end - s.begin;
    if (!half_grads) {
      float* g = grad_at(s, 0);
      backend_.kernels.scale_inplace(backend_.context, g, inv_scale, n);
      nonfinite += backend_.kernels.count_nonfinite(backend_.context, g, n);
      continue;
    }
    for (int64_t at = 0; at < n; at += kWorkspaceElements) {
      const int64_t len = std::min(kWorkspaceElements, n - at);
      nonfinite += backend_.kernels.count_nonfinite(backend_.context, fp32_grads(s, at, len), len);
    }
  }
  // Megatron all-reduces found_inf (MAX) over the ranks that hold the rest of the gradients;
  // every rank must agree on skipping, so here over the world.
  return ps_.world().all_reduce_scalar(static_cast<double>(nonfinite), ReduceOp::kMax) > 0.0;
}

Optimizer::StepResult Optimizer::step(double lr) {
  StepResult result;
  half_grad_unscale_ = 1.0f;
  if (grad_scaler_) {
    const bool found_inf = unscale_grads_and_check_for_nan();
    grad_scaler_->update(found_inf);
    if (found_inf) {
      result.skipped = true;
      result.grad_norm = std::numeric_limits<double>::quiet_NaN();  // Megatron's None
      return result;
    }
  }
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
  std::vector<ReuseException> new_exceptions;
  if (swap_tier_ == nullptr) {
    for (const Piece& pc : pieces_) update_piece(pc, nullptr, nullptr, static_cast<float>(lr), scale, &new_exceptions);
  } else {
    // Slice i+1 is read back while slice i is updated; i is written out after its update.
    // (Prefetching after swap_in keeps at most three slices resident: swap_in(i) waited for
    // the write of slice i-2, queued before the read of slice i.)
    for (size_t i = 0; i < swap_slices_.size(); ++i) {
      SwapSlice& slice = swap_slices_[i];
      Tensor t = swap_tier_->swap_in(std::move(slice.state));
      if (i + 1 < swap_slices_.size()) swap_tier_->prefetch(swap_slices_[i + 1].state);
      for (size_t k = slice.first_piece; k < slice.end_piece; ++k) {
        update_piece(pieces_[k], t.f32(), &slice, static_cast<float>(lr), scale, &new_exceptions);
      }
      slice.state = swap_tier_->swap_out(std::move(t));
    }
  }
  if (config_.reuse_fp32_param) {
    std::sort(new_exceptions.begin(), new_exceptions.end());
    reuse_exceptions_ = std::move(new_exceptions);
  }
  return result;
}

Optimizer::PieceState Optimizer::load_piece(const Piece& pc, float* slice, const SwapSlice* swap_slice) {
  const Segment& s = segments_[static_cast<size_t>(pc.segment)];
  const int64_t n = pc.hi - pc.lo;
  const bool half_params = is_half_precision(buffer_.param_dtype());
  PieceState st;
  if (swap_slice != nullptr) {
    // The slice's rows: [master (16-bit params only), exp_avg, exp_avg_sq] x len.
    const int64_t len = swap_slice->hi - swap_slice->lo, at = pc.lo - swap_slice->lo;
    float* rows = slice + at;
    st.param = half_params ? rows : static_cast<float*>(param_at(s, pc.lo - s.shard_offset));
    if (half_params) rows += len;
    st.exp_avg = rows;
    st.exp_avg_sq = rows + len;
    return st;
  }
  float* ws = workspace_.empty() ? nullptr : workspace_.f32();
  if (config_.reuse_fp32_param) {
    st.param = ws;
    restore_fp32(static_cast<const bf16*>(param_at(s, pc.lo - s.shard_offset)),
                 reinterpret_cast<const int16_t*>(reuse_residual_.bf()) + pc.lo, n, pc.lo, reuse_exceptions_, st.param);
  } else {
    st.param = half_params ? main_params_.f32() + pc.lo : static_cast<float*>(param_at(s, pc.lo - s.shard_offset));
  }
  if (config_.o2_optimizer) {
    st.exp_avg = ws + kExpAvgRow * kWorkspaceElements;
    st.exp_avg_sq = ws + kExpAvgSqRow * kWorkspaceElements;
    backend_.kernels.convert_to_fp32(backend_.context, st.exp_avg, exp_avg_.bf() + pc.lo, n);
    backend_.kernels.convert_to_fp32(backend_.context, st.exp_avg_sq, exp_avg_sq_.bf() + pc.lo, n);
  } else {
    st.exp_avg = exp_avg_.f32() + pc.lo;
    st.exp_avg_sq = exp_avg_sq_.f32() + pc.lo;
  }
  return st;
}

void Optimizer::store_piece(const Piece& pc, const PieceState& st, std::vector<ReuseException>* new_exceptions) {
  const Segment& s = segments_[static_cast<size_t>(pc.segment)];
  const int64_t n = pc.hi - pc.lo;
  if (config_.o2_optimizer) {
    backend_.kernels.convert_to_bf16(backend_.context, exp_avg_.bf() + pc.lo, st.exp_avg, n);
    backend_.kernels.convert_to_bf16(backend_.context, exp_avg_sq_.bf() + pc.lo, st.exp_avg_sq, n);
  }
  if (!is_half_precision(buffer_.param_dtype())) return;  // fp32 params were updated in place
  void* model = param_at(s, pc.lo - s.shard_offset);
  if (config_.reuse_fp32_param) {
    split_fp32(st.param, n, static_cast<bf16*>(model), reinterpret_cast<int16_t*>(reuse_residual_.bf()) + pc.lo, pc.lo,
               new_exceptions);
  } else {
    narrow_from_fp32(backend_, buffer_.param_dtype(), model, st.param, n);
  }
}

void Optimizer::update_piece(const Piece& pc, float* slice, const SwapSlice* swap_slice, float lr, float grad_scale,
                             std::vector<ReuseException>* new_exceptions) {
  const Segment& s = segments_[static_cast<size_t>(pc.segment)];
  const int64_t n = pc.hi - pc.lo;
  const PieceState st = load_piece(pc, slice, swap_slice);
  backend_.kernels.adamw_step(backend_.context, st.param, st.exp_avg, st.exp_avg_sq,
                              fp32_grads(s, pc.lo - s.shard_offset, n), n, lr, config_.adam_beta1, config_.adam_beta2, config_.adam_eps,
                              s.weight_decay ? config_.weight_decay : 0.0f, step_, grad_scale);
  if (config_.ema()) backend_.kernels.ema_update(backend_.context, ema_.f32() + pc.lo, st.param, n, config_.ema_decay);
  store_piece(pc, st, new_exceptions);
}

bool Optimizer::has_state(OptimizerState kind) const {
  switch (kind) {
    case OptimizerState::kMainParam: return is_half_precision(buffer_.param_dtype());
    case OptimizerState::kExpAvg:
    case OptimizerState::kExpAvgSq: return true;
    case OptimizerState::kEma: return config_.ema();
  }
  return false;
}

template <typename Fn>
void Optimizer::for_state_range(int64_t lo, int64_t hi, bool write_back, Fn&& fn) {
  // Pieces of [lo, hi) as the step would cut them (one segment, slices, workspace size).
  const Segment& s = segment_at(lo);
  MS_CHECK(hi <= s.shard_offset + (s.end - s.begin), "optimizer state range [", lo, ", ", hi, ") spans segments");
  const int seg = static_cast<int>(&s - segments_.data());
  std::vector<ReuseException> new_exceptions;
  auto run = [&](int64_t a, int64_t b, float* slice, const SwapSlice* swap_slice) {
    for (int64_t p = a; p < b; p += kWorkspaceElements) {
      const Piece pc{seg, p, std::min(b, p + kWorkspaceElements)};
      const PieceState st = load_piece(pc, slice, swap_slice);
      fn(pc, st);
      if (write_back) store_piece(pc, st, &new_exceptions);
    }
  };
  if (swap_tier_ == nullptr) {
    run(lo, hi, nullptr, nullptr);
  } else {
    for (SwapSlice& slice : swap_slices_) {
      const int64_t a = std::max(lo, slice.lo), b = std::min(hi, slice.hi);
      if (a >= b) continue;
      Tensor t = swap_tier_->swap_in(std::move(slice.state));
      run(a, b, t.f32(), &slice);
      slice.state = swap_tier_->swap_out(std::move(t));
    }
  }
  if (write_back && config_.reuse_fp32_param) {
    // Replace the exceptions of [lo, hi) by the new ones.
    std::erase_if(reuse_exceptions_, [&](const ReuseException& e) { return e.index >= lo && e.index < hi; });
    reuse_exceptions_.insert(reuse_exceptions_.end(), new_exceptions.begin(), new_exceptions.end());
    std::sort(reuse_exceptions_.begin(), reuse_exceptions_.end());
  }
}

void Optimizer::read_state(OptimizerState kind, int64_t shard_begin, int64_t n, float* out) {
  MS_CHECK(has_state(kind), "optimizer: no such state");
  const KernelTable& k = backend_.kernels;
  if (kind == OptimizerState::kEma) {
    k.copy_to_host(backend_.context, out, ema_.f32() + shard_begin, n * 4);
    return;
  }
  for_state_range(shard_begin, shard_begin + n, /*write_back=*/false, [&](const Piece& pc, const PieceState& st) {
    k.copy_to_host(backend_.context, out + (pc.lo - shard_begin), st.of(kind), (pc.hi - pc.lo) * 4);
  });
}

void Optimizer::write_state(OptimizerState kind, int64_t shard_begin, int64_t n, const float* in) {
  MS_CHECK(has_state(kind), "optimizer: no such state");
  const KernelTable& k = backend_.kernels;
  if (kind == OptimizerState::kEma) {
    k.copy_to_device(backend_.context, ema_.f32() + shard_begin, in, n * 4);
    return;
  }
  for_state_range(shard_begin, shard_begin + n, /*write_back=*/true, [&](const Piece& pc, const PieceState& st) {
    k.copy_to_device(backend_.context, st.of(kind), in + (pc.lo - shard_begin), (pc.hi - pc.lo) * 4);
  });
}

std::vector<OwnedRange> owned_ranges(const Parameter& p, const Optimizer& optimizer) {
  std::vector<OwnedRange> out;
  const int64_t p_lo = p.buffer_offset, p_hi = p.buffer_offset + p.local_shape.numel();
  for (const Optimizer::Segment& s : optimizer.segments()) {
    const int64_t lo = std::max(s.begin, p_lo), hi = std::min(s.end, p_hi);
    if (lo < hi) out.push_back({lo - p_lo, hi - p_lo, s.shard_offset + (lo - s.begin)});
  }
  return out;
}

}  // namespace mindspeed
