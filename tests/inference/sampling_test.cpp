// sample_from_logits (inference/sampling.h) on hand-made rows: greedy, the top-k cut (ties
// kept), Megatron's shifted top-p rule, temperature, the vocabulary limit, the draw's
// inverse CDF, and the flag rules of validate_sampling_params.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "inference/sampling.h"

namespace mindspeed {
namespace {

std::set<int32_t> reachable(const std::vector<float>& logits, int64_t vocab, const SamplingParams& p) {
  std::set<int32_t> seen;
  std::vector<double> scratch;
  for (int i = 0; i < 1000; ++i) seen.insert(sample_from_logits(logits.data(), vocab, p, (i + 0.5) / 1000.0, &scratch));
  return seen;
}

TEST(Sampling, GreedyTakesTheFirstLargestWithinTheVocabulary) {
  const std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f, 9.0f};
  std::vector<double> scratch;
  EXPECT_EQ(sample_from_logits(logits.data(), 5, SamplingParams{}, 0.3, &scratch), 4);
  EXPECT_EQ(sample_from_logits(logits.data(), 4, SamplingParams{}, 0.3, &scratch), 1);  // 4 is padding
}

TEST(Sampling, TopKKeepsTheKLargestAndTheirTies) {
  const std::vector<float> logits = {1.0f, 5.0f, 4.0f, 4.0f, 0.0f, 3.0f};
  EXPECT_EQ(reachable(logits, 6, SamplingParams{.top_k = 2}), (std::set<int32_t>{1, 2, 3}));
  EXPECT_EQ(reachable(logits, 6, SamplingParams{.top_k = 4}), (std::set<int32_t>{1, 2, 3, 5}));
  EXPECT_EQ(reachable(logits, 6, SamplingParams{.top_k = 0}).size(), 6u);
}

TEST(Sampling, TopPDropsTokensWhosePredecessorsExceedTheMass) {
  // Probabilities 0.5, 0.3, 0.2 (logits are their logs).
  const std::vector<float> logits = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  // Before token 1 nothing, before token 2 0.5 (<= 0.6: kept), before token 0 0.8 (dropped).
  EXPECT_EQ(reachable(logits, 3, SamplingParams{.top_k = 0, .top_p = 0.6f}), (std::set<int32_t>{1, 2}));
  EXPECT_EQ(reachable(logits, 3, SamplingParams{.top_k = 0, .top_p = 0.4f}), (std::set<int32_t>{1}));
  EXPECT_EQ(reachable(logits, 3, SamplingParams{.top_k = 0, .top_p = 0.3f}), (std::set<int32_t>{1}));
  EXPECT_EQ(reachable(logits, 3, SamplingParams{.top_k = 0, .top_p = 0.9f}), (std::set<int32_t>{0, 1, 2}));
  // top-k first, then top-p over what is left.
  EXPECT_EQ(reachable(logits, 3, SamplingParams{.top_k = 2, .top_p = 1.0f}), (std::set<int32_t>{1, 2}));
}

TEST(Sampling, DrawsFollowTheSoftmaxOfTheScaledLogits) {
  const std::vector<float> logits = {std::log(0.25f), std::log(0.75f)};
  std::vector<double> scratch;
  const SamplingParams p{.top_k = 0};
  EXPECT_EQ(sample_from_logits(logits.data(), 2, p, 0.24, &scratch), 0);
  EXPECT_EQ(sample_from_logits(logits.data(), 2, p, 0.26, &scratch), 1);
  // Temperature 0.5 squares the odds: 1/10 and 9/10.
  const SamplingParams cold{.temperature = 0.5f, .top_k = 0};
  EXPECT_EQ(sample_from_logits(logits.data(), 2, cold, 0.09, &scratch), 0);
  EXPECT_EQ(sample_from_logits(logits.data(), 2, cold, 0.11, &scratch), 1);
}

TEST(Sampling, UniformDrawsAreReproducibleAndInRange) {
  const RngStream a{1, 2}, b{1, 3};
  double sum = 0.0;
  for (uint64_t i = 0; i < 1000; ++i) {
    const double u = uniform_double(a, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    EXPECT_EQ(u, uniform_double(a, i));
    sum += u;
  }
  EXPECT_NEAR(sum / 1000.0, 0.5, 0.05);
  EXPECT_NE(uniform_double(a, 0), uniform_double(b, 0));
}

TEST(Sampling, FlagRulesNameTheFlag) {
  auto message = [](const SamplingParams& p) { return validate_sampling_params(p, 100).to_string(); };
  EXPECT_TRUE(validate_sampling_params(SamplingParams{}, 100).ok());
  EXPECT_TRUE(validate_sampling_params(SamplingParams{.temperature = 0.7f, .top_k = 40, .top_p = 0.9f}, 100).ok());
  EXPECT_NE(message({.temperature = 0.0f, .top_k = 0}).find("--temperature"), std::string::npos);
  EXPECT_NE(message({.top_k = -1}).find("--top-k"), std::string::npos);
  EXPECT_NE(message({.top_k = 101}).find("--top-k"), std::string::npos);
  EXPECT_NE(message({.top_k = 0, .top_p = 1.5f}).find("--top-p"), std::string::npos);
  EXPECT_NE(message({.top_p = 0.9f}).find("--top-k 0"), std::string::npos);  // top-p with greedy
  EXPECT_NE(message({.temperature = 0.5f}).find("greedy"), std::string::npos);
  EXPECT_NE(message({.num_tokens_to_generate = 0}).find("--out-seq-length"), std::string::npos);
}

}  // namespace
}  // namespace mindspeed
