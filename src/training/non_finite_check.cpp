// Non-finite loss/gradient diagnosis and the loaded-weights check (non_finite_check.h).
#include "training/non_finite_check.h"

#include <cmath>
#include <vector>

#include "kernels/half_precision.h"
#include "module/compute_weights.h"

namespace mindspeed {
namespace {

// Non-finite elements of a parameter's weights (fp32, bf16 or fp16 storage).
int64_t nonfinite_weights(const Parameter& p, const Backend& backend, Allocator& alloc) {
  // FSDP optim_grads_params: between uses a parameter exists only as data-parallel shards
  // (not inspected here).
  if (p.data.data == nullptr) return 0;
  if (p.data.dtype == DType::kFloat32) {
    return backend.kernels.count_nonfinite(backend.context, p.data.f32(), p.local_shape.numel());
  }
  const ComputeWeights fp32(backend, alloc, {const_cast<Parameter*>(&p)});
  return backend.kernels.count_nonfinite(backend.context, fp32.find(p), p.local_shape.numel());
}

// Non-finite elements of a parameter's gradient (fp32, or 16-bit: --o2-gradient, --fp16).
int64_t nonfinite_grads(const Parameter& p, const Backend& backend, Allocator& alloc) {
  // FSDP optim_grads: the full gradient exists only during the unit's backward.
  if (p.main_grad.empty()) return 0;
  const int64_t n = p.local_shape.numel();
  if (p.main_grad.dtype == DType::kFloat32) return backend.kernels.count_nonfinite(backend.context, p.g(), n);
  Tensor wide(alloc, Shape{n}, DType::kFloat32, MemoryCategory::kWorkspace);
  widen_to_fp32(backend, p.main_grad.dtype, wide.f32(), p.main_grad.data, n);
  return backend.kernels.count_nonfinite(backend.context, wide.f32(), n);
}

std::string rank_list(const std::vector<float>& flags, int stride, int field) {
  std::string out;
  for (size_t r = 0; r * stride < flags.size(); ++r) {
    if (flags[r * stride + field] > 0.0f) out += (out.empty() ? "" : ", ") + std::to_string(r);
  }
  return out.empty() ? "none" : out;
}

}  // namespace

Status check_weights_finite(const ParameterRegistry& registry, const Backend& backend, Allocator& alloc,
                            const std::string& source) {
  for (const auto& p : registry.params()) {
    const int64_t bad = nonfinite_weights(*p, backend, alloc);
    if (bad > 0) {
      return invalid_argument("the weights loaded from ", source, " hold ", bad, " NaN or infinite value(s) in ",
                              p->spec.name, "; the checkpoint is damaged: load an earlier one");
    }
  }
  return ok_status();
}

Status diagnose_non_finite(const ParameterRegistry& registry, const ParallelState& ps, const Backend& backend,
                           Allocator& alloc, int64_t iteration, double local_loss_sum) {
  // This rank's facts: [loss not finite, index+1 of the first parameter with a non-finite
  // gradient (0 = none), weights not finite].
  constexpr int kFields = 3;
  std::vector<float> mine(kFields, 0.0f);
  mine[0] = std::isfinite(local_loss_sum) ? 0.0f : 1.0f;
  const auto& params = registry.params();
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    if (mine[1] == 0.0f && nonfinite_grads(p, backend, alloc) > 0) mine[1] = static_cast<float>(i + 1);
    if (mine[2] == 0.0f && nonfinite_weights(p, backend, alloc) > 0) mine[2] = 1.0f;
  }
  ProcessGroup& world = ps.world();
  std::vector<float> all(static_cast<size_t>(kFields) * world.size());
  world.all_gather(all.data(), mine.data(), kFields);
  // The reporter: the lowest rank with a non-finite gradient, else the lowest with a
  // non-finite loss, else rank 0.
  int reporter = -1;
  for (int field : {1, 0}) {
    for (int r = 0; r < world.size() && reporter < 0; ++r)
      if (all[r * kFields + field] > 0.0f) reporter = r;
  }
  if (reporter < 0) reporter = 0;
  if (world.rank() != reporter) return aborted("");
  bool any_weights = false, any_loss = false, any_grad = false;
  for (int r = 0; r < world.size(); ++r) {
    any_loss = any_loss || all[r * kFields + 0] > 0.0f;
    any_grad = any_grad || all[r * kFields + 1] > 0.0f;
    any_weights = any_weights || all[r * kFields + 2] > 0.0f;
  }
  std::string where = "no gradient is non-finite on any rank";
  if (mine[1] > 0.0f) {
    where = str_cat("the first parameter with a non-finite gradient on rank ", world.rank(), " (tp ", ps.tp_rank,
                    ", pp ", ps.pp_rank, ", dp ", ps.dp_rank, ") is ",
                    params[static_cast<size_t>(mine[1]) - 1]->spec.name);
  }
  const char* cause =
      any_weights ? "the weights were already non-finite before this iteration (an earlier update, or the "
                    "loaded checkpoint)"
      : any_loss ? "the forward pass produced it: weights and inputs were finite, the loss is not (an exploding "
                   "model: lower --lr, raise --lr-warmup-iters or use --clip-grad)"
                 : "the backward pass produced it: weights, inputs and the loss were finite, a gradient is not "
                   "(an exploding model: lower --lr or use --clip-grad)";
  return aborted("iteration ", iteration, ": the loss or gradient is not finite (Megatron's "
                 "check_for_nan_in_loss_and_grad; --no-check-for-nan-in-loss-and-grad turns it off). Loss not "
                 "finite on rank(s) ", rank_list(all, kFields, 0), "; gradient not finite on rank(s) ",
                 rank_list(all, kFields, 1), "; ", where, ". Cause: ", cause,
                 ". Input token ids were checked against the vocabulary when the batch was made. The update of "
                 "this iteration was skipped.");
}

}  // namespace mindspeed
