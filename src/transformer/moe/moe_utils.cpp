// The MoE router's math, forward and backward (moe_utils.h): a port of Megatron core_v0.12.1's
// moe_utils.py routing and load-balancing functions and TopKRouter's score helpers.
#include "transformer/moe/moe_utils.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/check.h"

namespace mindspeed {
namespace {

// The order of every top-k: larger value first, NaN largest (torch's rule), equal values by
// the lower index (torch.topk on CUDA).
bool ranks_before(float va, int64_t ia, float vb, int64_t ib) {
  const bool na = std::isnan(va), nb = std::isnan(vb);
  if (na != nb) return na;
  if (!na && va != vb) return va > vb;
  return ia < ib;
}

// The k best of v[0], v[stride], ..., v[(n - 1) * stride], best first, into out[0, k).
void topk_indices(const float* v, int64_t n, int64_t stride, int64_t k, int32_t* out) {
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return ranks_before(v[a * stride], a, v[b * stride], b);
  });
  std::copy(order.begin(), order.begin() + k, out);
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Softmax of n values, max-subtracted, into out.
void softmax(const float* x, int64_t n, float* out) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = std::exp(x[i] - m);
    sum += out[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) out[i] *= inv;
}

// d(softmax)/dx applied to dy: s * (dy - sum(dy * s)), into dx.
void softmax_backward(const float* s, const float* dy, int64_t n, float* dx) {
  double dot = 0.0;
  for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(dy[i]) * s[i];
  for (int64_t i = 0; i < n; ++i) dx[i] = static_cast<float>(s[i] * (dy[i] - dot));
}

// The selection of one token: plain top-k, or group-limited (group_limited_topk).
void select_experts(const float* row, int64_t E, const RouterOptions& o, int32_t* out) {
  if (o.group_topk <= 0) {
    topk_indices(row, E, 1, o.topk, out);
    return;
  }
  const int64_t G = o.num_groups, group_size = E / G, per_group = o.topk / o.group_topk;
  std::vector<float> group_scores(G);
  std::vector<int32_t> best(std::max<int64_t>(per_group, 1));
  for (int64_t g = 0; g < G; ++g) {
    const float* group = row + g * group_size;
    topk_indices(group, group_size, 1, per_group, best.data());
    float sum = 0.0f;  // the top values, summed best first as torch sums the topk output
    for (int64_t j = 0; j < per_group; ++j) sum += group[best[j]];
    group_scores[g] = sum;
  }
  std::vector<int32_t> groups(o.group_topk);
  topk_indices(group_scores.data(), G, 1, o.group_topk, groups.data());
  std::vector<float> masked(E, -std::numeric_limits<float>::infinity());
  for (int32_t g : groups)
    std::copy(row + g * group_size, row + (g + 1) * group_size, masked.begin() + g * group_size);
  topk_indices(masked.data(), E, 1, o.topk, out);
}

Status check_options(const RouterOptions& o, int64_t T, int64_t E, size_t bias_size) {
  if (T < 0 || E <= 0) return invalid_argument("MoE routing: ", T, " tokens, ", E, " experts");
  if (o.topk < 1 || o.topk > E)
    return invalid_argument("MoE routing: topk ", o.topk, " must be in [1, ", E, "]");
  if (o.group_topk > 0) {
    if (o.num_groups <= 0 || E % o.num_groups != 0 || o.group_topk > o.num_groups)
      return invalid_argument("MoE routing: ", E, " experts in ", o.num_groups, " groups, ",
                              o.group_topk,
                              " chosen: the groups must divide the "
                              "experts and be at least the chosen ones");
    const int64_t group_size = E / o.num_groups;
    if (o.topk / o.group_topk > group_size || o.topk > o.group_topk * group_size)
      return invalid_argument("MoE routing: topk ", o.topk, " from ", o.group_topk, " groups of ",
                              group_size, " experts");
  }
  if (bias_size != 0) {
    if (o.score_function != MoeScoreFunction::kSigmoid)
      return invalid_argument("MoE routing: the expert bias needs the sigmoid score function");
    if (static_cast<int64_t>(bias_size) != E)
      return invalid_argument("MoE routing: expert bias of ", bias_size, " values for ", E,
                              " experts");
  }
  return ok_status();
}

}  // namespace

