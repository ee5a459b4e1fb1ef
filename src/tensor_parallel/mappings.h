// Port of megatron/core/tensor_parallel/mappings.py: the communication of tensor, sequence,
// context and expert parallelism as named forward/backward pairs. A module's backward calls
// the partner of whatever its forward called, so the communication pattern can be read off
// the layer (and tested here once, against the math, in tests/tensor_parallel/).
// Activations are row-major [rows, C]; "first dim" is the rows (Megatron's [s, b, h] with s
// outermost, so a sequence split is a contiguous block of rows), "last dim" the C columns.
// `group` is the tensor-parallel group unless stated; r = its rank, tp = its size.
//
//   mapping                                  forward                      backward
//   CopyToTensorModelParallelRegion          identity                     all-reduce
//   ReduceFromTensorModelParallelRegion      all-reduce                   identity
//   ScatterToTensorModelParallelRegion       split last dim (keep r)      all-gather last dim
//   GatherFromTensorModelParallelRegion      all-gather last dim          split last dim
//   ScatterToSequenceParallelRegion          split first dim (keep r)     all-gather first dim
//   GatherFromSequenceParallelRegion         all-gather first dim         reduce-scatter first dim
//   ReduceScatterToSequenceParallelRegion    reduce-scatter first dim     all-gather first dim
//   AllToAll (any group)                     all-to-all                   all-to-all, counts swapped
#pragma once

#include <cstdint>
#include <vector>

#include "module/forward_context.h"

namespace mindspeed {

struct CopyToTensorModelParallelRegion {
  /// Forward is the identity (the input is used as it is).
  /// dx [rows, C] (in place): summed over the group.
  static void backward(const ForwardContext& ctx, float* dx, int64_t n);
};

struct ReduceFromTensorModelParallelRegion {
  /// x [n] (in place): summed over the group. Backward is the identity.
  static void forward(const ForwardContext& ctx, float* x, int64_t n);
};

struct ScatterToTensorModelParallelRegion {
  /// out [rows, C/tp] = columns [r*C/tp, (r+1)*C/tp) of in [rows, C].
  static void forward(const ForwardContext& ctx, float* out, const float* in, int64_t rows, int64_t C);
  /// din [rows, C] = all-gather along the last dim of dout [rows, C/tp].
  static void backward(const ForwardContext& ctx, float* din, const float* dout, int64_t rows, int64_t C);
};

struct GatherFromTensorModelParallelRegion {
  /// out [rows, C] = all-gather along the last dim of in [rows, C/tp].
  static void forward(const ForwardContext& ctx, float* out, const float* in, int64_t rows, int64_t C);
  /// din [rows, C/tp] = this rank's columns of dout [rows, C].
  static void backward(const ForwardContext& ctx, float* din, const float* dout, int64_t rows, int64_t C);
};

struct ScatterToSequenceParallelRegion {
  /// out [N/tp, C] = rows [r*N/tp, (r+1)*N/tp) of in [N, C].
  static void forward(const ForwardContext& ctx, float* out, const float* in, int64_t N, int64_t C);
  /// din [N, C] = all-gather along the first dim of dout [N/tp, C].
  static void backward(const ForwardContext& ctx, float* din, const float* dout, int64_t N, int64_t C);
};

struct GatherFromSequenceParallelRegion {
  /// out [N, C] = all-gather along the first dim of in [N/tp, C].
  static void forward(const ForwardContext& ctx, float* out, const float* in, int64_t N, int64_t C);
  /// din [N/tp, C] = reduce-scatter along the first dim of dout [N, C] (the gathered tensor
  /// fed a tensor-parallel region, whose ranks each hold a partial gradient).
  static void backward(const ForwardContext& ctx, float* din, const float* dout, int64_t N, int64_t C);
};

struct ReduceScatterToSequenceParallelRegion {
  /// out [N/tp, C] = reduce-scatter along the first dim of in [N, C].
  static void forward(const ForwardContext& ctx, float* out, const float* in, int64_t N, int64_t C);
  /// din [N, C] = all-gather along the first dim of dout [N/tp, C].
  static void backward(const ForwardContext& ctx, float* din, const float* dout, int64_t N, int64_t C);
};

struct AllToAll {
  /// out = all-to-all of in over `group`: send_counts[k] floats of in go to rank k,
  /// recv_counts[k] floats of out come from rank k (Ulysses context parallel, expert
  /// dispatch).
  static void forward(ProcessGroup& group, float* out, const std::vector<int64_t>& recv_counts, const float* in,
                      const std::vector<int64_t>& send_counts);
  /// The gradient travels back: din (send_counts layout) from dout (recv_counts layout).
  static void backward(ProcessGroup& group, float* din, const std::vector<int64_t>& send_counts,
                       const float* dout, const std::vector<int64_t>& recv_counts);
};

}  // namespace mindspeed
