// MPI ProcessGroup (mpi_process_group.h).
#include "parallel/mpi_process_group.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>

#include "core/check.h"
#include "core/profiler.h"

namespace mindspeed {
namespace {

MPI_Op to_mpi(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  return MPI_SUM;
}

int checked_count(int64_t n, const char* what) {
  MS_CHECK(n >= 0 && n <= INT_MAX, what, ": ", n, " elements exceed the MPI count limit");
  return static_cast<int>(n);
}

void mpi_check(int rc, const char* what, const std::string& group) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fatal(str_cat("MPI ", what, " on group ", group, " failed: ", std::string(text, len)));
}

// The most elements one MPI call of the collectives below moves: MPI counts are int, and a
// gradient bucket of a multi-billion-parameter model (Megatron's default without overlap is
// one bucket) holds more. Larger collectives run as several calls of at most this many.
int64_t g_max_count = INT_MAX;

// Calls fn(offset, count) for consecutive pieces of [0, n) of at most max_count elements.
template <typename Fn>
void for_each_piece(int64_t n, int64_t max_count, Fn&& fn) {
  for (int64_t off = 0; off < n; off += max_count)
    fn(off, static_cast<int>(std::min(max_count, n - off)));
}

// Allgather of `n` elements of `type` (`width` bytes) per rank: one call when the count fits,
// otherwise every rank broadcasts its block in pieces.
void all_gather_pieces(void* out, const void* in, int64_t n, MPI_Datatype type, int width, int rank,
                       int size, MPI_Comm comm, const std::string& group, int64_t max_count) {
  char* o = static_cast<char*>(out);
  const bool in_place = in == o + static_cast<int64_t>(rank) * n * width;
  if (n <= max_count) {
    const int count = static_cast<int>(n);
    mpi_check(MPI_Allgather(in_place ? MPI_IN_PLACE : in, count, type, out, count, type, comm), "Allgather", group);
    return;
  }
  if (!in_place) std::memcpy(o + static_cast<int64_t>(rank) * n * width, in, static_cast<size_t>(n * width));
  for (int root = 0; root < size; ++root) {
    for_each_piece(n, max_count, [&](int64_t off, int count) {
      mpi_check(MPI_Bcast(o + (static_cast<int64_t>(root) * n + off) * width, count, type, root, comm), "Bcast",
                group);
    });
  }
}

// Completion flag shared by a Work and the worker that runs it.
struct Completion {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
};

class AsyncWork final : public Work {
 public:
  explicit AsyncWork(std::shared_ptr<Completion> c) : c_(std::move(c)) {}
  // The worker reads and writes the caller's buffers until the collective completes, so a
  // handle dropped without wait() waits here (as RequestWork does with MPI_Wait); otherwise
  // the caller could free or reuse a buffer the worker is still writing into.
  ~AsyncWork() override { wait(); }
  void wait() override {
    std::unique_lock<std::mutex> lock(c_->mutex);
    c_->cv.wait(lock, [&] { return c_->done; });
  }
  bool is_completed() override {
    std::lock_guard<std::mutex> lock(c_->mutex);
    return c_->done;
  }

 private:
  std::shared_ptr<Completion> c_;
};

// A non-blocking send or recv; with the profiler on, an asynchronous slice from issue to
// completion (seen by wait() or is_completed()).
class RequestWork final : public Work {
 public:
  RequestWork(MPI_Request request, std::string profile_name, uint64_t profile_id)
      : request_(request), profile_name_(std::move(profile_name)), profile_id_(profile_id) {}
  ~RequestWork() override {
    if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
    completed();
  }
  void wait() override {
    MPI_Wait(&request_, MPI_STATUS_IGNORE);
    completed();
  }
  bool is_completed() override {
    int flag = 0;
    MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
    if (flag != 0) completed();
    return flag != 0;
  }

