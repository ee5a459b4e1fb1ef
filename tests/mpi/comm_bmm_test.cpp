// tensor_parallel/comm_bmm.h on 4 and 8 ranks (tensor parallel 2 x expert parallel 2 or 4):
// npu_alltoall_allgather_bmm and npu_bmm_reducescatter_alltoall against their definitions, written
// here as naive loops over every rank's inputs (each input is a formula of its rank's expert- and
// tensor-parallel coordinates, so every rank can evaluate any other's), for both shard types and
// with and without the activation and the bias.
#include "tensor_parallel/comm_bmm.h"

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

// Inputs as formulas of (expert-parallel rank s, tensor-parallel rank t, indices).
float xval(int s, int t, int64_t a, int64_t b, int64_t c) {
  return std::sin(0.1f * a + 0.37f * b + 0.013f * c + 1.1f * s + 0.7f * t);
}
float wval(int s, int t, int64_t a, int64_t b, int64_t c) {
  return std::cos(0.05f * a - 0.11f * b + 0.07f * c + 0.3f * s - 0.9f * t);
}
float bval(int s, int t, int64_t a, int64_t b) {
  return 0.01f * (a + 1) - 0.02f * b + 0.1f * s + 0.05f * t;
}

class CommBmm : public ::testing::TestWithParam<BmmShard> {
 protected:
  void SetUp() override {
    const MpiWorld& world = mpi_world();
    if (world.size != 4 && world.size != 8) GTEST_SKIP() << "runs on 4 and 8 ranks";
    ParallelConfig pc;
    pc.tensor_model_parallel_size = 2;
    pc.expert_model_parallel_size = world.size / 2;
    on_ = std::make_unique<ContextOnWorld>(pc, world);
    ASSERT_EQ(on_->ps->tp().size() * on_->ps->ep().size(), world.size);
  }
  std::unique_ptr<ContextOnWorld> on_;
};

void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 2e-5 * (1.0 + std::fabs(want[i]))) << what << " " << i;
}

TEST_P(CommBmm, AllToAllAllGatherBmmFollowsItsDefinition) {
  ProcessGroup& ep = on_->ps->ep();
  ProcessGroup& tp = on_->ps->tp();
  const int e = ep.size(), t = tp.size(), pe = ep.rank(), me = tp.rank();
  const ExpertBmmShape s{.E = 4, .C = 4, .H = 8, .M = 3, .shard = GetParam()};
  const bool by_capacity = s.shard == BmmShard::kCapacity;
  const int64_t El = s.E / e, Cx = by_capacity ? s.C / t : s.C, Hx = by_capacity ? s.H : s.H / t,
                rows = e * s.C;
  std::vector<float> x(s.E * Cx * Hx), w(El * s.H * s.M), b(El * s.M);
  for (int64_t g = 0; g < s.E; ++g)
    for (int64_t c = 0; c < Cx; ++c)
      for (int64_t h = 0; h < Hx; ++h) x[(g * Cx + c) * Hx + h] = xval(pe, me, g, c, h);
  for (int64_t le = 0; le < El; ++le)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t m = 0; m < s.M; ++m) w[(le * s.H + h) * s.M + m] = wval(pe, me, le, h, m);
  for (int64_t le = 0; le < El; ++le)
    for (int64_t m = 0; m < s.M; ++m) b[le * s.M + m] = bval(pe, me, le, m);
  // y2[le, k = src*C + c, h]: expert pe*El+le of source rank src (tensor-parallel rank tr) where
  // the all-gather put tr's share: c = tr*Cx + cx (capacity) or h = tr*Hx + hx (hidden).
  std::vector<double> y2(El * rows * s.H), y3(El * rows * s.M), y1(y3.size());
  for (int64_t le = 0; le < El; ++le)
    for (int src = 0; src < e; ++src)
      for (int64_t c = 0; c < s.C; ++c)
        for (int64_t h = 0; h < s.H; ++h) {
          const int64_t g = pe * El + le;
          const double v = by_capacity ? xval(src, static_cast<int>(c / Cx), g, c % Cx, h)
                                       : xval(src, static_cast<int>(h / Hx), g, c, h % Hx);
          y2[(le * rows + src * s.C + c) * s.H + h] = v;
        }
  for (int64_t le = 0; le < El; ++le)
    for (int64_t k = 0; k < rows; ++k)
      for (int64_t m = 0; m < s.M; ++m) {
        double acc = b[le * s.M + m];
        for (int64_t h = 0; h < s.H; ++h)
          acc += y2[(le * rows + k) * s.H + h] * w[(le * s.H + h) * s.M + m];
        y3[(le * rows + k) * s.M + m] = acc;
        y1[(le * rows + k) * s.M + m] = 0.5 * acc * (1.0 + std::erf(acc / std::sqrt(2.0)));
      }
  for (const BmmActivation act : {BmmActivation::kNone, BmmActivation::kGelu}) {
    SCOPED_TRACE(act == BmmActivation::kGelu ? "GeLU" : "None");
    std::vector<float> got1(y1.size()), got2(y2.size()), got3(y3.size());
    ASSERT_TRUE(alltoall_allgather_bmm(on_->ctx, ep, tp, s, got1.data(), got2.data(), got3.data(),
                                       x.data(), w.data(), b.data(), act)
                    .ok());
    expect_close(got2, y2, "y2 (the all-gather's output)");
    expect_close(got3, y3, "y3 (before the activation)");
    expect_close(got1, act == BmmActivation::kGelu ? y1 : y3, "y1");
    std::vector<float> only(y1.size());  // the optional outputs left out
    ASSERT_TRUE(alltoall_allgather_bmm(on_->ctx, ep, tp, s, only.data(), nullptr, nullptr, x.data(),
                                       w.data(), b.data(), act)
                    .ok());
    EXPECT_EQ(only, got1);
  }
}

