// StagedProcessGroup (staged_process_group.h).
#include "parallel/staged_process_group.h"

#include <functional>
#include <numeric>
#include <utility>
#include <vector>

#include "core/check.h"

namespace mindspeed {
namespace {

// An inner collective on host staging memory; wait() finishes it and then copies the result
// back into the device (once). The staging memory lives as long as the work.
class StagedWork final : public Work {
 public:
  StagedWork(std::unique_ptr<Work> inner, std::shared_ptr<std::vector<char>> staging, std::function<void()> copy_back)
      : inner_(std::move(inner)), staging_(std::move(staging)), copy_back_(std::move(copy_back)) {}
  void wait() override {
    inner_->wait();
    if (copy_back_) {
      copy_back_();
      copy_back_ = nullptr;
    }
  }
  bool is_completed() override { return inner_->is_completed(); }

 private:
  std::unique_ptr<Work> inner_;
  std::shared_ptr<std::vector<char>> staging_;
  std::function<void()> copy_back_;
};

class DoneWork final : public Work {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};

class StagedProcessGroup final : public ProcessGroup {
 public:
  StagedProcessGroup(std::unique_ptr<ProcessGroup> inner, DeviceTransfers transfers)
      : inner_(std::move(inner)), t_(std::move(transfers)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::vector<int>& global_ranks() const override { return inner_->global_ranks(); }
  const std::string& name() const override { return inner_->name(); }
  const CommStats& stats() const override { return inner_->stats(); }
  void reset_stats() override { inner_->reset_stats(); }
  void set_buffer_bytes(int64_t bytes) override { inner_->set_buffer_bytes(bytes); }
  int64_t buffer_bytes() const override { return inner_->buffer_bytes(); }

  std::unique_ptr<Work> all_reduce_async(float* data, int64_t n, ReduceOp op) override {
    if (!t_.is_device(data)) return inner_->all_reduce_async(data, n, op);
    if (size() == 1) return std::make_unique<DoneWork>();
    auto host = stage_in(data, 4 * n);
    return staged(inner_->all_reduce_async(as_floats(*host), n, op), host, data, 0, 4 * n);
  }

  std::unique_ptr<Work> all_gather_async(float* out, const float* in, int64_t n) override {
    return all_gather_bytes_async(out, in, 4 * n, /*floats=*/true);
  }

  std::unique_ptr<Work> all_gather_bytes_async(void* out, const void* in, int64_t bytes) override {
    return all_gather_bytes_async(out, in, bytes, /*floats=*/false);
  }

  std::unique_ptr<Work> reduce_scatter_async(float* out, const float* in, int64_t n, ReduceOp op) override {
    if (!t_.is_device(out)) return inner_->reduce_scatter_async(out, in, n, op);
    if (size() == 1) return device_copy(out, in, 4 * n);
    // In place when out is this rank's block of in (the gradient buffer): the same on the host.
    const bool in_place = out == in + static_cast<int64_t>(rank()) * n;
    auto host = stage_in(in, 4 * n * size());
    float* host_in = as_floats(*host);
    float* host_out = host_in + static_cast<int64_t>(rank()) * n;
    std::shared_ptr<std::vector<char>> separate;
    if (!in_place) {
      separate = std::make_shared<std::vector<char>>(static_cast<size_t>(4 * n));
      host_out = as_floats(*separate);
    }
    std::unique_ptr<Work> work = inner_->reduce_scatter_async(host_out, host_in, n, op);
    return std::make_unique<StagedWork>(std::move(work), host, [this, out, host_out, n, separate] {
      t_.to_device(out, host_out, 4 * n);
    });
  }

  std::unique_ptr<Work> broadcast_async(void* data, int64_t bytes, int root) override {
    if (!t_.is_device(data)) return inner_->broadcast_async(data, bytes, root);
    if (size() == 1) return std::make_unique<DoneWork>();
    auto host = std::make_shared<std::vector<char>>(static_cast<size_t>(bytes));
    if (rank() == root) t_.to_host(host->data(), data, bytes);
    std::unique_ptr<Work> work = inner_->broadcast_async(host->data(), bytes, root);
    if (rank() == root) return std::make_unique<StagedWork>(std::move(work), host, nullptr);
    return staged(std::move(work), host, data, 0, bytes);
  }

  std::unique_ptr<Work> all_to_all_async(float* out, const std::vector<int64_t>& recv_counts, const float* in,
                                         const std::vector<int64_t>& send_counts) override {
    if (!t_.is_device(out)) return inner_->all_to_all_async(out, recv_counts, in, send_counts);
    const int64_t sent = std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0});
    const int64_t received = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});
    auto host_in = stage_in(in, 4 * sent);
    auto host_out = std::make_shared<std::vector<char>>(static_cast<size_t>(4 * received));
    std::unique_ptr<Work> work = inner_->all_to_all_async(as_floats(*host_out), recv_counts, as_floats(*host_in),
                                                          send_counts);
    return std::make_unique<StagedWork>(std::move(work), host_out, [this, out, host_out, host_in, received] {
      t_.to_device(out, host_out->data(), 4 * received);
    });
  }

  std::unique_ptr<Work> send_async(const float* data, int64_t n, int dst, int tag) override {
    if (!t_.is_device(data)) return inner_->send_async(data, n, dst, tag);
    auto host = stage_in(data, 4 * n);
    return std::make_unique<StagedWork>(inner_->send_async(as_floats(*host), n, dst, tag), host, nullptr);
  }

  std::unique_ptr<Work> recv_async(float* data, int64_t n, int src, int tag) override {
    if (!t_.is_device(data)) return inner_->recv_async(data, n, src, tag);
    auto host = std::make_shared<std::vector<char>>(static_cast<size_t>(4 * n));
    return staged(inner_->recv_async(as_floats(*host), n, src, tag), host, data, 0, 4 * n);
  }

  std::unique_ptr<Work> send_i64_async(const int64_t* data, int64_t n, int dst, int tag) override {
    return inner_->send_i64_async(data, n, dst, tag);
  }
  std::unique_ptr<Work> recv_i64_async(int64_t* data, int64_t n, int src, int tag) override {
    return inner_->recv_i64_async(data, n, src, tag);
  }
  void barrier() override { inner_->barrier(); }
  double all_reduce_scalar(double value, ReduceOp op) override { return inner_->all_reduce_scalar(value, op); }

 private:
  static float* as_floats(std::vector<char>& v) { return reinterpret_cast<float*>(v.data()); }

  std::shared_ptr<std::vector<char>> stage_in(const void* device, int64_t bytes) {
    auto host = std::make_shared<std::vector<char>>(static_cast<size_t>(bytes));
    t_.to_host(host->data(), device, bytes);
    return host;
  }

  // The work with `bytes` from `offset` of the staging copied back into `device` on wait().
  std::unique_ptr<Work> staged(std::unique_ptr<Work> work, std::shared_ptr<std::vector<char>> host, void* device,
                               int64_t offset, int64_t bytes) {
    char* src = host->data() + offset;
    return std::make_unique<StagedWork>(std::move(work), host,
                                        [this, device, src, bytes] { t_.to_device(device, src, bytes); });
  }

  // A group of one: the result is the input, moved on the device.
  std::unique_ptr<Work> device_copy(void* out, const void* in, int64_t bytes) {
    if (out != in) t_.device_copy(out, in, bytes);
    return std::make_unique<DoneWork>();
  }

  std::unique_ptr<Work> all_gather_bytes_async(void* out, const void* in, int64_t bytes, bool floats) {
    if (!t_.is_device(out)) {
      return floats ? inner_->all_gather_async(static_cast<float*>(out), static_cast<const float*>(in), bytes / 4)
                    : inner_->all_gather_bytes_async(out, in, bytes);
    }
    if (size() == 1) return device_copy(out, in, bytes);
    auto host_in = stage_in(in, bytes);
    auto host_out = std::make_shared<std::vector<char>>(static_cast<size_t>(bytes * size()));
    std::unique_ptr<Work> work =
        floats ? inner_->all_gather_async(as_floats(*host_out), as_floats(*host_in), bytes / 4)
               : inner_->all_gather_bytes_async(host_out->data(), host_in->data(), bytes);
    const int64_t total = bytes * size();
    return std::make_unique<StagedWork>(std::move(work), host_out, [this, out, host_out, host_in, total] {
      t_.to_device(out, host_out->data(), total);
    });
  }

  std::unique_ptr<ProcessGroup> inner_;
  DeviceTransfers t_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_staged_process_group(std::unique_ptr<ProcessGroup> inner, DeviceTransfers transfers) {
  MS_CHECK(inner != nullptr, "a staged process group needs an inner group");
  return std::make_unique<StagedProcessGroup>(std::move(inner), std::move(transfers));
}

}  // namespace mindspeed
