// A table of constants a module computes on the host and its kernels read (RoPE's cos/sin,
// ALiBi's slopes): on the CPU the host values themselves; on a device, a copy in the backend's
// memory made at first use (one per table, through the backend's transfer). The copy is a cache
// of values that never change, so reading it from const module code is safe.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "core/tensor.h"
#include "kernels/backend.h"

namespace mindspeed {

class ConstantTable {
 public:
  ConstantTable() = default;
  explicit ConstantTable(std::vector<float> values) : host_(std::move(values)) {}
  ConstantTable(ConstantTable&& other) noexcept : host_(std::move(other.host_)) {}
  ConstantTable& operator=(ConstantTable&& other) noexcept {
    host_ = std::move(other.host_);
    return *this;
  }

  bool empty() const { return host_.empty(); }
  const std::vector<float>& host() const { return host_; }
  /// The values where `backend`'s kernels read them (`alloc` holds the device copy); null when
  /// empty. The device copy must not outlive `alloc`.
  const float* on(const Backend& backend, Allocator& alloc) const;

 private:
  std::vector<float> host_;
  mutable std::once_flag uploaded_;
  mutable Tensor device_;
};

}  // namespace mindspeed
