// The fenced device: the CPU backend with its "device" memory fenced off from host code, the
// way a GPU's memory is. Device blocks come from one reserved arena whose pages are
// inaccessible (PROT_NONE) except while a kernel of the table runs (every op of the wrapped
// table opens the fence around its call, and the transfer ops are kernels too). A host access
// to device memory anywhere else -- a loop in model code, a collective reading a gradient
// bucket, a checkpoint writer -- stops the process with SIGSEGV at the faulting line. Running
// the parallel-equivalence and end-to-end tests on it checks, on a machine without a GPU, the
// host/device boundary the CUDA backend relies on (--device cpu-fenced).
#pragma once

#include <cstdint>
#include <memory>

#include "core/allocator.h"
#include "kernels/kernels.h"

namespace mindspeed::fenced {

/// Device memory in the process's fenced arena (reserved on first use).
std::unique_ptr<MemorySource> device_memory();
/// True when `ptr` lies in the fenced arena.
bool is_device_pointer(const void* ptr);
/// `inner` with every op opening the fence around its call (nested calls and calls from
/// several threads keep it open until the last one returns). Each call also checks that its
/// pointer arguments (and those inside DropoutSpec and AttentionMask) are device memory, but
/// for the ones the kernel table's contract keeps on the host: a GPU kernel could read no other.
KernelTable fenced_kernels(const KernelTable& inner);

/// Opens the fence for the lifetime of the object (what each wrapped kernel does); for code
/// that is itself a device-side operation, such as the emulated device's transfers.
class FenceOpen {
 public:
  FenceOpen();
  ~FenceOpen();
  FenceOpen(const FenceOpen&) = delete;
  FenceOpen& operator=(const FenceOpen&) = delete;
};

}  // namespace mindspeed::fenced
