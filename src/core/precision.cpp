// bf16 storage helpers (precision.h).
#include "core/precision.h"

namespace mindspeed {

void round_to_bf16_inplace(float* x, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] = round_to_bf16(x[i]);
}

void convert_to_bf16(bf16* out, const float* in, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(in[i]);
}

void convert_to_fp32(float* out, const bf16* in, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(in[i]);
}

void compact_to_bf16(Allocator& alloc, Tensor& t, MemoryCategory category) {
  if (t.empty() || t.dtype() != DType::kFloat32) return;
  Tensor out(alloc, t.shape(), DType::kBFloat16, category);
  convert_to_bf16(out.bf(), t.f32(), t.numel());
  t = std::move(out);
}

void expand_to_fp32(Allocator& alloc, Tensor& t, MemoryCategory category) {
  if (t.empty() || t.dtype() != DType::kBFloat16) return;
  Tensor out(alloc, t.shape(), DType::kFloat32, category);
  convert_to_fp32(out.f32(), t.bf(), t.numel());
  t = std::move(out);
}

}  // namespace mindspeed
