// upload_micro_batch (forward_context.h): a micro-batch's arrays into a device's memory.
#include "module/forward_context.h"

namespace mindspeed {
namespace {

template <typename T>
Tensor upload(const std::vector<T>& host, DType dtype, const Backend& backend, Allocator& alloc) {
  if (host.empty()) return Tensor();
  Tensor t(alloc, Shape{static_cast<int64_t>(host.size())}, dtype, MemoryCategory::kActivations);
  backend.kernels.copy_to_device(backend.context, t.data(), host.data(),
                                 static_cast<int64_t>(host.size() * sizeof(T)));
  return t;
}

}  // namespace

void upload_micro_batch(MicroBatch& mb, const Backend& backend, Allocator& alloc) {
  if (backend.unified_memory()) return;
  auto arrays = std::make_shared<MicroBatchDeviceArrays>();
  arrays->tokens = upload(mb.tokens, DType::kInt32, backend, alloc);
  arrays->labels = upload(mb.labels, DType::kInt32, backend, alloc);
  arrays->loss_mask = upload(mb.loss_mask, DType::kFloat32, backend, alloc);
  arrays->position_ids = upload(mb.position_ids, DType::kInt32, backend, alloc);
  arrays->doc_start = upload(mb.doc_start, DType::kInt32, backend, alloc);
  arrays->seq_index = upload(mb.seq_index, DType::kInt32, backend, alloc);
  mb.device = std::move(arrays);
}

}  // namespace mindspeed
