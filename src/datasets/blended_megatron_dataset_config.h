// Configuration of the dataset builder. Port of
// megatron/core/datasets/blended_megatron_dataset_config.py (BlendedMegatronDatasetConfig and
// its __post_init__ checks) plus the tokenizer identity that enters Megatron's cache key.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "datasets/python_json.h"
#include "datasets/utils.h"

namespace mindspeed {

/// What Megatron's MegatronTokenizer.unique_identifiers holds: the class name, the paths it
/// was built from and its options as str(value) (the fields of tokenizer/tokenizer.h's
/// TokenizerIdentifiers). It is serialized into every dataset's unique description, so it
/// must match Megatron's tokenizer for the cache MD5s to match. Examples:
/// GPT2BPETokenizer {"_GPT2BPETokenizer", {vocab, merges}, {}};
/// NullTokenizer {"_NullTokenizer", {nullopt}, {{"vocab_size", "32000"}}}.
struct TokenizerIdentity {
  std::string class_name;
  std::vector<std::optional<std::string>> tokenizer_path;  ///< nullopt is JSON null
  std::vector<std::pair<std::string, std::string>> options;

  /// {"class": ..., "tokenizer_path": [...], option: "value", ...}
  PyJson to_json() const;
};

struct BlendedMegatronDatasetConfig {
  /// --seed: the seed of every dataset RNG (NumPy RandomState; must be in [0, 2^32)).
  int64_t random_seed = 1234;
  /// --seq-length: tokens per sample (the model's input length).
  int64_t sequence_length = 0;
  /// --data-path: one blend for all splits. Not with blend_per_split.
  std::optional<Blend> blend;
  /// --train-data-path / --valid-data-path / --test-data-path: one blend per split (a split
  /// without one is not built). Not with blend or split.
  std::optional<std::array<std::optional<Blend>, kNumSplits>> blend_per_split;
  /// --split as given (it is part of the cache key verbatim). With blend it is required;
  /// finalize() sets "1,1,1" for mock data.
  std::optional<std::string> split;
  /// Derived by finalize() from split; nullopt with blend_per_split.
  std::optional<SplitMatrix> split_matrix;
  /// --data-cache-path; empty: "<prefix>/cache/GPTDataset_indices" for real data, no cache
  /// for mock data and blended datasets.
  std::string path_to_cache;
  /// Derived by finalize(): true when neither blend nor blend_per_split is given.
  bool mock = false;
  /// The tokenizer's identity (cache key).
  TokenizerIdentity tokenizer;
  /// Extra samples each mid-level dataset of a weighted blend builds (Megatron: a fixed 0.5%).
  double mid_level_dataset_surplus = 0.005;

  /// Port of __post_init__: checks blend / blend_per_split / split consistency, derives mock,
  /// split (mock: "1,1,1") and split_matrix. Errors name the flags.
  Status finalize();
};

}  // namespace mindspeed
