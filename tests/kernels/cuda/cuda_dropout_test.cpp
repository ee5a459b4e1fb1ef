// The CUDA dropout and bias-dropout-add kernels against their references (ref/dropout.cpp).
// The masks must be exactly the reference's: the device Philox (kernels/cuda/philox.cuh) is
// checked through dropout_forward on an all-ones input, whose output is 1/(1-p) where
// RngStream::uniform(index_offset + i) >= p and 0 elsewhere, bit for bit against the
// reference for index offsets in every Philox lane, past 2^32 and wrapping past 2^64; then
// dropout's forward, backward and in-place forms bit for bit; bias-dropout-add with flat
// indexing and Megatron's [s, b, C] indexing (first_sample, seq_total, t_offset, seq_index),
// with and without bias, in place (out = inp, as the embedding's dropout runs it): dinp bit for
// bit, out within an ulp (one rounded product and one rounded sum on both sides; a host
// compiler that contracts them into an FMA would differ by that ulp), dbias (a column sum in
// another order) within 1e-5 of the sum of its terms' magnitudes. Widths past 12288 take the
// kernel's global-memory partial sums. Outputs start poisoned (NaN), dbias nonzero.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
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

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// The spec with its seq_index on the device.
DropoutSpec on_device(DropoutSpec spec, const int32_t* device_seq_index) {
  spec.seq_index = spec.seq_index != nullptr ? device_seq_index : nullptr;
  return spec;
}

TEST_F(CudaKernelTest, DevicePhiloxDrawsTheReferenceMask) {
  constexpr uint64_t kOffsets[] = {0,
                                   1,
                                   2,
                                   3,
                                   1001,
                                   (uint64_t{1} << 32) - 2,
                                   (uint64_t{1} << 32) + 2,
                                   (uint64_t{1} << 40) + 1,
                                   std::numeric_limits<uint64_t>::max() - 5};
  for (const float p : {0.1f, 0.5f, 0.9f}) {
    for (const uint64_t offset : kOffsets) {
      for (const int64_t n : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{1000}, int64_t{100003}}) {
        SCOPED_TRACE(::testing::Message() << "p " << p << ", offset " << offset << ", n " << n);
        const DropoutSpec spec{p, RngStream{0x123456789abcdefull, 42}, offset};
        const std::vector<float> ones(n, 1.0f);
        std::vector<float> want(n);
        ref::dropout_forward(kRefKc, want.data(), ones.data(), n, spec);
        DeviceBuffer<float> dones(ones);
        auto got = poisoned<float>(n);
        settle();
        k().dropout_forward(kc(), got, dones, n, spec);
        const auto out = got.download();
        ASSERT_TRUE(same_bits(out, want));
        if (n == 100003) {  // and the mask is a dropout mask: 1/(1-p) or 0, kept at rate 1-p
          int64_t kept = 0;
          for (const float v : out) {
            ASSERT_TRUE(v == 0.0f || v == 1.0f / (1.0f - p)) << v;
            kept += v != 0.0f;
          }
          EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - p, 0.01);
        }
      }
    }
  }
}

TEST_F(CudaKernelTest, DropoutMatchesTheReferenceInPlaceToo) {
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{100003}}) {
    for (const float p : {0.0f, 0.3f}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << ", p " << p);
      const DropoutSpec spec{p, RngStream{7, 99}, 12345};
      const auto x = random_vector(n, 1);
      std::vector<float> want(n), want_back(n);
      ref::dropout_forward(kRefKc, want.data(), x.data(), n, spec);
      ref::dropout_backward(kRefKc, want_back.data(), x.data(), n, spec);
      if (p == 0.0f) {
        EXPECT_TRUE(same_bits(want, x));  // inactive: the input itself
      }
      DeviceBuffer<float> dx(x), inplace(x);
      auto out = poisoned<float>(n), back = poisoned<float>(n);
      settle();
      k().dropout_forward(kc(), out, dx, n, spec);
      k().dropout_backward(kc(), back, dx, n, spec);
      k().dropout_forward(kc(), inplace, inplace, n, spec);
      EXPECT_TRUE(same_bits(out.download(), want));
      EXPECT_TRUE(same_bits(back.download(), want_back));
      EXPECT_TRUE(same_bits(inplace.download(), want));
    }
  }
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

struct Case {
  const char* name;
  float p;
  bool sbh, with_seq_index, with_bias;
};

