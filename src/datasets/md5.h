// MD5 (RFC 1321). Megatron names its dataset index cache files after the MD5 of each
// dataset's unique description (megatron_dataset.py: hashlib.md5(...).hexdigest()).
// Used only as a cache key, never for security.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mindspeed {

/// Incremental MD5.
class Md5 {
 public:
  Md5();
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  /// The 32-character lower-case hex digest; the object must not be updated afterwards.
  std::string hexdigest();

 private:
  void transform(const uint8_t block[64]);

  uint32_t state_[4];
  uint64_t bytes_ = 0;
  uint8_t buffer_[64];
};

/// hashlib.md5(data).hexdigest()
std::string md5_hex(std::string_view data);

}  // namespace mindspeed