RouterOptions router_options(const MoeConfig& c) {
  RouterOptions o;
  o.topk = c.router_topk;
  o.score_function = c.score_function;
  o.pre_softmax = c.router_pre_softmax;
  o.num_groups = c.router_num_groups;
  o.group_topk = c.router_group_topk;
  o.scaling_factor = c.router_topk_scaling_factor;
  // The float as the decimal the user typed, read as a double (Python's float).
  char buf[64];
  const auto written = std::to_chars(buf, buf + sizeof(buf), c.expert_capacity_factor);
  double factor = 0.0;
  std::from_chars(buf, written.ptr, factor);
  o.capacity_factor = factor;
  o.pad_to_capacity = c.pad_expert_input_to_capacity;
  o.drop_policy = c.drop_policy;
  return o;
}

int64_t expert_capacity(int64_t num_tokens, int64_t num_experts, double capacity_factor,
                        int64_t min_capacity) {
  MS_CHECK(num_experts > 0, "expert capacity of ", num_experts, " experts");
  const double c = std::ceil(static_cast<double>(num_tokens) / static_cast<double>(num_experts) *
                             capacity_factor);
  return std::max(static_cast<int64_t>(c), min_capacity);
}

std::vector<int64_t> count_tokens_per_expert(std::span<const uint8_t> map, int64_t T, int64_t E) {
  MS_CHECK(static_cast<int64_t>(map.size()) == T * E, "map of ", map.size(), " for ", T, "x", E);
  std::vector<int64_t> counts(E, 0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e) counts[e] += map[t * E + e] != 0;
  return counts;
}

