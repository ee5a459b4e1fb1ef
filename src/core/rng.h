// Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC'11), the generator behind cuRAND, PyTorch's CUDA RNG and Ascend's
// dropout (seed, offset). A value depends only on (seed, stream, element index), never on
// thread count, call order or how a tensor is split across ranks: initialising a full weight
// and slicing it, or dropping out the global element `i` of a sharded activation, gives the
// same numbers under every parallel layout, and recompute regenerates the same dropout mask.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace mindspeed {

/// 10 rounds of Philox4x32 on counter `ctr` with key `key`.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key);

/// SplitMix64 finaliser: a bijective 64-bit mixer used to derive stream ids.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
/// Combines stream components: stream_id(a, b, c...) differs whenever any component does.
constexpr uint64_t stream_id(uint64_t a) { return mix64(a); }
template <typename... Rest>
constexpr uint64_t stream_id(uint64_t a, Rest... rest) {
  return mix64(a ^ (stream_id(static_cast<uint64_t>(rest)...) * 0x2545f4914f6cdd1dull));
}
/// 64-bit FNV-1a hash of a name (parameter names become init streams).
constexpr uint64_t hash_name(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

/// A Philox stream: (seed, stream). Element i of the stream lives in block i/4.
struct RngStream {
  uint64_t seed = 0;
  uint64_t stream = 0;

  /// 4 random words of block `block`.
  std::array<uint32_t, 4> block(uint64_t block_index) const;
  /// Uniform float in [0, 1) for element `index` (24 random bits).
  float uniform(uint64_t index) const;
  /// Standard normal for element `index` (Box-Muller on the element's pair of words).
  float normal(uint64_t index) const;
};

/// out[i] = mean + std * normal(offset + i), i in [0, n). Parallel, deterministic.
void fill_normal(float* out, int64_t n, float mean, float std, const RngStream& rng, int64_t offset = 0);

/// Uniform from 24 random bits: exactly representable, in [0, 1).
inline float uint_to_uniform(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }

}  // namespace mindspeed
