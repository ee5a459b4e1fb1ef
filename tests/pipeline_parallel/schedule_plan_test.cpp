// Schedule plans: Megatron's interleaved schedule table and warm-up counts, DeepSeek's
// DualPipeV phase counts, every micro-batch forward and backward exactly once per chunk in
// order, and, by simulation with unit costs, that no plan can leave ranks waiting on each
// other, with the bubble and live-activation counts the formulas give.
#include "pipeline_parallel/schedule_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace mindspeed {
namespace {

PipelineLayout layout_of(int pp, int v, int64_t layers, int64_t M, int64_t group = 0, bool dualpipev = false,
                         bool dw_detach = false) {
  ParallelConfig p;
  p.pipeline_model_parallel_size = pp;
  if (v > 1) p.num_virtual_stages_per_pipeline_rank = v;
  p.microbatch_group_size_per_vp_stage = group;
  p.dualpipev = dualpipev;
  p.dualpipev_dw_detach = dw_detach;
  auto layout = PipelineLayout::build(p, layers, M);
  EXPECT_TRUE(layout.ok()) << layout.status().to_string();
  return *layout;
}

std::string describe(const std::vector<PipelineOp>& ops) {
  std::string s;
  for (const PipelineOp& op : ops) {
    s += op.kind == PipelineOpKind::kForward ? "F" : op.kind == PipelineOpKind::kBackward ? "B" : "W";
    if (op.kind != PipelineOpKind::kWeight) s += std::to_string(op.chunk) + "." + std::to_string(op.microbatch);
    if (op.defer_weight_grad) s += "*";
    s += " ";
  }
  return s;
}

// Every chunk runs F and B of micro-batches 0..M-1 in order, each B after its F; W steps
// match the deferred backwards one for one, never before them.
void expect_well_formed(const PipelineLayout& layout, int rank, int64_t M) {
  const auto ops = schedule_plan(layout, rank, M);
  std::map<int, int64_t> next_f, next_b;
  int64_t deferred = 0;
  for (const PipelineOp& op : ops) {
    if (op.kind == PipelineOpKind::kForward) {
      EXPECT_EQ(op.microbatch, next_f[op.chunk]++) << describe(ops);
    } else if (op.kind == PipelineOpKind::kBackward) {
      EXPECT_EQ(op.microbatch, next_b[op.chunk]++) << describe(ops);
      EXPECT_LT(op.microbatch, next_f[op.chunk]) << "backward before its forward: " << describe(ops);
      if (op.defer_weight_grad) ++deferred;
    } else {
      EXPECT_GT(deferred--, 0) << "W with nothing deferred: " << describe(ops);
    }
  }
  EXPECT_EQ(deferred, 0) << describe(ops);
  for (int c = 0; c < layout.chunks_per_rank; ++c) {
    EXPECT_EQ(next_f[c], M) << "rank " << rank << " chunk " << c;
    EXPECT_EQ(next_b[c], M) << "rank " << rank << " chunk " << c;
  }
  for (const PipelineOp& op : schedule_plan(layout, rank, M, /*forward_only=*/true)) {
    EXPECT_EQ(op.kind, PipelineOpKind::kForward);
  }
}

TEST(SchedulePlan, OneFOneBWarmupSteadyCooldown) {
  const PipelineLayout layout = layout_of(4, 1, 4, 6);
  EXPECT_EQ(describe(schedule_plan(layout, 0, 6)), "F0.0 F0.1 F0.2 F0.3 B0.0 F0.4 B0.1 F0.5 B0.2 B0.3 B0.4 B0.5 ");
  EXPECT_EQ(describe(schedule_plan(layout, 3, 6)), "F0.0 B0.0 F0.1 B0.1 F0.2 B0.2 F0.3 B0.3 F0.4 B0.4 F0.5 B0.5 ");
  for (int r = 0; r < 4; ++r) EXPECT_EQ(num_warmup_microbatches(layout, r, 6), 3 - r);
  EXPECT_EQ(num_warmup_microbatches(layout, 0, 2), 2);  // capped at M
}

TEST(SchedulePlan, InterleavedFollowsMegatronsScheduleTable) {
  // megatron_facts.md 4.3: PP=2, VP=2, M=5, G=3 -> micro-batches 0 1 2 0 1 2 3 4 3 4 on
  // chunks 0 0 0 1 1 1 0 0 1 1.
  const PipelineLayout layout = layout_of(2, 2, 4, 5, 3);
  std::string forwards;
  for (const PipelineOp& op : schedule_plan(layout, 1, 5)) {
    if (op.kind == PipelineOpKind::kForward) forwards += std::to_string(op.microbatch) + std::to_string(op.chunk) + " ";
  }
  EXPECT_EQ(forwards, "00 10 20 01 11 21 30 40 31 41 ");
  // Warm-up (P - r - 1) * 2 + (v - 1) * G, capped at M * v.
  EXPECT_EQ(num_warmup_microbatches(layout, 0, 5), 2 + 3);
  EXPECT_EQ(num_warmup_microbatches(layout, 1, 5), 0 + 3);
  const PipelineLayout pp4 = layout_of(4, 2, 8, 4);
  EXPECT_EQ(num_warmup_microbatches(pp4, 0, 4), 8);  // 6 + 4 > 8: all forwards first
  // The backward of step k is chunk v-1-c of table entry k: rank 1 starts the steady state
  // with B on its last chunk.
  const auto ops = schedule_plan(layout, 1, 5);
  EXPECT_EQ(ops[3].kind, PipelineOpKind::kForward);
  EXPECT_EQ(ops[4].kind, PipelineOpKind::kBackward);
  EXPECT_EQ(ops[4].chunk, 1);
  EXPECT_EQ(ops[4].microbatch, 0);
}

TEST(SchedulePlan, DualPipeVPhases) {
  // DeepSeek's rank-r phase counts: 2(P-r-1) F0 first, then r+1 (F0, F1) pairs.
  const PipelineLayout layout = layout_of(4, 1, 8, 8, 0, true);
  const auto r0 = schedule_plan(layout, 0, 8);
  EXPECT_EQ(describe({r0.begin(), r0.begin() + 8}), "F0.0 F0.1 F0.2 F0.3 F0.4 F0.5 F0.6 F1.0 ");
  const auto r3 = schedule_plan(layout, 3, 8);
  EXPECT_EQ(describe({r3.begin(), r3.begin() + 8}), "F0.0 F1.0 F0.1 F1.1 F0.2 F1.2 F0.3 F1.3 ");
  for (const auto& op : r0) EXPECT_NE(op.kind, PipelineOpKind::kWeight) << "no W without --dualpipev-dw-detach";
  // With dw-detach: the zero-bubble backwards defer their weight gradients, one W each.
  const PipelineLayout zb = layout_of(4, 1, 8, 8, 0, true, true);
  for (int r = 0; r < 4; ++r) {
    int64_t deferred = 0, weights = 0;
    for (const auto& op : schedule_plan(zb, r, 8)) {
      deferred += op.defer_weight_grad ? 1 : 0;
      weights += op.kind == PipelineOpKind::kWeight ? 1 : 0;
    }
    EXPECT_EQ(deferred, 2 * (4 - r - 1) + r + 1) << "rank " << r;
    EXPECT_EQ(weights, deferred) << "rank " << r;
  }
}

TEST(SchedulePlan, EveryPlanIsWellFormedAndCompletes) {
  int checked = 0;
  for (int P : {2, 3, 4, 8}) {
    for (int64_t M = 1; M <= 3 * P + 1; ++M) {
      const PipelineLayout one = layout_of(P, 1, P, M);
      for (int r = 0; r < P; ++r) expect_well_formed(one, r, M);
      EXPECT_TRUE(simulate_plans(one, M).completes);
      for (int v : {2, 3}) {
        for (int64_t G = P; G <= M; ++G) {
          const int64_t rest = M % G;
          if (rest != 0 && rest < P) continue;  // refused (Megatron's rule)
          const PipelineLayout inter = layout_of(P, v, P * v, M, G);
          for (int r = 0; r < P; ++r) expect_well_formed(inter, r, M);
          const PlanSimulation sim = simulate_plans(inter, M);
          EXPECT_TRUE(sim.completes) << "P " << P << " v " << v << " M " << M << " G " << G << ": " << sim.stuck;
          EXPECT_TRUE(simulate_plans(inter, M, {}, /*forward_only=*/true).completes);
          ++checked;
        }
      }
      if (M >= 2 * P) {
        for (bool detach : {false, true}) {
          const PipelineLayout v = layout_of(P, 1, 2 * P, M, 0, true, detach);
          for (int r = 0; r < P; ++r) expect_well_formed(v, r, M);
          const PlanSimulation sim = simulate_plans(v, M);
          EXPECT_TRUE(sim.completes) << "DualPipeV P " << P << " M " << M << ": " << sim.stuck;
          EXPECT_TRUE(simulate_plans(v, M, {}, true).completes);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(SchedulePlan, BubbleAndActivationsFollowTheFormulas) {
  for (int P : {2, 4, 8}) {
    for (int64_t M : {int64_t{P}, int64_t{2 * P}, int64_t{4 * P}}) {
      // 1F1B: bubble (P-1)/M, stage r keeps min(P-r, M) micro-batches alive.
      const PlanSimulation one = simulate_plans(layout_of(P, 1, P, M), M);
      ASSERT_TRUE(one.completes);
      EXPECT_NEAR(one.bubble_fraction(), static_cast<double>(P - 1) / M, 1e-12) << "P " << P << " M " << M;
      for (int r = 0; r < P; ++r) EXPECT_EQ(one.peak_in_flight[r], std::min<int64_t>(P - r, M));
      // Interleaved with v chunks: the bubble shrinks to (P-1)/(v M).
      for (int v : {2, 4}) {
        const PlanSimulation inter = simulate_plans(layout_of(P, v, P * v, M), M);
        ASSERT_TRUE(inter.completes);
        EXPECT_NEAR(inter.bubble_fraction(), static_cast<double>(P - 1) / (v * M), 1e-9)
            << "P " << P << " v " << v << " M " << M;
      }
      // DualPipeV (M >= 2P): a smaller bubble than 1F1B, and smaller still with dw-detach.
      if (M >= 2 * P) {
        const PlanSimulation v = simulate_plans(layout_of(P, 1, 2 * P, M, 0, true), M);
        const PlanSimulation zb = simulate_plans(layout_of(P, 1, 2 * P, M, 0, true, true), M);
        ASSERT_TRUE(v.completes && zb.completes);
        EXPECT_LT(v.bubble_fraction(), one.bubble_fraction()) << "P " << P << " M " << M;
        EXPECT_LE(zb.bubble_fraction(), v.bubble_fraction()) << "P " << P << " M " << M;
      }
    }
  }
}

}  // namespace
}  // namespace mindspeed
