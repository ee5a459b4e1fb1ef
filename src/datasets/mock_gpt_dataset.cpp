// Port of MockGPTLowLevelDataset (see the header).
#include "datasets/mock_gpt_dataset.h"

#include "core/check.h"
#include "datasets/numpy_random.h"

namespace mindspeed {

MockGPTLowLevelDataset::MockGPTLowLevelDataset(int32_t eod_token) : eod_(eod_token) {
  NumpyPcg64Generator rng(kSeed);
  lengths_ = rng.integers_int32(1, kMaxSequenceLength, kSize);
}

int32_t MockGPTLowLevelDataset::sequence_length(int64_t i) const {
  MS_DCHECK(i >= 0 && i < kSize);
  return lengths_[static_cast<size_t>(i)];
}

Status MockGPTLowLevelDataset::get(int64_t i, int64_t offset, int64_t length, int32_t* out) const {
  const int64_t n = sequence_length(i);
  MS_CHECK(offset >= 0 && length >= 0 && offset + length <= n, "mock sequence ", i, " has ", n,
           " tokens; asked for [", offset, ", ", offset + length, ")");
  for (int64_t k = 0; k < length; ++k) {
    const int64_t pos = offset + k;
    out[k] = pos == n - 1 ? eod_ : static_cast<int32_t>(pos + 1);
  }
  return ok_status();
}

}  // namespace mindspeed
