// bf16 storage helpers: activations and parameters are kept in bf16 with --bf16 while every
// kernel computes in fp32 (CPUs without bf16 FMA): values are rounded to bf16 where a bf16
// tensor would be written, stored compactly between forward and backward, and widened back.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace mindspeed {

/// x[i] = round_to_bf16(x[i]) (round to nearest even), in parallel.
void round_to_bf16_inplace(float* x, int64_t n);
/// out[i] = bf16(in[i]) / float(in[i]).
void convert_to_bf16(bf16* out, const float* in, int64_t n);
void convert_to_fp32(float* out, const bf16* in, int64_t n);
/// Replaces an fp32 tensor by its bf16 copy (same shape and category); bf16 stays as is.
void compact_to_bf16(Allocator& alloc, Tensor& t, MemoryCategory category);
/// Replaces a bf16 tensor by its fp32 copy; fp32 stays as is.
void expand_to_fp32(Allocator& alloc, Tensor& t, MemoryCategory category);

}  // namespace mindspeed
