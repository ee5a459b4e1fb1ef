// Port of megatron/core/inference/model_inference_wrappers/gpt/gpt_inference_wrapper.py
// GPTInferenceWrapper: a GPTModel (whole model on one pipeline stage, any tensor-parallel
// size) behind the controller's AbstractModelInferenceWrapper. Each step builds the
// micro-batch of the new tokens at their absolute positions (rotary tables or learned
// position embeddings see the right positions), runs the model with the key/value cache
// (StaticInferenceContext of max_position_embeddings positions) or, without it, the whole
// sequence through the training forward, and all-gathers the vocab-parallel logits so every
// tensor-parallel rank holds the whole row (Megatron's parallel_output=False). On a device the
// step's tokens are uploaded and only the gathered logits come back to the host.
#pragma once

#include <memory>
#include <vector>

#include "inference/static_inference_context.h"
#include "inference/text_generation_controller.h"
#include "models/gpt/gpt_model.h"

namespace mindspeed {

class GPTInferenceWrapper final : public AbstractModelInferenceWrapper {
 public:
  /// ctx: backend, allocator and parallel state (training is turned off here). The model
  /// must be built without sequence parallelism.
  GPTInferenceWrapper(const GPTModel& model, const ForwardContext& ctx, bool use_kv_cache,
                      int64_t max_batch_size = 1);

  int64_t padded_vocab_size() const override { return model_.config().padded_vocab_size; }
  int64_t max_sequence_length() const override { return model_.config().max_position_embeddings; }
  bool uses_kv_cache() const override { return cache_ != nullptr; }
  Status prep_for_new_sequences(int64_t batch) override;
  Status run_one_forward_step(const int32_t* tokens, int64_t B, int64_t T, int64_t first_position, bool last_only,
                              std::vector<float>* logits) override;
  ProcessGroup& group() const override { return ctx_.ps->tp(); }

  /// The key/value cache (null without it).
  const StaticInferenceContext* inference_context() const { return cache_.get(); }

 private:
  const GPTModel& model_;
  ForwardContext ctx_;
  std::unique_ptr<StaticInferenceContext> cache_;
};

}  // namespace mindspeed
