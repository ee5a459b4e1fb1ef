// The backend's transfers as the parallel layer takes them (parallel/staged_process_group.h):
// its collectives stage device buffers through host memory with these.
#pragma once

#include "kernels/backend.h"
#include "parallel/staged_process_group.h"

namespace mindspeed {

/// Transfers through `backend`'s kernel table (the backend is copied: it shares its state).
inline DeviceTransfers device_transfers(const Backend& backend) {
  DeviceTransfers t;
  t.is_device = [backend](const void* ptr) { return is_device_memory(backend, ptr); };
  t.to_host = [backend](void* host, const void* device, int64_t bytes) {
    backend.kernels.copy_to_host(backend.context, host, device, bytes);
  };
  t.to_device = [backend](void* device, const void* host, int64_t bytes) {
    backend.kernels.copy_to_device(backend.context, device, host, bytes);
  };
  t.device_copy = [backend](void* dst, const void* src, int64_t bytes) {
    backend.kernels.copy_bytes(backend.context, dst, src, bytes);
  };
  return t;
}

}  // namespace mindspeed
