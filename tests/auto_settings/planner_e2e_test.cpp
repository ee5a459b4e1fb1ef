// pretrain_gpt --auto-settings end to end: a mixed search on mock data prints three plans and
// writes the plan JSON, its finalists ran in interleaved rounds and rank by their median, their
// memory is within the model's bound, its first command runs as printed, and a second search
// reuses the profile; a black search ranks its screening's fastest by interleaved rounds; the
// refusals MindSpeed makes (and those of a target this machine cannot run); a 1024-rank
// LLaMA-70B-style target planned from FLOPs and bandwidths whose memory per rank and communication
// volumes equal the closed forms computed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "e2e/run_command.h"
#include "scratch_dir.h"

namespace mindspeed {
namespace {

const std::string kPretrain = MS_PRETRAIN_GPT;
const std::string kModel =
    " --mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --num-layers 2 --hidden-size 64"
    " --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 --global-batch-size 4"
    " --train-iters 3 --lr 1e-3 --log-interval 1 --bf16 --use-flash-attn";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
}

TEST(AutoSettingsPlanner, MixedSearchPrintsPlansWhoseFirstCommandRuns) {
  testing::ScratchDir dir("auto_settings_plan");
  const std::string planner =
      "OMP_WAIT_POLICY=PASSIVE " + kPretrain + kModel +
      " --auto-settings --nproc-per-node 2 --auto-settings-iters 3 --auto-settings-work-dir " +
      dir.path().string();
  const testing::CommandResult r =
      testing::run_command(planner +
                           " --auto-settings-type mixed --auto-settings-top-k 3 "
                           "--auto-settings-rounds 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"plan 1: ", "plan 2: ", "plan 3: ", "memory per rank", "step (s)",
                           "measured: step", "(median of 2 interleaved rounds",
                           "running finalist 3/3 (round 2 of 2)", "command: mpirun -np 2 "}) {
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  }
  const nlohmann::json plan = read_json(dir.file("auto_settings_plan.json"));
  ASSERT_TRUE(plan.is_object());
  EXPECT_EQ(plan["type"], "mixed");
  EXPECT_EQ(plan["world_size"], 2);
  ASSERT_GE(plan["plans"].size(), 3u);
  int measured = 0;
  double previous = 0.0;
  for (const nlohmann::json& p : plan["plans"]) {
    if (!p.contains("measured")) continue;
    ++measured;
    // The model's best three, each run in both rounds, ranked by their median.
    const nlohmann::json& rounds = p["measured"]["round_step_seconds"];
    ASSERT_EQ(rounds.size(), 2u) << p["name"];
    const double step = p["measured"]["step_seconds"].get<double>();
    EXPECT_NEAR(step, 0.5 * (rounds[0].get<double>() + rounds[1].get<double>()), 1e-12);
    EXPECT_GE(step, previous) << p["name"];
    previous = step;
    // The profiled memory model against the run's exact peak, per pipeline stage, within the
    // issue's 5 % (3 % passed on this machine).
    for (const nlohmann::json& stage : p["memory"]["stages"]) {
      int64_t peak = 0;
      for (const nlohmann::json& rank : p["measured"]["ranks"]) {
        if (rank["pp_rank"] == stage["pp_rank"])
          peak = std::max(peak, rank["total_peak_bytes"].get<int64_t>());
      }
      EXPECT_NEAR(stage["total_bytes"].get<double>(), static_cast<double>(peak),
                  0.05 * static_cast<double>(peak))
          << p["name"];
    }
  }
  EXPECT_EQ(measured, 3);
  EXPECT_TRUE(plan["plans"][0].contains("measured"));
  // The first plan, as printed.
  std::string args;
  for (const nlohmann::json& a : plan["plans"][0]["args"]) {
    args += ' ';
    args += a.get<std::string>();
  }
  const testing::CommandResult first =
      testing::run_command(testing::mpirun_prefix(MS_MPIRUN) + " -np 2 " + kPretrain + args);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("iteration        3/       3"), std::string::npos) << first.output;
  // Again: the profile is reused, nothing is run.
  const testing::CommandResult again = testing::run_command(planner);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("profile reused"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("auto settings: profiling"), std::string::npos) << again.output;
}

