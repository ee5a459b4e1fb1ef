// Port of megatron/core/distributed/param_and_grad_buffer.py: every parameter and its fp32
// gradient live in two contiguous buffers (llm.c's single block, grown up), laid out in
// reverse declaration order (about the order backward produces gradients) and cut into
// buckets for the data-parallel reduction. Expert parameters (MoE) get buckets of their own,
// reduced over the expert-data-parallel group. For the distributed optimizer each parameter
// starts at a multiple of 64 elements and each bucket ends at a multiple of lcm(dp, 128), so
// every bucket splits evenly into dp shards. The tied word embedding gets its own bucket.
// FSDP (Megatron's custom FSDP, --use-custom-fsdp): one bucket per module (each transformer
// layer, the embedding, the final norm, the output layer: the FSDP units), and with
// optim_grads the gradients exist in full only while a unit's backward produces them (a
// transient bucket gradient, allocate_bucket_grad / release_bucket_grad); between
// micro-batches and for the optimizer each rank keeps only its shard of every bucket, laid out
// as the distributed optimizer's shard-local arrays (shard_grads()). With optim_grads_params
// (ZeRO-3) the parameters too: after shard_params() each rank keeps its shard of every bucket
// (param_shards(), the same layout), and a unit's full parameters exist only while a module
// uses them (gather_bucket_params / release_bucket_params; the DDP does the all-gather).
// 16-bit gradients (grad_dtype bf16 with MindSpeed-LLM's --o2-gradient, fp16 with --fp16
// unless --accumulate-allreduce-grads-in-fp32): the gradient buffer is 16-bit; a unit's
// backward writes a transient fp32 bucket gradient (the same allocate_bucket_grad), which the
// DDP adds into the 16-bit buffer when the unit is done. Between units each parameter's
// main_grad views its 16-bit gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "config/configs.h"
#include "core/tensor.h"
#include "kernels/backend.h"
#include "module/parameter.h"

namespace mindspeed {

struct BufferOptions {
  DType param_dtype = DType::kFloat32;  ///< kBFloat16 with --bf16, kFloat16 with --fp16
  bool pad_for_distributed_optimizer = false;
  int data_parallel_size = 1;
  int expert_data_parallel_size = 1;  ///< the expert buckets' group (distributed optimizer padding)
  int64_t bucket_size = 0;  ///< elements; 0 = one bucket
  bool bucket_per_module = false;  ///< FSDP: a bucket per module (transformer layer, embedding, ...)
  bool shard_grads = false;        ///< FSDP optim_grads: gradients kept as this rank's shards only
  /// kBFloat16 with --o2-gradient, kFloat16 with --fp16 (without
  /// --accumulate-allreduce-grads-in-fp32); both need bucket_per_module.
  DType grad_dtype = DType::kFloat32;
  /// Where the buffers live: the backend's memory (its kernels zero them); null: host memory.
  const Backend* backend = nullptr;
};

struct Bucket {
  int64_t offset = 0;  ///< first element in the buffers
  int64_t numel = 0;   ///< elements, padding included
  std::vector<Parameter*> params;
  bool expert = false;  ///< expert parameters only: reduced over expert-data-parallel
};

/// Where each parameter goes in the buffers: buckets in reverse declaration order, each closed
/// at a shared embedding, an expert/dense change, a module change (bucket_per_module) or the
/// bucket size, and padded for the distributed optimizer. Sets every Parameter::buffer_offset.
/// The constructor below lays its buffers out with it; the auto-settings memory model
/// (auto_settings/memory_model.h) counts a layout's bytes with it, allocating nothing.
struct BufferLayout {
  std::vector<Bucket> buckets;
  std::vector<Parameter*> order;  ///< parameters in buffer order
  int64_t numel = 0;              ///< elements, padding included
};
BufferLayout lay_out_buffer(ParameterRegistry& registry, const BufferOptions& options);
/// The buffer options of a run (pretrain; the auto-settings memory model): dtypes, padding,
/// buckets and sharding from its configs, over `data_parallel_size` (the dp x cp group) and
/// `expert_data_parallel_size` ranks. The backend is left null (host memory).
BufferOptions buffer_options_of(const Configs& c, int data_parallel_size,
                                int expert_data_parallel_size);

class ParamAndGradBuffer {
 public:
  ParamAndGradBuffer(ParameterRegistry& registry, Allocator& alloc, const BufferOptions& options);

