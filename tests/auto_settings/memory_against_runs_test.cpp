// The auto-settings models against the engine itself: pretrain_gpt runs (mock data, tiny GPT,
// 2 and 4 ranks) with the run report on (what the planner's measurement runs record: each
// rank's exact allocator peaks and per-group traffic), for layouts mixing DP, the distributed
// optimizer, FSDP, TP, SP, PP, VPP, CP (ring and Ulysses), EP and recompute. Parameters,
// gradients and optimizer state must equal the memory model to the byte on every rank; the
// modelled activations (no profile) and the modelled workspace of stages without the loss stay
// within the stated bounds of the measured peaks; the communication volumes equal the engine's
// own counters.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "auto_settings/memory_model.h"
#include "auto_settings/run_launcher.h"
#include "auto_settings/time_model.h"
#include "config/pipeline_layout.h"
#include "auto_settings_test_util.h"
#include "e2e/run_command.h"
#include "scratch_dir.h"

namespace mindspeed {
namespace {

const std::string kPretrain = MS_PRETRAIN_GPT;
const std::vector<std::string> kModel = testing::words(
    "--mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --num-layers 4 --hidden-size 64 "
    "--num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --global-batch-size 8 "
    "--train-iters 3 --lr 1e-3 --eval-iters 0 --log-interval 3 --use-flash-attn --num-threads 1");
struct Layout {
  int ranks;
  std::vector<std::string> flags;
};

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& a : v) s += " " + a;
  return s;
}

// Payload bytes per step of a group (the pipeline group's sends only: its receives mirror them).
double group_bytes(const RankReport& r, const std::string& group) {
  double total = 0.0;
  const auto it = r.traffic_bytes.find(group);
  if (it == r.traffic_bytes.end()) return 0.0;
  for (const auto& [kind, bytes] : it->second) {
    if (group != "pp" || kind == "send") total += static_cast<double>(bytes);
  }
  return total / static_cast<double>(r.iteration_seconds.size() - 1);
}

void check_layout(const Layout& layout) {
  std::vector<std::string> args = kModel;
  args.insert(args.end(), layout.flags.begin(), layout.flags.end());
  SCOPED_TRACE(std::to_string(layout.ranks) + " ranks:" + joined(layout.flags));
  const Configs c = testing::validated(args, layout.ranks);
  if (::testing::Test::HasFailure()) return;
  auto model = estimate_memory(c, layout.ranks);
  ASSERT_TRUE(model.ok()) << model.status().to_string();

  testing::ScratchDir dir("auto_settings_memory");
  const std::string report = dir.file("run");
  const testing::CommandResult run = testing::run_command(
      "MINDSPEED_AUTO_SETTINGS_REPORT=" + report + " " + testing::mpirun_prefix(MS_MPIRUN) +
      " -x MINDSPEED_AUTO_SETTINGS_REPORT -np " + std::to_string(layout.ranks) + " " + kPretrain +
      joined(args));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto measured = read_run_reports(report, layout.ranks);
  ASSERT_TRUE(measured.ok()) << measured.status().to_string();
  const CommVolumes volumes = comm_volumes(c, layout.ranks, *model);
  const ParallelConfig& pc = c.parallel;
  const int64_t data_parallel =
      layout.ranks /
      (pc.tensor_model_parallel_size * pc.pipeline_model_parallel_size * pc.context_parallel_size);
  auto pipeline = PipelineLayout::build(
      pc, c.model.num_layers,
      c.training.global_batch_size / (c.training.micro_batch_size * data_parallel));
  ASSERT_TRUE(pipeline.ok()) << pipeline.status().to_string();
  std::map<std::string, double> busiest;  // measured traffic of the busiest rank, per group
  for (const RankReport& r : measured->ranks) {
    const StageMemory& st = model->stages.at(static_cast<size_t>(r.pp_rank));
    auto peak = [&](MemoryCategory k) { return r.peak_bytes[static_cast<size_t>(k)]; };
    EXPECT_EQ(peak(MemoryCategory::kParameters), st.params) << "rank " << r.rank;
    if (!c.parallel
             .shard_gradients()) {  // sharded gradients peak above their shard (bench/README.md)
      EXPECT_EQ(peak(MemoryCategory::kGradients), st.grads) << "rank " << r.rank;
    }
    EXPECT_EQ(peak(MemoryCategory::kOptimizerState), st.optimizer) << "rank " << r.rank;
    // The modelled activations (no profile: the per-layer formulas exact, what lives outside the
    // layers fitted on another model) within 25 % of the measured peak.
    const double act = static_cast<double>(peak(MemoryCategory::kActivations));
    EXPECT_NEAR(static_cast<double>(st.activations), act, 0.25 * act) << "rank " << r.rank;
    // A stage without the loss: its modelled workspace (the layers' backward, the embedding on
    // the first stage) within 15 % of the measured peak.
    bool loss = false;
    for (const PipelineStage& stage : pipeline->stages_of_rank(r.pp_rank))
      loss = loss || stage.post_process;
    if (!loss) {
      const double ws = static_cast<double>(peak(MemoryCategory::kWorkspace));
      EXPECT_NEAR(static_cast<double>(st.workspace), ws, 0.15 * ws) << "rank " << r.rank;
    }
    for (const char* g : {"tp", "pp", "dp_cp", "embedding"})
      busiest[g] = std::max(busiest[g], group_bytes(r, g));
  }
  // The groups of more than one rank (a group of one counts its no-op collectives too); FSDP's
  // per-module traffic is not modelled (comm_volumes leaves it out).
  const ParallelConfig& p = c.parallel;
  const int dp_cp = layout.ranks / (p.tensor_model_parallel_size * p.pipeline_model_parallel_size);
  const std::pair<const char*, bool> groups[] = {{"tp", p.tensor_model_parallel_size > 1},
                                                 {"pp", p.pipeline_model_parallel_size > 1},
                                                 {"dp_cp", dp_cp > 1 && !p.use_custom_fsdp},
                                                 {"embedding", p.pipeline_model_parallel_size > 1}};
  for (const auto& [g, compared] : groups) {
    if (!compared) continue;
    const double want = volumes.contains(g) ? volumes.at(g) : 0.0;
    EXPECT_NEAR(busiest[g], want, 1e-9 * want + 1.0) << g << " bytes per step";
  }
}

