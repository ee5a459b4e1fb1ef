// End-to-end runs of pretrain_gpt (launched as a separate program, alone or under mpirun):
// the lm loss on mock data falls, single-process and on 4 ranks (TP2 x DP2 with sequence
// parallelism, the distributed optimizer and overlapped gradient reduction); Megatron's log
// lines are there; bad command lines stop every rank with exit code 2 and the reason; a
// rank failing mid-run ends the whole job quickly with its rank and reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "run_command.h"
#include "scratch_dir.h"

namespace {

using Result = mindspeed::testing::CommandResult;
Result run(const std::string& command) { return mindspeed::testing::run_command(command); }

const std::string kBin = MS_PRETRAIN_GPT;
// pretrain_gpt with PretrainHooks that fail a rank on request (pretrain_gpt_with_faults.cpp).
const std::string kFaultyBin = MS_PRETRAIN_GPT_WITH_FAULTS;
const std::string kMpirun = mindspeed::testing::mpirun_prefix(MS_MPIRUN);
const std::string kTiny =
    " --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64"
    " --micro-batch-size 4 --global-batch-size 16 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine"
    " --lr-warmup-iters 5 --mock-data --tokenizer-type NullTokenizer --vocab-size 4096 --use-flash-attn"
    " --seed 1234";

std::vector<double> logged_losses(const std::string& out) {
  std::vector<double> losses;
  const std::regex re(R"(\| lm loss: ([0-9.]+E[+-][0-9]+) \|)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    losses.push_back(std::stod((*it)[1]));
  return losses;
}

// The logged losses, validation losses and grad norms as printed (for bitwise comparisons).
std::vector<std::string> logged_numbers(const std::string& out) {
  std::vector<std::string> found;
  const std::regex re(R"((lm loss|lm loss value|grad norm): [0-9.E+-]+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    found.push_back((*it)[0]);
  return found;
}

void expect_loss_falls(const Result& r) {
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto losses = logged_losses(r.output);
  ASSERT_GE(losses.size(), 4u) << r.output;
  const double tail = (losses[losses.size() - 1] + losses[losses.size() - 2]) / 2;
  EXPECT_LT(tail, 0.8 * losses.front()) << r.output;
  EXPECT_NE(r.output.find("validation loss at iteration 30 | lm loss value:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("throughput per GPU (TFLOP/s/GPU):"), std::string::npos);
  EXPECT_NE(r.output.find("memory (MiB) | params"), std::string::npos);
}

TEST(EndToEnd, MockDataLossFallsOnOneProcess) {
  expect_loss_falls(run(kBin + kTiny + " --train-iters 60 --log-interval 10 --eval-interval 30 --eval-iters 2"
                        " --attention-dropout 0 --hidden-dropout 0"));
}

TEST(EndToEnd, MockDataLossFallsOnFourRanksTp2Dp2) {
  const Result r = run(kMpirun + " -np 4 " + kBin + kTiny +
                       " --train-iters 60 --log-interval 10 --eval-interval 30 --eval-iters 2"
                       " --attention-dropout 0 --hidden-dropout 0"
                       " --tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer"
                       " --overlap-grad-reduce --overlap-param-gather");
  expect_loss_falls(r);
  EXPECT_NE(r.output.find("world size 4 (tp 2, pp 1, cp 1, dp 2)"), std::string::npos) << r.output;
}

TEST(EndToEnd, MockDataLossFallsWithPipelineParallelism) {
  const Result r = run(kMpirun + " -np 4 " + kBin + kTiny +
                       " --train-iters 60 --log-interval 10 --eval-interval 30 --eval-iters 2"
                       " --attention-dropout 0 --hidden-dropout 0 --global-batch-size 32"
                       " --pipeline-model-parallel-size 2 --use-distributed-optimizer");
  expect_loss_falls(r);
  EXPECT_NE(r.output.find("world size 4 (tp 1, pp 2, cp 1, dp 2)"), std::string::npos) << r.output;
}

// Context parallelism through the real program: CP2 (ring, overlapped transfers) x DP2 and
// hybrid CP4 (Ulysses 2 x ring 2) log the losses of the plain data-parallel run on the same
// global batches, and the loss falls.
TEST(EndToEnd, ContextParallelRunsLogTheLossesOfThePlainRun) {
  const std::string args = kTiny + " --train-iters 30 --log-interval 5 --eval-interval 30 --eval-iters 2"
                                   " --attention-dropout 0 --hidden-dropout 0";
  const Result plain = run(kMpirun + " -np 2 " + kBin + args);
  const Result ring = run(kMpirun + " -np 4 " + kBin + args +
                          " --context-parallel-size 2 --context-parallel-algo megatron_cp_algo"
                          " --use-cp-send-recv-overlap --use-distributed-optimizer");
  const Result hybrid = run(kMpirun + " -np 4 " + kBin + args +
                            " --context-parallel-size 4 --context-parallel-algo hybrid_cp_algo --ulysses-degree-in-cp 2"
                            " --global-batch-size 16");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(ring.exit_code, 0) << ring.output;
  ASSERT_EQ(hybrid.exit_code, 0) << hybrid.output;
  EXPECT_NE(ring.output.find("world size 4 (tp 1, pp 1, cp 2, dp 2)"), std::string::npos) << ring.output;
  const auto want = logged_losses(plain.output);
  ASSERT_EQ(want.size(), 6u) << plain.output;
  EXPECT_LT(want.back(), 0.9 * want.front());
  for (const Result* r : {&ring, &hybrid}) {
    const auto got = logged_losses(r->output);
    ASSERT_EQ(got.size(), want.size()) << r->output;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-5 * want[i]) << "log line " << i;
  }
}

// MindSpeed's --unaligned-linear acceptance through pretrain_gpt: 25 heads at TP4 (7/6/6/6) and
// s = 1026 at TP4 with sequence parallelism (257/257/256/256 positions) log the losses of one rank
// within 1e-5 (dropout on), and CoC and the MindSpeed constraints refuse the combination by name.
TEST(EndToEnd, UnalignedLinearRunsLogTheLossesOfOneRank) {
  // --vocab-size 4095 (+ EOD): the same padded vocabulary at TP1 and TP4.
  const std::string heads25 =
      kTiny +
      " --vocab-size 4095 --num-attention-heads 25 --kv-channels 4 --ffn-hidden-size 130"
      " --train-iters 3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0 --unaligned-linear";
  const std::string s1026 =
      kTiny +
      " --vocab-size 4095 --num-attention-heads 5 --kv-channels 16 --ffn-hidden-size 130"
      " --seq-length 1026 --max-position-embeddings 1026 --micro-batch-size 1"
      " --global-batch-size 2 --train-iters 3 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0"
      " --unaligned-linear";
  for (const std::string& args : {heads25, s1026}) {
    const Result one = run(kBin + args);
    const Result tp4 = run(kMpirun + " -np 4 " + kBin + args +
                           " --tensor-model-parallel-size 4 --sequence-parallel");
    ASSERT_EQ(one.exit_code, 0) << one.output;
    ASSERT_EQ(tp4.exit_code, 0) << tp4.output;
    const auto want = logged_losses(one.output), got = logged_losses(tp4.output);
    ASSERT_EQ(want.size(), 3u) << one.output;
    ASSERT_EQ(got.size(), want.size()) << tp4.output;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-5 * want[i]) << "iteration " << i + 1;
  }
  const Result coc = run(kMpirun + " -np 4 " + kBin + heads25 +
                         " --tensor-model-parallel-size 4 --use-ascend-coc"
                         " --coc-parallel-num 2");
  EXPECT_EQ(coc.exit_code, 2) << coc.output;
  EXPECT_NE(coc.output.find("--unaligned-linear does not work with --use-ascend-coc"),
            std::string::npos)
      << coc.output;
}

// Activation recompute through the flags of a launch script: the logged losses and gradient
// norms are the plain run's to the last printed digit (dropout on), for Megatron's full
// recompute with distributed saved activations, for selective + MindSpeed's
// activation-function recompute, and for MindSpeed's --swap-attention (the memory line then
// reports the swapped bytes).
TEST(EndToEnd, RecomputeRunsLogTheBitsOfThePlainRun) {
  const std::string args = kTiny + " --train-iters 10 --log-interval 5 --eval-interval 10 --eval-iters 1"
                                   " --tensor-model-parallel-size 2";
  const Result plain = run(kMpirun + " -np 2 " + kBin + args);
  const Result full = run(kMpirun + " -np 2 " + kBin + args +
                          " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
                          " --distribute-saved-activations");
  const Result light = run(kMpirun + " -np 2 " + kBin + args +
                           " --recompute-activations --recompute-modules core_attn layernorm"
                           " --recompute-activation-function");
  const Result swap = run(kMpirun + " -np 2 " + kBin + args + " --swap-attention --recompute-num-layers 1");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto want = logged_numbers(plain.output);
  ASSERT_GE(want.size(), 5u) << plain.output;  // 2 x (loss, grad norm) + the validation losses
  for (const Result* r : {&full, &light, &swap}) {
    ASSERT_EQ(r->exit_code, 0) << r->output;
    EXPECT_EQ(logged_numbers(r->output), want) << r->output;
  }
  EXPECT_NE(swap.output.find("swapped (current/peak MiB): activations"), std::string::npos) << swap.output;
}

// The optimizer's memory features through the flags, bf16 with the distributed optimizer over
// two data-parallel ranks: --reuse-fp32-param (and its resume from a checkpoint),
// --swap-optimizer and fused_ema_adamw log the bits of the plain run; --o2-optimizer's bf16
// moments and --o2-gradient's bf16 gradient buffer (with the reduction overlapped) stay within
// 1% of its losses.
TEST(EndToEnd, OptimizerMemoryFeaturesLogTheBitsOfThePlainRun) {
  const mindspeed::testing::ScratchDir scratch("e2e_optimizer_memory");
  const std::string dir = scratch.file("ckpt");
  const std::string args = kTiny + " --train-iters 10 --log-interval 5 --eval-interval 10 --eval-iters 1"
                                   " --bf16 --use-distributed-optimizer";
  const Result plain = run(kMpirun + " -np 2 " + kBin + args);
  const Result reuse = run(kMpirun + " -np 2 " + kBin + args + " --reuse-fp32-param --save " + dir + " --save-interval 5");
  const Result resumed = run(kMpirun + " -np 2 " + kBin + args + " --reuse-fp32-param --load " + dir + " --ckpt-step 5");
  const Result swap = run(kMpirun + " -np 2 " + kBin + args + " --swap-optimizer --swap-optimizer-times 3");
  const Result ema = run(kMpirun + " -np 2 " + kBin + args + " --optimizer-selection fused_ema_adamw --ema-decay 0.9");
  const Result o2 = run(kMpirun + " -np 2 " + kBin + args + " --o2-optimizer");
  const Result o2_grad = run(kMpirun + " -np 2 " + kBin + args +
                             " --no-gradient-accumulation-fusion --o2-gradient --overlap-grad-reduce");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto want = logged_numbers(plain.output);
  ASSERT_GE(want.size(), 5u) << plain.output;
  for (const Result* r : {&reuse, &swap, &ema, &o2, &o2_grad, &resumed}) ASSERT_EQ(r->exit_code, 0) << r->output;
  for (const Result* r : {&reuse, &swap, &ema}) EXPECT_EQ(logged_numbers(r->output), want) << r->output;
  EXPECT_NE(swap.output.find("swapped (current/peak MiB): optimizer"), std::string::npos) << swap.output;
  // The resumed run logs iteration 10's numbers exactly.
  const auto tail = logged_numbers(resumed.output);
  ASSERT_GE(tail.size(), 2u) << resumed.output;
  EXPECT_EQ(tail[0], want[2]) << resumed.output;
  EXPECT_EQ(tail[1], want[3]) << resumed.output;
  const auto plain_losses = logged_losses(plain.output);
  for (const Result* r : {&o2, &o2_grad}) {
    const auto losses = logged_losses(r->output);
    ASSERT_EQ(losses.size(), plain_losses.size()) << r->output;
    for (size_t i = 0; i < plain_losses.size(); ++i) EXPECT_NEAR(losses[i], plain_losses[i], 0.01 * plain_losses[i]);
  }
}

// Megatron's custom FSDP through the flags: ZeRO-3 (optim_grads_params) logs the losses of the
// distributed-optimizer run, saves a checkpoint from its parameter shards, and both ZeRO-3 and
// plain DDP resume from it to the same numbers.
TEST(EndToEnd, FsdpRunsLogTheLossesOfDdpAndResume) {
  const mindspeed::testing::ScratchDir scratch("e2e_fsdp");
  const std::string dir = scratch.file("ckpt");
  const std::string args = kTiny + " --train-iters 10 --log-interval 5 --eval-interval 10 --eval-iters 1"
                                   " --attention-dropout 0 --hidden-dropout 0 --use-distributed-optimizer";
  const std::string zero3 =
      " --use-custom-fsdp --data-parallel-sharding-strategy optim_grads_params --no-gradient-accumulation-fusion";
  const Result ddp = run(kMpirun + " -np 2 " + kBin + args);
  const Result fsdp = run(kMpirun + " -np 2 " + kBin + args + zero3 + " --save " + dir + " --save-interval 5");
  const Result resumed = run(kMpirun + " -np 2 " + kBin + args + zero3 + " --load " + dir + " --ckpt-step 5");
  const Result ddp_resumed = run(kMpirun + " -np 2 " + kBin + args + " --load " + dir + " --ckpt-step 5");
  for (const Result* r : {&ddp, &fsdp, &resumed, &ddp_resumed}) ASSERT_EQ(r->exit_code, 0) << r->output;
  const auto want = logged_losses(ddp.output);
  ASSERT_EQ(want.size(), 2u) << ddp.output;
  const auto got = logged_losses(fsdp.output);
  ASSERT_EQ(got.size(), 2u) << fsdp.output;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * want[i]);
  for (const Result* r : {&resumed, &ddp_resumed}) {
    const auto tail = logged_losses(r->output);
    ASSERT_EQ(tail.size(), 1u) << r->output;
    EXPECT_NEAR(tail[0], want[1], 1e-5 * want[1]) << r->output;
  }
}

// A Mixtral-style MoE trains under pretrain_gpt with its aux and z losses in the iteration
// line (Megatron's fields), and expert parallelism (alltoall with grouped GEMM and the
// distributed optimizer; allgather with TP x SP and expert-TP 1) logs the losses of the
// plain data-parallel run.
TEST(EndToEnd, MixtureOfExpertsTrainsAndLogsItsLosses) {
  const std::string args = kTiny + " --train-iters 30 --log-interval 5 --eval-interval 30 --eval-iters 2"
                                   " --attention-dropout 0 --hidden-dropout 0 --swiglu --normalization RMSNorm"
                                   " --disable-bias-linear --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 96"
                                   " --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3"
                                   " --vocab-size 4095";  // 4096 with EOD: the same padding at TP 1 and 2
  const Result plain = run(kMpirun + " -np 2 " + kBin + args);
  const Result alltoall = run(kMpirun + " -np 4 " + kBin + args +
                              " --expert-model-parallel-size 4 --moe-token-dispatcher-type alltoall --moe-grouped-gemm"
                              " --moe-permute-fusion --use-distributed-optimizer --global-batch-size 16");
  const Result allgather = run(kMpirun + " -np 4 " + kBin + args +
                               " --tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2"
                               " --expert-tensor-parallel-size 1 --moe-token-dispatcher-type allgather");
  for (const Result* r : {&plain, &alltoall, &allgather}) {
    ASSERT_EQ(r->exit_code, 0) << r->output;
    EXPECT_TRUE(std::regex_search(r->output, std::regex(R"(\| lm loss: [0-9.E+-]+ \| load_balancing_loss: [0-9.E+-]+ \| z_loss: [0-9.E+-]+ \| loss scale:)")))
        << r->output;
  }
  const auto want = logged_losses(plain.output);
  ASSERT_EQ(want.size(), 6u) << plain.output;
  EXPECT_LT(want.back(), 0.9 * want.front());
  for (const Result* r : {&alltoall, &allgather}) {
    const auto got = logged_losses(r->output);
    ASSERT_EQ(got.size(), want.size()) << r->output;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-5 * want[i]) << "log line " << i;
  }
}

// Megatron's sample-based training with a batch-size ramp-up, through the flags, on two
// data-parallel ranks: the iteration count, the global batch and the consumed samples of every
// logged iteration equal Megatron's calculator for these arguments (the "even_increments" case of
// tests/training/reference/rampup_vectors.txt), the sample-based warmup runs, and the loss falls.
TEST(EndToEnd, SampleBasedTrainingRampsUpTheBatchAsMegatron) {
  const std::string args =
      " --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64"
      " --micro-batch-size 1 --global-batch-size 12 --rampup-batch-size 4 2 40 --train-samples 100"
      " --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-samples 8 --mock-data"
      " --tokenizer-type NullTokenizer --vocab-size 4096 --use-flash-attn --seed 1234 --log-interval 1"
      " --eval-interval 100 --eval-iters 1";
  const Result r = run(kMpirun + " -np 2 " + kBin + args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("setting training iterations to 11"), std::string::npos) << r.output;
  // Megatron's (consumed samples before the iteration, global batch) for each of the 11.
  const std::vector<std::pair<int64_t, int64_t>> want = {{0, 4},   {4, 4},   {8, 4},   {12, 6},  {18, 6}, {24, 8},
                                                         {32, 10}, {42, 12}, {54, 12}, {66, 12}, {78, 12}};
  const std::regex re(R"(iteration\s+(\d+)/\s*11 \| consumed samples:\s+(\d+) \|.*?global batch size:\s+(\d+) \|)");
  std::vector<std::pair<int64_t, int64_t>> got;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), re); it != std::sregex_iterator(); ++it) {
    const int64_t batch = std::stoll((*it)[3]);
    got.emplace_back(std::stoll((*it)[2]) - batch, batch);  // the log counts this iteration's batch in
  }
  EXPECT_EQ(got, want) << r.output;
  const auto losses = logged_losses(r.output);
  ASSERT_EQ(losses.size(), 11u) << r.output;
  EXPECT_LT(losses.back(), losses.front()) << r.output;
}

