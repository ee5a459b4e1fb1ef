// The swap tier (see swap_tier.h): SwappedTensor's handle and the file-backed tier (MindSpeed
// swap_attention / swap_optimizer host tier; DeepSpeed NVMe offload's swap file).
#include "core/swap_tier.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <iterator>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/profiler.h"
#include "core/str_cat.h"

namespace mindspeed {

namespace {

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

// ---- SwappedTensor ----

SwappedTensor::SwappedTensor(SwappedTensor&& other) noexcept
    : tier_(std::exchange(other.tier_, nullptr)),
      id_(std::exchange(other.id_, 0)),
      shape_(other.shape_),
      dtype_(other.dtype_),
      category_(other.category_) {}

SwappedTensor& SwappedTensor::operator=(SwappedTensor&& other) noexcept {
  if (this != &other) {
    reset();
    tier_ = std::exchange(other.tier_, nullptr);
    id_ = std::exchange(other.id_, 0);
    shape_ = other.shape_;
    dtype_ = other.dtype_;
    category_ = other.category_;
  }
  return *this;
}

void SwappedTensor::reset() {
  if (tier_ != nullptr) std::exchange(tier_, nullptr)->discard(id_);
  id_ = 0;
}

// ---- SwapTier ----

SwappedTensor SwapTier::make_swapped(int64_t id, const Shape& shape, DType dtype,
                                     MemoryCategory category) {
  SwappedTensor s;
  s.tier_ = this;
  s.id_ = id;
  s.shape_ = shape;
  s.dtype_ = dtype;
  s.category_ = category;
  return s;
}

int64_t SwapTier::id_of(const SwappedTensor& s) const {
  MS_CHECK(s.tier_ == this, "a SwappedTensor used with a tier that did not make it");
  return s.id_;
}

int64_t SwapTier::take_id(SwappedTensor& s) {
  const int64_t id = id_of(s);
  s.tier_ = nullptr;
  s.id_ = 0;
  return id;
}

// ---- FileSwapTier: set-up and tear-down ----

StatusOr<std::unique_ptr<FileSwapTier>> FileSwapTier::open(const std::string& directory,
                                                           Allocator& alloc) {
  if (directory.empty()) return invalid_argument("swap directory is empty");
  std::string name = directory;
  if (name.back() != '/') name += '/';
  name += "mindspeed_swap_XXXXXX";
  std::vector<char> buffer(name.begin(), name.end());
  buffer.push_back('\0');
  const int fd = ::mkostemp(buffer.data(), O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return invalid_argument("cannot create a swap file in directory '", directory,
                            "': ", errno_text(err), " (give a writable directory on local disk)");
  }
  std::string path(buffer.data());
  // Unlinked at once: the space lives while the descriptor is open and nothing is left
  // behind, even after a crash.
  if (::unlink(path.c_str()) != 0) {
    const int err = errno;
    ::close(fd);
    return invalid_argument("cannot unlink swap file ", path, " in directory '", directory,
                            "': ", errno_text(err));
  }
  return std::unique_ptr<FileSwapTier>(new FileSwapTier(fd, std::move(path), directory, alloc));
}

FileSwapTier::FileSwapTier(int fd, std::string path, std::string directory, Allocator& alloc)
    : fd_(fd), path_(std::move(path)), directory_(std::move(directory)), alloc_(alloc) {
  io_thread_ = std::thread([this] { io_loop(); });
}

FileSwapTier::~FileSwapTier() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  io_thread_.join();  // the loop drains the queue before it ends
  size_t alive = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    alive = entries_.size();
  }
  MS_CHECK(alive == 0, "swap tier ", path_, " destroyed with ", alive,
           " swapped tensors still alive (drop or swap them in first)");
  ::close(fd_);
}

// ---- FileSwapTier: the calls ----

