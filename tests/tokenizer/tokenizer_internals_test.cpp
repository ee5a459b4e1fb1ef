// Tests for the internal helpers of src/tokenizer that the tokenizers share: file_util
// (read_text_file, quote_for_message) and unicode's byte-level tables (GPT-2's bytes_to_unicode())
// and word characters (is_word_char).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/str_cat.h"
#include "tokenizer/file_util.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/test_util.h"
#include "tokenizer/unicode.h"

namespace mindspeed {
namespace {

using testing::ScratchDir;
using testing::write_file;

TEST(TokenizerFileUtil, ReadTextFile) {
  ScratchDir dir("tok_file_util");
  write_file(dir.file("a.txt"), std::string("x\0y\n", 4));
  auto text = read_text_file(dir.file("a.txt"), "vocab file");
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  EXPECT_EQ(*text, std::string("x\0y\n", 4));

  auto missing = read_text_file(dir.file("nope.txt"), "merges file");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            str_cat("merges file '", dir.file("nope.txt"), "': cannot open it (does the file exist?)"));

  auto directory = read_text_file(dir.path(), "");
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(directory.status().message(), str_cat("'", dir.path().string(), "' is a directory, expected a file"));
}

TEST(TokenizerFileUtil, Quoted) {
  EXPECT_EQ(quote_for_message("abc"), "\"abc\"");
  EXPECT_EQ(quote_for_message(""), "\"\"");
  const std::string hundred(100, 'x');
  EXPECT_EQ(quote_for_message(hundred), str_cat("\"", hundred, "\""));
  EXPECT_EQ(quote_for_message(hundred + "y"), str_cat("\"", hundred, "...\""));
  EXPECT_EQ(quote_for_message("abcdef", 3), "\"abc...\"");
  // Never cut inside a UTF-8 sequence: "\u00e9" is two bytes, "\u4e2d" three.
  EXPECT_EQ(quote_for_message("a\u00e9b", 2), "\"a...\"");
  EXPECT_EQ(quote_for_message("\u4e2d\u4e2d", 4), "\"\u4e2d...\"");
  EXPECT_EQ(quote_for_message("\u4e2d\u4e2d", 6), "\"\u4e2d\u4e2d\"");
}

// The PretrainedFromHF loader reads its files with read_text_file: a directory where
// tokenizer.json should be is named as such.
TEST(TokenizerFileUtil, HfTokenizerJsonThatIsADirectory) {
  ScratchDir dir("tok_file_util_hf");
  std::filesystem::create_directories(dir.file("tokenizer.json"));
  auto tok = load_pretrained_from_hf_tokenizer(dir.path().string());
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("tokenizer.json' is a directory, expected a file"), std::string::npos)
      << tok.status().to_string();
}

// GPT-2's bytes_to_unicode() as encoder.py writes it.
std::vector<char32_t> gpt2_bytes_to_unicode() {
  std::vector<int> bs;
  for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
  std::vector<int> cs = bs;
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    if (std::find(bs.begin(), bs.end(), b) == bs.end()) {
      bs.push_back(b);
      cs.push_back(256 + n++);
    }
  }
  std::vector<char32_t> table(256);
  for (size_t i = 0; i < bs.size(); ++i) table[static_cast<size_t>(bs[i])] = static_cast<char32_t>(cs[i]);
  return table;
}

TEST(TokenizerUnicode, ByteLevelTablesAreGpt2BytesToUnicode) {
  const std::vector<char32_t> want = gpt2_bytes_to_unicode();
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(byte_level_symbol(static_cast<uint8_t>(b)), want[static_cast<size_t>(b)]) << b;
    EXPECT_EQ(byte_level_byte(want[static_cast<size_t>(b)]), b) << b;
  }
  EXPECT_EQ(byte_level_symbol(' '), U'\u0120');  // "Ġ"
  EXPECT_EQ(byte_level_symbol(0xAD), U'\u0143');
  int symbols = 0;
  for (char32_t cp = 0; cp < 0x400; ++cp) symbols += byte_level_byte(cp) >= 0;
  EXPECT_EQ(symbols, 256);
  EXPECT_EQ(byte_level_byte(0x20), -1);
  EXPECT_EQ(byte_level_byte(0x144), -1);
  EXPECT_EQ(byte_level_byte(0x10FFFF), -1);
}

// is_word_char is the Rust regex crate's \w: Alphabetic + Mark + Nd + Pc + Join_Control.
TEST(TokenizerUnicode, WordCharacters) {
  for (char32_t cp : {U'a', U'Z', U'0', U'9', U'_', U'\u00e9', U'\u4e2d', U'\u0661' /* Nd */,
                      U'\u093f' /* Mc */, U'\u0300' /* Mn */, U'\u20dd' /* Me */, U'\u203f' /* Pc */,
                      U'\u2040' /* Pc */, U'\ufe4f' /* Pc */, U'\u200c', U'\u200d' /* Join_Control */,
                      U'\u2160' /* Nl */, U'\u24b6' /* So, Other_Alphabetic */, U'\u0345' /* Mn */,
                      U'\U0001d7ce' /* Nd */, U'\U000e0100' /* Mn */}) {
    EXPECT_TRUE(is_word_char(cp)) << std::hex << static_cast<uint32_t>(cp);
  }
  for (char32_t cp : {U' ', U'-', U'.', U'$', U'\u00b2' /* No */, U'\u00bd' /* No */, U'\u2070' /* No */,
                      U'\u00a0', U'\u2014' /* Pd */, U'\u200b' /* Cf */, U'\u200e' /* Cf */, U'\u00b7' /* Po */,
                      U'\U0001f600' /* So */, U'\U0010ffff'}) {
    EXPECT_FALSE(is_word_char(cp)) << std::hex << static_cast<uint32_t>(cp);
  }
  int ascii = 0;
  for (char32_t cp = 0; cp < 128; ++cp) ascii += is_word_char(cp);
  EXPECT_EQ(ascii, 63);
}

}  // namespace
}  // namespace mindspeed
