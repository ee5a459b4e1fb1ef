// Ring-attention update (MindSpeed's npu_ring_attention_update, log-sum-exp form): the fast
// kernel against the reference on odd shapes; the attention over all keys rebuilt from the
// partial attentions of 2 and 4 key blocks (causal, so some blocks see no key for some
// rows, and non-causal) equals full attention; the merge order does not matter; and the
// kernel equals MindSpeed's (softmax_max, softmax_sum) formula; its lse is flash attention's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>
#include <vector>

#include "kernels/kernels.h"
#include "test_util.h"

namespace mindspeed {
namespace {
using testing::all_close;
using testing::kKc;
using testing::random_vector;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One attention (partial or full): out [T,B,NQ*D] and lse [B,NQ,T].
struct Partial {
  std::vector<float> out, lse;
};

// Plain attention of every query over keys [j0, j1) (causal: only j <= t), in double. A row
// that sees no key gets out = 0 and lse = -inf, as the update kernel expects.
Partial block_attention(const std::vector<float>& q /*[B,NQ,T,D]*/,
                        const std::vector<float>& k /*[B,NKV,T,D]*/,
                        const std::vector<float>& v /*[B,NKV,T,D]*/, int64_t B, int64_t T,
                        int64_t NQ, int64_t NKV, int64_t D, int64_t j0, int64_t j1, bool causal) {
  const int64_t G = NQ / NKV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Partial p{std::vector<float>(T * B * NQ * D, 0.0f), std::vector<float>(B * NQ * T, kNegInf)};
  std::vector<double> s(T);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NQ; ++h) {
      const float* qh = q.data() + (b * NQ + h) * T * D;
      const float* kh = k.data() + (b * NKV + h / G) * T * D;
      const float* vh = v.data() + (b * NKV + h / G) * T * D;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t end = causal ? std::min(j1, t + 1) : j1;
        if (end <= j0) continue;  // every key of the block masked for this row
        double m = -INFINITY;
        for (int64_t j = j0; j < end; ++j) {
          double dot = 0.0;
          for (int64_t x = 0; x < D; ++x) dot += static_cast<double>(qh[t * D + x]) * kh[j * D + x];
          s[j] = dot * scale;
          m = std::max(m, s[j]);
        }
        double sum = 0.0;
        for (int64_t j = j0; j < end; ++j) sum += (s[j] = std::exp(s[j] - m));
        float* o = p.out.data() + ((t * B + b) * NQ + h) * D;
        for (int64_t x = 0; x < D; ++x) {
          double acc = 0.0;
          for (int64_t j = j0; j < end; ++j) acc += s[j] * vh[j * D + x];
          o[x] = static_cast<float>(acc / sum);
        }
        p.lse[(b * NQ + h) * T + t] = static_cast<float>(m + std::log(sum));
      }
    }
  }
  return p;
}

// lse values may be -inf: equal there, close elsewhere.
::testing::AssertionResult lse_close(const std::vector<float>& a, const std::vector<float>& b,
                                     double tol) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i]) || std::isinf(a[i])) {
      if (a[i] != b[i])
        return ::testing::AssertionFailure() << "lse " << i << ": " << a[i] << " vs " << b[i];
    } else if (!(std::fabs(a[i] - b[i]) <= tol * (1.0 + std::fabs(b[i])))) {
      return ::testing::AssertionFailure() << "lse " << i << ": " << a[i] << " vs " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

bool all_finite(const std::vector<float>& x) {
  return std::all_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); });
}

// Random lse in [-6, 6] with every `every`-th entry -inf (offset `skew` so the two partials'
// -inf rows overlap only sometimes).
std::vector<float> random_lse(int64_t n, uint64_t stream, int64_t every, int64_t skew) {
  std::vector<float> l = random_vector(n, stream, 3.0f);
  for (int64_t i = 0; i < n; ++i) {
    l[i] = std::clamp(l[i], -6.0f, 6.0f);
    if ((i + skew) % every == 0) l[i] = kNegInf;
  }
  return l;
}

// ---- (1) fast == reference --------------------------------------------------------------
class RingUpdateParity : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {};

