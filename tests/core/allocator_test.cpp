// Allocator: per-category accounting, peaks, reuse of cached blocks, alignment.
#include "core/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mindspeed {
namespace {

TEST(Allocator, CountsBytesPerCategoryAndKeepsPeaks) {
  Allocator alloc;
  void* a = alloc.allocate(1000, MemoryCategory::kParameters);   // rounds to 1024
  void* b = alloc.allocate(64, MemoryCategory::kActivations);
  MemoryStats s = alloc.stats();
  EXPECT_EQ(s.current_of(MemoryCategory::kParameters), 1024);
  EXPECT_EQ(s.current_of(MemoryCategory::kActivations), 64);
  EXPECT_EQ(s.total_current, 1088);
  alloc.deallocate(b);
  s = alloc.stats();
  EXPECT_EQ(s.current_of(MemoryCategory::kActivations), 0);
  EXPECT_EQ(s.peak_of(MemoryCategory::kActivations), 64);
  EXPECT_EQ(s.total_peak, 1088);
  EXPECT_EQ(s.cached, 64);
  alloc.reset_peaks();
  EXPECT_EQ(alloc.stats().total_peak, 1024);
  alloc.deallocate(a);
}

TEST(Allocator, ReusesCachedBlocksWithoutSystemCalls) {
  Allocator alloc;
  for (int step = 0; step < 5; ++step) {
    void* x = alloc.allocate(1 << 20, MemoryCategory::kActivations);
    void* y = alloc.allocate(3 << 20, MemoryCategory::kWorkspace);
    alloc.deallocate(x);
    alloc.deallocate(y);
  }
  EXPECT_EQ(alloc.stats().system_allocations, 2);
}

TEST(Allocator, ReturnsAlignedMemory) {
  Allocator alloc;
  for (int64_t size : {1, 7, 64, 100, 4097}) {
    void* p = alloc.allocate(size, MemoryCategory::kWorkspace);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % Allocator::kAlignment, 0u);
    alloc.deallocate(p);
  }
}

TEST(Allocator, TensorReleasesOnDestructionAndMove) {
  Allocator alloc;
  {
    Tensor t(alloc, Shape{4, 8}, DType::kFloat32, MemoryCategory::kGradients);
    EXPECT_EQ(alloc.stats().current_of(MemoryCategory::kGradients), 128);
    Tensor u = std::move(t);
    EXPECT_TRUE(t.empty());
    EXPECT_EQ(alloc.stats().current_of(MemoryCategory::kGradients), 128);
  }
  EXPECT_EQ(alloc.stats().current_of(MemoryCategory::kGradients), 0);
  Tensor z = Tensor::zeros(alloc, Shape{3}, DType::kFloat32, MemoryCategory::kWorkspace);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(z.f32()[i], 0.0f);
}

TEST(Allocator, CountsSwappedBytesApartFromResidentOnes) {
  Allocator alloc;
  void* p = alloc.allocate(2048, MemoryCategory::kParameters);
  alloc.note_swapped(MemoryCategory::kActivations, 4096);
  alloc.note_swapped(MemoryCategory::kOptimizerState, 1024);
  alloc.note_swapped(MemoryCategory::kActivations, -4096);
  MemoryStats s = alloc.stats();
  EXPECT_EQ(s.swapped_of(MemoryCategory::kActivations), 0);
  EXPECT_EQ(s.swapped_peak_of(MemoryCategory::kActivations), 4096);
  EXPECT_EQ(s.swapped_of(MemoryCategory::kOptimizerState), 1024);
  EXPECT_EQ(s.total_swapped_current, 1024);
  EXPECT_EQ(s.total_swapped_peak, 5120);
  EXPECT_EQ(s.total_swapped_out, 5120);
  EXPECT_EQ(s.total_current, 2048);  // resident bytes untouched
  EXPECT_EQ(alloc.category_of(p), MemoryCategory::kParameters);
  alloc.reset_peaks();
  s = alloc.stats();
  EXPECT_EQ(s.total_swapped_peak, 1024);
  EXPECT_EQ(s.swapped_peak_of(MemoryCategory::kActivations), 0);
  alloc.deallocate(p);
}

