// The CUDA LayerNorm and RMSNorm kernels against their references (ref/normalization.cpp) on
// odd shapes: rows not a multiple of the reduction's blocks (N up to 600 > its 512 row slices),
// widths from 1 to 13000 (the per-block gradient sums in shared memory and, past 12288 floats,
// in global memory; the partial buffer in the backend's scratch and in stream-ordered memory).
// The device does the reference's double arithmetic, so outputs, statistics and dinp agree to
// an ulp or so; the weight and bias gradients are float sums over the rows in another order
// (the reference's is sequential), held to 1e-5 of the sum of the magnitudes of their terms.
// Outputs start poisoned (NaN); the accumulating ones (dinp, dweight, dbias) start nonzero.
// The backward is run twice: bit-identical results (no atomics).
#include <algorithm>
#include <cmath>
#include <cstring>
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

struct Shape {
  int64_t N, C;
};
constexpr Shape kShapes[] = {{1, 1},    {7, 1},     {7, 33},     {129, 1000}, {600, 33},
                             {1, 4097}, {33, 4097}, {600, 1000}, {600, 7000}, {5, 13000}};

/// The backend's stream is non-blocking: let the uploads and poisoning (legacy stream) land
/// before a kernel reads or writes the buffers.
void settle() { MS_CUDA_CHECK(cudaDeviceSynchronize()); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// A column sum over the rows, float in some order: |got - want| <= tol * scale[c], scale the
/// sum of the magnitudes of the column's terms (the initial value included).
::testing::AssertionResult sums_close(const std::vector<float>& got, const std::vector<float>& want,
                                      const std::vector<double>& scale, double tol) {
  for (size_t c = 0; c < want.size(); ++c) {
    const double diff = std::fabs(static_cast<double>(got[c]) - want[c]);
    if (!(diff <= tol * scale[c] + 1e-30)) {
      return ::testing::AssertionFailure() << "column " << c << ": " << got[c] << " vs expected "
                                           << want[c] << " (sum of magnitudes " << scale[c] << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<float> plus(std::vector<float> v, float a) {
  for (float& x : v) x += a;
  return v;
}

TEST_F(CudaKernelTest, LayerNormMatchesTheReference) {
  for (const Shape& s : kShapes) {
    for (const bool with_bias : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "N " << s.N << ", C " << s.C << ", bias " << with_bias);
      const int64_t N = s.N, C = s.C;
      const auto x = random_vector(N * C, 1, 2.0f, 0.5f), w = random_vector(C, 2),
                 b = random_vector(C, 3);
      const auto dy = random_vector(N * C, 4);
      const float* bias = with_bias ? b.data() : nullptr;
      // Forward.
      std::vector<float> y(N * C), mean(N), rstd(N);
      ref::layer_norm_forward(kRefKc, y.data(), mean.data(), rstd.data(), x.data(), w.data(), bias,
                              N, C, 1e-5f);
      DeviceBuffer<float> dx_in(x), dw(w), db(b), ddy(dy);
      auto dy_out = poisoned<float>(N * C), dmean = poisoned<float>(N), drstd = poisoned<float>(N);
      settle();
      k().layer_norm_forward(kc(), dy_out, dmean, drstd, dx_in, dw, with_bias ? db.get() : nullptr,
                             N, C, 1e-5f);
      EXPECT_TRUE(all_close(dy_out.download(), y, 1e-6, 1e-6));
      EXPECT_TRUE(all_close(dmean.download(), mean, 1e-6, 1e-7));
      EXPECT_TRUE(all_close(drstd.download(), rstd, 1e-6, 1e-7));
      // Backward from the reference's statistics, into nonzero gradients.
      const auto dinp0 = plus(random_vector(N * C, 5, 0.5f), 0.5f);
      const auto dweight0 = random_vector(C, 6), dbias0 = random_vector(C, 7);
      std::vector<float> dinp = dinp0, dweight = dweight0, dbias = dbias0;
      ref::layer_norm_backward(kRefKc, dinp.data(), dweight.data(),
                               with_bias ? dbias.data() : nullptr, dy.data(), x.data(), w.data(),
                               mean.data(), rstd.data(), N, C);
      std::vector<double> w_scale(C), b_scale(C);
      for (int64_t c = 0; c < C; ++c)
        w_scale[c] = std::fabs(dweight0[c]), b_scale[c] = std::fabs(dbias0[c]);
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t c = 0; c < C; ++c) {
          const double norm = (x[n * C + c] - static_cast<double>(mean[n])) * rstd[n];
          w_scale[c] += std::fabs(norm * dy[n * C + c]);
          b_scale[c] += std::fabs(dy[n * C + c]);
        }
      }
      DeviceBuffer<float> dmean_ref(mean), drstd_ref(rstd);
      std::vector<float> first_dinp, first_dweight, first_dbias;
      for (int run = 0; run < 2; ++run) {
        DeviceBuffer<float> ddinp(dinp0), ddweight(dweight0), ddbias(dbias0);
        settle();
        k().layer_norm_backward(kc(), ddinp, ddweight, with_bias ? ddbias.get() : nullptr, ddy,
                                dx_in, dw, dmean_ref, drstd_ref, N, C);
        const auto got_dinp = ddinp.download(), got_dweight = ddweight.download(),
                   got_dbias = ddbias.download();
        if (run == 0) {
          EXPECT_TRUE(all_close(got_dinp, dinp, 1e-6, 1e-6));
          EXPECT_TRUE(sums_close(got_dweight, dweight, w_scale, 1e-5));
          if (with_bias) {
            EXPECT_TRUE(sums_close(got_dbias, dbias, b_scale, 1e-5));
          } else {
            EXPECT_TRUE(same_bits(got_dbias, dbias0));  // untouched
          }
          first_dinp = got_dinp, first_dweight = got_dweight, first_dbias = got_dbias;
        } else {
          EXPECT_TRUE(same_bits(got_dinp, first_dinp));
          EXPECT_TRUE(same_bits(got_dweight, first_dweight));
          EXPECT_TRUE(same_bits(got_dbias, first_dbias));
        }
      }
    }
  }
}

TEST_F(CudaKernelTest, RmsNormMatchesTheReference) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "N " << s.N << ", C " << s.C);
    const int64_t N = s.N, C = s.C;
    const auto x = random_vector(N * C, 8), w = random_vector(C, 9), dy = random_vector(N * C, 10);
    std::vector<float> y(N * C), rstd(N);
    ref::rms_norm_forward(kRefKc, y.data(), rstd.data(), x.data(), w.data(), N, C, 1e-6f);
    DeviceBuffer<float> dx_in(x), dw(w), ddy(dy);
    auto dy_out = poisoned<float>(N * C), drstd = poisoned<float>(N);
    settle();
    k().rms_norm_forward(kc(), dy_out, drstd, dx_in, dw, N, C, 1e-6f);
    EXPECT_TRUE(all_close(dy_out.download(), y, 1e-6, 1e-7));
    EXPECT_TRUE(all_close(drstd.download(), rstd, 1e-6, 1e-7));
    const auto dinp0 = plus(random_vector(N * C, 11, 0.5f), -0.25f),
               dweight0 = random_vector(C, 12);
    std::vector<float> dinp = dinp0, dweight = dweight0;
    ref::rms_norm_backward(kRefKc, dinp.data(), dweight.data(), dy.data(), x.data(), w.data(),
                           rstd.data(), N, C);
    std::vector<double> w_scale(C);
    for (int64_t c = 0; c < C; ++c) w_scale[c] = std::fabs(dweight0[c]);
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t c = 0; c < C; ++c) {
        w_scale[c] += std::fabs(static_cast<double>(x[n * C + c]) * rstd[n] * dy[n * C + c]);
      }
    }
    DeviceBuffer<float> drstd_ref(rstd);
    std::vector<float> first_dinp, first_dweight;
    for (int run = 0; run < 2; ++run) {
      DeviceBuffer<float> ddinp(dinp0), ddweight(dweight0);
      settle();
      k().rms_norm_backward(kc(), ddinp, ddweight, ddy, dx_in, dw, drstd_ref, N, C);
      const auto got_dinp = ddinp.download(), got_dweight = ddweight.download();
      if (run == 0) {
        EXPECT_TRUE(all_close(got_dinp, dinp, 1e-6, 1e-6));
        EXPECT_TRUE(sums_close(got_dweight, dweight, w_scale, 1e-5));
        first_dinp = got_dinp, first_dweight = got_dweight;
      } else {
        EXPECT_TRUE(same_bits(got_dinp, first_dinp));
        EXPECT_TRUE(same_bits(got_dweight, first_dweight));
      }
    }
  }
}

