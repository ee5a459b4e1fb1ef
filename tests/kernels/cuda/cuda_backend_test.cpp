// The CUDA backend's bookkeeping, which runs with or without a GPU: the device probe says why
// there is no GPU when there is none (and the backend and its memory refuse to come up); every
// op of the kernel table has a CUDA kernel. On a GPU: the caching allocator over device and
// pinned host memory.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_kernels.h"

namespace mindspeed {
namespace {

TEST(CudaBackend, ProbeNamesTheGpusOrWhyThereAreNone) {
  const DeviceProbe probe = probe_devices();
  EXPECT_TRUE(probe.cuda_built);
  if (probe.cuda_devices == 0) {
    EXPECT_FALSE(probe.reason.empty());
    auto backend = select_cuda_backend(KernelOptions{}, CudaOptions{});
    EXPECT_FALSE(backend.ok()) << "a backend on a machine without a GPU";
    EXPECT_FALSE(cuda_device_memory(0).ok());
    EXPECT_FALSE(cuda_pinned_host_memory().ok());
  } else {
    EXPECT_EQ(static_cast<int>(probe.names.size()), probe.cuda_devices);
    EXPECT_TRUE(probe.reason.empty()) << probe.reason;
    auto bad = select_cuda_backend(KernelOptions{}, CudaOptions{.device = probe.cuda_devices});
    EXPECT_FALSE(bad.ok()) << "a backend on a GPU index that does not exist";
  }
}

// Every op of the kernel table has a CUDA kernel (flash attention when it is selected), each with
// its parity test in tests/kernels/cuda/.
TEST(CudaBackend, EveryKernelTableOpHasACudaKernel) {
  EXPECT_EQ(cuda::missing_cuda_kernels(), std::vector<std::string>{});
  const KernelTable without_flash = cuda::select_cuda_kernels(KernelOptions{});
  EXPECT_EQ(without_flash.flash_attention_forward, nullptr)
      << "flash attention only when selected, as on the CPU";
}

// core/allocator.h's caching allocator over the GPU's memory: device blocks, reused without a
// second cudaMalloc; pinned host blocks for transfers.
using testing::CudaKernelTest;

TEST_F(CudaKernelTest, AllocatorOverDeviceAndPinnedMemory) {
  auto device = cuda_device_memory(0);
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  Allocator alloc(std::move(*device));
  void* a = alloc.allocate(1000, MemoryCategory::kActivations);
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, a), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
  k().fill_zero(kc(), static_cast<float*>(a), 250);
  std::vector<float> back(250, 1.0f);
  ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(kc().stream)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), a, 1000, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, std::vector<float>(250, 0.0f));
  alloc.deallocate(a);
  void* b = alloc.allocate(1000, MemoryCategory::kActivations);
  EXPECT_EQ(a, b);
  EXPECT_EQ(alloc.stats().system_allocations, 1);
  alloc.deallocate(b);
  auto pinned = cuda_pinned_host_memory();
  ASSERT_TRUE(pinned.ok()) << pinned.status().to_string();
  Allocator host(std::move(*pinned));
  void* h = host.allocate(4096, MemoryCategory::kCommunication);
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, h), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
  host.deallocate(h);
}

}  // namespace
}  // namespace mindspeed
