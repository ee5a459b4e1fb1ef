// Checkpoints through pretrain_gpt (mock data, tiny model):
//  * resume is bit-exact: N iterations, save, a fresh process continuing to 2N, equals 2N
//    iterations straight (every parameter and Adam moment of the final checkpoint, the
//    logged losses, loss scales and learning rates), single-rank, TP2 x DP2 with the distributed
//    optimizer and overlaps, PP2 interleaved, --bf16, --fp16 with a moving loss scale, and
//    --async-save;
//  * resharding: saved at TP2 x DP2 (distributed optimizer) and continued at TP1 x PP2, DP4,
//    TP4, PP2 x VPP2, ring CP2 x DP2 and hybrid CP4, the final weights equal the never-stopped
//    run within 1e-5;
//  * 2D tensor parallelism: saved at a 2 x 2 grid and continued at TP2, a 4 x 1 grid and one
//    rank; saved at TP2 and continued at the 2 x 2 grid;
//  * mixture of experts: saved at EP2 x DP2, resumed bit-exactly and continued at EP4, EP1 and
//    EP2 x TP2 (expert-TP 2);
//  * --ckpt-format torch: each save also writes Megatron-LM's mp_rank_*/model_optim_rng.pt
//    files (TP2 x PP2; PP2 interleaved x DP2 with the distributed optimizer and bf16), which
//    hold the saved weights, and the run resumes from such a checkpoint bit-exactly; the
//    Megatron files alone load as Megatron's own (weights, any layout, a 2D grid too);
//  * Megatron-LM's own checkpoints with optimizer state (tests/checkpointing/data, written by
//    Megatron core_v0.12.1's save_checkpoint after 3 steps: fp32, bf16, bf16 with the distributed
//    optimizer's distrib_optim.pt): the Adam moments and main parameters the engine loads equal
//    Megatron's live optimizer's bitwise, and 5 more steps equal those from this engine's own
//    checkpoint of the loaded state (also resharded to TP2);
//  * damaged checkpoints (truncated, corrupted, missing files, another architecture) are
//    refused naming the file or the flag; saves killed with SIGKILL never leave an unloadable
//    `latest`; SIGTERM with --exit-signal-handler saves and exits 0.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <thread>

#include "datasets/indexed_dataset.h"
#include "models/gpt/gpt_model.h"
#include "run_command.h"
#include "scratch_dir.h"
#include "test_util.h"
#include "training/checkpointing.h"
#include "training/megatron_torch_checkpoint.h"

namespace mindspeed::testing {
namespace {

namespace fs = std::filesystem;

const std::string kBin = MS_PRETRAIN_GPT;
const std::string kMpirun = mpirun_prefix(MS_MPIRUN);
const std::string kTiny =
    " --num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32"
    " --micro-batch-size 2 --global-batch-size 16 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine"
    " --lr-warmup-iters 2 --mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --use-flash-attn"
    " --seed 1234 --log-interval 1 --eval-interval 4 --eval-iters 1 --attention-dropout 0 --hidden-dropout 0";

std::string launch(int np) { return np == 1 ? "OMP_NUM_THREADS=1 " + kBin : kMpirun + " -np " + std::to_string(np) + " " + kBin; }

CommandResult train(int np, const std::string& layout, const std::string& extra) {
  return run_command(launch(np) + kTiny + layout + extra);
}

// The logged "lm loss" of each iteration line, by iteration.
std::map<int, std::string> losses(const std::string& out) {
  std::map<int, std::string> m;
  const std::regex re(R"(iteration +([0-9]+)/ *[0-9]+ \|.*\| lm loss: ([0-9.E+-]+) \|)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it) {
    m[std::stoi((*it)[1])] = (*it)[2];
  }
  return m;
}

// One field of each iteration line ("loss scale", "learning rate"), by iteration, as printed.
std::map<int, std::string> logged_field(const std::string& out, const std::string& field) {
  std::map<int, std::string> m;
  const std::regex re("iteration +([0-9]+)/ *[0-9]+ \\|.*\\| " + field + ": ([0-9.E+-]+) \\|");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it) {
    m[std::stoi((*it)[1])] = (*it)[2];
  }
  return m;
}

std::map<std::string, std::vector<float>> tensors(const std::string& dir, int64_t iteration, const char* kind) {
  auto t = read_checkpoint_tensors(checkpoint_iteration_dir(dir, iteration), kind);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : std::map<std::string, std::vector<float>>{};
}

// Megatron's files of iteration `iteration` of a --ckpt-format torch save (its tracker and the
// mp_rank_* directories, not this engine's index): a plain Megatron-LM checkpoint in `to`.
void copy_megatron_files(const std::string& from, int64_t iteration, const std::string& to) {
  const std::string iter = fs::path(checkpoint_iteration_dir(to, iteration)).filename().string();
  fs::create_directories(to + "/" + iter);
  fs::copy(from + "/latest_checkpointed_iteration.txt", to + "/latest_checkpointed_iteration.txt");
  for (const auto& entry : fs::directory_iterator(checkpoint_iteration_dir(from, iteration))) {
    if (entry.path().filename().string().starts_with("mp_rank_")) {
      fs::copy(entry.path(), to + "/" + iter + "/" + entry.path().filename().string(),
               fs::copy_options::recursive);
    }
  }
}

// The key part of the QKV bias has an exactly zero gradient (softmax ignores a shift shared by
// all scores of a query); Adam turns its rounding noise into layout-dependent steps, so it is
// left out of the cross-layout comparison (as in tests/mpi/parallel_equivalence_test.cpp).
// Layout per query group: [q (heads/groups x D), k (D), v (D)]; here 4 groups of 1 head, D 16.
std::vector<float> without_key_bias(const std::string& name, std::vector<float> w) {
  if (!name.ends_with("linear_qkv.bias")) return w;
  constexpr int64_t kGroups = 4, kHeadsPerGroup = 1, kD = 16;
  for (int64_t g = 0; g < kGroups; ++g)
    for (int64_t d = 0; d < kD; ++d) w[(g * (kHeadsPerGroup + 2) + kHeadsPerGroup) * kD + d] = 0.0f;
  return w;
}

struct Layout {
  const char* name;
  int np;
  std::string flags;
};

// The run at layout `l` continued from checkpoint `base` to iteration 8: its final weights (but
// the key bias, see without_key_bias) within 1e-5 of `want`, the never-stopped run's, and its
// losses of iterations 5-8 within 1e-5 of that run's log `straight`. `out` receives its
// checkpoints.
void expect_continues_like(const Layout& l, const std::string& base, const std::string& out,
                           const std::map<std::string, std::vector<float>>& want,
                           const CommandResult& straight) {
  const CommandResult b =
      train(l.np, l.flags, " --train-iters 8 --load " + base + " --save " + out);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto got = tensors(out, 8, "param");
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, values] : want) {
    ASSERT_EQ(got.count(name), 1u) << name;
    EXPECT_LE(normwise_error(without_key_bias(name, got.at(name)), without_key_bias(name, values)),
              1e-5)
        << name;
  }
  const auto la = losses(straight.output), lb = losses(b.output);
  for (int it = 5; it <= 8; ++it) {
    EXPECT_NEAR(std::stod(lb.at(it)), std::stod(la.at(it)), 1e-5 * std::stod(la.at(it)))
        << "iteration " << it;
  }
}

