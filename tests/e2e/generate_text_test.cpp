// End-to-end runs of tools/generate_text: from a Hugging Face fixture (NullTokenizer ids),
// from the same weights converted to this engine's checkpoint format, from a checkpoint
// pretrain_gpt just saved, with and without the key/value cache, on 1 and 2 ranks (tensor
// parallel), sampled from a seed, on the fenced device as on the CPU; and the refusals (missing
// checkpoint, bad flag values, empty prompt file, pipeline parallelism, no tokenizer) with exit
// code 2 and the flag named.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "run_command.h"
#include "scratch_dir.h"

namespace {

using mindspeed::testing::ScratchDir;
using Result = mindspeed::testing::CommandResult;
Result run(const std::string& command) { return mindspeed::testing::run_command(command); }

const std::string kGenerate = MS_GENERATE_TEXT;
const std::string kMpirun = mindspeed::testing::mpirun_prefix(MS_MPIRUN);
const std::string kGpt2Fixture = std::string(MS_SOURCE_DIR) + "/tests/golden/gpt2_tiny";
// The fixtures have 100 tokens: NullTokenizer ids 0..98, EOD 99.
const std::string kNull = " --tokenizer-type NullTokenizer --vocab-size 99";

// The "generated (...)" lines of a run.
std::string generations(const std::string& out) {
  std::string lines;
  const std::regex re(R"(generated \([0-9]+ tokens, [a-z ]+\): [^\n]*)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    lines += it->str() + "\n";
  return lines;
}

TEST(GenerateText, GreedyFromAHuggingFaceDirectoryWithAndWithoutTheCache) {
  const std::string cmd = kGenerate + " --load " + kGpt2Fixture + kNull +
                          " --prompt '5 17 3 42' --prompt '7 7 7' --out-seq-length 12";
  const Result cached = run(cmd);
  ASSERT_EQ(cached.exit_code, 0) << cached.output;
  EXPECT_NE(cached.output.find("prompt: 5 17 3 42"), std::string::npos) << cached.output;
  const std::string lines = generations(cached.output);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 2) << cached.output;
  const Result recomputed = run(cmd + " --no-kv-cache --use-flash-attn");
  ASSERT_EQ(recomputed.exit_code, 0) << recomputed.output;
  EXPECT_EQ(generations(recomputed.output), lines);
  const Result tp2 = run(kMpirun + " -np 2 " + cmd + " --tensor-model-parallel-size 2");
  ASSERT_EQ(tp2.exit_code, 0) << tp2.output;
  EXPECT_EQ(generations(tp2.output), lines) << "tensor parallel 2 generates what one rank does";
}

// MindSpeed's --unaligned-linear: the GPT-2 fixture's 4 heads and 128 FFN channels over 3 ranks
// (heads 2/1/1, channels 43/43/42), sliced from the Hugging Face files at that layout, generate
// what one rank does, with the key/value cache and without; without the flag the layout is refused.
TEST(GenerateText, UnalignedTensorParallelGeneratesWhatOneRankDoes) {
  const std::string cmd =
      kGenerate + " --load " + kGpt2Fixture + kNull + " --prompt '5 17 3 42' --out-seq-length 12";
  const Result one = run(cmd);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  for (const std::string cache : {"", " --no-kv-cache --use-flash-attn"}) {
    const Result tp3 = run(kMpirun + " -np 3 " + cmd + cache +
                           " --tensor-model-parallel-size 3 --unaligned-linear");
    ASSERT_EQ(tp3.exit_code, 0) << tp3.output;
    EXPECT_EQ(generations(tp3.output), generations(one.output)) << cache;
  }
  const Result refused = run(kMpirun + " -np 3 " + cmd + " --tensor-model-parallel-size 3");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("--unaligned-linear splits them unevenly"), std::string::npos)
      << refused.output;
}

TEST(GenerateText, SamplingIsReproducibleFromTheSeed) {
  ScratchDir dir("gen");
  mindspeed::testing::write_file(dir.file("prompts.txt"), "1 2 3\n\n40 41\n");
  const std::string cmd = kGenerate + " --load " + kGpt2Fixture + kNull + " --prompts-file " +
                          dir.file("prompts.txt") + " --out-seq-length 16 --top-k 0 --temperature 1.5";
  const Result a = run(cmd + " --seed 3"), b = run(cmd + " --seed 3"), c = run(cmd + " --seed 4");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(a.output.find("prompt: 40 41"), std::string::npos) << a.output;  // the empty line is skipped
  EXPECT_EQ(generations(a.output), generations(b.output));
  EXPECT_NE(generations(a.output), generations(c.output));
}