StatusOr<RoutingOutput> topk_routing_forward(std::span<const float> logits, int64_t T, int64_t E,
                                             const RouterOptions& o,
                                             std::span<const float> expert_bias) {
  MS_RETURN_IF_ERROR(check_options(o, T, E, expert_bias.size()));
  if (static_cast<int64_t>(logits.size()) != T * E)
    return invalid_argument("MoE routing: ", logits.size(), " logits for ", T, "x", E);
  const int64_t k = o.topk;
  int64_t capacity = 0;
  const bool with_capacity = o.capacity_factor > 0.0;
  if (with_capacity) {
    capacity = expert_capacity(T * k, E, o.capacity_factor);
    if (capacity > T)
      return invalid_argument("MoE routing: expert capacity ", capacity, " (factor ",
                              o.capacity_factor, ") exceeds the ", T, " tokens");
  }

  RoutingOutput out;
  RoutingSaved& sv = out.saved;
  sv.options = o;
  sv.num_tokens = T;
  sv.num_experts = E;
  sv.top_indices.resize(T * k);
  sv.topk_probs.resize(T * k);
  const bool sig = o.score_function == MoeScoreFunction::kSigmoid;
  if (sig || o.pre_softmax) sv.scores.resize(T * E);

  std::vector<float> select(E);
  std::vector<float> selected(k), p(k);
  std::vector<float> gates(T * E, 0.0f);
  std::vector<uint8_t> topk_map(T * E, 0);
  for (int64_t t = 0; t < T; ++t) {
    const float* x = logits.data() + t * E;
    float* s = sig || o.pre_softmax ? sv.scores.data() + t * E : nullptr;
    if (sig) {
      for (int64_t e = 0; e < E; ++e) s[e] = sigmoid(x[e]);
      for (int64_t e = 0; e < E; ++e)
        select[e] = s[e] + (expert_bias.empty() ? 0.0f : expert_bias[e]);
    } else if (o.pre_softmax) {
      softmax(x, E, s);
      std::copy(s, s + E, select.begin());
    } else {
      std::copy(x, x + E, select.begin());
    }
    int32_t* idx = sv.top_indices.data() + t * k;
    select_experts(select.data(), E, o, idx);
    float* pt = sv.topk_probs.data() + t * k;
    if (sig) {
      float sum = 0.0f;
      for (int64_t j = 0; j < k; ++j) sum += s[idx[j]];
      const float denom = sum + 1e-20f;
      for (int64_t j = 0; j < k; ++j) pt[j] = k > 1 ? s[idx[j]] / denom : s[idx[j]];
    } else if (o.pre_softmax) {
      for (int64_t j = 0; j < k; ++j) pt[j] = s[idx[j]];
    } else {
      for (int64_t j = 0; j < k; ++j) selected[j] = x[idx[j]];
      softmax(selected.data(), k, pt);
    }
    for (int64_t j = 0; j < k; ++j) {
      gates[t * E + idx[j]] = o.scaling_factor != 0.0f ? pt[j] * o.scaling_factor : pt[j];
      topk_map[t * E + idx[j]] = 1;
    }
  }
  out.tokens_per_expert = count_tokens_per_expert(topk_map, T, E);

  if (!with_capacity) {
    out.probs = std::move(gates);
    out.routing_map = std::move(topk_map);
    return out;
  }
  // Each expert keeps `capacity` tokens: those of highest probability, or (position) the ones
  // it selected first; either way ties go to the earlier token.
  std::vector<uint8_t> capacity_mask(T * E, 0);
  std::vector<float> column_key(T * E);
  for (int64_t i = 0; i < T * E; ++i)
    column_key[i] =
        o.drop_policy == MoeDropPolicy::kProbs ? gates[i] : static_cast<float>(topk_map[i]);
  std::vector<int32_t> kept(capacity);
  for (int64_t e = 0; e < E; ++e) {
    topk_indices(column_key.data() + e, T, E, capacity, kept.data());
    for (int32_t t : kept) capacity_mask[t * E + e] = 1;
  }
  std::vector<uint8_t> final_map(T * E);
  for (int64_t i = 0; i < T * E; ++i)
    final_map[i] = o.pad_to_capacity ? capacity_mask[i] : (topk_map[i] & capacity_mask[i]);
  out.probs.resize(T * E);
  for (int64_t i = 0; i < T * E; ++i) out.probs[i] = final_map[i] ? gates[i] : 0.0f;
  sv.capacity_map = final_map;
  out.routing_map = std::move(final_map);
  return out;
}

