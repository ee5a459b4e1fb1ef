// Status, StatusOr and the propagation macros.
#include "core/status.h"

#include <gtest/gtest.h>

#include "core/check.h"

namespace mindspeed {
namespace {

StatusOr<int> parse_positive(int x) {
  if (x <= 0) return invalid_argument("--num-layers (", x, ") must be positive");
  return x;
}

Status twice(int x, int* out) {
  MS_ASSIGN_OR_RETURN(int v, parse_positive(x));
  *out = 2 * v;
  return ok_status();
}

TEST(Status, CarriesCodeAndMessage) {
  Status s = invalid_argument("--seq-length (", 7, ") must be even");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.to_string(), "InvalidArgument: --seq-length (7) must be even");
  EXPECT_TRUE(ok_status().ok());
}

TEST(Status, MacrosPropagate) {
  int out = 0;
  EXPECT_TRUE(twice(3, &out).ok());
  EXPECT_EQ(out, 6);
  Status s = twice(-1, &out);
  EXPECT_EQ(s.message(), "--num-layers (-1) must be positive");
}

TEST(StatusDeathTest, CheckFailureNamesTheCondition) {
  EXPECT_DEATH(MS_CHECK(1 + 1 == 3, "arithmetic is broken: ", 42), "1 \\+ 1 == 3: arithmetic is broken: 42");
}

}  // namespace
}  // namespace mindspeed
