// Experts (experts.h).
#include "transformer/moe/experts.h"

#include <cmath>

#include "module/module_scope.h"
#include "tensor_parallel/layers.h"

namespace mindspeed {
namespace {
int64_t total(const std::vector<int64_t>& counts) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  return n;
}
}  // namespace

Experts::Experts(ParameterRegistry& registry, const std::string& prefix, const ModelConfig& config,
                 int64_t first_expert, int64_t num_local, int etp_size)
    : swiglu_(config.swiglu),
      grouped_(config.moe.grouped_gemm),
      gemm_grad_fusion_(config.moe.gemm_gradient_accumulation_fusion),
      gelu_(config.openai_gelu ? GeluApproximation::kTanh : GeluApproximation::kErf),
      hidden_(config.hidden_size),
      ffn_local_(config.expert_ffn_hidden_size() / etp_size),
      fc1_local_(ffn_local_ * (config.swiglu ? 2 : 1)) {
  const int64_t F = config.expert_ffn_hidden_size();
  // Megatron's output-layer init for fc2: std / sqrt(2 * num_layers).
  const float fc2_std = config.init_method_std / std::sqrt(2.0f * static_cast<float>(config.num_layers));
  for (int64_t e = first_expert; e < first_expert + num_local; ++e) {
    const std::string name = prefix + ".local_experts." + std::to_string(e);
    fc1_.push_back(registry.add({.name = name + ".linear_fc1.weight",
                                 .global_shape = Shape{F * (config.swiglu ? 2 : 1), config.hidden_size},
                                 .split = config.swiglu ? TensorParallelSplit::kGluRows : TensorParallelSplit::kRows,
                                 .init = InitMethod::kNormal,
                                 .init_std = config.init_method_std,
                                 .expert_parallel = true},
                                etp_size));
    fc2_.push_back(registry.add({.name = name + ".linear_fc2.weight",
                                 .global_shape = Shape{config.hidden_size, F},
                                 .split = TensorParallelSplit::kColumns,
                                 .init = InitMethod::kNormal,
                                 .init_std = fc2_std,
                                 .expert_parallel = true},
                                etp_size));
  }
}

void Experts::linear_forward(const ForwardContext& ctx, float* out, const float* x, const std::vector<Parameter*>& w,
                             const std::vector<int64_t>& counts, int64_t N, int64_t K) const {
  if (grouped_) {
    std::vector<const float*> weights;
    for (Parameter* p : w) weights.push_back(ctx.w(*p));
    ctx.k().grouped_gemm_forward(ctx.kc(), out, x, weights.data(), counts.data(), static_cast<int64_t>(w.size()), N,
                                 K);
    return;
  }
  int64_t row = 0;
  for (size_t e = 0; e < w.size(); ++e) {
    if (counts[e] > 0) ctx.k().linear_forward(ctx.kc(), out + row * N, x + row * K, ctx.w(*w[e]), nullptr, counts[e], K, N);
    row += counts[e];
  }
}

void Experts::linear_backward(const ForwardContext& ctx, float* dx, const float* dy, const float* x,
                              const std::vector<Parameter*>& w, const std::vector<int64_t>& counts, int64_t N,
                              int64_t K) const {
  const int64_t G = static_cast<int64_t>(w.size());
  if (grouped_) {
    std::vector<const float*> weights;
    std::vector<float*> grads;
    for (Parameter* p : w) weights.push_back(ctx.w(*p));
    if (dx != nullptr) ctx.k().grouped_gemm_backward_input(ctx.kc(), dx, dy, weights.data(), counts.data(), G, N, K);
    if (gemm_grad_fusion_) {
      for (Parameter* p : w) grads.push_back(p->g());
      ctx.k().grouped_gemm_backward_weight(ctx.kc(), grads.data(), dy, x, counts.data(), G, N, K);
      return;
    }
    // Unfused: the products into a temporary, then added to the fp32 gradients.
    Tensor tmp = device_zeros(*ctx.backend, *ctx.alloc, Shape{G, N * K}, DType::kFloat32, MemoryCategory::kWorkspace);
    for (int64_t e = 0; e < G; ++e) grads.push_back(tmp.f32() + e * N * K);
    ctx.k().grouped_gemm_backward_weight(ctx.kc(), grads.data(), dy, x, counts.data(), G, N, K);
    round_if_half(ctx, tmp);
    for (int64_t e = 0; e < G; ++e) ctx.k().add_inplace(ctx.kc(), w[e]->g(), grads[e], N * K);
    return;
  }
  int64_t row = 0;
  for (int64_t e = 0; e < G; ++e) {
    if (counts[e] > 0) {
      if (dx != nullptr) {
        ctx.k().linear_backward_input(ctx.kc(), dx + row * K, dy + row * N, ctx.w(*w[e]), counts[e], K, N,
                                      /*accumulate=*/false);
      }
      accumulate_weight_grad(ctx, w[e], nullptr, dy + row * N, x + row * K, Tensor(), counts[e], K, N);
    }
    row += counts[e];
  }
}

void Experts::forward(const ForwardContext& ctx, const float* x, const std::vector<int64_t>& counts, float* y,
                      Saved& saved) const {
  Allocator& a = *ctx.alloc;
  const int64_t R = total(counts);
  saved.fc1_out = Tensor(a, Shape{R, fc1_local_}, DType::kFloat32, MemoryCategory::kActivations);
  linear_forward(ctx, saved.fc1_out.f32(), x, fc1_, counts, fc1_local_, hidden_);
  round_if_half(ctx, saved.fc1_out);
  activation_forward(ctx, saved, R);
  linear_forward(ctx, y, saved.act_out.f32(), fc2_, counts, hidden_, ffn_local_);
  if (recompute_activation_ && ctx.training) saved.act_out.reset();
}

void Experts::activation_forward(const ForwardContext& ctx, Saved& saved, int64_t R) const {
  saved.act_out = Tensor(*ctx.alloc, Shape{R, ffn_local_}, DType::kFloat32, MemoryCategory::kActivations);
  if (swiglu_) {
    ctx.k().swiglu_forward(ctx.kc(), saved.act_out.f32(), saved.fc1_out.f32(), R, ffn_local_);
  } else {
    ctx.k().gelu_forward(ctx.kc(), saved.act_out.f32(), saved.fc1_out.f32(), R * ffn_local_, gelu_);
  }
  round_if_half(ctx, saved.act_out);
}

void Experts::backward(const ForwardContext& ctx, Saved& saved, const float* x, const float* dy,
                       const std::vector<int64_t>& counts, float* dx) const {
  Allocator& a = *ctx.alloc;
  const int64_t R = total(counts);
  if (saved.act_out.empty() && R > 0) activation_forward(ctx, saved, R);
  Tensor dact(a, Shape{R, ffn_local_}, DType::kFloat32, MemoryCategory::kWorkspace);
  linear_backward(ctx, dact.f32(), dy, saved.act_out.f32(), fc2_, counts, hidden_, ffn_local_);
  Tensor dfc1(a, Shape{R, fc1_local_}, DType::kFloat32, MemoryCategory::kWorkspace);
  if (swiglu_) {
    ctx.k().swiglu_backward(ctx.kc(), dfc1.f32(), dact.f32(), saved.fc1_out.f32(), R, ffn_local_);
  } else {
    ctx.k().gelu_backward(ctx.kc(), dfc1.f32(), dact.f32(), saved.fc1_out.f32(), R * ffn_local_, gelu_);
  }
  dact.reset();
  linear_backward(ctx, dx, dfc1.f32(), x, fc1_, counts, fc1_local_, hidden_);
}

}  // namespace mindspeed
