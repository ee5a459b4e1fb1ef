// The MoE token permutation kernels (ref/ and cpu/) against index-copy loops: rows are a
// top-k routing sorted by expert, with capacity padding slots (-1) and dropped tokens (no
// copy). Sums into a token row run over the copies in increasing order, so the expected
// values are bit-exact and the cpu kernels must reproduce the reference bits at every
// thread count; the fused unpermute equals scale_rows then the unweighted unpermute bit for
// bit; unpermute(permute(x)) with probabilities 1/k gives x back; the backward kernels by
// finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "grad_check.h"
#include "kernels/kernels.h"
#include "test_util.h"

namespace mindspeed {
namespace {
using testing::all_close;
using testing::check_gradient;
using testing::kKc;
using testing::random_vector;

struct Impl {
  const char* name;
  decltype(&ref::moe_permute_forward) permute_forward;
  decltype(&ref::moe_permute_backward) permute_backward;
  decltype(&ref::moe_unpermute_forward) unpermute_forward;
  decltype(&ref::moe_unpermute_backward) unpermute_backward;
  decltype(&ref::scale_rows) scale_rows;
};
const Impl kImpls[] = {
    {"ref", ref::moe_permute_forward, ref::moe_permute_backward, ref::moe_unpermute_forward,
     ref::moe_unpermute_backward, ref::scale_rows},
    {"cpu", cpu::moe_permute_forward, cpu::moe_permute_backward, cpu::moe_unpermute_forward,
     cpu::moe_unpermute_backward, cpu::scale_rows},
};

const float kNaN = std::numeric_limits<float>::quiet_NaN();

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

// A top-k routing of T tokens over E experts, as the permutation sees it: the copies sorted
// by expert (then token), each expert's block padded with -1 slots to a multiple of `pad_to`
// (drop-and-pad capacity), every `drop_every`-th token routed nowhere (0 = none dropped).
struct Routing {
  std::vector<int32_t> rows;
  int64_t T = 0;
  int64_t R() const { return static_cast<int64_t>(rows.size()); }
};

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
    for (int64_t e : chosen) copies.push_back({e, static_cast<int32_t>(t)});
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

// Probabilities in (0, 1) per routed copy.
std::vector<float> make_probs(int64_t R, uint64_t stream) {
  auto p = random_vector(R, stream);
  for (float& v : p) v = 1.0f / (1.0f + std::exp(-v));
  return p;
}

// sum over i with rows[i] == t, increasing i, of w_i * src[i] (w = 1 without probs), each
// product rounded to float: the kernels' contract.
std::vector<float> expected_scatter(const Routing& r, const std::vector<float>& src,
                                    const float* probs, int64_t h) {
  std::vector<float> out(r.T * h, 0.0f);
  for (int64_t i = 0; i < r.R(); ++i) {
    if (r.rows[i] < 0) continue;
    for (int64_t c = 0; c < h; ++c) {
      const float v = probs ? probs[i] * src[i * h + c] : src[i * h + c];
      out[r.rows[i] * h + c] += v;
    }
  }
  return out;
}

TEST(MoePermute, ForwardCopiesTokenRowsAndZerosPadding) {
  const int64_t h = 37;
  const Routing r = make_routing(23, 5, 2, 4, 6);
  const auto x = random_vector(r.T * h, 1);
  std::vector<float> expected(r.R() * h, 0.0f);
  for (int64_t i = 0; i < r.R(); ++i) {
    if (r.rows[i] >= 0) std::copy_n(x.begin() + r.rows[i] * h, h, expected.begin() + i * h);
  }
  for (const Impl& impl : kImpls) {
    std::vector<float> out(r.R() * h, kNaN);
    impl.permute_forward(kKc, out.data(), x.data(), r.rows.data(), r.R(), h);
    EXPECT_TRUE(bit_equal(out, expected)) << impl.name;
  }
}

TEST(MoePermute, BackwardSumsCopiesInIncreasingOrder) {
  const int64_t h = 70;
  const Routing r = make_routing(29, 6, 3, 4, 5);  // dropped tokens get a zero gradient
  const auto dout = random_vector(r.R() * h, 2);
  const auto expected = expected_scatter(r, dout, nullptr, h);
  for (const Impl& impl : kImpls) {
    std::vector<float> dx(r.T * h, kNaN);
    impl.permute_backward(kKc, dx.data(), dout.data(), r.rows.data(), r.T, r.R(), h);
    EXPECT_TRUE(bit_equal(dx, expected)) << impl.name;
  }
}

TEST(MoeUnpermute, ForwardIsTheWeightedSumInIncreasingOrder) {
  const int64_t h = 45;
  const Routing r = make_routing(31, 4, 2, 8, 7);
  const auto permuted = random_vector(r.R() * h, 3);
  const auto probs = make_probs(r.R(), 4);
  for (const float* p : {probs.data(), static_cast<const float*>(nullptr)}) {
    const auto expected = expected_scatter(r, permuted, p, h);
    for (const Impl& impl : kImpls) {
      std::vector<float> out(r.T * h, kNaN);
      impl.unpermute_forward(kKc, out.data(), permuted.data(), p, r.rows.data(), r.T, r.R(), h);
      EXPECT_TRUE(bit_equal(out, expected)) << impl.name << (p ? " with probs" : " without probs");
    }
  }
}

TEST(MoeUnpermute, FusedEqualsScaleRowsThenUnweightedUnpermute) {
  const int64_t h = 130;
  const Routing r = make_routing(40, 8, 2, 4, 0);
  const auto permuted = random_vector(r.R() * h, 5);
  const auto probs = make_probs(r.R(), 6);
  std::vector<float> fused_ref(r.T * h);
  ref::moe_unpermute_forward(kKc, fused_ref.data(), permuted.data(), probs.data(), r.rows.data(),
                             r.T, r.R(), h);
  for (const Impl& a : kImpls) {
    std::vector<float> scaled(r.R() * h, kNaN);
    a.scale_rows(kKc, scaled.data(), permuted.data(), probs.data(), r.R(), h);
    for (int64_t i = 0; i < r.R(); ++i) {
      ASSERT_EQ(scaled[i * h + 3], probs[i] * permuted[i * h + 3]) << a.name << " row " << i;
    }
    for (const Impl& b : kImpls) {
      std::vector<float> unfused(r.T * h), fused(r.T * h);
      b.unpermute_forward(kKc, unfused.data(), scaled.data(), nullptr, r.rows.data(), r.T, r.R(),
                          h);
      b.unpermute_forward(kKc, fused.data(), permuted.data(), probs.data(), r.rows.data(), r.T,
                          r.R(), h);
      EXPECT_TRUE(bit_equal(unfused, fused)) << "scale_rows " << a.name << ", unpermute " << b.name;
      EXPECT_TRUE(bit_equal(fused, fused_ref)) << b.name;
    }
  }
  // In place.
  auto inplace = permuted;
  cpu::scale_rows(kKc, inplace.data(), inplace.data(), probs.data(), r.R(), h);
  std::vector<float> scaled(r.R() * h);
  ref::scale_rows(kKc, scaled.data(), permuted.data(), probs.data(), r.R(), h);
  EXPECT_TRUE(bit_equal(inplace, scaled));
}

TEST(MoeUnpermute, RoundTripWithProbabilitiesOneOverKGivesTheTokensBack) {
  const int64_t h = 33;
  for (int64_t k : {1, 2, 3, 4}) {
    const Routing r = make_routing(26, 6, k, 4, 0);  // every token routed k times, padded
    const auto x = random_vector(r.T * h, 7);
    const std::vector<float> probs(r.R(), 1.0f / static_cast<float>(k));
    for (const Impl& impl : kImpls) {
      std::vector<float> permuted(r.R() * h), back(r.T * h);
      impl.permute_forward(kKc, permuted.data(), x.data(), r.rows.data(), r.R(), h);
      impl.unpermute_forward(kKc, back.data(), permuted.data(), probs.data(), r.rows.data(), r.T,
                             r.R(), h);
      if (k <= 2) {
        EXPECT_TRUE(bit_equal(back, x)) << impl.name << ", k " << k;  // x/2 + x/2 is exact
      } else {
        EXPECT_TRUE(all_close(back, x, 1e-6, 1e-7)) << impl.name << ", k " << k;
      }
    }
  }
}

TEST(MoeUnpermute, BackwardFollowsItsFormulas) {
  const int64_t h = 52;
  const Routing r = make_routing(21, 5, 2, 4, 4);
  const auto dout = random_vector(r.T * h, 8), permuted = random_vector(r.R() * h, 9);
  const auto probs = make_probs(r.R(), 10);
  std::vector<float> dperm_expected(r.R() * h, 0.0f), dperm_plain(r.R() * h, 0.0f);
  std::vector<float> dprobs_expected(r.R(), 0.0f);
  for (int64_t i = 0; i < r.R(); ++i) {
    if (r.rows[i] < 0) continue;
    double dot = 0.0;
    for (int64_t c = 0; c < h; ++c) {
      const float g = dout[r.rows[i] * h + c];
      dperm_expected[i * h + c] = probs[i] * g;
      dperm_plain[i * h + c] = g;
      dot += static_cast<double>(g) * permuted[i * h + c];
    }
    dprobs_expected[i] = static_cast<float>(dot);
  }
  for (const Impl& impl : kImpls) {
    std::vector<float> dperm(r.R() * h, kNaN), dprobs(r.R(), kNaN);
    impl.unpermute_backward(kKc, dperm.data(), dprobs.data(), dout.data(), permuted.data(),
                            probs.data(), r.rows.data(), r.T, r.R(), h);
    EXPECT_TRUE(bit_equal(dperm, dperm_expected)) << impl.name;
    EXPECT_TRUE(all_close(dprobs, dprobs_expected, 1e-6, 1e-7)) << impl.name;
    for (int64_t i = 0; i < r.R(); ++i) {
      if (r.rows[i] < 0) {
        EXPECT_EQ(dprobs[i], 0.0f) << impl.name << " padding slot " << i;
      }
    }
    // Without probabilities: weight 1, no dprobs.
    std::vector<float> plain(r.R() * h, kNaN);
    impl.unpermute_backward(kKc, plain.data(), nullptr, dout.data(), permuted.data(), nullptr,
                            r.rows.data(), r.T, r.R(), h);
    EXPECT_TRUE(bit_equal(plain, dperm_plain)) << impl.name;
  }
}

// Same bits as the reference at every thread count, for widths below, at and across the cpu
// kernels' column slices.
TEST(MoePermute, CpuIsBitIdenticalToReferenceAtAnyThreadCount) {
  const Routing r = make_routing(57, 8, 3, 4, 9);
  for (int64_t h : {1, 37, 64, 200, 1000}) {
    const auto x = random_vector(r.T * h, 11), dy = random_vector(r.R() * h, 12);
    const auto dt = random_vector(r.T * h, 13), probs = make_probs(r.R(), 14);
    std::vector<float> p1(r.R() * h), b1(r.T * h), u1(r.T * h), dp1(r.R() * h), dq1(r.R()),
        s1(r.R() * h);
    ref::moe_permute_forward(kKc, p1.data(), x.data(), r.rows.data(), r.R(), h);
    ref::moe_permute_backward(kKc, b1.data(), dy.data(), r.rows.data(), r.T, r.R(), h);
    ref::moe_unpermute_forward(kKc, u1.data(), dy.data(), probs.data(), r.rows.data(), r.T, r.R(),
                               h);
    ref::moe_unpermute_backward(kKc, dp1.data(), dq1.data(), dt.data(), dy.data(), probs.data(),
                                r.rows.data(), r.T, r.R(), h);
    ref::scale_rows(kKc, s1.data(), dy.data(), probs.data(), r.R(), h);
    std::vector<float> dq_first;
    for (int threads : {1, 2, 3, 7}) {
      const KernelContext kc{threads};
      std::vector<float> p2(r.R() * h), b2(r.T * h), u2(r.T * h), dp2(r.R() * h), dq2(r.R()),
          s2(r.R() * h);
      cpu::moe_permute_forward(kc, p2.data(), x.data(), r.rows.data(), r.R(), h);
      cpu::moe_permute_backward(kc, b2.data(), dy.data(), r.rows.data(), r.T, r.R(), h);
      cpu::moe_unpermute_forward(kc, u2.data(), dy.data(), probs.data(), r.rows.data(), r.T, r.R(),
                                 h);
      cpu::moe_unpermute_backward(kc, dp2.data(), dq2.data(), dt.data(), dy.data(), probs.data(),
                                  r.rows.data(), r.T, r.R(), h);
      cpu::scale_rows(kc, s2.data(), dy.data(), probs.data(), r.R(), h);
      const std::string where =
          "h " + std::to_string(h) + ", " + std::to_string(threads) + " threads";
      EXPECT_TRUE(bit_equal(p2, p1)) << "permute_forward, " << where;
      EXPECT_TRUE(bit_equal(b2, b1)) << "permute_backward, " << where;
      EXPECT_TRUE(bit_equal(u2, u1)) << "unpermute_forward, " << where;
      EXPECT_TRUE(bit_equal(dp2, dp1)) << "unpermute_backward dpermuted, " << where;
      EXPECT_TRUE(bit_equal(s2, s1)) << "scale_rows, " << where;
      // dprobs: a dot product in double; the cpu kernel's lanes differ from the reference's
      // order, but not with the thread count.
      EXPECT_TRUE(all_close(dq2, dq1, 1e-6, 1e-7)) << "dprobs, " << where;
      if (dq_first.empty()) dq_first = dq2;
      EXPECT_TRUE(bit_equal(dq2, dq_first)) << "dprobs, " << where;
    }
  }
}

TEST(MoePermute, GradientsByFiniteDifferences) {
  const int64_t h = 6;
  const Routing r = make_routing(9, 4, 2, 4, 4);
  const auto x = random_vector(r.T * h, 15), permuted = random_vector(r.R() * h, 16);
  const auto probs = make_probs(r.R(), 17);
  const auto dy_perm = random_vector(r.R() * h, 18), dy_tok = random_vector(r.T * h, 19);
  for (const Impl& impl : kImpls) {
    // permute: x -> out.
    std::vector<float> dx(r.T * h);
    impl.permute_backward(kKc, dx.data(), dy_perm.data(), r.rows.data(), r.T, r.R(), h);
    auto permute = [&](const std::vector<float>& xx) {
      std::vector<float> out(r.R() * h);
      impl.permute_forward(kKc, out.data(), xx.data(), r.rows.data(), r.R(), h);
      return out;
    };
    EXPECT_TRUE(check_gradient(permute, x, dy_perm, dx, 1e-2, 2e-2, 2e-3, x.size())) << impl.name;
    // unpermute: (permuted, probs) -> out.
    std::vector<float> dperm(r.R() * h), dprobs(r.R());
    impl.unpermute_backward(kKc, dperm.data(), dprobs.data(), dy_tok.data(), permuted.data(),
                            probs.data(), r.rows.data(), r.T, r.R(), h);
    auto unpermute = [&](const std::vector<float>& pp, const std::vector<float>& pr) {
      std::vector<float> out(r.T * h);
      impl.unpermute_forward(kKc, out.data(), pp.data(), pr.data(), r.rows.data(), r.T, r.R(), h);
      return out;
    };
    EXPECT_TRUE(check_gradient([&](const auto& v) { return unpermute(v, probs); }, permuted, dy_tok,
                               dperm, 1e-2, 2e-2, 2e-3, permuted.size()))
        << impl.name << " dpermuted";
    EXPECT_TRUE(check_gradient([&](const auto& v) { return unpermute(permuted, v); }, probs, dy_tok,
                               dprobs, 1e-2, 2e-2, 2e-3, probs.size()))
        << impl.name << " dprobs";
  }
}

}  // namespace
}  // namespace mindspeed
