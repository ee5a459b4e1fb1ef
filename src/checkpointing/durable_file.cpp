// Durable files (durable_file.h).
#include "checkpointing/durable_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <vector>

namespace mindspeed {

Status fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failed_precondition("cannot open '", path, "' to sync it: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return failed_precondition("fsync of '", path, "' failed: ", std::strerror(err));
  return ok_status();
}

uint32_t crc32_update(uint32_t crc, const char* data, size_t n) {
  uLong c = crc;
  while (n > 0) {  // zlib takes at most uInt bytes at a time
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    c = crc32(c, reinterpret_cast<const Bytef*>(data), chunk);
    data += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(c);
}

StatusOr<FileDigest> write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return failed_precondition("cannot create '", tmp, "' (does the directory exist and is it writable?): ",
                               std::strerror(errno));
  }
  FileDigest digest;
  uint32_t crc = 0;
  for (std::string_view piece : pieces) {
    size_t done = 0;
    while (done < piece.size()) {
      const size_t want = std::min<size_t>(piece.size() - done, size_t{1} << 30);
      const ssize_t n = ::write(fd, piece.data() + done, want);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n < 0 ? errno : ENOSPC;
        ::close(fd);
        std::remove(tmp.c_str());
        return failed_precondition("writing '", tmp, "' failed after ", digest.size + static_cast<int64_t>(done),
                                   " bytes: ", std::strerror(err));
      }
      done += static_cast<size_t>(n);
    }
    crc = crc32_update(crc, piece.data(), piece.size());
    digest.size += static_cast<int64_t>(piece.size());
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return failed_precondition("syncing '", tmp, "' failed: ", std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return failed_precondition("cannot rename '", tmp, "' to '", path, "'");
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  MS_RETURN_IF_ERROR(fsync_path(dir.empty() ? "." : dir));
  digest.crc32 = crc;
  return digest;
}

Status write_file_atomically(const std::string& path, const std::string& bytes) {
  return write_file_atomically(path, std::vector<std::string_view>{bytes}).status();
}

}  // namespace mindspeed
