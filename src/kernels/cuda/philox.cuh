// Philox4x32-10 on the device: core/rng.cpp's philox4x32, RngStream::block and
// RngStream::uniform (with core/rng.h's uint_to_uniform) ported to __device__ functions with
// exactly the same integer arithmetic, so a dropout mask drawn on the GPU is bit for bit the
// one the CPU kernels draw for the same (seed, stream, global element index). Only integer
// operations and one exact int -> float conversion times a power of two: nothing here depends
// on the device's floating-point modes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/rng.h"

namespace mindspeed::cuda {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

/// 10 rounds of Philox4x32 on counter `ctr` with key `key` (core/rng.cpp's philox4x32).
__device__ inline uint4 philox4x32(uint4 ctr, uint2 key) {
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(kPhiloxM0, ctr.x), lo0 = kPhiloxM0 * ctr.x;
    const uint32_t hi1 = __umulhi(kPhiloxM1, ctr.z), lo1 = kPhiloxM1 * ctr.z;
    ctr = make_uint4(hi1 ^ ctr.y ^ key.x, lo1, hi0 ^ ctr.w ^ key.y, lo0);
    key.x += kPhiloxW0;
    key.y += kPhiloxW1;
  }
  return ctr;
}

/// The 4 random words of block `block_index` of the stream (RngStream::block): words x, y, z, w
/// are elements 4 * block_index + 0, 1, 2, 3.
__device__ inline uint4 philox_block(RngStream rng, uint64_t block_index) {
  return philox4x32(
      make_uint4(static_cast<uint32_t>(block_index), static_cast<uint32_t>(block_index >> 32),
                 static_cast<uint32_t>(rng.stream), static_cast<uint32_t>(rng.stream >> 32)),
      make_uint2(static_cast<uint32_t>(rng.seed), static_cast<uint32_t>(rng.seed >> 32)));
}

/// Word `lane` (0..3) of a block.
__device__ inline uint32_t philox_word(const uint4& words, int lane) {
  return lane == 0 ? words.x : lane == 1 ? words.y : lane == 2 ? words.z : words.w;
}

/// Uniform in [0, 1) from the top 24 bits of a word (core/rng.h's uint_to_uniform): exact.
__device__ inline float philox_word_to_uniform(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

/// RngStream::uniform(index): the uniform of element `index` of the stream.
__device__ inline float philox_uniform(RngStream rng, uint64_t index) {
  return philox_word_to_uniform(
      philox_word(philox_block(rng, index / 4), static_cast<int>(index % 4)));
}

}  // namespace mindspeed::cuda
