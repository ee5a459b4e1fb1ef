// The CUDA optimizer kernels against their references (ref/adamw.cpp) on sizes that are not
// multiples of a block: AdamW and the EMA bit for bit (the reference's float operations in
// its order, none contracted), over several steps and hyperparameter sets, zero and
// clipped gradients included; the sum of squares within double reassociation.
#include <cmath>
#include <vector>

#include "cuda_test_util.h"

namespace mindspeed {
namespace {

using testing::CudaKernelTest;
using testing::DeviceBuffer;
using testing::kRefKc;
using testing::random_vector;

constexpr int64_t kSizes[] = {1, 7, 129, 4097, 100003};

struct AdamWHyper {
  float lr, beta1, beta2, eps, weight_decay, grad_scale;
};
constexpr AdamWHyper kHypers[] = {
    {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f},     // GPT pretraining, clipped gradient
    {3e-4f, 0.9f, 0.999f, 1e-6f, 0.0f, 1.0f},    // no weight decay
    {2.5e-2f, 0.8f, 0.99f, 1e-5f, 0.01f, 0.0f},  // a zero gradient (a skipped step's clip)
};

TEST_F(CudaKernelTest, AdamWIsBitIdenticalToTheReference) {
  for (const int64_t n : kSizes) {
    for (const AdamWHyper& hp : kHypers) {
      SCOPED_TRACE(::testing::Message() << "n " << n << ", lr " << hp.lr << ", beta2 " << hp.beta2);
      auto param = random_vector(n, 1), m = random_vector(n, 2, 0.01f),
           v = random_vector(n, 3, 0.01f);
      for (float& x : v) x = x * x;
      if (n > 3) {  // a zero second moment with a zero gradient: the denominator is eps
        v[1] = 0.0f;
        m[1] = 0.0f;
      }
      DeviceBuffer<float> dparam(param), dm(m), dv(v);
      for (int64_t step = 1; step <= 4; ++step) {
        auto grad = random_vector(n, 10 + static_cast<uint64_t>(step), 0.1f);
        if (n > 3) grad[1] = 0.0f;
        grad[0] = step == 2 ? 1e-20f : grad[0];  // a subnormal square (no flush to zero)
        DeviceBuffer<float> dgrad(grad);
        ref::adamw_step(kRefKc, param.data(), m.data(), v.data(), grad.data(), n, hp.lr, hp.beta1,
                        hp.beta2, hp.eps, hp.weight_decay, step, hp.grad_scale);
        k().adamw_step(kc(), dparam, dm, dv, dgrad, n, hp.lr, hp.beta1, hp.beta2, hp.eps,
                       hp.weight_decay, step, hp.grad_scale);
        ASSERT_EQ(dparam.download(), param) << "step " << step;
        ASSERT_EQ(dm.download(), m) << "step " << step;
        ASSERT_EQ(dv.download(), v) << "step " << step;
      }
    }
  }
}

// A late step (bias corrections near 1) and a large one.
TEST_F(CudaKernelTest, AdamWAtLateStepsIsBitIdentical) {
  const int64_t n = 1031;
  auto param = random_vector(n, 4), m = random_vector(n, 5, 0.01f), v = random_vector(n, 6, 0.01f);
  for (float& x : v) x = x * x;
  const auto grad = random_vector(n, 7, 0.05f);
  DeviceBuffer<float> dparam(param), dm(m), dv(v), dgrad(grad);
  for (const int64_t step : {int64_t{1000}, int64_t{123456789}}) {
    ref::adamw_step(kRefKc, param.data(), m.data(), v.data(), grad.data(), n, 6e-4f, 0.9f, 0.95f,
                    1e-8f, 0.1f, step, 1.0f);
    k().adamw_step(kc(), dparam, dm, dv, dgrad, n, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 1.0f);
    EXPECT_EQ(dparam.download(), param) << "step " << step;
    EXPECT_EQ(dm.download(), m) << "step " << step;
    EXPECT_EQ(dv.download(), v) << "step " << step;
  }
}

TEST_F(CudaKernelTest, EmaUpdateIsBitIdenticalToTheReference) {
  for (const int64_t n : kSizes) {
    SCOPED_TRACE(n);
    auto ema = random_vector(n, 8);
    const auto param = random_vector(n, 9);
    DeviceBuffer<float> dema(ema), dparam(param);
    for (const float decay : {0.99f, 0.9999f, 0.5f, 1.0f, 0.0f}) {
      ref::ema_update(kRefKc, ema.data(), param.data(), n, decay);
      k().ema_update(kc(), dema, dparam, n, decay);
      ASSERT_EQ(dema.download(), ema) << "decay " << decay;
    }
    EXPECT_EQ(ema, param);  // the last decay, 0, took the parameters
  }
}

TEST_F(CudaKernelTest, SumOfSquaresMatchesTheReference) {
  for (const int64_t n :
       {int64_t{1}, int64_t{7}, int64_t{129}, int64_t{4097}, int64_t{100003}, int64_t{3000017}}) {
    SCOPED_TRACE(n);
    auto x = random_vector(n, 11, 0.3f);
    x[0] = 1e-30f;                // the square underflows in float, not in double
    if (n > 1) x[n - 1] = 3e19f;  // overflows in float, not in double
    DeviceBuffer<float> dx(x);
    const double want = ref::sum_of_squares(kRefKc, x.data(), n);
    const double got = k().sum_of_squares(kc(), dx, n);
    EXPECT_NEAR(got, want, 1e-14 * std::fabs(want) * std::sqrt(static_cast<double>(n)));
    EXPECT_EQ(k().sum_of_squares(kc(), dx, n), got);  // deterministic
  }
  EXPECT_EQ(k().sum_of_squares(kc(), nullptr, 0), 0.0);
}

TEST_F(CudaKernelTest, OptimizerKernelsWithNoElementsAreNoOps) {
  DeviceBuffer<float> x(std::vector<float>{1.0f, 2.0f});
  k().adamw_step(kc(), x, x, x, x, 0, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.0f);
  k().ema_update(kc(), x, x, 0, 0.5f);
  EXPECT_EQ(x.download(), (std::vector<float>{1.0f, 2.0f}));
}

}  // namespace
}  // namespace mindspeed
