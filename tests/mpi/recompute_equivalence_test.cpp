// Activation recompute is lossless: every mode (Megatron's full uniform and block, selective
// core_attn / layernorm / mlp / moe_act / moe, --distribute-saved-activations,
// --enable-recompute-layers-per-pp-rank; MindSpeed's activation-function and norm recompute)
// trains to the same bits as the run without it -- losses, gradient norms, evaluations and
// every final weight -- with dropout on, under single-process, TP, TP+SP, interleaved PP,
// EP (MoE) and bf16 TP x DP layouts; so is MindSpeed's --swap-attention (through the file tier).
// The modes that drop activations at these sizes must also lower the allocator's activation peak.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "parallel_harness.h"
#include "test_mpi.h"

namespace mindspeed::testing {
namespace {

struct RecomputeCase {
  const char* name;
  int world;            ///< ranks the case needs (single-process cases: any, run alone per rank)
  bool single = false;  ///< each rank trains alone (the single-process run)
  LayoutOptions layout{};
  RecomputeConfig recompute{};
  bool llama = false;  ///< tiny LLaMA (RMSNorm, SwiGLU, RoPE, GQA) instead of tiny GPT
  int64_t num_layers = 2;
  bool flash_attention = true;
  bool moe = false;  ///< every MLP an MoE of 4 experts (grouped GEMM), top-2
  std::vector<int64_t> noop_layers{};
  bool saves_memory = true;  ///< the activation peak must drop
  int64_t max_in_flight =
      0;  ///< > 0: the schedule keeps at most this many micro-batches alive (in-bubble)
};

RecomputeConfig full(RecomputeMethod method, int64_t layers) {
  RecomputeConfig r;
  r.granularity = RecomputeGranularity::kFull;
  r.method = method;
  r.num_layers = layers;
  return r;
}

RecomputeConfig selective(RecomputeModules modules) {
  RecomputeConfig r;
  r.granularity = RecomputeGranularity::kSelective;
  r.modules = modules;
  return r;
}

template <typename F>
RecomputeConfig with(RecomputeConfig r, F&& tweak) {
  tweak(r);
  return r;
}

RunOptions run_of(const RecomputeCase& c) {
  RunOptions run;
  run.model = c.llama || c.moe ? tiny_llama_config() : tiny_gpt_config();
  run.model.num_layers = c.num_layers;
  run.model.noop_layers = c.noop_layers;
  run.flash_attention = c.flash_attention;
  run.steps = 6;
  run.eval_interval = 3;
  if (c.moe) {
    run.model.moe.num_experts = 4;
    run.model.moe.router_topk = 2;
    run.model.moe.ffn_hidden_size = 24;
    run.model.moe.aux_loss_coeff = 1e-2f;
    run.model.moe.z_loss_coeff = 1e-3f;
    run.model.moe.grouped_gemm = true;
    run.model.moe.dispatcher = MoeDispatcher::kAllToAll;
  }
  return run;
}

void expect_identical(const std::vector<double>& got, const std::vector<double>& want,
                      const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t s = 0; s < want.size(); ++s) {
    EXPECT_EQ(std::memcmp(&got[s], &want[s], sizeof(double)), 0)
        << what << " step " << s + 1 << ": " << got[s] << " vs " << want[s];
  }
}

class RecomputeEquivalence : public ::testing::TestWithParam<RecomputeCase> {};

TEST_P(RecomputeEquivalence, IsBitwiseTheRunWithoutRecompute) {
  const RecomputeCase& c = GetParam();
  const MpiWorld& world = mpi_world();
  if (!c.single && world.size != c.world)
    GTEST_SKIP() << c.name << " needs " << c.world << " ranks";
  if (c.single && world.size != 2) GTEST_SKIP() << "single-process cases run in the 2-rank launch";
  RunOptions base = run_of(c);
  RunOptions run = base;
  run.model.recompute = c.recompute;
  const RunResult want = train(base, c.layout, world, c.single);
  const RunResult got = train(run, c.layout, world, c.single);
  expect_identical(got.losses, want.losses, "loss");
  expect_identical(got.grad_norms, want.grad_norms, "grad norm");
  expect_identical(got.eval_losses, want.eval_losses, "evaluation");
  expect_identical(got.load_balancing_losses, want.load_balancing_losses, "load_balancing_loss");
  expect_identical(got.z_losses, want.z_losses, "z_loss");
  ASSERT_EQ(got.weights.size(), want.weights.size());
  for (const auto& [name, w] : want.weights) {
    const auto it = got.weights.find(name);
    ASSERT_NE(it, got.weights.end()) << name;
    ASSERT_EQ(it->second.size(), w.size()) << name;
    EXPECT_EQ(std::memcmp(it->second.data(), w.data(), w.size() * sizeof(float)), 0)
        << name << " differs";
  }
  EXPECT_EQ(want.recompute_steps, 0);
  if (c.recompute.in_advance) {
    EXPECT_GT(got.recompute_steps, 0) << "the schedule ran no recompute step";
  }
  if (c.max_in_flight > 0) {
    EXPECT_LE(got.peak_in_flight, c.max_in_flight);
    // Pipeline rank 0 warms up the most: there the plain schedule holds more, and the bubble
    // recompute must have run.
    if (world.rank == 0) {
      EXPECT_GT(want.peak_in_flight, c.max_in_flight) << "the case must need the bubble recompute";
      EXPECT_GT(got.recompute_steps, 0) << "the schedule ran no recompute step";
    }
  }
  if (c.recompute.swap_attention) {
    // (Whether a write ran before backward's prefetch cancelled it depends on timing.)
    EXPECT_GT(got.swap_file_bytes, 0) << "nothing went to the swap tier";
  }
  EXPECT_EQ(want.swapped_peak_bytes, 0);
  if (c.saves_memory) {
    EXPECT_LT(got.activation_peak_bytes, want.activation_peak_bytes)
        << "recompute must lower the activation peak (" << got.activation_peak_bytes << " vs "
        << want.activation_peak_bytes << " bytes)";
  }
}

RecomputeModules modules(bool core_attn, bool layernorm, bool mlp, bool moe_act = false,
                         bool moe = false) {
  RecomputeModules m;
  m.core_attn = core_attn;
  m.layernorm = layernorm;
  m.mlp = mlp;
  m.moe_act = moe_act;
  m.moe = moe;
  return m;
}

RecomputeConfig activation_and_norm(RecomputeConfig r, int64_t act_layers, int64_t norm_layers) {
  r.activation_function = true;
  r.activation_function_num_layers = act_layers;
  r.norm = true;
  r.norm_num_layers = norm_layers;
  return r;
}

RecomputeConfig swap_attention(int64_t mlp_layers) {
  RecomputeConfig r;
  r.swap_attention = true;
  r.num_layers = mlp_layers;
  return r;
}

LayoutOptions tp2(bool sp) {
  LayoutOptions l;
  l.tp = 2;
  l.sequence_parallel = sp;
  return l;
}

const RecomputeCase kCases[] = {
    {.name = "single_full_uniform_1",
     .world = 2,
     .single = true,
     .recompute = full(RecomputeMethod::kUniform, 1)},
    // Units [0, 2) and [2, 3): a unit spanning layers, and a short last one.
    {.name = "single_full_uniform_2_of_3",
     .world = 2,
     .single = true,
     .recompute = full(RecomputeMethod::kUniform, 2),
     .llama = true,
     .num_layers = 3},
    {.name = "single_full_block_1",
     .world = 2,
     .single = true,
     .recompute = full(RecomputeMethod::kBlock, 1),
     .llama = true},
    // A no-op layer (MindSpeed's --noop-layers) opening a unit: the unit keeps its input itself.
    {.name = "single_full_uniform_noop_first",
     .world = 2,
     .single = true,
     .recompute = full(RecomputeMethod::kUniform, 2),
     .num_layers = 3,
     .noop_layers = {0}},
    {.name = "single_selective_core_attn_flash",
     .world = 2,
     .single = true,
     .recompute = selective(modules(true, false, false))},
    {.name = "single_selective_core_attn_unfused",
     .world = 2,
     .single = true,
     .recompute = selective(modules(true, false, false)),
     .flash_attention = false},
    {.name = "single_selective_layernorm_mlp",
     .world = 2,
     .single = true,
     .recompute = selective(modules(false, true, true)),
     .llama = true},
    {.name = "single_activation_function",
     .world = 2,
     .single = true,
     .recompute =
         with(RecomputeConfig{}, [](RecomputeConfig& r) { r.activation_function = true; })},
    {.name = "single_norm",
     .world = 2,
     .single = true,
     .recompute = with(RecomputeConfig{}, [](RecomputeConfig& r) { r.norm = true; }),
     .llama = true},
    // MindSpeed's layering: layer 0 full, layer 1 activation + norm, layer 2 norm only.
    {.name = "single_block_then_activation_and_norm",
     .world = 2,
     .single = true,
     .recompute = activation_and_norm(full(RecomputeMethod::kBlock, 1), 1, 2),
     .llama = true,
     .num_layers = 3},
    {.name = "tp2_full_uniform_distributed",
     .world = 2,
     .layout = tp2(false),
     .recompute = with(full(RecomputeMethod::kUniform, 1),
                       [](RecomputeConfig& r) { r.distribute_saved_activations = true; })},
    {.name = "tp2_sp_full_block",
     .world = 2,
     .layout = tp2(true),
     .recompute = full(RecomputeMethod::kBlock, 2),
     .llama = true,
     .saves_memory = false},  // both layers in one unit each, peak = one layer's rebuild
    {.name = "tp2_sp_selective_all",
     .world = 2,
     .layout = tp2(true),
     .recompute = selective(modules(true, true, true)),
     .llama = true},
    {.name = "tp2_activation_and_norm",
     .world = 2,
     .layout = tp2(false),
     .recompute = activation_and_norm(RecomputeConfig{}, -1, -1)},
    // Interleaved 1F1B, 4 layers = 2 ranks x 2 chunks of 1; per-pp-rank priority: K = 1 is
    // only each rank's first chunk's layer.
    {.name = "pp2_vpp2_block_per_pp_rank",
     .world = 2,
     .layout = LayoutOptions{.pp = 2, .virtual_stages = 2},
     .recompute = with(full(RecomputeMethod::kBlock, 1),
                       [](RecomputeConfig& r) { r.layers_per_pp_rank = true; }),
     .num_layers = 4},
    {.name = "pp2_vpp2_full_uniform",
     .world = 2,
     .layout = LayoutOptions{.pp = 2, .virtual_stages = 2},
     .recompute = full(RecomputeMethod::kUniform, 1),
     .llama = true,
     .num_layers = 4},
    // MoE: the activation peak of an expert rank can be the dispatcher's receive buffers at
    // these sizes, so only the bits are compared.
    {.name = "ep2_moe_selective_moe",
     .world = 2,
     .layout = LayoutOptions{.ep = 2},
     .recompute = selective(modules(false, false, false, false, true)),
     .moe = true,
     .saves_memory = false},
    {.name = "ep2_moe_selective_moe_act_layernorm",
     .world = 2,
     .layout = LayoutOptions{.ep = 2},
     .recompute = selective(modules(true, true, false, true, false)),
     .moe = true,
     .saves_memory = false},
    {.name = "ep2_moe_full_uniform",
     .world = 2,
     .layout = LayoutOptions{.ep = 2},
     .recompute = full(RecomputeMethod::kUniform, 1),
     .moe = true,
     .saves_memory = false},
    // bf16: the activation peak is the fp32 transients of a layer before its saved values are
    // compacted to bf16, which recompute does not change at these sizes; bits only.
    {.name = "bf16_tp2_dp2_block_activation_norm",
     .world = 4,
     .layout = LayoutOptions{.tp = 2, .distributed_optimizer = true, .bf16 = true},
     .recompute = activation_and_norm(full(RecomputeMethod::kBlock, 1), -1, -1),
     .llama = true,
     .saves_memory = false},
    {.name = "bf16_tp2_dp2_full_uniform_distributed",
     .world = 4,
     .layout = LayoutOptions{.tp = 2, .distributed_optimizer = true, .bf16 = true},
     .recompute = with(full(RecomputeMethod::kUniform, 1),
                       [](RecomputeConfig& r) { r.distribute_saved_activations = true; }),
     .saves_memory = false},
    // Context parallelism: the recomputed layers exchange their keys and values again.
    {.name = "cp2_ring_full_uniform_and_norm",
     .world = 2,
     .layout = LayoutOptions{.cp = 2},
     .recompute = activation_and_norm(full(RecomputeMethod::kBlock, 1), -1, -1),
     .llama = true},
    {.name = "cp2_ulysses_full_uniform",
     .world = 2,
     .layout = LayoutOptions{.cp = 2, .cp_algo = CpAlgo::kUlysses},
     .recompute = full(RecomputeMethod::kUniform, 1),
     .llama = true},
    // MindSpeed's --swap-attention: the attention's and norms' saved tensors go to the file tier
    // after each layer's forward and come back one layer ahead in backward. The resident peak
    // is not compared: a tensor stays resident until its write completes, and at these sizes
    // the peak is reached before the writes do (bench/activation_memory measures the bytes).
    {.name = "single_swap_attention",
     .world = 2,
     .single = true,
     .recompute = swap_attention(-1),
     .llama = true,
     .saves_memory = false},
    // --recompute-num-layers 1 with it: the first layer also recomputes its MLP.
    {.name = "tp2_sp_swap_attention_mlp_1",
     .world = 2,
     .layout = tp2(true),
     .recompute = swap_attention(1),
     .saves_memory = false},
    {.name = "pp2_vpp2_swap_attention",
     .world = 2,
     .layout = LayoutOptions{.pp = 2, .virtual_stages = 2},
     .recompute = swap_attention(-1),
     .num_layers = 4,
     .saves_memory = false},
    {.name = "ep2_moe_swap_attention",
     .world = 2,
     .layout = LayoutOptions{.ep = 2},
     .recompute = swap_attention(-1),
     .moe = true,
     .saves_memory = false},
    {.name = "bf16_tp2_dp2_swap_attention",
     .world = 4,
     .layout = LayoutOptions{.tp = 2, .distributed_optimizer = true, .bf16 = true},
     .recompute = swap_attention(1),
     .llama = true,
     .saves_memory = false},
    // MindSpeed's ripipe on interleaved 1F1B (2 ranks x 2 chunks, 4 micro-batches): in advance,
    // each backward's recompute runs before its gradient is awaited (the model's last layer is
    // not recomputed); in the bubble, no micro-batch beyond PP x VPP = 4 keeps its activations
    // (rank 0 warms up with 4 and would hold 5).
    {.name = "pp2_vpp2_recompute_in_advance",
     .world = 2,
     .layout = LayoutOptions{.pp = 2, .virtual_stages = 2},
     .recompute =
         with(full(RecomputeMethod::kBlock, 1), [](RecomputeConfig& r) { r.in_advance = true; }),
     .llama = true,
     .num_layers = 4,
     .saves_memory = false},
    {.name = "pp2_vpp2_recompute_in_bubble",
     .world = 2,
     .layout = LayoutOptions{.pp = 2, .virtual_stages = 2},
     .recompute = with(RecomputeConfig{}, [](RecomputeConfig& r) { r.in_bubble = true; }),
     .num_layers = 4,
     .saves_memory = false,
     .max_in_flight = 4},
};

INSTANTIATE_TEST_SUITE_P(Modes, RecomputeEquivalence, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<RecomputeCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace mindspeed::testing
