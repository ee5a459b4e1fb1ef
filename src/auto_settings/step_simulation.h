// The auto-settings time model's pipeline phase: every pipeline rank's plan (schedule_plan.h:
// 1F1B, interleaved, DualPipeV, or one stage) run as events with each stage's own forward and
// backward seconds (the stage holding the output layer and the loss is the heavy one), on cores
// the ranks share. `replicas` ranks run each pipeline position in step (the data-, tensor- and
// context-parallel copies); while ranks outnumber the cores, each rank with work ready runs at
// cores / demand (processor sharing), where a rank waiting for its neighbour's activation or
// gradient demands `waiting_share` of what a working one does (Open MPI's wait polls, yielding
// when oversubscribed: it lends part of its core, not all; the profile measures the share).
// With as many cores as ranks it is the plan's makespan at the given costs (simulate_plans()
// with unequal stages). The first model, a uniform-stage makespan bounded by the busiest rank's
// shared-speed work, put the 4-stage steps of the auto-settings grid 40-100 % high: the last
// stage's loss ran while the other stages waited, on more than its share of the cores.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/pipeline_layout.h"

namespace mindspeed {

/// One micro-batch through one pipeline stage, seconds at a dedicated core.
struct StageCosts {
  double forward = 0.0;
  double backward = 0.0;  ///< a whole backward; a deferred one costs backward - weight
  double weight = 0.0;    ///< its weight-gradient part (a W step of DualPipeV's dw-detach)
};

struct SharedStepSimulation {
  bool completes = false;  ///< false: some ranks wait on each other forever
  std::string stuck;       ///< the first op of each stuck rank, when !completes
  double makespan = 0.0;   ///< seconds until the last op ends
  std::vector<double> busy_seconds;  ///< per pipeline rank: wall seconds it computed
};

/// `stage_costs[i]` belongs to layout.stages[i]; `cores` <= 0: as many as ranks.
SharedStepSimulation simulate_shared_step(const PipelineLayout& layout, int64_t num_microbatches,
                                          const std::vector<StageCosts>& stage_costs,
                                          double replicas, double cores, double waiting_share);

}  // namespace mindspeed
