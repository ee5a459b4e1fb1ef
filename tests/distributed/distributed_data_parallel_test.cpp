// DistributedDataParallel on one process: a parameter that is not in its gradient buffer is
// a broken invariant that ends the job with a message naming the parameter (MS_CHECK), not
// a std::out_of_range escaping from the library.
#include "distributed/distributed_data_parallel.h"

#include <gtest/gtest.h>

#include "module/parameter.h"

namespace mindspeed {
namespace {

TEST(DistributedDataParallelDeathTest, ForeignParameterIsNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::unique_ptr<ParallelState> ps = ParallelState::single_process();
  Allocator alloc;
  ParameterRegistry registry;
  registry.add({.name = "decoder.final_layernorm.weight", .global_shape = Shape{8}}, 1);
  ParamAndGradBuffer buffer(registry, alloc, BufferOptions{});
  const Backend backend = select_backend(KernelOptions{});
  DistributedDataParallel ddp(buffer, *ps, DdpConfig{.overlap_grad_reduce = true}, backend);
  ParameterRegistry other;
  Parameter* foreign = other.add({.name = "not.in.the.buffer.weight", .global_shape = Shape{4}}, 1);
  // Parameters of the buffer are found.
  ddp.before_forward({registry.params()[0].get()});
  // Before: bucket_of_.at(p) threw std::out_of_range, which a death test reports as a failure.
  EXPECT_DEATH(ddp.before_forward({foreign}), "not.in.the.buffer.weight is not in the gradient buffer");
  ddp.enable_grad_sync(true);
  EXPECT_DEATH(ddp.grads_ready({foreign}), "not.in.the.buffer.weight is not in the gradient buffer");
}

}  // namespace
}  // namespace mindspeed
