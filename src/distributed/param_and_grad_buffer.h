// Port of megatron/core/distributed/param_and_grad_buffer.py: every parameter and its fp32
// gradient live in two contiguous buffers (llm.c's single block, grown up), laid out in
// reverse declaration order (about the order backward produces gradients) and cut into
// buckets for the data-parallel reduction. Expert parameters (MoE) get buckets of their own,
// reduced over the expert-data-parallel group. For the distributed optimizer each parameter
// starts at a multiple of 64 elements and each bucket ends at a multiple of lcm(dp, 128), so
// every bucket splits evenly into dp shards. The tied word embedding gets its own bucket.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/backend.h"
#include "module/parameter.h"

namespace mindspeed {

struct BufferOptions {
  DType param_dtype = DType::kFloat32;  ///< kBFloat16 with --bf16
  bool pad_for_distributed_optimizer = false;
  int data_parallel_size = 1;
  int expert_data_parallel_size = 1;  ///< the expert buckets' group (distributed optimizer padding)
  int64_t bucket_size = 0;  ///< elements; 0 = one bucket
};

struct Bucket {
  int64_t offset = 0;  ///< first element in the buffers
  int64_t numel = 0;   ///< elements, padding included
  std::vector<Parameter*> params;
  bool expert = false;  ///< expert parameters only: reduced over expert-data-parallel
};

class ParamAndGradBuffer {
 public:
  ParamAndGradBuffer(ParameterRegistry& registry, Allocator& alloc, const BufferOptions& options);

  int64_t numel() const { return numel_; }
  DType param_dtype() const { return params_.dtype(); }
  void* param_data() const { return params_.data(); }
  float* grad_data() const { return grads_.f32(); }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  /// Parameters in buffer order.
  const std::vector<Parameter*>& params() const { return order_; }
  void zero_grad(const Backend& backend);

 private:
  int64_t numel_ = 0;
  Tensor params_;
  Tensor grads_;
  std::vector<Bucket> buckets_;
  std::vector<Parameter*> order_;
};

/// Fills every parameter with its shard of the seeded master weight (init_full_tensor).
void initialize_parameters(const ParameterRegistry& registry, uint64_t seed, int tp_rank,
                           int tp_size);
/// The same, each parameter sliced by its own split group (expert-tp for experts).
void initialize_parameters(const ParameterRegistry& registry, uint64_t seed, const ParallelState& ps);

}  // namespace mindspeed
