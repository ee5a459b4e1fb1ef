// The pipeline phase on shared cores against closed forms: with a core per rank it is the
// schedule simulator's makespan (1F1B, interleaved, DualPipeV with and without dw-detach); on
// one core it is the whole work (someone always has work ready); a heavy last stage sets the
// pace of the 1F1B steady state, at a speed that depends on how much of their cores the
// waiting ranks lend it.
#include "auto_settings/step_simulation.h"

#include <gtest/gtest.h>

#include <numeric>

#include "auto_settings_test_util.h"
#include "pipeline_parallel/schedule_plan.h"

namespace mindspeed {
namespace {

constexpr int64_t kMicrobatches = 8;

PipelineLayout layout_of(const std::string& flags, int world) {
  const Configs c = testing::validated(
      testing::words("--mock-data --tokenizer-type NullTokenizer --num-layers 8 --hidden-size 64 "
                     "--num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 "
                     "--micro-batch-size 1 --global-batch-size 8 --train-iters 1 --lr 1e-3 " +
                     flags),
      world);
  auto layout = PipelineLayout::build(c.parallel, c.model.num_layers, kMicrobatches);
  EXPECT_TRUE(layout.ok()) << layout.status().to_string();
  return *layout;
}

// simulate_plans' unit costs: a rank's whole share costs F 1, B 2, W 1.
std::vector<StageCosts> unit_costs(const PipelineLayout& layout) {
  const double share = 1.0 / layout.chunks_per_rank;
  return std::vector<StageCosts>(static_cast<size_t>(layout.num_stages()),
                                 StageCosts{share, 2.0 * share, share});
}

TEST(AutoSettingsStepSimulation, DedicatedCoresGiveThePlansMakespan) {
  for (const std::string flags :
       {"--pipeline-model-parallel-size 4",
        "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 1",
        "--pipeline-model-parallel-size 4 --schedules-method dualpipev "
        "--untie-embeddings-and-output-weights",
        "--pipeline-model-parallel-size 4 --schedules-method dualpipev --dualpipev-dw-detach "
        "--untie-embeddings-and-output-weights"}) {
    SCOPED_TRACE(flags);
    const PipelineLayout layout = layout_of(flags, 4);
    const SharedStepSimulation sim =
        simulate_shared_step(layout, kMicrobatches, unit_costs(layout), 1.0, 0.0, 0.0);
    const PlanSimulation plan = simulate_plans(layout, kMicrobatches);
    ASSERT_TRUE(sim.completes) << sim.stuck;
    EXPECT_NEAR(sim.makespan, plan.makespan, 1e-9);
    for (int r = 0; r < 4; ++r) EXPECT_NEAR(sim.busy_seconds[r], plan.busy[r], 1e-9);
  }
  // 1F1B: (m + P - 1) (F + B).
  const PipelineLayout one_f_one_b = layout_of("--pipeline-model-parallel-size 4", 4);
  EXPECT_NEAR(simulate_shared_step(one_f_one_b, kMicrobatches, unit_costs(one_f_one_b), 1.0, 0.0, 0.0)
                  .makespan,
              (kMicrobatches + 3) * 3.0, 1e-9);
}

TEST(AutoSettingsStepSimulation, OneCoreRunsTheWholeWork) {
  const PipelineLayout layout = layout_of("--pipeline-model-parallel-size 2", 4);
  std::vector<StageCosts> costs = {{1.0, 2.0, 1.0}, {1.5, 4.0, 1.0}};
  // Two data-parallel copies of each of the two pipeline ranks on one core.
  const SharedStepSimulation sim = simulate_shared_step(layout, kMicrobatches, costs, 2.0, 1.0, 0.0);
  ASSERT_TRUE(sim.completes);
  EXPECT_NEAR(sim.makespan, 2.0 * kMicrobatches * (1.0 + 2.0 + 1.5 + 4.0), 1e-9);
}

TEST(AutoSettingsStepSimulation, AHeavyLastStageSetsThePace) {
  // 1F1B on 4 stages with the last 4x the others: its m (F + B) plus the others' ramp.
  const PipelineLayout layout = layout_of("--pipeline-model-parallel-size 4", 4);
  std::vector<StageCosts> costs(4, StageCosts{1.0, 2.0, 1.0});
  costs[3] = {4.0, 8.0, 4.0};
  const SharedStepSimulation dedicated = simulate_shared_step(layout, kMicrobatches, costs, 1.0, 0.0, 0.0);
  ASSERT_TRUE(dedicated.completes);
  EXPECT_NEAR(dedicated.makespan, kMicrobatches * 12.0 + 3 * 1.0 + 3 * 2.0, 1e-9);
  EXPECT_NEAR(dedicated.busy_seconds[3], kMicrobatches * 12.0, 1e-9);
  // On two cores the last stage still has one to itself whenever at most one other rank works:
  // the step is at least its work and at least the whole work over two cores.
  const SharedStepSimulation shared = simulate_shared_step(layout, kMicrobatches, costs, 1.0, 2.0, 0.0);
  const double total = kMicrobatches * (3 * 3.0 + 12.0);
  EXPECT_GE(shared.makespan, std::max(kMicrobatches * 12.0, total / 2.0) - 1e-9);
  EXPECT_LT(shared.makespan, total / 2.0 * 1.5);
  // A waiting rank that keeps its whole share lends nothing: every unfinished rank at half
  // speed, slower than when it lends half of it.
  const SharedStepSimulation polling = simulate_shared_step(layout, kMicrobatches, costs, 1.0, 2.0, 1.0);
  const SharedStepSimulation half = simulate_shared_step(layout, kMicrobatches, costs, 1.0, 2.0, 0.5);
  EXPECT_GT(polling.makespan, half.makespan);
  EXPECT_GT(half.makespan, shared.makespan);
  EXPECT_GE(polling.makespan, 2.0 * kMicrobatches * 12.0 - 1e-9);  // the last stage at half speed
}

}  // namespace
}  // namespace mindspeed
