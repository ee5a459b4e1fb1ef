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
// Step times move by more than the VM's noise only when the communication is a large share,
// so with shared experts --exposed N also measures the hiding directly: MoELayer's order of
// work replayed with the parts, N pairs of steps alternating without and with overlap in the
// same process, timing the wait on the in-flight collective at the three overlap points. The
// last rank to reach a collective waits only for the transfer (the others also wait for it):
// "exposed_wait_no_ms" / "exposed_wait_ov_ms" sum that rank's wait (min over ranks) over the
// three points, the communication left on the critical path (hidden share = 1 - ov / no);
// "exposed_wait_max_*" sum the longest waits (transfer plus the ranks' skew);
// "exposed_wait_points_*" list min/max per point.
// Prints one JSON line from rank 0.
//   mpirun -np P moe_layer [--dispatcher allgather|alltoall] [--no-grouped-gemm]
//       [--shared F] [--moe-shared-expert-overlap] [--moe-alltoall-overlap-comm]
//       [--moe-allgather-overlap-comm] [--moe-permutation-async-comm] [--hidden H] [--ffn F]
//       [--experts E] [--topk K] [--seq S] [--mbs B] [--steps N] [--warmup N] [--exposed N]
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

double min_over_ranks(double v) {
  double out = 0.0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
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

// One JSON object, built key by key.
struct Json {
  std::string s = "{";
  void key(const char* k) {
    if (s.size() > 1) s += ", ";
    s += '"';
    s += k;
    s += "\": ";
  }
  void num(const char* k, double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2f", v);
    key(k);
    s += buf;
  }
  void integer(const char* k, int64_t v) {
    key(k);
    s += std::to_string(v);
  }
  void str(const char* k, const std::string& v) {
    key(k);
    s += '"';
    s += v;
    s += '"';
  }
};

}  // namespace