TEST_P(RingUpdateParity, FastEqualsReference) {
  const auto [T, B, NQ, D] = GetParam();
  const int64_t n = int64_t{T} * B * NQ * D, ns = int64_t{B} * NQ * T;
  const auto po = random_vector(n, 1), co = random_vector(n, 2);
  const auto pl = random_lse(ns, 3, 5, 0), cl = random_lse(ns, 4, 7, 3);
  std::vector<float> o1(n), o2(n), l1(ns), l2(ns);
  ref::ring_attention_update(kKc, o1.data(), l1.data(), po.data(), pl.data(), co.data(), cl.data(),
                             T, B, NQ, D);
  cpu::ring_attention_update(kKc, o2.data(), l2.data(), po.data(), pl.data(), co.data(), cl.data(),
                             T, B, NQ, D);
  EXPECT_TRUE(all_close(o2, o1, 1e-6, 1e-7));
  EXPECT_TRUE(lse_close(l2, l1, 1e-7));
  EXPECT_TRUE(all_finite(o1));
  // In place, as the ring accumulates (out = prev_out, lse = prev_lse).
  std::vector<float> o3 = po, l3 = pl;
  cpu::ring_attention_update(kKc, o3.data(), l3.data(), o3.data(), l3.data(), co.data(), cl.data(),
                             T, B, NQ, D);
  EXPECT_EQ(o3, o2);
  EXPECT_EQ(l3, l2);
}

INSTANTIATE_TEST_SUITE_P(OddShapes, RingUpdateParity,
                         ::testing::Values(std::make_tuple(1, 1, 1, 1),
                                           std::make_tuple(7, 3, 5, 13),
                                           std::make_tuple(5, 1, 4, 9),
                                           std::make_tuple(33, 2, 3, 64),
                                           std::make_tuple(17, 2, 2, 130)));

// ---- (2) merged key blocks == full attention ----------------------------------------------
struct SplitCase {
  int64_t B, T, NQ, NKV, D, blocks;
  bool causal;
};

class RingUpdateSplit : public ::testing::TestWithParam<std::tuple<SplitCase, bool>> {
 protected:
  const SplitCase& c() const { return std::get<0>(GetParam()); }
  KernelTable table() const {
    return std::get<1>(GetParam()) ? select_kernels(KernelOptions{.fast = true})
                                   : reference_kernels();
  }
  void SetUp() override {
    const SplitCase& s = c();
    q_ = random_vector(s.B * s.NQ * s.T * s.D, 11);
    k_ = random_vector(s.B * s.NKV * s.T * s.D, 12);
    v_ = random_vector(s.B * s.NKV * s.T * s.D, 13);
    full_ = attention(0, s.T);
    // Uneven boundaries (the last block is shorter): block i = [bounds[i], bounds[i+1]).
    for (int64_t i = 0; i <= s.blocks; ++i)
      bounds_.push_back(i == s.blocks ? s.T : i * ((s.T + s.blocks - 1) / s.blocks));
    for (int64_t i = 0; i < s.blocks; ++i) parts_.push_back(attention(bounds_[i], bounds_[i + 1]));
  }
  Partial attention(int64_t j0, int64_t j1) const {
    const SplitCase& s = c();
    return block_attention(q_, k_, v_, s.B, s.T, s.NQ, s.NKV, s.D, j0, j1, s.causal);
  }
  // Accumulates the blocks in `order` in place, as the ring does (out = update(out, block)).
  Partial merge(const std::vector<int>& order) const {
    const SplitCase& s = c();
    const KernelTable t = table();
    Partial acc = parts_[order[0]];
    for (size_t i = 1; i < order.size(); ++i) {
      const Partial& cur = parts_[order[i]];
      t.ring_attention_update(kKc, acc.out.data(), acc.lse.data(), acc.out.data(), acc.lse.data(),
                              cur.out.data(), cur.lse.data(), s.T, s.B, s.NQ, s.D);
    }
    return acc;
  }
  std::vector<float> q_, k_, v_;
  Partial full_;
  std::vector<int64_t> bounds_;
  std::vector<Partial> parts_;
};

