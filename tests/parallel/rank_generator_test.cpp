// Process-group layouts against Megatron's worked examples (megatron_facts.md §3), the
// alternative rank order, the expert generator, and refusal of sizes that do not divide or
// are not positive (an error naming the flag, not a division by zero).
#include "parallel/rank_generator.h"

#include <gtest/gtest.h>

namespace mindspeed {
namespace {

ParallelGroups build(ParallelLayout l) {
  auto g = build_parallel_groups(l);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? *g : ParallelGroups{};
}

TEST(RankGenerator, World8Tp2Pp2Dp2) {
  const ParallelGroups g = build({.world_size = 8, .tp = 2, .pp = 2});
  EXPECT_EQ(g.groups.at("tp"), (RankGroups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups.at("dp"), (RankGroups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups.at("pp"), (RankGroups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups.at("mp"), (RankGroups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(g.groups.at("embedding"), (RankGroups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups.at("position-embedding"), (RankGroups{{0}, {1}, {2}, {3}}));
}

TEST(RankGenerator, World8Tp2Cp2Dp2) {
  const ParallelGroups g = build({.world_size = 8, .tp = 2, .cp = 2});
  EXPECT_EQ(g.groups.at("tp"), (RankGroups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups.at("cp"), (RankGroups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups.at("dp"), (RankGroups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups.at("dp-cp"), (RankGroups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(g.groups.at("tp-cp"), (RankGroups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
}

TEST(RankGenerator, ExpertSideWorld8Ep4) {
  const ParallelGroups g = build({.world_size = 8, .tp = 1, .ep = 4, .etp = 1});
  EXPECT_EQ(g.groups.at("ep"), (RankGroups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(g.groups.at("expert-dp"), (RankGroups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(RankGenerator, TpPpDpOrderPutsDpLast) {
  const ParallelGroups g = build({.world_size = 8, .tp = 2, .pp = 2, .tp_pp_dp_order = true});
  EXPECT_EQ(g.groups.at("pp"), (RankGroups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups.at("dp"), (RankGroups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(RankGenerator, ALargeLayoutIsCheckedWithoutProcesses) {
  // 1024 ranks: tp 8, pp 4 -> dp 32; every rank appears once in each kind of group.
  const ParallelGroups g = build({.world_size = 1024, .tp = 8, .pp = 4});
  for (const char* kind : {"tp", "pp", "dp", "mp", "dp-cp", "tp-dp-cp"}) {
    std::vector<int> seen(1024, 0);
    for (const auto& grp : g.groups.at(kind))
      for (int r : grp) ++seen[r];
    for (int r = 0; r < 1024; ++r) ASSERT_EQ(seen[r], 1) << kind << " rank " << r;
  }
  EXPECT_EQ(g.groups.at("dp").size(), 32u);
  EXPECT_EQ(g.groups.at("dp")[0].size(), 32u);
  EXPECT_EQ(g.groups.at("tp")[1], (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_NE(format_parallel_groups({.world_size = 1024, .tp = 8, .pp = 4}, g).find("dp (32 groups of 32)"),
            std::string::npos);
}

TEST(RankGenerator, RefusesSizesThatDoNotDivide) {
  auto g = build_parallel_groups({.world_size = 6, .tp = 4});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("world size (6) is not divisible"), std::string::npos);
  auto e = build_parallel_groups({.world_size = 8, .tp = 2, .ep = 3});
  EXPECT_FALSE(e.ok());
  auto o = RankGenerator::create(2, 1, 2, 1, 1, "tp-dp-pp-xx");
  EXPECT_FALSE(o.ok());
}

TEST(RankGenerator, RefusesSizesBelowOne) {
  // Each divided by zero (SIGFPE) before the sizes were checked.
  auto g = build_parallel_groups({.world_size = 8, .tp = 0});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("--tensor-model-parallel-size is 0, expected at least 1"), std::string::npos)
      << g.status().message();
  g = build_parallel_groups({.world_size = 8, .tp = 2, .ep = 0});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("--expert-model-parallel-size is 0"), std::string::npos) << g.status().message();
  g = build_parallel_groups({.world_size = 0});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("world size is 0"), std::string::npos) << g.status().message();
  auto r = RankGenerator::create(2, 1, 0, 1, 1, "tp-cp-ep-dp-pp");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("dp size is 0"), std::string::npos) << r.status().message();
}

TEST(RankGenerator, FormattingAnIncompleteGroupSetNamesWhatIsMissing) {
  // format_parallel_groups used std::map::at, which threw std::out_of_range.
  ParallelGroups partial;
  partial.groups["tp"] = {{0, 1}};
  const std::string text = format_parallel_groups({.world_size = 2, .tp = 2}, partial);
  EXPECT_NE(text.find("tp (1 groups of 2): [0,1]"), std::string::npos) << text;
  EXPECT_NE(text.find("dp: (not built)"), std::string::npos) << text;
}

}  // namespace
}  // namespace mindspeed