int main(int argc, char** argv) {
  MpiWorld world = initialize_mpi(&argc, &argv);
  int steps = 5, warmup = 2, exposed_pairs = 0;
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
    else if (a == "--exposed")
      exposed_pairs = std::stoi(next());
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

  // The layer, and parts of the same shapes (their own parameters) for the breakdown and the
  // exposed-wait replica: a router, the routed experts, the shared experts, a dispatcher.
  const std::string prefix = "decoder.layers.0.mlp";
  const ExpertPlacement placement{ps.sizes.expert, ps.ep_rank, ps.sizes.expert_tensor};
  ParameterRegistry registry;
  MoELayer layer(registry, prefix, m, 0, placement, 1, false);
  TopKRouter router(registry, prefix + ".part.router", m, 0, false);
  std::unique_ptr<MLP> shared_mlp;
  if (shared > 0)
    shared_mlp = std::make_unique<MLP>(registry, prefix + ".part.shared", m, 1, false, shared);
  const int64_t num_local = experts / ps.sizes.expert;
  const Experts routed(registry, prefix + ".part.experts", m, ps.ep_rank * num_local, num_local,
                       ps.sizes.expert_tensor);
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

  // 5. Exposed waits (--exposed N): MoELayer's order of work replayed with the parts above,
  // N pairs of steps alternating without and with overlap in this one process, timing the
  // wait on the in-flight collective at the three overlap points (dispatch; combine's
  // backward; dispatch's backward). Without overlap the wait follows the start at once.
  std::vector<double> rep_step[2], rep_wait[2][3], rep_wait_max[2][3];
  auto wait_pending = [&](TokenDispatcher::Saved& d) {
    Timer t;
    for (auto* w : {&d.pending.work, &d.pending.work2, &d.pending.work3}) {
      if (*w) (*w)->wait();
    }
    return 1e3 * t.seconds();
  };
  for (int pair = 0; pair < exposed_pairs + 1 && shared_mlp; ++pair) {
    for (int ov = 0; ov < 2; ++ov) {
      double wait[3];
      TopKRouter::Saved r;
      TokenDispatcher::Saved d;
      Experts::Saved es;
      MLP::Saved ss;
      Tensor shared_out(alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kActivations);
      Tensor dx_router =
          Tensor::zeros(alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kWorkspace);
      Tensor dx_shared(alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kWorkspace);
      MPI_Barrier(MPI_COMM_WORLD);
      Timer t;
      // forward
      router.forward(ctx, mb, x.f32(), n, r);
      token_dispatcher.start_dispatch(ctx, x.f32(), n, r.probs.data(), r.routing_map.data(), d);
      if (ov) shared_mlp->forward(ctx, x.f32(), n, shared_out.f32(), ss);
      wait[0] = wait_pending(d);
      Tensor input = token_dispatcher.finish_dispatch(ctx, d);
      Tensor y(alloc, Shape{input.shape()[0], h}, DType::kFloat32, MemoryCategory::kActivations);
      routed.forward(ctx, input.f32(), d.tokens_per_expert, y.f32(), es);
      token_dispatcher.start_combine(ctx, std::move(y), d);
      token_dispatcher.finish_combine(ctx, out.f32(), d);
      if (!ov) shared_mlp->forward(ctx, x.f32(), n, shared_out.f32(), ss);
      ctx.k().add_inplace(ctx.kc(), out.f32(), shared_out.f32(), n * h);
      // backward
      token_dispatcher.start_combine_backward(ctx, dout.f32(), d);
      if (ov) shared_mlp->backward(ctx, ss, x.f32(), dout.f32(), dx_shared.f32(), n);
      wait[1] = wait_pending(d);
      Tensor dy = token_dispatcher.finish_combine_backward(ctx, dprobs.data(), d);
      Tensor dinput(alloc, input.shape(), DType::kFloat32, MemoryCategory::kWorkspace);
      routed.backward(ctx, es, input.f32(), dy.f32(), d.tokens_per_expert, dinput.f32());
      token_dispatcher.start_dispatch_backward(ctx, dinput.f32(), d);
      if (ov) router.backward(ctx, mb, r, x.f32(), dprobs.data(), dx_router.f32(), n);
      wait[2] = wait_pending(d);
      token_dispatcher.finish_dispatch_backward(ctx, dx.f32(), d);
      if (!ov) {
        router.backward(ctx, mb, r, x.f32(), dprobs.data(), dx_router.f32(), n);
        shared_mlp->backward(ctx, ss, x.f32(), dout.f32(), dx_shared.f32(), n);
      }
      ctx.k().add_inplace(ctx.kc(), dx.f32(), dx_router.f32(), n * h);
      ctx.k().add_inplace(ctx.kc(), dx.f32(), dx_shared.f32(), n * h);
      const double ms = 1e3 * max_over_ranks(t.seconds());
      if (pair == 0) continue;  // warm-up pair
      rep_step[ov].push_back(ms);
      for (int k = 0; k < 3; ++k) {
        rep_wait[ov][k].push_back(min_over_ranks(wait[k]));
        rep_wait_max[ov][k].push_back(max_over_ranks(wait[k]));
      }
    }
  }

  if (world.rank == 0) {
    Json j;
    j.integer("np", world.size);
    j.str("dispatcher", dispatcher);
    j.integer("grouped_gemm", grouped);
    j.integer("shared", shared);
    j.integer("shared_expert_overlap", moe.shared_expert_overlap);
    j.integer("alltoall_overlap_comm", moe.alltoall_overlap_comm);
    j.integer("allgather_overlap_comm", moe.allgather_overlap_comm);
    j.integer("permutation_async_comm", moe.permutation_async_comm);
    j.integer("hidden", hidden);
    j.integer("ffn", ffn);
    j.integer("experts", experts);
    j.integer("topk", topk);
    j.integer("tokens_per_rank", n);
    j.num("step_ms", median(step));
    j.num("mean_step_ms", std::accumulate(step.begin(), step.end(), 0.0) / steps);
    j.num("best_step_ms", *std::min_element(step.begin(), step.end()));
    j.num("fwd_ms", median(fwd));
    j.num("bwd_ms", median(bwd));
    j.integer("max_expert_rows", max_rows);
    j.num("router_fwd_ms", router_fwd);
    j.num("router_bwd_ms", router_bwd);
    j.num("shared_fwd_ms", shared_fwd);
    j.num("shared_bwd_ms", shared_bwd);
    j.num("dispatcher_dispatch_ms", disp_dispatch);
    j.num("dispatcher_combine_ms", disp_combine);
    j.num("dispatcher_combine_bwd_ms", disp_combine_bwd);
    j.num("dispatcher_dispatch_bwd_ms", disp_dispatch_bwd);
    j.num("dispatcher_ms", disp_dispatch + disp_combine + disp_combine_bwd + disp_dispatch_bwd);
    j.num("coll_dispatch_ms", c_dispatch);
    j.num("coll_combine_ms", c_combine);
    j.num("coll_combine_bwd_ms", c_combine_bwd);
    j.num("coll_dispatch_bwd_ms", c_dispatch_bwd);
    j.num("coll_other_ms", c_other);
    j.num("comm_ms", comm_ms);
    j.num("overlapped_compute_ms", overlapped_compute);
    j.num("hideable_ms", hideable);
    if (!rep_step[0].empty()) {
      for (int ov = 0; ov < 2; ++ov) {
        const std::string tag = ov ? "_ov" : "_no";
        j.num((std::string("exposed_step") + tag + "_ms").c_str(), median(rep_step[ov]));
        double total = 0.0, total_max = 0.0;
        std::string points;
        for (int k = 0; k < 3; ++k) {
          const double w = median(rep_wait[ov][k]);
          char buf[48];
          std::snprintf(buf, sizeof(buf), "%s%.2f/%.2f", k ? " " : "", w,
                        median(rep_wait_max[ov][k]));
          points += buf;
          total += w;
          total_max += median(rep_wait_max[ov][k]);
        }
        j.num((std::string("exposed_wait") + tag + "_ms").c_str(), total);
        j.num((std::string("exposed_wait_max") + tag + "_ms").c_str(), total_max);
        j.str((std::string("exposed_wait_points") + tag).c_str(), points);
      }
    }
    j.str("comm", comm);
    std::printf("%s}\n", j.s.c_str());
    std::fflush(stdout);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  finalize_mpi();
  return 0;
}
