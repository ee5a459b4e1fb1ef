// GPTDataset / MockGPTDataset against the Python model of Megatron's index building
// (reference/megatron_gpt_dataset_model.py): document / sample / shuffle indices, sample
// texts, masks and positions, description MD5s, for several split / seed / epoch settings.
#include "datasets/gpt_dataset.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "datasets/mock_gpt_dataset.h"
#include "test_datasets.h"

namespace mindspeed {
namespace {

using testing::md5_tag;
using testing::ReferenceVectors;
using testing::TempDir;
const ReferenceVectors& ref() { return ReferenceVectors::gpt(); }

TokenizerIdentity gpt2_tokenizer() {
  return {"_GPT2BPETokenizer", {"/data/gpt2-vocab.json", "/data/gpt2-merges.txt"}, {}};
}

std::vector<int64_t> to_i64(const NpyArray& a) {
  std::vector<int64_t> out(static_cast<size_t>(a.numel()));
  for (int64_t i = 0; i < a.numel(); ++i) out[static_cast<size_t>(i)] = a.int_at(i);
  return out;
}

struct Case {
  std::shared_ptr<const LowLevelDataset> low;
  std::shared_ptr<GPTDatasetConfig> config;
  std::optional<int64_t> num_samples;
  Split split = Split::kTrain;
  std::vector<int32_t> indices;
  std::string prefix;
};

/// The case's config line -> a GPTDataset configuration over the synthetic data.
Case load_case(const std::string& name, const std::string& cache_dir) {
  const auto& v = ref().strings(name + "_config");
  Case c;
  c.prefix = v.at(11);
  c.low = testing::synthetic(c.prefix.find("syn_b") != std::string::npos ? "syn_b" : "syn_a", c.prefix);
  auto cfg = std::make_shared<GPTDatasetConfig>();
  cfg->random_seed = std::stoll(v[2]);
  cfg->sequence_length = std::stoll(v[3]);
  std::string split = v[4];
  for (auto& ch : split) ch = ch == '_' ? ' ' : ch;
  cfg->blend = Blend{{c.prefix}, std::nullopt};
  cfg->split = split;
  cfg->drop_last_partial_validation_sequence = v[5] == "1";
  cfg->add_extra_token_to_sequence = v[6] == "1";
  cfg->reset_position_ids = v[7] == "1";
  cfg->reset_attention_mask = v[8] == "1";
  cfg->eod_mask_loss = v[9] == "1";
  cfg->pad_token = std::stoll(v[10]);
  cfg->eod_token = 0;
  cfg->tokenizer = gpt2_tokenizer();
  cfg->path_to_cache = cache_dir;
  EXPECT_TRUE(cfg->finalize().ok());
  c.config = cfg;
  c.split = static_cast<Split>(std::stoi(v[0]));
  if (v[1] != "-1") c.num_samples = std::stoll(v[1]);
  const auto range = split_index_range(*(*cfg->split_matrix)[static_cast<int>(c.split)], c.low->num_sequences());
  for (int64_t i = range.first; i < range.second; ++i) c.indices.push_back(static_cast<int32_t>(i));
  return c;
}

StatusOr<std::shared_ptr<GPTDataset>> build(const Case& c, IndexBuildRole role = {true, false}) {
  return GPTDataset::create(c.low, c.prefix, c.indices, c.num_samples, c.split, c.config, role);
}

void expect_matches_model(const std::string& name, const GPTDataset& ds) {
  const auto& meta = ref().strings(name + "_meta");
  EXPECT_EQ(ds.size(), std::stoll(meta[0])) << name;
  EXPECT_EQ(npy_descr(ds.document_index().dtype()), std::string("<i4")) << name;
  EXPECT_EQ(npy_descr(ds.sample_index().dtype()), std::string(meta[4] == "int32" ? "<i4" : "<i8"));
  EXPECT_EQ(npy_descr(ds.shuffle_index().dtype()), std::string(meta[5] == "uint32" ? "<u4" : "<i8"));
  EXPECT_EQ(to_i64(ds.document_index()), ref().ints(name + "_document_index")) << name;
  EXPECT_EQ(to_i64(ds.sample_index()), ref().ints(name + "_sample_index")) << name;
  EXPECT_EQ(to_i64(ds.shuffle_index()), ref().ints(name + "_shuffle_index")) << name;
  EXPECT_EQ(ds.unique_description_hash(), ref().str(name + "_md5")) << name;

  const int64_t s = ds.sequence_length();
  const int64_t extra = ds.config().add_extra_token_to_sequence ? 1 : 0;
  const auto text = ref().ints(name + "_text");
  const int64_t n_text = static_cast<int64_t>(text.size()) / (s + extra);
  std::vector<int32_t> got(static_cast<size_t>(s + extra));
  for (int64_t i = 0; i < n_text; ++i) {
    ASSERT_TRUE(ds.get_text(i, got.data()).ok());
    for (int64_t t = 0; t < s + extra; ++t) {
      ASSERT_EQ(got[static_cast<size_t>(t)], text[static_cast<size_t>(i * (s + extra) + t)])
          << name << " sample " << i << " token " << t;
    }
  }

  if (!ref().has(name + "_tokens")) return;
  const auto tokens = ref().ints(name + "_tokens");
  const auto labels = ref().ints(name + "_labels");
  const auto loss_mask = ref().ints(name + "_loss_mask");
  const auto position_ids = ref().ints(name + "_position_ids");
  const auto doc_start = ref().ints(name + "_doc_start");
  const auto actual = ref().ints(name + "_actual_seq_len");
  const int64_t n = static_cast<int64_t>(tokens.size()) / s;
  std::vector<int32_t> tk(static_cast<size_t>(s)), lb(tk), pos(tk), ds_(tk);
  std::vector<float> lm(static_cast<size_t>(s));
  std::vector<int32_t> seq_len;
  size_t a = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(ds.get_sample(i, {tk.data(), lb.data(), lm.data(), pos.data(), ds_.data(), &seq_len}).ok());
    for (int64_t t = 0; t < s; ++t) {
      const auto k = static_cast<size_t>(i * s + t);
      ASSERT_EQ(tk[static_cast<size_t>(t)], tokens[k]) << name << " tokens " << i << "," << t;
      ASSERT_EQ(lb[static_cast<size_t>(t)], labels[k]) << name << " labels " << i << "," << t;
      ASSERT_EQ(lm[static_cast<size_t>(t)], static_cast<float>(loss_mask[k])) << name << " loss_mask " << i << "," << t;
      ASSERT_EQ(pos[static_cast<size_t>(t)], position_ids[k]) << name << " position_ids " << i << "," << t;
      ASSERT_EQ(ds_[static_cast<size_t>(t)], doc_start[k]) << name << " doc_start " << i << "," << t;
    }
    std::vector<int64_t> expected_len;
    while (actual.at(a) != -1) expected_len.push_back(actual[a++]);
    ++a;
    EXPECT_EQ(std::vector<int64_t>(seq_len.begin(), seq_len.end()), expected_len) << name << " sample " << i;
  }
}

TEST(GPTDataset, IndicesTextsAndMasksMatchMegatronModel) {
  for (const auto& name : ref().strings("gpt_cases")) {
    SCOPED_TRACE(name);
    TempDir tmp;
    const Case c = load_case(name, tmp.path());
    auto ds = build(c);
    ASSERT_TRUE(ds.ok()) << ds.status().to_string();
    EXPECT_TRUE((*ds)->built_indices());
    expect_matches_model(name, **ds);
  }
}

TEST(GPTDataset, EpochSettingsCoverSeparateFinalEpoch) {
  // The cases exercise what they are named after (guards the generator too).
  EXPECT_EQ(ref().str("gpt_train_sep_meta", 1), "3");
  EXPECT_EQ(ref().str("gpt_train_sep_meta", 2), "1");
  EXPECT_EQ(ref().str("gpt_train_nosep_meta", 1), "3");
  EXPECT_EQ(ref().str("gpt_train_nosep_meta", 2), "0");
  // The partial validation sample is padded with the pad id.
  const auto text = ref().ints("gpt_valid_partial_text");
  EXPECT_GT(std::count(text.begin(), text.end(), -1), 0);
  const auto pad_text = ref().ints("gpt_valid_partial_pad_text");
  EXPECT_GT(std::count(pad_text.begin(), pad_text.end(), -1), 0);
}

TEST(GPTDataset, SamplesOverlapByTheExtraToken) {
  TempDir tmp;
  const Case c = load_case("gpt_train_1epoch", tmp.path());
  auto ds = build(c);
  ASSERT_TRUE(ds.ok());
  const auto& si = (*ds)->sample_index();
  // Sample j ends where sample j + 1 starts, one token later: text[j][s] == text[j+1][0].
  const int64_t s = c.config->sequence_length;
  const NpyArray& shuffle = (*ds)->shuffle_index();
  std::vector<int64_t> inverse(static_cast<size_t>(shuffle.numel()));
  for (int64_t i = 0; i < shuffle.numel(); ++i) inverse[static_cast<size_t>(shuffle.int_at(i))] = i;
  std::vector<int32_t> a(static_cast<size_t>(s + 1)), b(a);
  for (int64_t j = 0; j + 1 < si.shape()[0] - 1; ++j) {
    ASSERT_TRUE((*ds)->get_text(inverse[static_cast<size_t>(j)], a.data()).ok());
    ASSERT_TRUE((*ds)->get_text(inverse[static_cast<size_t>(j + 1)], b.data()).ok());
    ASSERT_EQ(a[static_cast<size_t>(s)], b[0]) << j;
  }
}

TEST(GPTDataset, EmptySplitYieldsNoSamplesOrAClearError) {
  TempDir tmp;
  Case c = load_case("gpt_test_none", tmp.path());
  c.indices.clear();
  auto ds = build(c);
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  EXPECT_EQ((*ds)->size(), 0);
  c.num_samples = 5;
  ds = build(c);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("--split"), std::string::npos) << ds.status().message();
}

