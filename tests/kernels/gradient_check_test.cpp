// Every reference backward kernel against finite differences of its forward kernel.
// Inputs, weights and parameters are each perturbed in turn.
#include <gtest/gtest.h>

#include <vector>

#include "grad_check.h"
#include "kernels/blas/gemm.h"
#include "kernels/kernels.h"
#include "test_util.h"

namespace mindspeed {
namespace {
using testing::kKc;

using testing::check_gradient;
using testing::random_vector;

constexpr int64_t kN = 5, kC = 12;

TEST(GradCheck, LayerNorm) {
  const auto x = random_vector(kN * kC, 1, 1.5f, 0.3f), w = random_vector(kC, 2), b = random_vector(kC, 3);
  const auto dy = random_vector(kN * kC, 4);
  std::vector<float> mean(kN), rstd(kN), y(kN * kC);
  auto fwd = [&](const std::vector<float>& xx, const std::vector<float>& ww, const std::vector<float>& bb) {
    std::vector<float> out(kN * kC), m(kN), r(kN);
    ref::layer_norm_forward(kKc, out.data(), m.data(), r.data(), xx.data(), ww.data(), bb.data(), kN, kC, 1e-5f);
    return out;
  };
  ref::layer_norm_forward(kKc, y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), kN, kC, 1e-5f);
  std::vector<float> dx(kN * kC), dw(kC), db(kC);
  ref::layer_norm_backward(kKc, dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(), kN, kC);
  EXPECT_TRUE(check_gradient([&](const auto& v) { return fwd(v, w, b); }, x, dy, dx));
  EXPECT_TRUE(check_gradient([&](const auto& v) { return fwd(x, v, b); }, w, dy, dw));
  EXPECT_TRUE(check_gradient([&](const auto& v) { return fwd(x, w, v); }, b, dy, db));
}

TEST(GradCheck, RmsNorm) {
  const auto x = random_vector(kN * kC, 5), w = random_vector(kC, 6), dy = random_vector(kN * kC, 7);
  auto fwd = [&](const std::vector<float>& xx, const std::vector<float>& ww) {
    std::vector<float> out(kN * kC), r(kN);
    ref::rms_norm_forward(kKc, out.data(), r.data(), xx.data(), ww.data(), kN, kC, 1e-6f);
    return out;
  };
  std::vector<float> y(kN * kC), rstd(kN), dx(kN * kC), dw(kC);
  ref::rms_norm_forward(kKc, y.data(), rstd.data(), x.data(), w.data(), kN, kC, 1e-6f);
  ref::rms_norm_backward(kKc, dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), kN, kC);
  EXPECT_TRUE(check_gradient([&](const auto& v) { return fwd(v, w); }, x, dy, dx));
  EXPECT_TRUE(check_gradient([&](const auto& v) { return fwd(x, v); }, w, dy, dw));
}

TEST(GradCheck, GeluBothForms) {
  const int64_t n = 40;
  const auto x = random_vector(n, 8, 2.0f), dy = random_vector(n, 9);
  for (auto approx : {GeluApproximation::kErf, GeluApproximation::kTanh}) {
    std::vector<float> dx(n);
    ref::gelu_backward(kKc, dx.data(), dy.data(), x.data(), n, approx);
    auto fwd = [&](const std::vector<float>& xx) {
      std::vector<float> out(n);
      ref::gelu_forward(kKc, out.data(), xx.data(), n, approx);
      return out;
    };
    EXPECT_TRUE(check_gradient(fwd, x, dy, dx, 1e-3));
  }
}

TEST(GradCheck, SwiGlu) {
  const int64_t N = 3, F = 7;
  const auto x = random_vector(N * 2 * F, 10, 2.0f), dy = random_vector(N * F, 11);
  std::vector<float> dx(N * 2 * F);
  ref::swiglu_backward(kKc, dx.data(), dy.data(), x.data(), N, F);
  auto fwd = [&](const std::vector<float>& xx) {
    std::vector<float> out(N * F);
    ref::swiglu_forward(kKc, out.data(), xx.data(), N, F);
    return out;
  };
  EXPECT_TRUE(check_gradient(fwd, x, dy, dx, 1e-3));
}

TEST(GradCheck, BiasDropoutAdd) {
  const DropoutSpec spec{0.25f, RngStream{3, 4}, 17};
  const auto x = random_vector(kN * kC, 12), b = random_vector(kC, 13), r = random_vector(kN * kC, 14);
  const auto dy = random_vector(kN * kC, 15);
  std::vector<float> dx(kN * kC), db(kC);
  ref::bias_dropout_add_backward(kKc, dx.data(), db.data(), dy.data(), kN, kC, spec);
  auto fwd = [&](const std::vector<float>& xx, const std::vector<float>& bb, const std::vector<float>& rr) {
    std::vector<float> out(kN * kC);
    ref::bias_dropout_add_forward(kKc, out.data(), xx.data(), bb.data(), rr.data(), kN, kC, spec);
    return out;
  };
  EXPECT_TRUE(check_gradient([&](const auto& v) { return fwd(v, b, r); }, x, dy, dx));
  EXPECT_TRUE(check_gradient([&](const auto& v) { return fwd(x, v, r); }, b, dy, db));
  EXPECT_TRUE(check_gradient([&](const auto& v) { return fwd(x, b, v); }, r, dy, dy));  // residual: identity
}

