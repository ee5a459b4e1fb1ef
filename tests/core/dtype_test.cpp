// bf16 conversion: round-to-nearest-even, exact widening, NaN/inf.
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
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

}  // namespace
}  // namespace mindspeed
