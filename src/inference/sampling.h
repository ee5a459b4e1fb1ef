// Port of megatron/core/inference/sampling_params.py (SamplingParams) and the sampling of
// text_generation_controller.py sample_from_logits for one row of logits:
//  * top_k == 1: greedy (argmax), Megatron's default;
//  * otherwise logits / temperature, then top-k filtering (values below the k-th largest
//    dropped; ties kept), then top-p (nucleus) filtering with Megatron's shifted cumulative
//    rule (a token is dropped when the probability mass of the tokens sorted before it already
//    exceeds top_p; the most likely token always stays), then one draw from the softmax of
//    what remains. Megatron refuses top-k > 1 together with top-p; here they compose in that
//    order (Hugging Face's warper order), which is Megatron's behaviour whenever only one is set.
// Only the tokenizer's real ids [0, vocab_size) are candidates: the padded vocabulary's extra
// columns are never produced (Megatron clamps the sample instead).
// The draw is reproducible: a uniform double from a Philox stream (core/rng.h) at an index the
// caller chooses (the step), so the same seed gives the same text at any thread count or
// tensor-parallel size.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "core/status.h"

namespace mindspeed {

struct SamplingParams {
  float temperature = 1.0f;             ///< --temperature, > 0 (sampling only)
  int64_t top_k = 1;                    ///< --top-k: 1 = greedy (default), 0 = no top-k filter
  float top_p = 0.0f;                   ///< --top-p in [0, 1]; 0 = no top-p filter
  uint64_t seed = 1234;                 ///< --seed
  int64_t num_tokens_to_generate = 30;  ///< --out-seq-length: new tokens at most
};

/// The rules between the flags, each error naming the flag, the value and the fix.
Status validate_sampling_params(const SamplingParams& params, int64_t vocab_size);

/// One token from logits [>= vocab_size] (only the first vocab_size are candidates).
/// `draw` is the uniform [0, 1) draw used when sampling (ignored when greedy); `scratch` is
/// reused between calls.
int32_t sample_from_logits(const float* logits, int64_t vocab_size, const SamplingParams& params, double draw,
                           std::vector<double>* scratch);

/// A uniform double in [0, 1) with 53 random bits: element `index` of `stream`.
double uniform_double(const RngStream& stream, uint64_t index);

}  // namespace mindspeed
