// ContextParallelAttention (context_parallel_attention.h).
#include "context_parallel/context_parallel_attention.h"

#include <numeric>

#include "context_parallel/cp_split.h"
#include "context_parallel/ring_attention.h"
#include "context_parallel/ulysses.h"
#include "core/check.h"

namespace mindspeed {
namespace {

// How this rank's attention is laid out for one micro-batch.
struct CpPlan {
  int u = 1, ulysses_rank = 0, ring_rank = 0, ring_degree = 1;
  int64_t repeats = 1;             ///< key/value heads repeated so that u divides them
  UlyssesShape q_shape, kv_shape;  ///< the exchanges of queries and (repeated) keys/values
  std::vector<std::vector<int32_t>> ring_positions;  ///< positions each ring rank's group holds
  AttentionDims dims;                                ///< the attention after the exchange
  std::vector<int32_t> doc_start;                    ///< [B, Tu] with EOD reset, else empty
  // The position arrays where the kernels read them (the backend's memory).
  std::vector<Tensor> kernel_ring_positions;
  Tensor kernel_doc_start;
  AttentionMask mask;  ///< the model's rule with doc_start; positions set per ring block
};

CpPlan make_plan(const ForwardContext& ctx, const MicroBatch& mb, const AttentionDims& local,
                 const AttentionMask& rule) {
  const ParallelState& ps = *ctx.ps;
  CpPlan p;
  p.u = ps.cp_ulysses().size();
  p.ulysses_rank = ps.cp_ulysses().rank();
  p.ring_rank = ps.cp_ring().rank();
  p.ring_degree = ps.cp_ring().size();
  MS_CHECK(p.u == ctx.cp.ulysses_degree && p.u * p.ring_degree == ps.sizes.context,
           "context-parallel groups (Ulysses ", p.u, " x ring ", p.ring_degree,
           ") do not match the configuration");
  MS_CHECK(!mb.seq_index.empty(),
           "context parallelism needs micro-batches split by get_batch_on_this_cp_rank");
  const CpSplit split(ctx.cp, ps.sizes.context, mb.sample_length());
  for (int r = 0; r < p.ring_degree; ++r) {
    p.ring_positions.push_back(split.ring_share(r));
    if (p.ring_degree > 1) {
      p.kernel_ring_positions.push_back(device_copy_of(
          *ctx.backend, *ctx.alloc, p.ring_positions.back(), MemoryCategory::kWorkspace));
    }
  }
  const std::vector<int32_t>& share = p.ring_positions[static_cast<size_t>(p.ring_rank)];
  const int64_t Tu = static_cast<int64_t>(share.size());
  p.repeats = p.u / std::gcd(local.NKV, static_cast<int64_t>(p.u));
  p.q_shape = UlyssesShape{local.B, local.NQ, local.D, split.ulysses_lengths(Tu)};
  p.kv_shape = UlyssesShape{local.B, local.NKV * p.repeats, local.D, p.q_shape.lengths};
  MS_CHECK(p.q_shape.lengths[static_cast<size_t>(p.ulysses_rank)] == local.T, "this rank holds ",
           local.T, " positions, the split says ",
           p.q_shape.lengths[static_cast<size_t>(p.ulysses_rank)]);
  p.dims = local;
  p.dims.T = Tu;
  p.dims.Tk = Tu;
  p.dims.seq_total = mb.sample_length();
  p.dims.NQ = local.NQ / p.u;
  p.dims.NKV = local.NKV * p.repeats / p.u;
  p.dims.head_offset = local.head_offset + p.ulysses_rank * p.dims.NQ;
  if (!mb.sample_doc_start.empty()) {
    const int64_t S = mb.sample_length();
    p.doc_start.resize(static_cast<size_t>(local.B * Tu));
    for (int64_t b = 0; b < local.B; ++b)
      for (int64_t t = 0; t < Tu; ++t)
        p.doc_start[b * Tu + t] = mb.sample_doc_start[b * S + share[t]];
  }
  if (!p.doc_start.empty()) {
    p.kernel_doc_start =
        device_copy_of(*ctx.backend, *ctx.alloc, p.doc_start, MemoryCategory::kWorkspace);
  }
  p.mask = rule;
  p.mask.doc_start = p.doc_start.empty() ? nullptr : p.kernel_doc_start.i32();
  p.mask.q_pos = p.mask.k_pos = nullptr;
  p.mask.q_offset = p.mask.k_offset = 0;
  // After the Ulysses exchange this rank holds heads block ulysses_rank of its heads.
  if (p.mask.alibi_slopes != nullptr) p.mask.alibi_slopes += p.ulysses_rank * p.dims.NQ;
  return p;
}

Tensor workspace(Allocator& a, int64_t floats) {
  return Tensor(a, Shape{std::max<int64_t>(1, floats)}, DType::kFloat32,
                MemoryCategory::kWorkspace);
}

RingAttentionSpec ring_spec(const ForwardContext& ctx, const CpPlan& p,
                            const DropoutSpec& dropout) {
  RingAttentionSpec spec;
  spec.ring = &ctx.ps->cp_ring();
  spec.window = ctx.cp.window_size;
  spec.overlap = ctx.cp.send_recv_overlap;
  spec.positions = p.ring_positions;
  for (const Tensor& t : p.kernel_ring_positions) spec.kernel_positions.push_back(t.i32());
  spec.mask = p.mask;
  spec.dims = p.dims;
  spec.dropout = dropout;
  return spec;
}

// The attention on the exchanged tensors: the ring, or (Ulysses only) one flash attention
// over the whole sample.
void attend(const ForwardContext& ctx, const CpPlan& p, const DropoutSpec& dropout,
            ContextParallelAttention::Saved& s, float* out) {
  if (p.ring_degree > 1) {
    ring_attention_forward(ctx, ring_spec(ctx, p, dropout), out, s.lse.f32(), s.q.f32(), s.k.f32(),
                           s.v.f32());
    return;
  }
  // Ulysses only: the group holds the whole sample, positions 0..S-1.
  Tensor ws = workspace(*ctx.alloc, ctx.k().attention_workspace_floats(
                                        ctx.kc(), p.dims, AttentionKernel::kFlash, false));
  ctx.k().flash_attention_forward(ctx.kc(), out, s.lse.f32(), s.q.f32(), s.k.f32(), s.v.f32(),
                                  p.mask, p.dims, dropout, ws.f32());
}

}  // namespace

void ContextParallelAttention::forward(const ForwardContext& ctx, const MicroBatch& mb,
                                       const AttentionDims& local, const AttentionMask& rule,
                                       const DropoutSpec& dropout, Tensor q, Tensor k, Tensor v,
                                       float* context, Saved& saved) {
  MS_CHECK(ctx.k().flash_attention_forward != nullptr,
           "context parallelism needs the flash attention kernels");
  Allocator& a = *ctx.alloc;
  const CpPlan p = make_plan(ctx, mb, local, rule);
  const int64_t Tu = p.dims.T;
  saved.lse =
      Tensor(a, Shape{p.dims.B, p.dims.NQ, Tu}, DType::kFloat32, MemoryCategory::kActivations);
  if (p.u == 1) {
    saved.q = std::move(q);
    saved.k = std::move(k);
    saved.v = std::move(v);
    attend(ctx, p, dropout, saved, context);
    return;
  }
  ProcessGroup& ulysses = ctx.ps->cp_ulysses();
  saved.q = Tensor(a, Shape{p.dims.B, p.dims.NQ, Tu, p.dims.D}, DType::kFloat32,
                   MemoryCategory::kActivations);
  SequenceToHeads::forward(ctx, ulysses, p.q_shape, saved.q.f32(), q.f32());
  q = Tensor();
  for (auto [in, kept] : {std::pair<Tensor*, Tensor*>{&k, &saved.k}, {&v, &saved.v}}) {
    *kept = Tensor(a, Shape{p.dims.B, p.dims.NKV, Tu, p.dims.D}, DType::kFloat32,
                   MemoryCategory::kActivations);
    if (ctx.cp.ulysses_allgather_kv) {
      // Whole heads along the sequence, then this rank's block of the repeated heads.
      Tensor full = workspace(a, local.B * local.NKV * Tu * local.D);
      AllGatherKeyValues::forward(ctx, ulysses, local.B, local.NKV, local.T, local.D, full.f32(),
                                  in->f32());
      Tensor repeated = workspace(a, local.B * local.NKV * p.repeats * Tu * local.D);
      RepeatKeyValueHeads::forward(ctx, p.repeats, local.B, local.NKV, Tu, local.D, repeated.f32(),
                                   full.f32());
      const int64_t block = p.dims.NKV * Tu * local.D;
      for (int64_t b = 0; b < local.B; ++b) {
        ctx.k().copy(ctx.kc(), kept->f32() + b * block,
                     repeated.f32() +
                         (b * local.NKV * p.repeats + p.ulysses_rank * p.dims.NKV) * Tu * local.D,
                     block);
      }
    } else {
      Tensor repeated = workspace(a, local.B * local.NKV * p.repeats * local.T * local.D);
      RepeatKeyValueHeads::forward(ctx, p.repeats, local.B, local.NKV, local.T, local.D,
                                   repeated.f32(), in->f32());
      SequenceToHeads::forward(ctx, ulysses, p.kv_shape, kept->f32(), repeated.f32());
    }
    *in = Tensor();
  }
  saved.out = Tensor(a, Shape{Tu, p.dims.B, p.dims.NQ * p.dims.D}, DType::kFloat32,
                     MemoryCategory::kActivations);
  attend(ctx, p, dropout, saved, saved.out.f32());
  ContextToSequence::forward(ctx, ulysses, p.q_shape, context, saved.out.f32());
}

void ContextParallelAttention::backward(const ForwardContext& ctx, const MicroBatch& mb,
                                        const AttentionDims& local, const AttentionMask& rule,
                                        const DropoutSpec& dropout, const Saved& saved,
                                        const float* context, const float* dcontext, float* dq,
                                        float* dk, float* dv) {
  Allocator& a = *ctx.alloc;
  const CpPlan p = make_plan(ctx, mb, local, rule);
  const int64_t Tu = p.dims.T, nq = p.dims.B * p.dims.NQ * Tu * p.dims.D,
                nkv = p.dims.B * p.dims.NKV * Tu * p.dims.D;
  const bool exchanged = p.u > 1;
  ProcessGroup& ulysses = ctx.ps->cp_ulysses();
  Tensor dout_heads, dq_h, dk_h, dv_h;
  const float* dout = dcontext;
  const float* out = context;
  if (exchanged) {
    dout_heads = workspace(a, Tu * p.dims.B * p.dims.NQ * p.dims.D);
    ContextToSequence::backward(ctx, ulysses, p.q_shape, dout_heads.f32(), dcontext);
    dout = dout_heads.f32();
    out = saved.out.f32();
    dq_h = workspace(a, nq);
    dk_h = workspace(a, nkv);
    dv_h = workspace(a, nkv);
  }
  float* gq = exchanged ? dq_h.f32() : dq;
  float* gk = exchanged ? dk_h.f32() : dk;
  float* gv = exchanged ? dv_h.f32() : dv;
  if (p.ring_degree > 1) {
    ring_attention_backward(ctx, ring_spec(ctx, p, dropout), gq, gk, gv, dout, out, saved.lse.f32(),
                            saved.q.f32(), saved.k.f32(), saved.v.f32());
  } else {
    Tensor ws = workspace(
        a, ctx.k().attention_workspace_floats(ctx.kc(), p.dims, AttentionKernel::kFlash, true));
    ctx.k().flash_attention_backward(ctx.kc(), gq, gk, gv, dout, out, saved.lse.f32(),
                                     saved.q.f32(), saved.k.f32(), saved.v.f32(), p.mask, p.dims,
                                     dropout, ws.f32());
  }
  if (!exchanged) return;
  SequenceToHeads::backward(ctx, ulysses, p.q_shape, dq, dq_h.f32());
  for (auto [g_heads, g_out] : {std::pair<Tensor*, float*>{&dk_h, dk}, {&dv_h, dv}}) {
    if (ctx.cp.ulysses_allgather_kv) {
      // This rank's block of the repeated heads back into every head, the repeats summed,
      // then every rank's gradient of this rank's positions summed.
      Tensor repeated = workspace(a, local.B * local.NKV * p.repeats * Tu * local.D);
      ctx.k().fill_zero(ctx.kc(), repeated.f32(), local.B * local.NKV * p.repeats * Tu * local.D);
      const int64_t block = p.dims.NKV * Tu * local.D;
      for (int64_t b = 0; b < local.B; ++b) {
        ctx.k().copy(ctx.kc(),
                     repeated.f32() +
                         (b * local.NKV * p.repeats + p.ulysses_rank * p.dims.NKV) * Tu * local.D,
                     g_heads->f32() + b * block, block);
      }
      Tensor full = workspace(a, local.B * local.NKV * Tu * local.D);
      RepeatKeyValueHeads::backward(ctx, p.repeats, local.B, local.NKV, Tu, local.D, full.f32(),
                                    repeated.f32());
      AllGatherKeyValues::backward(ctx, ulysses, local.B, local.NKV, local.T, local.D, g_out,
                                   full.f32());
    } else {
      Tensor repeated = workspace(a, local.B * local.NKV * p.repeats * local.T * local.D);
      SequenceToHeads::backward(ctx, ulysses, p.kv_shape, repeated.f32(), g_heads->f32());
      RepeatKeyValueHeads::backward(ctx, p.repeats, local.B, local.NKV, local.T, local.D, g_out,
                                    repeated.f32());
    }
  }
}

}  // namespace mindspeed
