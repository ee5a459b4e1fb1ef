// The CUDA ring-attention update against its reference (ref/ring_attention.cpp) on odd
// shapes: lse values with -inf rows (a key block every key of which is masked for that row)
// on either side, both, or neither, whose output rows hold NaN (they must not be read);
// a weight that underflows to 0; in place as the ring accumulates (out = prev_out or cur_out,
// lse = prev_lse or cur_lse) with the same bits as out of place. The device's double exp and
// log1p are within an ulp of double of the host's, so the float results agree to one ulp.
#include <cmath>
#include <limits>
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

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kUlp = 2.5e-7;  // one float ulp, relative, with margin

// -inf must match exactly; finite values within rtol.
::testing::AssertionResult lse_close(const std::vector<float>& a, const std::vector<float>& b,
                                     double rtol) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << "size " << a.size() << " vs " << b.size();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool ok = std::isinf(a[i]) || std::isinf(b[i])
                        ? a[i] == b[i]
                        : std::fabs(a[i] - b[i]) <= rtol * std::fabs(b[i]) + 1e-12;
    if (!ok) return ::testing::AssertionFailure() << "lse " << i << ": " << a[i] << " vs " << b[i];
  }
  return ::testing::AssertionSuccess();
}

// Random lse in [-6, 6] with every `every`-th entry -inf (offset `skew`).
std::vector<float> random_lse(int64_t n, uint64_t stream, int64_t every, int64_t skew) {
  std::vector<float> l = random_vector(n, stream, 3.0f);
  for (int64_t i = 0; i < n; ++i) {
    l[i] = std::fmin(std::fmax(l[i], -6.0f), 6.0f);
    if ((i + skew) % every == 0) l[i] = kNegInf;
  }
  return l;
}

// NaN in the output rows of a partial whose lse is -inf: the kernel must not read them.
void poison_unseen_rows(std::vector<float>& out, const std::vector<float>& lse, int64_t T,
                        int64_t B, int64_t NQ, int64_t D) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < NQ; ++h)
        if (lse[(b * NQ + h) * T + t] == kNegInf)
          for (int64_t x = 0; x < D; ++x) out[((t * B + b) * NQ + h) * D + x] = NAN;
}

struct Shape {
  int64_t T, B, NQ, D;
};

TEST_F(CudaKernelTest, RingAttentionUpdateMatchesTheReference) {
  for (const Shape s :
       {Shape{1, 1, 1, 1}, Shape{7, 3, 5, 13}, Shape{5, 1, 4, 9}, Shape{33, 2, 3, 64},
        Shape{17, 2, 2, 130}, Shape{129, 1, 2, 33}, Shape{3, 2, 1, 4097}}) {
    const int64_t T = s.T, B = s.B, NQ = s.NQ, D = s.D, n = T * B * NQ * D, ns = B * NQ * T;
    SCOPED_TRACE(::testing::Message() << "T " << T << ", B " << B << ", NQ " << NQ << ", D " << D);
    auto po = random_vector(n, 1), co = random_vector(n, 2);
    const auto pl = random_lse(ns, 3, 5, 0), cl = random_lse(ns, 4, 7, 3);
    poison_unseen_rows(po, pl, T, B, NQ, D);
    poison_unseen_rows(co, cl, T, B, NQ, D);
    std::vector<float> want(n), want_lse(ns);
    ref::ring_attention_update(kRefKc, want.data(), want_lse.data(), po.data(), pl.data(),
                               co.data(), cl.data(), T, B, NQ, D);
    DeviceBuffer<float> dpo(po), dpl(pl), dco(co), dcl(cl);
    auto dout = poisoned<float>(n), dlse = poisoned<float>(ns);
    k().ring_attention_update(kc(), dout, dlse, dpo, dpl, dco, dcl, T, B, NQ, D);
    const auto got = dout.download(), got_lse = dlse.download();
    EXPECT_TRUE(all_close(got, want, kUlp, 1e-12));
    EXPECT_TRUE(lse_close(got_lse, want_lse, kUlp));
    // In place, accumulating into the previous partial, then into the current one.
    k().ring_attention_update(kc(), dpo, dpl, dpo, dpl, dco, dcl, T, B, NQ, D);
    EXPECT_EQ(dpo.download(), got);
    EXPECT_EQ(dpl.download(), got_lse);
    dpo.upload(po);
    dpl.upload(pl);
    k().ring_attention_update(kc(), dco, dcl, dpo, dpl, dco, dcl, T, B, NQ, D);
    EXPECT_EQ(dco.download(), got);
    EXPECT_EQ(dcl.download(), got_lse);
  }
}

// One head per case: both partials empty (out 0, lse -inf), either one empty (the other
// copied; the empty one's NaN row not read), both seen, and a weight that underflows to 0.
TEST_F(CudaKernelTest, RingAttentionUpdateEdgeRows) {
  const int64_t T = 5, B = 1, NQ = 1, D = 37;
  const std::vector<float> pl = {kNegInf, kNegInf, 1.5f, 0.25f, 0.0f};
  const std::vector<float> cl = {kNegInf, -2.0f, kNegInf, 0.5f, -900.0f};
  auto po = random_vector(T * D, 5), co = random_vector(T * D, 6);
  poison_unseen_rows(po, pl, T, B, NQ, D);
  poison_unseen_rows(co, cl, T, B, NQ, D);
  std::vector<float> want(T * D), want_lse(T);
  ref::ring_attention_update(kRefKc, want.data(), want_lse.data(), po.data(), pl.data(), co.data(),
                             cl.data(), T, B, NQ, D);
  DeviceBuffer<float> dpo(po), dpl(pl), dco(co), dcl(cl);
  auto dout = poisoned<float>(T * D), dlse = poisoned<float>(T);
  k().ring_attention_update(kc(), dout, dlse, dpo, dpl, dco, dcl, T, B, NQ, D);
  const auto got = dout.download(), got_lse = dlse.download();
  EXPECT_TRUE(all_close(got, want, kUlp, 1e-12));
  EXPECT_TRUE(lse_close(got_lse, want_lse, kUlp));
  EXPECT_EQ(got_lse[0], kNegInf);
  for (int64_t x = 0; x < D; ++x) {
    EXPECT_EQ(got[x], 0.0f);                   // neither partial saw a key
    EXPECT_EQ(got[D + x], co[D + x]);          // only the current one
    EXPECT_EQ(got[2 * D + x], po[2 * D + x]);  // only the previous one
    EXPECT_EQ(got[4 * D + x], po[4 * D + x]);  // the current one's weight underflows
  }
  EXPECT_EQ(got_lse[1], -2.0f);
  EXPECT_EQ(got_lse[2], 1.5f);
}

TEST_F(CudaKernelTest, RingAttentionUpdateWithNoRowsIsANoOp) {
  auto untouched = poisoned<float>(4);
  k().ring_attention_update(kc(), untouched, untouched, untouched, untouched, untouched, untouched,
                            0, 2, 2, 1);
  for (const float v : untouched.download()) EXPECT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace mindspeed
