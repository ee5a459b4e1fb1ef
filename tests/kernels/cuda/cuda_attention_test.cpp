// The CUDA attention kernels (kernels/cuda/attention.cu) against their references
// (ref/attention.cpp): flash attention forward (out, lse) and backward (dq, dk, dv), core
// attention forward (out, probs) and backward, and the key/value-cache attention, on shapes
// that are not multiples of the 64-row tiles (T = 37, Tk != T, D = 16, 72, 160: one and two
// column blocks), MHA and GQA, with every AttentionMask feature: causal, document starts (EOD
// reset), a band, prefix keys, no mask, ALiBi in each form, positions (offsets, two-run
// position arrays of context parallelism), rows that see no key, and dropout (the same Philox
// elements as the reference: an identity V makes the kept elements visible). Outputs are
// poisoned first; the workspace too. fp32 against the reference's double: 1e-4 relative.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
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

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kRtol = 1e-4, kAtol = 2e-5;

// One attention problem: shapes, mask, dropout and its random inputs (host).
struct Problem {
  std::string name;
  AttentionDims dims;
  std::vector<int32_t> q_pos, k_pos, doc_start, prefix;
  int64_t q_offset = 0, k_offset = 0, pre = kAllTokens, next = 0;
  DropoutSpec dropout;
  std::vector<float> slopes;  // ALiBi: one per query head, or empty
  AlibiBias alibi = AlibiBias::kSymmetric;
  std::vector<float> q, k, v, dout;

  AttentionMask host_mask() const {
    AttentionMask m;
    m.doc_start = doc_start.empty() ? nullptr : doc_start.data();
    m.q_pos = q_pos.empty() ? nullptr : q_pos.data();
    m.k_pos = k_pos.empty() ? nullptr : k_pos.data();
    m.q_offset = q_offset;
    m.k_offset = k_offset;
    m.pre_tokens = pre;
    m.next_tokens = next;
    m.prefix = prefix.empty() ? nullptr : prefix.data();
    m.alibi_slopes = slopes.empty() ? nullptr : slopes.data();
    m.alibi = alibi;
    return m;
  }
  void set_alibi(AlibiBias form) {
    alibi = form;
    slopes.clear();
    for (int64_t h = 0; h < dims.NQ; ++h) slopes.push_back(0.0625f / static_cast<float>(1 << h));
  }
  int64_t Tk() const { return dims.keys(); }
  int64_t nq() const { return dims.B * dims.NQ * dims.T * dims.D; }
  int64_t nkv() const { return dims.B * dims.NKV * Tk() * dims.D; }
  int64_t nout() const { return dims.T * dims.B * dims.NQ * dims.D; }
  int64_t nlse() const { return dims.B * dims.NQ * dims.T; }
  int64_t nprobs() const { return dims.B * dims.NQ * dims.T * Tk(); }
  bool identity_positions() const {
    return q_pos.empty() && k_pos.empty() && q_offset == 0 && k_offset == 0;
  }
  void randomize(uint64_t seed) {
    q = random_vector(nq(), seed + 1);
    k = random_vector(nkv(), seed + 2);
    v = random_vector(nkv(), seed + 3);
    dout = random_vector(nout(), seed + 4);
  }
};

Problem make(std::string name, int64_t T, int64_t Tk, int64_t NQ, int64_t NKV, int64_t D,
             float p = 0.0f, int64_t B = 2) {
  Problem pr;
  pr.name = std::move(name);
  pr.dims = AttentionDims{B, T, NQ, NKV, D, 1.0f / std::sqrt(static_cast<float>(D)), 0, NQ};
  pr.dims.Tk = Tk == T ? 0 : Tk;
  pr.dropout = DropoutSpec{p, RngStream{11, 22}, 5};
  return pr;
}

std::vector<int32_t> runs(std::initializer_list<std::pair<int32_t, int32_t>> ranges) {
  std::vector<int32_t> pos;  // [first, last) per run
  for (auto [a, e] : ranges)
    for (int32_t x = a; x < e; ++x) pos.push_back(x);
  return pos;
}

