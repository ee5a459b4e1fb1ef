// The declared domains of the numeric flags, table-driven: every numeric flag pretrain_gpt
// accepts is listed here with what it must do at 0, -1 and a huge value (1e30, or 2^62 for
// integers); NaN and a non-number are refused for all of them. A refusal must name the flag.
// Each case runs the parser and the validation (world size 1, the tokenizer's vocabulary),
// i.e. everything that happens before anything is built. A flag added without a row here
// fails the coverage test. Also the defects a tester found (silent or crashing inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "cli/arguments.h"
#include "config/validate.h"

namespace mindspeed {
namespace {

// A valid tiny run (mock data, NullTokenizer).
std::vector<std::string> base() {
  return {"--num-layers", "2",  "--hidden-size", "64",  "--num-attention-heads", "4",
          "--seq-length", "64", "--max-position-embeddings", "64", "--micro-batch-size", "4",
          "--lr", "3e-3", "--train-iters", "10", "--mock-data", "--tokenizer-type", "NullTokenizer",
          "--vocab-size", "4096"};
}

// Parse + validate; the first error, or OK.
Status run(std::vector<std::string> args) {
  auto parsed = parse_arguments(args);
  if (!parsed.ok()) return parsed.status();
  Configs c = parsed->configs;
  return validate_configs(c, 1, 4096);
}

struct Row {
  bool zero_ok, negative_ok, huge_ok;
};

// What each numeric flag must do at 0, -1 and huge.
const std::map<std::string, Row> kExpected = {
    {"--num-layers", {false, false, false}},
    {"--hidden-size", {false, false, false}},
    {"--ffn-hidden-size", {false, false, false}},
    {"--num-attention-heads", {false, false, false}},
    {"--kv-channels", {false, false, false}},
    {"--num-query-groups", {false, false, false}},
    {"--seq-length", {false, false, false}},
    {"--max-position-embeddings", {false, false, false}},
    {"--norm-epsilon", {false, false, true}},
    {"--rotary-base", {false, false, true}},
    {"--attention-dropout", {true, false, false}},
    {"--hidden-dropout", {true, false, false}},
    {"--init-method-std", {true, false, true}},
    {"--make-vocab-size-divisible-by", {false, false, false}},
    {"--tensor-model-parallel-size", {false, false, false}},
    {"--pipeline-model-parallel-size", {false, false, false}},
    {"--context-parallel-size", {false, false, false}},
    {"--ulysses-degree-in-cp", {false, false, false}},
    {"--cp-window-size", {false, false, false}},
    {"--coc-parallel-num", {false, false, false}},
    {"--coc-mode", {true, true, false}},
    {"--tp-x", {false, false, false}},
    {"--tp-y", {false, false, false}},
    {"--hccl-ep-group-buffer-adaptive-factor", {true, true, false}},
    {"--sparse-mode", {true, false, false}},
    {"--pre-tockens", {false, false, false}},
    {"--next-tockens", {true, false, false}},
    {"--alibi-fusion-attn-type", {false, false, false}},
    {"--expert-model-parallel-size", {false, false, false}},
    {"--expert-tensor-parallel-size", {false, false, false}},
    {"--num-experts", {false, false, false}},
    // Alone, each needs its feature flag (so every value is refused, naming the flag).
    {"--recompute-num-layers", {false, false, false}},
    {"--recompute-activation-function-num-layers", {false, false, false}},
    {"--recompute-norm-num-layers", {false, false, false}},
    {"--moe-ffn-hidden-size", {false, false, false}},
    {"--moe-router-topk", {false, false, false}},
    {"--moe-router-topk-scaling-factor", {false, false, true}},
    {"--moe-router-num-groups", {false, false, false}},
    {"--moe-router-group-topk", {false, false, false}},
    {"--moe-router-bias-update-rate", {true, false, true}},
    {"--moe-aux-loss-coeff", {true, false, true}},
    {"--moe-z-loss-coeff", {true, false, true}},
    {"--moe-expert-capacity-factor", {false, false, true}},
    {"--moe-input-jitter-eps", {true, false, false}},
    {"--moe-shared-expert-intermediate-size", {false, false, false}},
    {"--n-shared-experts", {false, false, false}},
    {"--ddp-bucket-size", {false, false, false}},
    {"--hccl-slice-size", {false, false, false}},
    {"--dry-run-world-size", {false, false, false}},
    {"--auto-settings-ranks", {false, false, false}},
    {"--target-nnodes", {false, false, false}},
    {"--nnodes", {false, false, false}},
    {"--nproc-per-node", {false, false, false}},
    {"--node-rank", {true, false, false}},
    {"--master-port", {false, false, false}},
    {"--auto-settings-memory-cap", {false, false, false}},
    {"--auto-settings-device-tflops", {false, false, false}},
    {"--auto-settings-intra-node-bandwidth", {false, false, false}},
    {"--auto-settings-inter-node-bandwidth", {false, false, false}},
    {"--auto-settings-top-k", {false, false, false}},
    {"--auto-settings-rounds", {false, false, false}},
    {"--auto-settings-iters", {false, false, false}},
    {"--decoder-first-pipeline-num-layers", {false, false, false}},
    {"--decoder-last-pipeline-num-layers", {false, false, false}},
    {"--num-layers-per-virtual-pipeline-stage", {false, false, false}},
    {"--num-virtual-stages-per-pipeline-rank", {false, false, false}},
    {"--microbatch-group-size-per-virtual-pipeline-stage", {false, false, false}},
    {"--save-interval", {false, false, false}},
    {"--rotary-seq-len-interpolation-factor", {false, false, false}},  // any value != 1 needs rope
    {"--rope-scaling-factor", {false, false, true}},
    {"--low-freq-factor", {false, false, true}},
    {"--high-freq-factor", {false, false, true}},
    {"--original-max-position-embeddings", {false, false, false}},
    {"--ckpt-step", {true, false, true}},  // a missing iteration is refused at load
    {"--exit-interval", {false, false, false}},
    {"--profile-step-start", {true, false, false}},
    {"--profile-step-end", {false, false, false}},
    {"--exit-duration-in-mins", {false, false, true}},
    {"--lr", {false, false, true}},
    {"--min-lr", {true, false, false}},
    {"--lr-decay-iters", {false, false, true}},
    {"--lr-warmup-iters", {true, false, false}},
    {"--lr-warmup-fraction", {true, false, false}},
    {"--lr-warmup-init", {true, false, false}},  // at most --lr
    {"--lr-wsd-decay-iters", {true, false, true}},
    {"--weight-decay", {true, false, true}},
    {"--adam-beta1", {true, false, false}},
    {"--adam-beta2", {true, false, false}},
    {"--adam-eps", {false, false, true}},
    {"--clip-grad", {true, false, true}},
    {"--ema-decay", {true, false, false}},
    {"--swap-optimizer-times", {false, false, false}},
    {"--micro-batch-size", {false, false, false}},
    {"--global-batch-size", {false, false, false}},
    {"--train-iters", {false, false, false}},
    // Sample-based flags: refused beside the base's --train-iters (naming the flag); an explicit
    // --lr-warmup-samples 0 is the default.
    {"--train-samples", {false, false, false}},
    {"--num-workers", {true, false, false}},
    {"--timing-log-level", {true, false, false}},
    {"--lr-decay-samples", {false, false, false}},
    {"--lr-warmup-samples", {true, false, false}},
    {"--lr-wsd-decay-samples", {false, false, false}},
    {"--seed", {true, false, false}},
    {"--log-interval", {false, false, true}},
    {"--eval-interval", {false, false, true}},
    {"--eval-iters", {true, false, false}},
    {"--optimization-level", {true, false, false}},
    {"--peak-tflops", {true, false, true}},
    {"--num-threads", {false, false, false}},
    {"--vocab-size", {false, false, false}},
    {"--tensorboard-log-interval", {false, false, true}},
    {"--tensorboard-queue-size", {false, false, true}},
    {"--loss-scale", {false, false, true}},
    {"--initial-loss-scale", {false, false, true}},
    {"--min-loss-scale", {false, false, true}},
    {"--loss-scale-window", {false, false, false}},
    {"--hysteresis", {false, false, true}},
    {"--vocab-extra-ids", {true, false, false}},
    {"--padded-vocab-size", {false, false, false}},
    {"--persistent-save-interval", {false, false, false}},
};

TEST(FlagDomains, EveryNumericFlagHasARowAndADomain) {
  const std::vector<FlagDomain> domains = numeric_flag_domains();
  ASSERT_FALSE(domains.empty());
  std::map<std::string, bool> seen;
  for (const FlagDomain& d : domains) {
    EXPECT_EQ(kExpected.count(d.name), 1u) << d.name << " has no row in kExpected";
    EXPECT_FALSE(d.describe().empty()) << d.name;
    seen[d.name] = true;
  }
  for (const auto& [name, row] : kExpected) EXPECT_TRUE(seen.count(name)) << name << " is not a numeric flag";
}

TEST(FlagDomains, ZeroNegativeHugeNanAndNonNumbers) {
  for (const FlagDomain& d : numeric_flag_domains()) {
    const Row row = kExpected.at(d.name);
    const std::string huge = d.integer ? "4611686018427387904" : "1e30";
    const std::vector<std::pair<std::string, bool>> cases = {
        {"0", row.zero_ok}, {"-1", row.negative_ok}, {huge, row.huge_ok}, {"nan", false}, {"abc", false},
        {"inf", false}};
    for (const auto& [value, ok] : cases) {
      std::vector<std::string> args = base();
      args.push_back(d.name);
      args.push_back(value);
      const Status s = run(args);
      if (ok) {
        EXPECT_TRUE(s.ok()) << d.name << " " << value << " was refused: " << s.to_string();
      } else {
        ASSERT_FALSE(s.ok()) << d.name << " " << value << " was accepted";
        EXPECT_NE(s.message().find(d.name), std::string::npos)
            << d.name << " " << value << ": the refusal does not name the flag: " << s.to_string();
      }
    }
  }
}

TEST(FlagDomains, DefectsATesterFound) {
  auto refused = [](std::vector<std::string> extra, const std::string& expected) {
    std::vector<std::string> args = base();
    args.insert(args.end(), extra.begin(), extra.end());
    const Status s = run(args);
    EXPECT_FALSE(s.ok()) << extra.front() << " was accepted";
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.to_string();
  };
  // Silently "not given" before: an explicit 0 is now refused.
  for (const char* flag : {"--kv-channels", "--ffn-hidden-size", "--global-batch-size", "--num-threads",
                           "--ddp-bucket-size"}) {
    refused({flag, "0"}, flag);
  }
  refused({"--clip-grad", "nan"}, "--clip-grad");  // turned clipping off
  refused({"--lr", "nan"}, "--lr");
  refused({"--norm-epsilon", "-1"}, "--norm-epsilon");
  refused({"--rotary-base", "0"}, "--rotary-base");
  refused({"--lr-warmup-iters", "-1"}, "--lr-warmup-iters");
  refused({"--lr-decay-iters", "-1"}, "--lr-decay-iters");
  refused({"--lr-warmup-fraction", "-0.5"}, "--lr-warmup-fraction");
  refused({"--micro-batch-size", "0x2"}, "--micro-batch-size");
  refused({"--num-layers", "1000000000"}, "--num-layers");          // hung in parameter registration
  refused({"--micro-batch-size", "1000000000"}, "--micro-batch-size");  // hung
  refused({"--dry-run-world-size", "2000000000"}, "--dry-run-world-size");  // hung
  refused({"--pipeline-model-parallel-size", "0"}, "--pipeline-model-parallel-size");  // SIGFPE
  refused({"--tensor-model-parallel-size", "0"}, "--tensor-model-parallel-size");      // SIGFPE
}

TEST(FlagDomains, SizesWhoseProductExceedsTheMachineAreRefusedWithRealByteCounts) {
  std::vector<std::string> args = base();
  for (const char* extra : {"--hidden-size", "1048576", "--num-attention-heads", "16"}) args.push_back(extra);
  const Status s = run(args);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("GiB per rank"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("this machine has"), std::string::npos) << s.to_string();
  EXPECT_EQ(s.message().find("-"), s.message().find("--")) << "no negative (wrapped) byte count: " << s.to_string();
}

TEST(FlagDomains, DataPathsAreCheckedBeforeAnythingIsBuilt) {
  std::vector<std::string> args = base();
  args.erase(std::find(args.begin(), args.end(), "--mock-data"));
  std::vector<std::string> missing = args;
  for (const char* extra : {"--data-path", "/nonexistent/corpus_text_document"}) missing.push_back(extra);
  Status s = run(missing);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/corpus_text_document.idx"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("--data-path"), std::string::npos) << s.to_string();
  // "--data-path --split 98,2,0": the flag was taken as a path (Megatron reported a file
  // called --split.idx).
  std::vector<std::string> swallowed = args;
  for (const char* extra : {"--data-path", "--split", "98,2,0"}) swallowed.push_back(extra);
  s = run(swallowed);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().find("--split.idx"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("--data-path"), std::string::npos) << s.to_string();
}

TEST(FlagDomains, HelpDocumentsTheExitCodes) {
  auto parsed = parse_arguments(std::vector<std::string>{"--help"});
  ASSERT_TRUE(parsed.ok());
  ASSERT_TRUE(parsed->help_requested);
  EXPECT_NE(parsed->help_text.find("Exit codes"), std::string::npos);
  EXPECT_NE(parsed->help_text.find("[an integer in [1, 1048576] (layers)]"), std::string::npos) << parsed->help_text;
}

}  // namespace
}  // namespace mindspeed
