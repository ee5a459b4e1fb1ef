// Safetensors reader and writer (safetensors.h).
#include "checkpointing/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "checkpointing/durable_file.h"
#include "core/dtype.h"
#include "core/json_util.h"
#include "tokenizer/unicode.h"

namespace mindspeed {
namespace {

int64_t dtype_bytes(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}


}  // namespace

int64_t SafetensorsEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

StatusOr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return not_found("cannot open safetensors file '", path, "'");
  const int64_t file_size = static_cast<int64_t>(in.tellg());
  in.seekg(0);
  if (file_size < 8) {
    return data_loss("safetensors file '", path, "' is ", file_size,
                     " bytes: too short for the 8-byte header length (truncated?)");
  }
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  if (header_len > static_cast<uint64_t>(file_size - 8)) {
    return data_loss("safetensors file '", path, "': header length ", header_len,
                     " exceeds the file size ", file_size, " (truncated or not a safetensors file)");
  }
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  std::string json_error;
  std::optional<nlohmann::json> parsed = try_parse_json(header, &json_error);
  if (!parsed) {
    return data_loss("safetensors file '", path, "': the header is not a JSON object (", json_error,
                     "; truncated or not a safetensors file?)");
  }
  const nlohmann::json& json = *parsed;
  if (!json.is_object()) {
    return data_loss("safetensors file '", path, "': the header is not a JSON object but a JSON ",
                     json.type_name());
  }
  SafetensorsFile file;
  file.path_ = path;
  const int64_t data_size = file_size - 8 - static_cast<int64_t>(header_len);
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) return data_loss(path, ": __metadata__ is not an object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) return data_loss(path, ": __metadata__ value '", m.key(), "' is not a string");
        file.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const auto& v = it.value();
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets") ||
        !v["dtype"].is_string() || !v["shape"].is_array() || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2) {
      return data_loss(path, ": tensor '", it.key(), "' needs dtype, shape and data_offsets [begin, end]");
    }
    SafetensorsEntry e;
    e.name = it.key();
    e.dtype = v["dtype"].get<std::string>();
    for (const auto& d : v["shape"]) {
      // Non-negative integers are stored unsigned; get<int64_t>() wraps those above INT64_MAX.
      if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return data_loss(path, ": tensor '", e.name, "' has a bad shape entry ", describe_json_value(d),
                         " (expected a non-negative integer)");
      }
      e.shape.push_back(d.get<int64_t>());
    }
    // The element count must fit the data section before it is multiplied out (a shape such
    // as [2^32, 2^32] would otherwise wrap around to 0 elements and pass the size check).
    if (std::find(e.shape.begin(), e.shape.end(), 0) == e.shape.end()) {
      int64_t numel = 1;
      for (int64_t d : e.shape) {
        if (numel > data_size / d) {
          return data_loss(path, ": tensor '", e.name, "' has a shape with more elements than the ", data_size,
                           "-byte data section holds");
        }
        numel *= d;
      }
    }
    if (!v["data_offsets"][0].is_number_unsigned() || !v["data_offsets"][1].is_number_unsigned() ||
        v["data_offsets"][0].get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ||
        v["data_offsets"][1].get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return data_loss(path, ": tensor '", e.name, "' has data_offsets ",
                       describe_json_value(v["data_offsets"]), " (expected two non-negative integers)");
    }
    e.begin = v["data_offsets"][0].get<int64_t>();
    e.end = v["data_offsets"][1].get<int64_t>();
    const int64_t width = dtype_bytes(e.dtype);
    if (width == 0) return data_loss(path, ": tensor '", e.name, "' has unknown dtype '", e.dtype, "'");
    if (e.begin < 0 || e.end < e.begin || e.end > data_size) {
      return data_loss(path, ": tensor '", e.name, "' data_offsets [", e.begin, ", ", e.end,
                       "] fall outside the ", data_size, "-byte data section (truncated file?)");
    }
    if (e.end - e.begin != e.numel() * width) {
      return data_loss(path, ": tensor '", e.name, "' has ", e.end - e.begin, " bytes but shape and ",
                       e.dtype, " need ", e.numel() * width);
    }
    file.entries_.push_back(std::move(e));
  }
  for (size_t i = 0; i < file.entries_.size(); ++i) file.by_name_.emplace(file.entries_[i].name, i);
  // Tensors must not overlap (the format also requires no holes; we only need no overlap).
  std::vector<const SafetensorsEntry*> sorted;
  for (const auto& e : file.entries_) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->begin < sorted[i - 1]->end) {
      return data_loss(path, ": tensors '", sorted[i - 1]->name, "' and '", sorted[i]->name, "' overlap");
    }
  }
  // The data section is memory-mapped, not read: a rank touches only the pages of the tensors
  // it reads, and a large file does not need to fit in its memory.
  in.close();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return not_found("cannot open safetensors file '", path, "'");
  void* mapped = ::mmap(nullptr, static_cast<size_t>(file_size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapped == MAP_FAILED) return data_loss("safetensors file '", path, "': mmap failed: ", std::strerror(errno));
  const size_t length = static_cast<size_t>(file_size);
  file.mapping_ = std::shared_ptr<const char>(static_cast<const char*>(mapped), [length](const char* base) {
    ::munmap(const_cast<char*>(base), length);
  });
  file.data_ = file.mapping_.get() + 8 + header_len;
  file.file_size_ = file_size;
  return file;
}