SwappedTensor FileSwapTier::swap_out(Tensor&& t) {
  if (t.empty()) return {};
  Tensor tensor = std::move(t);
  const MemoryCategory category =
      alloc_.category_of(tensor.data());  // fatal for another allocator's
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t id = next_id_++;
  auto entry = std::make_unique<Entry>();
  entry->shape = tensor.shape();
  entry->dtype = tensor.dtype();
  entry->category = category;
  entry->region_bytes = round_up(tensor.nbytes(), kRegionAlignment);
  entry->offset = allocate_region_locked(entry->region_bytes);
  used_bytes_ += entry->region_bytes;
  entry->resident = std::move(tensor);
  entries_.emplace(id, std::move(entry));
  queue_.push_back(Op{id, true});
  work_cv_.notify_one();
  const Entry& e = *entries_.at(id);
  return make_swapped(id, e.shape, e.dtype, e.category);
}

void FileSwapTier::prefetch(SwappedTensor& s) {
  if (s.empty()) return;
  const int64_t id = id_of(s);
  std::lock_guard<std::mutex> lock(mutex_);
  start_read_locked(entry_locked(id), id);
}

Tensor FileSwapTier::swap_in(SwappedTensor&& s) {
  if (s.empty()) return Tensor();
  const int64_t id = take_id(s);
  std::unique_lock<std::mutex> lock(mutex_);
  Entry& e = entry_locked(id);
  start_read_locked(e, id);
  done_cv_.wait(lock, [&] { return e.read == ReadState::kDone; });
  Tensor out = std::move(e.resident);
  release_locked(id);
  return out;
}

void FileSwapTier::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

int64_t FileSwapTier::file_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return file_end_;
}

int64_t FileSwapTier::used_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_bytes_;
}

void FileSwapTier::discard(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& e = entry_locked(id);
  const bool transfer_pending = e.write == WriteState::kInFlight || e.read == ReadState::kQueued ||
                                e.read == ReadState::kInFlight;
  if (transfer_pending) {
    e.discarded = true;  // the I/O thread releases it when the transfer ends
    return;
  }
  if (e.write == WriteState::kQueued) e.write = WriteState::kCancelled;  // its op is skipped
  release_locked(id);
}

// ---- FileSwapTier: state changes (mutex_ held) ----

FileSwapTier::Entry& FileSwapTier::entry_locked(int64_t id) {
  auto it = entries_.find(id);
  MS_CHECK(it != entries_.end(), "swap tier ", path_, ": unknown swapped tensor ", id);
  return *it->second;
}

void FileSwapTier::start_read_locked(Entry& e, int64_t id) {
  if (e.read != ReadState::kNone) return;  // already prefetched
  switch (e.write) {
    case WriteState::kQueued:
      // The bytes never left: cancel the write and hand the tensor back.
      e.write = WriteState::kCancelled;
      free_region_locked(e);
      e.read = ReadState::kDone;
      break;
    case WriteState::kInFlight:
      e.read = ReadState::kKeep;  // the I/O thread keeps the source when the write ends
      break;
    case WriteState::kDone:
      e.resident = Tensor(alloc_, e.shape, e.dtype, e.category);
      e.read = ReadState::kQueued;
      queue_.push_back(Op{id, false});
      work_cv_.notify_one();
      break;
    case WriteState::kCancelled:
      MS_CHECK(false, "swap tier ", path_, ": read of a cancelled write");
  }
  done_cv_.notify_all();
}

void FileSwapTier::free_region_locked(Entry& e) {
  if (e.swapped_noted) {
    alloc_.note_swapped(e.category, -e.region_bytes);
    e.swapped_noted = false;
  }
  used_bytes_ -= e.region_bytes;
  int64_t offset = e.offset;
  int64_t bytes = e.region_bytes;
  e.region_bytes = 0;
  if (bytes == 0) return;
  // Coalesce with the free neighbours on both sides.
  auto next = free_regions_.lower_bound(offset);
  if (next != free_regions_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      bytes += prev->second;
      free_regions_.erase(prev);
    }
  }
  if (next != free_regions_.end() && offset + bytes == next->first) {
    bytes += next->second;
    free_regions_.erase(next);
  }
  free_regions_.emplace(offset, bytes);
}

