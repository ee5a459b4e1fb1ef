// TextGenerationController (text_generation_controller.h).
#include "inference/text_generation_controller.h"

#include <algorithm>

namespace mindspeed {

StatusOr<GenerationResult> generate_tokens(AbstractModelInferenceWrapper& model, std::span<const int32_t> prompt,
                                           const GenerationOptions& options) {
  const int64_t P = static_cast<int64_t>(prompt.size());
  const int64_t Vp = model.padded_vocab_size();
  if (P == 0) return invalid_argument("empty prompt: a prompt needs at least one token");
  if (P >= model.max_sequence_length()) {
    return invalid_argument("the prompt has ", P, " tokens; the model takes ", model.max_sequence_length(),
                            " positions (--max-position-embeddings), leaving no room to generate");
  }
  if (options.vocab_size < 1 || options.vocab_size > Vp) {
    return invalid_argument("the tokenizer's vocabulary (", options.vocab_size, " tokens) does not fit the model's ",
                            Vp, " embedding rows: use the tokenizer the model was trained with");
  }
  for (int32_t id : prompt) {
    if (id < 0 || id >= options.vocab_size) {
      return invalid_argument("prompt token ", id, " is outside the vocabulary [0, ", options.vocab_size, ")");
    }
  }
  MS_RETURN_IF_ERROR(validate_sampling_params(options.sampling, options.vocab_size));
  GenerationResult result;
  result.max_new_tokens = std::min(options.sampling.num_tokens_to_generate, model.max_sequence_length() - P);
  MS_RETURN_IF_ERROR(model.prep_for_new_sequences(1));
  const RngStream rng{options.sampling.seed, stream_id(0x67656e /*"gen"*/, options.stream)};
  std::vector<int32_t> sequence(prompt.begin(), prompt.end());
  std::vector<float> logits;
  std::vector<double> scratch;
  for (int64_t step = 0; step < result.max_new_tokens; ++step) {
    const int64_t S = static_cast<int64_t>(sequence.size());
    if (!model.uses_kv_cache()) {
      MS_RETURN_IF_ERROR(model.run_one_forward_step(sequence.data(), 1, S, 0, true, &logits));
    } else if (step == 0) {  // prefill: the whole prompt at once
      MS_RETURN_IF_ERROR(model.run_one_forward_step(sequence.data(), 1, S, 0, true, &logits));
    } else {  // decode: the last token, its keys and values joining the cache
      MS_RETURN_IF_ERROR(model.run_one_forward_step(&sequence[S - 1], 1, 1, S - 1, true, &logits));
    }
    const double draw = uniform_double(rng, static_cast<uint64_t>(step));
    int32_t token = sample_from_logits(logits.data(), options.vocab_size, options.sampling, draw, &scratch);
    // Every rank continues with rank 0's token (they agree already; this makes it certain).
    model.group().broadcast_async(&token, sizeof token, 0)->wait();
    if (options.keep_logits) result.step_logits.emplace_back(logits.begin(), logits.begin() + Vp);
    if (token == options.eod) {
      result.stopped_at_eod = true;
      break;
    }
    sequence.push_back(token);
    result.tokens.push_back(token);
  }
  return result;
}

}  // namespace mindspeed
