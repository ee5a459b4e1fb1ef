// Element types: fp32, bf16 and fp16. On CPU, bf16 and fp16 are storage formats; math runs
// in fp32 (round-to-nearest-even on store, exact widening on load), as on GPUs without 16-bit
// FMA. fp16 overflows to infinity above 65504 (what --fp16's loss scaler watches for).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace mindspeed {

enum class DType : uint8_t { kFloat32, kBFloat16, kInt32, kInt64, kUInt8, kFloat16 };

constexpr int64_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kBFloat16: return 2;
    case DType::kFloat16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kUInt8: return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype);

/// bf16 or fp16: the 16-bit float storage formats of --bf16 and --fp16.
constexpr bool is_half_precision(DType dtype) { return dtype == DType::kBFloat16 || dtype == DType::kFloat16; }

/// bfloat16 bits.
struct bf16 {
  uint16_t bits = 0;
};

MS_HOST_DEVICE inline float bf16_to_float(bf16 value) {
  return float_from_bits(static_cast<uint32_t>(value.bits) << 16);
}

/// Round-to-nearest-even, NaN stays NaN (quiet).
MS_HOST_DEVICE inline bf16 float_to_bf16(float value) {
  const uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((bits >> 16) | 0x40u)};
  const uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return bf16{static_cast<uint16_t>((bits + rounding_bias) >> 16)};
}

/// Rounds an fp32 value to the nearest bf16 value, kept in fp32.
MS_HOST_DEVICE inline float round_to_bf16(float value) {
  return bf16_to_float(float_to_bf16(value));
}

/// IEEE half (binary16) bits.
struct fp16 {
  uint16_t bits = 0;
};

/// IEEE half (F16) to float, subnormals included.
MS_HOST_DEVICE inline float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return float_from_bits(bits);
}

MS_HOST_DEVICE inline float fp16_to_float(fp16 value) { return half_to_float(value.bits); }

/// Round-to-nearest-even to IEEE half: magnitudes from 65520 up become infinity (as a CUDA
/// cast does), values below 2^-14 become subnormals or zero, NaN stays NaN (quiet).
MS_HOST_DEVICE inline fp16 float_to_fp16(float value) {
  const uint32_t bits = float_bits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return fp16{static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu))};
  if (abs >= 0x477ff000u) return fp16{static_cast<uint16_t>(sign | 0x7c00u)};  // >= 65520: inf
  if (abs < 0x38800000u) {
    // Below the smallest normal half (2^-14): a subnormal, m * 2^-24, rounded to nearest even.
    if (abs < 0x33000000u) return fp16{sign};  // below 2^-25: rounds to zero
    const uint32_t exp = abs >> 23, mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14..24: value = mant * 2^(exp-150), half unit 2^-24
    const uint32_t rounded = mant >> shift, rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    const uint32_t up = rest > half || (rest == half && (rounded & 1u)) ? 1u : 0u;
    return fp16{static_cast<uint16_t>(sign | (rounded + up))};
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even (a carry
  // into the exponent is the right result, up to infinity at the top).
  const uint32_t rebased = abs - ((127u - 15u) << 23);
  const uint32_t rounded = (rebased + 0xfffu + ((rebased >> 13) & 1u)) >> 13;
  return fp16{static_cast<uint16_t>(sign | rounded)};
}

/// Rounds an fp32 value to the nearest fp16 value, kept in fp32 (infinity above the range).
MS_HOST_DEVICE inline float round_to_fp16(float value) {
  return fp16_to_float(float_to_fp16(value));
}

}  // namespace mindspeed
