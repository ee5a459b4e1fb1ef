// BlendedMegatronDatasetBuilder end to end against the Python model of Megatron's builder:
// weighted and unweighted blends, single prefixes, per-split paths, mock data, and the rank
// protocol (rank 0 builds and caches, the others load; a failure on one rank stops all).
#include "datasets/blended_megatron_dataset_builder.h"

#include <gtest/gtest.h>

#include <barrier>
#include <filesystem>
#include <mutex>
#include <thread>

#include "test_datasets.h"

namespace mindspeed {
namespace {

using testing::ReferenceVectors;
using testing::TempDir;
const ReferenceVectors& ref() { return ReferenceVectors::gpt(); }

const std::string kA = "/data/syn_a_text_document";
const std::string kB = "/data/syn_b_text_document";

LowLevelDatasetFactory synthetic_factory() {
  return [](const std::string& prefix) -> StatusOr<std::shared_ptr<const LowLevelDataset>> {
    if (prefix == kA) return std::shared_ptr<const LowLevelDataset>(testing::synthetic("syn_a", kA));
    if (prefix == kB) return std::shared_ptr<const LowLevelDataset>(testing::synthetic("syn_b", kB));
    return not_found("no dataset ", prefix);
  };
}

std::shared_ptr<GPTDatasetConfig> base_config(const std::string& cache) {
  auto cfg = std::make_shared<GPTDatasetConfig>();
  cfg->random_seed = 99;
  cfg->sequence_length = 8;
  cfg->tokenizer = {"_GPT2BPETokenizer", {"/data/gpt2-vocab.json", "/data/gpt2-merges.txt"}, {}};
  cfg->eod_token = 0;
  cfg->path_to_cache = cache;
  return cfg;
}

TEST(Builder, WeightedBlendMatchesMegatronModel) {
  TempDir tmp;
  auto cfg = base_config(tmp.path());
  cfg->blend = Blend{{kA, kB}, std::vector<double>{30.0, 70.0}};
  cfg->split = "90,8,2";
  ASSERT_TRUE(cfg->finalize().ok());
  BlendedMegatronDatasetBuilder builder(cfg, {40, 8, 4}, synthetic_factory(), {});
  auto built = builder.build();
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  for (int i = 0; i < 3; ++i) {
    const std::string name = std::string("blend_weighted_") + split_name(static_cast<Split>(i));
    SCOPED_TRACE(name);
    auto* blend = dynamic_cast<BlendedDataset*>(built->splits[i].get());
    ASSERT_NE(blend, nullptr);
    const auto& meta = ref().strings(name + "_meta");
    EXPECT_EQ(blend->size(), std::stoll(meta[0]));
    EXPECT_EQ(blend->unique_description_hash(), meta[1]);
    ASSERT_EQ(blend->datasets().size(), 2u);
    for (size_t d = 0; d < 2; ++d) {
      EXPECT_EQ(blend->datasets()[d]->size(), std::stoll(meta[2 + d]));
      EXPECT_EQ(blend->datasets()[d]->unique_description_hash(), meta[4 + d]);
    }
    std::vector<int64_t> di, si;
    for (int64_t k = 0; k < blend->size(); ++k) {
      di.push_back(blend->dataset_index().int_at(k));
      si.push_back(blend->dataset_sample_index().int_at(k));
    }
    EXPECT_EQ(di, ref().ints(name + "_dataset_index"));
    EXPECT_EQ(si, ref().ints(name + "_dataset_sample_index"));
    const auto text = ref().ints(name + "_text");
    std::vector<int32_t> got(9);
    for (int64_t k = 0; k * 9 < static_cast<int64_t>(text.size()); ++k) {
      const int16_t d = blend->dataset_index().data<int16_t>()[k];
      const GPTDataset& ds = *blend->datasets()[static_cast<size_t>(d)];
      ASSERT_TRUE(ds.get_text(blend->dataset_sample_index().int_at(k), got.data()).ok());
      for (int t = 0; t < 9; ++t) ASSERT_EQ(got[static_cast<size_t>(t)], text[static_cast<size_t>(k * 9 + t)]) << k;
    }
  }
}

TEST(Builder, UnweightedBlendUsesDatasetLengths) {
  TempDir tmp;
  auto cfg = base_config(tmp.path());
  cfg->blend = Blend{{kA, kB}, std::nullopt};
  cfg->split = "70,20,10";
  ASSERT_TRUE(cfg->finalize().ok());
  BlendedMegatronDatasetBuilder builder(cfg, {10, std::nullopt, std::nullopt}, synthetic_factory(), {});
  auto built = builder.build();
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  for (int i = 0; i < 3; ++i) {
    const std::string name = std::string("blend_unweighted_") + split_name(static_cast<Split>(i));
    SCOPED_TRACE(name);
    auto* blend = dynamic_cast<BlendedDataset*>(built->splits[i].get());
    ASSERT_NE(blend, nullptr);
    const auto& meta = ref().strings(name + "_meta");
    EXPECT_EQ(blend->size(), std::stoll(meta[0]));
    EXPECT_EQ(blend->unique_description_hash(), meta[1]);
    std::vector<int64_t> di, si;
    for (int64_t k = 0; k < blend->size(); ++k) {
      di.push_back(blend->dataset_index().int_at(k));
      si.push_back(blend->dataset_sample_index().int_at(k));
    }
    EXPECT_EQ(di, ref().ints(name + "_dataset_index"));
    EXPECT_EQ(si, ref().ints(name + "_dataset_sample_index"));
  }
}

TEST(Builder, SinglePrefixGivesGptDatasetsPerSplit) {
  TempDir tmp;
  auto cfg = base_config(tmp.path());
  cfg->blend = Blend{{kA}, std::nullopt};
  cfg->split = "80,15,5";
  cfg->sequence_length = 16;
  cfg->random_seed = 1234;
  ASSERT_TRUE(cfg->finalize().ok());
  BlendedMegatronDatasetBuilder builder(cfg, {30, 5, std::nullopt}, synthetic_factory(), {});
  auto built = builder.build();
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  auto* train = dynamic_cast<GPTDataset*>(built->train().get());
  auto* valid = dynamic_cast<GPTDataset*>(built->valid().get());
  auto* test = dynamic_cast<GPTDataset*>(built->test().get());
  ASSERT_TRUE(train && valid && test);
  EXPECT_EQ(train->unique_description_hash(), ref().str("gpt_train_1epoch_md5"));
  EXPECT_EQ(valid->unique_description_hash(), ref().str("gpt_valid_drop_md5"));
  EXPECT_EQ(test->unique_description_hash(), ref().str("gpt_test_none_md5"));
  EXPECT_EQ(train->size(), std::stoll(ref().str("gpt_train_1epoch_meta")));
}

TEST(Builder, PerSplitDataPaths) {
  TempDir tmp;
  GptDataArgs args;
  args.seq_length = 8;
  args.seed = 99;
  args.data_cache_path = tmp.path();
  args.tokenizer = {"_GPT2BPETokenizer", {"/data/gpt2-vocab.json", "/data/gpt2-merges.txt"}, {}};
  args.eod_token = 0;
  args.train_data_path = {kA};
  args.valid_data_path = {"1", kA, "3", kB};
  auto cfg = gpt_dataset_config_from_args(args);
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  BlendedMegatronDatasetBuilder builder(*cfg, {20, 6, 2}, synthetic_factory(), {});
  auto built = builder.build();
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  auto* train = dynamic_cast<GPTDataset*>(built->train().get());
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->split(), Split::kTrain);
  // The whole prefix is the train split, and the description has no split.
  EXPECT_EQ(train->document_index().numel() % 60, 0);
  EXPECT_NE(train->unique_description().find("\"split\": null"), std::string::npos);
  EXPECT_NE(train->unique_description().find("\"split_matrix\": null"), std::string::npos);
  auto* valid = dynamic_cast<BlendedDataset*>(built->valid().get());
  ASSERT_NE(valid, nullptr);
  EXPECT_EQ(valid->split(), Split::kValid);
  // ceil(6 * 0.25) + ceil(6 * 0.75) = 2 + 5 samples.
  EXPECT_EQ(valid->size(), 7);
  EXPECT_EQ(built->test(), nullptr);
}

TEST(Builder, MockDataMatchesMegatronModel) {
  GptDataArgs args;
  args.mock_data = true;
  args.seq_length = 256;
  args.tokenizer = {"NullTokenizer", {}, {}};
  args.eod_token = 50256;
  auto cfg = gpt_dataset_config_from_args(args);
  ASSERT_TRUE(cfg.ok());
  BlendedMegatronDatasetBuilder builder(*cfg, {64, 32, 16}, nullptr, {});
  auto built = builder.build();
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  for (int i = 0; i < 3; ++i) {
    auto* ds = dynamic_cast<GPTDataset*>(built->splits[i].get());
    ASSERT_NE(ds, nullptr);
    const std::string name = std::string("mock_") + split_name(static_cast<Split>(i));
    EXPECT_EQ(ds->class_name(), "MockGPTDataset");
    EXPECT_EQ(ds->size(), ref().ints(name + "_meta")[0]);
    EXPECT_EQ(ds->unique_description_hash(), ref().str(name + "_md5"));
  }
}

TEST(Builder, MissingPrefixIsAnError) {
  auto cfg = base_config("");
  cfg->blend = Blend{{"/nowhere"}, std::nullopt};
  cfg->split = "1";
  ASSERT_TRUE(cfg->finalize().ok());
  BlendedMegatronDatasetBuilder builder(cfg, {10, 0, 0}, synthetic_factory(), {});
  auto built = builder.build();
  ASSERT_FALSE(built.ok());
  EXPECT_NE(built.status().message().find("/nowhere"), std::string::npos);
}

/// Runs `world` ranks as threads; all_ranks_ok is a barrier that ANDs the flags.
template <typename Fn>
void run_ranks(int world, Fn&& fn) {
  std::mutex mu;
  bool all_ok = true;
  bool result = true;
  std::barrier sync(world, [&]() noexcept {
    result = all_ok;
    all_ok = true;
  });
  auto all_ranks_ok = [&](bool ok) {
    {
      std::lock_guard<std::mutex> lock(mu);
      all_ok = all_ok && ok;
    }
    sync.arrive_and_wait();
    const bool r = result;
    sync.arrive_and_wait();  // everyone has read `result` before the next round
    return r;
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { fn(r, all_ranks_ok); });
  for (auto& t : threads) t.join();
}

TEST(Builder, RankZeroBuildsTheCacheOthersLoadIt) {
  TempDir tmp;
  auto cfg = base_config(tmp.path());
  cfg->blend = Blend{{kA, kB}, std::vector<double>{30.0, 70.0}};
  cfg->split = "90,8,2";
  ASSERT_TRUE(cfg->finalize().ok());
  constexpr int kWorld = 3;
  std::vector<StatusOr<GptDatasets>> results(kWorld, StatusOr<GptDatasets>(internal_error("unset")));
  run_ranks(kWorld, [&](int rank, auto& all_ranks_ok) {
    DatasetBuildContext ctx;
    ctx.builds_first = rank == 0;
    ctx.is_built_on_rank = rank != 2;  // rank 2 is, say, a middle pipeline stage
    ctx.all_ranks_ok = all_ranks_ok;
    BlendedMegatronDatasetBuilder builder(cfg, {40, 8, 4}, synthetic_factory(), ctx);
    results[static_cast<size_t>(rank)] = builder.build();
  });
  for (int r = 0; r < kWorld; ++r) ASSERT_TRUE(results[static_cast<size_t>(r)].ok()) << r;
  for (int i = 0; i < 3; ++i) {
    auto* b0 = dynamic_cast<BlendedDataset*>(results[0]->splits[i].get());
    auto* b1 = dynamic_cast<BlendedDataset*>(results[1]->splits[i].get());
    ASSERT_TRUE(b0 && b1);
    EXPECT_TRUE(b0->built_indices());
    EXPECT_FALSE(b1->built_indices());  // loaded from rank 0's cache
    for (size_t d = 0; d < 2; ++d) {
      EXPECT_TRUE(b0->datasets()[d]->built_indices());
      EXPECT_FALSE(b1->datasets()[d]->built_indices());
    }
    for (int64_t k = 0; k < b0->size(); ++k) {
      ASSERT_EQ(b0->dataset_index().int_at(k), b1->dataset_index().int_at(k));
      ASSERT_EQ(b0->dataset_sample_index().int_at(k), b1->dataset_sample_index().int_at(k));
    }
    EXPECT_EQ(results[2]->splits[i], nullptr);
  }
}

TEST(Builder, AFailureOnOneRankStopsEveryRank) {
  TempDir tmp;
  auto cfg = base_config(tmp.path());
  cfg->blend = Blend{{kA}, std::nullopt};
  cfg->split = "80,15,5";
  ASSERT_TRUE(cfg->finalize().ok());
  constexpr int kWorld = 2;
  std::vector<Status> results(kWorld);
  run_ranks(kWorld, [&](int rank, auto& all_ranks_ok) {
    DatasetBuildContext ctx;
    ctx.builds_first = rank == 0;
    ctx.all_ranks_ok = all_ranks_ok;
    LowLevelDatasetFactory factory = synthetic_factory();
    if (rank == 1) {
      factory = [](const std::string& p) -> StatusOr<std::shared_ptr<const LowLevelDataset>> {
        return not_found("rank 1 cannot open ", p);
      };
    }
    BlendedMegatronDatasetBuilder builder(cfg, {30, 5, 2}, factory, ctx);
    results[static_cast<size_t>(rank)] = builder.build().status();
  });
  EXPECT_FALSE(results[0].ok());
  EXPECT_NE(results[0].message().find("another rank"), std::string::npos) << results[0].message();
  EXPECT_FALSE(results[1].ok());
  EXPECT_NE(results[1].message().find("rank 1 cannot open"), std::string::npos);
}

}  // namespace
}  // namespace mindspeed
