// tensor_parallel/comm_gemm.h on 2, 4 and 8 ranks (the whole world as the tensor-parallel group):
// each fused collective + GEMM op (MindSpeed's MC2 ops and lcal_coc's coc_ops) against its unfused
// composition, written here with naive loops and the group's plain collectives, for both weight
// products and 1, 2 and 4 chunks; and npu_mm_all_reduce_add_rms_norm against its formula.
#include "tensor_parallel/comm_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "module/forward_context.h"
#include "test_mpi.h"

namespace mindspeed::testing {
namespace {

constexpr int64_t kIn = 12, kOut = 10;

class CommGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    const MpiWorld& world = mpi_world();
    on_ = std::make_unique<ContextOnWorld>(tensor_parallel_over(world), world);
    tp_ = on_->ps->sizes.tensor;
    r_ = on_->ps->tp_rank;
    weight_.resize(kOut * kIn);
    bias_.resize(kOut);
    for (int64_t i = 0; i < kOut * kIn; ++i) weight_[i] = std::sin(0.7f * static_cast<float>(i));
    for (int64_t i = 0; i < kOut; ++i) bias_[i] = 0.1f * static_cast<float>(i);
  }
  // Rank r's [rows, cols] input.
  std::vector<float> input(int r, int64_t rows, int64_t cols) const {
    std::vector<float> x(rows * cols);
    for (int64_t i = 0; i < rows * cols; ++i)
      x[i] = std::cos(0.3f * static_cast<float>(i) + static_cast<float>(r));
    return x;
  }
  LinearWeight weight(WeightProduct product, bool bias) const {
    return {.weight = weight_.data(),
            .bias = bias ? bias_.data() : nullptr,
            .in = kIn,
            .out = kOut,
            .product = product};
  }
  // The GEMM in naive loops: x [rows, cols_in] . W (+ bias).
  static std::vector<float> naive(const LinearWeight& w, const std::vector<float>& x,
                                  int64_t rows) {
    std::vector<float> y(rows * w.cols_out());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t o = 0; o < w.cols_out(); ++o) {
        double s = w.bias != nullptr ? w.bias[o] : 0.0;
        for (int64_t k = 0; k < w.cols_in(); ++k) {
          const float wk = w.product == WeightProduct::kTransposed ? w.weight[o * w.in + k]
                                                                   : w.weight[k * w.in + o];
          s += static_cast<double>(x[i * w.cols_in() + k]) * wk;
        }
        y[i * w.cols_out() + o] = static_cast<float>(s);
      }
    return y;
  }
  // Every rank's input, concatenated (the all-gather, from the inputs' formula).
  std::vector<float> all_inputs(int64_t rows, int64_t cols) const {
    std::vector<float> all;
    for (int k = 0; k < tp_; ++k) {
      const std::vector<float> x = input(k, rows, cols);
      all.insert(all.end(), x.begin(), x.end());
    }
    return all;
  }

  std::unique_ptr<ContextOnWorld> on_;
  int tp_ = 1, r_ = 0;
  std::vector<float> weight_, bias_;
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::fabs(want[i]))) << what << " " << i;
}

const WeightProduct kProducts[] = {WeightProduct::kTransposed, WeightProduct::kPlain};

TEST_F(CommGemm, AllGatherMatmulEqualsTheGatherThenTheGemm) {
  const int64_t m = 8;
  for (const WeightProduct product : kProducts) {
    const LinearWeight w = weight(product, product == WeightProduct::kTransposed);
    const std::vector<float> x = input(r_, m, w.cols_in()), all = all_inputs(m, w.cols_in());
    const std::vector<float> want = naive(w, all, tp_ * m);
    for (const int chunks : {1, 2, 4}) {
      SCOPED_TRACE("chunks " + std::to_string(chunks));
      std::vector<float> out(tp_ * m * w.cols_out()), gathered(tp_ * m * w.cols_in());
      all_gather_matmul(on_->ctx, w, out.data(), gathered.data(), x.data(), m, chunks);
      expect_close(out, want, "all_gather_matmul");
      EXPECT_EQ(gathered, all) << "the gathered input (all_gather_matmul_v2's comm_output)";
      std::vector<float> only(out.size());
      all_gather_matmul(on_->ctx, w, only.data(), nullptr, x.data(), m, chunks);
      EXPECT_EQ(only, out);
    }
  }
}

