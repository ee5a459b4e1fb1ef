// Files that survive a crash: fsync of a file or a directory (the rename of a file into a
// directory is durable only once the directory is synced), and the CRC-32 of a file, which
// a checkpoint index records so that a damaged or truncated file is refused by name.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace mindspeed {

/// fsync() of a file or directory; an error names the path.
Status fsync_path(const std::string& path);

/// CRC-32 (zlib's) of a whole file, and its size in bytes.
struct FileDigest {
  int64_t size = 0;
  uint32_t crc32 = 0;
};
StatusOr<FileDigest> file_digest(const std::string& path);

}  // namespace mindspeed
