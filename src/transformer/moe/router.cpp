// TopKRouter (router.h).
#include "transformer/moe/router.h"

#include "core/check.h"
#include "tensor_parallel/layers.h"

namespace mindspeed {
namespace {

// The sequence-partition group of the router's losses.
ProcessGroup& partition_group(const ForwardContext& ctx) { return ctx.ps->tp_cp(); }

}  // namespace

TopKRouter::TopKRouter(ParameterRegistry& registry, const std::string& prefix, const ModelConfig& config,
                       int64_t layer_index, bool sequence_parallel)
    : moe_(config.moe), layer_index_(layer_index), hidden_(config.hidden_size) {
  weight_ = registry.add({.name = prefix + ".weight",
                          .global_shape = Shape{config.moe.num_experts, config.hidden_size},
                          .split = TensorParallelSplit::kReplicated,
                          .init = InitMethod::kNormal,
                          .init_std = config.init_method_std,
                          .sequence_parallel = sequence_parallel},
                         1);
  if (config.moe.router_enable_expert_bias) {
    expert_bias_ = registry.add_buffer(prefix + ".expert_bias", config.moe.num_experts);
    local_tokens_per_expert_ =
        registry.add_buffer(prefix + ".local_tokens_per_expert", config.moe.num_experts, /*persistent=*/false);
  }
}

void update_expert_biases(const ParameterRegistry& registry, const ParallelState& ps, float update_rate) {
  std::vector<ModelBuffer*> biases, counts;
  for (const auto& b : registry.buffers()) {
    if (b->name.ends_with(".router.expert_bias")) biases.push_back(b.get());
    if (b->name.ends_with(".router.local_tokens_per_expert")) counts.push_back(b.get());
  }
  MS_CHECK(biases.size() == counts.size(), "expert-bias routers without their token counts");
  if (biases.empty()) return;
  // One all-reduce for every router of this rank (the same routers on every rank of the group).
  std::vector<float> all;
  for (ModelBuffer* c : counts) all.insert(all.end(), c->values.begin(), c->values.end());
  ps.tp_dp_cp().all_reduce(all.data(), static_cast<int64_t>(all.size()));
  size_t at = 0;
  for (size_t i = 0; i < biases.size(); ++i) {
    const size_t E = counts[i]->values.size();
    biases[i]->values = updated_expert_bias(std::span<const float>(all.data() + at, E), biases[i]->values, update_rate);
    std::fill(counts[i]->values.begin(), counts[i]->values.end(), 0.0f);
    at += E;
  }
}

void TopKRouter::forward(const ForwardContext& ctx, const MicroBatch& mb, const float* x, int64_t n,
                         Saved& saved) const {
  const int64_t E = moe_.num_experts, h = hidden_;
  const float* gate_input = x;
  if (moe_.input_jitter_eps > 0 && ctx.training) {
    // x * U(1 - eps, 1 + eps), keyed by (iteration, layer, sample position, channel) so every
    // layout draws the same noise for a token.
    // The factors are drawn on the host and applied by the kernels (one product per element).
    const RngStream rng = ctx.dropout_stream(layer_index_, static_cast<DropoutSite>(0x6a6974));  // "jit"
    std::vector<float> jitter(static_cast<size_t>(n * h));
    const int64_t offset = ctx.sequence_offset(mb.T);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t s_local = r / mb.B + offset, b = r % mb.B;
      const int64_t s = mb.seq_index.empty() ? s_local : mb.seq_index[s_local];
      const uint64_t token = static_cast<uint64_t>((mb.first_sample + b) * mb.sample_length() + s);
      for (int64_t c = 0; c < h; ++c) {
        const float u = rng.uniform(token * static_cast<uint64_t>(h) + static_cast<uint64_t>(c));
        jitter[r * h + c] = 1.0f - moe_.input_jitter_eps + 2.0f * moe_.input_jitter_eps * u;
      }
    }
    saved.jitter = device_copy_of(*ctx.backend, *ctx.alloc, jitter, MemoryCategory::kActivations);
    saved.jittered = Tensor(*ctx.alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kActivations);
    ctx.k().scale_rows(ctx.kc(), saved.jittered.f32(), x, saved.jitter.f32(), n * h,
                       1);  // x * jitter
    gate_input = saved.jittered.f32();
  }
  // The logits on the device, the routing decisions from their copy on the host.
  Tensor logits(*ctx.alloc, Shape{n, E}, DType::kFloat32, MemoryCategory::kWorkspace);
  ctx.k().linear_forward(ctx.kc(), logits.f32(), gate_input, ctx.w(*weight_), nullptr, n, h, E);
  saved.logits = host_copy_of(*ctx.backend, logits.f32(), n * E);
  const int partition = partition_group(ctx).size();
  saved.z = ctx.training && moe_.z_loss_coeff > 0;
  if (saved.z && ctx.moe_aux_losses != nullptr) {
    const float coeff = moe_.z_loss_coeff / static_cast<float>(ctx.ps->sizes.tensor * ctx.ps->sizes.context);
    const float z = z_loss(saved.logits, n, E, coeff);
    ctx.moe_aux_losses->z[layer_index_] += z / coeff;
    ctx.moe_aux_losses->any_z = true;
  }
  if (moe_.load_balancing == MoeLoadBalancing::kSinkhorn) {
    SinkhornRouting r = sinkhorn_routing_forward(saved.logits, n, E, moe_.router_topk, ctx.training);
    saved.probs = std::move(r.probs);
    saved.routing_map = std::move(r.routing_map);
    saved.sinkhorn = std::move(r.saved);
    return;
  }
  std::span<const float> bias;
  if (expert_bias_ != nullptr) bias = expert_bias_->values;
  StatusOr<RoutingOutput> routed = topk_routing_forward(saved.logits, n, E, router_options(moe_), bias);
  MS_CHECK(routed.ok(), "layer ", layer_index_, " router: ", routed.status().to_string());
  saved.probs = std::move(routed->probs);
  saved.routing_map = std::move(routed->routing_map);
  saved.routing = std::move(routed->saved);
  if (local_tokens_per_expert_ != nullptr && ctx.training && !ctx.recomputing) {
    // The final map's counts (after capacity), as Megatron's routing() accumulates them.
    std::vector<float>& counts = local_tokens_per_expert_->values;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t e = 0; e < E; ++e) counts[e] += saved.routing_map[t * E + e];
  }
  saved.aux = ctx.training && moe_.aux_loss_coeff > 0 &&
              (moe_.load_balancing == MoeLoadBalancing::kAuxLoss || moe_.load_balancing == MoeLoadBalancing::kSeqAuxLoss);
  if (!saved.aux) return;
  AuxScores scores = aux_loss_scores_forward(saved.logits, n, E, moe_.score_function, moe_.router_topk);
  saved.aux_scores = std::move(scores.saved);
  double aux = 0.0;
  if (moe_.load_balancing == MoeLoadBalancing::kAuxLoss) {
    // The counts of the whole sequence (summed over the partition group), the scores local.
    std::vector<float> counts(routed->tokens_per_expert.begin(), routed->tokens_per_expert.end());
    if (partition > 1) partition_group(ctx).all_reduce(counts.data(), E);
    saved.global_tokens_per_expert.assign(counts.begin(), counts.end());
    aux = switch_load_balancing_loss(scores.scores, n, E, saved.global_tokens_per_expert, partition,
                                     moe_.router_topk, moe_.aux_loss_coeff);
  } else {
    std::vector<float> full(static_cast<size_t>(n * E * partition));
    if (partition > 1) {
      partition_group(ctx).all_gather(full.data(), scores.scores.data(), n * E);
    } else {
      full = scores.scores;
    }
    aux = sequence_load_balancing_loss(full, saved.routing_map, n / mb.B, mb.B, partition, E, moe_.router_topk,
                                       moe_.aux_loss_coeff);
  }
  if (ctx.moe_aux_losses != nullptr) {
    ctx.moe_aux_losses->load_balancing[layer_index_] += aux / moe_.aux_loss_coeff;
    ctx.moe_aux_losses->any_load_balancing = true;
  }
}

