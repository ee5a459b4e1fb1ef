// Norm: LayerNorm or RMSNorm over the hidden dimension (Megatron's
// fusions/fused_layer_norm.py FusedLayerNorm / transformer/torch_norm.py; MindSpeed's fused
// RMSNorm). Weight (and LayerNorm bias) are replicated over tensor parallelism and marked
// sequence_parallel, so their gradients are all-reduced over tp when --sequence-parallel.
// With 2D tensor parallelism (linear_2d.h) a row's h columns are spread over the Y group as
// blocks of h/Y: the row statistics are per-block partial sums all-reduced over Y (MindSpeed's
// LayerNorm2D / RMSNorm2D; here the variance is taken about the reduced mean, a second small
// all-reduce, rather than as E[x^2] - E[x]^2), the weights are [h/Y] blocks replicated along X
// with their gradients summed over X.
#pragma once

#include <string>

#include "config/model_config.h"
#include "core/tensor.h"
#include "module/forward_context.h"
#include "module/parameter.h"
#include "tensor_parallel/linear_2d.h"

namespace mindspeed {

class Norm {
 public:
  struct Saved {
    Tensor out;   ///< [N, h]
    Tensor mean;  ///< [N] (LayerNorm only)
    Tensor rstd;  ///< [N]
  };

  Norm(ParameterRegistry& registry, const std::string& prefix, Normalization kind,
       const ModelConfig& config, bool sequence_parallel, int tp_size,
       const TensorParallelGrid& grid = {});
  /// saved.out = norm(x), x [N, h] ([N, h/Y] with a 2D grid).
  void forward(const ForwardContext& ctx, const float* x, int64_t N, Saved& saved) const;
  /// dx [N, h] += d norm(x) / dx applied to dout; weight gradients +=.
  void backward(const ForwardContext& ctx, const Saved& saved, const float* x, const float* dout,
                float* dx, int64_t N) const;

 private:
  void forward_2d(const ForwardContext& ctx, const float* x, int64_t N, Saved& saved) const;
  void backward_2d(const ForwardContext& ctx, const Saved& saved, const float* x, const float* dout,
                   float* dx, int64_t N) const;

  Normalization kind_;
  float eps_;
  int64_t hidden_;        ///< the whole row
  int64_t hidden_local_;  ///< this rank's columns (h/Y with a 2D grid)
  bool two_d_ = false;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
};

}  // namespace mindspeed
