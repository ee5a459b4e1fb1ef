// Generation on the PyTorch golden fixtures (tests/golden/: GPT-2-style with learned
// positions, LLaMA-style with GQA and rotary, Qwen2-style with q/k/v biases, head size 12 and
// Llama 3.1 rope scaling), loaded through the Hugging Face path:
//  * greedy tokens with the key/value cache equal those recomputed without it (the whole
//    sequence through the training forward every step), and every step's logits agree
//    within 1e-5, with the reference and the fast kernels;
//  * the inference path's logits equal PyTorch's: the prefill of each golden sample, and a
//    prefill of part of it followed by one-token decode steps over the rest;
//  * sampling is reproducible from the seed, differs between seeds, and its limits (top-k 1,
//    a vanishing top-p, a tiny temperature) are greedy.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "checkpointing/safetensors.h"
#include "distributed/param_and_grad_buffer.h"
#include "inference/text_generation_controller.h"
#include "models/gpt/gpt_inference_wrapper.h"
#include "models/gpt/gpt_model.h"
#include "models/gpt/hf_checkpoint.h"
#include "test_util.h"

namespace mindspeed {
namespace {

constexpr double kTolerance = 1e-5;
using testing::normwise_error;

std::string fixture_dir(const std::string& name) { return std::string(MS_SOURCE_DIR) + "/tests/golden/" + name; }

// A fixture's model, loaded whole on one process.
struct Fixture {
  ModelConfig config;
  Backend backend;
  Allocator alloc;
  std::unique_ptr<ParallelState> ps = ParallelState::single_process();
  ParameterRegistry registry;
  std::unique_ptr<GPTModel> model;
  std::unique_ptr<ParamAndGradBuffer> buffer;

