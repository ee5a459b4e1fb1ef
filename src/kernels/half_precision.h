// The 16-bit float formats of --bf16 and --fp16 behind one call: conversions between fp32
// and a storage dtype (kBFloat16 or kFloat16), rounding in place and accumulation, each
// dispatched to the format's kernel. Code that handles either format (parameters, saved
// activations, gradient buffers, checkpoints) calls these with the tensor's dtype.
#pragma once

#include <cstdint>

#include "core/check.h"
#include "core/dtype.h"
#include "kernels/backend.h"

namespace mindspeed {

/// out[0, n) = fp32 of the 16-bit values in[0, n) (dtype kBFloat16 or kFloat16).
inline void widen_to_fp32(const Backend& b, DType dtype, float* out /*[n] =*/, const void* in /*[n]*/, int64_t n) {
  if (dtype == DType::kFloat16) {
    b.kernels.convert_fp16_to_fp32(b.context, out, static_cast<const fp16*>(in), n);
  } else {
    MS_DCHECK(dtype == DType::kBFloat16, "widen_to_fp32: ", dtype_name(dtype), " is not a 16-bit float");
    b.kernels.convert_to_fp32(b.context, out, static_cast<const bf16*>(in), n);
  }
}

/// out[0, n) = in[0, n) rounded to nearest even into the 16-bit dtype.
inline void narrow_from_fp32(const Backend& b, DType dtype, void* out /*[n] =*/, const float* in /*[n]*/, int64_t n) {
  if (dtype == DType::kFloat16) {
    b.kernels.convert_to_fp16(b.context, static_cast<fp16*>(out), in, n);
  } else {
    MS_DCHECK(dtype == DType::kBFloat16, "narrow_from_fp32: ", dtype_name(dtype), " is not a 16-bit float");
    b.kernels.convert_to_bf16(b.context, static_cast<bf16*>(out), in, n);
  }
}

/// x[0, n) = the nearest value of the 16-bit dtype, kept in fp32 (what a kernel writing that
/// dtype would have stored).
inline void round_to_half(const Backend& b, DType dtype, float* x /*[n]*/, int64_t n) {
  if (dtype == DType::kFloat16) {
    b.kernels.round_to_fp16(b.context, x, n);
  } else {
    MS_DCHECK(dtype == DType::kBFloat16, "round_to_half: ", dtype_name(dtype), " is not a 16-bit float");
    b.kernels.round_to_bf16(b.context, x, n);
  }
}

/// acc[0, n) = 16-bit(float(acc) + x): a 16-bit accumulator's add.
inline void add_into_half(const Backend& b, DType dtype, void* acc /*[n] +=*/, const float* x /*[n]*/, int64_t n) {
  if (dtype == DType::kFloat16) {
    b.kernels.add_into_fp16(b.context, static_cast<fp16*>(acc), x, n);
  } else {
    MS_DCHECK(dtype == DType::kBFloat16, "add_into_half: ", dtype_name(dtype), " is not a 16-bit float");
    b.kernels.add_into_bf16(b.context, static_cast<bf16*>(acc), x, n);
  }
}

}  // namespace mindspeed