void topk_routing_backward(const RoutingSaved& sv, std::span<const float> dprobs,
                           std::span<float> dlogits) {
  const int64_t T = sv.num_tokens, E = sv.num_experts, k = sv.options.topk;
  const RouterOptions& o = sv.options;
  MS_CHECK(
      static_cast<int64_t>(dprobs.size()) == T * E && static_cast<int64_t>(dlogits.size()) == T * E,
      "routing backward: ", dprobs.size(), " and ", dlogits.size(), " for ", T, "x", E);
  std::fill(dlogits.begin(), dlogits.end(), 0.0f);
  const bool sig = o.score_function == MoeScoreFunction::kSigmoid;
  std::vector<float> dp(k), dz(k), ds(E), drow(E);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* idx = sv.top_indices.data() + t * k;
    const float* pt = sv.topk_probs.data() + t * k;
    float* dl = dlogits.data() + t * E;
    // Through the capacity mask, the scatter and the scaling factor.
    for (int64_t j = 0; j < k; ++j) {
      const int64_t i = t * E + idx[j];
      float g = dprobs[i];
      if (!sv.capacity_map.empty() && !sv.capacity_map[i]) g = 0.0f;
      dp[j] = o.scaling_factor != 0.0f ? g * o.scaling_factor : g;
    }
    if (sig) {
      const float* s = sv.scores.data() + t * E;
      if (k > 1) {  // p = s_sel / (sum + 1e-20): ds_j = (dp_j - sum_i dp_i p_i) / denom
        float sum = 0.0f;
        for (int64_t j = 0; j < k; ++j) sum += s[idx[j]];
        const double denom = static_cast<double>(sum + 1e-20f);
        double dot = 0.0;
        for (int64_t j = 0; j < k; ++j) dot += static_cast<double>(dp[j]) * pt[j];
        for (int64_t j = 0; j < k; ++j) dz[j] = static_cast<float>((dp[j] - dot) / denom);
      } else {
        dz[0] = dp[0];
      }
      for (int64_t j = 0; j < k; ++j) dl[idx[j]] = dz[j] * s[idx[j]] * (1.0f - s[idx[j]]);
    } else if (o.pre_softmax) {
      std::fill(ds.begin(), ds.end(), 0.0f);
      for (int64_t j = 0; j < k; ++j) ds[idx[j]] = dp[j];
      softmax_backward(sv.scores.data() + t * E, ds.data(), E, dl);
    } else {
      softmax_backward(pt, dp.data(), k, dz.data());
      for (int64_t j = 0; j < k; ++j) dl[idx[j]] = dz[j];
    }
  }
}

AuxScores aux_loss_scores_forward(std::span<const float> logits, int64_t T, int64_t E,
                                  MoeScoreFunction score_function, int64_t topk) {
  MS_CHECK(static_cast<int64_t>(logits.size()) == T * E, "aux scores: ", logits.size(),
           " logits for ", T, "x", E);
  AuxScores out;
  AuxScoresSaved& sv = out.saved;
  sv.score_function = score_function;
  sv.topk = topk;
  sv.num_tokens = T;
  sv.num_experts = E;
  sv.activation.resize(T * E);
  out.scores.resize(T * E);
  if (score_function == MoeScoreFunction::kSoftmax) {
    for (int64_t t = 0; t < T; ++t) softmax(logits.data() + t * E, E, sv.activation.data() + t * E);
    out.scores = sv.activation;
    return out;
  }
  for (int64_t i = 0; i < T * E; ++i) sv.activation[i] = sigmoid(logits[i]);
  if (topk == 1) {
    out.scores = sv.activation;
    return out;
  }
  sv.denominators.resize(T);
  for (int64_t t = 0; t < T; ++t) {
    float sum = 0.0f;
    for (int64_t e = 0; e < E; ++e) sum += sv.activation[t * E + e];
    sv.denominators[t] = sum + 1e-20f;
    for (int64_t e = 0; e < E; ++e)
      out.scores[t * E + e] = sv.activation[t * E + e] / sv.denominators[t];
  }
  return out;
}

void aux_loss_scores_backward(const AuxScoresSaved& sv, std::span<const float> dscores,
                              std::span<float> dlogits) {
  const int64_t T = sv.num_tokens, E = sv.num_experts;
  MS_CHECK(static_cast<int64_t>(dscores.size()) == T * E &&
               static_cast<int64_t>(dlogits.size()) == T * E,
           "aux scores backward: ", dscores.size(), " and ", dlogits.size(), " for ", T, "x", E);
  for (int64_t t = 0; t < T; ++t) {
    const float* a = sv.activation.data() + t * E;
    const float* dq = dscores.data() + t * E;
    float* dl = dlogits.data() + t * E;
    if (sv.score_function == MoeScoreFunction::kSoftmax) {
      softmax_backward(a, dq, E, dl);
    } else if (sv.topk == 1) {
      for (int64_t e = 0; e < E; ++e) dl[e] = dq[e] * a[e] * (1.0f - a[e]);
    } else {  // q = a / denom: da_e = (dq_e - sum_j dq_j q_j) / denom
      const double denom = sv.denominators[t];
      double dot = 0.0;
      for (int64_t e = 0; e < E; ++e) dot += static_cast<double>(dq[e]) * (a[e] / denom);
      for (int64_t e = 0; e < E; ++e)
        dl[e] = static_cast<float>((dq[e] - dot) / denom * a[e] * (1.0f - a[e]));
    }
  }
}

