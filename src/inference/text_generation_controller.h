// Port of megatron/core/inference/model_inference_wrappers/abstract_model_inference_wrapper.py
// (what a model offers generation) and text_generation_controller.py
// (generate_all_output_tokens_static_batch: prefill the prompt, then one token per step
// reusing the key/value cache, sample, stop at the end-of-document token or the length).
// Token ids only; tokenizing the prompt and detokenizing the result is the caller's
// (tools/generate_text.cpp). Under tensor parallelism every rank of the group runs the
// controller; each sampled token is broadcast from the group's rank 0 (Megatron broadcasts
// from the last pipeline stage), so all ranks run the same steps.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "inference/sampling.h"
#include "parallel/process_group.h"

namespace mindspeed {

class AbstractModelInferenceWrapper {
 public:
  virtual ~AbstractModelInferenceWrapper() = default;
  /// Columns of the logits: the padded vocabulary.
  virtual int64_t padded_vocab_size() const = 0;
  /// Longest sequence (prompt + generated tokens) the model takes.
  virtual int64_t max_sequence_length() const = 0;
  /// True: steps reuse the key/value cache; false: every step runs the whole sequence.
  virtual bool uses_kv_cache() const = 0;
  /// Starts new sequences of `batch` samples (empties the key/value cache).
  virtual Status prep_for_new_sequences(int64_t batch) = 0;
  /// Runs tokens [B, T] as positions [first_position, first_position + T) and writes the
  /// logits of those positions, all of them [B, T, Vp] or with last_only those of the last
  /// one [B, Vp], over the whole vocabulary on every rank. With the key/value cache
  /// first_position is the number of positions run so far; without it, tokens are the
  /// whole sequence (first_position 0) and nothing is kept.
  virtual Status run_one_forward_step(const int32_t* tokens /*[B, T]*/, int64_t B, int64_t T,
                                      int64_t first_position, bool last_only, std::vector<float>* logits) = 0;
  /// The ranks that generate together (the tensor-parallel group).
  virtual ProcessGroup& group() const = 0;
};

struct GenerationOptions {
  SamplingParams sampling;
  int64_t vocab_size = 0;   ///< the tokenizer's: ids >= vocab_size (padding) are never generated
  int32_t eod = -1;         ///< stop when this token is generated (-1: none)
  uint64_t stream = 0;      ///< random stream of this sequence (e.g. the prompt's index)
  bool keep_logits = false;  ///< record the logits each token was chosen from
};

struct GenerationResult {
  std::vector<int32_t> tokens;  ///< generated, without the prompt and without the EOD
  bool stopped_at_eod = false;
  /// Tokens the length limit allowed (--out-seq-length, or less near the model's maximum).
  int64_t max_new_tokens = 0;
  /// With keep_logits: per step, the logits [Vp] the token was chosen from.
  std::vector<std::vector<float>> step_logits;
};

/// Generates up to sampling.num_tokens_to_generate tokens after `prompt` (one sequence).
StatusOr<GenerationResult> generate_tokens(AbstractModelInferenceWrapper& model, std::span<const int32_t> prompt,
                                           const GenerationOptions& options);

}  // namespace mindspeed