 private:
  void completed() {
    if (profile_id_ == 0) return;
    profiler::async_end(profiler::category::kComm, profile_name_, "p2p", profile_id_);
    profile_id_ = 0;
  }
  MPI_Request request_;
  std::string profile_name_;
  uint64_t profile_id_;
};

class DoneWork final : public Work {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};

// A thread that runs queued jobs in order.
class Worker {
 public:
  explicit Worker(const std::string& group) : group_(group) {
    try {
      thread_ = std::thread([this] { run(); });
    } catch (const std::system_error& e) {  // e.g. the process or thread limit (ulimit -u)
      fatal(str_cat("cannot start the communication thread of process group ", group, ": ", e.what()));
    }
  }
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  std::unique_ptr<Work> submit(std::function<void()> job) {
    auto completion = std::make_shared<Completion>();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.emplace_back([job = std::move(job), completion] {
        job();
        {
          std::lock_guard<std::mutex> l(completion->mutex);
          completion->done = true;
        }
        completion->cv.notify_all();
      });
    }
    cv_.notify_one();
    return std::make_unique<AsyncWork>(completion);
  }

 private:
  void run() {
    profiler::set_thread_name("comm " + group_);
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::string group_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup(MPI_Comm comm, std::string name, std::vector<int> ranks)
      : comm_(comm), name_(std::move(name)), ranks_(std::move(ranks)) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MS_CHECK(size_ == static_cast<int>(ranks_.size()), "group ", name_, " size mismatch");
    mpi_check(MPI_Comm_dup(comm_, &async_comm_), "Comm_dup", name_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<int>& global_ranks() const override { return ranks_; }
  const std::string& name() const override { return name_; }
  void set_buffer_bytes(int64_t bytes) override {
    MS_CHECK(bytes >= 0, "buffer of group ", name_, ": ", bytes, " bytes");
    buffer_bytes_ = bytes;
  }
  int64_t buffer_bytes() const override { return buffer_bytes_; }

  std::unique_ptr<Work> all_reduce_async(float* data, int64_t n, ReduceOp op) override {
    stats_.record(CollectiveKind::kAllReduce, 4 * n);
    if (size_ == 1) return done();
    return async(CollectiveKind::kAllReduce, 4 * n, [=, this] {
      for_each_piece(n, max_count(4), [&](int64_t off, int count) {
        mpi_check(MPI_Allreduce(MPI_IN_PLACE, data + off, count, MPI_FLOAT, to_mpi(op), async_comm_), "Allreduce",
                  name_);
      });
    });
  }
  std::unique_ptr<Work> all_gather_async(float* out, const float* in, int64_t n) override {
    stats_.record(CollectiveKind::kAllGather, 4 * n * size_);
    if (size_ == 1) {
      if (out != in) std::copy(in, in + n, out);
      return done();
    }
    return async(CollectiveKind::kAllGather, 4 * n * size_, [=, this] {
      all_gather_pieces(out, in, n, MPI_FLOAT, 4, rank_, size_, async_comm_, name_, max_count(4));
    });
  }
  std::unique_ptr<Work> reduce_scatter_async(float* out, const float* in, int64_t n, ReduceOp op) override {
    stats_.record(CollectiveKind::kReduceScatter, 4 * n * size_);
    if (size_ == 1) {
      if (out != in) std::copy(in, in + n, out);
      return done();
    }
    return async(CollectiveKind::kReduceScatter, 4 * n * size_, [=, this] {
      const bool in_place = out == in + static_cast<int64_t>(rank_) * n;
      if (n <= max_count(4)) {
        if (!in_place) {
          mpi_check(MPI_Reduce_scatter_block(in, out, static_cast<int>(n), MPI_FLOAT, to_mpi(op), async_comm_),
                    "Reduce_scatter", name_);
          return;
        }
        // MPI's in-place form leaves the result at the start of the buffer.
        float* buffer = const_cast<float*>(in);
        mpi_check(MPI_Reduce_scatter_block(MPI_IN_PLACE, buffer, static_cast<int>(n), MPI_FLOAT, to_mpi(op),
                                           async_comm_),
                  "Reduce_scatter", name_);
        if (out != buffer) std::memmove(out, buffer, sizeof(float) * static_cast<size_t>(n));
        return;
      }
      for (int root = 0; root < size_; ++root) {  // each rank's block reduced onto it, in pieces
        for_each_piece(n, max_count(4), [&](int64_t off, int count) {
          const float* send = in + static_cast<int64_t>(root) * n + off;
          const bool mine = root == rank_;
          mpi_check(MPI_Reduce(mine && in_place ? MPI_IN_PLACE : send, mine ? out + off : nullptr, count, MPI_FLOAT,
                               to_mpi(op), root, async_comm_),
                    "Reduce", name_);
        });
      }
    });
  }
  std::unique_ptr<Work> all_gather_bytes_async(void* out, const void* in, int64_t bytes) override {
    stats_.record(CollectiveKind::kAllGather, bytes * size_);
    if (size_ == 1) {
      if (out != in) std::memmove(out, in, static_cast<size_t>(bytes));
      return done();
    }
    return async(CollectiveKind::kAllGather, bytes * size_, [=, this] {
      all_gather_pieces(out, in, bytes, MPI_BYTE, 1, rank_, size_, async_comm_, name_,
                        max_count(1));
    });
  }
  std::unique_ptr<Work> broadcast_async(void* data, int64_t bytes, int root) override {
    stats_.record(CollectiveKind::kBroadcast, bytes);
    if (size_ == 1) return done();
    return async(CollectiveKind::kBroadcast, bytes, [=, this] {
      for_each_piece(bytes, max_count(1), [&](int64_t off, int count) {
        mpi_check(MPI_Bcast(static_cast<char*>(data) + off, count, MPI_BYTE, root, async_comm_), "Bcast", name_);
      });
    });
  }
  std::unique_ptr<Work> all_to_all_async(float* out, const std::vector<int64_t>& recv_counts, const float* in,
                                         const std::vector<int64_t>& send_counts) override {
    MS_CHECK(static_cast<int>(recv_counts.size()) == size_ && static_cast<int>(send_counts.size()) == size_,
             "all_to_all counts need one entry per rank of ", name_);
    std::vector<int> sc(size_), sd(size_), rc(size_), rd(size_);
    int64_t soff = 0, roff = 0;
    for (int r = 0; r < size_; ++r) {
      sc[r] = checked_count(send_counts[r], "all_to_all");
      rc[r] = checked_count(recv_counts[r], "all_to_all");
      sd[r] = checked_count(soff, "all_to_all");
      rd[r] = checked_count(roff, "all_to_all");
      soff += send_counts[r];
      roff += recv_counts[r];
    }
    stats_.record(CollectiveKind::kAllToAll, 4 * soff);
    if (size_ == 1) {  // a copy, as the other collectives of a group of one
      MS_CHECK(soff == roff, "all_to_all counts do not match in a group of one (", name_, ")");
      if (out != in) std::memmove(out, in, sizeof(float) * static_cast<size_t>(soff));
      return done();
    }
    return async(CollectiveKind::kAllToAll, 4 * soff, [=, this] {
      mpi_check(MPI_Alltoallv(in, sc.data(), sd.data(), MPI_FLOAT, out, rc.data(), rd.data(), MPI_FLOAT, async_comm_),
                "Alltoallv", name_);
    });
  }
  // Point-to-point of n elements of `type` (`width` bytes each), counted in the stats.
  std::unique_ptr<Work> send(const void* data, int64_t n, MPI_Datatype type, int width, int dst, int tag) {
    stats_.record(CollectiveKind::kSend, width * n);
    const auto [name, id] = profile_p2p(CollectiveKind::kSend, width * n, dst, tag);
    MPI_Request req;
    mpi_check(MPI_Isend(data, checked_count(n, "send"), type, dst, tag, comm_, &req), "Isend", name_);
    return std::make_unique<RequestWork>(req, name, id);
  }
  std::unique_ptr<Work> recv(void* data, int64_t n, MPI_Datatype type, int width, int src, int tag) {
    stats_.record(CollectiveKind::kRecv, width * n);
    const auto [name, id] = profile_p2p(CollectiveKind::kRecv, width * n, src, tag);
    MPI_Request req;
    mpi_check(MPI_Irecv(data, checked_count(n, "recv"), type, src, tag, comm_, &req), "Irecv", name_);
    return std::make_unique<RequestWork>(req, name, id);
  }
  std::unique_ptr<Work> send_async(const float* data, int64_t n, int dst, int tag) override {
    return send(data, n, MPI_FLOAT, 4, dst, tag);
  }
  std::unique_ptr<Work> recv_async(float* data, int64_t n, int src, int tag) override {
    return recv(data, n, MPI_FLOAT, 4, src, tag);
  }
  std::unique_ptr<Work> send_i64_async(const int64_t* data, int64_t n, int dst, int tag) override {
    return send(data, n, MPI_INT64_T, 8, dst, tag);
  }
  std::unique_ptr<Work> recv_i64_async(int64_t* data, int64_t n, int src, int tag) override {
    return recv(data, n, MPI_INT64_T, 8, src, tag);
  }
  void barrier() override {
    const double start = profiler::recording() ? profiler::now_us() : 0.0;
    mpi_check(MPI_Barrier(comm_), "Barrier", name_);
    if (start > 0.0) profiler::complete(profiler::category::kComm, "barrier", start, profiler::now_us(), event_args(0));
  }
  double all_reduce_scalar(double value, ReduceOp op) override {
    if (size_ == 1) return value;
    const double start = profiler::recording() ? profiler::now_us() : 0.0;
    double out = 0.0;
    mpi_check(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, to_mpi(op), comm_), "Allreduce", name_);
    if (start > 0.0) {
      profiler::complete(profiler::category::kComm, "all-reduce (scalar)", start, profiler::now_us(),
                         event_args(8));
    }
    return out;
  }

 private:
  // A collective on the group's communication thread: with the profiler on, a slice on that
  // thread's track ("comm <group>"), so its overlap with the compute on "main" shows.
  std::unique_ptr<Work> async(CollectiveKind kind, int64_t bytes, std::function<void()> job) {
    if (!worker_) worker_ = std::make_unique<Worker>(name_);
    if (profiler::recording()) {
      job = [job = std::move(job), kind, args = event_args(bytes)] {
        const double start = profiler::now_us();
        job();
        profiler::complete(profiler::category::kComm, collective_name(kind), start, profiler::now_us(), args);
      };
    }
    return worker_->submit(std::move(job));
  }
  // The arguments of a communication event: payload bytes (as CommStats counts them), the
  // group and its global ranks.
  profiler::Args event_args(int64_t bytes) const {
    std::string ranks;
    for (int r : ranks_) {
      if (!ranks.empty()) ranks += ',';
      ranks += std::to_string(r);
    }
    return profiler::Args{}.add("bytes", bytes).add("group", name_).add("ranks", ranks);
  }
  std::pair<std::string, uint64_t> profile_p2p(CollectiveKind kind, int64_t bytes, int peer, int tag) const {
    if (!profiler::recording()) return {std::string(), 0};
    std::string name = std::string(collective_name(kind)) + (kind == CollectiveKind::kSend ? " to " : " from ") +
                       std::to_string(ranks_[static_cast<size_t>(peer)]);
    const uint64_t id = profiler::async_begin(
        profiler::category::kComm, name, "p2p",
        event_args(bytes).add("peer", static_cast<int64_t>(ranks_[static_cast<size_t>(peer)])).add("tag", static_cast<int64_t>(tag)));
    return {std::move(name), id};
  }
  static std::unique_ptr<Work> done() { return std::make_unique<DoneWork>(); }
  // The most elements of `width` bytes one MPI call of a collective moves: MPI's int count, or
  // what the group's buffer holds (MindSpeed's per-group HCCL buffer: a larger collective runs
  // as several calls through it).
  int64_t max_count(int width) const {
    if (buffer_bytes_ <= 0) return g_max_count;
    return std::clamp<int64_t>(buffer_bytes_ / width, 1, g_max_count);
  }

  MPI_Comm comm_;
  MPI_Comm async_comm_ = MPI_COMM_NULL;
  std::string name_;
  std::vector<int> ranks_;
  int rank_ = 0, size_ = 1;
  int64_t buffer_bytes_ = 0;  ///< the group's communication buffer (0: unbounded)
  std::unique_ptr<Worker> worker_;
};

}  // namespace

void set_mpi_max_count_for_testing(int64_t count) {
  MS_CHECK(count >= 1 && count <= INT_MAX, "MPI piece size ", count, " outside [1, INT_MAX]");
  g_max_count = count;
}

std::unique_ptr<ProcessGroup> make_mpi_process_group(MPI_Comm comm, std::string name,
                                                     std::vector<int> global_ranks) {
  return std::make_unique<MpiProcessGroup>(comm, std::move(name), std::move(global_ranks));
}

}  // namespace mindspeed
