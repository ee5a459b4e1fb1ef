// Pipeline-schedule benchmark under mpirun: trains a small LLaMA-style GPT (RMSNorm, SwiGLU,
// RoPE, untied embedding and output layer so that DualPipeV is allowed, no dropout) on
// synthetic tokens with pure pipeline parallelism (world size = P, tp = dp = 1) under one
// schedule, and reports on rank 0, per pipeline rank, what the schedule's trace
// (ScheduleTrace) measured over the timed steps: busy time (sum of its F/B/W steps), idle time
// (schedule wall time - busy), the bubble fraction idle/busy, and the most micro-batches with
// live activations (counted per chunk: a micro-batch forwarded through both chunks of a rank
// counts twice). Beside them simulate_plans() (unit costs F = 1, B = 2, W = 1 for a rank's
// whole share of layers, no communication) and the formulas: 1F1B bubble (P-1)/M, peak
// min(P-r, M); interleaved (P-1)/(v*M), peak = Megatron's warm-up + 1; DualPipeV bubble = the
// simulation (DeepSeek's (PP/2-1)(F&B+B-3W) printed below the table), peak DeepSeek's PP+1 =
// 2P+1. Then the mean step time (train_step: schedule + optimizer) and tokens/s, and the loss,
// which every schedule must reproduce. One warm-up step first. The vocabulary is small (512)
// so that the output layer barely unbalances the last stage.
//   mpirun -np 2 pipeline_schedules --schedule 1f1b|interleaved|dualpipev|dualpipev-dw-detach
//          [--vpp 2] [--microbatches 8] [--layers 8] [--hidden 256] [--seq 128] [--vocab 512]
//          [--steps 3] [--threads N (default OMP_NUM_THREADS)]
//   pipeline_schedules --schedule none        (one process, no pipelining)
// bench/run_pipeline_bench.sh runs every schedule on P = 1, 2 and 4 (bench/README.md).
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/timers.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/param_and_grad_buffer.h"
#include "models/gpt/gpt_model_chunks.h"
#include "optimizer/optimizer.h"
#include "parallel/initialize.h"
#include "pipeline_parallel/schedule_plan.h"
#include "training/train_step.h"

using namespace mindspeed;

namespace {

// What each rank sends to rank 0, summed (times) or maxed (peak) over the timed steps.
enum Field { kRank, kBusy, kElapsed, kPeak, kForwards, kBackwards, kWeights, kNumFields };

}  // namespace

