// The fenced device (kernels/fenced/fenced_device.h): its memory works inside kernels of the
// wrapped table, and any host access outside one stops the process; blocks are reused and the
// arena coalesces what comes back.
#include "kernels/fenced/fenced_device.h"

#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"

namespace mindspeed {
namespace {

using testing::kKc;

TEST(FencedDevice, KernelsOfTheWrappedTableReachItsMemory) {
  Allocator device(fenced::device_memory());
  const KernelTable k = fenced::fenced_kernels(select_kernels(KernelOptions{}));
  auto* x =
      static_cast<float*>(device.allocate(1000 * sizeof(float), MemoryCategory::kActivations));
  EXPECT_TRUE(fenced::is_device_pointer(x));
  std::vector<float> host(1000, 0.0f);
  EXPECT_FALSE(fenced::is_device_pointer(host.data()));
  k.fill_zero(kKc, x, 1000);
  std::vector<float> ones(1000, 1.0f);
  // add_inplace reads a host vector into device memory: a kernel may touch both.
  k.add_inplace(kKc, x, ones.data(), 1000);
  k.scale_inplace(kKc, x, 3.0f, 1000);
  k.copy(kKc, host.data(), x, 1000);
  EXPECT_EQ(host, std::vector<float>(1000, 3.0f));
  {
    fenced::FenceOpen open;  // nested opens keep the fence open
    fenced::FenceOpen inner;
    EXPECT_EQ(x[7], 3.0f);
  }
  device.deallocate(x);
}

TEST(FencedDeviceDeathTest, HostCodeTouchingDeviceMemoryStopsTheProcess) {
  Allocator device(fenced::device_memory());
  auto* x = static_cast<float*>(device.allocate(64, MemoryCategory::kActivations));
  EXPECT_DEATH({ x[0] = 1.0f; }, "");
  EXPECT_DEATH(
      {
        volatile float v = x[3];
        (void)v;
      },
      "");
  device.deallocate(x);
}

TEST(FencedDevice, ArenaReusesAndCoalescesBlocks) {
  auto source = fenced::device_memory();
  void* a = source->allocate(8192);
  void* b = source->allocate(4096);
  void* c = source->allocate(4096);
  source->release(a);
  source->release(b);  // a and b coalesce into 12 KiB before c
  void* d = source->allocate(12288);
  EXPECT_EQ(d, a);
  source->release(c);
  source->release(d);
}

}  // namespace
}  // namespace mindspeed
