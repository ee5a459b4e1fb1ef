// End to end: tools/preprocess_data --tokenizer-type PretrainedFromHF --tokenizer-name-or-path
// DIR writes, for the texts of the npm vectors (reference/hf_vectors.jsonl), one document per
// text whose tokens are the vector's ids (+ eod with --append-eod), the .bin and .idx byte for
// byte those Megatron's builder writes (uint16 below 65500 ids: DType.optimal_dtype; the
// expected files are laid out here from the ids, not by the library); and refuses a bad
// directory with a clear message. MindSpeed-LLM's --handler-name: GeneralPretrainHandler (empty
// texts write no document, --seq-length drops long ones), AlpacaPretrainHandler,
// SharegptPretrainHandler and StackOverflowPythonPretrainHandler tokenise the texts their
// templates make; fine-tuning handlers, unknown names and the flags' misuses are refused by
// name. Then pretrain_gpt trains on such a dataset with the same --tokenizer-type PretrainedFromHF.
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

// Megatron's .bin and .idx of `documents` (each a list of sequences of ids) as its
// IndexedDatasetBuilder writes them with dtype uint16 (code 8): the ids back to back, then the
// header "MMIDIDX\0\0", version 1, the dtype code, the sequence count, the document-index
// count, int32 lengths, int64 byte pointers and the int64 document starts [0, ..., N].
std::pair<std::string, std::string> megatron_uint16_dataset(
    const std::vector<std::vector<std::vector<int32_t>>>& documents) {
  std::string bin, idx = std::string("MMIDIDX\0\0", 9);
  std::vector<int32_t> lengths;
  std::vector<int64_t> starts = {0};
  for (const auto& doc : documents) {
    for (const auto& sequence : doc) {
      for (int32_t id : sequence) {
        EXPECT_TRUE(id >= 0 && id < 65536) << id;
        const auto v = static_cast<uint16_t>(id);
        bin.append(reinterpret_cast<const char*>(&v), 2);
      }
      lengths.push_back(static_cast<int32_t>(sequence.size()));
    }
    starts.push_back(static_cast<int64_t>(lengths.size()));
  }
  auto put = [&idx](const auto& value) {
    idx.append(reinterpret_cast<const char*>(&value), sizeof(value));
  };
  put(uint64_t{1});
  put(uint8_t{8});
  put(static_cast<uint64_t>(lengths.size()));
  put(static_cast<uint64_t>(starts.size()));
  for (int32_t n : lengths) put(n);
  int64_t pointer = 0;
  for (int32_t n : lengths) {
    put(pointer);
    pointer += 2 * static_cast<int64_t>(n);
  }
  for (int64_t start : starts) put(start);
  return {bin, idx};
}

void expect_megatron_files(const std::string& prefix,
                           const std::vector<std::vector<std::vector<int32_t>>>& documents) {
  const auto [bin, idx] = megatron_uint16_dataset(documents);
  EXPECT_TRUE(testing::read_file(prefix + ".bin") == bin)
      << prefix << ".bin differs from Megatron's";
  EXPECT_TRUE(testing::read_file(prefix + ".idx") == idx)
      << prefix << ".idx differs from Megatron's";
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
  ASSERT_LT((*tokenizer)->vocab_size(), 65500);
  EXPECT_EQ(ds.dtype(), IndexedDType::kUInt16);  // Megatron's DType.optimal_dtype(vocab_size)
  ASSERT_EQ(ds.num_sequences(), static_cast<int64_t>(vectors.size()));
  ASSERT_EQ(ds.num_documents(), static_cast<int64_t>(vectors.size()));
  std::vector<std::vector<std::vector<int32_t>>> documents;
  for (size_t i = 0; i < vectors.size(); ++i) {
    std::vector<int32_t> want = vectors[i]["ids"].get<std::vector<int32_t>>();
    if (append_eod) want.push_back((*tokenizer)->eod());
    std::vector<int32_t> got(static_cast<size_t>(ds.sequence_length(static_cast<int64_t>(i))));
    ASSERT_TRUE(ds.get(static_cast<int64_t>(i), 0, static_cast<int64_t>(got.size()), got.data()).ok());
    EXPECT_EQ(got, want) << name << " document " << i << ": " << vectors[i]["text"].dump();
    documents.push_back({want});
  }
  expect_megatron_files(scratch.file("out_text_document"), documents);
}

