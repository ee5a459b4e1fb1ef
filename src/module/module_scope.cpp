// ModuleScope and the bf16 storage helpers (module_scope.h).
#include "module/module_scope.h"

#include "module/weight_grad_queue.h"

namespace mindspeed {

ModuleScope::ModuleScope(const ForwardContext& outer, const std::vector<Parameter*>& params, Pass pass)
    : params_(params), ctx_(outer) {
  // First wait for the parameters (a pending all-gather writes them), then read them.
  if (pass == Pass::kForward && outer.hooks != nullptr) outer.hooks->before_forward(params);
  if (pass == Pass::kBackward && outer.hooks != nullptr && outer.training) outer.hooks->before_backward(params);
  weights_.convert(*outer.backend, *outer.alloc, params);
  ctx_.weights = &weights_;
}

ModuleScope::~ModuleScope() {
  if (ctx_.hooks != nullptr) ctx_.hooks->after_use(params_);
}

void notify_grads_ready(const ForwardContext& ctx, const std::vector<Parameter*>& params) {
  if (ctx.hooks == nullptr || params.empty()) return;
  if (ctx.wgrad_queue != nullptr) {
    ctx.wgrad_queue->push([params](const ForwardContext& run) {
      if (run.hooks != nullptr) run.hooks->grads_ready(params);
    });
    return;
  }
  ctx.hooks->grads_ready(params);
}

void compact_to_bf16(const ForwardContext& ctx, Tensor& t) {
  if (t.empty() || t.dtype() != DType::kFloat32) return;
  Tensor out(*ctx.alloc, t.shape(), DType::kBFloat16, MemoryCategory::kActivations);
  ctx.k().convert_to_bf16(ctx.kc(), out.bf(), t.f32(), t.numel());
  t = std::move(out);
}

void expand_to_fp32(const ForwardContext& ctx, Tensor& t) {
  if (t.empty() || t.dtype() != DType::kBFloat16) return;
  Tensor out(*ctx.alloc, t.shape(), DType::kFloat32, MemoryCategory::kActivations);
  ctx.k().convert_to_fp32(ctx.kc(), out.f32(), t.bf(), t.numel());
  t = std::move(out);
}

void round_if_bf16(const ForwardContext& ctx, Tensor& t) {
  if (ctx.bf16 && !t.empty()) ctx.k().round_to_bf16(ctx.kc(), t.f32(), t.numel());
}

}  // namespace mindspeed