TEST(MockGPTDataset, LowLevelLengthsFromDefaultRngZero) {
  MockGPTLowLevelDataset mock(50256);
  const auto& lengths = mock.sequence_lengths();
  ASSERT_EQ(static_cast<int64_t>(lengths.size()), 100000);
  EXPECT_EQ(std::vector<int64_t>(lengths.begin(), lengths.begin() + 10), ref().ints("mock_lengths_head"));
  EXPECT_EQ(md5_tag(lengths.data(), 100000), ref().str("mock_lengths"));
  // Sequence content: 1, 2, ..., length - 1, eod.
  std::vector<int32_t> seq(static_cast<size_t>(lengths[3]));
  ASSERT_TRUE(mock.get(3, 0, lengths[3], seq.data()).ok());
  for (int32_t k = 0; k + 1 < lengths[3]; ++k) EXPECT_EQ(seq[static_cast<size_t>(k)], k + 1);
  EXPECT_EQ(seq.back(), 50256);
}

TEST(MockGPTDataset, SplitsMatchMegatronModel) {
  auto cfg = std::make_shared<GPTDatasetConfig>();
  cfg->random_seed = 1234;
  cfg->sequence_length = 256;
  cfg->tokenizer = {"NullTokenizer", {}, {}};
  cfg->eod_token = 50256;
  ASSERT_TRUE(cfg->finalize().ok());
  ASSERT_TRUE(cfg->mock);
  EXPECT_EQ(*cfg->split, "1,1,1");
  auto low = std::make_shared<MockGPTLowLevelDataset>(50256);
  const int64_t sizes[] = {64, 32, 16};
  for (int i = 0; i < 3; ++i) {
    const std::string name = std::string("mock_") + split_name(static_cast<Split>(i));
    SCOPED_TRACE(name);
    const auto range = split_index_range(*(*cfg->split_matrix)[i], low->num_sequences());
    std::vector<int32_t> indices;
    for (int64_t k = range.first; k < range.second; ++k) indices.push_back(static_cast<int32_t>(k));
    const auto meta = ref().ints(name + "_meta");
    EXPECT_EQ(static_cast<int64_t>(indices.size()), meta[3]);
    EXPECT_EQ(indices[0], meta[4]);
    auto ds = GPTDataset::create(low, std::nullopt, indices, sizes[i], static_cast<Split>(i), cfg,
                                 {true, false});
    ASSERT_TRUE(ds.ok()) << ds.status().to_string();
    EXPECT_EQ((*ds)->class_name(), "MockGPTDataset");
    EXPECT_TRUE((*ds)->cache_dir().empty());  // mock data is not cached without --data-cache-path
    EXPECT_EQ((*ds)->size(), meta[0]);
    EXPECT_EQ((*ds)->unique_description_hash(), ref().str(name + "_md5"));
    const auto& di = (*ds)->document_index();
    const auto& si = (*ds)->sample_index();
    const auto& sh = (*ds)->shuffle_index();
    EXPECT_EQ(md5_tag(di.data<int32_t>(), di.numel()), ref().str(name + "_document_index"));
    EXPECT_EQ(md5_tag(si.data<int32_t>(), si.numel()), ref().str(name + "_sample_index"));
    EXPECT_EQ(md5_tag(sh.data<uint32_t>(), sh.numel()), ref().str(name + "_shuffle_index"));
    const auto text = ref().ints(name + "_text");
    std::vector<int32_t> got(257);
    for (int64_t j = 0; j < 3; ++j) {
      ASSERT_TRUE((*ds)->get_text(j, got.data()).ok());
      for (int t = 0; t < 257; ++t) ASSERT_EQ(got[static_cast<size_t>(t)], text[static_cast<size_t>(j * 257 + t)]);
    }
  }
}

