// The order in which a pipeline rank runs its forward (F), backward (B) and deferred
// weight-gradient (W) steps, as a list: Megatron's 1F1B and interleaved 1F1B
// (schedules.py: warm-up counts and get_schedule_table) and DeepSeek's DualPipeV
// (dualpipev.py step(): its eight phases, with the zero-bubble B/W split where
// --dualpipev-dw-detach asks for it). The executor (schedules.cpp) runs a plan with real
// chunks; simulate_plans() runs every rank's plan against unit costs to check that the
// ranks cannot wait on each other in a cycle, and to give the bubble and the activation
// counts the formulas promise (tests and bench/).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/pipeline_layout.h"

namespace mindspeed {

enum class PipelineOpKind : uint8_t {
  kForward,   ///< F: a micro-batch forward through one chunk
  kBackward,  ///< B: its backward (input gradient; with the weight gradient unless deferred)
  kWeight,    ///< W: the oldest deferred weight gradient of this rank
  /// R: a chunk's activation recompute run ahead of its backward (MindSpeed's ripipe,
  /// --recompute-in-advance / --recompute-in-bubble); decided by the executor, so it appears
  /// in ScheduleTrace events but never in a plan.
  kRecompute,
};

struct PipelineOp {
  PipelineOpKind kind = PipelineOpKind::kForward;
  int chunk = 0;               ///< this rank's model chunk (F and B)
  int64_t microbatch = 0;      ///< micro-batch index (F and B; each chunk takes them in order)
  bool defer_weight_grad = false;  ///< B: leave the weight gradient for a later W
};

/// `rank`'s ops in execution order for `num_microbatches` micro-batches; forward_only keeps
/// only the forwards (evaluation), in the same order.
std::vector<PipelineOp> schedule_plan(const PipelineLayout& layout, int rank, int64_t num_microbatches,
                                      bool forward_only = false);

/// Megatron's number of warm-up forwards on `rank` (1F1B and interleaved), capped at the
/// total number of forwards of the rank.
int64_t num_warmup_microbatches(const PipelineLayout& layout, int rank, int64_t num_microbatches);

struct PlanCosts {
  double forward = 1.0;
  double backward = 2.0;  ///< a whole backward; a deferred one costs backward - weight
  double weight = 1.0;    ///< the weight-gradient part of backward
};

struct PlanSimulation {
  bool completes = false;       ///< false: some ranks wait on each other forever
  std::string stuck;            ///< the first op of each stuck rank, when !completes
  double makespan = 0.0;        ///< time until the last op ends
  std::vector<double> busy;     ///< per rank: time spent computing
  std::vector<int64_t> peak_in_flight;  ///< per rank: most micro-batches with live activations
  /// Idle time over compute time, averaged over the ranks (= (P-1)/m for 1F1B with B = 2F).
  double bubble_fraction() const;
};

/// Runs every rank's plan with the given costs and zero communication time: an op starts
/// when its rank is free and its input (the neighbouring stage's output or gradient) exists.
PlanSimulation simulate_plans(const PipelineLayout& layout, int64_t num_microbatches, const PlanCosts& costs = {},
                              bool forward_only = false);

}  // namespace mindspeed
