// GPTDataset: fixed-length samples cut from a shuffled stream of documents, in Megatron's
// exact order. Port of megatron/core/datasets/gpt_dataset.py (GPTDatasetConfig, GPTDataset,
// _build_document_index, _build_shuffle_index, _get_ltor_masks_and_position_ids) and of the
// unique-description / cache-key logic of megatron_dataset.py.
//
// Three index arrays (cached as .npy files under Megatron's names):
//   document_index [num_epochs * n_split_docs] int32: the split's sequence ids, repeated per
//       epoch and shuffled (the last epoch shuffled on its own when it is short).
//   sample_index   [num_samples + 1, 2] int32|int64: (position in document_index, offset).
//   shuffle_index  [num_samples] uint32|int64: a permutation of the samples.
// Sample i covers the tokens between rows shuffle_index[i] and shuffle_index[i] + 1 of the
// sample index plus one extra token (add_extra_token_to_sequence), so tokens = text[:-1] and
// labels = text[1:] are both seq_length long.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "datasets/blended_megatron_dataset_config.h"
#include "datasets/low_level_dataset.h"
#include "datasets/megatron_dataset.h"
#include "datasets/npy_file.h"

namespace mindspeed {

struct GPTDatasetConfig : BlendedMegatronDatasetConfig {
  /// --reset-position-ids: positions restart at 0 after each EOD.
  bool reset_position_ids = false;
  /// --reset-attention-mask: tokens do not attend across EOD (doc_start).
  bool reset_attention_mask = false;
  /// --eod-mask-loss: EOD input positions get loss_mask 0.
  bool eod_mask_loss = false;
  /// Validation keeps a last, padded partial sample when false (Megatron default true).
  bool drop_last_partial_validation_sequence = true;
  /// Samples hold seq_length + 1 tokens so tokens and labels are both seq_length long.
  bool add_extra_token_to_sequence = true;
  /// The tokenizer's EOD id (tokenizer.eod).
  int64_t eod_token = -1;
  /// The tokenizer's pad id if it has one, else Megatron's _PAD_TOKEN_ID = -1. Padding
  /// (only at the end of the last validation sample) uses it; pad labels get loss_mask 0 and
  /// pad ids become 0 in tokens and labels, exactly as Megatron (so a pad id equal to a real
  /// token id masks that token too).
  int64_t pad_token = -1;
};

/// How this rank takes part in building indices (MPI stays outside this folder).
struct IndexBuildRole {
  /// This rank builds missing indices and writes the cache (Megatron: global rank 0). Other
  /// ranks only read the cache; if it is missing or unreadable they build in memory (with a
  /// warning) instead of failing as Megatron would.
  bool build_on_this_rank = true;
  /// Print Megatron's "Build and save ..." / "Load ..." messages (rank 0).
  bool log = true;
};

/// Megatron's _get_ltor_masks_and_position_ids on one sample, with doc_start instead of the
/// dense mask. tokens: [s] (pad ids not yet replaced). Writes loss_mask, position_ids,
/// doc_start ([s] each) and, if non-null, actual_seq_len.
void get_ltor_masks_and_position_ids(const int32_t* tokens, int64_t s, int64_t eod_token,
                                     bool reset_position_ids, bool reset_attention_mask,
                                     bool eod_mask_loss, float* loss_mask, int32_t* position_ids,
                                     int32_t* doc_start, std::vector<int32_t>* actual_seq_len);

class GPTDataset : public TopLevelDataset {
 public:
  /// Port of GPTDataset.__init__ (and MockGPTDataset when config->mock):
  /// dataset:      the low-level dataset (kept alive by the GPTDataset)
  /// dataset_path: the prefix as given in the blend (nullopt for mock data); cache key
  /// indices:      the split's sequence ids (Megatron's arange(begin, end))
  /// num_samples:  samples wanted; nullopt = exactly one epoch
  /// Builds the three indices, or loads them from the cache when present and valid.
  static StatusOr<std::shared_ptr<GPTDataset>> create(
      std::shared_ptr<const LowLevelDataset> dataset, std::optional<std::string> dataset_path,
      std::vector<int32_t> indices, std::optional<int64_t> num_samples, Split index_split,
      std::shared_ptr<const GPTDatasetConfig> config, const IndexBuildRole& role = {});

  // TopLevelDataset
  int64_t size() const override { return shuffle_index_.numel(); }
  Split split() const override { return index_split_; }
  Status get_sample(int64_t idx, const GptSampleView& out) const override;
  int64_t sequence_length() const override { return config_->sequence_length; }
  const std::string& unique_description() const override { return unique_description_; }

  /// The raw seq_length + extra token ids of sample idx (after the shuffle), padded with
  /// pad_token (Megatron's _query_document_sample_shuffle_indices). text: [s + extra].
  /// InvalidArgument naming the sample when a stored value is not a token id.
  Status get_text(int64_t idx, int32_t* text) const;

  /// "GPTDataset" or "MockGPTDataset".
  const std::string& class_name() const { return class_name_; }
  const std::string& unique_description_hash() const { return unique_description_hash_; }
  /// The requested number of samples (nullopt: one epoch).
  std::optional<int64_t> num_samples() const { return num_samples_; }
  const NpyArray& document_index() const { return document_index_; }
  const NpyArray& sample_index() const { return sample_index_; }
  const NpyArray& shuffle_index() const { return shuffle_index_; }
  /// True when this object built the indices (cache miss, no cache, or an unusable cache).
  bool built_indices() const { return built_indices_; }
  /// The cache folder ("" when none) and the file prefix "{md5}-{class}-{split}-".
  const std::string& cache_dir() const { return cache_dir_; }
  std::string cache_file(const std::string& suffix) const;
  /// The unique identifiers Megatron stores (BlendedDataset nests them in its description).
  const PyJson& unique_identifiers() const { return unique_identifiers_; }
  const LowLevelDataset& low_level_dataset() const { return *dataset_; }
  const GPTDatasetConfig& config() const { return *config_; }

 private:
  GPTDataset() = default;
  Status build_indices();
  Status load_indices();
  Status save_indices() const;

  std::shared_ptr<const LowLevelDataset> dataset_;
  std::shared_ptr<const GPTDatasetConfig> config_;
  std::optional<std::string> dataset_path_;
  std::vector<int32_t> indices_;
  std::optional<int64_t> num_samples_;
  Split index_split_ = Split::kTrain;
  std::string class_name_;
  PyJson unique_identifiers_;
  std::string unique_description_;
  std::string unique_description_hash_;
  std::string cache_dir_;
  bool built_indices_ = false;
  bool log_ = true;

  NpyArray document_index_;
  NpyArray sample_index_;
  NpyArray shuffle_index_;
  int extra_ = 1;  // add_extra_token_to_sequence as 0/1
};

/// Megatron's split_matrix as JSON (the first bookend starts with the Python int 0).
PyJson split_matrix_to_json(const std::optional<SplitMatrix>& matrix);

/// MegatronDataset.unique_identifiers of a GPTDataset / MockGPTDataset: class, dataset_path,
/// num_samples, index_split, random_seed, sequence_length, split, split_matrix, tokenizer.
/// json.dumps(indent=4) of it is the description whose MD5 names the cache files.
PyJson gpt_dataset_unique_identifiers(const std::string& class_name,
                                      const std::optional<std::string>& dataset_path,
                                      std::optional<int64_t> num_samples, Split index_split,
                                      const GPTDatasetConfig& config);

}  // namespace mindspeed
