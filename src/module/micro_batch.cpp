// upload_micro_batch (forward_context.h): a micro-batch's arrays into a device's memory.
#include "module/forward_context.h"

namespace mindspeed {
namespace {

// A device copy of one array; an absent (empty) array stays absent, so MicroBatch's kernel_*()
// accessors still see null.
template <typename T>
Tensor upload(const std::vector<T>& host, const Backend& backend, Allocator& alloc) {
  if (host.empty()) return Tensor();
  return device_copy_of(backend, alloc, std::span<const T>(host), MemoryCategory::kActivations);
}

}  // namespace

void upload_micro_batch(MicroBatch& mb, const Backend& backend, Allocator& alloc) {
  if (backend.unified_memory()) return;
  auto arrays = std::make_shared<MicroBatchDeviceArrays>();
  arrays->tokens = upload(mb.tokens, backend, alloc);
  arrays->labels = upload(mb.labels, backend, alloc);
  arrays->loss_mask = upload(mb.loss_mask, backend, alloc);
  arrays->position_ids = upload(mb.position_ids, backend, alloc);
  arrays->doc_start = upload(mb.doc_start, backend, alloc);
  arrays->seq_index = upload(mb.seq_index, backend, alloc);
  mb.device = std::move(arrays);
}

}  // namespace mindspeed
