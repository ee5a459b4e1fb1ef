// Files that survive a crash: fsync of a file or a directory (the rename of a file into a
// directory is durable only once the directory is synced), and atomic writes that return the
// CRC-32 of what they wrote, which a checkpoint index records so that a damaged or truncated
// file is refused by name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace mindspeed {

/// fsync() of a file or directory; an error names the path.
Status fsync_path(const std::string& path);

/// Extends a CRC-32 (zlib's; start from 0) over `n` bytes, any length.
uint32_t crc32_update(uint32_t crc, const char* data, size_t n);

/// The size in bytes and CRC-32 (zlib's) of a file's contents.
struct FileDigest {
  int64_t size = 0;
  uint32_t crc32 = 0;
};

/// Writes the concatenation of `pieces` to `path` through a temporary file in the same
/// directory: every byte written (a short write on a full disk is an error, never a short
/// file), the file fsynced, renamed into place, and the directory fsynced, so a crash leaves
/// either the old file or the whole new one. Returns the size and CRC-32 of what it wrote
/// (computed while writing: no second read).
StatusOr<FileDigest> write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces);
/// The same for one string.
Status write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace mindspeed
