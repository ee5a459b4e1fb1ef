// Tests for tokenizer/sentencepiece_tokenizer: ids against spm_encode vectors
// (reference/spm_vectors.jsonl) with Megatron's semantics for each --tokenizer-type, and
// damaged model files.
#include "tokenizer/sentencepiece_tokenizer.h"

#include <gtest/gtest.h>

#include "tokenizer/test_util.h"

namespace mindspeed {
namespace {

using testing::read_file;
using testing::read_jsonl;
using testing::ScratchDir;
using testing::source_path;
using testing::write_file;

const std::string kBpeModel = source_path("tests/tokenizer/reference/spm_bpe.model");
const std::string kUnigramModel = source_path("tests/tokenizer/reference/spm_unigram.model");

std::unique_ptr<Tokenizer> unwrap(StatusOr<std::unique_ptr<Tokenizer>> tok) {
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Checks tokenize(text) == prefix + spm_encode(text) for every vector of `model`.
void check_vectors(const Tokenizer& tok, const std::string& model, std::vector<int32_t> prefix,
                   bool skip_special_strings) {
  int checked = 0, failures = 0;
  for (const auto& v : read_jsonl(source_path("tests/tokenizer/reference/spm_vectors.jsonl"))) {
    if (v["model"] != model) continue;
    const std::string text = v["text"].get<std::string>();
    if (skip_special_strings && text.find('<') != std::string::npos) continue;
    const auto expected = cat(prefix, v["ids"].get<std::vector<int32_t>>());
    auto ids = tok.tokenize(text);
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    ++checked;
    if (*ids != expected && ++failures <= 5) ADD_FAILURE() << tok.name() << " differs for " << text;
  }
  EXPECT_GE(checked, 250);
  EXPECT_EQ(failures, 0);
}

TEST(SentencePieceTokenizer, GptSentencePieceMatchesSpmEncode) {
  auto tok = unwrap(load_gpt_sentencepiece_tokenizer(kBpeModel));
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab_size(), 1000);
  EXPECT_EQ(tok->eod(), 2);  // eos
  EXPECT_EQ(tok->pad(), -1);  // the model's pad_id (none)
  check_vectors(*tok, "spm_bpe", {}, false);
  auto unigram = unwrap(load_gpt_sentencepiece_tokenizer(kUnigramModel));
  ASSERT_TRUE(unigram);
  EXPECT_EQ(unigram->pad(), 3);
  check_vectors(*unigram, "spm_unigram", {}, false);
}

TEST(SentencePieceTokenizer, Llama2PrependsBos) {
  auto tok = unwrap(load_llama2_tokenizer(kBpeModel));
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->name(), "Llama2Tokenizer");
  EXPECT_EQ(tok->vocab_size(), 1000);
  EXPECT_EQ(tok->eod(), 2);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_FALSE(tok->pad().has_value());  // Megatron: AttributeError
  check_vectors(*tok, "spm_bpe", {1}, false);
  EXPECT_EQ(*tok->tokenize(""), (std::vector<int32_t>{1}));
  auto gpt = unwrap(load_gpt_sentencepiece_tokenizer(kBpeModel));
  const auto ids = *gpt->tokenize("In the beginning");
  EXPECT_EQ(*tok->detokenize(ids), "In the beginning");
}

TEST(SentencePieceTokenizer, Llama2RefusesModelWithoutBos) {
  auto tok = load_llama2_tokenizer(kUnigramModel);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tok.status().message().find("no BOS piece"), std::string::npos);
  EXPECT_NE(tok.status().message().find("spm_unigram.model"), std::string::npos);
}

