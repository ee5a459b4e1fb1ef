// npu_fusion_attention's sparse modes (kernels/sparse_mode.h): for every mode, with and
// without varlen, the masks sparse_mode_mask() builds give the attention of a naive dense
// reference whose boolean mask is written here from the documented rule of the mode (query
// row r, key row c of one sequence of Sq queries and Skv keys), for the ref and cpu core and
// flash kernels, forward and backward; and invalid combinations are rejected with a Status.
#include "kernels/sparse_mode.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "naive_attention.h"
#include "test_util.h"

namespace mindspeed {
namespace {
using testing::all_close;
using testing::kKc;
using testing::random_vector;

// The documented rule of each mode for one sequence.
bool rule(int mode, int64_t pre, int64_t next, int64_t Sq, int64_t Skv, int64_t r, int64_t c,
          int64_t prefix) {
  const int64_t shift = Skv - Sq;
  switch (mode) {
    case 0:
      return r - pre <= c && c <= r + next;
    case 1:
      return true;
    case 2:
      return c <= r;
    case 3:
      return c <= r + shift;
    case 4:
      return r + shift - pre <= c && c <= r + shift + next;
    case 5:
    case 6:
      return c < prefix || c <= r + shift;
  }
  return false;
}

struct Sequences {  // varlen: per sequence first row and length
  std::vector<int64_t> qs, ql, ks, kl;
};
Sequences split(const std::vector<int64_t>& qcum, const std::vector<int64_t>& kcum) {
  Sequences s;
  for (size_t i = 0; i < qcum.size(); ++i) {
    s.qs.push_back(i == 0 ? 0 : qcum[i - 1]);
    s.ql.push_back(qcum[i] - s.qs.back());
    s.ks.push_back(i == 0 ? 0 : kcum[i - 1]);
    s.kl.push_back(kcum[i] - s.ks.back());
  }
  return s;
}

struct Outputs {
  std::vector<float> out, lse, dq, dk, dv;
};

// Runs one kernel family (ref/cpu, core/flash) on the problem; core has no lse.
Outputs run(bool fast, bool flash, const AttentionDims& d, const AttentionMask& mask,
            const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
            const std::vector<float>& dout) {
  Outputs o{std::vector<float>(dout.size()), std::vector<float>(d.B * d.NQ * d.T),
            std::vector<float>(q.size()), std::vector<float>(k.size()),
            std::vector<float>(v.size())};
  const AttentionKernel kind = flash ? AttentionKernel::kFlash : AttentionKernel::kCore;
  auto floats = fast ? cpu::attention_workspace_floats : ref::attention_workspace_floats;
  std::vector<float> ws(
      std::max<int64_t>(1, std::max(floats(kKc, d, kind, false), floats(kKc, d, kind, true))));
  const DropoutSpec none{};
  if (flash) {
    (fast ? cpu::flash_attention_forward : ref::flash_attention_forward)(
        kKc, o.out.data(), o.lse.data(), q.data(), k.data(), v.data(), mask, d, none, ws.data());
    (fast ? cpu::flash_attention_backward : ref::flash_attention_backward)(
        kKc, o.dq.data(), o.dk.data(), o.dv.data(), dout.data(), o.out.data(), o.lse.data(),
        q.data(), k.data(), v.data(), mask, d, none, ws.data());
  } else {
    std::vector<float> probs(d.B * d.NQ * d.T * d.keys());
    (fast ? cpu::core_attention_forward : ref::core_attention_forward)(
        kKc, o.out.data(), probs.data(), q.data(), k.data(), v.data(), mask, d, none, ws.data());
    (fast ? cpu::core_attention_backward : ref::core_attention_backward)(
        kKc, o.dq.data(), o.dk.data(), o.dv.data(), dout.data(), probs.data(), q.data(), k.data(),
        v.data(), d, none, ws.data());
  }
  return o;
}

// Every kernel against the naive reference with the explicit mask `allowed`.
void check_mode(const std::string& what, const SparseModeArgs& args, int64_t NQ, int64_t NKV,
                const std::function<bool(int64_t, int64_t, int64_t)>& allowed) {
  SCOPED_TRACE(what);
  const StatusOr<SparseMask> sm = sparse_mode_mask(args);
  ASSERT_TRUE(sm.ok()) << sm.status().to_string();
  const int64_t D = 16;
  AttentionDims d{args.B, args.Tq, NQ, NKV, D, 0.25f, 0, NQ};
  d.Tk = args.Tk;
  d.seq_total = sm->seq_total;
  const auto q = random_vector(args.B * NQ * args.Tq * D, 1);
  const auto k = random_vector(args.B * NKV * args.Tk * D, 2);
  const auto v = random_vector(args.B * NKV * args.Tk * D, 3);
  const auto dout = random_vector(args.Tq * args.B * NQ * D, 4);
  const auto want = testing::naive_attention(d, q, k, v, dout, allowed);
  const AttentionMask mask = sm->mask();
  EXPECT_EQ(attention_visible_pairs(mask, d), [&] {
    double n = 0;
    for (int64_t b = 0; b < d.B; ++b)
      for (int64_t t = 0; t < d.T; ++t)
        for (int64_t j = 0; j < d.keys(); ++j) n += allowed(b, t, j);
    return n;
  }());
  for (bool fast : {false, true}) {
    for (bool flash : {false, true}) {
      SCOPED_TRACE(std::string(fast ? "cpu " : "ref ") + (flash ? "flash" : "core"));
      const Outputs got = run(fast, flash, d, mask, q, k, v, dout);
      const double rtol = fast ? 1e-4 : 1e-5, atol = fast ? 2e-5 : 1e-6;
      EXPECT_TRUE(all_close(got.out, want.out, rtol, atol)) << "out";
      EXPECT_TRUE(all_close(got.dq, want.dq, rtol, atol)) << "dq";
      EXPECT_TRUE(all_close(got.dk, want.dk, rtol, atol)) << "dk";
      EXPECT_TRUE(all_close(got.dv, want.dv, rtol, atol)) << "dv";
      if (!flash) continue;
      for (size_t i = 0; i < want.lse.size(); ++i) {
        if (std::isinf(want.lse[i])) {
          EXPECT_EQ(got.lse[i], want.lse[i]) << "lse " << i;
        } else {
          EXPECT_NEAR(got.lse[i], want.lse[i], 1e-5 * (1 + std::fabs(want.lse[i]))) << "lse " << i;
        }
      }
    }
  }
}

TEST(SparseMode, EveryModeMatchesItsRule) {
  // (Tq, Tk): equal, more keys (a query block at the end), more queries; sizes span tiles.
  for (auto [Tq, Tk] : {std::pair<int64_t, int64_t>{130, 130}, {70, 300}, {300, 70}}) {
    for (int mode : {0, 1, 2, 3, 4, 5, 6}) {
      for (auto [pre, next] : {std::pair<int64_t, int64_t>{65536, 0}, {17, 5}, {40, -9}}) {
        if ((mode == 1 || mode == 2 || mode == 3 || mode >= 5) && pre != 65536) continue;
        SparseModeArgs a;
        a.sparse_mode = mode;
        a.pre_tokens = pre;
        a.next_tokens = next;
        a.B = 2;
        a.Tq = Tq;
        a.Tk = Tk;
        const int64_t lo = Tq > Tk ? 0 : Tk - Tq;
        if (mode >= 5) a.prefix = {lo, std::min(Tk, lo + 37)};
        std::string what = "mode " + std::to_string(mode);
        what += " Tq " + std::to_string(Tq);
        what += " Tk " + std::to_string(Tk);
        what += " pre " + std::to_string(pre);
        what += " next " + std::to_string(next);
        check_mode(what, a, 4, 2, [&](int64_t b, int64_t t, int64_t j) {
          return rule(mode, pre, next, Tq, Tk, t, j, mode >= 5 ? a.prefix[b] : 0);
        });
      }
    }
  }
}

// Varlen: the sequences' rule; modes 7/8 make the last / first non-empty sequence a band
// (bottom-right aligned), the others causal (bottom-right / top-left).
void check_varlen(int mode, int64_t pre, int64_t next, const std::vector<int64_t>& qcum,
                  const std::vector<int64_t>& kcum) {
  const Sequences s = split(qcum, kcum);
  int64_t first = -1, last = -1;  // sequences with queries
  for (size_t i = 0; i < s.ql.size(); ++i) {
    if (s.ql[i] == 0) continue;
    if (first < 0) first = static_cast<int64_t>(i);
    last = static_cast<int64_t>(i);
  }
  const int64_t band = mode == 7 ? last : mode == 8 ? first : -1;
  SparseModeArgs a;
  a.sparse_mode = mode;
  a.pre_tokens = pre;
  a.next_tokens = next;
  a.Tq = qcum.back();
  a.Tk = kcum.back();
  a.actual_seq_qlen = qcum;
  a.actual_seq_kvlen = kcum;
  std::string what = "varlen mode " + std::to_string(mode);
  what += " Tq " + std::to_string(a.Tq);
  check_mode(what, a, 2, 1, [&](int64_t, int64_t t, int64_t j) {
    size_t i = 0;
    while (t >= s.qs[i] + s.ql[i]) ++i;  // the query's sequence
    if (j < s.ks[i] || j >= s.ks[i] + s.kl[i]) return false;
    const int64_t r = t - s.qs[i], c = j - s.ks[i];
    const int m = static_cast<int64_t>(i) == band ? 4 : mode == 7 ? 3 : mode == 8 ? 2 : mode;
    return rule(m, pre, next, s.ql[i], s.kl[i], r, c, 0);
  });
}

TEST(SparseMode, VarlenModesMatchTheirRules) {
  const std::vector<int64_t> even{2, 4, 6, 8, 10};
  for (int mode : {0, 1, 2, 3, 4})
    check_varlen(mode, mode == 0 || mode == 4 ? 1 : 65536, 0, even, even);
  // Sequences spanning tiles, unequal query and key lengths, an empty one.
  const std::vector<int64_t> q{100, 350, 350, 420, 700}, k{150, 350, 350, 600, 760};
  for (int mode : {0, 2, 3, 4}) check_varlen(mode, 33, 3, q, k);
  check_varlen(1, 65536, 0, q, k);
  // torch_npu's examples: mode 7 (last sequence a band), mode 8 (first sequence a band).
  check_varlen(7, 6, -2, {3, 5}, {3, 9});
  check_varlen(8, 4, 1, {3, 8, 12}, {4, 9, 13});
  // Larger: mode 7 needs Sq <= Skv outside the band; the band's conditions hold.
  check_varlen(7, 400, -20, {100, 300, 300, 520}, {150, 420, 420, 700});
  check_varlen(8, 400, -5, {100, 300, 520}, {110, 420, 700});
}

TEST(SparseMode, DefaultCausalIsModeTwo) {
  SparseModeArgs a;
  a.sparse_mode = 2;
  a.Tq = a.Tk = 50;
  const auto sm = sparse_mode_mask(a);
  ASSERT_TRUE(sm.ok());
  const AttentionMask m = sm->mask(), def{};
  EXPECT_EQ(m.pre_tokens, def.pre_tokens);
  EXPECT_EQ(m.next_tokens, def.next_tokens);
  EXPECT_EQ(m.q_offset, 0);
  EXPECT_EQ(m.k_offset, 0);
  EXPECT_EQ(m.q_pos, nullptr);
  EXPECT_EQ(m.doc_start, nullptr);
}

TEST(SparseMode, InvalidCombinationsAreRejected) {
  auto args = [](int mode) {
    SparseModeArgs a;
    a.sparse_mode = mode;
    a.Tq = a.Tk = 10;
    return a;
  };
  auto expect = [](const SparseModeArgs& a, StatusCode code, const char* text) {
    const auto sm = sparse_mode_mask(a);
    ASSERT_FALSE(sm.ok()) << text;
    EXPECT_EQ(sm.status().code(), code) << sm.status().to_string();
    EXPECT_NE(sm.status().message().find(text), std::string::npos) << sm.status().to_string();
  };
  expect(args(9), StatusCode::kInvalidArgument, "0..8");
  expect(args(-1), StatusCode::kInvalidArgument, "0..8");
  SparseModeArgs a = args(0);
  a.pre_tokens = -5;
  a.next_tokens = 2;
  expect(a, StatusCode::kInvalidArgument, "pre_tokens + next_tokens");
  a = args(4);
  a.pre_tokens = 1;
  a.next_tokens = -3;
  expect(a, StatusCode::kInvalidArgument, "pre_tokens + next_tokens");
  expect(args(7), StatusCode::kInvalidArgument, "varlen only");
  expect(args(8), StatusCode::kInvalidArgument, "varlen only");
  a = args(5);
  expect(a, StatusCode::kInvalidArgument, "one prefix length per sample");
  a.prefix = {11};
  expect(a, StatusCode::kInvalidArgument, "prefix[0] = 11");
  a = args(6);
  a.Tk = 20;
  a.prefix = {5};  // Sq <= Skv: N must be >= Skv - Sq = 10
  expect(a, StatusCode::kInvalidArgument, "must be in [10, 20]");
  a = args(2);
  a.prefix = {3};
  expect(a, StatusCode::kInvalidArgument, "prefix is for sparse_mode 5 and 6");
  a = args(5);
  a.prefix = {3};
  a.actual_seq_qlen = a.actual_seq_kvlen = {4, 10};
  expect(a, StatusCode::kInvalidArgument, "not supported with varlen");
  a.sparse_mode = 6;
  expect(a, StatusCode::kUnimplemented, "varlen");
  a = args(3);
  a.actual_seq_qlen = {4, 9};
  a.actual_seq_kvlen = {4, 10};
  expect(a, StatusCode::kInvalidArgument, "actual_seq_qlen ends at 9");
  a.actual_seq_qlen = {6, 4, 10};
  a.actual_seq_kvlen = {4, 6, 10};
  expect(a, StatusCode::kInvalidArgument, "must be cumulative");
  a.actual_seq_qlen = {4, 10};
  a.actual_seq_kvlen = {4, 4, 10};
  expect(a, StatusCode::kInvalidArgument, "same, non-zero number");
  a.actual_seq_qlen = {4, 10};
  a.actual_seq_kvlen = {10, 10};
  expect(a, StatusCode::kInvalidArgument, "no keys");
  a = args(7);  // last sequence (Sq 2, Skv 6) is the band: next in [-4, 0], pre >= 6
  a.Tq = 5;
  a.Tk = 9;
  a.actual_seq_qlen = {3, 5};
  a.actual_seq_kvlen = {3, 9};
  a.pre_tokens = 6;
  a.next_tokens = 1;
  expect(a, StatusCode::kInvalidArgument, "must be in [-4, 0]");
  a.next_tokens = -2;
  a.pre_tokens = 5;
  expect(a, StatusCode::kInvalidArgument, "pre_tokens (5)");
  a.pre_tokens = 6;
  a.actual_seq_qlen = {4, 5};  // sequence 0 has more queries than keys
  a.actual_seq_kvlen = {3, 9};
  a.next_tokens = -5;
  expect(a, StatusCode::kInvalidArgument, "more queries");
  a = args(8);  // first sequence (Sq 3, Skv 4): next >= -1
  a.Tq = 12;
  a.Tk = 13;
  a.actual_seq_qlen = {3, 8, 12};
  a.actual_seq_kvlen = {4, 9, 13};
  a.pre_tokens = 4;
  a.next_tokens = -2;
  expect(a, StatusCode::kInvalidArgument, "must be >= -1");
  a.next_tokens = 1;
  a.B = 2;
  expect(a, StatusCode::kInvalidArgument, "B = 1");
}

}  // namespace
}  // namespace mindspeed
