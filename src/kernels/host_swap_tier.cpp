// The host swap tier of a device backend (see host_swap_tier.h): swapped tensors' bytes in
// (pinned) host memory, moved by the kernel table's transfer ops.
#include "kernels/host_swap_tier.h"

#include <optional>
#include <utility>

#include "core/check.h"
#include "core/profiler.h"

namespace mindspeed {

namespace {

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// A profiler slice for a transfer (Scope is not movable: the caller owns the optional).
void open_transfer_scope(std::optional<profiler::Scope>& scope, const char* name, int64_t bytes) {
  if (profiler::recording())
    scope.emplace("swap", name, profiler::Level::kLevel0, profiler::Args().add("bytes", bytes));
}

}  // namespace

StatusOr<std::unique_ptr<HostSwapTier>> HostSwapTier::open(const Backend& backend,
                                                           Allocator& device_alloc) {
  std::unique_ptr<MemorySource> host;
  switch (backend.device) {
    case DeviceKind::kCpu:
      return invalid_argument(
          "the host swap tier is for a device backend; the CPU's swap tier is a file "
          "(FileSwapTier)");
    case DeviceKind::kCpuFenced:
      host = host_memory_source();
      break;
    case DeviceKind::kCuda: {
      MS_ASSIGN_OR_RETURN(host, cuda_pinned_host_memory());
      break;
    }
  }
  return std::unique_ptr<HostSwapTier>(new HostSwapTier(backend, device_alloc, std::move(host)));
}

HostSwapTier::HostSwapTier(const Backend& backend, Allocator& device_alloc,
                           std::unique_ptr<MemorySource> host_memory)
    : backend_(backend),
      device_alloc_(device_alloc),
      host_name_(host_memory->name()),
      host_alloc_(std::move(host_memory)) {}

HostSwapTier::~HostSwapTier() {
  size_t alive = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    alive = entries_.size();
  }
  MS_CHECK(alive == 0, "host swap tier destroyed with ", alive,
           " swapped tensors still alive (drop or swap them in first)");
}

SwappedTensor HostSwapTier::swap_out(Tensor&& t) {
  if (t.empty()) return {};
  Tensor tensor = std::move(t);
  const MemoryCategory category =
      device_alloc_.category_of(tensor.data());  // fatal for another allocator's
  Entry e;
  e.shape = tensor.shape();
  e.dtype = tensor.dtype();
  e.category = category;
  e.host_bytes = round_up(tensor.nbytes(), Allocator::kAlignment);
  e.host = host_alloc_.allocate(e.host_bytes, category);
  {
    std::optional<profiler::Scope> scope;
    open_transfer_scope(scope, "swap out (device to host)", tensor.nbytes());
    backend_.kernels.copy_to_host(backend_.context, e.host, tensor.data(), tensor.nbytes());
  }
  tensor.reset();  // the device block back to the allocator: the bytes are on the host now
  std::lock_guard<std::mutex> lock(mutex_);
  device_alloc_.note_swapped(category, e.host_bytes);
  used_bytes_ += e.host_bytes;
  const int64_t id = next_id_++;
  const Entry& stored = entries_.emplace(id, std::move(e)).first->second;
  return make_swapped(id, stored.shape, stored.dtype, stored.category);
}

void HostSwapTier::prefetch(SwappedTensor& s) {
  if (s.empty()) return;
  const int64_t id = id_of(s);
  std::lock_guard<std::mutex> lock(mutex_);
  prefetch_locked(entry_locked(id));
}

Tensor HostSwapTier::swap_in(SwappedTensor&& s) {
  if (s.empty()) return Tensor();
  const int64_t id = take_id(s);
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& e = entry_locked(id);
  prefetch_locked(e);
  free_host_locked(e);
  Tensor out = std::move(e.resident);
  entries_.erase(id);
  return out;
}

void HostSwapTier::synchronize() { backend_.kernels.synchronize(backend_.context); }

int64_t HostSwapTier::used_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_bytes_;
}

void HostSwapTier::discard(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_host_locked(entry_locked(id));
  entries_.erase(id);
}

HostSwapTier::Entry& HostSwapTier::entry_locked(int64_t id) {
  auto it = entries_.find(id);
  MS_CHECK(it != entries_.end(), "host swap tier: unknown swapped tensor ", id);
  return it->second;
}

void HostSwapTier::prefetch_locked(Entry& e) {
  if (!e.resident.empty()) return;
  e.resident = Tensor(device_alloc_, e.shape, e.dtype, e.category);
  std::optional<profiler::Scope> scope;
  open_transfer_scope(scope, "swap in (host to device)", e.resident.nbytes());
  // The source may be reused once the call returns (copy_to_device's contract), so the host
  // block can be freed right after.
  backend_.kernels.copy_to_device(backend_.context, e.resident.data(), e.host, e.resident.nbytes());
}

void HostSwapTier::free_host_locked(Entry& e) {
  if (e.host == nullptr) return;
  host_alloc_.deallocate(e.host);
  e.host = nullptr;
  device_alloc_.note_swapped(e.category, -e.host_bytes);
  used_bytes_ -= e.host_bytes;
}

}  // namespace mindspeed