TEST(Checkpoint, ResumeIsBitExact) {
  const Layout layouts[] = {
      {"single", 1, ""},
      {"tp2_dp2_distopt_overlap", 4,
       " --tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer --overlap-grad-reduce"
       " --overlap-param-gather"},
      {"pp2_interleaved", 2, " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"},
      {"bf16", 1, " --bf16"},
      // fp16 with a dynamic loss scale that skips, halves and grows around the save: the
      // scaler's state (scale, growth and hysteresis trackers) and the skipped-iteration count
      // of the learning-rate schedule travel with the checkpoint.
      {"fp16_dynamic_loss_scale", 2, " --fp16 --initial-loss-scale 1048576 --loss-scale-window 2 --use-distributed-optimizer"},
      // Written in the background while training goes on: the snapshot must be the state at
      // the save, not what later steps make of the buffers.
      {"async_tp2_dp2_distopt", 4,
       " --async-save --save-interval 2 --tensor-model-parallel-size 2 --use-distributed-optimizer"},
  };
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.name);
    ScratchDir scratch;
    const std::string straight = scratch.file("straight"), resumed = scratch.file("resumed");
    const CommandResult a = train(l.np, l.flags, " --train-iters 8 --save " + straight);
    ASSERT_EQ(a.exit_code, 0) << a.output;
    const CommandResult b1 = train(l.np, l.flags, " --train-iters 8 --exit-interval 4 --save " + resumed);
    ASSERT_EQ(b1.exit_code, 0) << b1.output;
    ASSERT_NE(b1.output.find("exiting program at iteration 4"), std::string::npos) << b1.output;
    const CommandResult b2 = train(l.np, l.flags, " --train-iters 8 --load " + resumed + " --save " + resumed);
    ASSERT_EQ(b2.exit_code, 0) << b2.output;
    EXPECT_NE(b2.output.find("loaded checkpoint from " + resumed + " at iteration 4"), std::string::npos) << b2.output;
    // The logged losses of iterations 5..8 and the final evaluation agree to the printed digit...
    const auto la = losses(a.output), lb = losses(b2.output);
    for (int it = 5; it <= 8; ++it) EXPECT_EQ(la.at(it), lb.at(it)) << "iteration " << it;
    const auto sa = logged_field(a.output, "loss scale"), sb = logged_field(b2.output, "loss scale");
    const auto ra = logged_field(a.output, "learning rate"), rb = logged_field(b2.output, "learning rate");
    for (int it = 5; it <= 8; ++it) {
      EXPECT_EQ(sa.at(it), sb.at(it)) << "loss scale, iteration " << it;
      EXPECT_EQ(ra.at(it), rb.at(it)) << "learning rate, iteration " << it;
    }
    EXPECT_EQ(lb.count(4), 0u) << "the resumed run starts at iteration 5";
    // ... and every saved number is bitwise the same.
    for (const char* kind : {"param", "exp_avg", "exp_avg_sq"}) {
      const auto ta = tensors(straight, 8, kind), tb = tensors(resumed, 8, kind);
      ASSERT_FALSE(ta.empty());
      ASSERT_EQ(ta.size(), tb.size()) << kind;
      for (const auto& [name, values] : ta) EXPECT_EQ(values, tb.at(name)) << kind << " " << name;
    }
  }
}

