// HostSwapTier (kernels/host_swap_tier.h), the swap tier of a device backend, on the fenced
// device (the CPU with its device memory fenced off from host code, so any host access to a
// swapped tensor's device bytes would stop the test): bitwise round trips in the backward
// order, swapped vs resident accounting, dropped tensors, and the CPU backend refused.
#include "kernels/host_swap_tier.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/check.h"

namespace mindspeed {
namespace {

struct FencedRun {
  Backend backend;
  std::unique_ptr<Allocator> device;
  FencedRun() {
    auto b = select_device_backend(DeviceKind::kCpuFenced, KernelOptions{}, 1, CudaOptions{});
    MS_CHECK_OK(b.status());
    backend = std::move(b).value();
    auto source = device_memory_source(backend);
    MS_CHECK_OK(source.status());
    device = std::make_unique<Allocator>(std::move(source).value());
  }
  // A device tensor holding `bytes` (copied in through the transfer op).
  Tensor upload(const std::vector<uint8_t>& bytes, Shape shape, DType dtype,
                MemoryCategory category) {
    Tensor t(*device, shape, dtype, category);
    backend.kernels.copy_to_device(backend.context, t.data(), bytes.data(), t.nbytes());
    return t;
  }
  std::vector<uint8_t> download(const Tensor& t) {
    std::vector<uint8_t> bytes(static_cast<size_t>(t.nbytes()));
    backend.kernels.copy_to_host(backend.context, bytes.data(), t.data(), t.nbytes());
    return bytes;
  }
};

std::vector<uint8_t> random_bytes(int64_t n, uint64_t seed) {
  std::vector<uint8_t> bytes(static_cast<size_t>(n));
  std::mt19937_64 rng(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

std::unique_ptr<HostSwapTier> open_tier(FencedRun& run) {
  auto tier = HostSwapTier::open(run.backend, *run.device);
  MS_CHECK_OK(tier.status());
  return std::move(tier).value();
}

TEST(HostSwapTier, LayersSwappedOutInForwardComeBackBitwiseInBackwardOrder) {
  FencedRun run;
  auto tier = open_tier(run);
  EXPECT_STREQ(tier->host_memory_name(), "host");
  const std::vector<Shape> shapes = {Shape{3}, Shape{5, 13}, Shape{4097}, Shape{3, 7, 11},
                                     Shape{1}};
  std::vector<std::vector<uint8_t>> originals;
  std::vector<SwappedTensor> swapped;
  int64_t expected_swapped = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const DType dtype = i % 2 == 0 ? DType::kFloat32 : DType::kBFloat16;
    originals.push_back(random_bytes(shapes[i].numel() * dtype_size(dtype), 100 + i));
    Tensor t = run.upload(originals.back(), shapes[i], dtype, MemoryCategory::kActivations);
    const int64_t resident_before = run.device->stats().current_of(MemoryCategory::kActivations);
    swapped.push_back(tier->swap_out(std::move(t)));
    EXPECT_TRUE(t.empty());
    EXPECT_EQ(swapped.back().shape(), shapes[i]);
    EXPECT_EQ(swapped.back().dtype(), dtype);
    // The device block went back; the bytes count as swapped (rounded to the alignment).
    EXPECT_LT(run.device->stats().current_of(MemoryCategory::kActivations), resident_before);
    expected_swapped += (swapped.back().nbytes() + 63) / 64 * 64;
    EXPECT_EQ(run.device->stats().swapped_of(MemoryCategory::kActivations), expected_swapped);
  }
  EXPECT_EQ(run.device->stats().current_of(MemoryCategory::kActivations), 0);
  EXPECT_EQ(tier->used_bytes(), expected_swapped);
  // Backward: the last layer first, each prefetching the one below.
  tier->prefetch(swapped.back());
  for (size_t i = shapes.size(); i-- > 0;) {
    if (i > 0) tier->prefetch(swapped[i - 1]);
    Tensor back = tier->swap_in(std::move(swapped[i]));
    EXPECT_TRUE(swapped[i].empty());
    ASSERT_EQ(back.shape(), shapes[i]);
    EXPECT_EQ(run.download(back), originals[i]) << "bytes differ for " << shapes[i].to_string();
  }
  tier->synchronize();
  EXPECT_EQ(tier->used_bytes(), 0);
  EXPECT_EQ(run.device->stats().total_swapped_current, 0);
  EXPECT_EQ(run.device->stats().total_swapped_peak, expected_swapped);
}

TEST(HostSwapTier, OptimizerStateSlicesRoundTripEveryStepAndDroppedOnesFreeTheirHostBytes) {
  FencedRun run;
  auto tier = open_tier(run);
  const Shape shape{3 * 1000};
  const std::vector<uint8_t> bytes = random_bytes(shape.numel() * 4, 7);
  SwappedTensor slice =
      tier->swap_out(run.upload(bytes, shape, DType::kFloat32, MemoryCategory::kOptimizerState));
  for (int step = 0; step < 3; ++step) {  // read, "update", write back: the swap optimizer's loop
    Tensor t = tier->swap_in(std::move(slice));
    EXPECT_EQ(run.download(t), bytes);
    EXPECT_EQ(run.device->category_of(t.data()), MemoryCategory::kOptimizerState);
    slice = tier->swap_out(std::move(t));
    EXPECT_EQ(run.device->stats().swapped_of(MemoryCategory::kOptimizerState),
              (shape.numel() * 4 + 63) / 64 * 64);
  }
  SwappedTensor prefetched =
      tier->swap_out(run.upload(bytes, shape, DType::kFloat32, MemoryCategory::kActivations));
  tier->prefetch(prefetched);
  prefetched.reset();  // dropped after its prefetch: the device copy and the host bytes go
  slice.reset();
  EXPECT_EQ(tier->used_bytes(), 0);
  EXPECT_EQ(run.device->stats().total_swapped_current, 0);
  EXPECT_EQ(run.device->stats().total_current, 0);
  EXPECT_TRUE(tier->swap_in(SwappedTensor()).empty());
  EXPECT_TRUE(tier->swap_out(Tensor()).empty());
}

TEST(HostSwapTier, TheCpuBackendKeepsItsFileTier) {
  Allocator host;
  const Backend cpu = select_backend(KernelOptions{}, 1);
  auto tier = HostSwapTier::open(cpu, host);
  ASSERT_FALSE(tier.ok());
  EXPECT_NE(tier.status().message().find("file"), std::string::npos) << tier.status().message();
}

}  // namespace
}  // namespace mindspeed
