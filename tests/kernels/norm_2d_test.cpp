// The 2D tensor-parallel norm's kernels (norm_partial_moments, norm_apply, norm_backward_partials,
// norm_backward_apply) composed as transformer/norm.cpp composes them, with the all-reduce over
// the Y ranks done here by adding the blocks' partial sums: for Y = 1, 2, 4 and 8 column blocks,
// the reference (ref/) and the fast (cpu/) kernels equal the whole-row LayerNorm / RMSNorm
// (ref/normalization.cpp) within 1e-6, forward and backward (dinp, dweight, dbias; the fast
// kernels' float sums of dweight and dbias over the rows within 1e-5).
#include <gtest/gtest.h>

#include <vector>

#include "kernels/kernels.h"
#include "test_util.h"

namespace mindspeed {
namespace {
using testing::all_close;
using testing::kKc;
using testing::random_vector;

struct NormKernels {
  decltype(&ref::norm_partial_moments) partial_moments;
  decltype(&ref::norm_apply) apply;
  decltype(&ref::norm_backward_partials) backward_partials;
  decltype(&ref::norm_backward_apply) backward_apply;
};
const NormKernels kRef{ref::norm_partial_moments, ref::norm_apply, ref::norm_backward_partials,
                       ref::norm_backward_apply};
const NormKernels kCpu{cpu::norm_partial_moments, cpu::norm_apply, cpu::norm_backward_partials,
                       cpu::norm_backward_apply};

// Columns [y*C, (y+1)*C) of the [N, H] rows.
std::vector<float> block(const std::vector<float>& rows, int64_t N, int64_t H, int64_t C, int y) {
  std::vector<float> out(static_cast<size_t>(N * C));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = rows[n * H + y * C + c];
  return out;
}
void put_block(std::vector<float>& rows, const std::vector<float>& b, int64_t N, int64_t H, int64_t C, int y) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) rows[n * H + y * C + c] = b[n * C + c];
}

struct Result {
  std::vector<float> out, dinp, dweight, dbias;
};

// The norm of [N, H] rows held as Y blocks of H/Y columns, as Norm::forward_2d / backward_2d
// compute it, the "all-reduce" being the sum of the blocks' partials.
Result distributed_norm(const NormKernels& k, bool layer_norm, const std::vector<float>& x,
                        const std::vector<float>& w, const std::vector<float>& b, const std::vector<float>& dy,
                        const std::vector<float>& dinp0, int64_t N, int64_t H, int Y, float eps) {
  const int64_t C = H / Y;
  std::vector<std::vector<float>> xs, ws, bs, dys;
  for (int y = 0; y < Y; ++y) {
    xs.push_back(block(x, N, H, C, y));
    dys.push_back(block(dy, N, H, C, y));
    ws.emplace_back(w.begin() + y * C, w.begin() + (y + 1) * C);
    bs.emplace_back(b.begin() + y * C, b.begin() + (y + 1) * C);
  }
  auto all_reduce = [&](auto&& per_block, int64_t n) {
    std::vector<float> total(static_cast<size_t>(n), 0.0f), part(static_cast<size_t>(n));
    for (int y = 0; y < Y; ++y) {
      per_block(y, part.data());
      for (int64_t i = 0; i < n; ++i) total[i] += part[i];
    }
    return total;
  };
  std::vector<float> mean;
  if (layer_norm) {
    mean = all_reduce(
        [&](int y, float* p) { k.partial_moments(kKc, p, xs[y].data(), nullptr, 1, 1.0f / H, N, C); }, N);
  }
  const float* m = layer_norm ? mean.data() : nullptr;
  const std::vector<float> sq =
      all_reduce([&](int y, float* p) { k.partial_moments(kKc, p, xs[y].data(), m, 2, 1.0f, N, C); }, N);
  Result r{std::vector<float>(N * H), dinp0, std::vector<float>(H, 0.25f), std::vector<float>(H, -0.5f)};
  std::vector<float> rstd(N);
  for (int y = 0; y < Y; ++y) {
    std::vector<float> out(N * C);
    k.apply(kKc, out.data(), rstd.data(), xs[y].data(), m, sq.data(), ws[y].data(),
            layer_norm ? bs[y].data() : nullptr, H, eps, N, C);
    put_block(r.out, out, N, H, C, y);
  }
  const std::vector<float> totals = all_reduce(
      [&](int y, float* p) { k.backward_partials(kKc, p, dys[y].data(), xs[y].data(), ws[y].data(), m, rstd.data(), N, C); },
      2 * N);
  for (int y = 0; y < Y; ++y) {
    std::vector<float> dx = block(dinp0, N, H, C, y);
    k.backward_apply(kKc, dx.data(), r.dweight.data() + y * C, layer_norm ? r.dbias.data() + y * C : nullptr,
                     dys[y].data(), xs[y].data(), ws[y].data(), m, rstd.data(), totals.data(), H, N, C);
    put_block(r.dinp, dx, N, H, C, y);
  }
  return r;
}

class Norm2dTest : public ::testing::TestWithParam<std::tuple<bool, bool, int>> {};

TEST_P(Norm2dTest, EqualsTheWholeRowNorm) {
  const auto [fast, layer_norm, Y] = GetParam();
  const NormKernels& k = fast ? kCpu : kRef;
  const int64_t N = 37, H = 96;
  const float eps = layer_norm ? 1e-5f : 1e-6f;
  const auto x = random_vector(N * H, 1, 1.5f, 0.3f), w = random_vector(H, 2, 0.5f, 1.0f),
             b = random_vector(H, 3), dy = random_vector(N * H, 4), dinp0 = random_vector(N * H, 5, 0.1f);
  Result want{std::vector<float>(N * H), dinp0, std::vector<float>(H, 0.25f), std::vector<float>(H, -0.5f)};
  std::vector<float> mean(N), rstd(N);
  if (layer_norm) {
    ref::layer_norm_forward(kKc, want.out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, H, eps);
    ref::layer_norm_backward(kKc, want.dinp.data(), want.dweight.data(), want.dbias.data(), dy.data(), x.data(),
                             w.data(), mean.data(), rstd.data(), N, H);
  } else {
    ref::rms_norm_forward(kKc, want.out.data(), rstd.data(), x.data(), w.data(), N, H, eps);
    ref::rms_norm_backward(kKc, want.dinp.data(), want.dweight.data(), dy.data(), x.data(), w.data(), rstd.data(), N,
                           H);
  }
  const Result got = distributed_norm(k, layer_norm, x, w, b, dy, dinp0, N, H, Y, eps);
  EXPECT_TRUE(all_close(got.out, want.out, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(got.dinp, want.dinp, 1e-6, 1e-6));
  // The fast kernels sum the weight and bias gradients over the rows in float (kernel_parity_test's
  // rule for the whole-row norms): 1e-5 there, 1e-6 for the reference's double sums.
  const double grad_tol = fast ? 1e-5 : 1e-6;
  EXPECT_TRUE(all_close(got.dweight, want.dweight, grad_tol, 1e-6));
  EXPECT_TRUE(all_close(got.dbias, want.dbias, grad_tol, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Blocks, Norm2dTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(), ::testing::Values(1, 2, 4, 8)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "cpu_" : "ref_") +
                                  (std::get<1>(info.param) ? "layer_norm_y" : "rms_norm_y") +
                                  std::to_string(std::get<2>(info.param));
                         });

}  // namespace
}  // namespace mindspeed
