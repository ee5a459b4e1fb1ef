// NumPy RandomState / SeedSequence / PCG64 ports against draws made by NumPy 1.24
// (reference/numpy_random_vectors.txt).
#include "datasets/numpy_random.h"

#include <gtest/gtest.h>

#include <numeric>

#include "test_datasets.h"

namespace mindspeed {
namespace {

using testing::md5_tag;
using testing::ReferenceVectors;

const ReferenceVectors& ref() { return ReferenceVectors::numpy_random(); }
const uint32_t kSeeds[] = {0u, 1u, 1234u, 4294967295u};

TEST(NumpyRandomState, IntegerSeedUsesInitGenrandNotInitByArray) {
  for (uint32_t seed : kSeeds) {
    NumpyRandomState rs(seed);
    const auto expected = ref().uints("mt_key_" + std::to_string(seed));
    EXPECT_EQ(rs.key()[0], expected[0]) << seed;
    EXPECT_EQ(rs.key()[1], expected[1]) << seed;
    EXPECT_EQ(rs.key()[2], expected[2]) << seed;
    EXPECT_EQ(rs.key()[623], expected[3]) << seed;
    EXPECT_EQ(static_cast<uint64_t>(rs.pos()), expected[4]) << seed;
  }
}

TEST(NumpyRandomState, RawDrawsAcrossRegeneration) {
  for (uint32_t seed : kSeeds) {
    NumpyRandomState rs(seed);
    std::vector<uint32_t> draws(1300);
    for (auto& d : draws) d = rs.next_u32();
    const auto head = ref().uints("mt_raw_head_" + std::to_string(seed));
    for (size_t i = 0; i < head.size(); ++i) EXPECT_EQ(draws[i], head[i]) << seed << " " << i;
    EXPECT_EQ(md5_tag(draws.data(), 1300), ref().str("mt_raw_1300_" + std::to_string(seed))) << seed;
  }
}

TEST(NumpyRandomState, ShuffleMatchesNumpy) {
  for (uint32_t seed : kSeeds) {
    for (int n : {0, 1, 2, 3, 17}) {
      std::vector<int64_t> a(static_cast<size_t>(n));
      std::iota(a.begin(), a.end(), 0);
      NumpyRandomState(seed).shuffle(a);
      const auto expected = n == 0 ? std::vector<int64_t>{}
                                   : ref().ints("shuffle_" + std::to_string(seed) + "_" + std::to_string(n));
      EXPECT_EQ(a, expected) << "seed " << seed << " n " << n;
    }
    std::vector<int64_t> a(1000);
    std::iota(a.begin(), a.end(), 0);
    NumpyRandomState(seed).shuffle(a);
    EXPECT_EQ(md5_tag(a.data(), 1000), ref().str("shuffle_" + std::to_string(seed) + "_1000"));
  }
  std::vector<uint32_t> big(100000);
  std::iota(big.begin(), big.end(), 0u);
  NumpyRandomState(1234).shuffle(big);
  EXPECT_EQ(md5_tag(big.data(), 100000), ref().str("shuffle_1234_100000"));
}

TEST(NumpyRandomState, ShuffleOfZeroOrOneElementDrawsNothing) {
  NumpyRandomState a(9), b(9);
  std::vector<int32_t> one{42};
  std::vector<int32_t> none;
  a.shuffle(one);
  a.shuffle(none);
  EXPECT_EQ(one[0], 42);
  EXPECT_EQ(a.next_u32(), b.next_u32());
}

TEST(NumpyRandomState, RandomIntervalIncludingAbove32Bits) {
  const auto maxes = ref().uints("random_interval_max");
  const auto expected = ref().uints("random_interval_77");
  NumpyRandomState rs(77);
  size_t k = 0;
  for (uint64_t mx : maxes) {
    for (int r = 0; r < 4; ++r, ++k) {
      EXPECT_EQ(rs.random_interval(mx), expected[k]) << "max " << mx << " draw " << r;
    }
  }
}

TEST(NumpyRandomState, InterleavedShuffleAndRandintShareTheStream) {
  NumpyRandomState rs(5);
  std::vector<int32_t> a(10);
  std::iota(a.begin(), a.end(), 0);
  rs.shuffle(a);
  const auto b = rs.randint_int32(1, 4096, 5);
  std::vector<uint32_t> c(7);
  std::iota(c.begin(), c.end(), 0u);
  rs.shuffle(c);
  std::vector<int64_t> got(a.begin(), a.end());
  got.insert(got.end(), b.begin(), b.end());
  got.insert(got.end(), c.begin(), c.end());
  EXPECT_EQ(got, ref().ints("interleaved_5"));
}

TEST(NumpyRandomState, Randint) {
  for (const char* name : {"a", "b", "c", "d"}) {
    const auto args = ref().ints(std::string("randint32_") + name + "_args");
    const auto got = NumpyRandomState(42).randint_int32(static_cast<int32_t>(args[0]),
                                                        static_cast<int32_t>(args[1]), args[2]);
    EXPECT_EQ(std::vector<int64_t>(got.begin(), got.end()), ref().ints(std::string("randint32_") + name))
        << name;
  }
  for (const char* name : {"a", "b", "c", "d"}) {
    const auto args = ref().ints(std::string("randint64_") + name + "_args");
    EXPECT_EQ(NumpyRandomState(42).randint_int64(args[0], args[1], args[2]),
              ref().ints(std::string("randint64_") + name))
        << name;
  }
}

TEST(NumpyPcg64Generator, SeedSequenceAndState) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, (uint64_t{1} << 40) + 7}) {
    std::vector<uint32_t> words;
    for (uint64_t s = seed; s != 0; s >>= 32) words.push_back(static_cast<uint32_t>(s));
    const auto state = seed_sequence_generate_state(words, 8);
    const auto expected = ref().uints("seedseq_" + std::to_string(seed));
    EXPECT_EQ(std::vector<uint64_t>(state.begin(), state.end()), expected) << seed;

    NumpyPcg64Generator g(seed);
    auto hex128 = [](std::array<uint64_t, 2> v) {
      char buf[40];
      if (v[0] == 0) {
        std::snprintf(buf, sizeof(buf), "%lx", static_cast<unsigned long>(v[1]));
      } else {
        std::snprintf(buf, sizeof(buf), "%lx%016lx", static_cast<unsigned long>(v[0]),
                      static_cast<unsigned long>(v[1]));
      }
      return std::string(buf);
    };
    EXPECT_EQ(hex128(g.state()), ref().str("pcg64_state_" + std::to_string(seed), 0));
    EXPECT_EQ(hex128(g.increment()), ref().str("pcg64_state_" + std::to_string(seed), 1));
  }
}

TEST(NumpyPcg64Generator, IntegersMatchDefaultRng) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{1}, (uint64_t{1} << 40) + 7}) {
    const std::string s = std::to_string(seed);
    const auto x = NumpyPcg64Generator(seed).integers_int32(1, 4096, 100000);
    const auto head = ref().ints("pcg64_int32_head_" + s);
    EXPECT_EQ(std::vector<int64_t>(x.begin(), x.begin() + 20), head);
    EXPECT_EQ(md5_tag(x.data(), 100000), ref().str("pcg64_int32_100000_" + s));

    NumpyPcg64Generator g(seed);
    std::vector<int64_t> got = g.integers_int64(0, int64_t{1} << 40, 5);
    for (int64_t v : g.integers_int64(-5, 5, 5)) got.push_back(v);
    for (int32_t v : g.integers_int32(1, 4096, 5)) got.push_back(v);
    for (int64_t v : g.integers_int64(INT64_MIN, INT64_MAX, 3)) got.push_back(v);
    EXPECT_EQ(got, ref().ints("pcg64_mixed_" + s)) << seed;
  }
}

}  // namespace
}  // namespace mindspeed
