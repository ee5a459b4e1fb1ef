// MindSpeed's 2D tensor parallelism (mindspeed/core/tensor_parallel/tp_2d: ParallelLinear2D and
// Linear2DSplitAlongFirstDim): the T = X * Y tensor-parallel ranks form a grid, rank t at
// (x, y) = (t % X, t / X); X groups are runs of X consecutive ranks, Y groups every X-th rank.
// Between layers the activations are [s/(X*CP), b, h/Y]: a block of the sequence along X, a
// block of the hidden columns along Y. A linear layer with all-gather group A and
// reduce-scatter group R computes
//   x [N/A, in/R] --all-gather rows over A--> [N, in/R] . W[out/A, in/R]^T
//     = partial [N, out/A] --reduce-scatter rows over R--> y [N/R, out/A]
// (every rank's weight is a distinct block of the full one). The first linear of a pair (QKV,
// fc1) has A = X, R = Y; the second (proj, fc2) A = Y, R = X, which brings the activations back
// to [N/X, h/Y]. Backward mirrors it: dy all-gathered over R, dx = dy W reduce-scattered over
// A, dW from the gathered dy and the input gathered again over A (not kept from forward).
// The first linear adds its bias (on one rank of R before the reduction, so once; its gradient
// comes whole from the gathered dy); the second leaves it to the caller's bias_dropout_add
// (a [h/Y] bias replicated along X, its gradient summed over X by the data-parallel layer).
// MindSpeed's overlap flags (ForwardContext::tp_2d_overlap), honoured where MindSpeed honours
// them (Linear2dOverlapUse): --enable-overlap-matmul-with-rs by fc1's forward reduce-scatter,
// --enable-overlap-ag-with-matmul by fc2's forward all-gather, --enable-backward-overlap-ag-with-
// matmul by the backward all-gather of dy in proj, fc1 and fc2. Each then runs in chunks under the
// GEMM next to it (comm_gemm.h's matmul_reduce_scatter / all_gather_matmul on that axis's group).
#pragma once

#include <cstdint>
#include <string>

#include "module/forward_context.h"
#include "module/parameter.h"
#include "tensor_parallel/layers.h"

namespace mindspeed {

/// This rank's place in the 2D grid; x = 0: 1-D tensor parallelism.
struct TensorParallelGrid {
  int x = 0, y = 0, x_rank = 0, y_rank = 0;
  bool on() const { return x > 0; }
  static TensorParallelGrid of(const ParallelState& ps) {
    return ps.tp_2d() ? TensorParallelGrid{ps.sizes.tp_x, ps.sizes.tp_y, ps.tp_x_rank, ps.tp_y_rank}
                      : TensorParallelGrid{};
  }
};

/// Which linear of a layer pair (see above).
enum class Linear2dRole { kFirst, kSecond };

/// Which of the context's overlap flags a layer honours (see above).
struct Linear2dOverlapUse {
  bool forward_ag = false, forward_rs = false, backward_ag = false;
};

class Linear2D : public ParallelLinear {
 public:
  /// W is [out, in] (glu: [gate; up] rows, each half split over X like kGluRows).
  Linear2D(ParameterRegistry& registry, const std::string& prefix, int64_t in, int64_t out,
           const LinearOptions& options, Linear2dRole role, const TensorParallelGrid& grid,
           const Linear2dOverlapUse& overlap = {});
  /// y [N/R, out/A] from x [N/A, in/R]; N is the full (context-parallel local) row count.
  void forward(const ForwardContext& ctx, const float* x, float* y, int64_t N) const override;
  /// dx [N/A, in/R] (=) from dy [N/R, out/A]; dW (and the first linear's db) +=.
  void backward(const ForwardContext& ctx, const float* x, const float* dy, float* dx,
                int64_t N) const override;
  int64_t in_cols() const override { return in_local_; }
  int64_t out_cols() const override { return out_local_; }
  Parameter* weight() const override { return weight_; }
  Parameter* bias() const override { return bias_; }

 private:
  ProcessGroup& ag_group(const ForwardContext& ctx) const;
  ProcessGroup& rs_group(const ForwardContext& ctx) const;

  /// A context whose tensor-parallel group is `group` (the X or Y axis), for comm_gemm.h.
  ForwardContext on_axis(const ForwardContext& ctx, const ProcessGroup& group) const;

  Linear2dRole role_;
  Linear2dOverlapUse overlap_;
  int64_t in_local_, out_local_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
};

/// The decoder's entry and exit (MindSpeed's auto_grad_scatter_along_first_dim_then_last_dim and
/// the two gathers after the block): out [N/X, h/Y] = rows block x, columns block y of in [N, h].
/// It is the backward of gather_from_2d_layout and the other way round.
void scatter_to_2d_layout(const ForwardContext& ctx, float* out, const float* in, int64_t N,
                          int64_t h);
/// out [N, h] = every rank's [N/X, h/Y] block in place: the columns all-gathered over Y, then
/// the rows over X.
void gather_from_2d_layout(const ForwardContext& ctx, float* out, const float* in, int64_t N,
                           int64_t h);

}  // namespace mindspeed
