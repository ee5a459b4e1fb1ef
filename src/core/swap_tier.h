// Swap tier: a slower memory tier that tensors move to and come back from asynchronously,
// with prefetch. It is the host tier behind MindSpeed's --swap-attention (a layer's saved
// activations swapped out after its forward, prefetched one layer ahead in backward) and
// --swap-optimizer (optimizer state slices read, updated and written back, the next slice
// prefetched while the current one is updated). On this CPU engine the slower tier is a file
// on local disk, as in DeepSpeed's NVMe offload (ZeRO-Infinity); a CUDA backend would put a
// pinned host-memory tier behind the same interface.
//
// Life of a tensor (bytes = numel * dtype size; a file region is bytes rounded up to 64):
//   swap_out(t)   the tier takes t; a background write copies its bytes to a file region;
//                 when the write completes t's block goes back to the Allocator (resident
//                 bytes down) and the region counts as swapped (Allocator::note_swapped).
//   prefetch(s)   allocates a resident tensor (same shape, dtype, category) and queues the
//                 read. If the write has not started yet it is cancelled and the tensor is
//                 simply handed back (no I/O); if it is running, its source is kept.
//   swap_in(s)    waits for the read (issuing it if needed), frees the region, returns the
//                 resident tensor. Reads and writes run in issue order (one FIFO queue).
// A SwappedTensor dropped without swap_in frees its region (after any transfer in flight).
// Every call is thread-safe; a SwappedTensor itself is used by one thread at a time. The
// Allocator must outlive the tier, and the tier every SwappedTensor it made.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "core/allocator.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace mindspeed {

class SwapTier;

/// A tensor living in a SwapTier: shape, dtype, allocator category and a handle to where its
/// bytes are. Move-only; an empty one (default, or from an empty Tensor) holds nothing.
class SwappedTensor {
 public:
  SwappedTensor() = default;
  /// Drops the tensor without reading it back (reset()).
  ~SwappedTensor() { reset(); }
  SwappedTensor(SwappedTensor&& other) noexcept;
  SwappedTensor& operator=(SwappedTensor&& other) noexcept;
  SwappedTensor(const SwappedTensor&) = delete;
  SwappedTensor& operator=(const SwappedTensor&) = delete;

  bool empty() const { return tier_ == nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  MemoryCategory category() const { return category_; }
  int64_t numel() const { return shape_.numel(); }
  int64_t nbytes() const { return numel() * dtype_size(dtype_); }
  /// Frees the tier space (after a transfer in flight on it) and becomes empty.
  void reset();

 private:
  friend class SwapTier;
  SwapTier* tier_ = nullptr;
  int64_t id_ = 0;  ///< the tier's handle
  Shape shape_;
  DType dtype_ = DType::kFloat32;
  MemoryCategory category_ = MemoryCategory::kActivations;
};

/// The slower tier (host memory for an accelerator later; a file here).
class SwapTier {
 public:
  virtual ~SwapTier() = default;
  /// Takes the tensor; its bytes are written to the tier asynchronously, and its resident
  /// memory is returned to the allocator when the write completes. Empty tensors give an
  /// empty SwappedTensor.
  virtual SwappedTensor swap_out(Tensor&& t) = 0;
  /// Starts reading it back into a freshly allocated resident tensor (same category) ahead
  /// of use. Idempotent; nothing for an empty one.
  virtual void prefetch(SwappedTensor& s) = 0;
  /// The resident tensor (waits for the prefetch, issuing it if needed); the tier space is
  /// freed. An empty SwappedTensor gives an empty Tensor.
  virtual Tensor swap_in(SwappedTensor&& s) = 0;
  /// Blocks until every queued write and read has finished (end of a step, tests).
  virtual void synchronize() = 0;

 protected:
  /// Frees the tier space of a tensor that will never be swapped in (SwappedTensor::reset).
  virtual void discard(int64_t id) = 0;
  /// For implementations: a SwappedTensor of this tier with handle `id`.
  SwappedTensor make_swapped(int64_t id, const Shape& shape, DType dtype, MemoryCategory category);
  /// For implementations: the handle of a SwappedTensor of this tier (fatal for another
  /// tier's), which becomes empty without discard().
  int64_t take_id(SwappedTensor& s);
  /// The handle without taking it (fatal for another tier's).
  int64_t id_of(const SwappedTensor& s) const;

