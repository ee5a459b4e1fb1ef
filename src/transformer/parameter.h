// Parameters: what each module declares at build time (name, shapes, how tensor parallelism
// splits it, how it is initialised, which optimizer/reduction rules apply), and the views
// into the contiguous parameter and gradient buffers they get once the buffer is laid out
// (distributed/param_and_grad_buffer.h). Names are Megatron-core's state-dict names.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mindspeed {

/// How the full ("master") weight maps to this tensor-parallel rank's shard.
enum class TensorParallelSplit {
  kReplicated,  ///< every rank holds the whole tensor
  kRows,        ///< dim 0 cut in tp contiguous pieces (column-parallel weight, its bias, vocab rows)
  kColumns,     ///< dim 1 cut in tp contiguous pieces (row-parallel weight)
  kGluRows,     ///< [gate; up] on dim 0: each rank takes its rows of both halves (SwiGLU fc1)
};

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
};

struct Parameter {
  ParameterSpec spec;
  Shape local_shape;       ///< this rank's shard
  TensorView data;         ///< into the parameter buffer (fp32, or bf16 with --bf16)
  TensorView main_grad;    ///< fp32, into the gradient buffer (+= by backward)
  int64_t buffer_offset = -1;  ///< element offset in the buffers
  /// fp32 values the kernels read when `data` is bf16: set only inside a ComputeWeights scope.
  float* compute = nullptr;

  bool is_tensor_parallel() const { return spec.split != TensorParallelSplit::kReplicated; }
  /// The weights as fp32 for the kernels.
  float* w() const;
  float* g() const { return main_grad.f32(); }
};

/// Makes bf16 parameters readable as fp32 for the lifetime of the scope (one workspace
/// conversion per module use, so no permanent fp32 copy exists beside the fp32 main
/// parameters of the optimizer). A no-op for fp32 parameters and for parameters an
/// enclosing scope already converted.
class ComputeWeights {
 public:
  ComputeWeights(Allocator& alloc, const std::vector<Parameter*>& params);
  ~ComputeWeights();
  ComputeWeights(const ComputeWeights&) = delete;
  ComputeWeights& operator=(const ComputeWeights&) = delete;

 private:
  std::vector<Parameter*> converted_;
  Tensor storage_;
};

/// Owns the Parameter records of one model (stable addresses for the modules).
class ParameterRegistry {
 public:
  /// Declares a parameter; local_shape follows from `split` and the tensor-parallel size.
  Parameter* add(ParameterSpec spec, int tp_size);
  const std::vector<std::unique_ptr<Parameter>>& params() const { return params_; }
  Parameter* find(const std::string& name) const;
  int64_t num_local_elements() const;

 private:
  std::vector<std::unique_ptr<Parameter>> params_;
};

/// Fills `out` (local shape) with this rank's shard of the full tensor `full` (global shape).
void slice_for_rank(float* out, const float* full, const ParameterSpec& spec, int tp_rank,
                    int tp_size);
/// The inverse: writes this rank's shard into its place in the full tensor.
void unslice_from_rank(float* full, const float* shard, const ParameterSpec& spec, int tp_rank,
                       int tp_size);
/// Stores this rank's shard of the full tensor into the parameter (fp32 or bf16 storage).
void set_parameter_from_full(Parameter& p, const float* full, int tp_rank, int tp_size);
/// Generates the full tensor from (seed, hash of the name): every parallel layout slices the
/// same master weight, like Megatron's --use-cpu-initialization.
void init_full_tensor(float* full, const ParameterSpec& spec, uint64_t seed);

}  // namespace mindspeed