TEST(SentencePieceTokenizer, MegatronSpecialTokens) {
  auto tok = unwrap(load_sentencepiece_tokenizer(kBpeModel, 0));
  ASSERT_TRUE(tok);
  // 1000 pieces + <CLS> <SEP> <EOD> <MASK> <PAD>; <s> and </s> are pieces 1 and 2.
  EXPECT_EQ(tok->vocab_size(), 1005);
  EXPECT_EQ(tok->eod(), 1002);
  EXPECT_EQ(tok->pad(), 1004);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  check_vectors(*tok, "spm_bpe", {}, true);

  auto gpt = unwrap(load_gpt_sentencepiece_tokenizer(kBpeModel));
  const auto enc = [&](const char* s) { return *gpt->tokenize(s); };
  // Split at the special strings, earliest first, encoding the text in between.
  EXPECT_EQ(*tok->tokenize("a<MASK>b<CLS>"), cat(cat(cat(enc("a"), {1003}), enc("b")), {1000}));
  EXPECT_EQ(*tok->tokenize("<unk> <s> </s>"),
            cat(cat(cat(enc("<unk> "), {1}), enc(" ")), {2}));
  EXPECT_EQ(*tok->tokenize("<EOD><EOD>"), (std::vector<int32_t>{1002, 1002}));
  EXPECT_EQ(*tok->detokenize(cat(enc("In the"), {1002})), "In the <EOD> ");

  auto extra = unwrap(load_sentencepiece_tokenizer(kBpeModel, 3));
  EXPECT_EQ(extra->vocab_size(), 1008);
  EXPECT_EQ(*extra->tokenize("<extra_id_1>"), (std::vector<int32_t>{1006}));
  EXPECT_EQ(extra->unique_identifiers().options,
            (std::vector<std::pair<std::string, std::string>>{{"vocab_extra_ids", "3"}}));

  // A model with a pad piece and no BOS: pad is the piece, <BOS> is appended.
  auto unigram = unwrap(load_sentencepiece_tokenizer(kUnigramModel, 0));
  EXPECT_EQ(unigram->vocab_size(), 405);
  EXPECT_EQ(unigram->pad(), 3);
  EXPECT_EQ(unigram->bos(), 404);
  EXPECT_EQ(unigram->eod(), 402);
}

TEST(SentencePieceTokenizer, Identifiers) {
  auto sp = unwrap(load_sentencepiece_tokenizer(kBpeModel, 0));
  EXPECT_EQ(sp->unique_description(), "{\n    \"class\": \"_SentencePieceTokenizer\",\n"
                                      "    \"tokenizer_path\": [\n        \"" + kBpeModel +
                                          "\"\n    ],\n    \"vocab_extra_ids\": \"0\"\n}");
  EXPECT_EQ(unwrap(load_llama2_tokenizer(kBpeModel))->unique_identifiers().class_name,
            "_Llama2Tokenizer");
  EXPECT_EQ(unwrap(load_gpt_sentencepiece_tokenizer(kBpeModel))->unique_identifiers().class_name,
            "_GPTSentencePieceTokenizer");
}

TEST(SentencePieceTokenizer, RejectsInvalidUtf8AndBadIds) {
  auto tok = unwrap(load_llama2_tokenizer(kBpeModel));
  EXPECT_EQ(tok->tokenize("ab\xff").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tok->detokenize(std::vector<int32_t>{1000}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(SentencePieceTokenizer, DamagedModelFiles) {
  ScratchDir dir("spm_bad");
  const auto expect_bad = [](StatusOr<std::unique_ptr<Tokenizer>> tok, StatusCode code,
                             const std::string& fragment) {
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), code) << tok.status().to_string();
    EXPECT_NE(tok.status().message().find(fragment), std::string::npos)
        << tok.status().message();
  };
  expect_bad(load_llama2_tokenizer(dir.file("missing.model")), StatusCode::kNotFound,
             "missing.model");
  expect_bad(load_llama2_tokenizer(source_path("data/gpt2/gpt2-merges.txt")),
             StatusCode::kInvalidArgument, "gpt2-merges.txt");
  const std::string model = read_file(kBpeModel);
  write_file(dir.file("half.model"), model.substr(0, model.size() / 2));
  expect_bad(load_sentencepiece_tokenizer(dir.file("half.model"), 0),
             StatusCode::kInvalidArgument, "half.model");
  write_file(dir.file("empty.model"), "");
  expect_bad(load_gpt_sentencepiece_tokenizer(dir.file("empty.model")),
             StatusCode::kInvalidArgument, "empty.model");
  expect_bad(load_gpt_sentencepiece_tokenizer(dir.path().string()), StatusCode::kNotFound,
             "no such file");
  // Found by tests/fuzz (corpus/sentencepiece/crash_trie_builder_throws): libsentencepiece's
  // trie builder throws on a piece that starts with a NUL byte (an empty C string); that
  // ended the process (std::terminate). A ModelProto with pieces "<unk>" (type UNKNOWN), "\0ab".
  std::string proto;
  for (const std::string& piece : {std::string("\x0a\x05<unk>\x18\x02", 9), std::string("\x0a\x03\0ab", 5)}) {
    proto.push_back('\x0a');  // ModelProto.pieces, length-delimited
    proto.push_back(static_cast<char>(piece.size()));
    proto.append(piece);
  }
  write_file(dir.file("nul.model"), proto);
  expect_bad(load_gpt_sentencepiece_tokenizer(dir.file("nul.model")), StatusCode::kInvalidArgument,
             "nul.model': not a valid SentencePiece model (");
  // (the message carries libsentencepiece's text: "failed to insert key: zero-length key")
}

}  // namespace
}  // namespace mindspeed
