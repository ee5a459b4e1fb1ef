// Tests for tokenizer/gpt2_tokenization: ids against the npm gpt-3-encoder and Megatron's
// algorithm (reference/*.jsonl), pre-tokenisation, UTF-8 handling, decoding, threads, and
// damaged or mismatched vocab/merges files.
#include "tokenizer/gpt2_tokenization.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "tokenizer/test_util.h"

namespace mindspeed {
namespace {

using testing::read_file;
using testing::read_jsonl;
using testing::ScratchDir;
using testing::source_path;
using testing::write_file;

const std::string kVocab = source_path("data/gpt2/gpt2-vocab.json");
const std::string kMerges = source_path("data/gpt2/gpt2-merges.txt");

std::unique_ptr<GPT2BPETokenizer> load_gpt2() {
  auto tok = GPT2BPETokenizer::load(kVocab, kMerges);
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return std::move(tok).value();
}

// Runs every {"text", "ids"} vector through tokenize and detokenize.
void check_vectors(const GPT2BPETokenizer& tok, const std::string& file, size_t min_count) {
  const auto vectors = read_jsonl(file);
  ASSERT_GE(vectors.size(), min_count) << file;
  int failures = 0;
  for (const auto& v : vectors) {
    const std::string text = v["text"].get<std::string>();
    const std::vector<int32_t> expected = v["ids"].get<std::vector<int32_t>>();
    auto ids = tok.tokenize(text);
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    if (*ids != expected && ++failures <= 5) {
      ADD_FAILURE() << "ids differ for " << v["text"].dump();
    }
    auto back = tok.detokenize(expected);
    ASSERT_TRUE(back.ok());
    if (*back != text && ++failures <= 5) ADD_FAILURE() << "round trip differs for " << v["text"];
  }
  EXPECT_EQ(failures, 0);
}

TEST(GPT2BPETokenizer, Basics) {
  auto tok = load_gpt2();
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->eod(), 50256);
  EXPECT_EQ(tok->eos(), 50256);
  EXPECT_FALSE(tok->pad().has_value());
  EXPECT_EQ(tok->name(), "GPT2BPETokenizer");
  EXPECT_EQ(*tok->tokenize("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_TRUE(tok->tokenize("")->empty());
  // <|endoftext|> in text is ordinary text for Megatron (no special-token handling).
  EXPECT_EQ(*tok->tokenize("<|endoftext|>"),
            (std::vector<int32_t>{27, 91, 437, 1659, 5239, 91, 29}));
}

TEST(GPT2BPETokenizer, MatchesNpmGpt3Encoder) {
  auto tok = load_gpt2();
  check_vectors(*tok, source_path("tests/tokenizer/reference/gpt2_vectors.jsonl"), 800);
}

// U+0085 and U+FEFF: JavaScript's \s differs from Python regex's; we follow Megatron.
TEST(GPT2BPETokenizer, MatchesMegatronWhereNpmDiffers) {
  auto tok = load_gpt2();
  check_vectors(*tok, source_path("tests/tokenizer/reference/gpt2_megatron_vectors.jsonl"), 9);
  EXPECT_EQ(*tok->tokenize("a \xC2\x85" "b"), (std::vector<int32_t>{64, 220, 126, 227, 65}));
}

TEST(GPT2BPETokenizer, Pretokenize) {
  const auto split = [](std::string_view text) {
    std::vector<std::string_view> pieces;
    EXPECT_TRUE(GPT2BPETokenizer::pretokenize(text, &pieces).ok());
    return std::vector<std::string>(pieces.begin(), pieces.end());
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("  a"), (V{" ", " a"}));
  EXPECT_EQ(split("hello world"), (V{"hello", " world"}));
  EXPECT_EQ(split("I'm"), (V{"I", "'m"}));
  EXPECT_EQ(split("a\n\nb"), (V{"a", "\n", "\n", "b"}));
  EXPECT_EQ(split("a   b  "), (V{"a", "  ", " b", "  "}));
  EXPECT_EQ(split("!'s"), (V{"!'", "s"}));
  EXPECT_EQ(split(" 123abc"), (V{" 123", "abc"}));
  EXPECT_EQ(split("it's 2 o'clock"), (V{"it", "'s", " 2", " o", "'", "clock"}));
  EXPECT_EQ(split("x\u00a0\u00a0y"), (V{"x", "\u00a0", "\u00a0", "y"}));
  EXPECT_EQ(split("a \tb"), (V{"a", " ", "\t", "b"}));
  EXPECT_EQ(split("caf\u00e9 \u4e2d\u6587!"), (V{"caf\u00e9", " \u4e2d\u6587", "!"}));
  EXPECT_EQ(split("x\u00b2\u00bd"), (V{"x", "\u00b2\u00bd"}));  // No is \p{N}
  EXPECT_EQ(split(""), V{});
}

TEST(GPT2BPETokenizer, RejectsInvalidUtf8) {
  auto tok = load_gpt2();
  for (const std::string& bad : {std::string("\xff"), std::string("ab\xc3"),
                                std::string("\xed\xa0\x80"), std::string("\xc0\xaf"),
                                std::string("\xf4\x90\x80\x80"), std::string("a\x80 b")}) {
    auto ids = tok->tokenize(bad);
    ASSERT_FALSE(ids.ok());
    EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(ids.status().message().find("UTF-8"), std::string::npos) << ids.status().message();
  }
}

TEST(GPT2BPETokenizer, DetokenizeReplacesIllFormedBytesLikePython) {
  auto tok = load_gpt2();
  std::vector<int32_t> byte_id(256, -1);
  for (int32_t id = 0; id < tok->vocab_size(); ++id) {
    const std::string& bytes = tok->token_bytes(id);
    if (bytes.size() == 1) byte_id[static_cast<uint8_t>(bytes[0])] = id;
  }
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(*tok->detokenize(std::vector<int32_t>{byte_id[0xff]}), fffd);
  // A truncated 3-byte sequence is one maximal subpart: one U+FFFD (bytes.decode semantics).
  EXPECT_EQ(*tok->detokenize(std::vector<int32_t>{byte_id[0xe4], byte_id[0xb8], byte_id['a']}),
            fffd + "a");
  EXPECT_EQ(*tok->detokenize(std::vector<int32_t>{byte_id[0xed], byte_id[0xa0], byte_id[0x80]}),
            fffd + fffd + fffd);
  auto bad = tok->detokenize(std::vector<int32_t>{50257});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tok->detokenize(std::vector<int32_t>{-1}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(GPT2BPETokenizer, ConcurrentTokenizeIsDeterministic) {
  auto tok = load_gpt2();
  const auto vectors = read_jsonl(source_path("tests/tokenizer/reference/gpt2_vectors.jsonl"));
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 2; ++round) {
        for (size_t i = t; i < vectors.size(); i += 2) {
          auto ids = tok->tokenize(vectors[i]["text"].get<std::string>());
          if (!ids.ok() || *ids != vectors[i]["ids"].get<std::vector<int32_t>>()) ++failures[t];
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

TEST(GPT2BPETokenizer, Identifiers) {
  auto tok = load_gpt2();
  EXPECT_EQ(tok->unique_identifiers().class_name, "_GPT2BPETokenizer");
  EXPECT_EQ(tok->unique_description(),
            "{\n    \"class\": \"_GPT2BPETokenizer\",\n    \"tokenizer_path\": [\n        \"" +
                kVocab + "\",\n        \"" + kMerges + "\"\n    ]\n}");
}

// Megatron's GPT2Tokenizer.bpe on raw bytes, written out plainly: merge every occurrence of
// the lowest-ranked adjacent pair left to right until none applies. The tokenizer merges
// pieces longer than 64 bytes with a priority queue instead; they must agree.
std::vector<int32_t> reference_bpe(const GPT2BPETokenizer& tok, const std::string& piece) {
  static const auto tables = [&tok] {
    std::map<std::string, int32_t> ids;
    for (int32_t id = 0; id < tok.vocab_size(); ++id) ids[tok.token_bytes(id)] = id;
    const auto vocab = nlohmann::json::parse(read_file(kVocab));
    std::map<std::pair<std::string, std::string>, int> ranks;
    std::istringstream merges(read_file(kMerges));
    std::string line;
    std::getline(merges, line);  // #version
    for (int rank = 0; std::getline(merges, line); ++rank) {
      const size_t space = line.find(' ');
      if (space == std::string::npos) continue;
      const auto bytes = [&](const std::string& symbol) { return tok.token_bytes(vocab[symbol].get<int32_t>()); };
      ranks.emplace(std::make_pair(bytes(line.substr(0, space)), bytes(line.substr(space + 1))), rank);
    }
    return std::make_pair(ids, ranks);
  }();
  std::vector<std::string> word;
  for (char c : piece) word.emplace_back(1, c);
  while (word.size() > 1) {
    int best = INT32_MAX;
    std::pair<std::string, std::string> pair;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = tables.second.find({word[i], word[i + 1]});
      if (it != tables.second.end() && it->second < best) {
        best = it->second;
        pair = it->first;
      }
    }
    if (best == INT32_MAX) break;
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == pair.first && word[i + 1] == pair.second) {
        merged.push_back(pair.first + pair.second);
        i += 2;
      } else {
        merged.push_back(word[i++]);
      }
    }
    word = std::move(merged);
  }
  std::vector<int32_t> out;
  for (const std::string& part : word) out.push_back(tables.first.at(part));
  return out;
}

// A megabyte-long word took hours (quadratic merging); long pieces now merge in O(n log n)
// with the same ids as Megatron's loop.
TEST(GPT2BPETokenizer, LongPiecesMergeLikeMegatronInNLogN) {
  auto tok = load_gpt2();
  std::mt19937 rng(7);
  for (const std::string alphabet : {"ab", "aeinrst", "abcdefghijklmnopqrstuvwxyz", "ABCabc", "0123456789"}) {
    for (size_t length : {65, 66, 100, 257, 1000, 3000}) {
      std::string piece;
      for (size_t i = 0; i < length; ++i) piece.push_back(alphabet[rng() % alphabet.size()]);
      SCOPED_TRACE(piece.substr(0, 40));
      auto ids = tok->tokenize(piece);  // one piece: a run of letters (or digits)
      ASSERT_TRUE(ids.ok());
      EXPECT_EQ(*ids, reference_bpe(*tok, piece));
      EXPECT_EQ(*tok->tokenize(" " + piece), reference_bpe(*tok, " " + piece));
    }
  }
  // Long runs of one letter, of whitespace (at the end) and of punctuation: one piece each.
  for (const std::string& piece : {std::string(500, 'a'), std::string(130, ' '), std::string(99, '!')}) {
    EXPECT_EQ(*tok->tokenize(piece), reference_bpe(*tok, piece));
  }
  std::string huge;
  for (size_t i = 0; i < (2u << 20); ++i) huge.push_back("abcdefghijklmnopqrstuvwxyz"[rng() % 26]);
  const auto start = std::chrono::steady_clock::now();
  auto ids = tok->tokenize(huge);
  ASSERT_TRUE(ids.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "2 MiB word";
  EXPECT_EQ(*tok->detokenize(*ids), huge);
}

// ---- damaged and mismatched files

// A small consistent GPT-2-style vocabulary: the 256 byte symbols (ids 0..255 of GPT-2),
// "he", "ll", "hell", "<|endoftext|>", and merges "h e", "l l", "he ll".
struct TinyFiles {
  ScratchDir dir{"gpt2_tiny"};
  std::string vocab = dir.file("vocab.json");
  std::string merges = dir.file("merges.txt");
  nlohmann::json json;
  TinyFiles() {
    const auto full = nlohmann::json::parse(read_file(kVocab));
    for (auto it = full.begin(); it != full.end(); ++it) {
      if (it.value().get<int>() < 256) json[it.key()] = it.value();
    }
    json["he"] = 256;
    json["ll"] = 257;
    json["hell"] = 258;
    json["<|endoftext|>"] = 259;
    write_file(vocab, json.dump());
    write_file(merges, "#version: 0.2\nh e\nl l\nhe ll\n");
  }
};

Status load_status(const std::string& vocab, const std::string& merges) {
  auto tok = GPT2BPETokenizer::load(vocab, merges);
  return tok.ok() ? ok_status() : tok.status();
}

void expect_error(const Status& status, StatusCode code, std::vector<std::string> fragments) {
  EXPECT_EQ(status.code(), code) << status.to_string();
  for (const auto& fragment : fragments) {
    EXPECT_NE(status.message().find(fragment), std::string::npos)
        << "'" << fragment << "' not in: " << status.message();
  }
}

TEST(GPT2BPETokenizer, TinyVocabularyWorks) {
  TinyFiles files;
  auto tok = GPT2BPETokenizer::load(files.vocab, files.merges);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ((*tok)->vocab_size(), 260);
  EXPECT_EQ((*tok)->eod(), 259);
  EXPECT_EQ(*(*tok)->tokenize("hello"), (std::vector<int32_t>{258, 78}));  // hell + o
}

TEST(GPT2BPETokenizer, MissingFiles) {
  TinyFiles files;
  expect_error(load_status(files.dir.file("nope.json"), files.merges), StatusCode::kNotFound,
               {"vocab file", "nope.json"});
  expect_error(load_status(files.vocab, files.dir.file("nope.txt")), StatusCode::kNotFound,
               {"merges file", "nope.txt"});
}

TEST(GPT2BPETokenizer, VocabFileCorruptions) {
  TinyFiles files;
  const std::string bad = files.dir.file("bad.json");
  // The merges file given as the vocabulary.
  expect_error(load_status(files.merges, files.merges), StatusCode::kInvalidArgument,
               {"vocab file", "merges.txt", "not valid JSON", "is this the merges file?"});
  // Truncated JSON.
  const std::string text = read_file(files.vocab);
  write_file(bad, text.substr(0, text.size() / 2));
  expect_error(load_status(bad, files.merges), StatusCode::kInvalidArgument,
               {"bad.json", "not valid JSON"});
  // The parse error says where, without nlohmann's exception prefix (parsed without exceptions).
  EXPECT_EQ(load_status(bad, files.merges).message().find("[json.exception"), std::string::npos);
  write_file(bad, "");
  expect_error(load_status(bad, files.merges), StatusCode::kInvalidArgument,
               {"not valid JSON", "parse error at line 1, column 1"});
  write_file(bad, "[1, 2, 3]");
  expect_error(load_status(bad, files.merges), StatusCode::kInvalidArgument,
               {"bad.json", "expected a JSON object", "array"});
  auto json = files.json;
  json["he"] = "256";
  write_file(bad, json.dump());
  expect_error(load_status(bad, files.merges), StatusCode::kInvalidArgument,
               {"\"he\"", "maps to string \"256\"", "expected an integer id"});
  // An id above INT64_MAX is named as written, not wrapped to a negative id.
  json = files.json;
  json["he"] = 18446744073709551615ull;
  write_file(bad, json.dump());
  expect_error(load_status(bad, files.merges), StatusCode::kInvalidArgument,
               {"\"he\"", "has id 18446744073709551615, outside 0..259"});
  json = files.json;
  json["he"] = 9999;
  write_file(bad, json.dump());
  expect_error(load_status(bad, files.merges), StatusCode::kInvalidArgument,
               {"\"he\"", "9999", "outside 0..259"});
  json = files.json;
  json["ll"] = 256;
  write_file(bad, json.dump());
  expect_error(load_status(bad, files.merges), StatusCode::kInvalidArgument,
               {"id 256 is used by both"});
  json = files.json;
  json.erase("<|endoftext|>");
  json["<|endoftext|>!"] = 259;
  write_file(bad, json.dump());
  expect_error(load_status(bad, files.merges), StatusCode::kInvalidArgument,
               {"bad.json", "<|endoftext|>"});
  json = files.json;
  json.erase("hell");
  json["he ll"] = 258;  // a raw space is not a byte-level symbol
  write_file(bad, json.dump());
  expect_error(load_status(bad, files.merges), StatusCode::kInvalidArgument,
               {"\"he ll\"", "U+0020", "not a GPT-2 byte-level symbol"});
  json = files.json;
  json.erase("a");
  json["\u0100\u0100"] = 64;
  write_file(bad, json.dump());
  expect_error(load_status(bad, files.merges), StatusCode::kInvalidArgument,
               {"of byte 97 is missing"});
}

// A token id 100000 arrays deep overflowed the stack while the error message printed it
// (corpus/gpt2_tokenizer/crash_deeply_nested_id).
TEST(GPT2BPETokenizer, DeeplyNestedIdIsNamedWithoutOverflow) {
  TinyFiles files;
  const std::string bad = files.dir.file("deep.json");
  write_file(bad, R"({"a": )" + std::string(100000, '[') + std::string(100000, ']') + "}");
  expect_error(load_status(bad, files.merges), StatusCode::kInvalidArgument,
               {"deep.json", "token \"a\" maps to array [[[[[[[[[[[[[[[[[...]]]]", "expected an integer id"});
}

TEST(GPT2BPETokenizer, MergesFileCorruptions) {
  TinyFiles files;
  const std::string bad = files.dir.file("bad.txt");
  // The vocabulary given as the merges file.
  expect_error(load_status(files.vocab, files.vocab), StatusCode::kInvalidArgument,
               {"merges file", "vocab.json"});
  write_file(bad, "#version: 0.2\nh e\nl l x\n");
  expect_error(load_status(files.vocab, bad), StatusCode::kInvalidArgument,
               {"bad.txt", "line 3", "expected two symbols", "3 field(s)"});
  // A merge from another tokenizer (mismatched files).
  write_file(bad, "#version: 0.2\nh e\nhe llo\n");
  expect_error(load_status(files.vocab, bad), StatusCode::kInvalidArgument,
               {"bad.txt", "line 3", "\"llo\"", "not in vocab file", "same tokenizer"});
  write_file(bad, "#version: 0.2\nh e\nhe e\n");
  expect_error(load_status(files.vocab, bad), StatusCode::kInvalidArgument,
               {"line 3", "gives \"hee\"", "not in vocab file"});
  write_file(bad, "");
  expect_error(load_status(files.vocab, bad), StatusCode::kInvalidArgument,
               {"bad.txt", "no merges"});
}

TEST(GPT2BPETokenizer, MergesFileReadLikeMegatron) {
  TinyFiles files;
  const std::string merges = files.dir.file("m.txt");
  // CRLF line ends are fine; without a final newline the last line is dropped, as
  // Megatron's read().split('\n')[1:-1] does ("he ll" is lost: hell -> he + ll).
  write_file(merges, "#version: 0.2\r\nh e\r\nl l\r\nhe ll");
  auto tok = GPT2BPETokenizer::load(files.vocab, merges);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(*(*tok)->tokenize("hell"), (std::vector<int32_t>{256, 257}));
  // Blank lines are ignored; a repeated pair keeps its last rank.
  write_file(merges, "#version: 0.2\nh e\n\nl l\nhe ll\n\n");
  tok = GPT2BPETokenizer::load(files.vocab, merges);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(*(*tok)->tokenize("hell"), (std::vector<int32_t>{258}));
}

}  // namespace
}  // namespace mindspeed
