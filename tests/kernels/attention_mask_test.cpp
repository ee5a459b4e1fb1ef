// Generalised attention (AttentionMask / AttentionDims of kernel_types.h): T query rows
// against Tk key rows at arbitrary positions (offsets, two-run position arrays of context
// parallelism), causal / non-causal / band masks, documents, GQA, dropout indexed by
// positions, rows that see no key. Every kernel (ref and cpu, core and flash) is checked
// against a naive dense attention written here from the visibility rule (explicit boolean
// mask, double precision); flash backward against finite differences; and the block
// decomposition of context parallelism: flash per key block merged by ring_attention_update
// equals the whole, and backward per block from the merged out/lse sums to the whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "grad_check.h"
#include "kernels/kernels.h"
#include "naive_attention.h"
#include "test_util.h"

namespace mindspeed {
namespace {
using testing::all_close;
using testing::check_gradient;
using testing::kKc;
using testing::random_vector;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One attention problem: shapes, mask, dropout and its random inputs.
struct Problem {
  std::string name;
  AttentionDims dims;
  std::vector<int32_t> q_pos, k_pos, doc_start, prefix;
  int64_t q_offset = 0, k_offset = 0, pre = kAllTokens, next = 0;
  DropoutSpec dropout;
  std::vector<float> slopes;  // ALiBi: one per query head, or empty
  AlibiBias alibi = AlibiBias::kSymmetric;
  std::vector<float> q, k, v, dout;

