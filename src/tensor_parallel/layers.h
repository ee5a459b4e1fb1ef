// Port of megatron/core/tensor_parallel/layers.py: ColumnParallelLinear and
// RowParallelLinear. Weights are [out, in] and a layer computes y = x W^T (+ b).
//  * Column: W split on dim 0 (out). Forward: identity on x, local GEMM. Backward: the input
//    gradient is all-reduced over the tensor-parallel group (the pair of Megatron's
//    copy_to_tensor_model_parallel_region).
//  * Row: W split on dim 1 (in), x already split on its last dim. Forward: local GEMM, then
//    all-reduce of y over tp (reduce_from_tensor_model_parallel_region). Backward: no
//    communication. Its bias is replicated and added after the reduction by the caller
//    (bias_dropout_add), as Megatron's skip_bias_add does.
// With --sequence-parallel (Megatron SP) the activations outside these layers are split
// along the sequence, [s/tp, b, h]: Column all-gathers its input along the sequence (and
// gathers it again in backward instead of keeping it) and reduce-scatters its input
// gradient; Row reduce-scatters its output and all-gathers the output gradient.
// Weight gradients accumulate straight into the fp32 gradient buffer (beta = 1 GEMM: the
// gradient-accumulation fusion; --no-gradient-accumulation-fusion computes the product
// into a temporary first and then adds it). With ForwardContext::wgrad_queue set, backward
// computes the input gradient only and queues the weight-gradient GEMM (the B/W split).
// Communication goes through the named pairs of mappings.h. With ForwardContext::coc_chunks > 1
// (MindSpeed's --use-ascend-coc) the GEMM next to each collective is split along the tokens so
// the two overlap, and with ForwardContext::mc2 (--use-ascend-mc2) the sequence-parallel
// collectives and GEMMs run as MindSpeed's fused MC2 ops; both go through comm_gemm.h. The column
// backward then re-gathers its input under the input gradient's GEMMs (MindSpeed's
// recompute_all_gather).
// Activations are [N, C] with N = s*b rows ([s, b, h] flattened); N below is always the
// full (unsplit) row count.
#pragma once

#include <cstdint>
#include <string>

#include "module/forward_context.h"
#include "module/parameter.h"
#include "tensor_parallel/mappings.h"

namespace mindspeed {

struct LinearOptions {
  bool bias = true;
  bool sequence_parallel = false;  ///< Row bias: its gradient is summed over tp under SP
  float init_std = 0.02f;
  bool glu = false;  ///< fc1 of SwiGLU: the output is [gate; up] and each half is split by tp
  /// --unaligned-linear: the split dimension (of each half with glu) is this many units (query
  /// groups, FFN channels) shared unevenly (ParameterSpec::split_units); 0 = an even split.
  int64_t split_units = 0;
  int tp_rank = 0;  ///< this rank's place in the split (needed for an unaligned one)
};

/// dW += dy^T x and db += colsum(dy) (b may be null), now or -- with ctx.wgrad_queue -- as a
/// queued job that owns copies of dy [N, out] and x [N, in] (or takes `x_owned` when the
/// caller has no further use of it).
void accumulate_weight_grad(const ForwardContext& ctx, Parameter* w, Parameter* b, const float* dy, const float* x,
                            Tensor x_owned, int64_t N, int64_t in, int64_t out);

/// The face of a layer pair's two linear layers that MLP and attention use: Column/Row here, or
/// the 2D forms (linear_2d.h). The first of a pair adds its bias; the second leaves its bias to
/// the caller's bias_dropout_add.
class ParallelLinear {
 public:
  virtual ~ParallelLinear() = default;
  virtual void forward(const ForwardContext& ctx, const float* x, float* y, int64_t N) const = 0;
  virtual void backward(const ForwardContext& ctx, const float* x, const float* dy, float* dx,
                        int64_t N) const = 0;
  /// Columns of x and of y on this rank.
  virtual int64_t in_cols() const = 0;
  virtual int64_t out_cols() const = 0;
  virtual Parameter* weight() const = 0;
  virtual Parameter* bias() const = 0;
};

class ColumnParallelLinear : public ParallelLinear {
 public:
  ColumnParallelLinear(ParameterRegistry& registry, const std::string& prefix, int64_t in,
                       int64_t out, const LinearOptions& options, int tp_size);
  /// y [N, out/tp] = x W^T + b; x is [N, in], or [N/tp, in] with sequence parallelism.
  void forward(const ForwardContext& ctx, const float* x, float* y, int64_t N) const override;
  /// dW += dy^T x, db += colsum(dy); if dx: dx = dy W, all-reduced over tp ([N, in]) or
  /// reduce-scattered along the sequence ([N/tp, in]) with sequence parallelism.
  void backward(const ForwardContext& ctx, const float* x, const float* dy, float* dx,
                int64_t N) const override;
  int64_t in() const { return in_; }
  int64_t out_local() const { return out_local_; }
  int64_t in_cols() const override { return in_; }
  int64_t out_cols() const override { return out_local_; }
  Parameter* weight() const override { return weight_; }
  Parameter* bias() const override { return bias_; }

 private:
  // The CoC forms (p > 1 chunks): forward under sequence parallelism (without it the column
  // forward has no communication) and backward.
  void forward_sequence_parallel_in_chunks(const ForwardContext& ctx, const float* x, float* y,
                                           int64_t N, int p) const;
  void backward_in_chunks(const ForwardContext& ctx, const float* x, const float* dy, float* dx,
                          int64_t N, int p) const;

  int64_t in_, out_local_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
};

class RowParallelLinear : public ParallelLinear {
 public:
  RowParallelLinear(ParameterRegistry& registry, const std::string& prefix, int64_t in,
                    int64_t out, const LinearOptions& options, int tp_size);
  /// y = all-reduce_tp(x [N, in/tp] W^T) as [N, out], or its reduce-scatter along the
  /// sequence [N/tp, out] with sequence parallelism; the bias is not added (see above).
  void forward(const ForwardContext& ctx, const float* x, float* y, int64_t N) const override;
  /// dW += dy^T x; dx [N, in/tp] = dy W. dy is the gradient of the reduced output ([N/tp,
  /// out] with sequence parallelism, all-gathered first).
  void backward(const ForwardContext& ctx, const float* x, const float* dy, float* dx,
                int64_t N) const override;
  int64_t in_local() const { return in_local_; }
  int64_t out() const { return out_; }
  int64_t in_cols() const override { return in_local_; }
  int64_t out_cols() const override { return out_; }
  Parameter* weight() const override { return weight_; }
  /// The replicated bias (null without bias), for the caller's bias_dropout_add.
  Parameter* bias() const override { return bias_; }

 private:
  // The CoC forms (p > 1 chunks): forward, and backward under sequence parallelism (without it
  // the row backward has no communication).
  void forward_in_chunks(const ForwardContext& ctx, const float* x, float* y, int64_t N,
                         int p) const;
  void backward_sequence_parallel_in_chunks(const ForwardContext& ctx, const float* x,
                                            const float* dy, float* dx, int64_t N, int p) const;

  int64_t in_local_, out_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
};

}  // namespace mindspeed
