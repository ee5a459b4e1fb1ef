// Parameters: what each module declares at build time (name, shapes, how tensor parallelism
// splits it, how it is initialised, which optimizer/reduction rules apply), and the views
// into the contiguous parameter and gradient buffers they get once the buffer is laid out
// (distributed/param_and_grad_buffer.h). Names are Megatron-core's state-dict names.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "kernels/backend.h"
#include "parallel/parallel_state.h"

namespace mindspeed {

/// How the full ("master") weight maps to this tensor-parallel rank's shard.
enum class TensorParallelSplit {
  kReplicated,  ///< every rank holds the whole tensor
  kRows,     ///< dim 0 cut in tp contiguous pieces (column-parallel weight, its bias, vocab rows)
  kColumns,  ///< dim 1 cut in tp contiguous pieces (row-parallel weight)
  kGluRows,  ///< [gate; up] on dim 0: each rank takes its rows of both halves (SwiGLU fc1)
  // 2D tensor parallelism (--tp-2d, tensor_parallel/linear_2d.h): the tp ranks form an X x Y
  // grid, rank t at x = t % X, y = t / X (ParameterSpec::tp_x is X); both dimensions are cut.
  k2dRowsXColumnsY,     ///< dim 0 in X pieces, dim 1 in Y pieces (the first linear of a pair)
  k2dGluRowsXColumnsY,  ///< the same with each [gate; up] half's rows in X pieces
  k2dRowsYColumnsX,     ///< dim 0 in Y pieces, dim 1 in X pieces (the second linear)
};

/// Which ranks of the tensor-parallel group a split runs over: all of them, or (2D tensor
/// parallelism) one axis of the X x Y grid, the tensor being replicated along the other.
enum class TensorParallelAxis { kAll, kX, kY };

/// `units` things (attention heads, query groups, FFN channels) shared by `tp_size` ranks as
/// evenly as they go: ranks below units % tp_size hold one more (MindSpeed's unaligned_divide,
/// --unaligned-linear). Rank `tp_rank`'s first unit and count.
struct UnitShare {
  int64_t first = 0, count = 0;
};
UnitShare unaligned_share(int64_t units, int tp_size, int tp_rank);

enum class InitMethod { kNormal, kZeros, kOnes };

struct ParameterSpec {
  std::string name;      ///< e.g. "decoder.layers.0.self_attention.linear_qkv.weight"
  Shape global_shape;    ///< the full tensor
  TensorParallelSplit split = TensorParallelSplit::kReplicated;
  InitMethod init = InitMethod::kZeros;
  float init_std = 0.0f;            ///< for kNormal
  bool weight_decay = true;         ///< false for biases and norm weights (Megatron's rule)
  bool sequence_parallel = false;   ///< norm params: grads all-reduced over tp under SP
  bool shared_embedding = false;    ///< the word embedding also used as the output layer
  /// Non-empty: this tensor is a copy of the logical parameter of that name living on another
  /// pipeline stage (Megatron's output_layer.weight on the last stage tied to the first
  /// stage's word embedding). It is initialised from that name's stream (so the copies start
  /// equal), its gradient is all-reduced over the embedding group, and it is left out of the
  /// gradient norm (counted once, on the stage that owns the original).
  std::string tied_to = {};
  /// A routed expert's weight (Megatron's allreduce=False parameters): split over the
  /// expert-tensor-parallel group instead of tp, its gradient reduced over expert-data-parallel
  /// in its own buckets, its norm summed over the expert-model-parallel group.
  bool expert_parallel = false;
  /// --unaligned-linear: the split dimension (of each half for kGluRows) is this many equal
  /// units, shared by unaligned_share (ranks below units % tp hold one unit more). 0: tp equal
  /// pieces (the dimension must divide).
  int64_t split_units = 0;
  /// 2D tensor parallelism: X of the grid (the k2d splits, and the axis splits); 0 = 1-D.
  int tp_x = 0;
  /// kRows / kGluRows over one axis of the 2D grid (a bias or norm weight of a 2D layer).
  TensorParallelAxis tp_axis = TensorParallelAxis::kAll;
  /// 2D tensor parallelism: the gradient of a tensor replicated along X (a norm weight, the
  /// second linear's bias) is computed from this rank's tokens only, so it is all-reduced over
  /// the tp-x group (as sequence_parallel does over tp).
  bool grads_summed_over_tp_x = false;
};

/// Where rank `tp_rank`'s piece of a split dimension of `length` elements starts, and its length
/// (spec.split_units's unaligned share, or the even piece).
struct SplitPiece {
  int64_t offset = 0, length = 0;
};
SplitPiece split_piece(const ParameterSpec& spec, int64_t length, int tp_rank, int tp_size);

struct Parameter {
  ParameterSpec spec;
  Shape local_shape;       ///< this rank's shard
  TensorView data;         ///< into the parameter buffer (fp32, or bf16 with --bf16)
  /// fp32, into the gradient buffer (+= by backward). With --o2-gradient: into the unit's
  /// transient fp32 gradient during its backward, else its bf16 gradient in the buffer.
  TensorView main_grad;
  int64_t buffer_offset = -1;  ///< element offset in the buffers

