// The CUDA cross-entropy kernels against their references (ref/cross_entropy.cpp) on odd
// shapes up to GPT-2's vocabulary (50257): the fused softmax cross entropy (fp32 on the device,
// double in the reference) within 1e-5; the vocab-parallel phases exactly where they can be
// (the row maximum, the target's shifted logit, the finish's gradient), within expf / logf's
// ulps elsewhere, the row sums against a double sum of the same exponentials (the reference's
// sequential fp32 sum is itself off by ~1e-4 at V = 50257); rows whose gradient scale is 0
// (masked tokens), targets on other ranks' slices and ignored (-100) ones; and the three
// phases over two simulated tensor-parallel ranks against the fused reference on the whole row.
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
  int64_t N, V;
};
constexpr Shape kShapes[] = {{1, 1}, {7, 1}, {1, 7}, {129, 7}, {7, 1000}, {129, 1000}, {3, 50257}};

// Targets spread over the row; every third row has gradient scale 0 (a masked token).
std::vector<int32_t> row_targets(int64_t N, int64_t V) {
  std::vector<int32_t> t(N);
  for (int64_t n = 0; n < N; ++n) t[n] = static_cast<int32_t>((n * 13 + 5) % V);
  return t;
}
std::vector<float> row_scales(int64_t N) {
  std::vector<float> s(N);
  for (int64_t n = 0; n < N; ++n)
    s[n] = n % 3 == 0 ? 0.0f : 0.25f + 0.125f * static_cast<float>(n % 5);
  return s;
}

TEST_F(CudaKernelTest, SoftmaxCrossEntropyMatchesTheReference) {
  for (const Shape& s : kShapes) {
    const auto logits = random_vector(s.N * s.V, 1, 3.0f);
    const auto targets = row_targets(s.N, s.V);
    const auto scales = row_scales(s.N);
    DeviceBuffer<int32_t> dtargets(targets);
    DeviceBuffer<float> dscales(scales);
    for (const bool grad : {false, true}) {
      for (const bool scaled : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "N " << s.N << ", V " << s.V << ", grad " << grad << ", scaled " << scaled);
        std::vector<float> want = logits, want_losses(s.N);
        ref::softmax_cross_entropy(kRefKc, want.data(), want_losses.data(), targets.data(),
                                   scaled ? scales.data() : nullptr, s.N, s.V, grad);
        DeviceBuffer<float> dlogits(logits);
        auto dlosses = poisoned<float>(s.N);
        k().softmax_cross_entropy(kc(), dlogits, dlosses, dtargets,
                                  scaled ? dscales.get() : nullptr, s.N, s.V, grad);
        EXPECT_TRUE(all_close(dlosses.download(), want_losses, 1e-5, 1e-6));
        const auto got = dlogits.download();
        if (!grad) {
          EXPECT_EQ(got, logits);  // untouched
          continue;
        }
        EXPECT_TRUE(all_close(got, want, 1e-5, 1e-7));
        if (scaled) {  // a masked row's gradient is zero
          for (int64_t n = 0; n < s.N; n += 3) {
            for (int64_t j = 0; j < s.V; ++j)
              ASSERT_EQ(got[n * s.V + j], 0.0f) << "row " << n << ", column " << j;
          }
        }
      }
    }
  }
}

// Logits with a -inf entry (a masked vocabulary column) and a row of large values.
TEST_F(CudaKernelTest, SoftmaxCrossEntropyWithInfiniteAndLargeLogits) {
  const int64_t N = 3, V = 257;
  auto logits = random_vector(N * V, 2, 3.0f);
  logits[0 * V + 4] = -INFINITY;
  logits[0 * V + 0] = -INFINITY;  // the first column: the online maximum starts there
  for (int64_t j = 0; j < V; ++j)
    logits[2 * V + j] += 80.0f;  // exp would overflow without the shift
  const std::vector<int32_t> targets = {3, 100, 256};
  std::vector<float> want = logits, want_losses(N);
  ref::softmax_cross_entropy(kRefKc, want.data(), want_losses.data(), targets.data(), nullptr, N, V,
                             true);
  DeviceBuffer<float> dlogits(logits);
  DeviceBuffer<int32_t> dtargets(targets);
  auto dlosses = poisoned<float>(N);
  k().softmax_cross_entropy(kc(), dlogits, dlosses, dtargets, nullptr, N, V, true);
  EXPECT_TRUE(all_close(dlosses.download(), want_losses, 1e-5, 1e-6));
  const auto got = dlogits.download();
  EXPECT_TRUE(all_close(got, want, 1e-5, 1e-7));
  EXPECT_EQ(got[4], 0.0f);
}

