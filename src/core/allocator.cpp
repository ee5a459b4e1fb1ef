// Caching, counting allocator (see allocator.h).
#include "core/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/profiler.h"

namespace mindspeed {

const char* memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParameters: return "params";
    case MemoryCategory::kGradients: return "grads";
    case MemoryCategory::kOptimizerState: return "optimizer";
    case MemoryCategory::kActivations: return "activations";
    case MemoryCategory::kCommunication: return "comm";
    case MemoryCategory::kWorkspace: return "workspace";
    case MemoryCategory::kCount: break;
  }
  return "?";
}

std::string format_memory_stats(const MemoryStats& stats) {
  auto mib = [](int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); };
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    out << memory_category_name(static_cast<MemoryCategory>(c)) << " " << mib(stats.current[c])
        << "/" << mib(stats.peak[c]) << " | ";
  }
  out << "total " << mib(stats.total_current) << "/" << mib(stats.total_peak)
      << " MiB (current/peak)";
  if (stats.total_swapped_out > 0) {
    out << " | swapped (current/peak MiB): ";
    for (int c = 0; c < kNumMemoryCategories; ++c) {
      if (stats.swapped_peak[c] == 0 && stats.swapped_current[c] == 0) continue;
      out << memory_category_name(static_cast<MemoryCategory>(c)) << " " << mib(stats.swapped_current[c])
          << "/" << mib(stats.swapped_peak[c]) << ", ";
    }
    out << "total " << mib(stats.total_swapped_current) << "/" << mib(stats.total_swapped_peak);
  }
  return out.str();
}

namespace {
class HostMemorySource final : public MemorySource {
 public:
  void* allocate(int64_t bytes) override {
    return std::aligned_alloc(Allocator::kAlignment, static_cast<size_t>(bytes));
  }
  void release(void* ptr) override { std::free(ptr); }
  const char* name() const override { return "host"; }
};
}  // namespace

std::unique_ptr<MemorySource> host_memory_source() { return std::make_unique<HostMemorySource>(); }

Allocator::Allocator() : Allocator(host_memory_source()) {}

Allocator::Allocator(std::unique_ptr<MemorySource> source) : source_(std::move(source)) {
  MS_CHECK(source_ != nullptr, "an allocator needs a memory source");
}

Allocator::~Allocator() {
  release_cached();
  // Blocks still live belong to objects that outlive the allocator: a bug, but freeing
  // them here would turn it into a use-after-free, so they are left to the OS.
}

namespace {
// --profile-with-memory: one counter sample of the bytes in use per category.
void profile_memory(const MemoryStats& stats) {
  std::vector<std::pair<std::string, double>> series;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    series.emplace_back(memory_category_name(static_cast<MemoryCategory>(c)), static_cast<double>(stats.current[c]));
  }
  series.emplace_back("cached", static_cast<double>(stats.cached));
  if (stats.total_swapped_out > 0) series.emplace_back("swapped", static_cast<double>(stats.total_swapped_current));
  profiler::counter("memory (bytes)", series);
}
}  // namespace

void* Allocator::allocate(int64_t bytes, MemoryCategory category) {
  void* ptr = take_block(bytes, category);
  if (profiler::recording_memory()) profile_memory(stats());
  return ptr;
}

void* Allocator::take_block(int64_t bytes, MemoryCategory category) {
  MS_CHECK(bytes >= 0, "negative allocation size ", bytes);
  MS_CHECK(category != MemoryCategory::kCount, "invalid memory category");
  const int64_t rounded = std::max<int64_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = nullptr;
  int64_t block_bytes = rounded;
  // Reuse the smallest cached block that fits and wastes at most a quarter of it.
  auto it = free_.lower_bound(rounded);
  if (it != free_.end() && it->first <= rounded + rounded / 4) {
    ptr = it->second;
    block_bytes = it->first;
    stats_.cached -= block_bytes;
    free_.erase(it);
  } else {
    ptr = source_->allocate(rounded);
    if (ptr == nullptr && !free_.empty()) {
      // Out of memory with blocks cached: give them back and try once more.
      for (auto& [size, block] : free_) source_->release(block);
      free_.clear();
      stats_.cached = 0;
      ptr = source_->allocate(rounded);
    }
    MS_CHECK(ptr != nullptr, "out of ", source_->name(), " memory allocating ", rounded,
             " bytes for ", memory_category_name(category), " (in use: ", stats_.total_current,
             " bytes)");
    ++stats_.system_allocations;
  }
  live_.emplace(ptr, Block{block_bytes, category});
  const int c = static_cast<int>(category);
  stats_.current[c] += block_bytes;
  stats_.peak[c] = std::max(stats_.peak[c], stats_.current[c]);
  stats_.total_current += block_bytes;
  stats_.total_peak = std::max(stats_.total_peak, stats_.total_current);
  return ptr;
}

void Allocator::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    MS_CHECK(it != live_.end(), "deallocate of a pointer this allocator does not own");
    const Block block = it->second;
    live_.erase(it);
    const int c = static_cast<int>(block.category);
    stats_.current[c] -= block.bytes;
    stats_.total_current -= block.bytes;
    free_.emplace(block.bytes, ptr);
    stats_.cached += block.bytes;
  }
  if (profiler::recording_memory()) profile_memory(stats());
}

MemoryCategory Allocator::category_of(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(const_cast<void*>(ptr));
  MS_CHECK(it != live_.end(), "category_of a pointer this allocator does not own");
  return it->second.category;
}

MemoryStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  MemoryStats stats = stats_;
  stats.live_blocks = static_cast<int64_t>(live_.size());
  return stats;
}

void Allocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak = stats_.current;
  stats_.total_peak = stats_.total_current;
  stats_.swapped_peak = stats_.swapped_current;
  stats_.total_swapped_peak = stats_.total_swapped_current;
}

void Allocator::note_swapped(MemoryCategory category, int64_t delta) {
  MS_CHECK(category != MemoryCategory::kCount, "invalid memory category");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const int c = static_cast<int>(category);
    MS_CHECK(stats_.swapped_current[c] + delta >= 0, "more bytes swapped in than out for ",
             memory_category_name(category), ": ", stats_.swapped_current[c], " + ", delta);
    stats_.swapped_current[c] += delta;
    stats_.swapped_peak[c] = std::max(stats_.swapped_peak[c], stats_.swapped_current[c]);
    stats_.total_swapped_current += delta;
    stats_.total_swapped_peak = std::max(stats_.total_swapped_peak, stats_.total_swapped_current);
    if (delta > 0) stats_.total_swapped_out += delta;
  }
  if (profiler::recording_memory()) profile_memory(stats());
}

void Allocator::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [size, block] : free_) source_->release(block);
  free_.clear();
  stats_.cached = 0;
}

}  // namespace mindspeed
