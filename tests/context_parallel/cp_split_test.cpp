// CpSplit and get_batch_on_this_cp_rank against MindSpeed's layouts written out by hand:
// Ulysses' contiguous (and unaligned) shares, the ring's load-balanced chunks r and 2R-1-r,
// the general mask's contiguous chunks, hybrid CP's ring split then Ulysses sub-shares; and
// for every layout, the ranks together hold each position exactly once.
#include "context_parallel/cp_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace mindspeed {
namespace {

std::vector<int32_t> range(int32_t begin, int32_t end) {
  std::vector<int32_t> r(static_cast<size_t>(end - begin));
  std::iota(r.begin(), r.end(), begin);
  return r;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

ContextParallelConfig config(CpAlgo algo, int ulysses, bool general = false) {
  ContextParallelConfig c;
  c.algo = algo;
  c.ulysses_degree = ulysses;
  c.general_mask = general;
  return c;
}

TEST(CpSplit, UlyssesSharesAreContiguous) {
  const CpSplit split(config(CpAlgo::kUlysses, 4), 4, 16);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(split.rank_positions(r), range(4 * r, 4 * r + 4)) << r;
}

TEST(CpSplit, UnalignedUlyssesGivesTheFirstRanksOneMore) {
  // s = 30, C = 4: MindSpeed's cal_split_sizes gives 8, 8, 7, 7.
  const CpSplit split(config(CpAlgo::kUlysses, 4), 4, 30);
  EXPECT_EQ(split.ulysses_lengths(30), (std::vector<int64_t>{8, 8, 7, 7}));
  EXPECT_EQ(split.rank_positions(0), range(0, 8));
  EXPECT_EQ(split.rank_positions(1), range(8, 16));
  EXPECT_EQ(split.rank_positions(2), range(16, 23));
  EXPECT_EQ(split.rank_positions(3), range(23, 30));
}

TEST(CpSplit, CausalRingKeepsChunksRAnd2CMinus1MinusR) {
  // s = 16, C = 4: 8 chunks of 2; rank r keeps chunks r and 7 - r.
  const CpSplit split(config(CpAlgo::kRing, 1), 4, 16);
  EXPECT_EQ(split.rank_positions(0), concat(range(0, 2), range(14, 16)));
  EXPECT_EQ(split.rank_positions(1), concat(range(2, 4), range(12, 14)));
  EXPECT_EQ(split.rank_positions(2), concat(range(4, 6), range(10, 12)));
  EXPECT_EQ(split.rank_positions(3), concat(range(6, 8), range(8, 10)));
  EXPECT_EQ(split.ring_share(1), split.rank_positions(1));
}

TEST(CpSplit, GeneralMaskRingIsContiguous) {
  const CpSplit split(config(CpAlgo::kRing, 1, /*general=*/true), 4, 16);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(split.rank_positions(r), range(4 * r, 4 * r + 4)) << r;
}

TEST(CpSplit, HybridSplitsTheRingShareOverUlyssesRanks) {
  // C = 4 = u 2 x ring 2, s = 16: ring shares {0..3, 12..15} and {4..11}; cp rank = ring * 2 + u.
  const CpSplit split(config(CpAlgo::kHybrid, 2), 4, 16);
  EXPECT_EQ(split.ring_degree(), 2);
  EXPECT_EQ(split.ring_share(0), concat(range(0, 4), range(12, 16)));
  EXPECT_EQ(split.rank_positions(0), range(0, 4));
  EXPECT_EQ(split.rank_positions(1), range(12, 16));
  EXPECT_EQ(split.rank_positions(2), range(4, 8));
  EXPECT_EQ(split.rank_positions(3), range(8, 12));
}

TEST(CpSplit, EveryPositionIsHeldExactlyOnce) {
  struct Layout {
    ContextParallelConfig cp;
    int size;
    int64_t s;
  };
  for (const Layout& l :
       {Layout{config(CpAlgo::kUlysses, 8), 8, 37}, Layout{config(CpAlgo::kRing, 1), 8, 48},
        Layout{config(CpAlgo::kRing, 1, true), 6, 36}, Layout{config(CpAlgo::kHybrid, 2), 8, 64},
        Layout{config(CpAlgo::kHybrid, 4, true), 8, 32}}) {
    const CpSplit split(l.cp, l.size, l.s);
    std::vector<int32_t> all;
    for (int r = 0; r < l.size; ++r) all = concat(all, split.rank_positions(r));
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, range(0, static_cast<int32_t>(l.s))) << "C " << l.size << ", s " << l.s;
  }
}

TEST(GetBatchOnThisCpRank, TakesEveryFieldAtTheRanksPositions) {
  MicroBatch full;
  full.B = 2;
  full.T = 8;
  full.first_sample = 6;
  for (int64_t i = 0; i < 16; ++i) {
    full.tokens.push_back(static_cast<int32_t>(100 + i));
    full.labels.push_back(static_cast<int32_t>(200 + i));
    full.loss_mask.push_back(i % 3 == 0 ? 0.0f : 1.0f);
    full.position_ids.push_back(static_cast<int32_t>(i % 8));
    full.doc_start.push_back(static_cast<int32_t>(i % 8 >= 5 ? 5 : 0));
  }
  const CpSplit split(config(CpAlgo::kRing, 1), 2,
                      8);  // rank 1: chunks 1 and 2 = positions 2, 3, 4, 5
  const MicroBatch mb = get_batch_on_this_cp_rank(full, split, 1);
  EXPECT_EQ(mb.T, 4);
  EXPECT_EQ(mb.seq_total, 8);
  EXPECT_EQ(mb.first_sample, 6);
  EXPECT_EQ(mb.seq_index, (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(mb.tokens, (std::vector<int32_t>{102, 103, 104, 105, 110, 111, 112, 113}));
  EXPECT_EQ(mb.labels, (std::vector<int32_t>{202, 203, 204, 205, 210, 211, 212, 213}));
  EXPECT_EQ(mb.position_ids, (std::vector<int32_t>{2, 3, 4, 5, 2, 3, 4, 5}));
  EXPECT_EQ(mb.doc_start, (std::vector<int32_t>{0, 0, 0, 5, 0, 0, 0, 5}));
  EXPECT_EQ(mb.loss_mask, (std::vector<float>{1, 0, 1, 1, 1, 1, 0, 1}));
  EXPECT_EQ(mb.sample_doc_start, full.doc_start);
  EXPECT_DOUBLE_EQ(mb.sample_loss_tokens, 10.0);  // 16 positions, 6 of them masked
}

}  // namespace
}  // namespace mindspeed