TEST_P(RingUpdateSplit, MergedBlocksEqualFullAttention) {
  std::vector<int> order(c().blocks);
  for (int i = 0; i < c().blocks; ++i) order[i] = i;
  if (c().causal) {  // the premise: some block sees no key for some rows
    EXPECT_TRUE(std::any_of(parts_.back().lse.begin(), parts_.back().lse.end(),
                            [](float l) { return l == kNegInf; }));
  }
  // The ring's order: the diagonal block first, then the earlier ones (q_id > kv_id).
  std::vector<int> ring(order.rbegin(), order.rend());
  for (const auto& o : {order, ring}) {
    const Partial m = merge(o);
    EXPECT_TRUE(all_finite(m.out));
    EXPECT_TRUE(all_close(m.out, full_.out, 1e-5, 1e-5));
    EXPECT_TRUE(lse_close(m.lse, full_.lse, 1e-5));
  }
}

// ---- (3) the merge order does not matter --------------------------------------------------
TEST_P(RingUpdateSplit, MergeOrderDoesNotMatter) {
  const int n = static_cast<int>(c().blocks);
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  const Partial first = merge(order);
  do {
    const Partial m = merge(order);
    EXPECT_TRUE(all_close(m.out, first.out, 1e-6, 1e-6));
    EXPECT_TRUE(lse_close(m.lse, first.lse, 1e-6));
  } while (std::next_permutation(order.begin(), order.end()));
  if (n == 4) {  // a tree: (0 + 1) + (2 + 3)
    const SplitCase& s = c();
    const KernelTable t = table();
    Partial a = parts_[0], b = parts_[2];
    t.ring_attention_update(kKc, a.out.data(), a.lse.data(), a.out.data(), a.lse.data(),
                            parts_[1].out.data(), parts_[1].lse.data(), s.T, s.B, s.NQ, s.D);
    t.ring_attention_update(kKc, b.out.data(), b.lse.data(), b.out.data(), b.lse.data(),
                            parts_[3].out.data(), parts_[3].lse.data(), s.T, s.B, s.NQ, s.D);
    Partial m = a;
    t.ring_attention_update(kKc, m.out.data(), m.lse.data(), a.out.data(), a.lse.data(),
                            b.out.data(), b.lse.data(), s.T, s.B, s.NQ, s.D);
    EXPECT_TRUE(all_close(m.out, first.out, 1e-6, 1e-6));
    EXPECT_TRUE(lse_close(m.lse, first.lse, 1e-6));
  }
}

INSTANTIATE_TEST_SUITE_P(Blocks, RingUpdateSplit,
                         ::testing::Combine(::testing::Values(SplitCase{2, 13, 4, 2, 9, 2, true},
                                                              SplitCase{2, 13, 4, 2, 9, 4, true},
                                                              SplitCase{1, 21, 3, 3, 16, 2, false},
                                                              SplitCase{1, 21, 2, 1, 17, 4, false},
                                                              SplitCase{3, 10, 2, 2, 8, 4, true}),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<RingUpdateSplit::ParamType>& info) {
                           const SplitCase& s = std::get<0>(info.param);
                           std::ostringstream name;  // e.g. B2T13NQ4NKV2D9_4blocks_causal_fast
                           name << 'B' << s.B << 'T' << s.T << "NQ" << s.NQ << "NKV" << s.NKV << 'D'
                                << s.D << '_' << s.blocks << "blocks_"
                                << (s.causal ? "causal_" : "full_")
                                << (std::get<1>(info.param) ? "fast" : "ref");
                           return name.str();
                         });

