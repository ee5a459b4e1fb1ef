// Port of megatron/core/transformer/mlp.py MLP: linear_fc1 (column parallel; [gate; up]
// rows with --swiglu) -> GELU or SwiGLU -> linear_fc2 (row parallel).
#pragma once

#include <string>

#include "config/model_config.h"
#include "core/tensor.h"
#include "tensor_parallel/layers.h"
#include "module/forward_context.h"

namespace mindspeed {

class MLP {
 public:
  struct Saved {
    Tensor fc1_out;  ///< [N, F/tp] or [N, 2F/tp] (SwiGLU): the activation's input
    Tensor act_out;  ///< [N, F/tp]: linear_fc2's input
  };

  /// ffn_hidden_size 0: config.ffn_hidden_size (MoE shared experts pass their own size).
  MLP(ParameterRegistry& registry, const std::string& prefix, const ModelConfig& config,
      int tp_size, bool sequence_parallel, int64_t ffn_hidden_size = 0);
  /// out = linear_fc2(act(linear_fc1(x))), reduced over tp, without fc2 bias. N is the full
  /// row count; x and out are [N/tp, h] with sequence parallelism.
  void forward(const ForwardContext& ctx, const float* x, int64_t N, float* out, Saved& saved) const;
  /// dx [N, h] (=) from dout [N, h]; weight gradients +=.
  void backward(const ForwardContext& ctx, const Saved& saved, const float* x, const float* dout,
                float* dx, int64_t N) const;
  Parameter* fc2_bias() const { return linear_fc2_.bias(); }

 private:
  bool swiglu_;
  GeluApproximation gelu_;
  int64_t ffn_local_;
  ColumnParallelLinear linear_fc1_;
  RowParallelLinear linear_fc2_;
};

}  // namespace mindspeed
