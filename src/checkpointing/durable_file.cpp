// Durable files (durable_file.h).
#include "checkpointing/durable_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
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

StatusOr<FileDigest> file_digest(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return not_found("'", path, "' cannot be opened: ", std::strerror(errno));
  FileDigest d;
  uLong crc = crc32(0L, Z_NULL, 0);
  std::vector<unsigned char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return failed_precondition("reading '", path, "' failed: ", std::strerror(err));
    }
    if (n == 0) break;
    crc = crc32(crc, buf.data(), static_cast<uInt>(n));
    d.size += n;
  }
  ::close(fd);
  d.crc32 = static_cast<uint32_t>(crc);
  return d;
}

}  // namespace mindspeed
