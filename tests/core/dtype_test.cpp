// bf16 and fp16 conversion: round-to-nearest-even, exact widening, NaN/inf, fp16's overflow
// to infinity and its subnormals (checked over every one of the 65536 fp16 values).
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace mindspeed {
namespace {

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256).bits, 0x3f80);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up.
  EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256).bits, 0x3f82);
  EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
  EXPECT_EQ(round_to_bf16(3.14159265f), 3.140625f);
}

TEST(BFloat16, KeepsSpecialValues) {
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(std::numeric_limits<float>::infinity()))));
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2);
}

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

TEST(Float16, EveryValueRoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(f)))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(float_to_fp16(f).bits, h) << std::hex << h;
  }
}

TEST(Float16, RoundsToNearestEvenBetweenNeighbours) {
  // Between each pair of adjacent finite non-negative fp16 values: the midpoint goes to the
  // even one, a float just below it down, just above it up (normals and subnormals alike).
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    const float lo = half_to_float(h), hi = half_to_float(static_cast<uint16_t>(h + 1));
    const double mid = (static_cast<double>(lo) + hi) / 2;
    const float m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid) << "the midpoint is a float";
    const uint16_t even = (h & 1) == 0 ? h : static_cast<uint16_t>(h + 1);
    ASSERT_EQ(float_to_fp16(m).bits, even) << std::hex << h;
    ASSERT_EQ(float_to_fp16(std::nextafter(m, 0.0f)).bits, h) << std::hex << h;
    ASSERT_EQ(float_to_fp16(std::nextafter(m, 1e30f)).bits, h + 1) << std::hex << h;
    ASSERT_EQ(float_to_fp16(-m).bits, even | 0x8000) << std::hex << h;
  }
}

TEST(Float16, OverflowsToInfinityAndUnderflowsToZero) {
  EXPECT_EQ(float_to_fp16(65504.0f).bits, 0x7bff);            // the largest finite fp16
  EXPECT_EQ(float_to_fp16(65519.996f).bits, 0x7bff);          // below the midpoint to 65536
  EXPECT_EQ(float_to_fp16(65520.0f).bits, 0x7c00);            // the midpoint: ties to even (inf)
  EXPECT_EQ(float_to_fp16(-1e10f).bits, 0xfc00);
  EXPECT_TRUE(std::isinf(round_to_fp16(4294967296.0f)));      // 2^32, Megatron's initial loss scale
  EXPECT_EQ(float_to_fp16(from_bits(0x33000000u)).bits, 0);   // 2^-25: halfway to 2^-24, ties to 0
  EXPECT_EQ(float_to_fp16(from_bits(0x33000001u)).bits, 1);   // just above: the smallest subnormal
  EXPECT_EQ(float_to_fp16(1e-10f).bits, 0);
  EXPECT_EQ(float_to_fp16(-0.0f).bits, 0x8000);
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::infinity()).bits, 0x7c00);
  EXPECT_EQ(dtype_size(DType::kFloat16), 2);
  EXPECT_TRUE(is_half_precision(DType::kFloat16) && is_half_precision(DType::kBFloat16));
  EXPECT_FALSE(is_half_precision(DType::kFloat32));
}

}  // namespace
}  // namespace mindspeed
