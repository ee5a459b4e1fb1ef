// .npy reading and writing (see the header).
#include "datasets/npy_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

namespace mindspeed {
namespace {

struct DtypeInfo {
  NpyDtype dtype;
  const char* descr;
  int64_t itemsize;
};
constexpr DtypeInfo kDtypes[] = {
    {NpyDtype::kUint8, "|u1", 1},  {NpyDtype::kInt16, "<i2", 2},  {NpyDtype::kUint16, "<u2", 2},
    {NpyDtype::kInt32, "<i4", 4},  {NpyDtype::kUint32, "<u4", 4}, {NpyDtype::kInt64, "<i8", 8},
    {NpyDtype::kFloat64, "<f8", 8},
};

const DtypeInfo& info(NpyDtype d) {
  for (const auto& i : kDtypes) {
    if (i.dtype == d) return i;
  }
  MS_CHECK(false, "unknown NpyDtype");
  return kDtypes[0];
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

const char* npy_descr(NpyDtype dtype) { return info(dtype).descr; }
int64_t npy_itemsize(NpyDtype dtype) { return info(dtype).itemsize; }

NpyArray NpyArray::wrap(NpyDtype dtype, std::vector<int64_t> shape, const void* data,
                        std::shared_ptr<const void> keepalive) {
  NpyArray a;
  a.dtype_ = dtype;
  a.shape_ = std::move(shape);
  a.data_ = static_cast<const std::byte*>(data);
  a.keepalive_ = std::move(keepalive);
  return a;
}

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

int64_t NpyArray::int_at(int64_t flat) const {
  MS_DCHECK(flat >= 0 && flat < numel(), "NpyArray index ", flat, " out of range ", numel());
  switch (dtype_) {
    case NpyDtype::kUint8: return reinterpret_cast<const uint8_t*>(data_)[flat];
    case NpyDtype::kInt16: return reinterpret_cast<const int16_t*>(data_)[flat];
    case NpyDtype::kUint16: return reinterpret_cast<const uint16_t*>(data_)[flat];
    case NpyDtype::kInt32: return reinterpret_cast<const int32_t*>(data_)[flat];
    case NpyDtype::kUint32: return reinterpret_cast<const uint32_t*>(data_)[flat];
    case NpyDtype::kInt64: return reinterpret_cast<const int64_t*>(data_)[flat];
    case NpyDtype::kFloat64: break;
  }
  MS_CHECK(false, "NpyArray::int_at on a float array");
  return 0;
}

std::string npy_header(const NpyArray& array) {
  // repr of the shape tuple: "()", "(10,)", "(10, 2)".
  std::string shape = "(";
  for (size_t i = 0; i < array.shape().size(); ++i) {
    if (i > 0) shape += ", ";
    shape += std::to_string(array.shape()[i]);
  }
  if (array.shape().size() == 1) shape += ",";
  shape += ")";
  std::string dict = std::string("{'descr': '") + npy_descr(array.dtype()) +
                     "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Spare room so the first axis can grow in place (format.py: GROWTH_AXIS_MAX_DIGITS = 21).
  if (!array.shape().empty()) {
    const size_t digits = std::to_string(array.shape()[0]).size();
    if (digits < 21) dict += std::string(21 - digits, ' ');
  }
  // magic (6) + version (2) + header length (2) + dict + '\n', padded to 64 bytes.
  const size_t prefix = 10;
  const size_t hlen = dict.size() + 1;
  const size_t padlen = 64 - ((prefix + hlen) % 64);
  dict += std::string(padlen, ' ');  // NumPy pads a full 64 when already aligned
  dict += "\n";
  std::string out = "\x93NUMPY";
  out.push_back('\x01');
  out.push_back('\x00');
  const auto len = static_cast<uint16_t>(dict.size());
  out.push_back(static_cast<char>(len & 0xff));
  out.push_back(static_cast<char>(len >> 8));
  out += dict;
  return out;
}

namespace {

Status write_all_atomic(const std::string& path, const std::string& head, const void* data,
                        int64_t nbytes) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = str_cat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return failed_precondition("cannot create ", tmp, ": ", errno_text(),
                               " (is the cache folder writable? set --data-cache-path)");
  }
  auto write_bytes = [&](const void* p, int64_t n) {
    const auto* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::write(fd, c, static_cast<size_t>(std::min<int64_t>(n, 1 << 30)));
      if (w < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      c += w;
      n -= w;
    }
    return true;
  };
  bool ok = write_bytes(head.data(), static_cast<int64_t>(head.size())) &&
            (nbytes == 0 || write_bytes(data, nbytes));
  ok = ok && ::fsync(fd) == 0;
  const std::string err = ok ? "" : errno_text();
  ok = (::close(fd) == 0) && ok;
  if (!ok) {
    ::unlink(tmp.c_str());
    return failed_precondition("cannot write ", tmp, ": ", err.empty() ? errno_text() : err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string e = errno_text();
    ::unlink(tmp.c_str());
    return failed_precondition("cannot rename ", tmp, " to ", path, ": ", e);
  }
  return ok_status();
}

/// Parses the header dict of a .npy file.
Status parse_header_dict(const std::string& path, const std::string& dict, NpyDtype* dtype,
                         std::vector<int64_t>* shape) {
  auto bad = [&](const std::string& what) {
    return data_loss(path, ": invalid .npy header (", what, "): ", dict);
  };
  auto find_value = [&](const std::string& key) -> size_t {
    const size_t k = dict.find("'" + key + "'");
    if (k == std::string::npos) return std::string::npos;
    size_t p = dict.find(':', k);
    if (p == std::string::npos) return std::string::npos;
    ++p;
    while (p < dict.size() && dict[p] == ' ') ++p;
    return p;
  };
  const size_t d = find_value("descr");
  if (d == std::string::npos || d >= dict.size() || dict[d] != '\'') return bad("no descr");
  const size_t d_end = dict.find('\'', d + 1);
  if (d_end == std::string::npos) return bad("descr");
  std::string descr = dict.substr(d + 1, d_end - d - 1);
  if (descr.size() == 3 && descr[0] == '=') descr[0] = '<';  // native order on little-endian
  if (descr == "<u1" || descr == "<i1") descr[0] = '|';
  bool found = false;
  for (const auto& i : kDtypes) {
    if (descr == i.descr) {
      *dtype = i.dtype;
      found = true;
    }
  }
  if (!found) {
    return data_loss(path, ": unsupported .npy dtype '", descr,
                     "' (expected one of |u1 <i2 <u2 <i4 <u4 <i8 <f8, little-endian)");
  }
  const size_t f = find_value("fortran_order");
  if (f == std::string::npos) return bad("no fortran_order");
  if (dict.compare(f, 5, "False") != 0) {
    return data_loss(path, ": Fortran-order .npy arrays are not supported");
  }
  const size_t s = find_value("shape");
  if (s == std::string::npos || dict[s] != '(') return bad("no shape");
  const size_t s_end = dict.find(')', s);
  if (s_end == std::string::npos) return bad("shape");
  shape->clear();
  std::string num;
  for (size_t i = s + 1; i <= s_end; ++i) {
    const char c = dict[i];
    if (c >= '0' && c <= '9') {
      num.push_back(c);
    } else if (c == ',' || c == ')') {
      if (!num.empty()) {
        int64_t dim = 0;
        const auto [end, error] = std::from_chars(num.data(), num.data() + num.size(), dim);
        if (error != std::errc() || end != num.data() + num.size()) return bad("shape too large");
        shape->push_back(dim);
        num.clear();
      } else if (c == ',') {
        return bad("shape");
      }
    } else if (c != ' ' && c != 'L') {
      return bad("shape");
    }
  }
  return ok_status();
}

}  // namespace

Status write_npy(const std::string& path, const NpyArray& array) {
  return write_all_atomic(path, npy_header(array), array.raw(), array.nbytes());
}

Status write_file_atomic(const std::string& path, const std::string& contents) {
  return write_all_atomic(path, contents, nullptr, 0);
}

StatusOr<std::string> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open ", path, ": ", errno_text());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return data_loss("cannot read ", path);
  return ss.str();
}

StatusOr<NpyArray> read_npy(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return not_found("cannot open ", path, ": ", errno_text());
  struct CloseFd {
    int fd;
    ~CloseFd() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return data_loss("cannot stat ", path, ": ", errno_text());
  const auto file_size = static_cast<int64_t>(st.st_size);

  auto read_at = [&](int64_t offset, void* buf, int64_t n) {
    auto* c = static_cast<char*>(buf);
    while (n > 0) {
      const ssize_t r = ::pread(fd, c, static_cast<size_t>(n), offset);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      c += r;
      n -= r;
      offset += r;
    }
    return true;
  };

  unsigned char prefix[12];
  if (file_size < 10 || !read_at(0, prefix, 10)) {
    return data_loss(path, ": truncated .npy file (", file_size, " bytes)");
  }
  if (std::memcmp(prefix, "\x93NUMPY", 6) != 0) return data_loss(path, ": not a .npy file (bad magic)");
  const int major = prefix[6];
  int64_t header_len = 0;
  int64_t dict_start = 0;
  if (major == 1) {
    header_len = prefix[8] | (prefix[9] << 8);
    dict_start = 10;
  } else if (major == 2 || major == 3) {
    if (file_size < 12 || !read_at(8, prefix + 8, 4)) return data_loss(path, ": truncated .npy header");
    header_len = static_cast<int64_t>(prefix[8]) | (static_cast<int64_t>(prefix[9]) << 8) |
                 (static_cast<int64_t>(prefix[10]) << 16) | (static_cast<int64_t>(prefix[11]) << 24);
    dict_start = 12;
  } else {
    return data_loss(path, ": unsupported .npy format version ", major, ".", int(prefix[7]));
  }
  const int64_t data_offset = dict_start + header_len;
  if (header_len <= 0 || header_len > (1 << 20) || data_offset > file_size) {
    return data_loss(path, ": truncated .npy header");
  }
  std::string dict(static_cast<size_t>(header_len), '\0');
  if (!read_at(dict_start, dict.data(), header_len)) return data_loss(path, ": truncated .npy header");
  NpyDtype dtype{};
  std::vector<int64_t> shape;
  MS_RETURN_IF_ERROR(parse_header_dict(path, dict, &dtype, &shape));
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && numel > (int64_t{1} << 56) / d)) return data_loss(path, ": bad .npy shape");
    numel *= d;
  }
  const int64_t nbytes = numel * npy_itemsize(dtype);
  if (file_size - data_offset != nbytes) {
    return data_loss(path, ": .npy data is ", file_size - data_offset, " bytes, the header (",
                     npy_descr(dtype), ", ", numel, " elements) says ", nbytes,
                     "; the file is truncated or corrupt");
  }
  if (nbytes == 0) {
    return NpyArray::wrap(dtype, shape, nullptr, nullptr);
  }
  if (data_offset % 8 == 0) {
    void* map = ::mmap(nullptr, static_cast<size_t>(file_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
      const auto size = static_cast<size_t>(file_size);
      std::shared_ptr<const void> keep(map, [size](const void* p) {
        ::munmap(const_cast<void*>(p), size);
      });
      return NpyArray::wrap(dtype, shape, static_cast<const char*>(map) + data_offset, keep);
    }
  }
  auto buf = std::make_shared<std::vector<int64_t>>(static_cast<size_t>((nbytes + 7) / 8));
  if (!read_at(data_offset, buf->data(), nbytes)) return data_loss("cannot read ", path);
  return NpyArray::wrap(dtype, shape, buf->data(), buf);
}

}  // namespace mindspeed