void TopKRouter::backward(const ForwardContext& ctx, const MicroBatch& mb, const Saved& saved, const float* x,
                          const float* dprobs, float* dx, int64_t n) const {
  const int64_t E = moe_.num_experts, h = hidden_;
  const int partition = partition_group(ctx).size();
  std::vector<float> dlogits(static_cast<size_t>(n * E)), part(static_cast<size_t>(n * E));
  std::span<const float> dp(dprobs, static_cast<size_t>(n * E));
  if (moe_.load_balancing == MoeLoadBalancing::kSinkhorn) {
    sinkhorn_routing_backward(saved.sinkhorn, dp, dlogits);
  } else {
    topk_routing_backward(saved.routing, dp, dlogits);
  }
  const float scale = ctx.moe_aux_loss_scale;
  if (saved.aux) {
    std::vector<float> dscores(static_cast<size_t>(n * E));
    if (moe_.load_balancing == MoeLoadBalancing::kAuxLoss) {
      switch_load_balancing_loss_backward(n, E, saved.global_tokens_per_expert, partition, moe_.router_topk,
                                          moe_.aux_loss_coeff, scale, dscores);
    } else {
      std::vector<float> dfull(static_cast<size_t>(n * E * partition));
      sequence_load_balancing_loss_backward(saved.routing_map, n / mb.B, mb.B, partition, E, moe_.router_topk,
                                            moe_.aux_loss_coeff, scale, dfull);
      // The gather's backward: the gradient of every rank's loss for this rank's scores.
      if (partition > 1) {
        partition_group(ctx).reduce_scatter(dscores.data(), dfull.data(), n * E);
      } else {
        dscores = dfull;
      }
    }
    aux_loss_scores_backward(saved.aux_scores, dscores, part);
    for (size_t i = 0; i < dlogits.size(); ++i) dlogits[i] += part[i];
  }
  if (saved.z) {
    const float coeff = moe_.z_loss_coeff / static_cast<float>(ctx.ps->sizes.tensor * ctx.ps->sizes.context);
    z_loss_backward(saved.logits, n, E, coeff, scale, part);
    for (size_t i = 0; i < dlogits.size(); ++i) dlogits[i] += part[i];
  }
  const float* gate_input = saved.jittered.empty() ? x : saved.jittered.f32();
  const Tensor dlogits_device =
      device_copy_of(*ctx.backend, *ctx.alloc, dlogits, MemoryCategory::kWorkspace);
  accumulate_weight_grad(ctx, weight_, nullptr, dlogits_device.f32(), gate_input, Tensor(), n, h,
                         E);
  Tensor dgate(*ctx.alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kWorkspace);
  ctx.k().linear_backward_input(ctx.kc(), dgate.f32(), dlogits_device.f32(), ctx.w(*weight_), n, h,
                                E,
                                /*accumulate=*/false);
  if (!saved.jitter.empty()) {
    Tensor djittered(*ctx.alloc, Shape{n, h}, DType::kFloat32, MemoryCategory::kWorkspace);
    ctx.k().scale_rows(ctx.kc(), djittered.f32(), dgate.f32(), saved.jitter.f32(), n * h,
                       1);  // dgate * jitter
    dgate = std::move(djittered);
  }
  ctx.k().add_inplace(ctx.kc(), dx, dgate.f32(), n * h);
}

}  // namespace mindspeed
