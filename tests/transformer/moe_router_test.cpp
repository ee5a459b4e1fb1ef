// Tests of the MoE router math (transformer/moe/moe_utils.h, a port of Megatron core_v0.12.1's
// moe_utils.py and TopKRouter): every case of router_fixtures/router_cases.json (written by
// gen_router_fixtures.py from Megatron's own functions and torch autograd) forward and
// backward, finite-difference checks of each backward, the tie rule, and option refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/grad_check.h"
#include "transformer/moe/moe_utils.h"

namespace mindspeed {
namespace {

using nlohmann::json;
using testing::check_gradient;

const json& fixture_file() {
  static const json doc = [] {
    std::ifstream in(std::string(MS_SOURCE_DIR) +
                     "/tests/transformer/router_fixtures/router_cases.json");
    return json::parse(in, nullptr, /*allow_exceptions=*/false);
  }();
  return doc;
}

const json* find_case(const std::string& name) {
  for (const json& c : fixture_file()["cases"])
    if (c["name"] == name) return &c;
  return nullptr;
}

// The names of the cases holding `section` (all cases for an empty one).
std::vector<std::string> case_names(const std::string& section = "") {
  std::vector<std::string> names;
  const json& doc = fixture_file();
  if (!doc.is_object() || !doc.contains("cases")) return names;
  for (const json& c : doc["cases"])
    if (section.empty() || c.contains(section)) names.push_back(c["name"]);
  return names;
}

std::vector<float> floats(const json& j) { return j.get<std::vector<float>>(); }
std::vector<int64_t> ints(const json& j) { return j.get<std::vector<int64_t>>(); }
std::vector<uint8_t> bytes(const json& j) {
  std::vector<uint8_t> v;
  for (const json& x : j) v.push_back(static_cast<uint8_t>(x.get<int>()));
  return v;
}

int64_t int_or_zero(const json& j) { return j.is_null() ? 0 : j.get<int64_t>(); }
double double_or_zero(const json& j) { return j.is_null() ? 0.0 : j.get<double>(); }

RouterOptions options_of(const json& cfg) {
  RouterOptions o;
  o.topk = cfg["topk"];
  o.score_function =
      cfg["score_function"] == "sigmoid" ? MoeScoreFunction::kSigmoid : MoeScoreFunction::kSoftmax;
  o.pre_softmax = cfg["pre_softmax"];
  o.num_groups = int_or_zero(cfg["num_groups"]);
  o.group_topk = int_or_zero(cfg["group_topk"]);
  o.scaling_factor = static_cast<float>(double_or_zero(cfg["scaling_factor"]));
  o.capacity_factor = double_or_zero(cfg["capacity_factor"]);
  o.pad_to_capacity = cfg["pad_to_capacity"];
  o.drop_policy =
      cfg["drop_policy"] == "position" ? MoeDropPolicy::kPosition : MoeDropPolicy::kProbs;
  return o;
}

MoeScoreFunction score_function_of(const json& cfg) {
  return cfg["score_function"] == "sigmoid" ? MoeScoreFunction::kSigmoid
                                            : MoeScoreFunction::kSoftmax;
}

// Element-wise |a - b| <= abs_tol.
::testing::AssertionResult all_near(const std::vector<float>& actual,
                                    const std::vector<float>& expected, double abs_tol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << actual.size() << " vs " << expected.size();
  for (size_t i = 0; i < actual.size(); ++i)
    if (!(std::fabs(static_cast<double>(actual[i]) - expected[i]) <= abs_tol))
      return ::testing::AssertionFailure() << "element " << i << ": " << actual[i] << " vs "
                                           << expected[i] << " (abs tolerance " << abs_tol << ")";
  return ::testing::AssertionSuccess();
}

// Element-wise |a - b| <= rtol * |b| + 0.1 * rtol * max|expected|: relative, with a floor at
// the tensor's scale for the entries that are small differences of large fp32 terms (softmax
// and normalisation backwards), where torch's own fp32 rounding is of the order of the terms.
::testing::AssertionResult all_close(const std::vector<float>& actual,
                                     const std::vector<float>& expected, double rtol = 1e-5) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << actual.size() << " vs " << expected.size();
  double scale = 0.0;
  for (float v : expected) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  for (size_t i = 0; i < actual.size(); ++i) {
    const double tol = rtol * std::fabs(static_cast<double>(expected[i])) + 0.1 * rtol * scale;
    if (!(std::fabs(static_cast<double>(actual[i]) - expected[i]) <= tol))
      return ::testing::AssertionFailure() << "element " << i << ": " << actual[i] << " vs "
                                           << expected[i] << " (tolerance " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult value_close(double actual, double expected, double rtol = 1e-5) {
  if (std::fabs(actual - expected) <= rtol * std::fabs(expected))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << actual << " vs " << expected;
}

template <typename T>
std::vector<T> add(std::vector<T> a, const std::vector<T>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

TEST(RouterFixtureFile, LoadsAllCases) {
  const json& doc = fixture_file();
  ASSERT_TRUE(doc.is_object()) << "router_cases.json is missing or not JSON";
  EXPECT_EQ(doc["megatron"], "core_v0.12.1");
  EXPECT_EQ(case_names().size(), 18u);
}

// ---------------------------------------------------------------------------------------------
// Every fixture case: the routing alone (topk_softmax_with_capacity or the sinkhorn routing).

class RouterCase : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    c_ = find_case(GetParam());
    ASSERT_NE(c_, nullptr);
    S_ = (*c_)["S"];
    B_ = (*c_)["B"];
    E_ = (*c_)["E"];
    T_ = S_ * B_;
    cfg_ = (*c_)["config"];
    logits_ = floats((*c_)["logits"]);
    dprobs_ = floats((*c_)["dprobs"]);
    if (c_->contains("expert_bias")) bias_ = floats((*c_)["expert_bias"]);
  }
  bool is_sinkhorn() const { return cfg_["load_balancing"] == "sinkhorn"; }
  int64_t topk() const { return cfg_["topk"]; }

  const json* c_ = nullptr;
  json cfg_;
  int64_t S_ = 0, B_ = 0, E_ = 0, T_ = 0;
  std::vector<float> logits_, dprobs_, bias_;
};

TEST_P(RouterCase, RoutingMatchesMegatron) {
  const json& want = (*c_)["routing"];
  std::vector<float> probs, dlogits(T_ * E_);
  std::vector<uint8_t> map;
  std::vector<int64_t> counts;
  if (is_sinkhorn()) {
    SinkhornRouting r = sinkhorn_routing_forward(logits_, T_, E_, topk());
    sinkhorn_routing_backward(r.saved, dprobs_, dlogits);
    probs = r.probs;
    map = r.routing_map;
    counts = count_tokens_per_expert(map, T_, E_);
  } else {
    StatusOr<RoutingOutput> r = topk_routing_forward(logits_, T_, E_, options_of(cfg_), bias_);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    topk_routing_backward(r->saved, dprobs_, dlogits);
    probs = r->probs;
    map = r->routing_map;
    counts = r->tokens_per_expert;
  }
  EXPECT_EQ(map, bytes(want["routing_map"]));
  EXPECT_EQ(counts, ints(want["tokens_per_expert"]));
  EXPECT_TRUE(all_near(probs, floats(want["probs"]), 1e-6));
  EXPECT_TRUE(all_close(dlogits, floats(want["dlogits"])));
}

TEST_P(RouterCase, AuxLossScoresMatchMegatron) {
  const json& want = (*c_)["aux_scores"];
  AuxScores s = aux_loss_scores_forward(logits_, T_, E_, score_function_of(cfg_), topk());
  std::vector<float> dlogits(T_ * E_);
  aux_loss_scores_backward(s.saved, floats((*c_)["dscores"]), dlogits);
  EXPECT_TRUE(all_near(s.scores, floats(want["scores"]), 1e-6));
  EXPECT_TRUE(all_close(dlogits, floats(want["dlogits"])));
}

// The whole TopKRouter.routing() in training composed from the functions: z-loss on the logits,
// the routing, the load-balancing loss on the aux scores; each loss's gradient is 1.
TEST_P(RouterCase, WholeRouterMatchesMegatron) {
  const json& want = (*c_)["router"];
  const int64_t nss = cfg_["num_sub_sequence"];
  const float aux_coeff = cfg_["aux_loss_coeff"].get<float>();
  std::vector<float> dlogits(T_ * E_, 0.0f), part(T_ * E_);
  if (!cfg_["z_loss_coeff"].is_null()) {
    // TopKRouter divides the coefficient by the tensor x context parallel size (the group).
    z_loss_backward(logits_, T_, E_, cfg_["z_loss_coeff"].get<float>() / nss, 1.0f, part);
    dlogits = add(dlogits, part);
  }
  std::vector<float> probs;
  std::vector<uint8_t> map;
  if (is_sinkhorn()) {
    SinkhornRouting r = sinkhorn_routing_forward(logits_, T_, E_, topk());
    sinkhorn_routing_backward(r.saved, dprobs_, part);
    probs = r.probs;
    map = r.routing_map;
    dlogits = add(dlogits, part);
  } else {
    StatusOr<RoutingOutput> r = topk_routing_forward(logits_, T_, E_, options_of(cfg_), bias_);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    topk_routing_backward(r->saved, dprobs_, part);
    probs = r->probs;
    map = r->routing_map;
    dlogits = add(dlogits, part);
    const std::string lb = cfg_["load_balancing"];
    if ((lb == "aux_loss" || lb == "seq_aux_loss") && aux_coeff != 0.0f) {
      const AuxScores s = aux_loss_scores_forward(logits_, T_, E_, score_function_of(cfg_), topk());
      std::vector<float> dscores(T_ * E_);
      if (lb == "aux_loss") {
        std::vector<int64_t> counts = r->tokens_per_expert;
        if (nss > 1) counts = add(counts, ints((*c_)["other_tokens_per_expert"]));
        switch_load_balancing_loss_backward(T_, E_, counts, nss, topk(), aux_coeff, 1.0f, dscores);
      } else {
        std::vector<float> full(T_ * nss * E_);
        sequence_load_balancing_loss_backward(map, S_, B_, nss, E_, topk(), aux_coeff, 1.0f, full);
        std::copy(full.begin(), full.begin() + T_ * E_, dscores.begin());  // rank 0's rows
      }
      aux_loss_scores_backward(s.saved, dscores, part);
      dlogits = add(dlogits, part);
    }
  }
  EXPECT_EQ(map, bytes(want["routing_map"]));
  EXPECT_TRUE(all_near(probs, floats(want["probs"]), 1e-6));
  EXPECT_TRUE(all_close(dlogits, floats(want["dlogits"])));
}

INSTANTIATE_TEST_SUITE_P(Megatron, RouterCase, ::testing::ValuesIn(case_names()),
                         [](const auto& info) { return info.param; });

// The load-balancing loss alone, on Megatron's scores and counts.
class RouterAuxLossCase : public RouterCase {};

TEST_P(RouterAuxLossCase, LossAndGradientMatchMegatron) {
  const json& want = (*c_)["aux_loss"];
  const int64_t nss = cfg_["num_sub_sequence"];
  const float coeff = cfg_["aux_loss_coeff"].get<float>();
  const std::vector<float> scores = floats((*c_)["aux_scores"]["scores"]);
  std::vector<float> dscores(T_ * E_);
  float loss = 0.0f;
  if (cfg_["load_balancing"] == "aux_loss") {
    std::vector<int64_t> counts = ints((*c_)["routing"]["tokens_per_expert"]);
    if (nss > 1) counts = add(counts, ints((*c_)["other_tokens_per_expert"]));
    loss = switch_load_balancing_loss(scores, T_, E_, counts, nss, topk(), coeff);
    switch_load_balancing_loss_backward(T_, E_, counts, nss, topk(), coeff, 1.0f, dscores);
  } else {
    // The gathered scores: this rank's, then the other ranks' (computed from their logits).
    std::vector<float> full = scores;
    if (nss > 1)
      for (const json& other : (*c_)["other_logits"]) {
        const AuxScores s =
            aux_loss_scores_forward(floats(other), T_, E_, score_function_of(cfg_), topk());
        full.insert(full.end(), s.scores.begin(), s.scores.end());
      }
    const std::vector<uint8_t> map = bytes((*c_)["routing"]["routing_map"]);
    loss = sequence_load_balancing_loss(full, map, S_, B_, nss, E_, topk(), coeff);
    dscores.resize(full.size());
    sequence_load_balancing_loss_backward(map, S_, B_, nss, E_, topk(), coeff, 1.0f, dscores);
  }
  EXPECT_TRUE(value_close(loss, want["value"].get<double>()));
  EXPECT_TRUE(all_close(dscores, floats(want["dscores"])));
}

INSTANTIATE_TEST_SUITE_P(Megatron, RouterAuxLossCase, ::testing::ValuesIn(case_names("aux_loss")),
                         [](const auto& info) { return info.param; });

class RouterZLossCase : public RouterCase {};

TEST_P(RouterZLossCase, LossAndGradientMatchMegatron) {
  const json& want = (*c_)["z_loss"];
  const float coeff = cfg_["z_loss_coeff"].get<float>();
  std::vector<float> dlogits(T_ * E_);
  z_loss_backward(logits_, T_, E_, coeff, 1.0f, dlogits);
  EXPECT_TRUE(value_close(z_loss(logits_, T_, E_, coeff), want["value"].get<double>()));
  EXPECT_TRUE(all_close(dlogits, floats(want["dlogits"])));
}

INSTANTIATE_TEST_SUITE_P(Megatron, RouterZLossCase, ::testing::ValuesIn(case_names("z_loss")),
                         [](const auto& info) { return info.param; });

class RouterSinkhornCase : public RouterCase {};

TEST_P(RouterSinkhornCase, NormalizationMatchesMegatron) {
  EXPECT_TRUE(all_close(sinkhorn(logits_, T_, E_), floats((*c_)["sinkhorn_norm"])));
}

INSTANTIATE_TEST_SUITE_P(Megatron, RouterSinkhornCase,
                         ::testing::ValuesIn(case_names("sinkhorn_norm")),
                         [](const auto& info) { return info.param; });

TEST(ExpertBias, UpdateMatchesMegatron) {
  const json& c = fixture_file()["expert_bias_update"];
  const std::vector<float> updated = updated_expert_bias(
      floats(c["tokens_per_expert"]), floats(c["expert_bias"]), c["rate"].get<float>());
  EXPECT_TRUE(all_near(updated, floats(c["updated"]), 1e-7));
  // Counts equal to the mean leave the bias alone (sign 0).
  EXPECT_EQ(updated[0], floats(c["expert_bias"])[0]);
}

// ---------------------------------------------------------------------------------------------
// Ties: the lower index first (torch.topk on CUDA).

TEST(RouterTies, EqualLogitsChooseTheLowerExperts) {
  const int64_t T = 3, E = 6;
  std::vector<float> logits(T * E, 0.5f);
  logits[1 * E + 4] = 0.25f;  // token 1: experts 0..3 and 5 tie above expert 4
  RouterOptions o;
  o.topk = 2;
  StatusOr<RoutingOutput> r = topk_routing_forward(logits, T, E, o);
  ASSERT_TRUE(r.ok());
  for (int64_t t = 0; t < T; ++t) {
    EXPECT_EQ(r->routing_map[t * E + 0], 1) << "token " << t;
    EXPECT_EQ(r->routing_map[t * E + 1], 1) << "token " << t;
    EXPECT_FLOAT_EQ(r->probs[t * E + 0], 0.5f);
  }
  EXPECT_EQ(r->tokens_per_expert, (std::vector<int64_t>{3, 3, 0, 0, 0, 0}));
}

// Every token prefers expert 0; a capacity of 2 keeps the first two (position) and pads the
// empty experts with the first two tokens at probability 0.
TEST(RouterTies, PositionPolicyKeepsTheEarliestTokensAndPadsWithThem) {
  const int64_t T = 4, E = 2;
  const std::vector<float> logits = {3.0f, 0.0f, 2.0f, 0.0f, 4.0f, 0.0f, 1.0f, 0.0f};
  RouterOptions o;
  o.topk = 1;
  o.pre_softmax = true;
  o.capacity_factor = 1.0;  // capacity ceil(4 * 1 / 2) = 2
  o.drop_policy = MoeDropPolicy::kPosition;
  StatusOr<RoutingOutput> r = topk_routing_forward(logits, T, E, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->routing_map, (std::vector<uint8_t>{1, 0, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(r->tokens_per_expert, (std::vector<int64_t>{4, 0}));
  // Drop policy probs keeps the two most confident tokens instead: 2 (logit 4) and 0 (3).
  o.drop_policy = MoeDropPolicy::kProbs;
  r = topk_routing_forward(logits, T, E, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->routing_map, (std::vector<uint8_t>{1, 0, 0, 0, 1, 0, 0, 0}));
  o.drop_policy = MoeDropPolicy::kPosition;
  o.pad_to_capacity = true;
  r = topk_routing_forward(logits, T, E, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->routing_map, (std::vector<uint8_t>{1, 1, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(r->probs[1], 0.0f);
  EXPECT_EQ(r->probs[3], 0.0f);
  EXPECT_GT(r->probs[0], 0.9f);
}

// The + 1e-20 of the sigmoid normalisation: a token whose scores all underflow to 0 gets
// probabilities 0, not 0/0 (torch gives the same: zeros, the two lowest experts, zero grads).
TEST(RouterNumerics, UnderflowingSigmoidScoresGiveZeroNotNaN) {
  const int64_t T = 2, E = 4;
  const std::vector<float> logits = {-200.0f, -200.0f, -200.0f, -200.0f, 0.5f, 1.0f, -1.0f, 0.0f};
  RouterOptions o;
  o.topk = 2;
  o.score_function = MoeScoreFunction::kSigmoid;
  StatusOr<RoutingOutput> r = topk_routing_forward(logits, T, E, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->routing_map, (std::vector<uint8_t>{1, 1, 0, 0, 1, 1, 0, 0}));
  for (int64_t e = 0; e < E; ++e) EXPECT_EQ(r->probs[e], 0.0f) << "expert " << e;
  std::vector<float> dlogits(T * E);
  topk_routing_backward(r->saved, std::vector<float>(T * E, 1.0f), dlogits);
  for (float g : dlogits) EXPECT_TRUE(std::isfinite(g));
  const AuxScores s = aux_loss_scores_forward(logits, T, E, MoeScoreFunction::kSigmoid, 2);
  aux_loss_scores_backward(s.saved, std::vector<float>(T * E, 1.0f), dlogits);
  for (int64_t e = 0; e < E; ++e) EXPECT_EQ(s.scores[e], 0.0f) << "expert " << e;
  for (float g : dlogits) EXPECT_TRUE(std::isfinite(g));
}

// ---------------------------------------------------------------------------------------------
// Options.

TEST(RouterOptionsTest, CapacityFactorIsTheTypedDecimal) {
  MoeConfig c;
  c.num_experts = 8;
  c.expert_capacity_factor = 1.1f;
  const RouterOptions o = router_options(c);
  EXPECT_EQ(o.capacity_factor, 1.1);
  // 80 tokens * top-1 / 8 experts * 1.1 = 11 (Python: math.ceil(10.0 * 1.1) = 11), where the
  // float 1.10000002 would give 12.
  EXPECT_EQ(expert_capacity(80, 8, o.capacity_factor), 11);
  EXPECT_EQ(expert_capacity(80, 8, 0.05, /*min_capacity=*/4), 4);
}

TEST(RouterOptionsTest, RefusesWhatMegatronRefuses) {
  const int64_t T = 4, E = 4;
  const std::vector<float> logits(T * E, 0.0f), bias(E, 0.0f);
  RouterOptions o;
  o.topk = 5;
  EXPECT_FALSE(topk_routing_forward(logits, T, E, o).ok());
  o.topk = 2;
  EXPECT_FALSE(topk_routing_forward(logits, T, E, o, bias).ok()) << "bias with softmax";
  o.group_topk = 1;
  o.num_groups = 3;
  EXPECT_FALSE(topk_routing_forward(logits, T, E, o).ok()) << "3 groups of 4 experts";
  o.num_groups = 4;
  EXPECT_FALSE(topk_routing_forward(logits, T, E, o).ok()) << "top-2 from one group of 1";
  o.group_topk = 0;
  o.capacity_factor = 3.0;  // ceil(4 * 2 / 4 * 3) = 6 > 4 tokens
  EXPECT_FALSE(topk_routing_forward(logits, T, E, o).ok());
  o.capacity_factor = 2.0;
  EXPECT_TRUE(topk_routing_forward(logits, T, E, o).ok());
}

// ---------------------------------------------------------------------------------------------
// Finite differences (kernels/grad_check.h): logits far apart within a token (gaps of at least
// 0.3), so a step of h does not change any selection.

std::vector<float> separated_logits(int64_t T, int64_t E, uint32_t seed) {
  std::vector<float> x(T * E);
  uint32_t state = seed;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<double>(state >> 8) / static_cast<double>(1u << 24);
  };
  std::vector<int> perm(E);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) perm[e] = static_cast<int>(e);
    for (int64_t e = E - 1; e > 0; --e)
      std::swap(perm[e], perm[static_cast<int64_t>(next() * (e + 1))]);
    for (int64_t e = 0; e < E; ++e)
      x[t * E + e] = static_cast<float>(0.4 * (perm[e] - E / 2) + 0.1 * (next() - 0.5));
  }
  return x;
}

std::vector<float> random_vector(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t state = seed;
  for (float& x : v) {
    state = state * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<double>(state >> 8) / static_cast<double>(1u << 24) - 0.5);
  }
  return v;
}

void check_routing_gradient(const RouterOptions& o, int64_t T, int64_t E, uint32_t seed,
                            double h = 1e-2, std::vector<float> bias = {}) {
  const std::vector<float> x = separated_logits(T, E, seed);
  const std::vector<float> dout = random_vector(T * E, seed + 1);
  StatusOr<RoutingOutput> r = topk_routing_forward(x, T, E, o, bias);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<float> dx(T * E);
  topk_routing_backward(r->saved, dout, dx);
  const std::vector<uint8_t> map = r->routing_map;
  auto forward = [&](const std::vector<float>& xs) {
    StatusOr<RoutingOutput> p = topk_routing_forward(xs, T, E, o, bias);
    EXPECT_TRUE(p.ok());
    EXPECT_EQ(p->routing_map, map) << "a finite-difference step changed the selection";
    return p->probs;
  };
  EXPECT_TRUE(check_gradient(forward, x, dout, dx, h, 2e-2, 2e-3, T * E));
}

TEST(RouterGradCheck, SoftmaxAfterTopk) {
  RouterOptions o;
  o.topk = 3;
  o.scaling_factor = 1.5f;
  check_routing_gradient(o, 6, 8, 11);
}

TEST(RouterGradCheck, PreSoftmax) {
  RouterOptions o;
  o.topk = 2;
  o.pre_softmax = true;
  check_routing_gradient(o, 6, 8, 12);
}

TEST(RouterGradCheck, SigmoidWithBiasAndScaling) {
  RouterOptions o;
  o.topk = 3;
  o.score_function = MoeScoreFunction::kSigmoid;
  o.scaling_factor = 2.5f;
  check_routing_gradient(o, 6, 8, 13, 1e-2,
                         {0.01f, -0.02f, 0.0f, 0.03f, 0.02f, -0.01f, 0.0f, 0.01f});
}

TEST(RouterGradCheck, SigmoidTop1) {
  RouterOptions o;
  o.topk = 1;
  o.score_function = MoeScoreFunction::kSigmoid;
  check_routing_gradient(o, 6, 8, 14);
}

TEST(RouterGradCheck, GroupLimited) {
  RouterOptions o;
  o.topk = 3;
  o.num_groups = 4;
  o.group_topk = 2;
  o.pre_softmax = true;
  check_routing_gradient(o, 6, 8, 15);
}

TEST(RouterGradCheck, CapacityDropsAndPads) {
  for (MoeDropPolicy policy : {MoeDropPolicy::kProbs, MoeDropPolicy::kPosition})
    for (bool pad : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "position " << (policy == MoeDropPolicy::kPosition) << " pad " << pad);
      RouterOptions o;
      o.topk = 2;
      o.capacity_factor = 1.0;
      o.drop_policy = policy;
      o.pad_to_capacity = pad;
      check_routing_gradient(o, 8, 4, 16, 1e-3);
    }
}

TEST(RouterGradCheck, Sinkhorn) {
  for (int64_t k : {1, 2}) {
    const int64_t T = 6, E = 8;
    const std::vector<float> x = separated_logits(T, E, 17);
    const std::vector<float> dout = random_vector(T * E, 18);
    SinkhornRouting r = sinkhorn_routing_forward(x, T, E, k);
    std::vector<float> dx(T * E);
    sinkhorn_routing_backward(r.saved, dout, dx);
    auto forward = [&](const std::vector<float>& xs) {
      SinkhornRouting p = sinkhorn_routing_forward(xs, T, E, k);
      EXPECT_EQ(p.routing_map, r.routing_map) << "a finite-difference step changed the selection";
      return p.probs;
    };
    EXPECT_TRUE(check_gradient(forward, x, dout, dx, 1e-3, 2e-2, 2e-3, T * E)) << "topk " << k;
  }
}

TEST(RouterGradCheck, AuxLossScores) {
  const int64_t T = 5, E = 6;
  const std::vector<float> x = random_vector(T * E, 21), dout = random_vector(T * E, 22);
  const std::vector<std::pair<MoeScoreFunction, int64_t>> variants = {
      {MoeScoreFunction::kSoftmax, 2},
      {MoeScoreFunction::kSigmoid, 2},
      {MoeScoreFunction::kSigmoid, 1}};
  for (const auto& [fn, k] : variants) {
    const AuxScores s = aux_loss_scores_forward(x, T, E, fn, k);
    std::vector<float> dx(T * E);
    aux_loss_scores_backward(s.saved, dout, dx);
    auto forward = [&](const std::vector<float>& xs) {
      return aux_loss_scores_forward(xs, T, E, fn, k).scores;
    };
    EXPECT_TRUE(check_gradient(forward, x, dout, dx, 1e-2, 2e-2, 1e-4, T * E)) << "topk " << k;
  }
}

TEST(RouterGradCheck, SwitchLoss) {
  const int64_t T = 5, E = 4;
  const std::vector<float> scores = random_vector(T * E, 31);
  const std::vector<int64_t> counts = {7, 1, 4, 8};  // summed over 2 sub-sequences
  std::vector<float> ds(T * E);
  switch_load_balancing_loss_backward(T, E, counts, 2, 2, 0.1f, 1.0f, ds);
  auto forward = [&](const std::vector<float>& xs) {
    return std::vector<float>{switch_load_balancing_loss(xs, T, E, counts, 2, 2, 0.1f)};
  };
  EXPECT_TRUE(check_gradient(forward, scores, {1.0f}, ds, 1e-2, 1e-3, 1e-7, T * E));
}

TEST(RouterGradCheck, SequenceLoss) {
  const int64_t s_local = 3, B = 2, E = 4, nss = 2, k = 2;
  const std::vector<float> full = random_vector(s_local * nss * B * E, 41);
  std::vector<uint8_t> map(s_local * B * E, 0);
  for (size_t i = 0; i < map.size(); i += 3) map[i] = 1;
  std::vector<float> ds(full.size());
  sequence_load_balancing_loss_backward(map, s_local, B, nss, E, k, 0.1f, 1.0f, ds);
  auto forward = [&](const std::vector<float>& xs) {
    return std::vector<float>{sequence_load_balancing_loss(xs, map, s_local, B, nss, E, k, 0.1f)};
  };
  EXPECT_TRUE(check_gradient(forward, full, {1.0f}, ds, 1e-2, 1e-3, 1e-7, full.size()));
}

TEST(RouterGradCheck, ZLoss) {
  const int64_t T = 5, E = 6;
  std::vector<float> x = random_vector(T * E, 51);
  for (float& v : x) v *= 4.0f;
  std::vector<float> dx(T * E);
  z_loss_backward(x, T, E, 0.01f, 1.0f, dx);
  auto forward = [&](const std::vector<float>& xs) {
    return std::vector<float>{z_loss(xs, T, E, 0.01f)};
  };
  EXPECT_TRUE(check_gradient(forward, x, {1.0f}, dx, 1e-2, 1e-3, 1e-7, T * E));
}

}  // namespace
}  // namespace mindspeed