TEST(HfPreprocessData, Llama3StyleWithEodMatchesVectors) {
  check_preprocess("llama3_style", source_path("tests/tokenizer/reference/hf/llama3_style"), true);
}

TEST(HfPreprocessData, Qwen2StyleMatchesVectors) {
  check_preprocess("qwen2_style", source_path("tests/tokenizer/reference/hf/qwen2_style"), false);
}

// MindSpeed-LLM's pretraining handlers through preprocess_data. The expected ids are the
// tokenizer's ids (checked against the npm vectors above) of the texts the handlers' templates
// make, written out here.
class HandlerPreprocess : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = load_pretrained_from_hf_tokenizer(dir_);
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    tokenizer_ = std::move(*loaded);
  }
  // Runs preprocess_data on `jsonl` with `extra` flags; the tool's output.
  testing::RunResult run(const std::string& jsonl, const std::vector<std::string>& extra) {
    write_file(scratch_.file("in.jsonl"), jsonl);
    std::vector<std::string> args = {"--input",
                                     scratch_.file("in.jsonl"),
                                     "--output-prefix",
                                     scratch_.file("out"),
                                     "--tokenizer-type",
                                     "PretrainedFromHF",
                                     "--tokenizer-name-or-path",
                                     dir_};
    args.insert(args.end(), extra.begin(), extra.end());
    if (std::find(extra.begin(), extra.end(), "--workers") == extra.end())
      args.insert(args.end(), {"--workers", "2"});
    return run_tool("preprocess_data", args);
  }
  std::vector<int32_t> ids(const std::string& text, bool eod) const {
    std::vector<int32_t> out;
    EXPECT_TRUE(tokenizer_->tokenize_into(text, &out).ok());
    if (eod) out.push_back(tokenizer_->eod());
    return out;
  }
  const std::string dir_ = source_path("tests/tokenizer/reference/hf/llama3_style");
  ScratchDir scratch_{"hf_handler"};
  std::unique_ptr<Tokenizer> tokenizer_;
};

