// Bit-exact ports of the NumPy random generators that Megatron's dataset code calls, so the
// document order, sample order and mock data equal Megatron's for the same --seed.
//
//   NumpyRandomState   numpy.random.RandomState(seed) (legacy MT19937): shuffle(1-D array),
//                      randint(low, high, size, dtype=int32|int64). Megatron's
//                      gpt_dataset.py shuffles its document and shuffle indices with it.
//   NumpyPcg64Generator numpy.random.default_rng(seed) (PCG64 seeded by SeedSequence):
//                      integers(low, high, size, dtype=int32|int64). Megatron's
//                      MockGPTLowLevelDataset draws its sequence lengths with it.
//
// Ports of numpy/random (NumPy 1.24): mtrand.pyx (RandomState._legacy_seeding, shuffle,
// randint), _mt19937.pyx + src/mt19937 (mt19937_seed, mt19937_gen, tempering),
// bit_generator.pyx (SeedSequence), _pcg64.pyx + src/pcg64 (PCG64 XSL-RR 128/64),
// _bounded_integers.pyx + src/distributions/distributions.c (random_interval, masked and
// Lemire bounded integers, buffered 32-bit draws). Checked against NumPy 1.24.2 by
// tests/datasets/numpy_random_test.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace mindspeed {

/// numpy.random.RandomState seeded with an integer in [0, 2^32).
/// NumPy seeds an integer through mt19937_seed (the init_genrand recurrence
/// mt[i] = 1812433253 * (mt[i-1] ^ (mt[i-1] >> 30)) + i), not init_by_array; the array
/// path is only taken for array-like seeds.
class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed);

  /// The next 32 random bits (MT19937 with tempering).
  uint32_t next_u32();
  /// Two draws, the first in the high word (NumPy's mt19937_next64).
  uint64_t next_u64();
  /// Uniform integer in [0, max] by masked rejection (distributions.c: random_interval).
  uint64_t random_interval(uint64_t max);

  /// In-place RandomState.shuffle of a 1-D array: for i = n-1 .. 1, swap a[i] and
  /// a[random_interval(i)]. Draws do not depend on the element type.
  template <typename T>
  void shuffle(T* data, int64_t n) {
    for (int64_t i = n - 1; i >= 1; --i) {
      const auto j = static_cast<int64_t>(random_interval(static_cast<uint64_t>(i)));
      std::swap(data[i], data[j]);
    }
  }
  template <typename T>
  void shuffle(std::vector<T>& a) {
    shuffle(a.data(), static_cast<int64_t>(a.size()));
  }

  /// RandomState.randint(low, high, size=n, dtype=numpy.int64): [low, high), masked rejection.
  /// Requires low < high.
  std::vector<int64_t> randint_int64(int64_t low, int64_t high, int64_t n);
  /// RandomState.randint(low, high, size=n, dtype=numpy.int32). Requires low < high.
  std::vector<int32_t> randint_int32(int32_t low, int32_t high, int64_t n);

  /// The 624-word key and position (RandomState.get_state()[1:3]), for tests.
  const std::array<uint32_t, 624>& key() const { return key_; }
  int pos() const { return pos_; }

 private:
  void regenerate();

  std::array<uint32_t, 624> key_{};
  int pos_ = 624;
};

/// numpy.random.SeedSequence(entropy).generate_state(n_words, numpy.uint32) for a
/// non-negative integer entropy given as little-endian 32-bit words (0 -> {0}), no spawn key,
/// pool size 4.
std::vector<uint32_t> seed_sequence_generate_state(const std::vector<uint32_t>& entropy_words,
                                                   int64_t n_words);

/// numpy.random.default_rng(seed): a Generator over PCG64 seeded through SeedSequence(seed).
class NumpyPcg64Generator {
 public:
  explicit NumpyPcg64Generator(uint64_t seed);

  uint64_t next_u64();
  /// PCG64's buffered 32-bit draw: the low half of a 64-bit output, then its high half.
  uint32_t next_u32();

  /// Generator.integers(low, high, size=n, dtype=numpy.int32) (endpoint=False): Lemire's
  /// multiply-shift rejection on 32-bit draws. Requires low < high.
  std::vector<int32_t> integers_int32(int32_t low, int32_t high, int64_t n);
  /// Generator.integers(low, high, size=n, dtype=numpy.int64) (endpoint=False).
  std::vector<int64_t> integers_int64(int64_t low, int64_t high, int64_t n);

  /// The 128-bit state and increment as (high, low) words, for tests.
  std::array<uint64_t, 2> state() const { return {state_hi_, state_lo_}; }
  std::array<uint64_t, 2> increment() const { return {inc_hi_, inc_lo_}; }

 private:
  void step();

  uint64_t state_hi_ = 0, state_lo_ = 0;
  uint64_t inc_hi_ = 0, inc_lo_ = 0;
  bool has_u32_ = false;
  uint32_t buffered_u32_ = 0;
};

}  // namespace mindspeed
