// Tensor (owning, from the Allocator) and TensorView (non-owning): a pointer, a dtype and a
// row-major shape of up to kMaxDims dimensions. Kernels take raw pointers plus dimensions
// (llm.c style); modules keep Tensors in their per-micro-batch saved state and TensorViews
// into the contiguous parameter and gradient buffers.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "core/allocator.h"
#include "core/check.h"
#include "core/dtype.h"

namespace mindspeed {

class Shape {
 public:
  static constexpr int kMaxDims = 5;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    MS_CHECK(static_cast<int>(dims.size()) <= kMaxDims, "too many dimensions");
    for (int64_t d : dims) dims_[ndim_++] = d;
  }
  /// From any range of sizes (a std::vector read from a file).
  template <typename Range>
  static Shape from(const Range& dims) {
    Shape s;
    for (int64_t d : dims) {
      MS_CHECK(s.ndim_ < kMaxDims, "too many dimensions");
      s.dims_[s.ndim_++] = d;
    }
    return s;
  }
  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim_; ++i) n *= dims_[i];
    return n;
  }
  bool operator==(const Shape& other) const {
    if (ndim_ != other.ndim_) return false;
    for (int i = 0; i < ndim_; ++i)
      if (dims_[i] != other.dims_[i]) return false;
    return true;
  }
  std::string to_string() const;

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  Shape shape;

  int64_t numel() const { return shape.numel(); }
  int64_t nbytes() const { return numel() * dtype_size(dtype); }
  bool empty() const { return data == nullptr; }
  float* f32() const {
    MS_DCHECK(dtype == DType::kFloat32, "tensor is ", dtype_name(dtype), ", not fp32");
    return static_cast<float*>(data);
  }
  bf16* bf() const {
    MS_DCHECK(dtype == DType::kBFloat16, "tensor is ", dtype_name(dtype), ", not bf16");
    return static_cast<bf16*>(data);
  }
  int32_t* i32() const {
    MS_DCHECK(dtype == DType::kInt32, "tensor is ", dtype_name(dtype), ", not int32");
    return static_cast<int32_t*>(data);
  }
  int64_t* i64() const {
    MS_DCHECK(dtype == DType::kInt64, "tensor is ", dtype_name(dtype), ", not int64");
    return static_cast<int64_t*>(data);
  }
};

/// Owns its memory; move-only. An empty Tensor owns nothing.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Allocator& allocator, Shape shape, DType dtype, MemoryCategory category)
      : allocator_(&allocator) {
    view_.shape = shape;
    view_.dtype = dtype;
    view_.data = allocator.allocate(view_.nbytes(), category);
  }
  ~Tensor() { reset(); }
  Tensor(Tensor&& other) noexcept
      : allocator_(std::exchange(other.allocator_, nullptr)), view_(std::exchange(other.view_, {})) {}
  Tensor& operator=(Tensor&& other) noexcept {
    if (this != &other) {
      reset();
      allocator_ = std::exchange(other.allocator_, nullptr);
      view_ = std::exchange(other.view_, {});
    }
    return *this;
  }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  void reset() {
    if (allocator_ != nullptr) allocator_->deallocate(view_.data);
    allocator_ = nullptr;
    view_ = {};
  }
  /// Zero-filled tensor.
  static Tensor zeros(Allocator& allocator, Shape shape, DType dtype, MemoryCategory category);

  const TensorView& view() const { return view_; }
  const Shape& shape() const { return view_.shape; }
  DType dtype() const { return view_.dtype; }
  int64_t numel() const { return view_.numel(); }
  int64_t nbytes() const { return view_.nbytes(); }
  bool empty() const { return view_.data == nullptr; }
  void* data() const { return view_.data; }
  float* f32() const { return view_.f32(); }
  bf16* bf() const { return view_.bf(); }
  int32_t* i32() const { return view_.i32(); }
  int64_t* i64() const { return view_.i64(); }

 private:
  Allocator* allocator_ = nullptr;
  TensorView view_;
};

}  // namespace mindspeed
