// Expert-parallel batched GEMMs fused with all-to-all and all-gather / reduce-scatter (comm_bmm.h).
#include "tensor_parallel/comm_bmm.h"

#include <vector>

namespace mindspeed {
namespace {

Tensor workspace(const ForwardContext& ctx, int64_t n) {
  return Tensor(*ctx.alloc, Shape{n}, DType::kFloat32, MemoryCategory::kWorkspace);
}

// y [rows, N] = x [rows, K] . w [K, N] (+ bias [N]): the weight transposed once, for
// linear_forward.
void bmm_block(const ForwardContext& ctx, float* y, const float* x, const float* w,
               const float* bias, int64_t rows, int64_t K, int64_t N) {
  Tensor wt = workspace(ctx, N * K);
  ctx.k().transpose_01_f32(ctx.kc(), wt.f32(), w, K, N, 1);
  ctx.k().linear_forward(ctx.kc(), y, x, wt.f32(), bias, rows, K, N);
}

void all_to_all_equal(ProcessGroup& g, float* out, const float* in, int64_t block) {
  const std::vector<int64_t> counts(g.size(), block);
  g.all_to_all_async(out, counts, in, counts)->wait();
}

Status check(const ExpertBmmShape& s, int ep, int tp, const char* op) {
  if (s.E <= 0 || s.C <= 0 || s.H <= 0 || s.M <= 0) {
    return invalid_argument(op, ": E, C, H and M must be positive (", s.E, ", ", s.C, ", ", s.H,
                            ", ", s.M, ")");
  }
  if (s.E % ep != 0)
    return invalid_argument(op, ": ", s.E, " experts do not split over ", ep,
                            " expert-parallel ranks");
  if (s.shard == BmmShard::kHidden && s.H % tp != 0) {
    return invalid_argument(op, ": shard_type 0 splits H (", s.H, ") over ", tp,
                            " tensor-parallel ranks");
  }
  if (s.shard == BmmShard::kCapacity && s.C % tp != 0) {
    return invalid_argument(op, ": shard_type 1 splits C (", s.C, ") over ", tp,
                            " tensor-parallel ranks");
  }
  return ok_status();
}

}  // namespace

Status alltoall_allgather_bmm(const ForwardContext& ctx, ProcessGroup& ep, ProcessGroup& tp,
                              const ExpertBmmShape& s, float* y1, float* y2, float* y3,
                              const float* x, const float* weight, const float* bias,
                              BmmActivation act) {
  MS_RETURN_IF_ERROR(check(s, ep.size(), tp.size(), "npu_alltoall_allgather_bmm"));
  const int64_t e = ep.size(), t = tp.size(), El = s.E / e;
  const bool by_capacity = s.shard == BmmShard::kCapacity;
  const int64_t Cx = by_capacity ? s.C / t : s.C, Hx = by_capacity ? s.H : s.H / t;
  // All-to-all over the experts: [ep (source), E/ep, Cx, Hx], then [E/ep, ep, Cx, Hx].
  Tensor received = workspace(ctx, s.E * Cx * Hx), local = workspace(ctx, s.E * Cx * Hx);
  all_to_all_equal(ep, received.f32(), x, El * Cx * Hx);
  ctx.k().transpose_01_f32(ctx.kc(), local.f32(), received.f32(), e, El, Cx * Hx);
  // All-gather over tp: [tp, E/ep, ep, Cx, Hx]; its slices interleaved into [E/ep, ep*C, H].
  Tensor gathered = workspace(ctx, t * s.E * Cx * Hx);
  tp.all_gather(gathered.f32(), local.f32(), s.E * Cx * Hx);
  const int64_t rows = e * s.C;
  Tensor y2_own;
  if (y2 == nullptr) {
    y2_own = workspace(ctx, El * rows * s.H);
    y2 = y2_own.f32();
  }
  if (by_capacity) {
    ctx.k().transpose_01_f32(ctx.kc(), y2, gathered.f32(), t, El * e, Cx * s.H);
  } else {
    ctx.k().transpose_01_f32(ctx.kc(), y2, gathered.f32(), t, El * e * s.C, Hx);
  }
  // The batched GEMM per local expert, then the activation.
  Tensor y3_own;
  float* pre = y1;
  if (act != BmmActivation::kNone) {
    if (y3 == nullptr) {
      y3_own = workspace(ctx, El * rows * s.M);
      y3 = y3_own.f32();
    }
    pre = y3;
  }
  for (int64_t le = 0; le < El; ++le) {
    bmm_block(ctx, pre + le * rows * s.M, y2 + le * rows * s.H, weight + le * s.H * s.M,
              bias != nullptr ? bias + le * s.M : nullptr, rows, s.H, s.M);
  }
  if (act == BmmActivation::kGelu) {
    ctx.k().gelu_forward(ctx.kc(), y1, pre, El * rows * s.M, GeluApproximation::kErf);
  } else if (y3 != nullptr) {
    ctx.k().copy(ctx.kc(), y3, y1, El * rows * s.M);
  }
  return ok_status();
}

Status bmm_reducescatter_alltoall(const ForwardContext& ctx, ProcessGroup& ep, ProcessGroup& tp,
                                  const ExpertBmmShape& s, float* out, const float* x,
                                  const float* weight, const float* bias) {
  MS_RETURN_IF_ERROR(check(s, ep.size(), tp.size(), "npu_bmm_reducescatter_alltoall"));
  const int64_t e = ep.size(), t = tp.size(), El = s.E / e, rows = e * s.C;
  const bool by_capacity = s.shard == BmmShard::kCapacity;
  const int64_t Cx = by_capacity ? s.C / t : s.C, Hx = by_capacity ? s.H : s.H / t;
  // The batched GEMM per local expert: [E/ep, ep*C, H].
  Tensor product = workspace(ctx, El * rows * s.H);
  for (int64_t le = 0; le < El; ++le) {
    bmm_block(ctx, product.f32() + le * rows * s.H, x + le * rows * s.M, weight + le * s.M * s.H,
              nullptr, rows, s.M, s.H);
  }
  // Each tensor-parallel rank's slice first ([tp, E/ep, ep, Cx, Hx]), reduce-scattered.
  Tensor sliced = workspace(ctx, El * rows * s.H), reduced = workspace(ctx, s.E * Cx * Hx);
  if (by_capacity) {
    ctx.k().transpose_01_f32(ctx.kc(), sliced.f32(), product.f32(), El * e, t, Cx * s.H);
  } else {
    ctx.k().transpose_01_f32(ctx.kc(), sliced.f32(), product.f32(), El * e * s.C, t, Hx);
  }
  tp.reduce_scatter(reduced.f32(), sliced.f32(), s.E * Cx * Hx);
  // + bias per local expert (after the reduction, once).
  float* ready = reduced.f32();
  Tensor biased;
  if (bias != nullptr) {
    biased = workspace(ctx, s.E * Cx * Hx);
    Tensor zeros = device_zeros(*ctx.backend, *ctx.alloc, Shape{e * Cx * Hx}, DType::kFloat32,
                                MemoryCategory::kWorkspace);
    for (int64_t le = 0; le < El; ++le) {
      const int64_t off = le * e * Cx * Hx;
      ctx.k().bias_dropout_add_forward(ctx.kc(), biased.f32() + off, zeros.f32(), bias + le * Hx,
                                       ready + off, e * Cx, Hx, DropoutSpec{});
    }
    ready = biased.f32();
  }
  // [E/ep, ep, Cx, Hx] -> [ep, E/ep, Cx, Hx], then all-to-all back to the experts' owners.
  Tensor send = workspace(ctx, s.E * Cx * Hx);
  ctx.k().transpose_01_f32(ctx.kc(), send.f32(), ready, El, e, Cx * Hx);
  all_to_all_equal(ep, out, send.f32(), El * Cx * Hx);
  return ok_status();
}

}  // namespace mindspeed