TEST(LtorMasks, MatchMegatronOnRowsWithManyEods) {
  for (int k = 0; k < 4; ++k) {
    const auto toks64 = ref().ints("ltor_" + std::to_string(k) + "_tokens");
    const std::vector<int32_t> toks(toks64.begin(), toks64.end());
    const int64_t s = static_cast<int64_t>(toks.size());
    for (int flags = 0; flags < 8; ++flags) {
      std::vector<float> lm(static_cast<size_t>(s));
      std::vector<int32_t> pos(static_cast<size_t>(s)), start(static_cast<size_t>(s)), seq_len;
      get_ltor_masks_and_position_ids(toks.data(), s, 3, flags & 1, flags & 2, flags & 4, lm.data(),
                                      pos.data(), start.data(), &seq_len);
      std::vector<int64_t> got;
      for (float v : lm) got.push_back(static_cast<int64_t>(v));
      got.insert(got.end(), pos.begin(), pos.end());
      got.insert(got.end(), start.begin(), start.end());
      got.insert(got.end(), seq_len.begin(), seq_len.end());
      EXPECT_EQ(got, ref().ints("ltor_" + std::to_string(k) + "_" + std::to_string(flags)))
          << "row " << k << " flags " << flags;
    }
  }
}

}  // namespace
}  // namespace mindspeed
