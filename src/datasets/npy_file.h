// NumPy .npy files (format 1.0 written, 1.0-3.0 read; little-endian, C order), so the index
// caches we write are loadable by Megatron's numpy.load and the other way round.
// Port of numpy/lib/format.py (write_array / read_array header handling) for plain integer
// and float arrays. Reads memory-map the file when the data is aligned (numpy.load's
// mmap_mode='r', which Megatron uses for its caches); writes are atomic (temp file + rename).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/status.h"

namespace mindspeed {

enum class NpyDtype { kUint8, kInt16, kUint16, kInt32, kUint32, kInt64, kFloat64 };

/// NumPy descr string ("<i4", "|u1", ...) and item size of a dtype.
const char* npy_descr(NpyDtype dtype);
int64_t npy_itemsize(NpyDtype dtype);

template <typename T>
constexpr NpyDtype npy_dtype_of();
template <> constexpr NpyDtype npy_dtype_of<uint8_t>() { return NpyDtype::kUint8; }
template <> constexpr NpyDtype npy_dtype_of<int16_t>() { return NpyDtype::kInt16; }
template <> constexpr NpyDtype npy_dtype_of<uint16_t>() { return NpyDtype::kUint16; }
template <> constexpr NpyDtype npy_dtype_of<int32_t>() { return NpyDtype::kInt32; }
template <> constexpr NpyDtype npy_dtype_of<uint32_t>() { return NpyDtype::kUint32; }
template <> constexpr NpyDtype npy_dtype_of<int64_t>() { return NpyDtype::kInt64; }
template <> constexpr NpyDtype npy_dtype_of<double>() { return NpyDtype::kFloat64; }

/// An immutable n-d array with a NumPy dtype, backed by a vector or a read-only mmap.
class NpyArray {
 public:
  NpyArray() = default;

  /// Takes ownership of `values`; `shape` defaults to [values.size()].
  template <typename T>
  static NpyArray from_vector(std::vector<T> values, std::vector<int64_t> shape = {}) {
    if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
    auto holder = std::make_shared<std::vector<T>>(std::move(values));
    NpyArray a;
    a.dtype_ = npy_dtype_of<T>();
    a.shape_ = std::move(shape);
    a.data_ = reinterpret_cast<const std::byte*>(holder->data());
    a.keepalive_ = holder;
    MS_CHECK(a.numel() == static_cast<int64_t>(holder->size()), "NpyArray shape/size mismatch");
    return a;
  }
  /// Wraps external storage kept alive by `keepalive`.
  static NpyArray wrap(NpyDtype dtype, std::vector<int64_t> shape, const void* data,
                       std::shared_ptr<const void> keepalive);

  NpyDtype dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const;
  int64_t nbytes() const { return numel() * npy_itemsize(dtype_); }
  const void* raw() const { return data_; }
  bool empty() const { return numel() == 0; }

  /// Typed pointer; the dtype must be exactly T's.
  template <typename T>
  const T* data() const {
    MS_CHECK(dtype_ == npy_dtype_of<T>(), "NpyArray dtype is ", npy_descr(dtype_),
             ", not ", npy_descr(npy_dtype_of<T>()));
    return reinterpret_cast<const T*>(data_);
  }
  /// Element `flat` of an integer array, widened to int64.
  int64_t int_at(int64_t flat) const;

 private:
  NpyDtype dtype_ = NpyDtype::kInt64;
  std::vector<int64_t> shape_;
  const std::byte* data_ = nullptr;
  std::shared_ptr<const void> keepalive_;
};

/// The exact bytes numpy.save (NumPy 1.24) writes for `array`: format 1.0 header with sorted
/// keys, 21 spare spaces for the growth axis and 64-byte alignment, then the data.
std::string npy_header(const NpyArray& array);

/// Writes `array` as .npy to `path` atomically (a temp file in the same folder, then rename).
Status write_npy(const std::string& path, const NpyArray& array);
/// Reads a .npy file. Errors (kNotFound, kDataLoss) name the file and what is wrong:
/// bad magic, unsupported version/dtype/order, truncated or oversized data.
StatusOr<NpyArray> read_npy(const std::string& path);

/// Writes `contents` to `path` atomically (temp + rename), creating no directories.
Status write_file_atomic(const std::string& path, const std::string& contents);
/// Reads a whole file.
StatusOr<std::string> read_whole_file(const std::string& path);

}  // namespace mindspeed
