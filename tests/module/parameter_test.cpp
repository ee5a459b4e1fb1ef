// Tensor-parallel shard geometry (module/parameter.h): shard_runs lists the global rows and
// columns a rank holds, locate_in_shards finds where a piece of a row lives in the shards of
// another split; slice_for_rank / unslice_from_rank move whole shards with them. Checked on
// small tensors against shards written out by hand, and every (saved split, loaded split)
// pair against the full tensor; also the unaligned splits of --unaligned-linear (units shared
// unevenly, MindSpeed's example of 25 heads over 4 ranks).
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "module/parameter.h"

namespace mindspeed {
namespace {

ParameterSpec spec_of(std::vector<int64_t> shape, TensorParallelSplit split) {
  return ParameterSpec{.name = "weight", .global_shape = Shape::from(shape), .split = split};
}

std::vector<float> iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

std::vector<float> shard_of(const ParameterSpec& s, int rank, int size) {
  const std::vector<float> full = iota(s.global_shape.numel());
  int64_t local = 0;
  for (const ShardRun& run : shard_runs(s, rank, size)) local += run.col_end - run.col_begin;
  std::vector<float> out(static_cast<size_t>(local));
  slice_for_rank(out.data(), full.data(), s, rank, size);
  return out;
}

TEST(ShardGeometry, ShardsWrittenOutByHand) {
  // A [4, 3] tensor holds 0..11 row by row.
  EXPECT_EQ(shard_of(spec_of({4, 3}, TensorParallelSplit::kRows), 1, 2), (std::vector<float>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(shard_of(spec_of({4, 3}, TensorParallelSplit::kGluRows), 1, 2), (std::vector<float>{3, 4, 5, 9, 10, 11}));
  EXPECT_EQ(shard_of(spec_of({3, 4}, TensorParallelSplit::kColumns), 1, 2), (std::vector<float>{2, 3, 6, 7, 10, 11}));
  EXPECT_EQ(shard_of(spec_of({6}, TensorParallelSplit::kRows), 2, 3), (std::vector<float>{4, 5}));
  EXPECT_EQ(shard_of(spec_of({2, 2}, TensorParallelSplit::kReplicated), 1, 2), (std::vector<float>{0, 1, 2, 3}));
}

TEST(ShardGeometry, RunsCoverTheShardInOrder) {
  const auto runs = shard_runs(spec_of({3, 4}, TensorParallelSplit::kColumns), 1, 2);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[2].row, 2);
  EXPECT_EQ(runs[2].col_begin, 2);
  EXPECT_EQ(runs[2].col_end, 4);
  EXPECT_EQ(runs[2].local_offset, 4);
  const auto glu = shard_runs(spec_of({8, 2}, TensorParallelSplit::kGluRows), 0, 2);
  ASSERT_EQ(glu.size(), 4u);
  EXPECT_EQ(glu[2].row, 4);  // the first row of the "up" half
  EXPECT_EQ(glu[2].local_offset, 4);
}

// Reading shard (rank, size) of one split from the shards of another split (a checkpoint saved
// at another tensor-parallel size) gives the slice of the full tensor.
TEST(ShardGeometry, LocatingPiecesAcrossSplitsAndSizes) {
  for (const auto split : {TensorParallelSplit::kRows, TensorParallelSplit::kGluRows, TensorParallelSplit::kColumns,
                           TensorParallelSplit::kReplicated}) {
    const ParameterSpec s = spec_of({8, 12}, split);
    const std::vector<float> full = iota(s.global_shape.numel());
    for (int saved_size : {1, 2, 4}) {
      const int saved_pieces = split == TensorParallelSplit::kReplicated ? 1 : saved_size;
      std::vector<std::vector<float>> saved;
      for (int t = 0; t < saved_pieces; ++t) saved.push_back(shard_of(s, t, saved_pieces));
      for (int size : {1, 2, 4}) {
        for (int rank = 0; rank < size; ++rank) {
          std::vector<float> got(shard_of(s, rank, size).size(), -1.0f);
          for (const ShardRun& run : shard_runs(s, rank, size)) {
            int64_t at = run.local_offset;
            for (const ShardPlace& place : locate_in_shards(s, saved_pieces, run)) {
              ASSERT_LT(place.tp_rank, saved_pieces);
              for (int64_t i = 0; i < place.count; ++i) got[at + i] = saved[place.tp_rank][place.local_offset + i];
              at += place.count;
            }
            EXPECT_EQ(at, run.local_offset + run.col_end - run.col_begin);
          }
          EXPECT_EQ(got, shard_of(s, rank, size)) << "split " << static_cast<int>(split) << " saved over "
                                                  << saved_pieces << ", read as rank " << rank << " of " << size;
        }
      }
    }
  }
}

// MindSpeed's example (docs/zh/features/unaligned_linear.md): 25 heads over 4 ranks are 7, 6, 6
// and 6; with hidden size 3200 (head dim 128) the QKV weight [9600, 3200] gives rank 0 2688 rows
// and the others 2304, the projection [3200, 3200] 896 and 768 columns.
TEST(UnalignedSplit, MindSpeedsTwentyFiveHeadsOverFourRanks) {
  const int64_t expected_first[] = {0, 7, 13, 19}, expected_count[] = {7, 6, 6, 6};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(unaligned_share(25, 4, r).first, expected_first[r]);
    EXPECT_EQ(unaligned_share(25, 4, r).count, expected_count[r]);
  }
  for (int r = 0; r < 4; ++r) {
    ParameterRegistry registry;
    ParameterSpec qkv{
        .name = "qkv", .global_shape = Shape{9600, 3200}, .split = TensorParallelSplit::kRows};
    qkv.split_units = 25;
    ParameterSpec proj{
        .name = "proj", .global_shape = Shape{3200, 3200}, .split = TensorParallelSplit::kColumns};
    proj.split_units = 25;
    const Parameter* q = registry.add(qkv, 4, r);
    const Parameter* p = registry.add(proj, 4, r);
    EXPECT_EQ(q->local_shape, (Shape{r == 0 ? 2688 : 2304, 3200})) << r;
    EXPECT_EQ(p->local_shape, (Shape{3200, r == 0 ? 896 : 768})) << r;
    EXPECT_EQ(split_piece(qkv, 9600, r, 4).offset, expected_first[r] * 384);
  }
}

// Unaligned shards (6 units of a [24, 12] tensor's rows, GLU half rows or columns, over 1, 3 or 4
// ranks: 4 gives 2, 2, 1, 1 units) read from
// the shards of any other saved size, unaligned or even, give the slice of the full tensor.
TEST(UnalignedSplit, LocatingPiecesAcrossUnalignedAndEvenSplits) {
  for (const auto split :
       {TensorParallelSplit::kRows, TensorParallelSplit::kGluRows, TensorParallelSplit::kColumns}) {
    ParameterSpec unaligned = spec_of({24, 12}, split);
    unaligned.split_units = 6;
    const ParameterSpec even = spec_of({24, 12}, split);
    for (const ParameterSpec* saved_spec : {static_cast<const ParameterSpec*>(&unaligned), &even}) {
      for (int saved_size : {1, 2, 3, 4}) {
        std::vector<std::vector<float>> saved;
        for (int t = 0; t < saved_size; ++t) saved.push_back(shard_of(*saved_spec, t, saved_size));
        for (int size : {1, 3, 4}) {
          for (int rank = 0; rank < size; ++rank) {
            const std::vector<float> want = shard_of(unaligned, rank, size);
            std::vector<float> got(want.size(), -1.0f);
            for (const ShardRun& run : shard_runs(unaligned, rank, size)) {
              int64_t at = run.local_offset;
              for (const ShardPlace& place : locate_in_shards(*saved_spec, saved_size, run)) {
                ASSERT_LT(place.tp_rank, saved_size);
                for (int64_t i = 0; i < place.count; ++i)
                  got[at + i] = saved[place.tp_rank][place.local_offset + i];
                at += place.count;
              }
            }
            EXPECT_EQ(got, want) << "split " << static_cast<int>(split) << " saved "
                                 << saved_spec->split_units << " units over " << saved_size
                                 << ", read as rank " << rank << " of " << size;
          }
        }
      }
    }
    // Rank 2 of 4 holds unit 4 only: rows 16..19 of the [24, 12] tensor (units of 4 rows).
    if (split == TensorParallelSplit::kRows) {
      const std::vector<float> full = iota(24 * 12);
      EXPECT_EQ(shard_of(unaligned, 2, 4),
                std::vector<float>(full.begin() + 16 * 12, full.begin() + 20 * 12));
    }
  }
}

TEST(ShardGeometry, UnsliceIsTheInverseOfSlice) {
  const ParameterSpec s = spec_of({4, 6}, TensorParallelSplit::kColumns);
  std::vector<float> rebuilt(24, -1.0f);
  for (int r = 0; r < 3; ++r) unslice_from_rank(rebuilt.data(), shard_of(s, r, 3).data(), s, r, 3);
  EXPECT_EQ(rebuilt, iota(24));
}

}  // namespace
}  // namespace mindspeed
