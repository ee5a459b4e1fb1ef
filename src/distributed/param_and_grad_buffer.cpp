// ParamAndGradBuffer (param_and_grad_buffer.h).
#include "distributed/param_and_grad_buffer.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "core/check.h"

namespace mindspeed {
namespace {
int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// FSDP unit of a parameter: "decoder.layers.<n>" for a transformer layer's, else the module
// (embedding, decoder.final_layernorm, output_layer).
std::string module_of(const std::string& name) {
  const size_t dots = name.starts_with("decoder.layers.") ? 3 : name.starts_with("decoder.") ? 2 : 1;
  size_t at = 0;
  for (size_t d = 0; d < dots; ++d) {
    at = name.find('.', at);
    if (at == std::string::npos) return name;
    if (d + 1 < dots) ++at;
  }
  return name.substr(0, at);
}
}  // namespace

namespace {
// A tensor of zeros: on the device through the backend's kernels, else on the host.
Tensor zeros_in(const Backend* backend, Allocator& alloc, Shape shape, DType dtype, MemoryCategory category) {
  return backend != nullptr ? device_zeros(*backend, alloc, shape, dtype, category)
                            : Tensor::zeros(alloc, shape, dtype, category);
}
}  // namespace

BufferLayout lay_out_buffer(ParameterRegistry& registry, const BufferOptions& options) {
  BufferLayout layout;
  auto bucket_align = [&](bool expert) -> int64_t {
    if (!options.pad_for_distributed_optimizer) return 1;
    return std::lcm<int64_t>(expert ? options.expert_data_parallel_size : options.data_parallel_size, 128);
  };
  // Lay out in reverse declaration order.
  const auto& all = registry.params();
  int64_t offset = 0;
  Bucket current;
  auto close_bucket = [&]() {
    if (current.params.empty()) return;
    offset = round_up(offset, bucket_align(current.expert));
    current.numel = offset - current.offset;
    layout.buckets.push_back(std::move(current));
    current = Bucket{};
    current.offset = offset;
  };
  for (size_t i = all.size(); i-- > 0;) {
    Parameter* p = all[i].get();
    if (p->spec.shared_embedding) close_bucket();
    if (!current.params.empty() && current.expert != p->spec.expert_parallel) close_bucket();
    if (options.bucket_per_module && !current.params.empty() &&
        module_of(current.params.back()->spec.name) != module_of(p->spec.name)) {
      close_bucket();
    }
    current.expert = p->spec.expert_parallel;
    if (options.pad_for_distributed_optimizer) offset = round_up(offset, 64);
    p->buffer_offset = offset;
    offset += p->local_shape.numel();
    current.params.push_back(p);
    layout.order.push_back(p);
    if (p->spec.shared_embedding ||
        (options.bucket_size > 0 && offset - current.offset >= options.bucket_size)) {
      close_bucket();
    }
  }
  close_bucket();
  layout.numel = offset;
  return layout;
}

BufferOptions buffer_options_of(const Configs& c, int data_parallel_size,
                                int expert_data_parallel_size) {
  BufferOptions bopts;
  bopts.param_dtype = c.training.bf16   ? DType::kBFloat16
                      : c.training.fp16 ? DType::kFloat16
                                        : DType::kFloat32;
  bopts.pad_for_distributed_optimizer = c.parallel.use_distributed_optimizer;
  bopts.data_parallel_size = data_parallel_size;
  bopts.expert_data_parallel_size = expert_data_parallel_size;
  // FSDP units; the transient fp32 gradients of a 16-bit gradient buffer (--o2-gradient; --fp16
  // without --accumulate-allreduce-grads-in-fp32) are per module too.
  const bool half_grads = c.optimizer.o2_gradient || c.training.fp16_gradients();
  bopts.bucket_per_module = c.parallel.use_custom_fsdp || half_grads;
  bopts.shard_grads = c.parallel.shard_gradients();
  bopts.grad_dtype = c.optimizer.o2_gradient ? DType::kBFloat16
                     : half_grads            ? DType::kFloat16
                                             : DType::kFloat32;
  if (c.parallel.overlap_grad_reduce) {
    bopts.bucket_size =
        c.parallel.ddp_bucket_size > 0
            ? c.parallel.ddp_bucket_size
            : std::max<int64_t>(40000000, 1000000 * static_cast<int64_t>(data_parallel_size));
  } else if (c.parallel.ddp_bucket_size > 0) {
    bopts.bucket_size = c.parallel.ddp_bucket_size;
  }
  return bopts;
}

ParamAndGradBuffer::ParamAndGradBuffer(ParameterRegistry& registry, Allocator& alloc,
                                       const BufferOptions& options)
    : alloc_(alloc),
      backend_(options.backend),
      param_dtype_(options.param_dtype),
      grad_dtype_(options.grad_dtype) {
  MS_CHECK(!options.shard_grads || options.pad_for_distributed_optimizer,
           "sharded gradients need the distributed optimizer's bucket padding");
  MS_CHECK(
      options.grad_dtype == DType::kFloat32 || (is_half_precision(options.grad_dtype) &&
                                                options.bucket_per_module && !options.shard_grads),
      "16-bit gradients need a bucket per module (the transient fp32 units) and unsharded "
      "gradients");
  MS_CHECK(options.param_dtype == DType::kFloat32 || is_half_precision(options.param_dtype),
           "parameter dtype must be fp32, bf16 or fp16");
  BufferLayout layout = lay_out_buffer(registry, options);
  buckets_ = std::move(layout.buckets);
  order_ = std::move(layout.order);
  numel_ = layout.numel;
  params_ = zeros_in(options.backend, alloc, Shape{numel_}, options.param_dtype, MemoryCategory::kParameters);
  if (options.shard_grads) {
    int64_t shards = 0;
    for (const Bucket& b : buckets_) {
      const int dp = b.expert ? options.expert_data_parallel_size : options.data_parallel_size;
      shard_offsets_.push_back(shards);
      shards += b.numel / dp;
    }
    shard_offsets_.push_back(shards);  // the end
    grad_shards_ = zeros_in(options.backend, alloc, Shape{shards}, DType::kFloat32, MemoryCategory::kGradients);
    bucket_grads_.resize(buckets_.size());
  } else {
    grads_ = zeros_in(options.backend, alloc, Shape{numel_}, grad_dtype_, MemoryCategory::kGradients);
    if (is_half_precision(grad_dtype_)) bucket_grads_.resize(buckets_.size());
  }
  for (Parameter* p : order_) {
    p->data = TensorView{static_cast<char*>(params_.data()) + p->buffer_offset * dtype_size(options.param_dtype),
                         options.param_dtype, p->local_shape};
    // Sharded gradients: no storage until the unit's backward (allocate_bucket_grad).
    p->main_grad = resting_grad_view(*p);
  }
}

TensorView ParamAndGradBuffer::resting_grad_view(const Parameter& p) const {
  if (grads_.empty()) return TensorView{nullptr, DType::kFloat32, p.local_shape};
  return TensorView{static_cast<char*>(grads_.data()) + p.buffer_offset * dtype_size(grad_dtype_), grad_dtype_,
                    p.local_shape};
}

void ParamAndGradBuffer::allocate_bucket_grad(size_t b, const Backend& backend) {
  if (!bucket_grads_[b].empty()) return;
  const Bucket& bucket = buckets_[b];
  bucket_grads_[b] = Tensor(alloc_, Shape{bucket.numel}, DType::kFloat32, MemoryCategory::kGradients);
  backend.kernels.fill_zero(backend.context, bucket_grads_[b].f32(), bucket.numel);
  for (Parameter* p : bucket.params) {
    p->main_grad = TensorView{bucket_grads_[b].f32() + (p->buffer_offset - bucket.offset), DType::kFloat32, p->local_shape};
  }
}

void ParamAndGradBuffer::shard_params(const std::vector<int>& bucket_rank) {
  MS_CHECK(!shard_offsets_.empty() && param_shards_.empty(), "shard_params needs shard_grads, once");
  const int64_t width = dtype_size(param_dtype_);
  param_shards_ = Tensor(alloc_, Shape{shard_offsets_.back()}, param_dtype_, MemoryCategory::kParameters);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const int64_t shard = shard_offsets_[b + 1] - shard_offsets_[b];
    const void* from = static_cast<const char*>(params_.data()) +
                       (buckets_[b].offset + bucket_rank[b] * shard) * width;
    if (backend_ != nullptr) {
      backend_->kernels.copy_bytes(backend_->context, bucket_param_shard(b), from, shard * width);
    } else {
      std::memcpy(bucket_param_shard(b), from, static_cast<size_t>(shard * width));
    }
  }
  params_.reset();
  for (Parameter* p : order_) p->data.data = nullptr;
  bucket_params_.resize(buckets_.size());
}