namespace {

double switch_factor(int64_t T, int64_t E, int64_t num_sub_sequence, int64_t topk, float coeff) {
  const double n = static_cast<double>(T * num_sub_sequence);
  return static_cast<double>(E) * coeff / (n * n * static_cast<double>(topk));
}

}  // namespace

float switch_load_balancing_loss(std::span<const float> scores, int64_t T, int64_t E,
                                 std::span<const int64_t> tokens_per_expert,
                                 int64_t num_sub_sequence, int64_t topk, float coeff) {
  MS_CHECK(static_cast<int64_t>(scores.size()) == T * E &&
               static_cast<int64_t>(tokens_per_expert.size()) == E,
           "switch loss: ", scores.size(), " scores and ", tokens_per_expert.size(), " counts for ",
           T, "x", E);
  double total = 0.0;
  for (int64_t e = 0; e < E; ++e) {
    double column = 0.0;
    for (int64_t t = 0; t < T; ++t) column += scores[t * E + e];
    total += column * static_cast<double>(tokens_per_expert[e]);
  }
  return static_cast<float>(total * switch_factor(T, E, num_sub_sequence, topk, coeff));
}

void switch_load_balancing_loss_backward(int64_t T, int64_t E,
                                         std::span<const int64_t> tokens_per_expert,
                                         int64_t num_sub_sequence, int64_t topk, float coeff,
                                         float dloss, std::span<float> dscores) {
  MS_CHECK(static_cast<int64_t>(dscores.size()) == T * E &&
               static_cast<int64_t>(tokens_per_expert.size()) == E,
           "switch loss backward: ", dscores.size(), " and ", tokens_per_expert.size(), " for ", T,
           "x", E);
  const double f = switch_factor(T, E, num_sub_sequence, topk, coeff) * dloss;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e)
      dscores[t * E + e] = static_cast<float>(f * static_cast<double>(tokens_per_expert[e]));
}

namespace {

// cost[b, e] = (local count of (b, e)) / (S * topk / E), S the whole sequence length.
std::vector<double> sequence_cost(std::span<const uint8_t> map_local, int64_t s_local, int64_t B,
                                  int64_t num_sub_sequence, int64_t E, int64_t topk) {
  MS_CHECK(static_cast<int64_t>(map_local.size()) == s_local * B * E, "seq aux loss: map of ",
           map_local.size(), " for ", s_local, "x", B, "x", E);
  const double per =
      static_cast<double>(s_local * num_sub_sequence * topk) / static_cast<double>(E);
  std::vector<double> cost(B * E, 0.0);
  for (int64_t s = 0; s < s_local; ++s)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t e = 0; e < E; ++e) cost[b * E + e] += map_local[(s * B + b) * E + e] != 0;
  for (double& c : cost) c /= per;
  return cost;
}

}  // namespace

float sequence_load_balancing_loss(std::span<const float> scores_full,
                                   std::span<const uint8_t> routing_map_local, int64_t s_local,
                                   int64_t B, int64_t num_sub_sequence, int64_t E, int64_t topk,
                                   float coeff) {
  const int64_t S = s_local * num_sub_sequence;
  MS_CHECK(static_cast<int64_t>(scores_full.size()) == S * B * E,
           "seq aux loss: ", scores_full.size(), " scores for ", S, "x", B, "x", E);
  const std::vector<double> cost =
      sequence_cost(routing_map_local, s_local, B, num_sub_sequence, E, topk);
  double total = 0.0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t e = 0; e < E; ++e) {
      double mean = 0.0;
      for (int64_t s = 0; s < S; ++s) mean += scores_full[(s * B + b) * E + e];
      total += cost[b * E + e] * (mean / static_cast<double>(S));
    }
  return static_cast<float>(total / static_cast<double>(B) * coeff);
}

