// Megatron's custom FSDP (--use-custom-fsdp --data-parallel-sharding-strategy) against DDP on
// the same layout, weights and data (dropout on): no_shard, optim (ZeRO-1) and optim_grads
// (ZeRO-2: a unit's gradient reduce-scattered after every micro-batch's backward and kept only
// as this rank's shard) and optim_grads_params (ZeRO-3: the parameters too kept as shards and
// gathered per module) give the DDP run's losses, gradient norms, evaluations and final
// weights within 1e-5 (fp32; the per-micro-batch reduction sums in another order), and the
// bytes per rank follow the formulas: parameters 4N (2N bf16), gradients 4N (no_shard, optim)
// or 4N/dp (optim_grads), optimizer state 8N (no_shard) or 8N/dp (12 with bf16's fp32 main
// parameters), N padded per unit.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "parallel_harness.h"
#include "test_mpi.h"

namespace mindspeed::testing {
namespace {

constexpr double kTolerance = 1e-5;

struct FsdpCase {
  const char* name;
  int world;
  LayoutOptions layout{};  ///< the DDP layout; the FSDP run adds custom_fsdp + the strategy
  FsdpShardingStrategy strategy = FsdpShardingStrategy::kOptimGrads;
  bool llama = false;
  bool moe = false;
};

void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t s = 0; s < want.size(); ++s) {
    EXPECT_NEAR(got[s], want[s], kTolerance * std::fabs(want[s]) + 1e-12)
        << what << " step " << s + 1;
  }
}

class FsdpEquivalence : public ::testing::TestWithParam<FsdpCase> {};

TEST_P(FsdpEquivalence, MatchesDdpAndShardsWhatItSays) {
  const FsdpCase& c = GetParam();
  const MpiWorld& world = mpi_world();
  if (world.size != c.world) GTEST_SKIP() << c.name << " needs " << c.world << " ranks";
  RunOptions run;
  run.model = c.llama || c.moe ? tiny_llama_config() : tiny_gpt_config();
  run.steps = 6;
  run.eval_interval = 3;
  if (c.moe) {
    run.model.moe.num_experts = 4;
    run.model.moe.router_topk = 2;
    run.model.moe.ffn_hidden_size = 24;
    run.model.moe.aux_loss_coeff = 1e-2f;
    run.model.moe.dispatcher = MoeDispatcher::kAllToAll;
  }
  LayoutOptions ddp = c.layout;
  ddp.gradient_accumulation_fusion = false;  // Megatron's rule for optim_grads; the same for both
  ddp.distributed_optimizer = c.strategy != FsdpShardingStrategy::kNoShard;
  LayoutOptions fsdp = ddp;
  fsdp.custom_fsdp = true;
  fsdp.fsdp_sharding = c.strategy;
  const RunResult want = train(run, ddp, world, false);
  const RunResult got = train(run, fsdp, world, false);
  expect_close(got.losses, want.losses, "loss");
  expect_close(got.grad_norms, want.grad_norms, "grad norm");
  expect_close(got.eval_losses, want.eval_losses, "evaluation");
  ASSERT_EQ(got.weights.size(), want.weights.size());
  for (const auto& [name, w] : want.weights) {
    const std::vector<float>& g = got.weights.at(name);
    ASSERT_EQ(g.size(), w.size()) << name;
    // fp16 weights: the reduce-scatter's summation order moves a master weight by an fp32 ulp,
    // which can flip its fp16 rounding: one fp16 ulp (2^-10 relative) allowed there.
    const double rel = c.layout.fp16 ? 1.0 / 1024 : 1e-5;
    for (size_t i = 0; i < w.size(); ++i) {
      ASSERT_NEAR(g[i], w[i], rel * std::fabs(w[i]) + 1e-6) << name << "[" << i << "]";
    }
  }
  // Bytes per rank against the formulas (N: this rank's elements; P: N padded per FSDP unit).
  const int dp = c.world / (c.layout.tp * c.layout.cp * c.layout.pp);
  const double n = static_cast<double>(got.num_params_local);
  const bool half = c.layout.bf16 || c.layout.fp16;
  const double param_width = half ? 2.0 : 4.0;
  const double state_width = half ? 12.0 : 8.0;  // m, v (+ the fp32 main parameters with bf16 / fp16)
  const bool zero3 = c.strategy == FsdpShardingStrategy::kOptimGradsParams;
  // P from the gradient shards under ZeRO-3 (everything is sharded there), else from the
  // parameters.
  const double padded = zero3 ? static_cast<double>(got.grad_bytes) / 4.0 * dp
                              : static_cast<double>(got.param_bytes) / param_width;
  EXPECT_GE(padded, n);
  EXPECT_LT(padded, n * 1.6) << "padding of the FSDP units";
  if (c.moe) {  // experts shard over expert-dp (1 here), the rest over dp: only the direction
    if (c.strategy != FsdpShardingStrategy::kNoShard) {
      EXPECT_LT(got.grad_bytes, want.grad_bytes);
    }
    if (zero3) {
      EXPECT_LT(got.param_bytes, want.param_bytes);
    }
    return;
  }
  switch (c.strategy) {
    case FsdpShardingStrategy::kNoShard:
      EXPECT_EQ(static_cast<double>(got.grad_bytes), 4.0 * padded);
      EXPECT_NEAR(static_cast<double>(got.optimizer_bytes), state_width * n,
                  state_width * n * 0.01);
      break;
    case FsdpShardingStrategy::kOptim:
      EXPECT_EQ(static_cast<double>(got.grad_bytes), 4.0 * padded);
      EXPECT_EQ(static_cast<double>(got.optimizer_bytes), state_width * padded / dp);
      break;
    case FsdpShardingStrategy::kOptimGrads:
      EXPECT_EQ(static_cast<double>(got.grad_bytes), 4.0 * padded / dp)
          << "gradients: this rank's shards only";
      EXPECT_EQ(static_cast<double>(got.optimizer_bytes), state_width * padded / dp);
      break;
    case FsdpShardingStrategy::kOptimGradsParams:
      EXPECT_EQ(static_cast<double>(got.param_bytes), param_width * padded / dp)
          << "parameters: shards only";
      EXPECT_EQ(static_cast<double>(got.optimizer_bytes), state_width * padded / dp);
      EXPECT_LT(got.param_bytes, want.param_bytes);
      break;
  }
}

