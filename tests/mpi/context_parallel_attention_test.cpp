// Context-parallel attention on 2 and 4 ranks (the whole world as the context-parallel
// group) against one flash attention over the whole sequence on the same queries, keys and
// values: each rank's output rows and its gradients of q, k and v equal the single-process
// ones at the positions it holds, within 1e-5, with attention dropout on. Ulysses (aligned,
// unaligned s = 30, grouped keys/values repeated, all-gathered keys/values), the ring
// (load-balanced causal and general chunks, with and without transfer overlap), the double
// ring and hybrid CP, each also with packed documents (EOD reset), sliding windows and ALiBi.
#include "context_parallel/context_parallel_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "context_parallel/cp_split.h"
#include "core/rng.h"
#include "kernels/backend.h"
#include "test_mpi.h"
#include "test_util.h"
#include "transformer/alibi.h"

namespace mindspeed::testing {
namespace {

struct CpCase {
  const char* name;
  int world;
  ContextParallelConfig cp;
  int64_t S = 16;
  int64_t NKV = 4;  ///< key/value heads (NQ = 8)
  bool eod = false;
  int64_t window = 0;  ///< sliding window (keys before the query); 0 = causal
  bool alibi = false;  ///< ALiBi slopes of 8 heads (pse_type 2's -m|d|)
};

void PrintTo(const CpCase& c, std::ostream* os) { *os << c.name; }

ContextParallelConfig ulysses(int C, bool allgather = false) {
  return {.algo = CpAlgo::kUlysses, .ulysses_degree = C, .ulysses_allgather_kv = allgather};
}
ContextParallelConfig ring(bool general, bool overlap, int window = 1) {
  return {.algo = CpAlgo::kRing,
          .general_mask = general,
          .send_recv_overlap = overlap,
          .window_size = window};
}
ContextParallelConfig hybrid(int u, bool overlap) {
  return {.algo = CpAlgo::kHybrid, .ulysses_degree = u, .send_recv_overlap = overlap};
}

const CpCase kCases[] = {
    {"ulysses_cp2", 2, ulysses(2)},
    {"ulysses_cp2_gqa1", 2, ulysses(2), 16, 1},
    {"ulysses_cp2_allgather_gqa1", 2, ulysses(2, true), 16, 1},
    {"ring_cp2", 2, ring(false, false)},
    {"ring_cp2_overlap_gqa2", 2, ring(false, true), 16, 2},
    {"ring_cp2_general", 2, ring(true, false)},
    {"ring_cp2_eod", 2, ring(false, true), 16, 4, true},
    {"ulysses_cp2_eod", 2, ulysses(2), 16, 4, true},
    {"ulysses_cp4", 4, ulysses(4)},
    {"ulysses_cp4_unaligned_s30", 4, ulysses(4), 30},
    {"ulysses_cp4_gqa2", 4, ulysses(4), 16, 2},
    {"ulysses_cp4_allgather_gqa2", 4, ulysses(4, true), 16, 2},
    {"ring_cp4", 4, ring(false, false), 32},
    {"ring_cp4_overlap", 4, ring(false, true), 32},
    {"ring_cp4_general", 4, ring(true, true), 32},
    {"double_ring_cp4_w2", 4, ring(false, true, 2), 32},
    {"double_ring_cp4_w2_general", 4, ring(true, false, 2), 32},
    {"hybrid_cp4_u2", 4, hybrid(2, true), 32},
    {"hybrid_cp4_u2_gqa1", 4, hybrid(2, false), 32, 1},
    {"ring_cp4_eod", 4, ring(false, true), 32, 4, true},
    {"double_ring_cp4_w2_eod", 4, ring(false, true, 2), 32, 4, true},
    {"hybrid_cp4_u2_eod", 4, hybrid(2, true), 32, 4, true},
    {"ulysses_cp4_unaligned_s30_eod", 4, ulysses(4), 30, 4, true},
    // Sliding windows (band masks): whole ring blocks fall outside the band.
    {"ring_cp2_window5", 2, ring(false, true), 16, 4, false, 5},
    {"ring_cp4_window3_eod", 4, ring(false, true), 32, 4, true, 3},
    {"hybrid_cp4_u2_window6", 4, hybrid(2, true), 32, 2, false, 6},
    {"ulysses_cp4_window4", 4, ulysses(4), 16, 4, false, 4},
    // ALiBi: the bias by sample positions, the slopes of the heads each rank holds.
    {"ring_cp2_alibi", 2, ring(false, true), 16, 4, false, 0, true},
    {"ulysses_cp2_alibi_gqa1", 2, ulysses(2), 16, 1, false, 0, true},
    {"ring_cp4_alibi_eod", 4, ring(false, true), 32, 4, true, 0, true},
    {"hybrid_cp4_u2_alibi", 4, hybrid(2, true), 32, 2, false, 0, true},
    {"double_ring_cp4_w2_alibi_window7", 4, ring(false, true, 2), 32, 4, false, 7, true},
};

std::vector<float> random_values(int64_t n, uint64_t stream) {
  const RngStream rng{4242, stream};
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = 2.0f * rng.uniform(static_cast<uint64_t>(i)) - 1.0f;
  return x;
}

// Rows [B, N, positions, D] of a head-major [B, N, S, D] tensor.
std::vector<float> take_positions(const std::vector<float>& x, int64_t B, int64_t N, int64_t S,
                                  int64_t D, const std::vector<int32_t>& positions) {
  const int64_t T = static_cast<int64_t>(positions.size());
  std::vector<float> out(static_cast<size_t>(B * N * T * D));
  for (int64_t bh = 0; bh < B * N; ++bh)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < D; ++d)
        out[(bh * T + t) * D + d] = x[(bh * S + positions[t]) * D + d];
  return out;
}

class CpAttention : public ::testing::TestWithParam<CpCase> {};

TEST_P(CpAttention, EqualsTheWholeSequenceAttention) {
  const CpCase& c = GetParam();
  const MpiWorld& world = mpi_world();
  if (world.size != c.world) GTEST_SKIP() << c.name << " needs " << c.world << " ranks";
  ParallelConfig pc;
  pc.context_parallel_size = world.size;
  pc.cp = c.cp;
  if (c.cp.algo == CpAlgo::kRing) pc.cp.ulysses_degree = 1;
  auto state = initialize_model_parallel(pc, world);
  ASSERT_TRUE(state.ok()) << state.status().to_string();
  const std::unique_ptr<ParallelState> ps = std::move(*state);
  const Backend backend = select_backend(KernelOptions{.fast = true, .flash_attention = true}, 1);
  Allocator alloc;
  ForwardContext ctx;
  ctx.backend = &backend;
  ctx.alloc = &alloc;
  ctx.ps = ps.get();
  ctx.cp = pc.cp;
  ctx.iteration = 3;

  const int64_t B = 2, NQ = 8, NKV = c.NKV, D = 8, S = c.S;
  MicroBatch full;
  full.B = B;
  full.T = S;
  full.first_sample = 10;
  full.loss_mask.assign(static_cast<size_t>(B * S), 1.0f);
  if (c.eod) {  // documents of 5 positions, the second sample's shifted by 2
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < S; ++t)
        full.doc_start.push_back(static_cast<int32_t>(t < 2 * b ? 0 : (t - 2 * b) / 5 * 5 + 2 * b));
  }
  const std::vector<float> q = random_values(B * NQ * S * D, 1),
                           k = random_values(B * NKV * S * D, 2),
                           v = random_values(B * NKV * S * D, 3),
                           dout = random_values(S * B * NQ * D, 4);
  AttentionDims whole{
      .B = B, .T = S, .NQ = NQ, .NKV = NKV, .D = D, .scale = 0.35f, .num_heads_total = NQ};
  DropoutSpec dropout;
  dropout.p = 0.2f;
  dropout.rng = ctx.dropout_stream(0, DropoutSite::kAttentionProbs);
  dropout.first_sample = full.first_sample;