TEST(GradCheck, Embedding) {
  const int64_t N = 6, C = 4, V = 5;
  const std::vector<int32_t> ids = {0, 3, 3, 4, 1, 3};
  const auto wte = random_vector(V * C, 16), dy = random_vector(N * C, 17);
  std::vector<float> dw(V * C);
  ref::embedding_backward(kKc, dw.data(), dy.data(), ids.data(), 0, V, N, C);
  auto fwd = [&](const std::vector<float>& w) {
    std::vector<float> out(N * C);
    ref::embedding_forward(kKc, out.data(), ids.data(), w.data(), 0, V, N, C);
    return out;
  };
  EXPECT_TRUE(check_gradient(fwd, wte, dy, dw));
}

TEST(GradCheck, QkvSplitRope) {
  const int64_t T = 4, B = 2, NQ = 4, NKV = 2, D = 6, P = 8;
  const int64_t row = NKV * (NQ / NKV + 2) * D;
  const auto qkv = random_vector(T * B * row, 18);
  std::vector<float> cos(P * D / 2), sin(P * D / 2);
  for (int64_t i = 0; i < P * D / 2; ++i) {
    cos[i] = std::cos(0.3f * static_cast<float>(i));
    sin[i] = std::sin(0.3f * static_cast<float>(i));
  }
  const int64_t nq = B * NQ * T * D, nkv = B * NKV * T * D;
  const auto dout = random_vector(nq + 2 * nkv, 19);
  std::vector<float> dqkv(T * B * row);
  ref::qkv_split_rope_backward(kKc, dqkv.data(), dout.data(), dout.data() + nq, dout.data() + nq + nkv,
                               nullptr, cos.data(), sin.data(), T, B, NQ, NKV, D);
  auto fwd = [&](const std::vector<float>& x) {
    std::vector<float> out(nq + 2 * nkv);
    ref::qkv_split_rope_forward(kKc, out.data(), out.data() + nq, out.data() + nq + nkv, x.data(),
                                nullptr, cos.data(), sin.data(), T, B, NQ, NKV, D);
    return out;
  };
  EXPECT_TRUE(check_gradient(fwd, qkv, dout, dqkv));
}

TEST(GradCheck, SoftmaxCrossEntropy) {
  const int64_t N = 4, V = 9;
  const auto logits = random_vector(N * V, 20, 2.0f);
  const std::vector<int32_t> targets = {0, 8, 3, 3};
  const std::vector<float> scale = {1.0f, 0.5f, 0.0f, 2.0f};
  auto grad = logits;
  std::vector<float> losses(N);
  ref::softmax_cross_entropy(kKc, grad.data(), losses.data(), targets.data(), scale.data(), N, V, true);
  auto fwd = [&](const std::vector<float>& x) {
    auto l = x;
    std::vector<float> out(N);
    ref::softmax_cross_entropy(kKc, l.data(), out.data(), targets.data(), nullptr, N, V, false);
    return out;
  };
  EXPECT_TRUE(check_gradient(fwd, logits, scale, grad, 1e-3));
}

TEST(GradCheck, LinearThroughBlas) {
  const int64_t N = 4, IN = 5, OUT = 3;
  const auto x = random_vector(N * IN, 21), w = random_vector(OUT * IN, 22), b = random_vector(OUT, 23);
  const auto dy = random_vector(N * OUT, 24);
  std::vector<float> dx(N * IN), dw(OUT * IN), db(OUT);
  blas_linear_backward_input(kKc, dx.data(), dy.data(), w.data(), N, IN, OUT, false);
  blas_linear_backward_weight(kKc, dw.data(), db.data(), dy.data(), x.data(), N, IN, OUT);
  auto fwd = [&](const std::vector<float>& xx, const std::vector<float>& ww, const std::vector<float>& bb) {
    std::vector<float> out(N * OUT);
    blas_linear_forward(kKc, out.data(), xx.data(), ww.data(), bb.data(), N, IN, OUT);
    return out;
  };
  EXPECT_TRUE(check_gradient([&](const auto& v) { return fwd(v, w, b); }, x, dy, dx));
  EXPECT_TRUE(check_gradient([&](const auto& v) { return fwd(x, v, b); }, w, dy, dw));
  EXPECT_TRUE(check_gradient([&](const auto& v) { return fwd(x, w, v); }, b, dy, db));
}

}  // namespace
}  // namespace mindspeed
