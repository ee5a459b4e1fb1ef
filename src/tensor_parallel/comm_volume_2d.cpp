// 2D tensor parallelism's communication volumes (comm_volume_2d.h).
#include "tensor_parallel/comm_volume_2d.h"

namespace mindspeed {

Tp2dVolumes tp_2d_micro_batch_volumes(const ModelConfig& m, int64_t tokens, int64_t layers, int X, int Y,
                                      bool whole_model) {
  const double N = static_cast<double>(tokens), L = static_cast<double>(layers), h = static_cast<double>(m.hidden_size);
  const double Q = static_cast<double>(m.qkv_size());                          // linear_qkv's outputs
  const double E = static_cast<double>(m.num_attention_heads * m.kv_channels);  // linear_proj's inputs
  const double F = static_cast<double>(m.ffn_hidden_size), G = F * (m.swiglu ? 2 : 1);  // fc2's inputs, fc1's outputs
  const double hx = 4.0 * N * h / Y;  // one [N, h/Y] activation, gathered or reduced over X
  Tp2dVolumes v;
  // Per layer over X: forward gathers the inputs of linear_qkv and fc1 and reduce-scatters the
  // outputs of linear_proj and fc2; backward gathers dy of fc2 and proj, gathers the inputs of fc1
  // and qkv again, and reduce-scatters the input gradients of fc1 and qkv.
  v.x_all_gather = L * 6 * hx;
  v.x_reduce_scatter = L * 4 * hx;
  // Over Y, per layer: forward gathers the inputs of proj and fc2 and reduce-scatters the outputs of
  // qkv and fc1; backward gathers dy of fc1 and qkv and the inputs of fc2 and proj again, and
  // reduce-scatters the input gradients of fc2 and proj.
  v.y_all_gather = L * 4.0 * N * (2 * E + 2 * F + G + Q) / X;
  v.y_reduce_scatter = L * 4.0 * N * (Q + G + F + E) / X;
  // Each norm: LayerNorm all-reduces the row sums and the squares about the mean (N/X each), RMSNorm
  // the squares; backward both per-row gradient sums (2N/X).
  const double norm_bytes = 4.0 * N / X * (m.normalization == Normalization::kLayerNorm ? 4 : 3);
  v.y_all_reduce = (2 * L + (whole_model ? 1 : 0)) * norm_bytes;
  if (whole_model) {
    // The output layer's input gathered (columns over Y, then rows over X), and the embedding's
    // gradient the same way in backward.
    v.y_all_gather += 2 * 4.0 * N * h / X;
    v.x_all_gather += 2 * 4.0 * N * h;
  }
  return v;
}

}  // namespace mindspeed