void sequence_load_balancing_loss_backward(std::span<const uint8_t> routing_map_local,
                                           int64_t s_local, int64_t B, int64_t num_sub_sequence,
                                           int64_t E, int64_t topk, float coeff, float dloss,
                                           std::span<float> dscores_full) {
  const int64_t S = s_local * num_sub_sequence;
  MS_CHECK(static_cast<int64_t>(dscores_full.size()) == S * B * E,
           "seq aux loss backward: ", dscores_full.size(), " for ", S, "x", B, "x", E);
  const std::vector<double> cost =
      sequence_cost(routing_map_local, s_local, B, num_sub_sequence, E, topk);
  const double f = static_cast<double>(dloss) * coeff / (static_cast<double>(B) * S);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t e = 0; e < E; ++e)
        dscores_full[(s * B + b) * E + e] = static_cast<float>(f * cost[b * E + e]);
}

namespace {

double logsumexp(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - m);
  return m + std::log(sum);
}

}  // namespace

float z_loss(std::span<const float> logits, int64_t T, int64_t E, float coeff) {
  MS_CHECK(static_cast<int64_t>(logits.size()) == T * E, "z-loss: ", logits.size(), " logits for ",
           T, "x", E);
  double total = 0.0;
  for (int64_t t = 0; t < T; ++t) {
    const double lse = logsumexp(logits.data() + t * E, E);
    total += lse * lse;
  }
  return static_cast<float>(total / static_cast<double>(T) * coeff);
}

void z_loss_backward(std::span<const float> logits, int64_t T, int64_t E, float coeff, float dloss,
                     std::span<float> dlogits) {
  MS_CHECK(
      static_cast<int64_t>(logits.size()) == T * E && static_cast<int64_t>(dlogits.size()) == T * E,
      "z-loss backward: ", logits.size(), " and ", dlogits.size(), " for ", T, "x", E);
  const double f = 2.0 * static_cast<double>(dloss) * coeff / static_cast<double>(T);
  for (int64_t t = 0; t < T; ++t) {
    const float* x = logits.data() + t * E;
    const double lse = logsumexp(x, E);
    for (int64_t e = 0; e < E; ++e)
      dlogits[t * E + e] = static_cast<float>(f * lse * std::exp(static_cast<double>(x[e]) - lse));
  }
}

std::vector<float> sinkhorn(std::span<const float> cost_in, int64_t T, int64_t E, float tol) {
  MS_CHECK(static_cast<int64_t>(cost_in.size()) == T * E && T > 0 && E > 0,
           "sinkhorn: ", cost_in.size(), " values for ", T, "x", E);
  std::vector<float> cost(T * E);
  for (int64_t i = 0; i < T * E; ++i) cost[i] = std::exp(cost_in[i]);
  std::vector<float> d0(T, 1.0f), d1(E, 1.0f), d1_old = d1;
  const float eps = 1e-8f;
  const float inv_t = static_cast<float>(1.0 / static_cast<double>(T));
  const float inv_e = static_cast<float>(1.0 / static_cast<double>(E));
  float error = 1e9f;
  std::vector<double> column(E);
  while (error > tol) {  // a NaN error ends it, as in Python
    for (int64_t t = 0; t < T; ++t) {
      double row = 0.0;
      for (int64_t e = 0; e < E; ++e) row += static_cast<double>(d1[e]) * cost[t * E + e];
      d0[t] = (1.0f / (static_cast<float>(row) + eps)) * inv_t;
    }
    std::fill(column.begin(), column.end(), 0.0);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < E; ++e) column[e] += static_cast<double>(d0[t]) * cost[t * E + e];
    double change = 0.0;
    for (int64_t e = 0; e < E; ++e) {
      d1[e] = (1.0f / (static_cast<float>(column[e]) + eps)) * inv_e;
      change += std::fabs(static_cast<double>(d1_old[e]) - d1[e]);
    }
    error = static_cast<float>(change / static_cast<double>(E));
    d1_old = d1;
  }
  std::vector<float> out(T * E);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < E; ++e) out[t * E + e] = d1[e] * cost[t * E + e] * d0[t];
  return out;
}