uint32_t SafetensorsFile::crc32() const { return crc32_update(0, mapping_.get(), static_cast<size_t>(file_size_)); }

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

Status SafetensorsFile::check_shape(const std::string& name, const std::vector<int64_t>& expected_shape) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr) return not_found(path_, ": no tensor named '", name, "'");
  if (e->shape != expected_shape) {
    std::ostringstream want, got;
    for (int64_t d : expected_shape) want << d << ",";
    for (int64_t d : e->shape) got << d << ",";
    return invalid_argument(path_, ": tensor '", name, "' has shape [", got.str(), "] but the model needs [",
                            want.str(), "] (does config.json match the model flags?)");
  }
  return ok_status();
}

Status SafetensorsFile::read_f32_elements(const std::string& name, int64_t first, int64_t count, int64_t stride,
                                          float* out) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr) return not_found(path_, ": no tensor named '", name, "'");
  if (count == 0) return ok_status();
  if (first < 0 || count < 0 || stride < 1 || first >= e->numel() || (count - 1) > (e->numel() - 1 - first) / stride) {
    return invalid_argument(path_, ": tensor '", name, "' (", e->numel(), " elements) has no elements ", first, " + ",
                        stride, " * [0, ", count, ")");
  }
  const char* src = data_ + e->begin;
  if (e->dtype == "F32") {
    if (stride == 1) {
      std::memcpy(out, src + 4 * first, static_cast<size_t>(count) * 4);
    } else {
      for (int64_t i = 0; i < count; ++i) std::memcpy(out + i, src + 4 * (first + i * stride), 4);
    }
  } else if (e->dtype == "BF16") {
    for (int64_t i = 0; i < count; ++i) {
      bf16 v;
      std::memcpy(&v.bits, src + 2 * (first + i * stride), 2);
      out[i] = bf16_to_float(v);
    }
  } else if (e->dtype == "F16") {
    for (int64_t i = 0; i < count; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * (first + i * stride), 2);
      out[i] = half_to_float(h);
    }
  } else {
    return invalid_argument(path_, ": tensor '", name, "' is ", e->dtype, ", expected F32, BF16 or F16");
  }
  return ok_status();
}

