// ComputeWeights (compute_weights.h) and ForwardContext::w (forward_context.h).
#include "module/compute_weights.h"

#include "core/check.h"
#include "kernels/half_precision.h"
#include "module/forward_context.h"

namespace mindspeed {

void ComputeWeights::convert(const Backend& backend, Allocator& alloc, const std::vector<Parameter*>& params) {
  MS_CHECK(converted_.empty() && storage_.empty(), "ComputeWeights converts once");
  int64_t total = 0;
  for (const Parameter* p : params) {
    if (is_half_precision(p->data.dtype)) total += p->local_shape.numel();
  }
  if (total == 0) return;
  storage_ = Tensor(alloc, Shape{total}, DType::kFloat32, MemoryCategory::kWorkspace);
  float* at = storage_.f32();
  for (const Parameter* p : params) {
    if (!is_half_precision(p->data.dtype)) continue;
    widen_to_fp32(backend, p->data.dtype, at, p->data.data, p->local_shape.numel());
    converted_.emplace_back(p, at);
    at += p->local_shape.numel();
  }
}

const float* ComputeWeights::find(const Parameter& p) const {
  for (const auto& [param, values] : converted_)
    if (param == &p) return values;
  return nullptr;
}

const float* ForwardContext::w(const Parameter& p) const {
  if (p.data.dtype == DType::kFloat32) return p.data.f32();
  const float* converted = weights != nullptr ? weights->find(p) : nullptr;
  MS_CHECK(converted != nullptr, "16-bit parameter ", p.spec.name, " used outside the ModuleScope that owns it");
  return converted;
}

}  // namespace mindspeed
