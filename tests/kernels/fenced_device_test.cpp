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
  auto* y = static_cast<float*>(device.allocate(1000 * sizeof(float), MemoryCategory::kActivations));
  k.copy_to_device(kKc, y, ones.data(), 1000 * sizeof(float));
  k.add_inplace(kKc, x, y, 1000);
  k.scale_inplace(kKc, x, 3.0f, 1000);
  k.copy_to_host(kKc, host.data(), x, 1000 * sizeof(float));
  EXPECT_EQ(host, std::vector<float>(1000, 3.0f));
  device.deallocate(y);
  {
    fenced::FenceOpen open;  // nested opens keep the fence open
    fenced::FenceOpen inner;
    EXPECT_EQ(x[7], 3.0f);
  }
  device.deallocate(x);
}

TEST(FencedDeviceDeathTest, KernelsGivenHostMemoryStopTheProcess) {
  Allocator device(fenced::device_memory());
  const KernelTable k = fenced::fenced_kernels(select_kernels(KernelOptions{}));
  auto* x = static_cast<float*>(device.allocate(64 * sizeof(float), MemoryCategory::kActivations));
  std::vector<float> host(64, 1.0f);
  EXPECT_DEATH(k.add_inplace(kKc, x, host.data(), 64), "argument 2 of kernel add_inplace is host memory");
  DropoutSpec dropout;
  dropout.p = 0.5f;
  std::vector<int32_t> seq_index(8);
  dropout.seq_index = seq_index.data();
  EXPECT_DEATH(k.dropout_forward(kKc, x, x, 64, dropout), "argument 4 of kernel dropout_forward is host memory");
  // The contract's host arguments pass: the transfers' host side, masked_sums' result.
  double sums[2];
  k.copy_to_device(kKc, x, host.data(), 64 * sizeof(float));
  k.masked_sums(kKc, sums, x, x, 64);
  EXPECT_EQ(sums[0], 64.0);
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