// The mask's arrays on the device and the AttentionMask pointing at them.
struct DeviceMask {
  explicit DeviceMask(const Problem& p)
      : q_pos(p.q_pos), k_pos(p.k_pos), doc_start(p.doc_start), prefix(p.prefix), slopes(p.slopes) {
    mask = p.host_mask();
    mask.q_pos = p.q_pos.empty() ? nullptr : q_pos.get();
    mask.k_pos = p.k_pos.empty() ? nullptr : k_pos.get();
    mask.doc_start = p.doc_start.empty() ? nullptr : doc_start.get();
    mask.prefix = p.prefix.empty() ? nullptr : prefix.get();
    mask.alibi_slopes = p.slopes.empty() ? nullptr : slopes.get();
  }
  DeviceBuffer<int32_t> q_pos, k_pos, doc_start, prefix;
  DeviceBuffer<float> slopes;
  AttentionMask mask;
};

struct Result {
  std::vector<float> out, lse, probs, dq, dk, dv;
};

// The reference: flash (out, lse) or core (out, probs), and with `backward` the gradients.
Result run_ref(const Problem& pr, bool flash, bool backward) {
  const AttentionDims& d = pr.dims;
  Result r{
      std::vector<float>(pr.nout()), std::vector<float>(pr.nlse()), {},
      std::vector<float>(pr.nq()),   std::vector<float>(pr.nkv()),  std::vector<float>(pr.nkv())};
  const AttentionMask mask = pr.host_mask();
  if (flash) {
    ref::flash_attention_forward(kRefKc, r.out.data(), r.lse.data(), pr.q.data(), pr.k.data(),
                                 pr.v.data(), mask, d, pr.dropout, nullptr);
    if (backward)
      ref::flash_attention_backward(kRefKc, r.dq.data(), r.dk.data(), r.dv.data(), pr.dout.data(),
                                    r.out.data(), r.lse.data(), pr.q.data(), pr.k.data(),
                                    pr.v.data(), mask, d, pr.dropout, nullptr);
  } else {
    r.probs.resize(pr.nprobs());
    ref::core_attention_forward(kRefKc, r.out.data(), r.probs.data(), pr.q.data(), pr.k.data(),
                                pr.v.data(), mask, d, pr.dropout, nullptr);
    if (backward)
      ref::core_attention_backward(kRefKc, r.dq.data(), r.dk.data(), r.dv.data(), pr.dout.data(),
                                   r.probs.data(), pr.q.data(), pr.k.data(), pr.v.data(), d,
                                   pr.dropout, nullptr);
  }
  return r;
}

// The CUDA kernels of table `t` on the same problem: the backward from the kernels' own
// forward outputs (out, lse or probs).
Result run_cuda(const KernelTable& t, const KernelContext& kc, const Problem& pr, bool flash,
                bool backward) {
  const AttentionDims& d = pr.dims;
  const DeviceMask dm(pr);
  DeviceBuffer<float> q(pr.q), k(pr.k), v(pr.v), dout(pr.dout);
  auto out = poisoned<float>(pr.nout()), lse = poisoned<float>(pr.nlse());
  auto probs = poisoned<float>(flash ? 0 : pr.nprobs());
  auto dq = poisoned<float>(pr.nq()), dk = poisoned<float>(pr.nkv()),
       dv = poisoned<float>(pr.nkv());
  const AttentionKernel kind = flash ? AttentionKernel::kFlash : AttentionKernel::kCore;
  auto ws = poisoned<float>(static_cast<size_t>(
      std::max<int64_t>(1, std::max(t.attention_workspace_floats(kc, d, kind, false),
                                    t.attention_workspace_floats(kc, d, kind, true)))));
  Result r;
  if (flash) {
    t.flash_attention_forward(kc, out, lse, q, k, v, dm.mask, d, pr.dropout, ws);
    if (backward)
      t.flash_attention_backward(kc, dq, dk, dv, dout, out, lse, q, k, v, dm.mask, d, pr.dropout,
                                 ws);
    r.lse = lse.download();
  } else {
    t.core_attention_forward(kc, out, probs, q, k, v, dm.mask, d, pr.dropout, ws);
    if (backward)
      t.core_attention_backward(kc, dq, dk, dv, dout, probs, q, k, v, d, pr.dropout, ws);
    r.probs = probs.download();
  }
  r.out = out.download();
  if (backward) {
    r.dq = dq.download();
    r.dk = dk.download();
    r.dv = dv.download();
  }
  return r;
}

