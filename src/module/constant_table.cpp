// ConstantTable (constant_table.h).
#include "module/constant_table.h"

namespace mindspeed {

const float* ConstantTable::on(const Backend& backend, Allocator& alloc) const {
  if (host_.empty()) return nullptr;
  if (backend.unified_memory()) return host_.data();
  std::call_once(uploaded_, [&] {
    device_ = Tensor(alloc, Shape{static_cast<int64_t>(host_.size())}, DType::kFloat32, MemoryCategory::kWorkspace);
    backend.kernels.copy_to_device(backend.context, device_.data(), host_.data(),
                                   static_cast<int64_t>(host_.size() * sizeof(float)));
  });
  return device_.f32();
}

}  // namespace mindspeed
