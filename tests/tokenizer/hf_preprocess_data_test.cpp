// End to end: tools/preprocess_data --tokenizer-type PretrainedFromHF --tokenizer-name-or-path
// DIR writes, for the texts of the npm vectors (reference/hf_vectors.jsonl), one document per
// text whose tokens are the vector's ids (+ eod with --append-eod), as int32 as MindSpeed-LLM's
// preprocess_data.py writes them; and refuses a bad directory with a clear message. Then
// pretrain_gpt trains on such a dataset with the same --tokenizer-type PretrainedFromHF.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/str_cat.h"
#include "datasets/indexed_dataset.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/read_jsonl.h"
#include "tools/tools_test_util.h"

namespace mindspeed {
namespace {

using nlohmann::json;
using testing::read_jsonl;
using testing::run_tool;
using testing::ScratchDir;
using testing::source_path;
using testing::write_file;

std::vector<json> vectors_of(const std::string& tokenizer) {
  std::vector<json> out;
  for (json& v : read_jsonl(source_path("tests/tokenizer/reference/hf_vectors.jsonl"))) {
    if (v["tokenizer"] == tokenizer && !v["ids"].empty()) out.push_back(std::move(v));
  }
  return out;
}

// Runs preprocess_data over one JSONL document per vector text; checks the dataset.
void check_preprocess(const std::string& name, const std::string& dir, bool append_eod) {
  ScratchDir scratch("hf_pp");
  const std::vector<json> vectors = vectors_of(name);
  ASSERT_GT(vectors.size(), 100u);
  std::string jsonl;
  for (const json& v : vectors) jsonl += json{{"text", v["text"]}}.dump() + "\n";
  write_file(scratch.file("in.jsonl"), jsonl);
  std::vector<std::string> args = {"--input", scratch.file("in.jsonl"), "--output-prefix", scratch.file("out"),
                                   "--tokenizer-type", "PretrainedFromHF", "--tokenizer-name-or-path", dir,
                                   "--workers", "2"};
  if (append_eod) args.push_back("--append-eod");
  const auto r = run_tool("preprocess_data", args);
  ASSERT_EQ(r.exit_code, 0) << r.output;

  auto tokenizer = load_pretrained_from_hf_tokenizer(dir);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  auto dataset = IndexedDataset::open(scratch.file("out_text_document"));
  ASSERT_TRUE(dataset.ok()) << dataset.status().to_string();
  const IndexedDataset& ds = **dataset;
  EXPECT_EQ(ds.dtype(), IndexedDType::kInt32);
  ASSERT_EQ(ds.num_sequences(), static_cast<int64_t>(vectors.size()));
  ASSERT_EQ(ds.num_documents(), static_cast<int64_t>(vectors.size()));
  for (size_t i = 0; i < vectors.size(); ++i) {
    std::vector<int32_t> want = vectors[i]["ids"].get<std::vector<int32_t>>();
    if (append_eod) want.push_back((*tokenizer)->eod());
    std::vector<int32_t> got(static_cast<size_t>(ds.sequence_length(static_cast<int64_t>(i))));
    ASSERT_TRUE(ds.get(static_cast<int64_t>(i), 0, static_cast<int64_t>(got.size()), got.data()).ok());
    EXPECT_EQ(got, want) << name << " document " << i << ": " << vectors[i]["text"].dump();
  }
}

TEST(HfPreprocessData, Llama3StyleWithEodMatchesVectors) {
  check_preprocess("llama3_style", source_path("tests/tokenizer/reference/hf/llama3_style"), true);
}

TEST(HfPreprocessData, Qwen2StyleMatchesVectors) {
  check_preprocess("qwen2_style", source_path("tests/tokenizer/reference/hf/qwen2_style"), false);
}

TEST(HfPreprocessData, BadDirectoryIsRefused) {
  ScratchDir scratch("hf_pp_bad");
  write_file(scratch.file("in.jsonl"), "{\"text\": \"hello\"}\n");
  const auto r = run_tool("preprocess_data", {"--input", scratch.file("in.jsonl"), "--output-prefix",
                                              scratch.file("out"), "--tokenizer-type", "PretrainedFromHF",
                                              "--tokenizer-name-or-path", scratch.file("missing")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--tokenizer-name-or-path"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no such directory"), std::string::npos) << r.output;
  EXPECT_EQ(scratch.entries(), std::vector<std::string>{"in.jsonl"});
}

TEST(HfPreprocessData, PretrainGptTrainsWithPretrainedFromHF) {
  ScratchDir scratch("hf_pp_train");
  const std::string dir = source_path("tests/tokenizer/reference/hf/llama3_style");
  const auto pp = run_tool("preprocess_data", {"--input", source_path("data/corpus/kjv.jsonl.gz"), "--output-prefix",
                                               scratch.file("kjv"), "--tokenizer-type", "PretrainedFromHF",
                                               "--tokenizer-name-or-path", dir, "--append-eod", "--workers", "2"});
  ASSERT_EQ(pp.exit_code, 0) << pp.output;
  auto tokenizer = load_pretrained_from_hf_tokenizer(dir);
  ASSERT_TRUE(tokenizer.ok());
  const auto r = testing::run_shell(
      testing::shell_quote(MS_PRETRAIN_GPT) +
      " --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64"
      " --micro-batch-size 4 --global-batch-size 16 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine"
      " --lr-warmup-iters 5 --train-iters 20 --log-interval 10 --eval-interval 20 --eval-iters 1 --split 98,2,0"
      " --reset-position-ids --eod-mask-loss --tokenizer-type PretrainedFromHF --tokenizer-name-or-path " +
      testing::shell_quote(dir) + " --data-path " + testing::shell_quote(scratch.file("kjv_text_document")) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(str_cat("padded vocab (size: ", (*tokenizer)->vocab_size(), ")")), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("iteration       20/      20"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace mindspeed
