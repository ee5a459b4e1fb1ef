// The fenced device (fenced_device.h): one reserved arena of address space, first-fit blocks in
// it, and a fence (mprotect) that opens while any wrapped kernel runs.
#include "kernels/fenced/fenced_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <string_view>
#include <type_traits>

#include "core/check.h"
#include "core/str_cat.h"

namespace mindspeed::fenced {
namespace {

// Address space reserved for device memory (no memory is committed until written).
constexpr int64_t kArenaBytes = int64_t{64} << 30;
constexpr int64_t kPage = 4096;

class Arena {
 public:
  static Arena& instance() {
    static Arena arena;
    return arena;
  }

  void* allocate(int64_t bytes) {
    const int64_t size = (bytes + kPage - 1) / kPage * kPage;
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {  // first fit
      if (it->second < size) continue;
      const int64_t offset = it->first, rest = it->second - size;
      free_.erase(it);
      if (rest > 0) free_.emplace(offset + size, rest);
      used_.emplace(offset, size);
      grow_to(offset + size);
      return base_ + offset;
    }
    return nullptr;
  }

  void release(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t offset = static_cast<char*>(ptr) - base_;
    auto it = used_.find(offset);
    MS_CHECK(it != used_.end(), "release of a block the fenced arena did not hand out");
    int64_t start = offset, size = it->second;
    used_.erase(it);
    // Coalesce with the free neighbours.
    auto next = free_.lower_bound(start);
    if (next != free_.end() && next->first == start + size) {
      size += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == start) {
        start = prev->first;
        size += prev->second;
        free_.erase(prev);
      }
    }
    free_.emplace(start, size);
  }

  bool contains(const void* ptr) const {
    const char* p = static_cast<const char*>(ptr);
    return p >= base_ && p < base_ + kArenaBytes;
  }

  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (open_count_++ == 0) protect(0, high_water_, PROT_READ | PROT_WRITE);
  }

  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    MS_CHECK(open_count_ > 0, "fenced device: fence closed more often than opened");
    if (--open_count_ == 0) protect(0, high_water_, PROT_NONE);
  }

 private:
  Arena() {
    void* p = mmap(nullptr, static_cast<size_t>(kArenaBytes), PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    MS_CHECK(p != MAP_FAILED, "fenced device: cannot reserve ", kArenaBytes >> 30,
             " GiB of address space");
    base_ = static_cast<char*>(p);
    free_.emplace(0, kArenaBytes);
  }

  // Blocks past the old high-water mark are opened at once while the fence is open.
  void grow_to(int64_t end) {
    if (end <= high_water_) return;
    if (open_count_ > 0) protect(high_water_, end, PROT_READ | PROT_WRITE);
    high_water_ = end;
  }

  void protect(int64_t begin, int64_t end, int prot) {
    if (end <= begin) return;
    MS_CHECK(mprotect(base_ + begin, static_cast<size_t>(end - begin), prot) == 0,
             "fenced device: mprotect failed");
  }

  std::mutex mutex_;
  char* base_ = nullptr;
  std::map<int64_t, int64_t> free_;  // offset -> size
  std::map<int64_t, int64_t> used_;
  int64_t high_water_ = 0;  // end of the highest block ever handed out
  int open_count_ = 0;
};

class FencedMemory final : public MemorySource {
 public:
  void* allocate(int64_t bytes) override { return Arena::instance().allocate(bytes); }
  void release(void* ptr) override { Arena::instance().release(ptr); }
  const char* name() const override { return "fenced device"; }
};

KernelTable g_inner;  // the table the wrappers call (one fenced backend per process)

// A kernel argument that points at host memory although it should be device memory: what a
// GPU kernel could not read. Fatal, naming the op and the argument.
void check_device_argument(const char* op, int index, const void* ptr) {
  if (ptr != nullptr && !Arena::instance().contains(ptr)) {
    fatal(str_cat("fenced device: argument ", index, " of kernel ", op, " is host memory (", ptr,
                  "); on a device it must be device memory (copy it with copy_to_device first)"));
  }
}

// Checks one argument: pointers (unless the op's contract keeps that one in host memory), and
// the device pointers inside DropoutSpec and AttentionMask.
template <typename T>
void check_argument(const char* op, int index, uint32_t host_arguments, const T& arg) {
  if constexpr (std::is_pointer_v<T>) {
    if ((host_arguments >> index & 1u) == 0) check_device_argument(op, index, arg);
  } else if constexpr (std::is_same_v<T, DropoutSpec>) {
    check_device_argument(op, index, arg.seq_index);
  } else if constexpr (std::is_same_v<T, AttentionMask>) {
    for (const void* p : {static_cast<const void*>(arg.doc_start), static_cast<const void*>(arg.q_pos),
                          static_cast<const void*>(arg.k_pos), static_cast<const void*>(arg.prefix),
                          static_cast<const void*>(arg.alibi_slopes)}) {
      check_device_argument(op, index, p);
    }
  }
}

template <auto Member>
struct Fenced;

template <typename R, typename... A, R (*KernelTable::*Member)(A...)>
struct Fenced<Member> {
  static inline const char* name = "";
  static inline uint32_t host_arguments = 0;  ///< bit i: argument i is host memory by contract

  static R call(A... a) {
    int index = 0;
    (check_argument(name, index++, host_arguments, a), ...);
    FenceOpen open;
    return (g_inner.*Member)(a...);
  }
};

// The arguments that are host memory by the kernel table's contract (kernels/cuda/cuda_kernels.h):
// masked_sums' sums, the grouped GEMMs' weight-pointer arrays and counts, the transfers' host side.
uint32_t host_arguments_of(std::string_view op) {
  if (op == "masked_sums") return 1u << 1;
  if (op == "grouped_gemm_forward" || op == "grouped_gemm_backward_input") return 1u << 3 | 1u << 4;
  if (op == "grouped_gemm_backward_weight") return 1u << 1 | 1u << 4;
  if (op == "copy_to_device") return 1u << 2;
  if (op == "copy_to_host") return 1u << 1;
  return 0;
}

}  // namespace

FenceOpen::FenceOpen() { Arena::instance().open(); }
FenceOpen::~FenceOpen() { Arena::instance().close(); }

std::unique_ptr<MemorySource> device_memory() { return std::make_unique<FencedMemory>(); }

bool is_device_pointer(const void* ptr) { return Arena::instance().contains(ptr); }

KernelTable fenced_kernels(const KernelTable& inner) {
  g_inner = inner;
  KernelTable t = inner;
#define MS_FENCE_KERNEL_OP(op)                                                  \
  if (t.op != nullptr) {                                                        \
    Fenced<&KernelTable::op>::name = #op;                                       \
    Fenced<&KernelTable::op>::host_arguments = host_arguments_of(#op);          \
    t.op = &Fenced<&KernelTable::op>::call;                                     \
  }
  MS_KERNEL_OPS(MS_FENCE_KERNEL_OP)
#undef MS_FENCE_KERNEL_OP
  return t;
}

}  // namespace mindspeed::fenced