void* ParamAndGradBuffer::allocate_bucket_params(size_t b) {
  const Bucket& bucket = buckets_[b];
  if (bucket_params_[b].empty()) {
    bucket_params_[b] = Tensor(alloc_, Shape{bucket.numel}, param_dtype_, MemoryCategory::kParameters);
    const int64_t width = dtype_size(param_dtype_);
    for (Parameter* p : bucket.params) {
      p->data.data = static_cast<char*>(bucket_params_[b].data()) + (p->buffer_offset - bucket.offset) * width;
    }
  }
  return bucket_params_[b].data();
}

void ParamAndGradBuffer::release_bucket_params(size_t b) {
  for (Parameter* p : buckets_[b].params) p->data.data = nullptr;
  bucket_params_[b].reset();
}

void ParamAndGradBuffer::release_bucket_grad(size_t b) {
  for (Parameter* p : buckets_[b].params) p->main_grad = resting_grad_view(*p);
  bucket_grads_[b].reset();
}

void ParamAndGradBuffer::zero_grad(const Backend& backend) {
  if (!grad_shards_.empty()) {
    backend.kernels.fill_zero(backend.context, grad_shards_.f32(), grad_shards_.numel());
    return;
  }
  if (is_half_precision(grad_dtype_)) {
    backend.kernels.zero_bytes(backend.context, grads_.data(), grads_.nbytes());  // bf16 / fp16 zero: all bits 0
    return;
  }
  backend.kernels.fill_zero(backend.context, grads_.f32(), numel_);
}

void initialize_parameters(const ParameterRegistry& registry, uint64_t seed, int tp_rank,
                           int tp_size) {
  for (const auto& p : registry.params()) {
    MS_CHECK(
        p->spec.tp_x == 0, p->spec.name,
        ": a 2D tensor-parallel parameter needs the ParallelState form of initialize_parameters");
    std::vector<float> full(static_cast<size_t>(p->spec.global_shape.numel()));
    init_full_tensor(full.data(), p->spec, seed);
    set_parameter_from_full(*p, full.data(), tp_rank, tp_size);
  }
}

void initialize_parameters(const ParameterRegistry& registry, uint64_t seed, const ParallelState& ps,
                           const Backend* backend) {
  for (const auto& p : registry.params()) {
    std::vector<float> full(static_cast<size_t>(p->spec.global_shape.numel()));
    init_full_tensor(full.data(), p->spec, seed);
    const ShardCoords at = shard_coords(p->spec, ps);
    set_parameter_from_full(*p, full.data(), at.rank, at.count, backend);
  }
}

}  // namespace mindspeed
