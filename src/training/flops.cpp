// num_floating_point_operations (flops.h).
#include "training/flops.h"

#include <algorithm>

namespace mindspeed {

double num_floating_point_operations(const ModelConfig& c, int64_t batch_size) {
  const double h = static_cast<double>(c.hidden_size);
  const double s = static_cast<double>(c.seq_length);
  // MindSpeed --noop-layers: only the real layers compute.
  const double L = static_cast<double>(c.num_layers - static_cast<int64_t>(c.noop_layers.size()));
  const double n = static_cast<double>(c.num_attention_heads);
  const double g = static_cast<double>(c.query_groups());
  const double q = static_cast<double>(c.kv_channels) * n / h;
  const double gamma = c.swiglu ? 1.5 : 1.0;
  const double F = static_cast<double>(c.ffn_hidden_size);
  const double V = static_cast<double>(c.padded_vocab_size);
  const double attention = (1.0 + g / n + s / (2.0 * h)) * q;
  double mlp = (F / h) * gamma;
  if (c.moe.enabled()) {
    // Megatron: dense layers F, MoE layers the top-k routed experts plus the shared experts
    // (the router's GEMM is not counted).
    int64_t moe_layers = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const bool noop = std::find(c.noop_layers.begin(), c.noop_layers.end(), l) != c.noop_layers.end();
      if (!noop && c.moe.is_moe_layer(l)) ++moe_layers;
    }
    const double moe_share = static_cast<double>(moe_layers) / L;
    const double routed = static_cast<double>(c.expert_ffn_hidden_size()) * static_cast<double>(c.moe.router_topk);
    const double shared = static_cast<double>(c.moe.shared_expert_intermediate_size);
    mlp = gamma / h * (F * (1.0 - moe_share) + (routed + shared) * moe_share);
  }
  const double logits = V / (2.0 * L * h);
  return 12.0 * static_cast<double>(batch_size) * s * L * h * h * (attention + mlp + logits);
}

}  // namespace mindspeed
