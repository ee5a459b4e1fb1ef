// Attention kernels: the reference backward against finite differences; the BLAS core
// attention and the flash (blocked online-softmax) attention against the reference, for
// MHA and GQA, causal and document (EOD-reset) masks, with and without dropout, with
// sequence lengths that are not multiples of the block sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "grad_check.h"
#include "kernels/kernels.h"
#include "test_util.h"

namespace mindspeed {
namespace {
using testing::kKc;

using testing::all_close;
using testing::check_gradient;
using testing::random_vector;

struct Problem {
  AttentionDims dims;
  std::vector<float> q, k, v, dout;
  std::vector<int32_t> doc_start;
  DropoutSpec dropout;
  AttentionMask mask() const { return {doc_start.empty() ? nullptr : doc_start.data()}; }
  int64_t nq() const { return dims.B * dims.NQ * dims.T * dims.D; }
  int64_t nkv() const { return dims.B * dims.NKV * dims.T * dims.D; }
  int64_t nout() const { return dims.T * dims.B * dims.NQ * dims.D; }
};

Problem make_problem(int64_t B, int64_t T, int64_t NQ, int64_t NKV, int64_t D, bool docs, float p) {
  Problem pr;
  pr.dims = {B, T, NQ, NKV, D, 1.0f / std::sqrt(static_cast<float>(D)), 0, NQ};
  pr.q = random_vector(pr.nq(), 1);
  pr.k = random_vector(pr.nkv(), 2);
  pr.v = random_vector(pr.nkv(), 3);
  pr.dout = random_vector(pr.nout(), 4);
  if (docs) {
    // Documents end after positions 2, 40 and 77 of sample 0; sample 1 has one boundary.
    pr.doc_start.resize(B * T);
    for (int64_t b = 0; b < B; ++b) {
      int32_t start = 0;
      for (int64_t t = 0; t < T; ++t) {
        pr.doc_start[b * T + t] = start;
        const bool eod = b == 0 ? (t == 2 || t == 40 || t == 77) : t == T / 2;
        if (eod) start = static_cast<int32_t>(t + 1);
      }
    }
  }
  pr.dropout = DropoutSpec{p, RngStream{11, 22}, 0};
  return pr;
}

struct Grads {
  std::vector<float> out, dq, dk, dv;
};

Grads run_reference(const Problem& pr) {
  const auto& d = pr.dims;
  Grads g{std::vector<float>(pr.nout()), std::vector<float>(pr.nq()), std::vector<float>(pr.nkv()),
          std::vector<float>(pr.nkv())};
  std::vector<float> probs(d.B * d.NQ * d.T * d.T);
  ref::core_attention_forward(kKc, g.out.data(), probs.data(), pr.q.data(), pr.k.data(), pr.v.data(),
                              pr.mask(), d, pr.dropout, nullptr);
  ref::core_attention_backward(kKc, g.dq.data(), g.dk.data(), g.dv.data(), pr.dout.data(), probs.data(),
                               pr.q.data(), pr.k.data(), pr.v.data(), d, pr.dropout, nullptr);
  return g;
}

TEST(AttentionGradCheck, ReferenceBackwardMatchesFiniteDifferences) {
  for (bool docs : {false, true}) {
    for (float p : {0.0f, 0.2f}) {
      Problem pr = make_problem(2, 7, 4, 2, 4, false, p);
      if (docs) pr.doc_start = {0, 0, 0, 3, 3, 5, 5, 0, 0, 2, 2, 2, 2, 2};
      const Grads g = run_reference(pr);
      auto forward = [&](const std::vector<float>& q, const std::vector<float>& k,
                         const std::vector<float>& v) {
        std::vector<float> out(pr.nout()), probs(pr.dims.B * pr.dims.NQ * pr.dims.T * pr.dims.T);
        ref::core_attention_forward(kKc, out.data(), probs.data(), q.data(), k.data(), v.data(),
                                    pr.mask(), pr.dims, pr.dropout, nullptr);
        return out;
      };
      EXPECT_TRUE(check_gradient([&](const auto& x) { return forward(x, pr.k, pr.v); }, pr.q, pr.dout, g.dq, 1e-2, 2e-2, 2e-3, 128));
      EXPECT_TRUE(check_gradient([&](const auto& x) { return forward(pr.q, x, pr.v); }, pr.k, pr.dout, g.dk, 1e-2, 2e-2, 2e-3, 128));
      EXPECT_TRUE(check_gradient([&](const auto& x) { return forward(pr.q, pr.k, x); }, pr.v, pr.dout, g.dv, 1e-2, 2e-2, 2e-3, 128));
    }
  }
}

TEST(AttentionMask, NoAttentionAcrossDocumentBoundaries) {
  // Changing a key/value in an earlier document must not change any output of a later one.
  Problem pr = make_problem(1, 20, 2, 2, 4, false, 0.0f);
  pr.doc_start.assign(20, 0);
  for (int t = 8; t < 20; ++t) pr.doc_start[t] = 8;
  const Grads base = run_reference(pr);
  for (int64_t i = 0; i < 8 * 4; ++i) pr.v[i] += 1.0f, pr.k[i] -= 0.5f;  // head 0, positions < 8
  const Grads changed = run_reference(pr);
  const int64_t row = pr.dims.B * pr.dims.NQ * pr.dims.D;
  for (int64_t t = 8; t < 20; ++t)
    for (int64_t x = 0; x < row; ++x) EXPECT_EQ(base.out[t * row + x], changed.out[t * row + x]);
}

class FastAttentionTest
    : public ::testing::TestWithParam<std::tuple<int, int, int, bool, float>> {};

TEST_P(FastAttentionTest, CoreAndFlashMatchReference) {
  const auto [T, nq, nkv, docs, p] = GetParam();
  const Problem pr = make_problem(2, T, nq, nkv, 16, docs, p);
  const auto& d = pr.dims;
  const Grads want = run_reference(pr);

  // BLAS core attention.
  {
    std::vector<float> ws(cpu::attention_workspace_floats(kKc, d, AttentionKernel::kCore, true));
    Grads g{std::vector<float>(pr.nout()), std::vector<float>(pr.nq()),
            std::vector<float>(pr.nkv()), std::vector<float>(pr.nkv())};
    std::vector<float> probs(d.B * d.NQ * d.T * d.T);
    cpu::core_attention_forward(kKc, g.out.data(), probs.data(), pr.q.data(), pr.k.data(), pr.v.data(),
                                pr.mask(), d, pr.dropout, ws.data());
    cpu::core_attention_backward(kKc, g.dq.data(), g.dk.data(), g.dv.data(), pr.dout.data(), probs.data(),
                                 pr.q.data(), pr.k.data(), pr.v.data(), d, pr.dropout, ws.data());
    EXPECT_TRUE(all_close(g.out, want.out, 1e-4, 1e-5)) << "core out";
    EXPECT_TRUE(all_close(g.dq, want.dq, 1e-4, 1e-5)) << "core dq";
    EXPECT_TRUE(all_close(g.dk, want.dk, 1e-4, 1e-5)) << "core dk";
    EXPECT_TRUE(all_close(g.dv, want.dv, 1e-4, 1e-5)) << "core dv";
  }
  // Flash attention.
  {
    std::vector<float> ws(std::max(cpu::attention_workspace_floats(kKc, d, AttentionKernel::kFlash, false),
                                   cpu::attention_workspace_floats(kKc, d, AttentionKernel::kFlash, true)));
    Grads g{std::vector<float>(pr.nout()), std::vector<float>(pr.nq()),
            std::vector<float>(pr.nkv()), std::vector<float>(pr.nkv())};
    std::vector<float> lse(d.B * d.NQ * d.T);
    cpu::flash_attention_forward(kKc, g.out.data(), lse.data(), pr.q.data(), pr.k.data(), pr.v.data(),
                                 pr.mask(), d, pr.dropout, ws.data());
    cpu::flash_attention_backward(kKc, g.dq.data(), g.dk.data(), g.dv.data(), pr.dout.data(), g.out.data(),
                                  lse.data(), pr.q.data(), pr.k.data(), pr.v.data(), pr.mask(), d,
                                  pr.dropout, ws.data());
    EXPECT_TRUE(all_close(g.out, want.out, 1e-4, 1e-5)) << "flash out";
    EXPECT_TRUE(all_close(g.dq, want.dq, 1e-4, 1e-5)) << "flash dq";
    EXPECT_TRUE(all_close(g.dk, want.dk, 1e-4, 1e-5)) << "flash dk";
    EXPECT_TRUE(all_close(g.dv, want.dv, 1e-4, 1e-5)) << "flash dv";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FastAttentionTest,
    ::testing::Values(std::make_tuple(1, 2, 2, false, 0.0f), std::make_tuple(37, 4, 4, false, 0.0f),
                      std::make_tuple(100, 4, 2, false, 0.0f), std::make_tuple(200, 6, 2, true, 0.0f),
                      std::make_tuple(130, 4, 1, true, 0.1f), std::make_tuple(65, 2, 2, false, 0.3f), std::make_tuple(300, 2, 2, false, 0.0f)));

}  // namespace
}  // namespace mindspeed
