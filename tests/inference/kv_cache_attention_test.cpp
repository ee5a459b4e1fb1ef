// The key/value-cache attention kernel (kernels: kv_cache_attention_forward): the fast one
// equals the reference one, and its prefill (Tq == Tk) equals core attention's output on
// the same q, k, v; a query block at the end of the cache (decode, Tq = 1, or a chunk) equals
// the matching rows of the full causal attention. GQA, a cache longer than the sequence.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/kernels.h"
#include "test_util.h"

namespace mindspeed {
namespace {

using testing::random_vector;

struct Problem {
  int64_t B = 2, NQ = 4, NKV = 2, T = 11, S = 16, D = 8;
};

// Full causal attention by the reference core kernel: out [T, B, NQ*D].
std::vector<float> core_reference(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                                  const std::vector<float>& v) {
  AttentionDims d;
  d.B = p.B;
  d.T = p.T;
  d.NQ = p.NQ;
  d.NKV = p.NKV;
  d.D = p.D;
  d.scale = 0.35f;
  d.num_heads_total = p.NQ;
  std::vector<float> out(p.T * p.B * p.NQ * p.D), probs(p.B * p.NQ * p.T * p.T);
  ref::core_attention_forward(KernelContext{}, out.data(), probs.data(), q.data(), k.data(), v.data(),
                              AttentionMask{}, d, DropoutSpec{}, nullptr);
  return out;
}

// k [B, NKV, T, D] into a cache [B, NKV, S, D] (rows beyond T are garbage on purpose).
std::vector<float> to_cache(const Problem& p, const std::vector<float>& k) {
  std::vector<float> cache = random_vector(p.B * p.NKV * p.S * p.D, 99, 100.0f);
  for (int64_t bg = 0; bg < p.B * p.NKV; ++bg)
    for (int64_t i = 0; i < p.T * p.D; ++i) cache[(bg * p.S) * p.D + i] = k[bg * p.T * p.D + i];
  return cache;
}

TEST(KvCacheAttention, PrefillAndDecodeEqualFullCausalAttention) {
  const Problem p;
  const auto q = random_vector(p.B * p.NQ * p.T * p.D, 1), k = random_vector(p.B * p.NKV * p.T * p.D, 2);
  const auto v = random_vector(p.B * p.NKV * p.T * p.D, 3);
  const std::vector<float> want = core_reference(p, q, k, v);
  const auto kc = to_cache(p, k), vc = to_cache(p, v);
  for (bool fast : {false, true}) {
    const KernelTable t = select_kernels(KernelOptions{.fast = fast});
    KernelContext ctx{.num_threads = 2};
    for (int64_t Tq : {p.T, int64_t{1}, int64_t{3}}) {
      // The last Tq queries, [B, NQ, Tq, D].
      std::vector<float> qs(p.B * p.NQ * Tq * p.D);
      for (int64_t bh = 0; bh < p.B * p.NQ; ++bh)
        for (int64_t i = 0; i < Tq * p.D; ++i) qs[bh * Tq * p.D + i] = q[(bh * p.T + p.T - Tq) * p.D + i];
      std::vector<float> ws(std::max<int64_t>(1, t.kv_cache_attention_workspace_floats(ctx, Tq, p.T)));
      std::vector<float> out(Tq * p.B * p.NQ * p.D);
      t.kv_cache_attention_forward(ctx, out.data(), qs.data(), kc.data(), vc.data(), p.B, p.NQ, p.NKV, Tq, p.T, p.S,
                                   p.D, 0.35f, ws.data());
      const std::vector<float> rows(want.end() - Tq * p.B * p.NQ * p.D, want.end());  // [T, B, NQ*D]: last Tq
      EXPECT_LE(testing::normwise_error(out, rows), 1e-6) << (fast ? "fast" : "reference") << " Tq " << Tq;
    }
  }
}

}  // namespace
}  // namespace mindspeed
