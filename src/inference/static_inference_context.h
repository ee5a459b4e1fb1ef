// Port of megatron/core/inference/contexts/static_context.py StaticInferenceContext: the
// key/value cache of generation. For every decoder layer it holds the keys and values (after
// rotary embedding) of all positions run so far, [B, NKV/tp, S, D] each (S =
// max_sequence_length), and sequence_len_offset, the number of positions already in the
// cache: the next forward step's tokens are positions [offset, offset + T). The attention of
// a layer appends its new keys and values at the offset and attends over [0, offset + T)
// (transformer/attention.cpp, kernel kv_cache_attention_forward); the caller advances the
// offset once the whole model has run the step. Memory is allocated once, up front, in the
// backend's memory (a GPU's, where its kernels read it).
#pragma once

#include <cstdint>
#include <vector>

#include "core/allocator.h"
#include "core/status.h"
#include "core/tensor.h"
#include "kernels/backend.h"

namespace mindspeed {

class StaticInferenceContext {
 public:
  /// num_layers: the model's decoder layers (global indices [0, num_layers)); kv_heads: the
  /// key/value heads (query groups) on this tensor-parallel rank; head_dim: D.
  StaticInferenceContext(const Backend& backend, Allocator& alloc, int64_t max_batch_size,
                         int64_t max_sequence_length, int64_t num_layers, int64_t kv_heads,
                         int64_t head_dim);

  int64_t max_batch_size() const { return max_batch_size_; }
  int64_t max_sequence_length() const { return max_sequence_length_; }
  int64_t kv_heads() const { return kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  /// Positions already in the cache (Megatron's sequence_len_offset).
  int64_t sequence_len_offset() const { return sequence_len_offset_; }
  /// Samples of the current sequences (set by reset()).
  int64_t batch_size() const { return batch_size_; }

  /// Starts new sequences of `batch_size` samples: the cache is empty again.
  Status reset(int64_t batch_size);
  /// Checks that a step of `tokens` new positions fits; a Status naming the limit otherwise.
  Status check_step(int64_t batch, int64_t tokens) const;
  /// After every layer has run a step of `tokens` positions.
  void increment_sequence_len_offset(int64_t tokens) { sequence_len_offset_ += tokens; }

  /// The cache of global layer `layer`: [max_batch_size, kv_heads, S, D] (samples beyond
  /// batch_size() unused).
  float* key_cache(int64_t layer) const;
  float* value_cache(int64_t layer) const;

 private:
  int64_t max_batch_size_, max_sequence_length_, kv_heads_, head_dim_;
  int64_t batch_size_ = 0, sequence_len_offset_ = 0;
  std::vector<Tensor> keys_, values_;  ///< per layer
};

}  // namespace mindspeed