int64_t FileSwapTier::allocate_region_locked(int64_t bytes) {
  if (bytes == 0) return 0;
  // First fit, lowest offset first: steps that swap the same sizes reuse the same regions.
  for (auto it = free_regions_.begin(); it != free_regions_.end(); ++it) {
    if (it->second < bytes) continue;
    const int64_t offset = it->first;
    const int64_t rest = it->second - bytes;
    free_regions_.erase(it);
    if (rest > 0) free_regions_.emplace(offset + bytes, rest);
    return offset;
  }
  // Nothing fits: grow the file, starting inside a free region that ends at its end.
  int64_t offset = file_end_;
  if (!free_regions_.empty()) {
    auto last = std::prev(free_regions_.end());
    if (last->first + last->second == file_end_) {
      offset = last->first;
      free_regions_.erase(last);
    }
  }
  file_end_ = offset + bytes;
  return offset;
}

void FileSwapTier::release_locked(int64_t id) {
  auto it = entries_.find(id);
  MS_CHECK(it != entries_.end(), "swap tier ", path_, ": unknown swapped tensor ", id);
  free_region_locked(*it->second);
  entries_.erase(it);  // frees a resident tensor still held (Allocator has its own lock)
}

// ---- FileSwapTier: the I/O thread ----

void FileSwapTier::io_loop() {
  profiler::set_thread_name("swap io");
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stop_ and drained
    const Op op = queue_.front();
    queue_.pop_front();
    auto it = entries_.find(op.id);
    if (it == entries_.end()) {  // dropped before its write started
      done_cv_.notify_all();
      continue;
    }
    Entry& e = *it->second;
    if (op.write ? e.write != WriteState::kQueued : e.read != ReadState::kQueued) {
      done_cv_.notify_all();  // cancelled
      continue;
    }
    if (!op.write && e.discarded) {
      release_locked(op.id);
      done_cv_.notify_all();
      continue;
    }
    busy_ = true;
    if (op.write) {
      e.write = WriteState::kInFlight;
    } else {
      e.read = ReadState::kInFlight;
    }
    void* data = e.resident.data();
    const int64_t bytes = e.nbytes();
    const int64_t offset = e.offset;
    lock.unlock();
    {
      std::optional<profiler::Scope> scope;
      if (profiler::recording()) {
        scope.emplace("swap", op.write ? "swap out (write)" : "swap in (read)",
                      profiler::Level::kLevel0, profiler::Args().add("bytes", bytes));
      }
      transfer(op.write, data, bytes, offset);
    }
    lock.lock();
    if (op.write) {
      e.write = WriteState::kDone;
      if (e.read == ReadState::kKeep) {
        // Prefetched while being written: the source is the result; the copy is not needed.
        e.read = ReadState::kDone;
        free_region_locked(e);
      } else {
        e.resident.reset();  // resident bytes back to the allocator ...
        alloc_.note_swapped(e.category, e.region_bytes);  // ... and counted as swapped
        e.swapped_noted = true;
      }
    } else {
      e.read = ReadState::kDone;
    }
    if (e.discarded) release_locked(op.id);
    busy_ = false;
    done_cv_.notify_all();
  }
}

void FileSwapTier::transfer(bool write, void* data, int64_t bytes, int64_t offset) const {
  char* p = static_cast<char*>(data);
  int64_t done = 0;
  while (done < bytes) {
    const size_t want = static_cast<size_t>(bytes - done);
    const ssize_t n = write ? ::pwrite(fd_, p + done, want, offset + done)
                            : ::pread(fd_, p + done, want, offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      fatal(str_cat("swap file ", path_, " (unlinked, in directory '", directory_,
                    "'): ", write ? "write" : "read", " of ", bytes, " bytes at offset ", offset,
                    " failed after ", done, " bytes: ", errno_text(err)));
    }
    if (n == 0) {
      fatal(str_cat("swap file ", path_, " (unlinked, in directory '", directory_, "'): short ",
                    write ? "write" : "read", " of ", bytes, " bytes at offset ", offset,
                    ": stopped after ", done, " bytes"));
    }
    done += n;
  }
}

}  // namespace mindspeed
