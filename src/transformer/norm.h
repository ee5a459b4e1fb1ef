// Norm: LayerNorm or RMSNorm over the hidden dimension (Megatron's
// fusions/fused_layer_norm.py FusedLayerNorm / transformer/torch_norm.py; MindSpeed's fused
// RMSNorm). Weight (and LayerNorm bias) are replicated over tensor parallelism and marked
// sequence_parallel, so their gradients are all-reduced over tp when --sequence-parallel.
#pragma once

#include <string>

#include "config/model_config.h"
#include "core/tensor.h"
#include "module/forward_context.h"
#include "module/parameter.h"

namespace mindspeed {

class Norm {
 public:
  struct Saved {
    Tensor out;   ///< [N, h]
    Tensor mean;  ///< [N] (LayerNorm only)
    Tensor rstd;  ///< [N]
  };

  Norm(ParameterRegistry& registry, const std::string& prefix, Normalization kind, const ModelConfig& config,
       bool sequence_parallel, int tp_size);
  /// saved.out = norm(x), x [N, h].
  void forward(const ForwardContext& ctx, const float* x, int64_t N, Saved& saved) const;
  /// dx [N, h] += d norm(x) / dx applied to dout; weight gradients +=.
  void backward(const ForwardContext& ctx, const Saved& saved, const float* x, const float* dout,
                float* dx, int64_t N) const;

 private:
  Normalization kind_;
  float eps_;
  int64_t hidden_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
};

}  // namespace mindspeed