// lse: -inf exactly where expected, close elsewhere.
::testing::AssertionResult lse_close(const std::vector<float>& got, const std::vector<float>& want,
                                     double tol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    const bool masked = want[i] == kNegInf;
    if (masked != (got[i] == kNegInf) ||
        (!masked && !(std::fabs(got[i] - want[i]) <= tol * (1.0 + std::fabs(want[i])))))
      return ::testing::AssertionFailure() << "lse " << i << ": " << got[i] << " vs " << want[i];
  }
  return ::testing::AssertionSuccess();
}

// ---- The cases ---------------------------------------------------------------------------
// Each base case at (NKV, D) in {2, 4} x {16, 72} with NQ = 4, B = 2.
std::vector<Problem> base_cases(int64_t NKV, int64_t D) {
  const std::string tag = "_nkv" + std::to_string(NKV) + "_d" + std::to_string(D);
  std::vector<Problem> c;
  c.push_back(make("causal" + tag, 37, 37, 4, NKV, D));
  {
    Problem p = make("documents" + tag, 37, 37, 4, NKV, D);
    p.doc_start.resize(2 * 37);
    for (int64_t b = 0; b < 2; ++b) {
      int32_t start = 0;
      for (int64_t t = 0; t < 37; ++t) {
        p.doc_start[b * 37 + t] = start;
        if (b == 0 ? (t == 5 || t == 20) : t == 17)
          start = static_cast<int32_t>(t + 1);  // EOD after t
      }
    }
    c.push_back(p);
  }
  {
    Problem p = make("band" + tag, 37, 37, 4, NKV, D);
    p.pre = 7;
    p.next = 2;
    c.push_back(p);
  }
  {
    Problem p = make("prefix" + tag, 37, 37, 4, NKV, D);
    p.prefix = {5, 20};
    c.push_back(p);
    Problem w = make("prefix_band" + tag, 37, 37, 4, NKV, D);
    w.pre = 6;
    w.prefix = {4, 12};  // sample 0: a masked gap between the prefix and the band
    c.push_back(w);
  }
  {
    Problem p = make("general" + tag, 37, 37, 4, NKV, D);
    p.next = kAllTokens;
    c.push_back(p);
  }
  {  // Tk != T: later queries (a previous context-parallel block): every key visible.
    Problem p = make("later_queries" + tag, 37, 70, 4, NKV, D);
    p.q_offset = 70;
    c.push_back(p);
  }
  {  // Keys at 10..39 against queries 0..36: rows 0..9 see no key.
    Problem p = make("masked_rows" + tag, 37, 30, 4, NKV, D);
    p.k_offset = 10;
    c.push_back(p);
  }
  {  // Context parallelism's two-run positions (S = 120): diagonal and off-diagonal blocks.
    Problem p = make("two_runs_diagonal" + tag, 40, 40, 4, NKV, D);
    p.q_pos = p.k_pos = runs({{0, 20}, {100, 120}});
    p.dims.seq_total = 120;
    c.push_back(p);
    Problem o = make("two_runs_offdiagonal" + tag, 40, 37, 4, NKV, D);
    o.q_pos = runs({{0, 20}, {100, 120}});
    o.k_pos = runs({{20, 40}, {60, 77}});
    o.dims.seq_total = 120;
    c.push_back(o);
  }
  // ALiBi: each form, causal and without a mask.
  const std::pair<AlibiBias, const char*> forms[] = {{AlibiBias::kSymmetric, "_alibi_symmetric"},
                                                     {AlibiBias::kSqrt, "_alibi_sqrt"},
                                                     {AlibiBias::kSigned, "_alibi_signed"},
                                                     {AlibiBias::kKeyPosition, "_alibi_keypos"}};
  for (auto [form, suffix] : forms) {
    Problem p = make(std::string("causal") + suffix + tag, 37, 37, 4, NKV, D);
    p.set_alibi(form);
    c.push_back(p);
    Problem g = make(std::string("general") + suffix + tag, 37, 50, 4, NKV, D);
    g.next = kAllTokens;
    g.q_offset = 6;
    g.set_alibi(form);
    c.push_back(g);
  }
  // Dropout: identity positions (core backward too), then positions decide the elements.
  {
    Problem p = make("dropout_causal" + tag, 37, 37, 4, NKV, D, 0.2f);
    p.dims.head_offset = 3;
    p.dims.num_heads_total = 3 + 4 + 2;
    p.dropout.first_sample = 1;
    c.push_back(p);
    Problem w = make("dropout_documents_two_runs" + tag, 40, 40, 4, NKV, D, 0.3f);
    w.q_pos = w.k_pos = runs({{0, 20}, {100, 120}});
    w.dims.seq_total = 120;
    w.doc_start.assign(2 * 40, 0);
    for (int64_t t = 25; t < 40; ++t) w.doc_start[40 + t] = 105;  // sample 1: a document from 105
    c.push_back(w);
    Problem o = make("dropout_later_queries_alibi" + tag, 37, 70, 4, NKV, D, 0.1f);
    o.q_offset = 70;
    o.dims.seq_total = 107;
    o.set_alibi(AlibiBias::kSymmetric);
    c.push_back(o);
  }
  return c;
}