  Fixture(const std::string& name, bool fast) {
    auto info = read_hf_config(fixture_dir(name));
    MS_CHECK_OK(info.status());
    config = info->config;
    config.padded_vocab_size = padded_vocab(config.vocab_size, 128, 1);
    config.attention_dropout = config.hidden_dropout = 0.0f;
    backend = select_backend(KernelOptions{.fast = fast});
    model = std::make_unique<GPTModel>(config, *ps, registry);
    buffer = std::make_unique<ParamAndGradBuffer>(registry, alloc, BufferOptions{});
    MS_CHECK_OK(load_hf_checkpoint(fixture_dir(name), *model, *ps));
  }
  ForwardContext context() const {
    ForwardContext ctx;
    ctx.backend = &backend;
    ctx.alloc = const_cast<Allocator*>(&alloc);
    ctx.ps = ps.get();
    ctx.training = false;
    return ctx;
  }
};

std::vector<int32_t> golden_tokens(const std::string& name) {
  auto expected = SafetensorsFile::open(fixture_dir(name) + "/expected.safetensors");
  MS_CHECK_OK(expected.status());
  auto tokens = expected->read_i32("tokens");
  MS_CHECK_OK(tokens.status());
  return *tokens;
}

class KvCache : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(KvCache, GreedyTokensAndStepLogitsEqualTheRecomputedSequence) {
  const auto& [name, fast] = GetParam();
  Fixture f(name, fast);
  const std::vector<int32_t> all = golden_tokens(name);
  const std::vector<int32_t> prompt(all.begin(), all.begin() + 5);
  GenerationOptions g;
  g.sampling.num_tokens_to_generate = 24;  // 5 + 24 < 32 positions
  g.vocab_size = f.config.vocab_size;
  g.keep_logits = true;
  GPTInferenceWrapper cached(*f.model, f.context(), true);
  GPTInferenceWrapper recomputed(*f.model, f.context(), false);
  auto with = generate_tokens(cached, prompt, g);
  auto without = generate_tokens(recomputed, prompt, g);
  ASSERT_TRUE(with.ok()) << with.status().to_string();
  ASSERT_TRUE(without.ok()) << without.status().to_string();
  ASSERT_EQ(with->tokens.size(), 24u);
  EXPECT_EQ(with->tokens, without->tokens);
  ASSERT_EQ(with->step_logits.size(), without->step_logits.size());
  for (size_t s = 0; s < with->step_logits.size(); ++s) {
    EXPECT_LE(normwise_error(with->step_logits[s], without->step_logits[s]), kTolerance) << "step " << s;
  }
  // The cache holds the prompt and every generated token but the last (never fed back).
  EXPECT_EQ(cached.inference_context()->sequence_len_offset(), 5 + 24 - 1);
  // A degenerate greedy run (one token repeated) would prove little.
  std::vector<int32_t> distinct(with->tokens);
  std::sort(distinct.begin(), distinct.end());
  EXPECT_GE(std::unique(distinct.begin(), distinct.end()) - distinct.begin(), 3);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KvCache,
                         ::testing::Combine(::testing::Values("gpt2_tiny", "llama_tiny", "qwen2_scaled"),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param) + (std::get<1>(info.param) ? "_fast" : "_reference");
                         });

class GoldenInference : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenInference, PrefillAndDecodeLogitsMatchPyTorch) {
  Fixture f(GetParam(), true);
  auto expected = SafetensorsFile::open(fixture_dir(GetParam()) + "/expected.safetensors");
  ASSERT_TRUE(expected.ok());
  const auto& shape = expected->find("tokens")->shape;
  const int64_t B = shape[0], T = shape[1], Vp = f.config.padded_vocab_size;
  const std::vector<int32_t> tokens = *expected->read_i32("tokens");
  const std::vector<float> want = *expected->read_f32("logits");  // [B, T, Vp]
  ASSERT_EQ(static_cast<int64_t>(want.size()), B * T * Vp);
  GPTInferenceWrapper wrapper(*f.model, f.context(), true);
  for (int64_t b = 0; b < B; ++b) {
    const int32_t* sample = tokens.data() + b * T;
    const std::vector<float> want_b(want.begin() + b * T * Vp, want.begin() + (b + 1) * T * Vp);
    // The whole sample as one prefill.
    ASSERT_TRUE(wrapper.prep_for_new_sequences(1).ok());
    std::vector<float> logits;
    ASSERT_TRUE(wrapper.run_one_forward_step(sample, 1, T, 0, false, &logits).ok());
    EXPECT_LE(normwise_error(logits, want_b), kTolerance) << "prefill of sample " << b;
    // A prefill of 6 positions, then one position per step from the cache.
    ASSERT_TRUE(wrapper.prep_for_new_sequences(1).ok());
    const int64_t P = 6;
    std::vector<float> rows;
    ASSERT_TRUE(wrapper.run_one_forward_step(sample, 1, P, 0, false, &rows).ok());
    for (int64_t t = P; t < T; ++t) {
      ASSERT_TRUE(wrapper.run_one_forward_step(sample + t, 1, 1, t, true, &logits).ok());
      rows.insert(rows.end(), logits.begin(), logits.end());
    }
    EXPECT_LE(normwise_error(rows, want_b), kTolerance) << "prefill + decode of sample " << b;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenInference, ::testing::Values("gpt2_tiny", "llama_tiny", "qwen2_scaled"));

// Steps that do not continue the cached sequence, or run past it, are refused.
TEST(GPTInferenceWrapper, RefusesStepsOffTheCache) {
  Fixture f("llama_tiny", true);
  GPTInferenceWrapper wrapper(*f.model, f.context(), true);
  ASSERT_TRUE(wrapper.prep_for_new_sequences(1).ok());
  std::vector<int32_t> ids(40, 1);
  std::vector<float> logits;
  EXPECT_FALSE(wrapper.run_one_forward_step(ids.data(), 1, 1, 3, true, &logits).ok());   // gap
  EXPECT_FALSE(wrapper.run_one_forward_step(ids.data(), 1, 33, 0, true, &logits).ok());  // > 32 positions
  const int32_t bad = 1000;
  EXPECT_FALSE(wrapper.run_one_forward_step(&bad, 1, 1, 0, true, &logits).ok());
  EXPECT_FALSE(wrapper.prep_for_new_sequences(2).ok());  // built for one sequence
}

class Sampling : public ::testing::TestWithParam<std::string> {};

TEST_P(Sampling, ReproducibleFromTheSeedAndGreedyAtItsLimits) {
  Fixture f(GetParam(), true);
  const std::vector<int32_t> all = golden_tokens(GetParam());
  const std::vector<int32_t> prompt(all.begin(), all.begin() + 4);
  GPTInferenceWrapper wrapper(*f.model, f.context(), true);
  auto run = [&](SamplingParams s) {
    GenerationOptions g;
    s.num_tokens_to_generate = 20;
    g.sampling = s;
    g.vocab_size = f.config.vocab_size;
    auto r = generate_tokens(wrapper, prompt, g);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? r->tokens : std::vector<int32_t>{};
  };
  const std::vector<int32_t> greedy = run(SamplingParams{});
  SamplingParams hot{.temperature = 1.5f, .top_k = 0, .top_p = 0.0f, .seed = 7};
  const std::vector<int32_t> a = run(hot), b = run(hot);
  EXPECT_EQ(a, b) << "same seed, same tokens";
  EXPECT_EQ(a.size(), 20u);
  hot.seed = 8;
  EXPECT_NE(run(hot), a) << "another seed, other tokens";
  EXPECT_NE(a, greedy) << "temperature 1.5 over 100 tokens should leave the greedy path";
  // The limits of the filters are greedy.
  EXPECT_EQ(run(SamplingParams{.top_k = 1, .seed = 99}), greedy);
  EXPECT_EQ(run(SamplingParams{.temperature = 1.0f, .top_k = 0, .top_p = 1e-6f, .seed = 3}), greedy);
  EXPECT_EQ(run(SamplingParams{.temperature = 1e-4f, .top_k = 0, .seed = 5}), greedy);
  EXPECT_EQ(run(SamplingParams{.temperature = 1.0f, .top_k = 2, .top_p = 1e-6f, .seed = 5}), greedy);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Sampling, ::testing::Values("gpt2_tiny", "llama_tiny"));

// Generation stops at the end-of-document token and never produces padding ids.
TEST(Generation, StopsAtEodAndStaysInTheVocabulary) {
  Fixture f("gpt2_tiny", true);
  const std::vector<int32_t> all = golden_tokens("gpt2_tiny");
  const std::vector<int32_t> prompt(all.begin(), all.begin() + 5);
  GPTInferenceWrapper wrapper(*f.model, f.context(), true);
  GenerationOptions g;
  g.sampling.num_tokens_to_generate = 20;
  g.vocab_size = f.config.vocab_size;
  auto free_run = generate_tokens(wrapper, prompt, g);
  ASSERT_TRUE(free_run.ok());
  ASSERT_GE(free_run->tokens.size(), 4u);
  g.eod = free_run->tokens[3];  // pretend the fourth generated token is the EOD
  auto stopped = generate_tokens(wrapper, prompt, g);
  ASSERT_TRUE(stopped.ok());
  EXPECT_TRUE(stopped->stopped_at_eod);
  const size_t first = std::find(free_run->tokens.begin(), free_run->tokens.end(), g.eod) - free_run->tokens.begin();
  EXPECT_EQ(stopped->tokens, std::vector<int32_t>(free_run->tokens.begin(), free_run->tokens.begin() + first));
  // A vocabulary of 10 real tokens: every generated id is below 10.
  g.eod = -1;
  g.vocab_size = 10;
  g.sampling = SamplingParams{.temperature = 2.0f, .top_k = 0, .num_tokens_to_generate = 20};
  std::vector<int32_t> small_prompt = {1, 2, 3};
  auto small = generate_tokens(wrapper, small_prompt, g);
  ASSERT_TRUE(small.ok());
  for (int32_t t : small->tokens) EXPECT_LT(t, 10);
  // The length is capped by the model's 32 positions.
  g.sampling = SamplingParams{.num_tokens_to_generate = 100};
  auto capped = generate_tokens(wrapper, small_prompt, g);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->tokens.size(), 32u - 3u);
  // Empty and too long prompts are refused.
  EXPECT_FALSE(generate_tokens(wrapper, std::vector<int32_t>{}, g).ok());
  EXPECT_FALSE(generate_tokens(wrapper, std::vector<int32_t>(32, 1), g).ok());
}

}  // namespace
}  // namespace mindspeed
