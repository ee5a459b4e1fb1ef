// MoE layer benchmark under mpirun (issue 13): the whole world is one expert-parallel group
// (EP = world size, tp = 1), each rank routes its own micro-batch of --seq x --mbs tokens.
// Times one MoE layer's MLP slot (MoELayer: router, dispatcher, routed experts, shared
// experts) forward + backward per micro-batch, then each part alone for the breakdown:
//  * the router and the shared experts (forward, backward);
//  * the dispatcher alone, each of its four steps (dispatch, combine and their backwards:
//    permutation work plus the collective);
//  * the bare collectives of those steps with the same sizes, each after a barrier (the
//    transfer time without waiting for another rank's compute);
// and the process groups' counters (calls and bytes per step). With the overlap flags the
// shared experts' forward runs during the dispatch's collective, their backward during the
// combine's backward collective and the router's backward during the dispatch's backward
// collective; "hideable_ms" sums min(collective, compute) over those three pairs, so the
// share of communication hidden is (step without overlap - step with) / hideable_ms. Every
// time is the slowest rank's (max over ranks); the layer's step is the median over --steps
// after --warmup (also the mean and the best), the parts' the median of their repetitions.
// Prints one JSON line from rank 0.
//   mpirun -np P moe_layer [--dispatcher allgather|alltoall] [--no-grouped-gemm]
//       [--shared F] [--moe-shared-expert-overlap] [--moe-alltoall-overlap-comm]
//       [--moe-allgather-overlap-comm] [--moe-permutation-async-comm] [--hidden H] [--ffn F]
//       [--experts E] [--topk K] [--seq S] [--mbs B] [--steps N] [--warmup N]
#include "transformer/moe/moe_layer.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "config/validate_moe.h"
#include "core/check.h"
#include "core/rng.h"
#include "core/timers.h"
#include "distributed/param_and_grad_buffer.h"
#include "kernels/backend.h"
#include "parallel/initialize.h"
#include "transformer/mlp.h"

using namespace mindspeed;

