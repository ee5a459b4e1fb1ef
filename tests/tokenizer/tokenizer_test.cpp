// Tests for tokenizer/tokenizer: build_tokenizer dispatch and errors, NullTokenizer, the
// unique-identifier JSON (Python json.dumps layout) and vocab padding.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include "tokenizer/test_util.h"

namespace mindspeed {
namespace {

using testing::source_path;

Status build_status(const TokenizerOptions& options) {
  auto tok = build_tokenizer(options);
  return tok.ok() ? ok_status() : tok.status();
}

TEST(BuildTokenizer, Dispatch) {
  TokenizerOptions gpt2;
  gpt2.tokenizer_type = "GPT2BPETokenizer";
  gpt2.vocab_file = source_path("data/gpt2/gpt2-vocab.json");
  gpt2.merge_file = source_path("data/gpt2/gpt2-merges.txt");
  auto tok = build_tokenizer(gpt2);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ((*tok)->name(), "GPT2BPETokenizer");
  EXPECT_EQ((*tok)->vocab_size(), 50257);

  for (const char* type : {"SentencePieceTokenizer", "GPTSentencePieceTokenizer",
                           "Llama2Tokenizer"}) {
    TokenizerOptions sp;
    sp.tokenizer_type = type;
    sp.tokenizer_model = source_path("tests/tokenizer/reference/spm_bpe.model");
    auto t = build_tokenizer(sp);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ((*t)->name(), type);
  }
  TokenizerOptions null;
  null.tokenizer_type = "NullTokenizer";
  null.vocab_size = 100;
  auto t = build_tokenizer(null);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->vocab_size(), 101);
}

TEST(BuildTokenizer, Errors) {
  TokenizerOptions options;
  Status s = build_status(options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--tokenizer-type is required"), std::string::npos);
  options.tokenizer_type = "GPT2Tokenizer";
  s = build_status(options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("GPT2BPETokenizer"), std::string::npos) << s.message();
  for (const char* type : {"HuggingFaceTokenizer", "BertWordPieceLowerCase", "BertWordPieceCase",
                           "TikTokenizer", "MultimodalTokenizer"}) {
    options.tokenizer_type = type;
    s = build_status(options);
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << type;
    EXPECT_NE(s.message().find(type), std::string::npos);
  }
  options.tokenizer_type = "GPT2BPETokenizer";
  s = build_status(options);
  EXPECT_NE(s.message().find("needs --vocab-file"), std::string::npos) << s.message();
  options.vocab_file = "x.json";
  s = build_status(options);
  EXPECT_NE(s.message().find("needs --merge-file"), std::string::npos) << s.message();
  options.tokenizer_type = "Llama2Tokenizer";
  s = build_status(options);
  EXPECT_NE(s.message().find("needs --tokenizer-model"), std::string::npos) << s.message();
  options.tokenizer_type = "NullTokenizer";
  s = build_status(options);
  EXPECT_NE(s.message().find("needs --vocab-size"), std::string::npos) << s.message();
  options.vocab_size = 0;
  EXPECT_EQ(build_status(options).code(), StatusCode::kInvalidArgument);
}

TEST(NullTokenizer, MegatronSemantics) {
  auto tok = std::move(make_null_tokenizer(50257)).value();
  EXPECT_EQ(tok->vocab_size(), 50258);
  EXPECT_EQ(tok->eod(), 50257);
  EXPECT_FALSE(tok->pad().has_value());
  EXPECT_EQ(*tok->tokenize("1 2 3"), (std::vector<int32_t>{1, 2, 3}));
  // Python int(): surrounding whitespace, sign, underscores between digits, leading zeros.
  EXPECT_EQ(*tok->tokenize("\t7\n +8 1_000 007 -0"), (std::vector<int32_t>{7, 8, 1000, 7, 0}));
  EXPECT_EQ(*tok->detokenize(std::vector<int32_t>{5, 6}), "5 6");
  for (const char* bad : {"", "1  2", " 1", "1 ", "a", "1.5", "1__0", "_1", "1_", "-3",
                          "99999999999", "+", "0x10"}) {
    auto ids = tok->tokenize(bad);
    EXPECT_FALSE(ids.ok()) << "'" << bad << "'";
    EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(tok->unique_description(),
            "{\n    \"class\": \"_NullTokenizer\",\n    \"tokenizer_path\": [\n        null\n"
            "    ],\n    \"vocab_size\": \"50257\"\n}");
}

TEST(TokenizerIdentifiers, PythonJsonDumps) {
  // Strings as json.dumps(ensure_ascii=True) writes them.
  const auto quoted = [](const std::string& s) {
    TokenizerIdentifiers ids;
    ids.class_name = s;
    const std::string json = identifiers_to_python_json(ids);
    const size_t start = json.find(": ") + 2;
    return json.substr(start, json.find(",\n") - start);
  };
  EXPECT_EQ(quoted("plain"), "\"plain\"");
  EXPECT_EQ(quoted("a\"b\\c\n\t\r\b\f"), "\"a\\\"b\\\\c\\n\\t\\r\\b\\f\"");
  EXPECT_EQ(quoted(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(quoted("caf\u00e9 \u4e2d"), "\"caf\\u00e9 \\u4e2d\"");
  EXPECT_EQ(quoted("\U0001F600"), "\"\\ud83d\\ude00\"");

  TokenizerIdentifiers ids;
  ids.class_name = "_X";
  EXPECT_EQ(identifiers_to_python_json(ids),
            "{\n    \"class\": \"_X\",\n    \"tokenizer_path\": []\n}");
  ids.tokenizer_path = {"a", std::nullopt};
  ids.options = {{"k", "v"}};
  // Nested one level deep, as inside GPTDataset's unique_description.
  EXPECT_EQ(identifiers_to_python_json(ids, 4, 1),
            "{\n        \"class\": \"_X\",\n        \"tokenizer_path\": [\n            \"a\",\n"
            "            null\n        ],\n        \"k\": \"v\"\n    }");
}

TEST(Tokenizer, VocabSizeWithPadding) {
  EXPECT_EQ(vocab_size_with_padding(50257, 128, 1), 50304);
  EXPECT_EQ(vocab_size_with_padding(50257, 128, 8), 51200);
  EXPECT_EQ(vocab_size_with_padding(50304, 128, 1), 50304);
  EXPECT_EQ(vocab_size_with_padding(1005, 1, 1), 1005);
}

}  // namespace
}  // namespace mindspeed
