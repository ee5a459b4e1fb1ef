// TokenDispatcher (token_dispatcher.h).
#include "transformer/moe/token_dispatcher.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace mindspeed {
namespace {

Tensor workspace(const ForwardContext& ctx, int64_t rows, int64_t cols) {
  return Tensor(*ctx.alloc, Shape{rows, cols}, DType::kFloat32, MemoryCategory::kWorkspace);
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

std::vector<int64_t> times(const std::vector<int64_t>& rows, int64_t h) {
  std::vector<int64_t> out(rows);
  for (int64_t& x : out) x *= h;
  return out;
}

}  // namespace

TokenDispatcher::TokenDispatcher(const ModelConfig& config, int64_t first_expert, int64_t num_local)
    : config_(config),
      hidden_(config.hidden_size),
      num_experts_(config.moe.num_experts),
      first_expert_(first_expert),
      num_local_(num_local) {}

void TokenDispatcher::collect_copies(const ForwardContext& ctx, const float* probs,
                                     const uint8_t* map, int64_t T, int64_t e0, int64_t e1,
                                     Saved& saved) const {
  saved.rows.clear();
  saved.experts.clear();
  saved.probs.clear();
  for (int64_t e = e0; e < e1; ++e) {
    for (int64_t t = 0; t < T; ++t) {
      if (map[t * num_experts_ + e] == 0) continue;
      saved.rows.push_back(static_cast<int32_t>(t));
      saved.experts.push_back(static_cast<int32_t>(e));
      saved.probs.push_back(probs[t * num_experts_ + e]);
    }
  }
  // The routing is decided on the host; the permutation kernels read its result on the device.
  saved.kernel_rows =
      device_copy_of(*ctx.backend, *ctx.alloc, saved.rows, MemoryCategory::kActivations);
  saved.kernel_probs =
      device_copy_of(*ctx.backend, *ctx.alloc, saved.probs, MemoryCategory::kActivations);
}

void TokenDispatcher::plan_splits(const ForwardContext& ctx, const std::vector<int64_t>& local_counts,
                                  const std::vector<int64_t>& all, Saved& saved) const {
  const ParallelState& ps = *ctx.ps;
  const int ep = ps.sizes.expert, etp = ps.sizes.expert_tensor, me = ps.etp_rank;
  // Group rank q of tp_ep = ep index * etp + expert-tp index (Megatron's [ep, tp, E] view).
  auto global = [&](int i, int j, int64_t e) {
    return all[(static_cast<size_t>(j) * etp + i) * num_experts_ + first_expert_ + e];
  };
  saved.input_splits.assign(ep, 0);
  saved.output_splits.assign(ep, 0);
  saved.output_splits_tp.assign(etp, 0);
  saved.tokens_per_expert.assign(num_local_, 0);
  saved.chunk_sizes.assign(static_cast<size_t>(etp * ep * num_local_), 0);
  for (int j = 0; j < ep; ++j) {
    for (int64_t e = 0; e < num_local_; ++e) saved.input_splits[j] += local_counts[j * num_local_ + e];
  }
  for (int i = 0; i < etp; ++i) {
    for (int j = 0; j < ep; ++j) {
      for (int64_t e = 0; e < num_local_; ++e) {
        const int64_t c = global(i, j, e);
        saved.chunk_sizes[(static_cast<size_t>(i) * ep + j) * num_local_ + e] = c;
        if (i == me) saved.output_splits[j] += c;
        saved.output_splits_tp[i] += c;
        saved.tokens_per_expert[e] += c;
      }
    }
  }
}

void TokenDispatcher::sort_chunks(const ForwardContext& ctx, float* out, const float* in, const Saved& saved,
                                  bool inverse) const {
  const int64_t sources = static_cast<int64_t>(saved.chunk_sizes.size()) / num_local_;
  // Offsets of each chunk in the source-major layout.
  std::vector<int64_t> src_offset(saved.chunk_sizes.size());
  int64_t at = 0;
  for (size_t c = 0; c < saved.chunk_sizes.size(); ++c) {
    src_offset[c] = at;
    at += saved.chunk_sizes[c];
  }
  int64_t expert_at = 0;
  for (int64_t e = 0; e < num_local_; ++e) {
    for (int64_t s = 0; s < sources; ++s) {
      const size_t c = static_cast<size_t>(s * num_local_ + e);
      const int64_t n = saved.chunk_sizes[c] * hidden_;
      if (n > 0) {
        float* dst = inverse ? out + src_offset[c] * hidden_ : out + expert_at * hidden_;
        const float* src = inverse ? in + expert_at * hidden_ : in + src_offset[c] * hidden_;
        ctx.k().copy(ctx.kc(), dst, src, n);
      }
      expert_at += saved.chunk_sizes[c];
    }
  }
}

Tensor TokenDispatcher::gather_expert_tp(const ForwardContext& ctx, const float* in, const Saved& saved) const {
  ProcessGroup& group = ctx.ps->expert_tp();
  const int etp = group.size();
  const int64_t mine = sum(saved.output_splits) * hidden_;
  Tensor send = workspace(ctx, etp, std::max<int64_t>(mine, 1));
  for (int i = 0; i < etp; ++i) {
    if (mine > 0) ctx.k().copy(ctx.kc(), send.f32() + i * mine, in, mine);
  }
  Tensor out = workspace(ctx, sum(saved.output_splits_tp), hidden_);
  group.all_to_all_async(out.f32(), times(saved.output_splits_tp, hidden_), send.f32(),
                         std::vector<int64_t>(static_cast<size_t>(etp), mine))
      ->wait();
  return out;
}

Tensor TokenDispatcher::reduce_scatter_expert_tp(const ForwardContext& ctx, const float* in, const Saved& saved) const {
  ProcessGroup& group = ctx.ps->expert_tp();
  const int etp = group.size();
  const int64_t mine = sum(saved.output_splits) * hidden_;
  Tensor parts = workspace(ctx, etp, std::max<int64_t>(mine, 1));
  group.all_to_all_async(parts.f32(), std::vector<int64_t>(static_cast<size_t>(etp), mine), in,
                         times(saved.output_splits_tp, hidden_))
      ->wait();
  Tensor out = workspace(ctx, sum(saved.output_splits), hidden_);
  if (mine > 0) {
    ctx.k().copy(ctx.kc(), out.f32(), parts.f32(), mine);
    for (int i = 1; i < etp; ++i) ctx.k().add_inplace(ctx.kc(), out.f32(), parts.f32() + i * mine, mine);
  }
  return out;
}

Tensor TokenDispatcher::arrive_at_experts(const ForwardContext& ctx, Tensor received, const Saved& saved,
                                         MemoryCategory category) const {
  if (ctx.ps->sizes.expert_tensor > 1) received = gather_expert_tp(ctx, received.f32(), saved);
  Tensor rows(*ctx.alloc, Shape{sum(saved.tokens_per_expert), hidden_}, DType::kFloat32, category);
  sort_chunks(ctx, rows.f32(), received.f32(), saved, /*inverse=*/false);
  return rows;
}

void TokenDispatcher::start_return_home(const ForwardContext& ctx, const float* rows, float* out, Saved& saved) const {
  const int64_t h = hidden_;
  Tensor unsorted = workspace(ctx, sum(saved.tokens_per_expert), h);
  sort_chunks(ctx, unsorted.f32(), rows, saved, /*inverse=*/true);
  if (ctx.ps->sizes.expert_tensor > 1) unsorted = reduce_scatter_expert_tp(ctx, unsorted.f32(), saved);
  Pending& p = saved.pending;
  p.send = std::move(unsorted);
  p.work = ctx.ps->ep().all_to_all_async(out, times(saved.input_splits, h), p.send.f32(), times(saved.output_splits, h));
}

void TokenDispatcher::unpermute(const ForwardContext& ctx, float* out, const float* rows_in, int64_t T,
                                const Saved& saved) const {
  const int64_t R = static_cast<int64_t>(saved.rows.size()), h = hidden_;
  if (config_.moe.permute_fusion) {
    ctx.k().moe_unpermute_forward(ctx.kc(), out, rows_in, saved.kernel_probs.f32(),
                                  saved.kernel_rows.i32(), T, R, h);
    return;
  }
  // Megatron's unfused unpermute: the rows times their probabilities, then a scatter-add.
  Tensor weighted = workspace(ctx, R, h);
  ctx.k().scale_rows(ctx.kc(), weighted.f32(), rows_in, saved.kernel_probs.f32(), R, h);
  ctx.k().moe_unpermute_forward(ctx.kc(), out, weighted.f32(), nullptr, saved.kernel_rows.i32(), T,
                                R, h);
}

void TokenDispatcher::start_dispatch(const ForwardContext& ctx, const float* x, int64_t n, const float* probs,
                                     const uint8_t* routing_map, Saved& saved) const {
  const ParallelState& ps = *ctx.ps;
  const int64_t h = hidden_, E = num_experts_;
  Pending& p = saved.pending;
  saved.n = n;
  const bool async = config_.moe.permutation_async_comm || config_.moe.allgather_overlap_comm ||
                     config_.moe.alltoall_overlap_comm;
  if (!all_to_all()) {
    ProcessGroup& group = ps.tp_ep();
    const int64_t T = group.size() * n;
    p.recv = workspace(ctx, T, h);
    p.recv_probs.resize(static_cast<size_t>(T * E));
    p.recv_map.resize(static_cast<size_t>(T * E));
    // The three gathers; with MindSpeed's allgather optimisation all in flight together.
    p.work3 = group.all_gather_bytes_async(p.recv_map.data(), routing_map, n * E);
    if (!async) p.work3->wait();
    p.work2 = group.all_gather_async(p.recv_probs.data(), probs, n * E);
    if (!async) p.work2->wait();
    p.work = group.all_gather_async(p.recv.f32(), x, n * h);
    return;
  }
  // alltoall: every routed copy of this rank's tokens, expert-major over all experts.
  collect_copies(ctx, probs, routing_map, n, 0, E, saved);
  std::vector<int64_t> local_counts(static_cast<size_t>(E), 0);
  for (int32_t e : saved.experts) ++local_counts[e];
  // The count exchange over tp_ep (MindSpeed --moe-permutation-async-comm: in flight while
  // the tokens are permuted).
  ProcessGroup& tp_ep = ps.tp_ep();
  MS_CHECK(tp_ep.size() == ps.sizes.expert * ps.sizes.expert_tensor &&
               tp_ep.rank() == ps.ep_rank * ps.sizes.expert_tensor + ps.etp_rank,
           "the tp_ep group is not ordered expert-tp fastest");
  std::vector<int64_t> all(static_cast<size_t>(tp_ep.size() * E));
  std::unique_ptr<Work> counts =
      tp_ep.all_gather_bytes_async(all.data(), local_counts.data(), E * static_cast<int64_t>(sizeof(int64_t)));
  if (!async) counts->wait();
  const int64_t R_src = static_cast<int64_t>(saved.rows.size());
  p.send = workspace(ctx, R_src, h);
  ctx.k().moe_permute_forward(ctx.kc(), p.send.f32(), x, saved.kernel_rows.i32(), R_src, h);
  counts->wait();
  plan_splits(ctx, local_counts, all, saved);
  p.recv = workspace(ctx, sum(saved.output_splits), h);
  p.work = ps.ep().all_to_all_async(p.recv.f32(), times(saved.output_splits, h), p.send.f32(),
                                    times(saved.input_splits, h));
}

Tensor TokenDispatcher::finish_dispatch(const ForwardContext& ctx, Saved& saved) const {
  const ParallelState& ps = *ctx.ps;
  const int64_t h = hidden_;
  Pending& p = saved.pending;
  p.work->wait();
  if (!all_to_all()) {
    p.work2->wait();
    p.work3->wait();
    const int64_t T = ps.tp_ep().size() * saved.n;
    collect_copies(ctx, p.recv_probs.data(), p.recv_map.data(), T, first_expert_,
                   first_expert_ + num_local_, saved);
    saved.tokens_per_expert.assign(num_local_, 0);
    for (int32_t e : saved.experts) ++saved.tokens_per_expert[e - first_expert_];
    const int64_t R = static_cast<int64_t>(saved.rows.size());
    Tensor input(*ctx.alloc, Shape{R, h}, DType::kFloat32, MemoryCategory::kActivations);
    ctx.k().moe_permute_forward(ctx.kc(), input.f32(), p.recv.f32(), saved.kernel_rows.i32(), R, h);
    saved.pending = Pending{};
    return input;
  }
  Tensor received = std::move(p.recv);
  saved.pending = Pending{};
  return arrive_at_experts(ctx, std::move(received), saved, MemoryCategory::kActivations);
}

void TokenDispatcher::start_combine(const ForwardContext& ctx, Tensor y, Saved& saved) const {
  const ParallelState& ps = *ctx.ps;
  const int64_t h = hidden_;
  Pending& p = saved.pending;
  if (!all_to_all()) {
    ProcessGroup& group = ps.tp_ep();
    const int64_t T = group.size() * saved.n;
    p.send = workspace(ctx, T, h);
    unpermute(ctx, p.send.f32(), y.f32(), T, saved);
    saved.combined = std::move(y);
    p.recv = workspace(ctx, saved.n, h);
    p.work = group.reduce_scatter_async(p.recv.f32(), p.send.f32(), saved.n * h, ReduceOp::kSum);
    return;
  }
  const int64_t R_src = static_cast<int64_t>(saved.rows.size());
  saved.combined = Tensor(*ctx.alloc, Shape{R_src, h}, DType::kFloat32, MemoryCategory::kActivations);
  start_return_home(ctx, y.f32(), saved.combined.f32(), saved);
}

void TokenDispatcher::finish_combine(const ForwardContext& ctx, float* out, Saved& saved) const {
  Pending& p = saved.pending;
  p.work->wait();
  if (!all_to_all()) {
    ctx.k().copy(ctx.kc(), out, p.recv.f32(), saved.n * hidden_);
  } else {
    unpermute(ctx, out, saved.combined.f32(), saved.n, saved);
  }
  saved.pending = Pending{};
}

void TokenDispatcher::start_combine_backward(const ForwardContext& ctx, const float* dout, Saved& saved) const {
  const ParallelState& ps = *ctx.ps;
  const int64_t h = hidden_;
  Pending& p = saved.pending;
  if (!all_to_all()) {
    ProcessGroup& group = ps.tp_ep();
    p.recv = workspace(ctx, group.size() * saved.n, h);
    p.work = group.all_gather_async(p.recv.f32(), dout, saved.n * h);
    return;
  }
  const int64_t R_src = static_cast<int64_t>(saved.rows.size());
  p.send = workspace(ctx, R_src, h);
  p.recv2 = workspace(ctx, std::max<int64_t>(R_src, 1), 1);  // dp: the probabilities' gradients
  ctx.k().moe_unpermute_backward(ctx.kc(), p.send.f32(), p.recv2.f32(), dout, saved.combined.f32(),
                                 saved.kernel_probs.f32(), saved.kernel_rows.i32(), saved.n, R_src,
                                 h);
  p.recv = workspace(ctx, sum(saved.output_splits), h);
  p.work = ps.ep().all_to_all_async(p.recv.f32(), times(saved.output_splits, h), p.send.f32(),
                                    times(saved.input_splits, h));
}

Tensor TokenDispatcher::finish_combine_backward(const ForwardContext& ctx, float* dprobs, Saved& saved) const {
  const ParallelState& ps = *ctx.ps;
  const int64_t h = hidden_, E = num_experts_;
  const int64_t R_src = static_cast<int64_t>(saved.rows.size());
  Pending& p = saved.pending;
  p.work->wait();
  if (!all_to_all()) {
    ProcessGroup& group = ps.tp_ep();
    const int64_t T = group.size() * saved.n;
    Tensor dp(*ctx.alloc, Shape{std::max<int64_t>(R_src, 1)}, DType::kFloat32,
              MemoryCategory::kWorkspace);
    Tensor dy(*ctx.alloc, Shape{R_src, h}, DType::kFloat32, MemoryCategory::kWorkspace);
    ctx.k().moe_unpermute_backward(ctx.kc(), dy.f32(), dp.f32(), p.recv.f32(), saved.combined.f32(),
                                   saved.kernel_probs.f32(), saved.kernel_rows.i32(), T, R_src, h);
    saved.pending = Pending{};
    // The probabilities' gradients back into the router's [T, E] layout, on the host.
    const std::vector<float> dp_host = host_copy_of(*ctx.backend, dp.f32(), R_src);
    std::vector<float> dP(static_cast<size_t>(T * E), 0.0f);
    for (int64_t i = 0; i < R_src; ++i) dP[saved.rows[i] * E + saved.experts[i]] = dp_host[i];
    if (group.size() > 1) {
      group.reduce_scatter(dprobs, dP.data(), saved.n * E);
    } else {
      std::copy(dP.begin(), dP.end(), dprobs);
    }
    return dy;
  }
  const std::vector<float> dp_host = host_copy_of(*ctx.backend, p.recv2.f32(), R_src);
  std::memset(dprobs, 0, sizeof(float) * static_cast<size_t>(saved.n * E));
  for (int64_t i = 0; i < R_src; ++i) dprobs[saved.rows[i] * E + saved.experts[i]] = dp_host[i];
  Tensor received = std::move(p.recv);
  saved.pending = Pending{};
  return arrive_at_experts(ctx, std::move(received), saved, MemoryCategory::kWorkspace);
}

void TokenDispatcher::start_dispatch_backward(const ForwardContext& ctx, const float* dinput, Saved& saved) const {
  const ParallelState& ps = *ctx.ps;
  const int64_t h = hidden_;
  Pending& p = saved.pending;
  if (!all_to_all()) {
    ProcessGroup& group = ps.tp_ep();
    const int64_t T = group.size() * saved.n;
    const int64_t R = static_cast<int64_t>(saved.rows.size());
    p.send = workspace(ctx, T, h);
    ctx.k().moe_permute_backward(ctx.kc(), p.send.f32(), dinput, saved.kernel_rows.i32(), T, R, h);
    p.recv = workspace(ctx, saved.n, h);
    p.work = group.reduce_scatter_async(p.recv.f32(), p.send.f32(), saved.n * h, ReduceOp::kSum);
    return;
  }
  p.recv = workspace(ctx, static_cast<int64_t>(saved.rows.size()), h);
  start_return_home(ctx, dinput, p.recv.f32(), saved);
}

void TokenDispatcher::finish_dispatch_backward(const ForwardContext& ctx, float* dx, Saved& saved) const {
  Pending& p = saved.pending;
  p.work->wait();
  if (!all_to_all()) {
    ctx.k().copy(ctx.kc(), dx, p.recv.f32(), saved.n * hidden_);
  } else {
    const int64_t R_src = static_cast<int64_t>(saved.rows.size());
    ctx.k().moe_permute_backward(ctx.kc(), dx, p.recv.f32(), saved.kernel_rows.i32(), saved.n,
                                 R_src, hidden_);
  }
  saved.pending = Pending{};
}

}  // namespace mindspeed
