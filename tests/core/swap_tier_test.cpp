// FileSwapTier (MindSpeed swap_attention / swap_optimizer host tier, DeepSpeed NVMe offload):
// bitwise round trips, the backward order (prefetch one ahead, reverse of the forward),
// resident vs swapped accounting, a file that stays flat across steps, bad directories,
// dropped tensors and two threads sharing a tier.
#include "core/swap_tier.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/tensor.h"
#include "scratch_dir.h"

namespace mindspeed {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

// A tensor of random bytes (any dtype: the tier moves bytes) and a copy of them.
struct Filled {
  Tensor tensor;
  std::vector<uint8_t> bytes;
};

Filled random_tensor(Allocator& alloc, Shape shape, DType dtype, MemoryCategory category,
                     uint64_t seed) {
  Filled f{Tensor(alloc, shape, dtype, category), {}};
  f.bytes.resize(static_cast<size_t>(f.tensor.nbytes()));
  std::mt19937_64 rng(seed);
  for (auto& b : f.bytes) b = static_cast<uint8_t>(rng());
  if (!f.bytes.empty()) std::memcpy(f.tensor.data(), f.bytes.data(), f.bytes.size());
  return f;
}

void expect_same(const Tensor& t, const Shape& shape, DType dtype,
                 const std::vector<uint8_t>& bytes) {
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(t.shape(), shape);
  EXPECT_EQ(t.dtype(), dtype);
  ASSERT_EQ(t.nbytes(), static_cast<int64_t>(bytes.size()));
  if (bytes.empty()) return;  // (memcmp of an empty tensor's null data is undefined)
  EXPECT_EQ(std::memcmp(t.data(), bytes.data(), bytes.size()), 0)
      << "bytes differ for " << shape.to_string();
}

std::unique_ptr<FileSwapTier> open_tier(const testing::ScratchDir& dir, Allocator& alloc) {
  auto tier = FileSwapTier::open(dir.path().string(), alloc);
  MS_CHECK_OK(tier.status());
  return std::move(tier).value();
}

// Shapes of 0, 1, unaligned and > 8 MiB sizes.
const std::vector<Shape>& test_shapes() {
  static const std::vector<Shape> shapes = {
      Shape{0},    Shape{4, 0}, Shape{1},        Shape{3},      Shape{17},        Shape{5, 13},
      Shape{1000}, Shape{4097}, Shape{3, 7, 11}, Shape{262147}, Shape{2, 1300001}};
  return shapes;
}

TEST(SwapTier, RoundTripsEveryDtypeAndSizeBitwise) {
  testing::ScratchDir dir("swap");
  Allocator alloc;
  auto tier = open_tier(dir, alloc);
  uint64_t seed = 1;
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kInt32}) {
    for (const Shape& shape : test_shapes()) {
      for (bool sync : {true, false}) {  // through the file / possibly still queued
        Filled f = random_tensor(alloc, shape, dtype, MemoryCategory::kActivations, seed++);
        SwappedTensor s = tier->swap_out(std::move(f.tensor));
        EXPECT_TRUE(f.tensor.empty());
        ASSERT_FALSE(s.empty());
        EXPECT_EQ(s.shape(), shape);
        EXPECT_EQ(s.dtype(), dtype);
        EXPECT_EQ(s.nbytes(), static_cast<int64_t>(f.bytes.size()));
        EXPECT_EQ(s.category(), MemoryCategory::kActivations);
        if (sync) tier->synchronize();
        Tensor back = tier->swap_in(std::move(s));
        EXPECT_TRUE(s.empty());
        expect_same(back, shape, dtype, f.bytes);
        EXPECT_EQ(alloc.category_of(back.data()), MemoryCategory::kActivations);
      }
    }
  }
  tier->synchronize();
  EXPECT_EQ(tier->used_bytes(), 0);
  EXPECT_EQ(alloc.stats().total_swapped_current, 0);
}

