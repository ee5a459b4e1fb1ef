// MD5 (RFC 1321), written from the specification.
#include "datasets/md5.h"

#include <algorithm>
#include <cstring>

namespace mindspeed {
namespace {

// Per-round shift amounts and the sine-derived constants K[i] = floor(2^32 * |sin(i + 1)|).
constexpr uint32_t kShift[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                                 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};
constexpr uint32_t kK[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
    0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
    0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
    0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
    0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
    0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
    0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
    0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
    0xeb86d391};

inline uint32_t rotl(uint32_t x, uint32_t c) { return (x << c) | (x >> (32 - c)); }

}  // namespace

Md5::Md5() : state_{0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u} {}

void Md5::transform(const uint8_t block[64]) {
  uint32_t m[16];
  for (int i = 0; i < 16; ++i) {
    m[i] = static_cast<uint32_t>(block[4 * i]) | (static_cast<uint32_t>(block[4 * i + 1]) << 8) |
           (static_cast<uint32_t>(block[4 * i + 2]) << 16) |
           (static_cast<uint32_t>(block[4 * i + 3]) << 24);
  }
  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  for (int i = 0; i < 64; ++i) {
    uint32_t f;
    int g;
    if (i < 16) {
      f = (b & c) | (~b & d);
      g = i;
    } else if (i < 32) {
      f = (d & b) | (~d & c);
      g = (5 * i + 1) % 16;
    } else if (i < 48) {
      f = b ^ c ^ d;
      g = (3 * i + 5) % 16;
    } else {
      f = c ^ (b | ~d);
      g = (7 * i) % 16;
    }
    const uint32_t tmp = d;
    d = c;
    c = b;
    b = b + rotl(a + f + kK[i] + m[g], kShift[i]);
    a = tmp;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
}

void Md5::update(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  size_t used = bytes_ % 64;
  bytes_ += size;
  if (used != 0) {
    const size_t take = std::min(size, 64 - used);
    std::memcpy(buffer_ + used, p, take);
    p += take;
    size -= take;
    used += take;
    if (used < 64) return;
    transform(buffer_);
  }
  while (size >= 64) {
    transform(p);
    p += 64;
    size -= 64;
  }
  if (size > 0) std::memcpy(buffer_, p, size);
}

std::string Md5::hexdigest() {
  const uint64_t bit_length = bytes_ * 8;
  const uint8_t pad_first = 0x80;
  update(&pad_first, 1);
  const uint8_t zero = 0;
  while (bytes_ % 64 != 56) update(&zero, 1);
  uint8_t length_le[8];
  for (int i = 0; i < 8; ++i) length_le[i] = static_cast<uint8_t>(bit_length >> (8 * i));
  update(length_le, 8);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(32);
  for (uint32_t word : state_) {
    for (int i = 0; i < 4; ++i) {
      const auto byte = static_cast<uint8_t>(word >> (8 * i));
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 15]);
    }
  }
  return out;
}

std::string md5_hex(std::string_view data) {
  Md5 md5;
  md5.update(data);
  return md5.hexdigest();
}

}  // namespace mindspeed