 private:
  friend class SwappedTensor;
};

/// The file-backed tier: one file per tier in `directory` (created with mkstemp and unlinked
/// at once, so nothing is left behind even on a crash), one background I/O thread doing
/// pwrite/pread (looping over partial transfers), a first-fit free list of file regions with
/// coalescing, so the file does not grow when the same shapes are swapped every step.
/// I/O errors (disk full, short read) are fatal() with the file's path and strerror.
/// Page-cache I/O: the kernel may keep recently written bytes in memory until it needs it.
class FileSwapTier final : public SwapTier {
 public:
  /// Offsets and sizes of file regions are multiples of this.
  static constexpr int64_t kRegionAlignment = Allocator::kAlignment;

  /// A tier writing to a new file in `directory`; tensors come back from `alloc`.
  /// InvalidArgument naming the directory when no file can be created there.
  static StatusOr<std::unique_ptr<FileSwapTier>> open(const std::string& directory,
                                                      Allocator& alloc);
  /// Finishes every queued transfer and joins the I/O thread. Fatal if a SwappedTensor of
  /// this tier is still alive (it would point at a dead tier).
  ~FileSwapTier() override;
  FileSwapTier(const FileSwapTier&) = delete;
  FileSwapTier& operator=(const FileSwapTier&) = delete;

  SwappedTensor swap_out(Tensor&& t) override;
  void prefetch(SwappedTensor& s) override;
  Tensor swap_in(SwappedTensor&& s) override;
  void synchronize() override;

  /// Size of the file: the end of the furthest region ever used (the free list reuses
  /// regions, so it stays flat when the same sizes are swapped every step).
  int64_t file_bytes() const;
  /// Bytes of file regions held by swapped tensors now.
  int64_t used_bytes() const;
  /// The file's path (already unlinked), for messages.
  const std::string& path() const { return path_; }

 private:
  enum class WriteState : uint8_t { kQueued, kInFlight, kDone, kCancelled };
  enum class ReadState : uint8_t {
    kNone,
    kKeep,  ///< prefetched while its write ran: keep the source, no read
    kQueued,
    kInFlight,
    kDone,
  };
  struct Entry {
    Shape shape;
    DType dtype = DType::kFloat32;
    MemoryCategory category = MemoryCategory::kActivations;
    int64_t offset = 0;        ///< file region
    int64_t region_bytes = 0;  ///< bytes rounded up to kRegionAlignment; 0 once freed
    Tensor resident;           ///< write source until written; read destination once prefetched
    WriteState write = WriteState::kQueued;
    ReadState read = ReadState::kNone;
    bool swapped_noted = false;  ///< region_bytes counted by Allocator::note_swapped
    bool discarded = false;      ///< dropped while a transfer ran: free it when that ends
    int64_t nbytes() const { return shape.numel() * dtype_size(dtype); }
  };
  struct Op {
    int64_t id;
    bool write;
  };

  FileSwapTier(int fd, std::string path, std::string directory, Allocator& alloc);
  void discard(int64_t id) override;
  void io_loop();
  /// pwrite/pread of `bytes` at `offset`, looping over partial transfers; fatal on error.
  void transfer(bool write, void* data, int64_t bytes, int64_t offset) const;
  // The rest run with mutex_ held.
  Entry& entry_locked(int64_t id);
  void start_read_locked(Entry& e, int64_t id);
  void release_locked(int64_t id);  ///< frees region, tensor and accounting; erases the entry
  void free_region_locked(Entry& e);
  int64_t allocate_region_locked(int64_t bytes);

  const int fd_;
  const std::string path_;
  const std::string directory_;
  Allocator& alloc_;

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;  ///< the I/O thread waits for ops
  std::condition_variable done_cv_;  ///< callers wait for transfers
  std::deque<Op> queue_;
  bool busy_ = false;  ///< the I/O thread is working on a popped op
  bool stop_ = false;
  int64_t next_id_ = 1;
  std::unordered_map<int64_t, std::unique_ptr<Entry>> entries_;
  std::map<int64_t, int64_t> free_regions_;  ///< offset -> bytes, coalesced
  int64_t file_end_ = 0;
  int64_t used_bytes_ = 0;
  std::thread io_thread_;  ///< last: started after everything above is set up
};

}  // namespace mindspeed