const FsdpCase kCases[] = {
    {"dp2_no_shard", 2, LayoutOptions{}, FsdpShardingStrategy::kNoShard},
    {"dp2_optim", 2, LayoutOptions{}, FsdpShardingStrategy::kOptim},
    {"dp2_optim_grads", 2, LayoutOptions{}, FsdpShardingStrategy::kOptimGrads},
    {"dp4_optim_grads_llama", 4, LayoutOptions{}, FsdpShardingStrategy::kOptimGrads, true},
    {"tp2_sp_dp2_optim_grads", 4, LayoutOptions{.tp = 2, .sequence_parallel = true},
     FsdpShardingStrategy::kOptimGrads, true},
    {"dp2_bf16_optim_grads", 2, LayoutOptions{.bf16 = true}, FsdpShardingStrategy::kOptimGrads,
     true},
    // fp16 weights gathered as ZeRO-3 shards, fp32 gradients (--accumulate-allreduce-grads-in-fp32,
    // which custom FSDP needs with --fp16), the loss scaler unscaling the gradient shards.
    {"dp2_fp16_optim_grads_params", 2, LayoutOptions{.fp16 = true, .fp16_fp32_grads = true},
     FsdpShardingStrategy::kOptimGradsParams},
    // Experts reduced over the expert-data-parallel group (EP 2 x DP 2: expert dp 1 here, 2 dense).
    {"ep2_dp2_moe_optim_grads", 4, LayoutOptions{.ep = 2}, FsdpShardingStrategy::kOptimGrads, false,
     true},
};

INSTANTIATE_TEST_SUITE_P(Strategies, FsdpEquivalence, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<FsdpCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace mindspeed::testing
