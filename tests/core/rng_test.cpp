// Philox4x32-10 against Random123's known-answer vectors, and the statistics and
// layout-independence of the uniform/normal helpers.
#include "core/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace mindspeed {
namespace {

TEST(Philox, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, NormalHasUnitMomentsAndDependsOnlyOnIndex) {
  const int64_t n = 200000;
  std::vector<float> a(n);
  RngStream rng{42, 7};
  fill_normal(a.data(), n, 0.0f, 1.0f, rng);
  double sum = 0, sq = 0;
  for (float x : a) {
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.01);
  // A slice generated on its own (as a tensor-parallel shard would be) is identical.
  std::vector<float> slice(1000);
  fill_normal(slice.data(), 1000, 0.0f, 1.0f, rng, 12345);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(slice[i], a[12345 + i]);
}

TEST(Philox, StreamsAndSeedsDiffer) {
  EXPECT_NE((RngStream{1, 2}.uniform(0)), (RngStream{1, 3}.uniform(0)));
  EXPECT_NE((RngStream{1, 2}.uniform(0)), (RngStream{2, 2}.uniform(0)));
  EXPECT_NE(stream_id(1, 2), stream_id(2, 1));
  EXPECT_NE(hash_name("decoder.layers.0.mlp.linear_fc1.weight"),
            hash_name("decoder.layers.1.mlp.linear_fc1.weight"));
}

TEST(Philox, UniformIsInUnitIntervalWithMeanHalf) {
  RngStream rng{9, 9};
  double sum = 0;
  for (uint64_t i = 0; i < 100000; ++i) {
    const float u = rng.uniform(i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
}

}  // namespace
}  // namespace mindspeed
