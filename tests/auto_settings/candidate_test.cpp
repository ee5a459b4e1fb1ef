// Candidates and the search space: the flags printed for a candidate give, through the engine's
// own parser and validation, exactly the configuration the planner evaluated; the searched and
// planner flags are stripped in both spellings, every registered planner flag; the space holds only
// what validate_configs accepts, each layout once, and the layouts it must (and must not) hold.
#include "auto_settings/candidate.h"

#include <gtest/gtest.h>

#include <set>

#include "auto_settings/search_space.h"
#include "auto_settings_test_util.h"
#include "cli/arguments.h"

namespace mindspeed {
namespace {

const std::vector<std::string> kModel = testing::words(
    "--mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --num-layers 4 --hidden-size 64 "
    "--num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 --global-batch-size 8 "
    "--train-iters 2 --lr 1e-3 --bf16 --use-flash-attn");

using testing::parsed;

TEST(AutoSettingsCandidate, StripsSearchedAndPlannerFlagsInBothSpellings) {
  const std::vector<std::string> args = {"--num-layers",
                                         "4",
                                         "--tensor-model-parallel-size",
                                         "2",
                                         "--sequence-parallel",
                                         "--micro-batch-size=2",
                                         "--auto-settings",
                                         "--auto-settings-type",
                                         "mixed",
                                         "--nproc-per-node=4",
                                         "--lr",
                                         "1e-3",
                                         "--recompute-granularity",
                                         "full",
                                         "--use-distributed-optimizer"};
  EXPECT_EQ(strip_searched_flags(args),
            (std::vector<std::string>{"--num-layers", "4", "--lr", "1e-3"}));
}

// Every planner flag the parser registers (a measurement run would refuse it without
// --auto-settings), the ones added later included.
TEST(AutoSettingsCandidate, StripsEveryRegisteredPlannerFlag) {
  const std::set<std::string> node_flags = {"--target-nnodes", "--nnodes",      "--nproc-per-node",
                                            "--node-rank",     "--master-addr", "--master-port",
                                            "--prof-file"};
  int planner_flags = 0;
  for (const std::string& name : registered_flag_names()) {
    if (!name.starts_with("--auto-settings") && !node_flags.contains(name)) continue;
    ++planner_flags;
    const std::vector<std::string> args = name == "--auto-settings"
                                              ? std::vector<std::string>{name, "--lr", "1e-3"}
                                              : std::vector<std::string>{name, "1", "--lr", "1e-3"};
    EXPECT_EQ(strip_searched_flags(args), (std::vector<std::string>{"--lr", "1e-3"})) << name;
  }
  EXPECT_GE(planner_flags, 19);
}

TEST(AutoSettingsCandidate, PrintedFlagsParseToTheEvaluatedConfiguration) {
  const Configs base = parsed(kModel);
  SearchLimits limits;
  limits.world_size = 4;
  limits.ranks_per_node = 4;
  const SearchSpace space = enumerate_candidates(base, 4095, limits);
  ASSERT_GT(space.legal.size(), 50u);
  for (const LegalCandidate& lc : space.legal) {
    std::vector<std::string> args = kModel;
    const std::vector<std::string> flags = candidate_flags(lc.candidate);
    args.insert(args.end(), flags.begin(), flags.end());
    Configs c = parsed(args);
    ASSERT_TRUE(validate_configs(c, 4, 4095).ok()) << candidate_name(lc.candidate, 4);
    const Configs& e = lc.configs;
    const std::string name = candidate_name(lc.candidate, 4);
    EXPECT_EQ(c.parallel.tensor_model_parallel_size, e.parallel.tensor_model_parallel_size) << name;
    EXPECT_EQ(c.parallel.sequence_parallel, e.parallel.sequence_parallel) << name;
    EXPECT_EQ(c.parallel.pipeline_model_parallel_size, e.parallel.pipeline_model_parallel_size)
        << name;
    EXPECT_EQ(c.parallel.num_virtual_stages_per_pipeline_rank,
              e.parallel.num_virtual_stages_per_pipeline_rank)
        << name;
    EXPECT_EQ(c.parallel.dualpipev, e.parallel.dualpipev) << name;
    EXPECT_EQ(c.parallel.context_parallel_size, e.parallel.context_parallel_size) << name;
    EXPECT_EQ(c.parallel.cp.algo, e.parallel.cp.algo) << name;
    EXPECT_EQ(c.parallel.cp.ulysses_degree, e.parallel.cp.ulysses_degree) << name;
    EXPECT_EQ(c.parallel.use_distributed_optimizer, e.parallel.use_distributed_optimizer) << name;
    EXPECT_EQ(c.training.micro_batch_size, e.training.micro_batch_size) << name;
    EXPECT_EQ(c.training.global_batch_size, e.training.global_batch_size) << name;
    EXPECT_EQ(c.model.recompute.granularity, e.model.recompute.granularity) << name;
    EXPECT_EQ(c.model.recompute.method, e.model.recompute.method) << name;
    EXPECT_EQ(c.model.recompute.num_layers, e.model.recompute.num_layers) << name;
  }
}

TEST(AutoSettingsSearchSpace, HoldsOnlyWhatTheEngineAcceptsEachLayoutOnce) {
  Configs base = parsed(kModel);
  SearchLimits limits;
  limits.world_size = 4;
  limits.ranks_per_node = 4;
  const SearchSpace space = enumerate_candidates(base, 4095, limits);
  std::set<std::string> names;
  bool tp2_pp2 = false, dualpipev = false, interleaved = false, ulysses4 = false;
  for (const LegalCandidate& lc : space.legal) {
    const Candidate& c = lc.candidate;
    EXPECT_TRUE(names.insert(candidate_name(c, 4)).second) << "twice: " << candidate_name(c, 4);
    EXPECT_EQ(c.tp * c.pp * c.cp * c.dp(4), 4);
    EXPECT_EQ(8 % (c.mbs * c.dp(4)), 0);
    tp2_pp2 = tp2_pp2 || (c.tp == 2 && c.pp == 2);
    dualpipev = dualpipev || c.dualpipev;
    interleaved = interleaved || c.vpp == 2;
    ulysses4 = ulysses4 || (c.cp == 4 && c.cp_algo == CpAlgo::kUlysses);
  }
  EXPECT_TRUE(tp2_pp2);
  EXPECT_TRUE(interleaved);
  EXPECT_TRUE(ulysses4);
  // DualPipeV needs untied embeddings (validate_configs refuses it here): never proposed.
  EXPECT_FALSE(dualpipev);
  EXPECT_EQ(
      space.considered, static_cast<int64_t>(space.legal.size()) + [&] {
        int64_t n = 0;
        for (const auto& [reason, count] : space.refusals) n += count;
        return n;
      }());
  EXPECT_FALSE(space.refusals.empty());
  // Untied embeddings admit DualPipeV.
  base.model.untie_embeddings_and_output_weights = true;
  bool any_dualpipev = false;
  for (const LegalCandidate& lc : enumerate_candidates(base, 4095, limits).legal) {
    any_dualpipev = any_dualpipev || lc.candidate.dualpipev;
  }
  EXPECT_TRUE(any_dualpipev);
}

TEST(AutoSettingsSearchSpace, TensorParallelismStaysInsideANode) {
  const Configs base = parsed(kModel);
  SearchLimits limits;
  limits.world_size = 4;
  limits.ranks_per_node = 2;
  for (const LegalCandidate& lc : enumerate_candidates(base, 4095, limits).legal)
    EXPECT_LE(lc.candidate.tp, 2);
}

}  // namespace
}  // namespace mindspeed