// One iteration line's loss-scaler fields (log interval 1).
struct ScalerLine {
  double loss_scale = 0.0, learning_rate = 0.0;
  int skipped = 0, nan = 0;
  bool has_grad_norm = false;
};

std::vector<ScalerLine> scaler_lines(const std::string& out) {
  std::vector<ScalerLine> lines;
  const std::regex re(R"(learning rate: ([0-9.E+-]+) \|.*? loss scale: ([0-9.]+) \|( grad norm: [0-9.]+ \|)?.*?)"
                      R"(number of skipped iterations: +([0-9]+) \| number of nan iterations: +([0-9]+) \|)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it) {
    lines.push_back({std::stod((*it)[2]), std::stod((*it)[1]), std::stoi((*it)[4]), std::stoi((*it)[5]),
                     (*it)[3].matched});
  }
  return lines;
}

// --fp16 on two data-parallel ranks, starting at a loss scale that overflows: each overflowing
// iteration is skipped (counted in the log line, no grad norm, the learning rate held), the scale
// follows Megatron's DynamicGradScaler step by step (halved once the hysteresis is used up,
// doubled after --loss-scale-window good iterations), and the loss falls as with fp32.
TEST(EndToEnd, Fp16DynamicLossScalingSkipsHalvesAndGrowsAsMegatron) {
  const double initial = 4194304.0;  // 2^22: overflows in this model's first iterations
  const int window = 4, hysteresis = 2, iters = 40;
  const Result r = run(kMpirun + " -np 2 " + kBin + kTiny + " --fp16 --initial-loss-scale 4194304 --loss-scale-window " +
                       std::to_string(window) + " --hysteresis " + std::to_string(hysteresis) + " --train-iters " +
                       std::to_string(iters) + " --log-interval 1 --eval-interval 20 --eval-iters 1"
                       " --attention-dropout 0 --hidden-dropout 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("WARNING: Setting args.check_for_nan_in_loss_and_grad to False since dynamic loss "
                          "scaling is being used"),
            std::string::npos);
  const std::vector<ScalerLine> lines = scaler_lines(r.output);
  ASSERT_EQ(lines.size(), static_cast<size_t>(iters)) << r.output;
  // Megatron's DynamicGradScaler.update, replayed on the logged skips.
  double scale = initial;
  int growth_tracker = 0, hysteresis_tracker = hysteresis, halvings = 0, growths = 0, skips = 0;
  double lr_before = 0.0;
  for (int i = 0; i < iters; ++i) {
    const ScalerLine& l = lines[static_cast<size_t>(i)];
    ASSERT_LE(l.skipped, 1);
    if (l.skipped) {
      ++skips;
      growth_tracker = 0;
      if (--hysteresis_tracker <= 0) {
        scale = std::max(scale * 0.5, 1.0);
        ++halvings;
      }
      EXPECT_FALSE(l.has_grad_norm) << "iteration " << i + 1 << ": a skipped step has no grad norm";
      EXPECT_EQ(l.learning_rate, lr_before) << "iteration " << i + 1 << ": a skipped step holds the learning rate";
    } else {
      EXPECT_TRUE(l.has_grad_norm) << "iteration " << i + 1;
      if (++growth_tracker == window) {
        growth_tracker = 0;
        hysteresis_tracker = hysteresis;
        scale *= 2.0;
        ++growths;
      }
    }
    EXPECT_LE(l.nan, l.skipped);
    ASSERT_EQ(l.loss_scale, scale) << "iteration " << i + 1 << "\n" << r.output;
    lr_before = l.learning_rate;
  }
  EXPECT_GE(skips, 2) << r.output;
  EXPECT_GE(halvings, 1) << r.output;
  EXPECT_GE(growths, 1) << r.output;
  const auto losses = logged_losses(r.output);
  double first = 0.0;
  for (size_t i = 0; i < lines.size() && first == 0.0; ++i) first = lines[i].skipped ? 0.0 : losses[i];
  EXPECT_LT(losses.back(), 0.9 * first) << r.output;
}

