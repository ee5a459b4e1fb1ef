// Expert-parallel batched GEMMs fused with their communication: the C++ forms of MindSpeed's
// npu_alltoall_allgather_bmm and npu_bmm_reducescatter_alltoall (mindspeed/ops, docs/zh/ops; the
// custom-op table of the MindSpeed feature list). Each expert block of an expert-parallel rank
// crosses the expert-parallel group by an all-to-all and the tensor-parallel group by an
// all-gather (or, on the way back, a reduce-scatter), along the hidden dimension (shard kHidden,
// the ops' shard_type 0) or the capacity dimension (kCapacity, shard_type 1). E experts, ep / tp
// the group sizes, C the capacity (tokens per expert per expert-parallel rank):
//
//   alltoall_allgather_bmm   x [E, C, H/tp] or [E, C/tp, H]
//                            -> all-to-all (ep) -> all-gather (tp) -> y2 [E/ep, ep*C, H]
//                            -> y3 = y2 . W [E/ep, H, M] (+ bias [E/ep, M]) -> y1 = act(y3)
//   bmm_reducescatter_alltoall  x [E/ep, ep*C, M] . W [E/ep, M, H] -> reduce-scatter (tp) -> + bias
//                            ([E/ep, H/tp] or [E/ep, H]) -> all-to-all (ep) -> out [E, C, H/tp] or
//                            [E, C/tp, H]
//
// M is the op's M/tp (the rank's share of the expert FFN). The second op is the first's mirror
// (the expert FFN's two GEMMs). The compositions follow MindSpeed's own golden tests
// (tests_extend/unit_tests/ops/cann/test_npu_*): all_to_all_single over the leading dimension,
// _all_gather_base / _reduce_scatter_base over the leading dimension, with the permutes between.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "module/forward_context.h"

namespace mindspeed {

enum class BmmShard { kHidden = 0, kCapacity = 1 };
/// act_type: "None" and "GeLU" (exact) here; MindSpeed's FastGELU, Relu and Silu are refused.
enum class BmmActivation { kNone, kGelu };

struct ExpertBmmShape {
  int64_t E = 0, C = 0, H = 0, M = 0;  ///< experts, capacity, hidden, the rank's FFN share
  BmmShard shard = BmmShard::kHidden;
};

/// y1 [E/ep, ep*C, M]; y2 [E/ep, ep*C, H] (the all-gather's output) and y3 [E/ep, ep*C, M]
/// (before the activation) when not null. Refuses shapes that do not split over the groups.
Status alltoall_allgather_bmm(const ForwardContext& ctx, ProcessGroup& ep, ProcessGroup& tp,
                              const ExpertBmmShape& s, float* y1, float* y2, float* y3,
                              const float* x, const float* weight, const float* bias,
                              BmmActivation act);

/// out [E, C, H/tp] (kHidden) or [E, C/tp, H] (kCapacity) from x [E/ep, ep*C, M] and weight
/// [E/ep, M, H]; bias [E/ep, H/tp] or [E/ep, H] (null: none), added after the reduce-scatter.
Status bmm_reducescatter_alltoall(const ForwardContext& ctx, ProcessGroup& ep, ProcessGroup& tp,
                                  const ExpertBmmShape& s, float* out, const float* x,
                                  const float* weight, const float* bias);

}  // namespace mindspeed