// The black box on one rank: every layout screened by one run, its three fastest run again in
// two interleaved rounds and ranked first, by their median; the rest after them, by their run.
TEST(AutoSettingsPlanner, BlackSearchRanksItsFinalistsByInterleavedRounds) {
  testing::ScratchDir dir("auto_settings_black");
  const testing::CommandResult r = testing::run_command(
      "OMP_WAIT_POLICY=PASSIVE " + kPretrain + kModel +
      " --auto-settings --nproc-per-node 1 --auto-settings-type black --auto-settings-iters 3"
      " --auto-settings-top-k 3 --auto-settings-rounds 2 --auto-settings-work-dir " +
      dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json plan = read_json(dir.file("auto_settings_plan.json"));
  ASSERT_TRUE(plan.is_object());
  EXPECT_EQ(plan["type"], "black");
  const nlohmann::json& plans = plan["plans"];
  ASSERT_GT(plans.size(), 3u);
  double slowest_finalist_screening = 0.0, previous = 0.0;
  for (size_t i = 0; i < plans.size(); ++i) {
    const nlohmann::json& p = plans[i];
    ASSERT_TRUE(p.contains("measured")) << p["name"];
    const nlohmann::json& m = p["measured"];
    const double step = m["step_seconds"].get<double>();
    const double screening = m["first_run_step_seconds"].get<double>();
    if (i < 3) {
      ASSERT_EQ(m["round_step_seconds"].size(), 2u) << p["name"];
      EXPECT_NEAR(step,
                  0.5 * (m["round_step_seconds"][0].get<double>() +
                         m["round_step_seconds"][1].get<double>()),
                  1e-12);
      slowest_finalist_screening = std::max(slowest_finalist_screening, screening);
    } else {
      EXPECT_TRUE(m["round_step_seconds"].empty()) << p["name"];
      EXPECT_EQ(step, screening);
      // Finalists are the fastest of the screening.
      EXPECT_GE(screening, slowest_finalist_screening) << p["name"];
    }
    if (i != 3) {
      EXPECT_GE(step, previous) << p["name"];
    }
    previous = step;
  }
}

TEST(AutoSettingsPlanner, RefusesWhatMindSpeedRefuses) {
  testing::ScratchDir dir("auto_settings_refusals");
  const std::string base = kPretrain + kModel;
  const std::string checkpoint = dir.file("ckpt");
  struct Case {
    std::string flags, message;
  };
  const Case cases[] = {
      {std::string(" --auto-settings --nproc-per-node 2 --save ").append(checkpoint),
       "not with --save"},
      {std::string(" --auto-settings --nproc-per-node 2 --load ").append(checkpoint),
       "not with --load"},
      {" --auto-settings", "--auto-settings needs --nproc-per-node"},
      {" --target-nnodes 2", "--target-nnodes is an --auto-settings flag"},
      {" --auto-settings --nproc-per-node 8 --target-nnodes 2 --auto-settings-ranks 2 "
       "--auto-settings-type black",
       "runs the candidates on this machine"},
      {" --auto-settings --nproc-per-node 8 --target-nnodes 2 --auto-settings-ranks 2",
       "needs --auto-settings-memory-cap"},
      {" --auto-settings --nproc-per-node 2 --auto-settings-type grey", "--auto-settings-type"},
  };
  for (const Case& k : cases) {
    const bool planner = k.flags.find("--auto-settings") != std::string::npos;
    const testing::CommandResult r = testing::run_command(
        base + k.flags + (planner ? " --auto-settings-work-dir " + dir.path().string() : ""));
    EXPECT_EQ(r.exit_code, 2) << k.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(k.message), std::string::npos) << k.flags << "\n" << r.output;
  }
}

