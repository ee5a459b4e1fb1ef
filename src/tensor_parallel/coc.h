// Compute-communication overlap of the tensor-parallel linear layers, script mode: port of
// MindSpeed's mindspeed/core/tensor_parallel/coc_feature (--use-ascend-coc, --coc-parallel-num).
// A linear layer's GEMM and the collective that feeds or drains it are split along the tokens
// (the GEMM's M dimension) into p chunks, so that a chunk's communication runs on the group's
// communication thread (a device's communication stream) while another chunk's GEMM runs:
//
//   communicate first (all-gather feeds the GEMM):   AG(0) | AG(1) | AG(2) ...
//                                                           GEMM(0) | GEMM(1) | GEMM(2)
//   compute first (the GEMM feeds a reduction):      GEMM(0) | GEMM(1) | GEMM(2)
//                                                            RS/AR(0) | RS/AR(1) | RS/AR(2)
//
// Under sequence parallelism each rank holds rows [r*Nl, (r+1)*Nl) of the N = tp*Nl tokens; chunk
// i is then rows [i*c, (i+1)*c) (c = Nl/p) of every rank's block, so a chunk's all-gather or
// reduce-scatter moves exactly one c-row block per rank, and its GEMM reads or writes tp blocks
// of c rows of the full [N, C] tensor (gather_chunk_rows / scatter_chunk_rows). Without sequence
// parallelism chunk i is simply rows [i*c, (i+1)*c) (c = N/p) and the collective an all-reduce.
// The layers in layers.h use these when ForwardContext::coc_chunks > 1; the arithmetic is the
// layers' own (row blocks of the same GEMMs), so the results equal the unsplit layers'.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "module/forward_context.h"

namespace mindspeed {

/// The chunks the linear layers of `ctx` split `local_rows` tokens into: ctx.coc_chunks when
/// CoC is on and the tensor-parallel group has more than one rank, else 1. CoC needs the rows to
/// divide evenly (validation refuses other shapes for training; MS_CHECK here).
int coc_chunks(const ForwardContext& ctx, int64_t local_rows);

/// dst [tp*c, C] = rows [i*c, (i+1)*c) of each of the tp blocks of Nl rows of src [tp*Nl, C].
void gather_chunk_rows(const ForwardContext& ctx, float* dst, const float* src, int64_t chunk,
                       int64_t c, int64_t Nl, int64_t C);
/// The inverse: rows [i*c, (i+1)*c) of each block of dst [tp*Nl, C] = src [tp*c, C].
void scatter_chunk_rows(const ForwardContext& ctx, float* dst, const float* src, int64_t chunk,
                        int64_t c, int64_t Nl, int64_t C);

/// Communicate first: the all-gather over tp of local [Nl, C] in p chunks of c = Nl/p rows.
/// consume(i, gathered) receives chunk i's rows of every rank, [tp*c, C] rank-major (rank r's
/// rows [i*c, (i+1)*c)), while chunk i+1's all-gather is under way.
void all_gather_in_chunks(const ForwardContext& ctx, const float* local, int64_t Nl, int64_t C,
                          int p,
                          const std::function<void(int64_t chunk, const float* gathered)>& consume);

/// Compute first: produce each chunk's rows, then start its reduction while the next chunk is
/// produced. The collectives are waited for by wait() (or the destructor), so the caller can run
/// more work (a weight gradient) under the last ones.
class ReduceInChunks {
 public:
  enum class Kind {
    kReduceScatter,  ///< sequence parallel: out [Nl, C] = reduce-scatter of the [tp*Nl, C] rows
    kAllReduce,      ///< out [N, C] summed over tp, in place
  };
  /// out: the reduced rows ([Nl, C] for kReduceScatter, [N, C] for kAllReduce); rows: Nl or N.
  ReduceInChunks(const ForwardContext& ctx, Kind kind, float* out, int64_t rows, int64_t C, int p);
  ~ReduceInChunks();
  ReduceInChunks(const ReduceInChunks&) = delete;
  ReduceInChunks& operator=(const ReduceInChunks&) = delete;

  int64_t chunk_rows() const { return c_; }
  /// Where produce writes chunk i: [tp*c, C] rank-major (kReduceScatter; gather_chunk_rows
  /// gives the matching input rows), or rows [i*c, (i+1)*c) of out (kAllReduce).
  float* chunk_buffer(int64_t chunk);
  /// Starts chunk i's reduction (its rows must be written).
  void reduce(int64_t chunk);
  /// Waits for every started reduction.
  void wait();

 private:
  const ForwardContext& ctx_;
  Kind kind_;
  float* out_;
  int64_t C_, c_;
  int tp_;
  Tensor staging_;  ///< kReduceScatter: [p, tp*c, C], one slice per chunk in flight
  std::vector<std::unique_ptr<Work>> pending_;
};

}  // namespace mindspeed
