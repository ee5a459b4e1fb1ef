// Turns the data flags into the train / valid / test datasets, as Megatron does.
// Port of megatron/core/datasets/blended_megatron_dataset_builder.py
// (BlendedMegatronDatasetBuilder.build and _get_size_per_split_per_dataset), of the data part
// of megatron/training (arguments.py: the legacy --split default; utils.py:
// get_blend_and_blend_per_split; training.py: get_train_valid_test_num_samples) and of
// pretrain_gpt.py: core_gpt_dataset_config_from_args.
//
// Rank protocol (MPI stays with the caller): Megatron lets global rank 0 build and cache every
// index first while the others wait at a barrier, then the others load the cache. Here the
// caller passes whether this rank is rank 0, whether it needs the datasets at all, and a
// synchronising all_ranks_ok(bool) that every rank calls at the same points.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "datasets/blended_dataset.h"
#include "datasets/gpt_dataset.h"
#include "datasets/low_level_dataset.h"

namespace mindspeed {

/// The Megatron flags that decide the data, as given on the command line.
struct GptDataArgs {
  std::vector<std::string> data_path;        ///< --data-path [W1] P1 [W2 P2 ...]
  std::vector<std::string> train_data_path;  ///< --train-data-path
  std::vector<std::string> valid_data_path;  ///< --valid-data-path
  std::vector<std::string> test_data_path;   ///< --test-data-path
  std::optional<std::string> split;          ///< --split (default: "969, 30, 1" with --data-path)
  bool mock_data = false;                    ///< --mock-data
  std::string data_cache_path;               ///< --data-cache-path
  int64_t seed = 1234;                       ///< --seed
  int64_t seq_length = 0;                    ///< --seq-length
  bool reset_position_ids = false;           ///< --reset-position-ids
  bool reset_attention_mask = false;         ///< --reset-attention-mask
  bool eod_mask_loss = false;                ///< --eod-mask-loss
  TokenizerIdentity tokenizer;               ///< from the tokenizer (cache key)
  int64_t eod_token = -1;                    ///< tokenizer.eod
  int64_t pad_token = -1;                    ///< tokenizer.pad, or -1 if it has none
};

/// core_gpt_dataset_config_from_args + get_blend_and_blend_per_split + the legacy --split
/// default, then finalize(). Errors name the flags.
StatusOr<std::shared_ptr<const GPTDatasetConfig>> gpt_dataset_config_from_args(const GptDataArgs& args);

/// training.py: get_train_valid_test_num_samples.
///   train = --train-samples, or train_iters * global_batch_size
///   valid = (train_iters // eval_interval + 1) * eval_iters * global_batch_size
///   test  = eval_iters * global_batch_size
/// With --train-samples, train_iters is train_samples // global_batch_size (Megatron's
/// update_train_iters without batch-size ramp-up).
StatusOr<std::array<int64_t, kNumSplits>> get_train_valid_test_num_samples(
    int64_t train_iters, std::optional<int64_t> train_samples, int64_t eval_interval,
    int64_t eval_iters, int64_t global_batch_size);

/// Opens the low-level dataset of a path prefix (the lead passes one that opens the
/// IndexedDataset `<prefix>.idx/.bin`).
using LowLevelDatasetFactory =
    std::function<StatusOr<std::shared_ptr<const LowLevelDataset>>(const std::string& path_prefix)>;

struct DatasetBuildContext {
  /// Builds and caches indices before the other ranks read them: global rank 0 (Megatron), or
  /// with --no-shared-storage one rank per node (MindSpeed-LLM's need_to_build_dataset).
  bool builds_first = true;
  /// This rank needs the datasets (pretrain_gpt.is_dataset_built_on_rank: TP rank 0 of the
  /// first or last pipeline stage). Ranks that do not get null datasets but still sync.
  bool is_built_on_rank = true;
  /// Called by every rank at the same points, with whether this rank succeeded so far; must
  /// return true iff all ranks did (e.g. MPI_Allreduce(LAND) on the world). A failure on one
  /// rank thus stops every rank at the same point instead of deadlocking at a barrier.
  /// Empty: single process.
  std::function<bool(bool ok)> all_ranks_ok;
};

/// The train, valid and test datasets (null where a split is absent or not built here).
struct GptDatasets {
  std::array<std::shared_ptr<TopLevelDataset>, kNumSplits> splits;
  const std::shared_ptr<TopLevelDataset>& train() const { return splits[0]; }
  const std::shared_ptr<TopLevelDataset>& valid() const { return splits[1]; }
  const std::shared_ptr<TopLevelDataset>& test() const { return splits[2]; }
};

class BlendedMegatronDatasetBuilder {
 public:
  /// sizes: the minimum number of samples per split (nullopt: one epoch; only without blend
  /// weights). factory: unused for mock data.
  BlendedMegatronDatasetBuilder(std::shared_ptr<const GPTDatasetConfig> config,
                                std::array<std::optional<int64_t>, kNumSplits> sizes,
                                LowLevelDatasetFactory factory, DatasetBuildContext ctx);

  /// Builds every split (port of build / _build_blended_dataset_splits).
  StatusOr<GptDatasets> build();

 private:
  using MidLevelSplits = std::array<std::shared_ptr<GPTDataset>, kNumSplits>;

  /// _build_megatron_dataset_splits for one prefix (nullopt: mock).
  StatusOr<MidLevelSplits> build_megatron_dataset_splits(
      const std::optional<std::string>& prefix, const SplitMatrix& split,
      const std::array<std::optional<int64_t>, kNumSplits>& sizes, bool synchronize);
  /// One blend (all splits from `split`): the mid-level datasets, then a BlendedDataset per split.
  StatusOr<GptDatasets> build_blend(const Blend& blend, const SplitMatrix& split,
                                    const std::array<std::optional<int64_t>, kNumSplits>& sizes,
                                    int only_split);
  /// Runs `fn` on rank 0, syncs, runs it on the other ranks that build, syncs.
  Status rank_zero_first(const std::function<Status()>& fn);
  bool sync(bool ok) const { return ctx_.all_ranks_ok ? ctx_.all_ranks_ok(ok) : ok; }
  IndexBuildRole role() const { return {ctx_.builds_first, ctx_.builds_first}; }

  std::shared_ptr<const GPTDatasetConfig> config_;
  std::array<std::optional<int64_t>, kNumSplits> sizes_;
  LowLevelDatasetFactory factory_;
  DatasetBuildContext ctx_;
};

/// _get_size_per_split_per_dataset: [dataset][split] =
/// ceil(ceil(target[split] * weight) * (1 + surplus)) (weights normalized).
std::vector<std::array<int64_t, kNumSplits>> get_size_per_split_per_dataset(
    const std::vector<double>& normalized_weights,
    const std::array<std::optional<int64_t>, kNumSplits>& target_size_per_split,
    double surplus = 0.0);

}  // namespace mindspeed
