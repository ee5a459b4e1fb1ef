// Shape formatting and zero-filled tensors.
#include "core/tensor.h"

#include <cstring>
#include <sstream>

namespace mindspeed {

std::string Shape::to_string() const {
  std::ostringstream out;
  out << "[";
  for (int i = 0; i < ndim_; ++i) out << (i ? ", " : "") << dims_[i];
  out << "]";
  return out.str();
}

Tensor Tensor::zeros(Allocator& allocator, Shape shape, DType dtype, MemoryCategory category) {
  Tensor t(allocator, shape, dtype, category);
  if (t.nbytes() > 0) std::memset(t.data(), 0, static_cast<size_t>(t.nbytes()));
  return t;
}

}  // namespace mindspeed