SinkhornRouting sinkhorn_routing_forward(std::span<const float> logits, int64_t T, int64_t E,
                                         int64_t topk, bool training) {
  MS_CHECK(static_cast<int64_t>(logits.size()) == T * E && topk >= 1 && topk <= E,
           "sinkhorn routing: ", logits.size(), " logits for ", T, "x", E, ", topk ", topk);
  SinkhornRouting out;
  SinkhornSaved& sv = out.saved;
  sv.topk = topk;
  sv.num_tokens = T;
  sv.num_experts = E;
  sv.activation.resize(T * E);
  for (int64_t t = 0; t < T; ++t) {
    const float* x = logits.data() + t * E;
    float* a = sv.activation.data() + t * E;
    if (topk == 1) {
      for (int64_t e = 0; e < E; ++e) a[e] = sigmoid(x[e]);
    } else {
      softmax(x, E, a);
    }
  }
  const std::vector<float> chooser = training && T > 0 ? sinkhorn(logits, T, E) : sv.activation;
  sv.routing_map.assign(T * E, 0);
  std::vector<int32_t> idx(topk);
  for (int64_t t = 0; t < T; ++t) {
    topk_indices(chooser.data() + t * E, E, 1, topk, idx.data());
    for (int32_t e : idx) sv.routing_map[t * E + e] = 1;
  }
  out.probs.resize(T * E);
  for (int64_t i = 0; i < T * E; ++i) out.probs[i] = sv.routing_map[i] ? sv.activation[i] : 0.0f;
  out.routing_map = sv.routing_map;
  return out;
}

void sinkhorn_routing_backward(const SinkhornSaved& sv, std::span<const float> dprobs,
                               std::span<float> dlogits) {
  const int64_t T = sv.num_tokens, E = sv.num_experts;
  MS_CHECK(
      static_cast<int64_t>(dprobs.size()) == T * E && static_cast<int64_t>(dlogits.size()) == T * E,
      "sinkhorn backward: ", dprobs.size(), " and ", dlogits.size(), " for ", T, "x", E);
  std::vector<float> da(E);
  for (int64_t t = 0; t < T; ++t) {
    const float* a = sv.activation.data() + t * E;
    for (int64_t e = 0; e < E; ++e) da[e] = sv.routing_map[t * E + e] ? dprobs[t * E + e] : 0.0f;
    float* dl = dlogits.data() + t * E;
    if (sv.topk == 1) {
      for (int64_t e = 0; e < E; ++e) dl[e] = da[e] * a[e] * (1.0f - a[e]);
    } else {
      softmax_backward(a, da.data(), E, dl);
    }
  }
}

std::vector<float> updated_expert_bias(std::span<const float> tokens_per_expert,
                                       std::span<const float> expert_bias, float update_rate) {
  const size_t E = tokens_per_expert.size();
  MS_CHECK(E > 0 && expert_bias.size() == E, "expert bias update: ", E, " counts, ",
           expert_bias.size(), " biases");
  float sum = 0.0f;
  for (float c : tokens_per_expert) sum += c;
  const float mean = sum / static_cast<float>(E);
  std::vector<float> out(E);
  for (size_t e = 0; e < E; ++e) {
    const float offset = mean - tokens_per_expert[e];
    const float sign = offset > 0.0f ? 1.0f : (offset < 0.0f ? -1.0f : 0.0f);
    out[e] = expert_bias[e] + sign * update_rate;
  }
  return out;
}

}  // namespace mindspeed