// Targets for a rank holding [vocab_start, vocab_start + V) of a vocabulary of 3V: below, on
// and above this slice, and Megatron's ignore index.
std::vector<int32_t> sharded_targets(int64_t N, int64_t V) {
  std::vector<int32_t> t(N);
  for (int64_t n = 0; n < N; ++n)
    t[n] = n % 11 == 10 ? -100 : static_cast<int32_t>((n * 7919 + 3) % (3 * V));
  return t;
}

TEST_F(CudaKernelTest, VocabParallelPhasesMatchTheReference) {
  for (const Shape& s : kShapes) {
    const int64_t N = s.N, V = s.V, vocab_start = V;  // the middle rank of three
    const auto logits = random_vector(N * V, 3, 3.0f);
    const auto targets = sharded_targets(N, V);
    const auto scales = row_scales(N);
    DeviceBuffer<int32_t> dtargets(targets);
    DeviceBuffer<float> dscales(scales);
    DeviceBuffer<float> dlogits_in(logits);
    // 1. The row maximum: exact.
    std::vector<float> row_max(N);
    ref::vocab_parallel_ce_row_max(kRefKc, row_max.data(), logits.data(), N, V);
    auto drow_max = poisoned<float>(N);
    k().vocab_parallel_ce_row_max(kc(), drow_max, dlogits_in, N, V);
    EXPECT_EQ(drow_max.download(), row_max) << "N " << N << ", V " << V;
    for (const bool grad : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "N " << N << ", V " << V << ", grad " << grad);
      // 2. Sums of exponentials and shifted target logits.
      std::vector<float> exps = logits, sums(2 * N);
      ref::vocab_parallel_ce_sum_exp(kRefKc, sums.data(), exps.data(), row_max.data(),
                                     targets.data(), N, V, vocab_start, grad);
      DeviceBuffer<float> dexps(logits);
      auto dsums = poisoned<float>(2 * N);
      k().vocab_parallel_ce_sum_exp(kc(), dsums, dexps, drow_max, dtargets, N, V, vocab_start,
                                    grad);
      const auto got_sums = dsums.download();
      const auto got_exps = dexps.download();
      if (grad) {
        EXPECT_TRUE(all_close(got_exps, exps, 1e-6, 0.0));  // expf within its ulps
      } else {
        EXPECT_EQ(got_exps, logits);
      }
      // The sum against a double sum of the exponentials (the reference's fp32 sequential
      // sum loses ~1e-4 at V = 50257), loosely against the reference's.
      std::vector<float> accurate(N), got_row_sums(got_sums.begin(), got_sums.begin() + N);
      for (int64_t r = 0; r < N; ++r) {
        double acc = 0.0;
        for (int64_t j = 0; j < V; ++j)
          acc += std::exp(static_cast<double>(logits[r * V + j]) - row_max[r]);
        accurate[r] = static_cast<float>(acc);
      }
      EXPECT_TRUE(all_close(got_row_sums, accurate, 1e-5, 0.0));
      EXPECT_TRUE(
          all_close(got_row_sums, std::vector<float>(sums.begin(), sums.begin() + N), 5e-4, 0.0));
      // The shifted target logits (0 off this slice): exact.
      EXPECT_EQ(std::vector<float>(got_sums.begin() + N, got_sums.end()),
                std::vector<float>(sums.begin() + N, sums.end()));
      // 3. Finish, from the reference's sums and exponentials: the gradient bit for bit.
      for (const bool scaled : {false, true}) {
        SCOPED_TRACE(scaled ? "scaled" : "unscaled");
        std::vector<float> want = exps, losses(N);
        ref::vocab_parallel_ce_finish(kRefKc, want.data(), losses.data(), sums.data(),
                                      targets.data(), scaled ? scales.data() : nullptr, N, V,
                                      vocab_start, grad);
        DeviceBuffer<float> dgrad(exps), dref_sums(sums);
        auto dlosses = poisoned<float>(N);
        k().vocab_parallel_ce_finish(kc(), dgrad, dlosses, dref_sums, dtargets,
                                     scaled ? dscales.get() : nullptr, N, V, vocab_start, grad);
        EXPECT_TRUE(all_close(dlosses.download(), losses, 1e-6, 1e-6));  // logf within an ulp
        EXPECT_EQ(dgrad.download(), want);
      }
    }
  }
}

