// LowLevelDataset: what GPTDataset needs from the data underneath it (Megatron's
// IndexedDataset or the mock dataset): per-sequence token counts and reads of token ranges.
// Port of the part of megatron/core/datasets/indexed_dataset.py:IndexedDataset that
// gpt_dataset.py uses (sequence_lengths, get(idx, offset, length)).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace mindspeed {

class LowLevelDataset {
 public:
  virtual ~LowLevelDataset() = default;
  /// Number of sequences (documents when preprocessing did not split sentences).
  virtual int64_t num_sequences() const = 0;
  /// Tokens in sequence i.
  virtual int32_t sequence_length(int64_t i) const = 0;
  /// Copies tokens [offset, offset + length) of sequence i into out as token ids (int32).
  /// InvalidArgument naming the file, the sequence and the value when a stored value is not
  /// a token id in [0, 2^31) (it would wrap or truncate into a wrong id). Out-of-range
  /// arguments are a bug (MS_CHECK).
  virtual Status get(int64_t i, int64_t offset, int64_t length, int32_t* out) const = 0;
  /// The path prefix (Megatron's dataset_path), used in cache keys and messages.
  virtual std::string path_prefix() const = 0;
};

}  // namespace mindspeed