TEST_F(CudaKernelTest, BiasDropoutAddMatchesTheReference) {
  struct Shape {
    int64_t N, C;
  };
  constexpr Shape kShapes[] = {{1, 1}, {7, 33}, {129, 1000}, {600, 1000}, {6, 4097}, {3, 13000}};
  constexpr Case kCases[] = {{"inactive", 0.0f, false, false, true},
                             {"flat", 0.3f, false, false, true},
                             {"sbh", 0.5f, true, false, false},
                             {"sbh with seq_index", 0.4f, true, true, true}};
  for (const Shape& s : kShapes) {
    const int64_t N = s.N, C = s.C;
    const auto x = random_vector(N * C, 2), b = random_vector(C, 3), r = random_vector(N * C, 4);
    const auto dbias0 = random_vector(C, 5);
    DeviceBuffer<float> dx(x), db(b), dr(r);
    for (const Case& cs : kCases) {
      SCOPED_TRACE(::testing::Message() << "N " << N << ", C " << C << ", " << cs.name);
      DropoutSpec spec{cs.p, RngStream{11, 5}, (uint64_t{1} << 33) + 1001};
      std::vector<int32_t> seq_index;
      if (cs.sbh) {  // [s, b, C] rows with global sample and position indices
        spec.sbh_batch = N % 2 == 0 ? 2 : 1;
        spec.first_sample = 5;
        spec.t_offset = 3;
        const int64_t T = N / spec.sbh_batch;
        spec.seq_total = T + spec.t_offset + 2;
        if (cs.with_seq_index) {  // context parallelism: a permutation of the positions
          seq_index.resize(T + spec.t_offset);
          for (size_t t = 0; t < seq_index.size(); ++t) {
            seq_index[t] = static_cast<int32_t>((7 * static_cast<int64_t>(t) + 3) % spec.seq_total);
          }
          spec.seq_index = seq_index.data();
        }
      }
      DeviceBuffer<int32_t> dseq(seq_index);
      const DropoutSpec dspec = on_device(spec, dseq.get());
      const float* bias = cs.with_bias ? b.data() : nullptr;
      // Forward, into a fresh output and in place (out = inp).
      std::vector<float> want(N * C);
      ref::bias_dropout_add_forward(kRefKc, want.data(), x.data(), bias, r.data(), N, C, spec);
      auto out = poisoned<float>(N * C);
      DeviceBuffer<float> inplace(x);
      settle();
      k().bias_dropout_add_forward(kc(), out, dx, cs.with_bias ? db.get() : nullptr, dr, N, C,
                                   dspec);
      k().bias_dropout_add_forward(kc(), inplace, inplace, cs.with_bias ? db.get() : nullptr, dr, N,
                                   C, dspec);
      EXPECT_TRUE(all_close(out.download(), want, 1e-6, 1e-6));
      EXPECT_TRUE(all_close(inplace.download(), want, 1e-6, 1e-6));
      // Backward (dout = r), with dbias and without.
      std::vector<float> dinp(N * C), dbias = dbias0;
      ref::bias_dropout_add_backward(kRefKc, dinp.data(), dbias.data(), r.data(), N, C, spec);
      std::vector<double> scale(C);
      for (int64_t c = 0; c < C; ++c) scale[c] = std::fabs(dbias0[c]);
      for (int64_t i = 0; i < N * C; ++i) scale[i % C] += std::fabs(dinp[i]);
      auto ddinp = poisoned<float>(N * C), ddinp_only = poisoned<float>(N * C);
      DeviceBuffer<float> ddbias(dbias0);
      settle();
      k().bias_dropout_add_backward(kc(), ddinp, ddbias, dr, N, C, dspec);
      k().bias_dropout_add_backward(kc(), ddinp_only, nullptr, dr, N, C, dspec);
      EXPECT_TRUE(same_bits(ddinp.download(), dinp));
      EXPECT_TRUE(same_bits(ddinp_only.download(), dinp));
      EXPECT_TRUE(sums_close(ddbias.download(), dbias, scale, 1e-5));
    }
  }
}

// [s=6, b=2, C=5]: the two halves of the sequence (as sequence parallelism splits it), run
// with their t_offset, give exactly the rows of the whole, on the device as on the CPU.
TEST_F(CudaKernelTest, BiasDropoutAddSequenceShardsReproduceTheWholeMask) {
  const int64_t T = 6, B = 2, C = 5, N = T * B;
  const auto x = random_vector(N * C, 6), r = random_vector(N * C, 7);
  const DropoutSpec whole{0.4f, RngStream{1, 2}, 0, B, 7, T, 0};
  DeviceBuffer<float> dx(x), dr(r);
  auto y = poisoned<float>(N * C);
  settle();
  k().bias_dropout_add_forward(kc(), y, dx, nullptr, dr, N, C, whole);
  const auto full = y.download();
  for (int64_t shard = 0; shard < 2; ++shard) {
    DropoutSpec part = whole;
    part.t_offset = shard * T / 2;
    const int64_t off = shard * N * C / 2;
    auto half = poisoned<float>(N * C / 2);
    settle();
    k().bias_dropout_add_forward(kc(), half, dx.get() + off, nullptr, dr.get() + off, N / 2, C,
                                 part);
    const auto got = half.download();
    EXPECT_TRUE(
        same_bits(got, std::vector<float>(full.begin() + off, full.begin() + off + N * C / 2)));
  }
}

TEST_F(CudaKernelTest, DropoutWithNoElementsIsANoOp) {
  const int64_t C = 33;
  const auto g0 = random_vector(C, 8);
  DeviceBuffer<float> dbias(g0);
  const DropoutSpec spec{0.5f, RngStream{1, 2}, 3};
  settle();
  k().dropout_forward(kc(), nullptr, nullptr, 0, spec);
  k().dropout_backward(kc(), nullptr, nullptr, 0, spec);
  k().bias_dropout_add_forward(kc(), nullptr, nullptr, nullptr, nullptr, 0, C, spec);
  k().bias_dropout_add_backward(kc(), nullptr, dbias, nullptr, 0, C, spec);
  EXPECT_TRUE(same_bits(dbias.download(), g0));
}

}  // namespace
}  // namespace mindspeed