TEST(Checkpoint, ReshardsToOtherLayouts) {
  ScratchDir scratch;
  const std::string from = " --tensor-model-parallel-size 2 --use-distributed-optimizer";
  const std::string base = scratch.file("base");
  // The never-stopped run, and its first half saved.
  const CommandResult a = train(4, from, " --train-iters 8 --save " + scratch.file("straight"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const CommandResult half = train(4, from, " --train-iters 8 --exit-interval 4 --save " + base);
  ASSERT_EQ(half.exit_code, 0) << half.output;
  const auto want = tensors(scratch.file("straight"), 8, "param");
  const Layout targets[] = {
      {"tp1_pp2", 2, " --pipeline-model-parallel-size 2"},
      {"dp4", 4, ""},
      {"tp4", 4, " --tensor-model-parallel-size 4"},
      {"pp2_vpp2", 2, " --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2"},
      // Context parallelism loads (and saves) the same replicated weights.
      {"ring_cp2_dp2_distopt", 4, " --context-parallel-size 2 --use-cp-send-recv-overlap --use-distributed-optimizer"},
      {"hybrid_cp4", 4, " --context-parallel-size 4 --context-parallel-algo hybrid_cp_algo --ulysses-degree-in-cp 2"},
  };
  for (const Layout& l : targets) {
    SCOPED_TRACE(l.name);
    expect_continues_like(l, base, scratch.file(l.name), want, a);
  }
}

// MindSpeed's --unaligned-linear: 5 heads and 70 FFN channels saved at TP4 (heads 2/1/1/1,
// channels 18/18/17/17; the index records each tensor's units) continue at TP2 (heads 3/2,
// channels 35/35) and on one rank, the final weights and the losses equal to the never-stopped
// TP4 run's within 1e-5.
TEST(Checkpoint, UnalignedLinearReshardsAcrossTensorParallelSizes) {
  ScratchDir scratch;
  const std::string model =
      " --num-attention-heads 5 --kv-channels 16 --ffn-hidden-size 70 --disable-bias-linear "
      "--unaligned-linear";
  const std::string base = scratch.file("base");
  const CommandResult a = train(4, model + " --tensor-model-parallel-size 4",
                                " --train-iters 8 --save " + scratch.file("straight"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const CommandResult half = train(4, model + " --tensor-model-parallel-size 4",
                                   " --train-iters 8 --exit-interval 4 --save " + base);
  ASSERT_EQ(half.exit_code, 0) << half.output;
  const auto want = tensors(scratch.file("straight"), 8, "param");
  ASSERT_FALSE(want.empty());
  const Layout targets[] = {{"tp2", 2, model + " --tensor-model-parallel-size 2"},
                            {"tp1", 1, model}};
  for (const Layout& l : targets) {
    SCOPED_TRACE(l.name);
    const std::string out = scratch.file(l.name);
    const CommandResult b =
        train(l.np, l.flags, " --train-iters 8 --load " + base + " --save " + out);
    ASSERT_EQ(b.exit_code, 0) << b.output;
    const auto got = tensors(out, 8, "param");
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [name, values] : want) {
      ASSERT_EQ(got.count(name), 1u) << name;
      EXPECT_LE(normwise_error(got.at(name), values), 1e-5) << name;
    }
    const auto la = losses(a.output), lb = losses(b.output);
    for (int it = 5; it <= 8; ++it) {
      EXPECT_NEAR(std::stod(lb.at(it)), std::stod(la.at(it)), 1e-5 * std::stod(la.at(it)))
          << "iteration " << it;
    }
  }
}

// MindSpeed's 2D tensor parallelism: the weights of a 2 x 2 grid are 2D blocks (the index records
// the grid's X), the norm weights and second-linear biases blocks of one axis saved by the first
// rank of the other. Saved at a 2 x 2 grid, the run continues at 1-D TP2, at a 4 x 1 grid and on
// one rank; saved at 1-D TP2, it continues at the 2 x 2 grid: the final weights and the losses
// equal the never-stopped 2 x 2 run's within 1e-5.
TEST(Checkpoint, TwoDimensionalTensorParallelReshards) {
  ScratchDir scratch;
  const std::string grid = " --tensor-model-parallel-size 4 --tp-2d --tp-x 2 --tp-y 2";
  const CommandResult a = train(4, grid, " --train-iters 8 --save " + scratch.file("straight"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const CommandResult half_2d = train(4, grid, " --train-iters 8 --exit-interval 4 --save " + scratch.file("base_2d"));
  ASSERT_EQ(half_2d.exit_code, 0) << half_2d.output;
  const CommandResult half_1d =
      train(2, " --tensor-model-parallel-size 2", " --train-iters 8 --exit-interval 4 --save " + scratch.file("base_1d"));
  ASSERT_EQ(half_1d.exit_code, 0) << half_1d.output;
  const auto want = tensors(scratch.file("straight"), 8, "param");
  ASSERT_FALSE(want.empty());
  // (name, ranks, flags) and the checkpoint the run continues from.
  const std::pair<Layout, const char*> targets[] = {
      {{"tp2", 2, " --tensor-model-parallel-size 2"}, "base_2d"},
      {{"grid_4x1", 4, " --tensor-model-parallel-size 4 --tp-2d --tp-x 4 --tp-y 1"}, "base_2d"},
      {{"tp1", 1, ""}, "base_2d"},
      {{"grid_2x2_from_tp2", 4, grid}, "base_1d"},
  };
  for (const auto& [layout, base] : targets) {
    SCOPED_TRACE(layout.name);
    expect_continues_like(layout, scratch.file(base), scratch.file(layout.name), want, a);
  }
}

// Mixture of experts: each routed expert is its own tensor under its global index (and each
// router's aux-loss-free expert bias a saved buffer), so a
// checkpoint saved at EP2 x DP2 (distributed optimizer, experts sharded over expert-DP)
// resumes bit-exactly at that layout and continues at EP4, EP1 x DP2 and EP2 x TP2 (expert-TP
// 2), the final weights equal to the never-stopped run within 1e-5.
TEST(Checkpoint, MixtureOfExpertsReshardsOverExpertParallelism) {
  ScratchDir scratch;
  const std::string moe =
      " --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 96 --moe-aux-loss-coeff 1e-2"
      " --moe-z-loss-coeff 1e-3 --disable-bias-linear --moe-token-dispatcher-type alltoall --moe-grouped-gemm"
      " --moe-router-score-function sigmoid --moe-router-enable-expert-bias --moe-router-bias-update-rate 1e-2";
  const std::string from = moe + " --expert-model-parallel-size 2 --use-distributed-optimizer";
  const std::string base = scratch.file("base");
  const CommandResult a = train(4, from, " --train-iters 8 --save " + scratch.file("straight"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_NE(a.output.find("load_balancing_loss:"), std::string::npos) << a.output;
  const CommandResult half = train(4, from, " --train-iters 8 --exit-interval 4 --save " + base);
  ASSERT_EQ(half.exit_code, 0) << half.output;
  const auto want = tensors(scratch.file("straight"), 8, "param");
  ASSERT_EQ(want.count("decoder.layers.3.mlp.experts.local_experts.3.linear_fc2.weight"), 1u);
  // The aux-loss-free expert biases are model state: saved, resumed and resharded too.
  ASSERT_EQ(want.count("decoder.layers.3.mlp.router.expert_bias"), 1u);
  float moved = 0.0f;
  for (float b : want.at("decoder.layers.3.mlp.router.expert_bias")) moved += std::fabs(b);
  EXPECT_GT(moved, 0.0f) << "the expert biases must have been updated";
  const Layout targets[] = {
      {"ep2_dp2_distopt", 4, from},
      {"ep4", 4, moe + " --expert-model-parallel-size 4"},
      {"ep1_dp2", 2, moe},
      {"ep2_tp2_etp2", 4, moe + " --expert-model-parallel-size 2 --tensor-model-parallel-size 2 --sequence-parallel"},
  };
  for (const Layout& l : targets) {
    SCOPED_TRACE(l.name);
    const std::string out = scratch.file(l.name);
    const CommandResult b = train(l.np, l.flags, " --train-iters 8 --load " + base + " --save " + out);
    ASSERT_EQ(b.exit_code, 0) << b.output;
    const auto got = tensors(out, 8, "param");
    ASSERT_EQ(got.size(), want.size());
    const bool same_layout = std::string(l.name) == "ep2_dp2_distopt";
    for (const auto& [name, values] : want) {
      ASSERT_EQ(got.count(name), 1u) << name;
      if (same_layout) {
        EXPECT_EQ(got.at(name), values) << name;
      } else {
        EXPECT_LE(normwise_error(got.at(name), values), 1e-5) << name;
      }
    }
    const auto la = losses(a.output), lb = losses(b.output);
    for (int it = 5; it <= 8; ++it) {
      EXPECT_NEAR(std::stod(lb.at(it)), std::stod(la.at(it)), 1e-5 * std::stod(la.at(it))) << "iteration " << it;
    }
  }
}

// Overwrites `bytes` bytes at `offset` of a file (or truncates it when bytes is empty).
void damage(const std::string& path, int64_t offset, const std::string& bytes) {
  if (bytes.empty()) {
    fs::resize_file(path, static_cast<uintmax_t>(offset));
    return;
  }
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(Checkpoint, DamagedCheckpointsAreRefusedByName) {
  ScratchDir scratch;
  const std::string good = scratch.file("good");
  ASSERT_EQ(train(1, "", " --train-iters 3 --save " + good).exit_code, 0);
  struct Damage {
    const char* what;
    std::function<void(const std::string& dir)> apply;
    std::string message;
  };
  const std::string shard = "iter_0000003/rank_00000.safetensors";
  const Damage damages[] = {
      {"truncated shard", [&](const std::string& d) { damage(d + "/" + shard, 100, ""); },
       shard + "' has 100 bytes, the index recorded"},
      {"flipped byte", [&](const std::string& d) { damage(d + "/" + shard, static_cast<int64_t>(fs::file_size(d + "/" + shard)) - 5, "\x7f"); },
       shard + "' fails its checksum"},
      {"missing shard", [&](const std::string& d) { fs::remove(d + "/" + shard); }, shard + "' is missing"},
      {"missing index", [&](const std::string& d) { fs::remove(d + "/iter_0000003/metadata.json"); },
       "iter_0000003/metadata.json' does not exist"},
      {"damaged index", [&](const std::string& d) { damage(d + "/iter_0000003/metadata.json", 3, "\x01\x02"); },
       "metadata.json' is not a JSON object"},
      {"tracker to nowhere",
       [&](const std::string& d) { std::ofstream(d + "/latest_checkpointed_iteration.txt") << "7"; },
       "iter_0000007/metadata.json' does not exist"},
      {"bad tracker", [&](const std::string& d) { std::ofstream(d + "/latest_checkpointed_iteration.txt") << "x7"; },
       "holds 'x7', not an iteration number"},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.what);
    const std::string dir = scratch.file("damaged");
    fs::remove_all(dir);
    fs::copy(good, dir, fs::copy_options::recursive);
    d.apply(dir);
    const CommandResult r = train(1, "", " --train-iters 4 --load " + dir);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(d.message), std::string::npos) << r.output;
  }
  // Another architecture is refused naming the flag.
  const CommandResult r = run_command(launch(1) + std::regex_replace(kTiny, std::regex("--num-layers 4"),
                                                                     "--num-layers 2") +
                                      " --train-iters 4 --load " + good);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("was saved with --num-layers 4, this run has 2"), std::string::npos) << r.output;
}

// Runs `command` in the background and sends `signal` `delay` seconds after `ready` holds
// (polled every 10 ms, at most 120 s); returns when the command ended.
CommandResult run_and_signal(const std::string& command, const std::function<bool()>& ready, double delay,
                             int signal) {
  const std::string pid_file = "/tmp/ms_ckpt_pid_" + std::to_string(getpid());
  fs::remove(pid_file);
  std::atomic<bool> done{false};
  std::thread killer([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!done && !ready() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    std::ifstream in(pid_file);
    long pid = 0;
    if (!done && in >> pid && pid > 0) ::kill(static_cast<pid_t>(pid), signal);
  });
  CommandResult r = run_command("sh -c 'echo $$ > " + pid_file + "; exec " + command + "'");
  done = true;
  killer.join();
  fs::remove(pid_file);
  return r;
}

TEST(Checkpoint, KilledSavesLeaveALoadableLatest) {
  // Saves every iteration; SIGKILL at random moments (many land inside a save). Whatever
  // `latest` says afterwards must load. scripts/checkpoint_kill_test.sh runs more trials.
  ScratchDir scratch;
  const std::string dir = scratch.file("ckpt");
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> when(0.0, 0.5);
  int loaded = 0;
  for (int trial = 0; trial < 6; ++trial) {
    fs::remove_all(dir);
    // Killed at a random moment after the first save (later saves are under way).
    run_and_signal(kBin + kTiny + " --train-iters 100000 --save-interval 1 --save " + dir,
                   [&] { return has_checkpoint_tracker(dir); }, when(rng), SIGKILL);
    if (!has_checkpoint_tracker(dir)) continue;
    std::ifstream in(dir + "/latest_checkpointed_iteration.txt");
    int64_t latest = 0;
    in >> latest;
    const CommandResult r = train(1, "", " --train-iters " + std::to_string(latest + 3) + " --eval-iters 0 --load " + dir);
    EXPECT_EQ(r.exit_code, 0) << "trial " << trial << ": " << r.output;
    EXPECT_NE(r.output.find("at iteration " + std::to_string(latest)), std::string::npos) << r.output;
    ++loaded;
  }
  EXPECT_EQ(loaded, 6) << "every trial is killed after its first save";
}

TEST(Checkpoint, SigtermWithExitSignalHandlerSavesAndExitsZero) {
  ScratchDir scratch;
  const std::string dir = scratch.file("ckpt");
  // SIGTERM once training runs (the first checkpoint of --save-interval 5 exists).
  const CommandResult r = run_and_signal(
      kBin + kTiny + " --train-iters 100000 --save-interval 5 --exit-signal-handler --save " + dir,
      [&] { return has_checkpoint_tracker(dir); }, 0.2, SIGTERM);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(SIGTERM (--exit-signal-handler))"), std::string::npos) << r.output;
  EXPECT_TRUE(has_checkpoint_tracker(dir));
}

// --skip-train evaluates a checkpoint: the validation and test losses equal those the training
// run printed after its last save (same weights, same next validation samples).
TEST(Checkpoint, SkipTrainEvaluatesTheCheckpoint) {
  ScratchDir scratch;
  const std::string dir = scratch.file("ckpt");
  const CommandResult a = train(1, "", " --train-iters 8 --save " + dir);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const CommandResult b = train(1, "", " --train-iters 8 --skip-train --load " + dir);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_TRUE(losses(b.output).empty()) << "no training iteration";
  for (const char* what : {"the end of training for val data", "the end of training for test data"}) {
    const std::regex re(std::string(what) + R"( \| lm loss value: ([0-9.E+-]+))");
    std::smatch ma, mb;
    ASSERT_TRUE(std::regex_search(a.output, ma, re)) << a.output;
    ASSERT_TRUE(std::regex_search(b.output, mb, re)) << b.output;
    EXPECT_EQ(ma[1], mb[1]) << what;
  }
}

// A Megatron-LM --ckpt-format torch checkpoint is a --load directory too (weights; the
// optimizer state is not read): converted from a trained checkpoint of ours, it evaluates to
// the same losses, also loaded at TP2 x PP2 and from Megatron's virtual-pipeline layout (PP2 x
// 2 virtual stages); without --no-load-optim/--finetune a non-release Megatron checkpoint is
// refused by name.
TEST(Checkpoint, LoadsMegatronTorchCheckpoints) {
  ScratchDir scratch;
  const std::string ours = scratch.file("ours"), megatron = scratch.file("megatron");
  ASSERT_EQ(train(1, "", " --train-iters 4 --save " + ours).exit_code, 0);
  const CommandResult conv = run_command(std::string(MS_CONVERT_CHECKPOINT) +
                                         " --load-model-type mg --save-model-type mg-torch --load-dir " + ours +
                                         " --save-dir " + megatron + " --target-tensor-parallel-size 2"
                                         " --target-pipeline-parallel-size 2");
  ASSERT_EQ(conv.exit_code, 0) << conv.output;
  auto eval_loss = [](const CommandResult& r) {
    const std::regex re(R"(the end of training for val data \| lm loss value: ([0-9.E+-]+))");
    std::smatch m;
    return std::regex_search(r.output, m, re) ? std::string(m[1]) : std::string("none");
  };
  const CommandResult want = train(1, "", " --train-iters 4 --finetune --skip-train --load " + ours);
  const CommandResult got = train(1, "", " --train-iters 4 --finetune --skip-train --load " + megatron);
  ASSERT_EQ(got.exit_code, 0) << got.output;
  EXPECT_NE(got.output.find("loaded the weights of the Megatron-LM checkpoint"), std::string::npos) << got.output;
  EXPECT_EQ(eval_loss(got), eval_loss(want));
  const CommandResult sharded = train(4, " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2",
                                      " --train-iters 4 --finetune --skip-train --load " + megatron);
  ASSERT_EQ(sharded.exit_code, 0) << sharded.output;
  EXPECT_NEAR(std::stod(eval_loss(sharded)), std::stod(eval_loss(want)), 1e-5 * std::stod(eval_loss(want)));
  // Megatron's virtual-pipeline layout (rank files with model0, model1) loads to the same losses.
  const std::string interleaved = scratch.file("megatron_vpp");
  const CommandResult conv_vpp = run_command(std::string(MS_CONVERT_CHECKPOINT) +
                                             " --load-model-type mg --save-model-type mg-torch --load-dir " + ours +
                                             " --save-dir " + interleaved + " --target-pipeline-parallel-size 2"
                                             " --num-layers-per-virtual-pipeline-stage 1");
  ASSERT_EQ(conv_vpp.exit_code, 0) << conv_vpp.output;
  const CommandResult got_vpp = train(1, "", " --train-iters 4 --finetune --skip-train --load " + interleaved);
  ASSERT_EQ(got_vpp.exit_code, 0) << got_vpp.output;
  EXPECT_EQ(eval_loss(got_vpp), eval_loss(want));
  // Another architecture is refused by flag.
  const CommandResult other = run_command(launch(1) + std::regex_replace(kTiny, std::regex("--num-layers 4"),
                                                                         "--num-layers 2") +
                                          " --train-iters 4 --finetune --skip-train --load " + megatron);
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.output.find("--num-layers is 2 but the checkpoint has 4"), std::string::npos) << other.output;
  // Not a release: Megatron would load its optimizer state, which a converted checkpoint lacks.
  fs::rename(megatron + "/release", megatron + "/iter_0000004");
  std::ofstream(megatron + "/latest_checkpointed_iteration.txt") << "4";
  const CommandResult refused = train(1, "", " --train-iters 6 --load " + megatron);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find(
                "holds no optimizer state (saved with --no-save-optim, or a release): pass "
                "--no-load-optim"),
            std::string::npos)
      << refused.output;
}

// The Megatron files hold the optimizer's state (Megatron's FP32Optimizer / Float16Optimizer
// state_dict in model_optim_rng.pt; the distributed optimizer's gathered over data parallelism
// into distrib_optim.pt in Megatron's buffer layout): read back, each moment
// and fp32 main parameter equals the one this engine's index saved, bitwise; a run resumed from
// the Megatron files alone continues exactly as one resumed from the full checkpoint (at the
// saving layout bitwise, resharded to one rank as that checkpoint reshards); without the state
// (--no-load-optim) it does not.
TEST(Checkpoint, ResumesFromMegatronTorchOptimizerState) {
  const Layout layouts[] = {
      {"tp2_pp2_fp32", 4, " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2"},
      {"pp2_vpp2_bf16", 2,
       " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 --bf16"},
      // Tied embeddings on two stages: Megatron's buffer starts the output layer's copy before
      // its own bucket, and its file drops those leading elements (zeros on load, as Megatron).
      {"pp2_dp2_distopt_bf16", 4,
       " --pipeline-model-parallel-size 2 --use-distributed-optimizer --bf16"},
      {"tp2_dp2_distopt_fp32", 4, " --tensor-model-parallel-size 2 --use-distributed-optimizer"},
  };
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.name);
    ScratchDir scratch;
    const std::string dir = scratch.file("ckpt"), megatron = scratch.file("megatron_only");
    const std::string flags = l.flags + " --ckpt-format torch";
    ASSERT_EQ(train(l.np, flags, " --train-iters 4 --save " + dir).exit_code, 0);
    copy_megatron_files(dir, 4, megatron);
    auto ckpt = MegatronTorchCheckpoint::open(megatron);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
    const bool bf16 = l.flags.find("--bf16") != std::string::npos;
    const bool distributed = l.flags.find("--use-distributed-optimizer") != std::string::npos;
    EXPECT_EQ(ckpt->optimizer_state(), distributed ? MegatronOptimizerState::kDistributed
                                       : bf16      ? MegatronOptimizerState::kFloat16
                                                   : MegatronOptimizerState::kFp32);
    if (distributed) {
      for (const auto& entry : fs::directory_iterator(megatron + "/iter_0000004")) {
        EXPECT_TRUE(fs::is_regular_file(entry.path() / "distrib_optim.pt")) << entry.path();
      }
    }
    EXPECT_EQ(ckpt->optimizer_step(), 4);
    auto config = checkpoint_model_config(checkpoint_iteration_dir(dir, 4));
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    const auto single = ParallelState::single_process();
    ParameterRegistry registry;
    const GPTModel model(*config, *single, registry);
    for (const char* kind : {"param", "exp_avg", "exp_avg_sq"}) {
      const auto saved = tensors(dir, 4, kind);
      for (const auto& p : registry.params()) {
        auto full = ckpt->full_optimizer_tensor(kind, p->spec);
        ASSERT_TRUE(full.ok()) << full.status().to_string();
        EXPECT_EQ(*full, saved.at(p->spec.name)) << kind << " " << p->spec.name;
      }
    }
    const std::string resume = " --train-iters 8 --no-load-rng --load ";
    const CommandResult own = train(l.np, l.flags, resume + dir);
    const CommandResult from_megatron = train(l.np, l.flags, resume + megatron);
    ASSERT_EQ(from_megatron.exit_code, 0) << from_megatron.output;
    EXPECT_NE(from_megatron.output.find(
                  "loaded the optimizer state of the Megatron-LM checkpoint (Adam step 4)"),
              std::string::npos)
        << from_megatron.output;
    const auto lo = losses(own.output), lm = losses(from_megatron.output);
    ASSERT_EQ(lm.size(), 4u) << from_megatron.output;
    for (int it = 5; it <= 8; ++it) EXPECT_EQ(lm.at(it), lo.at(it)) << "iteration " << it;
    // Resharded to one process, as this engine's own checkpoint reshards.
    const CommandResult own1 = train(1, bf16 ? " --bf16" : "", resume + dir);
    const CommandResult megatron1 = train(1, bf16 ? " --bf16" : "", resume + megatron);
    ASSERT_EQ(megatron1.exit_code, 0) << megatron1.output;
    const auto l1 = losses(own1.output), m1 = losses(megatron1.output);
    for (int it = 5; it <= 8; ++it) {
      EXPECT_NEAR(std::stod(m1.at(it)), std::stod(l1.at(it)), 1e-5 * std::stod(l1.at(it)))
          << "iteration " << it;
    }
    // A fresh optimizer diverges from it.
    const CommandResult fresh = train(l.np, l.flags, resume + megatron + " --no-load-optim");
    ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
    EXPECT_NE(losses(fresh.output).at(6), lo.at(6));
  }
}

// MindSpeed-LLM's recipes save with --ckpt-format torch. Every save writes Megatron-LM's rank files
// (mp_rank_TT_PPP/model_optim_rng.pt, one per tensor- and pipeline-parallel rank, model0/model1
// with a virtual pipeline) beside this engine's index: their tensors, read back by the Megatron
// reader, are the saved weights (bf16-rounded in a bf16 run, as the model holds them); the run
// resumes from such a directory bit-exactly (losses, learning rates, every parameter and moment);
// and with the index removed the directory is a plain Megatron checkpoint that loads its weights
// at another layout to the same evaluation loss.
TEST(Checkpoint, SavesMegatronTorchFormatAndResumes) {
  const Layout layouts[] = {
      {"tp2_pp2", 4, " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2"},
      {"pp2_vpp2_dp2_distopt_bf16", 4,
       " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 "
       "--use-distributed-optimizer --bf16"},
  };
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.name);
    ScratchDir scratch;
    const std::string straight = scratch.file("straight"), resumed = scratch.file("resumed");
    const std::string flags = l.flags + " --ckpt-format torch";
    const CommandResult a = train(l.np, flags, " --train-iters 8 --save " + straight);
    ASSERT_EQ(a.exit_code, 0) << a.output;
    const CommandResult b1 =
        train(l.np, flags, " --train-iters 8 --exit-interval 4 --save " + resumed);
    ASSERT_EQ(b1.exit_code, 0) << b1.output;
    // Megatron's files, one per (tp, pp) rank.
    const std::string iter4 = checkpoint_iteration_dir(resumed, 4);
    std::vector<std::string> rank_dirs;
    for (const auto& entry : fs::directory_iterator(iter4)) {
      if (entry.path().filename().string().starts_with("mp_rank_"))
        rank_dirs.push_back(entry.path().filename());
    }
    std::sort(rank_dirs.begin(), rank_dirs.end());
    const std::vector<std::string> want_dirs =
        l.np == 4 && l.flags.find("tensor-model") != std::string::npos
            ? std::vector<std::string>{"mp_rank_00_000", "mp_rank_00_001", "mp_rank_01_000",
                                       "mp_rank_01_001"}
            : std::vector<std::string>{"mp_rank_00_000", "mp_rank_00_001"};
    EXPECT_EQ(rank_dirs, want_dirs);
    for (const std::string& d : rank_dirs)
      EXPECT_TRUE(fs::is_regular_file(iter4 + "/" + d + "/model_optim_rng.pt"));
    // Their tensors are the saved weights.
    auto ckpt = MegatronTorchCheckpoint::open(resumed);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
    EXPECT_EQ(ckpt->iteration(), 4);
    auto config = checkpoint_model_config(iter4);
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    const auto single = ParallelState::single_process();
    ParameterRegistry registry;
    const GPTModel model(*config, *single, registry);
    const auto saved = tensors(resumed, 4, "param");
    const bool bf16 = l.flags.find("--bf16") != std::string::npos;
    for (const auto& p : registry.params()) {
      auto full = ckpt->full_tensor(p->spec);
      ASSERT_TRUE(full.ok()) << full.status().to_string();
      std::vector<float> want = saved.at(p->spec.name);
      if (bf16) {
        for (float& x : want) x = round_to_bf16(x);
      }
      EXPECT_EQ(*full, want) << p->spec.name;
    }
    // Resumed from it: bitwise the never-stopped run.
    const CommandResult b2 =
        train(l.np, flags, " --train-iters 8 --load " + resumed + " --save " + resumed);
    ASSERT_EQ(b2.exit_code, 0) << b2.output;
    EXPECT_NE(b2.output.find("loaded checkpoint from " + resumed + " at iteration 4"),
              std::string::npos)
        << b2.output;
    const auto la = losses(a.output), lb = losses(b2.output);
    const auto ra = logged_field(a.output, "learning rate"),
               rb = logged_field(b2.output, "learning rate");
    for (int it = 5; it <= 8; ++it) {
      EXPECT_EQ(la.at(it), lb.at(it)) << "iteration " << it;
      EXPECT_EQ(ra.at(it), rb.at(it)) << "learning rate, iteration " << it;
    }
    for (const char* kind : {"param", "exp_avg", "exp_avg_sq"}) {
      const auto ta = tensors(straight, 8, kind), tb = tensors(resumed, 8, kind);
      ASSERT_FALSE(ta.empty());
      for (const auto& [name, values] : ta) EXPECT_EQ(values, tb.at(name)) << kind << " " << name;
    }
  }
  // The Megatron files alone (the index removed): Megatron's own checkpoint to this engine, its
  // weights loaded at TP1 (--no-load-optim, as Megatron needs for these files too) evaluate as the
  // full checkpoint does.
  ScratchDir scratch;
  const std::string dir = scratch.file("ckpt"), megatron = scratch.file("megatron_only");
  ASSERT_EQ(
      train(4,
            " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --ckpt-format torch",
            " --train-iters 4 --save " + dir)
          .exit_code,
      0);
  copy_megatron_files(dir, 4, megatron);
  auto eval_loss = [](const CommandResult& r) {
    const std::regex re(R"(the end of training for val data \| lm loss value: ([0-9.E+-]+))");
    std::smatch m;
    return std::regex_search(r.output, m, re) ? std::string(m[1]) : std::string("none");
  };
  const CommandResult want =
      train(1, "", " --train-iters 4 --skip-train --no-load-optim --load " + dir);
  const CommandResult got =
      train(1, "", " --train-iters 4 --skip-train --no-load-optim --load " + megatron);
  ASSERT_EQ(want.exit_code, 0) << want.output;
  ASSERT_EQ(got.exit_code, 0) << got.output;
  EXPECT_NE(got.output.find("loaded the weights of the Megatron-LM checkpoint " + megatron +
                            " (--ckpt-format torch) at iteration 4"),
            std::string::npos)
      << got.output;
  EXPECT_NEAR(std::stod(eval_loss(got)), std::stod(eval_loss(want)),
              1e-6 * std::stod(eval_loss(want)));
  // And into a 2D tensor-parallel grid (its blocks cut from Megatron's 1-D slices).
  const CommandResult grid =
      train(4, " --tensor-model-parallel-size 4 --tp-2d --tp-x 2 --tp-y 2",
            " --train-iters 4 --skip-train --no-load-optim --load " + megatron);
  ASSERT_EQ(grid.exit_code, 0) << grid.output;
  EXPECT_NEAR(std::stod(eval_loss(grid)), std::stod(eval_loss(want)),
              1e-5 * std::stod(eval_loss(want)));
}