// Several tiles per side (tile skipping, the causal load order), D of one and two column
// blocks and one below a chunk.
std::vector<Problem> multi_tile_cases() {
  std::vector<Problem> c;
  {
    Problem p = make("long_causal_q_offset", 150, 200, 4, 2, 72);
    p.q_offset = 50;
    c.push_back(p);
  }
  {
    Problem p = make("long_band_k_offset", 130, 230, 4, 1, 16);
    p.pre = 13;
    p.next = 5;
    p.k_offset = -40;
    c.push_back(p);
  }
  {
    Problem p = make("long_documents_dropout", 140, 140, 4, 2, 72, 0.15f);
    p.doc_start.resize(2 * 140);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 140; ++t)
        p.doc_start[b * 140 + t] = b == 0 ? (t < 50 ? 0 : t < 97 ? 50 : 97) : (t < 64 ? 0 : 64);
    c.push_back(p);
  }
  {
    Problem p = make("long_two_runs_dropout", 200, 200, 4, 2, 16, 0.2f, 1);
    p.q_pos = p.k_pos = runs({{0, 100}, {300, 400}});
    p.dims.seq_total = 400;
    c.push_back(p);
  }
  {
    Problem p = make("long_prefix_band_alibi", 150, 260, 4, 2, 72);
    p.q_offset = 110;
    p.pre = 40;
    p.prefix = {30, 150};  // sample 1: the prefix reaches the band
    p.set_alibi(AlibiBias::kSqrt);
    c.push_back(p);
  }
  c.push_back(make("big_head_dim_causal", 70, 70, 2, 1, 160));
  {
    Problem p = make("big_head_dim_general_dropout", 45, 66, 2, 2, 160, 0.25f);
    p.next = kAllTokens;
    c.push_back(p);
  }
  c.push_back(make("small_head_dim", 37, 37, 4, 2, 8));
  c.push_back(make("single_row", 1, 1, 2, 2, 16));
  return c;
}

std::vector<Problem> all_cases() {
  std::vector<Problem> c;
  for (int64_t nkv : {2, 4})
    for (int64_t D : {16, 72}) {
      auto part = base_cases(nkv, D);
      c.insert(c.end(), part.begin(), part.end());
    }
  auto part = multi_tile_cases();
  c.insert(c.end(), part.begin(), part.end());
  uint64_t seed = 100;
  for (Problem& p : c) p.randomize(seed += 10);
  return c;
}

KernelTable flash_table() {
  return cuda::select_cuda_kernels(KernelOptions{.flash_attention = true});
}

// ---- Tests -------------------------------------------------------------------------------
TEST(CudaAttentionTable, FlashKernelsOnlyWhenSelected) {
  const KernelTable plain = cuda::select_cuda_kernels(KernelOptions{});
  EXPECT_NE(plain.core_attention_forward, nullptr);
  EXPECT_NE(plain.core_attention_backward, nullptr);
  EXPECT_NE(plain.kv_cache_attention_forward, nullptr);
  EXPECT_NE(plain.kv_cache_attention_workspace_floats, nullptr);
  EXPECT_NE(plain.attention_workspace_floats, nullptr);
  EXPECT_EQ(plain.flash_attention_forward, nullptr);
  EXPECT_EQ(plain.flash_attention_backward, nullptr);
  const KernelTable flash = flash_table();
  EXPECT_NE(flash.flash_attention_forward, nullptr);
  EXPECT_NE(flash.flash_attention_backward, nullptr);
  // The workspace: D = rowsum(dout * out) for flash backward, plus the recomputed out for core.
  const AttentionDims d{2, 37, 4, 2, 16, 0.25f, 0, 4};
  const KernelContext kc;
  EXPECT_EQ(flash.attention_workspace_floats(kc, d, AttentionKernel::kFlash, false), 0);
  EXPECT_EQ(flash.attention_workspace_floats(kc, d, AttentionKernel::kFlash, true), 2 * 4 * 37);
  EXPECT_EQ(flash.attention_workspace_floats(kc, d, AttentionKernel::kCore, false), 0);
  EXPECT_EQ(flash.attention_workspace_floats(kc, d, AttentionKernel::kCore, true),
            37 * 2 * 4 * 16 + 2 * 4 * 37);
  EXPECT_EQ(flash.kv_cache_attention_workspace_floats(kc, 5, 70), 0);
}

