// Schedule plans and their simulation (schedule_plan.h).
#include "pipeline_parallel/schedule_plan.h"

#include <algorithm>
#include <deque>
#include <map>
#include <sstream>

#include "core/check.h"

namespace mindspeed {
namespace {

PipelineOp forward(int chunk, int64_t mb) { return {PipelineOpKind::kForward, chunk, mb, false}; }
PipelineOp backward(int chunk, int64_t mb, bool defer = false) { return {PipelineOpKind::kBackward, chunk, mb, defer}; }
PipelineOp weight() { return {PipelineOpKind::kWeight, 0, 0, false}; }

// Megatron core 0.12 get_schedule_table: micro-batches in groups of G; within a group every
// chunk runs the whole group before the next chunk; the last group takes the rest.
std::vector<std::pair<int64_t, int>> schedule_table(int64_t M, int v, int64_t G) {
  std::vector<std::pair<int64_t, int>> table;
  for (int64_t start = 0; start < M; start += G) {
    const int64_t end = start + G >= M ? M : start + G;
    for (int c = 0; c < v; ++c) {
      for (int64_t mb = start; mb < end; ++mb) table.emplace_back(mb, c);
    }
    if (end == M) break;
  }
  return table;
}

std::vector<PipelineOp> interleaved_plan(const PipelineLayout& layout, int r, int64_t M) {
  const int v = layout.chunks_per_rank;
  const auto table = schedule_table(M, v, layout.microbatch_group_size);
  const int64_t total = static_cast<int64_t>(table.size());
  const int64_t warmup = num_warmup_microbatches(layout, r, M);
  auto f = [&](int64_t k) { return forward(table[k].second, table[k].first); };
  auto b = [&](int64_t k) { return backward(v - 1 - table[k].second, table[k].first); };
  std::vector<PipelineOp> ops;
  for (int64_t k = 0; k < warmup; ++k) ops.push_back(f(k));
  for (int64_t k = 0; k < total - warmup; ++k) {
    ops.push_back(f(warmup + k));
    ops.push_back(b(k));
  }
  for (int64_t k = total - warmup; k < total; ++k) ops.push_back(b(k));
  return ops;
}

// DeepSeek's DualPipeV step() for rank r of P with N micro-batches; phase 0 is chunk 0 (the
// forward leg), phase 1 chunk 1 (the return leg). With dw_detach, B steps marked zb leave
// their weight gradient for a W step (DeepSeek's WeightGradStore); without it every B
// computes its weight gradient at once and there is no W step.
std::vector<PipelineOp> dualpipev_plan(int P, int r, int64_t N, bool dw_detach) {
  std::vector<PipelineOp> ops;
  int64_t next_f[2] = {0, 0}, next_b[2] = {0, 0};
  auto F = [&](int phase) { ops.push_back(forward(phase, next_f[phase]++)); };
  auto B = [&](int phase, bool zb) { ops.push_back(backward(phase, next_b[phase]++, zb && dw_detach)); };
  auto W = [&] {
    if (dw_detach) ops.push_back(weight());
  };
  for (int i = 0; i < 2 * (P - r - 1); ++i) F(0);  // 1: nF0
  for (int i = 0; i < r + 1; ++i) {                 // 2: nF0F1
    F(0);
    F(1);
  }
  for (int i = 0; i < P - r - 1; ++i) {  // 3: nB1W1F1 (zero bubble)
    B(1, true);
    W();
    F(1);
  }
  for (int64_t i = 0; i < N - 2 * P + r + 1; ++i) {  // 4: nF0B1F1B0 (main)
    F(0);
    B(1, false);
    F(1);
    B(0, false);
  }
  for (int i = 0; i < P - r - 1; ++i) {  // 5: nB1F1B0
    B(1, false);
    F(1);
    B(0, false);
  }
  bool zb = false;  // 6: nB1B0, the second half zero bubble
  for (int i = 0; i < r + 1; ++i) {
    if (i == (r + 1) / 2 && r % 2 == 1) zb = true;
    B(1, zb);
    if (i == (r + 1) / 2 && r % 2 == 0) zb = true;
    B(0, zb);
  }
  for (int i = 0; i < P - r - 1; ++i) {  // 7: nWB0 (zero bubble)
    W();
    B(0, true);
  }
  for (int i = 0; i < r + 1; ++i) W();  // 8: nW
  MS_CHECK(next_f[0] == N && next_f[1] == N && next_b[0] == N && next_b[1] == N,
           "DualPipeV plan of rank ", r, " does not run every micro-batch once");
  return ops;
}

}  // namespace

int64_t num_warmup_microbatches(const PipelineLayout& layout, int rank, int64_t M) {
  const int64_t P = layout.pipeline_size, v = layout.chunks_per_rank;
  switch (layout.schedule) {
    case PipelineSchedule::kNoPipelining: return 0;
    case PipelineSchedule::k1F1B: return std::min<int64_t>(P - rank - 1, M);
    case PipelineSchedule::kInterleaved:
      return std::min<int64_t>((P - rank - 1) * 2 + (v - 1) * layout.microbatch_group_size, M * v);
    case PipelineSchedule::kDualPipeV: return std::min<int64_t>(2 * (P - rank - 1) + 2 * (rank + 1), 2 * M);
  }
  return 0;
}

std::vector<PipelineOp> schedule_plan(const PipelineLayout& layout, int rank, int64_t M, bool forward_only) {
  std::vector<PipelineOp> ops;
  switch (layout.schedule) {
    case PipelineSchedule::kNoPipelining:
      for (int64_t i = 0; i < M; ++i) {
        ops.push_back(forward(0, i));
        ops.push_back(backward(0, i));
      }
      break;
    case PipelineSchedule::k1F1B: {
      const int64_t warmup = num_warmup_microbatches(layout, rank, M);
      for (int64_t i = 0; i < warmup; ++i) ops.push_back(forward(0, i));
      for (int64_t i = 0; i < M - warmup; ++i) {
        ops.push_back(forward(0, warmup + i));
        ops.push_back(backward(0, i));
      }
      for (int64_t i = M - warmup; i < M; ++i) ops.push_back(backward(0, i));
      break;
    }
    case PipelineSchedule::kInterleaved: ops = interleaved_plan(layout, rank, M); break;
    case PipelineSchedule::kDualPipeV:
      ops = dualpipev_plan(layout.pipeline_size, rank, M, layout.dw_detach);
      break;
  }
  if (forward_only) {
    std::erase_if(ops, [](const PipelineOp& op) { return op.kind != PipelineOpKind::kForward; });
  }
  return ops;
}

double PlanSimulation::bubble_fraction() const {
  double sum = 0.0;
  for (double b : busy) sum += b > 0.0 ? (makespan - b) / b : 0.0;
  return busy.empty() ? 0.0 : sum / static_cast<double>(busy.size());
}

PlanSimulation simulate_plans(const PipelineLayout& layout, int64_t M, const PlanCosts& costs, bool forward_only) {
  const int P = layout.pipeline_size, S = layout.num_stages();
  int64_t total_layers = 0;
  for (const PipelineStage& s : layout.stages) total_layers += s.num_layers;
  // A stage's ops cost in proportion to its layers (a rank's whole share costs `costs`).
  auto scale = [&](int stage) {
    return total_layers > 0 ? static_cast<double>(layout.stages[stage].num_layers) * P / static_cast<double>(total_layers)
                            : 1.0;
  };
  std::vector<std::vector<PipelineOp>> plans;
  for (int r = 0; r < P; ++r) plans.push_back(schedule_plan(layout, r, M, forward_only));
  // Finish times of F(stage, mb) and B(stage, mb).
  std::map<std::pair<int, int64_t>, double> f_done, b_done;
  std::vector<size_t> next(P, 0);
  std::vector<double> free_at(P, 0.0);
  std::vector<std::deque<double>> deferred(P);  // W costs waiting per rank
  PlanSimulation sim;
  sim.busy.assign(P, 0.0);
  sim.peak_in_flight.assign(P, 0);
  std::vector<int64_t> in_flight(P, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < P; ++r) {
      while (next[r] < plans[r].size()) {
        const PipelineOp& op = plans[r][next[r]];
        double ready = free_at[r], cost = 0.0;
        if (op.kind == PipelineOpKind::kWeight) {
          MS_CHECK(!deferred[r].empty(), "W step on rank ", r, " with no deferred weight gradient");
          cost = deferred[r].front();
          deferred[r].pop_front();
        } else {
          const int s = layout.stage_of(r, op.chunk);
          if (op.kind == PipelineOpKind::kForward) {
            if (s > 0) {
              auto it = f_done.find({s - 1, op.microbatch});
              if (it == f_done.end()) break;  // input not there yet
              ready = std::max(ready, it->second);
            }
            cost = costs.forward * scale(s);
          } else {
            auto it = s + 1 < S ? b_done.find({s + 1, op.microbatch}) : f_done.find({s, op.microbatch});
            if (it == (s + 1 < S ? b_done.end() : f_done.end())) break;
            ready = std::max(ready, it->second);
            cost = costs.backward * scale(s);
            if (op.defer_weight_grad) {
              cost -= costs.weight * scale(s);
              deferred[r].push_back(costs.weight * scale(s));
            }
          }
        }
        const double end = ready + cost;
        if (op.kind == PipelineOpKind::kForward) {
          f_done[{layout.stage_of(r, op.chunk), op.microbatch}] = end;
          if (!forward_only) sim.peak_in_flight[r] = std::max(sim.peak_in_flight[r], ++in_flight[r]);
        } else if (op.kind == PipelineOpKind::kBackward) {
          b_done[{layout.stage_of(r, op.chunk), op.microbatch}] = end;
          --in_flight[r];
        }
        free_at[r] = end;
        sim.busy[r] += cost;
        ++next[r];
        progress = true;
      }
    }
  }
  sim.completes = true;
  std::ostringstream stuck;
  for (int r = 0; r < P; ++r) {
    sim.makespan = std::max(sim.makespan, free_at[r]);
    if (next[r] < plans[r].size()) {
      const PipelineOp& op = plans[r][next[r]];
      sim.completes = false;
      stuck << "rank " << r << " waits at " << (op.kind == PipelineOpKind::kForward ? "F" : "B") << "(chunk "
            << op.chunk << ", micro-batch " << op.microbatch << "); ";
    }
  }
  sim.stuck = stuck.str();
  return sim;
}

}  // namespace mindspeed
