// Ports of NumPy's MT19937 RandomState, SeedSequence and PCG64 Generator (see the header).
#include "datasets/numpy_random.h"

#include "core/check.h"

namespace mindspeed {
namespace {

constexpr int kMtN = 624;
constexpr int kMtM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfu;
constexpr uint32_t kUpperMask = 0x80000000u;
constexpr uint32_t kLowerMask = 0x7fffffffu;

/// Smallest all-ones mask >= max (distributions.c: gen_mask).
uint64_t gen_mask(uint64_t max) {
  uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  return mask;
}

// The bounded-integer fills of distributions.c, shared by both generators. `Gen` provides
// next_u32() and next_u64(). Results are in [off, off + rng] (inclusive range width rng).
template <typename Gen>
uint32_t bounded_u32(Gen& g, uint32_t rng, bool use_masked) {
  if (rng == 0) return 0;
  if (rng == 0xffffffffu) return g.next_u32();  // Lemire32 does not support this width
  if (use_masked) {
    const auto mask = static_cast<uint32_t>(gen_mask(rng));
    uint32_t v;
    while ((v = (g.next_u32() & mask)) > rng) {
    }
    return v;
  }
  // Lemire's multiply-shift with rejection of the biased low products.
  const uint32_t rng_excl = rng + 1;
  uint64_t m = static_cast<uint64_t>(g.next_u32()) * rng_excl;
  auto leftover = static_cast<uint32_t>(m);
  if (leftover < rng_excl) {
    const uint32_t threshold = (0xffffffffu - rng) % rng_excl;
    while (leftover < threshold) {
      m = static_cast<uint64_t>(g.next_u32()) * rng_excl;
      leftover = static_cast<uint32_t>(m);
    }
  }
  return static_cast<uint32_t>(m >> 32);
}

template <typename Gen>
uint64_t bounded_u64(Gen& g, uint64_t rng, bool use_masked) {
  if (rng == 0) return 0;
  if (rng <= 0xffffffffull) return bounded_u32(g, static_cast<uint32_t>(rng), use_masked);
  if (rng == ~0ull) return g.next_u64();
  if (use_masked) {
    const uint64_t mask = gen_mask(rng);
    uint64_t v;
    while ((v = (g.next_u64() & mask)) > rng) {
    }
    return v;
  }
  const uint64_t rng_excl = rng + 1;
  unsigned __int128 m = static_cast<unsigned __int128>(g.next_u64()) * rng_excl;
  auto leftover = static_cast<uint64_t>(m);
  if (leftover < rng_excl) {
    const uint64_t threshold = (~0ull - rng) % rng_excl;
    while (leftover < threshold) {
      m = static_cast<unsigned __int128>(g.next_u64()) * rng_excl;
      leftover = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

template <typename Gen>
std::vector<int64_t> fill_int64(Gen& g, int64_t low, int64_t high, int64_t n, bool use_masked) {
  MS_CHECK(low < high, "randint: low (", low, ") must be < high (", high, ")");
  MS_CHECK(n >= 0);
  // high is exclusive: the inclusive width is high - 1 - low, computed in uint64 as NumPy does.
  const uint64_t rng = static_cast<uint64_t>(high - 1) - static_cast<uint64_t>(low);
  const auto off = static_cast<uint64_t>(low);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (auto& v : out) v = static_cast<int64_t>(off + bounded_u64(g, rng, use_masked));
  return out;
}

template <typename Gen>
std::vector<int32_t> fill_int32(Gen& g, int32_t low, int32_t high, int64_t n, bool use_masked) {
  MS_CHECK(low < high, "randint: low (", low, ") must be < high (", high, ")");
  MS_CHECK(n >= 0);
  const uint32_t rng = static_cast<uint32_t>(high - 1) - static_cast<uint32_t>(low);
  const auto off = static_cast<uint32_t>(low);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (auto& v : out) v = static_cast<int32_t>(off + bounded_u32(g, rng, use_masked));
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// RandomState (MT19937)

NumpyRandomState::NumpyRandomState(uint32_t seed) {
  // mt19937_seed: key[0] = seed, key[i] = 1812433253 * (key[i-1] ^ (key[i-1] >> 30)) + i.
  uint32_t s = seed;
  for (int i = 0; i < kMtN; ++i) {
    key_[i] = s;
    s = 1812433253u * (s ^ (s >> 30)) + static_cast<uint32_t>(i + 1);
  }
  pos_ = kMtN;
}

void NumpyRandomState::regenerate() {
  auto twist = [](uint32_t a, uint32_t b, uint32_t c) {
    const uint32_t y = (a & kUpperMask) | (b & kLowerMask);
    return c ^ (y >> 1) ^ ((0u - (y & 1u)) & kMatrixA);
  };
  int i = 0;
  for (; i < kMtN - kMtM; ++i) key_[i] = twist(key_[i], key_[i + 1], key_[i + kMtM]);
  for (; i < kMtN - 1; ++i) key_[i] = twist(key_[i], key_[i + 1], key_[i + kMtM - kMtN]);
  key_[kMtN - 1] = twist(key_[kMtN - 1], key_[0], key_[kMtM - 1]);
  pos_ = 0;
}

uint32_t NumpyRandomState::next_u32() {
  if (pos_ == kMtN) regenerate();
  uint32_t y = key_[pos_++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= (y >> 18);
  return y;
}

uint64_t NumpyRandomState::next_u64() {
  const uint64_t hi = next_u32();
  const uint64_t lo = next_u32();
  return (hi << 32) | lo;
}

uint64_t NumpyRandomState::random_interval(uint64_t max) {
  if (max == 0) return 0;
  const uint64_t mask = gen_mask(max);
  uint64_t v;
  if (max <= 0xffffffffull) {
    while ((v = (next_u32() & mask)) > max) {
    }
  } else {
    while ((v = (next_u64() & mask)) > max) {
    }
  }
  return v;
}

std::vector<int64_t> NumpyRandomState::randint_int64(int64_t low, int64_t high, int64_t n) {
  return fill_int64(*this, low, high, n, /*use_masked=*/true);
}

std::vector<int32_t> NumpyRandomState::randint_int32(int32_t low, int32_t high, int64_t n) {
  return fill_int32(*this, low, high, n, /*use_masked=*/true);
}

// ---------------------------------------------------------------------------------------
// SeedSequence

std::vector<uint32_t> seed_sequence_generate_state(const std::vector<uint32_t>& entropy_words,
                                                   int64_t n_words) {
  constexpr int kPoolSize = 4;
  constexpr uint32_t kInitA = 0x43b0d7e5u, kMultA = 0x931e8875u;
  constexpr uint32_t kInitB = 0x8b51f9ddu, kMultB = 0x58f38dedu;
  constexpr uint32_t kMixMultL = 0xca01f9ddu, kMixMultR = 0x4973f715u;
  constexpr int kXShift = 16;

  std::vector<uint32_t> entropy = entropy_words;
  if (entropy.empty()) entropy.push_back(0);

  uint32_t hash_const = kInitA;
  auto hashmix = [&](uint32_t value) {
    value ^= hash_const;
    hash_const *= kMultA;
    value *= hash_const;
    value ^= value >> kXShift;
    return value;
  };
  auto mix = [](uint32_t x, uint32_t y) {
    uint32_t r = kMixMultL * x - kMixMultR * y;
    r ^= r >> kXShift;
    return r;
  };

  std::array<uint32_t, kPoolSize> pool{};
  for (int i = 0; i < kPoolSize; ++i) {
    pool[i] = hashmix(i < static_cast<int>(entropy.size()) ? entropy[i] : 0u);
  }
  for (int src = 0; src < kPoolSize; ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst) {
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src]));
    }
  }
  for (size_t src = kPoolSize; src < entropy.size(); ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst) pool[dst] = mix(pool[dst], hashmix(entropy[src]));
  }

  std::vector<uint32_t> state(static_cast<size_t>(n_words));
  uint32_t hash_b = kInitB;
  for (int64_t i = 0; i < n_words; ++i) {
    uint32_t v = pool[i % kPoolSize];
    v ^= hash_b;
    hash_b *= kMultB;
    v *= hash_b;
    v ^= v >> kXShift;
    state[static_cast<size_t>(i)] = v;
  }
  return state;
}

// ---------------------------------------------------------------------------------------
// PCG64 (XSL-RR 128/64) as numpy.random.PCG64

namespace {
using u128 = unsigned __int128;
constexpr u128 kPcgMultiplier =
    (static_cast<u128>(0x2360ed051fc65da4ull) << 64) | 0x4385df649fccf645ull;
}  // namespace

NumpyPcg64Generator::NumpyPcg64Generator(uint64_t seed) {
  std::vector<uint32_t> words;
  for (uint64_t s = seed; s != 0; s >>= 32) words.push_back(static_cast<uint32_t>(s));
  // generate_state(4, uint64): 8 words, each uint64 = (word[2k], word[2k+1]) little-endian.
  const std::vector<uint32_t> w = seed_sequence_generate_state(words, 8);
  uint64_t v[4];
  for (int k = 0; k < 4; ++k) v[k] = static_cast<uint64_t>(w[2 * k]) | (static_cast<uint64_t>(w[2 * k + 1]) << 32);
  const u128 init_state = (static_cast<u128>(v[0]) << 64) | v[1];
  const u128 init_seq = (static_cast<u128>(v[2]) << 64) | v[3];
  // pcg_setseq_128_srandom_r: state = 0, inc = seq << 1 | 1, step, state += initstate, step.
  const u128 inc = (init_seq << 1) | 1u;
  u128 state = 0;
  state = state * kPcgMultiplier + inc;
  state += init_state;
  state = state * kPcgMultiplier + inc;
  state_hi_ = static_cast<uint64_t>(state >> 64);
  state_lo_ = static_cast<uint64_t>(state);
  inc_hi_ = static_cast<uint64_t>(inc >> 64);
  inc_lo_ = static_cast<uint64_t>(inc);
}

void NumpyPcg64Generator::step() {
  u128 state = (static_cast<u128>(state_hi_) << 64) | state_lo_;
  const u128 inc = (static_cast<u128>(inc_hi_) << 64) | inc_lo_;
  state = state * kPcgMultiplier + inc;
  state_hi_ = static_cast<uint64_t>(state >> 64);
  state_lo_ = static_cast<uint64_t>(state);
}

uint64_t NumpyPcg64Generator::next_u64() {
  step();  // numpy's pcg64_random_r advances first, then outputs the new state
  const uint64_t x = state_hi_ ^ state_lo_;
  const unsigned rot = static_cast<unsigned>(state_hi_ >> 58);
  return (x >> rot) | (x << ((64u - rot) & 63u));
}

uint32_t NumpyPcg64Generator::next_u32() {
  if (has_u32_) {
    has_u32_ = false;
    return buffered_u32_;
  }
  const uint64_t next = next_u64();
  has_u32_ = true;
  buffered_u32_ = static_cast<uint32_t>(next >> 32);
  return static_cast<uint32_t>(next);
}

std::vector<int32_t> NumpyPcg64Generator::integers_int32(int32_t low, int32_t high, int64_t n) {
  return fill_int32(*this, low, high, n, /*use_masked=*/false);
}

std::vector<int64_t> NumpyPcg64Generator::integers_int64(int64_t low, int64_t high, int64_t n) {
  return fill_int64(*this, low, high, n, /*use_masked=*/false);
}

}  // namespace mindspeed