// Megatron's implementation selectors and logging flags through pretrain_gpt: the --no-*-fusion
// flags run the unfused reference kernels (losses within 1e-4 of the fused run: the same math,
// summed in another order), --attention-backend unfused the materialised softmax, and
// --log-params-norm / --log-num-zeros-in-grad / --distributed-backend / --ai-framework show up
// in the log as Megatron's fields and start-up notes.
TEST(EndToEnd, MegatronSelectorsAndLoggingFlags) {
  const std::string args = kTiny + " --train-iters 6 --log-interval 1 --eval-iters 0";
  const Result fused = run(kBin + args);
  const Result unfused = run(kBin + args +
                             " --no-bias-gelu-fusion --no-bias-dropout-fusion --no-persist-layer-norm"
                             " --no-masked-softmax-fusion --log-params-norm --log-num-zeros-in-grad"
                             " --distributed-backend nccl --ai-framework pytorch --num-workers 4 --timing-log-level 0");
  std::string no_flash = args;
  no_flash.replace(no_flash.find(" --use-flash-attn"), std::string(" --use-flash-attn").size(), "");
  const Result core = run(kBin + no_flash);
  const Result backend = run(kBin + no_flash + " --attention-backend unfused --no-masked-softmax-fusion");
  for (const Result* r : {&fused, &unfused, &core, &backend}) ASSERT_EQ(r->exit_code, 0) << r->output;
  const auto want = logged_losses(fused.output);
  ASSERT_EQ(want.size(), 6u);
  for (const auto& [got, reference] : {std::pair{logged_losses(unfused.output), want},
                                       std::pair{logged_losses(backend.output), logged_losses(core.output)}}) {
    ASSERT_EQ(got.size(), reference.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], reference[i], 1e-4 * reference[i]) << "iteration " << i + 1;
  }
  EXPECT_NE(unfused.output.find("unfused reference kernels (--no-*-fusion): gelu, bias-dropout-add, masked softmax "
                                "(core attention), layer norm"),
            std::string::npos)
      << unfused.output;
  EXPECT_NE(backend.output.find("attention: core (unfused)"), std::string::npos) << backend.output;
  EXPECT_TRUE(std::regex_search(unfused.output, std::regex(R"(grad norm: [0-9.]+ \| num zeros: [0-9]+\.0 \| params norm: [0-9.]+ \|)")))
      << unfused.output;
  EXPECT_NE(unfused.output.find("--distributed-backend nccl: MPI carries every collective"), std::string::npos);
  EXPECT_NE(unfused.output.find("--ai-framework pytorch"), std::string::npos);
  EXPECT_EQ(fused.output.find("params norm"), std::string::npos);
}

