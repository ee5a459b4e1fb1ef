// The CUDA embedding kernels against their references (ref/embedding.cpp), bit for bit: the
// forward copies rows (zeros for ids off this rank's vocabulary slice, below or above it);
// the backward adds each token's gradient row into its dwte row in token order, as the
// reference does, so even repeated ids (a few ids taking most tokens, long runs of one id)
// give the reference's bits, with dwte starting nonzero. Shapes with one column, widths that
// are not multiples of a block, more tokens than a grid's y dimension holds (65535), and a
// GPT-2 sized vocabulary slice.
#include <cstring>
#include <vector>

#include "cuda_test_util.h"

namespace mindspeed {
namespace {

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

struct Shape {
  int64_t N, C, V, vocab_start;
};

/// Token ids over [vocab_start - 3, vocab_start + V + 3): some off this rank on both sides,
/// every third token one of three hot ids (repeated rows).
std::vector<int32_t> token_ids(const Shape& s) {
  std::vector<int32_t> ids(s.N);
  for (int64_t n = 0; n < s.N; ++n) {
    const int64_t spread = (n * 7919 + 13) % (s.V + 6) - 3;
    const int64_t hot = n % 9 == 0 ? 0 : n % 9 == 3 ? s.V - 1 : s.V / 2;
    ids[n] = static_cast<int32_t>(s.vocab_start + (n % 3 == 0 ? hot : spread));
  }
  return ids;
}

TEST_F(CudaKernelTest, EmbeddingMatchesTheReferenceBitForBit) {
  constexpr Shape kShapes[] = {{1, 1, 11, 2},     {7, 33, 11, 2},          {129, 1000, 11, 0},
                               {33, 4097, 11, 2}, {129, 257, 50257, 1000}, {3000, 33, 50, 7},
                               {70000, 3, 40, 2}, {600, 1000, 1, 5}};
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "N " << s.N << ", C " << s.C << ", V " << s.V);
    const auto ids = token_ids(s);
    const auto wte = random_vector(s.V * s.C, 1), dy = random_vector(s.N * s.C, 2);
    std::vector<float> want(s.N * s.C);
    ref::embedding_forward(kRefKc, want.data(), ids.data(), wte.data(), s.vocab_start, s.V, s.N,
                           s.C);
    DeviceBuffer<int32_t> dids(ids);
    DeviceBuffer<float> dwte(wte), ddy(dy);
    auto out = poisoned<float>(s.N * s.C);
    settle();
    k().embedding_forward(kc(), out, dids, dwte, s.vocab_start, s.V, s.N, s.C);
    EXPECT_TRUE(same_bits(out.download(), want));
    const auto dwte0 = random_vector(s.V * s.C, 3);
    std::vector<float> dwant = dwte0;
    ref::embedding_backward(kRefKc, dwant.data(), dy.data(), ids.data(), s.vocab_start, s.V, s.N,
                            s.C);
    DeviceBuffer<float> ddwte(dwte0);
    settle();
    k().embedding_backward(kc(), ddwte, ddy, dids, s.vocab_start, s.V, s.N, s.C);
    EXPECT_TRUE(same_bits(ddwte.download(), dwant));
  }
}

// Every token the same id: one run of N tokens into one row.
TEST_F(CudaKernelTest, EmbeddingBackwardOfOneRepeatedId) {
  const int64_t N = 5000, C = 77, V = 3;
  const std::vector<int32_t> ids(N, 1);
  const auto dy = random_vector(N * C, 4, 1.0f, 0.3f), dwte0 = random_vector(V * C, 5);
  std::vector<float> want = dwte0;
  ref::embedding_backward(kRefKc, want.data(), dy.data(), ids.data(), 0, V, N, C);
  DeviceBuffer<int32_t> dids(ids);
  DeviceBuffer<float> ddy(dy), ddwte(dwte0);
  settle();
  k().embedding_backward(kc(), ddwte, ddy, dids, 0, V, N, C);
  EXPECT_TRUE(same_bits(ddwte.download(), want));
}

TEST_F(CudaKernelTest, EmbeddingWithNoTokensIsANoOp) {
  const int64_t C = 33, V = 4;
  const auto dwte0 = random_vector(V * C, 6);
  DeviceBuffer<float> ddwte(dwte0);
  settle();
  k().embedding_forward(kc(), nullptr, nullptr, ddwte, 0, V, 0, C);
  k().embedding_backward(kc(), ddwte, nullptr, nullptr, 0, V, 0, C);
  EXPECT_TRUE(same_bits(ddwte.download(), dwte0));
}

}  // namespace
}  // namespace mindspeed