// A Megatron-LM torch_dist iteration (dist-checkpointing's metadata.json, .metadata and
// __R_N.distcp shards) is not read yet: refused naming the format and Megatron's conversion.
TEST(Checkpoint, MegatronTorchDistIsRefusedByName) {
  ScratchDir scratch;
  const std::string dir = scratch.file("torch_dist");
  fs::create_directories(dir + "/iter_0000005");
  std::ofstream(dir + "/latest_checkpointed_iteration.txt") << "5";
  std::ofstream(dir + "/iter_0000005/metadata.json")
      << R"({"sharded_backend": "torch_dist", "sharded_backend_version": 1})";
  std::ofstream(dir + "/iter_0000005/.metadata") << "x";
  std::ofstream(dir + "/iter_0000005/__0_0.distcp") << "x";
  const CommandResult r = train(1, "", " --train-iters 6 --load " + dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(
      r.output.find(
          "is a Megatron-LM torch_dist checkpoint (PyTorch Distributed Checkpoint), not read yet: "
          "convert it to the legacy format with Megatron (--ckpt-convert-format torch"),
      std::string::npos)
      << r.output;
}

// MindSpeed's --hccl-slice-size bounds each data-parallel call of the distributed optimizer's
// gather into distrib_optim.pt: with 1000 elements the gather takes ceil(3 x shard / 1000) calls
// (exp_avg, exp_avg_sq and the main copy of the rank's parameters) and writes the same bytes as
// the default slice (10 Mi elements: one call here).
TEST(Checkpoint, HcclSliceSizeSlicesTheDistributedOptimizerGather) {
  ScratchDir scratch;
  auto save = [&](const std::string& dir, const std::string& extra) {
    return train(2, " --use-distributed-optimizer --bf16 --ckpt-format torch" + extra,
                 " --train-iters 3 --save " + dir);
  };
  const std::string sliced = scratch.file("sliced"), whole = scratch.file("whole");
  const CommandResult a = save(sliced, " --hccl-slice-size 1000");
  const CommandResult b = save(whole, "");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(a.output, m, std::regex(R"(model parallel rank \(0, 0\): ([0-9]+))")))
      << a.output;
  const int64_t shard = std::stoll(m[1]);
  const int64_t calls = (3 * shard + 999) / 1000;
  EXPECT_NE(a.output.find("> distrib_optim.pt: " + std::to_string(3 * shard) +
                          " state elements gathered over data "
                          "parallelism in " +
                          std::to_string(calls) + " call(s) of at most --hccl-slice-size 1000"),
            std::string::npos)
      << a.output;
  EXPECT_NE(b.output.find("in 1 call(s) of at most --hccl-slice-size 10485760"), std::string::npos)
      << b.output;
  auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string file = "/iter_0000003/mp_rank_00/distrib_optim.pt";
  ASSERT_TRUE(fs::is_regular_file(sliced + file));
  EXPECT_EQ(bytes(sliced + file), bytes(whole + file));
}

