// The CUDA QKV split with rotary embedding against its reference (ref/rope.cpp), forward and
// backward, over GQA layouts (G = NQ/NKV from 1 to 8, one key/value group), with and without
// the rotary tables and the per-token positions, head dims from 2 to 128, and more (t, b) rows
// than a grid's y dimension holds (65535). The copies (v, and q/k without rope) are bit for
// bit; a rotated value is two rounded products and one rounded sum on both sides (bit for bit
// unless the host compiler contracts the reference's into an FMA: held to an ulp or so).
// Outputs start poisoned (NaN), so an element the kernel misses fails.
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

/// The backend's stream is non-blocking: let the uploads and poisoning (legacy stream) land
/// before a kernel reads or writes the buffers.
void settle() { MS_CUDA_CHECK(cudaDeviceSynchronize()); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Layout {
  int64_t T, B, NQ, NKV, D;
  bool rope, positions;
};

void check_layout(const KernelTable& kt, const KernelContext& kc, const Layout& l) {
  SCOPED_TRACE(::testing::Message()
               << "T " << l.T << ", B " << l.B << ", NQ " << l.NQ << ", NKV " << l.NKV << ", D "
               << l.D << ", rope " << l.rope << ", positions " << l.positions);
  const int64_t T = l.T, B = l.B, NQ = l.NQ, NKV = l.NKV, D = l.D, P = T + 5;
  const int64_t G = NQ / NKV, row = NKV * (G + 2) * D;
  const auto qkv = random_vector(T * B * row, 1);
  std::vector<float> cos(P * D / 2), sin(P * D / 2);
  for (int64_t i = 0; i < P * D / 2; ++i) {  // a proper rotation table, angles p * theta_i
    const double theta =
        static_cast<double>(i / (D / 2)) * std::pow(10000.0, -2.0 * (i % (D / 2)) / D);
    cos[i] = static_cast<float>(std::cos(theta));
    sin[i] = static_cast<float>(std::sin(theta));
  }
  std::vector<int32_t> pos(B * T);
  for (int64_t i = 0; i < B * T; ++i) pos[i] = static_cast<int32_t>((i * 5 + 2) % P);
  const float* c = l.rope ? cos.data() : nullptr;
  const float* s = l.rope ? sin.data() : nullptr;
  const int32_t* p = l.positions ? pos.data() : nullptr;
  const int64_t nq = B * NQ * T * D, nkv = B * NKV * T * D;
  std::vector<float> q(nq), k(nkv), v(nkv);
  ref::qkv_split_rope_forward(kRefKc, q.data(), k.data(), v.data(), qkv.data(), p, c, s, T, B, NQ,
                              NKV, D);
  DeviceBuffer<float> dqkv_in(qkv), dcos(cos), dsin(sin);
  DeviceBuffer<int32_t> dpos(pos);
  const float* dc = l.rope ? dcos.get() : nullptr;
  const float* ds = l.rope ? dsin.get() : nullptr;
  const int32_t* dp = l.positions ? dpos.get() : nullptr;
  auto gq = poisoned<float>(nq), gk = poisoned<float>(nkv), gv = poisoned<float>(nkv);
  settle();
  kt.qkv_split_rope_forward(kc, gq, gk, gv, dqkv_in, dp, dc, ds, T, B, NQ, NKV, D);
  const auto got_q = gq.download(), got_k = gk.download();
  EXPECT_TRUE(same_bits(gv.download(), v));
  if (l.rope) {
    EXPECT_TRUE(all_close(got_q, q, 1e-6, 1e-6));
    EXPECT_TRUE(all_close(got_k, k, 1e-6, 1e-6));
  } else {
    EXPECT_TRUE(same_bits(got_q, q));
    EXPECT_TRUE(same_bits(got_k, k));
  }
  // Backward from gradients of the forward's shapes.
  const auto dq = random_vector(nq, 2), dk = random_vector(nkv, 3), dv = random_vector(nkv, 4);
  std::vector<float> want(T * B * row);
  ref::qkv_split_rope_backward(kRefKc, want.data(), dq.data(), dk.data(), dv.data(), p, c, s, T, B,
                               NQ, NKV, D);
  DeviceBuffer<float> ddq(dq), ddk(dk), ddv(dv);
  auto got = poisoned<float>(T * B * row);
  settle();
  kt.qkv_split_rope_backward(kc, got, ddq, ddk, ddv, dp, dc, ds, T, B, NQ, NKV, D);
  if (l.rope) {
    EXPECT_TRUE(all_close(got.download(), want, 1e-6, 1e-6));
  } else {
    EXPECT_TRUE(same_bits(got.download(), want));
  }
}

TEST_F(CudaKernelTest, QkvSplitRopeMatchesTheReference) {
  constexpr Layout kLayouts[] = {{9, 2, 4, 4, 20, true, false},    {9, 2, 4, 2, 20, true, true},
                                 {9, 2, 6, 1, 20, true, true},     {9, 2, 3, 3, 20, false, false},
                                 {7, 3, 1, 1, 2, true, true},      {33, 2, 8, 1, 128, true, true},
                                 {17, 1, 16, 2, 128, true, false}, {5, 4, 2, 2, 64, false, true},
                                 {33000, 2, 1, 1, 4, true, true}};
  for (const Layout& l : kLayouts) check_layout(k(), kc(), l);
}

// Backward undoes forward for a proper rotation (cos^2 + sin^2 = 1), on the device alone.
TEST_F(CudaKernelTest, QkvSplitRopeBackwardOfForwardRestoresTheInput) {
  const int64_t T = 11, B = 2, NQ = 4, NKV = 2, D = 16, P = 16, G = NQ / NKV;
  const auto qkv = random_vector(T * B * NKV * (G + 2) * D, 5);
  std::vector<float> cos(P * D / 2), sin(P * D / 2);
  for (int64_t i = 0; i < P * D / 2; ++i) {
    cos[i] = std::cos(0.1f * static_cast<float>(i));
    sin[i] = std::sin(0.1f * static_cast<float>(i));
  }
  DeviceBuffer<float> dqkv(qkv), dcos(cos), dsin(sin);
  auto q = poisoned<float>(B * NQ * T * D), k2 = poisoned<float>(B * NKV * T * D);
  auto v = poisoned<float>(B * NKV * T * D);
  auto back = poisoned<float>(qkv.size());
  settle();
  k().qkv_split_rope_forward(kc(), q, k2, v, dqkv, nullptr, dcos, dsin, T, B, NQ, NKV, D);
  k().qkv_split_rope_backward(kc(), back, q, k2, v, nullptr, dcos, dsin, T, B, NQ, NKV, D);
  EXPECT_TRUE(all_close(back.download(), qkv, 1e-5, 1e-6));
}

TEST_F(CudaKernelTest, QkvSplitRopeWithNoRowsIsANoOp) {
  settle();
  k().qkv_split_rope_forward(kc(), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0,
                             2, 4, 2, 8);
  k().qkv_split_rope_backward(kc(), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                              3, 0, 4, 2, 8);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace mindspeed