  bool is_tensor_parallel() const { return spec.split != TensorParallelSplit::kReplicated; }
  bool is_2d_split() const {
    return spec.split == TensorParallelSplit::k2dRowsXColumnsY ||
           spec.split == TensorParallelSplit::k2dGluRowsXColumnsY ||
           spec.split == TensorParallelSplit::k2dRowsYColumnsX;
  }
  bool is_tied_copy() const { return !spec.tied_to.empty(); }
  /// The fp32 gradient in the gradient buffer (+= by backward).
  float* g() const { return main_grad.f32(); }
};

/// Model state that the optimizer does not train (Megatron's registered buffers, e.g. the MoE
/// router's expert_bias): fp32, replicated, zero-initialised; persistent ones are saved in
/// checkpoints beside the parameters.
struct ModelBuffer {
  std::string name;
  std::vector<float> values;
  bool persistent = true;
};

/// Owns the Parameter records of every model chunk of this rank (stable addresses for the
/// modules), in declaration order; the gradient buffer lays them all out together. It also
/// owns the model's buffers.
class ParameterRegistry {
 public:
  /// Declares a parameter; local_shape follows from `split`, the tensor-parallel size and (for
  /// an unaligned split, spec.split_units) this rank's place in it.
  Parameter* add(ParameterSpec spec, int tp_size, int tp_rank = 0);
  const std::vector<std::unique_ptr<Parameter>>& params() const { return params_; }
  Parameter* find(const std::string& name) const;
  int64_t num_local_elements() const;
  /// Declares a buffer of n zeros.
  ModelBuffer* add_buffer(std::string name, int64_t n, bool persistent = true);
  const std::vector<std::unique_ptr<ModelBuffer>>& buffers() const { return buffers_; }

 private:
  std::vector<std::unique_ptr<Parameter>> params_;
  std::unordered_map<std::string, Parameter*> by_name_;
  std::vector<std::unique_ptr<ModelBuffer>> buffers_;
};

/// Which slice of its tensor-parallel split this rank holds: (expert-tp rank, expert-tp size)
/// for expert parameters, (tp rank, tp size) otherwise.
struct ShardCoords {
  int rank = 0, count = 1;
};
ShardCoords shard_coords(const ParameterSpec& spec, const ParallelState& ps);
/// `spec` as a 1-D tensor-parallel layout (Megatron's) splits it: the 2D weights as the
/// column- (kRows / kGluRows) or row-parallel (kColumns) weight, a first linear's bias (over X)
/// as kRows / kGluRows, the tensors split over Y alone (norm weights, second-linear biases) whole.
/// Other specs unchanged.
ParameterSpec one_d_equivalent(const ParameterSpec& spec);
/// Whether this rank holds the copy of `spec`'s shard that is saved and counted once (in the
/// gradient norm): every rank for a split over the whole tp group, the first rank of the other
/// axis for a 2D axis split, tp rank 0 for a replicated tensor.
bool holds_main_tp_copy(const ParameterSpec& spec, const ParallelState& ps);

/// One contiguous run of a rank's shard: global row `row` (a 1-D tensor counts as [n, 1]),
/// columns [col_begin, col_end), stored from element `local_offset` of the shard.
struct ShardRun {
  int64_t row, col_begin, col_end, local_offset;
};
/// This rank's shard of the tensor as runs of global rows, in the shard's order.
std::vector<ShardRun> shard_runs(const ParameterSpec& spec, int tp_rank, int tp_size);
/// Where part of a global row lives when the tensor is split over `tp_size` ranks by
/// spec.split: `count` elements from `local_offset` of rank `tp_rank`'s shard.
struct ShardPlace {
  int tp_rank;
  int64_t local_offset, count;
};
/// The places holding `run`'s row and columns (several when a column split cuts them).
std::vector<ShardPlace> locate_in_shards(const ParameterSpec& spec, int tp_size, const ShardRun& run);

/// Fills `out` (local shape) with this rank's shard of the full tensor `full` (global shape).
void slice_for_rank(float* out, const float* full, const ParameterSpec& spec, int tp_rank,
                    int tp_size);
/// The inverse: writes this rank's shard into its place in the full tensor.
void unslice_from_rank(float* full, const float* shard, const ParameterSpec& spec, int tp_rank,
                       int tp_size);
/// Stores this rank's shard (local shape) into the parameter (fp32, bf16 or fp16 storage): with
/// a backend through its transfer (the parameter in device memory), else by the host.
void set_parameter_from_shard(Parameter& p, const float* shard, const Backend* backend = nullptr);
/// Stores this rank's shard of the full tensor into the parameter (fp32 or bf16 storage).
void set_parameter_from_full(Parameter& p, const float* full, int tp_rank, int tp_size,
                             const Backend* backend = nullptr);
/// Generates the full tensor from (seed, hash of the name): every parallel layout slices the
/// same master weight, like Megatron's --use-cpu-initialization.
void init_full_tensor(float* full, const ParameterSpec& spec, uint64_t seed);

}  // namespace mindspeed
