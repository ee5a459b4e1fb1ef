// Generation under tensor parallelism equals the single-process generation: each rank loads
// its shard of a golden fixture (the vocabulary padded for the tensor-parallel size), the
// controller samples from the all-gathered logits and broadcasts each token, and the tokens
// (greedy and sampled from the same seed) equal those of the whole model on one process; the
// logits of the real vocabulary agree within 1e-5 at every step.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "distributed/param_and_grad_buffer.h"
#include "inference/text_generation_controller.h"
#include "models/gpt/gpt_inference_wrapper.h"
#include "models/gpt/gpt_model.h"
#include "models/gpt/hf_checkpoint.h"
#include "test_mpi.h"
#include "test_util.h"

namespace mindspeed::testing {
namespace {

struct Generator {
  std::unique_ptr<FixtureModel> loaded;
  Backend backend = select_backend(KernelOptions{}, 1);
  std::unique_ptr<GPTInferenceWrapper> wrapper;
  const ModelConfig& config;

  Generator(const std::string& dir, const ParallelState& ps)
      : loaded(load_fixture_model(dir, ps, ps.sizes.tensor)), config(loaded->config) {
    ForwardContext ctx;
    ctx.backend = &backend;
    ctx.alloc = &loaded->alloc;
    ctx.ps = &ps;
    ctx.training = false;
    wrapper = std::make_unique<GPTInferenceWrapper>(*loaded->model, ctx, true);
  }
  GenerationResult generate(const SamplingParams& s) {
    GenerationOptions g;
    g.sampling = s;
    g.vocab_size = config.vocab_size;
    g.keep_logits = true;
    const std::vector<int32_t> prompt = {3, 14, 15, 92, 65};
    auto r = generate_tokens(*wrapper, prompt, g);
    MS_CHECK_OK(r.status());
    return *r;
  }
};

class TextGenerationTp : public ::testing::TestWithParam<std::string> {};

TEST_P(TextGenerationTp, TokensAndLogitsEqualTheSingleProcess) {
  const MpiWorld& world = mpi_world();
  if (world.size != 2 && world.size != 4) GTEST_SKIP();
  const std::string dir = std::string(MS_SOURCE_DIR) + "/tests/golden/" + GetParam();
  const FixtureLayout layout = fixture_layout(GetParam(), world);
  const std::unique_ptr<ParallelState>& ps = layout.ps;
  Generator sharded(dir, *ps);
  const auto single_ps = ParallelState::single_process();
  Generator whole(dir, *single_ps);
  const int64_t V = whole.config.vocab_size;
  for (const SamplingParams& s : {SamplingParams{.num_tokens_to_generate = 20},
                                  SamplingParams{.temperature = 1.3f, .top_k = 0, .seed = 11,
                                                 .num_tokens_to_generate = 20},
                                  SamplingParams{.temperature = 0.8f, .top_k = 20, .top_p = 0.9f, .seed = 5,
                                                 .num_tokens_to_generate = 20}}) {
    const GenerationResult a = sharded.generate(s), b = whole.generate(s);
    EXPECT_EQ(a.tokens, b.tokens) << "top-k " << s.top_k << " seed " << s.seed;
    ASSERT_EQ(a.step_logits.size(), b.step_logits.size());
    for (size_t step = 0; step < a.step_logits.size(); ++step) {
      const std::vector<float> ra(a.step_logits[step].begin(), a.step_logits[step].begin() + V);
      const std::vector<float> rb(b.step_logits[step].begin(), b.step_logits[step].begin() + V);
      EXPECT_LE(normwise_error(ra, rb), 1e-5) << "step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TextGenerationTp, ::testing::Values("gpt2_tiny", "llama_tiny", "qwen2_scaled"));

}  // namespace
}  // namespace mindspeed::testing