  int64_t numel() const { return numel_; }
  DType param_dtype() const { return param_dtype_; }
  /// The whole parameter buffer (null after shard_params: there is none).
  void* param_data() const { return params_.empty() ? nullptr : params_.data(); }
  DType grad_dtype() const { return grad_dtype_; }
  /// The whole fp32 gradient buffer (null with shard_grads, and with 16-bit gradients).
  float* grad_data() const { return grads_.empty() || grad_dtype_ != DType::kFloat32 ? nullptr : grads_.f32(); }
  /// The whole 16-bit gradient buffer, of grad_dtype() (--o2-gradient: bf16; --fp16 without
  /// --accumulate-allreduce-grads-in-fp32: fp16); else null.
  void* grad_data_half() const { return grads_.empty() || !is_half_precision(grad_dtype_) ? nullptr : grads_.data(); }
  /// shard_grads: this rank's gradient shards of every bucket, concatenated in bucket order
  /// ([sum of bucket numel / its dp]; the distributed optimizer's shard layout); else null.
  float* shard_grads() const { return grad_shards_.empty() ? nullptr : grad_shards_.f32(); }
  int64_t shard_grads_numel() const { return grad_shards_.numel(); }
  /// shard_grads: bucket b's shard, [numel / dp].
  float* bucket_grad_shard(size_t b) const { return grad_shards_.f32() + shard_offsets_[b]; }
  /// shard_grads or 16-bit gradients: a zeroed fp32 full gradient for bucket b, its parameters'
  /// main_grad views pointing into it (no-op when it exists); and back (views null, or to the
  /// bf16 gradients).
  void allocate_bucket_grad(size_t b, const Backend& backend);
  void release_bucket_grad(size_t b);
  /// ZeRO-3: keep only this rank's shard of every bucket's parameters (bucket_rank[b]: the
  /// rank in the bucket's data-parallel group); the whole parameter buffer is freed and the
  /// parameters' data views are null until gathered.
  void shard_params(const std::vector<int>& bucket_rank);
  /// shard_params: the shards, concatenated in bucket order ([sum of numel / dp], param dtype).
  void* param_shards() const { return param_shards_.empty() ? nullptr : param_shards_.data(); }
  void* bucket_param_shard(size_t b) const {
    return static_cast<char*>(param_shards_.data()) + shard_offsets_[b] * dtype_size(param_dtype());
  }
  /// shard_params: storage for bucket b's full parameters, the views pointing into it (the
  /// caller all-gathers into it); and back to nothing.
  void* allocate_bucket_params(size_t b);
  void release_bucket_params(size_t b);
  bool bucket_params_resident(size_t b) const { return !bucket_params_[b].empty(); }
  /// shard_grads or 16-bit gradients: bucket b's fp32 full gradient while allocated (else null).
  float* bucket_grad(size_t b) const { return bucket_grads_[b].empty() ? nullptr : bucket_grads_[b].f32(); }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  /// Parameters in buffer order.
  const std::vector<Parameter*>& params() const { return order_; }
  void zero_grad(const Backend& backend);

 private:
  /// Parameter p's main_grad when no transient gradient exists: its 16-bit gradient, or nothing.
  TensorView resting_grad_view(const Parameter& p) const;

 private:
  int64_t numel_ = 0;
  Allocator& alloc_;
  const Backend* backend_ = nullptr;  ///< BufferOptions::backend
  Tensor params_;
  Tensor grads_;
  Tensor grad_shards_;                 ///< shard_grads
  std::vector<int64_t> shard_offsets_;  ///< shard_grads: bucket -> its shard in grad_shards_
  std::vector<Tensor> bucket_grads_;    ///< shard_grads, 16-bit grads: transient fp32 bucket gradients
  DType param_dtype_ = DType::kFloat32;
  DType grad_dtype_ = DType::kFloat32;
  Tensor param_shards_;                 ///< shard_params
  std::vector<Tensor> bucket_params_;   ///< shard_params: transient full bucket parameters
  std::vector<Bucket> buckets_;
  std::vector<Parameter*> order_;
};

/// Fills every parameter with its shard of the seeded master weight (init_full_tensor).
void initialize_parameters(const ParameterRegistry& registry, uint64_t seed, int tp_rank,
                           int tp_size);
/// The same, each parameter sliced by its own split group (expert-tp for experts).
void initialize_parameters(const ParameterRegistry& registry, uint64_t seed, const ParallelState& ps,
                           const Backend* backend = nullptr);

}  // namespace mindspeed
