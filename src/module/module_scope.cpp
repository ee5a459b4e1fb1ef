// ModuleScope and the 16-bit (bf16 / fp16) storage helpers (module_scope.h).
#include "module/module_scope.h"

#include "kernels/half_precision.h"
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

void compact_to_half(const ForwardContext& ctx, Tensor& t) {
  if (t.empty() || t.dtype() != DType::kFloat32 || !ctx.half_precision()) return;
  Tensor out(*ctx.alloc, t.shape(), ctx.half_dtype(), MemoryCategory::kActivations);
  narrow_from_fp32(*ctx.backend, ctx.half_dtype(), out.data(), t.f32(), t.numel());
  t = std::move(out);
}

void expand_to_fp32(const ForwardContext& ctx, Tensor& t) {
  if (t.empty() || !is_half_precision(t.dtype())) return;
  Tensor out(*ctx.alloc, t.shape(), DType::kFloat32, MemoryCategory::kActivations);
  widen_to_fp32(*ctx.backend, t.dtype(), out.f32(), t.data(), t.numel());
  t = std::move(out);
}

void round_if_half(const ForwardContext& ctx, Tensor& t) {
  if (ctx.half_precision() && !t.empty()) round_to_half(*ctx.backend, ctx.half_dtype(), t.f32(), t.numel());
}

void round_if_fp16(const ForwardContext& ctx, float* x /*[n]*/, int64_t n) {
  if (ctx.fp16 && n > 0) ctx.k().round_to_fp16(ctx.kc(), x, n);
}

}  // namespace mindspeed