TEST(Allocator, FormatsSwappedBytesOnlyOnceSomethingWasSwapped) {
  MemoryStats s;
  s.current[0] = 1 << 20;
  s.peak[0] = 2 << 20;
  s.total_current = 1 << 20;
  s.total_peak = 2 << 20;
  const std::string resident =
      "params 1.0/2.0 | grads 0.0/0.0 | optimizer 0.0/0.0 | activations 0.0/0.0 | comm 0.0/0.0 | "
      "workspace 0.0/0.0 | total 1.0/2.0 MiB (current/peak)";
  EXPECT_EQ(format_memory_stats(s), resident);  // the line before swapping existed
  s.swapped_current[static_cast<int>(MemoryCategory::kActivations)] = 3 << 20;
  s.swapped_peak[static_cast<int>(MemoryCategory::kActivations)] = 4 << 20;
  s.total_swapped_current = 3 << 20;
  s.total_swapped_peak = 4 << 20;
  s.total_swapped_out = 8 << 20;
  EXPECT_EQ(format_memory_stats(s), resident + " | swapped (current/peak MiB): activations 3.0/4.0, total 3.0/4.0");
}

// A memory source that hands out host blocks up to a budget and records every call: what
// the device allocator of the CUDA backend (cudaMalloc) plugs in.
class BudgetSource final : public MemorySource {
 public:
  explicit BudgetSource(int64_t budget, std::vector<std::string>* calls)
      : budget_(budget), calls_(calls) {}
  void* allocate(int64_t bytes) override {
    calls_->push_back("allocate " + std::to_string(bytes));
    if (used_ + bytes > budget_) return nullptr;
    used_ += bytes;
    void* p = std::aligned_alloc(Allocator::kAlignment, static_cast<size_t>(bytes));
    sizes_[p] = bytes;
    return p;
  }
  void release(void* ptr) override {
    calls_->push_back("release " + std::to_string(sizes_.at(ptr)));
    used_ -= sizes_.at(ptr);
    sizes_.erase(ptr);
    std::free(ptr);
  }
  const char* name() const override { return "budget"; }

 private:
  int64_t budget_, used_ = 0;
  std::vector<std::string>* calls_;
  std::map<void*, int64_t> sizes_;
};

TEST(Allocator, TakesItsBlocksFromItsSourceCachesThemAndGivesThemBackWhenShort) {
  std::vector<std::string> calls;
  {
    Allocator alloc(std::make_unique<BudgetSource>(4096, &calls));
    void* a = alloc.allocate(2048, MemoryCategory::kActivations);
    alloc.deallocate(a);
    void* b = alloc.allocate(2000, MemoryCategory::kActivations);  // 2048 again: from the cache
    EXPECT_EQ(a, b);
    alloc.deallocate(b);
    // 3072 does not fit beside the cached 2048 in a budget of 4096: the cache is given back,
    // then the source is asked again.
    void* c = alloc.allocate(3072, MemoryCategory::kParameters);
    EXPECT_NE(c, nullptr);
    EXPECT_EQ(alloc.stats().cached, 0);
    EXPECT_EQ(alloc.stats().system_allocations, 2);
    alloc.deallocate(c);
  }  // the destructor releases the cached block
  EXPECT_EQ(calls, (std::vector<std::string>{"allocate 2048", "allocate 3072", "release 2048",
                                             "allocate 3072", "release 3072"}));
}

TEST(AllocatorDeathTest, RunningOutNamesTheSource) {
  std::vector<std::string> calls;
  Allocator alloc(std::make_unique<BudgetSource>(1024, &calls));
  EXPECT_DEATH(alloc.allocate(4096, MemoryCategory::kActivations),
               "out of budget memory allocating 4096 bytes");
}

TEST(AllocatorDeathTest, NegativeSwappedBytesAreFatal) {
  Allocator alloc;
  alloc.note_swapped(MemoryCategory::kActivations, 64);
  EXPECT_DEATH(alloc.note_swapped(MemoryCategory::kActivations, -128), "more bytes swapped in than out");
}

TEST(AllocatorDeathTest, DeallocatingAForeignPointerIsFatal) {
  Allocator alloc;
  int x = 0;
  EXPECT_DEATH(alloc.deallocate(&x), "does not own");
}

}  // namespace
}  // namespace mindspeed
