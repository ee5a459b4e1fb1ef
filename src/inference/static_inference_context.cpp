// StaticInferenceContext (static_inference_context.h).
#include "inference/static_inference_context.h"

#include "core/check.h"

namespace mindspeed {

StaticInferenceContext::StaticInferenceContext(const Backend& backend, Allocator& alloc,
                                               int64_t max_batch_size, int64_t max_sequence_length,
                                               int64_t num_layers, int64_t kv_heads,
                                               int64_t head_dim)
    : max_batch_size_(max_batch_size),
      max_sequence_length_(max_sequence_length),
      kv_heads_(kv_heads),
      head_dim_(head_dim) {
  MS_CHECK(max_batch_size > 0 && max_sequence_length > 0 && num_layers >= 0 && kv_heads > 0 && head_dim > 0,
           "bad key/value cache dimensions");
  const Shape shape{max_batch_size, kv_heads, max_sequence_length, head_dim};
  for (int64_t l = 0; l < num_layers; ++l) {
    keys_.push_back(
        device_zeros(backend, alloc, shape, DType::kFloat32, MemoryCategory::kActivations));
    values_.push_back(
        device_zeros(backend, alloc, shape, DType::kFloat32, MemoryCategory::kActivations));
  }
}

Status StaticInferenceContext::reset(int64_t batch_size) {
  if (batch_size < 1 || batch_size > max_batch_size_) {
    return invalid_argument("a batch of ", batch_size, " sequences does not fit the key/value cache (at most ",
                            max_batch_size_, "); build the inference context with a larger max batch size");
  }
  batch_size_ = batch_size;
  sequence_len_offset_ = 0;
  return ok_status();
}

Status StaticInferenceContext::check_step(int64_t batch, int64_t tokens) const {
  if (batch != batch_size_) {
    return invalid_argument("a step of ", batch, " sequences on a key/value cache reset for ", batch_size_,
                            "; call reset() first");
  }
  if (tokens < 1 || sequence_len_offset_ + tokens > max_sequence_length_) {
    return invalid_argument("positions [", sequence_len_offset_, ", ", sequence_len_offset_ + tokens,
                        ") exceed the key/value cache of ", max_sequence_length_,
                        " positions (--max-position-embeddings or the inference maximum sequence length)");
  }
  return ok_status();
}

float* StaticInferenceContext::key_cache(int64_t layer) const {
  MS_CHECK(layer >= 0 && layer < static_cast<int64_t>(keys_.size()), "no key cache for layer ", layer);
  return keys_[static_cast<size_t>(layer)].f32();
}

float* StaticInferenceContext::value_cache(int64_t layer) const {
  MS_CHECK(layer >= 0 && layer < static_cast<int64_t>(values_.size()), "no value cache for layer ", layer);
  return values_[static_cast<size_t>(layer)].f32();
}

}  // namespace mindspeed