TEST(AutoSettingsAgainstRuns, DataParallelOptimizerAndFsdp) {
  for (const Layout& l :
       {Layout{2, {"--bf16"}}, Layout{2, {"--bf16", "--use-distributed-optimizer"}},
        Layout{2, {"--use-distributed-optimizer"}},
        Layout{2,
               {"--bf16", "--use-distributed-optimizer", "--use-custom-fsdp",
                "--data-parallel-sharding-strategy", "optim_grads",
                "--no-gradient-accumulation-fusion"}}}) {
    check_layout(l);
  }
}

TEST(AutoSettingsAgainstRuns, TensorSequenceAndContextParallel) {
  for (const Layout& l :
       {Layout{2, {"--bf16", "--tensor-model-parallel-size", "2"}},
        Layout{2, {"--bf16", "--tensor-model-parallel-size", "2", "--sequence-parallel"}},
        Layout{2, {"--tensor-model-parallel-size", "2", "--recompute-granularity", "selective"}},
        Layout{2, {"--bf16", "--context-parallel-size", "2"}},
        Layout{2,
               {"--bf16", "--context-parallel-size", "2", "--context-parallel-algo",
                "ulysses_cp_algo"}}}) {
    check_layout(l);
  }
}

TEST(AutoSettingsAgainstRuns, PipelineSchedulesAndRecompute) {
  for (const Layout& l :
       {Layout{2, {"--bf16", "--pipeline-model-parallel-size", "2"}},
        Layout{2,
               {"--bf16", "--pipeline-model-parallel-size", "2", "--recompute-granularity", "full",
                "--recompute-method", "uniform", "--recompute-num-layers", "1"}},
        Layout{2,
               {"--bf16", "--pipeline-model-parallel-size", "2", "--recompute-granularity", "full",
                "--recompute-method", "block", "--recompute-num-layers", "1"}},
        Layout{4,
               {"--bf16", "--tensor-model-parallel-size", "2", "--sequence-parallel",
                "--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank",
                "2"}}}) {
    check_layout(l);
  }
}

}  // namespace
}  // namespace mindspeed
