// build_blending_indices / build_exhaustive_blending_indices / the per-dataset sample
// counts against the Python model of Megatron's helpers.cpp and builder.
#include "datasets/helpers.h"

#include <gtest/gtest.h>

#include "datasets/blended_megatron_dataset_builder.h"
#include "test_datasets.h"

namespace mindspeed {
namespace {

using testing::ReferenceVectors;
const ReferenceVectors& ref() { return ReferenceVectors::gpt(); }

TEST(BlendingIndices, GreedyRuleMatchesMegatron) {
  for (int k = 0; ref().has("blend_" + std::to_string(k) + "_size"); ++k) {
    const std::string key = "blend_" + std::to_string(k);
    const auto [di, si] = build_blending_indices(ref().doubles(key + "_weights"), ref().ints(key + "_size")[0]);
    EXPECT_EQ(std::vector<int64_t>(di.begin(), di.end()), ref().ints(key + "_dataset_index")) << key;
    EXPECT_EQ(si, ref().ints(key + "_sample_index")) << key;
  }
}

TEST(BlendingIndices, PrefixStableInSize) {
  // The greedy choice of sample i does not depend on the total size.
  const std::vector<double> w{0.25, 0.25, 0.5};
  const auto small = build_blending_indices(w, 100);
  const auto large = build_blending_indices(w, 1000);
  EXPECT_TRUE(std::equal(small.first.begin(), small.first.end(), large.first.begin()));
}

TEST(BlendingIndices, ExhaustiveMatchesMegatron) {
  for (int k = 0; ref().has("exhaustive_" + std::to_string(k) + "_sizes"); ++k) {
    const std::string key = "exhaustive_" + std::to_string(k);
    const auto sizes = ref().ints(key + "_sizes");
    const auto [di, si] = build_exhaustive_blending_indices(sizes);
    EXPECT_EQ(std::vector<int64_t>(di.begin(), di.end()), ref().ints(key + "_dataset_index")) << key;
    EXPECT_EQ(si, ref().ints(key + "_sample_index")) << key;
    std::vector<int64_t> counts(sizes.size(), 0);
    for (int16_t d : di) ++counts[static_cast<size_t>(d)];
    EXPECT_EQ(counts, sizes);
  }
}

TEST(BlendingIndices, SizesPerDatasetWithHalfPercentSurplus) {
  const auto rows = get_size_per_split_per_dataset(normalize({0.3, 0.7}), {1000, 3, 0}, 0.005);
  std::vector<int64_t> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  EXPECT_EQ(flat, ref().ints("size_per_split"));
}

TEST(SampleIdx, HandComputedRowsAndDtypes) {
  // max(len(document_index), max(sizes)) > INT32_MAX selects int64 (helpers.py).
  std::vector<int32_t> sizes{5, 7, 3};
  std::vector<int32_t> doc{2, 0, 1};
  auto small = build_sample_idx(sizes, doc, 4, 1, 15, true, 1);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->dtype(), NpyDtype::kInt32);
  // (15 - 1) / 4 = 3 samples over documents of 3, 5 and 7 tokens (the Python model agrees).
  const std::vector<int64_t> expected{0, 0, 1, 1, 2, 0, 2, 4};
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(small->int_at(i), expected[static_cast<size_t>(i)]) << i;
  // drop_last_partial_sequence = false: ceil(14 / 4) = 4 samples, the last one ends the data.
  auto partial = build_sample_idx(sizes, doc, 4, 1, 15, false, 1);
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->shape()[0], 5);
  EXPECT_EQ(partial->int_at(8), 2);
  EXPECT_EQ(partial->int_at(9), 6);  // sizes[1] - 1
  // A size of INT32_MAX still fits (Megatron's test is <=); only > 2^31 document-index
  // entries select int64, too large for a unit test, so force the int64 instance.
  sizes.push_back(std::numeric_limits<int32_t>::max());
  auto still32 = build_sample_idx(sizes, doc, 4, 1, 15, true, 1);
  ASSERT_TRUE(still32.ok());
  EXPECT_EQ(still32->dtype(), NpyDtype::kInt32);
  auto big = build_sample_idx(sizes, doc, 4, 1, 15, true, 1, NpyDtype::kInt64);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->dtype(), NpyDtype::kInt64);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(big->int_at(i), expected[static_cast<size_t>(i)]);
}

TEST(SampleIdx, PartialSampleCountUsesFloat32LikeMegatron) {
  // helpers.cpp computes ceil(float(total) / seq_length) in float32: with total = 2^24 + 1
  // tokens float32 rounds to 2^24, so 2^23 samples, not ceil((2^24 + 1) / 2) = 2^23 + 1.
  const int64_t total = (int64_t{1} << 24) + 1;
  std::vector<int32_t> sizes{static_cast<int32_t>(total + 1)};
  std::vector<int32_t> doc{0};
  auto idx = build_sample_idx(sizes, doc, 2, 1, total + 1, /*drop_last=*/false, 1);
  ASSERT_TRUE(idx.ok()) << idx.status().to_string();
  EXPECT_EQ(idx->shape()[0], (int64_t{1} << 23) + 1);
}

}  // namespace
}  // namespace mindspeed
