// The CUDA MoE permutation kernels against their references (ref/moe_permute.cpp), bit for
// bit: a copy, one rounded product per element, and the sums into a token row over its copies
// in increasing order (the reference's order: the device builds an inverse index instead of
// adding with atomics). Routings are top-k sorted by expert with capacity padding (-1) and
// dropped tokens, empty experts, no routed copy at all, a token with many copies in no
// particular order, and one large enough that the index does not fit the backend's scratch;
// widths 1 to 4097. dprobs (a dot product in double) within one float ulp; repeated runs give
// the same bits; the fused unpermute equals scale_rows then the unweighted one.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "cuda_test_util.h"

namespace mindspeed {
namespace {

using testing::all_close;
using testing::CudaKernelTest;
using testing::DeviceBuffer;
using testing::kRefKc;
using testing::poisoned;
using testing::random_vector;

::testing::AssertionResult bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << "size " << a.size() << " vs " << b.size();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure()
             << "element " << i << " of " << a.size() << ": " << a[i] << " vs " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

struct Routing {
  std::vector<int32_t> rows;
  int64_t T = 0;
  int64_t R() const { return static_cast<int64_t>(rows.size()); }
};

// A top-k routing of T tokens over E experts as the permutation sees it (tests/kernels/
// moe_permute_test.cpp's): the copies sorted by expert (then token), each expert's block
// padded with -1 to a multiple of pad_to, every drop_every-th token routed nowhere.
Routing make_routing(int64_t T, int64_t E, int64_t k, int64_t pad_to, int64_t drop_every) {
  std::vector<std::pair<int64_t, int32_t>> copies;  // (expert, token)
  uint64_t state = 12345;
  for (int64_t t = 0; t < T; ++t) {
    if (drop_every > 0 && t % drop_every == drop_every - 1) continue;
    std::vector<int64_t> chosen;
    while (static_cast<int64_t>(chosen.size()) < k) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const int64_t e = static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(E));
      if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
    }
    for (const int64_t e : chosen) copies.push_back({e, static_cast<int32_t>(t)});
  }
  std::stable_sort(copies.begin(), copies.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  Routing r;
  r.T = T;
  size_t i = 0;
  for (int64_t e = 0; e < E; ++e) {
    int64_t n = 0;
    for (; i < copies.size() && copies[i].first == e; ++i, ++n) r.rows.push_back(copies[i].second);
    for (; pad_to > 1 && n % pad_to != 0; ++n) r.rows.push_back(-1);
  }
  return r;
}

// R copies of T tokens drawn at random (repeats, padding slots interleaved): no expert order.
Routing random_routing(int64_t T, int64_t R) {
  Routing r;
  r.T = T;
  uint64_t state = 777;
  for (int64_t i = 0; i < R; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    r.rows.push_back(static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(T + 1)) - 1);
  }
  return r;
}

// Probabilities in (0, 1) per routed copy.
std::vector<float> make_probs(int64_t R, uint64_t stream) {
  auto p = random_vector(R, stream);
  for (float& v : p) v = 1.0f / (1.0f + std::exp(-v));
  return p;
}

struct Case {
  const char* name;
  Routing routing;
  int64_t h;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"one token", make_routing(1, 1, 1, 1, 0), 1});
  c.push_back({"top-2, padded, dropped", make_routing(23, 5, 2, 4, 6), 33});
  c.push_back({"top-3, padded, dropped", make_routing(57, 8, 3, 4, 9), 129});
  c.push_back({"wide rows", make_routing(29, 6, 3, 4, 5), 4097});
  c.push_back({"empty experts", make_routing(3, 16, 1, 1, 0), 7});
  c.push_back({"every token dropped", make_routing(5, 4, 2, 4, 1), 9});  // R = 0
  c.push_back({"many copies per token", random_routing(10, 1000), 17});
  c.push_back({"index beyond the scratch", make_routing(70000, 8, 2, 1, 0), 3});
  return c;
}