TEST(SwapTier, EmptyTensorsGiveEmptyResults) {
  testing::ScratchDir dir("swap");
  Allocator alloc;
  auto tier = open_tier(dir, alloc);
  SwappedTensor s = tier->swap_out(Tensor());
  EXPECT_TRUE(s.empty());
  tier->prefetch(s);
  EXPECT_TRUE(tier->swap_in(std::move(s)).empty());
  EXPECT_EQ(alloc.stats().total_swapped_out, 0);
}

TEST(SwapTier, ManyInFlightComeBackInReverseWithPrefetchOneAhead) {
  testing::ScratchDir dir("swap");
  Allocator alloc;
  auto tier = open_tier(dir, alloc);
  for (bool sync : {true, false}) {
    // "Forward": 24 layers' activations swapped out as they are made.
    std::vector<Shape> shapes;
    std::vector<std::vector<uint8_t>> expected;
    std::vector<SwappedTensor> swapped;
    for (int layer = 0; layer < 24; ++layer) {
      const Shape shape{1 + layer * 37, 64 + (layer % 5) * 3};  // unaligned, up to ~ 0.2 MiB
      Filled f = random_tensor(alloc, shape, layer % 2 ? DType::kBFloat16 : DType::kFloat32,
                               MemoryCategory::kActivations, 100 + static_cast<uint64_t>(layer));
      shapes.push_back(shape);
      expected.push_back(std::move(f.bytes));
      swapped.push_back(tier->swap_out(std::move(f.tensor)));
    }
    if (sync) tier->synchronize();
    // "Backward": last layer first, the next one prefetched while this one is used.
    tier->prefetch(swapped.back());
    for (int layer = 23; layer >= 0; --layer) {
      if (layer > 0) tier->prefetch(swapped[layer - 1]);
      tier->prefetch(swapped[layer]);  // idempotent
      const DType dtype = swapped[layer].dtype();
      Tensor t = tier->swap_in(std::move(swapped[layer]));
      expect_same(t, shapes[layer], dtype, expected[layer]);
    }
  }
  tier->synchronize();
  EXPECT_EQ(tier->used_bytes(), 0);
  EXPECT_EQ(alloc.stats().total_swapped_current, 0);
}

TEST(SwapTier, PrefetchThenSwapInEqualsSwapInAlone) {
  testing::ScratchDir dir("swap");
  Allocator alloc;
  auto tier = open_tier(dir, alloc);
  const Shape shape{512, 1024};  // 2 MiB fp32
  Filled a = random_tensor(alloc, shape, DType::kFloat32, MemoryCategory::kActivations, 7);
  Filled b = random_tensor(alloc, shape, DType::kFloat32, MemoryCategory::kActivations, 7);
  SwappedTensor sa = tier->swap_out(std::move(a.tensor));
  SwappedTensor sb = tier->swap_out(std::move(b.tensor));
  tier->synchronize();
  EXPECT_EQ(alloc.stats().current_of(MemoryCategory::kActivations), 0);

  tier->prefetch(sa);
  tier->synchronize();
  // The prefetched copy is resident before swap_in; its region is still held.
  EXPECT_EQ(alloc.stats().current_of(MemoryCategory::kActivations), 2 * kMiB);
  EXPECT_EQ(alloc.stats().swapped_of(MemoryCategory::kActivations), 4 * kMiB);
  Tensor ta = tier->swap_in(std::move(sa));
  EXPECT_EQ(alloc.stats().swapped_of(MemoryCategory::kActivations), 2 * kMiB);
  Tensor tb = tier->swap_in(std::move(sb));
  expect_same(ta, shape, DType::kFloat32, a.bytes);
  expect_same(tb, shape, DType::kFloat32, b.bytes);
  EXPECT_EQ(std::memcmp(ta.data(), tb.data(), static_cast<size_t>(ta.nbytes())), 0);
}

