// ProcessGroup of one member (process_group.h).
#include <cstring>

#include "core/check.h"
#include "parallel/process_group.h"

namespace mindspeed {

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all-reduce";
    case CollectiveKind::kAllGather: return "all-gather";
    case CollectiveKind::kReduceScatter: return "reduce-scatter";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kAllToAll: return "all-to-all";
    case CollectiveKind::kSend: return "send";
    case CollectiveKind::kRecv: return "recv";
    case CollectiveKind::kCount: break;
  }
  return "?";
}

namespace {

class DoneWork final : public Work {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};

class SingleProcessGroup final : public ProcessGroup {
 public:
  SingleProcessGroup(std::string name, int global_rank)
      : name_(std::move(name)), ranks_{global_rank} {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::vector<int>& global_ranks() const override { return ranks_; }
  const std::string& name() const override { return name_; }

  std::unique_ptr<Work> all_reduce_async(float*, int64_t, ReduceOp) override { return done(); }
  std::unique_ptr<Work> all_gather_async(float* out, const float* in, int64_t n) override {
    if (out != in) std::memmove(out, in, sizeof(float) * n);
    return done();
  }
  std::unique_ptr<Work> reduce_scatter_async(float* out, const float* in, int64_t n,
                                             ReduceOp) override {
    if (out != in) std::memmove(out, in, sizeof(float) * n);
    return done();
  }
  std::unique_ptr<Work> all_gather_bytes_async(void* out, const void* in, int64_t bytes) override {
    if (out != in) std::memmove(out, in, static_cast<size_t>(bytes));
    return done();
  }
  std::unique_ptr<Work> broadcast_async(void*, int64_t, int root) override {
    MS_CHECK(root == 0, "broadcast root ", root, " outside a group of one");
    return done();
  }
  std::unique_ptr<Work> all_to_all_async(float* out, const std::vector<int64_t>& recv_counts,
                                         const float* in,
                                         const std::vector<int64_t>& send_counts) override {
    MS_CHECK(recv_counts.size() == 1 && send_counts.size() == 1 && recv_counts[0] == send_counts[0],
             "all_to_all counts do not match in a group of one");
    if (out != in) std::memmove(out, in, sizeof(float) * send_counts[0]);
    return done();
  }
  std::unique_ptr<Work> send_async(const float*, int64_t, int, int) override {
    fatal("send in a process group of one (" + name_ + ")");
  }
  std::unique_ptr<Work> recv_async(float*, int64_t, int, int) override {
    fatal("recv in a process group of one (" + name_ + ")");
  }
  std::unique_ptr<Work> send_i64_async(const int64_t*, int64_t, int, int) override {
    fatal("send in a process group of one (" + name_ + ")");
  }
  std::unique_ptr<Work> recv_i64_async(int64_t*, int64_t, int, int) override {
    fatal("recv in a process group of one (" + name_ + ")");
  }
  void barrier() override {}
  double all_reduce_scalar(double value, ReduceOp) override { return value; }

 private:
  static std::unique_ptr<Work> done() { return std::make_unique<DoneWork>(); }
  std::string name_;
  std::vector<int> ranks_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_single_process_group(std::string name, int global_rank) {
  return std::make_unique<SingleProcessGroup>(std::move(name), global_rank);
}

}  // namespace mindspeed
