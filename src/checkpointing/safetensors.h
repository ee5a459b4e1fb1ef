// The safetensors file format (Hugging Face): an 8-byte little-endian header length N, N
// bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
// {str: str}}, then the data section. The reader checks every offset and size against the
// file and the dtype/shape (a damaged file is an error naming the file and the tensor,
// never a crash); the writer is atomic (temporary file, then rename).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "checkpointing/durable_file.h"
#include "core/status.h"

namespace mindspeed {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;            ///< "F32", "BF16", "F16", "I32", "I64", ...
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;   ///< byte range inside the data section
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  /// Validates the header against the file and maps the data section (copies share it).
  static StatusOr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsEntry* find(const std::string& name) const;
  /// CRC-32 (zlib's) of the whole file, from the mapping (its pages stay for the reads).
  uint32_t crc32() const;
  /// The tensor as fp32 (F32, BF16 and F16 are converted). NotFound if absent;
  /// InvalidArgument if `expected_shape` is given and differs.
  StatusOr<std::vector<float>> read_f32(const std::string& name,
                                        const std::vector<int64_t>& expected_shape = {}) const;
  /// OK when the tensor exists with exactly this shape; else an error naming file, tensor, shapes.
  Status check_shape(const std::string& name, const std::vector<int64_t>& expected_shape) const;
  /// Reads elements first, first + stride, ... (`count` of them) of the tensor's flat data
  /// into out[0, count) as fp32, straight from the mapping: a rank reads only the rows or
  /// columns of its own shard. InvalidArgument if they run past the tensor.
  Status read_f32_elements(const std::string& name, int64_t first, int64_t count, int64_t stride,
                           float* out) const;
  /// An integer tensor (I32 or I64) as int32; InvalidArgument for an I64 value outside int32.
  StatusOr<std::vector<int32_t>> read_i32(const std::string& name) const;

 private:
  std::string path_;
  std::vector<SafetensorsEntry> entries_;
  std::unordered_map<std::string, size_t> by_name_;  // index into entries_
  std::map<std::string, std::string> metadata_;
  std::shared_ptr<const char> mapping_;  // the whole file, mapped read-only
  int64_t file_size_ = 0;
  const char* data_ = nullptr;            // its data section
};

/// A tensor to write: fp32 values or int32 values (exactly one non-empty).
struct SafetensorsTensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<int32_t> i32;
};

Status write_safetensors(const std::string& path,
                         const std::vector<SafetensorsTensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

/// The same, returning the written file's size and CRC-32 (computed while writing).
StatusOr<FileDigest> write_safetensors_with_digest(const std::string& path,
                                                   const std::vector<SafetensorsTensorToWrite>& tensors,
                                                   const std::map<std::string, std::string>& metadata = {});

}  // namespace mindspeed