namespace {

double max_over_ranks(double v) {
  double out = 0.0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Median over `reps` of the slowest rank's time of f() in ms, each rep after a barrier (after
// one untimed call: first-touch allocations, the communication thread's first job).
template <typename F>
double time_ms(int reps, F&& f) {
  MPI_Barrier(MPI_COMM_WORLD);
  f();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    Timer t;
    f();
    ms.push_back(1e3 * max_over_ranks(t.seconds()));
  }
  return median(ms);
}

std::vector<int64_t> times(const std::vector<int64_t>& rows, int64_t h) {
  std::vector<int64_t> out(rows);
  for (int64_t& x : out) x *= h;
  return out;
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

Tensor random_rows(Allocator& alloc, int64_t rows, int64_t cols, uint64_t seed) {
  Tensor t(alloc, Shape{rows, cols}, DType::kFloat32, MemoryCategory::kActivations);
  fill_normal(t.f32(), rows * cols, 0.0f, 1.0f, RngStream{seed, 0});
  return t;
}

// "group kind calls/step MiB/step; ..." for every collective kind used on these groups.
std::string comm_summary(const std::vector<ProcessGroup*>& groups, int steps) {
  std::string out;
  for (ProcessGroup* g : groups) {
    const CommStats& s = g->stats();
    for (int k = 0; k < kNumCollectiveKinds; ++k) {
      if (s.calls[k] == 0) continue;
      char buf[160];
      std::snprintf(buf, sizeof(buf), "%s%s %s %.1f calls %.2f MiB", out.empty() ? "" : "; ",
                    g->name().c_str(), collective_name(static_cast<CollectiveKind>(k)),
                    static_cast<double>(s.calls[k]) / steps,
                    static_cast<double>(s.bytes[k]) / (1 << 20) / steps);
      out += buf;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  MpiWorld world = initialize_mpi(&argc, &argv);
  int steps = 5, warmup = 2;
  int64_t hidden = 512, ffn = 1408, experts = 8, topk = 2, seq = 512, mbs = 4, shared = 0;
  std::string dispatcher = "alltoall";
  bool grouped = true;
  MoeConfig moe;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) fatal(std::string("missing value after ") + a);
      return std::string(argv[++i]);
    };
    if (a == "--dispatcher")
      dispatcher = next();
    else if (a == "--no-grouped-gemm")
      grouped = false;
    else if (a == "--shared")
      shared = std::stoll(next());
    else if (a == "--moe-shared-expert-overlap")
      moe.shared_expert_overlap = true;
    else if (a == "--moe-alltoall-overlap-comm")
      moe.alltoall_overlap_comm = true;
    else if (a == "--moe-allgather-overlap-comm")
      moe.allgather_overlap_comm = true;
    else if (a == "--moe-permutation-async-comm")
      moe.permutation_async_comm = true;
    else if (a == "--hidden")
      hidden = std::stoll(next());
    else if (a == "--ffn")
      ffn = std::stoll(next());
    else if (a == "--experts")
      experts = std::stoll(next());
    else if (a == "--topk")
      topk = std::stoll(next());
    else if (a == "--seq")
      seq = std::stoll(next());
    else if (a == "--mbs")
      mbs = std::stoll(next());
    else if (a == "--steps")
      steps = std::stoi(next());
    else if (a == "--warmup")
      warmup = std::stoi(next());
    else
      fatal(std::string("unknown argument ") + a);
  }
  if (dispatcher != "alltoall" && dispatcher != "allgather")
    fatal("--dispatcher is alltoall or allgather");
  const bool a2a = dispatcher == "alltoall";

  // LLaMA-style layer (SwiGLU experts, no biases), Mixtral's routing (softmax top-k, aux loss).
  ModelConfig m;
  m.num_layers = 1;
  m.hidden_size = hidden;
  m.num_attention_heads = 8;
  m.kv_channels = hidden / 8;
  m.num_query_groups = 8;
  m.ffn_hidden_size = ffn;
  m.seq_length = m.max_position_embeddings = seq;
  m.vocab_size = m.padded_vocab_size = 1024;
  m.normalization = Normalization::kRMSNorm;
  m.swiglu = true;
  m.add_bias_linear = false;
  m.attention_dropout = m.hidden_dropout = 0.0f;
  moe.num_experts = experts;
  moe.router_topk = topk;
  moe.ffn_hidden_size = ffn;
  moe.dispatcher = a2a ? MoeDispatcher::kAllToAll : MoeDispatcher::kAllGather;
  moe.grouped_gemm = grouped;
  moe.permute_fusion = a2a;  // MindSpeed: the fused permutation is for the alltoall dispatchers
  moe.load_balancing = MoeLoadBalancing::kAuxLoss;
  moe.aux_loss_coeff = 0.01f;
  moe.shared_expert_intermediate_size = shared;
  m.moe = moe;
  ParallelConfig pc;
  pc.expert_model_parallel_size = world.size;
  if (const Status s = validate_moe(m, pc); !s.ok()) fatal(s.to_string());
  auto ps_or = initialize_model_parallel(pc, world);
  if (!ps_or.ok()) fatal(ps_or.status().to_string());
  ParallelState& ps = **ps_or;
  const Backend backend = select_backend(KernelOptions{.fast = true, .flash_attention = true},
                                         default_threads_per_rank(world.local_size));
  Allocator alloc;

  // The layer, and copies of its router and shared experts (same names, so the same initial
  // weights) for the breakdown.
  const std::string prefix = "decoder.layers.0.mlp";
  const ExpertPlacement placement{ps.sizes.expert, ps.ep_rank, ps.sizes.expert_tensor};
  ParameterRegistry registry;
  MoELayer layer(registry, prefix, m, 0, placement, 1, false);
  TopKRouter router(registry, prefix + ".part.router", m, 0, false);
  std::unique_ptr<MLP> shared_mlp;
  if (shared > 0)
    shared_mlp = std::make_unique<MLP>(registry, prefix + ".part.shared", m, 1, false, shared);
  const int64_t num_local = experts / ps.sizes.expert;
  const TokenDispatcher token_dispatcher(m, ps.ep_rank * num_local, num_local);
  BufferOptions bo;
  bo.data_parallel_size = ps.dp_cp().size();
  bo.expert_data_parallel_size = ps.expert_dp().size();
  ParamAndGradBuffer buffer(registry, alloc, bo);
  initialize_parameters(registry, 1234, ps);

  ForwardContext ctx;
  ctx.backend = &backend;
  ctx.alloc = &alloc;
  ctx.ps = &ps;
  MicroBatch mb;
  mb.B = mbs;
  mb.T = seq;
  const int64_t n = mbs * seq, h = hidden, E = experts;
  Tensor x = random_rows(alloc, n, h, 100 + static_cast<uint64_t>(world.rank));
  Tensor dout = random_rows(alloc, n, h, 200 + static_cast<uint64_t>(world.rank));
  Tensor out(alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kActivations);
  Tensor dx(alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kActivations);

  // 1. The layer: forward + backward per micro-batch.
  std::vector<ProcessGroup*> groups = {&ps.ep(), &ps.tp_ep(), &ps.tp_cp()};
  std::vector<double> fwd, bwd, step;  // ms, the slowest rank's
  int64_t routed_rows = 0;
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup) {
      for (ProcessGroup* g : groups) g->reset_stats();
    }
    ctx.iteration = s + 1;
    MoELayer::Saved saved;
    MPI_Barrier(MPI_COMM_WORLD);
    Timer t;
    layer.forward(ctx, mb, x.f32(), n, out.f32(), saved);
    const double t_fwd = t.seconds();
    layer.backward(ctx, mb, saved, x.f32(), dout.f32(), dx.f32(), n);
    const double t_step = t.seconds();
    const double slowest = max_over_ranks(t_step);
    if (s < warmup) continue;
    fwd.push_back(1e3 * max_over_ranks(t_fwd));
    bwd.push_back(1e3 * max_over_ranks(t_step - t_fwd));
    step.push_back(1e3 * slowest);
    routed_rows = std::max<int64_t>(routed_rows, saved.expert_input.shape()[0]);
  }
  const std::string comm = comm_summary(groups, steps);
  int64_t max_rows = 0;
  MPI_Allreduce(&routed_rows, &max_rows, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);

  // 2. The router and the shared experts alone.
  TopKRouter::Saved rs;
  const double router_fwd = time_ms(steps, [&] {
    rs = TopKRouter::Saved{};
    router.forward(ctx, mb, x.f32(), n, rs);
  });
  std::vector<float> dprobs(static_cast<size_t>(n * E));
  for (size_t i = 0; i < dprobs.size(); ++i) dprobs[i] = 1e-3f * static_cast<float>(i % 7);
  Tensor dgate = Tensor::zeros(alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kWorkspace);
  const double router_bwd =
      time_ms(steps, [&] { router.backward(ctx, mb, rs, x.f32(), dprobs.data(), dgate.f32(), n); });
  double shared_fwd = 0.0, shared_bwd = 0.0;
  if (shared_mlp) {
    MLP::Saved ss;
    shared_fwd = time_ms(steps, [&] {
      ss = MLP::Saved{};
      shared_mlp->forward(ctx, x.f32(), n, out.f32(), ss);
    });
    shared_bwd =
        time_ms(steps, [&] { shared_mlp->backward(ctx, ss, x.f32(), dout.f32(), dx.f32(), n); });
  }

  const int comm_reps = std::max(steps, 20);  // short and noisy: more repetitions
  // 3. The dispatcher alone (the router's routing of x; the experts' output = their input).
  TokenDispatcher::Saved ds;
  Tensor expert_rows, dy;
  const double disp_dispatch = time_ms(comm_reps, [&] {
    ds = TokenDispatcher::Saved{};
    token_dispatcher.start_dispatch(ctx, x.f32(), n, rs.probs.data(), rs.routing_map.data(), ds);
    expert_rows = token_dispatcher.finish_dispatch(ctx, ds);
  });
  const int64_t R = expert_rows.shape()[0];
  const double disp_combine = time_ms(comm_reps, [&] {
    Tensor y(alloc, Shape{R, h}, DType::kFloat32, MemoryCategory::kActivations);
    std::memcpy(y.f32(), expert_rows.f32(), sizeof(float) * static_cast<size_t>(R * h));
    token_dispatcher.start_combine(ctx, std::move(y), ds);
    token_dispatcher.finish_combine(ctx, out.f32(), ds);
  });
  const double disp_combine_bwd = time_ms(comm_reps, [&] {
    token_dispatcher.start_combine_backward(ctx, dout.f32(), ds);
    dy = token_dispatcher.finish_combine_backward(ctx, dprobs.data(), ds);
  });
  const double disp_dispatch_bwd = time_ms(comm_reps, [&] {
    token_dispatcher.start_dispatch_backward(ctx, dy.f32(), ds);
    token_dispatcher.finish_dispatch_backward(ctx, dx.f32(), ds);
  });

  // 4. The bare collectives of the four steps, with the sizes of this routing. c_other: those
  // no flag overlaps with compute (alltoall: the count exchange before the permutation;
  // allgather: the probabilities' gradient reduce-scattered after the combine's backward).
  double c_dispatch = 0.0, c_combine = 0.0, c_combine_bwd = 0.0, c_dispatch_bwd = 0.0,
         c_other = 0.0;
  if (a2a) {
    ProcessGroup& ep = ps.ep();
    const int64_t R_src = static_cast<int64_t>(ds.rows.size());
    Tensor src = random_rows(alloc, std::max<int64_t>(R_src, 1), h, 7);
    Tensor dst = random_rows(alloc, std::max<int64_t>(sum(ds.output_splits), 1), h, 8);
    std::vector<int64_t> counts(static_cast<size_t>(ps.tp_ep().size() * E));
    std::vector<int64_t> mine(static_cast<size_t>(E), 1);
    c_other = time_ms(comm_reps, [&] {
      ps.tp_ep()
          .all_gather_bytes_async(counts.data(), mine.data(),
                                  E * static_cast<int64_t>(sizeof(int64_t)))
          ->wait();
    });
    auto forward_a2a = [&] {
      ep.all_to_all_async(dst.f32(), times(ds.output_splits, h), src.f32(),
                          times(ds.input_splits, h))
          ->wait();
    };
    auto reverse_a2a = [&] {
      ep.all_to_all_async(src.f32(), times(ds.input_splits, h), dst.f32(),
                          times(ds.output_splits, h))
          ->wait();
    };
    // dispatch: the tokens out; combine: back; their backwards the same two ways.
    c_dispatch = time_ms(comm_reps, forward_a2a);
    c_combine = time_ms(comm_reps, reverse_a2a);
    c_combine_bwd = time_ms(comm_reps, forward_a2a);
    c_dispatch_bwd = time_ms(comm_reps, reverse_a2a);
  } else {
    ProcessGroup& g = ps.tp_ep();
    const int64_t T = g.size() * n;
    Tensor big = random_rows(alloc, T, h, 7);
    Tensor small = random_rows(alloc, n, h, 8);
    Tensor big_e = random_rows(alloc, T, E, 9);
    Tensor small_e = random_rows(alloc, n, E, 10);
    std::vector<uint8_t> map_all(static_cast<size_t>(T * E)), map(static_cast<size_t>(n * E), 1);
    // dispatch: the routing map, the probabilities and the tokens gathered; combine: the
    // outputs reduce-scattered; backward: dout gathered, then the input gradients
    // reduce-scattered.
    c_dispatch = time_ms(comm_reps, [&] {
      g.all_gather_bytes_async(map_all.data(), map.data(), n * E)->wait();
      g.all_gather_async(big_e.f32(), small_e.f32(), n * E)->wait();
      g.all_gather_async(big.f32(), small.f32(), n * h)->wait();
    });
    auto reduce_scatter = [&] {
      g.reduce_scatter_async(small.f32(), big.f32(), n * h, ReduceOp::kSum)->wait();
    };
    c_combine = time_ms(comm_reps, reduce_scatter);
    c_combine_bwd =
        time_ms(comm_reps, [&] { g.all_gather_async(big.f32(), small.f32(), n * h)->wait(); });
    c_other = time_ms(comm_reps, [&] {
      g.reduce_scatter_async(small_e.f32(), big_e.f32(), n * E, ReduceOp::kSum)->wait();
    });
    c_dispatch_bwd = time_ms(comm_reps, reduce_scatter);
  }
  const double comm_ms = c_dispatch + c_combine + c_combine_bwd + c_dispatch_bwd + c_other;
  // The pairs the overlap flags run together.
  const double hideable = std::min(c_dispatch, shared_fwd) + std::min(c_combine_bwd, shared_bwd) +
                          std::min(c_dispatch_bwd, router_bwd);
  const double overlapped_compute = shared_fwd + shared_bwd + router_bwd;

  if (world.rank == 0) {
    std::printf(
        "{\"np\": %d, \"dispatcher\": \"%s\", \"grouped_gemm\": %d, \"shared\": %lld, "
        "\"shared_expert_overlap\": %d, "
        "\"alltoall_overlap_comm\": %d, \"allgather_overlap_comm\": %d, "
        "\"permutation_async_comm\": %d, "
        "\"hidden\": %lld, \"ffn\": %lld, \"experts\": %lld, \"topk\": %lld, \"tokens_per_rank\": "
        "%lld, "
        "\"step_ms\": %.2f, \"mean_step_ms\": %.2f, \"best_step_ms\": %.2f, \"fwd_ms\": %.2f, "
        "\"bwd_ms\": %.2f, "
        "\"max_expert_rows\": %lld, "
        "\"router_fwd_ms\": %.2f, \"router_bwd_ms\": %.2f, \"shared_fwd_ms\": %.2f, "
        "\"shared_bwd_ms\": %.2f, "
        "\"dispatcher_dispatch_ms\": %.2f, \"dispatcher_combine_ms\": %.2f, "
        "\"dispatcher_combine_bwd_ms\": %.2f, "
        "\"dispatcher_dispatch_bwd_ms\": %.2f, \"dispatcher_ms\": %.2f, "
        "\"coll_dispatch_ms\": %.2f, \"coll_combine_ms\": %.2f, \"coll_combine_bwd_ms\": %.2f, "
        "\"coll_dispatch_bwd_ms\": %.2f, \"coll_other_ms\": %.2f, \"comm_ms\": %.2f, "
        "\"overlapped_compute_ms\": %.2f, "
        "\"hideable_ms\": %.2f, "
        "\"comm\": \"%s\"}\n",
        world.size, dispatcher.c_str(), grouped, static_cast<long long>(shared),
        moe.shared_expert_overlap, moe.alltoall_overlap_comm, moe.allgather_overlap_comm,
        moe.permutation_async_comm, static_cast<long long>(hidden), static_cast<long long>(ffn),
        static_cast<long long>(experts), static_cast<long long>(topk), static_cast<long long>(n),
        median(step), std::accumulate(step.begin(), step.end(), 0.0) / steps,
        *std::min_element(step.begin(), step.end()), median(fwd), median(bwd),
        static_cast<long long>(max_rows), router_fwd, router_bwd, shared_fwd, shared_bwd,
        disp_dispatch, disp_combine, disp_combine_bwd, disp_dispatch_bwd,
        disp_dispatch + disp_combine + disp_combine_bwd + disp_dispatch_bwd, c_dispatch, c_combine,
        c_combine_bwd, c_dispatch_bwd, c_other, comm_ms, overlapped_compute, hideable,
        comm.c_str());
    std::fflush(stdout);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  finalize_mpi();
  return 0;
}
