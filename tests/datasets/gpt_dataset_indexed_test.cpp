// GPTDataset over a real IndexedDataset (.idx/.bin written by IndexedDatasetBuilder) gives
// the same indices and samples as the Python model of Megatron over the same tokens, and
// stored values that are not token ids stop the data loader with the sample named.
#include <gtest/gtest.h>

#include "datasets/blended_megatron_dataset_builder.h"
#include "datasets/data_samplers.h"
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
      ASSERT_TRUE(syn->get(i, 0, syn->sequence_length(i), tokens.data()).ok());
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
    ASSERT_TRUE(train->get_text(static_cast<int64_t>(i), got.data()).ok());
    for (size_t t = 0; t < 17; ++t) ASSERT_EQ(got[t], text[i * 17 + t]) << i;
  }
  auto* valid = dynamic_cast<GPTDataset*>(built->valid().get());
  ASSERT_NE(valid, nullptr);
  EXPECT_EQ(to_i64(valid->shuffle_index()), ref().ints("gpt_valid_drop_shuffle_index"));
}

// The datasets `pretrain` builds for --data-path: open_token_dataset as the factory.
StatusOr<GptDatasets> build_train_only(const std::string& prefix, int64_t seq_length) {
  GptDataArgs args;
  args.data_path = {prefix};
  args.split = "100,0,0";
  args.seq_length = seq_length;
  args.tokenizer = {"_NullTokenizer", {std::nullopt}, {{"vocab_size", "100"}}};
  args.eod_token = 100;
  MS_ASSIGN_OR_RETURN(auto cfg, gpt_dataset_config_from_args(args));
  BlendedMegatronDatasetBuilder builder(
      cfg, {std::nullopt, std::nullopt, std::nullopt},
      [](const std::string& p) -> StatusOr<std::shared_ptr<const LowLevelDataset>> {
        MS_ASSIGN_OR_RETURN(std::unique_ptr<IndexedDataset> ds, open_token_dataset(p));
        return std::shared_ptr<const LowLevelDataset>(std::move(ds));
      },
      {});
  return builder.build();
}

// A token of 2^40 in an int64 .bin would wrap to id 0 and pass the vocabulary check; the
// data loader refuses the sample holding it, naming the sample, the file and the value.
TEST(GPTDatasetOnIndexedDataset, DataLoaderRefusesAnInt64TokenOutsideInt32) {
  TempDir tmp;
  const std::string prefix = tmp.path() + "/big_text_document";
  {
    auto builder = IndexedDatasetBuilder::create(get_bin_path(prefix), IndexedDType::kInt64);
    ASSERT_TRUE(builder.ok()) << builder.status().to_string();
    for (int d = 0; d < 8; ++d) {
      std::vector<int64_t> doc(10);
      for (int k = 0; k < 10; ++k) doc[static_cast<size_t>(k)] = 1 + d * 10 + k;
      if (d == 5) doc[3] = int64_t{1} << 40;
      ASSERT_TRUE((*builder)->add_document(doc, std::vector<int32_t>{10}).ok());
    }
    ASSERT_TRUE((*builder)->finalize(get_idx_path(prefix)).ok());
  }
  auto built = build_train_only(prefix, 8);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  std::shared_ptr<const TopLevelDataset> train = built->train();
  ASSERT_NE(train, nullptr);
  auto loader = GptDataLoader::create(train, 0, 1, 0, 1);
  ASSERT_TRUE(loader.ok()) << loader.status().to_string();
  GptBatch batch;
  Status error;
  int64_t good = 0;
  while (true) {
    StatusOr<bool> got = loader->next(&batch);
    if (!got.ok()) {
      error = got.status();
      break;
    }
    if (!*got) break;
    for (int32_t id : batch.tokens) EXPECT_NE(id, 0) << "a wrapped id reached the batch";
    ++good;
  }
  EXPECT_LT(good, train->size()) << "no sample refused";
  EXPECT_EQ(error.code(), StatusCode::kInvalidArgument) << error.to_string();
  for (const std::string& fragment : std::vector<std::string>{
           "sample ", "of the GPTDataset train split", get_bin_path(prefix),
           "token 3 of sequence 5 (document 5) is 1099511627776", "re-create it with preprocess_data"}) {
    EXPECT_NE(error.message().find(fragment), std::string::npos) << fragment << " not in: " << error.message();
  }
}

// A float32 .bin is refused as --data-path instead of truncating its values to ids.
TEST(GPTDatasetOnIndexedDataset, FloatDatasetIsRefused) {
  TempDir tmp;
  const std::string prefix = tmp.path() + "/float_text_document";
  {
    auto builder = IndexedDatasetBuilder::create(get_bin_path(prefix), IndexedDType::kFloat32);
    ASSERT_TRUE(builder.ok()) << builder.status().to_string();
    for (int d = 0; d < 4; ++d) {
      ASSERT_TRUE((*builder)->add_document(std::vector<int64_t>{1, 2, 3, 4, 5}, std::vector<int32_t>{5}).ok());
    }
    ASSERT_TRUE((*builder)->finalize(get_idx_path(prefix)).ok());
  }
  auto built = build_train_only(prefix, 4);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), StatusCode::kInvalidArgument);
  for (const std::string& fragment :
       std::vector<std::string>{prefix, "float32", "a token dataset holds integer ids", "preprocess_data"}) {
    EXPECT_NE(built.status().message().find(fragment), std::string::npos)
        << fragment << " not in: " << built.status().message();
  }
}

}  // namespace
}  // namespace mindspeed
