// Ring and double-ring attention (ring_attention.h).
#include "context_parallel/ring_attention.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "core/check.h"
#include "core/profiler.h"
#include "core/tensor.h"

namespace mindspeed {
namespace {

// Tags of the four kinds of transfer (a pair of ranks may exchange several kinds at once).
constexpr int kTagKvInner = 7101, kTagKvOuter = 7102, kTagGradInner = 7103, kTagGradOuter = 7104;

// This rank's place in the (double) ring.
struct RingTopology {
  int R, w, windows, W, i;
  RingTopology(int size, int rank, int window)
      : R(size), w(window), windows(size / window), W(rank / window), i(rank % window) {}
  int rank_at(int window, int inner) const {
    return ((window % windows + windows) % windows) * w + (inner % w + w) % w;
  }
  int owner(int o, int t) const {
    return rank_at(W - o, i - t);
  }  ///< whose block step (o, t) holds
  int inner_next() const { return rank_at(W, i + 1); }
  int inner_prev() const { return rank_at(W, i - 1); }
  int outer_next() const { return rank_at(W + 1, i); }
  int outer_prev() const { return rank_at(W - 1, i); }
};

// A send and a receive in flight, waited for together.
struct Exchange {
  std::unique_ptr<Work> send, recv;
  void wait() {
    if (recv) recv->wait();
    if (send) send->wait();
    recv.reset();
    send.reset();
  }
};

Exchange start_exchange(ProcessGroup& group, const float* send, float* recv, int64_t n, int to,
                        int from, int tag) {
  Exchange x;
  x.recv = group.recv_async(recv, n, from, tag);
  x.send = group.send_async(send, n, to, tag);
  return x;
}

// Queries of this rank against keys of `owner`: the mask by sample positions.
AttentionMask block_mask(const RingAttentionSpec& spec, int self, int owner) {
  AttentionMask mask = spec.mask;
  mask.q_pos = spec.kernel_positions[static_cast<size_t>(self)];
  mask.k_pos = spec.kernel_positions[static_cast<size_t>(owner)];
  return mask;
}

// True when no key of `owner` is visible to any query of this rank: every key after every
// query's band (causal: after the last query), or before every query's band.
bool block_is_masked(const RingAttentionSpec& spec, int self, int owner) {
  const auto& q = spec.positions[static_cast<size_t>(self)];
  const auto& k = spec.positions[static_cast<size_t>(owner)];
  const auto [q_min, q_max] = std::minmax_element(q.begin(), q.end());
  const auto [k_min, k_max] = std::minmax_element(k.begin(), k.end());
  return *k_min > *q_max + spec.mask.next_tokens || *k_max < *q_min - spec.mask.pre_tokens;
}

void check_spec(const RingAttentionSpec& spec) {
  MS_CHECK(spec.ring != nullptr && spec.window >= 1 && spec.ring->size() % spec.window == 0,
           "ring attention: window ", spec.window, " does not divide the ring of ",
           spec.ring ? spec.ring->size() : 0);
  MS_CHECK(static_cast<int>(spec.positions.size()) == spec.ring->size(),
           "ring attention: positions of ", spec.positions.size(), " ranks for a ring of ",
           spec.ring->size());
  MS_CHECK(spec.kernel_positions.size() == spec.positions.size(),
           "ring attention: the positions have no copy where the kernels read them");
  for (const auto& p : spec.positions) {
    MS_CHECK(static_cast<int64_t>(p.size()) == spec.dims.T, "ring attention: every rank holds ",
             spec.dims.T, " positions");
  }
}

// Walks this rank through every key/value block of the (double) ring in the topology's
// order, moving the blocks with exchanges started before (overlap) or completed before each
// block's work: visit(block, owner, t) sees block = [k; v] ([2, B, NKV, T, D]) of ring rank
// `owner` at inner step t; end_outer() runs after each outer step.
template <typename Visit, typename EndOuter>
void walk_ring(const ForwardContext& ctx, const RingAttentionSpec& spec, const RingTopology& topo,
               const float* k, const float* v, Visit&& visit, EndOuter&& end_outer) {
  const AttentionDims& d = spec.dims;
  ProcessGroup& ring = *spec.ring;
  const int64_t n = d.B * d.NKV * d.T * d.D;
  auto buffer = [&] {
    return Tensor(*ctx.alloc, Shape{2 * n}, DType::kFloat32, MemoryCategory::kWorkspace);
  };
  Tensor outer = buffer(), outer_next = buffer(), inner = buffer(), inner_next = buffer();
  ctx.k().copy(ctx.kc(), outer.f32(), k, n);
  ctx.k().copy(ctx.kc(), outer.f32() + n, v, n);
  for (int o = 0; o < topo.windows; ++o) {
    const bool more_outer = o + 1 < topo.windows;
    Exchange outer_x;
    if (more_outer) {
      outer_x = start_exchange(ring, outer.f32(), outer_next.f32(), 2 * n, topo.outer_next(),
                               topo.outer_prev(), kTagKvOuter);
      if (!spec.overlap) outer_x.wait();
    }
    const float* block = outer.f32();
    for (int t = 0; t < topo.w; ++t) {
      Exchange inner_x;
      if (t + 1 < topo.w) {
        inner_x = start_exchange(ring, block, inner_next.f32(), 2 * n, topo.inner_next(),
                                 topo.inner_prev(), kTagKvInner);
        if (!spec.overlap) inner_x.wait();
      }
      visit(block, topo.owner(o, t), t);
      inner_x.wait();
      if (t + 1 < topo.w) {
        std::swap(inner, inner_next);
        block = inner.f32();
      }
    }
    end_outer();
    outer_x.wait();
    if (more_outer) std::swap(outer, outer_next);
  }
}

Tensor workspace(const ForwardContext& ctx, int64_t floats) {
  return Tensor(*ctx.alloc, Shape{std::max<int64_t>(1, floats)}, DType::kFloat32,
                MemoryCategory::kWorkspace);
}

}  // namespace

void ring_attention_forward(const ForwardContext& ctx, const RingAttentionSpec& spec, float* out,
                            float* lse, const float* q, const float* k, const float* v) {
  check_spec(spec);
  const AttentionDims& d = spec.dims;
  const int self = spec.ring->rank();
  const RingTopology topo(spec.ring->size(), self, spec.window);
  const int64_t n = d.B * d.NKV * d.T * d.D, rows = d.T * d.B * d.NQ * d.D;
  Tensor block_out = workspace(ctx, rows), block_lse = workspace(ctx, d.B * d.NQ * d.T);
  Tensor ws = workspace(
      ctx, ctx.k().attention_workspace_floats(ctx.kc(), d, AttentionKernel::kFlash, false));
  ctx.k().fill_zero(ctx.kc(), out, rows);
  ctx.k().fill(ctx.kc(), lse, -std::numeric_limits<float>::infinity(), d.B * d.NQ * d.T);
  walk_ring(
      ctx, spec, topo, k, v,
      [&](const float* block, int owner, int /*t*/) {
        if (block_is_masked(spec, self, owner)) return;
        profiler::Scope profile(profiler::category::kModule, "ring attention block");
        ctx.k().flash_attention_forward(ctx.kc(), block_out.f32(), block_lse.f32(), q, block,
                                        block + n, block_mask(spec, self, owner), d, spec.dropout,
                                        ws.f32());
        ctx.k().ring_attention_update(ctx.kc(), out, lse, out, lse, block_out.f32(),
                                      block_lse.f32(), d.T, d.B, d.NQ, d.D);
      },
      [] {});
}

void ring_attention_backward(const ForwardContext& ctx, const RingAttentionSpec& spec, float* dq,
                             float* dk, float* dv, const float* dout, const float* out,
                             const float* lse, const float* q, const float* k, const float* v) {
  check_spec(spec);
  const AttentionDims& d = spec.dims;
  ProcessGroup& ring = *spec.ring;
  const int self = ring.rank();
  const RingTopology topo(ring.size(), self, spec.window);
  const int64_t n = d.B * d.NKV * d.T * d.D, nq = d.B * d.NQ * d.T * d.D;
  // Key/value gradient accumulators [dk; dv]: the one arriving from the block's previous
  // holder in the window, the one this rank sends on, the outer block's (zero at the first
  // outer step) and the next outer block's.
  Tensor grad_in = workspace(ctx, 2 * n), grad_send = workspace(ctx, 2 * n),
         grad_outer = workspace(ctx, 2 * n), grad_next = workspace(ctx, 2 * n);
  Tensor dq_block = workspace(ctx, nq), dkv_block = workspace(ctx, 2 * n);
  Tensor ws = workspace(
      ctx, ctx.k().attention_workspace_floats(ctx.kc(), d, AttentionKernel::kFlash, true));
  ctx.k().fill_zero(ctx.kc(), dq, nq);
  ctx.k().fill_zero(ctx.kc(), grad_outer.f32(), 2 * n);
  walk_ring(
      ctx, spec, topo, k, v,
      [&](const float* block, int owner, int t) {
        const bool masked = block_is_masked(spec, self, owner);
        if (!masked) {
          profiler::Scope profile(profiler::category::kModule, "ring attention block backward");
          ctx.k().flash_attention_backward(
              ctx.kc(), dq_block.f32(), dkv_block.f32(), dkv_block.f32() + n, dout, out, lse, q,
              block, block + n, block_mask(spec, self, owner), d, spec.dropout, ws.f32());
          ctx.k().add_inplace(ctx.kc(), dq, dq_block.f32(), nq);
        }
        // The block's accumulator: from its previous holder in the window (t > 0) or from the
        // outer step (t = 0), plus this rank's share; then on to the block's next holder in
        // the window (the last one returns it to its outer holder).
        ctx.k().copy(ctx.kc(), grad_send.f32(), t == 0 ? grad_outer.f32() : grad_in.f32(), 2 * n);
        if (!masked) ctx.k().add_inplace(ctx.kc(), grad_send.f32(), dkv_block.f32(), 2 * n);
        if (topo.w > 1) {
          start_exchange(ring, grad_send.f32(), grad_in.f32(), 2 * n, topo.inner_next(),
                         topo.inner_prev(), kTagGradInner)
              .wait();
        }
      },
      [&] {
        // The outer block's accumulator after this window moves on with the block (after
        // the last outer step: back to its owner).
        const float* outer_grad = topo.w > 1 ? grad_in.f32() : grad_send.f32();
        start_exchange(ring, outer_grad, grad_next.f32(), 2 * n, topo.outer_next(),
                       topo.outer_prev(), kTagGradOuter)
            .wait();
        std::swap(grad_outer, grad_next);
      });
  ctx.k().copy(ctx.kc(), dk, grad_outer.f32(), n);
  ctx.k().copy(ctx.kc(), dv, grad_outer.f32() + n, n);
}

}  // namespace mindspeed
