// LowLevelDataset: what GPTDataset needs from the data underneath it (Megatron's
// IndexedDataset or the mock dataset): per-sequence token counts and reads of token ranges.
// Port of the part of megatron/core/datasets/indexed_dataset.py:IndexedDataset that
// gpt_dataset.py uses (sequence_lengths, get(idx, offset, length)).
#pragma once

#include <cstdint>
#include <string>

namespace mindspeed {

class LowLevelDataset {
 public:
  virtual ~LowLevelDataset() = default;
  /// Number of sequences (documents when preprocessing did not split sentences).
  virtual int64_t num_sequences() const = 0;
  /// Tokens in sequence i.
  virtual int32_t sequence_length(int64_t i) const = 0;
  /// Copies tokens [offset, offset + length) of sequence i into out (widened to int32).
  virtual void get(int64_t i, int64_t offset, int64_t length, int32_t* out) const = 0;
  /// The path prefix (Megatron's dataset_path), used in cache keys and messages.
  virtual std::string path_prefix() const = 0;
};

}  // namespace mindspeed
