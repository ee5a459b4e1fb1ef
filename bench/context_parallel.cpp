// Context-parallel benchmark under mpirun (the whole world is one context-parallel group):
// trains a tiny GPT on one sample of --seq tokens for a few steps and prints, from rank 0,
// one JSON line: the step time, tokens/s, this rank's peak activation memory (the counting
// allocator's "activations" category, over a step) and its ring transfer bytes. Run it for
// C = 1, 2, 4 and each algorithm; bench/run_context_parallel_bench.sh makes the tables.
//   mpirun -np C context_parallel --seq S [--algo ulysses|ring|hybrid] [--ulysses U]
//       [--window W] [--overlap] [--general] [--steps N] [--layers L] [--hidden H]
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "context_parallel/cp_split.h"
#include "core/timers.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/param_and_grad_buffer.h"
#include "models/gpt/gpt_model.h"
#include "optimizer/optimizer.h"
#include "parallel/initialize.h"
#include "training/train_step.h"

using namespace mindspeed;

int main(int argc, char** argv) {
  MpiWorld world = initialize_mpi(&argc, &argv);
  int steps = 2, layers = 2;
  int64_t seq = 4096, hidden = 128;
  std::string algo = "ring";
  ContextParallelConfig cp;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seq" && i + 1 < argc)
      seq = std::atoll(argv[++i]);
    else if (a == "--algo" && i + 1 < argc)
      algo = argv[++i];
    else if (a == "--ulysses" && i + 1 < argc)
      cp.ulysses_degree = std::atoi(argv[++i]);
    else if (a == "--window" && i + 1 < argc)
      cp.window_size = std::atoi(argv[++i]);
    else if (a == "--overlap")
      cp.send_recv_overlap = true;
    else if (a == "--general")
      cp.general_mask = true;
    else if (a == "--steps" && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (a == "--layers" && i + 1 < argc)
      layers = std::atoi(argv[++i]);
    else if (a == "--hidden" && i + 1 < argc)
      hidden = std::atoll(argv[++i]);
    else
      fatal("unknown argument " + a);
  }
  cp.algo = algo == "ulysses"  ? CpAlgo::kUlysses
            : algo == "hybrid" ? CpAlgo::kHybrid
                               : CpAlgo::kRing;
  if (cp.algo == CpAlgo::kUlysses) cp.ulysses_degree = world.size;
  if (cp.algo == CpAlgo::kRing) cp.ulysses_degree = 1;
  ParallelConfig pc;
  pc.context_parallel_size = world.size;
  pc.cp = cp;
  auto ps_or = initialize_model_parallel(pc, world);
  if (!ps_or.ok()) fatal(ps_or.status().to_string());
  ParallelState& ps = **ps_or;
  ModelConfig m;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = 8;
  m.kv_channels = hidden / 8;
  m.num_query_groups = 8;
  m.ffn_hidden_size = 4 * hidden;
  m.seq_length = m.max_position_embeddings = seq;
  m.vocab_size = m.padded_vocab_size = 1024;
  m.attention_dropout = m.hidden_dropout = 0.0f;
  m.position_embedding_type = PositionEmbeddingType::kRope;
  const Backend backend = select_backend(KernelOptions{.fast = true, .flash_attention = true},
                                         default_threads_per_rank(world.local_size));
  Allocator alloc;
  ParameterRegistry registry;
  GPTModel model(m, ps, registry, {});
  BufferOptions bo;
  bo.data_parallel_size = ps.dp_cp().size();
  ParamAndGradBuffer buffer(model.registry(), alloc, bo);
  initialize_parameters(model.registry(), 1234, ps.tp_rank, ps.sizes.tensor);
  DistributedDataParallel ddp(buffer, ps, {}, backend);
  OptimizerConfig oc;
  oc.lr = 1e-4f;
  Optimizer optimizer(oc, buffer, ps, alloc, backend, false);
  ForwardContext ctx;
  ctx.backend = &backend;
  ctx.alloc = &alloc;
  ctx.ps = &ps;
  ctx.cp = cp;
  MicroBatch full;
  full.B = 1;
  full.T = seq;
  for (int64_t i = 0; i < seq; ++i) {
    full.tokens.push_back(static_cast<int32_t>((i * 7919) % m.vocab_size));
    full.labels.push_back(static_cast<int32_t>((i * 104729) % m.vocab_size));
    full.loss_mask.push_back(1.0f);
    full.position_ids.push_back(static_cast<int32_t>(i));
  }
  std::vector<MicroBatch> batch;
  batch.push_back(world.size > 1
                      ? get_batch_on_this_cp_rank(full, CpSplit(cp, world.size, seq), ps.cp_rank)
                      : std::move(full));
  ctx.iteration = 1;
  train_step(model, buffer, optimizer, &ddp, ctx, batch, 1e-4);  // warm-up
  alloc.reset_peaks();
  ps.cp_ring().reset_stats();
  MPI_Barrier(MPI_COMM_WORLD);
  Timer timer;
  for (int s = 0; s < steps; ++s) {
    ctx.iteration = 2 + s;
    train_step(model, buffer, optimizer, &ddp, ctx, batch, 1e-4);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double step_s = timer.seconds() / steps;
  const MemoryStats stats = alloc.stats();
  const CommStats ring = ps.cp_ring().stats();
  const int send = static_cast<int>(CollectiveKind::kSend);
  if (world.rank == 0) {
    std::printf(
        "{\"cp\": %d, \"algo\": \"%s\", \"ulysses\": %d, \"window\": %d, \"overlap\": %d, "
        "\"general\": %d, "
        "\"seq\": %lld, \"step_s\": %.4f, \"tokens_per_s\": %.1f, \"activation_peak_mib\": %.2f, "
        "\"total_peak_mib\": %.2f, \"ring_send_mib_per_step\": %.2f}\n",
        world.size, algo.c_str(), cp.ulysses_degree, cp.window_size, cp.send_recv_overlap,
        cp.general_mask, static_cast<long long>(seq), step_s, static_cast<double>(seq) / step_s,
        static_cast<double>(stats.peak_of(MemoryCategory::kActivations)) / (1 << 20),
        static_cast<double>(stats.total_peak) / (1 << 20),
        static_cast<double>(ring.bytes[send]) / (1 << 20) / steps);
  }
  finalize_mpi();
  return 0;
}