TEST_F(CudaKernelTest, FlashAttentionMatchesTheReference) {
  const KernelTable t = flash_table();
  for (const Problem& pr : all_cases()) {
    SCOPED_TRACE(pr.name);
    const Result want = run_ref(pr, true, true);
    const Result got = run_cuda(t, kc(), pr, true, true);
    EXPECT_TRUE(all_close(got.out, want.out, kRtol, kAtol)) << "out";
    EXPECT_TRUE(lse_close(got.lse, want.lse, 1e-5)) << "lse";
    EXPECT_TRUE(all_close(got.dq, want.dq, kRtol, kAtol)) << "dq";
    EXPECT_TRUE(all_close(got.dk, want.dk, kRtol, kAtol)) << "dk";
    EXPECT_TRUE(all_close(got.dv, want.dv, kRtol, kAtol)) << "dv";
  }
}

TEST_F(CudaKernelTest, CoreAttentionMatchesTheReference) {
  for (const Problem& pr : all_cases()) {
    SCOPED_TRACE(pr.name);
    // Core attention's backward regenerates dropout at identity positions only.
    const bool backward = !pr.dropout.active() || pr.identity_positions();
    const Result want = run_ref(pr, false, backward);
    const Result got = run_cuda(k(), kc(), pr, false, backward);
    EXPECT_TRUE(all_close(got.out, want.out, kRtol, kAtol)) << "out";
    EXPECT_TRUE(all_close(got.probs, want.probs, kRtol, 1e-6)) << "probs";
    if (!backward) continue;
    EXPECT_TRUE(all_close(got.dq, want.dq, kRtol, kAtol)) << "dq";
    EXPECT_TRUE(all_close(got.dk, want.dk, kRtol, kAtol)) << "dk";
    EXPECT_TRUE(all_close(got.dv, want.dv, kRtol, kAtol)) << "dv";
  }
}

// A row that sees no key: out 0, lse -inf and zero gradients, exactly (flash); probs and out
// 0 (core). Every query here is before every key.
TEST_F(CudaKernelTest, RowsThatSeeNoKeyAreZero) {
  const KernelTable t = flash_table();
  Problem pr = make("masked", 10, 50, 2, 1, 8, 0.2f, 1);
  pr.k_offset = 50;
  pr.randomize(7);
  const Result f = run_cuda(t, kc(), pr, true, true);
  for (float x : f.out) EXPECT_EQ(x, 0.0f);
  for (float x : f.lse) EXPECT_EQ(x, kNegInf);
  for (const auto* g : {&f.dq, &f.dk, &f.dv})
    for (float x : *g) EXPECT_EQ(x, 0.0f);
  const Result c = run_cuda(k(), kc(), pr, false, false);
  for (float x : c.out) EXPECT_EQ(x, 0.0f);
  for (float x : c.probs) EXPECT_EQ(x, 0.0f);
}

