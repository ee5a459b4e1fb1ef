// Port of megatron/core/transformer/mlp.py MLP: linear_fc1 (column parallel; [gate; up]
// rows with --swiglu) -> GELU or SwiGLU -> linear_fc2 (row parallel).
// Recompute (set_recompute): MindSpeed's activation-function recompute drops the activation's
// output once linear_fc2 has used it and rebuilds it from fc1's output at the start of
// backward; Megatron's selective "mlp" drops both and re-runs linear_fc1 and the activation
// (linear_fc2's output is not needed again). The rebuilt values are bit-identical.
// With a 2D tensor-parallel grid (linear_2d.h) the pair is Linear2D: x [N/X, h/Y] -> fc1
// [N/Y, F/X] -> activation -> fc2 -> [N/X, h/Y].
#pragma once

#include <memory>
#include <string>

#include "config/model_config.h"
#include "core/tensor.h"
#include "module/forward_context.h"
#include "tensor_parallel/layers.h"
#include "tensor_parallel/linear_2d.h"

namespace mindspeed {

class MLP {
 public:
  struct Saved {
    Tensor fc1_out;  ///< [N, F/tp] or [N, 2F/tp] (SwiGLU): the activation's input
    Tensor act_out;  ///< [N, F/tp]: linear_fc2's input
  };

  /// What forward drops and backward rebuilds.
  enum class Recompute { kNone, kActivation, kFc1AndActivation };

  /// ffn_hidden_size 0: config.ffn_hidden_size (MoE shared experts pass their own size).
  /// tp_rank: this rank's place in an unaligned FFN split (--unaligned-linear).
  MLP(ParameterRegistry& registry, const std::string& prefix, const ModelConfig& config,
      int tp_size, bool sequence_parallel, int64_t ffn_hidden_size = 0, int tp_rank = 0,
      const TensorParallelGrid& grid = {});
  /// out = linear_fc2(act(linear_fc1(x))), reduced over tp, without fc2 bias. N is the full
  /// row count; x and out are [N/tp, h] with sequence parallelism.
  void forward(const ForwardContext& ctx, const float* x, int64_t N, float* out, Saved& saved) const;
  /// dx [N, h] (=) from dout [N, h]; weight gradients +=.
  /// Rebuilds what forward dropped (see set_recompute) first; x must be forward's input.
  void backward(const ForwardContext& ctx, Saved& saved, const float* x, const float* dout,
                float* dx, int64_t N) const;
  Parameter* fc2_bias() const { return linear_fc2_->bias(); }
  void set_recompute(Recompute recompute) { recompute_ = recompute; }

 private:
  /// saved.act_out [N, F/tp] = act(saved.fc1_out), bf16-rounded like every saved activation.
  void activation_forward(const ForwardContext& ctx, Saved& saved, int64_t N) const;
  Recompute recompute_ = Recompute::kNone;
  bool swiglu_;
  GeluApproximation gelu_;
  int64_t ffn_local_;
  int mid_rows_divisor_ = 1;  ///< rows between the two linears: N, or N/Y with a 2D grid
  std::unique_ptr<ParallelLinear> linear_fc1_;
  std::unique_ptr<ParallelLinear> linear_fc2_;
};

}  // namespace mindspeed