TEST_F(CudaKernelTest, MoePermutationIsBitIdenticalToTheReference) {
  for (const Case& c : cases()) {
    const Routing& r = c.routing;
    const int64_t T = r.T, R = r.R(), h = c.h;
    SCOPED_TRACE(::testing::Message() << c.name << ": T " << T << ", R " << R << ", h " << h);
    const auto x = random_vector(T * h, 1), dy_perm = random_vector(R * h, 2),
               dy_tok = random_vector(T * h, 3);
    const auto probs = make_probs(R, 4);
    DeviceBuffer<int32_t> drows(r.rows);
    DeviceBuffer<float> dx_in(x), ddy_perm(dy_perm), ddy_tok(dy_tok), dprobs_in(probs);

    // permute forward: out[i] = x[rows[i]], padding slots 0.
    std::vector<float> permuted(R * h);
    ref::moe_permute_forward(kRefKc, permuted.data(), x.data(), r.rows.data(), R, h);
    auto dpermuted = poisoned<float>(R * h);
    k().moe_permute_forward(kc(), dpermuted, dx_in, drows, R, h);
    EXPECT_TRUE(bit_equal(dpermuted.download(), permuted)) << "permute_forward";

    // permute backward: dx[t] = sum of dout[i] over t's copies, 0 for dropped tokens.
    std::vector<float> dx(T * h);
    ref::moe_permute_backward(kRefKc, dx.data(), dy_perm.data(), r.rows.data(), T, R, h);
    auto ddx = poisoned<float>(T * h);
    k().moe_permute_backward(kc(), ddx, ddy_perm, drows, T, R, h);
    const auto got_dx = ddx.download();
    EXPECT_TRUE(bit_equal(got_dx, dx)) << "permute_backward";
    auto ddx2 = poisoned<float>(T * h);
    k().moe_permute_backward(kc(), ddx2, ddy_perm, drows, T, R, h);
    EXPECT_TRUE(bit_equal(ddx2.download(), got_dx)) << "permute_backward, second run";

    // unpermute forward, with and without probabilities.
    for (const bool weighted : {true, false}) {
      const float* p = weighted ? probs.data() : nullptr;
      std::vector<float> out(T * h);
      ref::moe_unpermute_forward(kRefKc, out.data(), dy_perm.data(), p, r.rows.data(), T, R, h);
      auto dout = poisoned<float>(T * h);
      k().moe_unpermute_forward(kc(), dout, ddy_perm, weighted ? dprobs_in.get() : nullptr, drows,
                                T, R, h);
      EXPECT_TRUE(bit_equal(dout.download(), out)) << "unpermute_forward, weighted " << weighted;
    }
    // The fused weighting equals scale_rows then the unweighted unpermute.
    auto dscaled = poisoned<float>(R * h);
    k().scale_rows(kc(), dscaled, ddy_perm, dprobs_in, R, h);
    auto dfused = poisoned<float>(T * h), dunfused = poisoned<float>(T * h);
    k().moe_unpermute_forward(kc(), dfused, ddy_perm, dprobs_in, drows, T, R, h);
    k().moe_unpermute_forward(kc(), dunfused, dscaled, nullptr, drows, T, R, h);
    EXPECT_TRUE(bit_equal(dunfused.download(), dfused.download()))
        << "fused vs scale_rows + unpermute";

    // unpermute backward: dpermuted bit for bit, dprobs within an ulp, both 0 for padding.
    for (const bool weighted : {true, false}) {
      SCOPED_TRACE(weighted ? "with probabilities" : "without probabilities");
      const float* p = weighted ? probs.data() : nullptr;
      std::vector<float> dperm(R * h), dprobs(R);
      ref::moe_unpermute_backward(kRefKc, dperm.data(), weighted ? dprobs.data() : nullptr,
                                  dy_tok.data(), dy_perm.data(), p, r.rows.data(), T, R, h);
      auto ddperm = poisoned<float>(R * h), ddprobs = poisoned<float>(R);
      k().moe_unpermute_backward(kc(), ddperm, weighted ? ddprobs.get() : nullptr, ddy_tok,
                                 ddy_perm, weighted ? dprobs_in.get() : nullptr, drows, T, R, h);
      EXPECT_TRUE(bit_equal(ddperm.download(), dperm)) << "unpermute_backward dpermuted";
      if (!weighted) continue;
      const auto got_dprobs = ddprobs.download();
      EXPECT_TRUE(all_close(got_dprobs, dprobs, 2.5e-7, 1e-10)) << "unpermute_backward dprobs";
      for (int64_t i = 0; i < R; ++i) {
        if (r.rows[i] < 0) {
          ASSERT_EQ(got_dprobs[i], 0.0f) << "padding slot " << i;
        }
      }
      auto again = poisoned<float>(R);
      k().moe_unpermute_backward(kc(), ddperm, again, ddy_tok, ddy_perm, dprobs_in, drows, T, R, h);
      EXPECT_TRUE(bit_equal(again.download(), got_dprobs)) << "dprobs, second run";
    }
  }
}

TEST_F(CudaKernelTest, MoePermutationWithNoTokensOrNoWidthIsANoOp) {
  auto untouched = poisoned<float>(8);
  const DeviceBuffer<int32_t> rows(std::vector<int32_t>{0, -1});
  k().moe_permute_forward(kc(), untouched, untouched, rows, 0, 4);
  k().moe_permute_backward(kc(), untouched, untouched, rows, 0, 2, 4);
  k().moe_permute_backward(kc(), untouched, untouched, rows, 1, 2, 0);
  k().moe_unpermute_forward(kc(), untouched, untouched, nullptr, rows, 0, 2, 4);
  k().moe_unpermute_backward(kc(), untouched, untouched, untouched, untouched, nullptr, rows, 1, 0,
                             4);
  for (const float v : untouched.download()) EXPECT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace mindspeed