StatusOr<std::vector<float>> SafetensorsFile::read_f32(const std::string& name,
                                                       const std::vector<int64_t>& expected_shape) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr) return not_found(path_, ": no tensor named '", name, "'");
  if (!expected_shape.empty()) MS_RETURN_IF_ERROR(check_shape(name, expected_shape));
  std::vector<float> out(static_cast<size_t>(e->numel()));
  MS_RETURN_IF_ERROR(read_f32_elements(name, 0, e->numel(), 1, out.data()));
  return out;
}

StatusOr<std::vector<int32_t>> SafetensorsFile::read_i32(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr) return not_found(path_, ": no tensor named '", name, "'");
  std::vector<int32_t> out(static_cast<size_t>(e->numel()));
  const char* src = data_ + e->begin;
  if (e->dtype == "I32") {
    if (!out.empty()) std::memcpy(out.data(), src, out.size() * 4);  // no memcpy from/to null
  } else if (e->dtype == "I64") {
    for (size_t i = 0; i < out.size(); ++i) {
      int64_t v;
      std::memcpy(&v, src + 8 * i, 8);
      if (!std::in_range<int32_t>(v)) {  // a cast would wrap it into another value
        return invalid_argument(path_, ": tensor '", name, "' element ", i, " is ", v,
                                ", which does not fit int32");
      }
      out[i] = static_cast<int32_t>(v);
    }
  } else {
    return invalid_argument(path_, ": tensor '", name, "' is ", e->dtype, ", expected I32 or I64");
  }
  return out;
}

StatusOr<FileDigest> write_safetensors_with_digest(const std::string& path,
                                                   const std::vector<SafetensorsTensorToWrite>& tensors,
                                                   const std::map<std::string, std::string>& metadata) {
  // The header is JSON: names and metadata must be UTF-8 (nlohmann's dump() would throw).
  for (const auto& [key, value] : metadata) {
    if (find_invalid_utf8(key) != std::string::npos || find_invalid_utf8(value) != std::string::npos) {
      return invalid_argument("safetensors file '", path, "': metadata entry '", key,
                              "' is not valid UTF-8 (the header is JSON)");
    }
  }
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  // The tensors are written straight from their vectors (no copy of the data section).
  std::vector<std::string_view> data;
  int64_t offset = 0;
  std::set<std::string> names;
  for (const auto& t : tensors) {
    if (find_invalid_utf8(t.name) != std::string::npos) {
      return invalid_argument("safetensors file '", path, "': tensor name '", t.name,
                              "' is not valid UTF-8 (the header is JSON)");
    }
    if (t.name == "__metadata__" || !names.insert(t.name).second) {
      return invalid_argument("safetensors file '", path, "': tensor name '", t.name, "' is ",
                              t.name == "__metadata__" ? "reserved for the metadata" : "used twice");
    }
    const bool is_f32 = !t.f32.empty() || t.i32.empty();
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    const int64_t count = is_f32 ? static_cast<int64_t>(t.f32.size()) : static_cast<int64_t>(t.i32.size());
    if (count != numel) return invalid_argument("tensor '", t.name, "': ", count, " values for its shape");
    const char* bytes = is_f32 ? reinterpret_cast<const char*>(t.f32.data()) : reinterpret_cast<const char*>(t.i32.data());
    data.emplace_back(bytes, static_cast<size_t>(count) * 4);
    header[t.name] = {{"dtype", is_f32 ? "F32" : "I32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + count * 4}}};
    offset += count * 4;
  }
  // Validated above; `replace` only makes sure dump() cannot throw.
  std::string json = header.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  while (json.size() % 8 != 0) json.push_back(' ');  // the format pads the header with spaces
  const uint64_t len = json.size();
  std::vector<std::string_view> pieces{std::string_view(reinterpret_cast<const char*>(&len), 8), json};
  pieces.insert(pieces.end(), data.begin(), data.end());
  return write_file_atomically(path, pieces);
}

Status write_safetensors(const std::string& path, const std::vector<SafetensorsTensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  return write_safetensors_with_digest(path, tensors, metadata).status();
}

}  // namespace mindspeed