// The statistic the update takes is the one flash attention saves: the lse of this test's
// plain attention over all keys equals flash_attention_forward's (causal, GQA, odd T).
TEST(RingUpdateLse, IsFlashAttentionLse) {
  if (!cpu::cpu_kernels_supported()) GTEST_SKIP() << "no AVX2+FMA";
  const int64_t B = 2, T = 70, NQ = 4, NKV = 2, D = 16;
  const AttentionDims dims{B, T, NQ, NKV, D, 1.0f / std::sqrt(static_cast<float>(D)), 0, NQ};
  const auto q = random_vector(B * NQ * T * D, 31), k = random_vector(B * NKV * T * D, 32);
  const auto v = random_vector(B * NKV * T * D, 33);
  std::vector<float> out(T * B * NQ * D), lse(B * NQ * T);
  std::vector<float> ws(cpu::attention_workspace_floats(kKc, dims, AttentionKernel::kFlash, false));
  cpu::flash_attention_forward(kKc, out.data(), lse.data(), q.data(), k.data(), v.data(),
                               AttentionMask{}, dims, DropoutSpec{}, ws.data());
  const Partial full = block_attention(q, k, v, B, T, NQ, NKV, D, 0, T, true);
  EXPECT_TRUE(all_close(out, full.out, 1e-4, 1e-5));
  EXPECT_TRUE(lse_close(lse, full.lse, 1e-5));
}

// ---- MindSpeed's (softmax_max, softmax_sum) form ------------------------------------------
// forward_update of MindSpeed's docs/ops/npu_ring_attention_update.md, one row, in double.
TEST(RingUpdateMindSpeed, EqualsMaxSumFormula) {
  const int64_t T = 6, B = 2, NQ = 3, D = 11, n = T * B * NQ * D, ns = B * NQ * T;
  const auto po = random_vector(n, 21), co = random_vector(n, 22);
  const auto pm = random_vector(ns, 23, 2.0f), cm = random_vector(ns, 24, 2.0f);
  auto ps = random_vector(ns, 25), cs = random_vector(ns, 26);
  for (auto* s : {&ps, &cs})
    for (float& x : *s) x = 1.0f + 40.0f * std::fabs(x);  // a sum of exps with max 1 is >= 1
  std::vector<float> pl(ns), cl(ns), out(n), lse(ns);
  for (int64_t i = 0; i < ns; ++i) {
    pl[i] = static_cast<float>(pm[i] + std::log(static_cast<double>(ps[i])));
    cl[i] = static_cast<float>(cm[i] + std::log(static_cast<double>(cs[i])));
  }
  for (const KernelTable& t : {reference_kernels(), select_kernels(KernelOptions{.fast = true})}) {
    t.ring_attention_update(kKc, out.data(), lse.data(), po.data(), pl.data(), co.data(), cl.data(),
                            T, B, NQ, D);
    std::vector<float> want(n), want_lse(ns);
    for (int64_t tt = 0; tt < T; ++tt) {
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t h = 0; h < NQ; ++h) {
          const int64_t st = (b * NQ + h) * T + tt, row = ((tt * B + b) * NQ + h) * D;
          const double m = std::max<double>(pm[st], cm[st]);
          const double sp = ps[st] * std::exp(pm[st] - m), sc = cs[st] * std::exp(cm[st] - m),
                       sum = sp + sc;
          for (int64_t x = 0; x < D; ++x)
            want[row + x] = static_cast<float>(po[row + x] * (sp / sum) + co[row + x] * (sc / sum));
          want_lse[st] = static_cast<float>(m + std::log(sum));  // MindSpeed returns (m, sum)
        }
      }
    }
    EXPECT_TRUE(all_close(out, want, 1e-5, 1e-6)) << t.name;
    EXPECT_TRUE(lse_close(lse, want_lse, 1e-6)) << t.name;
  }
}

// --use-fused-ring-attention-update picks the fused kernel even at --optimization-level 0
// (like MindSpeed's other per-op fusion flags); without it level 0 runs the reference.
TEST(RingUpdateSelection, FusedFlagPicksTheFusedKernelAtLevel0) {
  if (!cpu::cpu_kernels_supported()) GTEST_SKIP() << "no AVX2+FMA";
  EXPECT_EQ(select_kernels({.fast = false}).ring_attention_update, &ref::ring_attention_update);
  EXPECT_EQ(select_kernels({.fast = false, .fused_ring_attention_update = true}).ring_attention_update,
            &cpu::ring_attention_update);
  EXPECT_EQ(select_kernels({.fast = true}).ring_attention_update, &cpu::ring_attention_update);
}

}  // namespace
}  // namespace mindspeed