// "<count>:<CRC-32>" of fp32 values (little-endian bytes), the digest
// tests/tools/make_megatron_optimizer_fixture.py records for each tensor of Megatron's optimizer.
std::string fp32_digest(const std::vector<float>& v) {
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(v.data()),
                          static_cast<uInt>(v.size() * sizeof(float)));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%zu:%08lx", v.size(), static_cast<unsigned long>(crc));
  return buf;
}

// Megatron core_v0.12.1's own checkpoints of the tiny LLaMA golden model after 3 training steps
// with the optimizer state (see the fixture generator): read by the checkpoint reader and loaded
// by pretrain_gpt, every exp_avg, exp_avg_sq and fp32 main parameter equals the one Megatron's
// live optimizer held (bitwise, by digest); the run continues 5 steps exactly as it does from
// this engine's own checkpoint of the loaded state, at TP1 and resharded to TP2; with a fresh
// optimizer it does not.
TEST(Checkpoint, LoadsMegatronOptimizerStateBitExactly) {
  ScratchDir scratch;
  // Token ids below the model's vocabulary of 100 (NullTokenizer reads integers).
  const std::string jsonl = scratch.file("ids.jsonl"), prefix = scratch.file("ids");
  {
    std::ofstream out(jsonl);
    for (int d = 0; d < 64; ++d) {
      out << "{\"text\": \"";
      for (int i = 0; i < 40; ++i) out << (i ? " " : "") << (d * 7 + i * 13) % 99;
      out << "\"}\n";
    }
  }
  const CommandResult pre =
      run_command(std::string(MS_PREPROCESS_DATA) + " --input " + jsonl + " --output-prefix " +
                  prefix + " --tokenizer-type NullTokenizer --vocab-size 100 --append-eod");
  ASSERT_EQ(pre.exit_code, 0) << pre.output;
  // The generator's model and optimizer flags.
  const std::string model =
      " --data-path " + prefix +
      "_text_document --split 100,0,0 --tokenizer-type NullTokenizer --vocab-size 100"
      " --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 "
      "--group-query-attention"
      " --num-query-groups 2 --seq-length 16 --max-position-embeddings 32 --normalization RMSNorm "
      "--norm-epsilon 1e-6"
      " --swiglu --position-embedding-type rope --untie-embeddings-and-output-weights "
      "--disable-bias-linear"
      " --attention-dropout 0 --hidden-dropout 0 --micro-batch-size 2 --global-batch-size 2 --lr "
      "1e-3 --min-lr 1e-4"
      " --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1 --adam-beta2 0.95 "
      "--clip-grad 1.0"
      " --log-interval 1 --eval-interval 1000 --eval-iters 0 --seed 1234 --no-load-rng";
  struct Case {
    const char* dir;
    const char* flags;
    MegatronOptimizerState form;
  };
  const Case cases[] = {{"megatron_optim_fp32", "", MegatronOptimizerState::kFp32},
                        {"megatron_optim_bf16", " --bf16", MegatronOptimizerState::kFloat16},
                        {"megatron_optim_distopt_bf16", " --bf16 --use-distributed-optimizer",
                         MegatronOptimizerState::kDistributed}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.dir);
    const std::string fixture = std::string(MS_SOURCE_DIR) + "/tests/checkpointing/data/" + k.dir;
    std::ifstream in(fixture + "/expected_optimizer.json");
    const nlohmann::json expected = nlohmann::json::parse(in);
    const auto& want = expected.at("params");
    // The reader: every tensor of Megatron's optimizer as Megatron's live optimizer held it.
    auto ckpt = MegatronTorchCheckpoint::open(fixture);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
    EXPECT_EQ(ckpt->optimizer_state(), k.form);
    EXPECT_EQ(ckpt->optimizer_step(), expected.at("step").get<int64_t>());
    const auto single = ParallelState::single_process();
    ParameterRegistry registry;
    const GPTModel gpt(ckpt->model_config(), *single, registry);
    ASSERT_EQ(registry.params().size(), want.size());
    for (const auto& p : registry.params()) {
      const auto& w = want.at(p->spec.name);
      for (const auto& [kind, key] : {std::pair{"exp_avg", "exp_avg"},
                                      {"exp_avg_sq", "exp_avg_sq"},
                                      {"param", "main_param"}}) {
        auto full = ckpt->full_optimizer_tensor(kind, p->spec);
        ASSERT_TRUE(full.ok()) << full.status().to_string();
        EXPECT_EQ(fp32_digest(*full), w.at(key).get<std::string>()) << kind << " " << p->spec.name;
      }
    }
    // pretrain_gpt loads them: its own checkpoint of the loaded state holds the same bits.
    const std::string own = scratch.file(std::string(k.dir) + "_own");
    const CommandResult loaded = run_command(
        launch(1) + model + k.flags + " --train-iters 3 --load " + fixture + " --save " + own);
    ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
    EXPECT_NE(loaded.output.find(
                  "loaded the optimizer state of the Megatron-LM checkpoint (Adam step 3)"),
              std::string::npos)
        << loaded.output;
    for (const auto& [kind, key] :
         {std::pair{"exp_avg", "exp_avg"}, {"exp_avg_sq", "exp_avg_sq"}, {"param", "main_param"}}) {
      const auto saved = tensors(own, 3, kind);
      ASSERT_EQ(saved.size(), want.size()) << kind;
      for (const auto& [name, values] : saved) {
        EXPECT_EQ(fp32_digest(values), want.at(name).at(key).get<std::string>())
            << kind << " " << name;
      }
    }
    // 5 steps from Megatron's checkpoint equal 5 steps from ours, at TP1 and TP2.
    for (const auto& [np, layout] :
         {std::pair{1, std::string()}, {2, std::string(" --tensor-model-parallel-size 2")}}) {
      SCOPED_TRACE(layout);
      const CommandResult from_ours =
          run_command(launch(np) + model + k.flags + layout + " --train-iters 8 --load " + own);
      const CommandResult from_megatron =
          run_command(launch(np) + model + k.flags + layout + " --train-iters 8 --load " + fixture);
      ASSERT_EQ(from_megatron.exit_code, 0) << from_megatron.output;
      const auto lo = losses(from_ours.output), lm = losses(from_megatron.output);
      ASSERT_EQ(lm.size(), 5u) << from_megatron.output;
      for (int it = 4; it <= 8; ++it) {
        EXPECT_NEAR(std::stod(lm.at(it)), std::stod(lo.at(it)), 1e-5 * std::stod(lo.at(it)))
            << "iteration " << it;
      }
      if (np == 1) {
        const CommandResult fresh = run_command(
            launch(np) + model + k.flags + " --train-iters 8 --no-load-optim --load " + fixture);
        ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
        EXPECT_NE(losses(fresh.output).at(5), lo.at(5));
      }
    }
  }
}