TEST(SwapTier, AllocatorCountsResidentAndSwappedBytesApart) {
  testing::ScratchDir dir("swap");
  Allocator alloc;
  auto tier = open_tier(dir, alloc);
  const int64_t act_bytes = 3 * kMiB;   // [768, 1024] fp32
  const int64_t opt_bytes = 64 * 1024;  // [32768] bf16
  Tensor act(alloc, Shape{768, 1024}, DType::kFloat32, MemoryCategory::kActivations);
  Tensor opt(alloc, Shape{32768}, DType::kBFloat16, MemoryCategory::kOptimizerState);
  Tensor kept(alloc, Shape{16}, DType::kFloat32, MemoryCategory::kParameters);
  EXPECT_EQ(alloc.stats().total_current, act_bytes + opt_bytes + 64);
  EXPECT_EQ(format_memory_stats(alloc.stats()).find("swapped"), std::string::npos);

  SwappedTensor sa = tier->swap_out(std::move(act));
  SwappedTensor so = tier->swap_out(std::move(opt));
  tier->synchronize();
  MemoryStats s = alloc.stats();
  EXPECT_EQ(s.current_of(MemoryCategory::kActivations), 0);
  EXPECT_EQ(s.current_of(MemoryCategory::kOptimizerState), 0);
  EXPECT_EQ(s.total_current, 64);
  EXPECT_EQ(s.swapped_of(MemoryCategory::kActivations), act_bytes);
  EXPECT_EQ(s.swapped_of(MemoryCategory::kOptimizerState), opt_bytes);
  EXPECT_EQ(s.swapped_of(MemoryCategory::kParameters), 0);
  EXPECT_EQ(s.total_swapped_current, act_bytes + opt_bytes);
  EXPECT_EQ(s.total_swapped_peak, act_bytes + opt_bytes);
  EXPECT_EQ(s.total_swapped_out, act_bytes + opt_bytes);
  EXPECT_EQ(tier->used_bytes(), act_bytes + opt_bytes);
  const std::string line = format_memory_stats(s);
  EXPECT_NE(
      line.find(
          " | swapped (current/peak MiB): optimizer 0.1/0.1, activations 3.0/3.0, total 3.1/3.1"),
      std::string::npos)
      << line;

  Tensor act_back = tier->swap_in(std::move(sa));
  s = alloc.stats();
  EXPECT_EQ(s.current_of(MemoryCategory::kActivations), act_bytes);
  EXPECT_EQ(s.swapped_of(MemoryCategory::kActivations), 0);
  EXPECT_EQ(s.swapped_peak_of(MemoryCategory::kActivations), act_bytes);
  EXPECT_EQ(s.total_swapped_current, opt_bytes);
  EXPECT_EQ(s.total_swapped_peak, act_bytes + opt_bytes);
  Tensor opt_back = tier->swap_in(std::move(so));
  s = alloc.stats();
  EXPECT_EQ(s.total_swapped_current, 0);
  EXPECT_EQ(s.total_current, act_bytes + opt_bytes + 64);
  EXPECT_EQ(alloc.category_of(opt_back.data()), MemoryCategory::kOptimizerState);

  alloc.reset_peaks();
  s = alloc.stats();
  EXPECT_EQ(s.total_swapped_peak, 0);
  EXPECT_EQ(s.swapped_peak_of(MemoryCategory::kActivations), 0);
  EXPECT_EQ(s.total_swapped_out, act_bytes + opt_bytes);  // cumulative, never reset
  // Once something was swapped the part stays (at zero), so log lines keep one layout.
  EXPECT_NE(format_memory_stats(s).find("swapped (current/peak MiB): total 0.0/0.0"),
            std::string::npos);
}