  AttentionMask mask() const {
    AttentionMask m{doc_start.empty() ? nullptr : doc_start.data()};
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
  // ALiBi of form `f` with slopes 1/16, 1/32, ... (kept small so that float scores stay exact
  // enough next to the double reference).
  void set_alibi(AlibiBias f) {
    alibi = f;
    slopes.clear();
    for (int64_t h = 0; h < dims.NQ; ++h) slopes.push_back(0.0625f / static_cast<float>(1 << h));
  }
  int64_t Tk() const { return dims.keys(); }
  int64_t nq() const { return dims.B * dims.NQ * dims.T * dims.D; }
  int64_t nkv() const { return dims.B * dims.NKV * Tk() * dims.D; }
  int64_t nout() const { return dims.T * dims.B * dims.NQ * dims.D; }
  int64_t nlse() const { return dims.B * dims.NQ * dims.T; }
  // True when the positions are the identity (what core attention's backward assumes).
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

Problem make(std::string name, int64_t B, int64_t T, int64_t Tk, int64_t NQ, int64_t NKV, int64_t D,
             float p = 0.0f) {
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

struct Result {
  std::vector<float> out, lse, dq, dk, dv;
};

// ---- The naive dense reference ----------------------------------------------------------
// The explicit boolean mask, written from the rule of kernel_types.h independently of
// AttentionMask's helpers; dropout factors from the Philox stream at the position indices.
int64_t qpos(const Problem& pr, int64_t t) {
  return pr.q_pos.empty() ? pr.q_offset + t : pr.q_pos[t];
}
int64_t kpos(const Problem& pr, int64_t j) {
  return pr.k_pos.empty() ? pr.k_offset + j : pr.k_pos[j];
}

bool allowed(const Problem& pr, int64_t b, int64_t t, int64_t j) {
  const int64_t qp = qpos(pr, t), kp = kpos(pr, j);
  bool ok = qp - pr.pre <= kp && kp <= qp + pr.next;
  if (!pr.doc_start.empty() && kp < pr.doc_start[b * pr.dims.T + t]) ok = false;
  if (!pr.prefix.empty() && kp < pr.prefix[b]) ok = true;
  return ok;
}

// The ALiBi bias of kernel_types.h's forms, d = kp - qp.
double alibi(const Problem& pr, int64_t h, int64_t t, int64_t j) {
  const double m = pr.slopes[h], kp = static_cast<double>(kpos(pr, j)),
               d = kp - static_cast<double>(qpos(pr, t));
  switch (pr.alibi) {
    case AlibiBias::kSymmetric:
      return -m * std::fabs(d);
    case AlibiBias::kSqrt:
      return -m * std::sqrt(std::fabs(d));
    case AlibiBias::kSigned:
      return m * d;
    case AlibiBias::kKeyPosition:
      return m * kp;
  }
  return 0.0;
}

Result naive(const Problem& pr) {
  const AttentionDims& d = pr.dims;
  const int64_t S = d.sequence();
  auto keep = [&](int64_t b, int64_t h, int64_t t, int64_t j) {
    const uint64_t idx =
        pr.dropout.index_offset +
        static_cast<uint64_t>(
            ((((pr.dropout.first_sample + b) * d.num_heads_total + d.head_offset + h) * S +
              qpos(pr, t)) *
             S) +
            kpos(pr, j));
    return pr.dropout.rng.uniform(idx) >= pr.dropout.p ? 1.0 / (1.0 - pr.dropout.p) : 0.0;
  };
  auto n = testing::naive_attention(
      d, pr.q, pr.k, pr.v, pr.dout,
      [&](int64_t b, int64_t t, int64_t j) { return allowed(pr, b, t, j); },
      pr.dropout.active() ? std::function<double(int64_t, int64_t, int64_t, int64_t)>(keep)
                          : nullptr,
      pr.slopes.empty()
          ? nullptr
          : std::function<double(int64_t, int64_t, int64_t, int64_t)>(
                [&](int64_t, int64_t h, int64_t t, int64_t j) { return alibi(pr, h, t, j); }));
  return Result{n.out, n.lse, n.dq, n.dk, n.dv};
}

// ---- The kernels under test -------------------------------------------------------------
enum class Impl { kRefCore, kRefFlash, kCpuCore, kCpuFlash };
const char* impl_name(Impl i) {
  switch (i) {
    case Impl::kRefCore:
      return "ref core";
    case Impl::kRefFlash:
      return "ref flash";
    case Impl::kCpuCore:
      return "cpu core";
    case Impl::kCpuFlash:
      return "cpu flash";
  }
  return "";
}
bool is_flash(Impl i) { return i == Impl::kRefFlash || i == Impl::kCpuFlash; }

std::vector<float> workspace(Impl impl, const AttentionDims& d) {
  const AttentionKernel kind = is_flash(impl) ? AttentionKernel::kFlash : AttentionKernel::kCore;
  const bool fast = impl == Impl::kCpuCore || impl == Impl::kCpuFlash;
  auto floats = fast ? cpu::attention_workspace_floats : ref::attention_workspace_floats;
  return std::vector<float>(
      std::max<int64_t>(1, std::max(floats(kKc, d, kind, false), floats(kKc, d, kind, true))));
}

// Forward (and, with `backward`, backward from dout) of one implementation.
Result run(Impl impl, const Problem& pr, bool backward = true) {
  const AttentionDims& d = pr.dims;
  Result r{std::vector<float>(pr.nout()), std::vector<float>(pr.nlse()),
           std::vector<float>(pr.nq()), std::vector<float>(pr.nkv()), std::vector<float>(pr.nkv())};
  std::vector<float> ws = workspace(impl, d);
  const AttentionMask mask = pr.mask();
  if (is_flash(impl)) {
    const bool fast = impl == Impl::kCpuFlash;
    (fast ? cpu::flash_attention_forward : ref::flash_attention_forward)(
        kKc, r.out.data(), r.lse.data(), pr.q.data(), pr.k.data(), pr.v.data(), mask, d, pr.dropout,
        ws.data());
    if (backward)
      (fast ? cpu::flash_attention_backward : ref::flash_attention_backward)(
          kKc, r.dq.data(), r.dk.data(), r.dv.data(), pr.dout.data(), r.out.data(), r.lse.data(),
          pr.q.data(), pr.k.data(), pr.v.data(), mask, d, pr.dropout, ws.data());
  } else {
    const bool fast = impl == Impl::kCpuCore;
    std::vector<float> probs(d.B * d.NQ * d.T * pr.Tk());
    (fast ? cpu::core_attention_forward : ref::core_attention_forward)(
        kKc, r.out.data(), probs.data(), pr.q.data(), pr.k.data(), pr.v.data(), mask, d, pr.dropout,
        ws.data());
    if (backward)
      (fast ? cpu::core_attention_backward : ref::core_attention_backward)(
          kKc, r.dq.data(), r.dk.data(), r.dv.data(), pr.dout.data(), probs.data(), pr.q.data(),
          pr.k.data(), pr.v.data(), d, pr.dropout, ws.data());
  }
  return r;
}

bool any_nan(const std::vector<float>& x) {
  return std::any_of(x.begin(), x.end(), [](float v) { return std::isnan(v); });
}

// lse: -inf exactly where expected, close elsewhere.
::testing::AssertionResult lse_close(const std::vector<float>& got, const std::vector<float>& want,
                                     double tol) {
  for (size_t i = 0; i < want.size(); ++i) {
    const bool masked = want[i] == kNegInf;
    if (masked != (got[i] == kNegInf) ||
        (!masked && !(std::fabs(got[i] - want[i]) <= tol * (1.0 + std::fabs(want[i])))))
      return ::testing::AssertionFailure() << "lse " << i << ": " << got[i] << " vs " << want[i];
  }
  return ::testing::AssertionSuccess();
}

// ---- The cases ---------------------------------------------------------------------------
std::vector<Problem> cases() {
  std::vector<Problem> c;
  {  // Queries after all keys (a previous context-parallel block): everything visible.
    Problem p = make("later_queries_all_keys", 2, 37, 70, 4, 2, 16);
    p.q_offset = 70;
    c.push_back(p);
  }
  {  // Tq > Tk, keys start at 20: the first 20 query rows see no key.
    Problem p = make("keys_offset_masked_rows", 2, 150, 90, 4, 2, 16);
    p.k_offset = 20;
    c.push_back(p);
  }
  {  // Long key block with tile skipping: queries 300..459 against keys 0..599.
    Problem p = make("long_keys_q_offset", 1, 160, 600, 2, 1, 16);
    p.q_offset = 300;
    c.push_back(p);
  }
  {  // Context parallelism's load-balanced halves (S = 1200, CP = 2, chunks of 300): rank 0
     // holds positions 0..299 and 900..1199; its own block (diagonal) and rank 1's.
    Problem p = make("cp_diagonal_two_runs", 1, 600, 600, 2, 2, 16);
    p.q_pos = p.k_pos = runs({{0, 300}, {900, 1200}});
    p.dims.seq_total = 1200;
    c.push_back(p);
    Problem o = make("cp_offdiagonal_two_runs", 1, 600, 600, 2, 1, 16);
    o.q_pos = runs({{0, 300}, {900, 1200}});
    o.k_pos = runs({{300, 600}, {600, 900}});
    o.dims.seq_total = 1200;
    c.push_back(o);
    Problem r = make("cp_keys_two_runs_queries_contiguous", 2, 70, 80, 4, 2, 8);
    r.q_offset = 20;
    r.k_pos = runs({{0, 40}, {60, 100}});
    c.push_back(r);
  }
  {  // Not causal.
    Problem p = make("non_causal", 2, 45, 300, 4, 4, 16);
    p.next = kAllTokens;
    c.push_back(p);
  }
  {  // Band: 13 tokens back, 5 ahead, with GQA and a key offset.
    Problem p = make("band", 2, 130, 330, 4, 2, 16);
    p.pre = 13;
    p.next = 5;
    p.k_offset = -40;
    c.push_back(p);
    Problem w = make("band_two_runs", 1, 100, 100, 2, 2, 8);
    w.q_pos = w.k_pos = runs({{0, 50}, {150, 200}});
    w.pre = 70;
    w.next = 3;
    c.push_back(w);
  }
  {  // Documents on query positions 30..129 against keys 0..129.
    Problem p = make("docs_q_offset", 2, 100, 130, 4, 2, 16);
    p.q_offset = 30;
    p.doc_start.resize(2 * 100);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 100; ++t) {
        const int64_t qp = 30 + t;
        p.doc_start[b * 100 + t] = b == 0 ? (qp < 50 ? 0 : qp < 97 ? 50 : 97) : (qp < 64 ? 10 : 64);
      }
    c.push_back(p);
  }
  {  // Everything masked for some rows: queries 0..9 never see keys at 50..99.
    Problem p = make("all_rows_masked", 1, 10, 50, 2, 1, 8);
    p.k_offset = 50;
    c.push_back(p);
  }
  {  // Prefix keys (sparse modes 5/6) with a band: the gap between them is masked.
    Problem p = make("prefix_band", 2, 150, 420, 4, 2, 16);
    p.q_offset = 270;
    p.pre = 40;
    p.prefix = {30, 300};  // sample 1: the prefix reaches the band
    c.push_back(p);
    Problem w = make("prefix_two_runs", 1, 90, 90, 2, 1, 8);
    w.q_pos = w.k_pos = runs({{0, 45}, {135, 180}});
    w.pre = 20;
    w.prefix = {10};
    c.push_back(w);
  }
  // Dropout: positions decide the Philox elements.
  for (Problem p : std::vector<Problem>(c.begin(), c.end())) {
    if (p.name == "later_queries_all_keys" || p.name == "cp_offdiagonal_two_runs" ||
        p.name == "band" || p.name == "docs_q_offset" || p.name == "keys_offset_masked_rows" ||
        p.name == "prefix_band") {
      p.name += "_dropout";
      p.dropout.p = 0.2f;
      p.dims.head_offset = 3;
      p.dims.num_heads_total = 3 + p.dims.NQ + 2;
      p.dropout.first_sample = 1;
      c.push_back(p);
    }
  }
  // The default (causal self-attention) with GQA and dropout, as a control.
  c.push_back(make("self_attention_gqa", 2, 100, 100, 4, 2, 16, 0.1f));
  // ALiBi: every bias form on offsets, two runs, a band, documents with dropout, prefix keys.
  const std::vector<std::string> alibi_on{
      "keys_offset_masked_rows", "cp_diagonal_two_runs", "band",
      "docs_q_offset_dropout",   "prefix_band",          "non_causal"};
  const std::vector<std::pair<AlibiBias, const char*>> forms{
      {AlibiBias::kSymmetric, "_alibi_symmetric"},
      {AlibiBias::kSqrt, "_alibi_sqrt"},
      {AlibiBias::kSigned, "_alibi_signed"},
      {AlibiBias::kKeyPosition, "_alibi_keypos"}};
  for (Problem p : std::vector<Problem>(c.begin(), c.end())) {
    if (std::find(alibi_on.begin(), alibi_on.end(), p.name) == alibi_on.end()) continue;
    for (auto [form, suffix] : forms) {
      Problem a = p;
      a.name += suffix;
      a.set_alibi(form);
      c.push_back(a);
    }
  }
  uint64_t seed = 100;
  for (Problem& p : c) p.randomize(seed += 10);
  return c;
}

TEST(GeneralisedAttention, EveryKernelMatchesNaiveReference) {
  for (const Problem& pr : cases()) {
    SCOPED_TRACE(pr.name);
    const Result want = naive(pr);
    EXPECT_FALSE(any_nan(want.out));
    for (Impl impl : {Impl::kRefCore, Impl::kRefFlash, Impl::kCpuCore, Impl::kCpuFlash}) {
      SCOPED_TRACE(impl_name(impl));
      // Core attention's backward regenerates dropout at identity positions only.
      const bool backward = is_flash(impl) || !pr.dropout.active() || pr.identity_positions();
      const Result got = run(impl, pr, backward);
      const bool fast = impl == Impl::kCpuCore || impl == Impl::kCpuFlash;
      // The key-position ALiBi form shifts lse by slope * position (up to 75 here): its fp32
      // rounding limits the backward's recomputed probabilities to ~1e-5 relative.
      const bool shifted = !pr.slopes.empty() && pr.alibi == AlibiBias::kKeyPosition;
      const double rtol = fast || shifted ? 1e-4 : 1e-5, atol = fast || shifted ? 2e-5 : 1e-6;
      EXPECT_TRUE(all_close(got.out, want.out, rtol, atol)) << "out";
      if (is_flash(impl)) {
        EXPECT_TRUE(lse_close(got.lse, want.lse, fast ? 1e-5 : 1e-6));
      }
      if (!backward) continue;
      EXPECT_TRUE(all_close(got.dq, want.dq, rtol, atol)) << "dq";
      EXPECT_TRUE(all_close(got.dk, want.dk, rtol, atol)) << "dk";
      EXPECT_TRUE(all_close(got.dv, want.dv, rtol, atol)) << "dv";
      for (const auto* x : {&got.out, &got.dq, &got.dk, &got.dv}) EXPECT_FALSE(any_nan(*x));
    }
  }
}

TEST(GeneralisedAttention, RowsThatSeeNoKeyAreZeroWithMinusInfLse) {
  Problem pr = make("masked", 1, 10, 50, 2, 1, 8, 0.2f);
  pr.k_offset = 50;  // every key after every query
  pr.randomize(7);
  for (Impl impl : {Impl::kRefCore, Impl::kRefFlash, Impl::kCpuCore, Impl::kCpuFlash}) {
    SCOPED_TRACE(impl_name(impl));
    const Result r = run(impl, pr, is_flash(impl));
    for (float x : r.out) EXPECT_EQ(x, 0.0f);
    if (!is_flash(impl)) continue;
    for (float x : r.lse) EXPECT_EQ(x, kNegInf);
    for (const auto* g : {&r.dq, &r.dk, &r.dv})
      for (float x : *g) EXPECT_EQ(x, 0.0f);
  }
}

TEST(GeneralisedAttention, FastFlashEqualsReferenceFlash) {
  for (const Problem& pr : cases()) {
    SCOPED_TRACE(pr.name);
    const Result a = run(Impl::kRefFlash, pr), b = run(Impl::kCpuFlash, pr);
    EXPECT_TRUE(all_close(b.out, a.out, 1e-4, 2e-5));
    EXPECT_TRUE(lse_close(b.lse, a.lse, 1e-5));
    EXPECT_TRUE(all_close(b.dq, a.dq, 1e-4, 2e-5));
    EXPECT_TRUE(all_close(b.dk, a.dk, 1e-4, 2e-5));
    EXPECT_TRUE(all_close(b.dv, a.dv, 1e-4, 2e-5));
  }
}

// A [T, T] causal problem with dropout computed as two query halves (q_offset, seq_total):
// the same rows as the whole, so the Philox elements follow positions.
TEST(GeneralisedAttention, QueryHalvesWithOffsetsEqualTheWhole) {
  const int64_t T = 150, half = 70;
  Problem whole = make("whole", 2, T, T, 4, 2, 16, 0.25f);
  whole.randomize(3);
  for (Impl impl : {Impl::kRefCore, Impl::kRefFlash, Impl::kCpuCore, Impl::kCpuFlash}) {
    SCOPED_TRACE(impl_name(impl));
    const Result all = run(impl, whole, false);
    for (int64_t part = 0; part < 2; ++part) {
      const int64_t t0 = part == 0 ? 0 : half, rows = part == 0 ? half : T - half;
      Problem p = make("half", 2, rows, T, 4, 2, 16, 0.25f);
      p.dims.seq_total = T;
      p.q_offset = t0;
      p.k = whole.k;
      p.v = whole.v;
      p.q.resize(p.nq());
      for (int64_t bh = 0; bh < 2 * 4; ++bh)
        std::copy_n(whole.q.data() + (bh * T + t0) * 16, rows * 16, p.q.data() + bh * rows * 16);
      p.dout.assign(p.nout(), 0.0f);
      const Result r = run(impl, p, false);
      const int64_t row = 2 * 4 * 16;  // [T, B, NQ*D] rows
      std::vector<float> want(all.out.begin() + t0 * row, all.out.begin() + (t0 + rows) * row);
      const bool fast = impl == Impl::kCpuCore || impl == Impl::kCpuFlash;
      EXPECT_TRUE(all_close(r.out, want, fast ? 1e-5 : 0.0, fast ? 1e-6 : 0.0)) << "part " << part;
    }
  }
}

// ---- Finite differences of the generalised flash attention ------------------------------
TEST(GeneralisedAttention, FlashBackwardMatchesFiniteDifferences) {
  Problem pr = make("fd", 2, 7, 9, 4, 2, 4);
  pr.q_pos = {0, 1, 2, 10, 11, 12, 13};
  pr.k_pos = {8, 9, 10, 11, 12, 0, 1, 2, 3};
  pr.pre = 9;
  pr.next = 1;
  pr.doc_start = {0, 0, 0, 0, 0, 11, 11, 0, 1, 1, 1, 1, 1, 1};
  pr.dims.seq_total = 14;
  for (float p : {0.0f, 0.2f, -1.0f}) {  // -1: ALiBi (sqrt form), no dropout
    pr.dropout.p = std::max(p, 0.0f);
    if (p < 0) pr.set_alibi(AlibiBias::kSqrt);
    pr.randomize(40);
    for (Impl impl : {Impl::kRefFlash, Impl::kCpuFlash}) {
      SCOPED_TRACE(impl_name(impl));
      const Result g = run(impl, pr);
      auto forward = [&](const std::vector<float>& q, const std::vector<float>& k,
                         const std::vector<float>& v) {
        Problem x = pr;
        x.q = q, x.k = k, x.v = v;
        return run(Impl::kRefFlash, x, false).out;
      };
      EXPECT_TRUE(check_gradient([&](const auto& x) { return forward(x, pr.k, pr.v); }, pr.q,
                                 pr.dout, g.dq, 1e-2, 2e-2, 2e-3, 128));
      EXPECT_TRUE(check_gradient([&](const auto& x) { return forward(pr.q, x, pr.v); }, pr.k,
                                 pr.dout, g.dk, 1e-2, 2e-2, 2e-3, 128));
      EXPECT_TRUE(check_gradient([&](const auto& x) { return forward(pr.q, pr.k, x); }, pr.v,
                                 pr.dout, g.dv, 1e-2, 2e-2, 2e-3, 128));
    }
  }
}

// ---- Block decomposition (context parallelism) ------------------------------------------
// Key rows [j0, j1) of a [B, NKV, Tk, D] tensor.
std::vector<float> key_rows(const std::vector<float>& x, int64_t BG, int64_t Tk, int64_t D,
                            int64_t j0, int64_t j1) {
  std::vector<float> r(BG * (j1 - j0) * D);
  for (int64_t g = 0; g < BG; ++g)
    std::copy_n(x.data() + (g * Tk + j0) * D, (j1 - j0) * D, r.data() + g * (j1 - j0) * D);
  return r;
}

void block_decomposition(Impl impl, const Problem& whole, const std::vector<int64_t>& cuts) {
  const AttentionDims& d = whole.dims;
  const int64_t Tk = whole.Tk(), BG = d.B * d.NKV;
  const Result want = run(impl, whole);
  const auto ring_update =
      impl == Impl::kCpuFlash ? cpu::ring_attention_update : ref::ring_attention_update;
  std::vector<Problem> blocks;
  Result merged{
      std::vector<float>(whole.nout()), std::vector<float>(whole.nlse(), kNegInf), {}, {}, {}};
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const int64_t j0 = cuts[i], j1 = cuts[i + 1];
    Problem p = whole;
    p.dims.Tk = j1 - j0;
    p.dims.seq_total = d.sequence();
    if (whole.k_pos.empty()) {
      p.k_offset = whole.k_offset + j0;
    } else {
      p.k_pos.assign(whole.k_pos.begin() + j0, whole.k_pos.begin() + j1);
    }
    p.k = key_rows(whole.k, BG, Tk, d.D, j0, j1);
    p.v = key_rows(whole.v, BG, Tk, d.D, j0, j1);
    const Result part = run(impl, p, false);
    ring_update(kKc, merged.out.data(), merged.lse.data(), merged.out.data(), merged.lse.data(),
                part.out.data(), part.lse.data(), d.T, d.B, d.NQ, d.D);
    blocks.push_back(std::move(p));
  }
  EXPECT_TRUE(all_close(merged.out, want.out, 1e-5, 1e-5)) << "merged out";
  EXPECT_TRUE(lse_close(merged.lse, want.lse, 1e-5)) << "merged lse";
  // Backward per block from the merged out and lse: dq sums, dk/dv are the block's rows.
  std::vector<float> dq(whole.nq(), 0.0f), dk(whole.nkv()), dv(whole.nkv());
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Problem& p = blocks[i];
    const int64_t n = p.Tk();
    std::vector<float> bdq(p.nq()), bdk(p.nkv()), bdv(p.nkv());
    std::vector<float> ws = workspace(impl, p.dims);
    (impl == Impl::kCpuFlash ? cpu::flash_attention_backward : ref::flash_attention_backward)(
        kKc, bdq.data(), bdk.data(), bdv.data(), p.dout.data(), merged.out.data(),
        merged.lse.data(), p.q.data(), p.k.data(), p.v.data(), p.mask(), p.dims, p.dropout,
        ws.data());
    for (int64_t x = 0; x < p.nq(); ++x) dq[x] += bdq[x];
    for (int64_t g = 0; g < BG; ++g) {
      std::copy_n(bdk.data() + g * n * d.D, n * d.D, dk.data() + (g * Tk + cuts[i]) * d.D);
      std::copy_n(bdv.data() + g * n * d.D, n * d.D, dv.data() + (g * Tk + cuts[i]) * d.D);
    }
  }
  EXPECT_TRUE(all_close(dq, want.dq, 1e-5, 1e-5)) << "dq";
  EXPECT_TRUE(all_close(dk, want.dk, 1e-5, 1e-5)) << "dk";
  EXPECT_TRUE(all_close(dv, want.dv, 1e-5, 1e-5)) << "dv";
}

TEST(GeneralisedAttention, KeyBlocksMergedByRingUpdateEqualTheWhole) {
  for (Impl impl : {Impl::kRefFlash, Impl::kCpuFlash}) {
    SCOPED_TRACE(impl_name(impl));
    for (float p : {0.0f, 0.2f}) {
      {  // Causal self-attention, GQA, odd sizes; the last block is after some query rows.
        Problem pr = make("causal", 2, 150, 150, 4, 2, 16, p);
        pr.randomize(60);
        block_decomposition(impl, pr, {0, 40, 97, 150});
      }
      {  // Context parallelism's two-run positions, with documents; blocks per rank.
        Problem pr = make("cp", 1, 400, 400, 2, 1, 16, p);
        pr.q_pos = pr.k_pos = runs({{0, 100}, {300, 400}, {100, 200}, {200, 300}});
        pr.doc_start.resize(400);
        for (int64_t t = 0; t < 400; ++t) pr.doc_start[t] = pr.q_pos[t] < 150 ? 0 : 150;
        pr.randomize(70);
        block_decomposition(impl, pr, {0, 200, 400});
        block_decomposition(impl, pr, {0, 100, 200, 300, 400});
      }
      {  // ALiBi over context parallelism's two runs (the ring with --position-embedding-type
         // alibi), causal, symmetric form (pse_type 2).
        Problem pr = make("cp_alibi", 1, 256, 256, 2, 1, 16, p);
        pr.q_pos = pr.k_pos = runs({{0, 64}, {192, 256}, {64, 128}, {128, 192}});
        pr.set_alibi(AlibiBias::kSymmetric);
        pr.randomize(90);
        block_decomposition(impl, pr, {0, 128, 256});
      }
      {  // Prefix keys and a band (sparse mode 5/6 with a window).
        Problem pr = make("prefix", 2, 120, 300, 2, 2, 16, p);
        pr.q_offset = 180;
        pr.pre = 50;
        pr.prefix = {20, 100};
        pr.randomize(80);
        block_decomposition(impl, pr, {0, 64, 150, 300});
      }
    }
  }
}

TEST(GeneralisedAttention, KernelTableFlashEntries) {
  EXPECT_EQ(select_kernels(KernelOptions{.fast = true}).flash_attention_forward, nullptr);
  const KernelTable ref_flash =
      select_kernels(KernelOptions{.fast = false, .flash_attention = true});
  EXPECT_EQ(ref_flash.flash_attention_forward, &ref::flash_attention_forward);
  EXPECT_EQ(ref_flash.flash_attention_backward, &ref::flash_attention_backward);
  if (cpu::cpu_kernels_supported()) {
    const KernelTable fast = select_kernels(KernelOptions{.fast = true, .flash_attention = true});
    EXPECT_EQ(fast.flash_attention_forward, &cpu::flash_attention_forward);
    EXPECT_EQ(fast.flash_attention_backward, &cpu::flash_attention_backward);
  }
}

TEST(GeneralisedAttention, VisiblePairsCountTheMask) {
  for (const Problem& pr : cases()) {
    SCOPED_TRACE(pr.name);
    double want = 0.0;
    for (int64_t b = 0; b < pr.dims.B; ++b)
      for (int64_t t = 0; t < pr.dims.T; ++t)
        for (int64_t j = 0; j < pr.Tk(); ++j) want += allowed(pr, b, t, j);
    EXPECT_EQ(attention_visible_pairs(pr.mask(), pr.dims), want);
  }
}

}  // namespace
}  // namespace mindspeed
