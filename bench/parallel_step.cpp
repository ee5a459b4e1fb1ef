// Communication benchmark under mpirun: trains a small GPT for a few steps in a given layout
// and reports, per rank 0, (1) the bytes each collective kind moved on the tensor-parallel
// and data-parallel groups during one step next to Megatron's analytic volumes, and (2) the
// step time. Run it with and without --overlap-grad-reduce / --overlap-param-gather to see
// what overlap buys. With --tp-x X (2D tensor parallelism, --tp-2d --tp-x X --tp-y tp/X) it
// reports the tp-x and tp-y groups against comm_volume_2d.h's volumes instead.
//   mpirun -np 4 parallel_step --tp 2 [--sp] [--distopt] [--overlap] [--steps N] [--bf16] [--tp-x
//   X]
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "core/timers.h"
#include "distributed/distributed_data_parallel.h"
#include "distributed/param_and_grad_buffer.h"
#include "models/gpt/gpt_model.h"
#include "optimizer/optimizer.h"
#include "parallel/initialize.h"
#include "tensor_parallel/comm_volume_2d.h"
#include "training/train_step.h"

using namespace mindspeed;

int main(int argc, char** argv) {
  MpiWorld world = initialize_mpi(&argc, &argv);
  int tp = 1, steps = 3, tp_x = 0;
  bool sp = false, distopt = false, overlap = false, bf16 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tp" && i + 1 < argc) tp = std::atoi(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (a == "--tp-x" && i + 1 < argc)
      tp_x = std::atoi(argv[++i]);
    else if (a == "--sp") sp = true;
    else if (a == "--distopt") distopt = true;
    else if (a == "--overlap") overlap = true;
    else if (a == "--bf16") bf16 = true;
  }
  ParallelConfig pc;
  pc.tensor_model_parallel_size = tp;
  if (tp_x > 0) {
    pc.tp_2d = true;
    pc.tp_x = tp_x;
    pc.tp_y = tp / tp_x;
  }
  auto ps_or = initialize_model_parallel(pc, world);
  if (!ps_or.ok()) fatal(ps_or.status().to_string());
  ParallelState& ps = **ps_or;
  ModelConfig m;
  m.num_layers = 4;
  m.hidden_size = 512;
  m.num_attention_heads = 8;
  m.kv_channels = 64;
  m.num_query_groups = 8;
  m.ffn_hidden_size = 2048;
  m.seq_length = m.max_position_embeddings = 256;
  m.vocab_size = m.padded_vocab_size = 32768;
  m.attention_dropout = m.hidden_dropout = 0.0f;
  const int64_t mbs = 2, dp = ps.dp_cp().size(), num_micro = 2;
  const Backend backend =
      select_backend(KernelOptions{.fast = true, .flash_attention = true}, default_threads_per_rank(world.local_size));

  Allocator alloc;
  ParameterRegistry registry;
  GPTModel model(m, ps, registry, {.sequence_parallel = sp});
  BufferOptions bo;
  bo.param_dtype = bf16 ? DType::kBFloat16 : DType::kFloat32;
  bo.pad_for_distributed_optimizer = distopt;
  bo.data_parallel_size = static_cast<int>(dp);
  bo.bucket_size = overlap ? 2'000'000 : 0;
  ParamAndGradBuffer buffer(model.registry(), alloc, bo);
  initialize_parameters(model.registry(), 1234, ps);
  DistributedDataParallel ddp(buffer, ps, {.overlap_grad_reduce = overlap, .overlap_param_gather = overlap && distopt,
                                          .use_distributed_optimizer = distopt}, backend);
  OptimizerConfig oc;
  oc.lr = 1e-4f;
  Optimizer optimizer(oc, buffer, ps, alloc, backend, distopt);
  ForwardContext ctx;
  ctx.backend = &backend;
  ctx.alloc = &alloc;
  ctx.ps = &ps;
  ctx.sequence_parallel = sp;
  ctx.bf16 = bf16;
  std::vector<MicroBatch> mbs_list;
  for (int64_t k = 0; k < num_micro; ++k) {
    MicroBatch mb;
    mb.B = mbs;
    mb.T = m.seq_length;
    for (int64_t i = 0; i < mb.B * mb.T; ++i) {
      mb.tokens.push_back(static_cast<int32_t>((i * 7919 + k) % m.vocab_size));
      mb.labels.push_back(static_cast<int32_t>((i * 104729 + k) % m.vocab_size));
      mb.loss_mask.push_back(1.0f);
      mb.position_ids.push_back(static_cast<int32_t>(i % mb.T));
    }
    mbs_list.push_back(std::move(mb));
  }
  ctx.iteration = 1;
  train_step(model, buffer, optimizer, &ddp, ctx, mbs_list, 1e-4);  // warm-up
  ddp.finish_param_sync();
  ps.tp().reset_stats();
  ps.dp_cp().reset_stats();
  if (ps.tp_2d()) {
    ps.tp_x().reset_stats();
    ps.tp_y().reset_stats();
  }
  ctx.iteration = 2;
  train_step(model, buffer, optimizer, &ddp, ctx, mbs_list, 1e-4);
  ddp.finish_param_sync();
  const CommStats tp_stats = ps.tp().stats(), dp_stats = ps.dp_cp().stats();
  const CommStats x_stats = ps.tp_2d() ? ps.tp_x().stats() : CommStats{},
                  y_stats = ps.tp_2d() ? ps.tp_y().stats() : CommStats{};
  MPI_Barrier(MPI_COMM_WORLD);
  Timer timer;
  for (int s = 0; s < steps; ++s) {
    ctx.iteration = 3 + s;
    train_step(model, buffer, optimizer, &ddp, ctx, mbs_list, 1e-4);
  }
  ddp.finish_param_sync();
  MPI_Barrier(MPI_COMM_WORLD);
  const double step_s = timer.seconds() / steps;
  if (world.rank == 0) {
    const double N = static_cast<double>(mbs * m.seq_length), h = static_cast<double>(m.hidden_size);
    const double L = static_cast<double>(m.num_layers), act = 4.0 * N * h;  // one [s, b, h] fp32 activation
    const double P = static_cast<double>(model.registry().num_local_elements());
    const double pbytes = bf16 ? 2.0 : 4.0;
    std::printf("layout: world %d, tp %d, dp %lld, sp %d, distributed optimizer %d, overlap %d, bf16 %d; "
                "%lld micro-batches of %lld x %lld tokens per rank\n",
                world.size, tp, static_cast<long long>(dp), sp, distopt, overlap, bf16, static_cast<long long>(num_micro),
                static_cast<long long>(mbs), static_cast<long long>(m.seq_length));
    std::printf("step time: %.3f s\n", step_s);
    std::printf("| group | collective | calls/step | MiB/step (payload) | analytic MiB/step |\n|---|---|---|---|---|\n");
    auto row = [](const char* g, const CommStats& s, CollectiveKind k, double analytic) {
      const int i = static_cast<int>(k);
      if (s.calls[i] == 0 && analytic == 0.0) return;
      std::printf("| %s | %s | %lld | %.2f | %.2f |\n", g, collective_name(k), static_cast<long long>(s.calls[i]),
                  static_cast<double>(s.bytes[i]) / (1 << 20), analytic / (1 << 20));
    };
    // Megatron per micro-batch on the TP group: without SP one all-reduce of an activation
    // for the embedding, two per layer forward (proj, fc2), two per layer backward (qkv and
    // fc1 input gradients) and one for the output layer's input gradient; the vocab-parallel
    // loss adds three rows of scalars (max, sum, target logit). With SP every such
    // all-reduce becomes a reduce-scatter + all-gather of the same volume, and backward
    // re-gathers the column inputs (2 per layer) and the embedding gradient.
    if (ps.tp_2d()) {
      // 2D: the X and Y groups' traffic against comm_volume_2d.h, plus once per step the tp-x sum
      // of the replicated gradients; the whole tp group keeps the embedding's and the output
      // layer's all-reduces and the loss's scalar rows.
      const double M = static_cast<double>(num_micro);
      const Tp2dVolumes v = tp_2d_micro_batch_volumes(m, mbs * m.seq_length, m.num_layers,
                                                      ps.sizes.tp_x, ps.sizes.tp_y, true);
      double summed_over_x = 0.0;  // (no reduction over a one-rank X group)
      for (const auto& p : model.registry().params())
        if (p->spec.grads_summed_over_tp_x && ps.sizes.tp_x > 1)
          summed_over_x += 4.0 * static_cast<double>(p->local_shape.numel());
      std::printf("2D grid %d x %d\n", ps.sizes.tp_x, ps.sizes.tp_y);
      row("tp", tp_stats, CollectiveKind::kAllReduce, M * (act * 2 + 4.0 * 3 * N));
      row("tp-x", x_stats, CollectiveKind::kAllGather, M * v.x_all_gather);
      row("tp-x", x_stats, CollectiveKind::kReduceScatter, M * v.x_reduce_scatter);
      row("tp-x", x_stats, CollectiveKind::kAllReduce, summed_over_x);
      row("tp-y", y_stats, CollectiveKind::kAllGather, M * v.y_all_gather);
      row("tp-y", y_stats, CollectiveKind::kReduceScatter, M * v.y_reduce_scatter);
      row("tp-y", y_stats, CollectiveKind::kAllReduce, M * v.y_all_reduce);
    } else if (tp > 1) {
      const double M = static_cast<double>(num_micro);
      if (!sp) {
        row("tp", tp_stats, CollectiveKind::kAllReduce, M * (act * (2 + 4 * L) + 4.0 * 3 * N));
      } else {
        // Plus, once per step, the gradients of the sequence-parallel replicated parameters
        // (norms, row-parallel biases, position embeddings) summed over tp.
        double sp_params = 0.0;
        for (const auto& p : model.registry().params())
          if (p->spec.sequence_parallel) sp_params += static_cast<double>(p->local_shape.numel());
        row("tp", tp_stats, CollectiveKind::kAllReduce, M * 4.0 * 3 * N + 4.0 * sp_params);
        row("tp", tp_stats, CollectiveKind::kReduceScatter, M * act * (2 + 4 * L));
        row("tp", tp_stats, CollectiveKind::kAllGather, M * act * (2 + 6 * L));
      }
    }
    // Data parallel: all-reduce of every gradient once per step, or reduce-scatter of the
    // gradients plus all-gather of the updated (param dtype) parameters.
    if (dp > 1) {
      if (!distopt) {
        row("dp-cp", dp_stats, CollectiveKind::kAllReduce, 4.0 * P);
      } else {
        row("dp-cp", dp_stats, CollectiveKind::kReduceScatter, 4.0 * P);
        row("dp-cp", dp_stats, CollectiveKind::kAllGather, pbytes * P);
      }
    }
  }
  finalize_mpi();
  return 0;
}