TEST(SwapTier, FileStaysFlatWhenTheSameSizesAreSwappedEveryStep) {
  testing::ScratchDir dir("swap");
  Allocator alloc;
  auto tier = open_tier(dir, alloc);
  const std::vector<Shape> shapes = {Shape{256, 1024}, Shape{3, 262144}, Shape{16384},
                                     Shape{5 * 262144 + 16}};
  int64_t sum = 0;
  for (const Shape& s : shapes) sum += s.numel() * 4;
  int64_t after_first = -1;
  for (int step = 0; step < 10; ++step) {
    std::vector<SwappedTensor> swapped;
    for (const Shape& shape : shapes) {
      swapped.push_back(
          tier->swap_out(Tensor(alloc, shape, DType::kFloat32, MemoryCategory::kActivations)));
    }
    tier->synchronize();  // every byte really goes through the file
    for (int i = static_cast<int>(swapped.size()) - 1; i >= 0; --i) {
      if (step % 2) tier->prefetch(swapped[i]);
      Tensor t = tier->swap_in(std::move(swapped[i]));
    }
    if (step == 0) after_first = tier->file_bytes();
    EXPECT_EQ(tier->file_bytes(), after_first) << "step " << step;
    EXPECT_EQ(tier->used_bytes(), 0);
  }
  EXPECT_EQ(after_first, sum);
}

TEST(SwapTier, FreedNeighboursCoalesceIntoOneRegion) {
  testing::ScratchDir dir("swap");
  Allocator alloc;
  auto tier = open_tier(dir, alloc);
  auto make = [&](int64_t n) {
    return Tensor(alloc, Shape{n}, DType::kFloat32, MemoryCategory::kActivations);
  };
  SwappedTensor a = tier->swap_out(make(1024));  // 4 KiB at 0
  SwappedTensor b = tier->swap_out(make(2048));  // 8 KiB at 4 KiB
  SwappedTensor c = tier->swap_out(make(512));   // 2 KiB at 12 KiB
  tier->synchronize();
  EXPECT_EQ(tier->file_bytes(), 14 * 1024);
  Tensor tb = tier->swap_in(std::move(b));
  Tensor ta = tier->swap_in(std::move(a));
  // 12 KiB fits only in the coalesced hole [0, 12 KiB).
  SwappedTensor d = tier->swap_out(make(3072));
  tier->synchronize();
  EXPECT_EQ(tier->file_bytes(), 14 * 1024);
  // The free tail grows in place: c's region is freed, then 16 KiB starts at 12 KiB.
  Tensor tc = tier->swap_in(std::move(c));
  SwappedTensor e = tier->swap_out(make(4096));
  tier->synchronize();
  EXPECT_EQ(tier->file_bytes(), 28 * 1024);
  EXPECT_EQ(tier->used_bytes(), 28 * 1024);
}

TEST(SwapTier, DroppedTensorsFreeTheirSpace) {
  testing::ScratchDir dir("swap");
  Allocator alloc;
  auto tier = open_tier(dir, alloc);
  for (int mode = 0; mode < 4; ++mode) {
    SwappedTensor s = tier->swap_out(
        Tensor(alloc, Shape{1 << 20}, DType::kFloat32, MemoryCategory::kActivations));
    if (mode >= 1) tier->synchronize();
    if (mode >= 2) tier->prefetch(s);
    if (mode >= 3) tier->synchronize();
    s.reset();  // mode 0: maybe still queued; 2: read maybe in flight
    EXPECT_TRUE(s.empty());
  }
  {
    SwappedTensor dropped =
        tier->swap_out(Tensor(alloc, Shape{77}, DType::kInt32, MemoryCategory::kWorkspace));
  }
  tier->synchronize();
  EXPECT_EQ(tier->used_bytes(), 0);
  const MemoryStats s = alloc.stats();
  EXPECT_EQ(s.total_swapped_current, 0);
  EXPECT_EQ(s.total_current, 0);
  EXPECT_EQ(s.live_blocks, 0);
}

TEST(SwapTier, LeavesNoFileBehind) {
  testing::ScratchDir dir("swap");
  Allocator alloc;
  auto tier = open_tier(dir, alloc);
  SwappedTensor s =
      tier->swap_out(Tensor(alloc, Shape{4096}, DType::kFloat32, MemoryCategory::kActivations));
  tier->synchronize();
  EXPECT_TRUE(dir.entries().empty());  // unlinked at once
  EXPECT_NE(tier->path().find(dir.path().string()), std::string::npos);
  Tensor t = tier->swap_in(std::move(s));
}