// A Megatron-LM checkpoint saved at TP2 holds the vocabulary padded for TP2 (100 -> 256 rows);
// when its args record the real vocabulary size, a run at another tensor-parallel size loads
// it with its own padding (128 rows at TP1), as the Hugging Face import of the same model.
TEST(Checkpoint, MegatronCheckpointOfAnotherPaddingLoadsAtAnyTensorParallelSize) {
  const std::string llama_tiny =
      " --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --group-query-attention"
      " --num-query-groups 2 --max-position-embeddings 32 --seq-length 16 --normalization RMSNorm"
      " --norm-epsilon 1e-6 --swiglu --position-embedding-type rope --untie-embeddings-and-output-weights"
      " --disable-bias-linear --micro-batch-size 2 --global-batch-size 4 --train-iters 1 --eval-iters 2"
      " --lr 1e-3 --tokenizer-type NullTokenizer --vocab-size 99 --seed 7 --finetune --skip-train"
      " --attention-dropout 0 --hidden-dropout 0 --split 50,50,0";
  // Documents of token ids below 100 (the fixture's vocabulary).
  ScratchDir scratch;
  {
    auto builder = IndexedDatasetBuilder::create(scratch.file("ids.bin"));
    ASSERT_TRUE(builder.ok()) << builder.status().to_string();
    for (int d = 0; d < 40; ++d) {
      std::vector<int32_t> tokens;
      for (int t = 0; t < 20 + d % 7; ++t) tokens.push_back((d * 7 + t * 3) % 99);
      ASSERT_TRUE((*builder)->add_item(std::span<const int32_t>(tokens)).ok());
      (*builder)->end_document();
    }
    ASSERT_TRUE((*builder)->finalize(scratch.file("ids.idx")).ok());
  }
  const std::string model = llama_tiny + " --data-path " + scratch.file("ids");
  auto eval_loss = [](const CommandResult& r) {
    const std::regex re(R"(lm loss value: ([0-9.E+-]+))");
    std::smatch m;
    return std::regex_search(r.output, m, re) ? std::string(m[1]) : std::string("none");
  };
  const CommandResult hf = run_command(launch(1) + model + " --load " MS_SOURCE_DIR "/tests/golden/llama_tiny");
  ASSERT_EQ(hf.exit_code, 0) << hf.output;
  const std::string megatron = " --load " MS_SOURCE_DIR "/tests/tools/data/megatron_torch_llama";
  const CommandResult tp1 = run_command(launch(1) + model + megatron);
  ASSERT_EQ(tp1.exit_code, 0) << tp1.output;
  EXPECT_EQ(eval_loss(tp1), eval_loss(hf)) << tp1.output;
  // At TP2 both have 256 rows (the padding logits enter the softmax, as in Megatron, so the
  // loss depends on the padded size).
  const std::string tp2 = " --tensor-model-parallel-size 2";
  const CommandResult hf2 = run_command(launch(2) + model + tp2 + " --load " MS_SOURCE_DIR "/tests/golden/llama_tiny");
  const CommandResult mg2 = run_command(launch(2) + model + tp2 + megatron);
  ASSERT_EQ(mg2.exit_code, 0) << mg2.output;
  EXPECT_NEAR(std::stod(eval_loss(mg2)), std::stod(eval_loss(hf2)), 1e-5 * std::stod(eval_loss(hf2)));
}

TEST(Checkpoint, EmptyLoadDirectoryStartsFromRandomAsMegatron) {
  ScratchDir scratch;
  const std::string dir = scratch.file("none");
  CommandResult r = train(1, "", " --train-iters 3 --load " + dir + " --save " + dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("will not load any checkpoints and will start from random"), std::string::npos);
  r = train(1, "", " --train-iters 3 --load " + scratch.file("other") + " --exit-on-missing-checkpoint");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("holds no checkpoint"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace mindspeed::testing
