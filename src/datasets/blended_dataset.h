// BlendedDataset: interleaves samples of several GPTDatasets by weight.
// Port of megatron/core/datasets/blended_dataset.py. Two indices, cached as
// {md5}-BlendedDataset-{split}-{dataset_index.npy, dataset_sample_index.npy} only when
// --data-cache-path is set:
//   dataset_index        [size] int16: which dataset sample i comes from
//   dataset_sample_index [size] int64: which sample of that dataset
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "datasets/gpt_dataset.h"

namespace mindspeed {

class BlendedDataset : public TopLevelDataset {
 public:
  /// Weighted blend of exactly `size` samples (weights are normalized here; Megatron passes
  /// the client weights or the dataset lengths). build_blending_indices.
  static StatusOr<std::shared_ptr<BlendedDataset>> create(
      std::vector<std::shared_ptr<GPTDataset>> datasets, std::vector<double> weights,
      int64_t size, std::shared_ptr<const GPTDatasetConfig> config,
      const IndexBuildRole& role = {});
  /// Exhaustive blend (Megatron's size=None): exactly counts[d] samples of dataset d,
  /// build_exhaustive_blending_indices.
  static StatusOr<std::shared_ptr<BlendedDataset>> create_exhaustive(
      std::vector<std::shared_ptr<GPTDataset>> datasets, std::vector<int64_t> counts,
      std::shared_ptr<const GPTDatasetConfig> config, const IndexBuildRole& role = {});

  int64_t size() const override { return dataset_index_.numel(); }
  Split split() const override { return split_; }
  Status get_sample(int64_t idx, const GptSampleView& out) const override;
  int64_t sequence_length() const override { return config_->sequence_length; }
  const std::string& unique_description() const override { return unique_description_; }

  const std::string& unique_description_hash() const { return unique_description_hash_; }
  const NpyArray& dataset_index() const { return dataset_index_; }
  const NpyArray& dataset_sample_index() const { return dataset_sample_index_; }
  const std::vector<std::shared_ptr<GPTDataset>>& datasets() const { return datasets_; }
  bool built_indices() const { return built_indices_; }
  std::string cache_file(const std::string& suffix) const;

 private:
  BlendedDataset() = default;
  static StatusOr<std::shared_ptr<BlendedDataset>> create_impl(
      std::vector<std::shared_ptr<GPTDataset>> datasets, PyJson weights_json,
      std::vector<double> weights, std::vector<int64_t> counts, std::optional<int64_t> size,
      std::shared_ptr<const GPTDatasetConfig> config, const IndexBuildRole& role);
  Status load_indices();
  Status check_indices(const NpyArray& dataset_index, const NpyArray& dataset_sample_index,
                       const std::string& origin) const;

  std::vector<std::shared_ptr<GPTDataset>> datasets_;
  std::shared_ptr<const GPTDatasetConfig> config_;
  Split split_ = Split::kTrain;
  std::string unique_description_;
  std::string unique_description_hash_;
  NpyArray dataset_index_;
  NpyArray dataset_sample_index_;
  bool built_indices_ = false;
};

}  // namespace mindspeed