// Tensor parallelism over two simulated ranks: each holds half of the vocabulary (the second
// half one column wider); the all-reduces (max, then sum) are done here on the host. Losses
// and gradients equal the fused reference on the whole rows.
TEST_F(CudaKernelTest, VocabParallelOverTwoRanksEqualsTheFusedLoss) {
  const int64_t N = 37, V = 2001, V0 = 1000, widths[2] = {V0, V - V0};
  const auto logits = random_vector(N * V, 4, 3.0f);
  auto targets = row_targets(N, V);
  targets[1] = static_cast<int32_t>(V0 - 1);  // the last column of rank 0
  targets[2] = static_cast<int32_t>(V0);      // the first of rank 1
  const auto scales = row_scales(N);
  std::vector<float> want = logits, want_losses(N);
  ref::softmax_cross_entropy(kRefKc, want.data(), want_losses.data(), targets.data(), scales.data(),
                             N, V, true);

  DeviceBuffer<int32_t> dtargets(targets);
  DeviceBuffer<float> dscales(scales);
  std::vector<DeviceBuffer<float>> shards, maxima, sums;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<float> shard(N * widths[rank]);
    for (int64_t n = 0; n < N; ++n) {
      std::copy_n(logits.begin() + n * V + rank * V0, widths[rank],
                  shard.begin() + n * widths[rank]);
    }
    shards.emplace_back(shard);
    maxima.emplace_back(static_cast<size_t>(N));
    sums.emplace_back(static_cast<size_t>(2 * N));
  }
  std::vector<float> row_max(N, -INFINITY), total(2 * N, 0.0f);
  for (int rank = 0; rank < 2; ++rank) {
    k().vocab_parallel_ce_row_max(kc(), maxima[rank], shards[rank], N, widths[rank]);
    const auto m = maxima[rank].download();
    for (int64_t n = 0; n < N; ++n) row_max[n] = std::max(row_max[n], m[n]);
  }
  for (int rank = 0; rank < 2; ++rank) {
    maxima[rank].upload(row_max);
    k().vocab_parallel_ce_sum_exp(kc(), sums[rank], shards[rank], maxima[rank], dtargets, N,
                                  widths[rank], rank * V0, true);
    const auto part = sums[rank].download();
    for (int64_t i = 0; i < 2 * N; ++i) total[i] += part[i];
  }
  std::vector<float> got(N * V);
  for (int rank = 0; rank < 2; ++rank) {
    sums[rank].upload(total);
    auto dlosses = poisoned<float>(N);
    k().vocab_parallel_ce_finish(kc(), shards[rank], dlosses, sums[rank], dtargets, dscales, N,
                                 widths[rank], rank * V0, true);
    EXPECT_TRUE(all_close(dlosses.download(), want_losses, 1e-5, 1e-6)) << "rank " << rank;
    const auto shard = shards[rank].download();
    for (int64_t n = 0; n < N; ++n) {
      std::copy_n(shard.begin() + n * widths[rank], widths[rank], got.begin() + n * V + rank * V0);
    }
  }
  // The target's p - 1 is an fp32 subtraction in the vocab-parallel formula (the reference's
  // too): an absolute error of an ulp of the scale where p is near 1.
  EXPECT_TRUE(all_close(got, want, 1e-5, 3e-7));
}

TEST_F(CudaKernelTest, CrossEntropyWithNoRowsIsANoOp) {
  auto untouched = poisoned<float>(4);
  const DeviceBuffer<int32_t> targets(std::vector<int32_t>{0});
  k().softmax_cross_entropy(kc(), untouched, untouched, targets, nullptr, 0, 4, true);
  k().vocab_parallel_ce_row_max(kc(), untouched, untouched, 0, 4);
  k().vocab_parallel_ce_sum_exp(kc(), untouched, untouched, untouched, targets, 0, 4, 0, true);
  k().vocab_parallel_ce_finish(kc(), untouched, untouched, untouched, targets, nullptr, 0, 4, 0,
                               true);
  for (const float v : untouched.download()) EXPECT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace mindspeed