TEST(GenerateText, OurCheckpointFormatGeneratesWhatItsSourceDoes) {
  ScratchDir dir("gen");
  const Result convert = run(std::string(MS_CONVERT_CHECKPOINT) + " --load-model-type hf --save-model-type mg" +
                             " --load-dir " + kGpt2Fixture + " --save-dir " + dir.file("ckpt"));
  ASSERT_EQ(convert.exit_code, 0) << convert.output;
  const std::string args = kNull + " --prompt '9 8 7 6' --out-seq-length 10";
  const Result hf = run(kGenerate + " --load " + kGpt2Fixture + args);
  const Result ours = run(kGenerate + " --load " + dir.file("ckpt") + args);
  ASSERT_EQ(ours.exit_code, 0) << ours.output;
  EXPECT_EQ(generations(ours.output), generations(hf.output));
  EXPECT_FALSE(generations(ours.output).empty());
}

TEST(GenerateText, FromACheckpointPretrainGptSaved) {
  ScratchDir dir("gen");
  const Result train = run(std::string(MS_PRETRAIN_GPT) +
                           " --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32"
                           " --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4 --lr 3e-3"
                           " --train-iters 3 --mock-data --tokenizer-type NullTokenizer --vocab-size 4096"
                           " --position-embedding-type rope --normalization RMSNorm --swiglu"
                           " --untie-embeddings-and-output-weights --disable-bias-linear"
                           " --save " + dir.file("ckpt") + " --save-interval 3 --eval-iters 0");
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const std::string cmd = kGenerate + " --load " + dir.file("ckpt") +
                          " --tokenizer-type NullTokenizer --vocab-size 4096 --prompt '1 2 3' --out-seq-length 8";
  const Result one = run(cmd);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(generations(one.output), "") << one.output;
  const Result two = run(kMpirun + " -np 2 " + cmd + " --tensor-model-parallel-size 2");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_EQ(generations(two.output), generations(one.output));
}

// The fenced device (kernels/fenced/): weights, key/value cache and activations in device
// memory that host code cannot touch, logits copied back; it must generate what the CPU does.
TEST(GenerateText, TheFencedDeviceGeneratesWhatTheCpuDoes) {
  const std::string greedy =
      kGenerate + " --load " + kGpt2Fixture + kNull + " --prompt '5 17 3 42' --out-seq-length 12";
  const std::string sampled =
      kGenerate + " --load " + kGpt2Fixture + kNull +
      " --prompt '5 17 3' --out-seq-length 20 --top-k 0 --temperature 1.5 --seed 5";
  for (const std::string& cmd :
       {greedy, greedy + " --no-kv-cache --use-flash-attn", sampled,
        kMpirun + " -np 2 " + greedy + " --tensor-model-parallel-size 2"}) {
    const Result cpu = run(cmd);
    const Result fenced = run(cmd + " --device cpu-fenced");
    ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
    ASSERT_EQ(fenced.exit_code, 0) << fenced.output;
    EXPECT_FALSE(generations(cpu.output).empty()) << cpu.output;
    EXPECT_EQ(generations(fenced.output), generations(cpu.output)) << cmd;
  }
}

void expect_refused(const std::string& args, const std::string& needle) {
  const Result r = run(kGenerate + args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << args << "\n" << r.output;
  EXPECT_EQ(r.output.find("FATAL"), std::string::npos) << r.output;
}

TEST(GenerateText, BadInputIsRefusedNamingTheFlag) {
  ScratchDir dir("gen");
  mindspeed::testing::write_file(dir.file("empty.txt"), "\n\n");
  const std::string load = " --load " + kGpt2Fixture + kNull;
  expect_refused(" --load " + dir.file("missing") + kNull + " --prompt '1 2'", "--load");
  expect_refused(" --load " + dir.path().string() + kNull + " --prompt '1 2'", "neither a checkpoint");
  expect_refused(load + " --prompt '1 2' --top-k 0 --top-p 1.5", "--top-p");
  expect_refused(load + " --prompt '1 2' --top-k 0 --temperature 0", "--temperature");
  expect_refused(load + " --prompt '1 2' --top-k -3", "--top-k");
  expect_refused(load + " --prompt '1 2' --top-p 0.9", "--top-k 0");
  expect_refused(load + " --prompt '1 2' --out-seq-length 0", "--out-seq-length");
  expect_refused(load + " --prompt '1 2' --top-k many", "--top-k");
  expect_refused(load + " --prompts-file " + dir.file("empty.txt"), "--prompts-file");
  expect_refused(load + " --prompts-file " + dir.file("none.txt"), "--prompts-file");
  expect_refused(load, "no prompt");
  expect_refused(load + " --prompt '1 2' --pipeline-model-parallel-size 2", "--pipeline-model-parallel-size");
  expect_refused(load + " --prompt '1 2' --tensor-model-parallel-size 2", "mpirun -np 2");
  expect_refused(" --load " + kGpt2Fixture + " --prompt '1 2'", "--tokenizer-type");
  expect_refused(" --load " + kGpt2Fixture + " --tokenizer-type NullTokenizer --vocab-size 5000 --prompt '1'",
                 "use the tokenizer the model was trained with");
  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += i == 0 ? "1" : " 1";
  expect_refused(load + " --prompt '" + long_prompt + "'", "--max-position-embeddings");
  expect_refused(load + " --prompt '1' --no-such-flag", "no-such-flag");
  expect_refused(load + " --prompt '1' --device tpu", "--device");
}

}  // namespace
