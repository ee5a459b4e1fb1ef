// The pipeline phase on shared cores (step_simulation.h).
#include "auto_settings/step_simulation.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <set>
#include <sstream>

#include "core/check.h"
#include "pipeline_parallel/schedule_plan.h"

namespace mindspeed {

SharedStepSimulation simulate_shared_step(const PipelineLayout& layout, int64_t num_microbatches,
                                          const std::vector<StageCosts>& stage_costs,
                                          double replicas, double cores,
                                          double waiting_share) {
  const int P = layout.pipeline_size, S = layout.num_stages();
  MS_CHECK(static_cast<int>(stage_costs.size()) == S, "simulate_shared_step: ", stage_costs.size(),
           " stage costs for ", S, " stages");
  std::vector<std::vector<PipelineOp>> plans;
  for (int r = 0; r < P; ++r) plans.push_back(schedule_plan(layout, r, num_microbatches));
  std::set<std::pair<int, int64_t>> forward_done, backward_done;  // (stage, micro-batch)
  std::vector<size_t> next(static_cast<size_t>(P), 0);
  std::vector<double> remaining(static_cast<size_t>(P), -1.0);  // < 0: no op running
  std::vector<std::deque<double>> deferred(static_cast<size_t>(P));
  SharedStepSimulation sim;
  sim.busy_seconds.assign(static_cast<size_t>(P), 0.0);
  // The op's seconds when its inputs exist, else -1.
  auto ready_cost = [&](int r) -> double {
    const PipelineOp& op = plans[r][next[r]];
    if (op.kind == PipelineOpKind::kWeight) return deferred[r].empty() ? -1.0 : deferred[r].front();
    const int s = layout.stage_of(r, op.chunk);
    const StageCosts& cost = stage_costs[static_cast<size_t>(s)];
    if (op.kind == PipelineOpKind::kForward) {
      if (s > 0 && !forward_done.contains({s - 1, op.microbatch})) return -1.0;
      return cost.forward;
    }
    const bool input = s + 1 < S ? backward_done.contains({s + 1, op.microbatch})
                                 : forward_done.contains({s, op.microbatch});
    if (!input) return -1.0;
    return op.defer_weight_grad ? cost.backward - cost.weight : cost.backward;
  };
  auto finish = [&](int r) {
    const PipelineOp& op = plans[r][next[r]];
    if (op.kind == PipelineOpKind::kWeight) {
      deferred[r].pop_front();
    } else {
      const int s = layout.stage_of(r, op.chunk);
      if (op.kind == PipelineOpKind::kForward) {
        forward_done.insert({s, op.microbatch});
      } else {
        backward_done.insert({s, op.microbatch});
        if (op.defer_weight_grad) deferred[r].push_back(stage_costs[static_cast<size_t>(s)].weight);
      }
    }
    remaining[r] = -1.0;
    ++next[r];
  };
  double now = 0.0;
  for (;;) {
    // Start every op whose inputs exist; an op of no cost ends at once and may free the next.
    for (bool started = true; started;) {
      started = false;
      for (int r = 0; r < P; ++r) {
        while (remaining[r] < 0.0 && next[r] < plans[r].size()) {
          const double cost = ready_cost(r);
          if (cost < 0.0) break;
          remaining[r] = cost;
          if (cost <= 0.0) {
            finish(r);
            started = true;
          }
        }
      }
    }
    int running = 0;
    double shortest = std::numeric_limits<double>::infinity();
    for (int r = 0; r < P; ++r) {
      if (remaining[r] > 0.0) {
        ++running;
        shortest = std::min(shortest, remaining[r]);
      }
    }
    if (running == 0) break;
    int waiting = 0;  // ranks with ops left whose input is not there yet
    for (int r = 0; r < P; ++r) waiting += remaining[r] <= 0.0 && next[r] < plans[r].size() ? 1 : 0;
    const double demand = (running + waiting_share * waiting) * replicas;
    const double speed = cores > 0.0 ? std::min(1.0, cores / demand) : 1.0;
    const double dt = shortest / speed;
    now += dt;
    for (int r = 0; r < P; ++r) {
      if (remaining[r] <= 0.0) continue;
      sim.busy_seconds[static_cast<size_t>(r)] += dt;
      remaining[r] -= shortest;
      if (remaining[r] <= shortest * 1e-12) finish(r);
    }
  }
  sim.makespan = now;
  sim.completes = true;
  std::ostringstream stuck;
  for (int r = 0; r < P; ++r) {
    if (next[r] < plans[r].size()) {
      const PipelineOp& op = plans[r][next[r]];
      sim.completes = false;
      stuck << "rank " << r << " waits at "
            << (op.kind == PipelineOpKind::kForward ? "F" : op.kind == PipelineOpKind::kBackward ? "B" : "W")
            << "(chunk " << op.chunk << ", micro-batch " << op.microbatch << "); ";
    }
  }
  sim.stuck = stuck.str();
  return sim;
}

}  // namespace mindspeed
