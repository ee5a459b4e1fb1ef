// GPTDataset over a real IndexedDataset (.idx/.bin written by IndexedDatasetBuilder) gives
// the same indices and samples as the Python model of Megatron over the same tokens.
#include <gtest/gtest.h>

#include "datasets/blended_megatron_dataset_builder.h"
#include "datasets/indexed_dataset.h"
#include "test_datasets.h"

namespace mindspeed {
namespace {

using testing::ReferenceVectors;
using testing::TempDir;
const ReferenceVectors& ref() { return ReferenceVectors::gpt(); }

std::vector<int64_t> to_i64(const NpyArray& a) {
  std::vector<int64_t> out(static_cast<size_t>(a.numel()));
  for (int64_t i = 0; i < a.numel(); ++i) out[static_cast<size_t>(i)] = a.int_at(i);
  return out;
}

TEST(GPTDatasetOnIndexedDataset, MatchesMegatronModel) {
  TempDir tmp;
  const std::string prefix = tmp.path() + "/syn_a_text_document";
  {
    // One document per sequence with the synthetic content, stored as uint16 like GPT-2 data.
    auto syn = testing::synthetic("syn_a", prefix);
    auto builder = IndexedDatasetBuilder::create(get_bin_path(prefix), IndexedDType::kUInt16);
    ASSERT_TRUE(builder.ok()) << builder.status().to_string();
    for (int64_t i = 0; i < syn->num_sequences(); ++i) {
      std::vector<int32_t> tokens(static_cast<size_t>(syn->sequence_length(i)));
      syn->get(i, 0, syn->sequence_length(i), tokens.data());
      ASSERT_TRUE((*builder)->add_item(tokens).ok());
      (*builder)->end_document();
    }
    ASSERT_TRUE((*builder)->finalize(get_idx_path(prefix)).ok());
  }
  GptDataArgs args;
  args.data_path = {prefix};
  args.split = "80,15,5";
  args.seq_length = 16;
  args.tokenizer = {"_GPT2BPETokenizer", {"/data/gpt2-vocab.json", "/data/gpt2-merges.txt"}, {}};
  args.eod_token = 0;
  auto cfg = gpt_dataset_config_from_args(args);
  ASSERT_TRUE(cfg.ok());
  const int64_t train_samples = std::stoll(ref().str("gpt_train_sep_config", 1));
  BlendedMegatronDatasetBuilder builder(
      *cfg, {train_samples, 5, std::nullopt},
      [](const std::string& p) -> StatusOr<std::shared_ptr<const LowLevelDataset>> {
        MS_ASSIGN_OR_RETURN(std::unique_ptr<IndexedDataset> ds, IndexedDataset::open(p));
        return std::shared_ptr<const LowLevelDataset>(std::move(ds));
      },
      {});
  auto built = builder.build();
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  auto* train = dynamic_cast<GPTDataset*>(built->train().get());
  ASSERT_NE(train, nullptr);
  // Megatron's default cache folder next to the data.
  EXPECT_EQ(train->cache_dir(), prefix + "/cache/GPTDataset_indices");
  EXPECT_EQ(to_i64(train->document_index()), ref().ints("gpt_train_sep_document_index"));
  EXPECT_EQ(to_i64(train->sample_index()), ref().ints("gpt_train_sep_sample_index"));
  EXPECT_EQ(to_i64(train->shuffle_index()), ref().ints("gpt_train_sep_shuffle_index"));
  const auto text = ref().ints("gpt_train_sep_text");
  std::vector<int32_t> got(17);
  for (size_t i = 0; i * 17 < text.size(); ++i) {
    train->get_text(static_cast<int64_t>(i), got.data());
    for (size_t t = 0; t < 17; ++t) ASSERT_EQ(got[t], text[i * 17 + t]) << i;
  }
  auto* valid = dynamic_cast<GPTDataset*>(built->valid().get());
  ASSERT_NE(valid, nullptr);
  EXPECT_EQ(to_i64(valid->shuffle_index()), ref().ints("gpt_valid_drop_shuffle_index"));
}

}  // namespace
}  // namespace mindspeed