// MindSpeed-LLM's pretraining command: GeneralPretrainHandler with --append-eod --workers 4. An
// empty text writes no document (the handler skips empty texts before tokenising; Megatron's
// encoding tokenises it), --seq-length empties a document whose sequence is that long.
TEST_F(HandlerPreprocess, GeneralPretrainHandlerDropsEmptyTextsAndLongSequences) {
  const std::string jsonl =
      "{\"text\": \"In the beginning\"}\n{\"text\": \"\"}\n"
      "{\"text\": \"God created the heaven and the earth, and the earth was without form\"}\n"
      "{\"text\": \"And God said\", \"id\": 4}\n";
  const std::vector<int32_t> a = ids("In the beginning", true), c = ids("And God said", true);
  const std::vector<int32_t> b =
      ids("God created the heaven and the earth, and the earth was without form", true);
  auto r = run(jsonl, {"--handler-name", "GeneralPretrainHandler", "--json-keys", "text",
                       "--append-eod", "--workers", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_megatron_files(scratch_.file("out_text_document"), {{a}, {b}, {c}});
  // Without a handler, Megatron's encoding: the empty text is a document too (this tokenizer's
  // template gives it <|begin_of_text|>, then the EOD).
  const std::vector<int32_t> empty = ids("", false);
  ASSERT_FALSE(empty.empty());
  r = run(jsonl, {"--append-eod"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_megatron_files(scratch_.file("out_text_document"), {{a}, {ids("", true)}, {b}, {c}});
  // --seq-length: the long sequence is dropped, its document stays (empty), as MindSpeed-LLM skips
  // it.
  ASSERT_GT(b.size(), a.size() + 2);
  r = run(jsonl, {"--handler-name", "GeneralPretrainHandler", "--append-eod", "--seq-length",
                  std::to_string(b.size())});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_megatron_files(scratch_.file("out_text_document"), {{a}, {}, {c}});
}

TEST_F(HandlerPreprocess, AlpacaSharegptAndStackOverflowTemplates) {
  const std::string preamble =
      "A chat between a curious user and an artificial intelligence assistant. The assistant gives "
      "helpful, "
      "detailed, and polite answers to the user's questions.USER: Below is an instruction that "
      "describes a task. "
      "Write a response that appropriately completes the request.\n\n### Instruction:\n";
  auto r =
      run("{\"instruction\": \"Name a colour\", \"input\": \"\", \"output\": \"Red\"}\n"
          "{\"instruction\": \"Add\", \"input\": \"2 and 3\", \"output\": \"5\"}\n"
          "{\"instruction\": \"Say hi\"}\n",
          {"--handler-name", "AlpacaPretrainHandler", "--append-eod"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_megatron_files(
      scratch_.file("out_text_document"),
      {{ids(preamble + "Name a colour\n\n###None\n\n### Response: ASSISTANT: Red", true)},
       {ids(preamble + "Add\n\n### Input:\n2 and 3\n\n### Response: ASSISTANT: 5", true)},
       {ids(preamble + "Say hi\n\n###None\n\n### Response: ASSISTANT: None", true)}});

  r =
      run("{\"conversations\": [{\"from\": \"human\", \"value\": \"Hello. \"}, {\"from\": \"gpt\", "
          "\"value\": \"Hi there.\"}]}\n{\"conversations\": [{\"role\": \"user\", \"content\": "
          "\"Why?\"}]}\n",
          {"--handler-name", "SharegptPretrainHandler", "--json-keys", "conversations"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_megatron_files(scratch_.file("out_conversations_document"),
                        {{ids("Hello. Hi there.", false)}, {ids("Why?", false)}});

  r = run(
      "{\"title\": \"Sort a list\", \"question_body\": \"How?\", \"answer_body\": \"sorted(x)\"}\n",
      {"--handler-name", "StackOverflowPythonPretrainHandler", "--json-keys", "body"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_megatron_files(
      scratch_.file("out_text_document"),
      {{ids("In python, Sort a list\n### Question:\nHow?\n### Response:\nsorted(x)\n", false)}});
}

TEST_F(HandlerPreprocess, MisusesAreRefusedByName) {
  const std::string jsonl = "{\"text\": \"hello\"}\n";
  auto r = run(jsonl, {"--handler-name", "AlpacaStyleInstructionHandler"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(
      r.output.find("AlpacaStyleInstructionHandler is one of MindSpeed-LLM's fine-tuning handlers"),
      std::string::npos)
      << r.output;
  r = run(jsonl, {"--handler-name", "GeneralHandler"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("pretraining handlers: GeneralPretrainHandler, AlpacaPretrainHandler"),
            std::string::npos)
      << r.output;
  r = run(jsonl, {"--seq-length", "8"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("pass --handler-name GeneralPretrainHandler"), std::string::npos)
      << r.output;
  r = run(jsonl, {"--handler-name", "AlpacaPretrainHandler", "--json-keys", "text", "title"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("pass --json-keys text"), std::string::npos) << r.output;
  r = run("{\"text\": [\"a\", \"b\"]}\n", {"--handler-name", "GeneralPretrainHandler"});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(
      r.output.find(
          "in.jsonl:1: GeneralPretrainHandler: key 'text' is a JSON array; expected a string"),
      std::string::npos)
      << r.output;
  const auto gpt2 =
      run_tool("preprocess_data", {"--input", scratch_.file("in.jsonl"), "--output-prefix",
                                   scratch_.file("gpt2"), "--tokenizer-type", "GPT2BPETokenizer",
                                   "--vocab-file", source_path("data/gpt2/gpt2-vocab.json"),
                                   "--merge-file", source_path("data/gpt2/gpt2-merges.txt"),
                                   "--handler-name", "GeneralPretrainHandler"});
  EXPECT_EQ(gpt2.exit_code, 2) << gpt2.output;
  EXPECT_NE(gpt2.output.find("needs --tokenizer-type PretrainedFromHF"), std::string::npos)
      << gpt2.output;
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
