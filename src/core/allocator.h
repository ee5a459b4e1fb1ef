// Allocator: every byte the engine uses comes from here, counted by category with the
// current and peak value per category and in total (DESIGN.md "Numerics and memory").
// Freed blocks stay cached and are reused by the next request of a similar size, so a
// training step that repeats the same shapes never returns memory to the OS and never
// re-faults its pages (the cost glibc's malloc puts on PyTorch's CPU activations).
// The blocks come from a MemorySource: host memory by default; the CUDA backend gives the
// same caching and accounting device memory (cudaMalloc, the role of PyTorch's caching
// allocator) and pinned host memory (kernels/backend.h).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace mindspeed {

enum class MemoryCategory : uint8_t {
  kParameters,
  kGradients,
  kOptimizerState,
  kActivations,
  kCommunication,
  kWorkspace,
  kCount,
};
constexpr int kNumMemoryCategories = static_cast<int>(MemoryCategory::kCount);
const char* memory_category_name(MemoryCategory category);

struct MemoryStats {
  std::array<int64_t, kNumMemoryCategories> current{};  ///< bytes in use now, per category
  std::array<int64_t, kNumMemoryCategories> peak{};     ///< max of current, per category
  int64_t total_current = 0;  ///< bytes in use now, all categories
  int64_t total_peak = 0;     ///< max of total_current (not the sum of the peaks)
  int64_t cached = 0;         ///< bytes held in the cache, free for reuse
  int64_t system_allocations = 0;  ///< calls that went to the system allocator
  int64_t live_blocks = 0;    ///< blocks handed out and not yet returned

  // Bytes living in a slower tier (core/swap_tier.h: swap-attention, swap-optimizer), counted
  // apart from the resident bytes above: a swapped tensor's resident block is freed (and
  // leaves `current`) when its write to the tier completes, and only then counts here.
  std::array<int64_t, kNumMemoryCategories> swapped_current{};  ///< bytes in a swap tier now
  std::array<int64_t, kNumMemoryCategories> swapped_peak{};     ///< max of swapped_current
  int64_t total_swapped_current = 0;  ///< bytes in a swap tier now, all categories
  int64_t total_swapped_peak = 0;     ///< max of total_swapped_current
  int64_t total_swapped_out = 0;      ///< bytes ever moved into a swap tier (never reset)

  int64_t current_of(MemoryCategory c) const { return current[static_cast<int>(c)]; }
  int64_t peak_of(MemoryCategory c) const { return peak[static_cast<int>(c)]; }
  int64_t swapped_of(MemoryCategory c) const { return swapped_current[static_cast<int>(c)]; }
  int64_t swapped_peak_of(MemoryCategory c) const { return swapped_peak[static_cast<int>(c)]; }
};

/// "params 474.7 MiB | grads ... | peak total ..." for logs. Once anything was ever swapped
/// (total_swapped_out > 0) it ends with " | swapped (current/peak MiB): activations 12.0/24.0,
/// total 12.0/24.0" (the categories ever swapped); before that the line is unchanged.
std::string format_memory_stats(const MemoryStats& stats);

/// Where an Allocator's blocks come from, and where they go back.
class MemorySource {
 public:
  virtual ~MemorySource() = default;
  /// `bytes` (a multiple of Allocator::kAlignment) aligned to at least kAlignment, or null
  /// when the memory is exhausted.
  virtual void* allocate(int64_t bytes) = 0;
  virtual void release(void* ptr) = 0;
  /// "host", "cuda:0", "pinned host": named in out-of-memory errors.
  virtual const char* name() const = 0;
};

/// Host memory (aligned_alloc / free).
std::unique_ptr<MemorySource> host_memory_source();

class Allocator {
 public:
  static constexpr int64_t kAlignment = 64;

  /// Host memory.
  Allocator();
  explicit Allocator(std::unique_ptr<MemorySource> source);
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  /// Returns `bytes` (rounded up to kAlignment) of uninitialised, 64-byte aligned memory.
  void* allocate(int64_t bytes, MemoryCategory category);
  /// Returns a block from allocate() to the cache. nullptr is ignored.
  void deallocate(void* ptr);

  /// The category a block from allocate() was counted under (fatal for a foreign pointer).
  MemoryCategory category_of(const void* ptr) const;

  MemoryStats stats() const;
  /// Sets every peak (resident and swapped) to the current value (e.g. after set-up, to
  /// measure a step).
  void reset_peaks();
  /// A swap tier moved `delta` bytes of `category` into (> 0) or out of (< 0) the slower
  /// tier. The resident side is counted by allocate()/deallocate() as usual.
  void note_swapped(MemoryCategory category, int64_t delta);
  /// Returns every cached block to the system.
  void release_cached();

 private:
  void* take_block(int64_t bytes, MemoryCategory category);
  struct Block {
    int64_t bytes;
    MemoryCategory category;
  };
  std::unique_ptr<MemorySource> source_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> live_;
  std::multimap<int64_t, void*> free_;  // size -> block
  MemoryStats stats_;
};

}  // namespace mindspeed