  AttentionMask rule;
  if (c.window > 0) rule.pre_tokens = c.window;
  const std::vector<float> slopes = alibi_slopes(NQ);
  if (c.alibi) rule.alibi_slopes = slopes.data();

  // The single-process reference.
  std::vector<float> out(static_cast<size_t>(S * B * NQ * D)), lse(static_cast<size_t>(B * NQ * S)),
      dq(q.size()), dk(k.size()), dv(v.size());
  {
    AttentionMask mask = rule;
    mask.doc_start = full.doc_start.empty() ? nullptr : full.doc_start.data();
    std::vector<float> ws(
        static_cast<size_t>(std::max(backend.kernels.attention_workspace_floats(
                                         backend.context, whole, AttentionKernel::kFlash, false),
                                     backend.kernels.attention_workspace_floats(
                                         backend.context, whole, AttentionKernel::kFlash, true))));
    backend.kernels.flash_attention_forward(backend.context, out.data(), lse.data(), q.data(),
                                            k.data(), v.data(), mask, whole, dropout, ws.data());
    backend.kernels.flash_attention_backward(backend.context, dq.data(), dk.data(), dv.data(),
                                             dout.data(), out.data(), lse.data(), q.data(),
                                             k.data(), v.data(), mask, whole, dropout, ws.data());
  }

