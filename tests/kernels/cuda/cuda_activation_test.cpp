// The CUDA GELU (both forms) and SwiGLU kernels against their references (ref/activation.cpp)
// on sizes that are not multiples of a block, with the values where the math is delicate:
// GELU' = Phi + x phi cancels near x = -0.75, the tails (+-9, -12, +-30, +-1e4) where erfc
// underflows or tanh saturates, zeros; SwiGLU gates whose exp overflows (-800). The device
// computes the reference's double expressions, so each result is within a few ulps (the
// device's erfc / tanh / exp against glibc's, then one rounding to float). SwiGLU with more
// rows than a grid's y dimension holds (65535). Outputs ("=") start poisoned (NaN). The
// absolute tolerance (1e-12) is the reference's own precision where a term cancels in double
// (1 + tanh(u) in the tanh form's tail is ~1e-16 absolute).
#include <cmath>
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

/// The backend's stream is non-blocking: let the uploads and poisoning (legacy stream) land
/// before a kernel reads or writes the buffers.
void settle() { MS_CUDA_CHECK(cudaDeviceSynchronize()); }

std::vector<float> with_special_values(int64_t n, uint64_t stream, float std) {
  std::vector<float> v = random_vector(n, stream, std);
  const float special[] = {-0.75f, 0.0f, -0.0f, 9.0f,        -12.0f, 30.0f,
                           -30.0f, 1e4f, -1e4f, -0.7517916f, 1e-20f};
  for (size_t i = 0; i < std::size(special) && i < v.size(); ++i) v[i * 5 % v.size()] = special[i];
  return v;
}

TEST_F(CudaKernelTest, GeluBothFormsMatchTheReference) {
  for (const int64_t n : {int64_t{1}, int64_t{31}, int64_t{257}, int64_t{100003}}) {
    const auto x = with_special_values(n, 1, 3.0f), dy = random_vector(n, 2);
    DeviceBuffer<float> dx(x), ddy(dy);
    for (const auto approx : {GeluApproximation::kErf, GeluApproximation::kTanh}) {
      SCOPED_TRACE(::testing::Message()
                   << "n " << n << ", tanh " << (approx == GeluApproximation::kTanh));
      std::vector<float> y(n), d(n);
      ref::gelu_forward(kRefKc, y.data(), x.data(), n, approx);
      ref::gelu_backward(kRefKc, d.data(), dy.data(), x.data(), n, approx);
      auto got_y = poisoned<float>(n), got_d = poisoned<float>(n);
      settle();
      k().gelu_forward(kc(), got_y, dx, n, approx);
      k().gelu_backward(kc(), got_d, ddy, dx, n, approx);
      EXPECT_TRUE(all_close(got_y.download(), y, 1e-6, 1e-12));
      EXPECT_TRUE(all_close(got_d.download(), d, 1e-6, 1e-12));
    }
  }
}

TEST_F(CudaKernelTest, SwigluMatchesTheReference) {
  struct Shape {
    int64_t N, F;
  };
  for (const Shape s :
       {Shape{1, 1}, Shape{7, 33}, Shape{129, 1000}, Shape{3, 4097}, Shape{66000, 3}}) {
    SCOPED_TRACE(::testing::Message() << "N " << s.N << ", F " << s.F);
    const int64_t N = s.N, F = s.F;
    auto x = random_vector(N * 2 * F, 3, 2.0f);
    const float gates[] = {-800.0f, -30.0f, 0.0f, 30.0f, -0.75f};
    for (size_t i = 0; i < std::size(gates) && static_cast<int64_t>(i) < N; ++i)
      x[i * 2 * F] = gates[i];
    const auto dy = random_vector(N * F, 4);
    std::vector<float> y(N * F), d(N * 2 * F);
    ref::swiglu_forward(kRefKc, y.data(), x.data(), N, F);
    ref::swiglu_backward(kRefKc, d.data(), dy.data(), x.data(), N, F);
    DeviceBuffer<float> dx(x), ddy(dy);
    auto got_y = poisoned<float>(N * F), got_d = poisoned<float>(N * 2 * F);
    settle();
    k().swiglu_forward(kc(), got_y, dx, N, F);
    k().swiglu_backward(kc(), got_d, ddy, dx, N, F);
    EXPECT_TRUE(all_close(got_y.download(), y, 1e-6, 1e-12));
    EXPECT_TRUE(all_close(got_d.download(), d, 1e-6, 1e-12));
  }
}

TEST_F(CudaKernelTest, ActivationsWithNoElementsAreNoOps) {
  settle();
  k().gelu_forward(kc(), nullptr, nullptr, 0, GeluApproximation::kErf);
  k().gelu_backward(kc(), nullptr, nullptr, nullptr, 0, GeluApproximation::kTanh);
  k().swiglu_forward(kc(), nullptr, nullptr, 0, 8);
  k().swiglu_backward(kc(), nullptr, nullptr, nullptr, 0, 8);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace mindspeed
