// Port of megatron/core/models/common/embeddings/language_model_embedding.py:
// word embeddings (VocabParallelEmbedding: rows [vocab_start, vocab_start + Vp/tp) on each
// tensor-parallel rank, lookups off the shard give 0 and the partial rows are all-reduced),
// learned absolute position embeddings when configured, then embedding dropout
// (= --hidden-dropout). Output [s, b, h] flattened to [N, h], or this rank's [s/tp, b, h]
// with sequence parallelism (the partial lookups are reduce-scattered along s).
#pragma once

#include "config/model_config.h"
#include "core/tensor.h"
#include "module/forward_context.h"
#include "module/parameter.h"

namespace mindspeed {

class LanguageModelEmbedding {
 public:
  struct Saved {
    Tensor ids;        ///< [N] token ids in [s, b] order
    Tensor positions;  ///< [N] position ids in [s, b] order
    Tensor output;     ///< [n, h], n = N or N/tp (sequence parallelism)
  };

  /// With sequence parallelism each rank adds the position embeddings of its own rows, so
  /// their gradient is marked sequence_parallel (summed over tp like the norm weights).
  LanguageModelEmbedding(ParameterRegistry& registry, const ModelConfig& config, int tp_size,
                         int tp_rank, bool sequence_parallel);
  void forward(const ForwardContext& ctx, const MicroBatch& mb, Saved& saved) const;
  /// dout [n, h]: gradient of the output (overwritten as scratch).
  void backward(const ForwardContext& ctx, const MicroBatch& mb, const Saved& saved,
                float* dout) const;
  Parameter* word_embeddings() const { return word_; }
  int64_t vocab_start() const { return vocab_start_; }
  int64_t vocab_local() const { return vocab_local_; }

 private:
  DropoutSpec dropout(const ForwardContext& ctx, const MicroBatch& mb) const;
  int64_t hidden_, vocab_local_, vocab_start_, max_positions_;
  float dropout_p_;
  Parameter* word_;
  Parameter* position_ = nullptr;
};

}  // namespace mindspeed