int main(int argc, char** argv) {
  MpiWorld world = initialize_mpi(&argc, &argv);
  std::string schedule = world.size > 1 ? "1f1b" : "none";
  int vpp = 2, steps = 3, threads = 0;
  int64_t num_micro = 8, layers = 8, hidden = 256, seq = 128, vocab = 512, mbs = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) fatal("pipeline_schedules: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--schedule") schedule = value();
    else if (a == "--vpp") vpp = std::atoi(value());
    else if (a == "--microbatches") num_micro = std::atoll(value());
    else if (a == "--layers") layers = std::atoll(value());
    else if (a == "--hidden") hidden = std::atoll(value());
    else if (a == "--seq") seq = std::atoll(value());
    else if (a == "--vocab") vocab = std::atoll(value());
    else if (a == "--steps") steps = std::atoi(value());
    else if (a == "--threads") threads = std::atoi(value());
    else fatal("pipeline_schedules: unknown argument " + a);
  }
  const int P = world.size;
  ParallelConfig pc;
  pc.pipeline_model_parallel_size = P;
  if (schedule == "none") {
    if (P != 1) fatal("pipeline_schedules: --schedule none runs on one process (mpirun -np 1)");
  } else if (P < 2) {
    fatal("pipeline_schedules: --schedule " + schedule + " needs mpirun -np P with P >= 2");
  } else if (schedule == "interleaved") {
    pc.num_virtual_stages_per_pipeline_rank = vpp;
  } else if (schedule == "dualpipev" || schedule == "dualpipev-dw-detach") {
    pc.dualpipev = true;
    pc.dualpipev_dw_detach = schedule == "dualpipev-dw-detach";
  } else if (schedule != "1f1b") {
    fatal("pipeline_schedules: --schedule must be none, 1f1b, interleaved, dualpipev or dualpipev-dw-detach");
  }
  auto ps_or = initialize_model_parallel(pc, world);
  if (!ps_or.ok()) fatal(ps_or.status().to_string());
  ParallelState& ps = **ps_or;
  StatusOr<PipelineLayout> layout_or = PipelineLayout::build(pc, layers, num_micro);
  if (!layout_or.ok()) fatal(layout_or.status().to_string());
  const PipelineLayout& layout = *layout_or;

  ModelConfig m;  // LLaMA-style: DualPipeV needs the output layer apart from the embedding
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = std::max<int64_t>(1, hidden / 64);
  m.kv_channels = hidden / m.num_attention_heads;
  m.group_query_attention = m.num_attention_heads % 2 == 0;
  m.num_query_groups = m.group_query_attention ? m.num_attention_heads / 2 : m.num_attention_heads;
  m.ffn_hidden_size = std::max<int64_t>(64, hidden * 8 / 3 / 64 * 64);
  m.seq_length = m.max_position_embeddings = seq;
  m.normalization = Normalization::kRMSNorm;
  m.swiglu = true;
  m.position_embedding_type = PositionEmbeddingType::kRope;
  m.untie_embeddings_and_output_weights = true;
  m.add_bias_linear = false;
  m.norm_epsilon = 1e-6f;
  m.vocab_size = vocab;
  m.padded_vocab_size = (vocab + 127) / 128 * 128;
  m.attention_dropout = m.hidden_dropout = 0.0f;

  const Backend backend = select_backend(KernelOptions{.fast = true, .fused_rms_norm = true, .fused_swiglu = true,
                                                       .fused_rotary = true, .flash_attention = true},
                                         threads);
  Allocator alloc;
  ParameterRegistry registry;
  GPTModelChunks model(m, ps, registry, layout, /*sequence_parallel=*/false);
  BufferOptions bo;
  bo.data_parallel_size = 1;
  ParamAndGradBuffer buffer(model.registry(), alloc, bo);
  initialize_parameters(model.registry(), 1234, ps.tp_rank, ps.sizes.tensor);
  DistributedDataParallel ddp(buffer, ps, DdpConfig{}, backend);
  OptimizerConfig oc;
  oc.lr = 1e-4f;
  Optimizer optimizer(oc, buffer, ps, alloc, backend, /*distributed=*/false);
  ForwardContext ctx;
  ctx.backend = &backend;
  ctx.alloc = &alloc;
  ctx.ps = &ps;

  // Synthetic token streams (an arithmetic progression per sample, next token as label).
  std::vector<MicroBatch> microbatches;
  for (int64_t k = 0; k < num_micro; ++k) {
    MicroBatch mb;
    mb.B = mbs;
    mb.T = seq;
    mb.first_sample = k * mbs;
    for (int64_t b = 0; b < mbs; ++b) {
      const int64_t start = (k * 7919 + b * 104729) % m.vocab_size, stride = 1 + (k + b) % 7;
      for (int64_t t = 0; t < seq; ++t) {
        mb.tokens.push_back(static_cast<int32_t>((start + stride * t) % m.vocab_size));
        mb.labels.push_back(static_cast<int32_t>((start + stride * (t + 1)) % m.vocab_size));
        mb.loss_mask.push_back(1.0f);
        mb.position_ids.push_back(static_cast<int32_t>(t));
      }
    }
    microbatches.push_back(std::move(mb));
  }

  ScheduleTrace trace;
  TrainStepOptions options;
  options.trace = &trace;
  ctx.iteration = 1;
  train_step(model, buffer, optimizer, &ddp, ctx, microbatches, 1e-4, options);  // warm-up
  std::vector<double> mine(kNumFields, 0.0);
  mine[kRank] = ps.pp().rank();
  double loss = 0.0;
  MPI_Barrier(MPI_COMM_WORLD);
  Timer timer;
  for (int s = 0; s < steps; ++s) {
    ctx.iteration = 2 + s;
    const TrainStepResult r = train_step(model, buffer, optimizer, &ddp, ctx, microbatches, 1e-4, options);
    for (const ScheduleEvent& e : trace.events) {
      mine[kBusy] += e.end - e.start;
      mine[e.kind == PipelineOpKind::kForward ? kForwards : e.kind == PipelineOpKind::kBackward ? kBackwards : kWeights] +=
          1.0 / steps;
    }
    mine[kElapsed] += trace.elapsed;
    mine[kPeak] = std::max(mine[kPeak], static_cast<double>(trace.peak_in_flight));
    loss = r.num_tokens > 0.0 ? r.loss_sum / r.num_tokens : 0.0;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double step_s = timer.seconds() / steps;
  // The loss lives on the last stage's rank (rank 0 under DualPipeV); the others report 0.
  loss = ps.pp().all_reduce_scalar(loss, ReduceOp::kSum);
  std::vector<double> all(static_cast<size_t>(kNumFields * P));
  MPI_Gather(mine.data(), kNumFields, MPI_DOUBLE, all.data(), kNumFields, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  if (world.rank == 0) {
    std::vector<std::vector<double>> rows(static_cast<size_t>(P));
    for (int i = 0; i < P; ++i) {
      const double* f = all.data() + static_cast<size_t>(i) * kNumFields;
      rows[static_cast<size_t>(f[kRank])].assign(f, f + kNumFields);
    }
    const PlanSimulation sim = simulate_plans(layout, num_micro);  // F = 1, B = 2, W = 1
    MS_CHECK(sim.completes, "the simulated schedule does not complete: ", sim.stuck);
    const int v = layout.chunks_per_rank;
    const double M = static_cast<double>(num_micro);
    const bool dualpipev = layout.schedule == PipelineSchedule::kDualPipeV;
    const std::string name =
        std::string(pipeline_schedule_name(layout.schedule)) +
        (layout.schedule == PipelineSchedule::kInterleaved ? " (vpp " + std::to_string(v) + ")" : "") +
        (layout.dw_detach ? " dw-detach" : "");
    // The formula columns (DualPipeV's bubble: the simulation, see the note below the table).
    const double formula_bubble = layout.schedule == PipelineSchedule::k1F1B           ? (P - 1) / M
                                  : layout.schedule == PipelineSchedule::kInterleaved ? (P - 1) / (v * M)
                                  : dualpipev                                          ? sim.bubble_fraction()
                                                                                       : 0.0;
    auto formula_peak = [&](int r) -> int64_t {
      switch (layout.schedule) {
        case PipelineSchedule::kNoPipelining: return 1;
        case PipelineSchedule::k1F1B: return std::min<int64_t>(P - r, num_micro);
        case PipelineSchedule::kInterleaved:
          return std::min<int64_t>(num_warmup_microbatches(layout, r, num_micro) + 1, v * num_micro);
        case PipelineSchedule::kDualPipeV: return std::min<int64_t>(2 * P + 1, 2 * num_micro);  // DeepSeek's PP+1
      }
      return -1;
    };
    const int64_t tokens = num_micro * mbs * seq;
    std::printf("%s: P %d (tp 1, dp 1), %lld layers (%d chunk(s) per rank), hidden %lld, %lld micro-batches of %lld x "
                "%lld tokens, %d thread(s) per rank, %d timed step(s)\n",
                name.c_str(), P, static_cast<long long>(layers), v, static_cast<long long>(hidden),
                static_cast<long long>(num_micro), static_cast<long long>(mbs), static_cast<long long>(seq),
                backend.context.num_threads, steps);
    std::printf("| rank | F/B/W per step | busy ms | idle ms | bubble measured | bubble sim | bubble formula "
                "| peak measured | peak sim | peak formula |\n|---|---|---|---|---|---|---|---|---|---|\n");
    double sum_bubble = 0.0, max_bubble = 0.0;
    int64_t max_peak = 0, max_sim_peak = 0;
    for (int r = 0; r < P; ++r) {
      const std::vector<double>& f = rows[static_cast<size_t>(r)];
      const double busy = f[kBusy] / steps, idle = (f[kElapsed] - f[kBusy]) / steps;
      const double bubble = busy > 0.0 ? idle / busy : 0.0;
      const double sim_bubble = (sim.makespan - sim.busy[static_cast<size_t>(r)]) / sim.busy[static_cast<size_t>(r)];
      const int64_t peak = static_cast<int64_t>(f[kPeak]), sim_peak = sim.peak_in_flight[static_cast<size_t>(r)];
      sum_bubble += bubble;
      max_bubble = std::max(max_bubble, bubble);
      max_peak = std::max(max_peak, peak);
      max_sim_peak = std::max(max_sim_peak, sim_peak);
      char fb[32], fp[32];
      if (dualpipev) {
        std::snprintf(fb, sizeof fb, "= sim");
      } else {
        std::snprintf(fb, sizeof fb, "%.3f", formula_bubble);
      }
      std::snprintf(fp, sizeof fp, "%lld", static_cast<long long>(formula_peak(r)));
      std::printf("| %d | %.0f/%.0f/%.0f | %.1f | %.1f | %.3f | %.3f | %s | %lld | %lld | %s |\n", r, f[kForwards],
                  f[kBackwards], f[kWeights], busy * 1e3, idle * 1e3, bubble, sim_bubble, fb,
                  static_cast<long long>(peak), static_cast<long long>(sim_peak), fp);
    }
    std::printf("summary: %s, P %d: step %.1f ms, %.0f tokens/s, bubble measured %.3f (mean over ranks; max %.3f), "
                "sim %.3f, formula %.3f; peak in flight measured %lld, sim %lld; loss %.4f\n",
                name.c_str(), P, step_s * 1e3, static_cast<double>(tokens) / step_s, sum_bubble / P, max_bubble,
                sim.bubble_fraction(), formula_bubble, static_cast<long long>(max_peak), static_cast<long long>(max_sim_peak),
                loss);
    if (dualpipev) {
      // DeepSeek's DualPipe README: bubble (PP/2-1)(F&B + B - 3W) and PP+1 micro-batches of
      // activations for PP stages; DualPipeV lays PP = 2P stages over P ranks. Per chunk (half
      // a rank's layers) F = 1/2, B = 1, W = 1/2 here, and a CPU does not overlap F with B
      // (F&B = F + B): (P-1)(3/2 + 1 - 3/2) = P-1 over a rank's busy time 3M.
      std::printf("note: DualPipeV bubble formula column = simulation. DeepSeek's (PP/2-1)(F&B+B-3W) with PP = 2P "
                  "stages, F&B = F+B (no overlap here), for the B/W split (dw-detach): (P-1)/(3M) = %.3f; peak "
                  "formula = DeepSeek's PP+1 = 2P+1 chunk micro-batches\n",
                  (P - 1) / (3.0 * M));
    }
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (static_cast<long>(P) * backend.context.num_threads > cores) {
      std::printf("note: %d rank(s) x %d thread(s) on %ld cores: the ranks time-share the cores, so the measured "
                  "busy and idle times include waiting for a core (the simulation gives the clean numbers)\n",
                  P, backend.context.num_threads, cores);
    }
  }
  finalize_mpi();
  return 0;
}
