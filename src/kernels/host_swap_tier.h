// Host swap tier: the SwapTier (core/swap_tier.h) of a device backend. --swap-attention and
// --swap-optimizer move a tensor's bytes from the device's memory into host memory (pinned on
// the CUDA backend, so the copies are DMA transfers) and back, through the kernel table's
// transfer ops: the role of the host tier behind MindSpeed's swap on an NPU. The CPU backend
// keeps the file tier (FileSwapTier), since its "device" memory is host memory already.
//
//   swap_out(t)   a host block of t's size (a caching Allocator over the host memory source)
//                 receives t's bytes (copy_to_host: after the work queued before it); t's
//                 device block goes back to the device Allocator and the bytes count as
//                 swapped there (Allocator::note_swapped).
//   prefetch(s)   a device tensor (same shape, dtype, category) is allocated and the copy back
//                 queued (copy_to_device, on the stream ahead of the kernels that read it).
//   swap_in(s)    prefetches if not yet done, frees the host block, returns the device tensor.
// Copies to the host wait for the stream (a copy stream with events is the follow-up that lets
// them overlap compute on a GPU). Thread-safe; the device Allocator must outlive the tier, and
// the tier every SwappedTensor it made.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/allocator.h"
#include "core/status.h"
#include "core/swap_tier.h"
#include "kernels/backend.h"

namespace mindspeed {

class HostSwapTier final : public SwapTier {
 public:
  /// The tier of a device backend (CUDA: pinned host memory; the fenced device: host memory);
  /// tensors come from and go back to `device_alloc`. InvalidArgument on the CPU backend (its
  /// tier is the file), or the CUDA runtime's reason when no pinned memory can be had.
  static StatusOr<std::unique_ptr<HostSwapTier>> open(const Backend& backend,
                                                      Allocator& device_alloc);
  /// Fatal if a SwappedTensor of this tier is still alive (it would point at a dead tier).
  ~HostSwapTier() override;
  HostSwapTier(const HostSwapTier&) = delete;
  HostSwapTier& operator=(const HostSwapTier&) = delete;

  SwappedTensor swap_out(Tensor&& t) override;
  void prefetch(SwappedTensor& s) override;
  Tensor swap_in(SwappedTensor&& s) override;
  /// Waits for the backend's stream (the copies to the device queued so far).
  void synchronize() override;

  /// Bytes of host memory held by swapped tensors now.
  int64_t used_bytes() const;
  /// "pinned host" or "host", for messages.
  const char* host_memory_name() const { return host_name_; }

 private:
  struct Entry {
    Shape shape;
    DType dtype = DType::kFloat32;
    MemoryCategory category = MemoryCategory::kActivations;
    void* host = nullptr;    ///< the bytes while swapped; null once freed
    int64_t host_bytes = 0;  ///< as counted by note_swapped (rounded up to Allocator::kAlignment)
    Tensor resident;         ///< the device copy once prefetched
  };

  HostSwapTier(const Backend& backend, Allocator& device_alloc,
               std::unique_ptr<MemorySource> host_memory);
  void discard(int64_t id) override;
  Entry& entry_locked(int64_t id);
  void prefetch_locked(Entry& e);
  void free_host_locked(Entry& e);

  const Backend backend_;
  Allocator& device_alloc_;
  const char* host_name_;
  Allocator host_alloc_;  ///< caches host blocks, so the same shapes every step reuse them

  mutable std::mutex mutex_;
  int64_t next_id_ = 1;
  int64_t used_bytes_ = 0;
  std::unordered_map<int64_t, Entry> entries_;
};

}  // namespace mindspeed