// A LLaMA-70B-style model on 128 nodes x 8: the plan's per-stage parameters, bytes and
// volumes against the closed forms.
TEST(AutoSettingsPlanner, PlansA1024RankTargetFromTheClosedForms) {
  testing::ScratchDir dir("auto_settings_70b");
  const int64_t h = 8192, layers = 80, heads = 64, groups = 8, head_dim = 128, ffn = 28672,
                seq = 4096, gbs = 1024;
  const std::string model =
      " --mock-data --tokenizer-type NullTokenizer --vocab-size 31999 --num-layers 80 "
      "--hidden-size 8192"
      " --num-attention-heads 64 --group-query-attention --num-query-groups 8 --ffn-hidden-size "
      "28672 --swiglu"
      " --normalization RMSNorm --position-embedding-type rope "
      "--untie-embeddings-and-output-weights"
      " --disable-bias-linear --seq-length 4096 --max-position-embeddings 4096 --global-batch-size "
      "1024"
      " --train-iters 10 --lr 1e-4 --bf16 --use-flash-attn";
  const testing::CommandResult r = testing::run_command(
      kPretrain + model +
      " --auto-settings --target-nnodes 128 --nproc-per-node 8 --auto-settings-ranks 2 "
      "--auto-settings-memory-cap 81920"
      " --auto-settings-device-tflops 400 --auto-settings-intra-node-bandwidth 150 "
      "--auto-settings-inter-node-bandwidth"
      " 25 --auto-settings-work-dir " +
      std::string(dir.path().string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("torchrun --nproc_per_node 8 --nnodes 128"), std::string::npos)
      << r.output;
  const nlohmann::json plan = read_json(dir.file("auto_settings_plan.json"));
  ASSERT_TRUE(plan.is_object());
  EXPECT_EQ(plan["world_size"], 1024);
  ASSERT_GE(plan["plans"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const nlohmann::json& p = plan["plans"][i];
    const nlohmann::json& l = p["layout"];
    const int64_t t = l["tensor_model_parallel_size"], pp = l["pipeline_model_parallel_size"],
                  cp = l["context_parallel_size"], dp = l["data_parallel_size"],
                  mbs = l["micro_batch_size"];
    const bool sp = l["sequence_parallel"], distopt = l["use_distributed_optimizer"];
    const int64_t vpp =
        std::max<int64_t>(1, l["num_virtual_stages_per_pipeline_rank"].get<int64_t>());
    SCOPED_TRACE(p["name"].get<std::string>());
    ASSERT_EQ(t * pp * cp * dp, 1024);
    // Parameters of one tensor-parallel rank: the split weights over t, the norms whole.
    const int64_t layer = h * (heads * head_dim + 2 * groups * head_dim) / t +
                          heads * head_dim * h / t + 3 * h * ffn / t + 2 * h;
    const int64_t vocab = (31999 + 128 * t - 1) / (128 * t) * (128 * t);  // Megatron's padding
    const int64_t stage_layers = layers / pp;
    for (const nlohmann::json& stage : p["memory"]["stages"]) {
      const int rank = stage["pp_rank"];
      int64_t n = stage_layers * layer;
      if (rank == 0) n += vocab / t * h;           // word embeddings
      if (rank == pp - 1) n += h + vocab / t * h;  // final norm, output layer
      EXPECT_EQ(stage["num_params"].get<int64_t>(), n) << "stage " << rank;
      const double nd = static_cast<double>(n);
      // bf16 parameters, fp32 gradients, fp32 master + moments (sharded over dp x cp); the
      // distributed optimizer's buffer padding is below 0.01 %.
      EXPECT_NEAR(stage["params_bytes"].get<double>(), 2 * nd, 1e-4 * nd);
      EXPECT_NEAR(stage["grads_bytes"].get<double>(), 4 * nd, 1e-4 * nd);
      EXPECT_NEAR(stage["optimizer_bytes"].get<double>(), 12 * nd / (distopt ? dp * cp : 1),
                  1e-4 * nd);
      EXPECT_LE(stage["total_bytes"].get<double>(), 81920.0 * 1024 * 1024);
    }
    // Volumes: tensor parallel per layer and micro-batch 4 (10 with SP) whole [s b / cp, h] fp32
    // activations; data parallel the fp32 gradients (and bf16 parameters with the optimizer
    // sharded) of the largest stage.
    const double row = 4.0 * static_cast<double>(seq * mbs / cp * h);
    const double micro = static_cast<double>(gbs / (mbs * dp));
    const nlohmann::json& v = p["comm_bytes_per_step"];
    if (t > 1) {
      const double per_layer = (sp ? 10.0 : 4.0) * row;
      EXPECT_GE(v["tp"].get<double>(), micro * static_cast<double>(stage_layers) * per_layer);
      EXPECT_LE(v["tp"].get<double>(),
                micro * (static_cast<double>(stage_layers) * per_layer + 4.0 * row) +
                    4.0 * static_cast<double>(stage_layers * 3 * h + h));
    }
    if (dp * cp > 1) {
      double largest = 0.0;
      for (const nlohmann::json& stage : p["memory"]["stages"])
        largest = std::max(largest, stage["num_params"].get<double>());
      EXPECT_DOUBLE_EQ(v["dp_cp"].get<double>(), (distopt ? 6.0 : 4.0) * largest);
    }
    // Pipeline sends of the busiest rank: each chunk's output forward and its input's gradient
    // back, except at the model's two ends (with two ranks every rank holds one of them).
    if (pp > 1 && !l["dualpipev"].get<bool>()) {
      const double sends = 2.0 * micro * static_cast<double>(vpp) - (pp == 2 ? micro : 0.0);
      EXPECT_DOUBLE_EQ(v["pp"].get<double>(), sends * row / static_cast<double>(sp ? t : 1));
    }
  }
}

}  // namespace
}  // namespace mindspeed
