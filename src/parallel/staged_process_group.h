// The staged collectives: a ProcessGroup for buffers in a device's memory over a group that
// moves host memory (MPI). Each collective copies its device buffers into host staging memory,
// runs the inner group's collective there, and copies the results back into the device buffers
// when it completes (the copy back happens in Work::wait(), on the caller's thread). Host
// buffers pass straight through. This is the CUDA backend's path where no NCCL communicator
// serves the group (several ranks sharing one GPU, the equivalence tests on one GPU), and the
// fenced device's always (kernels/fenced/): the parallel layouts run unchanged on a device.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "parallel/process_group.h"

namespace mindspeed {

/// How host code moves data in and out of the device (the backend's transfer kernels; the
/// parallel layer sees no kernels).
struct DeviceTransfers {
  std::function<bool(const void* ptr)> is_device;
  std::function<void(void* host, const void* device, int64_t bytes)> to_host;  ///< returns once copied
  std::function<void(void* device, const void* host, int64_t bytes)> to_device;
  std::function<void(void* device_dst, const void* device_src, int64_t bytes)> device_copy;
};

/// `inner` (owned) behind staged collectives.
std::unique_ptr<ProcessGroup> make_staged_process_group(std::unique_ptr<ProcessGroup> inner, DeviceTransfers transfers);

}  // namespace mindspeed
