// Mock data (--mock-data, or no data path at all): Megatron's MockGPTLowLevelDataset.
// Port of megatron/core/datasets/gpt_dataset.py: MockGPTLowLevelDataset (100000 sequences,
// lengths numpy.random.default_rng(0).integers(1, 4096, dtype=int32), sequence i =
// [1, 2, ..., length - 1, eod]). MockGPTDataset is a GPTDataset over it built with
// config.mock (class name "MockGPTDataset", split "1,1,1", no cache unless
// --data-cache-path is given); see GPTDataset::create.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "datasets/low_level_dataset.h"

namespace mindspeed {

class MockGPTLowLevelDataset : public LowLevelDataset {
 public:
  static constexpr uint64_t kSeed = 0;
  static constexpr int64_t kSize = 100000;
  static constexpr int32_t kMaxSequenceLength = 4096;

  explicit MockGPTLowLevelDataset(int32_t eod_token);

  int64_t num_sequences() const override { return kSize; }
  int32_t sequence_length(int64_t i) const override;
  /// Token k of sequence i is k + 1, except the last, which is eod.
  Status get(int64_t i, int64_t offset, int64_t length, int32_t* out) const override;
  std::string path_prefix() const override { return ""; }

  const std::vector<int32_t>& sequence_lengths() const { return lengths_; }

 private:
  int32_t eod_;
  std::vector<int32_t> lengths_;  // [kSize]
};

}  // namespace mindspeed