// With v = the identity (D = Tk, no mask) out[t, h*D + j] = P[t, j] * keep[t, j]: zero exactly
// where the element was dropped, so the kept elements must be the reference's, one by one.
TEST_F(CudaKernelTest, AttentionDropoutKeepsTheReferenceElements) {
  const KernelTable t = flash_table();
  Problem pr = make("identity_v", 37, 37, 4, 2, 37, 0.4f);
  pr.next = kAllTokens;
  pr.q_offset = 11;
  pr.k_offset = 3;
  pr.dims.seq_total = 60;
  pr.dims.head_offset = 2;
  pr.dims.num_heads_total = 8;
  pr.dropout.first_sample = 3;
  pr.dropout.index_offset = 1001;  // not a multiple of 4: elements straddle Philox blocks
  pr.randomize(9);
  std::fill(pr.v.begin(), pr.v.end(), 0.0f);
  for (int64_t bg = 0; bg < pr.dims.B * pr.dims.NKV; ++bg)
    for (int64_t j = 0; j < 37; ++j) pr.v[(bg * 37 + j) * 37 + j] = 1.0f;
  for (bool flash : {true, false}) {
    SCOPED_TRACE(flash ? "flash" : "core");
    const Result want = run_ref(pr, flash, false);
    const Result got = run_cuda(flash ? t : k(), kc(), pr, flash, false);
    int64_t dropped = 0, mismatched = 0;
    for (size_t i = 0; i < want.out.size(); ++i) {
      dropped += want.out[i] == 0.0f;
      mismatched += (want.out[i] == 0.0f) != (got.out[i] == 0.0f);
    }
    EXPECT_EQ(mismatched, 0);
    EXPECT_GT(dropped, static_cast<int64_t>(want.out.size()) / 4);  // p = 0.4 drops some
    EXPECT_TRUE(all_close(got.out, want.out, kRtol, kAtol));
  }
}

// No float atomics: the same inputs give the same bits (GQA sums over the group included).
TEST_F(CudaKernelTest, AttentionBackwardIsBitReproducible) {
  const KernelTable t = flash_table();
  Problem pr = make("repro", 150, 150, 8, 2, 72, 0.1f);
  pr.randomize(13);
  for (bool flash : {true, false}) {
    SCOPED_TRACE(flash ? "flash" : "core");
    const Result a = run_cuda(flash ? t : k(), kc(), pr, flash, true);
    const Result b = run_cuda(flash ? t : k(), kc(), pr, flash, true);
    const std::vector<float> Result::*fields[] = {&Result::out, &Result::dq, &Result::dk,
                                                  &Result::dv};
    for (const auto field : fields) {
      ASSERT_EQ((a.*field).size(), (b.*field).size());
      EXPECT_EQ(
          std::memcmp((a.*field).data(), (b.*field).data(), (a.*field).size() * sizeof(float)), 0);
    }
  }
}

TEST_F(CudaKernelTest, KvCacheAttentionMatchesTheReference) {
  struct Case {
    int64_t B, NQ, NKV, Tq, Tk, S, D;
  };
  const Case cases[] = {{2, 4, 2, 1, 37, 50, 16},    {2, 4, 4, 1, 37, 37, 72},
                        {2, 4, 2, 37, 37, 40, 72},   {2, 4, 1, 5, 70, 80, 16},
                        {1, 2, 2, 70, 150, 150, 72}, {1, 4, 2, 3, 200, 256, 160}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "B " << c.B << " NQ " << c.NQ << " NKV " << c.NKV << " Tq "
                                      << c.Tq << " Tk " << c.Tk << " S " << c.S << " D " << c.D);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
    const auto q = random_vector(c.B * c.NQ * c.Tq * c.D, 21);
    const auto kc_host = random_vector(c.B * c.NKV * c.S * c.D, 22);
    const auto vc_host = random_vector(c.B * c.NKV * c.S * c.D, 23);
    std::vector<float> want(c.Tq * c.B * c.NQ * c.D);
    std::vector<float> ref_ws(
        std::max<int64_t>(1, ref::kv_cache_attention_workspace_floats(kRefKc, c.Tq, c.Tk)));
    ref::kv_cache_attention_forward(kRefKc, want.data(), q.data(), kc_host.data(), vc_host.data(),
                                    c.B, c.NQ, c.NKV, c.Tq, c.Tk, c.S, c.D, scale, ref_ws.data());
    DeviceBuffer<float> dq(q), dk(kc_host), dv(vc_host);
    auto out = poisoned<float>(want.size());
    const int64_t ws_floats = k().kv_cache_attention_workspace_floats(kc(), c.Tq, c.Tk);
    auto ws = poisoned<float>(static_cast<size_t>(std::max<int64_t>(1, ws_floats)));
    k().kv_cache_attention_forward(kc(), out, dq, dk, dv, c.B, c.NQ, c.NKV, c.Tq, c.Tk, c.S, c.D,
                                   scale, ws);
    EXPECT_TRUE(all_close(out.download(), want, kRtol, kAtol));
  }
}

}  // namespace
}  // namespace mindspeed