TEST(EndToEnd, UnimplementedFlagStopsEveryRank) {
  const Result r = run(kMpirun + " -np 2 " + kBin + kTiny + " --train-iters 2 --use-torch-fsdp2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--use-torch-fsdp2 is a Megatron-LM flag"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 30.0);
}

TEST(EndToEnd, BadParallelSizeIsNamed) {
  const Result r = run(kMpirun + " -np 2 " + kBin + kTiny + " --train-iters 2 --tensor-model-parallel-size 3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("must be divisible by --tensor-model-parallel-size (3)"), std::string::npos) << r.output;
}

TEST(EndToEnd, FailingRankAbortsTheWholeJobQuickly) {
  const Result r = run("MS_FAULT_INJECT=1:3 " + kMpirun + " -x MS_FAULT_INJECT -np 2 " + kFaultyBin + kTiny +
                       " --train-iters 50 --log-interval 1 --tensor-model-parallel-size 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("[rank 1] FATAL: fault injected by MS_FAULT_INJECT at iteration 3"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("iteration        4/"), std::string::npos) << "the job went on after the failure";
  EXPECT_LT(r.seconds, 30.0) << "the job must not hang";
}

// A stage failing in the middle of a pipeline schedule (its neighbours blocked waiting for
// its activations or gradients) still ends the whole job within seconds.
TEST(EndToEnd, StageFailingMidScheduleEndsTheJob) {
  const std::string pipeline = " --train-iters 50 --log-interval 1 --num-layers 4 --global-batch-size 32"
                               " --pipeline-model-parallel-size 2";
  for (const std::string& schedule : {std::string(" --num-virtual-stages-per-pipeline-rank 2"),
                                      std::string(" --schedules-method dualpipev --dualpipev-dw-detach"
                                                  " --untie-embeddings-and-output-weights")}) {
    const Result r = run("MS_FAULT_INJECT=1:3:5 " + kMpirun + " -x MS_FAULT_INJECT -np 2 " + kFaultyBin + kTiny +
                         pipeline + schedule);
    EXPECT_NE(r.exit_code, 0) << schedule;
    EXPECT_NE(r.output.find("[rank 1] FATAL: fault injected by MS_FAULT_INJECT at iteration 3, forward step 5"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("iteration        2/"), std::string::npos) << "the schedule ran before the fault";
    EXPECT_EQ(r.output.find("iteration        3/"), std::string::npos) << "the job went on after the failure";
    EXPECT_LT(r.seconds, 30.0) << "the job must not hang";
  }
}

// The interleaved (with shapes sent ahead and list p2p) and DualPipeV schedules train the
// main job (loss falls, evaluation runs).
TEST(EndToEnd, MockDataLossFallsWithInterleavedAndDualPipeV) {
  const std::string common = " --train-iters 60 --log-interval 10 --eval-interval 30 --eval-iters 2"
                             " --attention-dropout 0 --hidden-dropout 0 --num-layers 4 --global-batch-size 32"
                             " --pipeline-model-parallel-size 2";
  Result r = run(kMpirun + " -np 2 " + kBin + kTiny + common +
                 " --num-layers-per-virtual-pipeline-stage 1 --variable-seq-lengths"
                 " --use-multiparameter-pipeline-model-parallel");
  expect_loss_falls(r);
  EXPECT_NE(r.output.find("> pipeline: interleaved 1F1B, 2 chunk(s) per rank, 8 micro-batches; stage layers@rank: "
                          "0-0@0, 1-1@1, 2-2@0, 3-3@1"),
            std::string::npos)
      << r.output;
  r = run(kMpirun + " -np 2 " + kBin + kTiny + common +
          " --schedules-method dualpipev --dualpipev-dw-detach --untie-embeddings-and-output-weights");
  expect_loss_falls(r);
  EXPECT_NE(r.output.find("> pipeline: DualPipeV, 2 chunk(s) per rank, 8 micro-batches; stage layers@rank: "
                          "0-0@0, 1-1@1, 2-2@1, 3-3@0"),
            std::string::npos)
      << r.output;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The exit-code contract (pretrain_gpt --help): 2 for usage/validation errors, found before
// anything is built and printed once; 1 for a runtime failure the ranks agreed on, printed
// once as "[rank R] FATAL: ...", without an MPI_Abort banner.
TEST(EndToEnd, MissingDatasetIsAUsageErrorPrintedOnce) {
  std::string tiny = kTiny;
  tiny.replace(tiny.find(" --mock-data"), std::string(" --mock-data").size(), "");
  const Result r = run(kMpirun + " -np 2 " + kBin + tiny + " --train-iters 10 --data-path /nonexistent/corpus_doc");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("'/nonexistent/corpus_doc.idx' does not exist"), std::string::npos) << r.output;
  EXPECT_EQ(count(r.output, "pretrain_gpt: error:"), 1u) << r.output;
}

TEST(EndToEnd, NonFiniteLossStopsEveryRankWithOneDiagnosis) {
  const Result r = run(kMpirun + " -np 2 " + kBin + kTiny + " --train-iters 20 --log-interval 1 --lr 1e30 --clip-grad 0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(count(r.output, "FATAL"), 1u) << r.output;
  EXPECT_NE(r.output.find("the loss or gradient is not finite"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the first parameter with a non-finite gradient on rank"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("MPI_ABORT"), std::string::npos) << r.output;
  // Off: the non-finite updates are skipped and the run finishes.
  const Result off = run(kMpirun + " -np 2 " + kBin + kTiny +
                         " --train-iters 8 --log-interval 1 --lr 1e30 --clip-grad 0 --no-check-for-nan-in-loss-and-grad");
  EXPECT_EQ(off.exit_code, 0) << off.output;
}

// --load from a Hugging Face directory (the GPT-2 golden fixture) and --data-path on a dataset
// made by preprocess_data with the NullTokenizer: trains, and a flag that contradicts
// config.json is refused with both values named.
// DIR/ids_text_document: 60 documents of ids below 99 (NullTokenizer --vocab-size 99, with EOD),
// made by preprocess_data; the golden fixtures' vocabulary is 100.
void make_id_dataset(const std::string& dir) {
  ASSERT_EQ(run("mkdir -p " + dir).exit_code, 0);
  FILE* f = std::fopen((dir + "/ids.jsonl").c_str(), "w");
  ASSERT_NE(f, nullptr);
  for (int d = 0; d < 60; ++d) {
    std::string text;
    for (int t = 0; t < 20 + d % 17; ++t)
      text += (t ? " " : "") + std::to_string((d * 7 + t * 3) % 99);
    std::fprintf(f, "{\"text\": \"%s\"}\n", text.c_str());
  }
  std::fclose(f);
  const Result pre = run(std::string(MS_PREPROCESS_DATA) + " --input " + dir + "/ids.jsonl --output-prefix " + dir +
                         "/ids --tokenizer-type NullTokenizer --vocab-size 99 --append-eod");
  ASSERT_EQ(pre.exit_code, 0) << pre.output;
}

TEST(EndToEnd, LoadsAHuggingFaceCheckpointAndTrainsOnAPreprocessedDataset) {
  const std::string dir = "/tmp/ms_e2e_load_" + std::to_string(::getpid());
  ASSERT_NO_FATAL_FAILURE(make_id_dataset(dir));
  const std::string model = " --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 16"
                            " --max-position-embeddings 32 --openai-gelu --micro-batch-size 2 --global-batch-size 4"
                            " --lr 1e-3 --train-iters 8 --log-interval 2 --eval-iters 1 --eval-interval 4"
                            " --tokenizer-type NullTokenizer --vocab-size 99 --load " MS_SOURCE_DIR "/tests/golden/gpt2_tiny"
                            " --data-path " + dir + "/ids_text_document --split 90,10,0";
  const Result r = run(kBin + model);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("loaded Hugging Face checkpoint"), std::string::npos) << r.output;
  EXPECT_EQ(logged_losses(r.output).size(), 4u) << r.output;
  // The same checkpoint over two pipeline stages (the last stage's output layer is the tied
  // copy of the word embedding): the same losses as one process, to the printed digits.
  const Result pp = run(kMpirun + " -np 2 " + kBin + model + " --pipeline-model-parallel-size 2");
  EXPECT_EQ(pp.exit_code, 0) << pp.output;
  EXPECT_EQ(logged_losses(pp.output), logged_losses(r.output)) << pp.output;
  const Result bad = run(kBin + model + " --num-layers 3");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--num-layers is 3 but config.json says 2"), std::string::npos) << bad.output;
  run("rm -rf " + dir);
}

// A Hugging Face Mixtral-style checkpoint (the golden fixture: 4 experts, top-2) under every
// expert layout: each rank reads only the experts it holds (named by their global index), and
// EP2 alltoall with grouped GEMM, EP4, EP2 x TP2 with expert-TP 1 and 2, MindSpeed's
// TP-extend-EP and EP2 x PP2 log the losses of the one-process run on the same checkpoint.
TEST(EndToEnd, HuggingFaceMoeCheckpointLoadsUnderEveryExpertLayout) {
  const mindspeed::testing::ScratchDir scratch("e2e_hf_moe");
  ASSERT_NO_FATAL_FAILURE(make_id_dataset(scratch.file("data")));
  const std::string model =
      " --num-layers 2 --hidden-size 32 --ffn-hidden-size 48 --num-attention-heads 4"
      " --group-query-attention --num-query-groups 2 --seq-length 16 --max-position-embeddings 32"
      " --normalization RMSNorm --norm-epsilon 1e-6 --swiglu --position-embedding-type rope"
      " --untie-embeddings-and-output-weights --disable-bias-linear --num-experts 4"
      " --moe-router-topk 2 --moe-aux-loss-coeff 1e-2 --micro-batch-size 2 --global-batch-size 8"
      " --lr 1e-3 --train-iters 6 --log-interval 2 --eval-iters 0 --split 100,0,0"
      " --data-path " +
      scratch.file("data/ids_text_document") +
      " --tokenizer-type NullTokenizer --vocab-size 99 --make-vocab-size-divisible-by 64"
      " --attention-dropout 0 --hidden-dropout 0 --seed 7"
      " --load " MS_SOURCE_DIR "/tests/golden/mixtral_tiny";
  const Result single = run(kBin + model);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_NE(single.output.find("loaded Hugging Face checkpoint"), std::string::npos)
      << single.output;
  const auto want = logged_losses(single.output);
  ASSERT_EQ(want.size(), 3u) << single.output;
  const std::vector<std::pair<int, std::string>> layouts = {
      {2,
       " --expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall --moe-grouped-gemm"},
      {4, " --expert-model-parallel-size 4 --moe-token-dispatcher-type alltoall"},
      {4,
       " --tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2"
       " --expert-tensor-parallel-size 1 --moe-token-dispatcher-type allgather"},
      {4,
       " --tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2"
       " --moe-token-dispatcher-type alltoall --moe-grouped-gemm"},
      {4,
       " --tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2 "
       "--moe-tp-extend-ep"
       " --moe-token-dispatcher-type alltoall_seq --moe-grouped-gemm --moe-permutation-async-comm"},
      {4,
       " --pipeline-model-parallel-size 2 --expert-model-parallel-size 2 "
       "--moe-token-dispatcher-type alltoall"},
  };
  for (const auto& [np, layout] : layouts) {
    const Result r = run(kMpirun + " -np " + std::to_string(np) + " " + kBin + model + layout);
    ASSERT_EQ(r.exit_code, 0) << layout << "\n" << r.output;
    EXPECT_EQ(r.output.find("Internal"), std::string::npos) << r.output;
    const auto got = logged_losses(r.output);
    ASSERT_EQ(got.size(), want.size()) << layout << "\n" << r.output;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 2e-5 * want[i]) << layout << " log line " << i;
  }
}

// The fenced device (--device cpu-fenced: the CPU kernels over memory that host code cannot
// touch outside a kernel, and kernels refusing host memory) runs the engine as a GPU would, with
// every collective staged through host memory: each layout logs the bits of its CPU run (dropout
// on), so the host/device boundary the CUDA backend needs holds for these paths -- the GPT and
// LLaMA families, bf16 and fp16, TP with SP, DP with the distributed optimizer and overlaps, 1F1B
// and interleaved pipelines, TP x PP, a checkpoint saved and resumed on the device, EOD resets.
TEST(EndToEnd, FencedDeviceRunsLogTheBitsOfTheCpuRuns) {
  const mindspeed::testing::ScratchDir scratch("e2e_fenced");
  const std::string llama = " --swiglu --normalization RMSNorm --position-embedding-type rope"
                            " --untie-embeddings-and-output-weights --disable-bias-linear --group-query-attention"
                            " --num-query-groups 2";
  const std::string base = kTiny + " --num-layers 4 --global-batch-size 8 --train-iters 4 --lr-warmup-iters 1 --log-interval 1"
                                   " --eval-interval 2 --eval-iters 1";
  const std::vector<std::pair<int, std::string>> layouts = {
      {1, ""},
      {1, llama + " --fp16 --initial-loss-scale 4096 --reset-position-ids --reset-attention-mask --eod-mask-loss"},
      {2, " --tensor-model-parallel-size 2 --sequence-parallel" + llama},
      {2, " --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --bf16"},
      {2, " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"},
      {4, " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --bf16 --use-distributed-optimizer" + llama},
  };
  for (const auto& [np, layout] : layouts) {
    const std::string launch = np == 1 ? kBin : kMpirun + " -np " + std::to_string(np) + " " + kBin;
    const Result cpu = run(launch + base + layout);
    const Result fenced = run(launch + base + layout + " --device cpu-fenced");
    ASSERT_EQ(cpu.exit_code, 0) << layout << "\n" << cpu.output;
    ASSERT_EQ(fenced.exit_code, 0) << layout << "\n" << fenced.output;
    const auto want = logged_numbers(cpu.output);
    ASSERT_GE(want.size(), 8u) << cpu.output;
    EXPECT_EQ(logged_numbers(fenced.output), want) << layout;
  }
  // Saved on the device and resumed there: the bits of the uninterrupted device run.
  const std::string dir = scratch.file("ckpt");
  const std::string args = base + " --bf16 --use-distributed-optimizer --device cpu-fenced";
  const Result straight = run(kBin + args);
  const Result first = run(kBin + args + " --exit-interval 2 --save " + dir);
  const Result resumed = run(kBin + args + " --load " + dir);
  for (const Result* r : {&straight, &first, &resumed}) ASSERT_EQ(r->exit_code, 0) << r->output;
  const auto want = logged_losses(straight.output), got = logged_losses(resumed.output);
  ASSERT_EQ(want.size(), 4u);
  ASSERT_EQ(got.size(), 2u) << resumed.output;
  EXPECT_EQ(got[0], want[2]);
  EXPECT_EQ(got[1], want[3]);
}

// The rest of the engine on the fenced device, each layout logging the bits of its CPU run:
// MoE (expert parallel, all-to-all, grouped GEMM, shared expert, jitter, aux and z losses; the
// routing staged through host memory), context parallelism (ring with EOD resets, hybrid
// Ulysses + ring with GQA; the ring profiled at level1), custom FSDP with full recompute,
// DualPipeV, --swap-attention and --swap-optimizer (the host swap tier), and the gradient
// statistics of the log.
TEST(EndToEnd, FencedDeviceRunsMoECpFsdpDualPipeVAndSwapAsTheCpuDoes) {
  const mindspeed::testing::ScratchDir scratch("e2e_fenced_more");
  const std::string base = kTiny +
                           " --num-layers 4 --global-batch-size 8 --train-iters 3 "
                           "--lr-warmup-iters 1 --log-interval 1 --eval-iters 1";
  const std::vector<std::pair<int, std::string>> layouts = {
      {2,
       " --num-experts 4 --moe-router-topk 2 --expert-model-parallel-size 2 "
       "--moe-token-dispatcher-type alltoall"
       " --moe-grouped-gemm --moe-aux-loss-coeff 0.01 --moe-z-loss-coeff 0.001 "
       "--moe-input-jitter-eps 0.01"
       " --moe-shared-expert-intermediate-size 128 --disable-bias-linear --swiglu --bf16"},
      // Profiled as on a GPU: the kernel wrappers outside the fence (positions, document starts
      // and masks in device memory).
      {2,
       " --context-parallel-size 2 --reset-position-ids --reset-attention-mask --eod-mask-loss "
       "--profile"
       " --profile-level level1 --profile-step-start 1 --profile-step-end 2 --profile-save-path " +
           scratch.file("profile")},
      {4,
       " --context-parallel-size 4 --context-parallel-algo hybrid_cp_algo --ulysses-degree-in-cp 2"
       " --group-query-attention --num-query-groups 2 --position-embedding-type rope"},
      {2,
       " --use-custom-fsdp --data-parallel-sharding-strategy optim_grads_params "
       "--use-distributed-optimizer --bf16"
       " --no-gradient-accumulation-fusion --recompute-granularity full --recompute-method uniform"
       " --recompute-num-layers 2"},
      {2,
       " --pipeline-model-parallel-size 2 --schedules-method dualpipev "
       "--untie-embeddings-and-output-weights"
       " --micro-batch-size 2"},
      {2,
       " --swap-attention --recompute-num-layers 1 --swap-optimizer --use-distributed-optimizer"
       " --log-num-zeros-in-grad --log-params-norm"},
  };
  for (const auto& [np, layout] : layouts) {
    const std::string launch = kMpirun + " -np " + std::to_string(np) + " " + kBin;
    const Result cpu = run(launch + base + layout);
    const Result fenced = run(launch + base + layout + " --device cpu-fenced");
    ASSERT_EQ(cpu.exit_code, 0) << layout << "\n" << cpu.output;
    ASSERT_EQ(fenced.exit_code, 0) << layout << "\n" << fenced.output;
    const auto want = logged_numbers(cpu.output);
    ASSERT_GE(want.size(), 6u) << cpu.output;
    EXPECT_EQ(logged_numbers(fenced.output), want) << layout;
  }
}

TEST(EndToEnd, DryRunPrintsA1024RankLayout) {
  const Result r = run(kBin + " --dry-run-world-size 1024 --tensor-model-parallel-size 8 "
                              "--pipeline-model-parallel-size 4");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("dp (32 groups of 32)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tp (128 groups of 8): [0,1,2,3,4,5,6,7]"), std::string::npos) << r.output;
}

}  // namespace
