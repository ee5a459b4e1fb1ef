// MegatronPretrainingSampler slices against the Python model of data_samplers.py, and the
// batches / data loader built on it.
#include "datasets/data_samplers.h"

#include <gtest/gtest.h>

#include "datasets/mock_gpt_dataset.h"
#include "datasets/gpt_dataset.h"
#include "test_datasets.h"

namespace mindspeed {
namespace {

using testing::ReferenceVectors;
const ReferenceVectors& ref() { return ReferenceVectors::gpt(); }

TEST(MegatronPretrainingSampler, SlicesMatchMegatron) {
  for (int k = 0; ref().has("sampler_" + std::to_string(k) + "_args"); ++k) {
    const auto a = ref().ints("sampler_" + std::to_string(k) + "_args");
    std::vector<int64_t> got;
    for (int64_t r = 0; r < a[3]; ++r) {
      auto s = MegatronPretrainingSampler::create(a[0], a[1], a[2], r, a[3], a[4] != 0);
      ASSERT_TRUE(s.ok()) << s.status().to_string();
      std::vector<int64_t> ids;
      int64_t yielded = 0;
      while (s->next(&ids)) {
        // Megatron yields an empty slice on high ranks of a short last group (drop_last=False).
        got.insert(got.end(), ids.begin(), ids.end());
        got.push_back(-1);
        ++yielded;
      }
      EXPECT_EQ(yielded, s->num_micro_batches());
      got.push_back(-2);
    }
    EXPECT_EQ(got, ref().ints("sampler_" + std::to_string(k))) << "case " << k;
  }
}

TEST(MegatronPretrainingSampler, ResumeFromConsumedSamples) {
  // Resuming at consumed = c gives exactly the tail of the uninterrupted sequence.
  auto full = MegatronPretrainingSampler::create(100, 0, 2, 1, 4);
  auto resumed = MegatronPretrainingSampler::create(100, 40, 2, 1, 4);
  ASSERT_TRUE(full.ok() && resumed.ok());
  EXPECT_EQ(full->num_micro_batches(), 12);
  EXPECT_EQ(resumed->num_micro_batches(), 7);
  for (int64_t k = 0; k < 7; ++k) EXPECT_EQ(resumed->micro_batch(k), full->micro_batch(k + 5));
  std::vector<int64_t> ids;
  ASSERT_TRUE(resumed->next(&ids));
  EXPECT_EQ(ids, (std::vector<int64_t>{42, 43}));
  EXPECT_EQ(resumed->consumed_samples(), 48);
}

TEST(MegatronPretrainingSampler, Errors) {
  EXPECT_FALSE(MegatronPretrainingSampler::create(0, 0, 1, 0, 1).ok());
  EXPECT_FALSE(MegatronPretrainingSampler::create(10, 10, 1, 0, 1).ok());
  EXPECT_FALSE(MegatronPretrainingSampler::create(10, 0, 0, 0, 1).ok());
  EXPECT_FALSE(MegatronPretrainingSampler::create(10, 0, 1, 2, 2).ok());
}

TEST(GptDataLoader, BatchesAreTheDatasetSamplesOfThisRank) {
  auto cfg = std::make_shared<GPTDatasetConfig>();
  cfg->sequence_length = 32;
  cfg->tokenizer = {"NullTokenizer", {}, {}};
  cfg->eod_token = 50256;
  cfg->reset_position_ids = true;
  cfg->reset_attention_mask = true;
  ASSERT_TRUE(cfg->finalize().ok());
  auto low = std::make_shared<MockGPTLowLevelDataset>(50256);
  std::vector<int32_t> indices(200);
  for (int i = 0; i < 200; ++i) indices[static_cast<size_t>(i)] = i;
  auto ds = GPTDataset::create(low, std::nullopt, indices, 64, Split::kTrain, cfg, {true, false});
  ASSERT_TRUE(ds.ok());
  std::shared_ptr<const TopLevelDataset> top = *ds;
  auto loader = GptDataLoader::create(top, 8, 2, 1, 2);
  ASSERT_TRUE(loader.ok());
  GptBatch batch;
  const auto next = [&] {
    StatusOr<bool> got = loader->next(&batch);
    EXPECT_TRUE(got.ok()) << got.status().to_string();
    return got.ok() && *got;
  };
  ASSERT_TRUE(next());
  EXPECT_EQ(batch.sample_ids, (std::vector<int64_t>{10, 11}));
  ASSERT_EQ(batch.tokens.size(), 64u);
  std::vector<int32_t> tk(32), lb(32), pos(32), start(32);
  std::vector<float> lm(32);
  std::vector<int32_t> seq_len;
  ASSERT_TRUE((*ds)->get_sample(11, {tk.data(), lb.data(), lm.data(), pos.data(), start.data(), &seq_len}).ok());
  EXPECT_TRUE(std::equal(tk.begin(), tk.end(), batch.tokens.begin() + 32));
  EXPECT_TRUE(std::equal(lb.begin(), lb.end(), batch.labels.begin() + 32));
  EXPECT_TRUE(std::equal(pos.begin(), pos.end(), batch.position_ids.begin() + 32));
  EXPECT_TRUE(std::equal(start.begin(), start.end(), batch.doc_start.begin() + 32));
  EXPECT_EQ(batch.actual_seq_len[1], seq_len);
  int64_t n = 1;
  while (next()) ++n;
  EXPECT_EQ(n, ((*ds)->size() - 8) / 4);
}

}  // namespace
}  // namespace mindspeed
