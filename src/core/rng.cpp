// Philox4x32-10 and the normal/uniform helpers built on it.
#include "core/rng.h"

#include <cmath>

namespace mindspeed {
namespace {
constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(product >> 32);
  lo = static_cast<uint32_t>(product);
}
}  // namespace

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kPhiloxM0, ctr[0], hi0, lo0);
    mulhilo(kPhiloxM1, ctr[2], hi1, lo1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    key[0] += kPhiloxW0;
    key[1] += kPhiloxW1;
  }
  return ctr;
}

std::array<uint32_t, 4> RngStream::block(uint64_t block_index) const {
  return philox4x32({static_cast<uint32_t>(block_index), static_cast<uint32_t>(block_index >> 32),
                     static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

float RngStream::uniform(uint64_t index) const {
  return uint_to_uniform(block(index / 4)[index % 4]);
}

namespace {
// Box-Muller on two words: u1 in (0, 1], u2 in [0, 1).
inline void box_muller(uint32_t a, uint32_t b, float& z0, float& z1) {
  const double u1 = (static_cast<double>(a) + 1.0) * (1.0 / 4294967296.0);
  const double u2 = static_cast<double>(b) * (1.0 / 4294967296.0);
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * M_PI * u2;
  z0 = static_cast<float>(r * std::cos(theta));
  z1 = static_cast<float>(r * std::sin(theta));
}
}  // namespace

float RngStream::normal(uint64_t index) const {
  const auto words = block(index / 4);
  const int pair = static_cast<int>((index % 4) / 2);
  float z0, z1;
  box_muller(words[2 * pair], words[2 * pair + 1], z0, z1);
  return (index % 2 == 0) ? z0 : z1;
}

void fill_normal(float* out, int64_t n, float mean, float std, const RngStream& rng, int64_t offset) {
  // One Philox block gives the four normals of elements 4k .. 4k+3 of the stream: compute
  // each block once and write the elements of it that fall in [offset, offset + n).
  if (n <= 0) return;
  const int64_t first_block = offset / 4, last_block = (offset + n - 1) / 4;
#pragma omp parallel for schedule(static)
  for (int64_t blk = first_block; blk <= last_block; ++blk) {
    const auto words = rng.block(static_cast<uint64_t>(blk));
    float z[4];
    box_muller(words[0], words[1], z[0], z[1]);
    box_muller(words[2], words[3], z[2], z[3]);
    for (int lane = 0; lane < 4; ++lane) {
      const int64_t i = blk * 4 + lane - offset;
      if (i >= 0 && i < n) out[i] = mean + std * z[lane];
    }
  }
}

}  // namespace mindspeed
