// Memory sources of the CUDA backend for core/allocator.h's caching, counting Allocator:
// device memory of one GPU (cudaMalloc; the Allocator keeps freed blocks cached, as PyTorch's
// caching allocator does, so a training step that repeats its shapes never calls cudaMalloc or
// the synchronising cudaFree again) and pinned host memory (cudaMallocHost) for the transfers
// between host and device (data batches, swap, checkpoints, the staged collectives).
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "core/str_cat.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"

namespace mindspeed {
namespace {

class CudaDeviceMemory final : public MemorySource {
 public:
  explicit CudaDeviceMemory(int device) : device_(device), name_(str_cat("cuda:", device)) {}
  void* allocate(int64_t bytes) override {
    MS_CUDA_CHECK(cudaSetDevice(device_));
    void* ptr = nullptr;
    const cudaError_t error = cudaMalloc(&ptr, static_cast<size_t>(bytes));  // 256-byte aligned
    if (error == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear it: the Allocator gives its cache back and retries, or reports
      return nullptr;
    }
    MS_CUDA_CHECK(error);
    return ptr;
  }
  void release(void* ptr) override {
    MS_CUDA_CHECK(cudaSetDevice(device_));
    MS_CUDA_CHECK(cudaFree(ptr));
  }
  const char* name() const override { return name_.c_str(); }

 private:
  int device_;
  std::string name_;
};

class CudaPinnedHostMemory final : public MemorySource {
 public:
  void* allocate(int64_t bytes) override {
    void* ptr = nullptr;
    const cudaError_t error = cudaMallocHost(&ptr, static_cast<size_t>(bytes));
    if (error == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    MS_CUDA_CHECK(error);
    return ptr;
  }
  void release(void* ptr) override { MS_CUDA_CHECK(cudaFreeHost(ptr)); }
  const char* name() const override { return "pinned host"; }
};

}  // namespace

StatusOr<std::unique_ptr<MemorySource>> cuda_device_memory(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) {
    cudaGetLastError();
    return failed_precondition("no CUDA device ", device, " (", count, " visible)");
  }
  return std::unique_ptr<MemorySource>(std::make_unique<CudaDeviceMemory>(device));
}

StatusOr<std::unique_ptr<MemorySource>> cuda_pinned_host_memory() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return failed_precondition("pinned host memory needs a CUDA device (none visible)");
  }
  return std::unique_ptr<MemorySource>(std::make_unique<CudaPinnedHostMemory>());
}

bool cuda_is_device_pointer(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

}  // namespace mindspeed
