// ALiBi (transformer/alibi.h and the kernels' AttentionMask::alibi_slopes): the slopes for
// 8, 12, 32 and 40 heads against MindSpeed's get_slopes and BLOOM's build_alibi_tensor as
// PyTorch computes them, the tensor-parallel slices, MindSpeed's flags as bias forms, and the
// attention output, lse and gradients of every kernel (ref/cpu, core/flash) against PyTorch
// for BLOOM's bias (slope * key position), pse_type 2 (-slope |j - i|) and pse_type 3
// (-slope sqrt|j - i|) on a causal 12-head problem. The fixture tests/golden/alibi/
// alibi.safetensors is written by tests/golden/gen_alibi.py. (Kernel vs naive reference,
// finite differences and block decomposition with ALiBi: attention_mask_test.cpp.)
#include "transformer/alibi.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "checkpointing/safetensors.h"
#include "core/check.h"
#include "kernels/kernels.h"
#include "test_util.h"

namespace mindspeed {
namespace {
using testing::all_close;
using testing::kKc;

SafetensorsFile fixture() {
  auto f =
      SafetensorsFile::open(std::string(MS_SOURCE_DIR) + "/tests/golden/alibi/alibi.safetensors");
  MS_CHECK_OK(f.status());
  return std::move(*f);
}

std::vector<float> read(const SafetensorsFile& f, const std::string& name) {
  auto v = f.read_f32(name);
  MS_CHECK_OK(v.status());
  return std::move(*v);
}

TEST(Alibi, SlopesMatchMindSpeedAndBloom) {
  const SafetensorsFile f = fixture();
  for (int64_t n : {8, 12, 32, 40}) {
    SCOPED_TRACE(n);
    const std::vector<float> ours = alibi_slopes(n);
    const std::vector<float> mindspeed = read(f, "mindspeed_slopes_" + std::to_string(n));
    const std::vector<float> bloom = read(f, "bloom_slopes_" + std::to_string(n));
    ASSERT_EQ(ours.size(), static_cast<size_t>(n));
    EXPECT_EQ(ours, mindspeed);  // the same doubles, rounded once
    // BLOOM raises the fp32-rounded base to powers up to n: its rounding grows to ~1e-6.
    EXPECT_TRUE(all_close(ours, bloom, 2e-6, 0.0));
  }
  // The rule itself: 2^(-8(i+1)/n) for a power of 2; 12 = the 8 of n = 8, then 16's odd ones.
  const std::vector<float> s8 = alibi_slopes(8), s12 = alibi_slopes(12), s16 = alibi_slopes(16);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(s8[i], std::ldexp(1.0f, -(i + 1)));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(s12[i], s8[i]);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(s12[8 + i], s16[2 * i]);
}

TEST(Alibi, TensorParallelSlices) {
  const std::vector<float> all = alibi_slopes(40);
  std::vector<float> joined;
  for (int64_t rank = 0; rank < 4; ++rank) {
    const std::vector<float> part = alibi_slopes_for_rank(40, 4, rank);
    ASSERT_EQ(part.size(), 10u);
    joined.insert(joined.end(), part.begin(), part.end());
  }
  EXPECT_EQ(joined, all);
  EXPECT_EQ(alibi_slopes_for_rank(12, 1, 0), alibi_slopes(12));
}

TEST(Alibi, MindSpeedFlagsAsBiasForms) {
  auto form = [](AlibiOptions o) {
    auto f = alibi_kernel_form(o);
    MS_CHECK_OK(f.status());
    return *f;
  };
  EXPECT_EQ(form({.fusion_attn_type = 2}).bias, AlibiBias::kSymmetric);
  EXPECT_EQ(form({.fusion_attn_type = 2, .diagonal_opposite = true}).bias, AlibiBias::kSymmetric);
  EXPECT_EQ(form({.fusion_attn_type = 0}).bias, AlibiBias::kSymmetric);
  EXPECT_EQ(form({.fusion_attn_type = 0, .diagonal_opposite = true}).bias, AlibiBias::kSigned);
  EXPECT_EQ(form({.fusion_attn_type = 3}).bias, AlibiBias::kSqrt);
  EXPECT_EQ(form({}).bias, AlibiBias::kKeyPosition);
  EXPECT_TRUE(form({}).causal);
  EXPECT_EQ(form({.square_alibi_mask = true}).bias, AlibiBias::kSigned);
  EXPECT_FALSE(form({.square_alibi_mask = true}).causal);
  EXPECT_TRUE(form({.square_alibi_mask = true, .fill_neg_inf = true}).causal);
  for (int type : {1, 4, -2}) {
    const auto f = alibi_kernel_form({.fusion_attn_type = type});
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  }
}

// Every kernel on the fixture's problem: B 2, 12 heads, T 9, D 8, causal.
TEST(Alibi, AttentionMatchesPyTorch) {
  const SafetensorsFile f = fixture();
  const int64_t B = 2, H = 12, T = 9, D = 8;
  const AttentionDims d{B, T, H, H, D, 1.0f / std::sqrt(static_cast<float>(D)), 0, H};
  const auto q = read(f, "q"), k = read(f, "k"), v = read(f, "v"), dout = read(f, "dout");
  const std::vector<float> slopes = alibi_slopes(H);
  for (auto [form, name] : {std::pair<AlibiBias, std::string>{AlibiBias::kKeyPosition, "bloom"},
                            {AlibiBias::kSymmetric, "symmetric"},
                            {AlibiBias::kSqrt, "sqrt"}}) {
    AttentionMask mask{};
    mask.alibi_slopes = slopes.data();
    mask.alibi = form;
    for (bool fast : {false, true}) {
      for (bool flash : {false, true}) {
        SCOPED_TRACE(name + (fast ? " cpu" : " ref") + (flash ? " flash" : " core"));
        std::vector<float> out(dout.size()), lse(B * H * T), probs(B * H * T * T), dq(q.size()),
            dk(k.size()), dv(v.size());
        const auto kind = flash ? AttentionKernel::kFlash : AttentionKernel::kCore;
        auto floats = fast ? cpu::attention_workspace_floats : ref::attention_workspace_floats;
        std::vector<float> ws(std::max<int64_t>(
            1, std::max(floats(kKc, d, kind, false), floats(kKc, d, kind, true))));
        if (flash) {
          (fast ? cpu::flash_attention_forward : ref::flash_attention_forward)(
              kKc, out.data(), lse.data(), q.data(), k.data(), v.data(), mask, d, DropoutSpec{},
              ws.data());
          (fast ? cpu::flash_attention_backward : ref::flash_attention_backward)(
              kKc, dq.data(), dk.data(), dv.data(), dout.data(), out.data(), lse.data(), q.data(),
              k.data(), v.data(), mask, d, DropoutSpec{}, ws.data());
          EXPECT_TRUE(all_close(lse, read(f, name + "_lse"), 1e-5, 1e-5)) << "lse";
        } else {
          (fast ? cpu::core_attention_forward : ref::core_attention_forward)(
              kKc, out.data(), probs.data(), q.data(), k.data(), v.data(), mask, d, DropoutSpec{},
              ws.data());
          (fast ? cpu::core_attention_backward : ref::core_attention_backward)(
              kKc, dq.data(), dk.data(), dv.data(), dout.data(), probs.data(), q.data(), k.data(),
              v.data(), d, DropoutSpec{}, ws.data());
        }
        EXPECT_TRUE(all_close(out, read(f, name + "_out"), 1e-5, 1e-5)) << "out";
        EXPECT_TRUE(all_close(dq, read(f, name + "_dq"), 1e-5, 1e-5)) << "dq";
        EXPECT_TRUE(all_close(dk, read(f, name + "_dk"), 1e-5, 1e-5)) << "dk";
        EXPECT_TRUE(all_close(dv, read(f, name + "_dv"), 1e-5, 1e-5)) << "dv";
      }
    }
  }
}

}  // namespace
}  // namespace mindspeed
