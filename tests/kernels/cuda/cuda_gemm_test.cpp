// The CUDA GEMMs (cuBLASLt, fp32 without TF32) against the reference's BLAS on odd shapes:
// linear forward with and without a bias, backward input overwriting and accumulating,
// backward weight accumulating with the bias gradient (bit-identical: the CPU's order of
// additions per column); the grouped GEMMs with empty groups; with TF32 allowed, the products
// within TF32's rounding; with bf16 inputs (--bf16), the products of the bf16-rounded inputs.
#include "cuda_test_util.h"

namespace mindspeed {
namespace {

using testing::CudaKernelTest;
using testing::DeviceBuffer;
using testing::kRefKc;
using testing::normwise_error;
using testing::poisoned;
using testing::random_vector;

struct Shape3 {
  int64_t N, IN, OUT;
};
constexpr Shape3 kShapes[] = {{1, 1, 1}, {7, 33, 5}, {129, 65, 257}, {300, 1000, 97}};

TEST_F(CudaKernelTest, LinearForwardAndBackwardEqualBlas) {
  for (const Shape3 s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.N << " x " << s.IN << " -> " << s.OUT);
    const auto x = random_vector(s.N * s.IN, 1), w = random_vector(s.OUT * s.IN, 2),
               b = random_vector(s.OUT, 3);
    const auto dy = random_vector(s.N * s.OUT, 4);
    DeviceBuffer<float> dx_in(x), dw_in(w), db_in(b), ddy(dy);
    for (const bool with_bias : {false, true}) {
      std::vector<float> want(s.N * s.OUT);
      ref::linear_forward(kRefKc, want.data(), x.data(), w.data(), with_bias ? b.data() : nullptr,
                          s.N, s.IN, s.OUT);
      auto out = poisoned<float>(want.size());
      k().linear_forward(kc(), out, dx_in, dw_in, with_bias ? db_in.get() : nullptr, s.N, s.IN,
                         s.OUT);
      EXPECT_LE(normwise_error(out.download(), want), 1e-5) << "bias " << with_bias;
    }
    for (const bool accumulate : {false, true}) {
      const auto seed = random_vector(s.N * s.IN, 5);
      std::vector<float> want = seed;
      ref::linear_backward_input(kRefKc, want.data(), dy.data(), w.data(), s.N, s.IN, s.OUT,
                                 accumulate);
      DeviceBuffer<float> dinp(seed);
      if (!accumulate) dinp.poison();
      k().linear_backward_input(kc(), dinp, ddy, dw_in, s.N, s.IN, s.OUT, accumulate);
      EXPECT_LE(normwise_error(dinp.download(), want), 1e-5) << "accumulate " << accumulate;
    }
    const auto dw_seed = random_vector(s.OUT * s.IN, 6), db_seed = random_vector(s.OUT, 7);
    std::vector<float> want_dw = dw_seed, want_db = db_seed;
    ref::linear_backward_weight(kRefKc, want_dw.data(), want_db.data(), dy.data(), x.data(), s.N,
                                s.IN, s.OUT);
    DeviceBuffer<float> ddw(dw_seed), ddb(db_seed);
    k().linear_backward_weight(kc(), ddw, ddb, ddy, dx_in, s.N, s.IN, s.OUT);
    EXPECT_LE(normwise_error(ddw.download(), want_dw), 1e-5);
    EXPECT_EQ(ddb.download(), want_db);  // rows added in order per column, as the CPU does
  }
}

TEST_F(CudaKernelTest, GroupedGemmsEqualTheReferenceWithEmptyGroups) {
  const int64_t N = 48, K = 33;
  const std::vector<int64_t> counts = {5, 0, 17, 1, 0, 9};
  const int64_t G = static_cast<int64_t>(counts.size());
  int64_t M = 0;
  for (int64_t c : counts) M += c;
  const auto x = random_vector(M * K, 8), dout = random_vector(M * N, 9);
  std::vector<std::vector<float>> w(G);
  std::vector<DeviceBuffer<float>> dw_dev;
  std::vector<const float*> w_host, w_dev;
  for (int64_t g = 0; g < G; ++g) {
    w[g] = random_vector(N * K, 10 + g);
    dw_dev.emplace_back(w[g]);
    w_host.push_back(w[g].data());
    w_dev.push_back(dw_dev.back().get());
  }
  DeviceBuffer<float> dx(x), ddout(dout);
  std::vector<float> want(M * N);
  ref::grouped_gemm_forward(kRefKc, want.data(), x.data(), w_host.data(), counts.data(), G, N, K);
  auto out = poisoned<float>(want.size());
  k().grouped_gemm_forward(kc(), out, dx, w_dev.data(), counts.data(), G, N, K);
  EXPECT_LE(normwise_error(out.download(), want), 1e-5);
  std::vector<float> want_dx(M * K);
  ref::grouped_gemm_backward_input(kRefKc, want_dx.data(), dout.data(), w_host.data(),
                                   counts.data(), G, N, K);
  auto got_dx = poisoned<float>(want_dx.size());
  k().grouped_gemm_backward_input(kc(), got_dx, ddout, w_dev.data(), counts.data(), G, N, K);
  EXPECT_LE(normwise_error(got_dx.download(), want_dx), 1e-5);
  // dw += dout_g^T x_g; empty groups keep their gradient.
  std::vector<std::vector<float>> grads(G);
  std::vector<DeviceBuffer<float>> grads_dev;
  std::vector<float*> grads_host, grads_ptr;
  for (int64_t g = 0; g < G; ++g) {
    grads[g] = random_vector(N * K, 20 + g);
    grads_dev.emplace_back(grads[g]);
    grads_host.push_back(grads[g].data());
    grads_ptr.push_back(grads_dev.back().get());
  }
  ref::grouped_gemm_backward_weight(kRefKc, grads_host.data(), dout.data(), x.data(), counts.data(),
                                    G, N, K);
  k().grouped_gemm_backward_weight(kc(), grads_ptr.data(), ddout, dx, counts.data(), G, N, K);
  for (int64_t g = 0; g < G; ++g) {
    const auto got = grads_dev[g].download();
    if (counts[g] == 0) {
      EXPECT_EQ(got, grads[g]) << "group " << g << " is empty";
    } else {
      EXPECT_LE(normwise_error(got, grads[g]), 1e-5) << "group " << g;
    }
  }
}

TEST_F(CudaKernelTest, Tf32IsOffByDefaultAndWithinItsRoundingWhenAllowed) {
  auto tf32 = select_cuda_backend(KernelOptions{}, CudaOptions{.allow_tf32 = true});
  ASSERT_TRUE(tf32.ok()) << tf32.status().to_string();
  const int64_t N = 256, IN = 512, OUT = 256;
  const auto x = random_vector(N * IN, 30), w = random_vector(OUT * IN, 31);
  std::vector<float> want(N * OUT);
  ref::linear_forward(kRefKc, want.data(), x.data(), w.data(), nullptr, N, IN, OUT);
  DeviceBuffer<float> dx(x), dw(w);
  auto exact = poisoned<float>(want.size()), fast = poisoned<float>(want.size());
  k().linear_forward(kc(), exact, dx, dw, nullptr, N, IN, OUT);
  tf32->kernels.linear_forward(tf32->context, fast, dx, dw, nullptr, N, IN, OUT);
  const double exact_error = normwise_error(exact.download(), want),
               fast_error = normwise_error(fast.download(), want);
  EXPECT_LE(exact_error, 1e-5);
  EXPECT_LE(fast_error, 5e-3);  // 10-bit mantissa products
  EXPECT_GT(fast_error, exact_error) << "TF32 allowed but the product is fp32-exact: is it used?";
}

TEST_F(CudaKernelTest, Bf16InputsAreTheBf16RoundedProductsAccumulatedInFp32) {
  auto bf16 = select_cuda_backend(KernelOptions{}, CudaOptions{.bf16_gemm_inputs = true});
  ASSERT_TRUE(bf16.ok()) << bf16.status().to_string();
  const KernelTable& k16 = bf16->kernels;
  const KernelContext& kc16 = bf16->context;
  for (const Shape3 s : kShapes) {
    SCOPED_TRACE(::testing::Message() << s.N << " x " << s.IN << " -> " << s.OUT);
    const auto x = random_vector(s.N * s.IN, 40), w = random_vector(s.OUT * s.IN, 41),
               b = random_vector(s.OUT, 42), dy = random_vector(s.N * s.OUT, 43);
    // The reference on the inputs rounded as the GPU rounds them.
    auto rounded = [](std::vector<float> v) {
      ref::round_to_bf16(kRefKc, v.data(), static_cast<int64_t>(v.size()));
      return v;
    };
    const auto x16 = rounded(x), w16 = rounded(w), dy16 = rounded(dy);
    DeviceBuffer<float> dx(x), dw(w), db(b), ddy(dy);
    std::vector<float> want(s.N * s.OUT);
    ref::linear_forward(kRefKc, want.data(), x16.data(), w16.data(), b.data(), s.N, s.IN, s.OUT);
    auto out = poisoned<float>(want.size());
    k16.linear_forward(kc16, out, dx, dw, db, s.N, s.IN, s.OUT);
    EXPECT_LE(normwise_error(out.download(), want), 1e-5);
    std::vector<float> want_dx(s.N * s.IN);
    ref::linear_backward_input(kRefKc, want_dx.data(), dy16.data(), w16.data(), s.N, s.IN, s.OUT,
                               false);
    auto got_dx = poisoned<float>(want_dx.size());
    k16.linear_backward_input(kc16, got_dx, ddy, dw, s.N, s.IN, s.OUT, false);
    EXPECT_LE(normwise_error(got_dx.download(), want_dx), 1e-5);
    const auto dw_seed = random_vector(s.OUT * s.IN, 44);
    std::vector<float> want_dw = dw_seed;
    ref::linear_backward_weight(kRefKc, want_dw.data(), nullptr, dy16.data(), x16.data(), s.N, s.IN,
                                s.OUT);
    DeviceBuffer<float> got_dw(dw_seed);  // accumulated in fp32 onto the fp32 gradient
    k16.linear_backward_weight(kc16, got_dw, nullptr, ddy, dx, s.N, s.IN, s.OUT);
    EXPECT_LE(normwise_error(got_dw.download(), want_dw), 1e-5);
  }
  // Against the fp32 product the rounding shows: bf16 inputs are really used.
  const int64_t N = 64, IN = 256, OUT = 64;
  const auto x = random_vector(N * IN, 45), w = random_vector(OUT * IN, 46);
  std::vector<float> exact(N * OUT);
  ref::linear_forward(kRefKc, exact.data(), x.data(), w.data(), nullptr, N, IN, OUT);
  DeviceBuffer<float> dx(x), dw(w);
  auto out = poisoned<float>(exact.size());
  k16.linear_forward(kc16, out, dx, dw, nullptr, N, IN, OUT);
  const double error = normwise_error(out.download(), exact);
  EXPECT_GT(error, 1e-4);
  EXPECT_LT(error, 1e-2);
}

}  // namespace
}  // namespace mindspeed