// A constant row has variance 0: rstd = 1/sqrt(eps), the output is the bias; rows of large
// values with a large mean keep their precision (the variance is taken around the mean).
TEST_F(CudaKernelTest, LayerNormOfConstantAndOffsetRows) {
  const int64_t N = 3, C = 257;
  std::vector<float> x(N * C);
  const auto noise = random_vector(C, 13);
  for (int64_t c = 0; c < C; ++c) {
    x[c] = 3.0f;
    x[C + c] = 1000.0f + noise[c];
    x[2 * C + c] = 1e-3f * noise[c];
  }
  const auto w = random_vector(C, 14), b = random_vector(C, 15);
  std::vector<float> y(N * C), mean(N), rstd(N);
  ref::layer_norm_forward(kRefKc, y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                          N, C, 1e-5f);
  DeviceBuffer<float> dx(x), dw(w), db(b);
  auto dy = poisoned<float>(N * C), dmean = poisoned<float>(N), drstd = poisoned<float>(N);
  settle();
  k().layer_norm_forward(kc(), dy, dmean, drstd, dx, dw, db, N, C, 1e-5f);
  const auto got = dy.download();
  EXPECT_TRUE(all_close(got, y, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(dmean.download(), mean, 1e-6, 1e-7));
  EXPECT_TRUE(all_close(drstd.download(), rstd, 1e-6, 1e-7));
  for (int64_t c = 0; c < C; ++c) EXPECT_EQ(got[c], b[c]) << c;
}

TEST_F(CudaKernelTest, NormalizationWithNoRowsIsANoOp) {
  const int64_t C = 33;
  const auto w = random_vector(C, 16), g0 = random_vector(C, 17);
  DeviceBuffer<float> dw(w), dweight(g0), dbias(g0);
  settle();
  k().layer_norm_forward(kc(), nullptr, nullptr, nullptr, nullptr, dw, nullptr, 0, C, 1e-5f);
  k().layer_norm_backward(kc(), nullptr, dweight, dbias, nullptr, nullptr, dw, nullptr, nullptr, 0,
                          C);
  k().rms_norm_forward(kc(), nullptr, nullptr, nullptr, dw, 0, C, 1e-6f);
  k().rms_norm_backward(kc(), nullptr, dweight, nullptr, nullptr, dw, nullptr, 0, C);
  EXPECT_TRUE(same_bits(dweight.download(), g0));
  EXPECT_TRUE(same_bits(dbias.download(), g0));
}

// The 2D tensor-parallel norm's four kernels against their references, LayerNorm (mean given)
// and RMSNorm (no mean) alike; the backward's weight and bias sums as above, run twice for bits.
TEST_F(CudaKernelTest, Norm2dPiecesMatchTheReference) {
  for (const Shape& s : kShapes) {
    for (const bool layer_norm : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "N " << s.N << ", C " << s.C << (layer_norm ? ", LayerNorm" : ", RMSNorm"));
      const int64_t N = s.N, C = s.C, H = 2 * C;
      const auto x = random_vector(N * C, 20, 1.5f, 0.3f), w = random_vector(C, 21), b = random_vector(C, 22),
                 dy = random_vector(N * C, 23), mean = random_vector(N, 24, 0.1f, 0.3f);
      // Whole-row sums as the all-reduce would give them: this block's, doubled.
      std::vector<float> sums(N), sq(N);
      ref::norm_partial_moments(kRefKc, sums.data(), x.data(), layer_norm ? mean.data() : nullptr, 1, 0.5f, N, C);
      ref::norm_partial_moments(kRefKc, sq.data(), x.data(), layer_norm ? mean.data() : nullptr, 2, 2.0f, N, C);
      std::vector<float> y(N * C), rstd(N);
      const float* m = layer_norm ? mean.data() : nullptr;
      ref::norm_apply(kRefKc, y.data(), rstd.data(), x.data(), m, sq.data(), w.data(), layer_norm ? b.data() : nullptr, H,
                      1e-5f, N, C);
      std::vector<float> partials(2 * N);
      ref::norm_backward_partials(kRefKc, partials.data(), dy.data(), x.data(), w.data(), m, rstd.data(), N, C);
      const auto dinp0 = random_vector(N * C, 25, 0.5f), dweight0 = random_vector(C, 26), dbias0 = random_vector(C, 27);
      std::vector<float> dinp = dinp0, dweight = dweight0, dbias = dbias0;
      ref::norm_backward_apply(kRefKc, dinp.data(), dweight.data(), layer_norm ? dbias.data() : nullptr, dy.data(),
                               x.data(), w.data(), m, rstd.data(), partials.data(), H, N, C);

      DeviceBuffer<float> dx(x), dw(w), db(b), ddy(dy), dmean(mean), dsq(sq), drstd(rstd), dpartials(partials);
      auto got_sums = poisoned<float>(N), got_y = poisoned<float>(N * C), got_rstd = poisoned<float>(N),
           got_partials = poisoned<float>(2 * N);
      settle();
      k().norm_partial_moments(kc(), got_sums, dx, layer_norm ? static_cast<const float*>(dmean) : nullptr, 1, 0.5f, N,
                               C);
      k().norm_apply(kc(), got_y, got_rstd, dx, layer_norm ? static_cast<const float*>(dmean) : nullptr, dsq, dw,
                     layer_norm ? static_cast<const float*>(db) : nullptr, H, 1e-5f, N, C);
      k().norm_backward_partials(kc(), got_partials, ddy, dx, dw,
                                 layer_norm ? static_cast<const float*>(dmean) : nullptr, drstd, N, C);
      EXPECT_TRUE(all_close(got_sums.download(), sums, 1e-6, 1e-6));
      EXPECT_TRUE(all_close(got_y.download(), y, 1e-6, 1e-6));
      EXPECT_TRUE(all_close(got_rstd.download(), rstd, 1e-6, 1e-7));
      EXPECT_TRUE(all_close(got_partials.download(), partials, 1e-6, 1e-6));
      std::vector<double> w_scale(C), b_scale(C);
      for (int64_t c = 0; c < C; ++c) {
        w_scale[c] = std::fabs(dweight0[c]);
        b_scale[c] = std::fabs(dbias0[c]);
        for (int64_t n = 0; n < N; ++n) {
          const double xhat = (x[n * C + c] - (layer_norm ? mean[n] : 0.0f)) * rstd[n];
          w_scale[c] += std::fabs(xhat * dy[n * C + c]);
          b_scale[c] += std::fabs(dy[n * C + c]);
        }
      }
      std::vector<float> first_dinp, first_dweight;
      for (int run = 0; run < 2; ++run) {
        DeviceBuffer<float> ddinp(dinp0), ddweight(dweight0), ddbias(dbias0);
        settle();
        k().norm_backward_apply(kc(), ddinp, ddweight, layer_norm ? static_cast<float*>(ddbias) : nullptr, ddy, dx, dw,
                                layer_norm ? static_cast<const float*>(dmean) : nullptr, drstd, dpartials, H, N, C);
        const auto got_dinp = ddinp.download(), got_dweight = ddweight.download();
        EXPECT_TRUE(all_close(got_dinp, dinp, 1e-6, 1e-6));
        EXPECT_TRUE(sums_close(got_dweight, dweight, w_scale, 1e-5));
        if (layer_norm) {
          EXPECT_TRUE(sums_close(ddbias.download(), dbias, b_scale, 1e-5));
        }
        if (run == 0) {
          first_dinp = got_dinp;
          first_dweight = got_dweight;
        } else {
          EXPECT_TRUE(same_bits(got_dinp, first_dinp));
          EXPECT_TRUE(same_bits(got_dweight, first_dweight));
        }
      }
    }
  }
}

}  // namespace
}  // namespace mindspeed
