// The interface the training loop reads samples through: a GPTDataset, a MockGPTDataset or a
// BlendedDataset (Megatron's TopLevelDataset = Union[BlendedDataset, MegatronDataset] in
// blended_megatron_dataset_builder.py), and the per-sample output of GPTDataset.__getitem__.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "datasets/utils.h"

namespace mindspeed {

/// Where one sample goes; every array is [s] with s = --seq-length. Megatron returns
/// {tokens, labels, loss_mask, position_ids, attention_mask [1, s, s]}; instead of the dense
/// mask we give doc_start: key j is visible from query t iff doc_start[t] <= j <= t.
struct GptSampleView {
  int32_t* tokens = nullptr;        ///< [s] input ids (pad ids replaced by 0)
  int32_t* labels = nullptr;        ///< [s] next-token targets (pad ids replaced by 0)
  float* loss_mask = nullptr;       ///< [s] 1 = counts in the loss; 0 at pads (and EOD with --eod-mask-loss)
  int32_t* position_ids = nullptr;  ///< [s] 0..s-1, restarting after each EOD with --reset-position-ids
  int32_t* doc_start = nullptr;     ///< [s] first position of t's document with --reset-attention-mask, else 0
  /// Optional: MindSpeed's actual_seq_len, the cumulative document ends (EOD index + 1 for
  /// each EOD, then s if the last token is not an EOD); just {s} without
  /// --reset-attention-mask. Cleared and refilled.
  std::vector<int32_t>* actual_seq_len = nullptr;
};

class TopLevelDataset {
 public:
  virtual ~TopLevelDataset() = default;
  /// Number of samples (Megatron's len(dataset)).
  virtual int64_t size() const = 0;
  virtual Split split() const = 0;
  /// dataset[idx]; idx in [0, size()). Writes seq_length values into each array of `out`.
  /// InvalidArgument naming the sample when the data underneath holds a value that is not a
  /// token id (LowLevelDataset::get).
  virtual Status get_sample(int64_t idx, const GptSampleView& out) const = 0;
  /// --seq-length of the samples.
  virtual int64_t sequence_length() const = 0;
  /// The JSON text Megatron hashes for the cache file names.
  virtual const std::string& unique_description() const = 0;
};

}  // namespace mindspeed
