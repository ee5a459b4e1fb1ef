// MoELayer (moe_layer.h).
#include "transformer/moe/moe_layer.h"

#include <cmath>

#include "module/module_scope.h"

namespace mindspeed {

MoELayer::MoELayer(ParameterRegistry& registry, const std::string& prefix, const ModelConfig& config,
                   int64_t layer_index, const ExpertPlacement& placement, int tp_size, bool sequence_parallel)
    : hidden_(config.hidden_size),
      router_(registry, prefix + ".router", config, layer_index, sequence_parallel),
      dispatcher_(config, placement.ep_rank * (config.moe.num_experts / placement.ep_size),
                  config.moe.num_experts / placement.ep_size),
      experts_(registry, prefix + ".experts", config, placement.ep_rank * (config.moe.num_experts / placement.ep_size),
               config.moe.num_experts / placement.ep_size, placement.etp_size),
      overlap_(config.moe.shared_expert_overlap || config.moe.alltoall_overlap_comm ||
               config.moe.allgather_overlap_comm) {
  if (config.moe.shared_expert_intermediate_size > 0) {
    shared_experts_ = std::make_unique<MLP>(registry, prefix + ".shared_experts", config, tp_size, sequence_parallel,
                                            config.moe.shared_expert_intermediate_size);
    if (config.moe.shared_expert_gate) {
      shared_gate_ = registry.add({.name = prefix + ".shared_experts.gate_weight",
                                   .global_shape = Shape{1, config.hidden_size},
                                   .init = InitMethod::kNormal,
                                   .init_std = config.init_method_std,
                                   .sequence_parallel = sequence_parallel},
                                  1);
    }
  }
}

void MoELayer::shared_forward(const ForwardContext& ctx, const float* x, int64_t N, Saved& saved) const {
  const int64_t n = ctx.local_rows(N), h = hidden_;
  saved.shared_out = Tensor(*ctx.alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kActivations);
  shared_experts_->forward(ctx, x, N, saved.shared_out.f32(), saved.shared);
  if (shared_gate_ == nullptr) return;
  // The n scores on the host (a sigmoid each), applied by the kernels.
  Tensor logit(*ctx.alloc, Shape{n}, DType::kFloat32, MemoryCategory::kWorkspace);
  ctx.k().linear_forward(ctx.kc(), logit.f32(), x, ctx.w(*shared_gate_), nullptr, n, h, 1);
  std::vector<float> score = host_copy_of(*ctx.backend, logit.f32(), n);
  for (float& s : score) s = 1.0f / (1.0f + std::exp(-s));
  saved.gate_score = device_copy_of(*ctx.backend, *ctx.alloc, score, MemoryCategory::kActivations);
}

void MoELayer::shared_backward(const ForwardContext& ctx, Saved& saved, const float* x, const float* dout,
                               float* dx_shared, int64_t N) const {
  const int64_t n = ctx.local_rows(N), h = hidden_;
  if (shared_gate_ == nullptr) {
    shared_experts_->backward(ctx, saved.shared, x, dout, dx_shared, N);
    return;
  }
  // out += shared * s, s = sigmoid(x . g): dshared = dout * s; dlogit = <dout, shared> s (1 - s).
  Tensor dshared(*ctx.alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kWorkspace);
  ctx.k().scale_rows(ctx.kc(), dshared.f32(), dout, saved.gate_score.f32(), n, h);
  // The row dot products in double on the host (dout and the shared output copied there).
  const std::vector<float> score = host_copy_of(*ctx.backend, saved.gate_score.f32(), n);
  const std::vector<float> dout_host = host_copy_of(*ctx.backend, dout, n * h);
  const std::vector<float> shared_host = host_copy_of(*ctx.backend, saved.shared_out.f32(), n * h);
  std::vector<float> dlogit(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    const float s = score[r];
    double dot = 0.0;
    for (int64_t c = 0; c < h; ++c)
      dot += static_cast<double>(dout_host[r * h + c]) * shared_host[r * h + c];
    dlogit[r] = static_cast<float>(dot) * s * (1.0f - s);
  }
  const Tensor dlogit_device =
      device_copy_of(*ctx.backend, *ctx.alloc, dlogit, MemoryCategory::kWorkspace);
  accumulate_weight_grad(ctx, shared_gate_, nullptr, dlogit_device.f32(), x, Tensor(), n, h, 1);
  shared_experts_->backward(ctx, saved.shared, x, dshared.f32(), dx_shared, N);
  Tensor dgate(*ctx.alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kWorkspace);
  ctx.k().linear_backward_input(ctx.kc(), dgate.f32(), dlogit_device.f32(), ctx.w(*shared_gate_), n,
                                h, 1,
                                /*accumulate=*/false);
  ctx.k().add_inplace(ctx.kc(), dx_shared, dgate.f32(), n * h);
}

void MoELayer::forward(const ForwardContext& ctx, const MicroBatch& mb, const float* x, int64_t N, float* out,
                       Saved& saved) const {
  const int64_t n = ctx.local_rows(N), h = hidden_;
  router_.forward(ctx, mb, x, n, saved.router);
  dispatcher_.start_dispatch(ctx, x, n, saved.router.probs.data(), saved.router.routing_map.data(), saved.dispatch);
  // With overlap the shared experts compute while the dispatch is in flight; without, after
  // the combine (Megatron's order). Either way their output is added last.
  if (shared_experts_ && overlap_) shared_forward(ctx, x, N, saved);
  saved.expert_input = dispatcher_.finish_dispatch(ctx, saved.dispatch);
  round_if_half(ctx, saved.expert_input);
  Tensor y(*ctx.alloc, Shape{saved.expert_input.shape()[0], h}, DType::kFloat32, MemoryCategory::kActivations);
  experts_.forward(ctx, saved.expert_input.f32(), saved.dispatch.tokens_per_expert, y.f32(), saved.experts);
  dispatcher_.start_combine(ctx, std::move(y), saved.dispatch);
  dispatcher_.finish_combine(ctx, out, saved.dispatch);
  if (!shared_experts_) return;
  if (!overlap_) shared_forward(ctx, x, N, saved);
  if (shared_gate_ == nullptr) {
    ctx.k().add_inplace(ctx.kc(), out, saved.shared_out.f32(), n * h);
    saved.shared_out.reset();
    return;
  }
  Tensor gated(*ctx.alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kWorkspace);
  ctx.k().scale_rows(ctx.kc(), gated.f32(), saved.shared_out.f32(), saved.gate_score.f32(), n, h);
  ctx.k().add_inplace(ctx.kc(), out, gated.f32(), n * h);
}

void MoELayer::backward(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved, const float* x,
                        const float* dout, float* dx, int64_t N) const {
  const int64_t n = ctx.local_rows(N), h = hidden_;
  const int64_t E = static_cast<int64_t>(saved.router.probs.size()) / std::max<int64_t>(n, 1);
  Tensor dx_shared, dx_router;
  auto run_shared = [&] {
    if (!shared_experts_) return;
    dx_shared = Tensor(*ctx.alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kWorkspace);
    shared_backward(ctx, saved, x, dout, dx_shared.f32(), N);
  };
  std::vector<float> dprobs(static_cast<size_t>(n * E));
  auto run_router = [&] {
    dx_router = device_zeros(*ctx.backend, *ctx.alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kWorkspace);
    router_.backward(ctx, mb, saved.router, x, dprobs.data(), dx_router.f32(), n);
  };
  // Overlap: the shared experts' backward while the combine's gradient travels, the router's
  // while the dispatch's does. The sums at the end are the same in either order of work.
  dispatcher_.start_combine_backward(ctx, dout, saved.dispatch);
  if (overlap_) run_shared();
  Tensor dy = dispatcher_.finish_combine_backward(ctx, dprobs.data(), saved.dispatch);
  Tensor dinput(*ctx.alloc, saved.expert_input.shape(), DType::kFloat32, MemoryCategory::kWorkspace);
  experts_.backward(ctx, saved.experts, saved.expert_input.f32(), dy.f32(), saved.dispatch.tokens_per_expert,
                    dinput.f32());
  dy.reset();
  dispatcher_.start_dispatch_backward(ctx, dinput.f32(), saved.dispatch);
  if (overlap_) run_router();
  dispatcher_.finish_dispatch_backward(ctx, dx, saved.dispatch);
  dinput.reset();
  if (!overlap_) {
    run_router();
    run_shared();
  }
  ctx.k().add_inplace(ctx.kc(), dx, dx_router.f32(), n * h);
  if (shared_experts_) ctx.k().add_inplace(ctx.kc(), dx, dx_shared.f32(), n * h);
}

}  // namespace mindspeed