  // This rank's share through the context-parallel attention.
  const MicroBatch mb = get_batch_on_this_cp_rank(full, CpSplit(pc.cp, world.size, S), ps->cp_rank);
  const std::vector<int32_t>& pos = mb.seq_index;
  const int64_t T = mb.T;
  AttentionDims local = whole;
  local.T = T;
  auto tensor = [&](const std::vector<float>& values, Shape shape) {
    Tensor t(alloc, shape, DType::kFloat32, MemoryCategory::kActivations);
    std::copy(values.begin(), values.end(), t.f32());
    return t;
  };
  ContextParallelAttention::Saved saved;
  std::vector<float> context(static_cast<size_t>(T * B * NQ * D));
  ContextParallelAttention::forward(
      ctx, mb, local, rule, dropout, tensor(take_positions(q, B, NQ, S, D, pos), {B, NQ, T, D}),
      tensor(take_positions(k, B, NKV, S, D, pos), {B, NKV, T, D}),
      tensor(take_positions(v, B, NKV, S, D, pos), {B, NKV, T, D}), context.data(), saved);
  std::vector<float> local_dout(context.size()), want_out(context.size());
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < B * NQ * D; ++i) {
      local_dout[t * B * NQ * D + i] = dout[pos[t] * B * NQ * D + i];
      want_out[t * B * NQ * D + i] = out[pos[t] * B * NQ * D + i];
    }
  }
  std::vector<float> got_dq(static_cast<size_t>(B * NQ * T * D)),
      got_dk(static_cast<size_t>(B * NKV * T * D)), got_dv(got_dk.size());
  ContextParallelAttention::backward(ctx, mb, local, rule, dropout, saved, context.data(),
                                     local_dout.data(), got_dq.data(), got_dk.data(),
                                     got_dv.data());
  // Every rank's verdict reaches rank 0 (only it prints).
  const bool ok = normwise_error(context, want_out) <= 1e-5 &&
                  normwise_error(got_dq, take_positions(dq, B, NQ, S, D, pos)) <= 1e-5 &&
                  normwise_error(got_dk, take_positions(dk, B, NKV, S, D, pos)) <= 1e-5 &&
                  normwise_error(got_dv, take_positions(dv, B, NKV, S, D, pos)) <= 1e-5;
  EXPECT_LE(normwise_error(context, want_out), 1e-5) << "out";
  EXPECT_LE(normwise_error(got_dq, take_positions(dq, B, NQ, S, D, pos)), 1e-5) << "dq";
  EXPECT_LE(normwise_error(got_dk, take_positions(dk, B, NKV, S, D, pos)), 1e-5) << "dk";
  EXPECT_LE(normwise_error(got_dv, take_positions(dv, B, NKV, S, D, pos)), 1e-5) << "dv";
  const double failures = ps->world().all_reduce_scalar(ok ? 0.0 : 1.0, ReduceOp::kSum);
  EXPECT_EQ(failures, 0.0) << "ranks whose share differs";
}

INSTANTIATE_TEST_SUITE_P(Layouts, CpAttention, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<CpCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace mindspeed::testing
