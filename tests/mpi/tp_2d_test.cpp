// 2D tensor parallelism (tensor_parallel/linear_2d.h) on 4 ranks as a 2 x 2 grid, beyond the
// equivalence layouts of parallel_equivalence_test.cpp:
//  * the bytes one training step moves on the tp-x and tp-y groups equal the analytic volumes of
//    comm_volume_2d.h (plus the tp-x sum of the replicated gradients), for the GPT (LayerNorm,
//    biases) and LLaMA (RMSNorm, SwiGLU, no biases) families;
//  * with the overlap flags a layer's collective runs as several chunked calls on its axis and the
//    output and gradients equal the plain layer's.
#include <gtest/gtest.h>

#include <vector>

#include "distributed/distributed_data_parallel.h"
#include "optimizer/optimizer.h"
#include "parallel_harness.h"
#include "tensor_parallel/comm_volume_2d.h"
#include "tensor_parallel/linear_2d.h"
#include "test_mpi.h"
#include "test_util.h"
#include "training/train_step.h"

namespace mindspeed::testing {
namespace {

ParallelConfig grid_2x2() {
  ParallelConfig pc;
  pc.tensor_model_parallel_size = 4;
  pc.tp_2d = true;
  pc.tp_x = pc.tp_y = 2;
  return pc;
}

double bytes(const CommStats& s, CollectiveKind k) { return static_cast<double>(s.bytes[static_cast<int>(k)]); }
int64_t calls(const CommStats& s, CollectiveKind k) { return s.calls[static_cast<int>(k)]; }

TEST(Tp2d, CommunicationVolumesEqualTheAnalyticFormula) {
  const MpiWorld& world = mpi_world();
  if (world.size != 4) GTEST_SKIP();
  for (const bool llama : {false, true}) {
    SCOPED_TRACE(llama ? "llama" : "gpt");
    ContextOnWorld w(grid_2x2(), world);
    w.backend = select_backend(KernelOptions{.fast = true, .flash_attention = true}, 1);
    const ParallelState& ps = *w.ps;
    const ModelConfig m = llama ? tiny_llama_config() : tiny_gpt_config();
    ParameterRegistry registry;
    GPTModel model(m, ps, registry, {});
    ParamAndGradBuffer buffer(model.registry(), w.alloc, BufferOptions{});
    initialize_parameters(model.registry(), 1234, ps);
    DistributedDataParallel ddp(buffer, ps, DdpConfig{}, w.backend);
    OptimizerConfig oc;
    oc.lr = 1e-3f;
    Optimizer optimizer(oc, buffer, ps, w.alloc, w.backend, false);
    std::vector<MicroBatch> mbs;
    const int64_t B = 2, T = m.seq_length, M = 2;
    for (int64_t k = 0; k < M; ++k) {
      MicroBatch mb;
      mb.B = B;
      mb.T = T;
      mb.first_sample = k * B;
      for (int64_t i = 0; i < B * T; ++i) {
        mb.tokens.push_back(static_cast<int32_t>((i * 37 + k) % m.vocab_size));
        mb.labels.push_back(static_cast<int32_t>((i * 91 + k) % m.vocab_size));
        mb.loss_mask.push_back(1.0f);
        mb.position_ids.push_back(static_cast<int32_t>(i % T));
      }
      mbs.push_back(std::move(mb));
    }
    w.ctx.iteration = 1;
    train_step(model, buffer, optimizer, &ddp, w.ctx, mbs, 1e-3);  // warm-up
    ps.tp_x().reset_stats();
    ps.tp_y().reset_stats();
    w.ctx.iteration = 2;
    train_step(model, buffer, optimizer, &ddp, w.ctx, mbs, 1e-3);
    const CommStats x = ps.tp_x().stats(), y = ps.tp_y().stats();
    const Tp2dVolumes v = tp_2d_micro_batch_volumes(m, B * T, m.num_layers, 2, 2, /*whole_model=*/true);
    double summed_over_x = 0.0;  // the replicated gradients, once per step
    for (const auto& p : model.registry().params()) {
      if (p->spec.grads_summed_over_tp_x) summed_over_x += 4.0 * static_cast<double>(p->local_shape.numel());
    }
    EXPECT_EQ(bytes(x, CollectiveKind::kAllGather), M * v.x_all_gather);
    EXPECT_EQ(bytes(x, CollectiveKind::kReduceScatter), M * v.x_reduce_scatter);
    EXPECT_EQ(bytes(x, CollectiveKind::kAllReduce), summed_over_x);
    EXPECT_EQ(bytes(y, CollectiveKind::kAllGather), M * v.y_all_gather);
    EXPECT_EQ(bytes(y, CollectiveKind::kReduceScatter), M * v.y_reduce_scatter);
    EXPECT_EQ(bytes(y, CollectiveKind::kAllReduce), M * v.y_all_reduce);
    EXPECT_GT(summed_over_x, 0.0);
  }
}

// fc1's forward reduce-scatter (--enable-overlap-matmul-with-rs), fc2's forward all-gather
// (--enable-overlap-ag-with-matmul) and both backward all-gathers of dy
// (--enable-backward-overlap-ag-with-matmul) in chunks on the axis groups, against the plain layers.
TEST(Tp2d, OverlapFlagsChunkTheCollectivesAndKeepTheResults) {
  const MpiWorld& world = mpi_world();
  if (world.size != 4) GTEST_SKIP();
  ContextOnWorld w(grid_2x2(), world);
  const ParallelState& ps = *w.ps;
  const TensorParallelGrid grid = TensorParallelGrid::of(ps);
  const int64_t N = 32, h = 16, F = 24;
  ParameterRegistry registry;
  const Linear2D fc1(registry, "fc1", h, F, LinearOptions{.bias = true, .init_std = 0.5f}, Linear2dRole::kFirst, grid,
                     Linear2dOverlapUse{.forward_rs = true, .backward_ag = true});
  const Linear2D fc2(registry, "fc2", F, h, LinearOptions{.bias = true, .init_std = 0.5f}, Linear2dRole::kSecond, grid,
                     Linear2dOverlapUse{.forward_ag = true, .backward_ag = true});
  ParamAndGradBuffer buffer(registry, w.alloc, BufferOptions{});
  initialize_parameters(registry, 7, ps);
  // Nonzero first-linear bias (zero-initialised): the chunked form adds it after the reduction.
  std::vector<float> bias(static_cast<size_t>(fc1.bias()->local_shape.numel()));
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.1f * static_cast<float>(i + 1);
  set_parameter_from_shard(*fc1.bias(), bias.data());
  const std::vector<float> x = random_vector(N / 2 * h / 2, 40 + ps.tp_rank);  // [N/X, h/Y]
  const std::vector<float> dy = random_vector(N / 2 * h / 2, 50 + ps.tp_rank);
  struct Run {
    std::vector<float> mid, out, dmid, dx, grads;
  };
  auto run = [&](bool overlap) {
    w.ctx.tp_2d_overlap = {overlap, overlap, overlap};
    for (const auto& p : registry.params()) std::fill(p->g(), p->g() + p->local_shape.numel(), 0.0f);
    Run r{std::vector<float>(N / 2 * F / 2), std::vector<float>(N / 2 * h / 2), std::vector<float>(N / 2 * F / 2),
          std::vector<float>(N / 2 * h / 2), {}};
    fc1.forward(w.ctx, x.data(), r.mid.data(), N);
    fc2.forward(w.ctx, r.mid.data(), r.out.data(), N);
    fc2.backward(w.ctx, r.mid.data(), dy.data(), r.dmid.data(), N);
    fc1.backward(w.ctx, x.data(), r.dmid.data(), r.dx.data(), N);
    for (const auto& p : registry.params()) r.grads.insert(r.grads.end(), p->g(), p->g() + p->local_shape.numel());
    return r;
  };
  const Run plain = run(false);
  for (const ParallelState* axis : {&ps.tp_x_as_tp(), &ps.tp_y_as_tp()}) axis->tp().reset_stats();
  const Run chunked = run(true);
  // The chunks' GEMMs have other shapes than the whole one, so BLAS may round them differently
  // (comm_gemm_test's bound).
  EXPECT_TRUE(all_close(chunked.mid, plain.mid, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(chunked.out, plain.out, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(chunked.dx, plain.dx, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(chunked.grads, plain.grads, 1e-5, 1e-6));
  // 4 chunks per call (16 rows each): fc1 reduce-scatters over Y and gathers its dy over Y, fc2
  // gathers its input over Y and its dy over X.
  const CommStats x_axis = ps.tp_x_as_tp().tp().stats(), y_axis = ps.tp_y_as_tp().tp().stats();
  EXPECT_EQ(calls(y_axis, CollectiveKind::kReduceScatter), 4);  // fc1 forward
  EXPECT_EQ(calls(y_axis, CollectiveKind::kAllGather), 4 + 4);  // fc2 forward input, fc1 backward dy
  EXPECT_EQ(calls(x_axis, CollectiveKind::kAllGather), 4);      // fc2 backward dy
}

}  // namespace
}  // namespace mindspeed::testing
