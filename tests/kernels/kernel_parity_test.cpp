// Every fast (cpu/) kernel against its reference (ref/) over shapes with odd sizes and
// vector tails. Tolerances are per op (ggml's max_nmse_err idea): exact where the fast
// kernel does the same arithmetic, a few ulps where it reassociates or uses the
// polynomial exp/erfc.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/kernels.h"
#include "test_util.h"

namespace mindspeed {
namespace {
using testing::kKc;

using testing::all_close;
using testing::random_vector;

class RowKernelTest : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  int64_t N() const { return std::get<0>(GetParam()); }
  int64_t C() const { return std::get<1>(GetParam()); }
};

TEST_P(RowKernelTest, LayerNorm) {
  const int64_t N = this->N(), C = this->C();
  const auto x = random_vector(N * C, 1, 2.0f, 0.5f), w = random_vector(C, 2), b = random_vector(C, 3);
  const auto dy = random_vector(N * C, 4);
  std::vector<float> y1(N * C), y2(N * C), m1(N), m2(N), r1(N), r2(N);
  ref::layer_norm_forward(kKc, y1.data(), m1.data(), r1.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
  cpu::layer_norm_forward(kKc, y2.data(), m2.data(), r2.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
  EXPECT_TRUE(all_close(y2, y1, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(m2, m1, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(r2, r1, 1e-5, 1e-6));
  std::vector<float> dx1(N * C, 0.5f), dx2(N * C, 0.5f), dw1(C, 0.1f), dw2(C, 0.1f), db1(C), db2(C);
  ref::layer_norm_backward(kKc, dx1.data(), dw1.data(), db1.data(), dy.data(), x.data(), w.data(),
                           m1.data(), r1.data(), N, C);
  cpu::layer_norm_backward(kKc, dx2.data(), dw2.data(), db2.data(), dy.data(), x.data(), w.data(),
                           m1.data(), r1.data(), N, C);
  EXPECT_TRUE(all_close(dx2, dx1, 1e-4, 1e-5));
  EXPECT_TRUE(all_close(dw2, dw1, 1e-4, 1e-5));
  EXPECT_TRUE(all_close(db2, db1, 1e-5, 1e-5));
}

TEST_P(RowKernelTest, RmsNorm) {
  const int64_t N = this->N(), C = this->C();
  const auto x = random_vector(N * C, 5), w = random_vector(C, 6), dy = random_vector(N * C, 7);
  std::vector<float> y1(N * C), y2(N * C), r1(N), r2(N);
  ref::rms_norm_forward(kKc, y1.data(), r1.data(), x.data(), w.data(), N, C, 1e-6f);
  cpu::rms_norm_forward(kKc, y2.data(), r2.data(), x.data(), w.data(), N, C, 1e-6f);
  EXPECT_TRUE(all_close(y2, y1, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(r2, r1, 1e-5, 1e-6));
  std::vector<float> dx1(N * C), dx2(N * C), dw1(C), dw2(C);
  ref::rms_norm_backward(kKc, dx1.data(), dw1.data(), dy.data(), x.data(), w.data(), r1.data(), N, C);
  cpu::rms_norm_backward(kKc, dx2.data(), dw2.data(), dy.data(), x.data(), w.data(), r1.data(), N, C);
  EXPECT_TRUE(all_close(dx2, dx1, 1e-4, 1e-5));
  EXPECT_TRUE(all_close(dw2, dw1, 1e-4, 1e-5));
}

TEST_P(RowKernelTest, Embedding) {
  const int64_t N = this->N(), C = this->C(), V = 11;
  std::vector<int32_t> ids(N);
  for (int64_t n = 0; n < N; ++n) ids[n] = static_cast<int32_t>((n * 7) % 15);  // some off-shard
  const auto wte = random_vector(V * C, 8), dy = random_vector(N * C, 9);
  std::vector<float> y1(N * C), y2(N * C);
  ref::embedding_forward(kKc, y1.data(), ids.data(), wte.data(), 2, V, N, C);
  cpu::embedding_forward(kKc, y2.data(), ids.data(), wte.data(), 2, V, N, C);
  EXPECT_EQ(y1, y2);
  std::vector<float> d1(V * C, 1.0f), d2(V * C, 1.0f);
  ref::embedding_backward(kKc, d1.data(), dy.data(), ids.data(), 2, V, N, C);
  cpu::embedding_backward(kKc, d2.data(), dy.data(), ids.data(), 2, V, N, C);
  EXPECT_EQ(d1, d2);  // same order of additions per element
}

TEST_P(RowKernelTest, GeluBothForms) {
  const int64_t n = this->N() * this->C();
  auto x = random_vector(n, 10, 3.0f);
  if (n > 2) x[0] = -12.0f, x[1] = 9.0f;
  const auto dy = random_vector(n, 11);
  for (auto approx : {GeluApproximation::kErf, GeluApproximation::kTanh}) {
    std::vector<float> y1(n), y2(n), d1(n), d2(n);
    ref::gelu_forward(kKc, y1.data(), x.data(), n, approx);
    cpu::gelu_forward(kKc, y2.data(), x.data(), n, approx);
    EXPECT_TRUE(all_close(y2, y1, 2e-6, 1e-7));
    ref::gelu_backward(kKc, d1.data(), dy.data(), x.data(), n, approx);
    cpu::gelu_backward(kKc, d2.data(), dy.data(), x.data(), n, approx);
    // GELU' = Phi + x phi cancels near x = -0.75; the fp32 result carries ~1e-7 absolute error.
    EXPECT_TRUE(all_close(d2, d1, 2e-6, 5e-7));
  }
}

TEST_P(RowKernelTest, SwiGlu) {
  const int64_t N = this->N(), F = this->C();
  const auto x = random_vector(N * 2 * F, 12, 2.0f), dy = random_vector(N * F, 13);
  std::vector<float> y1(N * F), y2(N * F), d1(N * 2 * F), d2(N * 2 * F);
  ref::swiglu_forward(kKc, y1.data(), x.data(), N, F);
  cpu::swiglu_forward(kKc, y2.data(), x.data(), N, F);
  EXPECT_TRUE(all_close(y2, y1, 2e-6, 1e-7));
  ref::swiglu_backward(kKc, d1.data(), dy.data(), x.data(), N, F);
  cpu::swiglu_backward(kKc, d2.data(), dy.data(), x.data(), N, F);
  EXPECT_TRUE(all_close(d2, d1, 2e-6, 1e-7));
}

TEST_P(RowKernelTest, BiasDropoutAddSameMaskAsReference) {
  const int64_t N = this->N(), C = this->C();
  const auto x = random_vector(N * C, 14), b = random_vector(C, 15), r = random_vector(N * C, 16);
  for (float p : {0.0f, 0.3f, 0.5f}) {
    DropoutSpec spec{p, RngStream{7, 99}, 1000};
    if (p == 0.5f) {  // [s, b, C] mapping with global sample and position indices
      spec.sbh_batch = N % 2 == 0 ? 2 : 1;
      spec.first_sample = 5;
      spec.seq_total = N / spec.sbh_batch + 3;
      spec.t_offset = 3;
    }
    std::vector<float> y1(N * C), y2(N * C);
    ref::bias_dropout_add_forward(kKc, y1.data(), x.data(), b.data(), r.data(), N, C, spec);
    cpu::bias_dropout_add_forward(kKc, y2.data(), x.data(), b.data(), r.data(), N, C, spec);
    EXPECT_TRUE(all_close(y2, y1, 1e-6, 1e-7));
    std::vector<float> d1(N * C), d2(N * C), db1(C), db2(C);
    ref::bias_dropout_add_backward(kKc, d1.data(), db1.data(), r.data(), N, C, spec);
    cpu::bias_dropout_add_backward(kKc, d2.data(), db2.data(), r.data(), N, C, spec);
    EXPECT_EQ(d1, d2);
    EXPECT_TRUE(all_close(db2, db1, 1e-5, 1e-6));
    std::vector<float> o1(N * C), o2(N * C);
    ref::dropout_forward(kKc, o1.data(), x.data(), N * C, spec);
    cpu::dropout_forward(kKc, o2.data(), x.data(), N * C, spec);
    EXPECT_EQ(o1, o2);
  }
}

TEST_P(RowKernelTest, SoftmaxCrossEntropy) {
  const int64_t N = this->N(), V = this->C() + 40;
  auto logits = random_vector(N * V, 17, 3.0f);
  std::vector<int32_t> targets(N);
  std::vector<float> scale(N);
  for (int64_t n = 0; n < N; ++n) {
    targets[n] = static_cast<int32_t>((n * 13) % V);
    scale[n] = n % 3 == 0 ? 0.0f : 0.25f;
  }
  for (bool grad : {false, true}) {
    auto g1 = logits, g2 = logits;
    std::vector<float> l1(N), l2(N);
    ref::softmax_cross_entropy(kKc, g1.data(), l1.data(), targets.data(), scale.data(), N, V, grad);
    cpu::softmax_cross_entropy(kKc, g2.data(), l2.data(), targets.data(), scale.data(), N, V, grad);
    EXPECT_TRUE(all_close(l2, l1, 1e-5, 1e-6));
    EXPECT_TRUE(all_close(g2, g1, 1e-5, 1e-7));
  }
}

TEST_P(RowKernelTest, AdamWAndSumOfSquares) {
  const int64_t n = this->N() * this->C();
  const auto g = random_vector(n, 18, 0.1f);
  auto p1 = random_vector(n, 19), m1 = random_vector(n, 20, 0.01f), v1 = random_vector(n, 21, 0.01f);
  for (float& x : v1) x = x * x;
  auto p2 = p1, m2 = m1, v2 = v1;
  for (int64_t step = 1; step <= 3; ++step) {
    ref::adamw_step(kKc, p1.data(), m1.data(), v1.data(), g.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.7f);
    cpu::adamw_step(kKc, p2.data(), m2.data(), v2.data(), g.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.7f);
  }
  EXPECT_TRUE(all_close(p2, p1, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(m2, m1, 1e-6, 1e-9));
  EXPECT_TRUE(all_close(v2, v1, 1e-6, 1e-12));
  EXPECT_NEAR(cpu::sum_of_squares(kKc, g.data(), n), ref::sum_of_squares(kKc, g.data(), n),
              1e-6 * ref::sum_of_squares(kKc, g.data(), n) + 1e-12);
}

TEST(ZeroCountFillAndStridedCopy, FastMatchesReference) {
  const int64_t n = 1003;  // a vector tail
  std::vector<float> x = random_vector(n, 31);
  for (int64_t i = 0; i < n; i += 7) x[i] = (i / 7) % 2 == 0 ? 0.0f : -0.0f;  // both zeros count
  EXPECT_EQ(cpu::count_zeros(kKc, x.data(), n), ref::count_zeros(kKc, x.data(), n));
  EXPECT_EQ(ref::count_zeros(kKc, x.data(), n), (n + 6) / 7);
  std::vector<float> f1(n, 1.0f), f2(n, 2.0f);
  ref::fill(kKc, f1.data(), -INFINITY, n);
  cpu::fill(kKc, f2.data(), -INFINITY, n);
  EXPECT_EQ(f2, f1);
  EXPECT_EQ(f1, std::vector<float>(n, -INFINITY));
  // 9 rows of 13 out of rows of 17 into rows of 21: the gaps between the blocks stay untouched.
  const int64_t rows = 9, width = 13, in_stride = 17, out_stride = 21;
  const std::vector<float> in = random_vector(rows * in_stride, 32);
  std::vector<float> o1(rows * out_stride, 5.0f), o2(rows * out_stride, 5.0f);
  ref::copy_2d(kKc, o1.data(), in.data(), rows, width, out_stride, in_stride);
  cpu::copy_2d(kKc, o2.data(), in.data(), rows, width, out_stride, in_stride);
  EXPECT_EQ(o2, o1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < out_stride; ++i) {
      ASSERT_EQ(o1[r * out_stride + i], i < width ? in[r * in_stride + i] : 5.0f) << r << "," << i;
    }
  }
}

TEST(EmaUpdate, FastMatchesReferenceAndFormula) {
  const int64_t n = 1003;  // a vector tail
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> e1(n), w(n);
  for (float& x : e1) x = u(rng);
  for (float& x : w) x = u(rng);
  auto e2 = e1;
  ref::ema_update(kKc, e1.data(), w.data(), n, 0.99f);
  cpu::ema_update(kKc, e2.data(), w.data(), n, 0.99f);
  EXPECT_TRUE(all_close(e2, e1, 1e-6, 1e-7));
  // s = d*s + (1-d)*w: at d = 0 the EMA is the weights, at d = 1 it does not move.
  auto keep = e1;
  cpu::ema_update(kKc, keep.data(), w.data(), n, 1.0f);
  EXPECT_EQ(keep, e1);
  cpu::ema_update(kKc, keep.data(), w.data(), n, 0.0f);
  EXPECT_EQ(keep, w);
}

TEST(AddIntoBf16, FastMatchesReferenceAndRoundsTheFp32Sum) {
  const int64_t n = 1003;  // a vector tail
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> start(n), x(n);
  for (float& v : start) v = u(rng);
  for (float& v : x) v = u(rng) * 1e-3f;
  std::vector<bf16> a1(n), a2(n);
  for (int64_t i = 0; i < n; ++i) a1[i] = a2[i] = float_to_bf16(start[i]);
  ref::add_into_bf16(kKc, a1.data(), x.data(), n);
  cpu::add_into_bf16(kKc, a2.data(), x.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(a2[i].bits, a1[i].bits) << i;
    // The fp32 sum of the accumulator and x, rounded to bf16 (nearest even).
    const float sum = bf16_to_float(float_to_bf16(start[i])) + x[i];
    ASSERT_EQ(a1[i].bits, float_to_bf16(sum).bits) << i;
  }
  // A tie rounds to even: 1 + 2^-8 lies halfway between bf16's 1 and 1 + 2^-7.
  bf16 one = float_to_bf16(1.0f);
  const float half_ulp = 1.0f / 256.0f;
  cpu::add_into_bf16(kKc, &one, &half_ulp, 1);
  EXPECT_EQ(bf16_to_float(one), 1.0f);
  EXPECT_NE(float_to_bf16(1.0f + 1.5f * half_ulp).bits, float_to_bf16(1.0f).bits);
}

TEST(Fp16Kernels, FastMatchesReferenceAndTheScalarConversions) {
  const int64_t n = 1003;  // a vector tail
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  std::vector<float> x(n), start(n);
  for (float& v : x) v = u(rng);
  for (float& v : start) v = u(rng);
  x[0] = 70000.0f;   // overflows to inf
  x[1] = 3e-6f;      // a subnormal
  x[2] = -65519.0f;  // rounds to -65504
  std::vector<fp16> h1(n), h2(n);
  ref::convert_to_fp16(kKc, h1.data(), x.data(), n);
  cpu::convert_to_fp16(kKc, h2.data(), x.data(), n);
  std::vector<float> w1(n), w2(n), r1 = x, r2 = x;
  ref::convert_fp16_to_fp32(kKc, w1.data(), h1.data(), n);
  cpu::convert_fp16_to_fp32(kKc, w2.data(), h2.data(), n);
  ref::round_to_fp16(kKc, r1.data(), n);
  cpu::round_to_fp16(kKc, r2.data(), n);
  std::vector<fp16> a1(n), a2(n);
  for (int64_t i = 0; i < n; ++i) a1[i] = a2[i] = float_to_fp16(start[i]);
  ref::add_into_fp16(kKc, a1.data(), x.data(), n);
  cpu::add_into_fp16(kKc, a2.data(), x.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(h1[i].bits, float_to_fp16(x[i]).bits) << i;
    ASSERT_EQ(h2[i].bits, h1[i].bits) << i;
    ASSERT_EQ(w2[i], w1[i]) << i;
    ASSERT_EQ(w1[i], fp16_to_float(h1[i])) << i;
    ASSERT_EQ(r2[i], r1[i]) << i;
    ASSERT_EQ(r1[i], w1[i]) << i;
    ASSERT_EQ(a2[i].bits, a1[i].bits) << i;
    ASSERT_EQ(a1[i].bits, float_to_fp16(fp16_to_float(float_to_fp16(start[i])) + x[i]).bits) << i;
  }
  EXPECT_TRUE(std::isinf(r1[0]));
  EXPECT_EQ(r1[2], -65504.0f);
  EXPECT_GT(r1[1], 0.0f);
}

TEST(Dropout, SequenceShardsReproduceTheWholeMask) {
  // [s=6, b=2, C=5]: the two halves of the sequence (as sequence parallelism splits it),
  // run with their t_offset, give exactly the rows of the whole.
  const int64_t T = 6, B = 2, C = 5, N = T * B;
  const auto x = random_vector(N * C, 30), r = random_vector(N * C, 31);
  DropoutSpec whole{0.4f, RngStream{1, 2}, 0, B, 7, T, 0};
  std::vector<float> y(N * C), half(N * C / 2);
  cpu::bias_dropout_add_forward(kKc, y.data(), x.data(), nullptr, r.data(), N, C, whole);
  for (int64_t shard = 0; shard < 2; ++shard) {
    DropoutSpec part = whole;
    part.t_offset = shard * T / 2;
    const int64_t off = shard * N * C / 2;
    cpu::bias_dropout_add_forward(kKc, half.data(), x.data() + off, nullptr, r.data() + off, N / 2, C, part);
    for (int64_t i = 0; i < N * C / 2; ++i) EXPECT_EQ(half[i], y[off + i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RowKernelTest,
                         ::testing::Combine(::testing::Values(1, 7, 64),
                                            ::testing::Values(1, 13, 64, 77)));

class RopeTest : public ::testing::TestWithParam<std::tuple<int, int, bool, bool>> {};

TEST_P(RopeTest, QkvSplitRopeMatchesReference) {
  const auto [nq, nkv, with_rope, with_pos] = GetParam();
  const int64_t T = 9, B = 2, D = 20, P = 32;
  const int64_t G = nq / nkv, row = nkv * (G + 2) * D;
  const auto qkv = random_vector(T * B * row, 22);
  const auto cos = random_vector(P * D / 2, 23), sin = random_vector(P * D / 2, 24);
  std::vector<int32_t> pos(B * T);
  for (int64_t i = 0; i < B * T; ++i) pos[i] = static_cast<int32_t>((i * 5) % P);
  const float* c = with_rope ? cos.data() : nullptr;
  const float* s = with_rope ? sin.data() : nullptr;
  const int32_t* p = with_pos ? pos.data() : nullptr;
  std::vector<float> q1(B * nq * T * D), k1(B * nkv * T * D), v1(B * nkv * T * D);
  auto q2 = q1, k2 = k1, v2 = v1;
  ref::qkv_split_rope_forward(kKc, q1.data(), k1.data(), v1.data(), qkv.data(), p, c, s, T, B, nq, nkv, D);
  cpu::qkv_split_rope_forward(kKc, q2.data(), k2.data(), v2.data(), qkv.data(), p, c, s, T, B, nq, nkv, D);
  EXPECT_TRUE(all_close(q2, q1, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(k2, k1, 1e-6, 1e-6));
  EXPECT_EQ(v1, v2);
  std::vector<float> d1(T * B * row), d2(T * B * row);
  ref::qkv_split_rope_backward(kKc, d1.data(), q1.data(), k1.data(), v1.data(), p, c, s, T, B, nq, nkv, D);
  cpu::qkv_split_rope_backward(kKc, d2.data(), q1.data(), k1.data(), v1.data(), p, c, s, T, B, nq, nkv, D);
  EXPECT_TRUE(all_close(d2, d1, 1e-6, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Layouts, RopeTest,
                         ::testing::Values(std::make_tuple(4, 4, true, false),
                                           std::make_tuple(4, 2, true, true),
                                           std::make_tuple(6, 1, true, true),
                                           std::make_tuple(3, 3, false, false)));

TEST(Rope, RotationWithUnitCosIsIdentityAndInverseRestores) {
  // cos = 1, sin = 0 must leave q/k untouched; backward of forward restores the input for
  // a proper rotation table (cos^2 + sin^2 = 1).
  const int64_t T = 5, B = 1, NQ = 2, NKV = 2, D = 8, P = 8;
  const auto qkv = random_vector(T * B * NKV * 3 * D, 25);
  std::vector<float> cos(P * D / 2), sin(P * D / 2);
  for (int64_t i = 0; i < P * D / 2; ++i) {
    cos[i] = std::cos(0.1f * static_cast<float>(i));
    sin[i] = std::sin(0.1f * static_cast<float>(i));
  }
  std::vector<float> q(B * NQ * T * D), k(B * NKV * T * D), v(B * NKV * T * D), back(qkv.size());
  ref::qkv_split_rope_forward(kKc, q.data(), k.data(), v.data(), qkv.data(), nullptr, cos.data(), sin.data(), T, B, NQ, NKV, D);
  ref::qkv_split_rope_backward(kKc, back.data(), q.data(), k.data(), v.data(), nullptr, cos.data(), sin.data(), T, B, NQ, NKV, D);
  EXPECT_TRUE(all_close(back, qkv, 1e-5, 1e-6));
}

}  // namespace
}  // namespace mindspeed

namespace mindspeed {
namespace {

// Megatron's --no-*-fusion flags select the unfused reference kernel of their op, and only
// that op's, while the fast kernels stay for the rest (MindSpeed's --use-fused-* turn the
// fused ones on below level 1).
TEST(KernelTable, MegatronNoFusionFlagsSelectTheUnfusedKernelOfTheirOpOnly) {
  if (!cpu::cpu_kernels_supported()) GTEST_SKIP() << "no fast kernels on this CPU";
  const KernelTable fast = select_kernels(KernelOptions{.fast = true});
  EXPECT_EQ(fast.gelu_forward, &cpu::gelu_forward);
  EXPECT_EQ(fast.layer_norm_forward, &cpu::layer_norm_forward);
  const KernelTable t = select_kernels(KernelOptions{.fast = true, .unfused_bias_gelu = true});
  EXPECT_EQ(t.gelu_forward, &ref::gelu_forward);
  EXPECT_EQ(t.gelu_backward, &ref::gelu_backward);
  EXPECT_EQ(t.swiglu_forward, &cpu::swiglu_forward);
  EXPECT_EQ(t.layer_norm_forward, &cpu::layer_norm_forward);
  EXPECT_EQ(t.unfused_ops, "gelu");
  EXPECT_EQ(fast.unfused_ops, "");
  EXPECT_EQ(select_kernels(KernelOptions{.fast = true, .unfused_bias_swiglu = true}).swiglu_backward,
            &ref::swiglu_backward);
  const KernelTable dropout = select_kernels(KernelOptions{.fast = true, .unfused_bias_dropout = true});
  EXPECT_EQ(dropout.bias_dropout_add_forward, &ref::bias_dropout_add_forward);
  EXPECT_EQ(dropout.dropout_backward, &ref::dropout_backward);
  EXPECT_EQ(select_kernels(KernelOptions{.fast = true, .unfused_rope = true}).qkv_split_rope_forward,
            &ref::qkv_split_rope_forward);
  EXPECT_EQ(select_kernels(KernelOptions{.fast = true, .unpersisted_layer_norm = true}).layer_norm_backward,
            &ref::layer_norm_backward);
  // The non-flash attention unfused; flash attention keeps the fast kernel and its workspace.
  const KernelTable softmax =
      select_kernels(KernelOptions{.fast = true, .flash_attention = true, .unfused_masked_softmax = true});
  EXPECT_EQ(softmax.core_attention_forward, &ref::core_attention_forward);
  EXPECT_EQ(softmax.flash_attention_forward, &cpu::flash_attention_forward);
  AttentionDims d;
  d.B = 2;
  d.NQ = 4;
  d.NKV = 4;
  d.T = 64;
  d.D = 16;
  for (bool backward : {false, true}) {
    EXPECT_EQ(softmax.attention_workspace_floats(kKc, d, AttentionKernel::kCore, backward),
              ref::attention_workspace_floats(kKc, d, AttentionKernel::kCore, backward));
    EXPECT_EQ(softmax.attention_workspace_floats(kKc, d, AttentionKernel::kFlash, backward),
              cpu::attention_workspace_floats(kKc, d, AttentionKernel::kFlash, backward));
  }
}

}  // namespace
}  // namespace mindspeed
