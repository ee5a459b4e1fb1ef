// WeightGradQueue (weight_grad_queue.h).
#include "module/weight_grad_queue.h"

#include "module/forward_context.h"

namespace mindspeed {

void WeightGradQueue::flush(const ForwardContext& ctx) {
  ForwardContext run = ctx;
  run.wgrad_queue = nullptr;  // a job computes its gradient now
  while (!jobs_.empty()) {
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    job(run);
  }
}

}  // namespace mindspeed
