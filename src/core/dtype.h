// Element types: fp32 and bf16. On CPU, bf16 is a storage format; math runs in fp32
// (round-to-nearest-even on store, exact widening on load), as on GPUs without bf16 FMA.
#pragma once

#include <cstdint>
#include <cstring>

namespace mindspeed {

enum class DType : uint8_t { kFloat32, kBFloat16, kInt32, kInt64, kUInt8 };

constexpr int64_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kBFloat16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kUInt8: return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype);

/// bfloat16 bits.
struct bf16 {
  uint16_t bits = 0;
};

inline float bf16_to_float(bf16 value) {
  const uint32_t bits = static_cast<uint32_t>(value.bits) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

/// Round-to-nearest-even, NaN stays NaN (quiet).
inline bf16 float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((bits >> 16) | 0x40u)};
  const uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return bf16{static_cast<uint16_t>((bits + rounding_bias) >> 16)};
}

/// Rounds an fp32 value to the nearest bf16 value, kept in fp32.
inline float round_to_bf16(float value) { return bf16_to_float(float_to_bf16(value)); }

/// IEEE half (F16) to float, subnormals included.
inline float half_to_float(uint16_t h) {
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
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

}  // namespace mindspeed
