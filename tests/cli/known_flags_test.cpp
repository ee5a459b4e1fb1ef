// Known-flag catalogue: sorted and unique, well-formed names, expected arities and sources of
// well-known Megatron-LM, MindSpeed and MindSpeed-LLM flags, nullptr for names that no project
// defines.
#include "cli/known_flags.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <string_view>

namespace mindspeed {
namespace {

TEST(KnownFlags, SortedAndUnique) {
  const auto flags = known_flags();
  ASSERT_GT(flags.size(), 1100u);
  for (std::size_t i = 1; i < flags.size(); ++i) {
    EXPECT_LT(flags[i - 1].name, flags[i].name) << "at index " << i;
  }
}

TEST(KnownFlags, NamesSourcesAndGroupsAreWellFormed) {
  for (const KnownFlag& f : known_flags()) {
    ASSERT_GT(f.name.size(), 2u);
    EXPECT_EQ(f.name.substr(0, 2), "--") << f.name;
    EXPECT_NE(f.name[2], '-') << f.name;
    for (char c : f.name) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
      EXPECT_TRUE(ok) << f.name;
    }
    EXPECT_TRUE(f.source == "megatron" || f.source == "mindspeed" || f.source == "mindspeed-llm")
        << f.name;
    EXPECT_FALSE(f.group.empty()) << f.name;
  }
}

TEST(KnownFlags, EveryEntryIsFoundByName) {
  for (const KnownFlag& f : known_flags()) {
    const KnownFlag* found = find_known_flag(f.name);
    ASSERT_NE(found, nullptr) << f.name;
    EXPECT_EQ(found, &f);
  }
}

struct Expected {
  std::string_view name;
  FlagArity arity;
  std::string_view source;  // empty: either project
};

TEST(KnownFlags, WellKnownFlagsHaveTheRightArity) {
  const Expected expected[] = {
      {"--tensor-model-parallel-size", FlagArity::kOne, "megatron"},
      {"--pipeline-model-parallel-size", FlagArity::kOne, "megatron"},
      {"--sequence-parallel", FlagArity::kNone, "megatron"},
      {"--data-path", FlagArity::kMany, "megatron"},
      {"--use-flash-attn", FlagArity::kNone, ""},
      {"--optimization-level", FlagArity::kOne, "mindspeed"},
      {"--context-parallel-algo", FlagArity::kOne, ""},
      {"--recompute-granularity", FlagArity::kOne, "megatron"},
      {"--moe-router-topk", FlagArity::kOne, "megatron"},
      {"--profile-step-start", FlagArity::kOne, "megatron"},
      {"--no-gradient-accumulation-fusion", FlagArity::kNone, "megatron"},
      {"--cp-comm-type", FlagArity::kMany, "megatron"},
      {"--use-fused-rmsnorm", FlagArity::kNone, "mindspeed"},
      {"--use-fused-swiglu", FlagArity::kNone, "mindspeed"},
      {"--use-fused-rotary-pos-emb", FlagArity::kNone, "mindspeed"},
      {"--use-ascend-coc", FlagArity::kNone, "mindspeed"},
      {"--swap-attention", FlagArity::kNone, "mindspeed"},
      {"--reuse-fp32-param", FlagArity::kNone, "mindspeed"},
      {"--npu-deterministic", FlagArity::kNone, "mindspeed"},
      {"--profile-level", FlagArity::kOne, "mindspeed"},
      // core_v0.12.1 flags the first catalogue lacked.
      {"--microbatch-group-size-per-virtual-pipeline-stage", FlagArity::kOne, "megatron"},
      {"--pipeline-model-parallel-split-rank", FlagArity::kOne, "megatron"},
      {"--heterogeneous-layers-config-path", FlagArity::kOne, "megatron"},
      // MindSpeed-LLM (mindspeed_llm/training/arguments.py and its features manager).
      {"--shared-expert-gate", FlagArity::kNone, "mindspeed-llm"},
      {"--original-max-position-embeddings", FlagArity::kOne, "mindspeed-llm"},
      {"--lora-target-modules", FlagArity::kMany, "mindspeed-llm"},
      {"--o2-optimizer", FlagArity::kNone, "mindspeed-llm"},
      {"--prompt-type", FlagArity::kOne, "mindspeed-llm"},
      {"--dpo-beta", FlagArity::kOne, "mindspeed-llm"},
  };
  for (const Expected& e : expected) {
    const KnownFlag* f = find_known_flag(e.name);
    ASSERT_NE(f, nullptr) << e.name;
    EXPECT_EQ(f->arity, e.arity) << e.name;
    if (!e.source.empty()) {
      EXPECT_EQ(f->source, e.source) << e.name;
    }
  }
}

TEST(KnownFlags, BothSpellingsOfAnAliasAreListed) {
  const KnownFlag* a = find_known_flag("--save-interval");
  const KnownFlag* b = find_known_flag("--persistent-save-interval");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->arity, FlagArity::kOne);
  EXPECT_EQ(b->arity, FlagArity::kOne);
  EXPECT_NE(find_known_flag("--override-opt_param-scheduler"), nullptr);
  EXPECT_NE(find_known_flag("--override-opt-param-scheduler"), nullptr);
}

TEST(KnownFlags, UnknownNamesReturnNull) {
  EXPECT_EQ(find_known_flag(""), nullptr);
  EXPECT_EQ(find_known_flag("--"), nullptr);
  EXPECT_EQ(find_known_flag("--definitely-not-a-megatron-flag"), nullptr);
  EXPECT_EQ(find_known_flag("tensor-model-parallel-size"), nullptr);
  EXPECT_EQ(find_known_flag("--tensor-model-parallel-size="), nullptr);
  EXPECT_EQ(find_known_flag("--tensor-model-parallel"), nullptr);
  EXPECT_EQ(find_known_flag("--zzz"), nullptr);
  EXPECT_EQ(find_known_flag("--aaa"), nullptr);
}

}  // namespace
}  // namespace mindspeed
