// ProcessGroup: the collectives the parallel algorithms use, between them and MPI (NCCL can
// serve a CUDA backend later behind the same interface). Every operation has a blocking
// form and an asynchronous one returning a Work handle; asynchronous operations progress
// while the caller computes (the MPI implementation drives them from a progress thread).
// Buffers are fp32 unless the signature says bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mindspeed {

enum class ReduceOp { kSum, kMax, kMin };

/// Collective kinds, for the traffic counters (CommStats).
enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll, kSend, kRecv, kCount };
constexpr int kNumCollectiveKinds = static_cast<int>(CollectiveKind::kCount);
const char* collective_name(CollectiveKind kind);

/// Calls and payload bytes per collective kind issued on a group by this rank. The payload
/// is the buffer the caller passes (an all-reduce of n floats counts 4n bytes), so bench/
/// can compare it with Megatron's analytic volumes.
struct CommStats {
  int64_t calls[kNumCollectiveKinds] = {};
  int64_t bytes[kNumCollectiveKinds] = {};
  void record(CollectiveKind kind, int64_t payload_bytes) {
    ++calls[static_cast<int>(kind)];
    bytes[static_cast<int>(kind)] += payload_bytes;
  }
};

/// Handle of an asynchronous collective; wait() blocks until it completed.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Global ranks of the members, in group-rank order.
  virtual const std::vector<int>& global_ranks() const = 0;
  /// "tp", "dp-cp", ...: for messages.
  virtual const std::string& name() const = 0;

  /// In place over data[0, n).
  virtual std::unique_ptr<Work> all_reduce_async(float* data, int64_t n, ReduceOp op) = 0;
  /// out[r*n + i] = in_of_rank_r[i]; out holds size()*n.
  virtual std::unique_ptr<Work> all_gather_async(float* out, const float* in, int64_t n) = 0;
  /// out[i] = reduce over ranks of in_of_rank_r[rank()*n + i]; in holds size()*n. In place
  /// when out == in + rank()*n (Megatron's gradient buffer: the reduced shard lands where
  /// the rank's block was; `in`'s other blocks are left undefined).
  virtual std::unique_ptr<Work> reduce_scatter_async(float* out, const float* in, int64_t n,
                                                     ReduceOp op) = 0;
  virtual std::unique_ptr<Work> broadcast_async(void* data, int64_t bytes, int root) = 0;
  /// all_gather of raw bytes (bf16 parameter shards): out holds size()*bytes.
  virtual std::unique_ptr<Work> all_gather_bytes_async(void* out, const void* in, int64_t bytes) = 0;
  /// Variable-size all-to-all of fp32 rows: send_counts[r] floats go to rank r.
  virtual std::unique_ptr<Work> all_to_all_async(float* out, const std::vector<int64_t>& recv_counts,
                                                 const float* in,
                                                 const std::vector<int64_t>& send_counts) = 0;
  virtual std::unique_ptr<Work> send_async(const float* data, int64_t n, int dst, int tag) = 0;
  virtual std::unique_ptr<Work> recv_async(float* data, int64_t n, int src, int tag) = 0;
  /// Point-to-point of int64 values (tensor shapes sent ahead of a tensor).
  virtual std::unique_ptr<Work> send_i64_async(const int64_t* data, int64_t n, int dst, int tag) = 0;
  virtual std::unique_ptr<Work> recv_i64_async(int64_t* data, int64_t n, int src, int tag) = 0;
  virtual void barrier() = 0;
  /// Sum of `value` over the group in double (loss and norm bookkeeping).
  virtual double all_reduce_scalar(double value, ReduceOp op) = 0;

  /// The group's communication buffer in bytes (MindSpeed's per-group HCCL buffer,
  /// --hccl-group-buffer / --hccl-group-buffer-adaptive): a collective larger than it runs as
  /// several transfers of at most that size. 0 = unbounded (the default). A group without such
  /// a buffer (a group of one moves nothing) keeps 0.
  virtual void set_buffer_bytes(int64_t bytes) {}
  virtual int64_t buffer_bytes() const { return 0; }

  virtual const CommStats& stats() const { return stats_; }
  virtual void reset_stats() { stats_ = CommStats{}; }

  void all_reduce(float* data, int64_t n, ReduceOp op = ReduceOp::kSum) {
    all_reduce_async(data, n, op)->wait();
  }
  void all_gather(float* out, const float* in, int64_t n) { all_gather_async(out, in, n)->wait(); }
  void reduce_scatter(float* out, const float* in, int64_t n, ReduceOp op = ReduceOp::kSum) {
    reduce_scatter_async(out, in, n, op)->wait();
  }
  void broadcast(void* data, int64_t bytes, int root) { broadcast_async(data, bytes, root)->wait(); }

 protected:
  CommStats stats_;
};

/// The group of one process: every collective is a copy or nothing. Used for the groups of
/// size 1 and by single-process tests, without MPI.
std::unique_ptr<ProcessGroup> make_single_process_group(std::string name, int global_rank = 0);

}  // namespace mindspeed