TEST_P(CommBmm, BmmReduceScatterAllToAllFollowsItsDefinition) {
  ProcessGroup& ep = on_->ps->ep();
  ProcessGroup& tp = on_->ps->tp();
  const int e = ep.size(), t = tp.size(), pe = ep.rank(), me = tp.rank();
  const ExpertBmmShape s{.E = 4, .C = 4, .H = 8, .M = 3, .shard = GetParam()};
  const bool by_capacity = s.shard == BmmShard::kCapacity;
  const int64_t El = s.E / e, Cx = by_capacity ? s.C / t : s.C, Hx = by_capacity ? s.H : s.H / t,
                rows = e * s.C;
  // Rank (src, tr)'s inputs: x [El, ep*C, M], weight [El, M, H], bias [El, Hx].
  auto product = [&](int src, int tr, int64_t le, int64_t k, int64_t h) {
    double acc = 0.0;
    for (int64_t m = 0; m < s.M; ++m)
      acc += static_cast<double>(xval(src, tr, le, k, m)) * wval(src, tr, le, m, h);
    return acc;
  };
  std::vector<float> x(El * rows * s.M), w(El * s.M * s.H), b(El * Hx);
  for (int64_t le = 0; le < El; ++le)
    for (int64_t k = 0; k < rows; ++k)
      for (int64_t m = 0; m < s.M; ++m) x[(le * rows + k) * s.M + m] = xval(pe, me, le, k, m);
  for (int64_t le = 0; le < El; ++le)
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t h = 0; h < s.H; ++h) w[(le * s.M + m) * s.H + h] = wval(pe, me, le, m, h);
  for (int64_t le = 0; le < El; ++le)
    for (int64_t h = 0; h < Hx; ++h) b[le * Hx + h] = bval(pe, me, le, h);
  // out[g = src*El + le, cx, hx] on this rank: the reduce-scatter on source rank (src, me) of the
  // products of every tensor-parallel rank, at this rank's tokens (pe*C + ...) and this
  // tensor-parallel rank's share, plus that source rank's bias.
  for (const bool with_bias : {false, true}) {
    SCOPED_TRACE(with_bias ? "bias" : "no bias");
    std::vector<double> want(s.E * Cx * Hx);
    for (int src = 0; src < e; ++src)
      for (int64_t le = 0; le < El; ++le)
        for (int64_t cx = 0; cx < Cx; ++cx)
          for (int64_t hx = 0; hx < Hx; ++hx) {
            const int64_t k = pe * s.C + (by_capacity ? me * Cx + cx : cx),
                          h = by_capacity ? hx : me * Hx + hx;
            double v = with_bias ? bval(src, me, le, hx) : 0.0;
            for (int tr = 0; tr < t; ++tr) v += product(src, tr, le, k, h);
            want[((src * El + le) * Cx + cx) * Hx + hx] = v;
          }
    std::vector<float> out(want.size());
    ASSERT_TRUE(bmm_reducescatter_alltoall(on_->ctx, ep, tp, s, out.data(), x.data(), w.data(),
                                           with_bias ? b.data() : nullptr)
                    .ok());
    expect_close(out, want, "out");
  }
}

TEST_P(CommBmm, RefusesShapesThatDoNotSplit) {
  ProcessGroup& ep = on_->ps->ep();
  ProcessGroup& tp = on_->ps->tp();
  std::vector<float> buf(1024);
  ExpertBmmShape s{.E = 3, .C = 4, .H = 8, .M = 3, .shard = GetParam()};
  Status st =
      bmm_reducescatter_alltoall(on_->ctx, ep, tp, s, buf.data(), buf.data(), buf.data(), nullptr);
  EXPECT_NE(st.message().find("3 experts do not split over"), std::string::npos) << st.message();
  s = {.E = 4, .C = 3, .H = 7, .M = 3, .shard = GetParam()};
  st = alltoall_allgather_bmm(on_->ctx, ep, tp, s, buf.data(), nullptr, nullptr, buf.data(),
                              buf.data(), nullptr, BmmActivation::kNone);
  EXPECT_NE(st.message().find(GetParam() == BmmShard::kHidden ? "splits H (7)" : "splits C (3)"),
            std::string::npos)
      << st.message();
}

INSTANTIATE_TEST_SUITE_P(ShardTypes, CommBmm,
                         ::testing::Values(BmmShard::kHidden, BmmShard::kCapacity),
                         [](const auto& info) {
                           return info.param == BmmShard::kHidden ? "Hidden" : "Capacity";
                         });

}  // namespace
}  // namespace mindspeed::testing