TEST_F(CommGemm, MatmulReduceScatterEqualsTheGemmThenTheReduceScatter) {
  const int64_t m_local = 4, m = tp_ * m_local;
  for (const WeightProduct product : kProducts) {
    const LinearWeight w = weight(product, product == WeightProduct::kTransposed);
    // Want: sum over ranks k of naive(x_k) without bias, this rank's rows, plus the bias once.
    LinearWeight no_bias = w;
    no_bias.bias = nullptr;
    std::vector<float> want(m_local * w.cols_out(), 0.0f);
    for (int k = 0; k < tp_; ++k) {
      const std::vector<float> y = naive(no_bias, input(k, m, w.cols_in()), m);
      for (int64_t i = 0; i < m_local * w.cols_out(); ++i)
        want[i] += y[r_ * m_local * w.cols_out() + i];
    }
    if (w.bias != nullptr)
      for (int64_t i = 0; i < m_local; ++i)
        for (int64_t o = 0; o < w.cols_out(); ++o) want[i * w.cols_out() + o] += w.bias[o];
    const std::vector<float> x = input(r_, m, w.cols_in());
    for (const int chunks : {1, 2, 4}) {
      SCOPED_TRACE("chunks " + std::to_string(chunks));
      std::vector<float> out(m_local * w.cols_out());
      matmul_reduce_scatter(on_->ctx, w, out.data(), x.data(), m, chunks);
      expect_close(out, want, "matmul_reduce_scatter");
    }
  }
}

TEST_F(CommGemm, MatmulAllReduceEqualsTheGemmThenTheAllReduceAndAddsTheBiasOnce) {
  const int64_t m = 8;
  for (const WeightProduct product : kProducts) {
    const LinearWeight w = weight(product, product == WeightProduct::kTransposed);
    LinearWeight no_bias = w;
    no_bias.bias = nullptr;
    std::vector<float> want(m * w.cols_out(), 0.0f);
    for (int k = 0; k < tp_; ++k) {
      const std::vector<float> y = naive(no_bias, input(k, m, w.cols_in()), m);
      for (size_t i = 0; i < want.size(); ++i) want[i] += y[i];
    }
    if (w.bias != nullptr)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t o = 0; o < w.cols_out(); ++o) want[i * w.cols_out() + o] += w.bias[o];
    const std::vector<float> x = input(r_, m, w.cols_in());
    for (const int chunks : {1, 2, 4}) {
      SCOPED_TRACE("chunks " + std::to_string(chunks));
      std::vector<float> out(m * w.cols_out());
      matmul_all_reduce(on_->ctx, w, out.data(), x.data(), m, chunks);
      expect_close(out, want, "matmul_all_reduce");
    }
    std::vector<float> pure(m * w.cols_out());
    pure_matmul(on_->ctx, w, pure.data(), x.data(), m);
    expect_close(pure, naive(w, x, m), "pure_matmul");
  }
}

// y = AllReduce(x1 @ x2 + bias) + residual; normOut = RMSNorm(y) * gamma (the op's documented
// semantics), y written over the residual in its trailing-underscore form.
TEST_F(CommGemm, MmAllReduceAddRmsNormFollowsItsFormula) {
  const int64_t m = 4;
  const LinearWeight w = weight(WeightProduct::kTransposed, true);
  const std::vector<float> x = input(r_, m, kIn);
  std::vector<float> residual(m * kOut), gamma(kOut);
  for (int64_t i = 0; i < m * kOut; ++i) residual[i] = 0.5f - 0.01f * static_cast<float>(i);
  for (int64_t i = 0; i < kOut; ++i) gamma[i] = 1.0f + 0.05f * static_cast<float>(i);
  const float eps = 1e-6f;
  LinearWeight no_bias = w;
  no_bias.bias = nullptr;
  std::vector<float> want_y = residual;
  for (int k = 0; k < tp_; ++k) {
    const std::vector<float> y = naive(no_bias, input(k, m, kIn), m);
    for (size_t i = 0; i < want_y.size(); ++i) want_y[i] += y[i];
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t o = 0; o < kOut; ++o) want_y[i * kOut + o] += bias_[o];
  std::vector<float> want_norm(m * kOut);
  for (int64_t i = 0; i < m; ++i) {
    double ss = 0.0;
    for (int64_t o = 0; o < kOut; ++o)
      ss += static_cast<double>(want_y[i * kOut + o]) * want_y[i * kOut + o];
    const double rstd = 1.0 / std::sqrt(ss / kOut + eps);
    for (int64_t o = 0; o < kOut; ++o)
      want_norm[i * kOut + o] = static_cast<float>(want_y[i * kOut + o] * rstd * gamma[o]);
  }
  for (const bool in_place : {false, true}) {
    std::vector<float> res = residual, y(m * kOut), norm(m * kOut), rstd(m);
    float* y_out = in_place ? res.data() : y.data();
    mm_all_reduce_add_rms_norm(on_->ctx, y_out, norm.data(), rstd.data(), x.data(), weight_.data(),
                               bias_.data(), res.data(), gamma.data(), eps, m, kIn, kOut, 2);
    expect_close(std::vector<float>(y_out, y_out + m * kOut), want_y,
                 in_place ? "y (in place)" : "y");
    expect_close(norm, want_norm, "normOut");
  }
}

TEST(Mc2Chunks, HalvesUntilTheRowsDivide) {
  EXPECT_EQ(mc2_chunks(16), kMc2Chunks);
  EXPECT_EQ(mc2_chunks(6), 2);
  EXPECT_EQ(mc2_chunks(7), 1);
}

}  // namespace
}  // namespace mindspeed::testing
