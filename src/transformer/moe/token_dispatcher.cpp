// TokenDispatcher (token_dispatcher.h).
#include "transformer/moe/token_dispatcher.h"

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

void TokenDispatcher::collect_copies(const float* probs, const uint8_t* map, int64_t T, int64_t e0, int64_t e1,
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
}

void TokenDispatcher::exchange_counts(const ForwardContext& ctx, const std::vector<int64_t>& local_counts,
                                      Saved& saved) const {
  const ParallelState& ps = *ctx.ps;
  const int ep = ps.sizes.expert, etp = ps.sizes.expert_tensor, me = ps.etp_rank;
  ProcessGroup& tp_ep = ps.tp_ep();
  MS_CHECK(tp_ep.size() == ep * etp && tp_ep.rank() == ps.ep_rank * etp + ps.etp_rank,
           "the tp_ep group is not ordered expert-tp fastest");
  // [ep * etp][E]: group rank q = ep index * etp + expert-tp index (Megatron's [ep, tp, E]).
  std::vector<int64_t> all(static_cast<size_t>(tp_ep.size() * num_experts_));
  tp_ep.all_gather_bytes_async(all.data(), local_counts.data(), num_experts_ * static_cast<int64_t>(sizeof(int64_t)))
      ->wait();
  auto global = [&](int i, int j, int64_t e) { return all[(static_cast<size_t>(j) * etp + i) * num_experts_ + first_expert_ + e]; };
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

Tensor TokenDispatcher::dispatch(const ForwardContext& ctx, const float* x, int64_t n, const float* probs,
                                 const uint8_t* routing_map, Saved& saved) const {
  const ParallelState& ps = *ctx.ps;
  const int64_t h = hidden_, E = num_experts_;
  saved.n = n;
  if (!all_to_all()) {
    ProcessGroup& group = ps.tp_ep();
    const int g = group.size();
    const int64_t T = g * n;
    Tensor gx, gp;
    std::vector<uint8_t> gm;
    const float* X = x;
    const float* P = probs;
    const uint8_t* M = routing_map;
    if (g > 1) {
      gx = workspace(ctx, T, h);
      gp = workspace(ctx, T, E);
      gm.resize(static_cast<size_t>(T * E));
      if (config_.moe.permutation_async_comm || config_.moe.allgather_overlap_comm) {
        // MindSpeed's allgather optimisation: the three gathers in flight together.
        auto wm = group.all_gather_bytes_async(gm.data(), routing_map, n * E);
        auto wp = group.all_gather_async(gp.f32(), probs, n * E);
        auto wx = group.all_gather_async(gx.f32(), x, n * h);
        wm->wait();
        wp->wait();
        wx->wait();
      } else {
        group.all_gather(gx.f32(), x, n * h);
        group.all_gather(gp.f32(), probs, n * E);
        group.all_gather_bytes_async(gm.data(), routing_map, n * E)->wait();
      }
      X = gx.f32();
      P = gp.f32();
      M = gm.data();
    }
    collect_copies(P, M, T, first_expert_, first_expert_ + num_local_, saved);
    saved.tokens_per_expert.assign(num_local_, 0);
    for (int32_t e : saved.experts) ++saved.tokens_per_expert[e - first_expert_];
    const int64_t R = static_cast<int64_t>(saved.rows.size());
    Tensor input(*ctx.alloc, Shape{R, h}, DType::kFloat32, MemoryCategory::kActivations);
    ctx.k().moe_permute_forward(ctx.kc(), input.f32(), X, saved.rows.data(), R, h);
    return input;
  }
  // alltoall: every routed copy of this rank's tokens, expert-major over all experts.
  collect_copies(probs, routing_map, n, 0, E, saved);
  std::vector<int64_t> local_counts(static_cast<size_t>(E), 0);
  for (int32_t e : saved.experts) ++local_counts[e];
  exchange_counts(ctx, local_counts, saved);
  const int64_t R_src = static_cast<int64_t>(saved.rows.size());
  Tensor permuted = workspace(ctx, R_src, h);
  ctx.k().moe_permute_forward(ctx.kc(), permuted.f32(), x, saved.rows.data(), R_src, h);
  Tensor received = workspace(ctx, sum(saved.output_splits), h);
  ps.ep().all_to_all_async(received.f32(), times(saved.output_splits, h), permuted.f32(), times(saved.input_splits, h))
      ->wait();
  permuted.reset();
  if (ps.sizes.expert_tensor > 1) received = gather_expert_tp(ctx, received.f32(), saved);
  const int64_t R = sum(saved.tokens_per_expert);
  Tensor input(*ctx.alloc, Shape{R, h}, DType::kFloat32, MemoryCategory::kActivations);
  sort_chunks(ctx, input.f32(), received.f32(), saved, /*inverse=*/false);
  return input;
}

void TokenDispatcher::combine(const ForwardContext& ctx, Tensor y, float* out, Saved& saved) const {
  const ParallelState& ps = *ctx.ps;
  const int64_t h = hidden_;
  auto unpermute = [&](float* dst, const float* rows_in, int64_t T) {
    const int64_t R = static_cast<int64_t>(saved.rows.size());
    if (config_.moe.permute_fusion) {
      ctx.k().moe_unpermute_forward(ctx.kc(), dst, rows_in, saved.probs.data(), saved.rows.data(), T, R, h);
      return;
    }
    // Megatron's unfused unpermute: the rows times their probabilities, then a scatter-add.
    Tensor weighted = workspace(ctx, R, h);
    ctx.k().scale_rows(ctx.kc(), weighted.f32(), rows_in, saved.probs.data(), R, h);
    ctx.k().moe_unpermute_forward(ctx.kc(), dst, weighted.f32(), nullptr, saved.rows.data(), T, R, h);
  };
  if (!all_to_all()) {
    ProcessGroup& group = ps.tp_ep();
    const int64_t T = group.size() * saved.n;
    Tensor z = workspace(ctx, T, h);
    unpermute(z.f32(), y.f32(), T);
    saved.combined = std::move(y);
    if (group.size() > 1) {
      group.reduce_scatter(out, z.f32(), saved.n * h);
    } else {
      ctx.k().copy(ctx.kc(), out, z.f32(), T * h);
    }
    return;
  }
  const int64_t R = y.shape()[0];
  Tensor unsorted = workspace(ctx, R, h);
  sort_chunks(ctx, unsorted.f32(), y.f32(), saved, /*inverse=*/true);
  y.reset();
  if (ps.sizes.expert_tensor > 1) unsorted = reduce_scatter_expert_tp(ctx, unsorted.f32(), saved);
  const int64_t R_src = static_cast<int64_t>(saved.rows.size());
  saved.combined = Tensor(*ctx.alloc, Shape{R_src, h}, DType::kFloat32, MemoryCategory::kActivations);
  ps.ep().all_to_all_async(saved.combined.f32(), times(saved.input_splits, h), unsorted.f32(),
                           times(saved.output_splits, h))
      ->wait();
  unpermute(out, saved.combined.f32(), saved.n);
}

Tensor TokenDispatcher::combine_backward(const ForwardContext& ctx, const float* dout, float* dprobs,
                                         Saved& saved) const {
  const ParallelState& ps = *ctx.ps;
  const int64_t h = hidden_, E = num_experts_;
  const int64_t R_src = static_cast<int64_t>(saved.rows.size());
  std::vector<float> dp(static_cast<size_t>(R_src));
  if (!all_to_all()) {
    ProcessGroup& group = ps.tp_ep();
    const int64_t T = group.size() * saved.n;
    Tensor dz;
    const float* DZ = dout;
    if (group.size() > 1) {
      dz = workspace(ctx, T, h);
      group.all_gather(dz.f32(), dout, saved.n * h);
      DZ = dz.f32();
    }
    Tensor dy(*ctx.alloc, Shape{R_src, h}, DType::kFloat32, MemoryCategory::kWorkspace);
    ctx.k().moe_unpermute_backward(ctx.kc(), dy.f32(), dp.data(), DZ, saved.combined.f32(), saved.probs.data(),
                                   saved.rows.data(), T, R_src, h);
    Tensor dP = Tensor::zeros(*ctx.alloc, Shape{T, E}, DType::kFloat32, MemoryCategory::kWorkspace);
    for (int64_t i = 0; i < R_src; ++i) dP.f32()[saved.rows[i] * E + saved.experts[i]] = dp[i];
    if (group.size() > 1) {
      group.reduce_scatter(dprobs, dP.f32(), saved.n * E);
    } else {
      ctx.k().copy(ctx.kc(), dprobs, dP.f32(), T * E);
    }
    return dy;
  }
  Tensor dcomb = workspace(ctx, R_src, h);
  ctx.k().moe_unpermute_backward(ctx.kc(), dcomb.f32(), dp.data(), dout, saved.combined.f32(), saved.probs.data(),
                                 saved.rows.data(), saved.n, R_src, h);
  std::memset(dprobs, 0, sizeof(float) * static_cast<size_t>(saved.n * E));
  for (int64_t i = 0; i < R_src; ++i) dprobs[saved.rows[i] * E + saved.experts[i]] = dp[i];
  Tensor received = workspace(ctx, sum(saved.output_splits), h);
  ps.ep().all_to_all_async(received.f32(), times(saved.output_splits, h), dcomb.f32(), times(saved.input_splits, h))
      ->wait();
  dcomb.reset();
  if (ps.sizes.expert_tensor > 1) received = gather_expert_tp(ctx, received.f32(), saved);
  const int64_t R = sum(saved.tokens_per_expert);
  Tensor dy(*ctx.alloc, Shape{R, h}, DType::kFloat32, MemoryCategory::kWorkspace);
  sort_chunks(ctx, dy.f32(), received.f32(), saved, /*inverse=*/false);
  return dy;
}

void TokenDispatcher::dispatch_backward(const ForwardContext& ctx, const float* dinput, float* dx,
                                        Saved& saved) const {
  const ParallelState& ps = *ctx.ps;
  const int64_t h = hidden_;
  if (!all_to_all()) {
    ProcessGroup& group = ps.tp_ep();
    const int64_t T = group.size() * saved.n;
    const int64_t R = static_cast<int64_t>(saved.rows.size());
    Tensor dX = workspace(ctx, T, h);
    ctx.k().moe_permute_backward(ctx.kc(), dX.f32(), dinput, saved.rows.data(), T, R, h);
    if (group.size() > 1) {
      group.reduce_scatter(dx, dX.f32(), saved.n * h);
    } else {
      ctx.k().copy(ctx.kc(), dx, dX.f32(), T * h);
    }
    return;
  }
  const int64_t R = sum(saved.tokens_per_expert);
  Tensor unsorted = workspace(ctx, R, h);
  sort_chunks(ctx, unsorted.f32(), dinput, saved, /*inverse=*/true);
  if (ps.sizes.expert_tensor > 1) unsorted = reduce_scatter_expert_tp(ctx, unsorted.f32(), saved);
  const int64_t R_src = static_cast<int64_t>(saved.rows.size());
  Tensor back = workspace(ctx, R_src, h);
  ps.ep().all_to_all_async(back.f32(), times(saved.input_splits, h), unsorted.f32(), times(saved.output_splits, h))
      ->wait();
  ctx.k().moe_permute_backward(ctx.kc(), dx, back.f32(), saved.rows.data(), saved.n, R_src, h);
}

}  // namespace mindspeed
