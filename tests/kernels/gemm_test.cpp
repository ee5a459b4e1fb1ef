// The BLAS wrapper against a naive triple loop: every transpose combination, odd sizes,
// leading dimensions larger than the row, beta = 0 and 1; and the linear-layer helpers.
#include "kernels/blas/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "kernels/backend.h"
#include "test_util.h"

namespace mindspeed {
namespace {
using testing::kKc;

using testing::all_close;
using testing::random_vector;

class GemmTest : public ::testing::TestWithParam<std::tuple<bool, bool, int, int, int>> {};

TEST_P(GemmTest, MatchesReference) {
  const auto [ta, tb, M, N, K] = GetParam();
  const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
  const auto A = random_vector((ta ? K : M) * lda, 1);
  const auto B = random_vector((tb ? N : K) * ldb, 2);
  for (float beta : {0.0f, 1.0f}) {
    auto C = random_vector(M * ldc, 3);
    auto C_ref = C;
    gemm(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
    gemm_reference(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, beta, C_ref.data(), ldc);
    EXPECT_TRUE(all_close(C, C_ref, 1e-5, 1e-5)) << "beta " << beta;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(1, 17), ::testing::Values(5, 33),
                                            ::testing::Values(1, 9, 64)));

TEST(Linear, ForwardAndBackwardFollowTheirFormulas) {
  const int64_t N = 13, IN = 11, OUT = 7;
  const auto x = random_vector(N * IN, 4), w = random_vector(OUT * IN, 5), b = random_vector(OUT, 6);
  const auto dy = random_vector(N * OUT, 7);
  std::vector<float> y(N * OUT), y_ref(N * OUT);
  blas_linear_forward(kKc, y.data(), x.data(), w.data(), b.data(), N, IN, OUT);
  gemm_reference(false, true, N, OUT, IN, 1.0f, x.data(), IN, w.data(), IN, 0.0f, y_ref.data(), OUT);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OUT; ++o) y_ref[n * OUT + o] += b[o];
  EXPECT_TRUE(all_close(y, y_ref, 1e-5, 1e-5));

  // dweight and dbias accumulate into what is there (+=).
  std::vector<float> dw(OUT * IN, 1.0f), db(OUT, 2.0f), dw_ref(OUT * IN, 1.0f), db_ref(OUT, 2.0f);
  blas_linear_backward_weight(kKc, dw.data(), db.data(), dy.data(), x.data(), N, IN, OUT);
  gemm_reference(true, false, OUT, IN, N, 1.0f, dy.data(), OUT, x.data(), IN, 1.0f, dw_ref.data(), IN);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OUT; ++o) db_ref[o] += dy[n * OUT + o];
  EXPECT_TRUE(all_close(dw, dw_ref, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(db, db_ref, 1e-5, 1e-5));

  std::vector<float> dx(N * IN, 3.0f), dx_ref(N * IN, 3.0f);
  blas_linear_backward_input(kKc, dx.data(), dy.data(), w.data(), N, IN, OUT, /*accumulate=*/true);
  gemm_reference(false, false, N, IN, OUT, 1.0f, dy.data(), OUT, w.data(), IN, 1.0f, dx_ref.data(), IN);
  EXPECT_TRUE(all_close(dx, dx_ref, 1e-5, 1e-5));
  blas_linear_backward_input(kKc, dx.data(), dy.data(), w.data(), N, IN, OUT, /*accumulate=*/false);
  gemm_reference(false, false, N, IN, OUT, 1.0f, dy.data(), OUT, w.data(), IN, 0.0f, dx_ref.data(), IN);
  EXPECT_TRUE(all_close(dx, dx_ref, 1e-5, 1e-5));
}

// The start-up GEMM rate (the MFU peak on a GPU) on the CPU backend: a positive, finite rate
// from the timed calls, and the allocator given back what it lent.
TEST(GemmRate, MeasuredThroughTheKernelTableIsAPositiveRate) {
  Allocator alloc;
  const Backend cpu = select_backend(KernelOptions{}, 1);
  const double tflops = measure_gemm_tflops(cpu, alloc, 96, 3);
  EXPECT_GT(tflops, 0.0);
  EXPECT_TRUE(std::isfinite(tflops));
  EXPECT_EQ(alloc.stats().total_current, 0);
  EXPECT_GT(alloc.stats().peak_of(MemoryCategory::kWorkspace), 3 * 96 * 96 * 4 - 1);
}

}  // namespace
}  // namespace mindspeed
