// WeightGradQueue: the deferred weight-gradient half of backward (the zero-bubble B/W split
// that DualPipeV's --dualpipev-dw-detach needs; later Megatron calls it delay_wgrad_compute).
// With ForwardContext::wgrad_queue set, a linear layer's backward computes only its input
// gradient and pushes a job that owns what the weight-gradient GEMM needs (its input and
// output gradient); the output layer and the embedding do the same. The schedule runs the
// jobs with flush(), in the order they were pushed, which is the order the undeferred
// backward computes them in: gradients come out bit-identical. Data-parallel "gradients
// ready" notifications are queued behind their module's jobs (ModuleScope).
#pragma once

#include <cstddef>
#include <deque>
#include <functional>

namespace mindspeed {

struct ForwardContext;

class WeightGradQueue {
 public:
  using Job = std::function<void(const ForwardContext& ctx)>;
  void push(Job job) { jobs_.push_back(std::move(job)); }
  /// Runs every queued job in order (the context supplies the backend, allocator and
  /// groups; its own wgrad_queue is ignored).
  void flush(const ForwardContext& ctx);
  size_t size() const { return jobs_.size(); }
  bool empty() const { return jobs_.empty(); }

 private:
  std::deque<Job> jobs_;
};

}  // namespace mindspeed