TEST(SwapTier, BadDirectoryIsAClearErrorNamingIt) {
  testing::ScratchDir dir("swap");
  Allocator alloc;
  const std::string missing = dir.file("no/such/dir");
  auto tier = FileSwapTier::open(missing, alloc);
  ASSERT_FALSE(tier.ok());
  EXPECT_EQ(tier.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tier.status().message().find("'" + missing + "'"), std::string::npos)
      << tier.status().message();
  EXPECT_NE(tier.status().message().find("No such file or directory"), std::string::npos);

  const std::string file = dir.file("a_file");
  testing::write_file(file, "x");
  auto not_dir = FileSwapTier::open(file, alloc);
  ASSERT_FALSE(not_dir.ok());
  EXPECT_NE(not_dir.status().message().find("Not a directory"), std::string::npos)
      << not_dir.status().message();

  EXPECT_FALSE(FileSwapTier::open("", alloc).ok());

  if (::geteuid() != 0) {  // root writes anywhere
    const std::string read_only = dir.file("read_only");
    std::filesystem::create_directory(read_only);
    std::filesystem::permissions(
        read_only, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    auto denied = FileSwapTier::open(read_only, alloc);
    ASSERT_FALSE(denied.ok());
    EXPECT_NE(denied.status().message().find("Permission denied"), std::string::npos)
        << denied.status().message();
    std::filesystem::permissions(read_only, std::filesystem::perms::owner_all);
  }
}

TEST(SwapTier, TwoThreadsShareOneTier) {
  testing::ScratchDir dir("swap");
  Allocator alloc;
  auto tier = open_tier(dir, alloc);
  std::vector<int> failures(2, 0);
  auto worker = [&](int w) {
    std::mt19937_64 rng(static_cast<uint64_t>(w) + 11);
    for (int round = 0; round < 30; ++round) {
      std::vector<SwappedTensor> swapped;
      std::vector<std::vector<uint8_t>> expected;
      for (int i = 0; i < 6; ++i) {
        const Shape shape{1 + static_cast<int64_t>(rng() % 50000)};
        Filled f = random_tensor(alloc, shape, DType::kInt32, MemoryCategory::kActivations, rng());
        expected.push_back(std::move(f.bytes));
        swapped.push_back(tier->swap_out(std::move(f.tensor)));
      }
      if (round % 3 == 0) tier->synchronize();
      for (int i = 5; i >= 0; --i) {
        if (i > 0 && round % 2) tier->prefetch(swapped[i - 1]);
        Tensor t = tier->swap_in(std::move(swapped[i]));
        if (t.nbytes() != static_cast<int64_t>(expected[i].size()) ||
            std::memcmp(t.data(), expected[i].data(), expected[i].size()) != 0) {
          ++failures[w];
        }
      }
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(failures[0], 0);
  EXPECT_EQ(failures[1], 0);
  tier->synchronize();
  EXPECT_EQ(tier->used_bytes(), 0);
  EXPECT_EQ(alloc.stats().total_swapped_current, 0);
}

TEST(SwapTierDeathTest, DestroyingTheTierWithATensorInItIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  testing::ScratchDir dir("swap");
  EXPECT_DEATH(
      {
        Allocator alloc;
        auto tier = open_tier(dir, alloc);
        static SwappedTensor s;  // outlives the tier
        s = tier->swap_out(Tensor(alloc, Shape{8}, DType::kFloat32, MemoryCategory::kActivations));
        tier.reset();
      },
      "still alive");
}

TEST(SwapTierDeathTest, ATensorFromAnotherAllocatorIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  testing::ScratchDir dir("swap");
  EXPECT_DEATH(
      {
        Allocator alloc;
        Allocator other;
        auto tier = open_tier(dir, alloc);
        SwappedTensor s =
            tier->swap_out(Tensor(other, Shape{8}, DType::kFloat32, MemoryCategory::kActivations));
      },
      "does not own");
}

}  // namespace
}  // namespace mindspeed
